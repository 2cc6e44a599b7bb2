//===- RuntimeTest.cpp - Loading, verification, kernels and the C API -----===//
#include "TestUtil.h"

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <unistd.h>

using namespace tcc::rt::test;

namespace {

using T = ArtifactBuilder::Tensor;

/// A program using every kind of step: kernels on inputs, constants and arena views, a gemm, a
/// conv, a topk and copies. Inputs: x f32[64], m f32[8, 8]; outputs: y f32[64], z f32[8, 8],
/// c f32[1, 2, 3, 3], v f32[8, 3], i i64[8, 3], t i32[1].
ArtifactBuilder fullProgram() {
  ArtifactBuilder a;
  std::vector<float> bias = randomFloats(64, 7), w = randomFloats(2 * 1 * 2 * 2, 8);
  uint32_t x = a.input(fb::DType_F32, {64}, "x");
  uint32_t m = a.input(fb::DType_F32, {8, 8}, "m");
  uint32_t y = a.output(fb::DType_F32, {64}, "y");
  uint32_t z = a.output(fb::DType_F32, {8, 8}, "z");
  uint32_t c = a.output(fb::DType_F32, {1, 2, 3, 3}, "c");
  uint32_t v = a.output(fb::DType_F32, {8, 3}, "v");
  uint32_t i = a.output(fb::DType_I64, {8, 3}, "i");
  uint32_t t = a.output(fb::DType_I32, {1}, "t");
  uint32_t b = a.constant(fb::DType_F32, {64}, bias.data());
  uint32_t wc = a.constant(fb::DType_F32, {2, 1, 2, 2}, w.data());
  uint32_t tmp = a.arena(0, fb::DType_F32, {64});
  uint32_t tmpMatrix = a.arena(0, fb::DType_F32, {8, 8});   // a view of tmp
  uint32_t tmpImage = a.arena(0, fb::DType_F32, {1, 1, 8, 8}); // another view
  uint32_t add = a.kernel("add64", {T{"", fb::DType_F32, {64}}, T{"", fb::DType_F32, {64}},
                                    T{"", fb::DType_F32, {64}}});
  uint32_t relu = a.kernel("relu64", {T{"", fb::DType_F32, {64}}, T{"", fb::DType_F32, {64}}});
  uint32_t threads = a.kernel("threads", {T{"", fb::DType_I32, {1}}});
  a.launch(add, {x, b, tmp});     // tmp = x + bias
  a.launch(relu, {tmp, y});       // y = relu(tmp)
  a.gemm(tmpMatrix, m, z);        // z = tmp[8, 8] x m
  a.conv(tmpImage, wc, c, {3, 3}, {1, 0}, {0, 1}, {1, 1}, 1);
  a.topk(tmpMatrix, v, i, 1, true);
  a.launch(threads, {t});
  return a;
}

struct RandomInputs {
  std::vector<float> x = randomFloats(64, 1), m = randomFloats(64, 2);
};

TEST(RuntimeKernels, FullProgramMatchesHandComputation) {
  ArtifactBuilder a = fullProgram();
  RandomInputs in;
  auto bytes = a.finish();
  tccrt::Program program = tccrt::Program::fromBuffer(bytes.data(), bytes.size(), 3);
  ASSERT_EQ(program.numInputs(), 2u);
  ASSERT_EQ(program.numOutputs(), 6u);
  EXPECT_EQ(program.input(1).name, "m");
  EXPECT_EQ(program.output(2).shape, (std::vector<int64_t>{1, 2, 3, 3}));
  EXPECT_EQ(program.output(4).dtype, TCCRT_I64);
  EXPECT_EQ(program.output(0).bytes, 256u);
  EXPECT_EQ(program.device(), TCCRT_DEVICE_CPU);
  std::vector<tccrt::Tensor> inputs = program.makeInputs();
  std::memcpy(inputs[0].data(), in.x.data(), 256);
  std::memcpy(inputs[1].data(), in.m.data(), 256);
  for (int repeat = 0; repeat < 2; ++repeat) { // the arena is reused across runs
    auto out = program.run(inputs);
    const float *bias = reinterpret_cast<const float *>(a.constantData.data());
    std::vector<float> tmp(64), relu(64), z(64, 0.0f);
    for (int k = 0; k < 64; ++k) {
      tmp[k] = in.x[k] + bias[k];
      relu[k] = std::max(tmp[k], 0.0f);
    }
    for (int r = 0; r < 8; ++r)
      for (int col = 0; col < 8; ++col)
        for (int k = 0; k < 8; ++k)
          z[r * 8 + col] += tmp[r * 8 + k] * in.m[k * 8 + col];
    expectClose(out[0].data<float>(), relu, 0, 0, "relu(x + bias)");
    expectClose(out[1].data<float>(), z, 1e-5, 1e-5, "gemm");
    // topk of each row of tmp, k = 3.
    for (int r = 0; r < 8; ++r) {
      std::vector<int> order(8);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int p, int q) { return tmp[r * 8 + p] > tmp[r * 8 + q]; });
      for (int k = 0; k < 3; ++k) {
        EXPECT_EQ(out[4].data<int64_t>()[r * 3 + k], order[k]);
        EXPECT_EQ(out[3].data<float>()[r * 3 + k], tmp[r * 8 + order[k]]);
      }
    }
    // conv: 8x8 image padded (1, 0) low and (0, 1) high -> 9x9, 2x2 kernel, stride 3 -> 3x3.
    const float *w = reinterpret_cast<const float *>(a.constantData.data() + 256);
    for (int oc = 0; oc < 2; ++oc)
      for (int oy = 0; oy < 3; ++oy)
        for (int ox = 0; ox < 3; ++ox) {
          float acc = 0;
          for (int ky = 0; ky < 2; ++ky)
            for (int kx = 0; kx < 2; ++kx) {
              int iy = oy * 3 + ky - 1, ix = ox * 3 + kx;
              if (iy >= 0 && iy < 8 && ix >= 0 && ix < 8)
                acc += tmp[iy * 8 + ix] * w[oc * 4 + ky * 2 + kx];
            }
          EXPECT_NEAR(out[2].data<float>()[oc * 9 + oy * 3 + ox], acc, 1e-5);
        }
    EXPECT_EQ(out[5].data<int32_t>()[0], 3) << "kernels get the program's thread count";
  }
  program.setNumThreads(1);
  auto out = program.run(inputs);
  EXPECT_EQ(out[5].data<int32_t>()[0], 1);
  program.setNumThreads(0);
  out = program.run(inputs);
  EXPECT_GE(out[5].data<int32_t>()[0], 1);
}

