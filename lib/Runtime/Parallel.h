//===- Parallel.h - Splitting a loop over the runtime's helper threads ----===//
//
// parallelFor(threads, count, costPerItem, body) calls body(begin, end) over [0, count) in up to
// `threads` contiguous chunks, the calling thread taking the first. Small loops (count x
// costPerItem below a threshold) run on the caller only, since starting a thread costs tens of
// microseconds. The body must not throw.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace tcc::rt {

template <class Body>
void parallelFor(int threads, int64_t count, int64_t costPerItem, const Body &body) {
  constexpr int64_t kMinWorkPerThread = 1 << 17; // ~ bytes moved; about 10 us of work
  int64_t work = count * std::max<int64_t>(costPerItem, 1);
  int64_t chunks = std::min<int64_t>({(int64_t)std::max(threads, 1), count,
                                      std::max<int64_t>(work / kMinWorkPerThread, 1)});
  if (chunks <= 1) {
    if (count > 0)
      body(int64_t(0), count);
    return;
  }
  std::vector<std::thread> helpers;
  helpers.reserve((size_t)chunks - 1);
  auto bounds = [&](int64_t i) { return count * i / chunks; };
  int64_t started = 1;
  try {
    for (; started < chunks; ++started)
      helpers.emplace_back(
          [&body, b = bounds(started), e = bounds(started + 1)] { body(b, e); });
  } catch (...) { // no more threads: the caller does the rest
  }
  body(bounds(0), bounds(1));
  if (started < chunks)
    body(bounds(started), count);
  for (auto &t : helpers)
    t.join();
}

} // namespace tcc::rt
