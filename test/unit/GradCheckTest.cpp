//===- GradCheckTest.cpp - Autodiff VJPs vs central finite differences ---------===//
//
// Each test builds a small f64 function with CoreBuilder, takes loss = sum(R * out) with a
// seeded random R, builds the gradients with tcc::buildGradients and evaluates them with the
// interpreter, and compares them with central finite differences of the loss (also through
// the interpreter). Inputs are seeded random values kept away from the kinks and ties of
// non-smooth ops; the tie rules themselves are tested with exact expected gradients.
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "tcc/IR/Attention.h"
#include "tcc/IR/CoreBuilder.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Passes/Autodiff.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

using namespace tcc;
using tcc::test::values;
using mlir::Value;
using mlir::ValueRange;

namespace {

using Body = std::function<Value(CoreBuilder &, ValueRange)>;

/// Seeded random f64 tensors.
class Random {
public:
  explicit Random(uint64_t seed) : rng(seed) {}
  /// Uniform in [lo, hi).
  Tensor uniform(const Shape &shape, double lo = -2, double hi = 2) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(numElements(shape));
    for (double &x : v)
      x = d(rng);
    return Tensor::fromVector<double>(shape, v);
  }
  /// Magnitude in [lo, hi), random sign: away from 0.
  Tensor signedAway(const Shape &shape, double lo = 0.3, double hi = 2) {
    Tensor t = uniform(shape, lo, hi);
    std::bernoulli_distribution sign;
    for (int64_t i = 0; i < t.numElements(); ++i)
      if (sign(rng))
        t.data<double>()[i] = -t.data<double>()[i];
    return t;
  }
  /// A random permutation of evenly spaced values: distinct, at least `gap` apart (no ties
  /// for max/min/sort-like ops, even after small perturbations).
  Tensor distinct(const Shape &shape, double gap = 0.25, double offset = 0) {
    std::vector<double> v(numElements(shape));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = (double(i) - double(v.size()) / 2) * gap + offset;
    std::shuffle(v.begin(), v.end(), rng);
    return Tensor::fromVector<double>(shape, v);
  }
  std::mt19937_64 rng;
};

Tensor i64(const Shape &shape, std::vector<int64_t> values) {
  return Tensor::fromVector<int64_t>(shape, values);
}

class GradCheckTest : public ::testing::Test {
protected:
  GradCheckTest() : random(1234) { ctx.loadDialect<TccDialect, mlir::func::FuncDialect>(); }

