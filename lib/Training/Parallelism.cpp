//===- Parallelism.cpp - Parallel training strategies as sharding annotations ----===//
#include "tcc/Training/Parallelism.h"
#include "tcc/IR/CoreBuilder.h"
#include "tcc/IR/Sharding.h"
#include "tcc/Passes/Pipeline.h"
#include "tcc/Passes/Shard.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <deque>
#include <functional>
#include <map>

using namespace mlir;

namespace tcc {

std::string ParallelOptions::str() const {
  std::string s;
  if (dp > 1)
    s += "dp=" + std::to_string(dp);
  if (tp > 1)
    s += std::string(s.empty() ? "" : ",") + "tp=" + std::to_string(tp);
  if (pp > 1)
    s += std::string(s.empty() ? "" : ",") + "pp=" + std::to_string(pp) + " " + schedule;
  if (zero)
    s += " zero=" + std::to_string(zero);
  return s.empty() ? "single rank" : s;
}

ParallelOptions parseMesh(const std::string &text) {
  ParallelOptions o;
  std::set<std::string> seen;
  SmallVector<StringRef> parts;
  StringRef(text).split(parts, ',');
  for (StringRef part : parts) {
    auto [name, value] = part.trim().split('=');
    int64_t n = 0;
    if (value.getAsInteger(10, n) || n < 1 || (name != "dp" && name != "tp" && name != "pp"))
      throw Error("--mesh '" + text + "': each axis is dp=N, tp=N or pp=N with N >= 1 (e.g. "
                  "dp=2,tp=2)");
    if (!seen.insert(name.str()).second)
      throw Error("--mesh '" + text + "': axis " + name.str() + " appears twice");
    (name == "dp" ? o.dp : name == "tp" ? o.tp : o.pp) = n;
  }
  return o;
}

std::map<std::string, std::vector<std::vector<std::string>>>
readShardingFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    throw Error("cannot read the sharding file '" + path + "'");
  llvm::Expected<llvm::json::Value> json = llvm::json::parse((*buffer)->getBuffer());
  if (!json) {
    std::string message = llvm::toString(json.takeError());
    throw Error("sharding file '" + path + "' is not JSON: " + message);
  }
  const llvm::json::Object *object = json->getAsObject();
  if (!object)
    throw Error("sharding file '" + path + "' must be a JSON object mapping parameter names to "
                "per-dim lists of mesh axes, e.g. {\"fc1.weight\": [[\"tp\"], []]}");
  std::map<std::string, std::vector<std::vector<std::string>>> out;
  for (const auto &[key, value] : *object) {
    std::string what = "sharding file '" + path + "', entry '" + key.str() + "'";
    const llvm::json::Array *dims = value.getAsArray();
    if (!dims)
      throw Error(what + ": expected a list with one list of mesh axes per dim");
    std::vector<std::vector<std::string>> split;
    for (const llvm::json::Value &dim : *dims) {
      const llvm::json::Array *axes = dim.getAsArray();
      if (!axes)
        throw Error(what + ": each dim is a list of mesh axis names ([] keeps it whole)");
      split.emplace_back();
      for (const llvm::json::Value &axis : *axes) {
        auto name = axis.getAsString();
        if (!name)
          throw Error(what + ": mesh axes are names such as \"dp\" or \"tp\"");
        split.back().push_back(name->str());
      }
    }
    out[key.str()] = split;
  }
  return out;
}

namespace {

struct Annotator {
  MeshAttr mesh;
  int dpAxis = -1, tpAxis = -1;
  std::vector<std::string> *notes;

  void note(const std::string &line) {
    if (notes)
      notes->push_back(line);
  }

