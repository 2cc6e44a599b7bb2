//===- NvrtcCompilerTest.cpp - Batched NVRTC compiles ----------------------===//
//
// compileCudaModule's batching: kernels dealt into NVRTC programs of bounded size (at least
// enough to keep the jobs busy), every kernel in exactly one image per architecture, the
// per-kernel ptxas reports read from the program's log, the cache per program, and errors that
// name the kernel NVRTC complains about. (CudaCodegenTest and CudaLibraryKernelsTest compile
// the emitted kernels themselves.)
//
//===----------------------------------------------------------------------===//
#include "tcc/Codegen/NvrtcCompiler.h"
#include "tcc/Support/Tensor.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

namespace cg = tcc::codegen;

namespace {

/// `n` small kernels; each defines the same include-guarded helper, as emitted kernels share
/// their prelude.
std::vector<cg::KernelSource> kernels(size_t n) {
  std::vector<cg::KernelSource> out;
  for (size_t i = 0; i < n; ++i) {
    std::string name = "batch_k" + std::to_string(i);
    out.push_back({name, "#ifndef BATCH_PRELUDE\n#define BATCH_PRELUDE\n"
                         "__device__ inline float twice(float x) { return 2 * x; }\n#endif\n"
                         "extern \"C\" __global__ void " + name +
                             "(float *x) { x[threadIdx.x] = twice(x[threadIdx.x]) + " +
                             std::to_string(i) + ".0f; }\n"});
  }
  return out;
}

struct TempDir {
  llvm::SmallString<128> path;
  TempDir() { EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("tcc-nvrtc-batch", path)); }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
};

std::string what(const std::function<void()> &f) {
  try {
    f();
  } catch (const tcc::Error &e) {
    return e.what();
  }
  return "(no error)";
}

TEST(NvrtcCompilerTest, ArchitectureNames) {
  for (const char *good : {"sm_80", "sm_90", "sm_90a", "sm_100"})
    EXPECT_NO_THROW(cg::checkCudaArch(good)) << good;
  for (const char *bad : {"compute_90", "sm_", "sm_9", "sm80", "90", "sm_90b", ""})
    EXPECT_NE(what([&] { cg::checkCudaArch(bad); }).find("invalid CUDA architecture '" +
                                                          std::string(bad) + "'"),
              std::string::npos)
        << bad;
}

TEST(NvrtcCompilerTest, KernelsAreBatchedIntoBoundedPrograms) {
  if (!cg::nvrtcAvailable())
    GTEST_SKIP() << "no NVRTC in this build: " << cg::nvrtcVersionString();
  TempDir dir;
  cg::CudaCompileOptions options;
  options.cacheDir = dir.path.str().str();
  options.maxKernelsPerProgram = 2;
  options.jobs = 1;
  std::vector<size_t> progress;
  options.progress = [&](size_t done, size_t total) {
    EXPECT_EQ(total, 10u);
    progress.push_back(done);
  };
  std::vector<cg::KernelSource> sources = kernels(5);
  cg::CudaModule m = cg::compileCudaModule(sources, options);
  // 5 kernels, at most 2 per program: 3 programs (2, 2, 1), each for sm_80 and sm_90.
  EXPECT_EQ(m.stats.programs, 3u);
  EXPECT_EQ(m.stats.compiles, 6u);
  EXPECT_EQ(m.stats.cacheHits, 0u);
  ASSERT_EQ(m.images.size(), 6u);
  EXPECT_EQ(progress.back(), 10u);
  EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
  ASSERT_EQ(m.kernels.size(), 5u);
  for (size_t k = 0; k < m.kernels.size(); ++k) {
    EXPECT_EQ(m.kernels[k].name, sources[k].name);
    ASSERT_EQ(m.kernels[k].binaries.size(), 2u);
    for (size_t a = 0; a < 2; ++a) {
      const cg::CudaBinary &b = m.kernels[k].binaries[a];
      EXPECT_EQ(b.arch, options.archs[a]);
      const cg::CudaImage &image = m.images.at(b.image);
      EXPECT_EQ(image.arch, b.arch);
      EXPECT_NE(std::find(image.kernels.begin(), image.kernels.end(), k), image.kernels.end());
      EXPECT_NE(image.ptx.find(".entry " + sources[k].name + "("), std::string::npos);
      EXPECT_GT(b.registers, 0);
      EXPECT_EQ(b.spillStoreBytes + b.spillLoadBytes, 0);
    }
  }
  // Every kernel is in exactly one image per architecture, and an image holds only its own.
  for (const std::string &arch : options.archs) {
    std::multiset<size_t> seen;
    for (const cg::CudaImage &image : m.images)
      if (image.arch == arch) {
        seen.insert(image.kernels.begin(), image.kernels.end());
        for (size_t k = 0; k < sources.size(); ++k)
          EXPECT_EQ(image.ptx.find(".entry " + sources[k].name + "(") != std::string::npos,
                    std::count(image.kernels.begin(), image.kernels.end(), k) == 1);
        EXPECT_EQ(std::memcmp(image.cubin.data(), "\x7f" "ELF", 4), 0);
      }
    EXPECT_EQ(seen, (std::multiset<size_t>{0, 1, 2, 3, 4})) << arch;
  }

  // The same kernels again: every program from the cache, with the same reports.
  cg::CudaModule again = cg::compileCudaModule(sources, options);
  EXPECT_EQ(again.stats.cacheHits, 6u);
  for (size_t k = 0; k < 5; ++k)
    EXPECT_EQ(again.kernels[k].binaries[1].registers, m.kernels[k].binaries[1].registers);
  EXPECT_EQ(again.images[0].cubin, m.images[0].cubin);
}

