//===- CachingAllocatorTest.cpp - Unit tests of the runtime's caching allocator -===//
//
// The allocator runs over FakeRaw, a raw allocator that hands out addresses from a pretend
// address space (never dereferenced; 2 MiB-aligned with a gap after every segment so that
// neighbouring segments are never adjacent), counts calls, has an optional capacity and can be
// told to fail. Deferred frees are driven by FakeEvents, whose events complete when the test says
// that a stream has caught up. Block layouts are checked exactly through snapshot(). A seeded
// randomised stress test compares the allocator with a model after every operation; a
// multithreaded test and the host memory tests use real memory.
//===----------------------------------------------------------------------===//

#include "CachingAllocator.h"
#include "HostMemory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

using namespace tcc::rt;

namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * 1024;

class FakeRaw : public RawAllocator {
public:
  void *allocate(size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex);
    ++allocateCalls;
    if (failNext > 0) {
      --failNext;
      ++failures;
      return nullptr;
    }
    if (failAlways || liveBytes + bytes > capacity) {
      ++failures;
      return nullptr;
    }
    uintptr_t addr = next + misalign;
    next += (bytes + 2 * MiB - 1) / (2 * MiB) * (2 * MiB) + 2 * MiB; // leave a gap
    live[addr] = bytes;
    liveBytes += bytes;
    ++successfulAllocs;
    return reinterpret_cast<void *>(addr);
  }
  void deallocate(void *ptr, size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(reinterpret_cast<uintptr_t>(ptr));
    ASSERT_NE(it, live.end()) << "raw free of an unknown pointer";
    ASSERT_EQ(it->second, bytes) << "raw free with the wrong size";
    liveBytes -= bytes;
    live.erase(it);
    ++frees;
  }

  std::mutex mutex;
  uintptr_t next = uintptr_t(1) << 40;
  uintptr_t misalign = 0;
  std::map<uintptr_t, size_t> live;
  size_t liveBytes = 0;
  size_t capacity = SIZE_MAX;
  int failNext = 0;
  bool failAlways = false;
  size_t allocateCalls = 0, successfulAllocs = 0, failures = 0, frees = 0;
};

class FakeEvents : public EventHooks {
public:
  struct Ev {
    Stream stream;
    bool done = false;
    bool released = false;
  };
  Event recordEvent(Stream stream) override {
    events.push_back(Ev{stream});
    return events.size(); // ids start at 1
  }
  bool queryEvent(Event event) override {
    ++queries;
    return at(event).done;
  }
  void synchronizeEvent(Event event) override {
    ++syncs;
    at(event).done = true;
  }
  void releaseEvent(Event event) override {
    EXPECT_FALSE(at(event).released) << "event released twice";
    at(event).released = true;
  }
  // Everything enqueued on `stream` so far has finished.
  void completeStream(Stream stream) {
    for (Ev &ev : events)
      if (ev.stream == stream)
        ev.done = true;
  }
  size_t liveEvents() const {
    return std::count_if(events.begin(), events.end(), [](const Ev &e) { return !e.released; });
  }
  Ev &at(Event event) {
    EXPECT_TRUE(event >= 1 && event <= events.size());
    return events[event - 1];
  }
  std::vector<Ev> events;
  size_t queries = 0, syncs = 0;
};

using State = BlockSnapshot::State;

struct B {
  size_t offset, size;
  State state;
};

// The block layout of the segment that contains ptr.
std::vector<B> layoutOf(const CachingAllocator &a, void *ptr) {
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  for (const SegmentSnapshot &seg : a.snapshot())
    if (p >= seg.address && p < seg.address + seg.size) {
      std::vector<B> out;
      for (const BlockSnapshot &b : seg.blocks)
        out.push_back(B{b.offset, b.size, b.state});
      return out;
    }
  return {};
}

const SegmentSnapshot *segmentOf(const std::vector<SegmentSnapshot> &segs, void *ptr) {
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  for (const SegmentSnapshot &seg : segs)
    if (p >= seg.address && p < seg.address + seg.size)
      return &seg;
  return nullptr;
}

void expectLayout(const CachingAllocator &a, void *ptr, const std::vector<B> &expected) {
  std::vector<B> got = layoutOf(a, ptr);
  ASSERT_EQ(got.size(), expected.size()) << a.snapshotJson();
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].offset, expected[i].offset) << "block " << i;
    EXPECT_EQ(got[i].size, expected[i].size) << "block " << i;
    EXPECT_EQ(got[i].state, expected[i].state) << "block " << i;
  }
}

uintptr_t addr(void *p) { return reinterpret_cast<uintptr_t>(p); }

} // namespace

