//===- TkDialect.cpp - tk dialect registration and verifiers ---------------===//
#include "tcc/IR/TkDialect.h"
#include "tcc/Support/AttentionShapes.h"
#include "tcc/Support/PoolShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

#include <cmath>

using namespace mlir;
using namespace tcc::tk;
using tcc::ReduceKind;

#include "tcc/IR/TkDialect.cpp.inc"
#include "tcc/IR/TkEnums.cpp.inc"

void TkDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tcc/IR/TkOps.cpp.inc"
      >();
}

Operation *TkDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                          Location loc) {
  auto typed = dyn_cast<TypedAttr>(value);
  if (!typed || typed.getType() != type || !isa<IntegerAttr, FloatAttr>(value))
    return nullptr;
  return builder.create<ConstantOp>(loc, typed);
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

int64_t tcc::tk::elementBytes(Type e) {
  return e.isInteger(1) ? 1 : (e.getIntOrFloatBitWidth() + 7) / 8;
}

int64_t tcc::tk::bufferBytes(MemRefType type) {
  assert(type.hasStaticShape() && "bufferBytes of a symbolic buffer: use bufferBytesExpr");
  return type.getNumElements() * elementBytes(type.getElementType());
}

/// The tensor type with a buffer's dims: the #tcc.dims memory space is the tensor encoding, so
/// the graph dialect's functions on dims serve both.
static RankedTensorType asTensorType(MemRefType type) {
  return RankedTensorType::get(type.getShape(), type.getElementType(), type.getMemorySpace());
}

bool tcc::tk::isBufferType(MemRefType type) {
  if (!type.getLayout().isIdentity())
    return false;
  if (!type.getMemorySpace())
    return type.hasStaticShape();
  return isa<DimsAttr>(type.getMemorySpace()) && hasValidDims(asTensorType(type));
}

tcc::SymShape tcc::tk::bufferDims(MemRefType type) { return symbolicShape(asTensorType(type)); }

MemRefType tcc::tk::bufferType(ArrayRef<SymExpr> dims, Type elementType) {
  return bufferType(tensorTypeWithDims(dims, elementType));
}

MemRefType tcc::tk::bufferType(RankedTensorType tensor) {
  return MemRefType::get(tensor.getShape(), tensor.getElementType(), MemRefLayoutAttrInterface{},
                         tensor.getEncoding());
}

tcc::SymExpr tcc::tk::bufferBytesExpr(MemRefType type) {
  return productOf(bufferDims(type)) * SymExpr(elementBytes(type.getElementType()));
}

int64_t tcc::tk::symbolPosition(ModuleOp module, StringRef name) {
  auto symbols = module ? module->getAttrOfType<DictionaryAttr>(TccDialect::kSymbolsAttrName) : DictionaryAttr{};
  if (!symbols)
    return -1;
  for (auto [i, entry] : llvm::enumerate(symbols.getValue()))
    if (entry.getName() == name)
      return i;
  return -1;
}

BlockArgument tcc::tk::symbolsArgument(func::FuncOp kernel) {
  for (BlockArgument arg : kernel.getArguments())
    if (kernel.getArgAttr(arg.getArgNumber(), kSymbolsArgAttr))
      return arg;
  return {};
}

//===--- Loops --------------------------------------------------------------===//

/// The body has `numIndices` index args followed by `carried` scalars; it yields `yielded`.
static LogicalResult verifyLoopBody(Operation *op, Region &region, size_t numIndices,
                                    TypeRange carried, TypeRange yielded) {
  Block &body = region.front();
  if (body.getNumArguments() != numIndices + carried.size())
    return op->emitOpError("body needs ") << numIndices << " index arguments"
                                          << (carried.empty() ? "" : " and the carried values");
  for (size_t i = 0; i < numIndices; ++i)
    if (!body.getArgument(i).getType().isIndex())
      return op->emitOpError("body argument ") << i << " must be an index";
  if (TypeRange(body.getArguments().drop_front(numIndices)) != carried)
    return op->emitOpError("carried body arguments must match the initial values' types");
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != yielded)
    return op->emitOpError("body must yield ") << yielded.size() << " value(s) of the result types";
  return success();
}

static LogicalResult verifyBounds(Operation *op, ArrayRef<int64_t> bounds,
                                  ValueRange dynamicBounds) {
  size_t dynamic = 0;
  for (int64_t b : bounds) {
    if (ShapedType::isDynamic(b))
      ++dynamic;
    else if (b < 0)
      return op->emitOpError("bounds must be non-negative");
  }
  if (dynamic != dynamicBounds.size())
    return op->emitOpError("has ") << dynamic << " dynamic bounds but "
                                   << dynamicBounds.size() << " bound values";
  return success();
}

