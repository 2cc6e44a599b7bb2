//===- FakeCublasLt.cpp - A host cuBLASLt for the runtime's CUDA tests ----===//
//
// Exports the cuBLASLt functions libtccrt calls (CublasLt.h) and computes on the host what the
// real library would: D = act(alpha * op(A) * op(B) + beta * C + bias), from exactly the
// descriptors the caller set (data, compute and scale types, rows, cols, leading dimension,
// order, batch count and strides, transposes, epilogue, bias pointer, alpha/beta). The fake
// CUDA driver's device memory is host memory, so it reads and writes the operands directly.
// Anything it does not model (another attribute, a type combination cuBLASLt rejects, an
// attribute value of the wrong size, operands less aligned than the heuristic was promised, a
// workspace smaller than the algorithm asked for) is an error status, so a wrong descriptor in
// the runtime gives an error or wrong numbers in the tests, never silently right ones.
//
// Where the CUDA toolkit is installed this file is compiled against the real <cublasLt.h>
// (TCC_FAKE_CUBLASLT_REAL_HEADER), and the runtime's own declarations (lib/Runtime/CublasLt.h)
// are checked against NVIDIA's enum values and layouts at compile time (static_asserts below)
// and by the tests' results; otherwise it uses the runtime's declarations.
//
// Streams: the product is enqueued on the caller's stream through the fake driver's
// cuLaunchHostFunc (found in the library $TCC_CUDA_DRIVER names, already loaded by the
// runtime), so it runs in stream order, in the driver's deferred mode only at a synchronise,
// and is recorded, not run, while the stream is being captured into a graph. Without that
// function the product runs at once (and cublasLtCreate fails, so no test silently relies on it).
//
// Test hooks: $TCC_FAKE_CUBLASLT_NO_ALGO=1 makes the heuristic find no algorithm;
// tcc_fake_cublaslt_matmuls() counts the products computed so far.
//
//===----------------------------------------------------------------------===//
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#ifdef TCC_FAKE_CUBLASLT_REAL_HEADER
#include <cublasLt.h>

#include "CublasLt.h"

#include <cstddef>
using CUstreamArg = cudaStream_t;