  /// Builds @f(inputs) -> loss = sum(R * body(inputs)) and @loss (the same, for finite
  /// differences), then appends buildGradients' gradients for the float inputs to @f. With
  /// `unitWeights`, R is all ones.
  mlir::LogicalResult build(const std::vector<Tensor> &inputs, const Body &body,
                            bool unitWeights = false) {
    mlir::OpBuilder b(&ctx);
    module = mlir::ModuleOp::create(b.getUnknownLoc());
    b.setInsertionPointToEnd(module->getBody());
    llvm::SmallVector<mlir::Type> argTypes;
    for (const Tensor &t : inputs)
      argTypes.push_back(tensorTypeOf(&ctx, t));
    auto loc = mlir::NameLoc::get(b.getStringAttr("node_under_test"));
    auto func = b.create<mlir::func::FuncOp>(loc, "f", b.getFunctionType(argTypes, {}));
    mlir::Block *block = func.addEntryBlock();
    b.setInsertionPointToStart(block);
    CoreBuilder cb(b, loc);
    Value out = body(cb, block->getArguments());
    Tensor weights = unitWeights ? Tensor(DType::F64, Shape(CoreBuilder::shapeOf(out).begin(),
                                                            CoreBuilder::shapeOf(out).end()))
                                 : random.uniform(Shape(CoreBuilder::shapeOf(out).begin(),
                                                        CoreBuilder::shapeOf(out).end()),
                                                  -1, 1);
    if (unitWeights)
      for (int64_t i = 0; i < weights.numElements(); ++i)
        weights.data<double>()[i] = 1;
    Value r = cb.cast(cb.constant(attrFromTensor(&ctx, weights)), CoreBuilder::elementTypeOf(out));
    llvm::SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, CoreBuilder::rankOf(out)));
    Value loss = cb.reduce(ReduceKind::Sum, cb.mul(out, r), all, false);
    auto ret = b.create<mlir::func::ReturnOp>(loc, loss);
    func.setFunctionType(b.getFunctionType(argTypes, {loss.getType()}));

    auto lossFunc = func.clone();
    lossFunc.setName("loss");
    module->push_back(lossFunc);

    llvm::SmallVector<Value> wrt;
    for (auto [arg, t] : llvm::zip(block->getArguments(), inputs))
      if (isFloat(t.dtype()))
        wrt.push_back(arg);
    b.setInsertionPoint(ret);
    size_t opsBefore = block->getOperations().size();
    auto grads = buildGradients(b, loss, wrt);
    if (mlir::failed(grads)) {
      EXPECT_EQ(block->getOperations().size(), opsBefore) << "a failed buildGradients left ops";
      return mlir::failure();
    }
    llvm::SmallVector<Value> results{loss};
    llvm::append_range(results, *grads);
    b.create<mlir::func::ReturnOp>(loc, results);
    ret.erase();
    func.setFunctionType(b.getFunctionType(argTypes, ValueRange(results).getTypes()));
    EXPECT_TRUE(mlir::succeeded(mlir::verify(*module))) << "the gradient graph does not verify";
    return mlir::success();
  }

  mlir::func::FuncOp function(const char *name) {
    return module->lookupSymbol<mlir::func::FuncOp>(name);
  }

  /// The gradients (one per float input) buildGradients computes.
  std::vector<Tensor> gradients(const std::vector<Tensor> &inputs, const Body &body,
                                bool unitWeights = false) {
    EXPECT_TRUE(mlir::succeeded(build(inputs, body, unitWeights)));
    std::vector<Tensor> out = runFunction(function("f"), inputs);
    return std::vector<Tensor>(out.begin() + 1, out.end());
  }

  /// Checks every gradient element against a central difference of the loss with step
  /// h * max(1, |x|): |analytic - numeric| <= tol * (1 + |numeric|).
  void check(const std::vector<Tensor> &inputs, const Body &body, double tol = 1e-6,
             double h = 1e-5) {
    std::vector<Tensor> grads = gradients(inputs, body);
    if (::testing::Test::HasFailure())
      return;
    mlir::func::FuncOp lossFunc = function("loss");
    size_t k = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!isFloat(inputs[i].dtype()))
        continue;
      const Tensor &grad = grads[k++];
      ASSERT_EQ(grad.shape(), inputs[i].shape());
      for (int64_t j = 0; j < inputs[i].numElements(); ++j) {
        std::vector<Tensor> args = inputs;
        args[i] = inputs[i].clone();
        double x = inputs[i].getDouble(j), step = h * std::max(1.0, std::abs(x));
        args[i].data<double>()[j] = x + step;
        double plus = runFunction(lossFunc, args)[0].getDouble(0);
        args[i].data<double>()[j] = x - step;
        double minus = runFunction(lossFunc, args)[0].getDouble(0);
        double numeric = (plus - minus) / (2 * step), analytic = grad.getDouble(j);
        ASSERT_NEAR(analytic, numeric, tol * (1 + std::abs(numeric)))
            << "d loss / d input " << i << " element " << j;
      }
    }
  }

  /// The diagnostics buildGradients emits for `body`, which must fail.
  std::string errorOf(const std::vector<Tensor> &inputs, const Body &body) {
    std::string text;
    mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
      llvm::raw_string_ostream os(text);
      os << d.getLocation() << ": " << d.str() << "\n";
      return mlir::success();
    });
    EXPECT_TRUE(mlir::failed(build(inputs, body)));
    return text;
  }

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  Random random;
};

//===--- elementwise -----------------------------------------------------------===//

TEST_F(GradCheckTest, Unary) {
  struct Case {
    UnaryKind kind;
    double lo, hi;
    bool signedAway;
  };
  const Case cases[] = {
      {UnaryKind::Neg, -2, 2, false},       {UnaryKind::Abs, 0.2, 2, true},
      {UnaryKind::Exp, -2, 2, false},       {UnaryKind::Log, 0.3, 3, false},
      {UnaryKind::Sqrt, 0.3, 3, false},     {UnaryKind::Rsqrt, 0.3, 3, false},
      {UnaryKind::Reciprocal, 0.3, 2, true}, {UnaryKind::Sin, -3, 3, false},
      {UnaryKind::Cos, -3, 3, false},       {UnaryKind::Tan, -1.2, 1.2, false},
      {UnaryKind::Asin, -0.8, 0.8, false},  {UnaryKind::Acos, -0.8, 0.8, false},
      {UnaryKind::Atan, -3, 3, false},      {UnaryKind::Sinh, -2, 2, false},
      {UnaryKind::Cosh, -2, 2, false},      {UnaryKind::Tanh, -2, 2, false},
      {UnaryKind::Asinh, -3, 3, false},     {UnaryKind::Acosh, 1.2, 3, false},
      {UnaryKind::Atanh, -0.8, 0.8, false}, {UnaryKind::Erf, -2, 2, false},
      {UnaryKind::Sigmoid, -4, 4, false},   {UnaryKind::Floor, -3, 3, false},
      {UnaryKind::Ceil, -3, 3, false},      {UnaryKind::Round, -3, 3, false},
      {UnaryKind::Sign, 0.2, 2, true},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(stringifyUnaryKind(c.kind).str());
    Tensor x = c.signedAway ? random.signedAway({2, 3}, c.lo, c.hi) : random.uniform({2, 3}, c.lo, c.hi);
    check({x}, [&](CoreBuilder &b, ValueRange a) { return b.unary(c.kind, a[0]); });
  }
}

