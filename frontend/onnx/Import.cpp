//===- Import.cpp - ONNX graph -> tcc dialect: the driver -------------------===//
//
// Walks the ONNX graph in order, binds names to tcc values (with a scope per subgraph), runs
// each node's lowering from the registry (or expands the node through its ONNX function body),
// folds what became constant, and specializes graph inputs whose values the model needs at
// compile time (restarting the import with them baked in).
//
//===----------------------------------------------------------------------===//
#include "Import.h"

#include "tcc/Frontend/OnnxModel.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "onnx/defs/schema.h"
#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <set>
#include <sstream>

using namespace mlir;

namespace tcc::onnx_import {

// ---- Registry ----

void OpRegistry::add(const std::string &opType, OpLowering lowering, const std::string &domain) {
  lowerings_[{domain == "ai.onnx" ? "" : domain, opType}] = std::move(lowering);
}

const OpLowering *OpRegistry::find(const std::string &domain, const std::string &opType) const {
  auto it = lowerings_.find({domain == "ai.onnx" ? "" : domain, opType});
  return it == lowerings_.end() ? nullptr : &it->second;
}

const OpRegistry &opRegistry() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    registerElementwiseOps(r);
    registerShapeOps(r);
    registerReductionOps(r);
    registerNNOps(r);
    registerControlFlowOps(r);
    registerRecurrentOps(r);
    registerMiscOps(r);
    registerTransformerOps(r);
    registerSequenceOps(r);
    return r;
  }();
  return registry;
}

static std::string normalizeDomain(const std::string &d) { return d == "ai.onnx" ? "" : d; }

static std::string nodeLabel(const onnx::NodeProto &node) {
  return node.name().empty() ? "<unnamed " + node.op_type() + ">" : node.name();
}

/// The ONNX function body of an operator without a lowering, if its schema has one.
static const onnx::OpSchema *functionSchema(const std::string &domain, const std::string &opType,
                                            int64_t opset) {
  const auto *schema = onnx::OpSchemaRegistry::Schema(opType, (int)opset, domain);
  if (schema && (schema->HasFunction() || schema->HasContextDependentFunction()))
    return schema;
  return nullptr;
}

/// The model-local function (ModelProto.functions, as exporters such as PyTorch's dynamo
/// exporter write them) a node of `domain`::`opType` calls, if any.
static const onnx::FunctionProto *localFunction(const onnx::ModelProto &model,
                                                const std::string &domain,
                                                const std::string &opType) {
  for (const auto &fn : model.functions())
    if (fn.name() == opType && normalizeDomain(fn.domain()) == domain)
      return &fn;
  return nullptr;
}

/// The default values of a model-local function's attributes: FunctionProto.attribute_proto
/// (IR 9, field 11), which the ONNX 1.12 schema predates, so it is read from the unknown fields
/// protobuf kept.
static std::vector<onnx::AttributeProto> localFunctionDefaults(const onnx::FunctionProto &fn) {
  constexpr int kAttributeProtoField = 11;
  std::vector<onnx::AttributeProto> out;
  const google::protobuf::UnknownFieldSet &unknown = fn.GetReflection()->GetUnknownFields(fn);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &f = unknown.field(i);
    onnx::AttributeProto a;
    if (f.number() == kAttributeProtoField &&
        f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED &&
        a.ParseFromString(f.length_delimited()))
      out.push_back(std::move(a));
  }
  return out;
}

static std::map<std::string, int64_t> opsetsOf(const onnx::ModelProto &model);
static onnx::FunctionProto functionBody(NodeContext &ctx, const onnx::OpSchema &schema);

// ---- Unsupported ops ----

using UnsupportedMap =
    std::map<std::tuple<std::string, std::string, int64_t>, std::vector<std::string>>;

