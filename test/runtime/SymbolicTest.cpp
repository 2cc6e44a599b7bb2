//===- SymbolicTest.cpp - Symbolic programs: one artifact for every size ---===//
//
// Hand-built artifacts whose dims are expressions of size symbols (artifact.fbs: dims, the
// Symbols buffer, Program.symbols): loading and its checks, binding input shapes (the sizes
// solved, ranges and agreement checked), runs at several sizes against a reference, rebinding,
// the caches kept across bindings, and the C API. Also the standard C++ binder the runtime
// shares with the compiler (tcc/Support/SymbolBinding.h).
#include "Program.h"
#include "TestUtil.h"
#include "tcc/Support/SymbolBinding.h"
#include "tcc/Support/Tensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

namespace tcc::rt::test {
namespace {

// ---- The program: y[m x 8] = relu(x[m x 16] @ w[16 x 8]) * scale[m] -----------------------------
//
//   buffer 0  input 0 'x'      f32[m, 16]
//   buffer 1  input 1 'scale'  f32[m]
//   buffer 2  constant 0 (w)   f32[16, 8]
//   buffer 3  arena @0         f32[m, 8]    t = x @ w          (at most 64*8*4 = 2048 bytes)
//   buffer 4  arena @2048      f32[m, 8]    u = relu(t) * scale
//   buffer 5  output 0 'y'     f32[m, 8]    y = u (a copy)
//   buffer 6  symbols          i64[1]       {m}, read by the kernel
// m in 1..64; the arena is planned at m = 64: 4096 bytes.

constexpr int64_t kMaxM = 64;

std::vector<float> weights() { return randomFloats(16 * 8, 7); }

ArtifactBuilder gemmProgram() {
  ArtifactBuilder a;
  a.symbols = {{"m", 1, kMaxM}};
  uint32_t x = a.symbolicInput(fb::DType_F32, {"m", "16"}, "x");
  uint32_t scale = a.symbolicInput(fb::DType_F32, {"m"}, "scale");
  std::vector<float> w = weights();
  uint32_t wb = a.constant(fb::DType_F32, {16, 8}, w.data());
  uint32_t t = a.symbolicArena(0, fb::DType_F32, {"m", "8"});
  uint32_t u = a.symbolicArena(2048, fb::DType_F32, {"m", "8"});
  uint32_t y = a.symbolicOutput(fb::DType_F32, {"m", "8"}, "y");
  uint32_t sizes = a.symbolValues();
  uint32_t kernel = a.kernel("relu_scale_rows8",
                             {ArtifactBuilder::param(fb::DType_F32, {"m", "8"}),
                              ArtifactBuilder::param(fb::DType_F32, {"m"}),
                              ArtifactBuilder::param(fb::DType_F32, {"m", "8"}),
                              ArtifactBuilder::Tensor{"", fb::DType_I64, {1}}});
  a.gemm(x, wb, t);
  a.launch(kernel, {t, scale, u, sizes});
  a.copy(u, y);
  a.arenaBytes = 4096;
  return a;
}

std::vector<float> reference(const std::vector<float> &x, const std::vector<float> &scale,
                             int64_t m) {
  std::vector<float> w = weights(), y((size_t)(m * 8));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < 8; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < 16; ++k)
        sum += (double)x[i * 16 + k] * w[k * 8 + j];
      y[i * 8 + j] = (float)(std::max(sum, 0.0) * scale[i]);
    }
  return y;
}

/// Runs `program` at m rows on fresh random data and compares with the reference.
void runAndCompare(tccrt::Program &program, int64_t m, unsigned seed) {
  std::vector<tccrt::Tensor> in = program.makeInputs({{m, 16}, {m}});
  std::vector<float> x = randomFloats((size_t)(m * 16), seed),
                     scale = randomFloats((size_t)m, seed + 1);
  std::memcpy(in[0].data(), x.data(), x.size() * sizeof(float));
  std::memcpy(in[1].data(), scale.data(), scale.size() * sizeof(float));
  std::vector<tccrt::Tensor> out = program.run(in);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{m, 8}));
  expectClose(out[0].data<float>(), reference(x, scale, m), 1e-5, 1e-5,
              "y at m = " + std::to_string(m));
}

tccrt::Program load(const std::vector<uint8_t> &bytes) {
  return tccrt::Program::fromBuffer(bytes.data(), bytes.size(), 2);
}

