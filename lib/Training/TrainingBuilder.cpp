//===- TrainingBuilder.cpp - Forward model -> training entry points --------===//
//
// Each entry point is a fresh @main whose arguments are laid out as TrainingSpec.h binds them;
// the imported forward model is cloned into it with its graph inputs, parameters and rng key
// mapped to the entry's arguments, then the loss, the gradients (tcc::buildGradients) and the
// optimizer update (TrainingOps.h) are appended as core ops.
//
//===----------------------------------------------------------------------===//
#include "tcc/Training/TrainingBuilder.h"

#include "tcc/Frontend/OnnxModel.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Passes/Autodiff.h"
#include "tcc/Passes/Passes.h"
#include "tcc/Training/TrainingOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

using namespace mlir;

namespace tcc {

namespace {

// ---- Building @main functions ----

/// "node 'fc1'" for a location naming an ONNX node, else MLIR's rendering of it.
std::string describeLocation(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return "node '" + name.getName().str() + "'";
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (isa<NameLoc>(inner))
        return describeLocation(inner);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << loc;
  return text;
}

/// Collects the errors emitted while it lives, each prefixed with the node it is located at.
class ErrorCollector {
public:
  explicit ErrorCollector(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &d) {
          if (d.getSeverity() == DiagnosticSeverity::Error)
            text += (text.empty() ? "" : "; ") + describeLocation(d.getLocation()) + ": " + d.str();
          return success();
        }) {}
  std::string text;

private:
  ScopedDiagnosticHandler handler;
};

/// A module with an empty @main of the given argument types, built at its end.
class MainBuilder {
public:
  MainBuilder(MLIRContext &ctx, ArrayRef<Type> argTypes) : builder(&ctx) {
    module = ModuleOp::create(UnknownLoc::get(&ctx));
    builder.setInsertionPointToEnd(module->getBody());
    func = builder.create<func::FuncOp>(UnknownLoc::get(&ctx), "main",
                                        builder.getFunctionType(argTypes, {}));
    builder.setInsertionPointToEnd(func.addEntryBlock());
  }

  Value arg(size_t i) { return func.getArgument(i); }

  /// Returns `results`, drops what nothing uses and verifies the function.
  OwningOpRef<ModuleOp> finish(ArrayRef<Value> results) {
    builder.create<func::ReturnOp>(UnknownLoc::get(builder.getContext()), results);
    func.setFunctionType(
        builder.getFunctionType(func.getArgumentTypes(), ValueRange(results).getTypes()));
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
      if (isOpTriviallyDead(&op))
        op.erase();
    ErrorCollector errors(*builder.getContext());
    if (failed(mlir::verify(*module)))
      throw Error("the training graph does not verify (a training-builder bug): " + errors.text);
    return std::move(module);
  }

  OpBuilder builder;
  func::FuncOp func;

private:
  OwningOpRef<ModuleOp> module;
};

/// Clones the body of `from`'s @main at `b`'s insertion point with its arguments replaced by
/// `args`; returns what it returns.
SmallVector<Value> inlineMain(OpBuilder &b, ModuleOp from, ArrayRef<Value> args) {
  auto main = from.lookupSymbol<func::FuncOp>("main");
  Block &body = main.getBody().front();
  IRMapping map;
  for (auto [formal, actual] : llvm::zip_equal(body.getArguments(), args))
    map.map(formal, actual);
  for (Operation &op : body.without_terminator())
    b.clone(op, map);
  SmallVector<Value> results;
  for (Value v : body.getTerminator()->getOperands())
    results.push_back(map.lookupOrDefault(v));
  return results;
}

/// The gradients of `loss` with respect to `wrt`; errors name the node that has no gradient.
SmallVector<Value> gradientsOf(OpBuilder &b, Value loss, ArrayRef<Value> wrt) {
  ErrorCollector errors(*b.getContext());
  FailureOr<SmallVector<Value>> grads;
  try {
    grads = buildGradients(b, loss, wrt);
  } catch (const Error &e) {
    throw Error(std::string("cannot differentiate the model: ") + e.what());
  }
  if (failed(grads))
    throw Error("cannot differentiate the model: " +
                (errors.text.empty() ? std::string("(no diagnostic)") : errors.text));
  return *grads;
}

// ---- Entry signatures ----

/// An entry's arguments (or results) with their names and bindings, in order.
struct Signature {
  std::vector<Type> types;
  std::vector<std::string> names;
  std::vector<Binding> bindings;

