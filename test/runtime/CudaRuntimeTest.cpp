//===- CudaRuntimeTest.cpp - CUDA programs through the loader and executor -===//
//
// Hand-built CUDA artifacts run through the real loader, CudaExecutor and cuBLASLt planning.
// Three ways to run these tests (test/runtime/CMakeLists.txt):
//  * tccrt-cuda-fake: on the fake CUDA driver (fakecuda/FakeCuda.cpp, kernels from
//    CudaTestKernels.cpp) and the fake cuBLASLt (fakecuda/FakeCublasLt.cpp), which computes
//    the products from exactly the descriptors the runtime set: every test runs.
//  * the plain tccrt-tests entries: the real driver and cuBLASLt when a GPU is present (the
//    kernels are CudaTestKernels.cu, compiled by nvcc at build time); without one, every test
//    that needs a GPU skips naming the reason, the structural ones run.
//  * tccrt-cuda-no-driver: TCC_CUDA_DRIVER=/nonexistent: a valid CUDA artifact fails with the
//    no-GPU message, a damaged one with its structural message.
#include "CudaCollectives.h"
#include "TestUtil.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <type_traits>

using namespace tcc::rt::test;

namespace {

using T = ArtifactBuilder::Tensor;
using Shape = std::vector<int64_t>;

bool onFakeDriver() {
  const char *k = std::getenv("TCC_FAKE_CUDA_KERNELS");
  return k && *k;
}

/// Why CUDA cannot run here ("" if it can).
std::string cudaUnavailable() {
  std::string reason;
  return tccrt::deviceAvailable(TCCRT_DEVICE_CUDA, &reason) ? "" : reason;
}

#define REQUIRE_CUDA()                                                                             \
  do {                                                                                             \
    std::string why_ = cudaUnavailable();                                                          \
    if (!why_.empty())                                                                             \
      GTEST_SKIP() << why_;                                                                        \
  } while (0)
#define REQUIRE_FAKE()                                                                             \
  do {                                                                                             \
    REQUIRE_CUDA();                                                                                \
    if (!onFakeDriver())                                                                           \
      GTEST_SKIP() << "this test needs the fake CUDA driver and cuBLASLt (ctest tccrt-cuda-fake)"; \
  } while (0)

// ---- Kernel code --------------------------------------------------------------------------

struct KernelDecl {
  const char *name;
  int params;
};
const KernelDecl kKernels[] = {{"add64", 3},    {"relu64", 2}, {"scale16", 2}, {"increment", 1},
                               {"shared64", 2}, {"sgd16", 5},  {"mul16", 3}};

/// PTX of the test kernels: nvcc's (CudaTestKernels.cu) when the toolkit was there at build
/// time, else declarations only (enough for the fake driver, which runs host code).
std::string testPtx() {
#ifdef TCCRT_CUDA_TEST_PTX
  std::vector<uint8_t> bytes = readFile(TCCRT_CUDA_TEST_PTX);
  return std::string(bytes.begin(), bytes.end());
#else
  std::string ptx = ".version 8.0\n.target sm_80\n.address_size 64\n";
  for (const KernelDecl &k : kKernels) {
    ptx += ".visible .entry " + std::string(k.name) + "(\n";
    for (int i = 0; i < k.params; ++i)
      ptx += "\t.param .u64 " + std::string(k.name) + "_param_" + std::to_string(i) +
             (i + 1 < k.params ? ",\n" : "\n");
    ptx += ")\n{\n\tret;\n}\n";
  }
  return ptx;
#endif
}

/// nvcc's sm_90 cubin of the test kernels, or nothing without the toolkit.
std::vector<uint8_t> testCubin() {
#ifdef TCCRT_CUDA_TEST_CUBIN
  return readFile(TCCRT_CUDA_TEST_CUBIN);
#else
  return {};
#endif
}

bool onRealGpuWithoutPtx() {
#ifdef TCCRT_CUDA_TEST_PTX
  return false;
#else
  return !onFakeDriver();
#endif
}

/// A CUDA program carrying the test kernels: the sm_90 cubin (if built) and compute_80 PTX.
ArtifactBuilder cudaProgram(bool withCubin = true) {
  ArtifactBuilder a = ArtifactBuilder::cuda();
  std::vector<uint8_t> cubin = testCubin();
  if (withCubin && !cubin.empty())
    a.cudaImages.push_back({"sm_90", cubin});
  a.cudaPtx.push_back({"compute_80", testPtx()});
  return a;
}

#define REQUIRE_KERNELS()                                                                          \
  do {                                                                                             \
    REQUIRE_CUDA();                                                                                \
    if (onRealGpuWithoutPtx())                                                                     \
      GTEST_SKIP() << "the test kernels were not compiled (nvcc was not found at build time)";     \
  } while (0)

tccrt::Program load(const std::vector<uint8_t> &bytes, bool graph = false) {
  tccrt_options options{};
  options.num_threads = 1;
  options.cuda_graph = graph ? 1 : 0;
  return tccrt::Program::fromBuffer(bytes.data(), bytes.size(), options);
}

std::string loadError(const std::vector<uint8_t> &bytes, const tccrt_options *options = nullptr) {
  tccrt_program *p = reinterpret_cast<tccrt_program *>(0x1);
  tccrt_status status = tccrt_load_buffer(bytes.data(), bytes.size(), options, &p);
  EXPECT_EQ(status, TCCRT_ERROR);
  EXPECT_EQ(p, nullptr);
  tccrt_program_free(p);
  return status == TCCRT_ERROR ? tccrt_last_error() : "(loaded)";
}

#define EXPECT_REJECTED(bytes, expected)                                                           \
  do {                                                                                             \
    std::string message_ = loadError(bytes);                                                       \
    EXPECT_NE(message_.find(expected), std::string::npos)                                          \
        << "message: " << message_ << "\nexpected to contain: " << (expected);                     \
  } while (0)

const T f64v{"", fb::DType_F32, {64}}, f16v{"", fb::DType_F32, {16}}, i1{"", fb::DType_I32, {1}},
    f0{"", fb::DType_F32, {}};

// ---- Kernels, views, copies ---------------------------------------------------------------------

/// Inputs x f32[64]; constants c0 f32[64], c1 f32[16]; outputs y = relu(x + c0) f32[64],
/// z f32[32] = (2 (x + c0)[16..32), 2 x[32..48)), w f32[16] = c0[48..64), v f32[16] = 2 c1.
struct ViewsProgram {
  std::vector<float> c0 = randomFloats(64, 11), c1 = randomFloats(16, 12);
  ArtifactBuilder a = cudaProgram();
  ViewsProgram() {
    uint32_t x = a.input(fb::DType_F32, {64}, "x");
    uint32_t c0b = a.constant(fb::DType_F32, {64}, c0.data());
    uint32_t c1b = a.constant(fb::DType_F32, {16}, c1.data()); // at offset 256 of the data
    uint32_t y = a.output(fb::DType_F32, {64}, "y");
    a.output(fb::DType_F32, {32}, "z");
    uint32_t w = a.output(fb::DType_F32, {16}, "w");
    uint32_t v = a.output(fb::DType_F32, {16}, "v");
    uint32_t tmp = a.arena(0, fb::DType_F32, {64});
    uint32_t tmpView = a.arena(64, fb::DType_F32, {16});
    uint32_t zLo = a.buffer(fb::BufferKind_Output, 1, 0, fb::DType_F32, {16});
    uint32_t zHi = a.buffer(fb::BufferKind_Output, 1, 64, fb::DType_F32, {16});
    uint32_t xView = a.buffer(fb::BufferKind_Input, 0, 128, fb::DType_F32, {16});
    uint32_t c0View = a.buffer(fb::BufferKind_Constant, 0, 192, fb::DType_F32, {16});
    uint32_t add = a.kernel("add64", {f64v, f64v, f64v});
    uint32_t relu = a.kernel("relu64", {f64v, f64v});
    uint32_t scale = a.kernel("scale16", {f16v, f16v});
    a.launch(add, {x, c0b, tmp}, {2, 1, 1}, {32, 1, 1});
    a.launch(relu, {tmp, y}, {1, 1, 1}, {64, 1, 1});
    a.launch(scale, {tmpView, zLo}, {1, 1, 1}, {16, 1, 1});
    a.launch(scale, {xView, zHi}, {1, 1, 1}, {16, 1, 1});
    a.copy(c0View, w);
    a.launch(scale, {c1b, v}, {1, 1, 1}, {16, 1, 1});
  }
  void check(const std::vector<float> &x, const std::vector<tccrt::Tensor> &out) const {
    std::vector<float> y(64), z(32), w(16), v(16);
    for (int i = 0; i < 64; ++i)
      y[i] = std::max(x[i] + c0[i], 0.0f);
    for (int i = 0; i < 16; ++i) {
      z[i] = 2 * (x[16 + i] + c0[16 + i]);
      z[16 + i] = 2 * x[32 + i];
      w[i] = c0[48 + i];
      v[i] = 2 * c1[i];
    }
    ASSERT_EQ(out.size(), 4u);
    expectClose(out[0].data<float>(), y, 0, 0, "y");
    expectClose(out[1].data<float>(), z, 0, 0, "z");
    expectClose(out[2].data<float>(), w, 0, 0, "w");
    expectClose(out[3].data<float>(), v, 0, 0, "v");
  }
};

std::vector<tccrt::Tensor> runWith(tccrt::Program &program, const std::vector<float> &x) {
  std::vector<tccrt::Tensor> in = program.makeInputs();
  std::memcpy(in[0].data(), x.data(), x.size() * sizeof(float));
  return program.run(in);
}

TEST(CudaRuntime, KernelsCopiesAndViewsIntoEveryKindOfBuffer) {
  REQUIRE_KERNELS();
  ViewsProgram p;
  tccrt::Program program = load(p.a.finish());
  EXPECT_EQ(program.device(), TCCRT_DEVICE_CUDA);
  for (unsigned seed : {1u, 2u}) { // runs reuse the device buffers
    std::vector<float> x = randomFloats(64, seed);
    p.check(x, runWith(program, x));
  }
}

/// Device memory for a test, from the driver the runtime uses (its primary context is current
/// on this thread once a program has loaded): allocate, copy in and out on a stream.
struct TestDeviceMemory {
  using Alloc = int (*)(unsigned long long *, size_t);
  using Free = int (*)(unsigned long long);
  using HtoD = int (*)(unsigned long long, const void *, size_t, void *);
  using DtoH = int (*)(void *, unsigned long long, size_t, void *);
  using Sync = int (*)(void *);
  void *lib = nullptr;
  Alloc alloc = nullptr;
  Free free = nullptr;
  HtoD htod = nullptr;
  DtoH dtoh = nullptr;
  Sync sync = nullptr;
  std::vector<unsigned long long> blocks;
  TestDeviceMemory() {
    const char *env = std::getenv("TCC_CUDA_DRIVER");
    lib = dlopen(env && *env ? env : "libcuda.so.1", RTLD_NOW);
    if (!lib)
      return;
    alloc = reinterpret_cast<Alloc>(dlsym(lib, "cuMemAlloc_v2"));
    free = reinterpret_cast<Free>(dlsym(lib, "cuMemFree_v2"));
    htod = reinterpret_cast<HtoD>(dlsym(lib, "cuMemcpyHtoDAsync_v2"));
    dtoh = reinterpret_cast<DtoH>(dlsym(lib, "cuMemcpyDtoHAsync_v2"));
    sync = reinterpret_cast<Sync>(dlsym(lib, "cuStreamSynchronize"));
  }
  ~TestDeviceMemory() {
    for (unsigned long long b : blocks)
      free(b);
  }
  void *allocate(size_t bytes) {
    unsigned long long p = 0;
    EXPECT_EQ(alloc(&p, bytes), 0);
    blocks.push_back(p);
    return reinterpret_cast<void *>(p);
  }
};

TEST(CudaRuntime, RunsOnTensorsInDeviceMemory) {
  REQUIRE_KERNELS();
  ViewsProgram p;
  tccrt::Program program = load(p.a.finish(), /*graph=*/true);
  void *stream = tccrt_program_cuda_stream(program.get());
  ASSERT_NE(stream, nullptr);
  TestDeviceMemory device;
  ASSERT_TRUE(device.alloc && device.htod && device.dtoh && device.sync) << dlerror();
  const std::vector<size_t> outputFloats = {64, 32, 16, 16};
  void *dx = device.allocate(64 * sizeof(float));
  std::vector<void *> outs;
  for (size_t n : outputFloats)
    outs.push_back(device.allocate(n * sizeof(float)));
  // Plain launches, then the captured graph, then its replay: device tensors in and out of the
  // same fixed buffers in every mode.
  for (unsigned seed : {5u, 6u, 7u}) {
    std::vector<float> x = randomFloats(64, seed);
    ASSERT_EQ(device.htod(reinterpret_cast<unsigned long long>(dx), x.data(), 256, stream), 0);
    const void *in[] = {dx};
    ASSERT_EQ(tccrt_run_device(program.get(), in, outs.data()), TCCRT_OK) << tccrt_last_error();
    std::vector<tccrt::Tensor> got;
    for (size_t o = 0; o < program.numOutputs(); ++o)
      got.emplace_back(program.output(o));
    for (size_t o = 0; o < outs.size(); ++o)
      ASSERT_EQ(device.dtoh(got[o].data(), reinterpret_cast<unsigned long long>(outs[o]),
                            outputFloats[o] * sizeof(float), stream),
                0);
    ASSERT_EQ(device.sync(stream), 0);
    p.check(x, got);
    p.check(x, runWith(program, x)); // host runs still agree
  }
  const void *nullInput[] = {nullptr};
  EXPECT_EQ(tccrt_run_device(program.get(), nullInput, outs.data()), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("input 0 ('x') is null"), std::string::npos)
      << tccrt_last_error();

  ArtifactBuilder cpu;
  uint32_t x = cpu.input(fb::DType_F32, {16}), y = cpu.output(fb::DType_F32, {16});
  cpu.launch(cpu.kernel("double16", {f16v, f16v}), {x, y});
  std::vector<uint8_t> cpuBytes = cpu.finish();
  tccrt::Program cpuProgram = tccrt::Program::fromBuffer(cpuBytes.data(), cpuBytes.size(), 1);
  EXPECT_EQ(tccrt_program_cuda_stream(cpuProgram.get()), nullptr);
  EXPECT_EQ(tccrt_run_device(cpuProgram.get(), nullInput, nullptr), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("this is a CPU program"), std::string::npos)
      << tccrt_last_error();
}

TEST(CudaRuntime, SymbolicProgramsRebindTheirMemoryGemmsAndGraph) {
  // Compiled for m in 1..64: t[m, 8] = x[m, 16] w[16, 8] in the arena, copied out to y. Each new
  // binding grows the device buffers where m needs more, plans the GEMM at its m and (graph)
  // captures the launch list again; growing, shrinking and growing back agree with the
  // reference, and rebinding the bound sizes keeps the captured graph.
  REQUIRE_CUDA();
  std::vector<float> w = randomFloats(16 * 8, 3);
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "graph" : "plain launches");
    ArtifactBuilder a = ArtifactBuilder::cuda();
    a.symbols = {{"m", 1, 64}};
    uint32_t x = a.symbolicInput(fb::DType_F32, {"m", "16"}, "x");
    uint32_t wb = a.constant(fb::DType_F32, {16, 8}, w.data());
    uint32_t t = a.symbolicArena(0, fb::DType_F32, {"m", "8"});
    uint32_t y = a.symbolicOutput(fb::DType_F32, {"m", "8"}, "y");
    a.gemm(x, wb, t);
    a.copy(t, y);
    a.arenaBytes = 64 * 8 * sizeof(float);
    tccrt::Program program = load(a.finish(), graph);
    unsigned seed = 10;
    for (int64_t m : {5, 64, 1, 64, 7, 7, 7}) {
      SCOPED_TRACE("m = " + std::to_string(m));
      std::vector<float> xs = randomFloats((size_t)m * 16, seed++);
      std::vector<tccrt::Tensor> in;
      in.emplace_back(TCCRT_F32, std::vector<int64_t>{m, 16});
      std::memcpy(in[0].data(), xs.data(), xs.size() * sizeof(float));
      std::vector<tccrt::Tensor> out = program.run(in);
      ASSERT_EQ(out.size(), 1u);
      ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{m, 8}));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < 8; ++j) {
          double sum = 0;
          for (int64_t k = 0; k < 16; ++k)
            sum += (double)xs[i * 16 + k] * w[k * 8 + j];
          ASSERT_NEAR(out[0].data<float>()[i * 8 + j], sum, 1e-4 * (1 + std::abs(sum)))
              << "at " << i << ", " << j;
        }
    }
  }
}