TEST_F(GradCheckTest, Binary) {
  struct Case {
    BinaryKind kind;
    Tensor x, y;
  };
  std::vector<Case> cases = {
      {BinaryKind::Add, random.uniform({2, 3}), random.uniform({2, 3})},
      {BinaryKind::Sub, random.uniform({2, 3}), random.uniform({2, 3})},
      {BinaryKind::Mul, random.uniform({2, 3}), random.uniform({2, 3})},
      {BinaryKind::Div, random.uniform({2, 3}), random.signedAway({2, 3}, 0.5, 2)},
      // |x| < 3 < |y|: the quotient's integer part is 0, far from fmod's jumps.
      {BinaryKind::Rem, random.signedAway({2, 3}, 0.1, 3), random.uniform({2, 3}, 4, 5)},
      {BinaryKind::Pow, random.uniform({2, 3}, 0.4, 2.5), random.uniform({2, 3}, -2, 2)},
      // Multiples of 0.25 vs multiples of 0.3 plus 0.01: never equal (25k - 30m != 1).
      {BinaryKind::Max, random.distinct({2, 3}), random.distinct({2, 3}, 0.3, 0.01)},
      {BinaryKind::Min, random.distinct({2, 3}), random.distinct({2, 3}, 0.3, 0.01)},
  };
  // Rem with non-zero integer quotients, away from the jumps.
  cases.push_back({BinaryKind::Rem, Tensor::fromVector<double>({3}, {7.3, -5.2, 9.9}),
                   Tensor::fromVector<double>({3}, {2.1, 1.5, -4.2})});
  for (const Case &c : cases) {
    SCOPED_TRACE(stringifyBinaryKind(c.kind).str());
    check({c.x, c.y}, [&](CoreBuilder &b, ValueRange a) { return b.binary(c.kind, a[0], a[1]); });
  }
}

TEST_F(GradCheckTest, SameValueInBothOperandsAccumulates) {
  check({random.uniform({5})}, [](CoreBuilder &b, ValueRange a) {
    Value sq = b.mul(a[0], a[0]);
    return b.add(sq, b.mul(b.unary(UnaryKind::Sin, a[0]), a[0]));
  });
}