  /// `base` with the dp axis added to the first whole dim it divides (ZeRO's split).
  DimSharding withZeroSplit(DimSharding base, ArrayRef<int64_t> shape, const std::string &name) {
    if (dpAxis < 0)
      return base;
    int64_t n = mesh.getSizes()[dpAxis];
    for (size_t d = 0; d < shape.size(); ++d)
      if (base.dims[d].empty() && shape[d] % n == 0) {
        base.dims[d] = {dpAxis};
        return base;
      }
    note("zero: " + name + " stays whole (no dim of its shape is divisible by dp=" +
         std::to_string(n) + ")");
    return base;
  }
};

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

/// A matmul using parameter `p` (directly or transposed) as its right operand: the op and
/// whether p is transposed on the way.
struct WeightUse {
  MatmulOp matmul;
  bool transposed = false;
};

std::optional<WeightUse> weightUse(Value p) {
  std::optional<WeightUse> first;
  // p, optionally transposed, optionally broadcast over leading batch dims (as the importer
  // writes x[B, S, D] @ W[D, F]), as a matmul's right operand.
  std::function<void(Value, bool)> follow = [&](Value v, bool transposed) {
    for (Operation *user : v.getUsers()) {
      if (auto mm = dyn_cast<MatmulOp>(user); mm && mm.getRhs() == v) {
        if (!first || mm->isBeforeInBlock(first->matmul))
          first = WeightUse{mm, transposed};
      } else if (auto t = dyn_cast<TransposeOp>(user);
                 t && !transposed && v == p && t.getPerm() == ArrayRef<int64_t>{1, 0}) {
        follow(t.getResult(), true);
      } else if (auto b = dyn_cast<BroadcastInDimOp>(user)) {
        int64_t rank = shapeOf(b.getResult()).size();
        if (b.getDims() == ArrayRef<int64_t>{rank - 2, rank - 1})
          follow(b.getResult(), transposed);
      }
    }
  };
  follow(p, false);
  return first;
}

/// Megatron pairs: a weight whose matmul output reaches, through ops that keep the hidden
/// features apart (pointwise ops, reshapes, transposes, reductions, products of activations as
/// in attention), the left operand of another weight's matmul. The first is split along its
/// output features (column-parallel), the second along its input features (row-parallel).
void findTensorParallelPairs(const llvm::DenseSet<Value> &params, Annotator &a,
                             llvm::DenseMap<Value, DimSharding> &out) {
  llvm::DenseMap<Operation *, Value> weightOf; // matmul -> parameter used as its rhs
  llvm::DenseMap<Value, WeightUse> uses;
  for (Value p : params) {
    if (shapeOf(p).size() != 2)
      continue;
    if (auto u = weightUse(p)) {
      uses[p] = *u;
      weightOf[u->matmul] = p;
    }
  }
  int64_t tp = a.mesh.getSizes()[a.tpAxis];
  // In program order, so pairs are found layer by layer.
  SmallVector<Value> ordered;
  for (auto &[p, u] : uses)
    ordered.push_back(p);
  llvm::sort(ordered, [&](Value x, Value y) {
    return uses[x].matmul->isBeforeInBlock(uses[y].matmul);
  });
  llvm::DenseSet<Value> assigned;
  SmallVector<Value> heads; // weights whose output reaches no other weight: the model's head
  auto split = [&](Value w, int64_t dim) {
    DimSharding s = DimSharding::replicated(shapeOf(w).size());
    s.dims[dim] = {a.tpAxis};
    out[w] = s;
    assigned.insert(w);
  };
  for (Value p : ordered) {
    if (assigned.contains(p))
      continue;
    WeightUse u = uses[p];
    // Breadth-first from the matmul's result to the first weight matmul it feeds as lhs.
    std::deque<Value> work{u.matmul.getResult()};
    llvm::DenseSet<Value> seen;
    Operation *found = nullptr;
    while (!work.empty()) {
      Value v = work.front();
      work.pop_front();
      if (!seen.insert(v).second)
        continue;
      for (Operation *user : v.getUsers()) {
        if (auto mm = dyn_cast<MatmulOp>(user); mm && weightOf.count(mm)) {
          if (mm.getLhs() == v && weightOf[mm] != p &&
              (!found || mm->isBeforeInBlock(found)))
            found = mm;
          continue;
        }
        if (isa<UnaryOp, BinaryOp, SelectOp, CastOp, ReshapeOp, TransposeOp, ReduceOp,
                BroadcastInDimOp, MatmulOp>(user))
          for (Value r : user->getResults())
            work.push_back(r);
      }
    }
    if (!found) {
      heads.push_back(p);
      continue;
    }
    Value q = weightOf[found];
    WeightUse uq = uses[q];
    int64_t pOut = u.transposed ? 0 : 1, qIn = uq.transposed ? 1 : 0;
    if (shapeOf(p)[pOut] % tp || shapeOf(q)[qIn] % tp)
      continue;
    split(p, pOut);
    if (!assigned.contains(q))
      split(q, qIn);
    // The column-parallel layer's bias: a vector broadcast along the output features and
    // added to its result.
    for (Operation *user : u.matmul.getResult().getUsers())
      if (auto add = dyn_cast<BinaryOp>(user); add && add.getKind() == BinaryKind::Add)
        for (Value operand : add->getOperands())
          if (auto bc = operand.getDefiningOp<BroadcastInDimOp>())
            if (params.contains(bc.getX()) && shapeOf(bc.getX()).size() == 1 &&
                bc.getDims() == ArrayRef<int64_t>{(int64_t)shapeOf(bc.getResult()).size() - 1})
              split(bc.getX(), 0);
    a.note("tp: column-parallel " + std::to_string(shapeOf(p)[0]) + "x" +
           std::to_string(shapeOf(p)[1]) + " weight, then row-parallel " +
           std::to_string(shapeOf(q)[0]) + "x" + std::to_string(shapeOf(q)[1]) + " weight");
  }
  // The head (the vocabulary projection of a language model, a classifier's last layer): split
  // by output features, so the logits are split and the loss's log-softmax combines its max and
  // sum across tp (vocabulary-parallel cross-entropy).
  for (Value p : heads) {
    int64_t pOut = uses[p].transposed ? 0 : 1;
    if (assigned.contains(p) || shapeOf(p)[pOut] % tp)
      continue;
    split(p, pOut);
    a.note("tp: vocabulary-parallel head " + std::to_string(shapeOf(p)[0]) + "x" +
           std::to_string(shapeOf(p)[1]) + " (split by output features)");
  }
  // Embedding tables (gathered along rows): split by rows, each rank looking up its share.
  for (Value p : params) {
    if (assigned.contains(p) || shapeOf(p).size() != 2 || shapeOf(p)[0] % tp)
      continue;
    if (llvm::any_of(p.getUsers(), [&](Operation *u) {
          auto g = dyn_cast<GatherOp>(u);
          return g && g.getX() == p && g.getAxis() == 0;
        })) {
      split(p, 0);
      a.note("tp: vocabulary-parallel embedding " + std::to_string(shapeOf(p)[0]) + "x" +
             std::to_string(shapeOf(p)[1]) + " (split by rows)");
    }
  }
}

} // namespace