LogicalResult ParallelOp::verify() {
  if (failed(verifyBounds(*this, getBounds(), getDynamicBounds())))
    return failure();
  return verifyLoopBody(*this, getBody(), getBounds().size(), {}, {});
}

LogicalResult ReduceOp::verify() {
  if (failed(verifyBounds(*this, getBounds(), getDynamicBounds())))
    return failure();
  if (getResult().getType().isIndex())
    return emitOpError("cannot reduce index values");
  return verifyLoopBody(*this, getBody(), getBounds().size(), {}, getResult().getType());
}

LogicalResult ArgReduceOp::verify() {
  if (getKind() != ReduceKind::Max && getKind() != ReduceKind::Min)
    return emitOpError("kind must be max or min");
  if (ShapedType::isDynamic(getBound()) != (getDynamicBound() != nullptr))
    return emitOpError("needs a bound operand exactly when its bound attribute is dynamic");
  if (getBound() < 1 && !ShapedType::isDynamic(getBound()))
    return emitOpError("bound must be at least 1");
  Block &body = getBody().front();
  if (body.getNumArguments() != 1 || !body.getArgument(0).getType().isIndex())
    return emitOpError("body needs exactly one index argument");
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != 1)
    return emitOpError("body must yield one value");
  return success();
}

LogicalResult ForOp::verify() {
  if (ShapedType::isDynamic(getCount()) != (getDynamicCount() != nullptr))
    return emitOpError("needs a count operand exactly when its count attribute is dynamic");
  if (getCount() < 0 && !ShapedType::isDynamic(getCount()))
    return emitOpError("count must be non-negative");
  if (getInits().getTypes() != getResultTypes())
    return emitOpError("results must match the initial values' types");
  return verifyLoopBody(*this, getBody(), 1, getInits().getTypes(), getResultTypes());
}

//===--- Memory and indices ---------------------------------------------------===//

static LogicalResult verifyIndices(Operation *op, MemRefType type, ValueRange indices) {
  if (static_cast<int64_t>(indices.size()) != type.getRank())
    return op->emitOpError("needs ") << type.getRank() << " indices, got " << indices.size();
  return success();
}

LogicalResult LoadOp::verify() { return verifyIndices(*this, getMemref().getType(), getIndices()); }
LogicalResult StoreOp::verify() {
  return verifyIndices(*this, getMemref().getType(), getIndices());
}

LogicalResult ApplyOp::verify() {
  AffineMap map = getMap();
  if (map.getNumResults() != 1)
    return emitOpError("map must have exactly one result");
  if (map.getNumInputs() != getOperands().size())
    return emitOpError("map takes ") << map.getNumInputs() << " operands, got "
                                     << getOperands().size();
  return success();
}

LogicalResult SizeOp::verify() {
  std::string error;
  std::optional<SymExpr> e = SymExpr::parse(getExpr(), &error);
  if (!e)
    return emitOpError("size expression '") << getExpr() << "' does not parse: " << error;
  auto module = (*this)->getParentOfType<ModuleOp>();
  for (const std::string &name : e->symbols())
    if (symbolPosition(module, name) < 0)
      return emitOpError("reads the symbol '") << name << "', which the module's "
                                               << TccDialect::kSymbolsAttrName << " does not declare";
  auto kernel = (*this)->getParentOfType<func::FuncOp>();
  if (!e->isConstant() && (!kernel || !symbolsArgument(kernel)))
    return emitOpError("needs an enclosing function with a ") << kSymbolsArgAttr << " argument";
  return success();
}

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getResult().getType())
    return emitOpError("value type must match the result type");
  if (!isa<IntegerAttr, FloatAttr>(getValue()))
    return emitOpError("value must be an integer or float attribute");
  return success();
}

//===--- Program level ----------------------------------------------------------===//

LogicalResult AllocOp::verify() {
  if (auto offset = getOffset())
    if (*offset < 0 || *offset % kBufferAlignment != 0)
      return emitOpError("offset must be a non-negative multiple of ") << kBufferAlignment;
  return success();
}

