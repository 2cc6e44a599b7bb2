//===- LowerToKernels.cpp - Fused graph -> tk kernels and a tk program --------===//
//
// -tcc-lower-to-kernels turns `func.func @main` (tensors; every non-constant, non-reshape op
// inside a tcc.fusion, as -tcc-fuse leaves it) into:
//  * one `tk.kernel` function per loop fusion and per extern epilogue (KernelEmitter.cpp builds
//    their bodies), and
//  * the program: `func.func @main` with `tk.program`, arguments = input buffers then output
//    buffers, whose body allocates temporaries (tk.alloc), maps constants (private constant
//    memref.globals), views reshapes (tk.view), launches kernels, calls libraries (tk.gemm,
//    tk.conv, tk.topk) and copies (tk.copy) where an output is an input, a constant, a second
//    return of one value, or the base of a scatter.
// A fusion result that is a graph output is written directly into the output argument (through
// a tk.view when the output is a reshape of it). With target=cuda, what cuBLASLt computes of a
// GEMM's epilogue (matchGemmEpilogue: a scale, a bias vector, then ReLU or tanh GELU) becomes
// tk.gemm's `alpha`, `bias` and `activation`, and the epilogue kernel starts from that value.
// Program metadata: `tk.num_inputs` and `tk.arg_names` (taken from @main's `tk.arg_names`, else
// `tcc.input_names`/`tcc.output_names`, else input<i>/output<i>).
//
//===----------------------------------------------------------------------===//
#include "FusionUtils.h"
#include "KernelEmitter.h"

#include "tcc/IR/TkDialect.h"
#include "tcc/Passes/GemmEpilogue.h"
#include "tcc/IR/Sharding.h"
#include "tcc/Passes/Passes.h"

#include "mlir/IR/Dominance.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/MapVector.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/CSE.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace tcc {
#define GEN_PASS_DEF_LOWERTOKERNELS
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc::fusion;
using tcc::kernel::LoweringError;

namespace tcc {
namespace {

MemRefType memrefOf(Value tensor) { return tk::bufferType(tensorType(tensor)); }

/// Block arguments of `body` that the computation of `roots` reads, not looking past `stop` or
/// the slices in `viewed` (read through views of their own).
SmallVector<BlockArgument> readArguments(Block &body, ValueRange roots, Value stop = {},
                                         const llvm::MapVector<Value, Value> &viewed = {}) {
  llvm::SetVector<BlockArgument> args;
  llvm::DenseSet<Value> seen;
  SmallVector<Value> work(roots.begin(), roots.end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (v == stop || viewed.count(v) || !seen.insert(v).second)
      continue;
    if (auto a = dyn_cast<BlockArgument>(v)) {
      if (a.getOwner() == &body)
        args.insert(a);
      continue;
    }
    for (Value operand : v.getDefiningOp()->getOperands())
      work.push_back(operand);
  }
  SmallVector<BlockArgument> sorted(args.begin(), args.end());
  llvm::sort(sorted, [](BlockArgument a, BlockArgument b) {
    return a.getArgNumber() < b.getArgNumber();
  });
  return sorted;
}

class ProgramBuilder {
public:
  ProgramBuilder(ModuleOp module, func::FuncOp graph, Target target)
      : module_(module), graph_(graph), target_(target), symbols_(module),
        b_(module.getContext()) {}

  LogicalResult run();

private:
  Value bufferOf(Value tensor);
  Value constantBuffer(ConstantOp c) { return constantBuffer(c.getLoc(), c.getValue()); }
  /// A private constant global holding `value` (its shape and element type).
  Value constantBuffer(Location loc, ElementsAttr value);
  /// The [N] buffer of a vector an epilogue matcher found in fusion `f` (a GEMM's or a
  /// convolution's bias): `constant` when it is one, else `vector`'s buffer seen as [N].
  Value vectorBuffer(FusionOp f, Value vector, DenseElementsAttr constant, int64_t n,
                     StringRef what);
  Value alloc(Value tensor) { return b_.create<tk::AllocOp>(loc(tensor), memrefOf(tensor), nullptr); }
  Location loc(Value v) { return v.getDefiningOp() ? v.getDefiningOp()->getLoc() : graph_.getLoc(); }

  void lowerFusion(FusionOp f);
  void lowerLoop(FusionOp f, ArrayRef<Value> outputs);
  llvm::MapVector<Value, Value> viewSlicedInputs(Block &body, Operation *library = nullptr);
  void lowerExtern(FusionOp f, ArrayRef<Value> outputs);
  /// Creates a kernel reading/writing `buffers` (program values) and launches it; `build` fills
  /// the body given the kernel arguments (in the order of `buffers`).
  void launchKernel(StringRef name, Location loc, ArrayRef<Value> buffers,
                    function_ref<void(OpBuilder &, ArrayRef<Value>)> build);
  /// The operand buffer of a gemm operand: peels absorbed transposes and batch broadcasts.
  Value gemmOperand(FusionOp f, Value operand, bool &transposed);
  /// The program's buffer of the run's symbol values (made once, at the program's entry).
  Value symbolValues();