  size_t add(Type type, const std::string &name, BindingRole role, int64_t state = -1) {
    types.push_back(type);
    names.push_back(name);
    bindings.push_back({role, state});
    return types.size() - 1;
  }
};

EntrySpec makeEntry(const std::string &name, const Signature &in, const Signature &out,
                    OwningOpRef<ModuleOp> module) {
  EntrySpec e;
  e.name = name;
  e.module = std::move(module);
  e.inputNames = in.names;
  e.outputNames = out.names;
  e.inputs = in.bindings;
  e.outputs = out.bindings;
  return e;
}

// ---- Options ----

const char *lossName(LossKind k) { return k == LossKind::MSE ? "mse" : "cross_entropy"; }

const char *optimizerName(OptimizerKind k) {
  switch (k) {
  case OptimizerKind::SGD: return "sgd";
  case OptimizerKind::Adam: return "adam";
  case OptimizerKind::AdamW: return "adamw";
  }
  return "?";
}

void checkOptions(const TrainingOptions &o) {
  auto require = [](bool ok, const std::string &what) {
    if (!ok)
      throw Error("invalid training option: " + what);
  };
  require(o.labelSmoothing >= 0 && o.labelSmoothing <= 1, "label smoothing must be in [0, 1]");
  require(o.loss == LossKind::CrossEntropy || o.labelSmoothing == 0,
          "label smoothing applies to cross-entropy only");
  require(o.momentum >= 0 && std::isfinite(o.momentum), "momentum must be >= 0");
  require(!o.nesterov || (o.optimizer == OptimizerKind::SGD && o.momentum > 0),
          "nesterov needs SGD with momentum > 0");
  require(o.weightDecay >= 0 && std::isfinite(o.weightDecay), "weight decay must be >= 0");
  require(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
          "beta1 and beta2 must be in [0, 1)");
  require(o.epsilon > 0, "epsilon must be > 0");
  require(o.clipGradNorm >= 0 && std::isfinite(o.clipGradNorm), "clip_grad_norm must be >= 0");
  require(o.gradAccumulation >= 1, "grad accumulation must be >= 1");
  require(o.microBatches >= 1, "micro-batches must be >= 1");
  require(o.microBatchShards >= 1 && (o.microBatchShards == 1 || o.microBatches > 1),
          "micro-batch shards must be >= 1 and need micro-batches");
  require(o.microBatches == 1 || o.gradAccumulation == 1,
          "pipeline micro-batches and gradient accumulation do not combine (the micro-batches "
          "already accumulate within each step: use more of them)");
  require(o.precision == "fp32" || o.precision == "bf16" || o.precision == "fp16",
          "precision must be fp32, bf16 or fp16");
  require(o.initialLossScale > 0 && std::isfinite(o.initialLossScale),
          "the initial loss scale must be positive");
  require(o.lossScaleGrowthInterval >= 1, "the loss scale's growth interval must be >= 1");
}

/// torch.autocast's rule on a forward model (the Autocast pass): matrix products and attention
/// in 16 bits. Attention's gradient is then a 16-bit tcc.attention_grad: the CPU runs bf16 ones
/// fused (f32 scores, softmax and sums); elsewhere both decompose, computing in f32.
void autocastForward(ModuleOp module, const std::string &precision) {
  if (precision == "fp32")
    return;
  PassManager pm(module.getContext());
  AutocastOptions autocast;
  autocast.precision = precision;
  autocast.target = "none";
  autocast.allAttention = true;
  pm.addNestedPass<func::FuncOp>(createAutocast(autocast));
  ErrorCollector errors(*module.getContext());
  if (failed(pm.run(module)))
    throw Error("cannot run the model in " + precision + ": " + errors.text);
}

/// A batch of rows times one weight matrix (the importer's matmul(x, broadcast(W)), x of rank
/// > 2) becomes one GEMM over all the rows: reshape(matmul(reshape(x, [rows, K]), W)). The
/// forward computes the same products; the gradient with respect to W is then one GEMM over
/// all rows, where the batched form made a [batch, K, N] gradient per weight and summed it
/// over the batch afterwards (each of those lived through most of the backward pass: 2 MiB per
/// MLP weight of a 128-token batch of 8, the step's largest buffers).
void foldBatchesIntoRows(func::FuncOp f) {
  SmallVector<MatmulOp> matmuls;
  f.walk([&](MatmulOp m) { matmuls.push_back(m); });
  for (MatmulOp m : matmuls) {
    auto weight = m.getRhs().getDefiningOp<BroadcastInDimOp>();
    ArrayRef<int64_t> xShape = CoreBuilder::shapeOf(m.getLhs());
    int64_t rank = xShape.size();
    if (!weight || rank <= 2 || m.getLhs().getDefiningOp<BroadcastInDimOp>())
      continue;
    Value w = weight.getX();
    if (CoreBuilder::rankOf(w) != 2 ||
        weight.getDims() != ArrayRef<int64_t>{rank - 2, rank - 1})
      continue;
    int64_t rows = 1;
    for (int64_t d : xShape.drop_back())
      rows *= d;
    OpBuilder builder(m);
    CoreBuilder b(builder, m.getLoc());
    Value product = b.create<MatmulOp>(b.reshape(m.getLhs(), {rows, xShape.back()}), w);
    m.getResult().replaceAllUsesWith(b.reshape(product, CoreBuilder::shapeOf(m.getResult())));
    m.erase();
    if (weight->use_empty())
      weight->erase();
  }
}

/// Moves the scalars computed from arguments and constants alone (the optimizer's step count,
/// bias corrections and step size) to the start of `f`. Built with the optimizer, after the
/// backward pass, they held every parameter's update back until then: the fused weight-gradient
/// reductions read by those updates waited too, and kept their inputs (batch-sized gradients)
/// alive through the whole backward pass.
void hoistScalarPrologue(func::FuncOp f) {
  Block &block = f.getBody().front();
  llvm::DenseSet<Operation *> hoisted;
  Operation *insertAfter = nullptr;
  for (Operation &op : llvm::make_early_inc_range(block.without_terminator())) {
    bool scalar = llvm::all_of(op.getResults(), [](Value r) {
      auto t = dyn_cast<RankedTensorType>(r.getType());
      return t && t.getRank() == 0;
    });
    bool fromArguments = llvm::all_of(op.getOperands(), [&](Value v) {
      Operation *d = v.getDefiningOp();
      return !d || hoisted.count(d) || (isa<ConstantOp>(d) && d->getBlock() == &block);
    });
    if (!scalar || !fromArguments || op.getNumRegions() || !isMemoryEffectFree(&op))
      continue;
    for (Value v : op.getOperands())
      if (Operation *d = v.getDefiningOp(); d && !hoisted.count(d)) { // a constant: before it
        if (insertAfter)
          d->moveAfter(insertAfter);
        else
          d->moveBefore(&block.front());
        insertAfter = d;
        hoisted.insert(d);
      }
    if (insertAfter)
      op.moveAfter(insertAfter);
    else
      op.moveBefore(&block.front());
    insertAfter = &op;
    hoisted.insert(&op);
  }
}

/// Whether any element of `grads` is an inf or NaN, as an i1 scalar: sum(g * 0) over every
/// gradient is 0 when all are finite and NaN otherwise (0 * inf is NaN), exactly.
Value anyNonFinite(CoreBuilder &b, ArrayRef<Value> grads) {
  Value probe;
  for (Value g : grads) {
    SmallVector<int64_t> all(CoreBuilder::rankOf(g));
    std::iota(all.begin(), all.end(), 0);
    Value zeroed = b.reduce(ReduceKind::Sum, b.mul(g, b.scalarLike(g, 0.0)), all, false);
    if (CoreBuilder::elementTypeOf(zeroed) != b.builder().getF32Type())
      zeroed = b.cast(zeroed, b.builder().getF32Type());
    probe = probe ? b.add(probe, zeroed) : zeroed;
  }
  return b.compare(CompareKind::Ne, probe, probe);
}

/// `classes`: cross-entropy's class count (the logits' dim 1), so that users of the artifact
/// can check labels before training on them.
std::string configJson(const TrainingOptions &o, const std::vector<std::string> &trained,
                       int64_t classes) {
  std::ostringstream os;
  os.precision(17);
  os << "{\"loss\": \"" << lossName(o.loss) << "\", \"output_index\": " << o.outputIndex;
  if (o.loss == LossKind::CrossEntropy)
    os << ", \"label_smoothing\": " << o.labelSmoothing << ", \"label_type\": \""
       << dtypeName(o.labelType) << "\", \"classes\": " << classes;
  os << ", \"optimizer\": \"" << optimizerName(o.optimizer) << "\"";
  if (o.optimizer == OptimizerKind::SGD)
    os << ", \"momentum\": " << o.momentum << ", \"nesterov\": " << (o.nesterov ? "true" : "false");
  else
    os << ", \"beta1\": " << o.beta1 << ", \"beta2\": " << o.beta2 << ", \"epsilon\": " << o.epsilon;
  os << ", \"weight_decay\": " << o.weightDecay << ", \"clip_grad_norm\": " << o.clipGradNorm
     << ", \"grad_accumulation\": " << o.gradAccumulation << ", \"precision\": \""
     << o.precision << "\"";
  if (o.precision == "fp16")
    os << ", \"initial_loss_scale\": " << o.initialLossScale
       << ", \"loss_scale_growth_interval\": " << o.lossScaleGrowthInterval;
  os << ", \"trainable\": [";
  for (size_t i = 0; i < trained.size(); ++i) {
    os << (i ? ", " : "") << '"';
    for (char c : trained[i]) {
      if (c == '"' || c == '\\')
        os << '\\' << c;
      else if ((unsigned char)c < 0x20)
        os << "\\u00" << "0123456789abcdef"[(c >> 4) & 0xf] << "0123456789abcdef"[c & 0xf];
      else
        os << c;
    }
    os << '"';
  }
  os << "]}";
  return os.str();
}

bool isFloatInitializer(const onnx::TensorProto &t) {
  auto dtype = dtypeFromOnnx(t.data_type());
  return dtype && isFloat(*dtype);
}

/// BatchNormalization running statistics (inputs 3 and 4) that are floating-point initializers:
/// state the train step updates without a gradient.
std::set<std::string> bufferInitializers(const onnx::GraphProto &graph) {
  std::set<std::string> floats, buffers;
  for (const auto &init : graph.initializer())
    if (isFloatInitializer(init))
      floats.insert(init.name());
  for (const auto &node : graph.node())
    if (node.op_type() == "BatchNormalization" && (node.domain().empty() || node.domain() == "ai.onnx"))
      for (int i : {3, 4})
        if (i < node.input_size() && floats.count(node.input(i)))
          buffers.insert(node.input(i));
  return buffers;
}

/// The initializers to train (in initializer order), checking the names in `trainable` and
/// `frozen`.
std::vector<int64_t> trainedInitializers(const onnx::GraphProto &graph, const TrainingOptions &o,
                                         const std::set<std::string> &buffers) {
  std::map<std::string, int64_t> floats;
  for (int i = 0; i < graph.initializer_size(); ++i)
    if (isFloatInitializer(graph.initializer(i)))
      floats[graph.initializer(i).name()] = i;
  for (const auto *list : {&o.trainable, &o.frozen})
    for (const std::string &name : *list)
      if (!floats.count(name))
        throw Error("'" + name + "' (" + (list == &o.trainable ? "trainable" : "frozen") +
                    ") is not a floating-point initializer of the model");
  for (const std::string &name : o.trainable)
    if (buffers.count(name))
      throw Error("'" + name + "' (trainable) is a BatchNormalization running statistic, which "
                  "training updates from the batches, not from a gradient");
  std::vector<int64_t> trained;
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const std::string &name = graph.initializer(i).name();
    if (floats.count(name) && !buffers.count(name) &&
        (o.trainable.empty() || o.trainable.count(name)) && !o.frozen.count(name))
      trained.push_back(i);
  }
  if (trained.empty())
    throw Error("the model has no trainable parameters (no floating-point initializer is "
                "selected for training)");
  return trained;
}

