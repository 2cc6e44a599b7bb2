//===- CostModel.h - Predicted step time of a parallel training strategy --------===//
//
// An alpha-beta model: a message costs `latency` plus its bytes over `bandwidth`. Collectives
// use the cheaper of a ring (all_reduce: 2(n-1) steps moving 2(n-1)/n of the data) and, for
// all_reduce, a double binary tree (2 log2 n steps moving twice the data), as NCCL chooses per
// size. A step is predicted as the measured compute of one rank plus its collectives, without
// overlap (an upper bound when gradients are bucketed and overlapped with backward).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

namespace tcc {

struct LinkModel {
  double bytesPerSecond = 10e9;
  double latencySeconds = 5e-6;
};

/// Seconds for `count` collectives of `kind` ("all_reduce", "all_gather", "reduce_scatter",
/// "all_to_all") over `ranks` ranks whose operands total `operandBytes` (a rank's input; for
/// all_gather its block).
double collectiveSeconds(const std::string &kind, int64_t ranks, int64_t count,
                         int64_t operandBytes, const LinkModel &link);

} // namespace tcc
