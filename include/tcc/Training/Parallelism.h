//===- Parallelism.h - Parallel training strategies as sharding annotations ------===//
//
// Data parallelism, ZeRO and Megatron tensor parallelism are not separate code paths: each is a
// choice of shardings for a training entry's arguments and results (the batch split over `dp`,
// optimizer state / gradient accumulators / parameters split over `dp` for ZeRO 1 / 2 / 3,
// column- then row-parallel weight pairs split over `tp`). The sharding pass
// (tcc/Passes/Shard.h) propagates them and inserts every collective, forward and backward.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Training/TrainingSpec.h"

#include <map>
#include <string>
#include <vector>

namespace tcc {

struct ParallelOptions {
  int64_t dp = 1; // data-parallel ranks: the batch is split over them
  int64_t tp = 1; // tensor-parallel ranks: Megatron pairs of weights are split over them
  int64_t pp = 1; // pipeline stages (tcc/Passes/Pipeline.h): the train step's micro-batches
                  // flow through them; the step must be built with micro-batches
  std::string schedule = "1f1b"; // pipeline schedule: gpipe or 1f1b
  int64_t bucketBytes = 25 << 20; // gradient buckets (one all_reduce each), PyTorch DDP's size
  int zero = 0;   // 0: state replicated; 1: optimizer state, 2: + gradient accumulators,
                  // 3: + parameters split over dp (gathered where used)
  /// Per-parameter shardings that override the presets (--sharding-file): parameter name ->
  /// per dim the mesh axes splitting it. Its optimizer state and accumulators follow it.
  std::map<std::string, std::vector<std::vector<std::string>>> overrides;
  bool enabled() const { return dp > 1 || tp > 1 || pp > 1; }
  /// "dp=2,tp=2", "dp=4 zero=3".
  std::string str() const;
};

/// Parses "dp=2", "tp=2", "pp=2", "dp=2,tp=2" (axes in any order, each at most once). Throws
/// tcc::Error.
ParallelOptions parseMesh(const std::string &text);

/// Reads a sharding file: a JSON object mapping parameter names to per-dim lists of mesh axes,
/// e.g. {"fc1.weight": [["tp"], []], "fc1.bias": [["tp"]]}. Throws tcc::Error naming the
/// file and the entry.
std::map<std::string, std::vector<std::vector<std::string>>> readShardingFile(const std::string &path);

/// With dp and tp of 1 (a pipeline alone), does nothing. Else sets the mesh (dp, tp) on every
/// entry's module and shardings on its @main arguments and results
/// (state shardings decided once, from train_step, and shared by every entry; eval's outputs
/// whole). Throws tcc::Error when the strategy does not fit (a batch the dp ranks do not
/// divide). `notes` receives one line per state tensor left whole that the strategy would split
/// (it does not divide) and per tensor-parallel pair found.
void annotateParallelism(TrainingSpec &spec, const ParallelOptions &options,
                         std::vector<std::string> *notes = nullptr);

/// Pipeline parallelism (options.pp > 1): train_step (built with micro-batches) becomes one
/// program per stage (tcc/Passes/Pipeline.h, options.schedule); every other entry runs whole on
/// every rank. On a spec partitionTraining sharded over dp and tp already, each of its per-rank
/// programs is cut alike: the mesh gains a last axis pp, inner rank r's stage s is rank
/// r * pp + s, and the gradient all-reduces are bucketed per stage (options.bucketBytes). Each
/// state tensor records the stage that updates it (StateSpec::pipelineStage). `notes` receives
/// the plan's decisions. Throws tcc::Error.
struct PipelineTraffic {
  int64_t values = 0, bytes = 0; // per step, crossing stages (sent once per stage reading them)
  double largestStageShare = 1;  // the costliest stage's share of the forward's arithmetic
};
PipelineTraffic pipelineTraining(TrainingSpec &spec, const ParallelOptions &options,
                                 std::vector<std::string> *notes = nullptr);

/// Shards an annotated spec: each entry becomes one program per rank (EntrySpec::rank), the
/// state records its splits, the spec its mesh. `report` (optional) gets each entry's
/// propagation decisions and rank 0's collectives, for --explain-sharding. Throws tcc::Error.
struct ShardingReport;
void partitionTraining(TrainingSpec &spec, const ParallelOptions &options,
                       std::vector<std::pair<std::string, ShardingReport>> *report = nullptr);

} // namespace tcc
