//===- Train.cpp - `tcc compile --train`, `tcc train` ---------------------===//
//
// `tcc train` drives a training artifact through libtccrt's trainer API (tccrt.h, section
// "Training"): batches in a documented order (Data.h: epochOrder), the test set evaluated after
// every epoch, checkpoints that carry the trainer's state plus this driver's position, and the
// trained parameters written back into the ONNX model.
//
//===----------------------------------------------------------------------===//
#include "tcc/Driver/Train.h"

#include "tcc/Driver/Data.h"
#include "tcc/Driver/Execute.h"
#include "tcc/Driver/Progress.h"

#include "tcc/Passes/Shard.h"
#include "tcc/Runtime/tccrt.hpp"
#include "tcc/Training/Launcher.h"
#include "tcc/Training/Parallelism.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;

namespace tcc {

namespace {

bool given(const TrainingArgs &args, const std::string &option) {
  return std::find(args.given.begin(), args.given.end(), option) != args.given.end();
}

/// Runs `f`, prefixing a runtime failure's message with `what`.
template <class F> auto withContext(const std::string &what, F &&f) {
  try {
    return f();
  } catch (const tccrt::Error &e) {
    throw Error(what + ": " + e.what());
  }
}

/// JSON for a double: shortest round-trip-safe text for floats, null for NaN/inf (JSON has none).
std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[40];
  snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void writeTextFile(const std::string &path, const std::string &text) {
  std::ofstream f(path, std::ios::binary);
  if (!(f << text) || !(f.close(), f))
    throw Error("cannot write '" + path + "'");
}

} // namespace

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

TrainingOptions trainingOptions(const TrainingArgs &args) {
  TrainingOptions o;
  if (args.loss == "cross-entropy")
    o.loss = LossKind::CrossEntropy;
  else if (args.loss == "mse")
    o.loss = LossKind::MSE;
  else
    throw Error("unknown --loss '" + args.loss + "': expected cross-entropy or mse");
  if (args.optimizer == "sgd")
    o.optimizer = OptimizerKind::SGD;
  else if (args.optimizer == "adam")
    o.optimizer = OptimizerKind::Adam;
  else if (args.optimizer == "adamw")
    o.optimizer = OptimizerKind::AdamW;
  else
    throw Error("unknown --optimizer '" + args.optimizer + "': expected sgd, adam or adamw");

  bool sgd = o.optimizer == OptimizerKind::SGD;
  for (const char *opt : {"--momentum", "--nesterov"})
    if (given(args, opt) && !sgd)
      throw Error(std::string(opt) + " applies to --optimizer sgd, not " + args.optimizer);
  for (const char *opt : {"--beta1", "--beta2", "--eps"})
    if (given(args, opt) && sgd)
      throw Error(std::string(opt) + " applies to --optimizer adam and adamw, not sgd");
  if (given(args, "--label-smoothing") && o.loss != LossKind::CrossEntropy)
    throw Error("--label-smoothing applies to --loss cross-entropy, not " + args.loss);

  auto check = [](bool ok, const std::string &what) {
    if (!ok)
      throw Error(what);
  };
  check(args.momentum >= 0 && args.momentum < 1, "--momentum must be in [0, 1)");
  check(!args.nesterov || args.momentum > 0, "--nesterov needs --momentum > 0");
  check(args.weightDecay >= 0, "--weight-decay must be non-negative");
  check(args.beta1 >= 0 && args.beta1 < 1, "--beta1 must be in [0, 1)");
  check(args.beta2 >= 0 && args.beta2 < 1, "--beta2 must be in [0, 1)");
  check(args.eps > 0, "--eps must be positive");
  check(args.clipGradNorm >= 0, "--clip-grad-norm must be non-negative (0: no clipping)");
  check(args.labelSmoothing >= 0 && args.labelSmoothing < 1, "--label-smoothing must be in [0, 1)");
  check(args.gradAccumulation >= 1, "--grad-accumulation must be at least 1");
  check(args.lossScale > 0 && std::isfinite(args.lossScale), "--loss-scale must be positive");
  check(args.lossScaleGrowth >= 1, "--loss-scale-growth must be at least 1");

  o.momentum = args.momentum;
  o.nesterov = args.nesterov;
  o.weightDecay = args.weightDecay;
  o.beta1 = args.beta1;
  o.beta2 = args.beta2;
  o.epsilon = args.eps;
  o.clipGradNorm = args.clipGradNorm;
  o.labelSmoothing = args.labelSmoothing;
  o.gradAccumulation = args.gradAccumulation;
  o.initialLossScale = args.lossScale;
  o.lossScaleGrowthInterval = args.lossScaleGrowth;
  o.trainable.insert(args.trainable.begin(), args.trainable.end());
  o.frozen.insert(args.freeze.begin(), args.freeze.end());
  return o;
}

namespace {

/// --mesh/--zero: the strategy's shardings, then one program per rank; --explain-sharding
/// prints the decisions and the collectives of rank 0 with their bytes per step.
void shardTraining(TrainingSpec &spec, const TrainingArgs &args,
                   std::vector<CompileReport::Distributed::Collectives> &collectives,
                   PipelineTraffic &pipeline) {
  ParallelOptions parallel = parseMesh(args.mesh);
  parallel.zero = args.zero;
  parallel.schedule = args.pipelineSchedule;
  if (!args.shardingFile.empty())
    parallel.overrides = readShardingFile(args.shardingFile);
  if (parallel.zero && parallel.dp < 2)
    throw Error("--zero " + std::to_string(parallel.zero) + " splits state over the data-parallel "
                "ranks: give --mesh dp=N with N >= 2");
  std::vector<std::string> notes;
  annotateParallelism(spec, parallel, &notes);
  std::vector<std::pair<std::string, ShardingReport>> reports;
  parallel.bucketBytes = static_cast<int64_t>(args.bucketMb * (1 << 20));
  partitionTraining(spec, parallel, &reports);
  std::ostream &os = std::cerr;
  if (args.explainSharding && (parallel.dp > 1 || parallel.tp > 1)) {
    os << "sharding: " << parallel.str() << "\n";
    for (const std::string &n : notes)
      os << "  " << n << "\n";
  }
  if (parallel.pp > 1) {
    std::vector<std::string> stageNotes;
    pipeline = pipelineTraining(spec, parallel, &stageNotes);
    CompileReport::Distributed::Collectives sends;
    sends.entry = "train_step";
    sends.kind = "send";
    sends.axes = "pp";
    sends.count = pipeline.values;
    sends.bytes = sends.wireBytes = pipeline.bytes;
    collectives.push_back(sends);
    if (args.explainSharding) {
      os << "pipeline: " << parallel.str() << "\n";
      for (const std::string &n : stageNotes)
        os << "  " << n << "\n";
    }
  }
  for (const auto &[entry, report] : reports) {
    // Per step, by kind and axes: what the report records and the explanation totals.
    std::map<std::pair<std::string, std::string>, CompileReport::Distributed::Collectives> byKind;
    for (const CollectiveRecord &c : report.collectives) {
      auto &k = byKind[{c.kind, c.axes}];
      k.entry = entry;
      k.kind = c.kind;
      k.axes = c.axes;
      k.count += 1;
      k.bytes += c.bytes;
      k.wireBytes += c.wireBytes;
    }
    for (auto &[key, k] : byKind)
      collectives.push_back(k);
    if (!args.explainSharding)
      continue;
    os << "entry " << entry << ": propagation\n";
    for (const std::string &d : report.decisions)
      os << "  " << d << "\n";
    os << "entry " << entry << ": collectives of rank 0 (bytes one rank contributes per step)\n";
    for (const CollectiveRecord &c : report.collectives)
      os << "  " << c.kind << " over " << c.axes << ": " << c.bytes << " bytes (sends "
         << c.wireBytes << "), " << c.value << "\n";
    for (const auto &[key, k] : byKind)
      os << "  total " << k.kind << " over " << k.axes << ": " << k.count
         << " collectives, a rank sends " << k.wireBytes << " bytes (ring algorithms)\n";
  }
}

} // namespace

CompiledModel compileTrainingModel(const ModelSource &source, const TrainingArgs &args,
                                   const CompileOptions &compile) {
  TrainingOptions options = trainingOptions(args);
  options.precision = compile.precision;
  for (const char *opt : {"--loss-scale", "--loss-scale-growth"})
    if (given(args, opt) && options.precision != "fp16")
      throw Error(std::string(opt) + " applies to --precision fp16 (dynamic loss scaling), not " +
                  options.precision);
  if (options.precision == "fp16" && !args.mesh.empty())
    throw Error("--precision fp16 with --mesh: each rank would decide alone whether to skip a "
                "step of non-finite gradients (the loss scale is not agreed across ranks yet); "
                "bf16 needs no loss scaling and works with --mesh");
  if (args.batchSize < 1)
    throw Error("--batch-size must be given and at least 1 (it fixes the first input's leading "
                "dimension)");
  onnx::ModelProto model = source.load();
  std::vector<GraphInput> inputs = graphInputs(model);
  if (inputs.empty())
    throw Error("the model has no graph inputs: there is nothing to feed training data to");
  PrepareOptions prepare;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GraphInput &in = inputs[i];
    if (i == 0 && in.dims.empty())
      throw Error("input '" + in.name + "' is a scalar: the first input needs a leading batch "
                  "dimension");
    Shape shape;
    for (size_t d = 0; d < in.dims.size(); ++d) {
      if (i == 0 && d == 0) {
        shape.push_back(args.batchSize);
        continue;
      }
      if (in.dims[d] < 0)
        throw Error("input '" + in.name + "' has a dynamic dimension " + std::to_string(d) +
                    ": training needs every dimension but the first input's leading (batch) "
                    "one fixed in the model");
      shape.push_back(in.dims[d]);
    }
    prepare.inputShapes[in.name] = shape;
  }
  // Pipeline stages: the train step runs the model once per micro-batch, so it is prepared at
  // the micro-batch size too.
  ParallelOptions mesh = args.mesh.empty() ? ParallelOptions() : parseMesh(args.mesh);
  int64_t stages = mesh.pp;
  if (args.microBatches && stages < 2)
    throw Error("--micro-batches applies to pipeline parallelism: give --mesh pp=N");
  options.microBatches = stages > 1 ? (args.microBatches ? args.microBatches : stages) : 1;
  // With data parallelism too, each data-parallel rank's rows are cut into the micro-batches.
  options.microBatchShards = stages > 1 ? mesh.dp : 1;
  std::optional<onnx::ModelProto> microModel;
  if (options.microBatches > 1) {
    if (args.batchSize % (options.microBatches * options.microBatchShards))
      throw Error("--batch-size " + std::to_string(args.batchSize) + " does not split into " +
                  (mesh.dp > 1 ? std::to_string(mesh.dp) + " data-parallel ranks of " : "") +
                  std::to_string(options.microBatches) + " micro-batches");
    microModel = model;
    PrepareOptions micro = prepare;
    micro.inputShapes[inputs[0].name][0] = args.batchSize / options.microBatches;
    prepareOnnxModel(*microModel, micro);
  }
  prepareOnnxModel(model, prepare);
  mlir::MLIRContext context;
  context.disableMultithreading();
  TrainingSpec spec =
      buildTraining(context, model, options, {}, microModel ? &*microModel : nullptr);
  std::vector<CompileReport::Distributed::Collectives> collectives;
  if (args.mesh.empty() && (!args.shardingFile.empty() || args.zero))
    throw Error(std::string(args.zero ? "--zero" : "--sharding-file") +
                " applies to distributed training: give --mesh");
  PipelineTraffic pipeline;
  if (!args.mesh.empty())
    shardTraining(spec, args, collectives, pipeline);
  CompileOptions checkpointed = compile;
  checkpointed.remat = args.remat == "auto" || args.memoryBudget >= 0;
  checkpointed.memoryBudget = args.memoryBudget;
  CompiledModel compiled = compileTraining(spec, checkpointed);
  if (compiled.report.distributed) {
    compiled.report.distributed->collectives = collectives;
    compiled.report.distributed->stages = mesh.pp;
    compiled.report.distributed->microBatches = options.microBatches;
    compiled.report.distributed->largestStageShare = pipeline.largestStageShare;
  }
  return compiled;
}

