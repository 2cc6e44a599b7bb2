//===- Profile.cpp - tcc profile: tables and traces of launch times -------===//
#include "tcc/Driver/Profile.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>

namespace tcc {
namespace {

std::string format(const char *fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

/// At most `width` characters, an ellipsis marking a cut.
std::string clip(const std::string &s, size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

} // namespace

ProfileReport profileReport(const std::vector<ProfiledRun> &runs, size_t top,
                            double medianRunMs, double meanRunMs, uint64_t peakBytes,
                            bool onDevice) {
  ProfileReport report;
  const std::vector<LaunchProfile> &totals = runs.back().launches;
  double timedRuns = (double)std::max<uint64_t>(1, totals.empty() ? 1 : totals.front().calls);
  double launchSeconds = 0;
  for (const LaunchProfile &l : totals)
    launchSeconds += l.totalSeconds;
  double perRunMs = launchSeconds / timedRuns * 1e3;
  std::vector<size_t> order(totals.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return totals[a].totalSeconds > totals[b].totalSeconds;
  });
  size_t rows = top == 0 ? order.size() : std::min(top, order.size());

  std::string &t = report.table;
  t += std::to_string((size_t)timedRuns) + " timed runs: median " + format("%.3f", medianRunMs) +
       " ms, mean " + format("%.3f", meanRunMs) + " ms a run; its launches take " +
       format("%.3f", perRunMs) + " ms (" +
       format("%.0f", meanRunMs > 0 ? 100 * perRunMs / meanRunMs : 0) +
       "% of the mean; the rest is the runtime between launches)\n";
  t += std::string(onDevice ? "device" : "host") + " allocator peak: " +
       format("%.1f", peakBytes / 1048576.0) + " MiB\n";
  t += "  #  time%    ms/run  kind    launch (top " + std::to_string(rows) + " of " +
       std::to_string(order.size()) + ")\n";
  for (size_t r = 0; r < rows; ++r) {
    const LaunchProfile &l = totals[order[r]];
    double share = launchSeconds > 0 ? 100 * l.totalSeconds / launchSeconds : 0;
    char line[160];
    std::snprintf(line, sizeof line, "%3zu %5.1f%% %9.4f  %-6s  ", r + 1, share,
                  l.totalSeconds / timedRuns * 1e3, l.kind.c_str());
    t += line + clip(l.name, 70) + "\n";
    if (!l.nodes.empty())
      t += std::string(28, ' ') + "nodes: " + clip(l.nodes, 100) + "\n";
  }
  std::map<std::string, std::pair<double, size_t>> kinds;
  for (const LaunchProfile &l : totals) {
    kinds[l.kind].first += l.totalSeconds;
    kinds[l.kind].second += 1;
  }
  t += "by kind:";
  for (const auto &[kind, v] : kinds)
    t += " " + kind + " " +
         format("%.1f", launchSeconds > 0 ? 100 * v.first / launchSeconds : 0) + "% (" +
         std::to_string(v.second) + (v.second == 1 ? " launch)" : " launches)");
  t += "\n";

  std::string json;
  llvm::raw_string_ostream os(json);
  llvm::json::OStream j(os, 2);
  j.object([&] {
    j.attribute("runs", (int64_t)timedRuns);
    j.attribute("median_run_ms", medianRunMs);
    j.attribute("mean_run_ms", meanRunMs);
    j.attribute("launch_ms_per_run", perRunMs);
    j.attribute(onDevice ? "device_allocator_peak_bytes" : "host_allocator_peak_bytes",
                (int64_t)peakBytes);
    j.attributeArray("launches", [&] {
      for (size_t r = 0; r < order.size(); ++r) {
        const LaunchProfile &l = totals[order[r]];
        j.object([&] {
          j.attribute("index", (int64_t)order[r]);
          j.attribute("kind", l.kind);
          j.attribute("name", l.name);
          j.attribute("nodes", l.nodes);
          j.attribute("ms_per_run", l.totalSeconds / timedRuns * 1e3);
          j.attribute("share", launchSeconds > 0 ? l.totalSeconds / launchSeconds : 0.0);
        });
      }
    });
  });
  os << "\n";
  report.json = std::move(json);
  return report;
}

std::string chromeTrace(const std::vector<ProfiledRun> &runs) {
  std::string out;
  llvm::raw_string_ostream os(out);
  llvm::json::OStream j(os);
  j.object([&] {
    j.attribute("displayTimeUnit", "ms");
    j.attributeArray("traceEvents", [&] {
      for (size_t r = 0; r < runs.size(); ++r)
        for (const LaunchProfile &l : runs[r].launches)
          j.object([&] {
            j.attribute("name", l.name);
            j.attribute("cat", l.kind);
            j.attribute("ph", "X");
            j.attribute("ts", (runs[r].startSeconds + l.lastStartSeconds) * 1e6);
            j.attribute("dur", l.lastSeconds * 1e6);
            j.attribute("pid", 1);
            j.attribute("tid", 1);
            j.attributeObject("args", [&] {
              j.attribute("run", (int64_t)r);
              j.attribute("nodes", l.nodes);
            });
          });
    });
  });
  os << "\n";
  return out;
}

} // namespace tcc
