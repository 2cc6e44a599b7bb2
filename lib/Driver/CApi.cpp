//===- CApi.cpp - The compiler's C API (include/tcc/Driver/tcc.h) ---------===//
//
// "key=value" options become the CompileOptions, LoadOptions, TrainingArgs and TrainRunArgs
// `tcc compile` and `tcc train` build from their command lines, then the same drivers run:
// compileModel for artifacts, runTrain for training runs.
//
//===----------------------------------------------------------------------===//
#include "tcc/Driver/tcc.h"

#include "tcc/Driver/Execute.h" // resolveDevice
#include "tcc/Driver/Pipeline.h"
#include "tcc/Driver/Train.h"
#include "tcc/Support/Tensor.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

using namespace tcc;

struct tcc_compiled {
  CompiledModel model;
  std::string reportJson;
};

namespace {

thread_local std::string lastError;

template <class F> tcc_status guarded(const char *function, F &&f) {
  try {
    f();
    lastError.clear();
    return TCC_OK;
  } catch (const std::exception &e) {
    lastError = e.what();
  } catch (...) {
    lastError = std::string(function) + ": unknown error";
  }
  return TCC_ERROR;
}

/// Everything the options set, before they are checked and converted.
struct Settings {
  CompileOptions compile;
  LoadOptions load;
  TrainingArgs training;
  bool train = false;
  TrainRunArgs run;
  std::vector<std::string> runKeys; // the options of a training run given (tcc_train only)
};

bool parseBool(const std::string &key, llvm::StringRef value) {
  if (value == "1" || value == "true")
    return true;
  if (value == "0" || value == "false")
    return false;
  throw Error("option " + key + "=" + value.str() + ": expected 0 or 1");
}

template <class T> T parseNumber(const std::string &key, llvm::StringRef value) {
  T v;
  if constexpr (std::is_floating_point_v<T>) {
    if (!llvm::to_float(value, v))
      throw Error("option " + key + "=" + value.str() + ": expected a number");
  } else if (!llvm::to_integer(value, v, 10)) {
    throw Error("option " + key + "=" + value.str() + ": expected an integer");
  }
  return v;
}

/// Sets `target` from the option's text, parsed by the target's type (a list option appends).
template <class T> void assign(T &target, const std::string &key, llvm::StringRef value) {
  if constexpr (std::is_same_v<T, std::string>)
    target = value.str();
  else if constexpr (std::is_same_v<T, bool>)
    target = parseBool(key, value);
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    target.push_back(value.str());
  else
    target = parseNumber<T>(key, value);
}

using Setter = std::function<void(Settings &, const std::string &key, llvm::StringRef value)>;

/// What each key sets. Training keys also record the command-line option they stand for in
/// TrainingArgs::given, which trainingOptions checks against the loss and optimizer.
const std::map<std::string, Setter> &setters() {
  static const std::map<std::string, Setter> table = [] {
    std::map<std::string, Setter> t;
    auto text = [](std::string CompileOptions::*field) {
      return [field](Settings &s, const std::string &, llvm::StringRef v) {
        s.compile.*field = v.str();
      };
    };
    auto flag = [](bool CompileOptions::*field) {
      return [field](Settings &s, const std::string &k, llvm::StringRef v) {
        s.compile.*field = parseBool(k, v);
      };
    };
    t["device"] = text(&CompileOptions::device);
    t["precision"] = text(&CompileOptions::precision);
    t["layout"] = text(&CompileOptions::layout);
    t["cache_dir"] = text(&CompileOptions::cacheDir);
    t["dump_dir"] = text(&CompileOptions::dumpDir);
    t["explain_fusion"] = flag(&CompileOptions::explainFusion);
    t["explain_layout"] = flag(&CompileOptions::explainLayout);
    t["progress"] = flag(&CompileOptions::progress);
    t["cache"] = flag(&CompileOptions::useCache);
    t["arch"] = [](Settings &s, const std::string &k, llvm::StringRef v) {
      s.compile.cudaArchs.clear();
      for (llvm::StringRef a : llvm::split(v, ','))
        s.compile.cudaArchs.push_back(a.trim().str());
    };
    t["jobs"] = [](Settings &s, const std::string &k, llvm::StringRef v) {
      s.compile.jobs = parseNumber<unsigned>(k, v);
    };
    t["input_shape"] = [](Settings &s, const std::string &, llvm::StringRef v) {
      s.load.addInputShape(v.str());
    };
    t["train"] = [](Settings &s, const std::string &k, llvm::StringRef v) {
      s.train = parseBool(k, v);
    };

    // Training: each stands for the `tcc compile --train` option of the same name.
    auto training = [&t](const std::string &key, auto field) {
      t[key] = [field](Settings &s, const std::string &k, llvm::StringRef v) {
        TrainingArgs &a = s.training;
        assign(a.*field, k, v);
        std::string option = "--" + k;
        std::replace(option.begin(), option.end(), '_', '-');
        a.given.push_back(option);
      };
    };
    training("loss", &TrainingArgs::loss);
    training("optimizer", &TrainingArgs::optimizer);
    training("batch_size", &TrainingArgs::batchSize);
    training("momentum", &TrainingArgs::momentum);
    training("weight_decay", &TrainingArgs::weightDecay);
    training("beta1", &TrainingArgs::beta1);
    training("beta2", &TrainingArgs::beta2);
    training("eps", &TrainingArgs::eps);
    training("nesterov", &TrainingArgs::nesterov);
    training("clip_grad_norm", &TrainingArgs::clipGradNorm);
    training("label_smoothing", &TrainingArgs::labelSmoothing);
    training("grad_accumulation", &TrainingArgs::gradAccumulation);
    training("loss_scale", &TrainingArgs::lossScale);
    training("loss_scale_growth", &TrainingArgs::lossScaleGrowth);
    training("remat", &TrainingArgs::remat);
    training("memory_budget", &TrainingArgs::memoryBudget);
    training("trainable", &TrainingArgs::trainable);
    training("freeze", &TrainingArgs::freeze);
    training("mesh", &TrainingArgs::mesh);
    training("zero", &TrainingArgs::zero);
    training("bucket_mb", &TrainingArgs::bucketMb);
    training("sharding_file", &TrainingArgs::shardingFile);
    training("micro_batches", &TrainingArgs::microBatches);
    training("pipeline_schedule", &TrainingArgs::pipelineSchedule);
    training("explain_sharding", &TrainingArgs::explainSharding);

    // A training run (tcc_train): the `tcc train` options of the same names.
    auto run = [&t](const std::string &key, auto field) {
      t[key] = [field](Settings &s, const std::string &k, llvm::StringRef v) {
        assign(s.run.*field, k, v);
        s.runKeys.push_back(k);
      };
    };
    run("lr", &TrainRunArgs::lr);
    run("epochs", &TrainRunArgs::epochs);
    run("threads", &TrainRunArgs::threads);
    run("max_steps", &TrainRunArgs::maxSteps);
    run("shuffle", &TrainRunArgs::shuffle);
    run("metrics", &TrainRunArgs::metricsPath);
    run("step_log", &TrainRunArgs::stepLogPath);
    run("save_model", &TrainRunArgs::saveModelPath);
    run("checkpoint", &TrainRunArgs::checkpointDir);
    run("resume", &TrainRunArgs::resumeDir);
    run("collective_timeout", &TrainRunArgs::collectiveTimeout);
    t["seed"] = [](Settings &s, const std::string &k, llvm::StringRef v) {
      assign(s.run.seed, k, v);
      s.run.seedGiven = true;
      s.runKeys.push_back(k);
    };
    return t;
  }();
  return table;
}

/// `forRun`: the options of tcc_train (training implied; a run's own options allowed).
Settings parseOptions(const char *const *options, size_t numOptions, bool forRun) {
  if (numOptions && !options)
    throw Error("options is NULL but num_options is " + std::to_string(numOptions));
  Settings s;
  s.train = forRun;
  s.compile.device = "cpu";
  for (size_t i = 0; i < numOptions; ++i) {
    if (!options[i])
      throw Error("option " + std::to_string(i) + " is NULL");
    auto [rawKey, value] = llvm::StringRef(options[i]).split('=');
    if (rawKey.size() == llvm::StringRef(options[i]).size())
      throw Error("option '" + std::string(options[i]) + "' is not key=value");
    std::string key = rawKey.trim().str();
    std::replace(key.begin(), key.end(), '-', '_');
    auto it = setters().find(key);
    if (it == setters().end()) {
      std::string known;
      for (const auto &[k, setter] : setters())
        known += (known.empty() ? "" : ", ") + k;
      throw Error("unknown option '" + rawKey.str() + "' (known: " + known + ")");
    }
    it->second(s, key, value.trim());
  }
  if (!forRun)
    for (const std::string &key : s.runKeys)
      throw Error("option " + key + " applies to training runs (tcc_train), not to compiling");
  if (forRun && !s.train)
    throw Error("train=0 does not apply to tcc_train, which always trains");
  if (!s.train)
    for (const std::string &option : s.training.given)
      throw Error(option.substr(2) + " applies to training artifacts: add train=1");
  if (s.train && (!s.load.inputShapes.empty() || !s.load.inputRanges.empty()))
    throw Error("input_shape does not apply to training artifacts: batch_size fixes the first "
                "input's leading dimension, the model fixes the rest");
  if (s.compile.device == "auto")
    s.compile.device = resolveDevice("auto");
  return s;
}

tcc_compiled *compile(const ModelSource &source, const char *const *options, size_t numOptions) {
  Settings s = parseOptions(options, numOptions, /*forRun=*/false);
  checkCompileOptions(s.compile); // before loading the model
  auto result = std::make_unique<tcc_compiled>();
  result->model = compileModel(source, s.load, s.train ? &s.training : nullptr, s.compile);
  result->reportJson = result->model.report.toJson();
  return result.release();
}

} // namespace

