//===- TrainingOps.cpp - Losses and optimizer updates as core ops ----------===//
//
// The optimizers mirror PyTorch's single-tensor implementations (torch/optim/sgd.py, adam.py)
// op for op in the parameter's type, so that a run matches torch in float32 to rounding: each
// tensor expression below names the torch call it stands for. PyTorch does the scalar
// hyperparameter arithmetic (bias corrections, step size) in Python doubles and converts the
// result to the tensor's type where it meets a tensor; here that arithmetic is on 0-d f64
// tensors, cast to the parameter's type at the same points.
//
//===----------------------------------------------------------------------===//
#include "tcc/Training/TrainingOps.h"

#include "tcc/Interp/Interpreter.h"

#include "llvm/ADT/DenseMap.h"

#include <numeric>

using namespace mlir;

namespace tcc {

namespace {

int64_t product(ArrayRef<int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<int64_t>());
}

SmallVector<int64_t> allDims(Value x) {
  SmallVector<int64_t> dims(CoreBuilder::rankOf(x));
  std::iota(dims.begin(), dims.end(), 0);
  return dims;
}

/// A 0-d constant of `type` holding `value`.
Value scalar(CoreBuilder &b, Type type, double value) {
  return b.splat(b.tensorType({}, type), value);
}

/// 0-d f64 values computed from hyperparameters, converted to a parameter's element type as
/// PyTorch converts a Python scalar where it meets a tensor; one conversion per (value, type),
/// shared by every parameter of that type.
class ScalarCasts {
public:
  explicit ScalarCasts(CoreBuilder &b) : b(b) {}
  Value operator()(Value x, Value like) {
    Type type = CoreBuilder::elementTypeOf(like);
    Value &cast = casts[{x, type}];
    if (!cast)
      cast = b.cast(x, type);
    return cast;
  }

private:
  CoreBuilder &b;
  llvm::DenseMap<std::pair<Value, Type>, Value> casts;
};

} // namespace

RankedTensorType labelTypeFor(MLIRContext *ctx, const TrainingOptions &options,
                              RankedTensorType output) {
  if (!isa<FloatType>(output.getElementType()))
    throw Error("the loss's input (model output " + std::to_string(options.outputIndex) +
                ") is not floating-point");
  if (options.loss == LossKind::MSE)
    return RankedTensorType::get(output.getShape(), Float32Type::get(ctx));
  if (output.getRank() < 2)
    throw Error("cross-entropy needs logits of shape [N, C] or [N, C, d...]; model output " +
                std::to_string(options.outputIndex) + " has shape " +
                shapeToString(Shape(output.getShape().begin(), output.getShape().end())));
  if (options.labelType != DType::I64 && options.labelType != DType::I32)
    throw Error(std::string("cross-entropy labels must be i64 or i32, not ") +
                dtypeName(options.labelType));
  SmallVector<int64_t> shape(output.getShape().begin(), output.getShape().end());
  shape.erase(shape.begin() + 1);
  return RankedTensorType::get(shape, typeFromDType(ctx, options.labelType));
}