/// Every node without a lowering, a schema function body or a model-local function, and those
/// inside the local functions the nodes call (each function's body once).
static void collectUnsupported(const onnx::ModelProto &model,
                               const google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes,
                               const std::map<std::string, int64_t> &opsets,
                               std::set<const onnx::FunctionProto *> &visited,
                               UnsupportedMap &found) {
  for (const auto &node : nodes) {
    std::string domain = normalizeDomain(node.domain());
    auto it = opsets.find(domain);
    int64_t opset = it == opsets.end() ? -1 : it->second;
    if (const onnx::FunctionProto *fn = localFunction(model, domain, node.op_type())) {
      if (visited.insert(fn).second) {
        std::map<std::string, int64_t> fnOpsets = opsets;
        for (const auto &o : fn->opset_import())
          fnOpsets[normalizeDomain(o.domain())] = o.version();
        collectUnsupported(model, fn->node(), fnOpsets, visited, found);
      }
    } else if (!opRegistry().find(domain, node.op_type()) &&
               !(opset >= 0 && functionSchema(domain, node.op_type(), opset))) {
      found[{domain, node.op_type(), opset}].push_back(nodeLabel(node));
    }
    for (const auto &a : node.attribute()) {
      if (a.has_g())
        collectUnsupported(model, a.g().node(), opsets, visited, found);
      for (const auto &g : a.graphs())
        collectUnsupported(model, g.node(), opsets, visited, found);
    }
  }
}

static std::map<std::string, int64_t> opsetsOf(const onnx::ModelProto &model) {
  std::map<std::string, int64_t> opsets;
  for (const auto &o : model.opset_import())
    opsets[normalizeDomain(o.domain())] = o.version();
  return opsets;
}

} // namespace tcc::onnx_import

namespace tcc {
using namespace onnx_import;

std::vector<UnsupportedOp> findUnsupportedOps(const onnx::ModelProto &model) {
  UnsupportedMap found;
  std::set<const onnx::FunctionProto *> visited;
  collectUnsupported(model, model.graph().node(), opsetsOf(model), visited, found);
  std::vector<UnsupportedOp> out;
  for (auto &[key, nodes] : found)
    out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), nodes});
  return out;
}

std::string describeUnsupportedOps(const std::vector<UnsupportedOp> &ops) {
  std::ostringstream os;
  size_t count = 0;
  for (const auto &op : ops)
    count += op.nodes.size();
  os << "the model uses " << ops.size() << " unsupported operator" << (ops.size() == 1 ? "" : "s")
     << " (" << count << " node" << (count == 1 ? "" : "s") << "): ";
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto &op = ops[i];
    os << (i ? "; " : "") << (op.domain.empty() ? "ai.onnx" : op.domain) << "::" << op.opType;
    if (op.opset >= 0)
      os << " (opset " << op.opset << ")";
    else
      os << " (domain not imported by the model)";
    os << " at node" << (op.nodes.size() == 1 ? " " : "s ");
    for (size_t n = 0; n < op.nodes.size() && n < 8; ++n)
      os << (n ? ", " : "") << "'" << op.nodes[n] << "'";
    if (op.nodes.size() > 8)
      os << " and " << op.nodes.size() - 8 << " more";
  }
  return os.str();
}

void registerImportDialects(MLIRContext &ctx) {
  ctx.loadDialect<TccDialect, func::FuncDialect>();
}

} // namespace tcc