// The runtime's declarations (lib/Runtime/CublasLt.h) against NVIDIA's, at compile time.
namespace lt = tcc::rt::cuda;
#define TCC_SAME(name) static_assert((int)lt::name == (int)::name, #name " differs from cublasLt.h")
TCC_SAME(CUBLAS_STATUS_SUCCESS);
TCC_SAME(CUBLAS_STATUS_NOT_SUPPORTED);
TCC_SAME(CUDA_R_32F);
TCC_SAME(CUDA_R_64F);
TCC_SAME(CUDA_R_16F);
TCC_SAME(CUDA_R_16BF);
TCC_SAME(CUBLAS_COMPUTE_32F);
TCC_SAME(CUBLAS_COMPUTE_64F);
TCC_SAME(CUBLAS_OP_N);
TCC_SAME(CUBLAS_OP_T);
TCC_SAME(CUBLASLT_ORDER_COL);
TCC_SAME(CUBLASLT_MATRIX_LAYOUT_TYPE);
TCC_SAME(CUBLASLT_MATRIX_LAYOUT_ORDER);
TCC_SAME(CUBLASLT_MATRIX_LAYOUT_ROWS);
TCC_SAME(CUBLASLT_MATRIX_LAYOUT_COLS);
TCC_SAME(CUBLASLT_MATRIX_LAYOUT_LD);
TCC_SAME(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
TCC_SAME(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
TCC_SAME(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE);
TCC_SAME(CUBLASLT_MATMUL_DESC_SCALE_TYPE);
TCC_SAME(CUBLASLT_MATMUL_DESC_TRANSA);
TCC_SAME(CUBLASLT_MATMUL_DESC_TRANSB);
TCC_SAME(CUBLASLT_MATMUL_DESC_EPILOGUE);
TCC_SAME(CUBLASLT_MATMUL_DESC_BIAS_POINTER);
TCC_SAME(CUBLASLT_EPILOGUE_DEFAULT);
TCC_SAME(CUBLASLT_EPILOGUE_RELU);
TCC_SAME(CUBLASLT_EPILOGUE_BIAS);
TCC_SAME(CUBLASLT_EPILOGUE_RELU_BIAS);
TCC_SAME(CUBLASLT_EPILOGUE_GELU);
TCC_SAME(CUBLASLT_EPILOGUE_GELU_BIAS);
TCC_SAME(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
TCC_SAME(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
TCC_SAME(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
TCC_SAME(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
TCC_SAME(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
#undef TCC_SAME
static_assert(sizeof(lt::cublasLtMatmulAlgo_t) == sizeof(::cublasLtMatmulAlgo_t), "algo");
static_assert(sizeof(lt::cublasLtMatmulHeuristicResult_t) ==
                  sizeof(::cublasLtMatmulHeuristicResult_t),
              "heuristic result");
static_assert(offsetof(lt::cublasLtMatmulHeuristicResult_t, workspaceSize) ==
                  offsetof(::cublasLtMatmulHeuristicResult_t, workspaceSize) &&
                  offsetof(lt::cublasLtMatmulHeuristicResult_t, state) ==
                      offsetof(::cublasLtMatmulHeuristicResult_t, state) &&
                  offsetof(lt::cublasLtMatmulHeuristicResult_t, wavesCount) ==
                      offsetof(::cublasLtMatmulHeuristicResult_t, wavesCount),
              "heuristic result fields");
static_assert(sizeof(lt::cublasStatus_t) == sizeof(::cublasStatus_t), "status");
#else
#include "CublasLt.h"
using namespace tcc::rt::cuda;
using cudaDataType_t = int;
using cublasComputeType_t = int;
using cublasLtMatmulDescAttributes_t = int;
using cublasLtMatrixLayoutAttribute_t = int;
using cublasLtMatmulPreferenceAttributes_t = int;
using CUstreamArg = CUstream;
constexpr cublasStatus_t CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_INVALID_VALUE = 7,
                         CUBLAS_STATUS_EXECUTION_FAILED = 13;
constexpr int CUBLASLT_ORDER_ROW = 1;
#endif

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

// ---- Descriptors ----------------------------------------------------------------------------

constexpr uint64_t kMagic = 0x7463632d666b6c74; // "tcc-fklt"

struct MatmulDesc {
  uint64_t magic = kMagic;
  int computeType, scaleType;
  int32_t transA = 0, transB = 0; // CUBLAS_OP_N
  uint32_t epilogue = 1;          // CUBLASLT_EPILOGUE_DEFAULT
  const void *bias = nullptr;
};
struct Layout {
  uint64_t magic = kMagic;
  int type;
  int32_t order = 0; // CUBLASLT_ORDER_COL
  uint64_t rows, cols;
  int64_t ld;
  int32_t batchCount = 1;
  int64_t batchStride = 0;
};
struct Preference {
  uint64_t magic = kMagic;
  uint64_t maxWorkspace = 0;
  uint32_t alignment[4] = {256, 256, 256, 256}; // A, B, C, D
};

/// The workspace the fake's one algorithm asks for when the caller allows it.
constexpr size_t kAlgoWorkspace = 4096;

template <class T> T *checked(T *p) { return p && p->magic == kMagic ? p : nullptr; }

/// Copies an attribute value of exactly the expected size.
template <class T> cublasStatus_t setValue(T &out, const void *buf, size_t bytes) {
  if (!buf || bytes != sizeof(T))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&out, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

// ---- Element types ------------------------------------------------------------------------

float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu,
           mantissa = h & 0x3ffu;
  float value;
  if (exponent == 0)
    value = std::ldexp((float)mantissa, -24);
  else if (exponent == 31)
    value = mantissa ? NAN : INFINITY;
  else
    value = std::ldexp((float)(mantissa | 0x400u), (int)exponent - 25);
  return sign ? -value : value;
}

uint16_t floatToHalf(float f) { // round to nearest even
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t sign = (bits >> 16) & 0x8000u;
  if (std::isnan(f))
    return sign | 0x7e00u;
  float a = std::fabs(f);
  if (a >= 65520.0f)
    return sign | 0x7c00u;
  if (a < std::ldexp(1.0f, -14)) { // subnormal: units of 2^-24
    float q = std::nearbyint(a * std::ldexp(1.0f, 24));
    return sign | (uint16_t)q;
  }
  int e;
  float m = std::frexp(a, &e);           // a = m 2^e, m in [0.5, 1)
  float q = std::nearbyint(m * 2048.0f); // 11 significant bits
  if (q >= 2048.0f) {
    q /= 2;
    ++e;
  }
  return sign | (uint16_t)(((e + 14) << 10) | ((uint32_t)q & 0x3ffu));
}

float bf16ToFloat(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f))
    return (uint16_t)((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

size_t elementSize(int type) {
  switch (type) {
  case CUDA_R_32F:
    return 4;
  case CUDA_R_64F:
    return 8;
  case CUDA_R_16F:
  case CUDA_R_16BF:
    return 2;
  default:
    return 0;
  }
}

double load(const void *base, int type, int64_t index) {
  switch (type) {
  case CUDA_R_32F:
    return static_cast<const float *>(base)[index];
  case CUDA_R_64F:
    return static_cast<const double *>(base)[index];
  case CUDA_R_16F:
    return halfToFloat(static_cast<const uint16_t *>(base)[index]);
  default:
    return bf16ToFloat(static_cast<const uint16_t *>(base)[index]);
  }
}

void store(void *base, int type, int64_t index, double v) {
  switch (type) {
  case CUDA_R_32F:
    static_cast<float *>(base)[index] = (float)v;
    break;
  case CUDA_R_64F:
    static_cast<double *>(base)[index] = v;
    break;
  case CUDA_R_16F:
    static_cast<uint16_t *>(base)[index] = floatToHalf((float)v);
    break;
  default:
    static_cast<uint16_t *>(base)[index] = floatToBf16((float)v);
    break;
  }
}

/// Element (i, j) of matrix `batch` of a layout.
int64_t indexOf(const Layout &l, int64_t batch, int64_t i, int64_t j) {
  int64_t within = l.order == CUBLASLT_ORDER_ROW ? i * l.ld + j : i + j * l.ld;
  return batch * l.batchStride + within;
}

// ---- Validation -------------------------------------------------------------------------------

/// The product's shape if the descriptors form a GEMM cuBLASLt runs; else an error status.
struct Shape {
  int64_t m, n, k, batches;
};

cublasStatus_t validate(const MatmulDesc &d, const Layout &a, const Layout &b, const Layout &c,
                        const Layout &dl, Shape &out) {
  // Type combinations (cuBLASLt's table, the rows tcc uses).
  bool ok = false;
  if (a.type == CUDA_R_32F)
    ok = d.computeType == CUBLAS_COMPUTE_32F && d.scaleType == CUDA_R_32F;
  else if (a.type == CUDA_R_64F)
    ok = d.computeType == CUBLAS_COMPUTE_64F && d.scaleType == CUDA_R_64F;
  else if (a.type == CUDA_R_16F || a.type == CUDA_R_16BF)
    ok = d.computeType == CUBLAS_COMPUTE_32F && d.scaleType == CUDA_R_32F;
  if (!ok || b.type != a.type || c.type != a.type || dl.type != a.type)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if ((d.transA != CUBLAS_OP_N && d.transA != CUBLAS_OP_T) ||
      (d.transB != CUBLAS_OP_N && d.transB != CUBLAS_OP_T))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  switch (d.epilogue) {
  case CUBLASLT_EPILOGUE_DEFAULT:
  case CUBLASLT_EPILOGUE_RELU:
  case CUBLASLT_EPILOGUE_GELU:
    break;
  case CUBLASLT_EPILOGUE_BIAS:
  case CUBLASLT_EPILOGUE_RELU_BIAS:
  case CUBLASLT_EPILOGUE_GELU_BIAS:
    if (!d.bias)
      return CUBLAS_STATUS_INVALID_VALUE;
    break;
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  for (const Layout *l : {&a, &b, &c, &dl}) {
    if (l->order != CUBLASLT_ORDER_COL && l->order != CUBLASLT_ORDER_ROW)
      return CUBLAS_STATUS_NOT_SUPPORTED;
    int64_t minLd = l->order == CUBLASLT_ORDER_COL ? (int64_t)l->rows : (int64_t)l->cols;
    if (l->ld < std::max<int64_t>(minLd, 1) || l->batchCount < 1 || l->batchStride < 0)
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  int64_t m = d.transA == CUBLAS_OP_N ? a.rows : a.cols;
  int64_t k = d.transA == CUBLAS_OP_N ? a.cols : a.rows;
  int64_t kb = d.transB == CUBLAS_OP_N ? b.rows : b.cols;
  int64_t n = d.transB == CUBLAS_OP_N ? b.cols : b.rows;
  if (k != kb || (int64_t)c.rows != m || (int64_t)c.cols != n || dl.rows != c.rows ||
      dl.cols != c.cols || c.order != dl.order || c.ld != dl.ld)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (a.batchCount != c.batchCount || b.batchCount != c.batchCount ||
      dl.batchCount != c.batchCount || c.batchStride != dl.batchStride)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (c.batchCount > 1 &&
      dl.batchStride < (int64_t)(dl.order == CUBLASLT_ORDER_COL ? dl.ld * (int64_t)dl.cols
                                                                : dl.ld * (int64_t)dl.rows))
    return CUBLAS_STATUS_INVALID_VALUE; // output matrices would overlap
  out = Shape{m, n, k, c.batchCount};
  return CUBLAS_STATUS_SUCCESS;
}

bool aligned(const void *p, uint32_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// ---- Running in stream order through the fake driver ------------------------------------------

using HostFn = void (*)(void *);
using LaunchHostFunc = int (*)(CUstreamArg, HostFn, void *);

LaunchHostFunc driverLaunchHostFunc() {
  static LaunchHostFunc fn = [] {
    const char *path = std::getenv("TCC_CUDA_DRIVER");
    void *driver = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    return driver ? reinterpret_cast<LaunchHostFunc>(dlsym(driver, "cuLaunchHostFunc")) : nullptr;
  }();
  return fn;
}

struct Product {
  MatmulDesc desc;
  Layout a, b, c, d;
  Shape shape;
  const void *pa, *pb, *pc;
  void *pd;
  double alpha, beta;
  void *workspace;
  size_t workspaceBytes;
};

/// A handle. The stream (or a graph replaying it) calls compute(&product) later, possibly many
/// times, so the handle keeps every distinct product it was asked for until it is destroyed
/// (a program's runs repeat the same calls, so this stays as small as its list of GEMMs).
struct Context {
  uint64_t magic = kMagic;
  std::mutex mutex;
  std::deque<Product> products;

  Product *intern(const Product &p) {
    std::lock_guard<std::mutex> lock(mutex);
    for (Product &q : products)
      if (std::memcmp(&q, &p, sizeof p) == 0)
        return &q;
    products.push_back(p);
    return &products.back();
  }
};

std::mutex countMutex;
uint64_t matmuls = 0;

void compute(void *arg) {
  Product *p = static_cast<Product *>(arg);
  const Shape &s = p->shape;
  std::vector<double> out((size_t)(s.m * s.n));
  int epilogue = (int)p->desc.epilogue;
  bool bias = epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
              epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  bool relu = epilogue == CUBLASLT_EPILOGUE_RELU || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  bool gelu = epilogue == CUBLASLT_EPILOGUE_GELU || epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  bool transA = p->desc.transA == CUBLAS_OP_T, transB = p->desc.transB == CUBLAS_OP_T;
  if (p->workspaceBytes > 0) // the workspace must be real device memory
    std::memset(p->workspace, 0xa5, p->workspaceBytes);
  for (int64_t batch = 0; batch < s.batches; ++batch) {
    // Read everything before writing D (C and D may be the same memory).
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0;
        for (int64_t kk = 0; kk < s.k; ++kk) {
          double x = load(p->pa, p->a.type,
                          transA ? indexOf(p->a, batch, kk, i) : indexOf(p->a, batch, i, kk));
          double y = load(p->pb, p->b.type,
                          transB ? indexOf(p->b, batch, j, kk) : indexOf(p->b, batch, kk, j));
          sum += x * y;
        }
        double v = p->alpha * sum;
        if (p->beta != 0) // cuBLASLt does not read C when beta is 0
          v += p->beta * load(p->pc, p->c.type, indexOf(p->c, batch, i, j));
        if (bias) // one value per row of D
          v += load(p->desc.bias, p->d.type, i);
        if (relu)
          v = v > 0 ? v : 0;
        if (gelu)
          v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        out[(size_t)(i * s.n + j)] = v;
      }
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j)
        store(p->pd, p->d.type, indexOf(p->d, batch, i, j), out[(size_t)(i * s.n + j)]);
  }
  std::lock_guard<std::mutex> lock(countMutex);
  ++matmuls;
}

} // namespace

// ---- The API ------------------------------------------------------------------------------------

FAKE_API size_t cublasLtGetVersion() { return 130000; }

FAKE_API const char *cublasLtGetStatusName(cublasStatus_t status) {
  switch ((int)status) {
  case 0:
    return "CUBLAS_STATUS_SUCCESS";
  case 1:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case 3:
    return "CUBLAS_STATUS_ALLOC_FAILED";
  case 7:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case 13:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  case 15:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  default:
    return "CUBLAS_STATUS_UNKNOWN";
  }
}

FAKE_API const char *cublasLtGetStatusString(cublasStatus_t status) {
  switch ((int)status) {
  case 0:
    return "the operation completed successfully";
  case 1:
    return "the library was not initialized";
  case 7:
    return "an unsupported value or parameter was passed to the function";
  case 15:
    return "the functionality requested is not supported";
  default:
    return "fake cuBLASLt error";
  }
}

FAKE_API cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  if (!handle)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!driverLaunchHostFunc())
    return CUBLAS_STATUS_NOT_INITIALIZED; // see the file comment
  *handle = reinterpret_cast<cublasLtHandle_t>(new Context());
  return CUBLAS_STATUS_SUCCESS;
}

FAKE_API cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  Context *c = checked(reinterpret_cast<Context *>(handle));
  if (!c)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  c->magic = 0; // the caller must have finished (or destroyed the graphs of) its work
  delete c;
  return CUBLAS_STATUS_SUCCESS;
}

FAKE_API cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                                 cublasComputeType_t computeType,
                                                 cudaDataType_t scaleType) {
  if (!desc)
    return CUBLAS_STATUS_INVALID_VALUE;
  MatmulDesc *d = new MatmulDesc();
  d->computeType = (int)computeType;
  d->scaleType = (int)scaleType;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

FAKE_API cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  MatmulDesc *d = checked(reinterpret_cast<MatmulDesc *>(desc));
  if (!d)
    return CUBLAS_STATUS_INVALID_VALUE;
  d->magic = 0;
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}

FAKE_API cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                       cublasLtMatmulDescAttributes_t attribute,
                                                       const void *buf, size_t bytes) {
  MatmulDesc *d = checked(reinterpret_cast<MatmulDesc *>(desc));
  if (!d)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch ((int)attribute) {
  case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
    return setValue(d->computeType, buf, bytes);
  case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
    return setValue(d->scaleType, buf, bytes);
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return setValue(d->transA, buf, bytes);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return setValue(d->transB, buf, bytes);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return setValue(d->epilogue, buf, bytes);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return setValue(d->bias, buf, bytes);
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED; // not modelled
  }
}

FAKE_API cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                                   cudaDataType_t type, uint64_t rows,
                                                   uint64_t cols, int64_t ld) {
  if (!layout || elementSize((int)type) == 0)
    return !layout ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_NOT_SUPPORTED;
  Layout *l = new Layout();
  l->type = (int)type;
  l->rows = rows;
  l->cols = cols;
  l->ld = ld;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

FAKE_API cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  Layout *l = checked(reinterpret_cast<Layout *>(layout));
  if (!l)
    return CUBLAS_STATUS_INVALID_VALUE;
  l->magic = 0;
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}

FAKE_API cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                         cublasLtMatrixLayoutAttribute_t attribute,
                                                         const void *buf, size_t bytes) {
  Layout *l = checked(reinterpret_cast<Layout *>(layout));
  if (!l)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch ((int)attribute) {
  case CUBLASLT_MATRIX_LAYOUT_TYPE: {
    uint32_t type = 0;
    cublasStatus_t s = setValue(type, buf, bytes);
    l->type = (int)type;
    return s;
  }
  case CUBLASLT_MATRIX_LAYOUT_ORDER:
    return setValue(l->order, buf, bytes);
  case CUBLASLT_MATRIX_LAYOUT_ROWS:
    return setValue(l->rows, buf, bytes);
  case CUBLASLT_MATRIX_LAYOUT_COLS:
    return setValue(l->cols, buf, bytes);
  case CUBLASLT_MATRIX_LAYOUT_LD:
    return setValue(l->ld, buf, bytes);
  case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
    return setValue(l->batchCount, buf, bytes);
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
    return setValue(l->batchStride, buf, bytes);
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

FAKE_API cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  if (!pref)
    return CUBLAS_STATUS_INVALID_VALUE;
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference());
  return CUBLAS_STATUS_SUCCESS;
}

FAKE_API cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  Preference *p = checked(reinterpret_cast<Preference *>(pref));
  if (!p)
    return CUBLAS_STATUS_INVALID_VALUE;
  p->magic = 0;
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}