TEST(RuntimeKernels, TwoProgramsFromTheSameModule) {
  // The same shared object loaded twice (and once more after one is freed) stays independent.
  auto bytes = fullProgram().finish();
  auto p1 = std::make_unique<tccrt::Program>(tccrt::Program::fromBuffer(bytes.data(), bytes.size(), 1));
  tccrt::Program p2 = tccrt::Program::fromBuffer(bytes.data(), bytes.size(), 2);
  auto in1 = p1->makeInputs(), in2 = p2.makeInputs();
  for (auto *ins : {&in1, &in2})
    for (auto &t : *ins)
      std::memset(t.data(), 0, t.bytes());
  EXPECT_EQ(p1->run(in1)[5].data<int32_t>()[0], 1);
  EXPECT_EQ(p2.run(in2)[5].data<int32_t>()[0], 2);
  p1.reset();
  tccrt::Program p3 = tccrt::Program::fromBuffer(bytes.data(), bytes.size(), 4);
  auto in3 = p3.makeInputs();
  for (auto &t : in3)
    std::memset(t.data(), 0, t.bytes());
  EXPECT_EQ(p3.run(in3)[5].data<int32_t>()[0], 4);
  EXPECT_EQ(p2.run(in2)[5].data<int32_t>()[0], 2);
}

