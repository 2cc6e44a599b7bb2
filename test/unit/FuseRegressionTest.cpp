//===- FuseRegressionTest.cpp - Graphs that once broke fusion, compiled and run ---===//
//
// Each graph is compiled for the CPU and run through libtccrt on seeded random inputs; the
// outputs must equal the reference interpreter's.
//
//===----------------------------------------------------------------------===//
#include "tcc/Compiler/Compiler.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Runtime/tccrt.hpp"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace tcc;

namespace {

// A softmax whose row sums are also an output (so their reshape is a view in memory) and are
// read, through that view, by the kernel that computes them: fusion used to place the view
// between that kernel and itself (a cycle; in release builds null operands).
constexpr const char *kSelfView = R"(
func.func @main(%x: tensor<8x2x16xf32>) -> (tensor<8x2x16x1xf32>, tensor<8x2x16xf32>, tensor<8x2x1xf32>) {
  %m = tcc.reduce max %x dims = [2] : tensor<8x2x16xf32> -> tensor<8x2xf32>
  %mb = tcc.broadcast_in_dim %m dims = [0, 1] : tensor<8x2xf32> -> tensor<8x2x16xf32>
  %d = tcc.binary sub %x, %mb : tensor<8x2x16xf32>
  %e = tcc.unary exp %d : tensor<8x2x16xf32>
  %s = tcc.reduce sum %e dims = [2] : tensor<8x2x16xf32> -> tensor<8x2xf32>
  %v = tcc.reshape %s : tensor<8x2xf32> -> tensor<8x2x1xf32>
  %vb = tcc.broadcast_in_dim %v dims = [0, 1, 2] : tensor<8x2x1xf32> -> tensor<8x2x16xf32>
  %p = tcc.binary div %e, %vb : tensor<8x2x16xf32>
  %out = tcc.reshape %p : tensor<8x2x16xf32> -> tensor<8x2x16x1xf32>
  return %out, %p, %v : tensor<8x2x16x1xf32>, tensor<8x2x16xf32>, tensor<8x2x1xf32>
})";

TEST(FuseRegressionTest, KernelReadingAViewOfItsOwnResult) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<TccDialect, tk::TkDialect, mlir::func::FuncDialect, mlir::memref::MemRefDialect>();
  llvm::SmallString<128> cacheDir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tcc-fuse-regression", cacheDir));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-2, 2);
  Tensor x(DType::F32, {8, 2, 16});
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.data<float>()[i] = dist(rng);

  auto reference = mlir::parseSourceString<mlir::ModuleOp>(kSelfView, &ctx);
  ASSERT_TRUE(reference);
  std::vector<Tensor> want =
      runFunction(*reference->getOps<mlir::func::FuncOp>().begin(), std::vector<Tensor>{x});

  auto module = mlir::parseSourceString<mlir::ModuleOp>(kSelfView, &ctx);
  CompileOptions options;
  options.cacheDir = cacheDir.str().str();
  CompiledModel compiled = compileModule(*module, options);
  tccrt::Program program = tccrt::Program::fromBuffer(compiled.artifact.data(),
                                                       compiled.artifact.size(), 1);
  std::vector<tccrt::Tensor> in;
  in.emplace_back(TCCRT_F32, std::vector<int64_t>{8, 2, 16});
  std::memcpy(in[0].data(), x.raw(), x.byteSize());
  std::vector<tccrt::Tensor> got = program.run(in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ((int64_t)got[o].numElements(), want[o].numElements());
    for (int64_t i = 0; i < want[o].numElements(); ++i)
      ASSERT_NEAR(got[o].data<float>()[i], want[o].data<float>()[i],
                  1e-5 * std::max(1.0f, std::abs(want[o].data<float>()[i])))
          << "output " << o << " element " << i;
  }
  llvm::sys::fs::remove_directories(cacheDir);
}

} // namespace