CompiledModel compileModel(const ModelSource &source, LoadOptions load,
                           const TrainingArgs *training, const CompileOptions &compile) {
  auto start = std::chrono::steady_clock::now();
  CompiledModel compiled;
  if (training) {
    compiled = compileTrainingModel(source, *training, compile);
  } else {
    load.specializeOnRandomInputs = false; // the artifact must not bake in arbitrary values
    LoadedModel model = loadModel(source, load);
    compiled = compileLoaded(model, load.inputs.size(), compile);
  }
  compiled.report.compileSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return compiled;
}

//===----------------------------------------------------------------------===//
// The trainer
//===----------------------------------------------------------------------===//

namespace {

/// Where a run stands: what a checkpoint stores beside the trainer's own state (user_data).
struct Position {
  int64_t epoch = 0;  // 0-based epoch to run next (or the one in progress)
  int64_t batch = 0;  // batches of that epoch already trained
  uint64_t seed = 0;
  int64_t batchSize = 0, trainSamples = 0;
  bool shuffle = true;
  std::vector<float> stepLosses; // every micro-batch's loss so far
  struct Epoch {
    int64_t epoch;
    double trainLoss, testLoss, testAccuracy, seconds;
    uint64_t steps;
    /// This process's host allocator peak at the epoch's end (for --metrics; not checkpointed:
    /// 0 for epochs of a resumed run's history).
    uint64_t hostPeakBytes = 0;
    /// fp16 training: the dynamic loss scale and the optimizer steps skipped for non-finite
    /// gradients so far, at the epoch's end (for --metrics; in the trainer's checkpointed state,
    /// not in this record: a resumed run's earlier epochs have none). Negative: none.
    double lossScale = -1;
    int64_t skippedSteps = -1;
  };
  std::vector<Epoch> history; // completed epochs

