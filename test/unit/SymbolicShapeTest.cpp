//===- SymbolicShapeTest.cpp - Symbolic dims from ONNX through the interpreter ---===//
//
// A model with dynamic batch and sequence axes is imported once with symbolic dims, then run
// by the reference interpreter at several sizes; each run must equal, bit for bit, the run of
// the same model imported with those sizes fixed (the same kernels on the same shapes).

#include "tcc/Frontend/OnnxImporter.h"
#include "tcc/Frontend/OnnxModel.h"
#include "tcc/IR/SymbolicShape.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/Interp/Interpreter.h"

#include "TestSupport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>

using namespace tcc;
using tcc::test::tokenInputs;

namespace {

/// test/unit/Inputs/NAME.onnx, imported with the inputs in `shapes` fixed (the others keep
/// their dynamic dims as size symbols).
ImportedModel importInput(mlir::MLIRContext &ctx, const std::string &name,
                          const std::map<std::string, Shape> &shapes,
                          const ImportOptions &options = {}) {
  onnx::ModelProto model =
      loadOnnxModel(std::string(TCC_SOURCE_DIR) + "/test/unit/Inputs/" + name + ".onnx");
  PrepareOptions prepare;
  prepare.inputShapes = shapes;
  prepareOnnxModel(model, prepare);
  return importOnnxModel(ctx, model, options);
}

ImportedModel importModel(mlir::MLIRContext &ctx, const std::map<std::string, Shape> &shapes,
                          const ImportOptions &options = {}) {
  return importInput(ctx, "symbolic-encoder", shapes, options);
}

mlir::func::FuncOp mainOf(ImportedModel &m) {
  return m.module->lookupSymbol<mlir::func::FuncOp>("main");
}

std::vector<Tensor> inputsFor(int64_t batch, int64_t seq, uint64_t seed) {
  Tensor x = randomTensor(DType::F32, {batch, seq, 16}, seed);
  Tensor mask = randomTensor(DType::F32, {batch, seq}, seed + 1);
  return {x, mask};
}

bool bitwiseEqual(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.byteSize()) == 0;
}

TEST(SymbolicShape, ImportKeepsDynamicAxesAsSymbols) {
  mlir::MLIRContext ctx;
  ImportedModel m = importModel(ctx, {});
  auto main = mainOf(m);
  ASSERT_TRUE(main);
  EXPECT_EQ(shapeString(symbolicShape(main.getArgumentTypes()[0])), "batchxseqx16");
  EXPECT_EQ(shapeString(symbolicShape(main.getArgumentTypes()[1])), "batchxseq");
  EXPECT_EQ(shapeString(symbolicShape(main.getResultTypes()[0])), "batchxseqx16");
  EXPECT_EQ(shapeString(symbolicShape(main.getResultTypes()[1])), "batchx16");
  SymbolRanges ranges = symbolRanges(*m.module);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges["batch"].min, 1);
  EXPECT_EQ(ranges["seq"].max, INT64_MAX);
  // Shape arithmetic folded: the head split reshapes to [batch, seq, 2, 8] with no shape ops
  // left at run time; only the mean's element count is read from the symbols then.
  int symInts = 0;
  main.walk([&](SymIntsOp op) {
    ++symInts;
    EXPECT_EQ(op.getExprs().at(0).str(), "seq");
  });
  EXPECT_EQ(symInts, 1);
}

TEST(SymbolicShape, OneImportRunsEverySizeAsTheStaticImportDoes) {
  mlir::MLIRContext ctx;
  ImportedModel symbolic = importModel(ctx, {});
  uint64_t seed = 11;
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{1, 1}, {2, 5}, {3, 17}}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + ", seq " + std::to_string(seq));
    std::vector<Tensor> inputs = inputsFor(batch, seq, seed += 2);
    std::vector<Tensor> got = runFunction(mainOf(symbolic), inputs);
    ImportedModel fixed = importModel(ctx, {{"x", {batch, seq, 16}}, {"mask", {batch, seq}}});
    std::vector<Tensor> want = runFunction(mainOf(fixed), inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(bitwiseEqual(got[i], want[i]))
          << "output " << i << ": " << got[i].typeString() << " vs " << want[i].typeString();
  }
}

