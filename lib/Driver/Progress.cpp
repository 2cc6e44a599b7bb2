//===- Progress.cpp - The training progress bar on stderr -----------------===//
#include "tcc/Driver/Progress.h"

#include <cmath>

namespace tcc {

std::string ProgressBar::format(int64_t epoch, int64_t numEpochs, int64_t step,
                                int64_t totalSteps, double runningLoss, double samplesPerSecond) {
  constexpr int kWidth = 24;
  int filled = totalSteps > 0 ? (int)(kWidth * step / totalSteps) : kWidth;
  std::string bar(filled, '=');
  if (filled < kWidth)
    bar += '>' + std::string(kWidth - filled - 1, ' ');
  char buf[256];
  snprintf(buf, sizeof buf, "epoch %lld/%lld [%s] step %lld/%lld  loss %.4f  %.0f samples/s",
           (long long)epoch, (long long)numEpochs, bar.c_str(), (long long)step,
           (long long)totalSteps, runningLoss, samplesPerSecond);
  return buf;
}

void ProgressBar::startEpoch(int64_t epoch, int64_t numEpochs, int64_t totalSteps,
                             int64_t startStep) {
  epoch_ = epoch;
  numEpochs_ = numEpochs;
  total_ = totalSteps;
  step_ = startStep;
  lastDecile_ = totalSteps > 0 ? 10 * startStep / totalSteps : 10;
  loss_ = rate_ = 0;
  start_ = lastDraw_ = std::chrono::steady_clock::now();
  drawn_ = false;
}

void ProgressBar::update(int64_t step, double runningLoss, int64_t samples) {
  step_ = step;
  loss_ = runningLoss;
  auto now = std::chrono::steady_clock::now();
  double elapsed = std::chrono::duration<double>(now - start_).count();
  rate_ = elapsed > 0 ? samples / elapsed : 0;
  if (interactive_) {
    if (drawn_ && step != total_ && now - lastDraw_ < std::chrono::milliseconds(100))
      return;
    fprintf(out_, "\r%s\x1b[K", format(epoch_, numEpochs_, step_, total_, loss_, rate_).c_str());
    fflush(out_);
    lastDraw_ = now;
    drawn_ = true;
    return;
  }
  int64_t decile = total_ > 0 ? 10 * step / total_ : 10;
  if (decile == lastDecile_ || decile >= 10)
    return; // the last step's line comes with finishEpoch's summary
  lastDecile_ = decile;
  fprintf(out_, "%s\n", format(epoch_, numEpochs_, step_, total_, loss_, rate_).c_str());
  fflush(out_);
}

void ProgressBar::finishEpoch(const std::string &summary) {
  std::string line = format(epoch_, numEpochs_, step_, total_, loss_, rate_);
  if (interactive_)
    fprintf(out_, "\r%s  %s\x1b[K\n", line.c_str(), summary.c_str());
  else
    fprintf(out_, "%s  %s\n", line.c_str(), summary.c_str());
  fflush(out_);
}

} // namespace tcc