TEST(CudaRuntime, ProfilingTimesEachLaunchWithEvents) {
  // A GEMM, then a copy: while profiling, each launch is timed between CUDA events on the
  // stream (the runs launch plainly even with a graph), and the results stay right.
  REQUIRE_CUDA();
  std::vector<float> w = randomFloats(16 * 8, 5);
  ArtifactBuilder a = ArtifactBuilder::cuda();
  uint32_t x = a.input(fb::DType_F32, {6, 16}, "x");
  uint32_t wb = a.constant(fb::DType_F32, {16, 8}, w.data());
  uint32_t t = a.arena(0, fb::DType_F32, {6, 8});
  uint32_t y = a.output(fb::DType_F32, {6, 8}, "y");
  a.gemm(x, wb, t);
  a.copy(t, y);
  tccrt::Program program = load(a.finish(), /*graph=*/true);
  std::vector<tccrt::Tensor> in;
  in.emplace_back(TCCRT_F32, std::vector<int64_t>{6, 16});
  std::vector<float> xs = randomFloats(6 * 16, 6);
  std::memcpy(in[0].data(), xs.data(), xs.size() * sizeof(float));
  program.run(in); // warm-up: the graph is captured at the second run
  std::vector<tccrt::Tensor> plain = program.run(in);
  std::vector<float> first(plain[0].data<float>(), plain[0].data<float>() + 6 * 8);
  ASSERT_EQ(tccrt_set_profiling(program.get(), 1), TCCRT_OK) << tccrt_last_error();
  for (int run = 0; run < 3; ++run) {
    std::vector<tccrt::Tensor> out = program.run(in);
    for (size_t i = 0; i < first.size(); ++i)
      ASSERT_EQ(out[0].data<float>()[i], first[i]) << "run " << run << ", element " << i;
  }
  ASSERT_EQ(tccrt_num_launches(program.get()), 2u);
  for (size_t i = 0; i < 2; ++i) {
    tccrt_launch_profile p;
    ASSERT_EQ(tccrt_get_launch_profile(program.get(), i, &p), TCCRT_OK);
    EXPECT_EQ(p.calls, 3u) << p.kind;
    EXPECT_GE(p.total_seconds, 0.0);
    EXPECT_GE(p.last_start_seconds, 0.0);
    EXPECT_STREQ(p.kind, i == 0 ? "gemm" : "copy");
  }
  ASSERT_EQ(tccrt_set_profiling(program.get(), 0), TCCRT_OK);
  EXPECT_EQ(program.run(in)[0].data<float>()[0], first[0]); // and the graph path again
}