/// Runs the symbolic import of image model `name` (one input "x") at each of `shapes` and
/// expects the output of the import fixed at that shape, bit for bit.
void expectImageRunsMatchFixed(mlir::MLIRContext &ctx, const std::string &name,
                               ImportedModel &symbolic, const std::vector<Shape> &shapes,
                               uint64_t seed) {
  for (const Shape &shape : shapes) {
    SCOPED_TRACE(shapeToString(shape));
    std::vector<Tensor> inputs{randomTensor(DType::F32, shape, seed += 2)};
    ImportedModel fixed = importInput(ctx, name, {{"x", shape}});
    Tensor got = runFunction(mainOf(symbolic), inputs).at(0),
           want = runFunction(mainOf(fixed), inputs).at(0);
    EXPECT_TRUE(bitwiseEqual(got, want)) << got.typeString() << " vs " << want.typeString();
  }
}

/// The CNN's image size stays symbolic through convolutions (padded, strided) and max
/// pooling; the global mean divides by h*w read at run time.
TEST(SymbolicShape, TorchExportedCnnRunsAtEveryImageSize) {
  mlir::MLIRContext ctx;
  ImportedModel symbolic = importInput(ctx, "cnn-dynamic", {});
  EXPECT_EQ(shapeString(symbolicShape(mainOf(symbolic).getArgumentTypes()[0])), "batchx3xhxw");
  expectImageRunsMatchFixed(ctx, "cnn-dynamic", symbolic,
                            {Shape{1, 3, 8, 8}, Shape{2, 3, 13, 17}, Shape{1, 3, 32, 24}}, 5);
}

/// torch.export writes derived dims as expressions (2*s3): a run solves them for the symbol,
/// and an image side that is not even is rejected with the reason.
TEST(SymbolicShape, DerivedDimsFromTorchExportAreSolvedPerRun) {
  mlir::MLIRContext ctx;
  ImportedModel symbolic = importInput(ctx, "cnn-dynamo", {});
  EXPECT_EQ(shapeString(symbolicShape(mainOf(symbolic).getArgumentTypes()[0])),
            "s0x3xs3*2xs4*2");
  expectImageRunsMatchFixed(ctx, "cnn-dynamo", symbolic,
                            {Shape{1, 3, 16, 16}, Shape{2, 3, 10, 24}}, 9);
  std::string odd = test::errorOf(
      [&] { runFunction(mainOf(symbolic), {randomTensor(DType::F32, {1, 3, 15, 16}, 1)}); });
  EXPECT_NE(odd.find("input 0 dim 2 is 15, but the program expects s3*2 for an integer s3"),
            std::string::npos)
      << odd;
}

/// Models torch.onnx.export wrote with dynamic batch and sequence axes
/// (Inputs/export_symbolic_models.py): one import, run at three sizes, equals the import fixed
/// at each size.
TEST(SymbolicShape, TorchExportsRunAtEverySize) {
  for (auto [name, withMask] :
       {std::pair{"bert-dynamic", true}, {"gpt-dynamic", false}, {"decoder-dynamic", false}}) {
    SCOPED_TRACE(name);
    mlir::MLIRContext ctx;
    // The models have 64 positions (what --input-shape ids=1..x1..64 declares): the decoder's
    // causal buffer sliced to [:seq, :seq] is then exactly seq x seq.
    ImportOptions options;
    options.symbolRanges["seq"] = {1, 64};
    auto importAt = [&](const std::map<std::string, Shape> &shapes) {
      return importInput(ctx, name, shapes, options);
    };
    ImportedModel symbolic = importAt({});
    EXPECT_EQ(shapeString(symbolicShape(mainOf(symbolic).getArgumentTypes()[0])), "batchxseq");
    uint64_t seed = 3;
    for (auto [batch, seq] : {std::pair<int64_t, int64_t>{1, 1}, {2, 5}, {3, 17}}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + ", seq " + std::to_string(seq));
      std::vector<Tensor> inputs = tokenInputs(batch, seq, seed += 2, withMask);
      std::map<std::string, Shape> shapes{{"ids", {batch, seq}}};
      if (withMask)
        shapes["mask"] = {batch, seq};
      ImportedModel fixed = importAt(shapes);
      std::vector<Tensor> got = runFunction(mainOf(symbolic), inputs),
                          want = runFunction(mainOf(fixed), inputs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(bitwiseEqual(got[i], want[i]))
            << "output " << i << ": " << got[i].typeString() << " vs " << want[i].typeString();
    }
  }
}