  ModuleOp module_;
  func::FuncOp graph_, program_;
  Target target_;
  SymbolTable symbols_;
  OpBuilder b_;
  DenseMap<Value, Value> buffers_;           // graph tensor -> program memref
  DenseMap<Value, Value> fusionArgBuffers_;  // fusion block arg -> program memref (current)
  SmallVector<Value> outputArgs_;
  int kernels_ = 0, constants_ = 0;
  Value symbolValues_;
};

Value ProgramBuilder::constantBuffer(Location loc, ElementsAttr value) {
  OpBuilder mb(module_.getContext());
  mb.setInsertionPointToStart(module_.getBody());
  std::string name = "__tcc_constant_" + std::to_string(constants_++);
  while (symbols_.lookup(name))
    name = "__tcc_constant_" + std::to_string(constants_++);
  auto shaped = cast<ShapedType>(value.getType());
  auto type = MemRefType::get(shaped.getShape(), shaped.getElementType());
  auto global = mb.create<memref::GlobalOp>(loc, name, mb.getStringAttr("private"), type, value,
                                            /*constant=*/true,
                                            mb.getI64IntegerAttr(tk::kBufferAlignment));
  symbols_.insert(global);
  return b_.create<memref::GetGlobalOp>(loc, type, global.getSymName());
}

Value ProgramBuilder::vectorBuffer(FusionOp f, Value vector, DenseElementsAttr constant,
                                   int64_t n, StringRef what) {
  if (constant) // the vector of a constant: a constant of its own
    return constantBuffer(f.getLoc(), constant);
  auto a = dyn_cast<BlockArgument>(vector);
  if (!a || a.getOwner() != &f.getBody().front())
    throw LoweringError{f, what.str() + " must be an input of its fusion or a constant"};
  // N elements in row-major order (the epilogue matcher checked): the same bytes seen as [N].
  Value buffer = fusionArgBuffers_.lookup(a);
  auto type = MemRefType::get({n}, tensorType(a).getElementType());
  return buffer.getType() == type ? buffer : b_.create<tk::ViewOp>(f.getLoc(), type, buffer);
}

Value ProgramBuilder::bufferOf(Value tensor) {
  if (Value b = buffers_.lookup(tensor))
    return b;
  if (auto c = tensor.getDefiningOp<ConstantOp>())
    return buffers_[tensor] = constantBuffer(c);
  throw LoweringError{tensor.getDefiningOp(), "has no buffer (it is not inside a tcc.fusion: "
                                              "run -tcc-fuse before -tcc-lower-to-kernels)"};
}

void ProgramBuilder::launchKernel(StringRef name, Location loc, ArrayRef<Value> buffers,
                                  function_ref<void(OpBuilder &, ArrayRef<Value>)> build) {
  SmallVector<Type> types;
  for (Value v : buffers)
    types.push_back(v.getType());
  OpBuilder mb(module_.getContext());
  mb.setInsertionPoint(program_);
  std::string symbol = "k" + std::to_string(kernels_++) + "_" + name.str();
  auto fn = mb.create<func::FuncOp>(loc, symbol, mb.getFunctionType(types, {}));
  fn->setAttr(tk::kKernelAttr, mb.getUnitAttr());
  symbols_.insert(fn);
  Block *entry = fn.addEntryBlock();
  OpBuilder kb = OpBuilder::atBlockBegin(entry);
  SmallVector<Value> args(entry->getArguments().begin(), entry->getArguments().end());
  build(kb, args);
  kb.create<func::ReturnOp>(loc);
  // Kernels over symbolic buffers read the run's symbol values (strides, tk.size bounds).
  SmallVector<Value> launched(buffers.begin(), buffers.end());
  bool symbolic = llvm::any_of(types, [](Type t) {
    return !cast<MemRefType>(t).hasStaticShape();
  }) || fn->walk([](tk::SizeOp) {
    return WalkResult::interrupt();
  }).wasInterrupted();
  if (symbolic) {
    Value values = symbolValues();
    fn.insertArgument(fn.getNumArguments(), values.getType(),
                      mb.getDictionaryAttr(mb.getNamedAttr(tk::kSymbolsArgAttr, mb.getUnitAttr())),
                      loc);
    launched.push_back(values);
  }
  kernel::hoistLoopInvariants(fn);
  IRRewriter rewriter(module_.getContext());
  DominanceInfo dom(fn);
  eliminateCommonSubExpressions(rewriter, dom, fn);
  b_.create<tk::LaunchOp>(loc, fn.getSymName(), launched);
}

Value ProgramBuilder::symbolValues() {
  if (symbolValues_)
    return symbolValues_;
  auto symbols = module_->getAttrOfType<DictionaryAttr>(TccDialect::kSymbolsAttrName);
  int64_t n = symbols ? symbols.size() : 0;
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(&program_.getBody().front());
  symbolValues_ = b_.create<tk::SymbolValuesOp>(
      program_.getLoc(), MemRefType::get({n}, b_.getI64Type()));
  return symbolValues_;
}

/// Where `op`, a slice of static shape at compile-time starts (tcc.slice with unit strides, or
/// tcc.dynamic_slice with constant starts, clamped as it clamps them), begins in its operand,
/// in elements, when it is one contiguous run of the operand's elements (unit dims, then one
/// partial dim, then whole dims); nullopt otherwise.
static std::optional<int64_t> contiguousSliceOffset(Operation *op) {
  SmallVector<int64_t> starts;
  if (auto s = dyn_cast<SliceOp>(op)) {
    if (llvm::any_of(s.getStride(), [](int64_t st) { return st != 1; }))
      return std::nullopt;
    llvm::append_range(starts, s.getStart());
  } else if (auto d = dyn_cast<DynamicSliceOp>(op)) {
    for (Value start : d.getStarts()) {
      DenseElementsAttr c;
      if (!matchPattern(start, m_Constant(&c)))
        return std::nullopt;
      starts.push_back(c.getSplatValue<APInt>().getSExtValue());
    }
  } else {
    return std::nullopt;
  }
  auto in = tensorType(op->getOperand(0)), out = tensorType(op->getResult(0));
  if (!in.hasStaticShape() || !out.hasStaticShape())
    return std::nullopt;
  ArrayRef<int64_t> S = in.getShape(), R = out.getShape();
  size_t d = 0;
  while (d < S.size() && R[d] == 1 && S[d] != 1)
    ++d;
  for (size_t e = d + 1; e < S.size(); ++e)
    if (R[e] != S[e])
      return std::nullopt;
  int64_t offset = 0, stride = 1;
  for (size_t e = S.size(); e-- > 0;) {
    offset += std::clamp<int64_t>(starts[e], 0, S[e] - R[e]) * stride;
    stride *= S[e];
  }
  return offset;
}

/// A short name for the kernel of a fusion: its main op.
static std::string kernelName(FusionOp f) {
  Operation *main = nullptr;
  for (Operation &op : f.getBody().front()) {
    if (isa<ReduceOp, ArgReduceOp, MatmulOp, ConvOp, ReduceWindowOp, CumsumOp, ScatterElementsOp,
            ScatterNDOp, DynamicUpdateSliceOp, TopKOp, AttentionOp, AttentionGradOp>(op))
      main = &op;
  }
  if (!main) {
    Operation *t = f.getBody().front().getTerminator();
    main = t->getNumOperands() ? t->getOperand(0).getDefiningOp() : nullptr;
  }
  if (!main)
    return "copy";
  std::string name = main->getName().stripDialect().str();
  if (auto u = dyn_cast<UnaryOp>(main))
    name = stringifyUnaryKind(u.getKind()).str();
  else if (auto b = dyn_cast<BinaryOp>(main))
    name = stringifyBinaryKind(b.getKind()).str();
  else if (auto r = dyn_cast<ReduceOp>(main))
    name = "reduce_" + stringifyReduceKind(r.getKind()).str();
  return name;
}

/// Contiguous slices of an input of `body` at compile-time offsets (contiguousSliceOffset), as
/// views of the input's buffer at those offsets, made before the kernel's launch: the kernel
/// then does not depend on the offsets, so the steps of an unrolled recurrence (each reading
/// its own time step) share one kernel (-tcc-dedup-kernels). Slices only `library` reads are
/// its operands, not the kernel's. Maps each slice to its view.
llvm::MapVector<Value, Value> ProgramBuilder::viewSlicedInputs(Block &body, Operation *library) {
  llvm::MapVector<Value, Value> sliceViews;
  for (Operation &op : body) {
    std::optional<int64_t> offset = contiguousSliceOffset(&op);
    if (!offset || llvm::all_of(op.getUsers(), [&](Operation *user) { return user == library; }))
      continue;
    Value from = op.getOperand(0); // an input, or a reshape of one (the same bytes)
    while (auto r = from.getDefiningOp<ReshapeOp>())
      from = r.getX();
    auto arg = dyn_cast<BlockArgument>(from);
    if (!arg || arg.getOwner() != &body)
      continue;
    Value source = fusionArgBuffers_.lookup(arg);
    auto sourceType = cast<MemRefType>(source.getType());
    if (!sourceType.hasStaticShape())
      continue;
    int64_t byteOffset = *offset * tk::elementBytes(sourceType.getElementType());
    sliceViews[op.getResult(0)] = b_.create<tk::ViewOp>(
        op.getLoc(), memrefOf(op.getResult(0)), source, b_.getI64IntegerAttr(byteOffset));
  }
  return sliceViews;
}

void ProgramBuilder::lowerLoop(FusionOp f, ArrayRef<Value> outputs) {
  Block &body = f.getBody().front();
  auto yields = body.getTerminator()->getOperands();
  // Scatters and dynamic_update_slice update a copy of their base in place.
  for (Operation &op : body) {
    if (!isa<ScatterElementsOp, ScatterNDOp, DynamicUpdateSliceOp>(op))
      continue;
    auto base = dyn_cast<BlockArgument>(op.getOperand(0));
    if (!base || base.getOwner() != &body)
      throw LoweringError{&op, "its base tensor must be an input of its fusion"};
    b_.create<tk::CopyOp>(op.getLoc(), fusionArgBuffers_.lookup(base), outputs[0]);
  }
  llvm::MapVector<Value, Value> sliceViews = viewSlicedInputs(body);
  SmallVector<BlockArgument> args = readArguments(body, yields, Value(), sliceViews);
  llvm::SetVector<Value> buffers;
  for (BlockArgument a : args)
    buffers.insert(fusionArgBuffers_.lookup(a));
  for (auto &[slice, view] : sliceViews)
    buffers.insert(view);
  for (Value o : outputs)
    buffers.insert(o);
  SmallVector<Value> list(buffers.begin(), buffers.end());
  launchKernel(kernelName(f), f.getLoc(), list, [&](OpBuilder &kb, ArrayRef<Value> kargs) {
    auto kernelBuffer = [&](Value programBuffer) {
      return kargs[std::distance(list.begin(), llvm::find(list, programBuffer))];
    };
    DenseMap<Value, Value> bound;
    for (BlockArgument a : args)
      bound[a] = kernelBuffer(fusionArgBuffers_.lookup(a));
    for (auto &[slice, view] : sliceViews)
      bound[slice] = kernelBuffer(view);
    SmallVector<Value> outs;
    for (Value o : outputs)
      outs.push_back(kernelBuffer(o));
    kernel::buildKernelBody(kb, f.getLoc(), body, bound, outs, target_ == Target::Cpu);
  });
}

Value ProgramBuilder::gemmOperand(FusionOp f, Value operand, bool &transposed) {
  Block &body = f.getBody().front();
  transposed = false;
  Value v = operand;
  while (true) {
    if (auto a = dyn_cast<BlockArgument>(v); a && a.getOwner() == &body)
      break;
    Operation *op = v.getDefiningOp();
    if (!op || !isGemmAbsorbable(op))
      throw LoweringError{op ? op : f.getOperation(),
                          "a GEMM operand must be a fusion input, possibly transposed in its "
                          "last two dims or broadcast over batch dims"};
    if (isa<TransposeOp>(op))
      transposed = !transposed;
    v = op->getOperand(0);
  }
  Value buffer = fusionArgBuffers_.lookup(v);
  auto type = cast<MemRefType>(buffer.getType());
  int64_t rank = tensorType(operand).getRank();
  if (type.getRank() == rank)
    return buffer;
  // Batch-broadcast operand: view it with leading dims of size 1 (tk.gemm broadcasts them).
  SymShape shape(rank - type.getRank(), SymExpr(1));
  llvm::append_range(shape, tk::bufferDims(type));
  return b_.create<tk::ViewOp>(f.getLoc(), tk::bufferType(shape, type.getElementType()), buffer);
}

void ProgramBuilder::lowerExtern(FusionOp f, ArrayRef<Value> outputs) {
  Block &body = f.getBody().front();
  auto yields = body.getTerminator()->getOperands();
  Operation *lib = nullptr;
  for (Operation &op : body)
    if (isa<MatmulOp, ConvOp, TopKOp, AttentionOp, AttentionGradOp, ConcatOp>(op) ||
        isCollective(&op) ||
        (isa<ReduceWindowOp>(op) && isLibraryPool(cast<ReduceWindowOp>(op), target_)))
      lib = &op;
  if (!lib)
    throw LoweringError{f, "extern fusion without a matmul, conv, pool, topk, attention, "
                           "attention gradient, concat or collective"};
  // The buffer a result of `lib` goes to: the fusion's output it yields, else a new one.
  auto resultBuffer = [&](Value result) {
    auto it = llvm::find(yields, result);
    return it != yields.end() ? outputs[it - yields.begin()] : alloc(result);
  };

  if (auto concat = dyn_cast<ConcatOp>(lib)) {
    // Each input is copied into its slab of the result (isCopyConcat: contiguous).
    if (!isCopyConcat(concat) || yields.size() != 1 || yields[0] != concat.getResult())
      throw LoweringError{concat, "a copy concat must have contiguous inputs and be its "
                                  "fusion's only result"};
    // Bytes of one index along the axis (the buffer's bytes over the axis length).
    int64_t length = shapeOf(concat.getResult())[concat.getAxis()];
    int64_t sliceBytes = length ? tk::bufferBytes(cast<MemRefType>(outputs[0].getType())) / length : 0;
    int64_t offset = 0;
    for (Value in : concat.getInputs()) {
      int64_t n = shapeOf(in)[concat.getAxis()];
      auto arg = dyn_cast<BlockArgument>(in);
      if (!arg || arg.getOwner() != &body)
        throw LoweringError{concat, "the inputs of a copy concat must be inputs of its fusion"};
      if (n > 0) {
        Value source = fusionArgBuffers_.lookup(arg);
        Value slab = b_.create<tk::ViewOp>(concat.getLoc(), cast<MemRefType>(source.getType()),
                                           outputs[0], b_.getI64IntegerAttr(offset * sliceBytes));
        b_.create<tk::CopyOp>(concat.getLoc(), source, slab);
      }
      offset += n;
    }
    return;
  }

  // Point to point: one buffer (sent, or received into); dim = the peer's position on the
  // axis, dim2 = the tag.
  if (auto send = dyn_cast<SendOp>(lib)) {
    auto in = dyn_cast<BlockArgument>(send.getX());
    if (!in || in.getOwner() != &body)
      throw LoweringError{lib, "a send lowers with one input of its fusion"};
    Value buffer = fusionArgBuffers_.lookup(in);
    b_.create<tk::CollectiveOp>(lib->getLoc(), buffer, buffer, "send", CollectiveReduceKind::Sum,
                                send.getPeer(), send.getTag(), b_.getStrArrayAttr({send.getAxis()}));
    return;
  }
  if (auto recv = dyn_cast<RecvOp>(lib)) {
    Value out = resultBuffer(recv.getResult());
    b_.create<tk::CollectiveOp>(lib->getLoc(), out, out, "recv", CollectiveReduceKind::Sum,
                                recv.getPeer(), recv.getTag(), b_.getStrArrayAttr({recv.getAxis()}));
    return;
  }

  if (isCollective(lib)) {
    auto in = dyn_cast_or_null<BlockArgument>(lib->getNumOperands() ? lib->getOperand(0) : Value());
    if (!in || in.getOwner() != &body || lib->getNumResults() != 1)
      throw LoweringError{lib, "a collective lowers with one input of its fusion and one result"};
    Value out = resultBuffer(lib->getResult(0));
    auto [kind, reduction, dim, dim2, axes] =
        llvm::TypeSwitch<Operation *, std::tuple<StringRef, CollectiveReduceKind, int64_t, int64_t, ArrayAttr>>(lib)
            .Case([](AllReduceOp o) {
              return std::make_tuple(StringRef("all_reduce"), o.getKind(), int64_t(0), int64_t(0), o.getAxes());
            })
            .Case([](AllGatherOp o) {
              return std::make_tuple(StringRef("all_gather"), CollectiveReduceKind::Sum, o.getDim(), int64_t(0), o.getAxes());
            })
            .Case([](ReduceScatterOp o) {
              return std::make_tuple(StringRef("reduce_scatter"), o.getKind(), o.getDim(), int64_t(0), o.getAxes());
            })
            .Case([](AllToAllOp o) {
              return std::make_tuple(StringRef("all_to_all"), CollectiveReduceKind::Sum, o.getSplitDim(), o.getConcatDim(), o.getAxes());
            })
            .Case([](BroadcastOp o) {
              return std::make_tuple(StringRef("broadcast"), CollectiveReduceKind::Sum, int64_t(0), o.getRoot(), o.getAxes());
            })
            .Default([&](Operation *op) -> std::tuple<StringRef, CollectiveReduceKind, int64_t, int64_t, ArrayAttr> {
              throw LoweringError{op, "no lowering for this collective"};
            });
    b_.create<tk::CollectiveOp>(lib->getLoc(), fusionArgBuffers_.lookup(in), out, kind, reduction,
                                dim, dim2, axes);
    return;
  }

  // Attention and its gradient read every operand from an input of the fusion.
  auto operandBuffers = [&](Operation *op) {
    SmallVector<Value, 7> ins;
    for (Value operand : op->getOperands()) {
      auto in = dyn_cast<BlockArgument>(operand);
      if (!in || in.getOwner() != &body)
        throw LoweringError{op, "its operands must be inputs of its fusion"};
      ins.push_back(fusionArgBuffers_.lookup(in));
    }
    return ins;
  };
  if (auto a = dyn_cast<AttentionOp>(lib)) {
    SmallVector<Value, 7> ins = operandBuffers(a);
    Value out = resultBuffer(a.getResult());
    size_t next = 3;
    Value mask = a.getMask() ? ins[next++] : Value(), bias = a.getBias() ? ins[next] : Value();
    b_.create<tk::AttentionOp>(a.getLoc(), ins[0], ins[1], ins[2], mask, bias, out,
                               a.getScaleAttr(), a.getCausalAttr(), a.getMaskedValueAttr());
    return;
  }

  if (auto a = dyn_cast<AttentionGradOp>(lib)) {
    SmallVector<Value, 7> ins = operandBuffers(a);
    Value outs[3] = {resultBuffer(a.getGradQ()), resultBuffer(a.getGradK()),
                     resultBuffer(a.getGradV())};
    size_t next = 5;
    Value mask = a.getMask() ? ins[next++] : Value(), bias = a.getBias() ? ins[next] : Value();
    // CUDA's kernels pass each query row's log-sum-exp and dO.O from the first to the second
    // through an f32 [B..., Lq, 2] workspace in the arena.
    Value workspace;
    if (target_ == Target::Cuda) {
      RankedTensorType q = tensorType(a.getQ());
      SmallVector<int64_t> shape(q.getShape());
      shape.back() = 2;
      workspace = b_.create<tk::AllocOp>(
          a.getLoc(),
          tk::bufferType(RankedTensorType::get(shape, b_.getF32Type(), q.getEncoding())),
          nullptr);
    }
    b_.create<tk::AttentionGradOp>(a.getLoc(), ins[0], ins[1], ins[2], ins[3], ins[4], mask, bias,
                                   outs[0], outs[1], outs[2], workspace, a.getScaleAttr(),
                                   a.getCausalAttr(), a.getMaskedValueAttr());
    return;
  }

  if (auto t = dyn_cast<TopKOp>(lib)) {
    auto in = dyn_cast<BlockArgument>(t.getX());
    if (!in || in.getOwner() != &body)
      throw LoweringError{t, "its input must be an input of its fusion"};
    Value outs[2] = {resultBuffer(t->getResult(0)), resultBuffer(t->getResult(1))};
    b_.create<tk::TopKOp>(t.getLoc(), fusionArgBuffers_.lookup(in), outs[0], outs[1],
                          t.getDim(), t.getLargest());
    return;
  }

  // What the library computes: its result, or for a GEMM the end of the part of its epilogue
  // the target's library computes (the same matcher -tcc-fuse used to build the fusion).
  Value result = lib->getResult(0);
  auto inBody = [&](Operation *op) { return op->getBlock() == &body; };
  auto outside = [&](Value v) -> Value {
    auto a = dyn_cast<BlockArgument>(v);
    return a && a.getOwner() == &body ? f.getInputs()[a.getArgNumber()] : v;
  };
  GemmEpilogue gemmEpilogue;
  ConvEpilogue convEpilogue;
  if (auto m = dyn_cast<MatmulOp>(lib)) {
    gemmEpilogue = matchGemmEpilogue(m, target_, inBody, outside);
    result = gemmEpilogue.result;
  } else if (auto c = dyn_cast<ConvOp>(lib)) {
    convEpilogue = matchConvEpilogue(c, target_, inBody, outside);
    result = convEpilogue.result;
  }
  // Where the library writes: its own yield, else in place in an epilogue result of its type.
  Value target;
  if (auto it = llvm::find(yields, result); it != yields.end())
    target = outputs[it - yields.begin()];
  for (size_t i = 0; i < yields.size() && !target; ++i)
    if (yields[i].getType() == result.getType())
      target = outputs[i];
  if (!target)
    target = alloc(result);

  if (auto m = dyn_cast<MatmulOp>(lib)) {
    if (!isLibraryMatmul(m))
      throw LoweringError{m, "a library GEMM must be f16, bf16, f32 or f64"};
    bool ta, tb;
    Value a = gemmOperand(f, m.getLhs(), ta), bb = gemmOperand(f, m.getRhs(), tb);
    Value bias;
    if (gemmEpilogue.bias)
      bias = vectorBuffer(f, gemmEpilogue.bias, gemmEpilogue.biasConstant,
                          tensorType(m.getResult()).getShape().back(), "a GEMM bias");
    b_.create<tk::GemmOp>(m.getLoc(), a, bb, target, bias, ta, tb, APFloat(gemmEpilogue.alpha),
                          APFloat(0.0), gemmEpilogue.activation);
  } else if (auto pool = dyn_cast<ReduceWindowOp>(lib)) {
    auto in = dyn_cast<BlockArgument>(pool.getX());
    if (!in || in.getOwner() != &body)
      throw LoweringError{pool, "its input must be an input of its fusion"};
    b_.create<tk::PoolOp>(pool.getLoc(), pool.getKind(), fusionArgBuffers_.lookup(in), target,
                          pool.getWindow(), pool.getStrides(), pool.getPadLow(),
                          pool.getPadHigh(), pool.getDilations());
  } else {
    auto c = cast<ConvOp>(lib);
    if (!isLibraryConv(c, target_))
      throw LoweringError{c, "a library convolution must be f32 (or f16/bf16 on the CPU)"};
    auto in = dyn_cast<BlockArgument>(c.getInput());
    auto w = dyn_cast<BlockArgument>(c.getWeight());
    if (!in || !w || in.getOwner() != &body || w.getOwner() != &body)
      throw LoweringError{c, "its input and weight must be inputs of its fusion"};
    // Empty when it is 1 everywhere (tk.conv's form for plain convolutions).
    ArrayRef<int64_t> lhsDilation = c.getLhsDilation();
    if (llvm::all_of(lhsDilation, [](int64_t d) { return d == 1; }))
      lhsDilation = {};
    Value bias, residual;
    auto resultType = tensorType(c.getResult());
    if (convEpilogue.bias)
      bias = vectorBuffer(f, convEpilogue.bias, convEpilogue.biasConstant,
                          resultType.getDimSize(c.getChannelsLast() ? resultType.getRank() - 1
                                                                    : 1),
                          "a convolution's bias");
    if (convEpilogue.residual) {
      auto a = dyn_cast<BlockArgument>(convEpilogue.residual);
      if (!a || a.getOwner() != &body)
        throw LoweringError{c, "a convolution's residual must be an input of its fusion"};
      residual = fusionArgBuffers_.lookup(a);
    }
    auto bound = [&](std::optional<double> v) {
      return v ? b_.getF64FloatAttr(*v) : FloatAttr();
    };
    const bool gated = convEpilogue.activation == "hard_swish"; // the gate a * y + b
    auto gate = [&](double v) { return gated ? b_.getF64FloatAttr(v) : FloatAttr(); };
    b_.create<tk::ConvOp>(c.getLoc(), fusionArgBuffers_.lookup(in), fusionArgBuffers_.lookup(w),
                          bias, residual, target, c.getStrides(), c.getPadLow(), c.getPadHigh(),
                          c.getRhsDilation(), (uint64_t)c.getGroups(), lhsDilation,
                          bound(convEpilogue.clampMin), bound(convEpilogue.clampMax),
                          c.getChannelsLast(),
                          convEpilogue.activation.empty()
                              ? StringAttr()
                              : b_.getStringAttr(convEpilogue.activation),
                          gate(convEpilogue.activationAlpha),
                          gate(convEpilogue.activationBeta));
  }

  // The epilogue: every other yield, computed elementwise from the library result.
  SmallVector<Value> epilogueOutputs;
  SmallVector<Value> epilogueYields;
  bool any = false;
  for (size_t i = 0; i < yields.size(); ++i) {
    bool byLibrary = yields[i] == result;
    epilogueOutputs.push_back(byLibrary ? Value() : outputs[i]);
    if (!byLibrary) {
      any = true;
      epilogueYields.push_back(yields[i]);
    }
  }
  if (!any)
    return;
  llvm::MapVector<Value, Value> sliceViews = viewSlicedInputs(body, lib);
  SmallVector<BlockArgument> args = readArguments(body, epilogueYields, result, sliceViews);
  llvm::SetVector<Value> buffers;
  buffers.insert(target);
  for (BlockArgument a : args)
    buffers.insert(fusionArgBuffers_.lookup(a));
  for (auto &[slice, view] : sliceViews)
    buffers.insert(view);
  for (Value o : epilogueOutputs)
    if (o)
      buffers.insert(o);
  SmallVector<Value> list(buffers.begin(), buffers.end());
  std::string name = isa<MatmulOp>(lib)        ? "gemm_epilogue"
                     : isa<ReduceWindowOp>(lib) ? "pool_epilogue"
                                                : "conv_epilogue";
  launchKernel(name, f.getLoc(), list, [&](OpBuilder &kb, ArrayRef<Value> kargs) {
    auto kernelBuffer = [&](Value programBuffer) {
      return kargs[std::distance(list.begin(), llvm::find(list, programBuffer))];
    };
    DenseMap<Value, Value> bound;
    bound[result] = kernelBuffer(target);
    for (BlockArgument a : args)
      bound[a] = kernelBuffer(fusionArgBuffers_.lookup(a));
    for (auto &[slice, view] : sliceViews)
      bound[slice] = kernelBuffer(view);
    SmallVector<Value> outs;
    for (Value o : epilogueOutputs)
      outs.push_back(o ? kernelBuffer(o) : Value());
    kernel::buildKernelBody(kb, f.getLoc(), body, bound, outs, target_ == Target::Cpu);
  });
}

/// The model nodes a fusion computes: the locations of its ops (the importer names each op after
/// its ONNX node), fused and deduplicated. Its steps carry it, so that the artifact can say
/// which nodes each launch covers (tcc profile).
static Location nodesLoc(FusionOp f) {
  llvm::SetVector<Location> locs;
  f.getBody().walk([&](Operation *op) { locs.insert(op->getLoc()); });
  return FusedLoc::get(f.getContext(), locs.getArrayRef());
}

void ProgramBuilder::lowerFusion(FusionOp f) {
  // Steps made for this fusion (launches and library calls) get its nodes' location.
  Operation *before = b_.getInsertionBlock()->empty() ? nullptr : &b_.getInsertionBlock()->back();
  auto nameSteps = llvm::make_scope_exit([&] {
    Block *block = b_.getInsertionBlock();
    Location nodes = nodesLoc(f);
    for (Operation &op : llvm::make_range(before ? std::next(before->getIterator()) : block->begin(),
                                          block->end()))
      if (isa<tk::LaunchOp, tk::GemmOp, tk::ConvOp, tk::PoolOp, tk::TopKOp, tk::AttentionOp,
              tk::AttentionGradOp, tk::CollectiveOp, tk::WaitOp>(op))
        op.setLoc(nodes);
  });
  Block &body = f.getBody().front();
  fusionArgBuffers_.clear();
  for (auto [arg, input] : llvm::zip(body.getArguments(), f.getInputs()))
    fusionArgBuffers_[arg] = bufferOf(input);
  SmallVector<Value> outputs;
  for (Value r : f.getResults()) {
    if (!buffers_.count(r))
      buffers_[r] = alloc(r);
    outputs.push_back(buffers_[r]);
  }
  if (f.getKind() == "loop")
    lowerLoop(f, outputs);
  else if (f.getKind() == "extern")
    lowerExtern(f, outputs);
  else
    throw LoweringError{f, "unknown fusion kind '" + f.getKind().str() + "'"};
}

/// The graph's input and output names, from the attributes the driver may set on @main.
static SmallVector<Attribute> argNames(func::FuncOp graph) {
  MLIRContext *ctx = graph.getContext();
  SmallVector<Attribute> names;
  unsigned numIn = graph.getNumArguments(), numOut = graph.getNumResults();
  if (auto a = graph->getAttrOfType<ArrayAttr>(tk::kArgNamesAttr); a && a.size() == numIn + numOut)
    return SmallVector<Attribute>(a.begin(), a.end());
  auto in = graph->getAttrOfType<ArrayAttr>("tcc.input_names");
  auto out = graph->getAttrOfType<ArrayAttr>("tcc.output_names");
  for (unsigned i = 0; i < numIn; ++i)
    names.push_back(in && in.size() == numIn ? in[i]
                                             : StringAttr::get(ctx, "input" + std::to_string(i)));
  for (unsigned i = 0; i < numOut; ++i)
    names.push_back(out && out.size() == numOut
                        ? out[i]
                        : StringAttr::get(ctx, "output" + std::to_string(i)));
  return names;
}

LogicalResult ProgramBuilder::run() {
  MLIRContext *ctx = module_.getContext();
  SmallVector<Type> argTypes;
  for (Type t : graph_.getArgumentTypes())
    argTypes.push_back(tk::bufferType(cast<RankedTensorType>(t)));
  for (Type t : graph_.getResultTypes())
    argTypes.push_back(tk::bufferType(cast<RankedTensorType>(t)));
  StringAttr name = graph_.getSymNameAttr();
  OpBuilder mb(ctx);
  mb.setInsertionPointAfter(graph_);
  program_ = mb.create<func::FuncOp>(graph_.getLoc(), "__tcc_program",
                                     mb.getFunctionType(argTypes, {}));
  program_->setAttr(tk::kProgramAttr, mb.getUnitAttr());
  program_->setAttr(tk::kNumInputsAttr, mb.getI64IntegerAttr(graph_.getNumArguments()));
  program_->setAttr(tk::kArgNamesAttr, mb.getArrayAttr(argNames(graph_)));
  Block *entry = program_.addEntryBlock();
  b_.setInsertionPointToStart(entry);

  unsigned numIn = graph_.getNumArguments();
  for (unsigned i = 0; i < numIn; ++i)
    buffers_[graph_.getArgument(i)] = entry->getArgument(i);
  outputArgs_.assign(entry->getArguments().begin() + numIn, entry->getArguments().end());

  // Fusion results that are graph outputs are computed in place in the output buffers (through
  // a view when the output is a reshape of them).
  auto ret = cast<func::ReturnOp>(graph_.getBody().front().getTerminator());
  SmallVector<bool> satisfied(ret.getNumOperands(), false);
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    Value v = ret.getOperand(i);
    if (v.getDefiningOp<FusionOp>() && !buffers_.count(v)) {
      buffers_[v] = outputArgs_[i];
      satisfied[i] = true;
    }
  }
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    if (satisfied[i])
      continue;
    Value v = ret.getOperand(i);
    SmallVector<Value> chain{v};
    while (auto r = chain.back().getDefiningOp<ReshapeOp>())
      chain.push_back(r.getX());
    Value source = chain.back();
    if (chain.size() == 1 || !source.getDefiningOp<FusionOp>() || buffers_.count(source) ||
        llvm::any_of(chain, [&](Value c) { return buffers_.count(c); }))
      continue;
    buffers_[source] = b_.create<tk::ViewOp>(loc(source), memrefOf(source), outputArgs_[i]);
    // The reshapes of the chain are views of that, ending at the output itself.
    buffers_[v] = outputArgs_[i];
    satisfied[i] = true;
  }