LogicalResult ViewOp::verify() {
  MemRefType source = getSource().getType(), result = getResult().getType();
  if (!source.hasStaticShape() || !result.hasStaticShape()) {
    if (getByteOffset() != 0 || bufferBytesExpr(source) != bufferBytesExpr(result))
      return emitOpError("a view of a symbolic buffer must be all of it (same bytes, offset 0)");
    return success();
  }
  int64_t available = bufferBytes(getSource().getType()) - getByteOffset();
  if (getByteOffset() < 0 || bufferBytes(getResult().getType()) > available)
    return emitOpError("view of ") << bufferBytes(getResult().getType())
                                   << " bytes at offset " << getByteOffset()
                                   << " exceeds the source buffer";
  return success();
}

Value ViewOp::getViewSource() { return getSource(); }

LogicalResult LaunchOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto fn = symbolTable.lookupNearestSymbolFrom<func::FuncOp>(*this, getCalleeAttr());
  if (!fn || !isKernel(fn))
    return emitOpError("'") << getCallee() << "' is not a tk.kernel function";
  if (TypeRange(fn.getFunctionType().getInputs()) != TypeRange(getArgs().getTypes()))
    return emitOpError("argument types do not match the kernel's");
  return success();
}

LogicalResult GemmOp::verify() {
  auto a = getA().getType(), b = getB().getType(), c = getC().getType();
  if (a.getRank() < 2 || a.getRank() != b.getRank() || a.getRank() != c.getRank())
    return emitOpError("operands must have the same rank, at least 2");
  Type e = c.getElementType();
  if (a.getElementType() != e || b.getElementType() != e ||
      !(e.isF32() || e.isF64() || e.isF16() || e.isBF16()))
    return emitOpError("operands must all be f32, f64, f16 or bf16 (one type)");
  int64_t r = a.getRank();
  int64_t m = a.getDimSize(r - (getTransA() ? 1 : 2)), k = a.getDimSize(r - (getTransA() ? 2 : 1));
  int64_t kb = b.getDimSize(r - (getTransB() ? 1 : 2)), n = b.getDimSize(r - (getTransB() ? 2 : 1));
  if (k != kb || c.getDimSize(r - 2) != m || c.getDimSize(r - 1) != n)
    return emitOpError("matrix shapes do not agree");
  for (int64_t i = 0; i < r - 2; ++i) {
    int64_t da = a.getDimSize(i), db = b.getDimSize(i), dc = c.getDimSize(i);
    if ((da != dc && da != 1) || (db != dc && db != 1))
      return emitOpError("batch dim ") << i << " does not broadcast to the result";
  }
  if (Value bias = getBias()) {
    auto t = cast<MemRefType>(bias.getType());
    if (t.getElementType() != e || t.getRank() != 1 || t.getDimSize(0) != n)
      return emitOpError("bias must be a buffer of the result's element type and shape [")
             << n << "] (one value per column), got " << t;
  }
  return success();
}

