//===- ArtifactReloadTest.cpp - Loading and freeing artifacts many times ---===//
//
// A service loads and frees models for as long as it runs: freeing a program must give back
// what loading took. Its CPU module (a shared object the compiler linked) is unloaded with it:
// the fuzzer found each load leaking five memory mappings (the modules were linked
// -z nodelete), so a process ran out of mappings after some ten thousand loads.
//
//===----------------------------------------------------------------------===//
#include "tcc/Compiler/Compiler.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Runtime/tccrt.hpp"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

using namespace tcc;

namespace {

size_t mappingCount() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  size_t n = 0;
  while (std::getline(maps, line))
    ++n;
  return n;
}

// Large enough that its kernel runs on two OpenMP threads.
constexpr const char *kModel = R"(
func.func @main(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %e = tcc.unary exp %x : tensor<64x1024xf32>
  %y = tcc.binary mul %e, %x : tensor<64x1024xf32>
  return %y : tensor<64x1024xf32>
})";

TEST(ArtifactReloadTest, FreeingAProgramUnloadsItsCpuModule) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<TccDialect, tk::TkDialect, mlir::func::FuncDialect, mlir::memref::MemRefDialect>();
  llvm::SmallString<128> cacheDir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tcc-reload", cacheDir));
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kModel, &ctx);
  ASSERT_TRUE(module);
  CompileOptions options;
  options.cacheDir = cacheDir.str().str();
  CompiledModel compiled = compileModule(*module, options);
  llvm::sys::fs::remove_directories(cacheDir);

  auto loadRunFree = [&] {
    tccrt::Program program =
        tccrt::Program::fromBuffer(compiled.artifact.data(), compiled.artifact.size(), 2);
    std::vector<tccrt::Tensor> in = program.makeInputs();
    for (size_t i = 0; i < in[0].numElements(); ++i)
      in[0].data<float>()[i] = (float)(i % 7) * 0.25f;
    std::vector<tccrt::Tensor> out = program.run(in);
    ASSERT_FLOAT_EQ(out[0].data<float>()[3], 0.75f * std::exp(0.75f));
  };
  loadRunFree(); // the first load may map what stays (libraries, thread stacks)
  size_t before = mappingCount();
  for (int i = 0; i < 200; ++i)
    loadRunFree();
  EXPECT_LT(mappingCount(), before + 50) << "200 loads of one artifact kept their mappings";
}

} // namespace
