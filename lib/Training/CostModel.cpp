//===- CostModel.cpp - Predicted step time of a parallel training strategy -------===//
#include "tcc/Training/CostModel.h"

#include <algorithm>
#include <cmath>

namespace tcc {

double collectiveSeconds(const std::string &kind, int64_t ranks, int64_t count,
                         int64_t operandBytes, const LinkModel &link) {
  if (ranks <= 1 || count <= 0)
    return 0;
  double n = static_cast<double>(ranks), bytes = static_cast<double>(operandBytes);
  double a = link.latencySeconds, b = 1 / link.bytesPerSecond;
  if (kind == "all_reduce") {
    double ring = 2 * (n - 1) * a * count + 2 * (n - 1) / n * bytes * b;
    double tree = 2 * std::ceil(std::log2(n)) * a * count + 2 * bytes * b;
    return std::min(ring, tree);
  }
  if (kind == "all_gather") // each rank's block goes to the n - 1 others
    return (n - 1) * a * count + (n - 1) * bytes * b;
  // reduce_scatter, all_to_all: (n - 1)/n of the operand leaves each rank.
  return (n - 1) * a * count + (n - 1) / n * bytes * b;
}

} // namespace tcc