namespace tcc::onnx_import {

// ---- GraphImporter ----

GraphImporter::GraphImporter(MLIRContext &ctx, const onnx::ModelProto &model,
                             const ImportOptions &options, const std::set<std::string> &specialized)
    : ctx_(ctx), model_(model), options_(options), specialized_(specialized), builder_(&ctx),
      opsets_(opsetsOf(model)) {
  collectValueInfo(model.graph());
}

void GraphImporter::collectValueInfo(const onnx::GraphProto &graph) {
  for (const auto &list : {graph.input(), graph.output(), graph.value_info()})
    for (const auto &vi : list)
      valueInfo_[vi.name()] = &vi.type();
  for (const auto &node : graph.node())
    for (const auto &a : node.attribute()) {
      if (a.has_g())
        collectValueInfo(a.g());
      for (const auto &g : a.graphs())
        collectValueInfo(g);
    }
}

std::pair<Value, const SequenceValue *> GraphImporter::find(const std::string &name) const {
  for (const Scope *s = scope_; s; s = s->parent) {
    if (auto it = s->values.find(name); it != s->values.end())
      return {it->second, nullptr};
    if (auto it = s->sequences.find(name); it != s->sequences.end())
      return {Value(), &it->second};
  }
  return {Value(), nullptr};
}

Value GraphImporter::lookup(const std::string &name) const { return find(name).first; }

const SequenceValue *GraphImporter::lookupSequence(const std::string &name) const {
  return find(name).second;
}

void GraphImporter::define(const std::string &name, Value v) {
  scope_->sequences.erase(name);
  scope_->values[name] = v;
}

void GraphImporter::defineSequence(const std::string &name, SequenceValue seq) {
  scope_->values.erase(name);
  scope_->sequences[name] = std::move(seq);
}

Type GraphImporter::elementType(int32_t onnxType) const {
  auto dtype = dtypeFromOnnx(onnxType);
  if (!dtype)
    throw Error("element type '" + onnxElemTypeName(onnxType) + "' is not supported");
  return typeFromDType(&ctx_, *dtype);
}

std::optional<Type> GraphImporter::inferredElementType(const std::string &name) const {
  auto it = valueInfo_.find(name);
  if (it == valueInfo_.end() || !it->second->has_tensor_type() ||
      !it->second->tensor_type().has_elem_type())
    return std::nullopt;
  auto dtype = dtypeFromOnnx(it->second->tensor_type().elem_type());
  if (!dtype)
    return std::nullopt;
  return typeFromDType(&ctx_, *dtype);
}

Value GraphImporter::constantFromProto(const onnx::TensorProto &t, Location loc) {
  Tensor value = tensorFromProto(t);
  return builder_.create<ConstantOp>(loc, attrFromTensor(&ctx_, value));
}

Location GraphImporter::nodeLocation(const onnx::NodeProto &node) {
  return NameLoc::get(StringAttr::get(&ctx_, prefix_ + nodeLabel(node)));
}

void GraphImporter::importNodes(const google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes) {
  // In the main graph, nodes no graph output depends on are left out (exporters leave some:
  // torch.export's max_pool2d_with_indices feeds its unused indices to a dead Sub).
  bool main = &nodes == &model_.graph().node();
  for (const auto &node : nodes)
    if (!main || std::any_of(node.output().begin(), node.output().end(),
                             [&](const std::string &o) { return isRead(o); }))
      importNode(node);
}

void GraphImporter::importNode(const onnx::NodeProto &node) {
  std::string domain = normalizeDomain(node.domain());
  auto it = opsets_.find(domain);
  int64_t opset = it == opsets_.end() ? -1 : it->second;
  Block *block = builder_.getInsertionBlock();
  Operation *mark = block->empty() ? nullptr : &block->back();

  NodeContext ctx(*this, node, opset);
  try {
    // Identity also forwards sequences; its registered lowering handles tensors.
    if (domain.empty() && node.op_type() == "Identity" && ctx.inputIsSequence(0))
      ctx.setOutputSequence(0, ctx.inputSequence(0), ctx.inputSequenceElementType(0));
    else if (const onnx::FunctionProto *fn = localFunction(model_, domain, node.op_type())) {
      std::vector<onnx::AttributeProto> defaults = localFunctionDefaults(*fn);
      expandFunction(ctx, *fn, [&](const std::string &name) -> const onnx::AttributeProto * {
        for (const auto &a : defaults)
          if (a.name() == name)
            return &a;
        return nullptr;
      });
    }
    else if (const OpLowering *lowering = opRegistry().find(domain, node.op_type()))
      (*lowering)(ctx);
    else if (const auto *schema = opset >= 0 ? functionSchema(domain, node.op_type(), opset) : nullptr)
      expandFunction(ctx, functionBody(ctx, *schema),
                     [schema](const std::string &name) -> const onnx::AttributeProto * {
                       auto d = schema->attributes().find(name);
                       return d != schema->attributes().end() &&
                                      d->second.default_value.type() != onnx::AttributeProto::UNDEFINED
                                  ? &d->second.default_value
                                  : nullptr;
                     });
    else
      ctx.fail("no lowering for this operator");
  } catch (const ImportError &) {
    throw;
  } catch (const NeedsInputValues &) {
    throw;
  } catch (const std::exception &e) {
    ctx.fail(e.what());
  }
  for (int i = 0; i < node.output_size(); ++i)
    if (ctx.outputUsed(i) && !lookup(node.output(i)) && !lookupSequence(node.output(i)))
      ctx.fail("the lowering did not produce output " + std::to_string(i) + " ('" +
               node.output(i) + "')");

  // Fold what the node made constant, so later nodes see compile-time values.
  Operation *op = mark ? mark->getNextNode() : (block->empty() ? nullptr : &block->front());
  while (op) {
    Operation *next = op->getNextNode();
    auto rebind = [&](Value from, Value to) {
      // The node's outputs are bound in the current scope: point them at the constants.
      for (const auto &name : node.output()) {
        if (auto it = scope_->values.find(name); it != scope_->values.end() && it->second == from)
          it->second = to;
        if (auto it = scope_->sequences.find(name); it != scope_->sequences.end())
          std::replace(it->second.elements.begin(), it->second.elements.end(), from, to);
      }
    };
    if (!foldConstantOp(op, options_.maxFoldElements, rebind))
      if (Value folded = foldSymbolicInts(op, symbols_)) {
        Value from = op->getResult(0);
        from.replaceAllUsesWith(folded);
        rebind(from, folded);
        op->erase();
      }
    op = next;
  }
}

/// Builds the body of a function-defined operator for this node.
static onnx::FunctionProto functionBody(NodeContext &ctx, const onnx::OpSchema &schema) {
  if (schema.HasFunction())
    return *schema.GetFunction();
  std::vector<onnx::TypeProto> inputTypes;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    onnx::TypeProto tp;
    if (ctx.hasInput(i)) {
      auto *tt = tp.mutable_tensor_type();
      tt->set_elem_type(dtypeToOnnx(dtypeFromType(ctx.inputElementType(i))));
      for (const SymExpr &d : ctx.inputDims(i)) {
        if (std::optional<int64_t> c = d.constant())
          tt->mutable_shape()->add_dim()->set_dim_value(*c);
        else
          tt->mutable_shape()->add_dim()->set_dim_param(d.str());
      }
    }
    inputTypes.push_back(tp);
  }
  onnx::FunctionBodyBuildContextImpl buildCtx(ctx.node(), inputTypes);
  onnx::FunctionProto fn;
  if (!schema.BuildContextDependentFunction(buildCtx, fn))
    ctx.fail("ONNX could not build the function body of this operator");
  return fn;
}

