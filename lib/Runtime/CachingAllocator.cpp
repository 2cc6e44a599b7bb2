//===- CachingAllocator.cpp - Device-independent caching allocator -------===//
//
// Implementation of the policy described in CachingAllocator.h: best-fit reuse from
// size-ordered, per-stream free sets in a small and a large pool, splitting with PyTorch's
// remainder thresholds, coalescing on free, event-deferred frees for blocks used by other
// streams, and release-and-retry when the raw allocator runs out. Blocks are a doubly linked list
// per segment; a segment's first block object lives as long as the segment (merges always keep
// the lower block), which makes the segment walk in snapshot() trivial.
//===----------------------------------------------------------------------===//

#include "CachingAllocator.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace tcc::rt {

namespace {

// Requests above this are refused outright, so that rounding can never overflow.
constexpr size_t kMaxRequest = std::numeric_limits<size_t>::max() / 2;

size_t roundUp(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

std::string formatBytes(uint64_t bytes) {
  char buffer[64];
  if (bytes < 1024)
    std::snprintf(buffer, sizeof buffer, "%" PRIu64 " bytes", bytes);
  else if (bytes < (uint64_t(1) << 20))
    std::snprintf(buffer, sizeof buffer, "%" PRIu64 " bytes (%.2f KiB)", bytes, bytes / 1024.0);
  else if (bytes < (uint64_t(1) << 30))
    std::snprintf(buffer, sizeof buffer, "%" PRIu64 " bytes (%.2f MiB)", bytes,
                  bytes / (1024.0 * 1024.0));
  else
    std::snprintf(buffer, sizeof buffer, "%" PRIu64 " bytes (%.2f GiB)", bytes,
                  bytes / (1024.0 * 1024.0 * 1024.0));
  return buffer;
}

void updatePeak(uint64_t current, uint64_t &peak) { peak = std::max(peak, current); }

void appendJsonString(std::ostringstream &os, const std::string &text) {
  os << '"';
  for (char c : text) {
    switch (c) {
    case '"': os << "\\\""; break;
    case '\\': os << "\\\\"; break;
    case '\n': os << "\\n"; break;
    case '\t': os << "\\t"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char esc[8];
        std::snprintf(esc, sizeof esc, "\\u%04x", c);
        os << esc;
      } else {
        os << c;
      }
    }
  }
  os << '"';
}

const char *stateName(BlockSnapshot::State state) {
  switch (state) {
  case BlockSnapshot::State::Allocated: return "allocated";
  case BlockSnapshot::State::Free: return "free";
  case BlockSnapshot::State::PendingFree: return "pending_free";
  }
  return "?";
}

} // namespace

CachingAllocator::CachingAllocator(RawAllocator &raw, Options options)
    : raw(raw), options(std::move(options)) {
  size_t alignment = this->options.alignment;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMinBlockSize)
    throw std::invalid_argument("caching allocator: alignment must be a power of two <= 512");
}

CachingAllocator::~CachingAllocator() {
  if (options.events)
    for (PendingFree &entry : pending)
      for (EventHooks::Event event : entry.events)
        options.events->releaseEvent(event);
  for (auto &[base, segment] : segments) {
    for (Block *block = segment.head; block;) {
      Block *next = block->next;
      delete block;
      block = next;
    }
    raw.deallocate(reinterpret_cast<void *>(segment.base), segment.size);
  }
}

size_t CachingAllocator::roundSize(size_t bytes) {
  if (bytes < kMinBlockSize)
    return kMinBlockSize;
  return roundUp(bytes, kMinBlockSize);
}

size_t CachingAllocator::segmentSize(size_t rounded) const {
  if (rounded <= kSmallSize)
    return kSmallBuffer;
  size_t own = roundUp(rounded, kRoundLarge);
  if (options.mediumSegmentBytes != 0 && rounded < kMinLargeAlloc)
    return std::max(own, roundUp(options.mediumSegmentBytes, kRoundLarge));
  return own;
}

void CachingAllocator::bumpAllocated(int64_t bytes, int64_t requested) {
  st.allocatedBytes += bytes;
  st.requestedBytes += requested;
  updatePeak(st.allocatedBytes, st.peakAllocatedBytes);
  updatePeak(st.requestedBytes, st.peakRequestedBytes);
}

void CachingAllocator::bumpReserved(int64_t bytes) {
  st.reservedBytes += bytes;
  updatePeak(st.reservedBytes, st.peakReservedBytes);
}