void annotateParallelism(TrainingSpec &spec, const ParallelOptions &options,
                         std::vector<std::string> *notes) {
  if (options.dp <= 1 && options.tp <= 1) {
    if (!options.overrides.empty())
      throw Error("a sharding file splits parameters over the mesh's dp or tp axis: give one");
    return; // nothing to shard (a pipeline alone cuts the step into stages instead)
  }
  if (spec.entries.empty())
    throw Error("the training spec has no entries");
  MLIRContext *ctx = spec.entries[0].module->getContext();
  SmallVector<StringAttr> axes;
  SmallVector<int64_t> sizes;
  Annotator a;
  a.notes = notes;
  if (options.dp > 1) {
    a.dpAxis = axes.size();
    axes.push_back(StringAttr::get(ctx, "dp"));
    sizes.push_back(options.dp);
  }
  if (options.tp > 1) {
    a.tpAxis = axes.size();
    axes.push_back(StringAttr::get(ctx, "tp"));
    sizes.push_back(options.tp);
  }
  a.mesh = MeshAttr::get(ctx, axes, sizes);

  auto mainOf = [&](EntrySpec &e) {
    auto main = e.module->lookupSymbol<func::FuncOp>("main");
    if (!main)
      throw Error("training entry '" + e.name + "' has no @main");
    return main;
  };
  // Tensor-parallel pairs, found in the train step's forward graph.
  EntrySpec &train = spec.entries[0];
  func::FuncOp trainMain = mainOf(train);
  llvm::DenseSet<Value> params;
  std::map<int64_t, Value> paramArg;
  for (auto [i, b] : llvm::enumerate(train.inputs))
    if (b.role == BindingRole::State && spec.state[b.state].kind == StateKind::Parameter) {
      params.insert(trainMain.getArgument(i));
      paramArg[b.state] = trainMain.getArgument(i);
    }
  llvm::DenseMap<Value, DimSharding> tpSplit;
  if (a.tpAxis >= 0)
    findTensorParallelPairs(params, a, tpSplit);
  auto ownerOf = [&](int64_t state) -> int64_t {
    const std::string &name = spec.state[state].name;
    int64_t best = -1;
    for (auto &[p, v] : paramArg) {
      const std::string &pn = spec.state[p].name;
      if (name.size() > pn.size() && name.compare(0, pn.size(), pn) == 0 && name[pn.size()] == '.' &&
          (best < 0 || pn.size() > spec.state[best].name.size()))
        best = p;
    }
    return best;
  };
  // --sharding-file: parameters whose split is given outright.
  std::map<int64_t, DimSharding> overridden;
  for (const auto &[name, split] : options.overrides) {
    auto it = llvm::find_if(paramArg, [&](const auto &p) { return spec.state[p.first].name == name; });
    if (it == paramArg.end())
      throw Error("sharding file: '" + name + "' is not a trained parameter of the model");
    Builder b(ctx);
    SmallVector<Attribute> dims;
    for (const auto &axes : split) {
      SmallVector<Attribute> names;
      for (const std::string &axis : axes)
        names.push_back(b.getStringAttr(axis));
      dims.push_back(b.getArrayAttr(names));
    }
    std::string error;
    auto s = DimSharding::fromAttr(ShardingAttr::get(ctx, b.getArrayAttr(dims), b.getArrayAttr({})),
                                   a.mesh, shapeOf(it->second), error);
    if (failed(s))
      throw Error("sharding file, '" + name + "': " + error);
    overridden[it->first] = *s;
  }
  // Each state tensor's sharding, decided once for every entry.
  std::vector<DimSharding> stateSharding;
  for (size_t s = 0; s < spec.state.size(); ++s) {
    const StateSpec &st = spec.state[s];
    ArrayRef<int64_t> shape(st.initial.shape().data(), st.initial.shape().size());
    int64_t owner = st.kind == StateKind::Parameter ? (int64_t)s : ownerOf(s);
    DimSharding base = DimSharding::replicated(shape.size());
    if (owner >= 0 && paramArg.count(owner) && shapeOf(paramArg[owner]) == shape) {
      if (overridden.count(owner))
        base = overridden[owner];
      else if (tpSplit.count(paramArg[owner]))
        base = tpSplit[paramArg[owner]];
    }
    bool zeroSplit = (st.kind == StateKind::OptimizerState && options.zero >= 1) ||
                     (st.kind == StateKind::GradAccumulator && options.zero >= 2) ||
                     (st.kind == StateKind::Parameter && options.zero >= 3);
    if (zeroSplit)
      base = a.withZeroSplit(base, shape, st.name);
    stateSharding.push_back(base);
  }

  for (EntrySpec &entry : spec.entries) {
    (*entry.module)->setAttr(TccDialect::kMeshAttrName, a.mesh);
    func::FuncOp main = mainOf(entry);
    for (auto [i, b] : llvm::enumerate(entry.inputs)) {
      ArrayRef<int64_t> shape = shapeOf(main.getArgument(i));
      DimSharding s = DimSharding::replicated(shape.size());
      if (b.role == BindingRole::Data && a.dpAxis >= 0) {
        if (shape.empty() || shape[0] % options.dp)
          throw Error("data parallelism: input '" + entry.inputNames[i] + "' has " +
                      (shape.empty() ? std::string("no batch dimension")
                                     : "a batch of " + std::to_string(shape[0])) +
                      ", which dp=" + std::to_string(options.dp) + " ranks cannot split evenly");
        s.dims[0] = {a.dpAxis};
      } else if (b.role == BindingRole::State) {
        s = stateSharding[b.state];
      }
      if (!s.isReplicated())
        main.setArgAttr(i, TccDialect::kShardingAttrName, s.toAttr(a.mesh));
    }
    for (auto [i, b] : llvm::enumerate(entry.outputs))
      if (b.role == BindingRole::State && !stateSharding[b.state].isReplicated())
        main.setResultAttr(i, TccDialect::kShardingAttrName, stateSharding[b.state].toAttr(a.mesh));
  }
}