void GraphImporter::expandFunction(
    NodeContext &ctx, const onnx::FunctionProto &fn,
    const std::function<const onnx::AttributeProto *(const std::string &)> &defaultOf) {
  const onnx::NodeProto &node = ctx.node();

  // The body runs in its own scope, with its formal inputs bound to the node's actual inputs.
  Scope body{{}, nullptr, {}};
  for (int i = 0; i < fn.input_size(); ++i) {
    if (!ctx.hasInput(i))
      continue;
    if (ctx.inputIsSequence(i))
      body.sequences[fn.input(i)] = {ctx.inputSequence(i), ctx.inputSequenceElementType(i)};
    else
      body.values[fn.input(i)] = ctx.input(i);
  }
  std::map<std::string, const onnx::AttributeProto *> actualAttrs;
  for (const auto &a : node.attribute())
    actualAttrs[a.name()] = &a;

  auto savedOpsets = opsets_;
  for (const auto &o : fn.opset_import())
    opsets_[normalizeDomain(o.domain())] = o.version();
  Scope *savedScope = scope_;
  std::string savedPrefix = prefix_;
  scope_ = &body;
  prefix_ += nodeLabel(node) + "/";
  try {
    for (const auto &bodyNode : fn.node()) {
      onnx::NodeProto n = bodyNode;
      // Substitute attribute references (ref_attr_name) by the node's actual attributes.
      n.clear_attribute();
      for (const auto &a : bodyNode.attribute()) {
        if (a.ref_attr_name().empty()) {
          *n.add_attribute() = a;
        } else if (auto it = actualAttrs.find(a.ref_attr_name()); it != actualAttrs.end()) {
          onnx::AttributeProto copy = *it->second;
          copy.set_name(a.name());
          *n.add_attribute() = copy;
        } else if (const onnx::AttributeProto *d = defaultOf(a.ref_attr_name())) {
          // The node leaves the attribute at its default: the body sees the default.
          onnx::AttributeProto copy = *d;
          copy.set_name(a.name());
          *n.add_attribute() = copy;
        }
      }
      importNode(n);
    }
  } catch (...) {
    scope_ = savedScope;
    prefix_ = savedPrefix;
    opsets_ = savedOpsets;
    throw;
  }
  std::vector<std::pair<Value, const SequenceValue *>> outputs;
  for (int i = 0; i < fn.output_size() && i < node.output_size(); ++i)
    outputs.push_back(find(fn.output(i)));
  scope_ = savedScope;
  prefix_ = savedPrefix;
  opsets_ = savedOpsets;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!ctx.hasOutput(i))
      continue;
    auto [value, seq] = outputs[i];
    if (value)
      ctx.setOutput(i, value);
    else if (seq)
      ctx.setOutputSequence(i, seq->elements, seq->elementType);
    else
      ctx.fail("its function body does not define output '" + fn.output(i) + "'");
  }
}