LogicalResult ConvOp::verify() {
  auto x = getInput().getType(), w = getWeight().getType(), y = getOutput().getType();
  size_t spatial = x.getRank() - 2;
  if (x.getRank() < 3 || w.getRank() != x.getRank() || y.getRank() != x.getRank())
    return emitOpError("input, weight and output must have the same rank, at least 3");
  Type e = y.getElementType();
  if (getChannelsLast()) { // the checks below on the channels-first view
    if (!e.isF32())
      return emitOpError("a channels_last convolution must be f32");
    x = MemRefType::get(tcc::channelsFirstShape(x.getShape()), x.getElementType());
    y = MemRefType::get(tcc::channelsFirstShape(y.getShape()), y.getElementType());
  }
  if (x.getElementType() != e || w.getElementType() != e || !(e.isF32() || e.isF16() || e.isBF16()))
    return emitOpError("operands must all be f32, all f16 or all bf16");
  if (getStrides().size() != spatial || getPadLow().size() != spatial ||
      getPadHigh().size() != spatial || getDilations().size() != spatial)
    return emitOpError("strides, pads and dilations need one entry per spatial dim");
  if (!getLhsDilation().empty() && getLhsDilation().size() != spatial)
    return emitOpError("lhs_dilation needs one entry per spatial dim (or none: all 1)");
  if (llvm::any_of(getLhsDilation(), [](int64_t d) { return d < 1; }) ||
      llvm::any_of(getStrides(), [](int64_t d) { return d < 1; }) ||
      llvm::any_of(getDilations(), [](int64_t d) { return d < 1; }))
    return emitOpError("strides and dilations must be >= 1");
  int64_t groups = static_cast<int64_t>(getGroups());
  if (groups < 1 || x.getDimSize(1) != w.getDimSize(1) * groups ||
      w.getDimSize(0) % groups != 0 || y.getDimSize(1) != w.getDimSize(0))
    return emitOpError("channel counts do not agree with groups");
  if (hasEpilogue() && !e.isF32())
    return emitOpError("an epilogue (bias, residual, clamp, activation) needs an f32 convolution");
  if (Value bias = getBias()) {
    auto t = cast<MemRefType>(bias.getType());
    if (t.getElementType() != e || t.getShape() != ArrayRef<int64_t>{y.getDimSize(1)})
      return emitOpError("bias must be a buffer of the output's element type and shape [")
             << y.getDimSize(1) << "] (one value per output channel)";
  }
  if (Value residual = getResidual()) {
    if (residual.getType() != getOutput().getType())
      return emitOpError("residual must have the output's type");
    if (residual == getOutput())
      return emitOpError("residual must not be the output buffer");
  }
  std::optional<double> lo = getClampMinValue(), hi = getClampMaxValue();
  if ((lo && std::isnan(*lo)) || (hi && std::isnan(*hi)) || (lo && hi && *lo > *hi))
    return emitOpError("clamp bounds must be numbers with clamp_min <= clamp_max");
  bool gate = getActivationAlphaAttr() || getActivationBetaAttr();
  if (StringAttr act = getActivationAttr()) {
    if (act.getValue() == "silu") {
      if (gate)
        return emitOpError("activation 'silu' takes no activation_alpha/activation_beta");
    } else if (act.getValue() == "hard_swish") {
      if (!getActivationAlphaAttr() || !getActivationBetaAttr() ||
          !std::isfinite(getActivationAlphaAttr().getValueAsDouble()) ||
          !std::isfinite(getActivationBetaAttr().getValueAsDouble()))
        return emitOpError("activation 'hard_swish' needs finite activation_alpha and "
                           "activation_beta");
    } else {
      return emitOpError("activation '") << act.getValue() << "': expected silu or hard_swish";
    }
  } else if (gate) {
    return emitOpError("activation_alpha/activation_beta without an activation");
  }
  return success();
}

SmallVector<int64_t> ConvOp::getLhsDilationPerDim() {
  if (!getLhsDilation().empty())
    return SmallVector<int64_t>(getLhsDilation());
  return SmallVector<int64_t>(getStrides().size(), 1);
}

LogicalResult PoolOp::verify() {
  auto x = getInput().getType(), y = getOutput().getType();
  if (!x.getElementType().isF32() || y.getElementType() != x.getElementType())
    return emitOpError("input and output must be f32");
  if (x.getRank() != 4 || y.getRank() != 4)
    return emitOpError("input and output must have rank 4");
  if (getKind() != tcc::ReduceKind::Max && getKind() != tcc::ReduceKind::Sum)
    return emitOpError("kind must be max or sum");
  ArrayRef<int64_t> window = getWindow(), strides = getStrides(), lo = getPadLow(),
                    hi = getPadHigh(), dil = getDilations();
  if (window.size() != 4 || strides.size() != 4 || lo.size() != 4 || hi.size() != 4 ||
      dil.size() != 4)
    return emitOpError("window, strides, pads and dilations need 4 entries each");
  for (int64_t d = 0; d < 4; ++d) {
    if (window[d] < 1 || strides[d] < 1 || dil[d] < 1 || lo[d] < 0 || hi[d] < 0)
      return emitOpError("windows, strides and dilations must be >= 1 and pads >= 0");
    int64_t padded = x.getDimSize(d) + lo[d] + hi[d], span = (window[d] - 1) * dil[d] + 1;
    int64_t want = padded < span ? 0 : (padded - span) / strides[d] + 1;
    if (y.getDimSize(d) != want)
      return emitOpError("output dim ") << d << " must be " << want;
  }
  if (!tcc::poolsAdjacentDims(tcc::pooledDims(window, strides, lo, hi, dil)))
    return emitOpError("it pools at most two adjacent dims");
  return success();
}

LogicalResult TopKOp::verify() {
  auto x = getInput().getType(), v = getValues().getType(), i = getIndices().getType();
  int64_t dim = static_cast<int64_t>(getDim());
  if (dim < 0 || dim >= x.getRank())
    return emitOpError("dim out of range");
  if (bufferDims(v) != bufferDims(i) || v.getElementType() != x.getElementType() ||
      !i.getElementType().isInteger(64))
    return emitOpError("values must have the input's type and indices be i64 of the same shape");
  return success();
}

