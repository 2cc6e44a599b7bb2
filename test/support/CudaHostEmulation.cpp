//===- CudaHostEmulation.cpp - Run generated CUDA kernels on the host (tests) -===//

#include "CudaHostEmulation.h"

#include "tcc/Codegen/KernelCompiler.h"
#include "tcc/Codegen/ScalarEmitter.h"
#include "tcc/Support/Tensor.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <dlfcn.h>

namespace tcc::testsupport {

namespace cg = tcc::codegen;

namespace {

/// Just enough of CUDA to run generated kernels on the host (see the header). The kernel code
/// is appended after the CPU prelude (the same helpers, with libm math: the reference's).
const char *const kEmulation = R"cpp(
#include <pthread.h>
#include <condition_variable>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <math.h>
#include <mutex>

#define TCC_CUDA_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
// One object for all threads of the (one running) block; `extern __shared__` is rewritten to
// `extern` before compiling, so dynamic shared memory (tcc_smem) is the buffer below.
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct tcc_dim3 { unsigned x, y, z; };
static thread_local tcc_dim3 threadIdx, blockIdx;
static tcc_dim3 blockDim, gridDim;
alignas(16) static unsigned char tcc_smem[232448]; // 227 KiB, an H100's opt-in maximum

namespace tcc_emu {
// A reusable barrier; a thread stuck for a minute means the kernel's threads diverged at a
// barrier or shuffle (which deadlocks a GPU too).
struct Barrier {
  std::mutex m;
  std::condition_variable cv;
  unsigned total = 0, waiting = 0, generation = 0;
  const char *what = "";
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    unsigned gen = generation;
    if (++waiting == total) {
      waiting = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return generation != gen; })) {
      std::fprintf(stderr, "emulated CUDA: %s barrier timeout (threads diverge)\n", what);
      std::abort();
    }
  }
};
static Barrier block, warps[32];
static unsigned long long slots[32][32];
static thread_local unsigned linear;

struct Launch {
  void (*kernel)(void **);
  void **args;
  unsigned thread;
};
static void *run(void *p) {
  Launch *l = (Launch *)p;
  linear = l->thread;
  threadIdx = {l->thread % blockDim.x, l->thread / blockDim.x, 0};
  for (unsigned b = 0; b < gridDim.x; ++b) {
    blockIdx = {b, 0, 0};
    l->kernel(l->args);
    block.wait(); // the next block reuses the shared memory
  }
  return nullptr;
}

// Every thread of the warp publishes `value`, then reads lane `source`'s (its own when the
// source is outside the warp's segment: the shuffles' rule).
template <class T> static inline T exchange(T value, unsigned source) {
  static_assert(sizeof(T) <= sizeof(slots[0][0]), "shuffles move at most 8 bytes");
  unsigned warp = linear / 32, lane = linear % 32;
  std::memcpy(&slots[warp][lane], &value, sizeof(T));
  warps[warp].wait();
  T result = value;
  if (source < 32)
    std::memcpy(&result, &slots[warp][source], sizeof(T));
  warps[warp].wait();
  return result;
}
} // namespace tcc_emu

static inline void __syncthreads() { tcc_emu::block.wait(); }
static inline void __syncwarp(unsigned = 0xffffffffu) { tcc_emu::warps[tcc_emu::linear / 32].wait(); }

template <class T> static inline T __shfl_sync(unsigned, T value, int lane, int width = 32) {
  unsigned self = tcc_emu::linear % 32, base = self & ~(unsigned)(width - 1);
  return tcc_emu::exchange(value, base + ((unsigned)lane & (unsigned)(width - 1)));
}
template <class T> static inline T __shfl_xor_sync(unsigned, T value, int laneMask, int width = 32) {
  unsigned self = tcc_emu::linear % 32, source = self ^ (unsigned)laneMask;
  bool inside = (source & ~(unsigned)(width - 1)) == (self & ~(unsigned)(width - 1));
  return tcc_emu::exchange(value, inside ? source : self);
}
template <class T> static inline T __shfl_down_sync(unsigned, T value, unsigned delta, int width = 32) {
  unsigned self = tcc_emu::linear % 32;
  bool inside = (self & (unsigned)(width - 1)) + delta < (unsigned)width;
  return tcc_emu::exchange(value, inside ? self + delta : self);
}
template <class T> static inline T __shfl_up_sync(unsigned, T value, unsigned delta, int width = 32) {
  unsigned self = tcc_emu::linear % 32;
  bool inside = (self & (unsigned)(width - 1)) >= delta;
  return tcc_emu::exchange(value, inside ? self - delta : self);
}