TEST(CudaRuntime, DeviceNameSaysWhichCodeRuns) {
  REQUIRE_KERNELS();
  ViewsProgram p;
  tccrt::Program program = load(p.a.finish());
  std::string name = program.deviceName();
  EXPECT_EQ(name.rfind("cuda:0 ", 0), 0u) << name;
  ArtifactBuilder ptxOnly = cudaProgram(/*withCubin=*/false);
  ptxOnly.kernel("add64", {f64v, f64v, f64v});
  tccrt::Program jit = load(ptxOnly.finish());
  if (!onFakeDriver())
    return;
  // The fake device: "tcc fake CUDA device", compute capability $TCC_FAKE_CUDA_CC (9.0).
  const char *ccEnv = std::getenv("TCC_FAKE_CUDA_CC");
  std::string cc = ccEnv && *ccEnv ? ccEnv : "90";
  if (!testCubin().empty() && cc == "90")
    EXPECT_EQ(name, "cuda:0 tcc fake CUDA device (sm_90, cubin)");
  else
    EXPECT_EQ(name, "cuda:0 tcc fake CUDA device (compute_80 PTX, JIT)");
  EXPECT_EQ(jit.deviceName(), "cuda:0 tcc fake CUDA device (compute_80 PTX, JIT)");
  // A program without kernels (a GEMM only) loads no module.
  ArtifactBuilder gemmOnly = ArtifactBuilder::cuda();
  uint32_t a = gemmOnly.input(fb::DType_F32, {2, 3}), b = gemmOnly.input(fb::DType_F32, {3, 2}),
           c = gemmOnly.output(fb::DType_F32, {2, 2});
  gemmOnly.gemm(a, b, c);
  EXPECT_EQ(load(gemmOnly.finish()).deviceName(),
            "cuda:0 tcc fake CUDA device (sm_" + cc + ", no kernels)");
}

TEST(CudaRuntime, CpuProgramsNameTheirThreadsAndHaveNoDeviceAllocator) {
  ArtifactBuilder a;
  uint32_t x = a.input(fb::DType_F32, {16}), y = a.output(fb::DType_F32, {16});
  a.launch(a.kernel("double16", {f16v, f16v}), {x, y});
  tccrt::Program program = tccrt::Program::fromBuffer(a.finish().data(), a.finish().size(), 3);
  EXPECT_EQ(program.deviceName(), "cpu (3 threads)");
  tccrt_allocator_stats stats;
  EXPECT_EQ(tccrt_device_allocator_stats(program.get(), &stats), TCCRT_ERROR);
  EXPECT_NE(std::string(tccrt_last_error()).find("the program runs on the CPU"), std::string::npos)
      << tccrt_last_error();
  const char *json = nullptr;
  EXPECT_EQ(tccrt_device_allocator_snapshot(program.get(), &json), TCCRT_ERROR);
  EXPECT_EQ(tccrt_device_available(TCCRT_DEVICE_CPU, nullptr), 1);
}

TEST(CudaRuntime, DynamicSharedMemoryAboveTheDefaultIsOptedInto) {
  REQUIRE_KERNELS();
  ArtifactBuilder a = cudaProgram();
  uint32_t x = a.input(fb::DType_F32, {64}), y = a.output(fb::DType_F32, {64});
  uint32_t k = a.kernel("shared64", {f64v, f64v});
  a.launch(k, {x, y}, {1, 1, 1}, {128, 1, 1}, 96 * 1024); // above 48 KiB: needs the opt-in
  a.launch(k, {x, y}, {1, 1, 1}, {128, 1, 1}, 4096);
  tccrt::Program program = load(a.finish());
  std::vector<float> in = randomFloats(64, 5);
  std::vector<tccrt::Tensor> out = runWith(program, in);
  expectClose(out[0].data<float>(), in, 0, 0, "y");
}

TEST(CudaRuntime, BadDeviceOrdinals) {
  REQUIRE_KERNELS();
  ViewsProgram p;
  std::vector<uint8_t> bytes = p.a.finish();
  tccrt_options options{};
  options.device_ordinal = -1;
  EXPECT_NE(loadError(bytes, &options).find("device_ordinal must be >= 0, got -1"),
            std::string::npos);
  options.device_ordinal = 64;
  EXPECT_NE(loadError(bytes, &options), "");
}

// ---- CUDA graphs --------------------------------------------------------------------------------

/// Kernels, a GEMM with a bias and ReLU, copies and a run counter in the arena (device memory
/// that lives across runs): inputs x f32[64], m f32[8, 8]; outputs y f32[64], z f32[8, 8],
/// runs i32[1].
ArtifactBuilder graphProgram(const std::vector<float> &c, const std::vector<float> &bias) {
  ArtifactBuilder a = cudaProgram();
  uint32_t x = a.input(fb::DType_F32, {64}, "x"), m = a.input(fb::DType_F32, {8, 8}, "m");
  uint32_t y = a.output(fb::DType_F32, {64}, "y"), z = a.output(fb::DType_F32, {8, 8}, "z");
  uint32_t runs = a.output(fb::DType_I32, {1}, "runs");
  uint32_t cb = a.constant(fb::DType_F32, {64}, c.data());
  uint32_t bb = a.constant(fb::DType_F32, {8}, bias.data());
  uint32_t tmp = a.arena(0, fb::DType_F32, {64}), tmpMatrix = a.arena(0, fb::DType_F32, {8, 8});
  uint32_t counter = a.arena(256, fb::DType_I32, {1});
  a.launch(a.kernel("add64", {f64v, f64v, f64v}), {x, cb, tmp}, {3, 1, 1}, {32, 1, 1});
  a.gemm(tmpMatrix, m, z, false, true, 1.0, 0.0, bb, fb::GemmActivation_Relu);
  a.launch(a.kernel("relu64", {f64v, f64v}), {tmp, y}, {1, 1, 1}, {64, 1, 1});
  a.launch(a.kernel("increment", {i1}), {counter}, {1, 1, 1}, {1, 1, 1});
  a.copy(counter, runs);
  return a;
}

TEST(CudaRuntime, GraphReplayMatchesPlainLaunches) {
  REQUIRE_KERNELS();
  std::vector<float> c = randomFloats(64, 21), bias = randomFloats(8, 22);
  std::vector<uint8_t> bytes = graphProgram(c, bias).finish();
  tccrt::Program plain = load(bytes, false), graph = load(bytes, true);
  int32_t lastPlain = 0, lastGraph = 0;
  for (unsigned run = 0; run < 4; ++run) {
    std::vector<tccrt::Tensor> in = plain.makeInputs();
    std::vector<float> x = randomFloats(64, 100 + run), m = randomFloats(64, 200 + run);
    std::memcpy(in[0].data(), x.data(), 256);
    std::memcpy(in[1].data(), m.data(), 256);
    std::vector<tccrt::Tensor> a = plain.run(in), b = graph.run(in);
    for (size_t o = 0; o < 2; ++o)
      EXPECT_EQ(std::memcmp(a[o].data(), b[o].data(), a[o].bytes()), 0)
          << "output " << o << " differs with the graph at run " << run;
    // Reference: z = relu((x + c)[8, 8] m^T + bias).
    std::vector<float> z(64);
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) {
        double s = bias[j];
        for (int k = 0; k < 8; ++k)
          s += (double)(x[i * 8 + k] + c[i * 8 + k]) * m[j * 8 + k];
        z[i * 8 + j] = (float)std::max(s, 0.0);
      }
    expectClose(b[1].data<float>(), z, 1e-5, 1e-5, "z (graph)");
    // The counter in device memory advanced once per run in both modes: the graph replays
    // the whole launch list every run, the first included.
    int32_t np = a[2].data<int32_t>()[0], ng = b[2].data<int32_t>()[0];
    if (run > 0) {
      EXPECT_EQ(np - lastPlain, 1) << "run " << run;
      EXPECT_EQ(ng - lastGraph, 1) << "run " << run;
    }
    lastPlain = np, lastGraph = ng;
  }
}

