//===- Progress.h - The training progress bar on stderr -------------------===//
//
// On a terminal the bar redraws one line in place (at most ~10 times a second); otherwise (a
// log file, CI) it prints a line per ~10% of the epoch, so logs stay short.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tcc {

class ProgressBar {
public:
  /// `out` is where to draw (stderr); `interactive` whether it is a terminal.
  ProgressBar(FILE *out, bool interactive) : out_(out), interactive_(interactive) {}

  /// Starts an epoch of `totalSteps` steps (the first `startStep` already done, e.g. resumed).
  void startEpoch(int64_t epoch, int64_t numEpochs, int64_t totalSteps, int64_t startStep = 0);
  /// Reports that step `step` (1-based within the epoch) finished; `runningLoss` is the mean loss
  /// of the epoch so far and `samples` the samples trained since startEpoch.
  void update(int64_t step, double runningLoss, int64_t samples);
  /// Ends the epoch's line with `summary` (e.g. the test metrics).
  void finishEpoch(const std::string &summary);

  /// The line drawn for a state (no terminal control characters): for tests.
  static std::string format(int64_t epoch, int64_t numEpochs, int64_t step, int64_t totalSteps,
                            double runningLoss, double samplesPerSecond);

private:
  FILE *out_;
  bool interactive_;
  int64_t epoch_ = 0, numEpochs_ = 0, total_ = 0, step_ = 0, lastDecile_ = -1;
  double loss_ = 0, rate_ = 0;
  std::chrono::steady_clock::time_point start_, lastDraw_;
  bool drawn_ = false;
};

} // namespace tcc