TEST(RuntimeKernels, LoadFromFile) {
  auto bytes = fullProgram().finish();
  std::string path = ::testing::TempDir() + "/tccrt-test-" + std::to_string(::getpid()) + ".tcc";
  FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  tccrt::Program program = tccrt::Program::fromFile(path, 1);
  EXPECT_EQ(program.numOutputs(), 6u);
  std::remove(path.c_str());
  try {
    tccrt::Program::fromFile(path, 1);
    FAIL() << "loading a missing file succeeded";
  } catch (const tccrt::Error &e) {
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
}

//===--- Verification -----------------------------------------------------===//

/// Loads the artifact, expecting failure with a message containing `expected`.
void expectRejected(const std::vector<uint8_t> &bytes, const std::string &expected) {
  tccrt_program *p = reinterpret_cast<tccrt_program *>(0x1);
  EXPECT_EQ(tccrt_load_buffer(bytes.data(), bytes.size(), nullptr, &p), TCCRT_ERROR);
  EXPECT_EQ(p, nullptr);
  std::string message = tccrt_last_error();
  EXPECT_NE(message.find(expected), std::string::npos)
      << "message: " << message << "\nexpected to contain: " << expected;
  tccrt_program_free(p);
}

TEST(RuntimeVerify, RejectsWhatTheFuzzerFound) {
  // Batch dims whose product overflows, hidden from the buffer checks by empty dims: computing
  // the GEMM's batch strides overflowed (signed: undefined).
  expectRejected(readFile(std::string(TCCRT_FUZZ_FINDINGS) + "/gemm-batch-stride-overflow.tcc"),
                 "overflow a 64-bit product");
  // A training artifact's mesh sizes at a misaligned offset (read unaligned: undefined).
  expectRejected(readFile(std::string(TCCRT_FUZZ_FINDINGS) + "/training-mesh-misaligned.tcc"),
                 "misaligned");
}

TEST(RuntimeVerify, RunsWhatTheFuzzerFoundWithoutHugeScratch) {
  // A top-k step over lines of 3e15 elements of which there are none: the scratch for one line
  // was allocated anyway (24 PB). It runs, and allocates nothing of the kind.
  std::vector<uint8_t> bytes =
      readFile(std::string(TCCRT_FUZZ_FINDINGS) + "/topk-empty-lines.tcc");
  tccrt::Program program = tccrt::Program::fromBuffer(bytes.data(), bytes.size(), 1);
  std::vector<tccrt::Tensor> in = program.makeInputs();
  for (tccrt::Tensor &t : in)
    std::memset(t.data(), 0, t.bytes());
  EXPECT_NO_THROW(program.run(in));
}

TEST(RuntimeVerify, RejectsConvActivationsItCannotApply) {
  auto convArtifact = [](fb::DType dtype, fb::ConvActivation kind, double alpha, double beta) {
    ArtifactBuilder a;
    uint32_t x = a.input(dtype, {1, 2, 5, 5}), w = a.input(dtype, {3, 2, 3, 3});
    uint32_t y = a.output(dtype, {1, 3, 3, 3});
    a.conv(x, w, y, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1);
    a.convActivation(kind, alpha, beta);
    return a.finish();
  };
  expectRejected(convArtifact(fb::DType_BF16, fb::ConvActivation_Silu, 0, 0),
                 "has an epilogue on bf16: convolution epilogues are for f32 convolutions");
  expectRejected(convArtifact(fb::DType_F32, fb::ConvActivation_HardSwish, NAN, 0.5),
                 "its hard swish gate");
  expectRejected(convArtifact(fb::DType_F32, static_cast<fb::ConvActivation>(7), 0, 0),
                 "unknown activation 7");
}

TEST(RuntimeVerify, RejectsWhatTheExecutorCannotRun) {
  {
    ArtifactBuilder a = fullProgram();
    a.version = 2;
    expectRejected(a.finish(), "artifact version 2, this runtime reads 1");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.device = fb::Device_CUDA;
    expectRejected(a.finish(), "CUDA");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.arenaBytes = 255;
    expectRejected(a.finish(), "end past the arena (255 bytes)");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.moduleHash = 12345;
    expectRejected(a.finish(), "do not match their hash");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.withModule = false;
    expectRejected(a.finish(), "no CPU module");
  }
  {
    // Kernels built for an ISA extension this CPU lacks (an unknown one: no CPU has it).
    ArtifactBuilder a = fullProgram();
    a.isa = {"sse4.2", "avx-9000"};
    expectRejected(a.finish(), "compiled for a CPU with 'avx-9000', which this CPU lacks");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.kernels[0].name = "no_such_kernel";
    expectRejected(a.finish(), "kernel 'no_such_kernel' is not exported by the CPU module");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.kernels[1].params[0].shape = {32};
    expectRejected(a.finish(), "as parameter 0, which is f32[32]");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.steps[0].ops.push_back(0);
    expectRejected(a.finish(), "passes 4 buffers; the kernel takes 3");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.steps[0].ops[0] = 9;
    expectRejected(a.finish(), "runs kernel 9; there are 3");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.steps[2].ops[1] = 99;
    expectRejected(a.finish(), "names buffer 99");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.buffers[0].index = 5;
    expectRejected(a.finish(), "there are 2 inputs");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.buffers[1].offset = 4;
    expectRejected(a.finish(), "end past input 1 (256 bytes)");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.buffers[1].shape = {-8, 8};
    expectRejected(a.finish(), "negative dim");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.buffers[8].shape = {65};
    expectRejected(a.finish(), "end past constant 0 (256 bytes)");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.constants[1].offset = 200;
    expectRejected(a.finish(), "not a multiple of 64");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.constants[1].offset = 1024;
    expectRejected(a.finish(), "ends past constant_data");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.inputs[0].dtype = (fb::DType)42;
    expectRejected(a.finish(), "invalid dtype (42)");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.steps[2].ops[2] = 1; // gemm writing an input
    expectRejected(a.finish(), "writes buffer 1, which is an input");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.steps[2].flagA = true; // 8x8 stays consistent: transpose both and make b mismatch instead
    a.steps[2].ops[1] = 10;  // b = tmp [64] (rank 1)
    expectRejected(a.finish(), "same rank, at least 2");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.steps[3].groups = 2;
    expectRejected(a.finish(), "channel counts do not agree with groups = 2");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.steps[3].strides = {2, 3};
    expectRejected(a.finish(), "output spatial dim 0 is 3, the convolution");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.steps[3].padLow = {1};
    expectRejected(a.finish(), "one entry per spatial dim");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.steps[3].dilations = {0, 1};
    expectRejected(a.finish(), "strides and dilations must be in [1, 2^40]");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.steps[4].dim = 2;
    expectRejected(a.finish(), "dim 2 is out of range");
  }
  {
    ArtifactBuilder a = fullProgram();
    a.steps[4].ops[2] = 3; // indices = v (f32)
    expectRejected(a.finish(), "indices be i64");
  }
  {
    ArtifactBuilder a;
    uint32_t x = a.input(fb::DType_F32, {4});
    uint32_t y = a.output(fb::DType_F32, {5});
    a.copy(x, y);
    expectRejected(a.finish(), "sizes differ");
  }
  {
    std::vector<uint8_t> junk(100, 0);
    expectRejected(junk, "not a tcc artifact");
  }
}

//===--- Damaged files ----------------------------------------------------===//

/// Loads (and when that succeeds, runs) a possibly damaged artifact. Returns whether it loaded.
bool loadAndRun(const std::vector<uint8_t> &bytes) {
  tccrt_program *p = nullptr;
  if (tccrt_load_buffer(bytes.data(), bytes.size(), nullptr, &p) != TCCRT_OK) {
    EXPECT_EQ(p, nullptr);
    EXPECT_STRNE(tccrt_last_error(), "");
    return false;
  }
  tccrt_set_num_threads(p, 1);
  std::vector<std::vector<uint8_t>> in(tccrt_num_inputs(p)), out(tccrt_num_outputs(p));
  std::vector<const void *> inPtr;
  std::vector<void *> outPtr;
  for (size_t i = 0; i < in.size(); ++i) {
    tccrt_tensor_info info;
    EXPECT_EQ(tccrt_input_info(p, i, &info), TCCRT_OK);
    in[i].assign(std::min<size_t>(info.bytes, 1 << 24), 0x3f); // absurd sizes: run fails below
    inPtr.push_back(info.bytes <= (1 << 24) ? in[i].data() : nullptr);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    tccrt_tensor_info info;
    EXPECT_EQ(tccrt_output_info(p, i, &info), TCCRT_OK);
    out[i].assign(std::min<size_t>(info.bytes, 1 << 24), 0);
    outPtr.push_back(info.bytes <= (1 << 24) ? out[i].data() : nullptr);
  }
  tccrt_run(p, inPtr.data(), outPtr.data()); // may fail (null tensors), must not crash
  tccrt_program_free(p);
  return true;
}

TEST(RuntimeDamaged, TruncatedFilesAreRejected) {
  auto bytes = fullProgram().finish();
  ASSERT_TRUE(loadAndRun(bytes));
  size_t step = std::max<size_t>(1, bytes.size() / 400);
  for (size_t length = 0; length + 64 < bytes.size(); length += step) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + length);
    EXPECT_FALSE(loadAndRun(cut)) << "truncated to " << length << " of " << bytes.size();
  }
  // The last bytes of a FlatBuffer may be padding of its first-written object: cutting those
  // off leaves a valid artifact. Anything loaded must run (loadAndRun runs it).
  for (size_t length = bytes.size() - std::min<size_t>(bytes.size(), 64); length < bytes.size();
       ++length) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + length);
    bool loaded = loadAndRun(cut);
    if (length + 8 <= bytes.size()) {
      EXPECT_FALSE(loaded) << "truncated to " << length << " of " << bytes.size();
    }
  }
}

