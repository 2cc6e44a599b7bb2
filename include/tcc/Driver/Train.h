//===- Train.h - `tcc compile --train`, `tcc train` and `tcc grad` --------===//
#pragma once

#include "tcc/Driver/Pipeline.h"

#include "tcc/Compiler/Compiler.h"
#include "tcc/Training/CostModel.h"
#include "tcc/Training/TrainingBuilder.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tccrt {
class Program;
}

namespace tcc {

/// The loss/optimizer options of `tcc compile --train` and `tcc train`, as given.
struct TrainingArgs {
  std::string loss = "cross-entropy";
  std::string optimizer = "adam";
  int64_t batchSize = 0; // 0: not given
  double momentum = 0, weightDecay = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool nesterov = false;
  double clipGradNorm = 0, labelSmoothing = 0;
  int64_t gradAccumulation = 1;
  double lossScale = 65536;         // --loss-scale (fp16: the initial dynamic loss scale)
  int64_t lossScaleGrowth = 2000;   // --loss-scale-growth (good steps before it doubles)
  std::string remat = "off";        // --remat off|auto: activation checkpointing
  int64_t memoryBudget = -1;        // --memory-budget BYTES of saved activations (-1: none)
  std::vector<std::string> trainable, freeze;
  std::string mesh;      // --mesh dp=N,tp=M: distributed training (tcc/Training/Parallelism.h)
  int zero = 0;          // --zero 1|2|3
  double bucketMb = 25;  // --bucket-mb
  std::string shardingFile; // --sharding-file
  int64_t microBatches = 0;  // --micro-batches (pipeline; 0: as many as stages)
  std::string pipelineSchedule = "1f1b"; // --pipeline-schedule gpipe|1f1b
  bool explainSharding = false;
  /// The options above that were given on the command line ("--loss", "--momentum", ...):
  /// with an artifact none may be, and optimizer-specific ones must fit the optimizer.
  std::vector<std::string> given;
};

/// Checks the combination (names, ranges, options that do not apply to the chosen loss or
/// optimizer) and converts it. Throws tcc::Error naming the option.
TrainingOptions trainingOptions(const TrainingArgs &args);

/// Loads `path`, fixes the first input's leading dimension to the batch size, builds the loss,
/// gradients and optimizer update, and compiles them into a training artifact.
CompiledModel compileTrainingModel(const ModelSource &source, const TrainingArgs &args,
                                   const CompileOptions &compile);

/// `tcc compile` (and the compiler's C API), `compile` checked already (checkCompileOptions,
/// before anything is read): a training artifact with `training` (compileTrainingModel), else an
/// inference artifact of the model loaded with `load` (the values of its given inputs may be
/// specialised on, those drawn at random not). The report's compileSeconds covers the whole.
CompiledModel compileModel(const ModelSource &source, LoadOptions load,
                           const TrainingArgs *training, const CompileOptions &compile);

struct TrainRunArgs {
  std::string model;  // .onnx, or a training artifact (.tcc)
  std::string dataDir;
  double lr = 0;
  int64_t epochs = 1;
  uint64_t seed = 0;
  bool seedGiven = false;
  int threads = 0;
  int64_t maxSteps = 0; // 0: no limit
  bool shuffle = true;
  std::string metricsPath, stepLogPath, saveModelPath, checkpointDir, resumeDir;
  int nproc = 0;                  // > 0: start this many ranks under mpirun
  double collectiveTimeout = 0;   // seconds; 0: the runtime's default
  std::string self;               // this executable (for --nproc)
};

int runTrain(const TrainRunArgs &run, const TrainingArgs &training, const CompileOptions &compile);

struct PlanArgs {
  std::string model;            // .onnx
  LinkModel link;
  int64_t memoryPerDevice = 0;  // bytes; 0: no limit
  int devices = 0;              // --search: the ranks to spread over
  bool search = false;
  int threads = 1;              // CPU threads of one rank when measuring compute
  int steps = 20;               // timed steps when measuring compute
  bool json = false;
  /// One rank's step time at its local batch, measured elsewhere (a GPU), instead of measuring
  /// the single-process step here; 0: measure.
  double computeSeconds = 0;
  /// Weak-scaling predictions: each candidate's dp axis grown to these rank counts, the local
  /// batch fixed (its collectives extrapolated from the compiled program's).
  std::vector<int64_t> scaleTo;
};

/// Cross-entropy's class count from a training artifact's config (0 when it does not say).
int64_t configClasses(const tccrt::Program &program);

/// `tcc plan`: per-rank memory, communication and predicted step time of a mesh and strategy
/// (tcc/Training/CostModel.h), or with --search the fastest that fits the memory.
int runPlan(const PlanArgs &plan, const TrainingArgs &training, const CompileOptions &compile);

struct GradArgs {
  std::string model, device = "cpu", outDir;
  LoadOptions load;
  size_t givenInputs = 0;
  int threads = 0;
};

/// `tcc grad`: the gradient of sum(output 0) with respect to every floating-point initializer,
/// written as OUT/grad_<initializer index>.pb.
int runGrad(const GradArgs &args, const CompileOptions &compile);

} // namespace tcc