// ---- GEMMs through cuBLASLt ---------------------------------------------------------------------

struct GemmCase {
  std::string name;
  fb::DType dtype;
  Shape a, b, c;
  bool transA = false, transB = false;
  double alpha = 1, beta = 0;
  bool bias = false;
  fb::GemmActivation act = fb::GemmActivation_None;
  uint64_t aOffset = 0; // bytes: a is a view into a larger input (misaligned views)
};

void PrintTo(const GemmCase &g, std::ostream *os) { *os << g.name; }

/// 16-bit floats for the f16/bf16 GEMMs (round to nearest even; the reference reads the
/// rounded values).
struct F16 {
  uint16_t bits = 0;
  F16() = default;
  F16(double v) {
    float f = (float)v, a = std::fabs(f);
    uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    if (a >= 65520.0f) {
      bits = sign | 0x7c00;
    } else if (a < std::ldexp(1.0f, -14)) {
      bits = sign | (uint16_t)std::nearbyint(a * std::ldexp(1.0f, 24));
    } else {
      int e;
      float q = std::nearbyint(std::frexp(a, &e) * 2048.0f);
      if (q >= 2048.0f)
        q /= 2, ++e;
      bits = sign | (uint16_t)(((e + 14) << 10) | ((uint32_t)q & 0x3ff));
    }
  }
  operator double() const {
    int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
    double v = exponent == 0 ? std::ldexp((double)mantissa, -24)
                             : std::ldexp((double)(mantissa | 0x400), exponent - 25);
    return bits & 0x8000 ? -v : v;
  }
};
struct BF16 {
  uint16_t bits = 0;
  BF16() = default;
  BF16(double v) {
    float f = (float)v;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    bits = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  operator double() const {
    uint32_t u = (uint32_t)bits << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

template <class E> std::vector<E> values(size_t n, unsigned seed) {
  std::vector<float> f = randomFloats(n, seed);
  return std::vector<E>(f.begin(), f.end());
}

double gelu(double v) {
  return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
}

template <class E> void runGemmCase(const GemmCase &g, bool graph) {
  size_t r = g.c.size();
  int64_t m = g.c[r - 2], n = g.c[r - 1], k = g.a[r - (g.transA ? 2 : 1)];
  size_t aCount = (size_t)numElements(g.a), bCount = (size_t)numElements(g.b),
         cCount = (size_t)numElements(g.c);
  std::vector<E> av = values<E>(aCount, 1), bv = values<E>(bCount, 2), c0 = values<E>(cCount, 3),
                 biasv = values<E>((size_t)n, 4);
  ArtifactBuilder a = ArtifactBuilder::cuda();
  size_t elem = sizeof(E);
  uint32_t aIn = a.input(g.dtype, {(int64_t)(aCount + g.aOffset / elem)}, "a");
  uint32_t aBuf = a.buffer(fb::BufferKind_Input, 0, g.aOffset, g.dtype, g.a);
  (void)aIn;
  uint32_t bIn = a.input(g.dtype, g.b, "b");
  uint32_t cIn = g.beta != 0 ? a.input(g.dtype, g.c, "c") : 0;
  uint32_t cOut = a.output(g.dtype, g.c, "out");
  int64_t bias = g.bias ? (int64_t)a.constant(g.dtype, {n}, biasv.data()) : -1;
  if (g.beta != 0)
    a.copy(cIn, cOut); // beta reads c in place
  a.gemm(aBuf, bIn, cOut, g.transA, g.transB, g.alpha, g.beta, bias, g.act);
  std::vector<uint8_t> bytes = a.finish();
  tccrt::Program program = load(bytes, graph);
  std::vector<tccrt::Tensor> in = program.makeInputs();
  auto fill = [](tccrt::Tensor &t, size_t offset, const void *data, size_t bytes) {
    if (t.bytes() == 0)
      return;
    std::memset(t.data(), 0, t.bytes());
    std::memcpy(static_cast<uint8_t *>(t.data()) + offset, data, bytes);
  };
  fill(in[0], g.aOffset, av.data(), aCount * elem);
  fill(in[1], 0, bv.data(), bCount * elem);
  if (g.beta != 0)
    fill(in[2], 0, c0.data(), cCount * elem);
  // Graphs: the first run launches plainly, the second captures, the third replays.
  std::vector<tccrt::Tensor> out = program.run(in);
  for (int again = 0; again < (graph ? 2 : 0); ++again) {
    std::vector<tccrt::Tensor> next = program.run(in);
    ASSERT_EQ(std::memcmp(next[0].data(), out[0].data(), out[0].bytes()), 0)
        << g.name << ": run " << again + 2 << " differs";
  }

  // Reference in double, broadcasting batch dims of size 1.
  std::vector<E> want(cCount);
  int64_t batches = (int64_t)(cCount / (size_t)(m * n));
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t aOff = 0, bOff = 0, rest = bi, aStride = 1, bStride = 1;
    for (size_t d = r - 2; d-- > 0;) {
      int64_t idx = rest % g.c[d];
      rest /= g.c[d];
      aOff += (g.a[d] == 1 ? 0 : idx) * aStride;
      bOff += (g.b[d] == 1 ? 0 : idx) * bStride;
      aStride *= g.a[d];
      bStride *= g.b[d];
    }
    const E *A = av.data() + aOff * m * k, *B = bv.data() + bOff * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += (double)(g.transA ? A[p * m + i] : A[i * k + p]) *
               (double)(g.transB ? B[j * k + p] : B[p * n + j]);
        double v = g.alpha * s;
        if (g.beta != 0)
          v += g.beta * (double)c0[(size_t)(bi * m * n + i * n + j)];
        if (g.bias)
          v += (double)biasv[(size_t)j];
        if (g.act == fb::GemmActivation_Relu)
          v = std::max(v, 0.0);
        else if (g.act == fb::GemmActivation_GeluTanh)
          v = gelu(v);
        want[(size_t)(bi * m * n + i * n + j)] = (E)v;
      }
  }
  // f16/bf16: one rounding of the f32 result (half an ulp: 2^-11, 2^-8); f32: a few ulps (a
  // real GPU's GELU may differ a little more than the fake's); f64: cuBLASLt's GELU is good to
  // about 1e-9 relative on an H100 (tcc's compiler keeps f64 GELUs out of the epilogue).
  bool realGelu = !onFakeDriver() && g.act == fb::GemmActivation_GeluTanh;
  double tol = sizeof(E) == 8                                       ? (realGelu ? 1e-8 : 1e-12)
               : std::is_same_v<E, F16>                             ? 1e-3
               : std::is_same_v<E, BF16>                            ? 8e-3
               : onFakeDriver() || g.act == fb::GemmActivation_None ? 2e-6
                                                                    : 1e-5;
  expectClose(out[0].data<E>(), want, tol, tol, g.name + (graph ? " (graph)" : ""));
}

class CudaGemm : public ::testing::TestWithParam<GemmCase> {};

TEST_P(CudaGemm, MatchesHostReference) {
  REQUIRE_CUDA();
  const GemmCase &g = GetParam();
  for (bool graph : {false, true}) {
    if (g.dtype == fb::DType_F64)
      runGemmCase<double>(g, graph);
    else if (g.dtype == fb::DType_F16)
      runGemmCase<F16>(g, graph);
    else if (g.dtype == fb::DType_BF16)
      runGemmCase<BF16>(g, graph);
    else
      runGemmCase<float>(g, graph);
  }
}

const fb::DType F32 = fb::DType_F32, F64 = fb::DType_F64;
const fb::GemmActivation None = fb::GemmActivation_None, Relu = fb::GemmActivation_Relu,
                         Gelu = fb::GemmActivation_GeluTanh;

GemmCase gc(std::string name, fb::DType d, Shape a, Shape b, Shape c, bool ta = false,
            bool tb = false) {
  GemmCase g;
  g.name = std::move(name), g.dtype = d, g.a = a, g.b = b, g.c = c, g.transA = ta, g.transB = tb;
  return g;
}
GemmCase epilogue(GemmCase g, bool bias, fb::GemmActivation act, double beta = 0) {
  g.name += std::string(bias ? "_bias" : "") +
            (act == Relu   ? "_relu"
             : act == Gelu ? "_gelu"
                           : "") +
            (beta != 0 ? "_beta" : "");
  g.bias = bias, g.act = act, g.beta = beta;
  return g;
}

std::vector<GemmCase> gemmCases() {
  std::vector<GemmCase> cases = {
      gc("plain", F32, {5, 7}, {7, 3}, {5, 3}),
      gc("transA", F32, {7, 5}, {7, 3}, {5, 3}, true),
      gc("transB", F32, {5, 7}, {3, 7}, {5, 3}, false, true),
      gc("transAB", F32, {7, 5}, {3, 7}, {5, 3}, true, true),
      // One strided batch with b broadcast (batch stride 0).
      gc("batchBroadcastB", F32, {4, 5, 6}, {1, 6, 3}, {4, 5, 3}),
      // b broadcast along the outer batch dim: a loop of two strided batches.
      gc("batchLoopB", F32, {2, 3, 4, 5}, {1, 3, 5, 6}, {2, 3, 4, 6}),
      // a broadcast along the inner batch dim: a loop as well.
      gc("batchLoopA", F32, {2, 1, 4, 5}, {2, 3, 5, 6}, {2, 3, 4, 6}, false, false),
      gc("batchTransposed", F32, {2, 3, 5, 4}, {2, 3, 2, 5}, {2, 3, 4, 2}, true, true),
      gc("f64", F64, {6, 4}, {4, 5}, {6, 5}),
      gc("f64BatchTransA", F64, {3, 5, 4}, {3, 5, 2}, {3, 4, 2}, true),
      gc("emptyK", F32, {3, 0}, {0, 4}, {3, 4}),
  };
  GemmCase scaled = gc("alphaBeta", F32, {4, 6}, {6, 5}, {4, 5});
  scaled.alpha = 0.5, scaled.beta = 2;
  cases.push_back(scaled);
  GemmCase view = gc("misalignedView", F32, {5, 7}, {7, 3}, {5, 3});
  view.aOffset = 4; // a starts one element into its input
  cases.push_back(view);
  GemmCase base = gc("epi", F32, {2, 4, 5}, {2, 5, 3}, {2, 4, 3});
  for (bool bias : {false, true})
    for (fb::GemmActivation act : {None, Relu, Gelu})
      if (bias || act != None)
        cases.push_back(epilogue(base, bias, act));
  cases.push_back(epilogue(base, true, Relu, -1.5));
  cases.push_back(epilogue(gc("epiF64", F64, {3, 4}, {4, 6}, {3, 6}), true, Gelu, 0.25));
  // 16-bit data: f32 compute and scale.
  cases.push_back(epilogue(gc("f16", fb::DType_F16, {2, 6, 5}, {1, 4, 5}, {2, 6, 4}, false, true),
                           true, Relu, 0.5));
  cases.push_back(gc("bf16", fb::DType_BF16, {8, 5}, {8, 3}, {5, 3}, true, false));
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaGemm, ::testing::ValuesIn(gemmCases()),
                         [](const ::testing::TestParamInfo<GemmCase> &info) {
                           return info.param.name;
                         });

TEST(CudaRuntime, GemmWithoutAnAlgorithmIsALoadErrorNamingTheStep) {
  REQUIRE_FAKE();
  ArtifactBuilder a = ArtifactBuilder::cuda();
  uint32_t x = a.input(F32, {5, 7}), y = a.input(F32, {7, 3}), z = a.output(F32, {5, 3});
  a.gemm(x, y, z);
  std::vector<uint8_t> bytes = a.finish();
  setenv("TCC_FAKE_CUBLASLT_NO_ALGO", "1", 1);
  std::string message = loadError(bytes);
  unsetenv("TCC_FAKE_CUBLASLT_NO_ALGO");
  EXPECT_NE(message.find("launch 0 (gemm): cuBLASLt has no algorithm for this GEMM (f32 M=5 N=3 "
                         "K=7"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos) << message;
  EXPECT_NO_THROW(load(bytes));
}

// ---- Device memory ------------------------------------------------------------------------------

TEST(CudaRuntime, DeviceAllocatorStatsAndSnapshot) {
  REQUIRE_KERNELS();
  std::vector<float> c = randomFloats(64, 21), bias = randomFloats(8, 22);
  std::vector<uint8_t> bytes = graphProgram(c, bias).finish();
  auto program = std::make_unique<tccrt::Program>(load(bytes));
  tccrt_allocator_stats loaded = program->deviceAllocatorStats();
  // Inputs 512 + outputs 516 bytes, constants, the arena and the 32 MiB cuBLASLt workspace.
  EXPECT_GE(loaded.allocated_bytes, (uint64_t(32) << 20) + 1028);
  EXPECT_GE(loaded.reserved_bytes, loaded.allocated_bytes);
  EXPECT_GE(loaded.num_allocs, 7u);
  EXPECT_GE(loaded.num_system_allocs, 1u);
  std::string json = program->deviceAllocatorSnapshot();
  EXPECT_NE(json.find("\"allocated_bytes\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"segments\""), std::string::npos) << json;
  // Runs allocate nothing.
  std::vector<tccrt::Tensor> in = program->makeInputs();
  std::memset(in[0].data(), 0, in[0].bytes());
  std::memset(in[1].data(), 0, in[1].bytes());
  program->run(in);
  program->run(in);
  EXPECT_EQ(program->deviceAllocatorStats().num_allocs, loaded.num_allocs);
  // A second program is served from the cache where it can; freeing returns the blocks.
  auto second = std::make_unique<tccrt::Program>(load(bytes));
  tccrt_allocator_stats both = second->deviceAllocatorStats();
  EXPECT_GT(both.allocated_bytes, loaded.allocated_bytes);
  second.reset();
  program.reset();
  tccrt::Program third = load(bytes);
  tccrt_allocator_stats after = third.deviceAllocatorStats();
  EXPECT_EQ(after.allocated_bytes, loaded.allocated_bytes);
}

// ---- Training on CUDA ---------------------------------------------------------------------------

using TB = TrainingArtifactBuilder;

TEST(CudaRuntime, TrainingEntriesRunOnTheRootsArena) {
  REQUIRE_KERNELS();
  TB t;
  t.root.device = fb::Device_CUDA;
  std::vector<float> w0 = randomFloats(16, 31);
  t.addState("w", fb::StateKind_Parameter, F32, {16}, w0);
  {
    TB::Entry e{"train_step", cudaProgram(), {}, {}};
    ArtifactBuilder &a = e.program;
    uint32_t w = a.input(F32, {16}, "w"), x = a.input(F32, {16}, "x"), lr = a.input(F32, {}, "lr");
    uint32_t wOut = a.output(F32, {16}, "w'"), loss = a.output(F32, {}, "loss");
    uint32_t tmp = a.arena(64, F32, {16}); // w' through the shared arena
    a.launch(a.kernel("sgd16", {f16v, f16v, f0, f16v, f0}), {w, x, lr, tmp, loss}, {1, 1, 1},
             {16, 1, 1});
    a.copy(tmp, wOut);
    e.inputs = {{fb::BindingRole_State, 0}, {fb::BindingRole_Data}, {fb::BindingRole_LearningRate}};
    e.outputs = {{fb::BindingRole_State, 0}, {fb::BindingRole_Loss}};
    t.entries.push_back(std::move(e));
  }
  {
    TB::Entry e{"eval", cudaProgram(), {}, {}};
    ArtifactBuilder &a = e.program;
    uint32_t w = a.input(F32, {16}, "w"), x = a.input(F32, {16}, "x");
    uint32_t y = a.output(F32, {16}, "y"), tmp = a.arena(0, F32, {16});
    a.launch(a.kernel("mul16", {f16v, f16v, f16v}), {w, x, tmp}, {1, 1, 1}, {16, 1, 1});
    a.copy(tmp, y);
    e.inputs = {{fb::BindingRole_State, 0}, {fb::BindingRole_Data}};
    e.outputs = {{fb::BindingRole_Data}};
    t.entries.push_back(std::move(e));
  }
  std::vector<uint8_t> bytes = t.finish();
  tccrt::Program program = load(bytes);
  EXPECT_TRUE(program.isTraining());
  EXPECT_EQ(program.device(), TCCRT_DEVICE_CUDA);
  tccrt::Trainer trainer(program, 7);
  std::vector<float> w = w0;
  for (unsigned step = 0; step < 3; ++step) {
    std::vector<float> x = randomFloats(16, 40 + step);
    std::vector<tccrt::Tensor> batch = trainer.makeBatch();
    std::memcpy(batch[0].data(), x.data(), 64);
    float loss = trainer.step(batch, 0.25f);
    float want = 0;
    for (int i = 0; i < 16; ++i)
      want += w[i] * x[i];
    EXPECT_NEAR(loss, want / 16, 1e-6);
    for (int i = 0; i < 16; ++i)
      w[i] -= 0.25f * x[i];
    tccrt::Tensor state = trainer.getState(0); // (a GPU may contract w - lr x into an FMA)
    expectClose(state.data<float>(), w, 1e-6, 1e-6, "w after step " + std::to_string(step));
    std::vector<tccrt::Tensor> y = trainer.eval(batch);
    std::vector<float> wantY(16);
    for (int i = 0; i < 16; ++i)
      wantY[i] = w[i] * x[i];
    expectClose(y[0].data<float>(), wantY, 0, 0, "eval");
  }
}

// ---- Structural verification (no GPU involved) --------------------------------------------------

/// A valid CUDA program to damage: one launch of add64, a GEMM, a copy.
ArtifactBuilder validCuda() {
  ArtifactBuilder a = cudaProgram();
  uint32_t x = a.input(F32, {64}), m = a.input(F32, {8, 8});
  uint32_t y = a.output(F32, {64}), z = a.output(F32, {8, 8});
  uint32_t c = a.constant(F32, {64}, randomFloats(64, 1).data());
  uint32_t bias = a.constant(F32, {8}, randomFloats(8, 2).data());
  uint32_t tmp = a.arena(0, F32, {8, 8});
  a.launch(a.kernel("add64", {f64v, f64v, f64v}), {x, c, y}, {2, 1, 1}, {32, 1, 1});
  a.copy(m, tmp);
  a.gemm(tmp, m, z, false, false, 1, 0, bias, fb::GemmActivation_Relu);
  return a;
}

TEST(CudaVerify, RejectsDamagedCudaProgramsBeforeTouchingTheDriver) {
  auto damaged = [](const std::function<void(ArtifactBuilder &)> &damage) {
    ArtifactBuilder a = validCuda();
    damage(a);
    return a.finish();
  };
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.cudaImages = {{"sm90", {1, 2, 3}}};
                  }),
                  "CUDA image 0 has arch 'sm90', expected sm_<digits>[a] (e.g. sm_90)");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.cudaImages = {{"sm_9x", {1}}};
                  }),
                  "has arch 'sm_9x'");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.cudaImages = {{"compute_90", {1}}};
                  }),
                  "has arch 'compute_90', expected sm_");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.cudaPtx = {{"sm_80", ".version 8.0"}};
                  }),
                  "CUDA PTX 0 has arch 'sm_80', expected compute_<digits>[a]");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.cudaPtx = {{"compute_", ".version"}};
                  }),
                  "has arch 'compute_'");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.cudaImages = {{"sm_90", {}}};
                  }),
                  "CUDA image 0 (sm_90) has no cubin bytes");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.cudaPtx = {{"compute_80", ""}};
                  }),
                  "CUDA PTX 0 (compute_80) is empty");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.cudaImages.clear();
                    a.cudaPtx.clear();
                  }),
                  "the artifact has 1 kernel but its CUDA module holds no cubin and no PTX");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) { a.withCudaModule = false; }),
                  "the artifact has 1 kernel but no CUDA module");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.steps[0].block = {32, 32, 2};
                  }),
                  "launch 0 (kernel 'add64'): block (32, 32, 2) has 2048 threads; CUDA allows at "
                  "most 1024 a block");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.steps[0].grid = {2, 1};
                  }),
                  "launch 0 (kernel 'add64'): a CUDA launch needs a grid of 3 dims (x, y, z), "
                  "got 2");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) { a.steps[0].block.clear(); }),
                  "needs a block of 3 dims (x, y, z), got 0");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.steps[0].grid = {0, 1, 1};
                  }),
                  "grid dim x is 0 (every dim must be >= 1)");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.steps[0].grid = {1, 70000, 1};
                  }),
                  "grid (1, 70000, 1) exceeds CUDA's limits");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) { a.steps[0].sharedBytes = 300000; }),
                  "300000 bytes of dynamic shared memory exceed any CUDA GPU's 232448 bytes");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    uint32_t x = a.arena(0, F32, {1, 1, 8, 8}),
                             w = a.constant(F32, {1, 1, 1, 1}, std::vector<float>{1}.data());
                    uint32_t y = a.arena(512, F32, {1, 1, 8, 8});
                    a.conv(x, w, y, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1);
                  }),
                  "launch 3 (conv): a CUDA program cannot have library conv steps");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    uint32_t x = a.arena(0, F32, {8, 8}), v = a.arena(512, F32, {8, 2});
                    uint32_t i = a.arena(1024, fb::DType_I64, {8, 2});
                    a.topk(x, v, i, 1, true);
                  }),
                  "launch 3 (topk): a CUDA program cannot have library top-k steps");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    a.buffers[a.steps[2].bias].shape = {4, 2};
                  }),
                  "launch 2 (gemm): its bias (buffer 5, f32[4, 2]) must be f32[8], one value per "
                  "column of c f32[8, 8]");
  EXPECT_REJECTED(
      damaged([](ArtifactBuilder &a) { a.buffers[a.steps[2].bias].dtype = fb::DType_I32; }),
      "must be f32[8]");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) { a.steps[2].bias = 99; }),
                  "launch 2 (gemm)'s bias names buffer 99");
  EXPECT_REJECTED(
      damaged([](ArtifactBuilder &a) { a.steps[2].activation = (fb::GemmActivation)7; }),
      "launch 2 (gemm) has an invalid activation (7)");
  EXPECT_REJECTED(damaged([](ArtifactBuilder &a) {
                    uint32_t p = a.input(fb::DType_I32, {2, 2}), q = a.input(fb::DType_I32, {2, 2});
                    a.gemm(p, q, a.arena(0, fb::DType_I32, {2, 2}));
                  }),
                  "launch 3 (gemm): operands must all be f16, all bf16, all f32 or all f64, got "
                  "i32[2, 2]");
}

