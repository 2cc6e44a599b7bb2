//===- Plan.cpp - tcc plan: memory, communication and step time of a strategy ----===//
//
// For each candidate mesh and ZeRO stage: the training step is sharded and compiled (its
// collectives per step with their bytes, each rank's state and temporaries), one rank's
// compute is measured by running the single-process step at the rank's share of the batch
// (divided by tp for tensor parallelism; or --compute-ms, measured elsewhere), and the
// collectives are priced with the alpha-beta model of tcc/Training/CostModel.h. Pipeline
// stages (pp = S, M micro-batches) run at the pace of the costliest stage (its share of the
// forward's arithmetic, from the stage cuts), divide the dp/tp collectives and the stages'
// sends (each a message of the alpha-beta model) evenly over the stages, and the pipeline's
// fill and drain stretch a step by (M + S - 1) / M (GPipe and 1F1B alike). --scale-to predicts
// weak scaling past the ranks at hand from the same collective records.
//
//===----------------------------------------------------------------------===//
#include "tcc/Driver/Train.h"

#include "tcc/Runtime/tccrt.hpp"
#include "tcc/Training/Parallelism.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

namespace tcc {

namespace {

/// One collective record of a compiled train step (per step: `count` launches whose operands
/// total `bytes`), and how many of its group's ranks lie along dp and along tp.
struct CollectiveCost {
  std::string kind;
  int64_t count = 0, bytes = 0, dpRanks = 1, tpRanks = 1;
  /// Its seconds when the dp axis has `dp` ranks instead of the compiled count: an all_gather's
  /// operand is a rank's block, which shrinks as the group grows; the others' operands (whole
  /// gradients, activations) keep their size.
  double secondsAt(int64_t compiledDp, int64_t dp, const LinkModel &link) const {
    int64_t ranks = dpRanks > 1 ? dp * tpRanks : tpRanks;
    int64_t b = kind == "all_gather" && dpRanks > 1 ? bytes * compiledDp / dp : bytes;
    return collectiveSeconds(kind, ranks, count, b, link);
  }
};

struct Candidate {
  std::string mesh;  // "" for one rank
  int zero = 0;
  int64_t dp = 1, tp = 1, pp = 1, microBatches = 1;
  double largestStageShare = 1; // pipelines: the costliest stage's share of the compute
  std::vector<CollectiveCost> costs;
  /// The pipeline's stretch of a stage's work: S stages fill and drain around M micro-batches.
  double bubble() const { return double(microBatches + pp - 1) / double(microBatches); }
  // Results.
  bool ok = false;
  std::string error;
  uint64_t stateBytes = 0, arenaBytes = 0, memoryBytes = 0;
  int64_t collectives = 0, wireBytes = 0;
  double computeSeconds = 0, commSeconds = 0;
  double sendSeconds = 0; // pipeline stages' sends (in commSeconds), whatever the dp axis
  double stepSeconds() const { return computeSeconds + commSeconds; }
  std::string label() const {
    std::string s = mesh.empty() ? "1 rank" : mesh;
    return zero ? s + " zero " + std::to_string(zero) : s;
  }
};

/// Median seconds of a train step of `artifact` (random data) over `steps` runs.
double measureStep(const std::vector<uint8_t> &artifact, int threads, int steps) {
  tccrt::Program program = tccrt::Program::fromBuffer(artifact.data(), artifact.size(), threads);
  tccrt::Trainer trainer(program, 0);
  std::vector<tccrt::Tensor> batch = trainer.makeBatch();
  int64_t classes = configClasses(program);
  for (size_t i = 0; i < batch.size(); ++i) {
    tccrt::Tensor &t = batch[i];
    bool labels = i + 1 == batch.size();
    for (size_t k = 0; k < t.numElements(); ++k) {
      if (t.dtype() == TCCRT_F32)
        t.data<float>()[k] = labels ? 0.5f : static_cast<float>((k * 7919) % 255) / 255.0f;
      else if (t.dtype() == TCCRT_I64)
        t.data<int64_t>()[k] = classes > 0 ? static_cast<int64_t>(k % classes) : 0;
      else if (t.dtype() == TCCRT_I32)
        t.data<int32_t>()[k] = classes > 0 ? static_cast<int32_t>(k % classes) : 0;
    }
  }
  trainer.step(batch, 1e-3f); // warm-up (first-run allocations, packing)
  std::vector<double> times;
  for (int s = 0; s < steps; ++s) {
    auto start = std::chrono::steady_clock::now();
    trainer.step(batch, 1e-3f);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::string mib(uint64_t bytes) {
  char s[32];
  snprintf(s, sizeof s, "%.2f MiB", bytes / 1048576.0);
  return s;
}

} // namespace

int runPlan(const PlanArgs &plan, const TrainingArgs &trainingIn, const CompileOptions &compileIn) {
  if (trainingIn.batchSize < 1)
    throw Error("--batch-size must be given: the global batch the strategy splits");
  if (plan.link.bytesPerSecond <= 0 || plan.link.latencySeconds < 0)
    throw Error("--link-bandwidth must be positive and --link-latency non-negative");
  CompileOptions compile = compileIn;
  compile.progress = false;
  std::vector<Candidate> candidates;
  if (plan.search) {
    if (plan.devices < 1)
      throw Error("--search needs --devices N: the ranks to spread the training over");
    for (int64_t tp = 1; tp <= plan.devices && tp <= 8; tp *= 2) {
      if (plan.devices % tp)
        continue;
      int64_t dp = plan.devices / tp;
      std::string mesh = dp > 1 && tp > 1   ? "dp=" + std::to_string(dp) + ",tp=" + std::to_string(tp)
                         : dp > 1           ? "dp=" + std::to_string(dp)
                         : tp > 1           ? "tp=" + std::to_string(tp)
                                            : "";
      for (int zero : {0, 1, 3})
        if (zero == 0 || dp > 1)
          candidates.push_back({mesh, zero, dp, tp});
    }
  } else {
    Candidate c{trainingIn.mesh, trainingIn.zero};
    if (!c.mesh.empty()) {
      ParallelOptions p = parseMesh(c.mesh);
      c.dp = p.dp;
      c.tp = p.tp;
      c.pp = p.pp;
      c.microBatches = p.pp > 1 ? (trainingIn.microBatches ? trainingIn.microBatches : p.pp) : 1;
    }
    candidates.push_back(c);
  }

  std::map<int64_t, double> computeByLocalBatch; // measured once per local batch
  for (Candidate &c : candidates) {
    try {
      if (trainingIn.batchSize % c.dp)
        throw Error("the batch of " + std::to_string(trainingIn.batchSize) + " does not split over dp=" +
                    std::to_string(c.dp));
      TrainingArgs args = trainingIn;
      args.mesh = c.mesh;
      args.zero = c.zero;
      args.explainSharding = false;
      CompiledModel compiled = compileTrainingModel(plan.model, args, compile);
      for (const CompileReport::Entry &e : compiled.report.entries)
        if (e.name == "train_step" || e.name == "train_step/rank0")
          c.arenaBytes = e.arenaBytes;
      c.stateBytes = compiled.report.stateBytes;
      if (compiled.report.distributed) {
        const auto &d = *compiled.report.distributed;
        c.largestStageShare = d.largestStageShare;
        ParallelOptions mesh = parseMesh(c.mesh);
        for (const auto &col : d.collectives) {
          if (col.entry != "train_step")
            continue;
          if (col.kind == "send") { // pipeline stages: every crossing value one message
            c.collectives += col.count;
            c.wireBytes += col.wireBytes;
            double seconds = (col.count * plan.link.latencySeconds +
                              col.bytes / plan.link.bytesPerSecond) / c.pp * c.bubble();
            c.sendSeconds += seconds;
            c.commSeconds += seconds;
            continue;
          }
          CollectiveCost cost{col.kind, col.count, col.bytes};
          if (col.axes.find("dp") != std::string::npos)
            cost.dpRanks = mesh.dp;
          if (col.axes.find("tp") != std::string::npos)
            cost.tpRanks = mesh.tp;
          c.collectives += col.count;
          c.wireBytes += col.wireBytes;
          c.commSeconds += cost.secondsAt(c.dp, c.dp, plan.link) / c.pp;
          c.costs.push_back(cost);
        }
      }
      // Current and next state (the trainer double-buffers what a step updates) + temporaries.
      c.memoryBytes = 2 * c.stateBytes + c.arenaBytes;
      int64_t local = trainingIn.batchSize / c.dp;
      if (plan.computeSeconds > 0)
        computeByLocalBatch[local] = plan.computeSeconds;
      if (!computeByLocalBatch.count(local)) {
        TrainingArgs single = trainingIn;
        single.mesh.clear();
        single.zero = 0;
        single.shardingFile.clear();
        single.microBatches = 0;
        single.batchSize = local;
        CompiledModel one = compileTrainingModel(plan.model, single, compile);
        computeByLocalBatch[local] = measureStep(one.artifact, plan.threads, plan.steps);
      }
      // A pipeline runs at its costliest stage's pace (the micro-batches' smaller products and
      // extra launches are not priced).
      c.computeSeconds = computeByLocalBatch[local] / c.tp * c.largestStageShare * c.bubble();
      c.ok = true;
    } catch (const std::exception &e) {
      c.error = e.what();
    }
  }
  auto fits = [&](const Candidate &c) {
    return c.ok && (plan.memoryPerDevice <= 0 || c.memoryBytes <= (uint64_t)plan.memoryPerDevice);
  };
  const Candidate *best = nullptr;
  for (const Candidate &c : candidates)
    if (fits(c) && (!best || c.stepSeconds() < best->stepSeconds()))
      best = &c;

  // Weak scaling: each candidate's dp axis grown to the --scale-to rank counts.
  struct Scaled {
    const Candidate *from;
    int64_t ranks, dp;
    double commSeconds;
  };
  std::vector<Scaled> scaled;
  for (const Candidate &c : candidates)
    for (int64_t n : plan.scaleTo)
      if (c.ok && c.dp > 1 && n % (c.tp * c.pp) == 0) {
        Scaled s{&c, n, n / (c.tp * c.pp), c.sendSeconds};
        for (const CollectiveCost &cost : c.costs)
          s.commSeconds += cost.secondsAt(c.dp, s.dp, plan.link) / c.pp;
        scaled.push_back(s);
      }
  if (!plan.scaleTo.empty() && scaled.empty())
    throw Error("--scale-to grows a compiled data-parallel axis: give --mesh dp=N (N > 1) or "
                "--search, and rank counts that tp x pp divides");
  int64_t localBatch = trainingIn.batchSize;

  if (plan.json) {
    llvm::json::Array rows;
    for (const Candidate &c : candidates) {
      llvm::json::Object o{{"mesh", c.mesh}, {"zero", c.zero}, {"ranks", c.dp * c.tp * c.pp}};
      if (c.pp > 1)
        o["micro_batches"] = c.microBatches;
      if (!c.ok) {
        o["error"] = c.error;
      } else {
        o["state_bytes_per_rank"] = (int64_t)c.stateBytes;
        o["arena_bytes_per_rank"] = (int64_t)c.arenaBytes;
        o["memory_bytes_per_rank"] = (int64_t)c.memoryBytes;
        o["collectives_per_step"] = c.collectives;
        o["wire_bytes_per_step"] = c.wireBytes;
        o["compute_ms"] = c.computeSeconds * 1e3;
        o["communication_ms"] = c.commSeconds * 1e3;
        o["predicted_step_ms"] = c.stepSeconds() * 1e3;
        o["fits"] = fits(c);
        o["best"] = &c == best;
      }
      rows.push_back(std::move(o));
    }
    for (const Scaled &s : scaled) {
      double step = s.from->computeSeconds + s.commSeconds;
      rows.push_back(llvm::json::Object{
          {"predicted_scaling_from", s.from->label()}, {"zero", s.from->zero}, {"ranks", s.ranks},
          {"dp", s.dp}, {"global_batch", localBatch / s.from->dp * s.dp},
          {"compute_ms", s.from->computeSeconds * 1e3}, {"communication_ms", s.commSeconds * 1e3},
          {"predicted_step_ms", step * 1e3},
          {"samples_per_second", localBatch / s.from->dp * s.dp / step}});
    }
    std::cout << llvm::formatv("{0:2}", llvm::json::Value(std::move(rows))).str() << "\n";
    return best ? 0 : 1;
  }
  printf("link: %.3g GB/s, %.3g us latency (alpha-beta; ring or tree); compute measured on this "
         "machine with %d thread(s), step = compute + communication (no overlap)\n",
         plan.link.bytesPerSecond / 1e9, plan.link.latencySeconds * 1e6, plan.threads);
  printf("%-22s %5s %12s %12s %12s %6s %12s %10s %10s %10s %s\n", "strategy", "ranks",
         "state/rank", "temps/rank", "memory/rank", "colls", "sent/step", "compute", "comm",
         "step", "");
  for (const Candidate &c : candidates) {
    if (!c.ok) {
      printf("%-22s %5lld  error: %s\n", c.label().c_str(), (long long)(c.dp * c.tp * c.pp),
             c.error.c_str());
      continue;
    }
    printf("%-22s %5lld %12s %12s %12s %6lld %12s %8.3f ms %8.3f ms %8.3f ms %s%s\n",
           c.label().c_str(), (long long)(c.dp * c.tp * c.pp), mib(c.stateBytes).c_str(),
           mib(c.arenaBytes).c_str(), mib(c.memoryBytes).c_str(), (long long)c.collectives,
           mib(c.wireBytes).c_str(), c.computeSeconds * 1e3, c.commSeconds * 1e3,
           c.stepSeconds() * 1e3, fits(c) ? "" : "does not fit", &c == best && plan.search ? "  <- best" : "");
  }
  if (!scaled.empty()) {
    printf("\npredicted weak scaling (not measured): the dp axis grown, each rank's batch fixed; "
           "collectives extrapolated from the compiled program, one link model for every hop\n");
    printf("%-22s %6s %12s %10s %10s %10s %14s %10s\n", "from", "ranks", "global batch",
           "compute", "comm", "step", "samples/s", "efficiency");
    for (const Scaled &s : scaled) {
      const Candidate &c = *s.from;
      double step = c.computeSeconds + s.commSeconds;
      int64_t global = localBatch / c.dp * s.dp;
      printf("%-22s %6lld %12lld %8.3f ms %8.3f ms %8.3f ms %14.0f %9.0f%%\n", c.label().c_str(),
             (long long)s.ranks, (long long)global, c.computeSeconds * 1e3, s.commSeconds * 1e3,
             step * 1e3, global / step, 100 * c.computeSeconds / step);
    }
  }
  if (!best) {
    std::cerr << "tcc: no strategy fits --memory-per-device " << plan.memoryPerDevice << " bytes\n";
    return 1;
  }
  return 0;
}

} // namespace tcc
