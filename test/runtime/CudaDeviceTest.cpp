//===- CudaDeviceTest.cpp - The CUDA driver layer and device primitives ---===//
//
// tccrt-cuda-tests. The driver is loaded once per process, so every test first says which
// driver configuration it needs (useFake / useRealDriver below), which sets the environment
// before the first load. CTest runs each test in its own process (gtest_discover_tests);
// run by hand, a test whose configuration differs from the one already loaded skips, naming
// both.
//
//  * CudaArch.*: selectCudaArch's table (pure).
//  * CudaDriverLoad.*: the messages when the driver is missing, incomplete or has no device.
//  * FakeCuda*.*: against the fake driver (test/runtime/fakecuda) with the configuration the
//    suite names (FakeCudaCC86: compute capability 8.6, FakeCudaOom: 64 MiB of device memory,
//    FakeCudaDeferred: queued work runs only when waited for).
//  * OnDevice.*: driver-independent tests, run against the fake and, in a second CTest entry
//    per test ("real-driver:" prefix, TCC_CUDA_TEST_DRIVER=real), against the real driver,
//    where they skip with the reason when there is none.
//
//===----------------------------------------------------------------------===//
#include "CudaDevice.h"
#include "Program.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

using namespace tcc::rt;
using namespace tcc::rt::cuda;

namespace {

// ---- driver configuration per process -----------------------------------------------------------

/// Applies `setEnvironment` unless this process already configured a driver; returns "" when
/// the process runs with configuration `key`, else why it cannot.
std::string configure(const std::string &key, const std::function<void()> &setEnvironment) {
  static std::string loaded;
  if (loaded.empty()) {
    setEnvironment();
    loaded = key;
  }
  if (loaded == key)
    return "";
  return "needs driver configuration '" + key + "' but this process already loaded '" + loaded +
         "' (the driver loads once per process; ctest runs every test in its own process)";
}

struct FakeSettings {
  std::string cc = "90";
  std::string memory; // TCC_FAKE_CUDA_MEMORY; empty: default
  bool deferred = false;
  std::string devices; // TCC_FAKE_CUDA_DEVICES; empty: default
};

std::string useFake(const FakeSettings &s) {
  std::string key = "fake cc=" + s.cc + " memory=" + s.memory +
                    " deferred=" + (s.deferred ? "1" : "0") + " devices=" + s.devices;
  return configure(key, [&] {
    setenv("TCC_CUDA_DRIVER", TCC_FAKE_CUDA_LIBRARY, 1);
    setenv("TCC_FAKE_CUDA_KERNELS", TCC_FAKE_CUDA_TEST_KERNELS, 1);
    setenv("TCC_FAKE_CUDA_CC", s.cc.c_str(), 1);
    setenv("TCC_FAKE_CUDA_DEFERRED", s.deferred ? "1" : "0", 1);
    if (s.memory.empty())
      unsetenv("TCC_FAKE_CUDA_MEMORY");
    else
      setenv("TCC_FAKE_CUDA_MEMORY", s.memory.c_str(), 1);
    if (s.devices.empty())
      unsetenv("TCC_FAKE_CUDA_DEVICES");
    else
      setenv("TCC_FAKE_CUDA_DEVICES", s.devices.c_str(), 1);
  });
}

/// The environment's driver, as libtccrt's users get it ($TCC_CUDA_DRIVER if they set one).
std::string useRealDriver() {
  return configure("real", [] {});
}

bool realDriverRequested() {
  const char *v = std::getenv("TCC_CUDA_TEST_DRIVER");
  return v && std::string(v) == "real";
}

/// The fake's test hooks (valid once the fake is loaded).
struct FakeHooks {
  const char *(*lastModuleKind)() = nullptr;
  long long (*counter)(const char *) = nullptr;
};
FakeHooks fakeHooks() {
  FakeHooks hooks;
  void *handle = dlopen(TCC_FAKE_CUDA_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
  if (!handle)
    return hooks;
  hooks.lastModuleKind =
      reinterpret_cast<const char *(*)()>(dlsym(handle, "tcc_fake_cuda_last_module_kind"));
  hooks.counter =
      reinterpret_cast<long long (*)(const char *)>(dlsym(handle, "tcc_fake_cuda_counter"));
  dlclose(handle); // drops the reference RTLD_NOLOAD added; the driver keeps it loaded
  return hooks;
}

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const std::exception &e) {
    return e.what();
  }
  return "(no exception)";
}

#define EXPECT_CONTAINS(text, part)                                                                \
  EXPECT_NE(std::string(text).find(part), std::string::npos)                                       \
      << "expected to find: " << (part) << "\n in: " << (text)

// ---- code images --------------------------------------------------------------------------------

/// tcc_test_axpy(const float *x, float *y, const float *a, uint64 n): y[i] += a[0] * x[i] with a
/// grid-stride loop. nvcc 13.0's PTX for compute_80 (`nvcc -ptx -arch=compute_80`) of
///   extern "C" __global__ void tcc_test_axpy(const float *x, float *y, const float *a,
///                                            unsigned long long n) {
///     for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
///          i += gridDim.x * blockDim.x) y[i] += a[0] * x[i];
///   }
/// with `.version` lowered to 7.0 (CUDA 11.0 drivers and later); ptxas 13.0 assembles it for
/// sm_80 and sm_90. On the fake it runs as tcc_emu_tcc_test_axpy (fakecuda/FakeKernels.cpp).
const char *const kAxpyPtx = R"(.version 7.0
.target sm_80
.address_size 64

.visible .entry tcc_test_axpy(
	.param .u64 tcc_test_axpy_param_0,
	.param .u64 tcc_test_axpy_param_1,
	.param .u64 tcc_test_axpy_param_2,
	.param .u64 tcc_test_axpy_param_3
)
{
	.reg .pred 	%p<3>;
	.reg .f32 	%f<5>;
	.reg .b32 	%r<7>;
	.reg .b64 	%rd<16>;

	ld.param.u64 	%rd8, [tcc_test_axpy_param_0];
	ld.param.u64 	%rd9, [tcc_test_axpy_param_1];
	ld.param.u64 	%rd10, [tcc_test_axpy_param_2];
	ld.param.u64 	%rd11, [tcc_test_axpy_param_3];
	mov.u32 	%r1, %ntid.x;
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %tid.x;
	mad.lo.s32 	%r4, %r2, %r1, %r3;
	cvt.u64.u32 	%rd15, %r4;
	setp.ge.u64 	%p1, %rd15, %rd11;
	@%p1 bra 	$L__BB0_3;

	mov.u32 	%r5, %nctaid.x;
	mul.lo.s32 	%r6, %r5, %r1;
	cvt.u64.u32 	%rd2, %r6;
	cvta.to.global.u64 	%rd3, %rd10;
	cvta.to.global.u64 	%rd4, %rd8;
	cvta.to.global.u64 	%rd5, %rd9;

$L__BB0_2:
	shl.b64 	%rd12, %rd15, 2;
	add.s64 	%rd13, %rd4, %rd12;
	ld.global.f32 	%f1, [%rd13];
	ld.global.f32 	%f2, [%rd3];
	add.s64 	%rd14, %rd5, %rd12;
	ld.global.f32 	%f3, [%rd14];
	fma.rn.f32 	%f4, %f2, %f1, %f3;
	st.global.f32 	[%rd14], %f4;
	add.s64 	%rd15, %rd15, %rd2;
	setp.lt.u64 	%p2, %rd15, %rd11;
	@%p2 bra 	$L__BB0_2;

$L__BB0_3:
	ret;
}
)";

