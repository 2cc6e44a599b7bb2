//===- CollectivesTest.cpp - Collectives in the interpreter's simulated mesh --===//
//
// Semantics of every collective op against values computed here from the ranks' inputs; the
// deadline and failure paths of the simulated mesh; and the VJP rules of the collectives
// against central differences of the SPMD loss (the sum over ranks of each rank's loss).
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "tcc/IR/TccDialect.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Interp/Kernels.h"
#include "tcc/Passes/Autodiff.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <random>

using namespace tcc;
using tcc::test::values;

namespace {

class CollectivesTest : public ::testing::Test {
protected:
  CollectivesTest() { ctx.loadDialect<TccDialect, mlir::func::FuncDialect>(); }

  void parse(const std::string &source) {
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &ctx);
    ASSERT_TRUE(module) << "failed to parse";
  }

  /// The same function on every rank.
  std::vector<mlir::func::FuncOp> everyRank(const char *name, int ranks) {
    return std::vector<mlir::func::FuncOp>(ranks, module->lookupSymbol<mlir::func::FuncOp>(name));
  }

  Tensor random(const Shape &shape) {
    std::uniform_real_distribution<double> d(-2, 2);
    std::vector<double> v(numElements(shape));
    for (double &x : v)
      x = d(rng);
    return Tensor::fromVector<double>(shape, v);
  }

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::mt19937_64 rng{7};
};

Tensor blockOf(const Tensor &x, int64_t dim, int64_t index, int64_t count) {
  std::vector<int64_t> start(x.shape().size(), 0), limit(x.shape()), stride(x.shape().size(), 1);
  start[dim] = index * x.shape()[dim] / count;
  limit[dim] = start[dim] + x.shape()[dim] / count;
  return kernels::slice(x, start, limit, stride);
}

// Mesh dp=2 x tp=2: rank = 2 * dp + tp. Groups over tp: {0,1}, {2,3}; over dp: {0,2}, {1,3}.
TEST_F(CollectivesTest, SemanticsOnATwoByTwoMesh) {
  parse(R"(
module attributes {tcc.mesh = #tcc.mesh<dp = 2, tp = 2>} {
func.func @f(%x: tensor<4x2xf64>) -> (tensor<4x2xf64>, tensor<4x2xf64>, tensor<8x2xf64>, tensor<2x2xf64>,
                                      tensor<2x4xf64>, tensor<4x2xf64>, tensor<i64>, tensor<4x2xf64>, tensor<4x2xf64>) {
  %sum = tcc.all_reduce sum %x over ["tp"] : tensor<4x2xf64>
  %avg = tcc.all_reduce avg %x over ["dp", "tp"] : tensor<4x2xf64>
  %gathered = tcc.all_gather %x dim = 0 over ["dp"] : tensor<4x2xf64> -> tensor<8x2xf64>
  %scattered = tcc.reduce_scatter max %x dim = 0 over ["tp"] : tensor<4x2xf64> -> tensor<2x2xf64>
  %a2a = tcc.all_to_all %x split_dim = 0 concat_dim = 1 over ["tp"] : tensor<4x2xf64> -> tensor<2x4xf64>
  %bcast = tcc.broadcast %x root = 1 over ["dp"] : tensor<4x2xf64>
  %index = tcc.axis_index over ["tp", "dp"] : tensor<i64>
  tcc.send %x to 1 over "tp" : tensor<4x2xf64>
  tcc.send %sum to 0 over "tp" : tensor<4x2xf64>
  %from0 = tcc.recv from 0 over "tp" : tensor<4x2xf64>
  %from1 = tcc.recv from 1 over "tp" : tensor<4x2xf64>
  return %sum, %avg, %gathered, %scattered, %a2a, %bcast, %index, %from0, %from1
    : tensor<4x2xf64>, tensor<4x2xf64>, tensor<8x2xf64>, tensor<2x2xf64>, tensor<2x4xf64>,
      tensor<4x2xf64>, tensor<i64>, tensor<4x2xf64>, tensor<4x2xf64>
}
}
)");
  std::vector<Tensor> x;
  std::vector<std::vector<Tensor>> args;
  for (int r = 0; r < 4; ++r) {
    x.push_back(random({4, 2}));
    args.push_back({x.back()});
  }
  auto out = runSpmd(everyRank("f", 4), args);
  namespace k = kernels;
  auto add = [](const Tensor &a, const Tensor &b) { return k::binary(k::BinaryKind::Add, a, b); };
  for (int r = 0; r < 4; ++r) {
    int dp = r / 2, tp = r % 2;
    int tpPeer = 2 * dp + (1 - tp);
    const Tensor &tp0 = x[2 * dp], &tp1 = x[2 * dp + 1];
    EXPECT_EQ(values(out[r][0]), values(add(tp0, tp1))) << "rank " << r;
    Tensor total = add(add(add(x[0], x[1]), x[2]), x[3]);
    std::vector<double> avg = values(total);
    for (double &v : avg)
      v /= 4;
    EXPECT_EQ(values(out[r][1]), avg);
    EXPECT_EQ(values(out[r][2]), values(k::concat({x[tp], x[2 + tp]}, 0)));
    EXPECT_EQ(values(out[r][3]), values(blockOf(k::binary(k::BinaryKind::Max, tp0, tp1), 0, tp, 2)));
    EXPECT_EQ(values(out[r][4]), values(k::concat({blockOf(tp0, 0, tp, 2), blockOf(tp1, 0, tp, 2)}, 1)));
    EXPECT_EQ(values(out[r][5]), values(x[2 + tp]));
    EXPECT_EQ(out[r][6].getInt(0), tp * 2 + dp);
    // Every rank sent x to tp 1 and its pair's sum to tp 0, itself included.
    const Tensor &sumOfPair = out[r][0];
    EXPECT_EQ(values(out[r][7]), values(tp == 0 ? sumOfPair : x[tpPeer])) << "rank " << r;
    EXPECT_EQ(values(out[r][8]), values(tp == 0 ? out[tpPeer][0] : x[r])) << "rank " << r;
  }
}

