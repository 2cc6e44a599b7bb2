//===- Interpreter.cpp - Reference interpreter for the tcc dialect ----------===//
#include "tcc/Interp/Interpreter.h"
#include "Collectives.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/Interp/Kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace tcc {

DType dtypeFromType(Type t) {
  if (t.isInteger(1))
    return DType::Bool;
  if (auto i = dyn_cast<IntegerType>(t)) {
    bool u = i.isUnsigned();
    switch (i.getWidth()) {
    case 2: return u ? DType::U2 : DType::I2;
    case 4: return u ? DType::U4 : DType::I4;
    case 8: return u ? DType::U8 : DType::I8;
    case 16: return u ? DType::U16 : DType::I16;
    case 32: return u ? DType::U32 : DType::I32;
    case 64: return u ? DType::U64 : DType::I64;
    }
  }
  if (t.isF16()) return DType::F16;
  if (t.isBF16()) return DType::BF16;
  if (t.isF32()) return DType::F32;
  if (t.isF64()) return DType::F64;
  if (t.isFloat8E4M3FN()) return DType::F8E4M3FN;
  if (t.isFloat8E4M3FNUZ()) return DType::F8E4M3FNUZ;
  if (t.isFloat8E5M2()) return DType::F8E5M2;
  if (t.isFloat8E5M2FNUZ()) return DType::F8E5M2FNUZ;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  throw Error("element type " + s + " is not supported by tcc");
}

Type typeFromDType(MLIRContext *ctx, DType d) {
  auto uint = [&](unsigned w) { return IntegerType::get(ctx, w, IntegerType::Unsigned); };
  switch (d) {
  case DType::Bool: return IntegerType::get(ctx, 1);
  case DType::I8: return IntegerType::get(ctx, 8);
  case DType::I16: return IntegerType::get(ctx, 16);
  case DType::I32: return IntegerType::get(ctx, 32);
  case DType::I64: return IntegerType::get(ctx, 64);
  case DType::U8: return uint(8);
  case DType::U16: return uint(16);
  case DType::U32: return uint(32);
  case DType::U64: return uint(64);
  case DType::F16: return FloatType::getF16(ctx);
  case DType::BF16: return FloatType::getBF16(ctx);
  case DType::F32: return FloatType::getF32(ctx);
  case DType::F64: return FloatType::getF64(ctx);
  case DType::F8E4M3FN: return FloatType::getFloat8E4M3FN(ctx);
  case DType::F8E4M3FNUZ: return FloatType::getFloat8E4M3FNUZ(ctx);
  case DType::F8E5M2: return FloatType::getFloat8E5M2(ctx);
  case DType::F8E5M2FNUZ: return FloatType::getFloat8E5M2FNUZ(ctx);
  case DType::U4: return uint(4);
  case DType::I4: return IntegerType::get(ctx, 4);
  case DType::U2: return uint(2);
  case DType::I2: return IntegerType::get(ctx, 2);
  }
  throw Error("invalid dtype");
}

RankedTensorType tensorTypeOf(MLIRContext *ctx, const Tensor &t) {
  return RankedTensorType::get(t.shape(), typeFromDType(ctx, t.dtype()));
}

static Shape shapeOf(Type t) {
  auto r = cast<RankedTensorType>(t);
  return Shape(r.getShape().begin(), r.getShape().end());
}