TEST_F(GradCheckTest, PowAtZeroBaseFollowsPyTorch) {
  // d/dy 0^y is taken as 0 for y >= 0 (not 0 * log 0 = NaN); d/dx x^0 is 0.
  auto grads = gradients({Tensor::fromVector<double>({2}, {0.0, 2.0}),
                          Tensor::fromVector<double>({2}, {2.0, 0.0})},
                         [](CoreBuilder &b, ValueRange a) {
                           return b.binary(BinaryKind::Pow, a[0], a[1]);
                         },
                         /*unitWeights=*/true);
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_EQ(values(grads[0]), (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(values(grads[1]), (std::vector<double>{0.0, std::log(2.0)}));
}

TEST_F(GradCheckTest, MaxMinTiesSplitEqually) {
  Tensor x = Tensor::fromVector<double>({3}, {1, 2, 3}), y = Tensor::fromVector<double>({3}, {1, 0, 5});
  auto mx = gradients({x, y}, [](CoreBuilder &b, ValueRange a) { return b.max(a[0], a[1]); }, true);
  EXPECT_EQ(values(mx[0]), (std::vector<double>{0.5, 1, 0}));
  EXPECT_EQ(values(mx[1]), (std::vector<double>{0.5, 0, 1}));
  auto mn = gradients({x, y}, [](CoreBuilder &b, ValueRange a) { return b.min(a[0], a[1]); }, true);
  EXPECT_EQ(values(mn[0]), (std::vector<double>{0.5, 0, 1}));
  EXPECT_EQ(values(mn[1]), (std::vector<double>{0.5, 1, 0}));
}

TEST_F(GradCheckTest, SelectAndCompare) {
  check({random.uniform({2, 4}), random.uniform({2, 4})}, [](CoreBuilder &b, ValueRange a) {
    // The condition depends on the inputs but carries no gradient.
    Value cond = b.compare(CompareKind::Gt, a[0], a[1]);
    return b.select(cond, b.mul(a[0], a[1]), b.unary(UnaryKind::Exp, a[1]));
  });
}

TEST_F(GradCheckTest, CastBetweenFloatTypes) {
  // Through f32 the finite differences need a larger step; the function is linear.
  check({random.uniform({6})},
        [](CoreBuilder &b, ValueRange a) {
          Value narrow = b.cast(a[0], b.builder().getF32Type());
          Value y = b.mul(narrow, b.scalarLike(narrow, 3.0));
          return b.cast(y, b.builder().getF64Type());
        },
        /*tol=*/1e-4, /*h=*/1e-2);
}

TEST_F(GradCheckTest, CastToIntegerHasNoGradient) {
  auto grads = gradients({random.uniform({4}, 0.2, 3)}, [](CoreBuilder &b, ValueRange a) {
    Value i = b.cast(a[0], b.builder().getI64Type());
    return b.cast(i, b.builder().getF64Type());
  });
  EXPECT_EQ(values(grads[0]), (std::vector<double>(4, 0.0)));
}

//===--- layout --------------------------------------------------------------===//

TEST_F(GradCheckTest, ReshapeTransposeBroadcast) {
  check({random.uniform({2, 3, 4}), random.uniform({3, 1})}, [](CoreBuilder &b, ValueRange a) {
    Value t = b.transpose(a[0], {2, 0, 1});                  // 4x2x3
    Value r = b.reshape(t, {8, 3});
    // 3x1 -> 8x3x5: a new leading dim, the size-1 dim expanded, and a new trailing dim.
    Value bc = b.createTyped<BroadcastInDimOp>(b.tensorType({8, 3, 5}, b.builder().getF64Type()),
                                               a[1], llvm::SmallVector<int64_t>{1, 2});
    return b.mul(b.broadcastTo(b.reshape(r, {8, 3, 1}), {8, 3, 5}), bc);
  });
}

TEST_F(GradCheckTest, StridedSliceReverseConcat) {
  check({random.uniform({7, 8}), random.uniform({3, 2})}, [](CoreBuilder &b, ValueRange a) {
    Value s = b.create<SliceOp>(a[0], llvm::ArrayRef<int64_t>{1, 0},
                                llvm::ArrayRef<int64_t>{7, 7}, llvm::ArrayRef<int64_t>{2, 3});
    Value r = b.createTyped<ReverseOp>(s.getType(), s, llvm::SmallVector<int64_t>{0, 1}); // 3x3
    Value x = b.sliceDim(a[0], 0, 4, 7);                                                   // 3x8
    return b.concat({r, a[1], x, a[1]}, 1);
  });
}

TEST_F(GradCheckTest, PadConstantWithActiveValue) {
  check({random.uniform({3, 4}), random.uniform({})}, [](CoreBuilder &b, ValueRange a) {
    Value p = b.create<PadOp>(a[0], a[1], llvm::ArrayRef<int64_t>{1, 0},
                              llvm::ArrayRef<int64_t>{2, 3}, PadMode::Constant);
    return b.mul(p, p);
  });
}

TEST_F(GradCheckTest, PadReflectEdgeWrap) {
  struct Case {
    PadMode mode;
    llvm::SmallVector<int64_t> low, high;
  };
  const Case cases[] = {
      {PadMode::Reflect, {2, 1}, {1, 3}},
      {PadMode::Edge, {3, 0}, {2, 4}},
      // Wrap padding longer than the dim wraps around several times.
      {PadMode::Wrap, {4, 1}, {7, 2}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(stringifyPadMode(c.mode).str());
    check({random.uniform({3, 4})}, [&](CoreBuilder &b, ValueRange a) {
      return b.create<PadOp>(a[0], b.scalarLike(a[0], 0), c.low, c.high, c.mode);
    });
  }
}

TEST_F(GradCheckTest, DynamicSliceAndUpdateClampLikeTheForward) {
  // Start (1, 9) is clamped to (1, 2) for a 2x3 window of a 4x5 tensor.
  for (int64_t col : {1, 9}) {
    SCOPED_TRACE(col);
    check({random.uniform({4, 5}), random.uniform({2, 3})}, [&](CoreBuilder &b, ValueRange a) {
      llvm::SmallVector<Value> starts{b.constantI64({1}, {}), b.constantI64({col}, {})};
      Value s = b.create<DynamicSliceOp>(a[0], starts, llvm::ArrayRef<int64_t>{2, 3});
      Value u = b.create<DynamicUpdateSliceOp>(a[0], b.mul(s, a[1]), starts);
      return b.mul(u, a[0]);
    });
  }
}

//===--- indexing -------------------------------------------------------------===//

TEST_F(GradCheckTest, GatherWithRepeatedIndices) {
  for (int64_t axis : {0, 1, 2}) {
    SCOPED_TRACE(axis);
    check({random.uniform({3, 4, 3}), i64({2, 2}, {2, 0, 2, 1})},
          [&](CoreBuilder &b, ValueRange a) { return b.create<GatherOp>(a[0], a[1], axis); });
  }
}

TEST_F(GradCheckTest, GatherElements) {
  check({random.uniform({3, 4}), i64({2, 4}, {0, 2, 2, 1, 0, 0, 1, 2})},
        [](CoreBuilder &b, ValueRange a) { return b.create<GatherElementsOp>(a[0], a[1], 0); });
}

TEST_F(GradCheckTest, GatherND) {
  check({random.uniform({3, 4, 2}), i64({3, 2}, {0, 1, 2, 3, 0, 1})},
        [](CoreBuilder &b, ValueRange a) { return b.create<GatherNDOp>(a[0], a[1], 0); });
  // Two batch dims; tuples of one index into the third dim.
  check({random.uniform({2, 3, 4, 2}), i64({2, 3, 2, 1}, {0, 3, 1, 1, 2, 0, 3, 3, 0, 1, 2, 2})},
        [](CoreBuilder &b, ValueRange a) { return b.create<GatherNDOp>(a[0], a[1], 2); });
}

TEST_F(GradCheckTest, ScatterElementsNoneAndAdd) {
  // Duplicate targets: with None the last write wins (and only it gets a gradient).
  Tensor idx = i64({2, 3}, {1, 0, 2, 1, 2, 2});
  for (ScatterReduction r : {ScatterReduction::None, ScatterReduction::Add}) {
    SCOPED_TRACE(stringifyScatterReduction(r).str());
    check({random.uniform({3, 3}), idx, random.uniform({2, 3})}, [&](CoreBuilder &b, ValueRange a) {
      Value s = b.create<ScatterElementsOp>(a[0], a[1], a[2], 0, r);
      return b.mul(s, b.unary(UnaryKind::Exp, s));
    });
  }
}

TEST_F(GradCheckTest, ScatterNDNoneAndAdd) {
  Tensor idx = i64({3, 1}, {2, 0, 2});
  for (ScatterReduction r : {ScatterReduction::None, ScatterReduction::Add}) {
    SCOPED_TRACE(stringifyScatterReduction(r).str());
    check({random.uniform({4, 3}), idx, random.uniform({3, 3})}, [&](CoreBuilder &b, ValueRange a) {
      Value s = b.create<ScatterNDOp>(a[0], a[1], a[2], r);
      return b.mul(s, s);
    });
  }
  // Empty tuples: every update replaces (or adds to) all of x; with None the last one wins.
  for (ScatterReduction r : {ScatterReduction::None, ScatterReduction::Add}) {
    SCOPED_TRACE(stringifyScatterReduction(r).str() + " with empty tuples");
    check({random.uniform({3}), i64({2, 0}, {}), random.uniform({2, 3})},
          [&](CoreBuilder &b, ValueRange a) {
            Value s = b.create<ScatterNDOp>(a[0], a[1], a[2], r);
            return b.mul(s, s);
          });
  }
  // Full-depth tuples (element updates) with a duplicate.
  check({random.uniform({3, 3}), i64({3, 2}, {0, 1, 2, 2, 0, 1}), random.uniform({3})},
        [&](CoreBuilder &b, ValueRange a) {
          return b.create<ScatterNDOp>(a[0], a[1], a[2], ScatterReduction::None);
        });
}

//===--- reductions and scans -----------------------------------------------===//

TEST_F(GradCheckTest, ReduceSumMaxMin) {
  for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min}) {
    SCOPED_TRACE(stringifyReduceKind(kind).str());
    check({random.distinct({3, 4, 2})}, [&](CoreBuilder &b, ValueRange a) {
      return b.create<ReduceOp>(kind, a[0], llvm::ArrayRef<int64_t>{0, 2});
    });
  }
}

TEST_F(GradCheckTest, ReduceProdIncludingZeros) {
  check({random.signedAway({3, 4}, 0.5, 1.5)}, [](CoreBuilder &b, ValueRange a) {
    return b.create<ReduceOp>(ReduceKind::Prod, a[0], llvm::ArrayRef<int64_t>{1});
  });
  // Rows with no zero, one zero and two zeros: the product is a polynomial, so finite
  // differences are exact there too.
  check({Tensor::fromVector<double>({3, 3}, {1.5, -2, 0.5, 0, 3, -1.25, 0, 2, 0})},
        [](CoreBuilder &b, ValueRange a) {
          return b.create<ReduceOp>(ReduceKind::Prod, a[0], llvm::ArrayRef<int64_t>{1});
        });
}

TEST_F(GradCheckTest, ReduceMaxTiesShareEqually) {
  auto grads = gradients({Tensor::fromVector<double>({4}, {2, 5, 5, 1})},
                         [](CoreBuilder &b, ValueRange a) {
                           return b.create<ReduceOp>(ReduceKind::Max, a[0],
                                                     llvm::ArrayRef<int64_t>{0});
                         },
                         true);
  EXPECT_EQ(values(grads[0]), (std::vector<double>{0, 0.5, 0.5, 0}));
}

TEST_F(GradCheckTest, Cumsum) {
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(std::to_string(exclusive) + std::to_string(reverse));
      check({random.uniform({3, 4})}, [&](CoreBuilder &b, ValueRange a) {
        Value c = b.createTyped<CumsumOp>(a[0].getType(), a[0], (uint64_t)1, exclusive, reverse);
        return b.mul(c, c);
      });
    }
}

