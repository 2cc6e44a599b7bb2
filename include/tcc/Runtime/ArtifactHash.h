//===- ArtifactHash.h - The checksum of an artifact's CPU shared object ---===//
//
// The artifact writer stores artifactHash(shared_object bytes) in CpuModule.shared_object_hash;
// the runtime recomputes it before handing the bytes to the dynamic loader, so a damaged file
// never reaches dlopen. 64-bit FNV-1a over 8-byte little-endian words (then the tail bytes):
// not cryptographic, only a guard against corruption. Header-only, no dependencies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tcc::rt {

inline uint64_t artifactHash(const uint8_t *data, size_t size) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)size;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, data + i, 8); // little-endian hosts only (x86-64, aarch64)
    h = (h ^ w) * kPrime;
    h ^= h >> 29;
  }
  for (; i < size; ++i)
    h = (h ^ data[i]) * kPrime;
  // A final avalanche so that the stored value is never 0 ("not recorded") in practice.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h == 0 ? 1 : h;
}

/// Whether `stored` is artifactHash(data, size): the runtime's check before dlopen. Kept out of
/// line and, in clang builds, out of SanitizerCoverage: libFuzzer's comparison tracing would
/// otherwise hand the computed hash to the mutator, which then writes it into the artifact and
/// reaches the dynamic loader with arbitrary ELF bytes (code, which no check can make safe).
/// Random damage cannot forge the checksum; neither should the fuzzer.
#if defined(__clang__)
__attribute__((noinline, no_sanitize("coverage")))
#else
__attribute__((noinline))
#endif
inline bool artifactHashMatches(const uint8_t *data, size_t size, uint64_t stored) {
  return artifactHash(data, size) == stored;
}

} // namespace tcc::rt