LossValues buildLoss(CoreBuilder &b, const TrainingOptions &options, Value output, Value labels) {
  RankedTensorType expected = labelTypeFor(b.context(), options, CoreBuilder::typeOf(output));
  if (CoreBuilder::typeOf(labels) != expected)
    throw Error("the loss expects labels of type " + std::to_string(expected.getRank()) +
                "-d " + std::string(dtypeName(dtypeFromType(expected.getElementType()))) +
                " shaped like the output less its class dim");
  // f64 models keep f64 through the loss (so their gradients are f64 throughout); others
  // compute it in f32. The results are f32 whatever the model's type.
  Type f32 = b.builder().getF32Type();
  Type compute = CoreBuilder::elementTypeOf(output).isF64() ? b.builder().getF64Type() : f32;
  Value x = b.cast(output, compute);
  LossValues result;
  if (options.loss == LossKind::MSE) {
    Value diff = b.sub(x, b.cast(labels, compute));
    result.perSample = b.mul(diff, diff);
  } else {
    // log-softmax over the class dim, shifted by the max so that exp cannot overflow (as
    // PyTorch computes it: a shift by floor(max) would skip the max's zero gradient, but rounds
    // differently enough that training drifts measurably from PyTorch's within 100 steps).
    Value shifted = b.sub(x, b.reduce(ReduceKind::Max, x, {1}, /*keepDims=*/true));
    Value logSum = b.unary(UnaryKind::Log,
                           b.reduce(ReduceKind::Sum, b.unary(UnaryKind::Exp, shifted), {1}, true));
    Value logProb = b.sub(shifted, logSum);
    // -log p[label] as a one-hot dot product (differentiable as a multiply). The class index
    // is [1, C, 1...], so that constant folding keeps it small.
    SmallVector<int64_t> classShape(CoreBuilder::rankOf(x), 1);
    classShape[1] = CoreBuilder::shapeOf(x)[1];
    Value classIndex = b.iota(classShape, b.builder().getI64Type(), 1);
    SmallVector<int64_t> withClass(CoreBuilder::shapeOf(x));
    withClass[1] = 1;
    Value label = b.reshape(b.cast(labels, b.builder().getI64Type()), withClass);
    Value oneHot = b.cast(b.compare(CompareKind::Eq, classIndex, label), compute);
    Value nll = b.unary(UnaryKind::Neg,
                        b.reduce(ReduceKind::Sum, b.mul(oneHot, logProb), {1}, false));
    result.perSample = nll;
    if (double s = options.labelSmoothing; s != 0) {
      // PyTorch: (1 - s) * nll + s * smooth, smooth = -sum_c log p_c / C.
      int64_t classes = CoreBuilder::shapeOf(x)[1];
      Value smooth = b.div(b.unary(UnaryKind::Neg, b.reduce(ReduceKind::Sum, logProb, {1}, false)),
                           scalar(b, compute, (double)classes));
      result.perSample = b.add(b.mul(nll, b.scalarLike(nll, 1 - s)), b.mul(smooth, b.scalarLike(smooth, s)));
    }
    result.prediction = b.create<ArgReduceOp>(/*is_max=*/true, x, /*dim=*/uint64_t(1),
                                              /*select_last_index=*/false);
  }
  Value perSample = result.perSample;
  result.mean = b.cast(b.div(b.reduce(ReduceKind::Sum, perSample, allDims(perSample), false),
                             b.scalarLike(perSample, (double)product(CoreBuilder::shapeOf(perSample)))),
                       f32);
  result.perSample = b.cast(perSample, f32);
  return result;
}

std::vector<std::string> optimizerStateNames(const TrainingOptions &options) {
  switch (options.optimizer) {
  case OptimizerKind::SGD:
    if (options.momentum != 0)
      return {"momentum_buffer"};
    return {};
  case OptimizerKind::Adam:
  case OptimizerKind::AdamW:
    return {"adam_m", "adam_v"};
  }
  return {};
}

SmallVector<Value> clipGradNorm(CoreBuilder &b, ArrayRef<Value> grads, double maxNorm) {
  Type f32 = b.builder().getF32Type();
  // torch: total = vector_norm(stack([vector_norm(g) for g in grads])).
  Value sumOfSquares;
  for (Value g : grads) {
    Value norm = b.cast(b.unary(UnaryKind::Sqrt, b.reduce(ReduceKind::Sum, b.mul(g, g), allDims(g),
                                                          false)),
                        f32);
    Value square = b.mul(norm, norm);
    sumOfSquares = sumOfSquares ? b.add(sumOfSquares, square) : square;
  }
  Value total = b.unary(UnaryKind::Sqrt, sumOfSquares);
  // torch: coef = clamp(max_norm / (total + 1e-6), max=1); g.mul_(coef).
  Value coef = b.div(scalar(b, f32, maxNorm), b.add(total, scalar(b, f32, 1e-6)));
  coef = b.min(coef, scalar(b, f32, 1.0));
  SmallVector<Value> clipped;
  for (Value g : grads)
    clipped.push_back(b.mul(g, b.cast(coef, CoreBuilder::elementTypeOf(g))));
  return clipped;
}

