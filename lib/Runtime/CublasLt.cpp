//===- CublasLt.cpp - cuBLASLt through dlopen, and Gemm steps planned on it -===//
#include "CublasLt.h"

#include "DType.h"
#include "Program.h"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <utility>

namespace tcc::rt::cuda {

std::string CublasLt::describe(cublasStatus_t status) const {
  const char *name = cublasLtGetStatusName ? cublasLtGetStatusName(status) : nullptr;
  const char *text = cublasLtGetStatusString ? cublasLtGetStatusString(status) : nullptr;
  std::string out = name ? name : "cuBLASLt status " + std::to_string(status);
  if (text && *text)
    out += std::string(" (") + text + ")";
  return out;
}

void CublasLt::check(cublasStatus_t status, const std::string &what) const {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(what + ": " + describe(status));
}

namespace {

struct Loaded {
  std::unique_ptr<CublasLt> lt;
  std::string error;
};

/// Opens `name` and resolves every function; returns null and sets `why` on failure.
std::unique_ptr<CublasLt> open(const std::string &name, std::string &why) {
  void *handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *err = dlerror();
    why = name + " (dlopen: " + (err ? err : "unknown error") + ")";
    return nullptr;
  }
  auto lt = std::make_unique<CublasLt>();
  lt->library = name;
  bool ok = true;
  auto resolve = [&](auto &fn, const char *symbol) {
    void *p = dlsym(handle, symbol);
    if (!p && ok) {
      why = name + " lacks " + symbol;
      ok = false;
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
#define TCC_RESOLVE(fn) resolve(lt->fn, #fn)
  TCC_RESOLVE(cublasLtGetVersion);
  TCC_RESOLVE(cublasLtGetStatusName);
  TCC_RESOLVE(cublasLtGetStatusString);
  TCC_RESOLVE(cublasLtCreate);
  TCC_RESOLVE(cublasLtDestroy);
  TCC_RESOLVE(cublasLtMatmulDescCreate);
  TCC_RESOLVE(cublasLtMatmulDescDestroy);
  TCC_RESOLVE(cublasLtMatmulDescSetAttribute);
  TCC_RESOLVE(cublasLtMatrixLayoutCreate);
  TCC_RESOLVE(cublasLtMatrixLayoutDestroy);
  TCC_RESOLVE(cublasLtMatrixLayoutSetAttribute);
  TCC_RESOLVE(cublasLtMatmulPreferenceCreate);
  TCC_RESOLVE(cublasLtMatmulPreferenceDestroy);
  TCC_RESOLVE(cublasLtMatmulPreferenceSetAttribute);
  TCC_RESOLVE(cublasLtMatmulAlgoGetHeuristic);
  TCC_RESOLVE(cublasLtMatmul);
#undef TCC_RESOLVE
  if (!ok) {
    dlclose(handle);
    return nullptr;
  }
  // The library stays open for the life of the process (programs hold its function pointers).
  lt->version = lt->cublasLtGetVersion();
  return lt;
}

Loaded loadOnce() {
  Loaded result;
  std::vector<std::string> candidates;
  if (const char *env = std::getenv("TCC_CUBLASLT_LIBRARY"); env && *env)
    candidates = {env};
  else
    candidates = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  std::string tried;
  for (const std::string &name : candidates) {
    std::string why;
    if ((result.lt = open(name, why)))
      return result;
    tried += (tried.empty() ? "" : "; ") + why;
  }
  result.error = "cannot load cuBLASLt, which CUDA programs with GEMMs need: " + tried;
  return result;
}

} // namespace

const CublasLt &loadCublasLt() {
  static const Loaded loaded = loadOnce();
  if (!loaded.lt)
    throw Error(loaded.error);
  return *loaded.lt;
}

CublasLtHandle::CublasLtHandle(const CublasLt &lt) : lt_(lt) {
  lt.check(lt.cublasLtCreate(&handle_), "cublasLtCreate");
}

CublasLtHandle::~CublasLtHandle() {
  if (handle_)
    lt_.cublasLtDestroy(handle_);
}

namespace {

/// The largest power of two (at most 256) dividing `x` (256 for 0).
uint32_t alignmentOf(uint64_t x) {
  if (x == 0)
    return 256;
  uint64_t low = x & (~x + 1);
  return (uint32_t)std::min<uint64_t>(low, 256);
}

} // namespace

CublasLtGemm::CublasLtGemm(const CublasLtHandle &handle, const GemmGeometry &g, GemmActivation act,
                           CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias,
                           size_t workspaceBytes, const std::string &what)
    : handle_(handle), what_(what), workspaceBytes_(workspaceBytes) {
  try {
    plan(g, act, a, b, c, bias);
  } catch (...) {
    release(); // no destructor runs for a constructor that throws
    throw;
  }
}

void CublasLtGemm::plan(const GemmGeometry &g, GemmActivation act, CUdeviceptr a, CUdeviceptr b,
                        CUdeviceptr c, CUdeviceptr bias) {
  const CublasLtHandle &handle = handle_;
  const CublasLt &lt = handle.library();
  const std::string &what = what_;
  size_t workspaceBytes = workspaceBytes_;
  int dataType, computeType, scaleType;
  switch (g.dtype) {
  case TCCRT_F32:
    dataType = CUDA_R_32F, computeType = CUBLAS_COMPUTE_32F, scaleType = CUDA_R_32F;
    break;
  case TCCRT_F64:
    dataType = CUDA_R_64F, computeType = CUBLAS_COMPUTE_64F, scaleType = CUDA_R_64F;
    break;
  case TCCRT_F16:
    dataType = CUDA_R_16F, computeType = CUBLAS_COMPUTE_32F, scaleType = CUDA_R_32F;
    break;
  case TCCRT_BF16:
    dataType = CUDA_R_16BF, computeType = CUBLAS_COMPUTE_32F, scaleType = CUDA_R_32F;
    break;
  default:
    throw Error(what + ": cuBLASLt GEMMs take f16, bf16, f32 or f64, not " +
                std::string(dtypeName(g.dtype)));
  }
  scale64_ = scaleType == CUDA_R_64F;
  alpha64_ = g.alpha, beta64_ = g.beta;
  alpha32_ = (float)g.alpha, beta32_ = (float)g.beta;
  for (auto [name, v] :
       std::initializer_list<std::pair<const char *, int64_t>>{{"M", g.m}, {"N", g.n}, {"K", g.k}})
    if (v > INT32_MAX)
      throw Error(what + ": " + name + " = " + std::to_string(v) +
                  " exceeds cuBLASLt's 32-bit dimensions");

  // ---- Batches: the longest suffix of batch dims that one strided batch expresses ------------
  size_t rank = g.batch.size();
  std::vector<int64_t> cBatchStrides(rank, 0);
  for (size_t d = rank, stride = 1; d-- > 0;) {
    cBatchStrides[d] = (int64_t)stride;
    stride *= (size_t)g.batch[d];
  }
  int64_t count = 1, aStride = 0, bStride = 0, cStride = 0;
  size_t split = rank; // dims [split, rank) form the strided batch
  for (size_t d = rank; d-- > 0; split = d) {
    if (g.batch[d] == 1)
      continue;
    if (count == 1) {
      aStride = g.aBatchStrides[d], bStride = g.bBatchStrides[d], cStride = cBatchStrides[d];
    } else if (g.aBatchStrides[d] != aStride * count || g.bBatchStrides[d] != bStride * count ||
               cBatchStrides[d] != cStride * count) {
      break;
    }
    count *= g.batch[d];
  }
  if (count > INT32_MAX)
    throw Error(what + ": " + std::to_string(count) +
                " batched products exceed cuBLASLt's 32-bit batch count");
  int64_t aMatrix = g.m * g.k, bMatrix = g.k * g.n, cMatrix = g.m * g.n;
  size_t elem = dtypeSize(g.dtype);
  if (g.m > 0 && g.n > 0 && g.numBatches > 0) {
    std::vector<int64_t> index(split, 0);
    for (;;) {
      int64_t ao = 0, bo = 0, co = 0;
      for (size_t d = 0; d < split; ++d) {
        ao += index[d] * g.aBatchStrides[d];
        bo += index[d] * g.bBatchStrides[d];
        co += index[d] * cBatchStrides[d];
      }
      calls_.push_back(Call{b + (CUdeviceptr)(bo * bMatrix * elem),
                            a + (CUdeviceptr)(ao * aMatrix * elem),
                            c + (CUdeviceptr)(co * cMatrix * elem)});
      size_t d = split;
      while (d > 0 && ++index[d - 1] == g.batch[d - 1])
        index[--d] = 0;
      if (d == 0)
        break;
    }
  }
  if (calls_.empty())
    return; // nothing to compute (an empty c)
  if (g.k == 0)
    throw Error(what + ": K = 0 (the runtime fills c without cuBLASLt)"); // see CudaExecutor

  // ---- Descriptors ---------------------------------------------------------------------------
  auto set = [&](cublasStatus_t status, const char *attribute) {
    lt.check(status, what + ": setting " + attribute);
  };
  lt.check(lt.cublasLtMatmulDescCreate(&desc_, computeType, scaleType),
           what + ": cublasLtMatmulDescCreate");
  int32_t transA = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N; // cuBLASLt's A is tcc's b
  int32_t transB = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(lt.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &transA, sizeof transA),
      "TRANSA");
  set(lt.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &transB, sizeof transB),
      "TRANSB");
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  switch (act) {
  case GemmActivation::None:
    epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    break;
  case GemmActivation::Relu:
    epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    break;
  case GemmActivation::GeluTanh:
    epilogue = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    break;
  case GemmActivation::GeluErf: // the loader refuses it on CUDA
    throw Error("cuBLASLt has no erf GELU epilogue");
  }
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    set(lt.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                          sizeof epilogue),
        "EPILOGUE");
  if (bias) {
    const void *pointer = reinterpret_cast<const void *>(bias);
    set(lt.cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer,
                                          sizeof pointer),
        "BIAS_POINTER");
  }

  auto layout = [&](cublasLtMatrixLayout_t &out, int64_t rows, int64_t cols, int64_t batchStride,
                    const char *name) {
    lt.check(lt.cublasLtMatrixLayoutCreate(&out, dataType, (uint64_t)rows, (uint64_t)cols, rows),
             what + ": cublasLtMatrixLayoutCreate (" + name + ")");
    int32_t order = CUBLASLT_ORDER_COL;
    set(lt.cublasLtMatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_ORDER, &order,
                                            sizeof order),
        "ORDER");
    if (count > 1) {
      int32_t batches = (int32_t)count;
      int64_t stride = batchStride;
      set(lt.cublasLtMatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batches,
                                              sizeof batches),
          "BATCH_COUNT");
      set(lt.cublasLtMatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &stride, sizeof stride),
          "STRIDED_BATCH_OFFSET");
    }
  };
  // Column-major views of the row-major operands (leading dimension = rows of the view).
  layout(aLayout_, g.transB ? g.k : g.n, g.transB ? g.n : g.k, bStride * bMatrix, "b");
  layout(bLayout_, g.transA ? g.m : g.k, g.transA ? g.k : g.m, aStride * aMatrix, "a");
  layout(cLayout_, g.n, g.m, cStride * cMatrix, "c");

  // ---- The algorithm -------------------------------------------------------------------------
  uint64_t aBits = 0, bBits = 0, cBits = 0;
  for (const Call &call : calls_)
    aBits |= call.a, bBits |= call.b, cBits |= call.c;
  if (count > 1) {
    aBits |= (uint64_t)(bStride * bMatrix * (int64_t)elem);
    bBits |= (uint64_t)(aStride * aMatrix * (int64_t)elem);
    cBits |= (uint64_t)(cStride * cMatrix * (int64_t)elem);
  }
  cublasLtMatmulPreference_t pref = nullptr;
  lt.check(lt.cublasLtMatmulPreferenceCreate(&pref), what + ": cublasLtMatmulPreferenceCreate");
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, cublasStatus_t (*)(cublasLtMatmulPreference_t)>
      prefOwner(pref, lt.cublasLtMatmulPreferenceDestroy);
  uint64_t limit = workspaceBytes;
  set(lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &limit, sizeof limit),
      "MAX_WORKSPACE_BYTES");
  for (auto [attribute, bits] : std::initializer_list<std::pair<int, uint64_t>>{
           {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, aBits},
           {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, bBits},
           {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, cBits},
           {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, cBits}}) {
    uint32_t alignment = alignmentOf(bits);
    set(lt.cublasLtMatmulPreferenceSetAttribute(pref, attribute, &alignment, sizeof alignment),
        "MIN_ALIGNMENT");
  }
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  cublasStatus_t status = lt.cublasLtMatmulAlgoGetHeuristic(
      handle.get(), desc_, aLayout_, bLayout_, cLayout_, cLayout_, pref, 1, &result, &returned);
  if (status == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state != CUBLAS_STATUS_SUCCESS)
    status = result.state;
  if (status != CUBLAS_STATUS_SUCCESS || returned < 1) {
    std::string shape = std::string(dtypeName(g.dtype)) + " M=" + std::to_string(g.m) +
                        " N=" + std::to_string(g.n) + " K=" + std::to_string(g.k) +
                        (count > 1 ? " batch=" + std::to_string(count) : "") +
                        (g.transA ? " a^T" : "") + (g.transB ? " b^T" : "") + " epilogue " +
                        std::to_string(epilogue);
    throw Error(what + ": cuBLASLt has no algorithm for this GEMM (" + shape + ", workspace " +
                std::to_string(workspaceBytes) + " bytes): " +
                (status != CUBLAS_STATUS_SUCCESS ? lt.describe(status)
                                                 : std::string("no heuristic result")));
  }
  algo_ = result.algo;
}