TEST(CudaVerify, GemmEpiloguesAreWhatEachRuntimeApplies) {
  // The CPU's sgemm applies a bias and every activation (ReLU, both GELUs) to f32 GEMMs.
  ArtifactBuilder a;
  uint32_t x = a.input(F32, {4, 5}), y = a.input(F32, {5, 3}), z = a.output(F32, {4, 3});
  uint32_t bias = a.constant(F32, {3}, randomFloats(3, 1).data());
  a.gemm(x, y, z, false, false, 1, 0, bias, fb::GemmActivation_GeluTanh);
  for (fb::GemmActivation act : {fb::GemmActivation_Relu, fb::GemmActivation_GeluTanh,
                                 fb::GemmActivation_GeluErf})
    for (bool hasBias : {true, false}) {
      a.steps[0].activation = act;
      a.steps[0].hasBias = hasBias;
      EXPECT_NO_THROW(tccrt::Program::fromBuffer(a.finish().data(), a.finish().size(), 1));
    }
  // Not to f64 ones (OpenBLAS's).
  ArtifactBuilder d;
  uint32_t xd = d.input(fb::DType_F64, {4, 5}), yd = d.input(fb::DType_F64, {5, 3});
  uint32_t zd = d.output(fb::DType_F64, {4, 3});
  d.gemm(xd, yd, zd, false, false, 1, 0, -1, fb::GemmActivation_Relu);
  EXPECT_REJECTED(d.finish(), "launch 0 (gemm) has an epilogue (Relu) on f64: the CPU runtime "
                              "applies epilogues to f32 GEMMs only");
  // cuBLASLt has no erf GELU: a CUDA program with one is refused before the driver is touched.
  ArtifactBuilder c = ArtifactBuilder::cuda();
  uint32_t xc = c.input(F32, {4, 5}), yc = c.input(F32, {5, 3}), zc = c.output(F32, {4, 3});
  c.gemm(xc, yc, zc, false, false, 1, 0, -1, fb::GemmActivation_GeluErf);
  EXPECT_REJECTED(c.finish(), "launch 0 (gemm) has an erf GELU epilogue: cuBLASLt has none");
}