TEST(RuntimeDamaged, FlippedBytesFailCleanlyOrLoad) {
  auto bytes = fullProgram().finish();
  // TCCRT_FUZZ_TRIALS / TCCRT_FUZZ_SEED run a longer or different campaign.
  const char *trialsEnv = std::getenv("TCCRT_FUZZ_TRIALS"), *seedEnv = std::getenv("TCCRT_FUZZ_SEED");
  int trials = trialsEnv ? std::atoi(trialsEnv) : 3000;
  std::mt19937 rng(seedEnv ? (unsigned)std::atoi(seedEnv) : 1234u);
  int loaded = 0, rejected = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<uint8_t> damaged = bytes;
    int flips = trial % 3 != 2 ? 1 : 1 + (int)(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      size_t at = rng() % damaged.size();
      // Half the trials aim at the FlatBuffers tables rather than the shared object's bytes.
      if (trial % 2 == 0 && damaged.size() > 4096) {
        at = rng() % 2048;
        if (rng() % 2)
          at = damaged.size() - 1 - at;
      }
      damaged[at] ^= (uint8_t)(1 + rng() % 255);
    }
    (loadAndRun(damaged) ? loaded : rejected)++;
  }
  EXPECT_GT(rejected, 0);
  std::printf("damaged artifacts: %d loaded, %d rejected\n", loaded, rejected);
}