TEST(SymbolicShape, InputsThatBreakTheAssumptionsAreRejectedByName) {
  mlir::MLIRContext ctx;
  ImportOptions options;
  options.symbolRanges["seq"] = {2, 8};
  ImportedModel m = importModel(ctx, {}, options);
  EXPECT_EQ(describeSymbolRanges(symbolRanges(*m.module)), "batch >= 1, seq in 2..8");

  std::string tooLong = test::errorOf([&] { runFunction(mainOf(m), inputsFor(2, 9, 1)); });
  EXPECT_NE(tooLong.find("input 0 dim 1 is 9, outside the compiled assumption seq in 2..8"),
            std::string::npos)
      << tooLong;

  std::vector<Tensor> mismatched = inputsFor(2, 4, 1);
  mismatched[1] = randomTensor(DType::F32, {3, 4}, 5);
  std::string batch = test::errorOf([&] { runFunction(mainOf(m), mismatched); });
  EXPECT_NE(batch.find("input 1 dim 0 is 3, but the program expects batch = 2 (set by input 0 "
                       "dim 0)"),
            std::string::npos)
      << batch;

  std::vector<Tensor> badFixed = inputsFor(2, 4, 1);
  badFixed[0] = randomTensor(DType::F32, {2, 4, 15}, 5);
  std::string fixedDim = test::errorOf([&] { runFunction(mainOf(m), badFixed); });
  EXPECT_NE(fixedDim.find("input 0 dim 2 is 15, but the program fixes it to 16"),
            std::string::npos)
      << fixedDim;
}

TEST(SymbolicShape, TypesAreCanonicalAndChecked) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<TccDialect>();
  mlir::Type f32 = mlir::Float32Type::get(&ctx);
  SymExpr b = SymExpr::symbol("b"), s = SymExpr::symbol("s");
  auto t1 = tensorTypeWithDims({b * s, 4}, f32), t2 = tensorTypeWithDims({s * b, 4}, f32);
  EXPECT_EQ(t1, t2);
  EXPECT_TRUE(hasValidDims(t1));
  EXPECT_EQ(tensorTypeWithDims({3, 4}, f32), mlir::RankedTensorType::get({3, 4}, f32));
  // A `?` without its expression, a non-canonical one, a constant one: invalid.
  EXPECT_FALSE(hasValidDims(mlir::RankedTensorType::get({mlir::ShapedType::kDynamic}, f32)));
  auto dims = [&](llvm::StringRef text) {
    return DimsAttr::get(&ctx, {mlir::StringAttr::get(&ctx, text)});
  };
  auto dynamic1 = [&](llvm::StringRef text) {
    return mlir::RankedTensorType::get({mlir::ShapedType::kDynamic}, f32, dims(text));
  };
  EXPECT_TRUE(hasValidDims(dynamic1("b*s")));
  EXPECT_FALSE(hasValidDims(dynamic1("s * b + 0")));
  EXPECT_FALSE(hasValidDims(dynamic1("4")));
  EXPECT_FALSE(hasValidDims(dynamic1("b +")));
}

} // namespace