TEST(CudaVerify, TrainingEntriesMustMatchTheRootsDevice) {
  TB t;
  t.root.device = fb::Device_CUDA;
  t.addState("w", fb::StateKind_Parameter, F32, {16}, randomFloats(16, 1));
  TB::Entry e{"train_step", {}, {}, {}};
  uint32_t w = e.program.input(F32, {16}), wOut = e.program.output(F32, {16});
  uint32_t loss = e.program.output(F32, {});
  (void)loss;
  e.program.launch(e.program.kernel("double16", {f16v, f16v}), {w, wOut});
  e.inputs = {{fb::BindingRole_State, 0}};
  e.outputs = {{fb::BindingRole_State, 0}, {fb::BindingRole_Loss}};
  t.entries.push_back(std::move(e));
  EXPECT_REJECTED(t.finish(), "training entry 'train_step': its program is for the CPU, the "
                              "artifact's root for CUDA");
}

TEST(CudaRuntime, FlippedBytesFailCleanlyOrLoadAndRun) {
  REQUIRE_FAKE(); // damaged code reaches the driver: the fake's parser, not a real GPU's
  // Damaged sizes ask for huge device buffers: the fake's device memory (host memory it fills)
  // must be bounded so that they fail as out of memory (as on a GPU) rather than exhaust the host.
  const char *limit = std::getenv("TCC_FAKE_CUDA_MEMORY");
  if (!limit || std::strtoull(limit, nullptr, 10) > (uint64_t(4) << 30))
    GTEST_SKIP() << "TCC_FAKE_CUDA_MEMORY must bound the fake's device memory to <= 4 GiB";
  ArtifactBuilder a = validCuda();
  a.cudaImages.clear();
  std::vector<uint8_t> bytes = a.finish();
  // The flips spare the PTX text: code goes to the driver as it is (the schema has no hash for
  // CUDA code), and damaged PTX can declare fewer parameters than the launch passes, which the
  // fake's host kernels cannot survive (a GPU would fault in the kernel).
  const std::string &ptx = a.cudaPtx[0].ptx;
  size_t ptxAt = std::search(bytes.begin(), bytes.end(), ptx.begin(), ptx.end()) - bytes.begin();
  ASSERT_LT(ptxAt, bytes.size());
  std::mt19937 rng(4321);
  int loaded = 0, rejected = 0, runFailed = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<uint8_t> damaged = bytes;
    for (int f = 0, flips = 1 + trial % 3; f < flips; ++f) {
      size_t at = rng() % (bytes.size() - ptx.size());
      at += at >= ptxAt ? ptx.size() : 0;
      damaged[at] ^= (uint8_t)(1 + rng() % 255);
    }
    tccrt_program *p = nullptr;
    if (tccrt_load_buffer(damaged.data(), damaged.size(), nullptr, &p) != TCCRT_OK) {
      ++rejected;
      continue;
    }
    ++loaded;
    std::vector<std::vector<uint8_t>> in(tccrt_num_inputs(p)), out(tccrt_num_outputs(p));
    std::vector<const void *> inPtrs;
    std::vector<void *> outPtrs;
    for (size_t i = 0; i < in.size(); ++i) {
      tccrt_tensor_info info;
      ASSERT_EQ(tccrt_input_info(p, i, &info), TCCRT_OK);
      in[i].assign(info.bytes, 0);
      inPtrs.push_back(in[i].data());
    }
    for (size_t i = 0; i < out.size(); ++i) {
      tccrt_tensor_info info;
      ASSERT_EQ(tccrt_output_info(p, i, &info), TCCRT_OK);
      out[i].assign(info.bytes, 0);
      outPtrs.push_back(out[i].data());
    }
    // A damaged launch geometry may be one the fake does not model (a 3-D block): an error,
    // never a crash.
    if (tccrt_run(p, inPtrs.data(), outPtrs.data()) != TCCRT_OK)
      ++runFailed;
    tccrt_program_free(p);
  }
  EXPECT_GT(rejected, 0);
  std::printf("damaged CUDA artifacts: %d loaded (%d of them failed to run), %d rejected\n",
              loaded, runFailed, rejected);
}