TEST_F(GradCheckTest, TopKValues) {
  for (bool largest : {true, false}) {
    SCOPED_TRACE(largest);
    check({random.distinct({3, 5})}, [&](CoreBuilder &b, ValueRange a) {
      return b.topk(a[0], 1, 2, largest).first;
    });
  }
}

//===--- linear algebra and windows ------------------------------------------===//

TEST_F(GradCheckTest, BatchedMatmul) {
  check({random.uniform({2, 3, 4}), random.uniform({2, 4, 5})},
        [](CoreBuilder &b, ValueRange a) { return b.create<MatmulOp>(a[0], a[1]); });
}

/// Bools for an attention mask: a quarter false, never a whole row of scores.
Tensor keepMask(Random &random, const Shape &shape) {
  Tensor t(DType::Bool, shape);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<bool>()[i] = random.rng() % 4 != 0 || i % shape.back() == 0;
  return t;
}

Value attention(CoreBuilder &b, ValueRange a, double scale, bool causal, bool withMask,
                bool withBias, double maskedValue) {
  mlir::OpBuilder &ob = b.builder();
  size_t next = 3;
  Value mask = withMask ? a[next++] : Value(), bias = withBias ? a[next] : Value();
  return b.create<AttentionOp>(a[0], a[1], a[2], mask, bias, ob.getF64FloatAttr(scale),
                               causal ? ob.getUnitAttr() : mlir::UnitAttr(),
                               ob.getF64FloatAttr(maskedValue));
}

