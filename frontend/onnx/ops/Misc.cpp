//===- Misc.cpp - ONNX preview-training optimizer ops -> tcc ----------------===//
//
// ai.onnx.preview.training's Adagrad, Momentum and Adam: per-tensor update formulas, lowered
// to elementwise core ops. Inputs are (R, T, X_1..X_n, G_1..G_n, state_1..., ...); the step
// count T decides between the first-step and the bias-corrected forms at run time.
//
//===----------------------------------------------------------------------===//
#include "../NodeContext.h"

using namespace mlir;

namespace tcc::onnx_import {
namespace {

const char *kTrainingDomain = "ai.onnx.preview.training";

/// The number of optimized tensors: inputs are R, T and `groups` lists of n tensors each.
size_t tensorCount(NodeContext &n, size_t groups) {
  if (n.numInputs() < 2 || (n.numInputs() - 2) % groups != 0)
    n.fail("expects R, T and " + std::to_string(groups) + " equally long lists of tensors, got " +
           std::to_string(n.numInputs()) + " inputs");
  return (n.numInputs() - 2) / groups;
}

/// R and T as 0-d values of x's element type.
std::pair<Value, Value> rateAndStep(NodeContext &n, Value x) {
  Type e = CoreBuilder::elementTypeOf(x);
  return {n.b().cast(n.input(0), e), n.b().cast(n.input(1), e)};
}

Value scalar(CoreBuilder &b, Value like, double v) { return b.scalarLike(like, v); }

/// norm_coefficient * x + g.
Value regularizedGradient(NodeContext &n, Value x, Value g) {
  CoreBuilder &b = n.b();
  return b.add(b.mul(scalar(b, x, n.attrFloat("norm_coefficient", 0.0)), x), g);
}

void lowerAdagrad(NodeContext &n) {
  size_t count = tensorCount(n, 3);
  CoreBuilder &b = n.b();
  double decay = n.attrFloat("decay_factor", 0.0), epsilon = n.attrFloat("epsilon", 0.0);
  for (size_t i = 0; i < count; ++i) {
    Value x = n.input(2 + i), g = n.input(2 + count + i), h = n.input(2 + 2 * count + i);
    auto [r, t] = rateAndStep(n, x);
    Value rate = b.div(r, b.add(scalar(b, x, 1), b.mul(t, scalar(b, x, decay))));
    Value gr = regularizedGradient(n, x, g);
    Value hNew = b.add(h, b.mul(gr, gr));
    Value hSqrt = b.add(b.unary(UnaryKind::Sqrt, hNew), scalar(b, x, epsilon));
    n.setOutput(i, b.sub(x, b.div(b.mul(rate, gr), hSqrt)));
    n.setOutput(count + i, hNew);
  }
}

void lowerMomentum(NodeContext &n) {
  size_t count = tensorCount(n, 3);
  CoreBuilder &b = n.b();
  double alpha = n.attrFloat("alpha", 0.0), beta = n.attrFloat("beta", 0.0);
  std::string mode = n.attrString("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    n.fail("mode must be 'standard' or 'nesterov', got '" + mode + "'");
  for (size_t i = 0; i < count; ++i) {
    Value x = n.input(2 + i), g = n.input(2 + count + i), v = n.input(2 + 2 * count + i);
    auto [r, t] = rateAndStep(n, x);
    Value gr = regularizedGradient(n, x, g);
    // The gradient's coefficient is 1 on the first step (T == 0), beta afterwards.
    Value firstStep = b.compare(CompareKind::Le, t, scalar(b, x, 0));
    Value betaAdjusted = b.select(firstStep, scalar(b, x, 1), scalar(b, x, beta));
    Value vNew = b.add(b.mul(scalar(b, x, alpha), v), b.mul(betaAdjusted, gr));
    Value step = mode == "standard" ? vNew : b.add(gr, b.mul(scalar(b, x, alpha), vNew));
    n.setOutput(i, b.sub(x, b.mul(r, step)));
    n.setOutput(count + i, vNew);
  }
}

void lowerAdam(NodeContext &n) {
  size_t count = tensorCount(n, 4);
  CoreBuilder &b = n.b();
  double alpha = n.attrFloat("alpha", 0.9), beta = n.attrFloat("beta", 0.999);
  double epsilon = n.attrFloat("epsilon", 1e-6);
  double post = n.attrFloat("norm_coefficient_post", 0.0);
  for (size_t i = 0; i < count; ++i) {
    Value x = n.input(2 + i), g = n.input(2 + count + i);
    Value v = n.input(2 + 2 * count + i), h = n.input(2 + 3 * count + i);
    auto [r, t] = rateAndStep(n, x);
    Value gr = regularizedGradient(n, x, g);
    Value vNew = b.add(b.mul(scalar(b, x, alpha), v), b.mul(scalar(b, x, 1 - alpha), gr));
    Value hNew = b.add(b.mul(scalar(b, x, beta), h), b.mul(scalar(b, x, 1 - beta), b.mul(gr, gr)));
    Value hSqrt = b.add(b.unary(UnaryKind::Sqrt, hNew), scalar(b, x, epsilon));
    // Bias correction r * sqrt(1 - beta^T) / (1 - alpha^T) once T > 0.
    Value one = scalar(b, x, 1);
    Value corrected = b.div(
        b.mul(r, b.unary(UnaryKind::Sqrt,
                         b.sub(one, b.binary(BinaryKind::Pow, scalar(b, x, beta), t)))),
        b.sub(one, b.binary(BinaryKind::Pow, scalar(b, x, alpha), t)));
    Value rate = b.select(b.compare(CompareKind::Gt, t, scalar(b, x, 0)), corrected, r);
    Value xNew = b.sub(x, b.mul(rate, b.div(vNew, hSqrt)));
    n.setOutput(i, b.mul(scalar(b, x, 1 - post), xNew));
    n.setOutput(count + i, vNew);
    n.setOutput(2 * count + i, hNew);
  }
}

} // namespace

void registerMiscOps(OpRegistry &r) {
  r.add("Adagrad", lowerAdagrad, kTrainingDomain);
  r.add("Momentum", lowerMomentum, kTrainingDomain);
  r.add("Adam", lowerAdam, kTrainingDomain);
}

} // namespace tcc::onnx_import