TEST(CudaRuntime, DeviceOutOfMemoryIsALoadErrorWithTheAllocatorsAccount) {
  REQUIRE_FAKE();
  const char *limit = std::getenv("TCC_FAKE_CUDA_MEMORY");
  if (!limit || std::strtoull(limit, nullptr, 10) >= (uint64_t(3) << 30))
    GTEST_SKIP() << "needs TCC_FAKE_CUDA_MEMORY below 3 GiB";
  ArtifactBuilder a = validCuda();
  a.arenaBytes = uint64_t(3) << 30;
  std::string message = loadError(a.finish());
  EXPECT_NE(message.find("out of memory: tried to allocate 3"), std::string::npos) << message;
  EXPECT_NO_THROW(load(validCuda().finish())); // nothing leaked, the device is usable
}

TEST(CudaNoCublasLt, GemmProgramsNeedItOthersDoNot) {
  const char *lib = std::getenv("TCC_CUBLASLT_LIBRARY");
  if (!lib || std::string(lib).rfind("/nonexistent/", 0) != 0)
    GTEST_SKIP() << "run with TCC_CUBLASLT_LIBRARY=/nonexistent/... (ctest "
                    "tccrt-cuda-runtime-no-cublaslt)";
  REQUIRE_KERNELS();
  std::string message = loadError(validCuda().finish());
  EXPECT_NE(message.find("cannot load cuBLASLt, which CUDA programs with GEMMs need: " +
                         std::string(lib) + " (dlopen: "),
            std::string::npos)
      << message;
  ViewsProgram p; // kernels and copies only: cuBLASLt is never opened
  std::vector<float> x = randomFloats(64, 3);
  tccrt::Program program = load(p.a.finish());
  p.check(x, runWith(program, x));
}

// ---- Without a usable driver --------------------------------------------------------------------

TEST(CudaNoDriver, ValidArtifactsNeedAGpuDamagedOnesFailAsDamaged) {
  std::string why = cudaUnavailable();
  if (why.empty())
    GTEST_SKIP()
        << "a CUDA driver is usable here (the no-driver behaviour is tested where none is)";
  EXPECT_NE(why.find("no usable CUDA GPU/driver"), std::string::npos) << why;
  const char *reason = nullptr;
  EXPECT_EQ(tccrt_device_available(TCCRT_DEVICE_CUDA, &reason), 0);
  ASSERT_NE(reason, nullptr);
  EXPECT_EQ(std::string(reason), why);
  EXPECT_REJECTED(validCuda().finish(), "no usable CUDA GPU/driver");
  ArtifactBuilder damaged = validCuda();
  damaged.steps[0].block = {2048, 1, 1};
  std::string message = loadError(damaged.finish());
  EXPECT_NE(message.find("block (2048, 1, 1) has 2048 threads"), std::string::npos) << message;
  EXPECT_EQ(message.find("no usable CUDA"), std::string::npos) << message;
}

} // namespace

// ---- Collectives ----------------------------------------------------------------------------------

/// This process's rank and the job's size (mpirun's variables; 1 process without it).
int jobSize() {
  const char *w = std::getenv("OMPI_COMM_WORLD_SIZE");
  return w ? std::atoi(w) : 1;
}
int jobRank() {
  const char *r = std::getenv("OMPI_COMM_WORLD_RANK");
  return r ? std::atoi(r) : 0;
}

/// Every collective kind over a mesh of the job's size (W), along the first dim and along inner
/// dims (packed blocks), synchronous and asynchronous (all_reduce, reduce_scatter, all_gather),
/// and with more than one rank a ring of sends and receives (pipeline stages):
/// a[3,5] and b[2W,3] f32, c[3,2W] f32,
/// d[7] f64, e[2,2W,3] f32, g[4] i64.
ArtifactBuilder collectivesProgram(ArtifactBuilder a, int64_t w) {
  using K = fb::CollectiveKind;
  a.meshSizes = {w};
  uint32_t x = a.input(fb::DType_F32, {3, 5}, "a"), b = a.input(fb::DType_F32, {2 * w, 3}, "b"),
           c = a.input(fb::DType_F32, {3, 2 * w}, "c"), d = a.input(fb::DType_F64, {7}, "d"),
           e = a.input(fb::DType_F32, {2, 2 * w, 3}, "e"), g = a.input(fb::DType_I64, {4}, "g");
  a.collective(K::CollectiveKind_AllReduce, x, a.output(fb::DType_F32, {3, 5}, "sum"), {0});
  a.collective(K::CollectiveKind_AllReduce, x, a.output(fb::DType_F32, {3, 5}, "avg"), {0}, 0, 0,
               fb::CollectiveReduction_Avg, /*async=*/true);
  uint32_t avgStep = (uint32_t)a.steps.size() - 1;
  a.collective(K::CollectiveKind_AllReduce, d, a.output(fb::DType_F64, {7}, "max"), {0}, 0, 0,
               fb::CollectiveReduction_Max);
  a.collective(K::CollectiveKind_AllReduce, g, a.output(fb::DType_I64, {4}, "isum"), {0});
  a.collective(K::CollectiveKind_AllGather, x, a.output(fb::DType_F32, {3 * w, 5}, "gather0"), {0}, 0);
  a.collective(K::CollectiveKind_AllGather, x, a.output(fb::DType_F32, {3, 5 * w}, "gather1"), {0}, 1);
  // The same gathers asynchronous (ZeRO-3's prefetched parameters), both in flight at once.
  a.collective(K::CollectiveKind_AllGather, x, a.output(fb::DType_F32, {3 * w, 5}, "agather0"), {0}, 0,
               0, fb::CollectiveReduction_Sum, /*async=*/true);
  uint32_t gatherStep = (uint32_t)a.steps.size() - 1;
  a.collective(K::CollectiveKind_AllGather, c, a.output(fb::DType_F32, {3, 2 * w * w}, "agather1"), {0}, 1,
               0, fb::CollectiveReduction_Sum, /*async=*/true);
  uint32_t innerGatherStep = (uint32_t)a.steps.size() - 1;
  uint32_t scatter0 = a.output(fb::DType_F32, {2, 3}, "scatter0");
  a.collective(K::CollectiveKind_ReduceScatter, b, scatter0, {0}, 0);
  a.collective(K::CollectiveKind_ReduceScatter, c, a.output(fb::DType_F32, {3, 2}, "scatter1"), {0}, 1,
               0, fb::CollectiveReduction_Sum, /*async=*/true);
  uint32_t scatterStep = (uint32_t)a.steps.size() - 1;
  uint32_t alltoall = a.output(fb::DType_F32, {2 * w, 2, 3}, "alltoall");
  a.collective(K::CollectiveKind_AllToAll, e, alltoall, {0}, 1, 0);
  a.collective(K::CollectiveKind_Broadcast, x, a.output(fb::DType_F32, {3, 5}, "bcast"), {0}, 0, w - 1);
  if (w > 1) {
    // Pipeline stages: two sends of this rank's own values to the next rank, which receives
    // them in the other order (the tags pair them), from the previous one.
    int64_t next = (jobRank() + 1) % w, previous = (jobRank() + w - 1) % w;
    a.collective(K::CollectiveKind_Send, scatter0, scatter0, {0}, next, 5);
    a.collective(K::CollectiveKind_Send, alltoall, alltoall, {0}, next, 6);
    uint32_t from6 = a.output(fb::DType_F32, {2 * w, 2, 3}, "recv6"),
             from5 = a.output(fb::DType_F32, {2, 3}, "recv5");
    a.collective(K::CollectiveKind_Recv, from6, from6, {0}, previous, 6);
    a.collective(K::CollectiveKind_Recv, from5, from5, {0}, previous, 5);
  }
  a.wait(avgStep);
  a.wait(scatterStep);
  a.wait(innerGatherStep);
  a.wait(gatherStep);
  return a;
}

