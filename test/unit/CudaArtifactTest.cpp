//===- CudaArtifactTest.cpp - compileModule for CUDA, read back ------------===//
//
// A graph with a GEMM, a convolution, a top-k and elementwise/reduction kernels compiled with
// compileModule(device "cuda"): the artifact is a CUDA program whose launches are KernelLaunch
// (tk kernels and the generated conv/top-k kernels, each with its launch configuration), Gemm
// and Copy only; every launched kernel is in exactly one image of each architecture; the report
// lists every kernel with its resources. libtccrt then loads it: on a machine without a usable
// GPU the load fails with the runtime's no-GPU message only (the artifact itself verifies), and
// with one the outputs match the CPU artifact's.
//
//===----------------------------------------------------------------------===//
#include "tcc/Codegen/NvrtcCompiler.h"
#include "tcc/Compiler/Compiler.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Runtime/artifact_generated.h"
#include "tcc/Runtime/tccrt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

using namespace tcc;
namespace fb = tcc::artifact;

namespace {

// Two convolutions of one geometry share their generated kernel; the top-k takes the softmax of
// a GEMM's rows.
constexpr const char *kGraph = R"(
func.func @main(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %a: tensor<6x16xf32>,
                %b: tensor<16x10xf32>)
    -> (tensor<2x4x6x6xf32>, tensor<6x3xf32>, tensor<6x3xi64>) {
  %c0 = tcc.conv %x, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x6x6xf32>
  %x2 = tcc.unary neg %x : tensor<2x3x8x8xf32>
  %c1 = tcc.conv %x2, %w {strides = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x6x6xf32>
  %c = tcc.binary add %c0, %c1 : tensor<2x4x6x6xf32>
  %p = tcc.matmul %a, %b : tensor<6x16xf32>, tensor<16x10xf32> -> tensor<6x10xf32>
  %m = tcc.reduce max %p dims = [1] : tensor<6x10xf32> -> tensor<6xf32>
  %mb = tcc.broadcast_in_dim %m dims = [0] : tensor<6xf32> -> tensor<6x10xf32>
  %d = tcc.binary sub %p, %mb : tensor<6x10xf32>
  %e = tcc.unary exp %d : tensor<6x10xf32>
  %v, %i = tcc.topk %e dim = 1 k = 3 {largest = true} : tensor<6x10xf32> -> tensor<6x3xf32>, tensor<6x3xi64>
  return %c, %v, %i : tensor<2x4x6x6xf32>, tensor<6x3xf32>, tensor<6x3xi64>
})";

class CudaArtifactTest : public ::testing::Test {
protected:
  CudaArtifactTest() {
    ctx.loadDialect<TccDialect, tk::TkDialect, mlir::func::FuncDialect,
                    mlir::memref::MemRefDialect>();
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("tcc-cuda-artifact-test", cacheDir));
  }
  ~CudaArtifactTest() override { llvm::sys::fs::remove_directories(cacheDir); }

  CompiledModel compile(const std::string &device) {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(kGraph, &ctx);
    EXPECT_TRUE(module);
    CompileOptions options;
    options.device = device;
    options.cacheDir = cacheDir.str().str();
    return compileModule(*module, options);
  }

  mlir::MLIRContext ctx;
  llvm::SmallString<128> cacheDir;
};

std::vector<Tensor> inputs() {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<Tensor> out;
  for (Shape s : {Shape{2, 3, 8, 8}, Shape{4, 3, 3, 3}, Shape{6, 16}, Shape{16, 10}}) {
    Tensor t(DType::F32, s);
    for (int64_t k = 0; k < t.numElements(); ++k)
      t.data<float>()[k] = dist(rng);
    out.push_back(std::move(t));
  }
  return out;
}

/// Runs an artifact through the C API; the outputs' bytes.
std::vector<std::vector<uint8_t>> run(tccrt_program *p, const std::vector<Tensor> &in) {
  std::vector<const void *> inPtrs;
  for (const Tensor &t : in)
    inPtrs.push_back(t.raw());
  std::vector<std::vector<uint8_t>> out(tccrt_num_outputs(p));
  std::vector<void *> outPtrs;
  for (size_t i = 0; i < out.size(); ++i) {
    tccrt_tensor_info info;
    EXPECT_EQ(tccrt_output_info(p, i, &info), TCCRT_OK);
    out[i].resize(info.bytes);
    outPtrs.push_back(out[i].data());
  }
  EXPECT_EQ(tccrt_run(p, inPtrs.data(), outPtrs.data()), TCCRT_OK) << tccrt_last_error();
  return out;
}