  /// Plain text with hex floats (exact round trip).
  std::string serialize() const {
    std::ostringstream os;
    char buf[64];
    os << "tcc-train-position 1\n"
       << "epoch " << epoch << "\nbatch " << batch << "\nseed " << seed << "\nbatch_size "
       << batchSize << "\ntrain_samples " << trainSamples << "\nshuffle " << shuffle
       << "\nlosses " << stepLosses.size() << "\n";
    for (float l : stepLosses) {
      snprintf(buf, sizeof buf, "%a\n", (double)l);
      os << buf;
    }
    os << "history " << history.size() << "\n";
    for (const Epoch &e : history) {
      os << e.epoch;
      for (double v : {e.trainLoss, e.testLoss, e.testAccuracy, e.seconds}) {
        snprintf(buf, sizeof buf, " %a", v);
        os << buf;
      }
      os << " " << e.steps << "\n";
    }
    return os.str();
  }

  static Position parse(const std::string &text, const std::string &what) {
    std::istringstream is(text);
    std::string word;
    int version = 0;
    Position p;
    auto expect = [&](const char *key) {
      if (!(is >> word) || word != key)
        throw Error(what + ": not a checkpoint written by `tcc train` (expected '" + key + "')");
    };
    auto number = [&](auto &v) {
      if (!(is >> v))
        throw Error(what + ": damaged position record");
    };
    auto real = [&]() {
      if (!(is >> word))
        throw Error(what + ": damaged position record");
      return std::strtod(word.c_str(), nullptr);
    };
    expect("tcc-train-position");
    number(version);
    if (version != 1)
      throw Error(what + ": position record version " + std::to_string(version) + " (this tcc "
                  "reads version 1)");
    size_t count = 0;
    expect("epoch"); number(p.epoch);
    expect("batch"); number(p.batch);
    expect("seed"); number(p.seed);
    expect("batch_size"); number(p.batchSize);
    expect("train_samples"); number(p.trainSamples);
    expect("shuffle"); number(p.shuffle);
    expect("losses"); number(count);
    for (size_t i = 0; i < count; ++i)
      p.stepLosses.push_back((float)real());
    expect("history"); number(count);
    for (size_t i = 0; i < count; ++i) {
      Epoch e;
      number(e.epoch);
      e.trainLoss = real();
      e.testLoss = real();
      e.testAccuracy = real();
      e.seconds = real();
      number(e.steps);
      p.history.push_back(e);
    }
    return p;
  }
};

std::string metricsJson(const std::vector<Position::Epoch> &history) {
  std::string s = "[";
  for (size_t i = 0; i < history.size(); ++i) {
    const Position::Epoch &e = history[i];
    s += std::string(i ? ",\n " : "\n ") + "{\"epoch\": " + std::to_string(e.epoch) +
         ", \"train_loss\": " + jsonNumber(e.trainLoss) + ", \"test_loss\": " +
         jsonNumber(e.testLoss) + ", \"test_accuracy\": " + jsonNumber(e.testAccuracy) +
         ", \"seconds\": " + jsonNumber(e.seconds) + ", \"steps\": " + std::to_string(e.steps) +
         ", \"host_peak_bytes\": " +
         (e.hostPeakBytes ? std::to_string(e.hostPeakBytes) : std::string("null")) +
         (e.lossScale >= 0 ? ", \"loss_scale\": " + jsonNumber(e.lossScale) +
                                 ", \"skipped_steps\": " + std::to_string(e.skippedSteps)
                           : std::string()) +
         "}";
  }
  return s + "\n]\n";
}

std::string stepLogJson(const std::vector<float> &losses) {
  std::string s = "[";
  for (size_t i = 0; i < losses.size(); ++i)
    s += (i ? (i % 8 ? ", " : ",\n ") : "") + jsonNumber(losses[i]);
  return s + "]\n";
}

/// Copies the samples `rows` of `source` ([N, ...], row-major) into `dst` (same dtype).
void gatherRows(const Tensor &source, const int64_t *rows, int64_t count, void *dst) {
  size_t rowBytes = source.byteSize() / std::max<int64_t>(source.dim(0), 1);
  auto *out = static_cast<uint8_t *>(dst);
  const auto *src = static_cast<const uint8_t *>(source.raw());
  for (int64_t r = 0; r < count; ++r)
    std::memcpy(out + r * rowBytes, src + rows[r] * rowBytes, rowBytes);
}

DType dtypeOf(tccrt_dtype d) { return static_cast<DType>(d); } // same numbering

std::string describe(const tccrt::TensorInfo &info) {
  return shapeToString(info.shape) + "x" + dtypeName(dtypeOf(info.dtype));
}

/// The mean per-sample loss and accuracy (NaN without class predictions) over the whole test
/// set. The last batch is padded with copies of the first sample; the padding's outputs are
/// ignored.
std::pair<double, double> evaluate(tccrt::Trainer &trainer, const Dataset &test,
                                   const Tensor &labels, int64_t batchSize) {
  // Distributed artifacts: this rank feeds its block of each global batch and gets the outputs
  // of the whole global batch.
  std::vector<tccrt::Tensor> batch = trainer.makeBatch();
  int64_t localBatch = batchSize / trainer.dataParallel();
  int64_t first = trainer.dataPosition() * localBatch;
  int64_t labelsPer = (int64_t)batch[1].numElements() / localBatch;
  bool classification = trainer.numEvalOutputs() >= 2;
  double lossSum = 0;
  int64_t correct = 0, counted = 0;
  std::vector<int64_t> rows(batchSize);
  for (int64_t start = 0; start < test.size(); start += batchSize) {
    int64_t valid = std::min(batchSize, test.size() - start);
    for (int64_t r = 0; r < batchSize; ++r)
      rows[r] = r < valid ? start + r : 0;
    gatherRows(test.images, rows.data() + first, localBatch, batch[0].data());
    gatherRows(labels, rows.data() + first, localBatch, batch[1].data());
    std::vector<tccrt::Tensor> out = withContext("evaluation", [&] { return trainer.eval(batch); });
    if (out[0].dtype() != TCCRT_F32 || (int64_t)out[0].numElements() != batchSize * labelsPer)
      throw Error("the artifact's eval loss output is not f32 of the labels' shape");
    const float *loss = out[0].data<float>();
    for (int64_t k = 0; k < valid * labelsPer; ++k)
      lossSum += loss[k];
    if (classification) {
      const int64_t *pred = out[1].data<int64_t>();
      for (int64_t k = 0; k < valid * labelsPer; ++k)
        correct += pred[k] == labels.getInt(rows[k / labelsPer] * labelsPer + k % labelsPer);
    }
    counted += valid * labelsPer;
  }
  return {counted ? lossSum / counted : NAN,
          classification && counted ? (double)correct / counted : NAN};
}


/// Checks that `data` fits the trainer's batch tensors and that class labels lie in
/// [0, classes) (`classes` 0: unknown, only negatives are caught); returns the labels converted
/// to the trainer's label dtype.
Tensor checkData(const tccrt::Trainer &trainer, const Dataset &data, const std::string &split,
                 int64_t classes) {
  tccrt::TensorInfo img = trainer.batchInfo(0), lab = trainer.batchInfo(1);
  if (img.shape.empty())
    throw Error("the model's first input '" + img.name + "' has no batch dimension");
  int64_t batch = img.shape[0];
  if (img.dtype != TCCRT_F32)
    throw Error("the model's first input '" + img.name + "' is " + describe(img) +
                ": tcc train feeds images as f32");
  Shape sample(img.shape.begin() + 1, img.shape.end());
  Shape have(data.images.shape().begin() + 1, data.images.shape().end());
  if (numElements(sample) != numElements(have))
    throw Error("the model's input '" + img.name + "' takes " + shapeToString(sample) +
                " per sample (" + std::to_string(numElements(sample)) + " values), but the " +
                split + " images are " + shapeToString(have) + " (" +
                std::to_string(numElements(have)) + " values)");
  if (lab.shape.empty() || lab.shape[0] != batch)
    throw Error("the artifact's labels '" + lab.name + "' are " + describe(lab) +
                ", expected a leading batch dimension of " + std::to_string(batch));
  Shape labSample(lab.shape.begin() + 1, lab.shape.end());
  Shape haveLab(data.labels.shape().begin() + 1, data.labels.shape().end());
  if (numElements(labSample) != numElements(haveLab))
    throw Error("the model's labels take " + shapeToString(labSample) + " per sample, but the " +
                split + " labels are " + shapeToString(haveLab) +
                (labSample.empty() ? "" : " (MSE targets have the model output's shape)"));
  DType want = dtypeOf(lab.dtype);
  if (isInteger(want) != isInteger(data.labels.dtype()))
    throw Error(std::string("the model takes ") + (isInteger(want) ? "integer class" : "float") +
                " labels, but the " + split + " labels are " + dtypeName(data.labels.dtype()));
  if (isInteger(want))
    for (int64_t i = 0; i < data.labels.numElements(); ++i) {
      int64_t label = data.labels.getInt(i);
      if (label < 0 || (classes > 0 && label >= classes))
        throw Error("the " + split + " labels hold class " + std::to_string(label) +
                    " (sample " + std::to_string(i / std::max<int64_t>(numElements(haveLab), 1)) +
                    "), outside the model's " +
                    (classes > 0 ? std::to_string(classes) + " classes [0, " +
                                       std::to_string(classes) + ")"
                                 : std::string("classes (negative)")));
    }
  if (want == data.labels.dtype())
    return data.labels;
  Tensor out(want, data.labels.shape());
  visitDType(want, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T>) {
      for (int64_t i = 0; i < out.numElements(); ++i)
        out.data<T>()[i] = static_cast<T>(data.labels.getDouble(i));
    } else {
      throw Error(std::string("labels of type ") + dtypeName(want) + " are not supported");
    }
  });
  return out;
}