TEST_F(GradCheckTest, AttentionWithGroupsCausalMaskAndBias) {
  double inf = std::numeric_limits<double>::infinity();
  // Grouped-query (4 query heads over 2 key/value heads), causal, a boolean mask filled with
  // a finite value, a bias broadcast over heads; then plain attention with more keys.
  check({random.uniform({2, 4, 5, 3}), random.uniform({2, 2, 6, 3}), random.uniform({2, 2, 6, 2}),
         keepMask(random, {2, 1, 5, 6}), random.uniform({2, 1, 5, 6})},
        [&](CoreBuilder &b, ValueRange a) { return attention(b, a, 0.7, true, true, true, -5.0); });
  check({random.uniform({3, 4, 3}), random.uniform({3, 7, 3}), random.uniform({3, 7, 5})},
        [&](CoreBuilder &b, ValueRange a) { return attention(b, a, 0.5, false, false, false, -inf); });
}

TEST_F(GradCheckTest, AttentionDecompositionEqualsTheOp) {
  std::vector<Tensor> inputs = {random.uniform({2, 6, 4, 3}), random.uniform({2, 3, 5, 3}),
                                random.uniform({2, 3, 5, 4}), keepMask(random, {1, 1, 4, 5}),
                                random.uniform({2, 6, 1, 5})};
  ASSERT_TRUE(mlir::succeeded(build(inputs, [&](CoreBuilder &b, ValueRange a) {
    Value op = attention(b, a, 0.3, true, true, true, -std::numeric_limits<double>::infinity());
    AttentionCore core = buildAttentionCore(b, mlir::cast<AttentionOp>(op.getDefiningOp()));
    // out - decomposition: zero when they agree.
    return b.sub(op, core.result);
  })));
  Tensor loss = runFunction(function("loss"), inputs)[0];
  EXPECT_NEAR(loss.getDouble(0), 0.0, 1e-12);
}

TEST_F(GradCheckTest, AttentionGradEqualsItsDecomposition) {
  // tcc.attention_grad (the interpreter's direct definition) against the core-op gradient
  // (-tcc-decompose-attention's), each of dq, dk, dv: grouped-query heads, causal, a mask with
  // a finite fill, a bias that is not differentiated.
  std::vector<Tensor> inputs = {random.uniform({2, 6, 4, 3}), random.uniform({2, 3, 5, 3}),
                                random.uniform({2, 3, 5, 4}), keepMask(random, {1, 1, 4, 5}),
                                random.uniform({2, 6, 1, 5}), random.uniform({2, 6, 4, 4})};
  for (unsigned which = 0; which < 3; ++which) {
    SCOPED_TRACE("gradient " + std::to_string(which));
    ASSERT_TRUE(mlir::succeeded(build(inputs, [&](CoreBuilder &b, ValueRange a) {
      mlir::OpBuilder &ob = b.builder();
      Value out = attention(b, a, 0.3, true, true, true, -4.0);
      auto forward = mlir::cast<AttentionOp>(out.getDefiningOp());
      auto none = mlir::NoneType::get(ob.getContext());
      mlir::Operation *grad = b.inferResultTypes(ob.create<AttentionGradOp>(
          b.location(), mlir::TypeRange{none, none, none}, a[0], a[1], a[2], out, a[5], a[3],
          a[4], forward.getScaleAttr(), forward.getCausalAttr(), forward.getMaskedValueAttr()));
      AttentionGrads core = buildAttentionGradCore(b, attentionOperands(forward), a[5], true,
                                                   true, true, false);
      Value want[] = {core.q, core.k, core.v};
      Value diff = b.sub(grad->getResult(which), want[which]);
      return b.mul(diff, diff); // the loss: the sum of squared differences
    })));
    Tensor loss = runFunction(function("loss"), inputs)[0];
    EXPECT_NEAR(loss.getDouble(0), 0.0, 1e-20);
  }
}