TEST(CachingAllocator, RoundingPolicy) {
  EXPECT_EQ(CachingAllocator::roundSize(0), 512u);
  EXPECT_EQ(CachingAllocator::roundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::roundSize(512), 512u);
  EXPECT_EQ(CachingAllocator::roundSize(513), 1024u);
  EXPECT_EQ(CachingAllocator::roundSize(MiB + 1), MiB + 512);

  FakeRaw raw;
  CachingAllocator a(raw);
  EXPECT_EQ(a.segmentSize(512), 2 * MiB);
  EXPECT_EQ(a.segmentSize(MiB), 2 * MiB);
  EXPECT_EQ(a.segmentSize(MiB + 512), 2 * MiB);
  EXPECT_EQ(a.segmentSize(3 * MiB), 4 * MiB);
  EXPECT_EQ(a.segmentSize(10 * MiB), 10 * MiB);
  EXPECT_EQ(a.segmentSize(10 * MiB + 512), 12 * MiB);

  CachingAllocator::Options options;
  options.mediumSegmentBytes = 20 * MiB;
  CachingAllocator medium(raw, options);
  EXPECT_EQ(medium.segmentSize(MiB), 2 * MiB);
  EXPECT_EQ(medium.segmentSize(MiB + 512), 20 * MiB);
  EXPECT_EQ(medium.segmentSize(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(medium.segmentSize(10 * MiB), 10 * MiB);

  void *p = a.allocate(1);
  EXPECT_EQ(a.blockSize(p), 512u);
  void *q = a.allocate(0);
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(a.blockSize(q), 512u);
  void *r = a.allocate(1000);
  EXPECT_EQ(a.blockSize(r), 1024u);
  for (void *x : {p, q, r})
    EXPECT_EQ(addr(x) % 512, 0u);
  CachingAllocatorStats s = a.stats();
  EXPECT_EQ(s.allocatedBytes, 2048u);
  EXPECT_EQ(s.requestedBytes, 1001u);
  EXPECT_EQ(s.reservedBytes, 2 * MiB);
  EXPECT_EQ(s.numRawAllocs, 1u);
}

TEST(CachingAllocator, ReuseAfterFreeIsACacheHit) {
  FakeRaw raw;
  CachingAllocator a(raw);
  void *p = a.allocate(1000);
  EXPECT_EQ(raw.allocateCalls, 1u);
  a.deallocate(p);
  void *q = a.allocate(1000);
  EXPECT_EQ(q, p);
  EXPECT_EQ(raw.allocateCalls, 1u);
  CachingAllocatorStats s = a.stats();
  EXPECT_EQ(s.numAllocs, 2u);
  EXPECT_EQ(s.numFrees, 1u);
  EXPECT_EQ(s.numCacheHits, 1u);
  EXPECT_EQ(s.numRawAllocs, 1u);
  a.deallocate(q);
  // A smaller request reuses the same (coalesced) block too.
  void *r = a.allocate(600);
  EXPECT_EQ(r, p);
  EXPECT_EQ(raw.allocateCalls, 1u);
}

TEST(CachingAllocator, MisalignedRawPointersAreRejected) {
  FakeRaw raw;
  raw.misalign = 32;
  CachingAllocator a(raw);
  EXPECT_THROW(a.allocate(100), std::logic_error);
  EXPECT_TRUE(raw.live.empty());
  EXPECT_THROW(CachingAllocator(raw, [] {
                 CachingAllocator::Options o;
                 o.alignment = 48;
                 return o;
               }()),
               std::invalid_argument);
}

TEST(CachingAllocator, SplittingAndCoalescingLayout) {
  FakeRaw raw;
  CachingAllocator a(raw);
  void *p = a.allocate(1000); // 1024
  expectLayout(a, p, {{0, 1024, State::Allocated}, {1024, 2 * MiB - 1024, State::Free}});
  void *q = a.allocate(5000); // 5120
  EXPECT_EQ(addr(q), addr(p) + 1024);
  void *r = a.allocate(512);
  EXPECT_EQ(addr(r), addr(p) + 6144);
  expectLayout(a, p,
               {{0, 1024, State::Allocated},
                {1024, 5120, State::Allocated},
                {6144, 512, State::Allocated},
                {6656, 2 * MiB - 6656, State::Free}});
  EXPECT_EQ(a.stats().numSplits, 3u);

  a.deallocate(p); // no free neighbour
  EXPECT_EQ(a.stats().numCoalesces, 0u);
  a.deallocate(r); // merges with the free tail
  EXPECT_EQ(a.stats().numCoalesces, 1u);
  expectLayout(a, q,
               {{0, 1024, State::Free},
                {1024, 5120, State::Allocated},
                {6144, 2 * MiB - 6144, State::Free}});
  a.deallocate(q); // merges on both sides
  EXPECT_EQ(a.stats().numCoalesces, 3u);
  expectLayout(a, p, {{0, 2 * MiB, State::Free}});
  EXPECT_EQ(raw.frees, 0u); // cached, not returned

  // The coalesced segment serves the largest small request, split in two halves.
  void *half = a.allocate(MiB);
  EXPECT_EQ(half, p);
  expectLayout(a, p, {{0, MiB, State::Allocated}, {MiB, MiB, State::Free}});
  EXPECT_EQ(raw.successfulAllocs, 1u);
}

TEST(CachingAllocator, SmallAndLargePools) {
  FakeRaw raw;
  CachingAllocator a(raw);
  void *small = a.allocate(MiB); // largest small request
  void *large = a.allocate(MiB + 1);
  auto segs = a.snapshot();
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_TRUE(segmentOf(segs, small)->smallPool);
  EXPECT_FALSE(segmentOf(segs, large)->smallPool);
  // Large: segment 2 MiB, remainder 1 MiB - 512 is not > 1 MiB: no split, caller owns it all.
  EXPECT_EQ(a.blockSize(large), 2 * MiB);
  expectLayout(a, large, {{0, 2 * MiB, State::Allocated}});
  expectLayout(a, small, {{0, MiB, State::Allocated}, {MiB, MiB, State::Free}});

  // The free small block is never used for a large request, nor a large one for small.
  a.deallocate(small);
  void *large2 = a.allocate(MiB + 512);
  EXPECT_EQ(raw.successfulAllocs, 3u);
  a.deallocate(large);
  void *small2 = a.allocate(4 * KiB);
  EXPECT_EQ(addr(small2), addr(small)); // from the small segment
  EXPECT_EQ(raw.successfulAllocs, 3u);

  // A big cached large block is split for a smaller large request when the remainder > 1 MiB.
  void *big = a.allocate(20 * MiB);
  EXPECT_EQ(a.blockSize(big), 20 * MiB);
  a.deallocate(big);
  size_t rawBefore = raw.successfulAllocs;
  void *part = a.allocate(4 * MiB);
  EXPECT_EQ(part, big);
  EXPECT_EQ(raw.successfulAllocs, rawBefore);
  expectLayout(a, big, {{0, 4 * MiB, State::Allocated}, {4 * MiB, 16 * MiB, State::Free}});
  // ... but not when it would be <= 1 MiB.
  void *rest = a.allocate(15 * MiB);
  EXPECT_EQ(addr(rest), addr(big) + 4 * MiB);
  EXPECT_EQ(a.blockSize(rest), 16 * MiB);
  a.deallocate(large2);
  a.deallocate(small2);
  a.deallocate(part);
  a.deallocate(rest);
  EXPECT_EQ(a.stats().allocatedBytes, 0u);
}

TEST(CachingAllocator, BestFitPicksTheSmallestHole) {
  FakeRaw raw;
  CachingAllocator a(raw);
  // Holes of 8, 4 and 16 KiB separated by live blocks.
  void *h8 = a.allocate(8 * KiB);
  void *s1 = a.allocate(512);
  void *h4 = a.allocate(4 * KiB);
  void *s2 = a.allocate(512);
  void *h16 = a.allocate(16 * KiB);
  void *s3 = a.allocate(512);
  a.deallocate(h8);
  a.deallocate(h4);
  a.deallocate(h16);
  EXPECT_EQ(a.allocate(4 * KiB), h4);
  void *six = a.allocate(6 * KiB);
  EXPECT_EQ(six, h8);
  expectLayout(a, six,
               {{0, 6 * KiB, State::Allocated},
                {6 * KiB, 2 * KiB, State::Free},
                {8 * KiB, 512, State::Allocated},
                {8 * KiB + 512, 4 * KiB, State::Allocated},
                {12 * KiB + 512, 512, State::Allocated},
                {13 * KiB, 16 * KiB, State::Free},
                {29 * KiB, 512, State::Allocated},
                {29 * KiB + 512, 2 * MiB - 29 * KiB - 512, State::Free}});
  EXPECT_EQ(a.allocate(2 * KiB), reinterpret_cast<void *>(addr(h8) + 6 * KiB));
  EXPECT_EQ(a.allocate(10 * KiB), h16);
  (void)s1, (void)s2, (void)s3;
  EXPECT_EQ(raw.successfulAllocs, 1u);
}

TEST(CachingAllocator, StreamsDoNotShareFreeBlocks) {
  FakeRaw raw;
  CachingAllocator a(raw);
  void *p1 = a.allocate(4 * KiB, 1);
  a.deallocate(p1);
  void *p2 = a.allocate(4 * KiB, 2);
  EXPECT_NE(p2, p1);
  EXPECT_EQ(raw.successfulAllocs, 2u);
  void *p1b = a.allocate(4 * KiB, 1);
  EXPECT_EQ(p1b, p1);
  EXPECT_EQ(raw.successfulAllocs, 2u);
  auto segs = a.snapshot();
  EXPECT_EQ(segmentOf(segs, p1)->stream, 1u);
  EXPECT_EQ(segmentOf(segs, p2)->stream, 2u);
  for (const SegmentSnapshot &seg : segs)
    for (const BlockSnapshot &b : seg.blocks)
      EXPECT_EQ(b.stream, seg.stream);
}

TEST(CachingAllocator, RecordStreamDefersTheFree) {
  FakeRaw raw;
  FakeEvents events;
  CachingAllocator::Options options;
  options.events = &events;
  CachingAllocator a(raw, options);
  void *p = a.allocate(4 * KiB, 1);
  a.recordStream(p, 1); // own stream: nothing
  a.recordStream(p, 2);
  a.recordStream(p, 3);
  a.recordStream(p, 2); // once per stream
  a.deallocate(p);
  EXPECT_EQ(events.events.size(), 2u);
  CachingAllocatorStats s = a.stats();
  EXPECT_EQ(s.allocatedBytes, 0u);
  EXPECT_EQ(s.pendingFreeBytes, 4 * KiB);
  EXPECT_EQ(s.pendingFreeBlocks, 1u);
  EXPECT_EQ(s.numDeferredFrees, 1u);
  EXPECT_EQ(s.cachedBytes, 2 * MiB - 4 * KiB);
  expectLayout(a, p, {{0, 4 * KiB, State::PendingFree}, {4 * KiB, 2 * MiB - 4 * KiB, State::Free}});
  EXPECT_NE(a.snapshotJson().find("\"pending_free\""), std::string::npos);

  // Not reusable while stream 2 or 3 may still use it.
  void *q = a.allocate(4 * KiB, 1);
  EXPECT_EQ(addr(q), addr(p) + 4 * KiB);
  a.deallocate(q);
  events.completeStream(2);
  a.processEvents();
  EXPECT_EQ(a.stats().pendingFreeBlocks, 1u);
  events.completeStream(3);
  void *r = a.allocate(4 * KiB, 1); // allocate processes events first
  EXPECT_EQ(r, p);
  EXPECT_EQ(a.stats().pendingFreeBlocks, 0u);
  EXPECT_EQ(events.liveEvents(), 0u);
  a.deallocate(r);
  expectLayout(a, p, {{0, 2 * MiB, State::Free}});

  // The recorded streams belong to one allocation only.
  void *again = a.allocate(4 * KiB, 1);
  a.deallocate(again);
  EXPECT_EQ(a.stats().pendingFreeBlocks, 0u);

  // emptyCache waits for pending events and then releases the segment.
  void *w = a.allocate(4 * KiB, 1);
  a.recordStream(w, 2);
  a.deallocate(w);
  size_t syncs = events.syncs;
  a.emptyCache();
  EXPECT_EQ(events.syncs, syncs + 1);
  EXPECT_TRUE(raw.live.empty());
  EXPECT_EQ(events.liveEvents(), 0u);
}

TEST(CachingAllocator, RecordStreamWithoutHooksFreesAtOnce) {
  FakeRaw raw;
  CachingAllocator a(raw);
  void *p = a.allocate(4 * KiB, 1);
  a.recordStream(p, 2);
  a.deallocate(p);
  EXPECT_EQ(a.stats().pendingFreeBlocks, 0u);
  EXPECT_EQ(a.allocate(4 * KiB, 1), p);
  EXPECT_THROW(a.recordStream(reinterpret_cast<void *>(addr(p) + 512), 2), std::invalid_argument);
}

TEST(CachingAllocator, OutOfMemoryReleasesTheCacheAndRetries) {
  FakeRaw raw;
  raw.capacity = 8 * MiB;
  CachingAllocator a(raw);
  void *big = a.allocate(3 * MiB);  // 4 MiB segment
  void *small = a.allocate(KiB);    // 2 MiB segment
  a.deallocate(big);                // cached
  EXPECT_EQ(a.stats().reservedBytes, 6 * MiB);
  void *five = a.allocate(5 * MiB); // 6 MiB: only fits after the cached 4 MiB is released
  EXPECT_NE(five, nullptr);
  CachingAllocatorStats s = a.stats();
  EXPECT_EQ(s.numOomRetries, 1u);
  EXPECT_EQ(s.numRawFrees, 1u);
  EXPECT_EQ(s.reservedBytes, 8 * MiB);
  EXPECT_EQ(raw.failures, 1u);

  // Nothing left to release: OutOfMemory with the numbers.
  try {
    a.allocate(4 * MiB);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory &e) {
    std::string message = e.what();
    EXPECT_EQ(e.requested(), 4 * MiB);
    EXPECT_NE(message.find("out of memory"), std::string::npos) << message;
    EXPECT_NE(message.find("tried to allocate 4194304 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("allocated 6292480 bytes"), std::string::npos) << message; // 6M+1K
    EXPECT_NE(message.find("reserved 8388608 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("cached 2096128 bytes"), std::string::npos) << message;
  }
  s = a.stats();
  EXPECT_EQ(s.numOoms, 1u);
  EXPECT_EQ(s.numOomRetries, 2u);
  // The small segment holds a live block, so it stayed; state is intact.
  EXPECT_EQ(s.reservedBytes, 8 * MiB);
  EXPECT_EQ(s.allocatedBytes, 6 * MiB + KiB);
  // bad_alloc catches it too (HostMemory promises bad_alloc).
  EXPECT_THROW(a.allocate(4 * MiB), std::bad_alloc);
  // Absurd sizes are refused without asking the raw allocator.
  size_t calls = raw.allocateCalls;
  EXPECT_THROW(a.allocate(SIZE_MAX), OutOfMemory);
  EXPECT_EQ(raw.allocateCalls, calls);
  a.deallocate(five);
  a.deallocate(small);
}

TEST(CachingAllocator, OutOfMemoryWaitsForPendingFreesFirst) {
  FakeRaw raw;
  raw.capacity = 4 * MiB;
  FakeEvents events;
  CachingAllocator::Options options;
  options.events = &events;
  CachingAllocator a(raw, options);
  void *p = a.allocate(3 * MiB, 1); // 4 MiB segment, whole capacity
  a.recordStream(p, 2);
  a.deallocate(p);
  // The block is pending on stream 2; the raw allocator is full. The retry synchronizes the event
  // and reuses the block without releasing anything.
  void *q = a.allocate(3 * MiB, 1);
  EXPECT_EQ(q, p);
  EXPECT_EQ(events.syncs, 1u);
  CachingAllocatorStats s = a.stats();
  EXPECT_EQ(s.numOomRetries, 1u);
  EXPECT_EQ(s.numRawFrees, 0u);
  EXPECT_EQ(s.numCacheHits, 1u);
  // A pending block of another stream is released (after the wait) to make room.
  a.recordStream(q, 3);
  a.deallocate(q);
  void *other = a.allocate(3 * MiB, 2);
  EXPECT_NE(other, nullptr);
  EXPECT_EQ(a.stats().numRawFrees, 1u);
  EXPECT_EQ(events.liveEvents(), 0u);
}

TEST(CachingAllocator, FailingRawAllocatorFailsOnce) {
  FakeRaw raw;
  CachingAllocator a(raw);
  raw.failNext = 1; // transient failure: the retry succeeds
  void *p = a.allocate(KiB);
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(a.stats().numOomRetries, 1u);
  raw.failAlways = true;
  EXPECT_THROW(a.allocate(4 * MiB), OutOfMemory);
  EXPECT_EQ(a.allocate(KiB), reinterpret_cast<void *>(addr(p) + KiB)); // cache still works
}

TEST(CachingAllocator, EmptyCacheReleasesOnlyUnusedSegments) {
  FakeRaw raw;
  CachingAllocator a(raw);
  void *keep = a.allocate(KiB);
  void *dropSmall = a.allocate(MiB);
  void *dropSmall2 = a.allocate(MiB); // second small segment
  void *dropLarge = a.allocate(5 * MiB);
  EXPECT_EQ(raw.live.size(), 3u);
  a.deallocate(dropSmall);
  a.deallocate(dropSmall2);
  a.deallocate(dropLarge);
  a.emptyCache();
  // The first small segment still holds `keep` (and the freed MiB, coalesced).
  EXPECT_EQ(raw.live.size(), 1u);
  EXPECT_EQ(a.stats().reservedBytes, 2 * MiB);
  EXPECT_EQ(a.stats().numRawFrees, 2u);
  expectLayout(a, keep, {{0, KiB, State::Allocated}, {KiB, 2 * MiB - KiB, State::Free}});
  a.deallocate(keep);
  a.emptyCache();
  EXPECT_TRUE(raw.live.empty());
  CachingAllocatorStats s = a.stats();
  EXPECT_EQ(s.reservedBytes, 0u);
  EXPECT_EQ(s.segments, 0u);
  EXPECT_EQ(s.cachedBytes, 0u);
  EXPECT_TRUE(a.snapshot().empty());
}

TEST(CachingAllocator, StatisticsAndPeaks) {
  FakeRaw raw;
  CachingAllocator a(raw);
  void *x = a.allocate(100);       // 512
  void *y = a.allocate(3 * MiB);   // 4 MiB segment, unsplit
  void *z = a.allocate(10 * KiB);  // 10 KiB
  CachingAllocatorStats s = a.stats();
  EXPECT_EQ(s.allocatedBytes, 512 + 4 * MiB + 10 * KiB); // y owns its whole 4 MiB segment
  EXPECT_EQ(s.requestedBytes, 100 + 3 * MiB + 10 * KiB);
  EXPECT_EQ(s.reservedBytes, 6 * MiB);
  EXPECT_EQ(s.cachedBytes, 6 * MiB - s.allocatedBytes);
  EXPECT_EQ(s.activeBlocks, 3u);
  EXPECT_EQ(s.segments, 2u);
  a.deallocate(y);
  a.deallocate(x);
  s = a.stats();
  EXPECT_EQ(s.allocatedBytes, 10 * KiB);
  EXPECT_EQ(s.peakAllocatedBytes, 512 + 4 * MiB + 10 * KiB);
  EXPECT_EQ(s.peakRequestedBytes, 100 + 3 * MiB + 10 * KiB);
  EXPECT_EQ(s.peakReservedBytes, 6 * MiB);
  a.emptyCache();
  s = a.stats();
  EXPECT_EQ(s.reservedBytes, 2 * MiB);
  EXPECT_EQ(s.peakReservedBytes, 6 * MiB);
  a.resetPeakStats();
  s = a.stats();
  EXPECT_EQ(s.peakAllocatedBytes, 10 * KiB);
  EXPECT_EQ(s.peakReservedBytes, 2 * MiB);
  a.deallocate(z);
  s = a.stats();
  EXPECT_EQ(s.numAllocs, 3u);
  EXPECT_EQ(s.numFrees, 3u);
  EXPECT_EQ(s.numRawAllocs, 2u);
  EXPECT_EQ(s.numRawFrees, 1u);
  EXPECT_EQ(s.numCacheHits, 1u); // z came from the remainder of x's segment
  EXPECT_EQ(s.numSplits, 2u);
  EXPECT_EQ(s.numOoms, 0u);
}

TEST(CachingAllocator, InvalidFrees) {
  FakeRaw raw;
  CachingAllocator a(raw);
  a.deallocate(nullptr);
  void *p = a.allocate(KiB);
  EXPECT_THROW(a.deallocate(reinterpret_cast<void *>(addr(p) + 64)), std::invalid_argument);
  a.deallocate(p);
  EXPECT_THROW(a.deallocate(p), std::invalid_argument);
  EXPECT_THROW(a.blockSize(p), std::invalid_argument);
  EXPECT_EQ(a.stats().numFrees, 1u);
}

TEST(CachingAllocator, FragmentationHolesAndCoalescedReuse) {
  FakeRaw raw;
  CachingAllocator a(raw);
  // Fill one small segment exactly with 32 blocks of 64 KiB.
  std::vector<void *> blocks;
  for (int i = 0; i < 32; ++i)
    blocks.push_back(a.allocate(64 * KiB));
  EXPECT_EQ(raw.successfulAllocs, 1u);
  for (int i = 0; i < 32; i += 2)
    a.deallocate(blocks[i]);
  // 16 holes of 64 KiB, none adjacent: nothing coalesced.
  std::vector<B> layout = layoutOf(a, blocks[0]);
  ASSERT_EQ(layout.size(), 32u);
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(layout[i].state, i % 2 ? State::Allocated : State::Free);
  EXPECT_EQ(a.stats().numCoalesces, 0u);
  EXPECT_EQ(a.stats().cachedBytes, MiB);
  // A MiB is cached but no 128 KiB hole exists: a new segment.
  void *wide = a.allocate(128 * KiB);
  EXPECT_EQ(raw.successfulAllocs, 2u);
  EXPECT_EQ(segmentOf(a.snapshot(), wide)->address, raw.live.rbegin()->first);
  a.deallocate(wide); // merges with the rest of its segment
  EXPECT_EQ(a.stats().numCoalesces, 1u);
  // Freeing block 11 merges holes 10, 11, 12 into 192 KiB; the request fits it.
  a.deallocate(blocks[11]);
  EXPECT_EQ(a.stats().numCoalesces, 3u);
  void *fits = a.allocate(128 * KiB);
  // Best fit: the 2 MiB free segment is larger, so the 192 KiB hole wins.
  EXPECT_EQ(fits, blocks[10]);
  EXPECT_EQ(raw.successfulAllocs, 2u);
  layout = layoutOf(a, blocks[0]);
  EXPECT_EQ(layout[10].offset, 640 * KiB);
  EXPECT_EQ(layout[10].size, 128 * KiB);
  EXPECT_EQ(layout[10].state, State::Allocated);
  EXPECT_EQ(layout[11].offset, 768 * KiB);
  EXPECT_EQ(layout[11].size, 64 * KiB);
  EXPECT_EQ(layout[11].state, State::Free);
  EXPECT_EQ(layout[12].state, State::Allocated); // old block 13
}

TEST(CachingAllocator, SnapshotJson) {
  FakeRaw raw;
  CachingAllocator::Options options;
  options.name = "test \"alloc\"";
  CachingAllocator a(raw, options);
  EXPECT_NE(a.snapshotJson().find("\"segments\": []"), std::string::npos);
  void *p = a.allocate(700, 5);
  void *q = a.allocate(3 * MiB);
  std::string json = a.snapshotJson();
  EXPECT_NE(json.find("\"name\": \"test \\\"alloc\\\"\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"pool\": \"small\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"pool\": \"large\""), std::string::npos) << json;
  EXPECT_NE(json.find("{\"offset\": 0, \"size\": 1024, \"requested\": 700, \"state\": "
                      "\"allocated\", \"stream\": 5}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"state\": \"free\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"num_raw_allocs\": 2"), std::string::npos) << json;
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
  EXPECT_EQ(std::count(json.begin(), json.end(), '['), std::count(json.begin(), json.end(), ']'));
  a.deallocate(p);
  a.deallocate(q);
}

TEST(CachingAllocator, DestructorReturnsEverything) {
  FakeRaw raw;
  FakeEvents events;
  {
    CachingAllocator::Options options;
    options.events = &events;
    CachingAllocator a(raw, options);
    a.allocate(KiB);
    void *p = a.allocate(5 * MiB, 1);
    a.recordStream(p, 2);
    a.deallocate(p);
    EXPECT_EQ(raw.live.size(), 2u);
  }
  EXPECT_TRUE(raw.live.empty());
  EXPECT_EQ(events.liveEvents(), 0u);
}

// ---- Randomised stress test against a model -------------------------------------------------

namespace {

struct LiveBlock {
  size_t requested, blockSize;
  Stream stream;
  std::set<Stream> uses;
};
struct PendingBlock {
  size_t size;
  std::set<Stream> waitingOn;
};

class Model {
public:
  Model(CachingAllocator &a, FakeRaw &raw, FakeEvents &events)
      : a(a), raw(raw), events(events) {}

  void allocate(size_t bytes, Stream stream) {
    CachingAllocatorStats before = a.stats();
    void *p = nullptr;
    try {
      p = a.allocate(bytes, stream);
    } catch (const OutOfMemory &e) {
      ++ooms;
      afterEventProcessing(before);
      // Really out of memory: the raw allocator could not fit a new segment even after the
      // cache was released.
      size_t rounded = CachingAllocator::roundSize(bytes);
      EXPECT_GT(raw.liveBytes + a.segmentSize(rounded), raw.capacity);
      for (const SegmentSnapshot &seg : a.snapshot())
        EXPECT_FALSE(seg.blocks.size() == 1 && seg.blocks[0].state == State::Free)
            << "an entirely free segment survived an OOM";
      return;
    }
    afterEventProcessing(before);
    ASSERT_NE(p, nullptr);
    uintptr_t at = addr(p);
    EXPECT_EQ(at % 64, 0u);
    size_t rounded = CachingAllocator::roundSize(bytes);
    size_t size = a.blockSize(p);
    EXPECT_GE(size, rounded);
    if (rounded <= CachingAllocator::kSmallSize)
      EXPECT_LT(size - rounded, 512u);
    else
      EXPECT_LE(size - rounded, CachingAllocator::kSmallSize);
    EXPECT_EQ(live.count(at), 0u);
    for (auto &[paddr, pb] : pending)
      EXPECT_TRUE(at + size <= paddr || paddr + pb.size <= at) << "reused a pending block";
    live[at] = LiveBlock{bytes, size, stream, {}};
    ++allocs;
    allocatedBytes += size;
    requestedBytes += bytes;
    peakAllocated = std::max(peakAllocated, allocatedBytes);
  }

  void free(uintptr_t at) {
    LiveBlock block = live.at(at);
    a.deallocate(reinterpret_cast<void *>(at));
    live.erase(at);
    ++frees;
    allocatedBytes -= block.blockSize;
    requestedBytes -= block.requested;
    if (!block.uses.empty())
      pending[at] = PendingBlock{block.blockSize, block.uses};
  }

  void recordStream(uintptr_t at, Stream stream) {
    a.recordStream(reinterpret_cast<void *>(at), stream);
    LiveBlock &block = live.at(at);
    if (stream != block.stream)
      block.uses.insert(stream);
  }

  void completeStream(Stream stream) {
    events.completeStream(stream);
    for (auto &[at, pb] : pending)
      pb.waitingOn.erase(stream);
  }

  void processEvents() {
    a.processEvents();
    dropCompleted();
  }

  void emptyCache() {
    a.emptyCache();
    pending.clear(); // everything was waited for
  }

  void freeEverything() {
    while (!live.empty())
      free(live.begin()->first);
  }

  void check() {
    CachingAllocatorStats s = a.stats();
    // Live blocks never overlap.
    uintptr_t end = 0;
    for (auto &[at, block] : live) {
      EXPECT_GE(at, end) << "overlapping live blocks";
      end = at + block.blockSize;
    }
    EXPECT_EQ(s.allocatedBytes, allocatedBytes);
    EXPECT_EQ(s.requestedBytes, requestedBytes);
    EXPECT_EQ(s.peakAllocatedBytes, peakAllocated);
    EXPECT_EQ(s.activeBlocks, live.size());
    EXPECT_EQ(s.numAllocs, allocs);
    EXPECT_EQ(s.numFrees, frees);
    EXPECT_EQ(s.numOoms, ooms);
    EXPECT_EQ(s.reservedBytes, raw.liveBytes);
    EXPECT_EQ(s.segments, raw.live.size());
    EXPECT_EQ(s.numRawAllocs, raw.successfulAllocs);
    EXPECT_EQ(s.numRawFrees, raw.frees);
    EXPECT_EQ(s.pendingFreeBlocks, pending.size());
    EXPECT_GE(s.peakReservedBytes, s.reservedBytes);

    // The snapshot agrees with the model and with the raw allocator.
    std::vector<SegmentSnapshot> segs = a.snapshot();
    EXPECT_EQ(segs.size(), raw.live.size());
    size_t allocatedSeen = 0, pendingBytes = 0, freeBytes = 0, pendingSeen = 0;
    for (const SegmentSnapshot &seg : segs) {
      auto rawIt = raw.live.find(seg.address);
      ASSERT_NE(rawIt, raw.live.end());
      EXPECT_EQ(rawIt->second, seg.size);
      size_t offset = 0;
      bool previousFree = false;
      for (const BlockSnapshot &b : seg.blocks) {
        EXPECT_EQ(b.offset, offset);
        EXPECT_EQ(b.stream, seg.stream);
        EXPECT_EQ(b.offset % 512, 0u);
        offset += b.size;
        bool isFree = b.state == State::Free;
        EXPECT_FALSE(isFree && previousFree) << "adjacent free blocks were not coalesced";
        previousFree = isFree;
        uintptr_t at = seg.address + b.offset;
        if (b.state == State::Allocated) {
          ++allocatedSeen;
          auto it = live.find(at);
          if (it == live.end()) {
            ADD_FAILURE() << "allocated block unknown to the model";
            continue;
          }
          EXPECT_EQ(it->second.blockSize, b.size);
          EXPECT_EQ(it->second.stream, seg.stream);
          EXPECT_EQ(it->second.requested, b.requested);
          EXPECT_EQ(seg.smallPool, CachingAllocator::roundSize(it->second.requested) <=
                                       CachingAllocator::kSmallSize);
        } else if (b.state == State::PendingFree) {
          ++pendingSeen;
          pendingBytes += b.size;
          auto it = pending.find(at);
          if (it == pending.end()) {
            ADD_FAILURE() << "pending block unknown to the model";
            continue;
          }
          EXPECT_EQ(it->second.size, b.size);
        } else {
          freeBytes += b.size;
        }
      }
      EXPECT_EQ(offset, seg.size);
    }
    EXPECT_EQ(allocatedSeen, live.size());
    EXPECT_EQ(pendingSeen, pending.size());
    EXPECT_EQ(s.pendingFreeBytes, pendingBytes);
    EXPECT_EQ(s.cachedBytes, freeBytes);
  }

  std::map<uintptr_t, LiveBlock> live;
  std::map<uintptr_t, PendingBlock> pending;
  size_t ooms = 0;

private:
  // allocate() processes completed events first; an OOM retry waits for all of them.
  void afterEventProcessing(const CachingAllocatorStats &before) {
    if (a.stats().numOomRetries != before.numOomRetries)
      pending.clear();
    else
      dropCompleted();
  }
  void dropCompleted() {
    for (auto it = pending.begin(); it != pending.end();)
      it = it->second.waitingOn.empty() ? pending.erase(it) : std::next(it);
  }

  CachingAllocator &a;
  FakeRaw &raw;
  FakeEvents &events;
  size_t allocs = 0, frees = 0, allocatedBytes = 0, requestedBytes = 0, peakAllocated = 0;
};

void runStress(unsigned seed, size_t mediumSegmentBytes) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  FakeRaw raw;
  raw.capacity = 96 * MiB;
  FakeEvents events;
  CachingAllocator::Options options;
  options.events = &events;
  options.mediumSegmentBytes = mediumSegmentBytes;
  CachingAllocator a(raw, options);
  Model model(a, raw, events);
  std::mt19937_64 rng(seed);
  auto uniform = [&](size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(rng);
  };
  auto randomLive = [&]() {
    auto it = model.live.begin();
    std::advance(it, uniform(0, model.live.size() - 1));
    return it->first;
  };
  const Stream streams[] = {0, 1, 2};
  for (int step = 0; step < 4000; ++step) {
    size_t op = uniform(0, 99);
    // Allocate more while few blocks are live, so the workload hovers near the capacity.
    if (op < (model.live.size() < 40 ? 60u : 40u) || model.live.empty()) {
      size_t kind = uniform(0, 99), bytes;
      if (kind < 65)
        bytes = uniform(0, 64 * KiB);
      else if (kind < 88)
        bytes = uniform(64 * KiB, MiB);
      else if (kind < 97)
        bytes = uniform(MiB + 1, 12 * MiB);
      else
        bytes = uniform(12 * MiB, 40 * MiB);
      model.allocate(bytes, streams[uniform(0, 2)]);
    } else if (op < 85) {
      model.free(randomLive());
    } else if (op < 93) {
      model.recordStream(randomLive(), streams[uniform(0, 2)]);
    } else if (op < 98) {
      model.completeStream(streams[uniform(0, 2)]);
    } else if (op < 99) {
      model.processEvents();
    } else {
      model.emptyCache();
    }
    model.check();
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "first failure at step " << step << "\n" << a.snapshotJson();
      return;
    }
  }
  CachingAllocatorStats s = a.stats();
  // The workload really exercised the interesting paths.
  EXPECT_GT(s.numCacheHits, 500u);
  EXPECT_GT(s.numSplits, 100u);
  EXPECT_GT(s.numCoalesces, 100u);
  EXPECT_GT(s.numDeferredFrees, 20u);
  EXPECT_GT(s.numOomRetries, 0u);
  EXPECT_GT(s.numRawFrees, 0u);

  model.freeEverything();
  model.check();
  model.emptyCache();
  model.check();
  EXPECT_TRUE(raw.live.empty());
  EXPECT_EQ(raw.liveBytes, 0u);
  EXPECT_EQ(a.stats().reservedBytes, 0u);
  EXPECT_EQ(a.stats().allocatedBytes, 0u);
  EXPECT_EQ(events.liveEvents(), 0u);
}

} // namespace

TEST(CachingAllocator, RandomisedStress) {
  for (unsigned seed : {1u, 2u, 3u})
    runStress(seed, 0);
}

TEST(CachingAllocator, RandomisedStressMediumSegments) {
  for (unsigned seed : {11u, 12u})
    runStress(seed, 20 * MiB);
}

// ---- Threads and real memory ------------------------------------------------------------------

namespace {

class MallocRaw : public RawAllocator {
public:
  void *allocate(size_t bytes) override {
    ++allocs;
    liveBytes += bytes;
    return std::aligned_alloc(64, bytes);
  }
  void deallocate(void *ptr, size_t bytes) override {
    ++frees;
    liveBytes -= bytes;
    std::free(ptr);
  }
  std::atomic<size_t> allocs{0}, frees{0}, liveBytes{0};
};

} // namespace

TEST(CachingAllocator, MultithreadedRealMemory) {
  MallocRaw raw;
  CachingAllocator a(raw);
  constexpr int kThreads = 4, kOps = 3000;
  std::atomic<bool> corrupted{false};
  auto worker = [&](int id) {
    std::mt19937 rng(100 + id);
    std::vector<std::pair<unsigned char *, size_t>> mine;
    unsigned char tag = static_cast<unsigned char>(id + 1);
    auto release = [&](size_t i) {
      auto [p, n] = mine[i];
      for (size_t k = 0; k < n; k += 61)
        if (p[k] != tag)
          corrupted = true;
      if (p[n - 1] != tag)
        corrupted = true;
      a.deallocate(p);
      mine[i] = mine.back();
      mine.pop_back();
    };
    for (int op = 0; op < kOps; ++op) {
      if (mine.empty() || rng() % 100 < 55) {
        size_t n = rng() % 100 < 95 ? 1 + rng() % (64 * KiB) : MiB + rng() % (3 * MiB);
        auto *p = static_cast<unsigned char *>(a.allocate(n, static_cast<Stream>(id % 2)));
        if (reinterpret_cast<uintptr_t>(p) % 64 != 0)
          corrupted = true;
        std::memset(p, tag, n);
        mine.emplace_back(p, n);
      } else {
        release(rng() % mine.size());
      }
      if (op % 500 == 0 && id == 0)
        a.emptyCache();
    }
    while (!mine.empty())
      release(mine.size() - 1);
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back(worker, i);
  for (std::thread &t : threads)
    t.join();
  EXPECT_FALSE(corrupted.load());
  CachingAllocatorStats s = a.stats();
  EXPECT_EQ(s.allocatedBytes, 0u);
  EXPECT_EQ(s.activeBlocks, 0u);
  EXPECT_EQ(s.numAllocs, s.numFrees);
  EXPECT_GT(s.numCacheHits, 0u);
  EXPECT_EQ(s.reservedBytes, raw.liveBytes.load());
  a.emptyCache();
  EXPECT_EQ(raw.allocs.load(), raw.frees.load());
  EXPECT_EQ(a.stats().reservedBytes, 0u);
}

TEST(HostMemory, AllocateFreeAndStats) {
  tccrt_allocator_stats before = hostAllocatorStats();
  void *p = hostAllocate(100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(p, 0xab, 100);
  void *z = hostAllocate(0);
  EXPECT_NE(z, nullptr);
  tccrt_allocator_stats during = hostAllocatorStats();
  EXPECT_EQ(during.num_allocs, before.num_allocs + 2);
  EXPECT_EQ(during.allocated_bytes, before.allocated_bytes + 1024);
  EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
  EXPECT_GE(during.peak_allocated_bytes, during.allocated_bytes);
  hostFree(p);
  hostFree(z);
  hostFree(nullptr);
  void *again = hostAllocate(100);
  tccrt_allocator_stats after = hostAllocatorStats();
  EXPECT_EQ(after.num_cache_hits, during.num_cache_hits + 1);
  EXPECT_EQ(after.num_system_allocs, during.num_system_allocs);
  hostFree(again);
  EXPECT_EQ(hostAllocatorStats().allocated_bytes, before.allocated_bytes);

  void *big = hostAllocate(32 * MiB);
  std::memset(big, 1, 32 * MiB);
  hostFree(big);
  tccrt_allocator_stats cached = hostAllocatorStats();
  hostEmptyCache();
  tccrt_allocator_stats emptied = hostAllocatorStats();
  EXPECT_LE(emptied.reserved_bytes + 32 * MiB, cached.reserved_bytes);
  EXPECT_GT(emptied.num_system_frees, cached.num_system_frees);
}

TEST(HostMemory, OutOfMemoryIsBadAlloc) {
  EXPECT_THROW(hostAllocate(SIZE_MAX / 4), std::bad_alloc);
  EXPECT_THROW(hostAllocate(SIZE_MAX), std::bad_alloc);
  void *p = hostAllocate(64);
  hostFree(p);
}