/// fp16 training's loss scale and skipped-step count (TCCRT_STATE_LOSS_SCALE state), into `e`.
void readLossScale(const tccrt::Trainer &trainer, Position::Epoch &e) {
  for (size_t i = 0; i < trainer.numState(); ++i) {
    tccrt_state_kind kind;
    tccrt::TensorInfo info = trainer.stateInfo(i, &kind);
    if (kind != TCCRT_STATE_LOSS_SCALE)
      continue;
    tccrt::Tensor value = trainer.getState(i);
    if (info.name == "loss_scale" && info.dtype == TCCRT_F32)
      e.lossScale = *static_cast<const float *>(value.data());
    else if (info.name == "loss_scale.skipped_steps" && info.dtype == TCCRT_I64)
      e.skippedSteps = *static_cast<const int64_t *>(value.data());
  }
}

void saveModel(const std::string &modelPath, const std::string &outPath,
               const tccrt::Trainer &trainer) {
  onnx::ModelProto model = loadOnnxModel(modelPath);
  auto *inits = model.mutable_graph()->mutable_initializer();
  size_t replaced = 0;
  for (size_t i = 0; i < trainer.numState(); ++i) {
    tccrt_state_kind kind;
    tccrt::TensorInfo info = trainer.stateInfo(i, &kind);
    if (kind != TCCRT_STATE_PARAMETER && kind != TCCRT_STATE_BUFFER)
      continue;
    int index = -1;
    for (int k = 0; k < inits->size(); ++k)
      if (inits->Get(k).name() == info.name)
        index = k;
    if (index < 0)
      throw Error("--save-model: the trained parameter '" + info.name + "' is not an "
                  "initializer of '" + modelPath + "'");
    Tensor original = tensorFromProto(inits->Get(index));
    if (original.shape() != info.shape || original.dtype() != dtypeOf(info.dtype))
      throw Error("--save-model: initializer '" + info.name + "' is " + original.typeString() +
                  " in '" + modelPath + "' but " + describe(info) + " in the trainer");
    tccrt::Tensor value = trainer.getState(i);
    onnx::TensorProto proto =
        tensorToProto(Tensor(original.dtype(), original.shape(), value.data()), info.name);
    proto.set_doc_string(inits->Get(index).doc_string());
    *inits->Mutable(index) = std::move(proto);
    ++replaced;
  }
  std::ofstream f(outPath, std::ios::binary);
  if (!model.SerializeToOstream(&f) || !(f.close(), f))
    throw Error("cannot write '" + outPath + "'");
  std::cerr << "tcc: wrote " << outPath << " (" << replaced << " trained initializers)\n";
}