TEST_F(GradCheckTest, AttentionGradSecondOrder) {
  // Differentiating the gradient (as its decomposition) matches finite differences.
  for (unsigned which = 0; which < 3; ++which) {
    SCOPED_TRACE("gradient " + std::to_string(which));
    check({random.uniform({2, 4, 5, 3}), random.uniform({2, 2, 6, 3}),
           random.uniform({2, 2, 6, 2}), random.uniform({2, 4, 5, 2})},
          [&](CoreBuilder &b, ValueRange a) {
            mlir::OpBuilder &ob = b.builder();
            Value out = attention(b, a, 0.6, true, false, false, -4.0);
            auto forward = mlir::cast<AttentionOp>(out.getDefiningOp());
            auto none = mlir::NoneType::get(ob.getContext());
            mlir::Operation *grad = b.inferResultTypes(ob.create<AttentionGradOp>(
                b.location(), mlir::TypeRange{none, none, none}, a[0], a[1], a[2], out, a[3],
                Value(), Value(), forward.getScaleAttr(), forward.getCausalAttr(),
                forward.getMaskedValueAttr()));
            return grad->getResult(which);
          });
  }
}

struct ConvCase {
  const char *name;
  Shape input, weight;
  std::vector<int64_t> strides, padLow, padHigh, lhsDilation, rhsDilation;
  int64_t groups;
};

TEST_F(GradCheckTest, Conv) {
  const ConvCase cases[] = {
      {"plain 2-d", {2, 3, 5, 4}, {4, 3, 3, 2}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 1},
      {"strides with unread tail", {1, 2, 7, 6}, {3, 2, 2, 3}, {2, 3}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 1},
      {"padding", {1, 2, 4, 5}, {2, 2, 3, 3}, {1, 2}, {1, 2}, {2, 1}, {1, 1}, {1, 1}, 1},
      {"negative padding", {1, 2, 6, 6}, {2, 2, 2, 2}, {1, 1}, {-1, 1}, {2, -2}, {1, 1}, {1, 1}, 1},
      {"rhs dilation", {1, 2, 7, 6}, {2, 2, 2, 3}, {1, 2}, {1, 0}, {0, 1}, {1, 1}, {2, 2}, 1},
      {"lhs dilation (transposed)", {1, 2, 3, 4}, {2, 2, 3, 2}, {1, 1}, {2, 1}, {2, 1}, {2, 3}, {1, 1}, 1},
      {"groups", {2, 4, 5, 4}, {6, 2, 2, 3}, {2, 1}, {1, 0}, {0, 1}, {1, 1}, {1, 2}, 2},
      {"depthwise 1-d, everything", {2, 3, 9}, {6, 1, 3}, {2}, {2}, {-1}, {2}, {2}, 3},
      {"3-d", {1, 2, 3, 4, 3}, {2, 1, 2, 2, 2}, {1, 2, 1}, {0, 1, 1}, {1, 0, 0}, {1, 1, 1}, {1, 1, 2}, 2},
  };
  for (const ConvCase &c : cases) {
    SCOPED_TRACE(c.name);
    check({random.uniform(c.input), random.uniform(c.weight)}, [&](CoreBuilder &b, ValueRange a) {
      return b.create<ConvOp>(a[0], a[1], c.strides, c.padLow, c.padHigh, c.lhsDilation,
                              c.rhsDilation, c.groups);
    });
  }
}

struct WindowCase {
  const char *name;
  Shape input;
  std::vector<int64_t> window, strides, padLow, padHigh, dilations;
};

TEST_F(GradCheckTest, ReduceWindow) {
  const WindowCase cases[] = {
      {"pool 2x2", {1, 2, 4, 4}, {1, 1, 2, 2}, {1, 1, 2, 2}, {0, 0, 0, 0}, {0, 0, 0, 0}, {1, 1, 1, 1}},
      {"global", {2, 2, 3, 4}, {1, 1, 3, 4}, {1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}, {1, 1, 1, 1}},
      {"tiled, padded, unread tail", {2, 1, 5, 7}, {1, 1, 2, 3}, {1, 1, 2, 3}, {0, 0, 1, 0}, {0, 0, 0, 1}, {1, 1, 1, 1}},
      {"overlapping, padded", {1, 1, 5, 4}, {1, 1, 3, 2}, {1, 1, 2, 1}, {0, 0, 1, 1}, {0, 0, 1, 0}, {1, 1, 1, 1}},
      {"dilated", {2, 7, 6}, {1, 2, 2}, {1, 2, 1}, {0, 1, 0}, {0, 0, 1}, {1, 2, 3}},
  };
  for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min, ReduceKind::Prod})
    for (const WindowCase &c : cases) {
      SCOPED_TRACE(stringifyReduceKind(kind).str() + " " + c.name);
      Tensor x = kind == ReduceKind::Prod ? random.signedAway(c.input, 0.5, 1.5) : random.distinct(c.input);
      check({x}, [&](CoreBuilder &b, ValueRange a) {
        return b.create<ReduceWindowOp>(kind, a[0], c.window, c.strides, c.padLow, c.padHigh,
                                        c.dilations);
      });
    }
}