std::vector<Value> GraphImporter::graphOutputs(const onnx::GraphProto &graph,
                                              const std::string &what) {
  std::vector<Value> outputs;
  for (const auto &out : graph.output()) {
    auto [value, seq] = find(out.name());
    if (seq)
      throw ImportError(what + " output '" + out.name() + "' is a sequence: sequence values "
                        "crossing a graph or subgraph boundary are not supported");
    if (!value)
      throw ImportError(what + " output '" + out.name() + "' is not defined");
    outputs.push_back(value);
  }
  return outputs;
}

std::vector<Value> GraphImporter::importSubgraph(const onnx::GraphProto &graph, Block &block) {
  OpBuilder::InsertionGuard guard(builder_);
  builder_.setInsertionPointToEnd(&block);
  SmallVector<Value> args(block.getArguments().begin(), block.getArguments().end());
  return inlineSubgraph(graph, args, /*label=*/"");
}

std::vector<Value> GraphImporter::inlineSubgraph(const onnx::GraphProto &graph,
                                                 ArrayRef<Value> inputs, const std::string &label) {
  Scope sub{{}, scope_, {}};
  for (int i = 0; i < graph.input_size() && i < (int)inputs.size(); ++i)
    sub.values[graph.input(i).name()] = inputs[i];
  Scope *savedScope = scope_;
  std::string savedPrefix = prefix_;
  scope_ = &sub;
  if (!label.empty())
    prefix_ = label + "/";
  std::vector<Value> outputs;
  try {
    for (const auto &init : graph.initializer())
      define(init.name(), constantFromProto(init, NameLoc::get(StringAttr::get(&ctx_, init.name()))));
    importNodes(graph.node());
    outputs = graphOutputs(graph, "subgraph '" + graph.name() + "'");
  } catch (...) {
    scope_ = savedScope;
    prefix_ = savedPrefix;
    throw;
  }
  scope_ = savedScope;
  prefix_ = savedPrefix;
  return outputs;
}

bool GraphImporter::isBuffer(const std::string &name, Value v) const {
  size_t first = inputNames_.size() + parameterNames_.size();
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && arg.getOwner() == mainBlock_ && arg.getArgNumber() >= first &&
         arg.getArgNumber() - first < bufferNames_.size() &&
         bufferNames_[arg.getArgNumber() - first] == name;
}

void GraphImporter::updateBuffer(NodeContext &ctx, const std::string &name, Value next) {
  if (builder_.getInsertionBlock() != mainBlock_)
    ctx.fail("updates buffer '" + name + "' inside a subgraph, which training does not support");
  if (!bufferNext_.emplace(name, next).second)
    ctx.fail("buffer '" + name + "' is updated by more than one node");
}

Value GraphImporter::rngKey() {
  if (!rngKey_)
    rngKey_ = mainBlock_->addArgument(RankedTensorType::get({}, builder_.getIntegerType(64, false)),
                                      NameLoc::get(StringAttr::get(&ctx_, "rng_key")));
  return rngKey_;
}

/// Graph inputs and parameters (block arguments of @main) that `v` is computed from; nullopt if
/// it depends on anything else that is not constant (the rng key, a region argument, an op with
/// regions).
std::optional<NeedsInputValues> GraphImporter::inputsFeeding(Value v) const {
  NeedsInputValues feeding;
  std::vector<Value> work{v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value cur = work.back();
    work.pop_back();
    if (!seen.insert(cur).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(cur)) {
      if (arg.getOwner() != mainBlock_)
        return std::nullopt;
      size_t i = arg.getArgNumber();
      if (i < inputNames_.size())
        feeding.inputs.insert(inputNames_[i]);
      else if (i - inputNames_.size() < parameterNames_.size())
        feeding.parameters.insert(parameterNames_[i - inputNames_.size()]);
      else
        return std::nullopt;
      continue;
    }
    Operation *op = cur.getDefiningOp();
    if (op->getNumRegions())
      return std::nullopt;
    for (Value operand : op->getOperands())
      work.push_back(operand);
  }
  return feeding;
}

