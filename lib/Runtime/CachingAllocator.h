//===- CachingAllocator.h - Device-independent caching allocator ---------===//
//
// A caching allocator modelled on PyTorch's CUDA caching allocator, written against an injected
// RawAllocator (aligned malloc for host memory now, cuMemAlloc for device memory later) so that
// the whole algorithm is unit-tested on the CPU.
//
// Policy (all sizes in bytes; the constants below are PyTorch's):
//  * Rounding: every request is rounded up to a multiple of kMinBlockSize (512); a request of
//    0 bytes gets a 512-byte block. Every block therefore starts at a multiple of 512 from its
//    segment base, and segments must come back from the raw allocator aligned to
//    Options::alignment (64 by default, at most 512), which every block inherits.
//  * Pools: rounded requests <= kSmallSize (1 MiB) are served from the small pool, whose segments
//    are kSmallBuffer (2 MiB) each. Larger requests are served from the large pool: a new large
//    segment is the request rounded up to a multiple of kRoundLarge (2 MiB); if
//    Options::mediumSegmentBytes is non-zero (PyTorch's CUDA value is 20 MiB), requests below
//    kMinLargeAlloc (10 MiB) instead get a segment of that size so several of them share it.
//    A block never moves between pools.
//  * Reuse: each pool keeps its free blocks in a set ordered by (stream, size, address); a request
//    takes the smallest free block of the same stream that is large enough (best fit, lowest
//    address among equals). Only when none fits does it ask the raw allocator for a segment.
//  * Splitting: a block larger than the request is split when the remainder is worth keeping:
//    in the small pool when the remainder is >= 512, in the large pool when it is > 1 MiB
//    (otherwise the caller gets the whole block and the slack is counted as allocated). The
//    remainder stays in the same pool with the same stream.
//  * Coalescing: a freed block merges with its free neighbours in the same segment (the lower
//    block absorbs the higher one), so a segment never holds two adjacent free blocks.
//  * Streams: every allocation carries a stream id (0 = the default stream); every block of a
//    segment keeps the stream the segment was created for, and a free block is reused only for
//    that stream. recordStream(ptr, s) notes that stream s also uses the block. When such a
//    block is freed, an event is recorded on every such stream through Options::events
//    (EventHooks) and the block waits, neither allocated nor reusable, until all of them have
//    completed; allocate(), processEvents(), emptyCache() and the out-of-memory path check for
//    completion. Without EventHooks the allocator treats all work as synchronous and frees at
//    once.
//  * Out of memory: when the raw allocator returns null, the allocator waits for all pending
//    events (EventHooks::synchronizeEvent), returns every cached segment that is entirely free
//    (any stream, both pools) to the raw allocator and retries once. If that fails too it
//    throws OutOfMemory, whose message gives the requested, allocated, reserved and cached bytes.
//  * emptyCache() does the same release without an allocation. The destructor returns every
//    segment, in use or not, to the raw allocator.
//  * Thread safety: one mutex guards all state; raw allocator and event hook calls are made while
//    holding it (they must not call back into the allocator).
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace tcc::rt {

using Stream = uintptr_t; // 0 = default stream

// Where segments come from. allocate returns nullptr when out of memory (it may also throw,
// which the caching allocator propagates unchanged); the pointer must be aligned to the caching
// allocator's Options::alignment. deallocate gets the size that was allocated.
// (Destructors are inline, so that every user gets the vtable and typeinfo: libtccrt's version
// script exports tcc::rt functions but not the typeinfo of its interfaces.)
class RawAllocator {
public:
  virtual ~RawAllocator() = default;
  virtual void *allocate(size_t bytes) = 0;
  virtual void deallocate(void *ptr, size_t bytes) = 0;
};

// Stream/event operations for deferred frees (CUDA events for device memory; a fake in tests).
class EventHooks {
public:
  using Event = uintptr_t;
  virtual ~EventHooks() = default;
  // An event that completes once all work enqueued on `stream` so far has finished.
  virtual Event recordEvent(Stream stream) = 0;
  // Non-blocking: has the event completed?
  virtual bool queryEvent(Event event) = 0;
  // Blocks until the event has completed.
  virtual void synchronizeEvent(Event event) = 0;
  // The allocator is done with the event.
  virtual void releaseEvent(Event event) = 0;
};

// Thrown when the raw allocator cannot provide a segment even after the cache was released.
// Derives from std::bad_alloc so that callers expecting bad_alloc catch it.
class OutOfMemory : public std::bad_alloc {
public:
  OutOfMemory(std::string message, size_t requestedBytes)
      : message(std::move(message)), requestedBytes(requestedBytes) {}
  const char *what() const noexcept override { return message.c_str(); }
  size_t requested() const { return requestedBytes; }

private:
  std::string message;
  size_t requestedBytes;
};

struct CachingAllocatorStats {
  // Current and peak bytes. allocated = blocks held by callers (block sizes, after rounding and
  // unsplit slack); requested = the sizes callers asked for; reserved = segments held from the
  // raw allocator; cached = reserved - allocated - pendingFree (reusable now).
  uint64_t allocatedBytes = 0, peakAllocatedBytes = 0;
  uint64_t requestedBytes = 0, peakRequestedBytes = 0;
  uint64_t reservedBytes = 0, peakReservedBytes = 0;
  uint64_t cachedBytes = 0;
  uint64_t pendingFreeBytes = 0; // freed by callers, waiting for events of other streams
  // Current counts.
  uint64_t activeBlocks = 0;      // allocated blocks
  uint64_t pendingFreeBlocks = 0; // freed, waiting for events
  uint64_t segments = 0;
  // Cumulative counts.
  uint64_t numAllocs = 0;      // successful allocate() calls
  uint64_t numFrees = 0;       // deallocate() calls of live pointers
  uint64_t numCacheHits = 0;   // allocations served from a cached block
  uint64_t numRawAllocs = 0;   // successful raw allocations (segments created)
  uint64_t numRawFrees = 0;    // segments returned to the raw allocator
  uint64_t numSplits = 0;      // blocks split
  uint64_t numCoalesces = 0;   // merges of two adjacent free blocks
  uint64_t numOomRetries = 0;  // raw failures followed by release-and-retry
  uint64_t numOoms = 0;        // OutOfMemory thrown
  uint64_t numDeferredFrees = 0; // frees deferred by recordStream
};

struct BlockSnapshot {
  enum class State { Allocated, Free, PendingFree };
  size_t offset = 0; // from the segment base
  size_t size = 0;
  size_t requested = 0; // bytes asked for (allocated blocks only)
  State state = State::Free;
  Stream stream = 0;
};

struct SegmentSnapshot {
  uintptr_t address = 0;
  size_t size = 0;
  size_t allocatedBytes = 0;
  Stream stream = 0;
  bool smallPool = false;
  std::vector<BlockSnapshot> blocks; // by offset, covering the segment exactly
};

class CachingAllocator {
public:
  static constexpr size_t kMinBlockSize = 512;
  static constexpr size_t kSmallSize = size_t(1) << 20;
  static constexpr size_t kSmallBuffer = size_t(2) << 20;
  static constexpr size_t kMinLargeAlloc = size_t(10) << 20;
  static constexpr size_t kRoundLarge = size_t(2) << 20;

  struct Options {
    size_t alignment = 64;          // required of raw segments; power of two, <= kMinBlockSize
    size_t mediumSegmentBytes = 0;  // 0: own segment; else segment size for (1 MiB, 10 MiB)
    EventHooks *events = nullptr;   // null: all streams are synchronous
    std::string name = "caching allocator"; // in error messages
  };

  explicit CachingAllocator(RawAllocator &raw) : CachingAllocator(raw, Options()) {}
  CachingAllocator(RawAllocator &raw, Options options);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator &) = delete;
  CachingAllocator &operator=(const CachingAllocator &) = delete;

  // Never returns null; throws OutOfMemory.
  void *allocate(size_t bytes, Stream stream = 0);
  // Null is ignored; a pointer this allocator did not hand out (or already freed) throws
  // std::invalid_argument.
  void deallocate(void *ptr);
  // Marks the live block at ptr as used by `stream` as well (no-op for its own stream).
  void recordStream(void *ptr, Stream stream);
  // Returns blocks whose events have all completed to their pools.
  void processEvents();
  // Waits for pending events, then returns every entirely free segment to the raw allocator.
  void emptyCache();

  CachingAllocatorStats stats() const;
  void resetPeakStats();
  // Size of the block behind a live pointer (>= the rounded request); throws on unknown pointers.
  size_t blockSize(void *ptr) const;
  std::vector<SegmentSnapshot> snapshot() const;
  std::string snapshotJson() const;

  // Policy helpers, exposed for tests and diagnostics.
  static size_t roundSize(size_t bytes);
  size_t segmentSize(size_t roundedBytes) const;

private:
  enum class State { Allocated, Free, PendingFree };
  struct Segment;
  struct Block {
    uintptr_t addr = 0;
    size_t size = 0;
    size_t requested = 0;
    Stream stream = 0;
    State state = State::Free;
    Segment *segment = nullptr;
    Block *prev = nullptr, *next = nullptr;
    std::vector<Stream> streamUses;
  };
  struct BlockLess {
    bool operator()(const Block *a, const Block *b) const {
      if (a->stream != b->stream)
        return a->stream < b->stream;
      if (a->size != b->size)
        return a->size < b->size;
      return a->addr < b->addr;
    }
  };
  using FreeSet = std::set<Block *, BlockLess>;
  struct Segment {
    uintptr_t base = 0;
    size_t size = 0;
    Stream stream = 0;
    bool small = false;
    Block *head = nullptr;
  };
  struct PendingFree {
    Block *block;
    std::vector<EventHooks::Event> events;
  };

  FreeSet &poolOf(bool small) { return small ? smallPool : largePool; }
  Block *findFreeBlock(FreeSet &pool, Stream stream, size_t size);
  Block *createSegment(size_t rounded, size_t requested, Stream stream, bool small);
  Block *splitIfWorthIt(Block *block, size_t size, bool small);
  void freeBlock(Block *block); // into its pool, coalescing
  void processEventsLocked();
  void synchronizeAndFreeEventsLocked();
  void releaseCachedSegmentsLocked();
  void releaseSegmentLocked(Segment *segment);
  std::string describeOomLocked(size_t requested, size_t rounded, size_t segBytes,
                                Stream stream) const;
  CachingAllocatorStats statsLocked() const;
  std::vector<SegmentSnapshot> snapshotLocked() const;
  void bumpAllocated(int64_t bytes, int64_t requested);
  void bumpReserved(int64_t bytes);

  RawAllocator &raw;
  Options options;
  mutable std::mutex mutex;
  FreeSet smallPool, largePool;
  std::map<uintptr_t, Segment> segments; // by base address
  std::unordered_map<uintptr_t, Block *> active; // allocated blocks by address
  std::deque<PendingFree> pending;
  CachingAllocatorStats st;
};

} // namespace tcc::rt