/// A buffer's dims (none for a null value).
static tcc::SymShape dimsOf(Value x) {
  return x ? bufferDims(cast<MemRefType>(x.getType())) : tcc::SymShape();
}

/// tk.attention's and tk.attention_grad's shape rules and mask type (tcc/Support/
/// AttentionShapes.h); `out` gets the forward result's dims.
template <class Op> static LogicalResult verifyAttentionOperands(Op op, tcc::SymShape &out) {
  tcc::SymShape mask = dimsOf(op.getMask()), bias = dimsOf(op.getBias());
  std::string error = attentionShapeError(dimsOf(op.getQ()), dimsOf(op.getK()),
                                          dimsOf(op.getV()), op.getMask() ? &mask : nullptr,
                                          op.getBias() ? &bias : nullptr, out);
  if (!error.empty())
    return op.emitOpError(error);
  if (op.getMask() && !op.getMask().getType().getElementType().isInteger(1))
    return op.emitOpError("mask must be i1");
  return success();
}

LogicalResult AttentionGradOp::verify() {
  SymShape out;
  if (failed(verifyAttentionOperands(*this, out)))
    return failure();
  if (dimsOf(getOutput()) != out || dimsOf(getGrad()) != out)
    return emitOpError("output and grad must be [B..., Lq, Dv]");
  if (dimsOf(getGradQ()) != dimsOf(getQ()) || dimsOf(getGradK()) != dimsOf(getK()) ||
      dimsOf(getGradV()) != dimsOf(getV()))
    return emitOpError("grad_q, grad_k and grad_v must have the shapes of q, k and v");
  Type et = getQ().getType().getElementType();
  if (!et.isF32() && !et.isBF16() && !et.isF16())
    return emitOpError("q must be f32, bf16 or f16");
  for (Value x : getOperands())
    if (x != getMask() && x != getBias() && x != getWorkspace() &&
        cast<MemRefType>(x.getType()).getElementType() != et)
      return emitOpError("q, k, v, the output and every gradient must have one element type");
  if (getBias() && !getBias().getType().getElementType().isF32() &&
      getBias().getType().getElementType() != et)
    return emitOpError("the bias must be f32 or have q's element type");
  if (getWorkspace()) {
    SymShape rows = dimsOf(getQ());
    rows.back() = SymExpr(2);
    if (dimsOf(getWorkspace()) != rows || !getWorkspace().getType().getElementType().isF32())
      return emitOpError("the workspace must be f32 [B..., Lq, 2]");
  }
  return success();
}

LogicalResult AttentionOp::verify() {
  SymShape out;
  if (failed(verifyAttentionOperands(*this, out)))
    return failure();
  if (dimsOf(getOutput()) != out)
    return emitOpError("output must be [B..., Lq, Dv]");
  Type et = getQ().getType().getElementType();
  if (getK().getType().getElementType() != et || getV().getType().getElementType() != et ||
      getOutput().getType().getElementType() != et)
    return emitOpError("q, k, v and output must have one element type");
  if (getBias() && getBias().getType().getElementType() != et &&
      !getBias().getType().getElementType().isF32())
    return emitOpError("the bias must have q's element type, or be f32 (the fused kernels' "
                       "scores are f32)");
  return success();
}

LogicalResult CopyOp::verify() {
  if (bufferBytesExpr(getSource().getType()) != bufferBytesExpr(getTarget().getType()))
    return emitOpError("source and target sizes differ");
  return success();
}

/// tk.for's count and tk.arg_reduce's bound: a number, or an index value (the attribute is
/// then kDynamic).
static ParseResult parseDynamicCount(OpAsmParser &parser,
                                 std::optional<OpAsmParser::UnresolvedOperand> &dynamicCount,
                                 IntegerAttr &count) {
  OpAsmParser::UnresolvedOperand operand;
  OptionalParseResult isOperand = parser.parseOptionalOperand(operand);
  if (isOperand.has_value()) {
    if (failed(*isOperand))
      return failure();
    dynamicCount = operand;
    count = parser.getBuilder().getI64IntegerAttr(ShapedType::kDynamic);
    return success();
  }
  int64_t n;
  if (parser.parseInteger(n))
    return failure();
  count = parser.getBuilder().getI64IntegerAttr(n);
  return success();
}

static void printDynamicCount(OpAsmPrinter &printer, Operation *, Value dynamicCount,
                          IntegerAttr count) {
  if (dynamicCount)
    printer << dynamicCount;
  else
    printer << count.getInt();
}

#define GET_OP_CLASSES
#include "tcc/IR/TkOps.cpp.inc"