namespace {

/// Rank `rank`'s copy of entry `e`, running `local` (moved into a module of its own, on `mesh`,
/// as @main).
EntrySpec rankEntry(const EntrySpec &e, func::FuncOp local, MeshAttr mesh, int64_t rank) {
  OwningOpRef<ModuleOp> module = ModuleOp::create(local.getLoc());
  (*module)->setAttr(TccDialect::kMeshAttrName, mesh);
  if (local->getParentOp())
    local->remove();
  module->push_back(local);
  local.setName("main");
  EntrySpec copy;
  copy.name = e.name;
  copy.module = std::move(module);
  copy.inputNames = e.inputNames;
  copy.outputNames = e.outputNames;
  copy.inputs = e.inputs;
  copy.outputs = e.outputs;
  copy.rank = rank;
  return copy;
}

/// Drops from stage `stage`'s program of entry `e` the state tensors another stage updates and
/// this one never reads (the other stages' parameters and optimizer state, returned unchanged):
/// the ranks of this stage hold no memory for them.
void dropForeignState(func::FuncOp local, EntrySpec &e, const TrainingSpec &spec, int64_t stage) {
  auto foreign = [&](const Binding &b) {
    int64_t owner = b.role == BindingRole::State ? spec.state[b.state].pipelineStage : -1;
    return owner >= 0 && owner != stage;
  };
  auto ret = cast<func::ReturnOp>(local.getBody().front().getTerminator());
  llvm::BitVector results(local.getNumResults());
  for (auto [i, b] : llvm::enumerate(e.outputs)) {
    auto arg = dyn_cast<BlockArgument>(ret.getOperand(i));
    if (foreign(b) && arg && e.inputs[arg.getArgNumber()].role == BindingRole::State &&
        e.inputs[arg.getArgNumber()].state == b.state)
      results.set(i);
  }
  for (int i = (int)results.size() - 1; i >= 0; --i)
    if (results.test(i)) {
      ret->eraseOperand(i);
      e.outputs.erase(e.outputs.begin() + i);
      e.outputNames.erase(e.outputNames.begin() + i);
    }
  (void)local.eraseResults(results);
  llvm::BitVector args(local.getNumArguments());
  for (auto [i, b] : llvm::enumerate(e.inputs))
    if (foreign(b) && local.getArgument(i).use_empty())
      args.set(i);
  for (int i = (int)args.size() - 1; i >= 0; --i)
    if (args.test(i)) {
      e.inputs.erase(e.inputs.begin() + i);
      e.inputNames.erase(e.inputNames.begin() + i);
    }
  (void)local.eraseArguments(args);
}

} // namespace

