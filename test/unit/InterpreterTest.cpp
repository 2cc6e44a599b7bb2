//===- InterpreterTest.cpp - The reference interpreter on parsed tcc IR -----===//
#include "tcc/Interp/Interpreter.h"
#include "tcc/IR/TccDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace tcc;

namespace {

class InterpreterTest : public ::testing::Test {
protected:
  InterpreterTest() { ctx.loadDialect<TccDialect, mlir::func::FuncDialect>(); }

  std::vector<Tensor> run(const char *source, const std::vector<Tensor> &args) {
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &ctx);
    EXPECT_TRUE(module) << "the test IR does not parse";
    return runFunction(module->lookupSymbol<mlir::func::FuncOp>("main"), args);
  }

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

TEST_F(InterpreterTest, EvaluatesAChainOfOps) {
  auto out = run(R"(
    func.func @main(%x: tensor<2x3xf32>) -> tensor<3xf32> {
      %c = tcc.constant dense<[1.5, -2.0, 0.25]> : tensor<3xf32>
      %b = tcc.broadcast_in_dim %c dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
      %s = tcc.binary mul %x, %b : tensor<2x3xf32>
      %r = tcc.reduce sum %s dims = [0] : tensor<2x3xf32> -> tensor<3xf32>
      return %r : tensor<3xf32>
    })",
                 {Tensor::fromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Shape{3}));
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 1.5f * (1 + 4));
  EXPECT_FLOAT_EQ(out[0].data<float>()[1], -2.0f * (2 + 5));
  EXPECT_FLOAT_EQ(out[0].data<float>()[2], 0.25f * (3 + 6));
}

TEST_F(InterpreterTest, IfTakesTheBranchOfTheCondition) {
  const char *src = R"(
    func.func @main(%c: tensor<i1>, %x: tensor<2xi64>) -> tensor<2xi64> {
      %r = tcc.if %c -> (tensor<2xi64>) {
        %n = tcc.unary neg %x : tensor<2xi64>
        tcc.yield %n : tensor<2xi64>
      } else {
        tcc.yield %x : tensor<2xi64>
      }
      return %r : tensor<2xi64>
    })";
  Tensor x = Tensor::fromVector<int64_t>({2}, {7, -3});
  auto taken = run(src, {Tensor::scalar<bool>(true), x});
  EXPECT_EQ(taken[0].toInt64Vector(), (std::vector<int64_t>{-7, 3}));
  auto other = run(src, {Tensor::scalar<bool>(false), x});
  EXPECT_EQ(other[0].toInt64Vector(), (std::vector<int64_t>{7, -3}));
}

TEST_F(InterpreterTest, LoopCarriesValuesAndStacksScanOutputs) {
  // Running sum of the iteration numbers; the scan output records each partial sum.
  auto out = run(R"(
    func.func @main(%n: tensor<i64>, %init: tensor<i64>) -> (tensor<i64>, tensor<4xi64>) {
      %t = tcc.constant dense<true> : tensor<i1>
      %r:2 = tcc.loop (%n, %t) inits(%init : tensor<i64>) -> (tensor<i64>, tensor<4xi64>) {
      ^bb0(%i: tensor<i64>, %c: tensor<i1>, %acc: tensor<i64>):
        %s = tcc.binary add %acc, %i : tensor<i64>
        tcc.yield %c, %s, %s : tensor<i1>, tensor<i64>, tensor<i64>
      }
      return %r#0, %r#1 : tensor<i64>, tensor<4xi64>
    })",
                 {Tensor::scalar<int64_t>(4), Tensor::scalar<int64_t>(10)});
  EXPECT_EQ(out[0].getInt(0), 10 + 0 + 1 + 2 + 3);
  EXPECT_EQ(out[1].toInt64Vector(), (std::vector<int64_t>{10, 11, 13, 16}));
}

TEST_F(InterpreterTest, LoopEndingEarlyWithScanOutputsIsAnError) {
  const char *src = R"(
    func.func @main(%n: tensor<i64>) -> tensor<3xi64> {
      %t = tcc.constant dense<true> : tensor<i1>
      %r = tcc.loop (%n, %t) -> (tensor<3xi64>) {
      ^bb0(%i: tensor<i64>, %c: tensor<i1>):
        tcc.yield %c, %i : tensor<i1>, tensor<i64>
      }
      return %r : tensor<3xi64>
    })";
  EXPECT_THROW(run(src, {Tensor::scalar<int64_t>(2)}), Error);
}

TEST_F(InterpreterTest, RejectsArgumentsOfTheWrongShape) {
  const char *src = R"(
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      return %x : tensor<2xf32>
    })";
  EXPECT_THROW(run(src, {Tensor::fromVector<float>({3}, {1, 2, 3})}), Error);
  EXPECT_THROW(run(src, {}), Error);
}

TEST_F(InterpreterTest, KernelErrorsNameTheOp) {
  const char *src = R"(
    func.func @main(%x: tensor<3xf32>, %i: tensor<1xi64>) -> tensor<1xf32> {
      %g = tcc.gather %x[%i] axis = 0 : tensor<3xf32>, tensor<1xi64> -> tensor<1xf32> loc("my_gather")
      return %g : tensor<1xf32>
    })";
  try {
    run(src, {Tensor::fromVector<float>({3}, {1, 2, 3}), Tensor::fromVector<int64_t>({1}, {5})});
    FAIL() << "an out-of-range index must throw";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("tcc.gather"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("my_gather"), std::string::npos) << e.what();
  }
}

TEST_F(InterpreterTest, ConstantsRoundTripThroughAttributes) {
  for (DType dtype : {DType::Bool, DType::I8, DType::U16, DType::I32, DType::I64, DType::U64,
                      DType::F16, DType::BF16, DType::F32, DType::F64}) {
    Tensor t(dtype, {2, 3});
    auto *bytes = static_cast<uint8_t *>(t.raw());
    for (size_t i = 0; i < t.byteSize(); ++i)
      bytes[i] = dtype == DType::Bool ? i % 2 : static_cast<uint8_t>(i * 37 + 11);
    Tensor back = tensorFromAttr(attrFromTensor(&ctx, t));
    EXPECT_EQ(back.dtype(), dtype);
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_EQ(std::memcmp(back.raw(), t.raw(), t.byteSize()), 0) << dtypeName(dtype);
  }
}

} // namespace