/// A PTX module for `target` whose kernels (name, number of 8-byte parameters) do nothing
/// (valid PTX; the fake reads only the directives and entry signatures).
std::string emptyKernelsPtx(const std::string &target,
                            const std::vector<std::pair<std::string, int>> &kernels) {
  std::string text = ".version 7.0\n.target " + target + "\n.address_size 64\n";
  for (const auto &[name, params] : kernels) {
    text += "\n.visible .entry " + name + "(";
    for (int i = 0; i < params; ++i)
      text += std::string(i ? "," : "") + "\n\t.param .u64 " + name + "_param_" + std::to_string(i);
    text += "\n)\n{\n\tret;\n}\n";
  }
  return text;
}

/// A minimal CUDA ELF as the fake reads it: e_machine EM_CUDA, e_flags with the SM version in
/// bits 8..15 (ABI version 8, as nvcc 13.0 writes for sm_80/sm_90), and per kernel a
/// `.nv.info.<name>` section with one EIATTR_KPARAM_INFO record per 8-byte parameter (the
/// record layout nvcc 13.0 emits). No code: it exists to test which image is chosen.
std::vector<uint8_t> fakeCubin(int sm, const std::vector<std::pair<std::string, int>> &kernels) {
  auto put = [](std::vector<uint8_t> &v, size_t at, uint64_t value, int bytes) {
    if (v.size() < at + bytes)
      v.resize(at + bytes);
    for (int i = 0; i < bytes; ++i)
      v[at + i] = uint8_t(value >> (8 * i));
  };
  std::vector<uint8_t> elf(64, 0);
  std::string names(1, '\0');
  struct Section {
    uint32_t name;
    uint64_t offset, size;
  };
  std::vector<Section> sections{{0, 0, 0}};
  uint32_t shstrName = uint32_t(names.size());
  names += std::string(".shstrtab") + '\0';
  std::vector<uint32_t> infoNames;
  for (const auto &kernel : kernels) {
    infoNames.push_back(uint32_t(names.size()));
    names += ".nv.info." + kernel.first + '\0';
  }
  sections.push_back({shstrName, elf.size(), names.size()});
  elf.insert(elf.end(), names.begin(), names.end());
  for (size_t k = 0; k < kernels.size(); ++k) {
    size_t begin = elf.size();
    for (int p = kernels[k].second - 1; p >= 0; --p) {
      size_t at = elf.size();
      put(elf, at, 0x04, 1);                 // EIFMT_SVAL
      put(elf, at + 1, 0x17, 1);             // EIATTR_KPARAM_INFO
      put(elf, at + 2, 12, 2);               // 12 bytes
      put(elf, at + 4, 0, 4);                // index
      put(elf, at + 8, uint64_t(p), 2);      // ordinal
      put(elf, at + 10, uint64_t(p) * 8, 2); // offset
      put(elf, at + 12, 0x0021f000, 4);      // size 8 (bits 18..31) and flags
    }
    sections.push_back({infoNames[k], begin, elf.size() - begin});
  }
  while (elf.size() % 8)
    elf.push_back(0);
  uint64_t shoff = elf.size();
  for (const Section &s : sections) {
    size_t at = elf.size();
    elf.resize(at + 64, 0);
    put(elf, at, s.name, 4);
    put(elf, at + 4, s.name ? 3 : 0, 4); // SHT_STRTAB (the type is not read)
    put(elf, at + 0x18, s.offset, 8);
    put(elf, at + 0x20, s.size, 8);
  }
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x41, 8};
  std::memcpy(elf.data(), ident, sizeof(ident));
  put(elf, 0x10, 2, 2);                                 // ET_EXEC
  put(elf, 0x12, 190, 2);                               // EM_CUDA
  put(elf, 0x14, 1, 4);                                 // EV_CURRENT
  put(elf, 0x28, shoff, 8);                             // e_shoff
  put(elf, 0x30, 0x06000004u | (uint32_t(sm) << 8), 4); // e_flags
  put(elf, 0x34, 64, 2);                                // e_ehsize
  put(elf, 0x3a, 64, 2);                                // e_shentsize
  put(elf, 0x3c, sections.size(), 2);                   // e_shnum
  put(elf, 0x3e, 1, 2);                                 // e_shstrndx
  return elf;
}

CudaCode code(const std::string &arch, const std::vector<uint8_t> &bytes) {
  return {arch, bytes.data(), bytes.size()};
}
CudaCode code(const std::string &arch, const std::string &text) {
  return {arch, reinterpret_cast<const uint8_t *>(text.c_str()), text.size() + 1};
}

// ---- device memory helpers ----------------------------------------------------------------------

void upload(CudaDevice &device, const CudaStream &stream, void *dst, const void *src,
            size_t bytes) {
  const CudaDriver &d = device.driver();
  d.check(d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, bytes, stream.get()),
          "cuMemcpyHtoDAsync");
}
void download(CudaDevice &device, const CudaStream &stream, void *dst, const void *src,
              size_t bytes) {
  const CudaDriver &d = device.driver();
  d.check(d.cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), bytes, stream.get()),
          "cuMemcpyDtoHAsync");
}

void launchAxpy(CudaDevice &device, const CudaStream &stream, CUfunction f, void *x, void *y,
                void *a, uint64_t n) {
  void *params[] = {&x, &y, &a, &n};
  unsigned grid = unsigned((n + 255) / 256);
  device.driver().check(
      device.driver().cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, stream.get(), params, nullptr),
      "cuLaunchKernel(tcc_test_axpy)");
}

// ---- fixtures -----------------------------------------------------------------------------------