void partitionTraining(TrainingSpec &spec, const ParallelOptions &options,
                       std::vector<std::pair<std::string, ShardingReport>> *report) {
  if (spec.entries.empty())
    return;
  MeshAttr mesh = meshOf(*spec.entries[0].module);
  if (!mesh)
    return;
  // State splits, from the first entry's arguments (every entry shares them).
  EntrySpec &first = spec.entries[0];
  auto firstMain = first.module->lookupSymbol<func::FuncOp>("main");
  for (auto [i, b] : llvm::enumerate(first.inputs)) {
    if (b.role != BindingRole::State)
      continue;
    auto attr = firstMain.getArgAttrOfType<ShardingAttr>(i, TccDialect::kShardingAttrName);
    std::vector<std::vector<int>> splits;
    if (attr) {
      std::string error;
      auto s = DimSharding::fromAttr(attr, mesh, shapeOf(firstMain.getArgument(i)), error);
      if (failed(s))
        throw Error(error);
      for (auto &d : s->dims)
        splits.emplace_back(d.begin(), d.end());
    }
    spec.state[b.state].splits = splits;
  }
  std::vector<EntrySpec> ranked;
  for (EntrySpec &e : spec.entries) {
    auto main = e.module->lookupSymbol<func::FuncOp>("main");
    std::string diagnostics;
    ScopedDiagnosticHandler handler(e.module->getContext(), [&](Diagnostic &d) {
      diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
      return success();
    });
    ShardingReport rep;
    auto plan = ShardingPlan::build(main, &rep);
    if (failed(plan))
      throw Error("sharding training entry '" + e.name + "': " + diagnostics);
    // Under a pipeline the buckets form per stage, once the stages are known (pipelineTraining).
    plan->setBucketBytes(options.pp > 1 ? 0 : options.bucketBytes);
    for (int64_t r = 0; r < mesh.numRanks(); ++r)
      ranked.push_back(rankEntry(
          e, plan->partition(r, "main_rank" + std::to_string(r), r == 0 ? &rep : nullptr), mesh, r));
    if (report)
      report->emplace_back(e.name, std::move(rep));
  }
  spec.entries = std::move(ranked);
  for (StringAttr a : mesh.getAxes())
    spec.meshAxes.push_back(a.str());
  spec.meshSizes.assign(mesh.getSizes().begin(), mesh.getSizes().end());
}