func::FuncOp mainOf(ModuleOp module) { return module.lookupSymbol<func::FuncOp>("main"); }

} // namespace

TrainingSpec buildTraining(MLIRContext &ctx, const onnx::ModelProto &model,
                           const TrainingOptions &options, const ImportOptions &importOptions,
                           const onnx::ModelProto *microBatchModel) {
  checkOptions(options);
  if (options.microBatches > 1 && !microBatchModel)
    throw Error("internal error: micro-batches need the model prepared at the micro-batch size");
  const onnx::GraphProto &graph = model.graph();
  if (options.outputIndex < 0 || options.outputIndex >= graph.output_size())
    throw Error("loss output index " + std::to_string(options.outputIndex) +
                " is out of range: the model has " + std::to_string(graph.output_size()) +
                " output(s)");
  ImportOptions trainImport = importOptions;
  trainImport.bufferInitializers = bufferInitializers(graph);
  trainImport.parameterInitializers.clear();
  for (int64_t i : trainedInitializers(graph, options, trainImport.bufferInitializers))
    trainImport.parameterInitializers.insert(graph.initializer(i).name());
  trainImport.training = true;
  ImportedModel train = importOnnxModel(ctx, model, trainImport);
  recognizeAttention(mainOf(*train.module)); // before autodiff: the op's own gradient rule
  foldBatchesIntoRows(mainOf(*train.module));
  autocastForward(*train.module, options.precision);
  // The import keeps as constants the initializers whose values it needs at compile time.
  std::vector<int64_t> trained = train.parameterIndices;
  for (const std::string &name : options.trainable)
    if (std::none_of(trained.begin(), trained.end(),
                     [&](int64_t i) { return graph.initializer(i).name() == name; }))
      throw Error("'" + name + "' cannot be trained: the model needs its value at compile time");
  if (trained.empty())
    throw Error("the model has no trainable parameters (every selected floating-point "
                "initializer is needed at compile time)");
  // Pipeline micro-batches: the forward at the micro-batch size, once per micro-batch (each
  // continues Dropout's counters where the previous one stops).
  std::vector<ImportedModel> micro;
  for (int64_t mb = 0; options.microBatches > 1 && mb < options.microBatches; ++mb) {
    ImportOptions microImport = trainImport;
    microImport.microBatch = mb;
    microImport.microBatches = options.microBatches;
    microImport.microBatchShards = options.microBatchShards;
    micro.push_back(importOnnxModel(ctx, *microBatchModel, microImport));
    recognizeAttention(mainOf(*micro.back().module));
    foldBatchesIntoRows(mainOf(*micro.back().module));
    autocastForward(*micro.back().module, options.precision);
    if (micro.back().parameterIndices != train.parameterIndices ||
        micro.back().bufferIndices != train.bufferIndices)
      throw Error("internal error: a micro-batch's parameters differ from the train step's");
  }
  ImportOptions evalImport = trainImport;
  evalImport.training = false;
  evalImport.parameterInitializers.clear();
  for (int64_t i : trained)
    evalImport.parameterInitializers.insert(graph.initializer(i).name());
  ImportedModel eval = importOnnxModel(ctx, model, evalImport);
  recognizeAttention(mainOf(*eval.module));
  autocastForward(*eval.module, options.precision);
  if (eval.parameterIndices != trained || eval.bufferIndices != train.bufferIndices)
    throw Error("internal error: the eval graph's parameters differ from the train step's");

  TrainingSpec spec;
  spec.gradAccumulation = options.gradAccumulation;
  bool accumulate = options.gradAccumulation > 1;
  size_t numParams = trained.size(), numBuffers = train.bufferIndices.size();
  std::vector<std::string> trainedNames;

  // ---- State: parameters, buffers, optimizer state, step, accumulators ----
  auto fromInitializer = [&](int64_t i, StateKind kind) {
    const onnx::TensorProto &init = graph.initializer(i);
    StateSpec s;
    s.name = init.name();
    s.kind = kind;
    s.initial = tensorFromProto(init);
    s.initializerIndex = i;
    spec.state.push_back(std::move(s));
    return spec.state.size() - 1;
  };
  for (int64_t i : trained)
    trainedNames.push_back(spec.state[fromInitializer(i, StateKind::Parameter)].name);
  std::vector<size_t> bufferState;
  for (int64_t i : train.bufferIndices)
    bufferState.push_back(fromInitializer(i, StateKind::Buffer));
  auto zerosLike = [&](size_t p, const std::string &suffix, StateKind kind) {
    spec.state.push_back({trainedNames[p] + "." + suffix, kind,
                          Tensor(spec.state[p].initial.dtype(), spec.state[p].initial.shape())});
    return spec.state.size() - 1;
  };
  std::vector<std::string> slots = optimizerStateNames(options);
  std::vector<std::vector<size_t>> optState(numParams); // [parameter][slot] -> state index
  for (size_t p = 0; p < numParams; ++p)
    for (const std::string &slot : slots)
      optState[p].push_back(zerosLike(p, slot, StateKind::OptimizerState));
  size_t stepState = spec.state.size();
  spec.state.push_back({"step", StateKind::Step, Tensor::scalar<int64_t>(0)});
  // fp16: the dynamic loss scale, its run of good steps and the steps skipped.
  const bool scaled = options.precision == "fp16";
  std::vector<size_t> scaleState;
  if (scaled) {
    scaleState.push_back(spec.state.size());
    spec.state.push_back({"loss_scale", StateKind::LossScale,
                          Tensor::scalar<float>((float)options.initialLossScale)});
    scaleState.push_back(spec.state.size());
    spec.state.push_back({"loss_scale.good_steps", StateKind::LossScale, Tensor::scalar<int64_t>(0)});
    scaleState.push_back(spec.state.size());
    spec.state.push_back({"loss_scale.skipped_steps", StateKind::LossScale,
                          Tensor::scalar<int64_t>(0)});
  }
  std::vector<size_t> accState;
  if (accumulate)
    for (size_t p = 0; p < numParams; ++p)
      accState.push_back(zerosLike(p, "grad_accum", StateKind::GradAccumulator));
  auto stateType = [&](size_t i) { return tensorTypeOf(&ctx, spec.state[i].initial); };

  // ---- Data: graph inputs, then labels ----
  func::FuncOp trainMain = mainOf(*train.module);
  size_t numInputs = train.inputNames.size(), numOutputs = train.outputNames.size();
  RankedTensorType outputType =
      cast<RankedTensorType>(trainMain.getResultTypes()[options.outputIndex]);
  RankedTensorType labelType;
  try {
    labelType = labelTypeFor(&ctx, options, outputType);
  } catch (const Error &e) {
    throw Error("cannot build the loss on model output '" + train.outputNames[options.outputIndex] +
                "': " + e.what());
  }
  std::string labelName = options.loss == LossKind::MSE ? "targets" : "labels";
  Type lrType = RankedTensorType::get({}, Float32Type::get(&ctx));
  Type keyType = RankedTensorType::get({}, IntegerType::get(&ctx, 64, IntegerType::Unsigned));
  bool usesKey = train.rngKeyArgument >= 0;

  /// The arguments every entry starts with: State(parameters, buffers, `extra`...).
  auto stateArgs = [&](Signature &sig, ArrayRef<size_t> extra) {
    for (size_t p = 0; p < numParams; ++p)
      sig.add(stateType(p), spec.state[p].name, BindingRole::State, p);
    for (size_t s : bufferState)
      sig.add(stateType(s), spec.state[s].name, BindingRole::State, s);
    for (size_t s : extra)
      sig.add(stateType(s), spec.state[s].name, BindingRole::State, s);
  };
  /// Data(graph inputs..., labels); returns the argument number of the first.
  auto dataArgs = [&](Signature &sig) {
    size_t first = sig.types.size();
    for (size_t i = 0; i < numInputs; ++i)
      sig.add(trainMain.getArgumentTypes()[i], train.inputNames[i], BindingRole::Data);
    sig.add(labelType, labelName, BindingRole::Data);
    return first;
  };
  /// The forward model in `m` on the parameters and buffers (arguments 0.. as stateArgs lays
  /// them out) and the data at `data`; returns its results (graph outputs, then in training
  /// mode the buffers' next values).
  auto forward = [&](MainBuilder &m, const ImportedModel &imported, size_t data, int64_t key) {
    SmallVector<Value> args;
    for (size_t i = 0; i < numInputs; ++i)
      args.push_back(m.arg(data + i));
    for (size_t i = 0; i < numParams + numBuffers; ++i)
      args.push_back(m.arg(i));
    if (imported.rngKeyArgument >= 0)
      args.push_back(m.arg(key));
    return inlineMain(m.builder, *imported.module, args);
  };
  /// Forward in training mode, the mean loss and its gradients with respect to the parameters
  /// (`lossScale`, when given: of the loss times it, divided by it afterwards).
  struct Step {
    Value loss;
    SmallVector<Value> grads, buffersNext;
  };
  auto trainForward = [&](MainBuilder &m, size_t data, int64_t key, Value lossScale) {
    CoreBuilder b(m.builder, NameLoc::get(StringAttr::get(&ctx, "loss")));
    Step step;
    SmallVector<Value> outputs;
    if (micro.empty()) {
      outputs = forward(m, train, data, key);
      step.loss = buildLoss(b, options, outputs[options.outputIndex], m.arg(data + numInputs)).mean;
    } else {
      // Micro-batch mb: rows [mb * rows, (mb + 1) * rows) of the first input and the labels
      // (of each of the microBatchShards blocks of rows), the buffers as the previous
      // micro-batch left them.
      auto rowsOf = [&](Value x, int64_t mb) {
        ArrayRef<int64_t> shape = CoreBuilder::shapeOf(x);
        int64_t shards = options.microBatchShards, parts = shards * options.microBatches;
        if (shape.empty() || shape[0] % parts)
          throw Error("a batch of " + std::to_string(shape.empty() ? 0 : shape[0]) +
                      " rows does not split into " +
                      (shards > 1 ? std::to_string(shards) + " data-parallel blocks of " : "") +
                      std::to_string(options.microBatches) + " micro-batches");
        int64_t rows = shape[0] / parts;
        if (shards == 1)
          return b.sliceDim(x, 0, mb * rows, (mb + 1) * rows);
        SmallVector<int64_t> blocks{shards, options.microBatches, rows}, micro{shards * rows};
        blocks.append(shape.begin() + 1, shape.end());
        micro.append(shape.begin() + 1, shape.end());
        return b.reshape(b.sliceDim(b.reshape(x, blocks), 1, mb, mb + 1), micro);
      };
      Block *block = m.builder.getInsertionBlock();
      SmallVector<Value> buffers, losses;
      for (size_t i = 0; i < numBuffers; ++i)
        buffers.push_back(m.arg(numParams + i));
      for (int64_t mb = 0; mb < options.microBatches; ++mb) {
        Operation *before = block->empty() ? nullptr : &block->back();
        SmallVector<Value> args;
        for (size_t i = 0; i < numInputs; ++i)
          args.push_back(i == 0 ? rowsOf(m.arg(data), mb) : m.arg(data + i));
        for (size_t p = 0; p < numParams; ++p)
          args.push_back(m.arg(p));
        args.append(buffers);
        if (micro[mb].rngKeyArgument >= 0)
          args.push_back(m.arg(key));
        outputs = inlineMain(m.builder, *micro[mb].module, args);
        Value labels = rowsOf(m.arg(data + numInputs), mb);
        losses.push_back(buildLoss(b, options, outputs[options.outputIndex], labels).mean);
        buffers.assign(outputs.begin() + numOutputs, outputs.end());
        int64_t index = 0;
        for (Operation *op = before ? before->getNextNode() : &block->front(); op;
             op = op->getNextNode()) {
          op->setAttr(TccDialect::kMicroBatchAttrName, m.builder.getI64IntegerAttr(mb));
          op->setAttr(TccDialect::kForwardIndexAttrName, m.builder.getI64IntegerAttr(index++));
        }
      }
      Value total = losses[0];
      for (size_t k = 1; k < losses.size(); ++k)
        total = b.add(total, losses[k]);
      step.loss = b.div(total, b.scalarLike(total, (double)options.microBatches));
      outputs.resize(numOutputs);
      outputs.append(buffers);
    }
    SmallVector<Value> params;
    for (size_t p = 0; p < numParams; ++p)
      params.push_back(m.arg(p));
    step.grads = gradientsOf(m.builder, lossScale ? b.mul(step.loss, lossScale) : step.loss,
                             params);
    if (lossScale) {
      Value inverse = b.div(b.scalarLike(lossScale, 1.0), lossScale);
      for (Value &g : step.grads)
        g = b.mul(g, inverse);
    }
    step.buffersNext.assign(outputs.begin() + numOutputs, outputs.end());
    return step;
  };

  // ---- train_step ----
  {
    Signature in, out;
    std::vector<size_t> extra; // optimizer state, step, accumulators (state order)
    for (auto &slotsOfParam : optState)
      extra.insert(extra.end(), slotsOfParam.begin(), slotsOfParam.end());
    extra.push_back(stepState);
    extra.insert(extra.end(), accState.begin(), accState.end());
    extra.insert(extra.end(), scaleState.begin(), scaleState.end());
    stateArgs(in, extra);
    // Argument number of each state in this entry.
    std::vector<size_t> argOf(spec.state.size());
    for (size_t i = 0; i < in.bindings.size(); ++i)
      argOf[in.bindings[i].state] = i;
    size_t data = dataArgs(in);
    size_t lr = in.add(lrType, "learning_rate", BindingRole::LearningRate);
    int64_t key = usesKey ? (int64_t)in.add(keyType, "rng_key", BindingRole::RngKey) : -1;

    MainBuilder m(ctx, in.types);
    Step step = trainForward(m, data, key, scaled ? m.arg(argOf[scaleState[0]]) : Value());
    CoreBuilder b(m.builder, NameLoc::get(StringAttr::get(&ctx, "optimizer")));
    SmallVector<Value> grads = step.grads;
    if (accumulate)
      for (size_t p = 0; p < numParams; ++p)
        grads[p] = b.div(b.add(m.arg(argOf[accState[p]]), grads[p]),
                         b.scalarLike(grads[p], (double)options.gradAccumulation));
    if (options.clipGradNorm > 0)
      grads = clipGradNorm(b, grads, options.clipGradNorm);
    SmallVector<Value> paramValues;
    std::vector<SmallVector<Value>> optValues(numParams);
    for (size_t p = 0; p < numParams; ++p) {
      paramValues.push_back(m.arg(p));
      for (size_t s : optState[p])
        optValues[p].push_back(m.arg(argOf[s]));
    }
    OptimizerUpdate update = buildOptimizerUpdate(b, options, paramValues, grads, optValues,
                                                  m.arg(argOf[stepState]), m.arg(lr));
    SmallVector<Value> scaleNext;
    if (scaled) {
      // A step with an inf or NaN gradient keeps every parameter, optimizer state and the step
      // count; the scale halves. Otherwise it doubles after growth-interval good steps.
      Value skip = anyNonFinite(b, grads);
      auto unlessSkipped = [&](Value next, Value old) { return b.select(skip, old, next); };
      for (size_t p = 0; p < numParams; ++p) {
        update.params[p] = unlessSkipped(update.params[p], paramValues[p]);
        for (size_t s = 0; s < slots.size(); ++s)
          update.state[p][s] = unlessSkipped(update.state[p][s], optValues[p][s]);
      }
      update.step = unlessSkipped(update.step, m.arg(argOf[stepState]));
      Value scale = m.arg(argOf[scaleState[0]]), good = m.arg(argOf[scaleState[1]]),
            skipped = m.arg(argOf[scaleState[2]]);
      Value zero = b.scalarLike(good, 0), one = b.scalarLike(good, 1);
      Value goodNext = b.select(skip, zero, b.add(good, one));
      Value grow = b.compare(CompareKind::Ge, goodNext,
                             b.scalarLike(good, (double)options.lossScaleGrowthInterval));
      scaleNext = {b.select(skip, b.mul(scale, b.scalarLike(scale, 0.5)),
                            b.select(grow, b.mul(scale, b.scalarLike(scale, 2.0)), scale)),
                   b.select(grow, zero, goodNext), b.add(skipped, b.select(skip, one, zero))};
    }
    SmallVector<Value> results;
    auto result = [&](Value v, size_t state) {
      results.push_back(v);
      out.add(v.getType(), spec.state[state].name, BindingRole::State, state);
    };
    for (size_t p = 0; p < numParams; ++p)
      result(update.params[p], p);
    for (size_t i = 0; i < numBuffers; ++i)
      result(step.buffersNext[i], bufferState[i]);
    for (size_t p = 0; p < numParams; ++p)
      for (size_t s = 0; s < slots.size(); ++s)
        result(update.state[p][s], optState[p][s]);
    result(update.step, stepState);
    for (size_t p = 0; p < accState.size(); ++p)
      result(b.splatLike(grads[p], 0), accState[p]);
    for (size_t i = 0; i < scaleNext.size(); ++i)
      result(scaleNext[i], scaleState[i]);
    results.push_back(step.loss);
    out.add(step.loss.getType(), "loss", BindingRole::Loss);
    OwningOpRef<ModuleOp> module = m.finish(results);
    hoistScalarPrologue(mainOf(*module));
    spec.entries.push_back(makeEntry("train_step", in, out, std::move(module)));
  }

  // ---- accumulate_step: State(parameters, buffers, accumulators) ----
  if (accumulate) {
    Signature in, out;
    std::vector<size_t> extra = accState;
    if (scaled)
      extra.push_back(scaleState[0]); // read, not updated: train_step updates it
    stateArgs(in, extra);
    size_t data = dataArgs(in);
    int64_t key = usesKey ? (int64_t)in.add(keyType, "rng_key", BindingRole::RngKey) : -1;

    MainBuilder m(ctx, in.types);
    Value lossScale = scaled ? m.arg(numParams + numBuffers + accState.size()) : Value();
    Step step = trainForward(m, data, key, lossScale);
    CoreBuilder b(m.builder, NameLoc::get(StringAttr::get(&ctx, "accumulate")));
    SmallVector<Value> results;
    auto result = [&](Value v, size_t state) {
      results.push_back(v);
      out.add(v.getType(), spec.state[state].name, BindingRole::State, state);
    };
    for (size_t i = 0; i < numBuffers; ++i)
      result(step.buffersNext[i], bufferState[i]);
    for (size_t p = 0; p < numParams; ++p)
      result(b.add(m.arg(numParams + numBuffers + p), step.grads[p]), accState[p]);
    results.push_back(step.loss);
    out.add(step.loss.getType(), "loss", BindingRole::Loss);
    spec.entries.push_back(makeEntry("accumulate_step", in, out, m.finish(results)));
  }

  // ---- eval: per-sample loss and, for cross-entropy, the predicted class ----
  int64_t classes = 0;
  {
    Signature in, out;
    stateArgs(in, {});
    size_t data = dataArgs(in);

    MainBuilder m(ctx, in.types);
    SmallVector<Value> outputs = forward(m, eval, data, -1);
    CoreBuilder b(m.builder, NameLoc::get(StringAttr::get(&ctx, "loss")));
    Value logits = outputs[options.outputIndex];
    if (CoreBuilder::shapeOf(logits).size() >= 2)
      classes = CoreBuilder::shapeOf(logits)[1];
    LossValues loss = buildLoss(b, options, logits, m.arg(data + numInputs));
    SmallVector<Value> results{loss.perSample};
    out.add(loss.perSample.getType(), "loss", BindingRole::Data);
    if (loss.prediction) {
      results.push_back(loss.prediction);
      out.add(loss.prediction.getType(), "prediction", BindingRole::Data);
    }
    spec.entries.push_back(makeEntry("eval", in, out, m.finish(results)));
  }

  spec.configJson = configJson(options, trainedNames, classes);
  return spec;
}