  try {
    for (Operation &op : graph_.getBody().front()) {
      if (isa<ConstantOp, func::ReturnOp>(op))
        continue;
      if (auto r = dyn_cast<ReshapeOp>(op)) {
        if (!buffers_.count(r.getResult()))
          buffers_[r.getResult()] =
              b_.create<tk::ViewOp>(r.getLoc(), memrefOf(r.getResult()), bufferOf(r.getX()));
        continue;
      }
      if (auto f = dyn_cast<FusionOp>(op)) {
        lowerFusion(f);
        continue;
      }
      throw LoweringError{&op, "is not inside a tcc.fusion: run -tcc-fuse before "
                               "-tcc-lower-to-kernels"};
    }
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (satisfied[i])
        continue;
      Value v = ret.getOperand(i);
      b_.create<tk::CopyOp>(loc(v), bufferOf(v), outputArgs_[i]);
    }
  } catch (const LoweringError &e) {
    (e.op ? e.op : graph_.getOperation())->emitError() << e.message;
    program_.erase();
    return failure();
  }
  b_.create<func::ReturnOp>(graph_.getLoc());
  symbols_.erase(graph_);
  program_.setSymName(name);
  symbols_.insert(program_);
  return success();
}

/// The buffer `v` is (a view of).
Value rootBuffer(Value v) {
  while (auto view = v.getDefiningOp<tk::ViewOp>())
    v = view.getSource();
  return v;
}