/// Driver-independent tests: the fake, or the real driver under TCC_CUDA_TEST_DRIVER=real.
class OnDevice : public ::testing::Test {
protected:
  void SetUp() override {
    fake = !realDriverRequested();
    std::string why = fake ? useFake({}) : useRealDriver();
    if (!why.empty())
      GTEST_SKIP() << why;
    if (!fake && !cudaAvailable(&why))
      GTEST_SKIP() << why;
    device = &CudaDevice::get(0);
    if (fake)
      hooks = fakeHooks();
  }
  long long counter(const char *name) { return hooks.counter ? hooks.counter(name) : -1; }
  bool fake = true;
  CudaDevice *device = nullptr;
  FakeHooks hooks;
};

/// Tests of the fake driver with the given settings.
template <class Settings> class FakeFixture : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why = useFake(Settings::get());
    if (!why.empty())
      GTEST_SKIP() << why;
    device = &CudaDevice::get(0);
    hooks = fakeHooks();
    ASSERT_TRUE(hooks.counter && hooks.lastModuleKind) << "the fake's test hooks are missing";
  }
  CudaDevice *device = nullptr;
  FakeHooks hooks;
};

struct DefaultSettings {
  static FakeSettings get() { return {}; }
};
struct Cc86Settings {
  static FakeSettings get() {
    FakeSettings s;
    s.cc = "86";
    return s;
  }
};
struct Cc75Settings {
  static FakeSettings get() {
    FakeSettings s;
    s.cc = "75";
    return s;
  }
};
struct OomSettings {
  static FakeSettings get() {
    FakeSettings s;
    s.memory = std::to_string(64 << 20);
    return s;
  }
};
struct DeferredSettings {
  static FakeSettings get() {
    FakeSettings s;
    s.deferred = true;
    return s;
  }
};
using FakeCuda = FakeFixture<DefaultSettings>;
using FakeCudaCC86 = FakeFixture<Cc86Settings>;
using FakeCudaCC75 = FakeFixture<Cc75Settings>;
using FakeCudaOom = FakeFixture<OomSettings>;
using FakeCudaDeferred = FakeFixture<DeferredSettings>;

} // namespace

// ==== selectCudaArch =============================================================================

TEST(CudaArch, ExactCubinWins) {
  CudaArchChoice c = selectCudaArch(90, {"sm_80", "sm_90"}, {"compute_80", "compute_90"});
  EXPECT_EQ(c.arch, "sm_90");
  EXPECT_FALSE(c.ptx);
  c = selectCudaArch(80, {"sm_80", "sm_90"}, {"compute_90"});
  EXPECT_EQ(c.arch, "sm_80");
  EXPECT_FALSE(c.ptx);
}

TEST(CudaArch, PtxFallbackIsTheNewestNotAbove) {
  // No sm_86 cubin: an sm_80 cubin would run on 8.6, but the contract is exact cubins only.
  CudaArchChoice c =
      selectCudaArch(86, {"sm_80", "sm_90"}, {"compute_70", "compute_80", "compute_90"});
  EXPECT_EQ(c.arch, "compute_80");
  EXPECT_TRUE(c.ptx);
  c = selectCudaArch(100, {"sm_80", "sm_90"}, {"compute_80", "compute_90"});
  EXPECT_EQ(c.arch, "compute_90");
  EXPECT_TRUE(c.ptx);
  c = selectCudaArch(90, {}, {"compute_90", "compute_80"});
  EXPECT_EQ(c.arch, "compute_90");
  // Two-digit vs three-digit numbers compare as numbers, not strings.
  c = selectCudaArch(120, {}, {"compute_90", "compute_100"});
  EXPECT_EQ(c.arch, "compute_100");
}

TEST(CudaArch, SuffixedArchsMatchOnlyTheirCapability) {
  EXPECT_EQ(selectCudaArch(90, {"sm_90a"}, {}).arch, "sm_90a");
  EXPECT_EQ(selectCudaArch(90, {"sm_90", "sm_90a"}, {}).arch, "sm_90a");
  EXPECT_EQ(selectCudaArch(100, {"sm_90a"}, {}).arch, "");
  CudaArchChoice c = selectCudaArch(90, {"sm_80"}, {"compute_80", "compute_90a"});
  EXPECT_EQ(c.arch, "compute_90a");
  EXPECT_TRUE(c.ptx);
  c = selectCudaArch(100, {"sm_90a"}, {"compute_80", "compute_90a"});
  EXPECT_EQ(c.arch, "compute_80");
  EXPECT_TRUE(c.ptx);
}

TEST(CudaArch, NothingFits) {
  CudaArchChoice c = selectCudaArch(75, {"sm_80", "sm_90"}, {"compute_80"});
  EXPECT_EQ(c.arch, "");
  EXPECT_FALSE(c.ptx);
  EXPECT_EQ(selectCudaArch(90, {}, {}).arch, "");
  // Malformed names never match.
  EXPECT_EQ(selectCudaArch(90, {"sm90", "sm_", "sm_9x", "SM_90", "sm_90A", "compute_90"},
                           {"sm_80", "compute_", "compute_8_0"})
                .arch,
            "");
}

// ==== the fake, default configuration ============================================================

TEST_F(FakeCuda, DeviceProperties) {
  EXPECT_EQ(device->name(), "tcc fake CUDA device");
  EXPECT_EQ(device->computeCapability(), 90);
  EXPECT_EQ(device->multiprocessors(), 4);
  EXPECT_EQ(device->totalMemory(), size_t(16) << 30);
  EXPECT_EQ(device->ordinal(), 0);
  EXPECT_EQ(&CudaDevice::get(0), device);
  EXPECT_EQ(device->driver().library, TCC_FAKE_CUDA_LIBRARY);
  EXPECT_EQ(device->driver().driverVersion, 13000);
  EXPECT_EQ(errorOf([] { CudaDevice::get(1); }), "CUDA device 1 does not exist (1 device: cuda:0)");
}

