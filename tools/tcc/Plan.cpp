//===- Plan.cpp - tcc plan: memory, communication and step time of a strategy ----===//
//
// For each candidate mesh and ZeRO stage: the training step is sharded and compiled (its
// collectives per step with their bytes, each rank's state and temporaries), one rank's
// compute is measured by running the single-process step at the rank's share of the batch
// (divided by tp for tensor parallelism), and the collectives are priced with the alpha-beta
// model of tcc/Training/CostModel.h.
//
//===----------------------------------------------------------------------===//
#include "Train.h"

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

struct Candidate {
  std::string mesh;  // "" for one rank
  int zero = 0;
  int64_t dp = 1, tp = 1;
  // Results.
  bool ok = false;
  std::string error;
  uint64_t stateBytes = 0, arenaBytes = 0, memoryBytes = 0;
  int64_t collectives = 0, wireBytes = 0;
  double computeSeconds = 0, commSeconds = 0;
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
        ParallelOptions mesh = parseMesh(c.mesh);
        for (const auto &col : d.collectives) {
          if (col.entry != "train_step")
            continue;
          int64_t ranks = 1;
          if (col.axes.find("dp") != std::string::npos)
            ranks *= mesh.dp;
          if (col.axes.find("tp") != std::string::npos)
            ranks *= mesh.tp;
          c.collectives += col.count;
          c.wireBytes += col.wireBytes;
          c.commSeconds += collectiveSeconds(col.kind, ranks, col.count, col.bytes, plan.link);
        }
      }
      // Current and next state (the trainer double-buffers what a step updates) + temporaries.
      c.memoryBytes = 2 * c.stateBytes + c.arenaBytes;
      int64_t local = trainingIn.batchSize / c.dp;
      if (!computeByLocalBatch.count(local)) {
        TrainingArgs single = trainingIn;
        single.mesh.clear();
        single.zero = 0;
        single.shardingFile.clear();
        single.batchSize = local;
        CompiledModel one = compileTrainingModel(plan.model, single, compile);
        computeByLocalBatch[local] = measureStep(one.artifact, plan.threads, plan.steps);
      }
      c.computeSeconds = computeByLocalBatch[local] / c.tp;
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

  if (plan.json) {
    llvm::json::Array rows;
    for (const Candidate &c : candidates) {
      llvm::json::Object o{{"mesh", c.mesh}, {"zero", c.zero}, {"ranks", c.dp * c.tp}};
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
      printf("%-22s %5lld  error: %s\n", c.label().c_str(), (long long)(c.dp * c.tp), c.error.c_str());
      continue;
    }
    printf("%-22s %5lld %12s %12s %12s %6lld %12s %8.3f ms %8.3f ms %8.3f ms %s%s\n",
           c.label().c_str(), (long long)(c.dp * c.tp), mib(c.stateBytes).c_str(),
           mib(c.arenaBytes).c_str(), mib(c.memoryBytes).c_str(), (long long)c.collectives,
           mib(c.wireBytes).c_str(), c.computeSeconds * 1e3, c.commSeconds * 1e3,
           c.stepSeconds() * 1e3, fits(c) ? "" : "does not fit", &c == best && plan.search ? "  <- best" : "");
  }
  if (!best) {
    std::cerr << "tcc: no strategy fits --memory-per-device " << plan.memoryPerDevice << " bytes\n";
    return 1;
  }
  return 0;
}

} // namespace tcc