const char *kCheckpointFile = "trainer.ckpt";

/// --nproc N: compiles an .onnx model once (it needs --mesh), then runs this command on the
/// artifact as N ranks under mpirun, each with its share of the cores.
int launchTraining(const TrainRunArgs &run, const TrainingArgs &training,
                   const CompileOptions &compile, bool artifact) {
  std::string model = run.model;
  std::optional<fs::path> temporary;
  if (!artifact) {
    if (training.mesh.empty())
      throw Error("--nproc " + std::to_string(run.nproc) + " runs a distributed program: give "
                  "--mesh (e.g. --mesh dp=" + std::to_string(run.nproc) + ")");
    CompiledModel compiled = compileTrainingModel(run.model, training, compile);
    temporary = fs::temp_directory_path() /
                ("tcc-train-" + std::to_string(getpid()) + ".tcc");
    std::ofstream f(*temporary, std::ios::binary);
    f.write(reinterpret_cast<const char *>(compiled.artifact.data()), compiled.artifact.size());
    if (!(f.close(), f))
      throw Error("cannot write the compiled program to '" + temporary->string() + "'");
    model = temporary->string();
  }
  int threads = run.threads > 0 ? run.threads
                                : std::max(1, (int)std::thread::hardware_concurrency() / run.nproc);
  std::vector<std::string> cmd{run.self, "train", model, "--data", run.dataDir, "--lr",
                               std::to_string(run.lr), "--epochs", std::to_string(run.epochs),
                               "--threads", std::to_string(threads), "--max-steps",
                               std::to_string(run.maxSteps)};
  auto pass = [&](const char *flag, const std::string &value) {
    if (!value.empty()) {
      cmd.push_back(flag);
      cmd.push_back(value);
    }
  };
  if (run.seedGiven)
    pass("--seed", std::to_string(run.seed));
  if (!run.shuffle)
    cmd.push_back("--no-shuffle");
  pass("--metrics", run.metricsPath);
  pass("--step-log", run.stepLogPath);
  pass("--save-model", run.saveModelPath);
  pass("--checkpoint", run.checkpointDir);
  pass("--resume", run.resumeDir);
  if (run.collectiveTimeout > 0)
    pass("--collective-timeout", std::to_string(run.collectiveTimeout));
  int status = launchRanks(run.nproc, cmd);
  if (temporary)
    fs::remove(*temporary);
  return status;
}

} // namespace

