//===- HostMemory.h - Host memory through the runtime's caching allocator -===//
//
// All host memory the runtime uses for tensors (arenas, workspaces, tensors handed to callers)
// goes through one process-wide caching allocator (CachingAllocator.h) backed by aligned
// malloc. Thread-safe.
#pragma once

#include "tcc/Runtime/tccrt.h"

#include <cstddef>

namespace tcc::rt {

void *hostAllocate(size_t bytes); // 64-byte aligned; never returns null (throws std::bad_alloc)
void hostFree(void *ptr);         // null is fine
tccrt_allocator_stats hostAllocatorStats();
void hostEmptyCache();

struct CachingAllocatorStats;
/// A caching allocator's statistics (the host's, or a device's) as the C API reports them.
tccrt_allocator_stats toAllocatorStats(const CachingAllocatorStats &s);

} // namespace tcc::rt
