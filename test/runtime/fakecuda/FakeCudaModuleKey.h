//===- FakeCudaModuleKey.h - Which module a fake CUDA kernel belongs to ---===//
//
// The fake CUDA driver looks a module's kernel up as tcc_emu_m<key>_<name> (else
// tcc_emu_<name>) in $TCC_FAKE_CUDA_KERNELS, <key> being this hash of the module's image (the
// cubin's bytes, or the PTX text without its NUL): tcc-cuda-emulate names the kernels of a
// training artifact's entries that way, since two entries' programs may each have a kernel of
// one name (k0_cast, ...) with different bodies.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

/// FNV-1a (64-bit) of `size` bytes, as 16 lowercase hex digits.
inline std::string fakeCudaModuleKey(const void *data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= static_cast<const unsigned char *>(data)[i];
    h *= 0x100000001b3ull;
  }
  static const char digits[] = "0123456789abcdef";
  std::string key(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4)
    key[size_t(i)] = digits[h & 15];
  return key;
}