TEST_F(FakeCuda, DescribeAndCheck) {
  const CudaDriver &d = device->driver();
  EXPECT_EQ(d.describe(CUDA_ERROR_OUT_OF_MEMORY), "CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
  EXPECT_EQ(d.describe(12345), "CUDA error 12345");
  EXPECT_NO_THROW(d.check(CUDA_SUCCESS, "nothing"));
  EXPECT_EQ(errorOf([&] { d.check(CUDA_ERROR_INVALID_VALUE, "cuThing(x)"); }),
            "cuThing(x): CUDA_ERROR_INVALID_VALUE (invalid argument)");
}

TEST_F(FakeCuda, DriverCallsNeedTheContext) {
  const CudaDriver &d = device->driver();
  CUdeviceptr p = 0;
  ASSERT_EQ(d.cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(d.cuMemAlloc(&p, 256), 201); // CUDA_ERROR_INVALID_CONTEXT
  // Every entry point makes the device current first.
  void *q = device->allocator().allocate(256);
  EXPECT_NE(q, nullptr);
  device->allocator().deallocate(q);
}

TEST_F(FakeCuda, BadCopiesAreErrors) {
  const CudaDriver &d = device->driver();
  CudaStream stream(*device);
  void *p = device->allocator().allocate(1000, stream.id());
  size_t block = device->allocator().blockSize(p);
  std::vector<uint8_t> host(block + 1);
  // Inside the segment the allocator reserved (2 MiB) is fine; beyond it is not.
  EXPECT_EQ(d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(p), host.data(), block, stream.get()),
            CUDA_SUCCESS);
  EXPECT_EQ(
      d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(p) + CachingAllocator::kSmallBuffer - 8,
                          host.data(), 16, stream.get()),
      CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d.cuMemFree(reinterpret_cast<CUdeviceptr>(p) + 512), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(errorOf([&] {
              d.check(d.cuMemcpyDtoHAsync(host.data(), 0x10, 4, stream.get()), "cuMemcpyDtoHAsync");
            }),
            "cuMemcpyDtoHAsync: CUDA_ERROR_INVALID_VALUE (invalid argument)");
  device->allocator().deallocate(p);
}

TEST_F(FakeCuda, PicksTheExactCubin) {
  std::vector<uint8_t> sm80 = fakeCubin(80, {{"tcc_test_axpy", 4}});
  std::vector<uint8_t> sm90 = fakeCubin(90, {{"tcc_test_axpy", 4}});
  std::string ptx80 = emptyKernelsPtx("sm_80", {{"tcc_test_axpy", 4}});
  std::string ptx90 = emptyKernelsPtx("sm_90", {{"tcc_test_axpy", 4}});
  long long loads = hooks.counter("module_loads");
  CudaModule module(*device, {code("sm_80", sm80), code("sm_90", sm90)},
                    {code("compute_80", ptx80), code("compute_90", ptx90)});
  EXPECT_EQ(module.loadedArch(), "sm_90");
  EXPECT_FALSE(module.jitFromPtx());
  EXPECT_STREQ(hooks.lastModuleKind(), "cubin sm_90");
  EXPECT_EQ(hooks.counter("module_loads"), loads + 1);
  EXPECT_NE(module.function("tcc_test_axpy"), nullptr);
}

TEST_F(FakeCuda, LoadsEveryImageOfTheArchAndFindsKernelsInAny) {
  std::vector<uint8_t> first = fakeCubin(90, {{"tcc_test_axpy", 4}});
  std::vector<uint8_t> second = fakeCubin(90, {{"tcc_test_shape", 1}});
  std::vector<uint8_t> other = fakeCubin(80, {{"tcc_test_shape", 1}});
  long long loads = hooks.counter("module_loads");
  CudaModule module(*device, {code("sm_90", first), code("sm_80", other), code("sm_90", second)},
                    {});
  EXPECT_EQ(hooks.counter("module_loads"), loads + 2);
  CUfunction axpy = module.function("tcc_test_axpy"), shape = module.function("tcc_test_shape");
  EXPECT_NE(axpy, nullptr);
  EXPECT_NE(shape, nullptr);
  EXPECT_NE(axpy, shape);
  EXPECT_EQ(module.function("tcc_test_axpy"), axpy);
  EXPECT_EQ(errorOf([&] { module.function("tcc_test_missing"); }),
            "kernel tcc_test_missing is in none of the 2 sm_90 cubin images loaded on cuda:0");
}

TEST_F(FakeCuda, JitFailureCarriesTheDriverLog) {
  std::string noTarget = ".version 7.0\n.address_size 64\n";
  std::string error = errorOf([&] { CudaModule(*device, {}, {code("compute_80", noTarget)}); });
  EXPECT_CONTAINS(error,
                  "loading PTX compute_80 image 1 of 1 on cuda:0 (tcc fake CUDA device, sm_90): "
                  "CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)\nJIT log:\n");
  EXPECT_CONTAINS(error, "no usable .target directive");
  // A broken second image: nothing stays loaded.
  std::string good = emptyKernelsPtx("sm_80", {{"tcc_test_shape", 1}});
  error = errorOf([&] {
    CudaModule(*device, {}, {code("compute_80", good), code("compute_80", noTarget)});
  });
  EXPECT_CONTAINS(error, "image 2 of 2");
  std::vector<uint8_t> empty;
  EXPECT_CONTAINS(errorOf([&] { CudaModule(*device, {code("sm_90", empty)}, {}); }),
                  "loading cubin sm_90 image 1 of 1 on cuda:0 (tcc fake CUDA device, sm_90): the "
                  "image is empty");
}

TEST_F(FakeCuda, LaunchShrinksTheGridAndCopiesArguments) {
  std::string ptx = emptyKernelsPtx("sm_90", {{"tcc_test_shape", 1}});
  CudaModule module(*device, {}, {code("compute_90", ptx)});
  EXPECT_TRUE(module.jitFromPtx());
  EXPECT_STREQ(hooks.lastModuleKind(), "ptx sm_90");
  CudaStream stream(*device);
  void *out = device->allocator().allocate(16, stream.id());
  const CudaDriver &d = device->driver();
  d.check(d.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(out), 0, 16, stream.get()), "memset");
  void *arg = out;
  void *params[] = {&arg};
  long long launches = hooks.counter("kernel_launches");
  d.check(d.cuLaunchKernel(module.function("tcc_test_shape"), 100, 2, 3, 32, 4, 1, 0, stream.get(),
                           params, nullptr),
          "cuLaunchKernel");
  arg = nullptr; // the launch copied the argument's value
  uint32_t seen[4] = {};
  download(*device, stream, seen, out, sizeof(seen));
  stream.synchronize();
  EXPECT_EQ(seen[0], 3u);
  EXPECT_EQ(seen[1], 32u);
  EXPECT_EQ(seen[2], 4u);
  EXPECT_EQ(seen[3], 3u * 32 * 4);
  EXPECT_EQ(hooks.counter("kernel_launches"), launches + 1);
  // More than 48 KiB of dynamic shared memory needs the attribute, as on a GPU.
  CUfunction f = module.function("tcc_test_shape");
  arg = out;
  EXPECT_EQ(d.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 64 << 10, stream.get(), params, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  d.check(d.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 << 10),
          "cuFuncSetAttribute");
  EXPECT_EQ(d.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 64 << 10, stream.get(), params, nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(d.cuLaunchKernel(f, 1, 1, 1, 1024, 2, 1, 0, stream.get(), params, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  stream.synchronize();
  device->allocator().deallocate(out);
}

TEST_F(FakeCuda, KernelWithoutHostVersionIsNotFound) {
  std::string ptx = emptyKernelsPtx("sm_90", {{"tcc_test_no_host_version", 1}});
  CudaModule module(*device, {}, {code("compute_90", ptx)});
  EXPECT_CONTAINS(errorOf([&] { module.function("tcc_test_no_host_version"); }),
                  "kernel tcc_test_no_host_version is in none of the 1 compute_90 PTX images");
}

TEST_F(FakeCuda, CaptureRefusesAllocationsAndEndsCleanly) {
  CudaStream stream(*device);
  std::string error = errorOf([&] {
    CudaGraph::capture(stream,
                       [&] { device->allocator().allocate(size_t(64) << 20, stream.id()); });
  });
  EXPECT_CONTAINS(error, "cuMemAlloc of 67108864 bytes on cuda:0: "
                         "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
  // The stream left capture mode: work runs again and a new capture succeeds.
  void *p = device->allocator().allocate(256, stream.id());
  std::vector<uint8_t> in(256, 7), out(256, 0);
  upload(*device, stream, p, in.data(), in.size());
  download(*device, stream, out.data(), p, out.size());
  stream.synchronize();
  EXPECT_EQ(in, out);
  auto graph =
      CudaGraph::capture(stream, [&] { upload(*device, stream, p, in.data(), in.size()); });
  EXPECT_NE(graph, nullptr);
  // Waiting for the stream inside the capture breaks it; capture() reports the end's error.
  error = errorOf([&] { CudaGraph::capture(stream, [&] { stream.synchronize(); }); });
  EXPECT_CONTAINS(error, "cuStreamSynchronize on cuda:0: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
  device->allocator().deallocate(p);
}

TEST_F(FakeCuda, CaptureFollowsTheEventRulesOfCudaH) {
  const CudaDriver &d = device->driver();
  constexpr CUresult kIsolation = 905, kImplicit = 906, kCapturedEvent = 907;
  constexpr unsigned kWaitExternal = 1;
  CudaStream stream(*device);
  CudaEvent outside(*device), inside(*device);
  CUgraph graph = nullptr;
  outside.record(stream);
  // Waiting on uncaptured work needs CU_EVENT_WAIT_EXTERNAL; without it the capture breaks.
  ASSERT_EQ(d.cuStreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            CUDA_SUCCESS);
  EXPECT_EQ(d.cuStreamWaitEvent(stream.get(), outside.get(), 0), kIsolation);
  EXPECT_EQ(d.cuStreamEndCapture(stream.get(), &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(graph, nullptr);
  ASSERT_EQ(d.cuStreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            CUDA_SUCCESS);
  EXPECT_EQ(d.cuStreamWaitEvent(stream.get(), outside.get(), kWaitExternal), CUDA_SUCCESS);
  // An event recorded in the capture is a graph node: it cannot be queried or waited for.
  EXPECT_EQ(d.cuEventRecord(inside.get(), stream.get()), CUDA_SUCCESS);
  EXPECT_EQ(d.cuEventQuery(inside.get()), kCapturedEvent);
  EXPECT_EQ(d.cuEventSynchronize(inside.get()), kCapturedEvent);
  EXPECT_EQ(d.cuStreamWaitEvent(stream.get(), inside.get(), 0), CUDA_SUCCESS);
  ASSERT_EQ(d.cuStreamEndCapture(stream.get(), &graph), CUDA_SUCCESS);
  EXPECT_EQ(d.cuGraphDestroy(graph), CUDA_SUCCESS);
  EXPECT_EQ(d.cuStreamWaitEvent(stream.get(), outside.get(), kWaitExternal),
            CUDA_ERROR_INVALID_VALUE); // only during capture
  inside.record(stream);
  EXPECT_EQ(d.cuEventQuery(inside.get()), CUDA_SUCCESS);
  // The legacy stream may not be used while a blocking stream captures.
  CUstream blocking = nullptr;
  ASSERT_EQ(d.cuStreamCreate(&blocking, 0), CUDA_SUCCESS);
  ASSERT_EQ(d.cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  EXPECT_EQ(d.cuEventRecord(outside.get(), nullptr), kImplicit);
  EXPECT_EQ(d.cuStreamEndCapture(blocking, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(d.cuStreamDestroy(blocking), CUDA_SUCCESS);
  EXPECT_EQ(d.describe(kIsolation),
            "CUDA_ERROR_STREAM_CAPTURE_ISOLATION (dependency created on uncaptured work in "
            "another stream)");
}

// ==== driver-independent: the fake here, the real driver in the real-driver: entries ===========

TEST_F(OnDevice, Properties) {
  EXPECT_FALSE(device->name().empty());
  EXPECT_GE(device->computeCapability(), 30);
  EXPECT_GT(device->multiprocessors(), 0);
  EXPECT_GT(device->totalMemory(), size_t(0));
  EXPECT_EQ(&CudaDevice::get(0), device);
  EXPECT_GE(device->driver().driverVersion, 11000);
  EXPECT_NO_THROW(device->makeCurrent());
}

TEST_F(OnDevice, EveryEntryPointMakesTheContextCurrent) {
  // A fresh thread has no current context: each entry point, first on its thread, sets it.
  auto onFreshThread = [](const std::function<void()> &work) {
    std::string error;
    std::thread worker([&] {
      try {
        work();
      } catch (const std::exception &e) {
        error = e.what();
      }
    });
    worker.join();
    return error;
  };
  EXPECT_EQ(
      onFreshThread([&] { device->allocator().deallocate(device->allocator().allocate(64)); }), "");
  EXPECT_EQ(onFreshThread([&] { PinnedBuffer(*device).reserve(64); }), "");
  EXPECT_EQ(onFreshThread([&] { CudaStream(*device).synchronize(); }), "");
  EXPECT_EQ(onFreshThread([&] { CudaEvent(*device).synchronize(); }), "");
  EXPECT_EQ(onFreshThread([&] {
              CudaModule module(*device, {}, {code("compute_80", std::string(kAxpyPtx))});
              module.function("tcc_test_axpy");
            }),
            "");
}

TEST_F(OnDevice, CopiesRoundTrip) {
  CudaStream stream(*device);
  CachingAllocator &alloc = device->allocator();
  const size_t n = 100000;
  std::vector<float> in(n), out(n, 0.0f);
  std::iota(in.begin(), in.end(), 0.5f);
  void *a = alloc.allocate(n * 4, stream.id()), *b = alloc.allocate(n * 4, stream.id());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 256, 0u);
  // Through the pinned staging buffer, as the runtime copies caller tensors.
  PinnedBuffer staging(*device);
  uint8_t *pinned = staging.reserve(n * 4);
  std::memcpy(pinned, in.data(), n * 4);
  upload(*device, stream, a, pinned, n * 4);
  const CudaDriver &d = device->driver();
  d.check(d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(b), reinterpret_cast<CUdeviceptr>(a),
                              n * 4, stream.get()),
          "cuMemcpyDtoDAsync");
  d.check(d.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(a), 0, n * 4, stream.get()),
          "cuMemsetD8Async");
  download(*device, stream, pinned, b, n * 4);
  stream.synchronize();
  std::memcpy(out.data(), pinned, n * 4);
  EXPECT_EQ(in, out);
  download(*device, stream, out.data(), a, n * 4);
  stream.synchronize();
  EXPECT_EQ(out, std::vector<float>(n, 0.0f));
  alloc.deallocate(a);
  alloc.deallocate(b);
}

TEST_F(OnDevice, AllocatorCachesDeviceMemory) {
  CachingAllocator &alloc = device->allocator();
  CudaStream stream(*device);
  alloc.emptyCache(); // what earlier tests of this process left cached
  CachingAllocatorStats before = alloc.stats();
  long long rawBefore = counter("device_allocs"), liveBefore = counter("live_device_allocations");
  void *p = alloc.allocate(1000, stream.id());
  EXPECT_EQ(alloc.blockSize(p), 1024u);
  alloc.deallocate(p);
  void *again = alloc.allocate(900, stream.id());
  EXPECT_EQ(again, p);
  CachingAllocatorStats st = alloc.stats();
  EXPECT_EQ(st.numRawAllocs - before.numRawAllocs, 1u);
  EXPECT_EQ(st.numCacheHits - before.numCacheHits, 1u);
  EXPECT_EQ(st.reservedBytes - before.reservedBytes, CachingAllocator::kSmallBuffer);
  // Medium requests share 20 MiB segments (PyTorch's CUDA policy); large ones get their own.
  const size_t MiB = size_t(1) << 20;
  void *m1 = alloc.allocate(5 * MiB, stream.id()), *m2 = alloc.allocate(5 * MiB, stream.id());
  void *big = alloc.allocate(12 * MiB, stream.id());
  st = alloc.stats();
  EXPECT_EQ(st.numRawAllocs - before.numRawAllocs, 3u);
  EXPECT_EQ(st.reservedBytes - before.reservedBytes, CachingAllocator::kSmallBuffer + 32 * MiB);
  if (fake) {
    EXPECT_EQ(counter("device_allocs") - rawBefore, 3);
  }
  for (void *ptr : {again, m1, m2, big})
    alloc.deallocate(ptr);
  alloc.emptyCache();
  EXPECT_EQ(alloc.stats().reservedBytes, before.reservedBytes);
  EXPECT_EQ(alloc.stats().segments, before.segments);
  if (fake) {
    EXPECT_EQ(counter("live_device_allocations"), liveBefore);
  }
}

TEST_F(OnDevice, PinnedBufferGrows) {
  PinnedBuffer buffer(*device);
  EXPECT_EQ(buffer.capacity(), 0u);
  uint8_t *p = buffer.reserve(100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(buffer.capacity(), 4096u);
  std::memset(p, 1, 4096);
  EXPECT_EQ(buffer.reserve(4096), p);
  uint8_t *q = buffer.reserve(10000);
  EXPECT_EQ(buffer.capacity(), 12288u);
  std::memset(q, 2, 12288);
  EXPECT_EQ(buffer.reserve(5000), q);
  EXPECT_EQ(buffer.capacity(), 12288u);
}

TEST_F(OnDevice, EventsTime) {
  CudaStream stream(*device);
  CudaEvent start(*device, true), end(*device, true), plain(*device);
  start.record(stream);
  end.record(stream);
  plain.record(stream);
  end.synchronize();
  plain.synchronize();
  EXPECT_GE(end.elapsedMs(start), 0.0f);
  // Events made without timing cannot be timed.
  EXPECT_CONTAINS(errorOf([&] { plain.elapsedMs(start); }), "cuEventElapsedTime on cuda:0: ");
}

TEST_F(OnDevice, KernelLaunch) {
  CudaModule module(*device, {}, {code("compute_80", std::string(kAxpyPtx))});
  EXPECT_TRUE(module.jitFromPtx());
  EXPECT_EQ(module.loadedArch(), "compute_80");
  if (fake) {
    EXPECT_STREQ(hooks.lastModuleKind(), "ptx sm_80");
  }
  CUfunction axpy = module.function("tcc_test_axpy");
  CudaStream stream(*device);
  CachingAllocator &alloc = device->allocator();
  const uint64_t n = 10000;
  std::vector<float> x(n), y(n), out(n);
  for (uint64_t i = 0; i < n; ++i) {
    x[i] = float(i % 97);
    y[i] = float(i % 13);
  }
  float a = 2.0f;
  void *dx = alloc.allocate(n * 4, stream.id()), *dy = alloc.allocate(n * 4, stream.id());
  void *da = alloc.allocate(4, stream.id());
  upload(*device, stream, dx, x.data(), n * 4);
  upload(*device, stream, dy, y.data(), n * 4);
  upload(*device, stream, da, &a, 4);
  launchAxpy(*device, stream, axpy, dx, dy, da, n);
  download(*device, stream, out.data(), dy, n * 4);
  stream.synchronize();
  for (uint64_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], y[i] + a * x[i]) << "element " << i;
  for (void *p : {dx, dy, da})
    alloc.deallocate(p);
}

TEST_F(OnDevice, GraphCaptureAndReplay) {
  CudaModule module(*device, {}, {code("compute_80", std::string(kAxpyPtx))});
  CUfunction axpy = module.function("tcc_test_axpy");
  CudaStream stream(*device);
  CachingAllocator &alloc = device->allocator();
  const uint64_t n = 4096;
  std::vector<float> x(n), y(n), out(n);
  for (uint64_t i = 0; i < n; ++i) {
    x[i] = float(i % 31);
    y[i] = float(i % 7);
  }
  float a = 0.5f;
  void *dx = alloc.allocate(n * 4, stream.id()), *dy = alloc.allocate(n * 4, stream.id());
  void *da = alloc.allocate(4, stream.id());
  upload(*device, stream, dx, x.data(), n * 4);
  upload(*device, stream, dy, y.data(), n * 4);
  upload(*device, stream, da, &a, 4);
  stream.synchronize();
  long long launches = counter("kernel_launches");
  auto graph =
      CudaGraph::capture(stream, [&] { launchAxpy(*device, stream, axpy, dx, dy, da, n); });
  // Nothing ran during capture.
  download(*device, stream, out.data(), dy, n * 4);
  stream.synchronize();
  EXPECT_EQ(out, y);
  if (fake) {
    EXPECT_EQ(counter("kernel_launches"), launches);
  }
  // Every replay runs the recorded launch again.
  graph->launch(stream);
  graph->launch(stream);
  download(*device, stream, out.data(), dy, n * 4);
  stream.synchronize();
  for (uint64_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], y[i] + a * x[i] + a * x[i]) << "element " << i;
  if (fake) {
    EXPECT_EQ(counter("kernel_launches"), launches + 2);
  }
  graph.reset();
  for (void *p : {dx, dy, da})
    alloc.deallocate(p);
}

TEST_F(OnDevice, ModuleFromPtxTextWithoutTrailingNul) {
  // The loader hands PTX over with its size; termination is CudaModule's business.
  std::string text(kAxpyPtx);
  CudaCode exact{"compute_80", reinterpret_cast<const uint8_t *>(text.data()), text.size()};
  CudaModule module(*device, {}, {exact});
  EXPECT_NE(module.function("tcc_test_axpy"), nullptr);
  EXPECT_CONTAINS(
      errorOf([&] { module.function("tcc_test_nothing"); }),
      "kernel tcc_test_nothing is in none of the 1 compute_80 PTX images loaded on cuda:0");
}

// ==== the fake at other capabilities =============================================================

TEST_F(FakeCudaCC86, JitsTheNewestPtxNotAbove) {
  ASSERT_EQ(device->computeCapability(), 86);
  std::vector<uint8_t> sm80 = fakeCubin(80, {{"tcc_test_shape", 1}});
  std::vector<uint8_t> sm90 = fakeCubin(90, {{"tcc_test_shape", 1}});
  std::string ptx80 = emptyKernelsPtx("sm_80", {{"tcc_test_shape", 1}});
  std::string ptx90 = emptyKernelsPtx("sm_90", {{"tcc_test_shape", 1}});
  CudaModule module(*device, {code("sm_80", sm80), code("sm_90", sm90)},
                    {code("compute_90", ptx90), code("compute_80", ptx80)});
  EXPECT_EQ(module.loadedArch(), "compute_80");
  EXPECT_TRUE(module.jitFromPtx());
  EXPECT_STREQ(hooks.lastModuleKind(), "ptx sm_80");
  EXPECT_NE(module.function("tcc_test_shape"), nullptr);
}

TEST_F(FakeCudaCC86, ExactCubinStillWins) {
  std::vector<uint8_t> sm86 = fakeCubin(86, {{"tcc_test_shape", 1}});
  std::string ptx80 = emptyKernelsPtx("sm_80", {{"tcc_test_shape", 1}});
  CudaModule module(*device, {code("sm_86", sm86)}, {code("compute_80", ptx80)});
  EXPECT_EQ(module.loadedArch(), "sm_86");
  EXPECT_FALSE(module.jitFromPtx());
  EXPECT_STREQ(hooks.lastModuleKind(), "cubin sm_86");
}

TEST_F(FakeCudaCC75, NothingFitsNamesCapabilityAndArchs) {
  ASSERT_EQ(device->computeCapability(), 75);
  std::vector<uint8_t> sm80 = fakeCubin(80, {{"tcc_test_shape", 1}});
  std::vector<uint8_t> sm90 = fakeCubin(90, {{"tcc_test_shape", 1}});
  std::string ptx80 = emptyKernelsPtx("sm_80", {{"tcc_test_shape", 1}});
  long long loads = hooks.counter("module_loads");
  EXPECT_EQ(errorOf([&] {
              CudaModule(*device, {code("sm_90", sm90), code("sm_80", sm80)},
                         {code("compute_80", ptx80)});
            }),
            "no code in the artifact runs on cuda:0 (tcc fake CUDA device, sm_75): it holds cubins "
            "for sm_80, sm_90 and PTX for compute_80; a GPU runs cubins of exactly its "
            "architecture (sm_75) or PTX of a compute_XY with XY <= 75");
  EXPECT_EQ(hooks.counter("module_loads"), loads);
  EXPECT_CONTAINS(errorOf([&] { CudaModule(*device, {}, {}); }),
                  "it holds cubins for none and PTX for none");
}

// ==== out of memory ==============================================================================

TEST_F(FakeCudaOom, ReleasesTheCacheAndRetries) {
  ASSERT_EQ(device->totalMemory(), size_t(64) << 20);
  CachingAllocator &alloc = device->allocator();
  CudaStream stream(*device);
  const size_t MiB = size_t(1) << 20;
  void *a = alloc.allocate(30 * MiB, stream.id());
  void *b = alloc.allocate(20 * MiB, stream.id());
  alloc.deallocate(a);
  alloc.deallocate(b);
  EXPECT_EQ(alloc.stats().reservedBytes, 50 * MiB);
  EXPECT_EQ(hooks.counter("live_device_allocations"), 2);
  // 40 MiB fits no cached block and not beside them (14 MiB left): the allocator gives both
  // cached segments back and the retry succeeds.
  void *c = alloc.allocate(40 * MiB, stream.id());
  CachingAllocatorStats st = alloc.stats();
  EXPECT_EQ(st.numOomRetries, 1u);
  EXPECT_EQ(st.numOoms, 0u);
  EXPECT_EQ(st.reservedBytes, 40 * MiB);
  EXPECT_EQ(hooks.counter("live_device_allocations"), 1);
  // Another 40 MiB cannot fit at all.
  std::string error = errorOf([&] { alloc.allocate(40 * MiB, stream.id()); });
  EXPECT_CONTAINS(
      error, "cuda:0 device memory: out of memory: tried to allocate 41943040 bytes (40.00 MiB)");
  EXPECT_THROW(alloc.allocate(40 * MiB, stream.id()), OutOfMemory);
  EXPECT_EQ(alloc.stats().numOoms, 2u);
  // 20 MiB still does.
  void *d = alloc.allocate(20 * MiB, stream.id());
  alloc.deallocate(c);
  alloc.deallocate(d);
  alloc.emptyCache();
  EXPECT_EQ(hooks.counter("live_device_allocations"), 0);
  EXPECT_EQ(hooks.counter("device_bytes_in_use"), 0);
}

// ==== deferred execution =========================================================================

TEST_F(FakeCudaDeferred, FreedBlockWaitsForTheOtherStream) {
  CachingAllocator &alloc = device->allocator();
  CudaStream a(*device), b(*device);
  std::vector<float> in(1024), out(1024, 0.0f);
  std::iota(in.begin(), in.end(), 1.0f);
  void *p = alloc.allocate(4096, a.id());
  void *q = alloc.allocate(4096, b.id());
  upload(*device, a, p, in.data(), 4096);
  a.synchronize();
  // Stream b reads p (queued, not run yet); p is freed by its owner meanwhile.
  const CudaDriver &d = device->driver();
  d.check(d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(q), reinterpret_cast<CUdeviceptr>(p),
                              4096, b.get()),
          "cuMemcpyDtoDAsync");
  alloc.recordStream(p, b.id());
  alloc.deallocate(p);
  CachingAllocatorStats st = alloc.stats();
  EXPECT_EQ(st.pendingFreeBlocks, 1u);
  EXPECT_EQ(st.numDeferredFrees, 1u);
  // Not reusable while b's copy is queued: a new block for stream a.
  void *p2 = alloc.allocate(4096, a.id());
  EXPECT_NE(p2, p);
  EXPECT_EQ(alloc.stats().pendingFreeBlocks, 1u);
  // Once b has run, p's event has completed and the block comes back.
  b.synchronize();
  void *p3 = alloc.allocate(4096, a.id());
  EXPECT_EQ(p3, p);
  EXPECT_EQ(alloc.stats().pendingFreeBlocks, 0u);
  // b copied the data p held, before p was reused.
  download(*device, b, out.data(), q, 4096);
  b.synchronize();
  EXPECT_EQ(in, out);
  alloc.deallocate(p2);
  alloc.deallocate(p3);
  alloc.deallocate(q);
}

TEST_F(FakeCudaDeferred, EventsCompleteWhenWaitedFor) {
  CudaStream s(*device), t(*device);
  CudaEvent start(*device, /*timing=*/true), end(*device, /*timing=*/true);
  void *p = device->allocator().allocate(4096, s.id());
  std::vector<uint8_t> in(4096, 3), out(4096, 0);
  start.record(s);
  upload(*device, s, p, in.data(), in.size());
  end.record(s);
  const CudaDriver &d = device->driver();
  EXPECT_EQ(d.cuEventQuery(end.get()), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(hooks.counter("queued_ops"), 3);
  // t waits for the event, then reads what s wrote.
  d.check(d.cuStreamWaitEvent(t.get(), end.get(), 0), "cuStreamWaitEvent");
  download(*device, t, out.data(), p, out.size());
  EXPECT_EQ(d.cuEventQuery(end.get()), CUDA_ERROR_NOT_READY);
  t.synchronize();
  EXPECT_EQ(d.cuEventQuery(end.get()), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  EXPECT_GE(end.elapsedMs(start), 0.0f);
  EXPECT_EQ(hooks.counter("queued_ops"), 0);
  // An event synchronises its own stream up to the record.
  end.record(s);
  EXPECT_EQ(d.cuEventQuery(end.get()), CUDA_ERROR_NOT_READY);
  end.synchronize();
  EXPECT_EQ(d.cuEventQuery(end.get()), CUDA_SUCCESS);
  device->allocator().deallocate(p);
}

// ==== driver loading =============================================================================

TEST(CudaDriverLoad, MissingDriverSaysWhatWasTried) {
  std::string why =
      configure("missing", [] { setenv("TCC_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1); });
  if (!why.empty())
    GTEST_SKIP() << why;
  std::string reason;
  EXPECT_FALSE(cudaAvailable(&reason));
  EXPECT_CONTAINS(reason, "no usable CUDA GPU/driver: /nonexistent/libcuda.so.1 "
                          "($TCC_CUDA_DRIVER) not found (dlopen: ");
  EXPECT_CONTAINS(reason, "No such file or directory");
  // The outcome is cached: the same message from every entry point, every time.
  EXPECT_EQ(errorOf([] { loadCudaDriver(); }), reason);
  EXPECT_EQ(errorOf([] { loadCudaDriver(); }), reason);
  EXPECT_EQ(errorOf([] { CudaDevice::get(0); }), reason);
  EXPECT_THROW(loadCudaDriver(), Error);
}

TEST(CudaDriverLoad, LibraryWithoutTheDriverApi) {
  std::string why =
      configure("not a driver", [] { setenv("TCC_CUDA_DRIVER", TCC_FAKE_CUDA_TEST_KERNELS, 1); });
  if (!why.empty())
    GTEST_SKIP() << why;
  std::string reason;
  EXPECT_FALSE(cudaAvailable(&reason));
  EXPECT_EQ(reason, std::string("no usable CUDA GPU/driver: ") + TCC_FAKE_CUDA_TEST_KERNELS +
                        " ($TCC_CUDA_DRIVER) lacks cuInit");
}

TEST(CudaDriverLoad, StubDriver) {
#ifdef TCC_CUDA_STUB_DRIVER
  std::string why = configure("stub", [] { setenv("TCC_CUDA_DRIVER", TCC_CUDA_STUB_DRIVER, 1); });
  if (!why.empty())
    GTEST_SKIP() << why;
  std::string reason;
  EXPECT_FALSE(cudaAvailable(&reason));
  EXPECT_EQ(reason, "no usable CUDA GPU/driver: cuInit failed: CUDA_ERROR_STUB_LIBRARY (the "
                    "loaded CUDA driver is a stub library)");
#else
  GTEST_SKIP() << "no CUDA toolkit stub libcuda was found at configure time";
#endif
}

TEST(CudaDriverLoad, NoDevice) {
  FakeSettings s;
  s.devices = "0";
  std::string why = useFake(s);
  if (!why.empty())
    GTEST_SKIP() << why;
  std::string reason;
  EXPECT_FALSE(cudaAvailable(&reason));
  EXPECT_EQ(reason, "no usable CUDA GPU/driver: cuInit failed: CUDA_ERROR_NO_DEVICE (no "
                    "CUDA-capable device is detected)");
  EXPECT_EQ(errorOf([] { CudaDevice::get(0); }), reason);
}

TEST(CudaDriverLoad, TwoDevices) {
  FakeSettings s;
  s.devices = "2";
  std::string why = useFake(s);
  if (!why.empty())
    GTEST_SKIP() << why;
  CudaDevice &d0 = CudaDevice::get(0), &d1 = CudaDevice::get(1);
  EXPECT_NE(&d0, &d1);
  EXPECT_EQ(d1.ordinal(), 1);
  EXPECT_EQ(&CudaDevice::get(1), &d1);
  EXPECT_EQ(errorOf([] { CudaDevice::get(2); }),
            "CUDA device 2 does not exist (2 devices: cuda:0..cuda:1)");
  EXPECT_EQ(errorOf([] { CudaDevice::get(-1); }),
            "CUDA device -1 does not exist (2 devices: cuda:0..cuda:1)");
  // Each device's allocator hands out its own memory.
  void *a = d0.allocator().allocate(1000), *b = d1.allocator().allocate(1000);
  EXPECT_NE(a, b);
  d0.allocator().deallocate(a);
  d1.allocator().deallocate(b);
}