// The CUDA prelude's vector type (the CPU prelude has none).
template <class T, int N> struct alignas(sizeof(T) * N) tcc_vec { T v[N]; };

template <class T> static inline T __ldg(const T *p) { return *p; }
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline int __float_as_int(float f) { int u; std::memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline long long __double_as_longlong(double d) { long long u; std::memcpy(&u, &d, 8); return u; }
static inline double __longlong_as_double(long long u) { double d; std::memcpy(&d, &u, 8); return d; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a < b ? b : a; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a < b ? b : a; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a < b ? b : a; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a < b ? b : a; }

extern "C" __attribute__((visibility("default"))) int
tcc_emu_launch(void (*kernel)(void **), void **args, unsigned grid, unsigned bx, unsigned by) {
  unsigned threads = bx * by;
  if (grid == 0 || bx == 0 || by == 0 || threads > 1024)
    return -1;
  blockDim = {bx, by, 1};
  gridDim = {grid, 1, 1};
  tcc_emu::block.total = threads;
  tcc_emu::block.what = "__syncthreads";
  for (unsigned w = 0; w < 32; ++w) {
    tcc_emu::warps[w].total = threads > 32 * w ? (threads - 32 * w < 32 ? threads - 32 * w : 32) : 0;
    tcc_emu::warps[w].what = "warp (__syncwarp or shuffle)";
  }
  static tcc_emu::Launch launches[1024];
  pthread_t ids[1024];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  unsigned started = 0;
  for (; started < threads; ++started) {
    launches[started] = {kernel, args, started};
    if (pthread_create(&ids[started], &attr, tcc_emu::run, &launches[started]) != 0)
      break;
  }
  if (started != threads) { // the started threads wait for the others at a barrier forever
    std::fprintf(stderr, "emulated CUDA: cannot start %u threads\n", threads);
    std::abort();
  }
  for (unsigned t = 0; t < threads; ++t)
    pthread_join(ids[t], nullptr);
  pthread_attr_destroy(&attr);
  return 0;
}
)cpp";

/// Tensor-core instructions, after the CPU prelude (they use its 16-bit conversions);
/// tcc_emu_ldmatrix_x4 is ldmatrix (fragment loads from shared memory) and
/// tcc_emu_mma16816 is
/// `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32` with
/// d as c, a warp-wide exchange of the PTX ISA's fragment layout (groupID = lane / 4,
/// t = lane % 4): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..];
/// b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]; d0,d1 = D[g][2t..2t+1], d2,d3 = D[g+8][2t..].
/// Products are exact in float and summed in float in k order.
const char *const kEmulationMma = R"cpp(
namespace tcc_emu {
static unsigned mmaA[32][32][4], mmaB[32][32][2];
static const uint16_t *rows[32][32];
}
// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane l gives row l % 8 of matrix l / 8;
// lane l receives r[i] = M_i[l / 4][2 (l % 4) ..+1], transposed M_i[2 (l % 4) ..+1][l / 4].
static inline void tcc_emu_ldmatrix_x4(uint32_t r[4], const uint16_t *row, bool trans) {
  unsigned warp = tcc_emu::linear / 32, lane = tcc_emu::linear % 32;
  tcc_emu::rows[warp][lane] = row;
  tcc_emu::warps[warp].wait();
  for (unsigned i = 0; i < 4; ++i) {
    const uint16_t *const *m = tcc_emu::rows[warp] + 8 * i;
    uint16_t lo, hi;
    if (trans) {
      lo = m[2 * (lane % 4)][lane / 4];
      hi = m[2 * (lane % 4) + 1][lane / 4];
    } else {
      lo = m[lane / 4][2 * (lane % 4)];
      hi = m[lane / 4][2 * (lane % 4) + 1];
    }
    r[i] = (uint32_t)lo | ((uint32_t)hi << 16);
  }
  tcc_emu::warps[warp].wait();
}
static inline void tcc_emu_mma16816(float d[4], const uint32_t a[4], const uint32_t b[2], int bf16) {
  unsigned warp = tcc_emu::linear / 32, lane = tcc_emu::linear % 32;
  std::memcpy(tcc_emu::mmaA[warp][lane], a, 16);
  std::memcpy(tcc_emu::mmaB[warp][lane], b, 8);
  tcc_emu::warps[warp].wait();
  auto value = [&](unsigned word, unsigned half) {
    uint16_t h = (uint16_t)(half ? word >> 16 : word & 0xffffu);
    return bf16 ? tcc_bf16_to_f32(h) : tcc_f16_to_f32(h);
  };
  auto A = [&](unsigned row, unsigned col) {
    unsigned reg = (row >= 8 ? 1 : 0) + (col >= 8 ? 2 : 0);
    return value(tcc_emu::mmaA[warp][(row % 8) * 4 + (col % 8) / 2][reg], col % 2);
  };
  auto B = [&](unsigned row, unsigned col) {
    return value(tcc_emu::mmaB[warp][col * 4 + (row % 8) / 2][row >= 8 ? 1 : 0], row % 2);
  };
  unsigned g = lane / 4, t = lane % 4;
  for (unsigned e = 0; e < 4; ++e) {
    unsigned row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
    float sum = d[e];
    for (unsigned k = 0; k < 16; ++k)
      sum += A(row, k) * B(k, col);
    d[e] = sum;
  }
  tcc_emu::warps[warp].wait();
}
)cpp";