Tensor GraphImporter::requireConstant(NodeContext &ctx, Value v, const std::string &what) {
  if (auto c = v.getDefiningOp<ConstantOp>())
    return tensorFromAttr(c.getValue());
  auto feeding = inputsFeeding(v);
  // A parameter initializer whose value the model needs at compile time (a Dropout ratio, a
  // Reshape's shape) is no parameter: restart with it as a constant.
  if (feeding && !feeding->parameters.empty())
    throw NeedsInputValues{{}, feeding->parameters};
  if (!feeding || feeding->inputs.empty())
    ctx.fail(what + " must be known at compile time, but it is computed at run time");
  const std::set<std::string> &inputs = feeding->inputs;
  std::set<std::string> missing;
  for (const auto &name : inputs)
    if (!options_.inputValues.count(name))
      missing.insert(name);
  std::set<std::string> fresh;
  for (const auto &name : inputs)
    if (!specialized_.count(name))
      fresh.insert(name);
  if (missing.empty() && !fresh.empty())
    throw NeedsInputValues{inputs, {}};
  std::string names;
  for (const auto &n : inputs)
    names += (names.empty() ? "'" : ", '") + n + "'";
  if (!missing.empty())
    ctx.fail(what + " must be known at compile time; it is computed from graph input(s) " + names +
             ": give their values (--inputs) to specialize the model on them");
  ctx.fail(what + " must be known at compile time, but it could not be folded to a constant "
                  "(computed from graph input(s) " + names + ")");
}

/// Erases the ops whose results are unused (constants left behind by folding, initializers no
/// node reads) in the function body, users before producers.
static void eraseDeadOps(func::FuncOp func) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
    if (mlir::isOpTriviallyDead(&op))
      op.erase();
}

