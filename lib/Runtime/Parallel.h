//===- Parallel.h - Splitting a loop over the runtime's threads -----------===//
//
// parallelFor(threads, count, costPerItem, body) calls body(begin, end) over [0, count) in up to
// `threads` contiguous chunks. Small loops (count x costPerItem below a threshold) run on the
// caller only. The chunks run on OpenMP threads: the same pool the generated kernels and
// OpenBLAS (OpenMP flavour) use, so the runtime never has two sets of threads competing for
// the cores. The body must not throw.
//
// Every parallel region has `threads` threads, however few chunks it has (the others wait at
// its end): libgomp ends the pool's surplus threads whenever a region asks for fewer threads
// than the one before, and starts new ones when a later region asks for more. Regions of
// varying sizes (a 2-chunk loop between the generated kernels' full-width regions) cost a
// thread creation each: on a 16-core VM that made 16 threads slower than one.
//
// Under ThreadSanitizer (the runtime-tsan preset) the chunks run on std::threads started and
// joined per call instead: GCC's libgomp is not instrumented, so TSan cannot see its fork and
// join and would take every access after a region for a race with the workers inside it. The
// chunks' own code, and races between chunks, are what TSan then checks.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#if defined(__SANITIZE_THREAD__)
#include <thread>
#include <vector>
#else
#include <omp.h>
#endif

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
#if defined(__SANITIZE_THREAD__)
  std::vector<std::thread> workers;
  for (int64_t i = 1; i < chunks; ++i)
    workers.emplace_back([&, i] { body(count * i / chunks, count * (i + 1) / chunks); });
  body(int64_t(0), count / chunks);
  for (std::thread &t : workers)
    t.join();
#else
#pragma omp parallel num_threads(std::max(threads, 1))
  {
    const int64_t team = omp_get_num_threads();
    for (int64_t i = omp_get_thread_num(); i < chunks; i += team)
      body(count * i / chunks, count * (i + 1) / chunks);
  }
#endif
}

/// Runs body(worker, item) for every item in [0, items) on up to `threads` workers, each taking
/// the next item as it finishes one (items of uneven cost balance themselves). `worker`
/// (< threads) names per-worker resources such as a workspace.
template <class Body> void parallelItems(int threads, int64_t items, const Body &body) {
  int workers = (int)std::min<int64_t>(std::max(threads, 1), items);
  std::atomic<int64_t> next{0};
  // One chunk per worker: the cost only has to exceed parallelFor's threshold. The region has
  // `threads` threads all the same (parallelFor says why).
  parallelFor(threads, workers, int64_t(1) << 40, [&](int64_t begin, int64_t end) {
    for (int64_t worker = begin; worker < end; ++worker)
      for (int64_t item; (item = next.fetch_add(1)) < items;)
        body(worker, item);
  });
}

} // namespace tcc::rt
