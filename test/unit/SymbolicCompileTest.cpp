//===- SymbolicCompileTest.cpp - One compile with symbolic dims, runs at every size -------===//
//
// Models exported with dynamic axes are imported with size ranges and compiled once for the
// CPU; the artifact is then run at several sizes (fresh random inputs each) through libtccrt
// and must match the reference interpreter on the same symbolic import. Binding errors name the
// input, the dim and the assumption.

#include "tcc/Compiler/Compiler.h"
#include "tcc/Frontend/OnnxImporter.h"
#include "tcc/Frontend/OnnxModel.h"
#include "tcc/IR/SymbolicShape.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Runtime/tccrt.hpp"

#include "TestSupport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>

using namespace tcc;

namespace {

/// Runs `f`, expects it to throw tccrt::Error (the runtime's), and returns the message.
template <class F> std::string errorOf(F &&f) {
  try {
    f();
  } catch (const tccrt::Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a tccrt::Error";
  return "";
}

struct SymbolicModel {
  ImportedModel imported;       // the symbolic import (the interpreter's oracle)
  std::vector<uint8_t> artifact; // compiled once from a copy of it
};

SymbolicModel compileSymbolic(mlir::MLIRContext &ctx, const std::string &name,
                              const std::map<std::string, std::pair<int64_t, int64_t>> &ranges) {
  onnx::ModelProto model =
      loadOnnxModel(std::string(TCC_SOURCE_DIR) + "/test/unit/Inputs/" + name + ".onnx");
  prepareOnnxModel(model, PrepareOptions{});
  ImportOptions options;
  options.symbolRanges = ranges;
  SymbolicModel m{importOnnxModel(ctx, model, options), {}};
  mlir::OwningOpRef<mlir::ModuleOp> copy = m.imported.module->clone();
  llvm::SmallString<128> cacheDir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("tcc-symbolic", cacheDir));
  CompileOptions compile;
  compile.cacheDir = cacheDir.str().str();
  compile.inputNames = m.imported.inputNames;
  compile.outputNames = m.imported.outputNames;
  m.artifact = compileModule(*copy, compile).artifact;
  llvm::sys::fs::remove_directories(cacheDir);
  return m;
}

tccrt::Tensor toRuntime(const Tensor &t) {
  tccrt::Tensor r((tccrt_dtype)t.dtype(), t.shape());
  std::memcpy(r.data(), t.raw(), t.byteSize());
  return r;
}

/// Runs the artifact and the interpreter on `inputs` and expects equal outputs (to float
/// rounding: the compiled kernels sum in other orders).
void expectRunMatchesInterpreter(tccrt::Program &program, SymbolicModel &m,
                                 const std::vector<Tensor> &inputs) {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<tccrt::Tensor> in;
  for (const Tensor &t : inputs) {
    shapes.push_back(t.shape());
    in.push_back(toRuntime(t));
  }
  program.setInputShapes(shapes);
  std::vector<tccrt::Tensor> got = program.run(in);
  auto main = m.imported.module->lookupSymbol<mlir::func::FuncOp>("main");
  std::vector<Tensor> want = runFunction(main, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].shape(), want[i].shape()) << "output " << i;
    ASSERT_EQ(want[i].dtype(), DType::F32) << "output " << i;
    const float *g = static_cast<const float *>(got[i].data());
    const float *w = want[i].data<float>();
    double worst = 0;
    for (int64_t k = 0; k < want[i].numElements(); ++k)
      worst = std::max(worst, std::fabs(g[k] - w[k]) / (1e-3 + std::fabs(w[k])));
    EXPECT_LT(worst, 1e-3) << "output " << i << " " << want[i].typeString();
  }
}

TEST(SymbolicCompile, EncoderCompiledOnceRunsEverySize) {
  mlir::MLIRContext ctx;
  SymbolicModel m = compileSymbolic(ctx, "symbolic-encoder", {{"batch", {1, 8}}, {"seq", {1, 64}}});
  tccrt::Program program = tccrt::Program::fromBuffer(m.artifact.data(), m.artifact.size(), 2);
  EXPECT_EQ(program.numSymbols(), 2u);
  uint64_t seed = 5;
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{1, 1}, {4, 13}, {8, 64}, {2, 7}}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + ", seq " + std::to_string(seq));
    expectRunMatchesInterpreter(program, m,
                                {randomTensor(DType::F32, {batch, seq, 16}, seed += 2),
                                 randomTensor(DType::F32, {batch, seq}, seed += 2)});
  }
}

TEST(SymbolicCompile, TheArenaIsPlannedForEachBindingsSizes) {
  // The compile-time plan holds every size (at every symbol's max); a binding plans the same
  // buffers for its own sizes: a small request takes a small arena, and the memory is reused.
  mlir::MLIRContext ctx;
  SymbolicModel m = compileSymbolic(ctx, "symbolic-encoder", {{"batch", {1, 8}}, {"seq", {1, 64}}});
  tccrt::Program program = tccrt::Program::fromBuffer(m.artifact.data(), m.artifact.size(), 1);
  EXPECT_EQ(program.arenaBytes(), 0u) << "unbound";
  program.setInputShapes({{8, 64, 16}, {8, 64}});
  size_t largest = program.arenaBytes();
  program.setInputShapes({{1, 2, 16}, {1, 2}});
  size_t small = program.arenaBytes();
  EXPECT_GT(small, 0u);
  EXPECT_LT(small * 32, largest) << "1x2 against 8x64: a 256th of the elements";
  uint64_t seed = 61;
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{1, 2}, {8, 64}, {3, 5}, {1, 2}}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + ", seq " + std::to_string(seq));
    expectRunMatchesInterpreter(program, m,
                                {randomTensor(DType::F32, {batch, seq, 16}, seed += 2),
                                 randomTensor(DType::F32, {batch, seq}, seed += 2)});
    EXPECT_LE(program.arenaBytes(), largest);
  }
}