ImportedModel GraphImporter::run() {
  const onnx::GraphProto &graph = model_.graph();
  // Owned from the start, so a failed import frees what it built.
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&ctx_));
  builder_.setInsertionPointToEnd(module->getBody());
  ImportedModel result;

  std::set<std::string> initializerNames;
  for (const auto &init : graph.initializer())
    initializerNames.insert(init.name());

  SmallVector<Type> argTypes;
  std::vector<const onnx::ValueInfoProto *> inputs;
  for (const auto &in : graph.input()) {
    if (initializerNames.count(in.name()))
      continue;
    inputs.push_back(&in);
    argTypes.push_back(inputType(in));
    result.inputNames.push_back(in.name());
  }
  inputNames_ = result.inputNames;
  // Parameters, then buffers, follow the graph inputs, each in initializer order.
  std::vector<const onnx::TensorProto *> initializerArgs;
  for (const auto *names : {&options_.parameterInitializers, &options_.bufferInitializers})
    for (int i = 0; i < graph.initializer_size(); ++i) {
      const onnx::TensorProto &init = graph.initializer(i);
      if (!names->count(init.name()))
        continue;
      if (names == &options_.bufferInitializers && options_.parameterInitializers.count(init.name()))
        throw ImportError("initializer '" + init.name() + "' is both a parameter and a buffer");
      Type element;
      try {
        element = elementType(init.data_type());
      } catch (const Error &e) {
        throw ImportError("initializer '" + init.name() + "': " + e.what());
      }
      argTypes.push_back(RankedTensorType::get(
          SmallVector<int64_t>(init.dims().begin(), init.dims().end()), element));
      initializerArgs.push_back(&init);
      if (names == &options_.parameterInitializers) {
        parameterNames_.push_back(init.name());
        result.parameterIndices.push_back(i);
      } else {
        bufferNames_.push_back(init.name());
        result.bufferIndices.push_back(i);
      }
    }

  auto func = builder_.create<func::FuncOp>(UnknownLoc::get(&ctx_), "main",
                                            builder_.getFunctionType(argTypes, {}));
  mainBlock_ = func.addEntryBlock();
  builder_.setInsertionPointToEnd(mainBlock_);
  Scope top{{}, nullptr, {}};
  scope_ = &top;

  for (const auto &init : graph.initializer())
    if (!options_.parameterInitializers.count(init.name()) &&
        !options_.bufferInitializers.count(init.name()))
      define(init.name(), constantFromProto(init, NameLoc::get(StringAttr::get(&ctx_, init.name()))));
  for (size_t i = 0; i < initializerArgs.size(); ++i)
    define(initializerArgs[i]->name(), mainBlock_->getArgument(inputs.size() + i));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string &name = inputs[i]->name();
    if (specialized_.count(name)) {
      Tensor value = options_.inputValues.at(name);
      if (tensorTypeOf(&ctx_, value) != argTypes[i])
        throw ImportError("input '" + name + "' is " + value.typeString() +
                          ", but the model declares a different type");
      define(name, builder_.create<ConstantOp>(NameLoc::get(StringAttr::get(&ctx_, name)),
                                               attrFromTensor(&ctx_, value)));
    } else {
      define(name, mainBlock_->getArgument(i));
    }
  }

  importNodes(graph.node());

  SmallVector<Value> outputs;
  for (const auto &out : graph.output()) {
    auto [v, seq] = find(out.name());
    if (seq)
      throw ImportError("graph output '" + out.name() + "' is a sequence: sequence values "
                        "crossing a graph or subgraph boundary are not supported");
    if (!v)
      throw ImportError("graph output '" + out.name() + "' is not produced by any node");
    outputs.push_back(v);
    result.outputNames.push_back(out.name());
  }
  // Training mode: the buffers' next values (unchanged ones as they came in).
  if (options_.training)
    for (size_t i = 0; i < bufferNames_.size(); ++i) {
      auto next = bufferNext_.find(bufferNames_[i]);
      outputs.push_back(next != bufferNext_.end()
                            ? next->second
                            : mainBlock_->getArgument(inputs.size() + parameterNames_.size() + i));
    }
  builder_.create<func::ReturnOp>(UnknownLoc::get(&ctx_), outputs);
  eraseDeadOps(func);
  // The argument list may have grown by the rng key while importing (rngKey()).
  func.setFunctionType(
      builder_.getFunctionType(mainBlock_->getArgumentTypes(), ValueRange(outputs).getTypes()));
  if (rngKey_)
    result.rngKeyArgument = cast<BlockArgument>(rngKey_).getArgNumber();

  std::string diagnostics;
  {
    ScopedDiagnosticHandler handler(&ctx_, [&](Diagnostic &d) {
      diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
      return success();
    });
    if (failed(mlir::verify(*module))) {
      throw ImportError("the imported IR does not verify (an importer bug): " + diagnostics);
    }
  }
  setSymbolRanges(*module, symbols_);
  result.module = std::move(module);
  result.specializedInputs = specialized_;
  return result;
}

std::string GraphImporter::symbolFor(const std::string &input, int dim,
                                     const std::string &dimParam) {
  if (!dimParam.empty())
    if (auto it = symbolOfDimParam_.find(dimParam); it != symbolOfDimParam_.end())
      return it->second;
  std::string base = dimParam.empty() ? input + "_d" + std::to_string(dim) : dimParam;
  std::string name;
  for (char c : base)
    name += std::isalnum((unsigned char)c) || c == '_' ? c : '_';
  if (name.empty() || std::isdigit((unsigned char)name[0]))
    name = "_" + name;
  // Distinct dim_params may sanitize alike ("a-b", "a.b"): the later one gets a suffix.
  std::string unique = name;
  for (int k = 2; symbols_.count(unique); ++k)
    unique = name + "_" + std::to_string(k);
  SymbolRange range{1, INT64_MAX};
  if (auto r = options_.symbolRanges.find(base); r != options_.symbolRanges.end())
    range = {r->second.first, r->second.second};
  symbols_[unique] = range;
  if (!dimParam.empty())
    symbolOfDimParam_[dimParam] = unique;
  return unique;
}

static void collectReadNames(const onnx::GraphProto &graph, std::set<std::string> &names);

/// Adds every name `node` reads to `names`: its inputs and what its subgraphs read.
static void collectNodeReads(const onnx::NodeProto &node, std::set<std::string> &names) {
  names.insert(node.input().begin(), node.input().end());
  for (const auto &a : node.attribute()) {
    if (a.has_g())
      collectReadNames(a.g(), names);
    for (const auto &g : a.graphs())
      collectReadNames(g, names);
  }
}