FAKE_API cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute,
    const void *buf, size_t bytes) {
  Preference *p = checked(reinterpret_cast<Preference *>(pref));
  if (!p)
    return CUBLAS_STATUS_INVALID_VALUE;
  int a = (int)attribute;
  if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
    return setValue(p->maxWorkspace, buf, bytes);
  if (a >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
      a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
    uint32_t &slot = p->alignment[a - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES];
    cublasStatus_t s = setValue(slot, buf, bytes);
    if (s == CUBLAS_STATUS_SUCCESS && (slot == 0 || (slot & (slot - 1)) != 0))
      return CUBLAS_STATUS_INVALID_VALUE;
    return s;
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

/// The fake's one algorithm: data[0] = magic, data[1] = the workspace it needs, data[2..5] = the
/// operand alignments it was chosen for.
FAKE_API cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
    cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
    int *returned) {
  const MatmulDesc *md = checked(reinterpret_cast<MatmulDesc *>(desc));
  const Layout *la = checked(reinterpret_cast<Layout *>(a)),
               *lb = checked(reinterpret_cast<Layout *>(b)),
               *lc = checked(reinterpret_cast<Layout *>(c)),
               *ld = checked(reinterpret_cast<Layout *>(d));
  const Preference *p = checked(reinterpret_cast<Preference *>(pref));
  if (!checked(reinterpret_cast<Context *>(handle)))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!md || !la || !lb || !lc || !ld || !p || requested < 1 || !results || !returned)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  Shape shape;
  if (cublasStatus_t s = validate(*md, *la, *lb, *lc, *ld, shape); s != CUBLAS_STATUS_SUCCESS)
    return s;
  if (const char *env = std::getenv("TCC_FAKE_CUBLASLT_NO_ALGO"); env && std::strcmp(env, "1") == 0)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (md->bias && !aligned(md->bias, (uint32_t)elementSize(ld->type)))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(&results[0], 0, sizeof results[0]);
  results[0].algo.data[0] = kMagic;
  results[0].algo.data[1] = p->maxWorkspace >= kAlgoWorkspace ? kAlgoWorkspace : 0;
  for (int i = 0; i < 4; ++i)
    results[0].algo.data[2 + i] = p->alignment[i];
  results[0].workspaceSize = results[0].algo.data[1];
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

FAKE_API cublasStatus_t cublasLtMatmul(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
    cublasLtMatrixLayout_t aDesc, const void *B, cublasLtMatrixLayout_t bDesc, const void *beta,
    const void *C, cublasLtMatrixLayout_t cDesc, void *D, cublasLtMatrixLayout_t dDesc,
    const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceBytes, CUstreamArg stream) {
  const MatmulDesc *md = checked(reinterpret_cast<MatmulDesc *>(desc));
  const Layout *la = checked(reinterpret_cast<Layout *>(aDesc)),
               *lb = checked(reinterpret_cast<Layout *>(bDesc)),
               *lc = checked(reinterpret_cast<Layout *>(cDesc)),
               *ld = checked(reinterpret_cast<Layout *>(dDesc));
  if (!checked(reinterpret_cast<Context *>(handle)))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!md || !la || !lb || !lc || !ld || !alpha || !beta || !A || !B || !D)
    return CUBLAS_STATUS_INVALID_VALUE;
  Shape shape;
  if (cublasStatus_t s = validate(*md, *la, *lb, *lc, *ld, shape); s != CUBLAS_STATUS_SUCCESS)
    return s;
  if (!algo || algo->data[0] != kMagic) // tcc always passes the heuristic's algorithm
    return CUBLAS_STATUS_INVALID_VALUE;
  size_t needWorkspace = (size_t)algo->data[1];
  if (workspaceBytes < needWorkspace || (needWorkspace > 0 && !workspace))
    return CUBLAS_STATUS_INVALID_VALUE;
  // The operands must be as aligned as the algorithm was chosen for.
  const void *pointers[4] = {A, B, C, D};
  for (int i = 0; i < 4; ++i)
    if (!aligned(pointers[i], (uint32_t)algo->data[2 + i]))
      return CUBLAS_STATUS_INVALID_VALUE;
  Product p;
  std::memset(static_cast<void *>(&p), 0, sizeof p); // compared bytewise by Context::intern
  p.desc = *md;
  p.a = *la, p.b = *lb, p.c = *lc, p.d = *ld;
  p.shape = shape;
  p.pa = A, p.pb = B, p.pc = C, p.pd = D;
  p.workspace = workspace, p.workspaceBytes = needWorkspace;
  if (md->scaleType == CUDA_R_64F) {
    p.alpha = *static_cast<const double *>(alpha);
    p.beta = *static_cast<const double *>(beta);
  } else {
    p.alpha = *static_cast<const float *>(alpha);
    p.beta = *static_cast<const float *>(beta);
  }
  if (p.beta != 0 && !C)
    return CUBLAS_STATUS_INVALID_VALUE;
  Product *stored = reinterpret_cast<Context *>(handle)->intern(p);
  LaunchHostFunc launch = driverLaunchHostFunc();
  if (!launch) {
    compute(stored);
    return CUBLAS_STATUS_SUCCESS;
  }
  return launch(stream, compute, stored) == 0 ? CUBLAS_STATUS_SUCCESS
                                              : CUBLAS_STATUS_EXECUTION_FAILED;
}

/// Test hook: products computed so far.
FAKE_API uint64_t tcc_fake_cublaslt_matmuls() {
  std::lock_guard<std::mutex> lock(countMutex);
  return matmuls;
}