OptimizerUpdate buildOptimizerUpdate(CoreBuilder &b, const TrainingOptions &options,
                                     ArrayRef<Value> params, ArrayRef<Value> grads,
                                     ArrayRef<SmallVector<Value>> state, Value step, Value lr) {
  Type f64 = b.builder().getF64Type();
  auto c64 = [&](double v) { return scalar(b, f64, v); };
  // A hyperparameter as PyTorch passes it to a tensor op: a double converted to the tensor's type.
  auto hyper = [&](Value like, double v) { return b.scalarLike(like, v); };
  ScalarCasts toTypeOf(b);
  OptimizerUpdate out;
  out.step = b.add(step, b.scalarLike(step, 1));
  Value lr64 = b.cast(lr, f64);
  double wd = options.weightDecay;

  if (options.optimizer == OptimizerKind::SGD) {
    double momentum = options.momentum;
    Value negLr = b.unary(UnaryKind::Neg, lr64);
    for (size_t i = 0; i < params.size(); ++i) {
      Value p = params[i], g = grads[i];
      out.state.emplace_back();
      if (wd != 0)
        g = b.add(g, b.mul(hyper(p, wd), p)); // grad.add(param, alpha=wd)
      if (momentum != 0) {
        // buf.mul_(momentum).add_(grad); the zero-initialised buffer makes the first step
        // buf = grad exactly, as PyTorch's clone.
        Value buf = b.add(b.mul(state[i][0], hyper(p, momentum)), g);
        out.state.back().push_back(buf);
        g = options.nesterov ? b.add(g, b.mul(hyper(p, momentum), buf)) // grad.add(buf, alpha=m)
                             : buf;
      }
      // param.add_(grad, alpha=-lr)
      out.params.push_back(b.add(p, b.mul(toTypeOf(negLr, p), g)));
    }
    return out;
  }

  // Adam / AdamW (torch/optim/adam.py, _single_tensor_adam, not capturable).
  double beta1 = options.beta1, beta2 = options.beta2;
  bool decoupled = options.optimizer == OptimizerKind::AdamW;
  Value t = b.cast(out.step, f64);
  // bias_correction1 = 1 - beta1 ** step; step_size = lr / bias_correction1;
  // bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5 (Python doubles).
  Value correction1 = b.sub(c64(1), b.binary(BinaryKind::Pow, c64(beta1), t));
  Value correction2 = b.sub(c64(1), b.binary(BinaryKind::Pow, c64(beta2), t));
  Value stepSize = b.div(lr64, correction1);
  Value correction2Sqrt = b.unary(UnaryKind::Sqrt, correction2);
  Value negStepSize = b.unary(UnaryKind::Neg, stepSize);
  // lerp's weight 1 - beta1, as PyTorch computes it in double.
  double w = 1 - beta1;
  Value decay = b.sub(c64(1), b.mul(lr64, c64(wd))); // AdamW: 1 - lr * weight_decay
  for (size_t i = 0; i < params.size(); ++i) {
    Value p = params[i], g = grads[i], m = state[i][0], v = state[i][1];
    if (wd != 0) {
      if (decoupled) // param.mul_(1 - lr * weight_decay)
        p = b.mul(p, toTypeOf(decay, p));
      else // grad = grad.add(param, alpha=weight_decay)
        g = b.add(g, b.mul(hyper(p, wd), p));
    }
    // exp_avg.lerp_(grad, 1 - beta1): ATen's lerp takes the form that is exact at its end.
    Value diff = b.sub(g, m);
    m = std::abs(w) < 0.5 ? b.add(m, b.mul(hyper(p, w), diff))
                          : b.sub(g, b.mul(diff, hyper(p, 1 - w)));
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    v = b.mul(v, hyper(p, beta2));
    v = b.add(v, b.mul(b.mul(hyper(p, 1 - beta2), g), g));
    // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    Value denom = b.add(b.div(b.unary(UnaryKind::Sqrt, v), toTypeOf(correction2Sqrt, p)),
                        hyper(p, options.epsilon));
    // param.addcdiv_(exp_avg, denom, value=-step_size)
    p = b.add(p, b.div(b.mul(toTypeOf(negStepSize, p), m), denom));
    out.params.push_back(p);
    out.state.push_back({m, v});
  }
  return out;
}

} // namespace tcc
