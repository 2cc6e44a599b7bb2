//===- ArenaPlacement.h - Placing buffers of known lifetimes in one arena -----===//
//
// One statement of the arena placement, for the compiler's memory plan (-tcc-plan-memory: the
// plan at compile time, a symbolic program's at every symbol's max) and for libtccrt, which
// places a symbolic program's buffers again at each binding with the bound sizes (so that a
// small request takes a small arena). Header-only: the runtime links no MLIR.
//
// "Greedy by size" (as in TFLite's arena planner): buffers sorted by decreasing size (ties:
// earlier first), each placed at the lowest `alignment`-aligned offset where it overlaps no
// already placed buffer whose lifetime intersects its own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tcc {

/// A buffer to place: its bytes and lifetime (positions in the program, inclusive).
struct ArenaInterval {
  int64_t bytes = 0;
  int64_t first = 0, last = 0;
  int64_t offset = -1; // set by placeInArena
};

/// Sets every interval's offset; returns the arena's size (a multiple of `alignment`).
inline int64_t placeInArena(std::vector<ArenaInterval> &intervals, int64_t alignment) {
  auto alignUp = [&](int64_t v) { return (v + alignment - 1) / alignment * alignment; };
  std::vector<ArenaInterval *> order;
  for (ArenaInterval &iv : intervals)
    order.push_back(&iv);
  std::stable_sort(order.begin(), order.end(), [](const ArenaInterval *a, const ArenaInterval *b) {
    return a->bytes > b->bytes;
  });
  std::vector<ArenaInterval *> placed;
  int64_t arena = 0;
  for (ArenaInterval *iv : order) {
    // Placed intervals live at the same time as this one, sorted by offset.
    std::vector<ArenaInterval *> conflicts;
    for (ArenaInterval *p : placed)
      if (p->first <= iv->last && iv->first <= p->last)
        conflicts.push_back(p);
    std::sort(conflicts.begin(), conflicts.end(),
              [](const ArenaInterval *a, const ArenaInterval *b) { return a->offset < b->offset; });
    int64_t offset = 0;
    for (ArenaInterval *c : conflicts) {
      if (offset + iv->bytes <= c->offset)
        break; // fits in the gap before c
      offset = std::max(offset, alignUp(c->offset + c->bytes));
    }
    iv->offset = offset;
    arena = std::max(arena, alignUp(offset + iv->bytes));
    placed.push_back(iv);
  }
  return arena;
}

} // namespace tcc