Tensor tensorFromAttr(ElementsAttr attr) {
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    throw Error("only dense constants can be evaluated");
  auto type = cast<RankedTensorType>(dense.getType());
  DType dtype = dtypeFromType(type.getElementType());
  Tensor t(dtype, shapeOf(type));
  if (dtype == DType::Bool) {
    bool *out = t.data<bool>();
    int64_t i = 0;
    for (bool b : dense.getValues<bool>())
      out[i++] = b;
    return t;
  }
  ArrayRef<char> raw = dense.getRawData();
  size_t elemSize = dtypeSize(dtype);
  if (dense.isSplat()) {
    for (int64_t i = 0; i < t.numElements(); ++i)
      std::memcpy(static_cast<char *>(t.raw()) + i * elemSize, raw.data(), elemSize);
  } else if (t.byteSize()) {
    std::memcpy(t.raw(), raw.data(), t.byteSize());
  }
  if (isSubByteInt(dtype)) { // the attribute's byte holds the value's low bits only
    auto *p = static_cast<uint8_t *>(t.raw());
    for (int64_t i = 0; i < t.numElements(); ++i)
      p[i] = wrapSubByteInt(dtype, p[i]);
  }
  return t;
}

/// Whether every element of `t` has the bytes of the first.
static bool isSplatTensor(const Tensor &t) {
  size_t size = dtypeSize(t.dtype());
  auto *bytes = static_cast<const char *>(t.raw());
  for (int64_t i = 1; i < t.numElements(); ++i)
    if (std::memcmp(bytes, bytes + i * size, size) != 0)
      return false;
  return t.numElements() > 0;
}

DenseElementsAttr attrFromTensor(MLIRContext *ctx, const Tensor &t) {
  auto type = tensorTypeOf(ctx, t);
  if (t.numElements() > 1 && isSplatTensor(t)) {
    // A splat is stored once, whatever its size.
    Tensor first = t.reshaped({t.numElements()});
    Tensor one(t.dtype(), {}, first.raw());
    return DenseElementsAttr::get(type, attrFromTensor(ctx, one).getSplatValue<Attribute>());
  }
  if (t.dtype() == DType::Bool) {
    const bool *p = t.data<bool>();
    return DenseElementsAttr::get(type, ArrayRef<bool>(p, p + t.numElements()));
  }
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(static_cast<const char *>(t.raw()), t.byteSize()));
}

namespace {

std::vector<int64_t> vec(ArrayRef<int64_t> a) { return std::vector<int64_t>(a.begin(), a.end()); }

template <class E> auto kernelEnum(E e) { return static_cast<uint32_t>(e); }

std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }

/// Evaluates one op; `bindings` gives the size symbols' values (the sizes of results with
/// symbolic dims, tcc.sym_ints).
std::vector<Tensor> evaluate(Operation *op, const std::vector<Tensor> &in,
                             const SymbolBindings &bindings) {
  namespace k = kernels;
  auto shapeOf = [&](Type t) { return concreteShape(t, bindings); };
  return llvm::TypeSwitch<Operation *, std::vector<Tensor>>(op)
      .Case([&](ConstantOp c) { return one(tensorFromAttr(c.getValue())); })
      .Case([&](SymIntsOp o) {
        std::vector<int64_t> values;
        for (const SymExpr &e : o.getExprs())
          values.push_back(evaluateSym(e, bindings));
        return one(Tensor::fromVector<int64_t>(shapeOf(o.getType()), values));
      })
      .Case([&](UnaryOp o) {
        return one(k::unary(static_cast<k::UnaryKind>(kernelEnum(o.getKind())), in[0]));
      })
      .Case([&](BinaryOp o) {
        return one(k::binary(static_cast<k::BinaryKind>(kernelEnum(o.getKind())), in[0], in[1]));
      })
      .Case([&](CompareOp o) {
        return one(k::compare(static_cast<k::CompareKind>(kernelEnum(o.getKind())), in[0], in[1]));
      })
      .Case([&](SelectOp) { return one(k::select(in[0], in[1], in[2])); })
      .Case([&](CastOp o) {
        return one(k::cast(in[0], dtypeFromType(o.getType().getElementType())));
      })
      .Case([&](BitcastOp o) {
        return one(k::bitcast(in[0], dtypeFromType(o.getType().getElementType())));
      })
      .Case([&](ReshapeOp o) { return one(k::reshape(in[0], shapeOf(o.getType()))); })
      .Case([&](TransposeOp o) { return one(k::transpose(in[0], vec(o.getPerm()))); })
      .Case([&](BroadcastInDimOp o) {
        return one(k::broadcastInDim(in[0], shapeOf(o.getType()), vec(o.getDims())));
      })
      .Case([&](SliceOp o) {
        std::vector<int64_t> limits = vec(o.getLimit());
        for (size_t d = 0; d < limits.size(); ++d)
          if (limits[d] == -1) // a symbolic dim, taken whole
            limits[d] = in[0].dim(d);
        return one(k::slice(in[0], vec(o.getStart()), limits, vec(o.getStride())));
      })
      .Case([&](ReverseOp o) { return one(k::reverse(in[0], vec(o.getDims()))); })
      .Case([&](ConcatOp o) { return one(k::concat(in, o.getAxis())); })
      .Case([&](PadOp o) {
        return one(k::pad(in[0], in[1], vec(o.getLow()), vec(o.getHigh()),
                          static_cast<k::PadMode>(kernelEnum(o.getMode()))));
      })
      .Case([&](IotaOp o) {
        return one(k::iota(dtypeFromType(o.getType().getElementType()), shapeOf(o.getType()),
                           o.getDim()));
      })
      .Case([&](DynamicSliceOp o) {
        std::vector<int64_t> starts;
        for (size_t i = 1; i < in.size(); ++i)
          starts.push_back(in[i].getInt(0));
        return one(k::dynamicSlice(in[0], starts, vec(o.getSizes())));
      })
      .Case([&](DynamicUpdateSliceOp) {
        std::vector<int64_t> starts;
        for (size_t i = 2; i < in.size(); ++i)
          starts.push_back(in[i].getInt(0));
        return one(k::dynamicUpdateSlice(in[0], in[1], starts));
      })
      .Case([&](GatherOp o) { return one(k::gather(in[0], in[1], o.getAxis())); })
      .Case([&](GatherElementsOp o) { return one(k::gatherElements(in[0], in[1], o.getAxis())); })
      .Case([&](GatherNDOp o) { return one(k::gatherND(in[0], in[1], o.getBatchDims())); })
      .Case([&](ScatterElementsOp o) {
        return one(k::scatterElements(in[0], in[1], in[2], o.getAxis(),
                                      static_cast<k::ScatterReduction>(kernelEnum(o.getReduction()))));
      })
      .Case([&](ScatterNDOp o) {
        return one(k::scatterND(in[0], in[1], in[2],
                                static_cast<k::ScatterReduction>(kernelEnum(o.getReduction()))));
      })
      .Case([&](ReduceOp o) {
        return one(k::reduce(static_cast<k::ReduceKind>(kernelEnum(o.getKind())), in[0],
                             vec(o.getDims())));
      })
      .Case([&](ArgReduceOp o) {
        return one(k::argReduce(o.getIsMax(), in[0], o.getDim(), o.getSelectLastIndex()));
      })
      .Case([&](CumsumOp o) {
        return one(k::cumsum(in[0], o.getDim(), o.getExclusive(), o.getReverse()));
      })
      .Case([&](TopKOp o) {
        auto [values, indices] = k::topk(in[0], o.getDim(), o.getK(), o.getLargest());
        return std::vector<Tensor>{values, indices};
      })
      .Case([&](MatmulOp) { return one(k::matmul(in[0], in[1])); })
      .Case([&](AttentionOp o) {
        size_t next = 3;
        Tensor mask = o.getMask() ? in[next++] : Tensor(), bias = o.getBias() ? in[next] : Tensor();
        return one(k::attention(in[0], in[1], in[2], mask, bias, o.getScale().convertToDouble(),
                                o.getCausal(), o.getMaskedValue().convertToDouble()));
      })
      .Case([&](AttentionGradOp o) {
        size_t next = 5;
        Tensor mask = o.getMask() ? in[next++] : Tensor(), bias = o.getBias() ? in[next] : Tensor();
        return k::attentionGrad(in[0], in[1], in[2], in[3], in[4], mask, bias,
                                o.getScale().convertToDouble(), o.getCausal(),
                                o.getMaskedValue().convertToDouble());
      })
      .Case([&](ConvOp o) {
        // channels_last: the same convolution between [N, S..., C] <-> [N, C, S...] transposes.
        int64_t rank = in[0].rank();
        std::vector<int64_t> toFirst{0, rank - 1}, toLast{0};
        for (int64_t d = 1; d + 1 < rank; ++d)
          toFirst.push_back(d);
        for (int64_t d = 2; d < rank; ++d)
          toLast.push_back(d);
        toLast.push_back(1);
        bool last = o.getChannelsLast() && rank >= 3;
        Tensor y = k::conv(last ? k::transpose(in[0], toFirst) : in[0], in[1],
                           vec(o.getStrides()), vec(o.getPadLow()), vec(o.getPadHigh()),
                           vec(o.getLhsDilation()), vec(o.getRhsDilation()), o.getGroups());
        return one(last ? k::transpose(y, toLast) : y);
      })
      .Case([&](ReduceWindowOp o) {
        return one(k::reduceWindow(static_cast<k::ReduceKind>(kernelEnum(o.getKind())), in[0],
                                   vec(o.getWindow()), vec(o.getStrides()), vec(o.getPadLow()),
                                   vec(o.getPadHigh()), vec(o.getDilations())));
      })
      .Default([&](Operation *op) -> std::vector<Tensor> {
        throw Error("the interpreter cannot evaluate '" + op->getName().getStringRef().str() + "'");
      });
}


