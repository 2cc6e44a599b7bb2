//===- tcc.cpp - The tcc command line -----------------------------------===//
//
//   tcc import MODEL.onnx                 print the imported tcc IR
//   tcc compile MODEL.onnx -o MODEL.tcc    compile to an artifact (FlatBuffers)
//   tcc run MODEL.onnx|MODEL.tcc           run a model, write its outputs as TensorProto files
//   tcc bench MODEL.onnx|MODEL.tcc         time compiled runs
//   tcc profile MODEL.onnx|MODEL.tcc       time each launch (kernels, library calls)
//   tcc check DIR...                       run ONNX backend-test cases and compare outputs
//   tcc train MODEL.onnx|train.tcc --data DIR   train (compile --train makes train.tcc)
//   tcc grad MODEL.onnx --out-dir DIR      gradients of sum(output 0) wrt the initializers
//
//===----------------------------------------------------------------------===//
#include "tcc/Driver/Check.h"
#include "tcc/Support/TensorFiles.h"
#include "tcc/Driver/Execute.h"
#include "tcc/Driver/Pipeline.h"
#include "tcc/Driver/Profile.h"
#include "tcc/Driver/Train.h"

#include "tcc/Codegen/NvrtcCompiler.h"
#include "tcc/Frontend/OnnxModel.h"

#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <optional>

namespace fs = std::filesystem;
using namespace tcc;