/// The error of loading `bytes`, or "" when it loads.
std::string loadError(const std::vector<uint8_t> &bytes) {
  tccrt_program *p = nullptr;
  if (tccrt_load_buffer(bytes.data(), bytes.size(), nullptr, &p) == TCCRT_OK) {
    tccrt_program_free(p);
    return "";
  }
  return tccrt_last_error();
}

/// The error of binding `shapes`, or "" when they bind.
std::string bindError(tccrt::Program &program, const std::vector<std::vector<int64_t>> &shapes) {
  try {
    program.setInputShapes(shapes);
    return "";
  } catch (const tccrt::Error &e) {
    return e.what();
  }
}

#define EXPECT_CONTAINS(text, part)                                                              \
  EXPECT_NE(std::string(text).find(part), std::string::npos)                                     \
      << "message: " << (text) << "\nexpected to contain: " << (part)

// ---- Runs -----------------------------------------------------------------------------------------

TEST(SymbolicProgram, RunsAtEverySizeInItsRange) {
  tccrt::Program program = load(gemmProgram().finish());
  for (int64_t m : std::vector<int64_t>{1, 7, kMaxM})
    runAndCompare(program, m, (unsigned)m);
}

TEST(SymbolicProgram, RebindsBackAndForth) {
  tccrt::Program program = load(gemmProgram().finish());
  unsigned seed = 100;
  for (int64_t m : std::vector<int64_t>{kMaxM, 3, kMaxM, 3, 5, 5, 1})
    runAndCompare(program, m, seed++);
}

TEST(SymbolicProgram, LoadsUnboundAndRefusesToRunUnbound) {
  tccrt::Program program = load(gemmProgram().finish());
  tccrt::TensorInfo x = program.input(0), y = program.output(0);
  EXPECT_EQ(x.shape, (std::vector<int64_t>{-1, 16}));
  EXPECT_EQ(x.bytes, 0u);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{-1, 8}));
  EXPECT_EQ(tccrt_num_launches(program.get()), 0u);
  float data[16] = {};
  const void *in[] = {data, data};
  void *out[] = {data};
  EXPECT_EQ(tccrt_run(program.get(), in, out), TCCRT_ERROR);
  EXPECT_CONTAINS(tccrt_last_error(), "input 'x' has symbolic dims (m x 16): set the "
                                      "input shapes (tccrt_set_input_shapes) before running");
  try {
    program.makeInputs();
    ADD_FAILURE() << "makeInputs of an unbound symbolic program";
  } catch (const tccrt::Error &e) {
    EXPECT_CONTAINS(e.what(), "input 'x' has symbolic dims");
  }
}

TEST(SymbolicProgram, BindingErrorsNameTheInputDimAndAssumption) {
  tccrt::Program program = load(gemmProgram().finish());
  EXPECT_CONTAINS(bindError(program, {{65, 16}, {65}}),
                  "input 'x' dim 0 is 65, outside the compiled assumption m in 1..64");
  EXPECT_CONTAINS(bindError(program, {{0, 16}, {0}}),
                  "input 'x' dim 0 is 0, outside the compiled assumption m in 1..64");
  EXPECT_CONTAINS(bindError(program, {{4, 16}, {5}}),
                  "input 'scale' dim 0 is 5, but the program expects m = 4 (set by input 'x' "
                  "dim 0)");
  EXPECT_CONTAINS(bindError(program, {{4, 15}, {4}}),
                  "input 'x' dim 1 is 15, but the program fixes it to 16");
  EXPECT_CONTAINS(bindError(program, {{4, 16, 1}, {4}}),
                  "input 'x' has rank 3, the program expects rank 2 (mx16)");
  EXPECT_CONTAINS(bindError(program, {{4, 16}}), "1 shapes given, the program has 2 inputs");
}

TEST(SymbolicProgram, AFailedBindingLeavesItUnbound) {
  tccrt::Program program = load(gemmProgram().finish());
  runAndCompare(program, 4, 1);
  EXPECT_NE(bindError(program, {{99, 16}, {99}}), "");
  EXPECT_EQ(program.input(0).shape, (std::vector<int64_t>{-1, 16}));
  float data[64 * 16] = {};
  const void *in[] = {data, data};
  void *out[] = {data};
  EXPECT_EQ(tccrt_run(program.get(), in, out), TCCRT_ERROR);
  EXPECT_CONTAINS(tccrt_last_error(), "has symbolic dims (m x 16)");
  runAndCompare(program, 4, 2); // and binds again
}