void replaceAll(std::string &text, const std::string &from, const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

std::vector<uint8_t> compile(const std::vector<EmulatedKernel> &kernels,
                             const std::string &cacheDir) {
  cg::CpuCompileOptions options;
  options.cacheDir = cacheDir;
  return cg::compileCpuModule({{"cuda_emulation", cudaEmulationSource(kernels)}}, options)
      .sharedObject;
}

} // namespace

std::string cudaEmulationSource(const std::vector<EmulatedKernel> &kernels) {
  std::string cudaPrelude = cg::ScalarEmitter(cg::Target::Cuda).prelude();
  std::string text = std::string(kEmulation) + cg::ScalarEmitter(cg::Target::Cpu).prelude() +
                     kEmulationMma;
  for (const EmulatedKernel &k : kernels) {
    if (k.source.compare(0, cudaPrelude.size(), cudaPrelude) != 0)
      throw tcc::Error("kernel " + k.name + " does not start with the CUDA prelude");
    std::string code = k.source.substr(cudaPrelude.size());
    replaceAll(code, "extern __shared__", "extern");
    text += code;
    text += "\nextern \"C\" __attribute__((visibility(\"default\"))) void tcc_emu_" + k.name +
            "(void **a) {\n  " + k.name + "(";
    for (size_t i = 0; i < k.paramTypes.size(); ++i)
      text += std::string(i ? ", " : "") + "(" + k.paramTypes[i] + " *)a[" + std::to_string(i) +
              "]";
    text += ");\n}\n";
  }
  return text;
}

HostLibrary::HostLibrary(const std::vector<uint8_t> &bytes) {
  llvm::SmallString<128> path;
  if (llvm::sys::fs::createTemporaryFile("tcc-cuda-emulation", "so", path))
    throw tcc::Error("cannot create a temporary file for the emulation library");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      throw tcc::Error("cannot write " + path.str().str() + ": " + ec.message());
    os.write((const char *)bytes.data(), bytes.size());
  }
  handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  llvm::sys::fs::remove(path);
  if (!handle)
    throw tcc::Error(std::string("dlopen: ") + dlerror());
}

HostLibrary::~HostLibrary() { dlclose(handle); }

void *HostLibrary::get(const std::string &name) const {
  void *sym = dlsym(handle, name.c_str());
  if (!sym)
    throw tcc::Error("symbol " + name + " not found");
  return sym;
}

CudaHostEmulation::CudaHostEmulation(const std::vector<EmulatedKernel> &kernels,
                                     const std::string &cacheDir)
    : lib(compile(kernels, cacheDir)) {}

void CudaHostEmulation::launch(const std::string &name, const std::vector<void *> &args,
                               unsigned grid, unsigned blockX, unsigned blockY) const {
  using Launch = int (*)(void (*)(void **), void **, unsigned, unsigned, unsigned);
  auto launcher = reinterpret_cast<Launch>(lib.get("tcc_emu_launch"));
  auto kernel = reinterpret_cast<void (*)(void **)>(lib.get("tcc_emu_" + name));
  std::vector<void *> copy = args;
  if (launcher(kernel, copy.data(), grid, blockX, blockY) != 0)
    throw tcc::Error("emulated launch of " + name + " with " + std::to_string(grid) +
                     " blocks of " + std::to_string(blockX) + "x" + std::to_string(blockY) +
                     " threads is impossible (1 to 1024 threads, at least one block)");
}

std::string testKernelCacheDir(const char *leaf) {
  llvm::SmallString<128> dir;
  llvm::sys::path::system_temp_directory(true, dir);
  llvm::sys::path::append(dir, leaf);
  return dir.str().str();
}

} // namespace tcc::testsupport