TEST(NvrtcCompilerTest, ProgramsKeepTheJobsBusy) {
  if (!cg::nvrtcAvailable())
    GTEST_SKIP() << "no NVRTC in this build: " << cg::nvrtcVersionString();
  TempDir dir;
  cg::CudaCompileOptions options;
  options.cacheDir = dir.path.str().str();
  options.jobs = 8;
  // 5 kernels fit one program, but 8 jobs over 2 architectures want 4 programs.
  EXPECT_EQ(cg::compileCudaModule(kernels(5), options).stats.programs, 4u);
  options.archs = {"sm_80"};
  EXPECT_EQ(cg::compileCudaModule(kernels(5), options).stats.programs, 5u); // one per kernel
  options.jobs = 1;
  EXPECT_EQ(cg::compileCudaModule(kernels(5), options).stats.programs, 1u);
  EXPECT_EQ(cg::compileCudaModule({}, options).stats.programs, 0u);
}

TEST(NvrtcCompilerTest, ErrorsNameTheKernel) {
  if (!cg::nvrtcAvailable()) {
    EXPECT_NE(what([] { cg::compileCudaModule(kernels(1), {}); })
                  .find("built without the CUDA toolkit (NVRTC)"),
              std::string::npos);
    GTEST_SKIP() << "no NVRTC in this build: " << cg::nvrtcVersionString();
  }
  TempDir dir;
  cg::CudaCompileOptions options;
  options.cacheDir = dir.path.str().str();
  options.archs = {"sm_90"};
  options.jobs = 1;
  std::vector<cg::KernelSource> sources = kernels(3);
  sources.insert(sources.begin() + 1,
                 {"broken", "extern \"C\" __global__ void broken(float *x) { nope; }\n"});
  std::string error = what([&] { cg::compileCudaModule(sources, options); });
  // One program of four kernels: the message names the broken one only, with NVRTC's
  // diagnostic at its own line.
  EXPECT_NE(error.find("could not compile kernel 'broken' for sm_90"), std::string::npos) << error;
  EXPECT_NE(error.find("broken.cu(1)"), std::string::npos) << error;
  EXPECT_NE(error.find("nope"), std::string::npos) << error;
  EXPECT_EQ(error.find("'batch_k0'"), std::string::npos) << error;
  EXPECT_NE(error.find("source kept at "), std::string::npos) << error;

  sources = kernels(2);
  sources.push_back(sources[0]);
  EXPECT_NE(what([&] { cg::compileCudaModule(sources, options); })
                .find("two CUDA kernels are named 'batch_k0'"),
            std::string::npos);
  options.archs = {"sm_90", "sm_90"};
  EXPECT_NE(what([&] { cg::compileCudaModule(kernels(1), options); }).find("listed twice"),
            std::string::npos);
  options.archs = {"compute_90"};
  EXPECT_NE(what([&] { cg::compileCudaModule(kernels(1), options); })
                .find("invalid CUDA architecture 'compute_90'"),
            std::string::npos);
}

} // namespace