extern "C" {

const char *tcc_last_error(void) { return lastError.c_str(); }

const char *tcc_version(void) { return "tcc 0.2 (artifact version 1)"; }

tcc_status tcc_compile_file(const char *path, const char *const *options, size_t numOptions,
                            tcc_compiled **out) {
  return guarded("tcc_compile_file", [&] {
    if (!path || !out)
      throw Error("tcc_compile_file: path and out must not be NULL");
    *out = nullptr;
    *out = compile(ModelSource(path), options, numOptions);
  });
}

tcc_status tcc_compile_buffer(const void *data, size_t size, const char *baseDir,
                              const char *const *options, size_t numOptions,
                              tcc_compiled **out) {
  return guarded("tcc_compile_buffer", [&] {
    if (!data || !out)
      throw Error("tcc_compile_buffer: data and out must not be NULL");
    *out = nullptr;
    *out = compile(ModelSource::fromBytes(data, size, baseDir ? baseDir : ""), options,
                   numOptions);
  });
}

const void *tcc_compiled_artifact(const tcc_compiled *compiled, size_t *size) {
  if (size)
    *size = compiled ? compiled->model.artifact.size() : 0;
  return compiled ? compiled->model.artifact.data() : nullptr;
}

const char *tcc_compiled_report(const tcc_compiled *compiled) {
  return compiled ? compiled->reportJson.c_str() : "";
}

void tcc_compiled_free(tcc_compiled *compiled) { delete compiled; }

tcc_status tcc_train(const char *model, const char *data_dir, const char *const *options,
                     size_t numOptions) {
  return guarded("tcc_train", [&] {
    if (!model || !data_dir)
      throw Error("tcc_train: model and data_dir must not be NULL");
    Settings s = parseOptions(options, numOptions, /*forRun=*/true);
    checkCompileOptions(s.compile);
    s.run.model = model;
    s.run.dataDir = data_dir;
    if (int status = runTrain(s.run, s.training, s.compile))
      throw Error("tcc_train: the training run failed (status " + std::to_string(status) + ")");
  });
}

} // extern "C"