TEST(SymbolicProgram, ABindingGivesEveryShapeAndStepItsSizes) {
  std::vector<uint8_t> bytes = gemmProgram().finish();
  std::unique_ptr<Program> p = Program::load(bytes.data(), bytes.size(), 1);
  EXPECT_TRUE(p->isSymbolic());
  EXPECT_FALSE(p->bound());
  p->bindInputShapes({{5, 16}, {5}});
  EXPECT_TRUE(p->bound());
  EXPECT_EQ(p->outputs()[0].shape, (Shape{5, 8}));
  EXPECT_EQ(p->outputs()[0].bytes, 5u * 8 * 4);
  EXPECT_EQ(p->buffers()[3].shape, (Shape{5, 8}));
  EXPECT_EQ(p->buffers()[3].bytes, 5u * 8 * 4);
  ASSERT_EQ(p->steps().size(), 3u);
  const GemmGeometry &g = std::get<GemmStep>(p->steps()[0]).geometry;
  EXPECT_EQ(g.m, 5);
  EXPECT_EQ(g.n, 8);
  EXPECT_EQ(g.k, 16);
  EXPECT_EQ(p->stepNames()[0], "gemm f32 5x8x16");
}

TEST(SymbolicProgram, RebindingTheSameShapesKeepsTheLaunchList) {
  std::vector<uint8_t> bytes = gemmProgram().finish();
  std::unique_ptr<Program> p = Program::load(bytes.data(), bytes.size(), 1);
  p->bindInputShapes({{5, 16}, {5}});
  const Step *steps = p->steps().data();
  p->bindInputShapes({{5, 16}, {5}});
  EXPECT_EQ(p->steps().data(), steps); // not derived again
}

TEST(SymbolicProgram, ConstantPackingsSurviveRebinding) {
  std::vector<uint8_t> bytes = gemmProgram().finish();
  std::unique_ptr<Program> p = Program::load(bytes.data(), bytes.size(), 1);
  p->bindInputShapes({{5, 16}, {5}});
  const PackedOperand *packed = std::get<GemmStep>(p->steps()[0]).packedB.get();
  p->bindInputShapes({{60, 16}, {60}});
  EXPECT_EQ(std::get<GemmStep>(p->steps()[0]).packedB.get(), packed);
  EXPECT_EQ(std::get<GemmStep>(p->steps()[0]).geometry.m, 60);
}

// ---- A convolution over a symbolic batch: y[n, 3, 3, 3] = conv(x[n, 2, 5, 5], w[3, 2, 3, 3]) ------

std::vector<float> convWeights() { return randomFloats(3 * 2 * 3 * 3, 11); }

std::vector<uint8_t> convProgram() {
  ArtifactBuilder a;
  a.symbols = {{"n", 1, 4}};
  uint32_t x = a.symbolicInput(fb::DType_F32, {"n", "2", "5", "5"}, "x");
  std::vector<float> w = convWeights();
  uint32_t wb = a.constant(fb::DType_F32, {3, 2, 3, 3}, w.data());
  uint32_t y = a.symbolicOutput(fb::DType_F32, {"n", "3", "3", "3"}, "y");
  a.conv(x, wb, y, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1);
  return a.finish();
}

std::vector<float> convReference(const std::vector<float> &x, int64_t n) {
  std::vector<float> w = convWeights(), y((size_t)(n * 27));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < 3; ++o)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          double sum = 0;
          for (int64_t c = 0; c < 2; ++c)
            for (int64_t ki = 0; ki < 3; ++ki)
              for (int64_t kj = 0; kj < 3; ++kj)
                sum += (double)x[((b * 2 + c) * 5 + i + ki) * 5 + j + kj] *
                       w[((o * 2 + c) * 3 + ki) * 3 + kj];
          y[((b * 3 + o) * 3 + i) * 3 + j] = (float)sum;
        }
  return y;
}