ImportedModel buildGradientOfSum(MLIRContext &ctx, const onnx::ModelProto &model,
                                 const ImportOptions &options) {
  ImportOptions withParams = options;
  withParams.parameterInitializers.clear();
  for (const auto &init : model.graph().initializer())
    if (isFloatInitializer(init))
      withParams.parameterInitializers.insert(init.name());
  if (withParams.parameterInitializers.empty())
    throw Error("the model has no floating-point initializers to differentiate");
  ImportedModel imported = importOnnxModel(ctx, model, withParams);
  func::FuncOp main = mainOf(*imported.module);
  recognizeAttention(main);
  if (main.getNumResults() == 0)
    throw Error("the model has no outputs");
  Operation *ret = main.getBody().front().getTerminator();
  Value output = ret->getOperand(0);
  if (!isa<FloatType>(CoreBuilder::elementTypeOf(output)))
    throw Error("output '" + imported.outputNames[0] + "' is not floating-point: it has no gradient");

  OpBuilder builder(ret);
  CoreBuilder b(builder, NameLoc::get(StringAttr::get(&ctx, "sum")));
  SmallVector<int64_t> dims(CoreBuilder::rankOf(output));
  std::iota(dims.begin(), dims.end(), 0);
  Value loss = b.reduce(ReduceKind::Sum, output, dims, false);
  size_t firstParam = imported.inputNames.size();
  SmallVector<Value> params;
  for (size_t i = 0; i < imported.parameterIndices.size(); ++i)
    params.push_back(main.getArgument(firstParam + i));
  SmallVector<Value> grads = gradientsOf(builder, loss, params);
  builder.create<func::ReturnOp>(ret->getLoc(), grads);
  ret->erase();
  main.setFunctionType(builder.getFunctionType(main.getArgumentTypes(), ValueRange(grads).getTypes()));
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(main.getBody().front())))
    if (isOpTriviallyDead(&op))
      op.erase();
  imported.outputNames.clear();
  for (int64_t i : imported.parameterIndices)
    imported.outputNames.push_back("grad_" + std::to_string(i));
  ErrorCollector errors(ctx);
  if (failed(mlir::verify(*imported.module)))
    throw Error("the gradient graph does not verify (a training-builder bug): " + errors.text);
  return imported;
}

} // namespace tcc