/// Whether `op` reads or writes `buffer` or a view of it (views and allocs themselves do not).
bool touchesBuffer(Operation *op, Value buffer) {
  if (isa<tk::ViewOp, tk::AllocOp>(op))
    return false;
  return llvm::any_of(op->getOperands(), [&](Value v) { return rootBuffer(v) == buffer; });
}

/// The first op after `op` that touches any of `buffers` (the terminator if none does).
Operation *firstTouchAfter(Operation *op, ArrayRef<Value> buffers) {
  Operation *end = op->getBlock()->getTerminator();
  for (Operation *o = op->getNextNode(); o && o != end; o = o->getNextNode())
    if (llvm::any_of(buffers, [&](Value b) { return touchesBuffer(o, b); }))
      return o;
  return end;
}

/// Whether the tk.view/tk.alloc chain defining `v` can move before `before` (a block argument or
/// something defined before it stays where it is); with `move`, moves it.
bool hoistDefinition(Value v, Operation *before, bool move) {
  Operation *def = v.getDefiningOp();
  if (!def || def->isBeforeInBlock(before))
    return true;
  if (auto view = dyn_cast<tk::ViewOp>(def)) {
    if (!hoistDefinition(view.getSource(), before, move))
      return false;
  } else if (!isa<tk::AllocOp>(def)) {
    return false;
  }
  if (move)
    def->moveBefore(before);
  return true;
}