PipelineTraffic pipelineTraining(TrainingSpec &spec, const ParallelOptions &options,
                                 std::vector<std::string> *notes) {
  PipelineTraffic traffic;
  PipelineSchedule schedule;
  if (!parsePipelineSchedule(options.schedule, schedule))
    throw Error("pipeline schedule '" + options.schedule + "': expected gpipe or 1f1b");
  if (spec.entries.empty() || spec.entries[0].name != "train_step")
    throw Error("internal error: pipeline parallelism needs the train step first");
  MLIRContext *ctx = spec.entries[0].module->getContext();
  // The mesh: the axes the sharding pass partitioned over already (data and tensor
  // parallelism: each entry is one program per rank of them), then pp. Rank r of that inner
  // mesh runs stage s as rank r * pp + s; its collectives over dp and tp join the ranks of its
  // stage, its sends and receives the stages of its inner rank.
  SmallVector<StringAttr> axes;
  SmallVector<int64_t> sizes;
  for (const std::string &a : spec.meshAxes)
    axes.push_back(StringAttr::get(ctx, a));
  sizes.append(spec.meshSizes.begin(), spec.meshSizes.end());
  bool sharded = !axes.empty();
  axes.push_back(StringAttr::get(ctx, "pp"));
  sizes.push_back(options.pp);
  MeshAttr mesh = MeshAttr::get(ctx, axes, sizes);
  std::vector<EntrySpec> ranked;
  std::optional<std::vector<int64_t>> stageOfResult; // the train step's, the same on every inner rank
  for (EntrySpec &e : spec.entries) {
    int64_t inner = sharded ? e.rank : 0;
    (*e.module)->setAttr(TccDialect::kMeshAttrName, mesh);
    auto main = e.module->lookupSymbol<func::FuncOp>("main");
    std::string diagnostics;
    ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &d) {
      diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
      return success();
    });
    std::optional<PipelinePlan> plan;
    std::vector<int64_t> resultArgument(e.outputs.size(), -1);
    if (e.name == "train_step") {
      int64_t microBatches = 0;
      main.walk([&](Operation *op) {
        if (auto m = op->getAttrOfType<IntegerAttr>(TccDialect::kMicroBatchAttrName))
          microBatches = std::max<int64_t>(microBatches, m.getInt() + 1);
      });
      if (microBatches < 1)
        throw Error("internal error: the train step has no micro-batches to pipeline");
      auto built = PipelinePlan::build(main, options.pp, microBatches, schedule);
      if (failed(built))
        throw Error("pipelining the train step: " + diagnostics);
      plan = std::move(*built);
      if (inner == 0) {
        traffic = {plan->crossingValues(), plan->crossingBytes(),
                   *std::max_element(plan->stageShares().begin(), plan->stageShares().end())};
        if (notes)
          notes->insert(notes->end(), plan->decisions().begin(), plan->decisions().end());
      }
      if (!stageOfResult)
        stageOfResult = plan->resultStages();
      else if (*stageOfResult != plan->resultStages())
        throw Error("internal error: the pipeline cut rank " + std::to_string(inner) +
                    "'s train step differently from rank 0's");
      // Which argument holds the state each result updates, and which stage updates it.
      std::map<int64_t, int64_t> argOfState;
      for (auto [i, b] : llvm::enumerate(e.inputs))
        if (b.role == BindingRole::State)
          argOfState[b.state] = static_cast<int64_t>(i);
      for (auto [i, b] : llvm::enumerate(e.outputs))
        if (b.role == BindingRole::State) {
          resultArgument[i] = argOfState.count(b.state) ? argOfState[b.state] : -1;
          spec.state[b.state].pipelineStage = plan->resultStages()[i];
        }
    }
    for (int64_t stage = 0; stage < options.pp; ++stage) {
      func::FuncOp local;
      if (plan) {
        local = plan->partition(stage, "main_stage" + std::to_string(stage), resultArgument);
        // Gradient buckets form per stage, from the all-reduces each stage runs itself.
        bucketAllReduces(local, options.bucketBytes);
      } else {
        // The other entries (eval) run whole on every rank, each parameter broadcast from the
        // stage that updates it (the others hold none of it).
        local = cast<func::FuncOp>(main->clone());
        OpBuilder b = OpBuilder::atBlockBegin(&local.getBody().front());
        for (auto [i, bind] : llvm::enumerate(e.inputs)) {
          int64_t owner = bind.role == BindingRole::State ? spec.state[bind.state].pipelineStage : -1;
          BlockArgument arg = local.getArgument(i);
          if (owner < 0 || arg.use_empty())
            continue;
          Value mine = owner == stage ? Value(arg) : CoreBuilder(b, arg.getLoc()).splatLike(arg, 0);
          Value current = b.create<BroadcastOp>(arg.getLoc(), mine, owner, b.getStrArrayAttr({"pp"}));
          arg.replaceAllUsesExcept(current, current.getDefiningOp());
        }
      }
      // (Each entry's programs stay in rank order: inner ranks come in order, stages within.)
      EntrySpec copy = rankEntry(e, local, mesh, inner * options.pp + stage);
      dropForeignState(local, copy, spec, stage);
      ranked.push_back(std::move(copy));
    }
  }
  spec.entries = std::move(ranked);
  spec.meshAxes.clear();
  for (StringAttr a : axes)
    spec.meshAxes.push_back(a.str());
  spec.meshSizes.assign(sizes.begin(), sizes.end());
  return traffic;
}

} // namespace tcc