TEST(SymbolicProgram, ConvolutionsRunAtEveryBatchAndKeepTheirWeights) {
  std::vector<uint8_t> bytes = convProgram();
  std::unique_ptr<Program> p = Program::load(bytes.data(), bytes.size(), 2);
  const float *packed = nullptr;
  for (int64_t n : {1, 4, 2}) {
    p->bindInputShapes({{n, 2, 5, 5}});
    const ConvStep &step = std::get<ConvStep>(p->steps()[0]);
    EXPECT_EQ(step.geometry.batch, n);
    if (packed) { // the weights packed at the first binding
      EXPECT_EQ(step.weightCache.matrices.at(0).data.get(), packed);
    }
    std::vector<float> x = randomFloats((size_t)(n * 50), (unsigned)n), y((size_t)(n * 27));
    const void *in[] = {x.data()};
    void *out[] = {y.data()};
    p->run(in, out);
    expectClose(y.data(), convReference(x, n), 1e-5, 1e-5, "conv at n = " + std::to_string(n));
    packed = step.weightCache.matrices.at(0).data.get();
  }
}

// ---- Loading: what is checked at every size --------------------------------------------------------

TEST(SymbolicLoad, RejectsDamagedArtifacts) {
  {
    ArtifactBuilder a = gemmProgram();
    a.buffers[3].dims[0] = "m +";
    EXPECT_CONTAINS(loadError(a.finish()), "buffer 3 dim 0: 'm +' is not a size expression");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.inputs[0].dims[0] = "batch";
    EXPECT_CONTAINS(loadError(a.finish()), "input 0 'x' dim 0 ('batch') reads the size symbol "
                                           "'batch', which the program does not declare (it "
                                           "declares m in 1..64)");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.arenaBytes = 4095; // planned at m = 64, u ends at 4096
    EXPECT_CONTAINS(loadError(a.finish()),
                    "buffer 4 (arena 0, f32[m, 8] at offset 2048): it takes up to 2048 bytes "
                    "over the size ranges (m in 1..64), which end past the arena (4095 bytes)");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.symbols[0].max = 1000; // the plan no longer holds at the max
    EXPECT_CONTAINS(loadError(a.finish()), "end past the arena (4096 bytes)");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.symbols[0].max = INT64_MAX; // an unbounded temporary
    EXPECT_CONTAINS(loadError(a.finish()), "end past the arena");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.buffers[6].shape = {2};
    EXPECT_CONTAINS(loadError(a.finish()), "the symbol values are i64[1] at offset 0");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.buffers[6].dtype = fb::DType_I32;
    a.kernels[0].params[3].dtype = fb::DType_I32;
    EXPECT_CONTAINS(loadError(a.finish()), "the symbol values are i64[1] at offset 0");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.symbols[0] = {"m", 5, 4};
    EXPECT_CONTAINS(loadError(a.finish()),
                    "size symbol 0 ('m') has the range 5..4: sizes need 0 <= min <= max");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.symbols[0] = {"m", -1, 4};
    EXPECT_CONTAINS(loadError(a.finish()), "has the range -1..4");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.symbols.push_back({"m", 1, 2});
    EXPECT_CONTAINS(loadError(a.finish()), "size symbol 1 ('m') is declared twice");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.symbols[0].name = "2x";
    EXPECT_CONTAINS(loadError(a.finish()), "size symbol 0 ('2x') is not a symbol name");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.kernels[0].params[1] = ArtifactBuilder::param(fb::DType_F32, {"2*m"});
    EXPECT_CONTAINS(loadError(a.finish()), "passes buffer 1 (f32[m]) as parameter 1, which is "
                                           "f32[m*2]");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.kernels[0].params[1] = ArtifactBuilder::Tensor{"", fb::DType_F32, {64}};
    EXPECT_CONTAINS(loadError(a.finish()), "as parameter 1, which is f32[64]");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.buffers[3].shape[0] = 64; // both a size and an expression
    EXPECT_CONTAINS(loadError(a.finish()), "buffer 3 dim 0 has both a size (64) and an "
                                           "expression");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.buffers[3].dims = {"m"}; // one expression for two dims
    EXPECT_CONTAINS(loadError(a.finish()), "buffer 3 has 1 dim expressions for rank 2");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.buffers[2].dims = {"m", ""}; // a symbolic constant
    a.buffers[2].shape = {-1, 8};
    EXPECT_CONTAINS(loadError(a.finish()), "a constant's shape is static");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.symbols.clear(); // a Symbols buffer, and dims, without symbols
    EXPECT_CONTAINS(loadError(a.finish()), "which the program does not declare");
  }
  {
    ArtifactBuilder a = gemmProgram();
    a.copy(3, 6); // a step writing the symbol values
    EXPECT_CONTAINS(loadError(a.finish()), "writes buffer 6, which is the symbol values");
  }
}