/// An all_gather and the one op that fills its input (a shard's transpose), if the input is a
/// temporary filled by one op since its alloc; `producer` is null for any other input (and for
/// a collective filling it).
struct GatherSource {
  tk::CollectiveOp gather;
  Operation *producer = nullptr;
};

GatherSource gatherSource(tk::CollectiveOp g) {
  Value in = rootBuffer(g.getInput());
  auto alloc = in.getDefiningOp<tk::AllocOp>();
  if (!alloc)
    return {g};
  Operation *producer = nullptr;
  for (Operation *o = alloc->getNextNode(); o && o != g.getOperation(); o = o->getNextNode())
    if (touchesBuffer(o, in)) {
      if (producer)
        return {g};
      producer = o;
    }
  // A kernel or library call; never a collective (a pipeline stage's recv must keep its place
  // among the sends and receives, which keep the stages from waiting on each other).
  if (producer && (producer->getNumRegions() || producer->getNumResults() ||
                   isa<tk::CollectiveOp>(producer)))
    producer = nullptr;
  return {g, producer};
}

/// Whether nothing in [from, to) touches `buffer`.
bool untouchedBetween(Operation *from, Operation *to, Value buffer) {
  for (Operation *o = from; o && o != to; o = o->getNextNode())
    if (touchesBuffer(o, buffer))
      return false;
  return true;
}

