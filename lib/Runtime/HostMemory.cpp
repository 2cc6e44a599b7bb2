//===- HostMemory.cpp - Host memory through the runtime's caching allocator -===//
//
// One process-wide CachingAllocator (policy in CachingAllocator.h) over a raw allocator that
// takes 64-byte aligned memory from std::aligned_alloc and gives it back with std::free. Host
// memory has no streams: everything is allocated on stream 0 and no EventHooks are installed.
// The allocator and its raw allocator are created on first use and deliberately never
// destroyed, so that memory freed by other static destructors at exit still finds them.
//===----------------------------------------------------------------------===//

#include "HostMemory.h"

#include "CachingAllocator.h"

#include <cstdlib>

namespace tcc::rt {
namespace {

constexpr size_t kHostAlignment = 64;

class AlignedRawAllocator final : public RawAllocator {
public:
  void *allocate(size_t bytes) override {
    // aligned_alloc wants a multiple of the alignment; segments always are, but be safe.
    size_t size = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    if (size < bytes)
      return nullptr;
    return std::aligned_alloc(kHostAlignment, size == 0 ? kHostAlignment : size);
  }
  void deallocate(void *ptr, size_t) override { std::free(ptr); }
};

CachingAllocator &hostAllocator() {
  static CachingAllocator *allocator = [] {
    CachingAllocator::Options options;
    options.alignment = kHostAlignment;
    options.name = "tccrt host allocator";
    return new CachingAllocator(*new AlignedRawAllocator, options);
  }();
  return *allocator;
}

} // namespace

void *hostAllocate(size_t bytes) { return hostAllocator().allocate(bytes, 0); }

void hostFree(void *ptr) {
  if (ptr)
    hostAllocator().deallocate(ptr);
}

tccrt_allocator_stats hostAllocatorStats() { return toAllocatorStats(hostAllocator().stats()); }

tccrt_allocator_stats toAllocatorStats(const CachingAllocatorStats &s) {
  tccrt_allocator_stats out{};
  out.allocated_bytes = s.allocatedBytes;
  out.reserved_bytes = s.reservedBytes;
  out.peak_allocated_bytes = s.peakAllocatedBytes;
  out.num_allocs = s.numAllocs;
  out.num_cache_hits = s.numCacheHits;
  out.num_system_allocs = s.numRawAllocs;
  out.num_system_frees = s.numRawFrees;
  return out;
}

void hostEmptyCache() { hostAllocator().emptyCache(); }

} // namespace tcc::rt