TEST_F(GradCheckTest, MaxPoolSendsTheGradientToTheFirstMaximum) {
  // Windows of 2 with stride 1 over [1, 3, 3, 2]: (1,3) -> index 1, (3,3) -> index 1 (the
  // first), (3,2) -> index 2. Padding (-inf) never wins against a real element.
  auto grads = gradients({Tensor::fromVector<double>({4}, {1, 3, 3, 2})},
                         [](CoreBuilder &b, ValueRange a) {
                           return b.create<ReduceWindowOp>(
                               ReduceKind::Max, a[0], llvm::ArrayRef<int64_t>{2},
                               llvm::ArrayRef<int64_t>{1}, llvm::ArrayRef<int64_t>{1},
                               llvm::ArrayRef<int64_t>{0}, llvm::ArrayRef<int64_t>{1});
                         },
                         true);
  // Windows: (pad,1) (1,3) (3,3) (3,2).
  EXPECT_EQ(values(grads[0]), (std::vector<double>{1, 2, 1, 0}));
  // Tiling windows (stride = window) take another path: 2x2 windows of [[3, 3], [3, 1]] and
  // [[2, 5], [5, 5]].
  grads = gradients({Tensor::fromVector<double>({2, 4}, {3, 3, 2, 5, 3, 1, 5, 5})},
                    [](CoreBuilder &b, ValueRange a) {
                      return b.create<ReduceWindowOp>(
                          ReduceKind::Max, a[0], llvm::ArrayRef<int64_t>{2, 2},
                          llvm::ArrayRef<int64_t>{2, 2}, llvm::ArrayRef<int64_t>{0, 0},
                          llvm::ArrayRef<int64_t>{0, 0}, llvm::ArrayRef<int64_t>{1, 1});
                    },
                    true);
  EXPECT_EQ(values(grads[0]), (std::vector<double>{1, 0, 0, 1, 0, 0, 0, 0}));
}

TEST_F(GradCheckTest, ReduceWindowProdWithZeros) {
  check({Tensor::fromVector<double>({6}, {1.5, 0, -2, 0, 0, 0.75})}, [](CoreBuilder &b, ValueRange a) {
    return b.create<ReduceWindowOp>(ReduceKind::Prod, a[0], llvm::ArrayRef<int64_t>{3},
                                    llvm::ArrayRef<int64_t>{1}, llvm::ArrayRef<int64_t>{1},
                                    llvm::ArrayRef<int64_t>{1}, llvm::ArrayRef<int64_t>{1});
  });
}

//===--- whole models and the driver ---------------------------------------------===//

TEST_F(GradCheckTest, MlpWithSoftmaxCrossEntropy) {
  // What the importer emits for Gemm + Relu + Gemm + LogSoftmax, with a one-hot target.
  Tensor target = Tensor::fromVector<double>({4, 3}, {1, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0});
  check({random.uniform({4, 5}), random.uniform({5, 6}, -1, 1), random.uniform({6}, -1, 1),
         random.uniform({6, 3}, -1, 1), target},
        [](CoreBuilder &b, ValueRange a) {
          Value h = b.add(b.matmul(a[0], a[1]), a[2]);
          h = b.max(h, b.scalarLike(h, 0));
          Value logits = b.matmul(h, a[3]);
          Value m = b.reduce(ReduceKind::Max, logits, {1}, true);
          Value shifted = b.sub(logits, m);
          Value lse = b.unary(UnaryKind::Log, b.reduce(ReduceKind::Sum,
                                                       b.unary(UnaryKind::Exp, shifted), {1}, true));
          Value logp = b.sub(shifted, lse);
          return b.reduce(ReduceKind::Sum, b.mul(logp, a[4]), {1}, false);
        });
}

TEST_F(GradCheckTest, InactiveInputsGetZeros) {
  auto grads = gradients({random.uniform({3}), random.uniform({3})}, [](CoreBuilder &b, ValueRange a) {
    return b.unary(UnaryKind::Exp, a[0]);
  });
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_EQ(values(grads[1]), (std::vector<double>(3, 0.0)));
}

TEST_F(GradCheckTest, ScatterWithMaxReductionIsAnErrorNamingTheNode) {
  std::string error = errorOf(
      {random.uniform({3}), i64({2}, {0, 2}), random.uniform({2})}, [](CoreBuilder &b, ValueRange a) {
        return b.create<ScatterElementsOp>(a[0], a[1], a[2], 0, ScatterReduction::Max);
      });
  EXPECT_NE(error.find("node_under_test"), std::string::npos) << error;
  EXPECT_NE(error.find("scatter_elements with a max reduction"), std::string::npos) << error;
}

TEST_F(GradCheckTest, ScatterWithMaxReductionIsFineWhenInactive) {
  // The scatter's operands are constants: it is not active, so its missing rule is no error.
  check({random.uniform({3})}, [](CoreBuilder &b, ValueRange a) {
    Value s = b.create<ScatterElementsOp>(b.splatLike(a[0], 1.0), b.constantI64({0, 2}, {2}),
                                          b.splat(b.tensorType({2}, b.builder().getF64Type()), 2.5),
                                          0, ScatterReduction::Max);
    return b.mul(a[0], s);
  });
}

} // namespace
