//===- CublasLt.h - GEMM steps of CUDA programs through cuBLASLt ---------===//
//
// libtccrt does not link cuBLASLt: the library is opened with dlopen the first time a CUDA
// program with a Gemm step is loaded ($TCC_CUBLASLT_LIBRARY, else libcublasLt.so.13, .so.12,
// libcublasLt.so; the first that opens and has every function below wins). Its types are
// declared here, ABI-identical to <cublasLt.h> of CUDA 12/13 (enum values, attribute numbers,
// the heuristic result's layout), so the runtime builds without the toolkit; the fake cuBLASLt
// of the tests is compiled against the real header where the toolkit is installed, so a
// mismatch shows up as wrong numbers there.
//
// How a Gemm step maps onto cuBLASLt (CublasLtGemm):
//  * Row-major by operand swap: cuBLASLt is column-major, and a row-major r x c matrix is the
//    column-major c x r matrix with the same bytes. tcc's c[m, n] = op(a) op(b) is computed as
//    c^T[n, m] = op(b)^T op(a)^T: cuBLASLt's A is tcc's b (transa = trans_b), its B is tcc's a
//    (transb = trans_a), its m/n are tcc's n/m, every layout CUBLASLT_ORDER_COL with the
//    row-major leading dimension. The bias (one value per column of c) is then one value per
//    row of cuBLASLt's D, which is what CUBLASLT_EPILOGUE_BIAS adds.
//  * Types: f32 data with CUBLAS_COMPUTE_32F, never TF32, so results stay within f32 rounding
//    of the CPU's (CUBLAS_COMPUTE_32F_FAST_TF32 trades 10-bit mantissas for speed; it would
//    have to be an explicit user option, and there is none); f64 with CUBLAS_COMPUTE_64F;
//    f16/bf16 data with 32F compute and f32 alpha/beta.
//  * Batches: the batch dims of c are one strided batch when every operand's offsets are linear
//    in the flattened batch index (a broadcast operand gets batch stride 0); otherwise the
//    longest such suffix of batch dims is one strided batch and the outer dims are a loop of
//    cublasLtMatmul calls (offsets precomputed at load).
//  * Epilogues: bias -> CUBLASLT_EPILOGUE_BIAS with the bias pointer; Relu -> RELU / RELU_BIAS;
//    GeluTanh -> GELU / GELU_BIAS. alpha/beta as given; beta != 0 reads c in place (C = D).
//  * The algorithm: cublasLtMatmulAlgoGetHeuristic once at load with the workspace limit and
//    the operands' actual alignment (views may start at any element), the best one reused for
//    every run. A step no algorithm fits is refused at load, naming the step and the status.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "CpuLibrary.h"
#include "CudaDriver.h"
#include "Program.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tcc::rt::cuda {

// ---- cublasLt.h's types (the subset tcc uses) ---------------------------------------------------
using cublasStatus_t = int;
struct cublasLtContext;
using cublasLtHandle_t = cublasLtContext *;
struct cublasLtMatmulDescOpaque_t {
  uint64_t data[32];
};
using cublasLtMatmulDesc_t = cublasLtMatmulDescOpaque_t *;
struct cublasLtMatrixLayoutOpaque_t {
  uint64_t data[8];
};
using cublasLtMatrixLayout_t = cublasLtMatrixLayoutOpaque_t *;
struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t data[8];
};
using cublasLtMatmulPreference_t = cublasLtMatmulPreferenceOpaque_t *;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96, "cublasLt.h layout");

constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
constexpr cublasStatus_t CUBLAS_STATUS_NOT_SUPPORTED = 15;
// cudaDataType_t
constexpr int CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14;
// cublasComputeType_t
constexpr int CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_64F = 70;
// cublasOperation_t
constexpr int CUBLAS_OP_N = 0, CUBLAS_OP_T = 1;
// cublasLtOrder_t
constexpr int CUBLASLT_ORDER_COL = 0;
// cublasLtMatrixLayoutAttribute_t (types: uint32, int32, uint64, uint64, int64, int32, int64)
constexpr int CUBLASLT_MATRIX_LAYOUT_TYPE = 0, CUBLASLT_MATRIX_LAYOUT_ORDER = 1,
              CUBLASLT_MATRIX_LAYOUT_ROWS = 2, CUBLASLT_MATRIX_LAYOUT_COLS = 3,
              CUBLASLT_MATRIX_LAYOUT_LD = 4, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
              CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6;
// cublasLtMatmulDescAttributes_t (types: int32, int32, int32, int32, uint32, const void *)
constexpr int CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0, CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
              CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4,
              CUBLASLT_MATMUL_DESC_EPILOGUE = 7, CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8;
// cublasLtEpilogue_t
constexpr uint32_t CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_RELU = 2,
                   CUBLASLT_EPILOGUE_BIAS = 4, CUBLASLT_EPILOGUE_RELU_BIAS = 6,
                   CUBLASLT_EPILOGUE_GELU = 32, CUBLASLT_EPILOGUE_GELU_BIAS = 36;