/// Evaluates the ops of `block` with `env` holding the values defined outside it; returns the
/// operands of its terminator.
class BlockEvaluator {
public:
  BlockEvaluator(CollectiveTransport *transport, const SymbolBindings &bindings,
                 const BlockEvaluator *parent = nullptr)
      : transport(transport), bindings(bindings), parent(parent) {}

  std::vector<Tensor> run(Block &block, const std::vector<Tensor> &args) {
    for (auto [arg, value] : llvm::zip(block.getArguments(), args))
      env[arg] = value;
    for (Operation &op : block) {
      if (op.hasTrait<OpTrait::IsTerminator>())
        return lookupAll(op.getOperands());
      std::vector<Tensor> results = runOp(&op);
      for (auto [result, value] : llvm::zip(op.getResults(), results))
        env[result] = std::move(value);
    }
    throw Error("block has no terminator");
  }

private:
  std::vector<Tensor> lookupAll(ValueRange values) {
    std::vector<Tensor> out;
    for (Value v : values)
      out.push_back(lookup(v));
    return out;
  }

  const Tensor &lookup(Value v) const {
    auto it = env.find(v);
    if (it != env.end())
      return it->second;
    if (!parent)
      throw Error("value used before it is defined");
    return parent->lookup(v);
  }

  std::vector<Tensor> runOp(Operation *op) {
    std::vector<Tensor> in = lookupAll(op->getOperands());
    try {
      if (auto ifOp = dyn_cast<IfOp>(op)) {
        Region &r = in[0].data<bool>()[0] ? ifOp.getThenRegion() : ifOp.getElseRegion();
        return BlockEvaluator(transport, bindings, this).run(r.front(), {});
      }
      if (auto loop = dyn_cast<LoopOp>(op))
        return runLoop(loop, in);
      if (needsTransport(op))
        return evaluateCollective(op, in, transport);
      return evaluate(op, in, bindings);
    } catch (const Error &e) {
      if (llvm::StringRef(e.what()).starts_with("in '"))
        throw; // already located (an op inside a region)
      throw Error("in " + describeOp(op) + ": " + e.what());
    }
  }