TEST(SymbolicLoad, ChecksTheLaunchListsStructureAtLoad) {
  ArtifactBuilder a = gemmProgram();
  a.gemm(0, 2, 99);
  EXPECT_CONTAINS(loadError(a.finish()), "launch 3 (gemm) names buffer 99");
}

TEST(SymbolicLoad, ChecksGeometriesAtEachBinding) {
  // t is [m, 8] but the product [m, 16] x [16, 8] is computed into a [2*m, 4] buffer: an error
  // at the binding (the geometry needs sizes), naming the launch.
  ArtifactBuilder a = gemmProgram();
  a.buffers[3].dims = {"2*m", ""};
  a.buffers[3].shape = {-1, 4};
  a.kernels[0].params[0] = ArtifactBuilder::param(fb::DType_F32, {"2*m", "4"});
  tccrt::Program program = load(a.finish());
  EXPECT_CONTAINS(bindError(program, {{3, 16}, {3}}), "launch 0 (gemm): gemm: matrix shapes do "
                                                      "not agree");
}

TEST(SymbolicLoad, CudaGridWorkIsASizeExpressionOfDeclaredSymbols) {
  // KernelLaunch.grid_work (symbolic CUDA programs): verified before the driver is touched.
  auto program = [](const std::string &work, uint32_t perBlock) {
    ArtifactBuilder a = ArtifactBuilder::cuda();
    a.symbols = {{"m", 1, 4}};
    uint32_t x = a.symbolicInput(fb::DType_F32, {"m"}, "x");
    uint32_t y = a.symbolicOutput(fb::DType_F32, {"m"}, "y");
    uint32_t k = a.kernel("copy_m", {ArtifactBuilder::param(fb::DType_F32, {"m"}),
                                      ArtifactBuilder::param(fb::DType_F32, {"m"})});
    a.launch(k, {x, y}, {4, 1, 1}, {32, 1, 1});
    a.steps.back().gridWork = work;
    a.steps.back().workPerBlock = perBlock;
    a.cudaPtx.push_back({"compute_80", ".version 8.0\n.target sm_80\n.address_size 64\n"
                                       ".visible .entry copy_m(.param .u64 a, .param .u64 b) { ret; }\n"});
    return a.finish();
  };
  EXPECT_CONTAINS(loadError(program("n + 1", 32)),
                  "launch 0 (kernel 'copy_m'): its grid work ('n + 1') reads the size symbol 'n', "
                  "which the program does not declare");
  EXPECT_CONTAINS(loadError(program("m +", 32)), "its grid work: 'm +' is not a size expression");
  EXPECT_CONTAINS(loadError(program("m", 0)), "its grid work has no work per block");
}

TEST(SymbolicLoad, StaticProgramsAcceptTheirOwnShapesOnly) {
  ArtifactBuilder a;
  uint32_t x = a.input(fb::DType_F32, {16}, "x");
  uint32_t y = a.output(fb::DType_F32, {16}, "y");
  a.copy(x, y);
  tccrt::Program program = load(a.finish());
  EXPECT_EQ(program.symbols().size(), 0u);
  EXPECT_EQ(bindError(program, {{16}}), "");
  EXPECT_CONTAINS(bindError(program, {{17}}), "input 0 ('x') has shape f32[17], the program was "
                                              "compiled for f32[16]");
  std::vector<float> data = randomFloats(16, 3);
  tccrt::Tensor in(TCCRT_F32, {16});
  std::memcpy(in.data(), data.data(), 64);
  std::vector<tccrt::Tensor> inputs;
  inputs.push_back(std::move(in));
  std::vector<tccrt::Tensor> out = program.run(inputs); // still runs
  expectClose(out[0].data<float>(), data, 0, 0, "y");
}

// ---- The C API ---------------------------------------------------------------------------------------