/// Runs `program` on this rank's inputs (drawn from the rank's own seed).
std::vector<tccrt::Tensor> runCollectives(tccrt::Program &program) {
  std::vector<tccrt::Tensor> in = program.makeInputs();
  std::mt19937 rng(1000 + jobRank());
  std::uniform_real_distribution<double> u(-1, 1);
  for (tccrt::Tensor &t : in) {
    size_t n = t.bytes() / tccrt::dtypeSize(t.dtype());
    for (size_t i = 0; i < n; ++i) {
      if (t.dtype() == TCCRT_F32)
        t.data<float>()[i] = (float)u(rng);
      else if (t.dtype() == TCCRT_F64)
        t.data<double>()[i] = u(rng);
      else
        t.data<int64_t>()[i] = (int64_t)(u(rng) * 1000);
    }
  }
  return program.run(in);
}

/// The CUDA program's collectives give the CPU runtime's results (MPI, checked against the
/// interpreter's in test/distributed) on every rank: run by CTest on the fake driver in one
/// process, and as two ranks under mpirun with host staging (tccrt-cuda-collectives-2ranks).
TEST(CudaCollectives, MatchTheCpuRuntime) {
  REQUIRE_CUDA();
  int64_t w = jobSize();
  std::vector<uint8_t> cpu = collectivesProgram(ArtifactBuilder(), w).finish();
  std::vector<uint8_t> gpu = collectivesProgram(ArtifactBuilder::cuda(), w).finish();
  tccrt::Program cpuProgram = tccrt::Program::fromBuffer(cpu.data(), cpu.size(), 1);
  tccrt::Program gpuProgram = load(gpu);
  std::vector<tccrt::Tensor> want = runCollectives(cpuProgram), got = runCollectives(gpuProgram);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].bytes(), got[i].bytes());
    EXPECT_EQ(std::memcmp(want[i].data(), got[i].data(), want[i].bytes()), 0)
        << "output " << i << " (" << cpuProgram.output(i).name << ") differs on rank " << jobRank()
        << " of " << w << " (" << gpuProgram.deviceName() << ")";
  }
  const char *backend = std::getenv("TCC_CUDA_COLLECTIVES");
  if (w > 1) {
    EXPECT_NE(gpuProgram.deviceName().find(backend && std::string(backend) == "nccl"
                                               ? "collectives: NCCL "
                                               : "collectives: host-staged"),
              std::string::npos)
        << gpuProgram.deviceName();
  }
}

/// Skips unless a real GPU and NCCL are here and this is a single process; sets `version`.
#define REQUIRE_NCCL_ONE_PROCESS(version)                                                          \
  do {                                                                                             \
    REQUIRE_CUDA();                                                                                \
    if (onFakeDriver())                                                                            \
      GTEST_SKIP() << "NCCL needs a real GPU";                                                     \
    if (jobSize() != 1)                                                                            \
      GTEST_SKIP() << "one process only";                                                          \
    try {                                                                                          \
      version = tcc::rt::cuda::ncclVersion();                                                      \
    } catch (const std::exception &e) {                                                            \
      GTEST_SKIP() << e.what();                                                                    \
    }                                                                                              \
  } while (0)

/// On a real GPU with NCCL, one process: every collective through a one-rank NCCL communicator
/// (TCC_CUDA_COLLECTIVES=nccl), packed blocks included.
TEST(CudaCollectives, OneRankThroughNccl) {
  std::string version;
  REQUIRE_NCCL_ONE_PROCESS(version);
  setenv("TCC_CUDA_COLLECTIVES", "nccl", 1);
  std::vector<uint8_t> cpu = collectivesProgram(ArtifactBuilder(), 1).finish();
  std::vector<uint8_t> gpu = collectivesProgram(ArtifactBuilder::cuda(), 1).finish();
  tccrt::Program cpuProgram = tccrt::Program::fromBuffer(cpu.data(), cpu.size(), 1);
  tccrt::Program gpuProgram = load(gpu);
  unsetenv("TCC_CUDA_COLLECTIVES");
  EXPECT_NE(gpuProgram.deviceName().find("collectives: NCCL " + version), std::string::npos)
      << gpuProgram.deviceName();
  std::vector<tccrt::Tensor> want = runCollectives(cpuProgram), got = runCollectives(gpuProgram);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(std::memcmp(want[i].data(), got[i].data(), want[i].bytes()), 0)
        << "output " << i << " (" << cpuProgram.output(i).name << ")";
}

/// NCCL all-reduce bandwidth through libtccrt on one rank (printed for bench/results; a
/// one-rank all-reduce is a device copy, so this is NCCL's overhead and local bandwidth).
TEST(CudaCollectives, NcclOneRankAllReduceBandwidth) {
  std::string version;
  REQUIRE_NCCL_ONE_PROCESS(version);
  for (int64_t mib : {1, 16, 256}) {
    int64_t n = mib * 1024 * 1024 / 4;
    ArtifactBuilder a = ArtifactBuilder::cuda();
    a.meshSizes = {1};
    uint32_t x = a.arena(0, fb::DType_F32, {n}), y = a.arena((uint64_t)n * 4, fb::DType_F32, {n});
    const int reps = 20;
    for (int r = 0; r < reps; ++r)
      a.collective(fb::CollectiveKind_AllReduce, r % 2 ? y : x, r % 2 ? x : y, {0});
    a.copy(a.arena(0, fb::DType_F32, {1}), a.output(fb::DType_F32, {1}, "probe"));
    setenv("TCC_CUDA_COLLECTIVES", "nccl", 1);
    std::vector<uint8_t> bytes = a.finish();
    tccrt::Program program = load(bytes);
    unsetenv("TCC_CUDA_COLLECTIVES");
    std::vector<tccrt::Tensor> in = program.makeInputs();
    program.run(in); // warm-up
    auto t0 = std::chrono::steady_clock::now();
    const int runs = 5;
    for (int i = 0; i < runs; ++i)
      program.run(in);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double gbs = (double)runs * reps * n * 4 / s / 1e9;
    std::printf("[nccl] all_reduce f32 %lld MiB, 1 rank: %.3f ms each, algbw %.1f GB/s\n",
                (long long)mib, s * 1e3 / (runs * reps), gbs);
    RecordProperty("allreduce_" + std::to_string(mib) + "MiB_GBps", std::to_string(gbs));
  }
}

/// The pitched copies NCCL's packed collectives use: blocks along an inner dim, there and back.
TEST(CudaCollectives, BlocksPackAndUnpackAlongAnInnerDim) {
  REQUIRE_CUDA();
  using namespace tcc::rt::cuda;
  CudaDevice &device = CudaDevice::get(0);
  device.makeCurrent();
  const CudaDriver &d = device.driver();
  CudaStream stream(device);
  const std::vector<int64_t> shape{3, 8, 5};
  const int64_t n = 4, count = 3 * 8 * 5;
  std::vector<float> tensor(count);
  for (int64_t i = 0; i < count; ++i)
    tensor[i] = (float)i;
  // Block b holds rows [2b, 2b + 2) of dim 1 of every outer index: [3, 2, 5].
  std::vector<float> want;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < 3; ++o)
      for (int64_t r = 2 * b; r < 2 * b + 2; ++r)
        for (int64_t k = 0; k < 5; ++k)
          want.push_back(tensor[(o * 8 + r) * 5 + k]);
  size_t bytes = count * sizeof(float);
  auto t = (CUdeviceptr)device.allocator().allocate(bytes, stream.id());
  auto blocks = (CUdeviceptr)device.allocator().allocate(bytes, stream.id());
  auto back = (CUdeviceptr)device.allocator().allocate(bytes, stream.id());
  d.check(d.cuMemcpyHtoDAsync(t, tensor.data(), bytes, stream.get()), "upload");
  copyBlocks(d, stream.get(), shape, 1, n, sizeof(float), t, blocks, /*pack=*/true);
  copyBlocks(d, stream.get(), shape, 1, n, sizeof(float), back, blocks, /*pack=*/false);
  std::vector<float> packed(count), unpacked(count);
  d.check(d.cuMemcpyDtoHAsync(packed.data(), blocks, bytes, stream.get()), "download");
  d.check(d.cuMemcpyDtoHAsync(unpacked.data(), back, bytes, stream.get()), "download");
  stream.synchronize();
  EXPECT_EQ(packed, want);
  EXPECT_EQ(unpacked, tensor);
  for (CUdeviceptr p : {t, blocks, back})
    device.allocator().deallocate((void *)p);
}