/// Adds every name `graph` (and the graphs of its nodes' attributes) reads to `names`.
static void collectReadNames(const onnx::GraphProto &graph, std::set<std::string> &names) {
  for (const auto &out : graph.output())
    names.insert(out.name());
  for (const auto &node : graph.node())
    collectNodeReads(node, names);
}

/// The names the main graph's outputs depend on: read by a node some output needs (nodes are
/// in topological order, so one backward sweep), or by the subgraphs of such a node.
static std::set<std::string> liveNames(const onnx::GraphProto &graph) {
  std::set<std::string> live;
  for (const auto &out : graph.output())
    live.insert(out.name());
  for (int i = graph.node_size() - 1; i >= 0; --i) {
    const onnx::NodeProto &node = graph.node(i);
    if (std::none_of(node.output().begin(), node.output().end(),
                     [&](const std::string &o) { return live.count(o); }))
      continue;
    collectNodeReads(node, live);
  }
  return live;
}

bool GraphImporter::isRead(const std::string &name) const {
  if (!readNames_) {
    readNames_ = liveNames(model_.graph());
    for (const auto &fn : model_.functions()) {
      readNames_->insert(fn.output().begin(), fn.output().end());
      for (const auto &node : fn.node())
        readNames_->insert(node.input().begin(), node.input().end());
    }
  }
  return readNames_->count(name) > 0;
}

std::optional<SymExpr> GraphImporter::derivedDim(const std::string &dimParam) {
  std::optional<SymExpr> e = SymExpr::parse(dimParam);
  if (!e || e->symbolName() || e->isConstant() || e->symbols().size() != 1)
    return std::nullopt;
  // Only a*s + b (a != 0) can be solved for s when a run binds the sizes.
  std::string s = e->symbols().front();
  SymExpr sym = SymExpr::symbol(s), b = e->substitute({{s, SymExpr(0)}});
  std::optional<SymExpr> a = SymExpr::divideExactly(*e - b, sym);
  if (!b.isConstant() || !a || !a->isConstant() || *a->constant() == 0)
    return std::nullopt;
  return e->substitute({{s, SymExpr::symbol(symbolFor("", 0, s))}});
}

RankedTensorType GraphImporter::inputType(const onnx::ValueInfoProto &in) {
  if (!in.type().has_tensor_type())
    throw ImportError("graph input '" + in.name() + "' is not a tensor (sequences, maps and "
                      "optionals are not supported as graph inputs)");
  const auto &tt = in.type().tensor_type();
  Type element;
  try {
    element = elementType(tt.elem_type());
  } catch (const Error &e) {
    throw ImportError("graph input '" + in.name() + "': " + e.what());
  }
  if (!tt.has_shape())
    throw ImportError("graph input '" + in.name() + "' has no shape: give one with --input-shape "
                      "or concrete inputs with --inputs");
  SymShape dims;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto &d = tt.shape().dim(i);
    if (d.has_dim_value() && d.dim_value() >= 0)
      dims.push_back(d.dim_value());
    else if (std::optional<SymExpr> e = derivedDim(d.dim_param()))
      dims.push_back(*e);
    else
      dims.push_back(SymExpr::symbol(symbolFor(in.name(), i, d.dim_param())));
  }
  return tensorTypeWithDims(dims, element);
}

} // namespace tcc::onnx_import

namespace tcc {

ImportedModel importOnnxModel(MLIRContext &ctx, const onnx::ModelProto &model,
                              const ImportOptions &options) {
  registerImportDialects(ctx);
  auto unsupported = findUnsupportedOps(model);
  if (!unsupported.empty())
    throw Error(describeUnsupportedOps(unsupported));
  std::set<std::string> specialized;
  ImportOptions current = options;
  for (;;) {
    try {
      onnx_import::GraphImporter importer(ctx, model, current, specialized);
      return importer.run();
    } catch (const onnx_import::NeedsInputValues &needs) {
      size_t before = specialized.size() + current.parameterInitializers.size();
      specialized.insert(needs.inputs.begin(), needs.inputs.end());
      for (const std::string &name : needs.parameters)
        current.parameterInitializers.erase(name);
      if (specialized.size() + current.parameterInitializers.size() == before)
        throw Error("internal error: input specialization did not converge");
    }
  }
}

} // namespace tcc