TEST_F(CollectivesTest, AMissingRankEndsEveryRankWithinTheDeadline) {
  parse(R"(
module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @reduce(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = tcc.all_reduce sum %x over ["dp"] : tensor<2xf32> loc("grad_sync")
  return %0 : tensor<2xf32>
}
func.func @skip(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
}
)");
  std::vector<mlir::func::FuncOp> programs{module->lookupSymbol<mlir::func::FuncOp>("reduce"),
                                           module->lookupSymbol<mlir::func::FuncOp>("skip")};
  Tensor x = Tensor::fromVector<float>({2}, {1, 2});
  auto start = std::chrono::steady_clock::now();
  std::string error = test::errorOf(
      [&] { runSpmd(programs, {{x}, {x}}, std::chrono::milliseconds(200)); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_CONTAINS(error, "rank 0");
  EXPECT_CONTAINS(error, "'tcc.all_reduce'");
  EXPECT_CONTAINS(error, "grad_sync");
  EXPECT_CONTAINS(error, "timed out after 200 ms waiting for rank(s) {1} of group {0, 1}");
}

TEST_F(CollectivesTest, AFailingRankStopsItsPeers) {
  parse(R"(
module attributes {tcc.mesh = #tcc.mesh<dp = 2>} {
func.func @ok(%x: tensor<2xf32>, %i: tensor<1xi64>) -> tensor<2xf32> {
  %0 = tcc.all_reduce sum %x over ["dp"] : tensor<2xf32>
  return %0 : tensor<2xf32>
}
func.func @bad(%x: tensor<2xf32>, %i: tensor<1xi64>) -> tensor<2xf32> {
  %g = tcc.gather %x[%i] axis = 0 : tensor<2xf32>, tensor<1xi64> -> tensor<1xf32> loc("lookup")
  %0 = tcc.all_reduce sum %x over ["dp"] : tensor<2xf32>
  return %0 : tensor<2xf32>
}
}
)");
  std::vector<mlir::func::FuncOp> programs{module->lookupSymbol<mlir::func::FuncOp>("ok"),
                                           module->lookupSymbol<mlir::func::FuncOp>("bad")};
  Tensor x = Tensor::fromVector<float>({2}, {1, 2});
  Tensor i = Tensor::fromVector<int64_t>({1}, {5});
  std::string error = test::errorOf([&] { runSpmd(programs, {{x, i}, {x, i}}); });
  EXPECT_CONTAINS(error, "rank 1: in 'tcc.gather' at loc(\"lookup\")");
}

TEST_F(CollectivesTest, WithoutPeersOnlyGroupsOfOneRankRun) {
  parse(R"(
module attributes {tcc.mesh = #tcc.mesh<dp = 1, tp = 2>} {
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = tcc.all_reduce sum %x over ["dp"] : tensor<2xf32>
  %1 = tcc.all_reduce sum %0 over ["tp"] : tensor<2xf32>
  return %1 : tensor<2xf32>
}
}
)");
  Tensor x = Tensor::fromVector<float>({2}, {1, 2});
  std::string error = test::errorOf([&] { runFunction(everyRank("f", 1)[0], {x}); });
  EXPECT_CONTAINS(error, "a collective over 2 ranks needs the other ranks");
}

//===--- Gradients -------------------------------------------------------------===//

/// Each case is a body `%y = ... %x ...` on a mesh; the rank's loss is sum(%r * %y) with a random
/// %r per rank. The gradient with respect to x on rank k must be the derivative of the sum of
/// every rank's loss with respect to rank k's x.
struct GradCase {
  const char *name;
  const char *mesh;
  int ranks;
  const char *xType, *yType;
  const char *body;
};

class CollectiveGradTest : public CollectivesTest, public ::testing::WithParamInterface<GradCase> {};

TEST_P(CollectiveGradTest, MatchesFiniteDifferencesOfTheSummedLoss) {
  const GradCase &c = GetParam();
  std::string source = std::string("module attributes {tcc.mesh = #tcc.mesh<") + c.mesh +
                       ">} {\nfunc.func @loss(%x: " + c.xType + ", %r: " + c.yType +
                       ") -> tensor<f64> {\n" + c.body +
                       "\n  %p = tcc.binary mul %y, %r : " + c.yType +
                       "\n  %l = tcc.reduce sum %p dims = [0, 1] : " + c.yType +
                       " -> tensor<f64>\n  return %l : tensor<f64>\n}\n}\n";
  parse(source);
  ASSERT_TRUE(module);
  auto lossFunc = module->lookupSymbol<mlir::func::FuncOp>("loss");
  // @grad: the same body, returning d loss / d x.
  auto gradFunc = lossFunc.clone();
  gradFunc.setName("grad");
  module->push_back(gradFunc);
  mlir::Operation *ret = gradFunc.getBody().front().getTerminator();
  mlir::OpBuilder b(ret);
  auto grads = buildGradients(b, ret->getOperand(0), {gradFunc.getArgument(0)});
  ASSERT_TRUE(mlir::succeeded(grads));
  b.create<mlir::func::ReturnOp>(ret->getLoc(), (*grads)[0]);
  ret->erase();
  gradFunc.setFunctionType(b.getFunctionType(gradFunc.getArgumentTypes(), {(*grads)[0].getType()}));
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));

  auto shapeOf = [](mlir::Type t) {
    auto r = mlir::cast<mlir::RankedTensorType>(t);
    return Shape(r.getShape().begin(), r.getShape().end());
  };
  Shape xShape = shapeOf(lossFunc.getArgumentTypes()[0]);
  Shape rShape = shapeOf(lossFunc.getArgumentTypes()[1]);
  std::vector<std::vector<Tensor>> args;
  for (int k = 0; k < c.ranks; ++k)
    args.push_back({random(xShape), random(rShape)});
  auto analytic = runSpmd(everyRank("grad", c.ranks), args);
  auto totalLoss = [&](const std::vector<std::vector<Tensor>> &a) {
    double total = 0;
    for (auto &out : runSpmd(everyRank("loss", c.ranks), a))
      total += out[0].getDouble(0);
    return total;
  };
  for (int k = 0; k < c.ranks; ++k)
    for (int64_t j = 0; j < numElements(xShape); ++j) {
      auto a = args;
      a[k][0] = args[k][0].clone();
      double x = args[k][0].getDouble(j), h = 1e-5 * std::max(1.0, std::abs(x));
      a[k][0].data<double>()[j] = x + h;
      double plus = totalLoss(a);
      a[k][0].data<double>()[j] = x - h;
      double minus = totalLoss(a);
      double numeric = (plus - minus) / (2 * h);
      ASSERT_NEAR(analytic[k][0].getDouble(j), numeric, 1e-6 * (1 + std::abs(numeric)))
          << c.name << ": rank " << k << " element " << j;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, CollectiveGradTest,
    ::testing::Values(
        GradCase{"all_reduce_sum", "dp = 2, tp = 2", 4, "tensor<2x3xf64>", "tensor<2x3xf64>",
                 "%y = tcc.all_reduce sum %x over [\"tp\"] : tensor<2x3xf64>"},
        GradCase{"all_reduce_avg", "dp = 3", 3, "tensor<2x3xf64>", "tensor<2x3xf64>",
                 "%y = tcc.all_reduce avg %x over [\"dp\"] : tensor<2x3xf64>"},
        GradCase{"all_reduce_max", "dp = 2", 2, "tensor<2x3xf64>", "tensor<2x3xf64>",
                 "%y = tcc.all_reduce max %x over [\"dp\"] : tensor<2x3xf64>"},
        GradCase{"all_gather", "dp = 2, tp = 2", 4, "tensor<2x3xf64>", "tensor<4x3xf64>",
                 "%y = tcc.all_gather %x dim = 0 over [\"dp\"] : tensor<2x3xf64> -> tensor<4x3xf64>"},
        GradCase{"reduce_scatter_sum", "dp = 2", 2, "tensor<2x4xf64>", "tensor<2x2xf64>",
                 "%y = tcc.reduce_scatter sum %x dim = 1 over [\"dp\"] : tensor<2x4xf64> -> tensor<2x2xf64>"},
        GradCase{"reduce_scatter_avg", "dp = 2", 2, "tensor<4x2xf64>", "tensor<2x2xf64>",
                 "%y = tcc.reduce_scatter avg %x dim = 0 over [\"dp\"] : tensor<4x2xf64> -> tensor<2x2xf64>"},
        GradCase{"reduce_scatter_min", "dp = 2", 2, "tensor<4x2xf64>", "tensor<2x2xf64>",
                 "%y = tcc.reduce_scatter min %x dim = 0 over [\"dp\"] : tensor<4x2xf64> -> tensor<2x2xf64>"},
        GradCase{"all_to_all", "dp = 2, tp = 2", 4, "tensor<4x2xf64>", "tensor<1x8xf64>",
                 "%y = tcc.all_to_all %x split_dim = 0 concat_dim = 1 over [\"dp\", \"tp\"] : tensor<4x2xf64> -> tensor<1x8xf64>"},
        GradCase{"broadcast", "dp = 3", 3, "tensor<2x2xf64>", "tensor<2x2xf64>",
                 "%y = tcc.broadcast %x root = 2 over [\"dp\"] : tensor<2x2xf64>"},
        GradCase{"send_recv", "pp = 2", 2, "tensor<2x2xf64>", "tensor<2x2xf64>",
                 // Each rank sends x squared to the other and adds what it gets to x.
                 "%s = tcc.binary mul %x, %x : tensor<2x2xf64>\n"
                 "  %a = tcc.axis_index over [\"pp\"] : tensor<i64>\n"
                 "  tcc.send %s to 1 over \"pp\" : tensor<2x2xf64>\n"
                 "  tcc.send %s to 0 over \"pp\" : tensor<2x2xf64>\n"
                 "  %r0 = tcc.recv from 0 over \"pp\" : tensor<2x2xf64>\n"
                 "  %r1 = tcc.recv from 1 over \"pp\" : tensor<2x2xf64>\n"
                 "  %t = tcc.binary add %r0, %r1 : tensor<2x2xf64>\n"
                 "  %y = tcc.binary add %t, %x : tensor<2x2xf64>"}),
    [](const auto &info) { return std::string(info.param.name); });

} // namespace