TEST(SymbolicCApi, DescribesAndBindsTheSizes) {
  std::vector<uint8_t> bytes = gemmProgram().finish();
  tccrt_program *p = nullptr;
  ASSERT_EQ(tccrt_load_buffer(bytes.data(), bytes.size(), nullptr, &p), TCCRT_OK);
  ASSERT_EQ(tccrt_num_symbols(p), 1u);
  const char *name = nullptr;
  int64_t min = 0, max = 0;
  ASSERT_EQ(tccrt_symbol_info(p, 0, &name, &min, &max), TCCRT_OK);
  EXPECT_STREQ(name, "m");
  EXPECT_EQ(min, 1);
  EXPECT_EQ(max, kMaxM);
  EXPECT_EQ(tccrt_symbol_info(p, 0, nullptr, nullptr, nullptr), TCCRT_OK);
  EXPECT_EQ(tccrt_symbol_info(p, 1, &name, &min, &max), TCCRT_ERROR);
  EXPECT_CONTAINS(tccrt_last_error(), "symbol 1 out of range (the program has 1)");

  EXPECT_STREQ(tccrt_input_dim_expr(p, 0, 0), "m");
  EXPECT_EQ(tccrt_input_dim_expr(p, 0, 1), nullptr); // static
  EXPECT_STREQ(tccrt_input_dim_expr(p, 1, 0), "m");
  EXPECT_EQ(tccrt_input_dim_expr(p, 0, 2), nullptr);
  EXPECT_EQ(tccrt_input_dim_expr(p, 2, 0), nullptr);

  tccrt_tensor_info info;
  ASSERT_EQ(tccrt_input_info(p, 0, &info), TCCRT_OK);
  const int64_t *shapePointer = info.shape;
  EXPECT_EQ(info.shape[0], -1);
  EXPECT_EQ(info.bytes, 0u);

  int64_t x[] = {3, 16}, scale[] = {3};
  const int64_t *shapes[] = {x, scale};
  size_t ranks[] = {2, 1};
  ASSERT_EQ(tccrt_set_input_shapes(p, shapes, ranks), TCCRT_OK) << tccrt_last_error();
  ASSERT_EQ(tccrt_input_info(p, 0, &info), TCCRT_OK);
  EXPECT_EQ(info.shape, shapePointer); // the same storage, the bound values
  EXPECT_EQ(info.shape[0], 3);
  EXPECT_EQ(info.bytes, 3u * 16 * 4);
  ASSERT_EQ(tccrt_output_info(p, 0, &info), TCCRT_OK);
  EXPECT_EQ(std::vector<int64_t>(info.shape, info.shape + info.rank), (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(info.bytes, 3u * 8 * 4);
  EXPECT_EQ(tccrt_num_launches(p), 3u);

  x[0] = 70;
  scale[0] = 70;
  EXPECT_EQ(tccrt_set_input_shapes(p, shapes, ranks), TCCRT_ERROR);
  EXPECT_CONTAINS(tccrt_last_error(), "tccrt_set_input_shapes: input 'x' dim 0 is 70, outside "
                                      "the compiled assumption m in 1..64");
  EXPECT_EQ(tccrt_set_input_shapes(p, nullptr, ranks), TCCRT_ERROR);
  EXPECT_CONTAINS(tccrt_last_error(), "shapes is null");
  EXPECT_EQ(tccrt_set_input_shapes(nullptr, shapes, ranks), TCCRT_ERROR);
  EXPECT_EQ(tccrt_num_symbols(nullptr), 0u);
  tccrt_program_free(p);
}

TEST(SymbolicCApi, ProfilesTheBoundLaunches) {
  tccrt::Program program = load(gemmProgram().finish());
  ASSERT_EQ(tccrt_set_profiling(program.get(), 1), TCCRT_OK); // before any binding
  runAndCompare(program, 6, 9);
  ASSERT_EQ(tccrt_num_launches(program.get()), 3u);
  tccrt_launch_profile profile;
  ASSERT_EQ(tccrt_get_launch_profile(program.get(), 0, &profile), TCCRT_OK);
  EXPECT_STREQ(profile.name, "gemm f32 6x8x16");
  EXPECT_EQ(profile.calls, 1u);
  runAndCompare(program, 2, 10);
  ASSERT_EQ(tccrt_get_launch_profile(program.get(), 0, &profile), TCCRT_OK);
  EXPECT_STREQ(profile.name, "gemm f32 2x8x16");
  EXPECT_EQ(profile.calls, 2u);
}

// ---- The binder (tcc/Support/SymbolBinding.h) -------------------------------------------------------

std::vector<SymExpr> dimsOf(const std::vector<std::string> &texts) {
  std::vector<SymExpr> out;
  for (const std::string &t : texts)
    out.push_back(*SymExpr::parse(t));
  return out;
}

std::string bindingError(const std::vector<std::vector<std::string>> &dims,
                         const std::vector<std::vector<int64_t>> &shapes,
                         const SymbolRanges &ranges) {
  std::vector<std::vector<SymExpr>> declared;
  for (const auto &d : dims)
    declared.push_back(dimsOf(d));
  try {
    bindSymbols(declared, shapes, ranges, {"ids", "mask"});
    return "";
  } catch (const tcc::Error &e) {
    return e.what();
  }
}

TEST(SymbolBinding, SolvesPlainSymbolsFirstThenAffineDims) {
  // seq comes from mask's plain dim 0 (not from ids' 2*seq + 1, which then checks it), and
  // half from 2*half, which only mask's dim 1 reads.
  SymbolRanges ranges{{"batch", {1, 8}}, {"seq", {1, 512}}, {"half", {1, 100}}};
  std::vector<std::vector<SymExpr>> dims{dimsOf({"batch", "2*seq + 1"}),
                                         dimsOf({"seq", "2*half", "4"})};
  SymbolBindings b = bindSymbols(dims, {{2, 21}, {10, 6, 4}}, ranges, {"ids", "mask"});
  EXPECT_EQ(b.at("batch"), 2);
  EXPECT_EQ(b.at("seq"), 10); // from mask's plain dim, not ids' 2*seq + 1
  EXPECT_EQ(b.at("half"), 3);
  EXPECT_EQ(evaluateSym(SymExpr::parse("batch*seq + floordiv(half, 2)").value(), b), 21);
}

TEST(SymbolBinding, ErrorsNameTheInputDimAndAssumption) {
  SymbolRanges ranges{{"batch", {1, 8}}, {"seq", {16, 512}}};
  EXPECT_EQ(bindingError({{"batch", "seq"}}, {{2, 16}}, ranges), "");
  EXPECT_EQ(bindingError({{"batch", "seq"}}, {{9, 16}}, ranges),
            "input 'ids' dim 0 is 9, outside the compiled assumption batch in 1..8");
  EXPECT_EQ(bindingError({{"2*seq"}}, {{30}}, ranges),
            "input 'ids' dim 0 is 30, so seq = 15, outside the compiled assumption seq in "
            "16..512");
  EXPECT_EQ(bindingError({{"2*seq"}}, {{33}}, ranges),
            "input 'ids' dim 0 is 33, but the program expects seq*2 for an integer seq");
  EXPECT_EQ(bindingError({{"batch", "seq"}, {"batch", "seq"}}, {{2, 16}, {3, 16}}, ranges),
            "input 'mask' dim 0 is 3, but the program expects batch = 2 (set by input 'ids' dim "
            "0)");
  EXPECT_EQ(bindingError({{"batch", "4"}}, {{2, 5}}, ranges),
            "input 'ids' dim 1 is 5, but the program fixes it to 4");
  EXPECT_EQ(bindingError({{"batch*seq"}}, {{32}}, ranges).rfind("input 'ids' dim 0: batch*seq: ",
                                                                0),
            0u); // not affine in one symbol: nothing binds it
  EXPECT_EQ(bindingError({{"batch", "seq"}}, {{2}}, ranges),
            "input 'ids' has rank 1, the program expects rank 2 (batchxseq)");
  EXPECT_EQ(bindingError({{"batch"}}, {{2}, {3}}, ranges),
            "the program takes 1 inputs, 2 were given");
  EXPECT_EQ(bindingError({{"seq - 9223372036854775807"}}, {{5}}, ranges),
            "input 'ids' dim 0 is 5, but the program expects seq - 9223372036854775807 for an "
            "integer seq"); // size - b overflows: an error, not undefined behaviour
}

TEST(SymbolBinding, DescribesAndBoundsRanges) {
  EXPECT_EQ(describeRange("seq", {16, 512}), "seq in 16..512");
  EXPECT_EQ(describeRange("seq", {16, INT64_MAX}), "seq >= 16");
  EXPECT_EQ(describeRange("seq", {8, 8}), "seq = 8");
  SymbolRanges ranges{{"batch", {1, 8}}, {"seq", {16, 512}}};
  EXPECT_EQ(describeSymbolRanges(ranges), "batch in 1..8, seq in 16..512");
  SymbolRange r = rangeOf(*SymExpr::parse("batch*seq*4"), ranges);
  EXPECT_EQ(r.min, 64);
  EXPECT_EQ(r.max, 8 * 512 * 4);
}

} // namespace
} // namespace tcc::rt::test