/// Moves `src`'s gather (with the op filling its input, when that op comes after `target`) to
/// just before `target` if its values are ready there: every buffer it reads was written
/// before `target` and nothing in between touches the buffers involved. Returns whether it
/// moved.
bool hoistGather(const GatherSource &src, Operation *target) {
  tk::CollectiveOp g = src.gather;
  Operation *producer = src.producer && target->isBeforeInBlock(src.producer) ? src.producer : nullptr;
  Value in = rootBuffer(g.getInput()), out = rootBuffer(g.getOutput());
  // The buffers read before the gather (its input, or the producer's other operands) and the
  // ones written (the gather's output, the producer's input for it).
  SmallVector<Value> reads, defined{g.getInput(), g.getOutput()};
  if (producer) {
    for (Value v : producer->getOperands())
      if (rootBuffer(v) != in)
        reads.push_back(rootBuffer(v));
    defined.append(producer->operand_begin(), producer->operand_end());
  } else if (!untouchedBetween(target, g, in)) {
    return false;
  }
  Operation *stop = producer ? producer : g.getOperation();
  if (!untouchedBetween(target, g, out) ||
      (producer && (!untouchedBetween(target, producer, in) ||
                    !untouchedBetween(producer->getNextNode(), g, in))) ||
      !llvm::all_of(reads, [&](Value r) { return untouchedBetween(target, stop, r); }) ||
      !llvm::all_of(defined, [&](Value v) { return hoistDefinition(v, target, false); }))
    return false;
  for (Value v : defined)
    hoistDefinition(v, target, true);
  if (producer)
    producer->moveBefore(target);
  g->moveBefore(target);
  return true;
}