TEST_F(CudaArtifactTest, CompiledProgramLaunchesKernelsAndLoads) {
  if (!codegen::nvrtcAvailable()) {
    try {
      compile("cuda");
      FAIL() << "compiled for CUDA without NVRTC";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("built without the CUDA toolkit (NVRTC)"),
                std::string::npos)
          << e.what();
    }
    GTEST_SKIP() << "no NVRTC in this build: " << codegen::nvrtcVersionString();
  }
  CompiledModel compiled = compile("cuda");
  const CompileReport &r = compiled.report;
  EXPECT_EQ(r.device, "cuda");
  EXPECT_EQ(r.cudaArchs, (std::vector<std::string>{"sm_80", "sm_90"}));
  EXPECT_EQ(r.nvrtcPrograms, 1u);
  EXPECT_EQ(r.externCalls, 1u); // the GEMM; conv and top-k are kernels on CUDA
  ASSERT_EQ(r.cudaKernels.size(), r.kernels);
  std::set<std::string> reported;
  for (const CompileReport::CudaKernel &k : r.cudaKernels) {
    reported.insert(k.name);
    ASSERT_EQ(k.archs.size(), 2u) << k.name;
    for (const CompileReport::CudaResources &res : k.archs) {
      EXPECT_GT(res.registers, 0) << k.name << " " << res.arch;
      EXPECT_EQ(res.spillStores + res.spillLoads, 0) << k.name << " " << res.arch;
    }
    EXPECT_FALSE(k.strategy.empty()) << k.name;
    EXPECT_LE(uint64_t(k.block[0]) * k.block[1] * k.block[2], 1024u) << k.name;
  }
  std::string json = r.toJson();
  EXPECT_NE(json.find("\"cuda_kernels\": ["), std::string::npos);
  EXPECT_NE(json.find("\"spill_stores\": 0"), std::string::npos);

  // The artifact, read back.
  const std::vector<uint8_t> &bytes = compiled.artifact;
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  ASSERT_TRUE(fb::VerifyProgramBuffer(verifier));
  const fb::Program *program = fb::GetProgram(bytes.data());
  EXPECT_EQ(program->device(), fb::Device_CUDA);
  EXPECT_EQ(program->cpu_module(), nullptr);
  const fb::CudaModule *module = program->cuda_module();
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->compiler()->str().rfind("NVRTC ", 0), 0u);
  ASSERT_EQ(module->images()->size(), 2u); // one program, two architectures
  ASSERT_EQ(module->ptx()->size(), 2u);
  EXPECT_EQ(module->images()->Get(0)->arch()->str(), "sm_80");
  EXPECT_EQ(module->ptx()->Get(1)->arch()->str(), "compute_90");

  std::map<std::string, size_t> launches; // kernel name -> launches
  size_t gemms = 0;
  for (const fb::Launch *l : *program->launches()) {
    switch (l->step_type()) {
    case fb::Step_KernelLaunch: {
      const fb::KernelLaunch *k = l->step_as_KernelLaunch();
      const fb::Kernel *kernel = program->kernels()->Get(k->kernel());
      std::string name = kernel->name()->str();
      ++launches[name];
      EXPECT_TRUE(reported.count(name)) << name;
      ASSERT_EQ(k->grid()->size(), 3u);
      ASSERT_EQ(k->block()->size(), 3u);
      EXPECT_GE(k->grid()->Get(0), 1u);
      EXPECT_EQ(k->args()->size(), kernel->params()->size());
      // The kernel is defined in exactly one image of each architecture (its .nv.info section).
      for (const char *arch : {"sm_80", "sm_90"}) {
        size_t found = 0;
        std::string section = ".nv.info." + name;
        for (const fb::CudaImage *image : *module->images()) {
          std::string cubin(image->cubin()->begin(), image->cubin()->end());
          found += image->arch()->str() == arch &&
                   cubin.find(section + '\0') != std::string::npos;
        }
        EXPECT_EQ(found, 1u) << name << " " << arch;
      }
      break;
    }
    case fb::Step_Gemm:
      ++gemms;
      break;
    case fb::Step_Copy:
      break;
    default:
      ADD_FAILURE() << "a CUDA program with a " << fb::EnumNameStep(l->step_type()) << " step";
    }
  }
  EXPECT_EQ(gemms, 1u);
  size_t convLaunches = 0, topkLaunches = 0, convKernels = 0;
  for (const auto &[name, count] : launches) {
    if (name.rfind("conv_", 0) == 0)
      convLaunches += count, ++convKernels;
    if (name.rfind("topk_", 0) == 0)
      topkLaunches += count;
  }
  EXPECT_EQ(convLaunches, 2u);
  EXPECT_EQ(convKernels, 1u) << "equal geometries share one generated kernel";
  EXPECT_EQ(topkLaunches, 1u);

  // libtccrt: without a usable GPU the load fails with the no-GPU message, and only with it
  // (the artifact verifies); with one it loads as a CUDA program.
  tccrt_program *p = nullptr;
  if (!tccrt_device_available(TCCRT_DEVICE_CUDA, nullptr)) {
    EXPECT_EQ(tccrt_load_buffer(bytes.data(), bytes.size(), nullptr, &p), TCCRT_ERROR);
    std::string error = tccrt_last_error();
    EXPECT_NE(error.find("no usable CUDA GPU/driver"), std::string::npos) << error;
    EXPECT_EQ(error.find("damaged"), std::string::npos) << error;
  } else {
    ASSERT_EQ(tccrt_load_buffer(bytes.data(), bytes.size(), nullptr, &p), TCCRT_OK)
        << tccrt_last_error();
    EXPECT_EQ(tccrt_program_device(p), TCCRT_DEVICE_CUDA);
    tccrt_program_free(p);
  }
}