int runTrain(const TrainRunArgs &run, const TrainingArgs &training, const CompileOptions &compile) {
  if (run.lr <= 0 || !std::isfinite(run.lr))
    throw Error("--lr must be a positive learning rate");
  if (run.epochs < 1)
    throw Error("--epochs must be at least 1");
  if (run.maxSteps < 0)
    throw Error("--max-steps must be non-negative (0: no limit)");
  bool artifact = isArtifactFile(run.model);
  if (artifact) {
    std::string list;
    for (const auto &g : training.given)
      if (g != "--batch-size")
        list += (list.empty() ? "" : ", ") + g;
    if (!list.empty())
      throw Error("'" + run.model + "' is a training artifact: its loss and optimizer were fixed "
                  "by `tcc compile --train`; do not give " + list + " again");
    if (!run.saveModelPath.empty())
      throw Error("--save-model writes the trained ONNX model: train from the .onnx model, not "
                  "the artifact '" + run.model + "'");
  }

  if (run.collectiveTimeout > 0)
    setenv("TCC_COLLECTIVE_TIMEOUT", std::to_string(run.collectiveTimeout).c_str(), 1);
  if (run.nproc > 0 && !startedByMpiLauncher())
    return launchTraining(run, training, compile, artifact);

  // Load the data first: a bad data folder should not cost a compile.
  DataSplits data = loadDataDir(run.dataDir);

  std::optional<tccrt::Program> program;
  if (artifact) {
    program.emplace(withContext("cannot load '" + run.model + "'",
                                [&] { return tccrt::Program::fromFile(run.model, run.threads); }));
    if (!program->isTraining())
      throw Error("'" + run.model + "' is an inference artifact: make a training artifact with "
                  "`tcc compile --train`, or train the .onnx model");
  } else {
    auto start = std::chrono::steady_clock::now();
    CompiledModel compiled = compileTrainingModel(run.model, training, compile);
    program.emplace(withContext("cannot load the compiled training program", [&] {
      return tccrt::Program::fromBuffer(compiled.artifact.data(), compiled.artifact.size(),
                                        run.threads);
    }));
    std::cerr << "tcc: compiled the training program in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
              << " s (" << compiled.report.kernels << " kernels, " << compiled.report.cacheHits
              << " cached)\n";
  }

  tccrt::Trainer trainer(*program, run.seed);
  if (trainer.numBatchTensors() != 2)
    throw Error("the model takes " + std::to_string(trainer.numBatchTensors() - 1) +
                " inputs: tcc train feeds images to a model with exactly one input");
  int64_t classes = configClasses(*program);
  Tensor trainLabels = checkData(trainer, data.train, "training", classes);
  Tensor testLabels = checkData(trainer, data.test, "test", classes);
  // Distributed artifacts: each rank trains on its block of the global batch.
  int64_t localBatch = trainer.batchInfo(0).shape[0];
  int64_t batchSize = localBatch * trainer.dataParallel();
  int64_t firstRow = trainer.dataPosition() * localBatch;
  bool leader = trainer.rank() == 0;
  if (trainer.worldSize() > 1 && !run.saveModelPath.empty())
    throw Error("--save-model writes the whole model from one process; a distributed run (" +
                std::to_string(trainer.worldSize()) + " ranks) holds it in shards: --checkpoint "
                "it, then --resume in one process (tcc compile --train without --mesh) with "
                "--save-model");
  if (artifact && training.batchSize > 0 && training.batchSize != batchSize)
    throw Error("--batch-size " + std::to_string(training.batchSize) + " differs from the "
                "artifact's batch size " + std::to_string(batchSize));
  bool classification = trainer.numEvalOutputs() >= 2;
  int64_t stepsPerEpoch = data.train.size() / batchSize;
  if (stepsPerEpoch == 0)
    throw Error("the training set has " + std::to_string(data.train.size()) +
                " samples, fewer than one batch of " + std::to_string(batchSize));

  Position pos;
  pos.seed = run.seed;
  pos.batchSize = batchSize;
  pos.trainSamples = data.train.size();
  pos.shuffle = run.shuffle;
  if (!run.resumeDir.empty()) {
    std::string file = (fs::path(run.resumeDir) / kCheckpointFile).string();
    withContext("--resume: cannot load '" + file + "'", [&] { trainer.load(file); });
    std::vector<uint8_t> user = trainer.userData();
    Position saved = Position::parse(std::string(user.begin(), user.end()), "'" + file + "'");
    auto mismatch = [&](const std::string &what, const std::string &was, const std::string &now) {
      throw Error("--resume: the checkpoint was made with " + what + " " + was + ", this run "
                  "has " + now + ": a resumed run must continue the same run");
    };
    if (run.seedGiven && saved.seed != run.seed)
      mismatch("--seed", std::to_string(saved.seed), std::to_string(run.seed));
    if (saved.batchSize != batchSize)
      mismatch("batch size", std::to_string(saved.batchSize), std::to_string(batchSize));
    if (saved.trainSamples != data.train.size())
      mismatch("a training set of", std::to_string(saved.trainSamples) + " samples",
               std::to_string(data.train.size()));
    if (saved.shuffle != run.shuffle)
      mismatch("shuffling", saved.shuffle ? "on" : "off", run.shuffle ? "on" : "off");
    if (saved.epoch < 0 || saved.batch < 0 || saved.batch >= stepsPerEpoch ||
        saved.stepLosses.size() != trainer.microSteps() ||
        saved.stepLosses.size() < (size_t)saved.batch)
      throw Error("--resume: '" + file + "': its position (epoch " +
                  std::to_string(saved.epoch + 1) + ", batch " + std::to_string(saved.batch) +
                  ", " + std::to_string(saved.stepLosses.size()) + " losses) does not fit its "
                  "trainer state (" + std::to_string(trainer.microSteps()) + " micro-steps)");
    pos = saved;
    std::cerr << "tcc: resumed from " << file << " at epoch " << pos.epoch + 1 << ", batch "
              << pos.batch << " (" << trainer.steps() << " optimizer steps)\n";
  }
  if (!run.checkpointDir.empty()) {
    std::error_code ec;
    fs::create_directories(run.checkpointDir, ec);
    if (ec)
      throw Error("cannot create checkpoint directory '" + run.checkpointDir + "': " + ec.message());
  }

  std::vector<tccrt::Tensor> batch = trainer.makeBatch();
  // Rank 0 alone reports and writes logs (every rank computes the same global losses).
  std::unique_ptr<FILE, int (*)(FILE *)> silent(leader ? nullptr : fopen("/dev/null", "w"), fclose);
  ProgressBar progress(leader ? stderr : silent.get(), leader && isatty(fileno(stderr)));
  std::vector<Position::Epoch> partial; // an epoch cut short by --max-steps (not checkpointed)
  auto writeLogs = [&] {
    if (!leader)
      return;
    std::vector<Position::Epoch> all = pos.history;
    all.insert(all.end(), partial.begin(), partial.end());
    if (!run.metricsPath.empty())
      writeTextFile(run.metricsPath, metricsJson(all));
    if (!run.stepLogPath.empty())
      writeTextFile(run.stepLogPath, stepLogJson(pos.stepLosses));
  };
  auto checkpoint = [&] {
    if (run.checkpointDir.empty())
      return;
    std::string file = (fs::path(run.checkpointDir) / kCheckpointFile).string();
    std::string user = pos.serialize();
    withContext("cannot save the checkpoint '" + file + "'",
                [&] { trainer.save(file, std::vector<uint8_t>(user.begin(), user.end())); });
  };
  auto reachedMaxSteps = [&] {
    return run.maxSteps > 0 && trainer.steps() >= (uint64_t)run.maxSteps;
  };

  bool stopped = reachedMaxSteps();
  while (pos.epoch < run.epochs && !stopped) {
    auto start = std::chrono::steady_clock::now();
    std::vector<int64_t> order(data.train.size());
    if (run.shuffle)
      order = epochOrder(data.train.size(), pos.seed, pos.epoch);
    else
      for (int64_t i = 0; i < (int64_t)order.size(); ++i)
        order[i] = i;
    // The epoch's losses so far (a resumed epoch continues its running mean).
    size_t epochFirstLoss = pos.stepLosses.size() - pos.batch;
    double lossSum = 0;
    for (size_t i = epochFirstLoss; i < pos.stepLosses.size(); ++i)
      lossSum += pos.stepLosses[i];
    progress.startEpoch(pos.epoch + 1, run.epochs, stepsPerEpoch, pos.batch);
    int64_t samples = 0;
    while (pos.batch < stepsPerEpoch) {
      const int64_t *rows = order.data() + pos.batch * batchSize + firstRow;
      gatherRows(data.train.images, rows, localBatch, batch[0].data());
      gatherRows(trainLabels, rows, localBatch, batch[1].data());
      float loss = withContext("training step " + std::to_string(pos.stepLosses.size() + 1),
                               [&] { return trainer.step(batch, (float)run.lr); });
      pos.stepLosses.push_back(loss);
      lossSum += loss;
      ++pos.batch;
      samples += batchSize;
      progress.update(pos.batch, lossSum / (pos.stepLosses.size() - epochFirstLoss), samples);
      if (reachedMaxSteps()) {
        stopped = true;
        break;
      }
    }
    auto [testLoss, testAccuracy] = evaluate(trainer, data.test, testLabels, batchSize);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tccrt_allocator_stats memory{};
    tccrt_allocator_get_stats(&memory);
    Position::Epoch e{pos.epoch + 1,
                      lossSum / std::max<size_t>(pos.stepLosses.size() - epochFirstLoss, 1),
                      testLoss, testAccuracy, seconds, trainer.steps(),
                      memory.peak_allocated_bytes};
    readLossScale(trainer, e);
    char summary[160];
    if (classification)
      snprintf(summary, sizeof summary, "test loss %.4f  accuracy %.2f%%", testLoss,
               100 * testAccuracy);
    else
      snprintf(summary, sizeof summary, "test loss %.4f", testLoss);
    progress.finishEpoch(summary);
    if (pos.batch == stepsPerEpoch) {
      pos.history.push_back(e);
      ++pos.epoch;
      pos.batch = 0;
    } else {
      partial.push_back(e);
    }
    checkpoint();
    writeLogs();
  }
  if (stopped && leader)
    std::cerr << "tcc: stopped after " << trainer.steps() << " optimizer steps (--max-steps)\n";
  if (!run.saveModelPath.empty())
    saveModel(run.model, run.saveModelPath, trainer);
  return 0;
}

/// Cross-entropy's class count from the artifact's training config (0 if it does not say:
/// artifacts from before the field existed, or other losses).
int64_t configClasses(const tccrt::Program &program) {
  llvm::Expected<llvm::json::Value> config = llvm::json::parse(program.trainingConfig());
  if (!config) {
    llvm::consumeError(config.takeError());
    return 0;
  }
  const llvm::json::Object *object = config->getAsObject();
  std::optional<int64_t> classes = object ? object->getInteger("classes") : std::nullopt;
  return classes.value_or(0);
}

} // namespace tcc