CublasLtGemm::~CublasLtGemm() { release(); }

void CublasLtGemm::release() noexcept {
  const CublasLt &lt = handle_.library();
  for (cublasLtMatrixLayout_t *layout : {&aLayout_, &bLayout_, &cLayout_})
    if (*layout)
      lt.cublasLtMatrixLayoutDestroy(std::exchange(*layout, nullptr));
  if (desc_)
    lt.cublasLtMatmulDescDestroy(std::exchange(desc_, nullptr));
}

void CublasLtGemm::enqueue(CUstream stream, CUdeviceptr workspace) const {
  const CublasLt &lt = handle_.library();
  const void *alpha = scale64_ ? (const void *)&alpha64_ : (const void *)&alpha32_;
  const void *beta = scale64_ ? (const void *)&beta64_ : (const void *)&beta32_;
  for (const Call &call : calls_) {
    const void *c = reinterpret_cast<const void *>(call.c);
    lt.check(lt.cublasLtMatmul(handle_.get(), desc_, alpha, reinterpret_cast<const void *>(call.a),
                               aLayout_, reinterpret_cast<const void *>(call.b), bLayout_, beta, c,
                               cLayout_, const_cast<void *>(c), cLayout_, &algo_,
                               reinterpret_cast<void *>(workspace), workspaceBytes_, stream),
             what_ + ": cublasLtMatmul");
  }
}

} // namespace tcc::rt::cuda