// cublasLtMatmulPreferenceAttributes_t (types: uint64, then uint32 for the alignments)
constexpr int CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
              CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
              CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
              CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
              CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8;

/// The cuBLASLt functions tcc calls. Every pointer is non-null in a loaded library.
struct CublasLt {
  std::string library; // the path or soname that was opened
  size_t version = 0;  // cublasLtGetVersion, e.g. 130000

  size_t (*cublasLtGetVersion)();
  const char *(*cublasLtGetStatusName)(cublasStatus_t);
  const char *(*cublasLtGetStatusString)(cublasStatus_t);
  cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t *handle);
  cublasStatus_t (*cublasLtDestroy)(cublasLtHandle_t handle);
  cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t *desc, int computeType,
                                             int scaleType);
  cublasStatus_t (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t desc);
  cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t desc, int attribute,
                                                   const void *value, size_t bytes);
  cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t *layout, int type,
                                               uint64_t rows, uint64_t cols, int64_t ld);
  cublasStatus_t (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t layout);
  cublasStatus_t (*cublasLtMatrixLayoutSetAttribute)(cublasLtMatrixLayout_t layout, int attribute,
                                                     const void *value, size_t bytes);
  cublasStatus_t (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t *pref);
  cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t pref);
  cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t pref,
                                                         int attribute, const void *value,
                                                         size_t bytes);
  cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(
      cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
      cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
      cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t *results,
      int *returned);
  cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                   const void *alpha, const void *a, cublasLtMatrixLayout_t aDesc,
                                   const void *b, cublasLtMatrixLayout_t bDesc, const void *beta,
                                   const void *c, cublasLtMatrixLayout_t cDesc, void *d,
                                   cublasLtMatrixLayout_t dDesc, const cublasLtMatmulAlgo_t *algo,
                                   void *workspace, size_t workspaceBytes, CUstream stream);

  /// "CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not supported)".
  std::string describe(cublasStatus_t status) const;
  /// Throws tcc::rt::Error("<what>: <describe(status)>") unless status is success.
  void check(cublasStatus_t status, const std::string &what) const;
};

/// The process-wide cuBLASLt (see the file comment); throws tcc::rt::Error naming every library
/// tried and why it failed. The outcome is cached like the driver's.
const CublasLt &loadCublasLt();

/// The workspace every program with Gemm steps allocates once (from the device's caching
/// allocator) and hands to every cublasLtMatmul; the heuristic is limited to it.
constexpr size_t kCublasLtWorkspaceBytes = size_t(32) << 20;

/// A cuBLASLt handle (one per program; created with the device's context current).
class CublasLtHandle {
public:
  explicit CublasLtHandle(const CublasLt &lt);
  ~CublasLtHandle();
  CublasLtHandle(const CublasLtHandle &) = delete;
  CublasLtHandle &operator=(const CublasLtHandle &) = delete;
  cublasLtHandle_t get() const { return handle_; }
  const CublasLt &library() const { return lt_; }

private:
  const CublasLt &lt_;
  cublasLtHandle_t handle_ = nullptr;
};

/// One Gemm step planned at load time: descriptors, the chosen algorithm and the calls it
/// makes (several only when the batch dims need a loop of strided batches). Operand
/// addresses are fixed (the program's device buffers never move).
class CublasLtGemm {
public:
  /// `geometry` is the checked shape of the step (makeGemmGeometry; its dtype may also be f16
  /// or bf16 here). `bias` is 0 without a bias. `what` names the step in errors.
  CublasLtGemm(const CublasLtHandle &handle, const GemmGeometry &geometry, GemmActivation act,
               CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias, size_t workspaceBytes,
               const std::string &what);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm &) = delete;
  CublasLtGemm &operator=(const CublasLtGemm &) = delete;

  /// Enqueues the product on `stream` (capturable into a CUDA graph).
  void enqueue(CUstream stream, CUdeviceptr workspace) const;
  /// cublasLtMatmul calls per run (1 unless the batch needs a loop).
  size_t calls() const { return calls_.size(); }

private:
  void plan(const GemmGeometry &g, GemmActivation act, CUdeviceptr a, CUdeviceptr b,
            CUdeviceptr c, CUdeviceptr bias);
  void release() noexcept; // the descriptors

  const CublasLtHandle &handle_;
  std::string what_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t aLayout_ = nullptr, bLayout_ = nullptr, cLayout_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspaceBytes_ = 0;
  float alpha32_ = 1, beta32_ = 0;
  double alpha64_ = 1, beta64_ = 0;
  bool scale64_ = false;
  struct Call {
    CUdeviceptr a, b, c; // cuBLASLt's A (tcc's b), B (tcc's a), C = D
  };
  std::vector<Call> calls_;
};

} // namespace tcc::rt::cuda
