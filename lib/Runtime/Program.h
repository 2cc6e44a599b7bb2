//===- Program.h - A loaded, verified artifact and its CPU executor -------===//
//
// Program::load copies an artifact into 64-byte aligned memory, verifies it (FlatBuffers
// structure, then everything the executor relies on: indices, extents, operand shapes, kernels)
// and decodes it into the plain structures below; nothing reads the FlatBuffer after loading
// except constants, which point into the copy. Program::run executes the launch list.
// Every failure throws tcc::rt::Error with a message naming what is wrong.
#pragma once

#include "CpuLibrary.h"
#include "CpuModule.h"
#include "tcc/Runtime/tccrt.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace tcc::rt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TensorDesc {
  std::string name;
  tccrt_dtype dtype = TCCRT_F32;
  std::vector<int64_t> shape;
  size_t bytes = 0;
  /// Inputs the compiler specialised on: the only value the program accepts (`bytes` bytes).
  std::vector<uint8_t> specializedValue;
};

enum class BufferKind : uint8_t { Input, Output, Constant, Arena };

struct BufferDesc {
  BufferKind kind = BufferKind::Arena;
  uint32_t index = 0;
  uint64_t offset = 0;
  tccrt_dtype dtype = TCCRT_F32;
  std::vector<int64_t> shape;
  size_t bytes = 0;
};

struct KernelStep {
  uint32_t kernel;
  std::vector<uint32_t> args;
};
struct GemmStep {
  uint32_t a, b, c;
  GemmGeometry geometry;
};
struct ConvStep {
  uint32_t input, weight, output;
  ConvGeometry geometry;
  mutable ConvWeightCache weightCache; // transformed (Winograd) weights, reused across runs
};
struct TopKStep {
  uint32_t input, values, indices;
  TopKGeometry geometry;
};
struct CopyStep {
  uint32_t source, target;
};
using Step = std::variant<KernelStep, GemmStep, ConvStep, TopKStep, CopyStep>;

/// An aligned, owned byte array (the artifact copy).
struct AlignedBytes {
  uint8_t *data = nullptr;
  size_t size = 0;
  AlignedBytes() = default;
  void allocate(size_t n); // once
  AlignedBytes(const AlignedBytes &) = delete;
  AlignedBytes &operator=(const AlignedBytes &) = delete;
  ~AlignedBytes();
};

class Program {
public:
  /// Copies, verifies and decodes an artifact; loads its CPU module. numThreads: 0 = all cores.
  static std::unique_ptr<Program> load(const void *data, size_t size, int numThreads);
  ~Program();
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;

  tccrt_device device() const { return TCCRT_DEVICE_CPU; }
  const std::vector<TensorDesc> &inputs() const { return inputs_; }
  const std::vector<TensorDesc> &outputs() const { return outputs_; }
  const std::vector<BufferDesc> &buffers() const { return buffers_; }
  const std::vector<Step> &steps() const { return steps_; }
  const std::string &producer() const { return producer_; }
  uint64_t arenaBytes() const { return arenaBytes_; }

  void setNumThreads(int numThreads); // 0 = all cores
  int numThreads() const { return numThreads_; }

  /// Runs the launch list on caller tensors (contiguous, sizes of inputs()/outputs()).
  void run(const void *const *inputs, void *const *outputs);

private:
  Program() = default;
  void *bufferAddress(const BufferDesc &b, const void *const *inputs, void *const *outputs) const;

  AlignedBytes file_;
  std::string producer_;
  std::vector<TensorDesc> inputs_, outputs_;
  std::vector<BufferDesc> buffers_;
  std::vector<const uint8_t *> constants_; // into file_
  std::vector<uint64_t> constantSizes_;
  uint64_t arenaBytes_ = 0;
  std::vector<Step> steps_;
  std::vector<CpuKernelFn> kernels_;
  std::unique_ptr<CpuModule> module_;
  size_t workspaceBytes_ = 0; // the largest conv's im2col workspace per thread
  void *arena_ = nullptr;     // hostAllocate'd once, reused across runs
  void *workspace_ = nullptr; // conv im2col workspaces (one per thread), reused across runs
  size_t workspaceCapacity_ = 0;
  void reserveWorkspace(); // for numThreads_
  int numThreads_ = 1;
  std::vector<void *> addresses_; // per run: every buffer's address
  std::vector<void *> args_;      // per launch: kernel arguments
};

/// Threads for a requested count: 0 = all cores; negative is an error.
int resolveNumThreads(int requested);

} // namespace tcc::rt