namespace {

struct ModelArgs {
  std::string model;
  std::vector<std::string> inputFiles;
  std::vector<std::string> inputShapes;
  uint64_t seed = 0;
};

void addModelArgs(CLI::App *cmd, ModelArgs &args) {
  cmd->add_option("MODEL", args.model,
                  "ONNX model file (.onnx); for run, bench and profile also a compiled artifact (.tcc)")
      ->required();
  cmd->add_option("--inputs", args.inputFiles,
                  "TensorProto (.pb) or NumPy (.npy) files, one per graph input in order "
                  "(initializers excluded); inputs not given get seeded random data");
  cmd->add_option("--input-shape", args.inputShapes,
                  "NAME=D0xD1x...: fixes a graph input's dynamic dimensions (repeatable); a "
                  "range LO..HI keeps a dim symbolic with those bounds: ids=1..64x16..512 (tcc "
                  "compile: one artifact for every size in them, CPU or CUDA). For an artifact "
                  "compiled with ranges, the sizes of its random inputs");
  cmd->add_option("--seed", args.seed, "seed for random inputs")->default_val(0);
}

/// An --inputs file: NumPy's .npy format by its extension, else a serialized TensorProto.
Tensor readInputFile(const std::string &path) {
  if (llvm::StringRef(path).ends_with(".npy"))
    return parseNpy(readFileBytes(path), "'" + path + "'");
  return readTensorFile(path);
}

LoadOptions loadOptions(const ModelArgs &args) {
  LoadOptions load;
  for (const auto &f : args.inputFiles)
    load.inputs.push_back(readInputFile(f));
  for (const auto &s : args.inputShapes)
    load.addInputShape(s);
  load.seed = args.seed;
  return load;
}

/// loadOptions for the commands that run an ONNX model: every input needs sizes then.
LoadOptions runLoadOptions(const ModelArgs &args, const std::string &command) {
  LoadOptions load = loadOptions(args);
  if (!load.inputRanges.empty())
    throw Error("--input-shape " + load.inputRanges.begin()->first +
                "=LO..HI declares a size range, which `tcc compile` takes (one artifact for "
                "every size); `tcc " + command + "` needs sizes (NAME=4x128), or run the "
                "compiled artifact");
  return load;
}

const char *kDeviceHelp =
    "where to run: auto (the default: cuda if libtccrt finds a usable CUDA GPU and driver, else "
    "cpu with a note on stderr), cuda (compiled with NVRTC; an error without a usable GPU), cpu "
    "(compiled) or interp (the reference interpreter)";

/// --device and --threads, for the commands that run models.
void addDeviceArgs(CLI::App *cmd, std::string &device, int &threads) {
  cmd->add_option("--device", device, kDeviceHelp)->default_val("auto");
  cmd->add_option("--threads", threads, "CPU threads (0: all cores)")->default_val(0);
}

/// The runtime options of run and bench besides --threads.
struct CudaRunArgs {
  bool cudaGraph = false;
  int deviceOrdinal = 0;
};

void addCudaRunArgs(CLI::App *cmd, CudaRunArgs &args) {
  cmd->add_flag("--cuda-graph", args.cudaGraph,
                "CUDA: run the whole launch list as one CUDA graph on repeated runs (libtccrt "
                "captures it after a first plain run)");
  cmd->add_option("--device-ordinal", args.deviceOrdinal, "CUDA: which GPU (0: the first)")
      ->default_val(0)
      ->check(CLI::NonNegativeNumber);
}

RunOptions runOptions(int threads, const CudaRunArgs &cuda = {}) {
  RunOptions r;
  r.threads = threads;
  r.cudaGraph = cuda.cudaGraph;
  r.deviceOrdinal = cuda.deviceOrdinal;
  return r;
}

/// Options shared by the commands that compile.
struct CompileArgs {
  bool noCache = false;
  std::string cacheDir;
  bool explainFusion = false;
  std::string precision = "fp32";
  std::string layout = "auto";
  bool explainLayout = false;
  std::string dumpDir;
  std::string archs = "sm_80,sm_90";
};

/// "sm_80,sm_90" as a list; every name checked (a clear error naming the bad one).
std::vector<std::string> parseArchs(const std::string &list) {
  std::vector<std::string> archs;
  for (llvm::StringRef a : llvm::split(llvm::StringRef(list), ',')) {
    a = a.trim();
    if (a.empty())
      throw Error("--arch '" + list + "' has an empty architecture name (expected e.g. "
                  "sm_80,sm_90)");
    try {
      codegen::checkCudaArch(a.str());
    } catch (const Error &e) {
      throw Error("--arch: " + std::string(e.what()));
    }
    if (std::find(archs.begin(), archs.end(), a.str()) != archs.end())
      throw Error("--arch '" + list + "' lists " + a.str() + " twice");
    archs.push_back(a.str());
  }
  return archs;
}

void addCompileArgs(CLI::App *cmd, CompileArgs &args) {
  cmd->add_flag("--no-cache", args.noCache, "do not use the on-disk kernel cache");
  cmd->add_option("--cache-dir", args.cacheDir,
                  "kernel cache directory (default: $TCC_CACHE_DIR, else $XDG_CACHE_HOME/tcc, else "
                  "~/.cache/tcc)");
  cmd->add_flag("--explain-fusion", args.explainFusion,
                "print every fusion decision with its reason, and each attention recognised as one op (or why a softmax times v was not)");
  cmd->add_option("--precision", args.precision,
                  "fp32, or bf16/fp16: matrix products and attention in 16 bits with f32 "
                  "accumulation (inference: the attention a fused kernel takes, CPU bf16 or CUDA "
                  "f16/bf16; training: every attention and its gradient, softmax in f32), the "
                  "rest (softmax, normalisation, reductions) in f32. Training keeps f32 "
                  "parameters and optimizer state; fp16 adds dynamic "
                  "loss scaling (steps with inf/NaN gradients skipped). CPU: bf16 products on "
                  "AVX512-BF16 where the CPU has it, f16 ones (and bf16 without it) converted to "
                  "f32 as they are packed")
      ->default_val("fp32");
  cmd->add_option("--layout", args.layout,
                  "CPU: auto (pointwise and depthwise convolutions channels-last where the "
                  "cost model expects them to pay for their layout copies), nhwc (every one), "
                  "nchw (none)")
      ->check(CLI::IsMember({"auto", "nhwc", "nchw"}))
      ->default_val("auto");
  cmd->add_flag("--explain-layout", args.explainLayout,
                "print every layout decision (each convolution's layout and why)");
  cmd->add_option("--dump-dir", args.dumpDir,
                  "write each IR stage (.mlir) and the generated kernel sources here");
  cmd->add_option("--arch", args.archs,
                  "CUDA: the GPU architectures to make cubins (and PTX) for, comma-separated "
                  "sm_XY[a] names")
      ->default_val("sm_80,sm_90");
}

CompileOptions compileOptions(const CompileArgs &args, const std::string &device) {
  CompileOptions c;
  c.device = device;
  c.cudaArchs = parseArchs(args.archs);
  c.useCache = !args.noCache;
  c.cacheDir = args.cacheDir;
  c.explainFusion = args.explainFusion;
  c.precision = args.precision;
  c.layout = args.layout;
  c.explainLayout = args.explainLayout;
  c.dumpDir = args.dumpDir;
  c.progress = true;
  return c;
}

/// The loss/optimizer options shared by `compile --train` and `train`; `given` is filled after
/// parsing by noteGiven.
struct TrainingCli {
  TrainingArgs args;
  std::vector<std::pair<std::string, CLI::Option *>> options;
};

void addTrainingArgs(CLI::App *cmd, TrainingCli &cli) {
  TrainingArgs &a = cli.args;
  auto add = [&](CLI::Option *o, const std::string &name) { cli.options.push_back({name, o}); };
  add(cmd->add_option("--loss", a.loss, "cross-entropy (integer class labels) or mse")
          ->default_val("cross-entropy"),
      "--loss");
  add(cmd->add_option("--optimizer", a.optimizer, "sgd, adam or adamw")->default_val("adam"),
      "--optimizer");
  add(cmd->add_option("--batch-size", a.batchSize,
                      "samples per step: fixes the first input's leading dimension"),
      "--batch-size");
  add(cmd->add_option("--momentum", a.momentum, "SGD momentum (PyTorch semantics)"), "--momentum");
  add(cmd->add_flag("--nesterov", a.nesterov, "SGD: Nesterov momentum"), "--nesterov");
  add(cmd->add_option("--weight-decay", a.weightDecay,
                      "SGD/Adam: L2 added to the gradient; AdamW: decoupled decay"),
      "--weight-decay");
  add(cmd->add_option("--beta1", a.beta1, "Adam/AdamW beta1 (default 0.9)"), "--beta1");
  add(cmd->add_option("--beta2", a.beta2, "Adam/AdamW beta2 (default 0.999)"), "--beta2");
  add(cmd->add_option("--eps", a.eps, "Adam/AdamW epsilon (default 1e-8)"), "--eps");
  add(cmd->add_option("--clip-grad-norm", a.clipGradNorm,
                      "scale gradients so their global L2 norm is at most this (0: off)"),
      "--clip-grad-norm");
  add(cmd->add_option("--grad-accumulation", a.gradAccumulation,
                      "micro-batches per optimizer update (gradients averaged)"),
      "--grad-accumulation");
  add(cmd->add_option("--label-smoothing", a.labelSmoothing, "cross-entropy label smoothing"),
      "--label-smoothing");
  add(cmd->add_option("--remat", a.remat,
                      "activation checkpointing: auto recomputes the cheap forward ops "
                      "(pointwise, data movement, reductions) in the backward pass instead of "
                      "keeping their results (matrix products and attention stay saved); off "
                      "keeps every saved activation. The compile report gives the saved bytes "
                      "with and without")
          ->check(CLI::IsMember({"off", "auto"}))
          ->default_val("off"),
      "--remat");
  add(cmd->add_option("--memory-budget", a.memoryBudget,
                      "bytes of saved activations to fit (implies --remat auto): when "
                      "recomputing the cheap ops is not enough, only block boundaries (a "
                      "transformer's residual stream between blocks; every k-th one) are kept "
                      "and each block is recomputed whole, matrix products included, before "
                      "its backward pass")
          ->check(CLI::NonNegativeNumber),
      "--memory-budget");
  add(cmd->add_option("--loss-scale", a.lossScale,
                      "--precision fp16: the initial dynamic loss scale (halved on each step "
                      "with inf/NaN gradients, which is skipped)")
          ->default_val(65536),
      "--loss-scale");
  add(cmd->add_option("--loss-scale-growth", a.lossScaleGrowth,
                      "--precision fp16: good steps in a row after which the loss scale doubles")
          ->default_val(2000),
      "--loss-scale-growth");
  add(cmd->add_option("--trainable", a.trainable,
                      "initializer to train (repeatable; default: every floating-point one)")
          ->allow_extra_args(false),
      "--trainable");
  add(cmd->add_option("--freeze", a.freeze, "initializer never trained (repeatable)")
          ->allow_extra_args(false),
      "--freeze");
  add(cmd->add_option("--mesh", a.mesh,
                      "distributed training: mesh axes dp=N (data parallel: the batch split over "
                      "N ranks), tp=M (Megatron tensor parallelism) and pp=S (pipeline stages), "
                      "alone or together, e.g. dp=2,tp=2 or dp=2,pp=2; the artifact holds one "
                      "program per rank (dp x tp x pp of them) and runs under mpirun"),
      "--mesh");
  add(cmd->add_option("--micro-batches", a.microBatches,
                      "with a pp axis: the batch's micro-batches, pipelined through the stages "
                      "(default: as many as stages; more shrink the pipeline's idle bubble)")
          ->check(CLI::PositiveNumber),
      "--micro-batches");
  add(cmd->add_option("--pipeline-schedule", a.pipelineSchedule,
                      "with a pp axis: gpipe (every forward, then every backward) or 1f1b (one "
                      "forward, one backward: fewer activations alive)")
          ->check(CLI::IsMember({"gpipe", "1f1b"})),
      "--pipeline-schedule");
  add(cmd->add_option("--zero", a.zero,
                      "with a dp axis: ZeRO stage 1 (optimizer state split over dp), 2 (+ gradient "
                      "accumulators) or 3 (+ parameters, gathered where used)")
          ->check(CLI::Range(0, 3)),
      "--zero");
  add(cmd->add_option("--sharding-file", a.shardingFile,
                      "JSON object overriding the strategy for single parameters: name -> per-dim "
                      "lists of mesh axes, e.g. {\"fc1.weight\": [[\"tp\"], []]} (their "
                      "optimizer state follows)"),
      "--sharding-file");
  add(cmd->add_option("--bucket-mb", a.bucketMb,
                      "data parallel: gradients ready together are all-reduced in buckets of at "
                      "most this many MiB (default 25, as PyTorch DDP; 0: one all_reduce each), "
                      "started as soon as they are ready and finished before the update")
          ->check(CLI::NonNegativeNumber),
      "--bucket-mb");
  add(cmd->add_flag("--explain-sharding", a.explainSharding,
                    "print each sharding decision and each collective inserted, with its bytes "
                    "per rank and step"),
      "--explain-sharding");
}

void noteGiven(TrainingCli &cli) {
  for (const auto &[name, option] : cli.options)
    if (option->count() > 0)
      cli.args.given.push_back(name);
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Inputs for an artifact: the given files, then seeded random data of the declared shapes (a
/// symbolic program's: of the sizes --input-shape gives).
std::vector<Tensor> artifactInputs(const RuntimeProgram &program, const ModelArgs &args) {
  if (!args.inputShapes.empty() && !program.isSymbolic())
    throw Error("--input-shape applies to ONNX models and to artifacts compiled with size "
                "ranges; this artifact's shapes are fixed");
  LoadOptions given = loadOptions(ModelArgs{"", {}, args.inputShapes, 0});
  if (!given.inputRanges.empty())
    throw Error("--input-shape " + given.inputRanges.begin()->first +
                "=LO..HI is a size range, which `tcc compile` takes; a compiled artifact runs "
                "at sizes (NAME=4x128)");
  std::map<std::string, Shape> sizes = given.inputShapes;
  std::vector<TensorSpec> specs = program.inputs();
  if (args.inputFiles.size() > specs.size())
    throw Error("the program takes " + std::to_string(specs.size()) + " input(s), but " +
                std::to_string(args.inputFiles.size()) + " were given");
  for (const auto &[name, shape] : sizes)
    if (llvm::none_of(specs, [&](const TensorSpec &s) { return s.name == name; }))
      throw Error("--input-shape names '" + name + "', which is not an input of the program");
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i < args.inputFiles.size()) {
      inputs.push_back(readInputFile(args.inputFiles[i]));
      continue;
    }
    Shape shape = specs[i].shape;
    if (auto it = sizes.find(specs[i].name); it != sizes.end()) {
      shape = it->second;
    } else if (program.isSymbolic()) {
      std::vector<std::string> dims = program.inputDims(i);
      if (llvm::any_of(dims, [](const std::string &d) {
            return !d.empty() && !std::isdigit((unsigned char)d[0]);
          }))
        throw Error("input '" + specs[i].name + "' has symbolic dims " +
                    llvm::join(dims, " x ") + ": give --input-shape " + specs[i].name +
                    "=D0xD1x... or an --inputs file");
    }
    inputs.push_back(randomInput(specs[i].dtype, shape, args.seed + i));
  }
  return inputs;
}

void writeOutputs(const std::vector<Tensor> &outputs, const std::vector<std::string> &names,
                  const std::string &outDir) {
  if (!outDir.empty()) {
    std::error_code ec;
    fs::create_directories(outDir, ec);
    if (ec)
      throw Error("cannot create output directory '" + outDir + "': " + ec.message());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor &t = outputs[i];
    const std::string &name = names[i];
    std::cout << "output " << i << " '" << name << "': " << t.typeString();
    int64_t shown = std::min<int64_t>(t.numElements(), 8);
    std::cout << " [";
    for (int64_t k = 0; k < shown; ++k)
      std::cout << (k ? ", " : "") << t.getDouble(k);
    std::cout << (t.numElements() > shown ? ", ...]" : "]") << "\n";
    if (!outDir.empty())
      writeTensorFile(t, name, (fs::path(outDir) / ("output_" + std::to_string(i) + ".pb")).string());
  }
}

int runImport(const ModelArgs &args, const std::string &out, int64_t elide) {
  LoadOptions options = loadOptions(args);
  options.keepSymbolicDims = true; // dims left dynamic print as size symbols
  LoadedModel model = loadModel(args.model, options);
  mlir::OpPrintingFlags flags;
  if (elide > 0)
    flags.elideLargeElementsAttrs(elide);
  std::string text;
  llvm::raw_string_ostream os(text);
  model.imported.module->print(os, flags);
  if (out.empty() || out == "-") {
    std::cout << text;
  } else {
    std::ofstream f(out);
    if (!f)
      throw Error("cannot write '" + out + "'");
    f << text;
  }
  if (!model.imported.specializedInputs.empty()) {
    std::cerr << "tcc: note: specialized on the values of input(s)";
    for (const auto &n : model.imported.specializedInputs)
      std::cerr << " '" << n << "'";
    std::cerr << " (their values are needed at compile time)\n";
  }
  return 0;
}

/// Loads an artifact file for `tcc run`/`bench` (`command`): `requested` (--device) must be
/// "auto" or the device the artifact was compiled for, which must be usable here.
/// Checks that an artifact file can run here for `command` with `requested` (--device): "auto"
/// or the device it was compiled for, which must be usable.
void checkArtifactDevice(const std::string &path, const std::string &requested,
                         const char *command) {
  std::string device = artifactDevice(path);
  if (requested == "interp")
    throw Error("'" + path + "' is a compiled artifact: " + command + " it with --device " +
                (device.empty() ? "auto" : device));
  if (requested != "auto" && requested != "cpu" && requested != "cuda")
    resolveDevice(requested); // the unknown-device error
  if (!device.empty() && requested != "auto" && requested != device)
    throw Error("'" + path + "' was compiled for " + device + ", not " + requested +
                ": compile the model with --device " + requested);
  if (device == "cuda") {
    std::string why = cudaUnavailableReason();
    if (!why.empty())
      throw Error("'" + path + "' is a CUDA artifact, and there is no usable CUDA GPU/driver: " +
                  why + " (compile the model with --device cpu to run it here)");
  }
}

RuntimeProgram loadArtifact(const std::string &path, const std::string &requested,
                            const RunOptions &run, const char *command) {
  checkArtifactDevice(path, requested, command);
  return RuntimeProgram::fromFile(path, run);
}

/// --precision changes what the compiler makes: refused where nothing is compiled (an artifact
/// file, the interpreter) rather than ignored.
void checkPrecisionApplies(const CompileArgs &compile, const std::string &model,
                           const std::string &device) {
  if (compile.precision == "fp32")
    return;
  if (isArtifactFile(model))
    throw Error("--precision " + compile.precision + " applies when compiling; '" + model +
                "' is compiled already (compile the ONNX model with --precision)");
  if (device == "interp")
    throw Error("--precision " + compile.precision + " applies to compiled programs (--device "
                "cpu or cuda); the interpreter evaluates the graph in its own types");
}

int runRun(const ModelArgs &args, const std::string &requestedDevice, const CompileArgs &compile,
           const RunOptions &run, const std::string &outDir) {
  checkPrecisionApplies(compile, args.model, requestedDevice);
  if (isArtifactFile(args.model)) {
    RuntimeProgram program = loadArtifact(args.model, requestedDevice, run, "run");
    std::vector<Tensor> outputs = program.run(artifactInputs(program, args));
    std::vector<std::string> names;
    for (const auto &o : program.outputs())
      names.push_back(o.name);
    writeOutputs(outputs, names, outDir);
    return 0;
  }
  CompileOptions options = compileOptions(compile, "cpu"); // the options checked first
  std::string device = options.device = resolveDevice(requestedDevice);
  LoadedModel model = loadModel(args.model, runLoadOptions(args, "run"));
  std::vector<Tensor> outputs = execute(model, args.inputFiles.size(), device, options, run);
  writeOutputs(outputs, model.imported.outputNames, outDir);
  return 0;
}

int runCompile(const ModelArgs &args, const std::string &device, const CompileArgs &compile,
               const std::string &out, const std::string &reportPath, bool train,
               const TrainingArgs &training) {
  if (device == "interp")
    throw Error("the interpreter runs models directly: compile for --device cpu or cuda");
  CompileOptions options = compileOptions(compile, device);
  checkCompileOptions(options); // before loading the model
  if (train && (!args.inputFiles.empty() || !args.inputShapes.empty()))
    throw Error("--train takes no --inputs or --input-shape: --batch-size fixes the first "
                "input's leading dimension, the model fixes the rest");
  if (!train && !training.given.empty())
    throw Error(training.given.front() + " applies to training artifacts: add --train");
  CompiledModel compiled = compileModel(args.model, train ? LoadOptions{} : loadOptions(args),
                                        train ? &training : nullptr, options);
  std::ofstream f(out, std::ios::binary);
  if (!f.write(reinterpret_cast<const char *>(compiled.artifact.data()), compiled.artifact.size()))
    throw Error("cannot write '" + out + "'");
  f.close();
  const CompileReport &r = compiled.report;
  auto count = [](size_t n, const char *what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  std::cerr << "tcc: wrote " << out << " (" << r.artifactBytes << " bytes): "
            << count(r.kernels, "kernel") << ", " << count(r.externCalls, "library call")
            << ", arena " << r.arenaBytes << " bytes (" << r.unplannedBytes
            << " unplanned), constants " << r.constantBytes << " bytes, " << r.compileSeconds
            << " s (" << r.cacheHits << " of " << r.kernels << " kernels cached)\n";
  for (const CompileReport::Entry &e : r.entries)
    if (e.activationBytesWithoutRemat)
      std::cerr << "tcc: " << e.name << " keeps " << e.activationBytes
                << " bytes of activations for the backward pass"
                << (e.activationBytes != e.activationBytesWithoutRemat
                        ? " (" + std::to_string(e.activationBytesWithoutRemat) +
                              " without activation checkpointing)"
                        : std::string())
                << ", arena " << e.arenaBytes << " bytes\n";
  if (r.device == "cuda") {
    std::string most;
    int registers = r.maxRegisters(&most);
    size_t spilling = r.spillingKernels();
    std::cerr << "tcc: CUDA: " << count(r.cudaKernels.size(), "kernel") << " for ";
    for (size_t i = 0; i < r.cudaArchs.size(); ++i)
      std::cerr << (i ? "," : "") << r.cudaArchs[i];
    std::cerr << " in " << count(r.nvrtcPrograms, "NVRTC program") << " (" << r.nvrtcSeconds
              << " s NVRTC), at most " << registers << " registers"
              << (most.empty() ? "" : " (" + most + ")") << ", "
              << (spilling ? count(spilling, "kernel") + " spilling (see --report)" : "no spills")
              << "\n";
  }
  if (!reportPath.empty()) {
    std::ofstream rf(reportPath);
    if (!(rf << r.toJson()))
      throw Error("cannot write '" + reportPath + "'");
  }
  return 0;
}

/// The median of `sorted` (ascending, not empty).
double medianOfSorted(const std::vector<double> &sorted) {
  size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

struct BenchArgs {
  int warmup = 5, iters = 50;
  bool json = false;
};

/// Outputs for a run on `inputs`: a symbolic program's sizes are bound to their shapes first (the
/// outputs' shapes depend on them).
std::vector<Tensor> outputsFor(RuntimeProgram &program, const std::vector<Tensor> &inputs) {
  if (program.isSymbolic()) {
    std::vector<Shape> shapes;
    for (const Tensor &t : inputs)
      shapes.push_back(t.shape());
    program.setInputShapes(shapes);
  }
  return program.allocateOutputs();
}

int runBench(const ModelArgs &args, const std::string &requestedDevice,
             const CompileArgs &compile, const RunOptions &run, const BenchArgs &bench) {
  if (bench.iters < 1 || bench.warmup < 0)
    throw Error("--iters must be at least 1 and --warmup non-negative");
  checkPrecisionApplies(compile, args.model, requestedDevice);
  double compileSeconds = 0;
  std::vector<double> times;
  auto timeRuns = [&](auto &&runOnce) {
    for (int i = 0; i < bench.warmup; ++i)
      runOnce();
    for (int i = 0; i < bench.iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      runOnce();
      times.push_back(secondsSince(t0) * 1e3);
    }
  };
  std::string deviceName; // the runtime's description (compiled programs)
  auto timeProgram = [&](RuntimeProgram &program, const std::vector<Tensor> &inputs) {
    deviceName = program.deviceName();
    std::vector<Tensor> outputs = outputsFor(program, inputs);
    program.run(inputs, outputs); // checks the inputs once; the timed runs skip the checks
    std::vector<const void *> in = inputPointers(inputs);
    std::vector<void *> out = outputPointers(outputs);
    timeRuns([&] { program.runRaw(in, out); });
  };
  std::string device = requestedDevice;
  if (isArtifactFile(args.model)) {
    RuntimeProgram program = loadArtifact(args.model, requestedDevice, run, "bench");
    device = artifactDevice(args.model);
    timeProgram(program, artifactInputs(program, args));
  } else {
    CompileOptions options = compileOptions(compile, "cpu"); // the options checked first
    device = options.device = resolveDevice(requestedDevice);
    auto start = std::chrono::steady_clock::now();
    LoadedModel model = loadModel(args.model, runLoadOptions(args, "bench"));
    if (device == "interp") {
      compileSeconds = secondsSince(start);
      timeRuns([&] { interpret(model); });
    } else {
      CompiledModel compiled = compileLoaded(model, args.inputFiles.size(), options,
                                             /*randomValuesRun=*/true);
      compileSeconds = secondsSince(start);
      RuntimeProgram program = RuntimeProgram::fromBytes(compiled.artifact, run);
      timeProgram(program, model.inputs);
    }
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  double median = medianOfSorted(sorted);
  if (bench.json) {
    std::cout << "{\"model\": \"" << args.model << "\", \"device\": \"" << device
              << "\", \"device_name\": \"" << (deviceName.empty() ? device : deviceName)
              << "\", \"threads\": " << run.threads << ", \"cuda_graph\": "
              << (run.cudaGraph ? "true" : "false") << ", \"compile_seconds\": " << compileSeconds
              << ", \"iters\": " << n << ", \"median_ms\": " << median
              << ", \"min_ms\": " << sorted.front() << ", \"max_ms\": " << sorted.back()
              << "}\n";
  } else {
    std::string on = device == "cuda" ? deviceName + (run.cudaGraph ? ", CUDA graph" : "")
                     : (run.threads ? std::to_string(run.threads) : "all") + std::string(" threads");
    std::cout << args.model << " on " << device << " (" << on << "): compile " << compileSeconds << " s; " << n << " runs: median "
              << median << " ms, min " << sorted.front() << " ms, max " << sorted.back()
              << " ms\n";
  }
  return 0;
}

struct ProfileArgs {
  int warmup = 3, iters = 20;
  size_t top = 20;
  bool json = false;
  std::string trace;
};

/// Loads (or compiles) a CPU or CUDA program and times each launch of its launch list over the
/// timed runs (libtccrt's profiling: host clock, or CUDA timing events), then prints the launches by time with the model nodes each
/// covers, and writes a Chrome trace of the runs with --trace.
int runProfile(const ModelArgs &args, const std::string &requestedDevice,
               const CompileArgs &compile, const RunOptions &run, const ProfileArgs &profile) {
  if (profile.iters < 1 || profile.warmup < 0)
    throw Error("--iters must be at least 1 and --warmup non-negative");
  if (requestedDevice != "cpu" && requestedDevice != "cuda")
    throw Error("tcc profile times the launches of a compiled program: --device cpu or cuda "
                "(got --device " + requestedDevice + ")");
  std::optional<RuntimeProgram> program;
  std::vector<Tensor> inputs;
  if (isArtifactFile(args.model)) {
    program.emplace(loadArtifact(args.model, requestedDevice, run, "profile"));
    inputs = artifactInputs(*program, args);
  } else {
    // (cuda: a usable GPU and NVRTC, checked before compiling)
    std::string device = resolveDevice(requestedDevice);
    CompileOptions options = compileOptions(compile, device);
    options.device = device;
    LoadedModel model = loadModel(args.model, runLoadOptions(args, "profile"));
    CompiledModel compiled = compileLoaded(model, args.inputFiles.size(), options,
                                           /*randomValuesRun=*/true);
    program.emplace(RuntimeProgram::fromBytes(compiled.artifact, run));
    inputs = model.inputs;
  }
  std::vector<Tensor> outputs = outputsFor(*program, inputs);
  program->run(inputs, outputs); // checks the inputs once
  std::vector<const void *> in = inputPointers(inputs);
  std::vector<void *> out = outputPointers(outputs);
  for (int i = 0; i < profile.warmup; ++i)
    program->runRaw(in, out);
  program->setProfiling(true);
  std::vector<ProfiledRun> runs;
  std::vector<double> times;
  auto first = std::chrono::steady_clock::now();
  for (int i = 0; i < profile.iters; ++i) {
    auto start = std::chrono::steady_clock::now();
    program->runRaw(in, out);
    times.push_back(secondsSince(start) * 1e3);
    runs.push_back({std::chrono::duration<double>(start - first).count(),
                    program->launchProfiles()});
  }
  program->setProfiling(false);
  std::sort(times.begin(), times.end());
  double median = medianOfSorted(times);
  double mean = std::accumulate(times.begin(), times.end(), 0.0) / (double)times.size();
  std::optional<uint64_t> devicePeak = program->devicePeakBytes();
  ProfileReport report = profileReport(runs, profile.top, median, mean,
                                       devicePeak.value_or(runtimeHostPeakBytes()),
                                       devicePeak.has_value());
  if (profile.json) {
    std::cout << report.json;
  } else {
    std::cout << args.model << " on " << program->deviceName() << ": " << report.table;
  }
  if (!profile.trace.empty()) {
    std::ofstream f(profile.trace);
    if (!(f << chromeTrace(runs)))
      throw Error("cannot write '" + profile.trace + "'");
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // MLIR/LLVM report internal invariant violations here: say so in tcc's format.
  llvm::install_fatal_error_handler([](void *, const char *reason, bool) {
    std::cerr << "tcc: error: internal compiler error: " << reason << "\n";
    std::_Exit(2);
  });
  CLI::App app{"tcc: a tensor compiler for ONNX models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tcc 0.1.0");

  ModelArgs importArgs, runArgs;
  std::string importOut;
  int64_t elide = 16;
  auto *importCmd = app.add_subcommand("import", "Import an ONNX model and print its tcc IR");
  addModelArgs(importCmd, importArgs);
  importCmd->add_option("-o,--output", importOut, "write the IR here instead of stdout");
  importCmd->add_option("--elide-constants", elide,
                        "print constants with more elements than this as placeholders (0: never)")
      ->default_val(16);

  std::string runDevice = "auto", outDir;
  CompileArgs runCompileArgs;
  CudaRunArgs runCuda;
  int runThreads = 0;
  auto *runCmd = app.add_subcommand(
      "run", "Run an ONNX model or a compiled artifact (.tcc) and write its outputs");
  addModelArgs(runCmd, runArgs);
  addDeviceArgs(runCmd, runDevice, runThreads);
  addCudaRunArgs(runCmd, runCuda);
  runCmd->add_option("--out-dir", outDir, "write outputs as DIR/output_<i>.pb (TensorProto)");
  addCompileArgs(runCmd, runCompileArgs);

  ModelArgs compileArgs;
  CompileArgs compileFlags;
  std::string compileDevice = "cpu", compileOut, reportPath;
  auto *compileCmd = app.add_subcommand(
      "compile", "Compile an ONNX model into an artifact that `tcc run` and libtccrt load");
  addModelArgs(compileCmd, compileArgs);
  compileCmd->add_option("-o,--output", compileOut, "artifact file to write (e.g. MODEL.tcc)")
      ->required();
  compileCmd->add_option("--device", compileDevice,
                         "target device: cpu (the default) or cuda (CUDA C++ compiled with NVRTC "
                         "for --arch; no GPU needed)")
      ->default_val("cpu");
  compileCmd->add_option("--report", reportPath,
                         "write a JSON report (kernels, extern_calls, arena_bytes, "
                         "constant_bytes, compile_seconds, ...; for cuda also cuda_kernels with "
                         "launch configurations, registers and spills per architecture)");
  addCompileArgs(compileCmd, compileFlags);
  bool compileTrain = false;
  TrainingCli compileTraining;
  compileCmd->add_flag("--train", compileTrain,
                       "make a training artifact (train step, eval; see tcc train) with the "
                       "loss and optimizer options below");
  addTrainingArgs(compileCmd, compileTraining);

  TrainRunArgs trainRun;
  TrainingCli trainTraining;
  CompileArgs trainCompile;
  auto *trainCmd = app.add_subcommand(
      "train",
      "Train an ONNX model (or a training artifact from `tcc compile --train`) on a data folder. "
      "Each epoch visits the training set in a seeded order (Fisher-Yates driven by splitmix64 "
      "from (seed, epoch); --no-shuffle keeps file order) and drops the last incomplete batch; "
      "the whole test set is evaluated after every epoch");
  trainCmd->add_option("MODEL", trainRun.model, "ONNX model (.onnx) or training artifact (.tcc)")
      ->required();
  trainCmd->add_option("--data", trainRun.dataDir,
                       "folder with IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                       "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each optionally .gz) or "
                       ".npy files (train_images.npy, train_labels.npy, test_images.npy, "
                       "test_labels.npy); uint8 images are scaled to [0, 1]")
      ->required();
  trainCmd->add_option("--lr", trainRun.lr, "learning rate")->required();
  trainCmd->add_option("--epochs", trainRun.epochs, "epochs to train (in all, when resuming)")
      ->default_val(1);
  auto *trainSeed = trainCmd->add_option("--seed", trainRun.seed,
                                         "seed for shuffling and dropout")->default_val(0);
  trainCmd->add_option("--threads", trainRun.threads, "CPU threads (0: all cores)")->default_val(0);
  std::string trainDevice = "cpu";
  trainCmd->add_option("--device", trainDevice,
                       "where to train: cpu (the default), cuda or auto (cuda if usable, else cpu "
                       "with a note); a training artifact trains on the device it was compiled "
                       "for")
      ->default_val("cpu");
  trainCmd->add_option("--max-steps", trainRun.maxSteps,
                       "stop after this many optimizer steps (0: no limit)")->default_val(0);
  bool noShuffle = false;
  trainCmd->add_flag("--no-shuffle", noShuffle, "visit the training samples in file order");
  trainCmd->add_option("--metrics", trainRun.metricsPath,
                       "write a JSON list, one object per epoch: epoch, train_loss, test_loss, "
                       "test_accuracy (0..1, null for mse), seconds (the epoch's), steps "
                       "(optimizer steps so far), host_peak_bytes (this "
                       "process's host allocator peak; rank 0's in a distributed run); with "
                       "--precision fp16 also loss_scale and skipped_steps (so far)");
  trainCmd->add_option("--step-log", trainRun.stepLogPath,
                       "write every micro-batch's training loss as a JSON list");
  trainCmd->add_option("--save-model", trainRun.saveModelPath,
                       "write the ONNX model with its trained initializers");
  trainCmd->add_option("--checkpoint", trainRun.checkpointDir,
                       "save the trainer state and position here after every epoch (and when "
                       "--max-steps stops)");
  trainCmd->add_option("--resume", trainRun.resumeDir,
                       "continue from a --checkpoint folder; with the same --threads the run "
                       "continues bit-identically");
  trainCmd->add_option("--nproc", trainRun.nproc,
                       "start this many ranks on this machine under mpirun (a distributed "
                       "artifact, or an .onnx model with --mesh, compiled once first); across "
                       "machines run `mpirun -np N --hostfile H tcc train ARTIFACT ...` yourself")
      ->check(CLI::Range(1, 4096));
  trainCmd->add_option("--collective-timeout", trainRun.collectiveTimeout,
                       "seconds a rank waits in a collective before the job is ended with an "
                       "error naming the collective, the step and the ranks (default 300)")
      ->check(CLI::PositiveNumber);
  addTrainingArgs(trainCmd, trainTraining);
  addCompileArgs(trainCmd, trainCompile);

  ModelArgs gradArgs;
  CompileArgs gradCompile;
  std::string gradDevice = "auto", gradOut;
  int gradThreads = 0;
  auto *gradCmd = app.add_subcommand(
      "grad", "Write the gradient of sum(output 0) with respect to each floating-point "
              "initializer as DIR/grad_<initializer index>.pb");
  addModelArgs(gradCmd, gradArgs);
  addDeviceArgs(gradCmd, gradDevice, gradThreads);
  gradCmd->add_option("--out-dir", gradOut, "where to write grad_<i>.pb (TensorProto)");
  addCompileArgs(gradCmd, gradCompile);

  PlanArgs plan;
  TrainingCli planTraining;
  CompileArgs planCompile;
  double planBandwidth = 10, planLatency = 5;
  auto *planCmd = app.add_subcommand(
      "plan", "Predict per-rank memory, communication and step time of distributed training "
              "(--mesh dp/tp/pp, --zero) from the sharded program and one rank's measured compute; with "
              "--search --devices N, the fastest mesh and strategy that fits the memory");
  planCmd->add_option("MODEL", plan.model, "ONNX model (.onnx)")->required();
  planCmd->add_option("--link-bandwidth", planBandwidth,
                      "GB/s of the link between ranks (alpha-beta model)")->default_val(10);
  planCmd->add_option("--link-latency", planLatency, "microseconds per message")->default_val(5);
  planCmd->add_option("--memory-per-device", plan.memoryPerDevice,
                      "bytes a rank may hold (state, its next value, temporaries); 0: no limit");
  planCmd->add_flag("--search", plan.search, "try dp x tp meshes and ZeRO stages over --devices");
  planCmd->add_option("--devices", plan.devices, "ranks to spread over (--search)");
  planCmd->add_option("--threads", plan.threads, "CPU threads of one rank when measuring")
      ->default_val(1);
  planCmd->add_option("--steps", plan.steps, "timed steps when measuring compute")->default_val(20);
  planCmd->add_flag("--json", plan.json, "print the candidates as a JSON list");
  double planComputeMs = 0;
  planCmd->add_option("--compute-ms", planComputeMs,
                      "one rank's step time at its local batch, measured elsewhere (e.g. a GPU's "
                      "tcc train step); default: measured here")
      ->check(CLI::PositiveNumber);
  planCmd->add_option("--scale-to", plan.scaleTo,
                      "predict weak scaling: the dp axis grown to these rank counts (e.g. 8 64 "
                      "1024), each rank's batch fixed")
      ->check(CLI::PositiveNumber);
  addTrainingArgs(planCmd, planTraining);
  addCompileArgs(planCmd, planCompile);

  ModelArgs benchArgs;
  CompileArgs benchCompile;
  BenchArgs bench;
  std::string benchDevice = "auto";
  int benchThreads = 0;
  CudaRunArgs benchCuda;
  auto *benchCmd = app.add_subcommand(
      "bench", "Compile a model (or load an artifact) and time its runs (compilation excluded)");
  addModelArgs(benchCmd, benchArgs);
  addDeviceArgs(benchCmd, benchDevice, benchThreads);
  addCudaRunArgs(benchCmd, benchCuda);
  benchCmd->add_option("--warmup", bench.warmup, "untimed runs first")->default_val(5);
  benchCmd->add_option("--iters", bench.iters, "timed runs")->default_val(50);
  benchCmd->add_flag("--json", bench.json,
                     "print one JSON object (device, device_name, compile_seconds, median_ms, "
                     "min_ms, max_ms, ...)");
  addCompileArgs(benchCmd, benchCompile);

  ModelArgs profileModel;
  CompileArgs profileCompile;
  ProfileArgs profile;
  std::string profileDevice = "cpu";
  int profileThreads = 0;
  auto *profileCmd = app.add_subcommand(
      "profile", "Compile a model (or load an artifact) and time each of its launches "
                 "(generated kernels, library calls, copies), with the model nodes each covers");
  addModelArgs(profileCmd, profileModel);
  profileCmd->add_option("--device", profileDevice,
                         "cpu (launches timed with the host clock) or cuda (GPU time of each "
                         "launch from CUDA timing events; the runs launch without a graph)")
      ->default_val("cpu");
  profileCmd->add_option("--threads", profileThreads, "CPU threads (0: all cores)")
      ->default_val(0);
  profileCmd->add_option("--warmup", profile.warmup, "untimed runs first")->default_val(3);
  profileCmd->add_option("--iters", profile.iters, "timed runs")->default_val(20);
  profileCmd->add_option("--top", profile.top, "launches in the table, by time (0: all)")
      ->default_val(20);
  profileCmd->add_flag("--json", profile.json,
                       "print one JSON object (runs, median_run_ms, mean_run_ms, "
                       "launch_ms_per_run, "
                       "host_allocator_peak_bytes, launches by time)");
  profileCmd->add_option("--trace", profile.trace,
                         "write a Chrome trace (chrome://tracing, ui.perfetto.dev) of the timed "
                         "runs to this file");
  addCompileArgs(profileCmd, profileCompile);

  CheckOptions check;
  auto *checkCmd = app.add_subcommand(
      "check", "Run ONNX backend-test cases (DIR/model.onnx, DIR/test_data_set_*/) and compare");
  checkCmd->add_option("DIR", check.caseDirs,
                       "case directories, or suite directories holding case directories")
      ->required();
  checkCmd->add_option("--device", check.device, kDeviceHelp)->default_val("auto");
  checkCmd->add_option("--expected-failures", check.expectedFailuresFile,
                       "file listing cases expected to fail, one 'NAME REASON' per line");
  checkCmd->add_option("--rtol", check.rtol, "relative tolerance (at least 2^-6 for bf16 outputs, 2^-9 for f16, 2^-3 for float8 E4M3 and 2^-2 for E5M2 ones; --atol at least 2^-8, 2^-12, 2^-9 and 2^-15)")->default_val(1e-3);
  checkCmd->add_option("--atol", check.atol, "absolute tolerance")->default_val(1e-5);
  checkCmd->add_option("-j,--jobs", check.jobs, "cases run in parallel (0: one per core)")
      ->default_val(0);
  checkCmd->add_flag("-q,--quiet", check.quiet, "print only failures, skips and the summary");
  bool checkNoCache = false;
  checkCmd->add_flag("--no-cache", checkNoCache, "do not use the on-disk kernel cache");
  checkCmd->add_option("--layout", check.layout,
                       "cpu: the layout pass, auto (the cost model), nhwc (every pointwise and "
                       "depthwise convolution channels-last) or nchw (none)")
      ->check(CLI::IsMember({"auto", "nhwc", "nchw"}))
      ->default_val("auto");
  std::string checkArchs = "sm_80,sm_90";
  checkCmd->add_option("--arch", checkArchs,
                       "CUDA: the GPU architectures to compile for, comma-separated sm_XY[a] "
                       "names")
      ->default_val("sm_80,sm_90");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }

  try {
    if (*importCmd)
      return runImport(importArgs, importOut, elide);
    if (*runCmd)
      return runRun(runArgs, runDevice, runCompileArgs, runOptions(runThreads, runCuda), outDir);
    if (*compileCmd) {
      noteGiven(compileTraining);
      return runCompile(compileArgs, compileDevice, compileFlags, compileOut, reportPath,
                        compileTrain, compileTraining.args);
    }
    if (*trainCmd) {
      noteGiven(trainTraining);
      trainRun.seedGiven = trainSeed->count() > 0;
      trainRun.self = argv[0];
      trainRun.shuffle = !noShuffle;
      CompileOptions options = compileOptions(trainCompile, "cpu"); // the options checked first
      if (isArtifactFile(trainRun.model)) {
        checkArtifactDevice(trainRun.model, trainDevice == "cpu" ? "auto" : trainDevice, "train");
      } else {
        options.device = resolveDevice(trainDevice);
        if (options.device == "interp")
          throw Error("tcc train compiles the model: train with --device cpu, cuda or auto");
      }
      return runTrain(trainRun, trainTraining.args, options);
    }
    if (*planCmd) {
      noteGiven(planTraining);
      plan.link.bytesPerSecond = planBandwidth * 1e9;
      plan.link.latencySeconds = planLatency * 1e-6;
      plan.computeSeconds = planComputeMs * 1e-3;
      return runPlan(plan, planTraining.args, compileOptions(planCompile, "cpu"));
    }
    if (*gradCmd) {
      CompileOptions options = compileOptions(gradCompile, "cpu"); // the options checked first
      GradArgs grad;
      grad.model = gradArgs.model;
      grad.device = resolveDevice(gradDevice);
      grad.outDir = gradOut;
      grad.load = loadOptions(gradArgs);
      grad.givenInputs = gradArgs.inputFiles.size();
      grad.threads = gradThreads;
      options.device = grad.device;
      return runGrad(grad, options);
    }
    if (*benchCmd)
      return runBench(benchArgs, benchDevice, benchCompile, runOptions(benchThreads, benchCuda),
                      bench);
    if (*profileCmd)
      return runProfile(profileModel, profileDevice, profileCompile,
                        runOptions(profileThreads), profile);
    if (*checkCmd) {
      check.useCache = !checkNoCache;
      check.cudaArchs = parseArchs(checkArchs);
      check.device = resolveDevice(check.device);
      return runCheck(check);
    }
  } catch (const std::exception &e) {
    std::cerr << "tcc: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