/// Parameter gathers start one gather ahead, as FSDP prefetches the next layer: each all_gather
/// (ZeRO-3's gathers of parameter shards, forward and again for the backward pass) moves up,
/// with the op that prepares its shard if there is one, to just before the first use of the
/// previous gather's output, so it runs while the previous layer computes; overlapCollectives
/// then makes it async. At most two gathered layers are alive at once. A gather moves only
/// where its input is ready and nothing in between touches its buffers.
void prefetchGathers(func::FuncOp program) {
  Block &block = program.getBody().front();
  SmallVector<GatherSource> gathers;
  for (auto c : block.getOps<tk::CollectiveOp>())
    if (c.getKind() == "all_gather")
      gathers.push_back(gatherSource(c));
  // Where each gather's output is first used, before anything moves.
  SmallVector<Operation *> firstUse;
  for (GatherSource &src : gathers)
    firstUse.push_back(firstTouchAfter(src.gather, {rootBuffer(src.gather.getOutput())}));
  for (size_t k = 1; k < gathers.size(); ++k) {
    Operation *target = firstUse[k - 1];
    if (target != block.getTerminator() && target->isBeforeInBlock(gathers[k].gather))
      hoistGather(gathers[k], target);
  }
}

/// Reductions (all_reduce, reduce_scatter) and gathers start where the program reaches them and
/// finish at a tk.wait just before the first later op that touches their buffers (or views of
/// them), so gradient reductions overlap the rest of the backward pass and prefetched parameter
/// gathers the layer before theirs.
void overlapCollectives(func::FuncOp program) {
  Block &block = program.getBody().front();
  for (auto c : llvm::to_vector(block.getOps<tk::CollectiveOp>())) {
    if (c.getKind() != "all_reduce" && c.getKind() != "reduce_scatter" && c.getKind() != "all_gather")
      continue;
    Operation *first = firstTouchAfter(c, {rootBuffer(c.getInput()), rootBuffer(c.getOutput())});
    // A wait right after its collective overlaps nothing.
    if (first == c->getNextNode())
      continue;
    c.setAsync(true);
    OpBuilder(first).create<tk::WaitOp>(c.getLoc(), c.getInput(), c.getOutput());
  }
}

struct LowerToKernelsPass : impl::LowerToKernelsBase<LowerToKernelsPass> {
  using LowerToKernelsBase::LowerToKernelsBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> graphs;
    for (auto f : module.getOps<func::FuncOp>())
      if (!tk::isKernel(f) && !tk::isProgram(f))
        graphs.push_back(f);
    if (graphs.size() != 1) {
      module.emitError("expected exactly one graph function (func.func @main) to lower, found ")
          << graphs.size();
      return signalPassFailure();
    }
    std::optional<Target> t = parseTarget(target);
    if (!t) {
      module.emitError("-tcc-lower-to-kernels: unknown target '") << target
                                                                  << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    if (failed(ProgramBuilder(module, graphs[0], *t).run()))
      return signalPassFailure();
    for (auto f : module.getOps<func::FuncOp>())
      if (tk::isProgram(f)) {
        prefetchGathers(f);
        overlapCollectives(f);
      }
  }
};

} // namespace
} // namespace tcc