CachingAllocator::Block *CachingAllocator::findFreeBlock(FreeSet &pool, Stream stream,
                                                         size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  key.addr = 0;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream)
    return nullptr;
  Block *block = *it;
  pool.erase(it);
  return block;
}

CachingAllocator::Block *CachingAllocator::createSegment(size_t rounded, size_t requested,
                                                         Stream stream, bool small) {
  size_t bytes = segmentSize(rounded);
  void *ptr = raw.allocate(bytes);
  if (!ptr) {
    // Release and retry: first let pending frees land (one of them may fit), then give every
    // entirely free segment back and ask again.
    ++st.numOomRetries;
    synchronizeAndFreeEventsLocked();
    if (Block *block = findFreeBlock(poolOf(small), stream, rounded)) {
      ++st.numCacheHits;
      return block;
    }
    releaseCachedSegmentsLocked();
    ptr = raw.allocate(bytes);
    if (!ptr) {
      ++st.numOoms;
      throw OutOfMemory(describeOomLocked(requested, rounded, bytes, stream), requested);
    }
  }
  uintptr_t base = reinterpret_cast<uintptr_t>(ptr);
  if (base % options.alignment != 0) {
    raw.deallocate(ptr, bytes);
    throw std::logic_error(options.name + ": raw allocator returned a pointer that is not " +
                           std::to_string(options.alignment) + "-byte aligned");
  }
  Segment &segment = segments[base];
  segment.base = base;
  segment.size = bytes;
  segment.stream = stream;
  segment.small = small;
  Block *block = new Block;
  block->addr = base;
  block->size = bytes;
  block->stream = stream;
  block->segment = &segment;
  segment.head = block;
  ++st.numRawAllocs;
  ++st.segments;
  bumpReserved(int64_t(bytes));
  return block;
}

CachingAllocator::Block *CachingAllocator::splitIfWorthIt(Block *block, size_t size, bool small) {
  size_t remaining = block->size - size;
  bool worthIt = small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (!worthIt)
    return block;
  Block *rest = new Block;
  rest->addr = block->addr + size;
  rest->size = remaining;
  rest->stream = block->stream;
  rest->segment = block->segment;
  rest->prev = block;
  rest->next = block->next;
  if (rest->next)
    rest->next->prev = rest;
  block->next = rest;
  block->size = size;
  poolOf(small).insert(rest);
  ++st.numSplits;
  return block;
}

void CachingAllocator::freeBlock(Block *block) {
  FreeSet &pool = poolOf(block->segment->small);
  block->state = State::Free;
  block->requested = 0;
  block->streamUses.clear();
  if (Block *next = block->next; next && next->state == State::Free) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (block->next)
      block->next->prev = block;
    delete next;
    ++st.numCoalesces;
  }
  if (Block *prev = block->prev; prev && prev->state == State::Free) {
    pool.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (prev->next)
      prev->next->prev = prev;
    delete block;
    block = prev;
    ++st.numCoalesces;
  }
  pool.insert(block);
}

void *CachingAllocator::allocate(size_t bytes, Stream stream) {
  std::lock_guard<std::mutex> lock(mutex);
  processEventsLocked();
  if (bytes > kMaxRequest) {
    ++st.numOoms;
    throw OutOfMemory(describeOomLocked(bytes, bytes, bytes, stream), bytes);
  }
  size_t rounded = roundSize(bytes);
  bool small = rounded <= kSmallSize;
  Block *block = findFreeBlock(poolOf(small), stream, rounded);
  if (block)
    ++st.numCacheHits;
  else
    block = createSegment(rounded, bytes, stream, small);
  block = splitIfWorthIt(block, rounded, small);
  block->state = State::Allocated;
  block->requested = bytes;
  active.emplace(block->addr, block);
  ++st.numAllocs;
  ++st.activeBlocks;
  bumpAllocated(int64_t(block->size), int64_t(bytes));
  return reinterpret_cast<void *>(block->addr);
}