TEST(SymbolicCompile, TransformersCompiledOnceRunEverySize) {
  for (auto [name, withMask, maxSeq] :
       {std::tuple<const char *, bool, int64_t>{"bert-dynamic", true, 64},
        {"gpt-dynamic", false, 64},
        {"decoder-dynamic", false, 64}}) { // (64 positions each)
    SCOPED_TRACE(name);
    mlir::MLIRContext ctx;
    SymbolicModel m = compileSymbolic(ctx, name, {{"batch", {1, 4}}, {"seq", {1, maxSeq}}});
    tccrt::Program program = tccrt::Program::fromBuffer(m.artifact.data(), m.artifact.size(), 2);
    uint64_t seed = 17;
    for (auto [batch, seq] : {std::pair<int64_t, int64_t>{1, 3}, {4, maxSeq}, {2, 31}}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + ", seq " + std::to_string(seq));
      expectRunMatchesInterpreter(program, m, test::tokenInputs(batch, seq, seed += 2, withMask));
    }
  }
}

TEST(SymbolicCompile, CnnCompiledOnceRunsEveryImageSize) {
  mlir::MLIRContext ctx;
  SymbolicModel m = compileSymbolic(ctx, "cnn-dynamic",
                                    {{"batch", {1, 4}}, {"h", {8, 64}}, {"w", {8, 64}}});
  tccrt::Program program = tccrt::Program::fromBuffer(m.artifact.data(), m.artifact.size(), 2);
  uint64_t seed = 29;
  for (Shape shape : {Shape{1, 3, 8, 8}, Shape{2, 3, 33, 17}, Shape{4, 3, 64, 64}}) {
    SCOPED_TRACE(shapeToString(shape));
    expectRunMatchesInterpreter(program, m, {randomTensor(DType::F32, shape, seed += 2)});
  }
}

TEST(SymbolicCompile, PadsConcatsAndGroupedConvolutionsRunEverySize) {
  // Reflect, edge and constant pads of symbolic image sides, a concat along the channels of
  // symbolic maps, a grouped dilated convolution (a library call), argmax over the channels, a
  // KV-cache concat along a symbolic sequence (past + seq), and cumulative sums along it (of a
  // mask, as RoBERTa's position ids; of a flipped sequence: a Slice with step -1), and top-k
  // along a symbolic width, argmax along the symbolic sequence, nearest upsampling of the
  // symbolic image by 2 and 3, and scatters (ScatterElements with add, a ScatterND cache write).
  mlir::MLIRContext ctx;
  SymbolicModel m = compileSymbolic(
      ctx, "ops-dynamic",
      {{"batch", {1, 4}}, {"h", {8, 32}}, {"w", {8, 32}}, {"seq", {1, 16}}, {"past", {1, 16}}});
  tccrt::Program program = tccrt::Program::fromBuffer(m.artifact.data(), m.artifact.size(), 2);
  uint64_t seed = 41;
  for (auto [batch, h, w, seq, past] : {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{1, 8, 8, 1, 1},
                                         {2, 13, 29, 5, 16},
                                         {4, 32, 32, 16, 3}}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + ", " + std::to_string(h) + "x" +
                 std::to_string(w) + ", seq " + std::to_string(seq) + ", past " + std::to_string(past));
    expectRunMatchesInterpreter(program, m,
                                {randomTensor(DType::F32, {batch, 4, h, w}, seed += 2),
                                 randomTensor(DType::F32, {batch, seq, 8}, seed += 2),
                                 randomTensor(DType::F32, {batch, past, 8}, seed += 2)});
  }
}

TEST(SymbolicCompile, SizesOutsideTheCompiledRangesAreRejectedByName) {
  mlir::MLIRContext ctx;
  SymbolicModel m = compileSymbolic(ctx, "symbolic-encoder", {{"batch", {1, 8}}, {"seq", {1, 64}}});
  tccrt::Program program = tccrt::Program::fromBuffer(m.artifact.data(), m.artifact.size(), 2);
  std::vector<tccrt::Tensor> in;
  in.emplace_back(TCCRT_F32, std::vector<int64_t>{2, 3, 16});
  in.emplace_back(TCCRT_F32, std::vector<int64_t>{2, 3});
  std::vector<const void *> inPtrs{in[0].data(), in[1].data()};
  tccrt::Tensor out0(TCCRT_F32, {2, 3, 16}), out1(TCCRT_F32, {2, 16});
  std::vector<void *> outPtrs{out0.data(), out1.data()};
  auto runUnchecked = [&] { program.run(inPtrs.data(), outPtrs.data()); };
  EXPECT_NE(errorOf(runUnchecked).find("input 'x' has symbolic dims (batch x seq x 16)"),
            std::string::npos)
      << errorOf(runUnchecked);
  EXPECT_NE(errorOf([&] { program.setInputShapes({{2, 65, 16}, {2, 65}}); })
                .find("input 'x' dim 1 is 65, outside the compiled assumption seq in 1..64"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { program.setInputShapes({{2, 5, 16}, {2, 6}}); })
                .find("input 'mask' dim 1 is 6, but the program expects seq = 5"),
            std::string::npos);
  // A failed binding leaves the program unbound; a good one then runs.
  EXPECT_NE(errorOf(runUnchecked).find("set the input shapes"), std::string::npos);
  program.setInputShapes({{2, 3, 16}, {2, 3}});
  EXPECT_EQ(program.output(0).shape, (std::vector<int64_t>{2, 3, 16}));
  EXPECT_EQ(program.run(in).size(), 2u);
}

} // namespace