//===--- C API ------------------------------------------------------------===//

TEST(RuntimeCApi, NullArgumentsAndBadIndices) {
  tccrt_program *p = nullptr;
  EXPECT_EQ(tccrt_load_buffer(nullptr, 10, nullptr, &p), TCCRT_ERROR);
  EXPECT_STREQ(tccrt_last_error(), "tccrt_load_buffer: data is null");
  EXPECT_EQ(tccrt_load_buffer("x", 1, nullptr, nullptr), TCCRT_ERROR);
  EXPECT_STREQ(tccrt_last_error(), "tccrt_load_buffer: out is null");
  EXPECT_EQ(tccrt_load_file(nullptr, nullptr, &p), TCCRT_ERROR);
  EXPECT_STREQ(tccrt_last_error(), "tccrt_load_file: path is null");
  EXPECT_EQ(tccrt_load_file("/nonexistent/model.tcc", nullptr, &p), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("cannot open '/nonexistent/model.tcc'"),
            std::string::npos);
  tccrt_options bad{-2};
  auto bytes = fullProgram().finish();
  EXPECT_EQ(tccrt_load_buffer(bytes.data(), bytes.size(), &bad, &p), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("num_threads must be >= 0"), std::string::npos);

  tccrt_options one{1};
  ASSERT_EQ(tccrt_load_buffer(bytes.data(), bytes.size(), &one, &p), TCCRT_OK)
      << tccrt_last_error();
  EXPECT_STREQ(tccrt_last_error(), "");
  tccrt_tensor_info info;
  EXPECT_EQ(tccrt_input_info(p, 2, &info), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("input 2 out of range (the program has 2"),
            std::string::npos);
  EXPECT_EQ(tccrt_output_info(p, 6, &info), TCCRT_ERROR);
  EXPECT_EQ(tccrt_input_info(p, 0, nullptr), TCCRT_ERROR);
  EXPECT_EQ(tccrt_input_info(nullptr, 0, &info), TCCRT_ERROR);
  EXPECT_EQ(tccrt_set_num_threads(p, -1), TCCRT_ERROR);
  EXPECT_EQ(tccrt_set_num_threads(nullptr, 1), TCCRT_ERROR);
  EXPECT_EQ(tccrt_run(nullptr, nullptr, nullptr), TCCRT_ERROR);
  EXPECT_EQ(tccrt_run(p, nullptr, nullptr), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("inputs is null"), std::string::npos);
  std::vector<float> x(64), m(64);
  const void *ins[] = {x.data(), nullptr};
  std::vector<uint8_t> o0(256), o1(256), o2(72), o3(96), o4(192), o5(4);
  void *outs[] = {o0.data(), o1.data(), o2.data(), o3.data(), o4.data(), o5.data()};
  EXPECT_EQ(tccrt_run(p, ins, outs), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("input 1 ('m') is null"), std::string::npos);
  ins[1] = m.data();
  EXPECT_EQ(tccrt_run(p, ins, outs), TCCRT_OK) << tccrt_last_error();
  EXPECT_EQ(tccrt_num_inputs(nullptr), 0u);
  EXPECT_EQ(tccrt_num_outputs(nullptr), 0u);
  tccrt_program_free(p);
  tccrt_program_free(nullptr);
  EXPECT_NE(std::string(tccrt_version()).find("artifact version 1"), std::string::npos);
}