TEST_F(CudaArtifactTest, RunsLikeTheCpu) {
  if (!codegen::nvrtcAvailable())
    GTEST_SKIP() << "no NVRTC in this build: " << codegen::nvrtcVersionString();
  const char *reason = nullptr;
  if (!tccrt_device_available(TCCRT_DEVICE_CUDA, &reason))
    GTEST_SKIP() << (reason ? reason : "no usable CUDA GPU/driver");
  CompiledModel compiled = compile("cuda");
  tccrt_program *p = nullptr;
  ASSERT_EQ(tccrt_load_buffer(compiled.artifact.data(), compiled.artifact.size(), nullptr, &p),
            TCCRT_OK)
      << tccrt_last_error();
  std::vector<Tensor> in = inputs();
  auto cuda = run(p, in);
  tccrt_program_free(p);
  CompiledModel cpuCompiled = compile("cpu");
  ASSERT_EQ(tccrt_load_buffer(cpuCompiled.artifact.data(), cpuCompiled.artifact.size(), nullptr,
                              &p),
            TCCRT_OK)
      << tccrt_last_error();
  auto cpu = run(p, in);
  tccrt_program_free(p);
  ASSERT_EQ(cuda.size(), cpu.size());
  for (size_t o = 0; o < 2; ++o) { // f32 outputs
    const float *g = reinterpret_cast<const float *>(cuda[o].data());
    const float *c = reinterpret_cast<const float *>(cpu[o].data());
    for (size_t k = 0; k < cuda[o].size() / 4; ++k)
      EXPECT_NEAR(g[k], c[k], 1e-4f * std::fabs(c[k]) + 1e-5f) << "output " << o << " at " << k;
  }
  EXPECT_EQ(cuda[2], cpu[2]); // top-k indices
}

TEST_F(CudaArtifactTest, OptionsAreCheckedFirst) {
  CompileOptions options;
  options.device = "cuda";
  options.cudaArchs = {"sm_80", "compute_90"};
  EXPECT_THROW(checkCompileOptions(options), Error);
  options.cudaArchs = {"sm_80", "sm_80"};
  EXPECT_THROW(checkCompileOptions(options), Error);
  options.cudaArchs = {};
  EXPECT_THROW(checkCompileOptions(options), Error);
  options.device = "gpu";
  EXPECT_THROW(checkCompileOptions(options), Error);
  options.device = "cpu";
  EXPECT_NO_THROW(checkCompileOptions(options));
}

} // namespace