void CachingAllocator::deallocate(void *ptr) {
  if (!ptr)
    return;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = active.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == active.end())
    throw std::invalid_argument(options.name + ": free of a pointer it did not allocate or "
                                               "already freed");
  Block *block = it->second;
  std::vector<EventHooks::Event> events;
  if (options.events) {
    try {
      for (Stream use : block->streamUses)
        events.push_back(options.events->recordEvent(use));
    } catch (...) {
      for (EventHooks::Event event : events)
        options.events->releaseEvent(event);
      throw;
    }
  }
  active.erase(it);
  ++st.numFrees;
  --st.activeBlocks;
  bumpAllocated(-int64_t(block->size), -int64_t(block->requested));
  if (!events.empty()) {
    block->state = State::PendingFree;
    block->requested = 0;
    pending.push_back(PendingFree{block, std::move(events)});
    st.pendingFreeBytes += block->size;
    ++st.pendingFreeBlocks;
    ++st.numDeferredFrees;
  } else {
    freeBlock(block);
  }
}

void CachingAllocator::recordStream(void *ptr, Stream stream) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = active.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == active.end())
    throw std::invalid_argument(options.name + ": recordStream on a pointer that is not live");
  Block *block = it->second;
  if (stream == block->stream)
    return;
  if (std::find(block->streamUses.begin(), block->streamUses.end(), stream) ==
      block->streamUses.end())
    block->streamUses.push_back(stream);
}

void CachingAllocator::processEventsLocked() {
  if (pending.empty())
    return;
  for (auto it = pending.begin(); it != pending.end();) {
    auto &events = it->events;
    events.erase(std::remove_if(events.begin(), events.end(),
                                [&](EventHooks::Event event) {
                                  if (!options.events->queryEvent(event))
                                    return false;
                                  options.events->releaseEvent(event);
                                  return true;
                                }),
                 events.end());
    if (!events.empty()) {
      ++it;
      continue;
    }
    Block *block = it->block;
    st.pendingFreeBytes -= block->size;
    --st.pendingFreeBlocks;
    it = pending.erase(it);
    freeBlock(block);
  }
}

void CachingAllocator::synchronizeAndFreeEventsLocked() {
  while (!pending.empty()) {
    PendingFree entry = std::move(pending.front());
    pending.pop_front();
    for (EventHooks::Event event : entry.events) {
      options.events->synchronizeEvent(event);
      options.events->releaseEvent(event);
    }
    st.pendingFreeBytes -= entry.block->size;
    --st.pendingFreeBlocks;
    freeBlock(entry.block);
  }
}

void CachingAllocator::releaseSegmentLocked(Segment *segment) {
  uintptr_t base = segment->base;
  size_t size = segment->size;
  delete segment->head;
  segments.erase(base);
  raw.deallocate(reinterpret_cast<void *>(base), size);
  ++st.numRawFrees;
  --st.segments;
  bumpReserved(-int64_t(size));
}

void CachingAllocator::releaseCachedSegmentsLocked() {
  for (FreeSet *pool : {&smallPool, &largePool}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block *block = *it;
      if (block->prev || block->next) {
        ++it;
        continue;
      }
      it = pool->erase(it);
      releaseSegmentLocked(block->segment);
    }
  }
}

void CachingAllocator::processEvents() {
  std::lock_guard<std::mutex> lock(mutex);
  processEventsLocked();
}

void CachingAllocator::emptyCache() {
  std::lock_guard<std::mutex> lock(mutex);
  synchronizeAndFreeEventsLocked();
  releaseCachedSegmentsLocked();
}

std::string CachingAllocator::describeOomLocked(size_t requested, size_t rounded, size_t segBytes,
                                                Stream stream) const {
  CachingAllocatorStats s = statsLocked();
  std::ostringstream os;
  os << options.name << ": out of memory: tried to allocate " << formatBytes(requested);
  if (requested <= kMaxRequest)
    os << " (rounded to " << formatBytes(rounded) << ", new segment of " << formatBytes(segBytes)
       << ")";
  os << " on stream " << stream << "; currently allocated " << formatBytes(s.allocatedBytes)
     << ", reserved " << formatBytes(s.reservedBytes) << ", cached " << formatBytes(s.cachedBytes)
     << " (after releasing the cache), pending free " << formatBytes(s.pendingFreeBytes);
  return os.str();
}

CachingAllocatorStats CachingAllocator::statsLocked() const {
  CachingAllocatorStats s = st;
  s.cachedBytes = s.reservedBytes - s.allocatedBytes - s.pendingFreeBytes;
  return s;
}

CachingAllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex);
  return statsLocked();
}