  std::vector<Tensor> runLoop(LoopOp loop, const std::vector<Tensor> &in) {
    int64_t maxTrip = in[0].getInt(0);
    bool cond = in[1].data<bool>()[0];
    size_t numCarried = loop.getInits().size();
    std::vector<Tensor> carried(in.begin() + 2, in.end());
    size_t numScans = loop.getNumResults() - numCarried;
    std::vector<std::vector<Tensor>> scans(numScans);
    Block &body = loop.getBody().front();
    for (int64_t i = 0; i < maxTrip && cond; ++i) {
      std::vector<Tensor> args{Tensor::scalar<int64_t>(i), Tensor::scalar<bool>(cond)};
      args.insert(args.end(), carried.begin(), carried.end());
      std::vector<Tensor> out = BlockEvaluator(transport, bindings, this).run(body, args);
      cond = out[0].data<bool>()[0];
      std::copy(out.begin() + 1, out.begin() + 1 + numCarried, carried.begin());
      for (size_t s = 0; s < numScans; ++s)
        scans[s].push_back(out[1 + numCarried + s]);
    }
    std::vector<Tensor> results = carried;
    for (size_t s = 0; s < numScans; ++s) {
      auto type = cast<RankedTensorType>(loop.getResult(numCarried + s).getType());
      Shape scanShape = concreteShape(type, bindings);
      if ((int64_t)scans[s].size() != scanShape[0])
        throw Error("the loop ran " + std::to_string(scans[s].size()) +
                    " iterations but its scan output was sized for " +
                    std::to_string(scanShape[0]));
      std::vector<Tensor> rows;
      for (const Tensor &t : scans[s]) {
        Shape withLead{1};
        withLead.insert(withLead.end(), t.shape().begin(), t.shape().end());
        rows.push_back(t.reshaped(withLead));
      }
      results.push_back(rows.empty() ? Tensor(dtypeFromType(type.getElementType()), scanShape)
                                     : kernels::concat(rows, 0));
    }
    return results;
  }

  CollectiveTransport *transport;
  const SymbolBindings &bindings;
  const BlockEvaluator *parent;
  llvm::DenseMap<Value, Tensor> env;
};

} // namespace

std::string describeOp(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << op->getName() << "' at " << op->getLoc();
  return s;
}

std::vector<Tensor> evaluateOp(Operation *op, const std::vector<Tensor> &operands) {
  return evaluate(op, operands, {});
}

std::vector<Tensor> runFunction(func::FuncOp func, const std::vector<Tensor> &args,
                                CollectiveTransport *transport) {
  auto argTypes = func.getArgumentTypes();
  if (args.size() != argTypes.size())
    throw Error("function '" + func.getSymName().str() + "' takes " +
                std::to_string(argTypes.size()) + " inputs, got " + std::to_string(args.size()));
  // Symbolic dims: bound to the inputs' sizes, checked against the module's symbol ranges.
  SymbolBindings bindings;
  if (llvm::any_of(argTypes, hasSymbolicDims)) {
    std::vector<Shape> shapes;
    for (const Tensor &t : args)
      shapes.push_back(t.shape());
    auto module = func->getParentOfType<ModuleOp>();
    bindings = bindSymbols(argTypes, shapes, module ? symbolRanges(module) : SymbolRanges{});
  }
  for (size_t i = 0; i < args.size(); ++i) {
    auto type = cast<RankedTensorType>(argTypes[i]);
    Shape expected = concreteShape(type, bindings);
    if (args[i].shape() != expected || args[i].dtype() != dtypeFromType(type.getElementType()))
      throw Error("input " + std::to_string(i) + " is " + args[i].typeString() + ", expected " +
                  shapeToString(expected) + "x" +
                  dtypeName(dtypeFromType(type.getElementType())));
  }
  return BlockEvaluator(transport, bindings).run(func.getBody().front(), args);
}

} // namespace tcc