TEST(RuntimeCApi, AllocatorGoesThroughTheCache) {
  tccrt_allocator_stats before, after;
  tccrt_allocator_get_stats(&before);
  void *p = tccrt_alloc(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  tccrt_allocator_get_stats(&after);
  EXPECT_EQ(after.num_allocs, before.num_allocs + 1);
  EXPECT_GE(after.allocated_bytes, before.allocated_bytes + 1000);
  tccrt_free(p);
  tccrt_free(nullptr);
  tccrt_allocator_empty_cache();
  tccrt_allocator_get_stats(nullptr);
}

TEST(RuntimeCApi, ProfilingTimesEveryLaunch) {
  auto bytes = fullProgram().finish();
  tccrt_program *p = nullptr;
  ASSERT_EQ(tccrt_load_buffer(bytes.data(), bytes.size(), nullptr, &p), TCCRT_OK)
      << tccrt_last_error();
  ASSERT_EQ(tccrt_num_launches(p), 6u);
  RandomInputs in;
  std::vector<float> y(64), z(64), c(18), v(24);
  std::vector<int64_t> i(24);
  int32_t t = 0;
  const void *inputs[] = {in.x.data(), in.m.data()};
  void *outputs[] = {y.data(), z.data(), c.data(), v.data(), i.data(), &t};
  tccrt_launch_profile prof;
  // Off: names and nodes, no counts.
  ASSERT_EQ(tccrt_run(p, inputs, outputs), TCCRT_OK) << tccrt_last_error();
  ASSERT_EQ(tccrt_get_launch_profile(p, 2, &prof), TCCRT_OK);
  EXPECT_STREQ(prof.kind, "gemm");
  EXPECT_STREQ(prof.name, "gemm f32 8x8x8");
  EXPECT_STREQ(prof.nodes, ""); // the builder's artifacts name no model nodes
  EXPECT_EQ(prof.calls, 0u);
  ASSERT_EQ(tccrt_set_profiling(p, 1), TCCRT_OK);
  for (int run = 0; run < 3; ++run)
    ASSERT_EQ(tccrt_run(p, inputs, outputs), TCCRT_OK) << tccrt_last_error();
  const char *kinds[] = {"kernel", "kernel", "gemm", "conv", "topk", "kernel"};
  double previousEnd = 0;
  for (size_t k = 0; k < 6; ++k) {
    ASSERT_EQ(tccrt_get_launch_profile(p, k, &prof), TCCRT_OK);
    EXPECT_STREQ(prof.kind, kinds[k]) << k;
    EXPECT_EQ(prof.calls, 3u) << k;
    EXPECT_GE(prof.total_seconds, prof.last_seconds) << k;
    EXPECT_GE(prof.last_start_seconds, previousEnd) << k; // launches run in order
    previousEnd = prof.last_start_seconds + prof.last_seconds;
  }
  ASSERT_EQ(tccrt_get_launch_profile(p, 0, &prof), TCCRT_OK);
  EXPECT_STREQ(prof.name, "add64");
  ASSERT_EQ(tccrt_get_launch_profile(p, 3, &prof), TCCRT_OK);
  EXPECT_STREQ(prof.name, "conv 1x1x8x8 -> 2x3x3, kernel 2x2 (depthwise)"); // one input channel
  ASSERT_EQ(tccrt_get_launch_profile(p, 4, &prof), TCCRT_OK);
  EXPECT_STREQ(prof.name, "topk 3 of 8");
  // Turning it on again clears the counts; off stops counting.
  ASSERT_EQ(tccrt_set_profiling(p, 1), TCCRT_OK);
  ASSERT_EQ(tccrt_get_launch_profile(p, 0, &prof), TCCRT_OK);
  EXPECT_EQ(prof.calls, 0u);
  ASSERT_EQ(tccrt_set_profiling(p, 0), TCCRT_OK);
  ASSERT_EQ(tccrt_run(p, inputs, outputs), TCCRT_OK);
  ASSERT_EQ(tccrt_get_launch_profile(p, 0, &prof), TCCRT_OK);
  EXPECT_EQ(prof.calls, 0u);
  EXPECT_EQ(tccrt_get_launch_profile(p, 6, &prof), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("launch 6 is out of range (6 launches)"),
            std::string::npos);
  EXPECT_EQ(tccrt_set_profiling(nullptr, 1), TCCRT_ERROR);
  tccrt_program_free(p);
}

TEST(RuntimeCApi, ErrorsAreThreadLocal) {
  tccrt_program *p = nullptr;
  EXPECT_EQ(tccrt_load_file(nullptr, nullptr, &p), TCCRT_ERROR);
  std::string other;
  std::thread([&] { other = tccrt_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_STRNE(tccrt_last_error(), "");
}

} // namespace

namespace {

/// Writes the full test program to $TCCRT_EXAMPLE_ARTIFACT for the tccrt-example-c CTest (a
/// fixture); skipped when the variable is unset.
TEST(RuntimeExample, WriteArtifact) {
  const char *path = std::getenv("TCCRT_EXAMPLE_ARTIFACT");
  if (!path)
    GTEST_SKIP() << "TCCRT_EXAMPLE_ARTIFACT is not set";
  auto bytes = fullProgram().finish();
  FILE *f = std::fopen(path, "wb");
  ASSERT_TRUE(f) << path;
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
}

} // namespace
