//===- CpuModule.h - An artifact's CPU shared object, loaded from memory ---===//
//
// The bytes are written to an anonymous memory file (memfd_create) and opened with dlopen
// through /proc/self/fd/N; where that is unavailable, through a temporary file that is unlinked
// right after dlopen. The object stays loaded while the CpuModule lives.
#pragma once

#include "tcc/Runtime/KernelAbi.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace tcc::rt {

class CpuModule {
public:
  /// Loads the object; throws tcc::rt::Error with the loader's message on failure.
  CpuModule(const uint8_t *data, size_t size);
  ~CpuModule();
  CpuModule(const CpuModule &) = delete;
  CpuModule &operator=(const CpuModule &) = delete;

  /// The exported kernel `name`, or null.
  CpuKernelFn lookup(const std::string &name) const;

private:
  void *handle_ = nullptr;
  int fd_ = -1; // the memfd, kept open while loaded so that no other module reuses its path
};

} // namespace tcc::rt
