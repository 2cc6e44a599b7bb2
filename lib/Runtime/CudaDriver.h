//===- CudaDriver.h - The CUDA driver API, reached through dlopen ---------===//
//
// libtccrt has no link-time dependency on CUDA: the driver (libcuda.so.1) is opened with dlopen
// the first time a CUDA artifact is loaded or a caller asks whether CUDA is usable, and the
// functions below are resolved by name (the versioned names, e.g. cuMemAlloc_v2, as cuda.h
// maps them). The types are declared here (ABI-identical to cuda.h) so that the runtime builds
// where the CUDA toolkit is absent.
//
// $TCC_CUDA_DRIVER names another library to open instead (tests point it at the fake driver in
// test/runtime/fakecuda/; users can point it at a driver outside the loader's path).
//
// loadCudaDriver() returns the process-wide driver once cuInit(0) succeeded and at least one
// device exists; otherwise it throws tcc::rt::Error whose message says what was tried and why
// it failed ("no usable CUDA GPU/driver: libcuda.so.1 not found (dlopen: ...)", "...: cuInit
// failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"). The outcome is cached:
// later calls return the same driver or throw the same message.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tcc::rt::cuda {

// ---- cuda.h's types (the subset tcc uses) -------------------------------------------------------
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
using CUcontext = CUctx_st *;
struct CUmod_st;
using CUmodule = CUmod_st *;
struct CUfunc_st;
using CUfunction = CUfunc_st *;
struct CUstream_st;
using CUstream = CUstream_st *;
struct CUevent_st;
using CUevent = CUevent_st *;
struct CUgraph_st;
using CUgraph = CUgraph_st *;
struct CUgraphExec_st;
using CUgraphExec = CUgraphExec_st *;
using CUjit_option = int;
struct CUarray_st;
using CUarray = CUarray_st *;
/// cuda.h's CUDA_MEMCPY2D (_v2): a pitched copy of Height rows of WidthInBytes bytes.
struct CUDA_MEMCPY2D {
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void *srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void *dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
};
constexpr int CU_MEMORYTYPE_DEVICE = 2;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901;
// CUjit_option values (cuModuleLoadDataEx): the error log buffer and its size in bytes
// (in: capacity, out: bytes written).
constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
// CUdevice_attribute values.
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
// Flags.
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 2;
constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
// CUfunction_attribute.
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

/// The driver functions tcc calls. Every pointer is non-null in a loaded driver.
struct CudaDriver {
  std::string library; // the path or soname that was opened
  int driverVersion = 0; // cuDriverGetVersion, e.g. 13000

  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuGetErrorName)(CUresult error, const char **name);
  CUresult (*cuGetErrorString)(CUresult error, const char **text);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int length, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice device);
  CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice device);            // _v2
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);                  // _v2
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemGetInfo)(size_t *freeBytes, size_t *totalBytes);         // _v2
  CUresult (*cuMemAlloc)(CUdeviceptr *ptr, size_t bytes);                  // _v2
  CUresult (*cuMemFree)(CUdeviceptr ptr);                                  // _v2
  CUresult (*cuMemAllocHost)(void **ptr, size_t bytes);                    // _v2
  CUresult (*cuMemFreeHost)(void *ptr);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes,
                                CUstream stream);                          // _v2
  CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes,
                                CUstream stream);                          // _v2
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                CUstream stream);                          // _v2
  CUresult (*cuMemcpy2DAsync)(const CUDA_MEMCPY2D *copy, CUstream stream); // _v2
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t bytes,
                              CUstream stream);
  CUresult (*cuModuleLoadDataEx)(CUmodule *module, const void *image, unsigned numOptions,
                                 CUjit_option *options, void **optionValues);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction *function, CUmodule module, const char *name);
  CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value);
  CUresult (*cuLaunchKernel)(CUfunction f, unsigned gridX, unsigned gridY, unsigned gridZ,
                             unsigned blockX, unsigned blockY, unsigned blockZ,
                             unsigned sharedBytes, CUstream stream, void **params, void **extra);
  CUresult (*cuStreamCreate)(CUstream *stream, unsigned flags);
  CUresult (*cuStreamDestroy)(CUstream stream);                            // _v2
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned flags);
  CUresult (*cuEventCreate)(CUevent *event, unsigned flags);
  CUresult (*cuEventDestroy)(CUevent event);                               // _v2
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventQuery)(CUevent event);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);   // _v2 (12.8+), else
                                                                           // the unversioned one
  CUresult (*cuStreamBeginCapture)(CUstream stream, int mode);             // _v2
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph *graph);
  CUresult (*cuGraphInstantiate)(CUgraphExec *exec, CUgraph graph,
                                 unsigned long long flags);                // WithFlags
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);

  /// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string describe(CUresult result) const;
  /// Throws tcc::rt::Error("<what>: <describe(result)>") unless result is CUDA_SUCCESS.
  void check(CUresult result, const std::string &what) const;
};

/// The process-wide driver (see the file comment); throws tcc::rt::Error when CUDA is unusable.
const CudaDriver &loadCudaDriver();

/// The number of CUDA devices (loads the driver; throws as loadCudaDriver does).
int cudaDeviceCount();

/// Whether CUDA is usable in this process; if not and `reason` is given, why (the message
/// loadCudaDriver would throw).
bool cudaAvailable(std::string *reason = nullptr);

} // namespace tcc::rt::cuda