void CachingAllocator::resetPeakStats() {
  std::lock_guard<std::mutex> lock(mutex);
  st.peakAllocatedBytes = st.allocatedBytes;
  st.peakRequestedBytes = st.requestedBytes;
  st.peakReservedBytes = st.reservedBytes;
}

size_t CachingAllocator::blockSize(void *ptr) const {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = active.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == active.end())
    throw std::invalid_argument(options.name + ": blockSize of a pointer that is not live");
  return it->second->size;
}

std::vector<SegmentSnapshot> CachingAllocator::snapshotLocked() const {
  std::vector<SegmentSnapshot> result;
  result.reserve(segments.size());
  for (const auto &[base, segment] : segments) {
    SegmentSnapshot seg;
    seg.address = segment.base;
    seg.size = segment.size;
    seg.stream = segment.stream;
    seg.smallPool = segment.small;
    for (const Block *block = segment.head; block; block = block->next) {
      BlockSnapshot b;
      b.offset = block->addr - segment.base;
      b.size = block->size;
      b.requested = block->requested;
      b.stream = block->stream;
      switch (block->state) {
      case State::Allocated:
        b.state = BlockSnapshot::State::Allocated;
        seg.allocatedBytes += block->size;
        break;
      case State::Free: b.state = BlockSnapshot::State::Free; break;
      case State::PendingFree: b.state = BlockSnapshot::State::PendingFree; break;
      }
      seg.blocks.push_back(b);
    }
    result.push_back(std::move(seg));
  }
  return result;
}

std::vector<SegmentSnapshot> CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex);
  return snapshotLocked();
}

std::string CachingAllocator::snapshotJson() const {
  std::vector<SegmentSnapshot> segs;
  CachingAllocatorStats s;
  {
    std::lock_guard<std::mutex> lock(mutex);
    segs = snapshotLocked();
    s = statsLocked();
  }
  std::ostringstream os;
  os << "{\n  \"name\": ";
  appendJsonString(os, options.name);
  os << ",\n  \"stats\": {";
  std::pair<const char *, uint64_t> fields[] = {
      {"allocated_bytes", s.allocatedBytes},
      {"peak_allocated_bytes", s.peakAllocatedBytes},
      {"requested_bytes", s.requestedBytes},
      {"peak_requested_bytes", s.peakRequestedBytes},
      {"reserved_bytes", s.reservedBytes},
      {"peak_reserved_bytes", s.peakReservedBytes},
      {"cached_bytes", s.cachedBytes},
      {"pending_free_bytes", s.pendingFreeBytes},
      {"active_blocks", s.activeBlocks},
      {"pending_free_blocks", s.pendingFreeBlocks},
      {"segments", s.segments},
      {"num_allocs", s.numAllocs},
      {"num_frees", s.numFrees},
      {"num_cache_hits", s.numCacheHits},
      {"num_raw_allocs", s.numRawAllocs},
      {"num_raw_frees", s.numRawFrees},
      {"num_splits", s.numSplits},
      {"num_coalesces", s.numCoalesces},
      {"num_oom_retries", s.numOomRetries},
      {"num_ooms", s.numOoms},
      {"num_deferred_frees", s.numDeferredFrees},
  };
  bool first = true;
  for (auto &[key, value] : fields) {
    os << (first ? "\n    \"" : ",\n    \"") << key << "\": " << value;
    first = false;
  }
  os << "\n  },\n  \"segments\": [";
  for (size_t i = 0; i < segs.size(); ++i) {
    const SegmentSnapshot &seg = segs[i];
    char address[32];
    std::snprintf(address, sizeof address, "0x%" PRIxPTR, seg.address);
    os << (i ? ",\n" : "\n") << "    {\"address\": \"" << address << "\", \"size\": " << seg.size
       << ", \"stream\": " << seg.stream << ", \"pool\": \"" << (seg.smallPool ? "small" : "large")
       << "\", \"allocated_bytes\": " << seg.allocatedBytes << ", \"blocks\": [";
    for (size_t j = 0; j < seg.blocks.size(); ++j) {
      const BlockSnapshot &b = seg.blocks[j];
      os << (j ? ",\n" : "\n") << "      {\"offset\": " << b.offset << ", \"size\": " << b.size
         << ", \"requested\": " << b.requested << ", \"state\": \"" << stateName(b.state)
         << "\", \"stream\": " << b.stream << "}";
    }
    os << "\n    ]}";
  }
  os << (segs.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return os.str();
}

} // namespace tcc::rt
