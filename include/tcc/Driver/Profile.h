//===- Profile.h - tcc profile: where a compiled model spends its time ----===//
//
// libtccrt times every launch of a CPU program (tccrt_set_profiling); this turns those times
// into what a person reads: a table of the launches by time with the model nodes each covers,
// totals per kind, and a Chrome trace (chrome://tracing, ui.perfetto.dev) of the timed runs.
#pragma once

#include "tcc/Driver/Execute.h"

#include <string>
#include <vector>

namespace tcc {

/// One timed run: when it started (seconds from the first timed run's start) and its
/// launches' times in that run.
struct ProfiledRun {
  double startSeconds = 0;
  std::vector<LaunchProfile> launches;
};

/// The report of `runs` (each with the program's launches in order; the last run's totals over
/// all runs). `top`: rows in the table (0: all).
struct ProfileReport {
  std::string table; // the text table with its header and the per-kind totals
  std::string json;  // the same as one JSON object
};
/// `peakBytes`: the peak of the host caching allocator, or (`onDevice`) of the GPU's.
ProfileReport profileReport(const std::vector<ProfiledRun> &runs, size_t top,
                            double medianRunMs, double meanRunMs, uint64_t peakBytes,
                            bool onDevice = false);

/// Chrome trace-event JSON: one complete event ("ph": "X") per launch per run, on one track;
/// args: kind and nodes.
std::string chromeTrace(const std::vector<ProfiledRun> &runs);

} // namespace tcc
