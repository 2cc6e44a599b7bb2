//===- CudaDriver.cpp - The CUDA driver API, reached through dlopen -------===//
//
// Opens libcuda.so.1 (or $TCC_CUDA_DRIVER) once per process, resolves every function tcc calls
// by the name cuda.h (CUDA 13.0) binds it to, initialises the driver and counts the devices.
// The outcome, a usable driver or the message saying why there is none, is computed once and
// cached (a function-local static: thread-safe, never retried).
//
//===----------------------------------------------------------------------===//
#include "CudaDriver.h"

#include "Program.h" // tcc::rt::Error

#include <dlfcn.h>

#include <cstdlib>

namespace tcc::rt::cuda {

namespace {

constexpr char kNoCuda[] = "no usable CUDA GPU/driver: ";

struct Outcome {
  CudaDriver driver;
  std::string error; // empty: usable
};

/// One function to resolve: `names` are tried in order (the versioned name cuda.h binds the
/// call to first; a fallback only where older drivers lack the versioned one).
struct Symbol {
  const char *names[2];
  void **slot;
};

template <class F> void **slot(F *&pointer) { return reinterpret_cast<void **>(&pointer); }

Outcome load() {
  Outcome out;
  CudaDriver &d = out.driver;
  const char *override = std::getenv("TCC_CUDA_DRIVER");
  bool fromEnv = override && *override;
  d.library = fromEnv ? override : "libcuda.so.1";
  std::string where = d.library + (fromEnv ? " ($TCC_CUDA_DRIVER)" : "");

  void *handle = dlopen(d.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    out.error =
        std::string(kNoCuda) + where + " not found (dlopen: " + (why ? why : "unknown error") + ")";
    return out;
  }

  // The names as cuda.h 13.0 defines them: `#define cuMemAlloc cuMemAlloc_v2` and so on. The
  // per-thread-default-stream variants (_ptsz/_ptds) are not used: tcc passes explicit streams
  // and wants the legacy default stream's semantics for stream 0.
  const Symbol symbols[] = {
      {{"cuInit"}, slot(d.cuInit)},
      {{"cuDriverGetVersion"}, slot(d.cuDriverGetVersion)},
      {{"cuGetErrorName"}, slot(d.cuGetErrorName)},
      {{"cuGetErrorString"}, slot(d.cuGetErrorString)},
      {{"cuDeviceGetCount"}, slot(d.cuDeviceGetCount)},
      {{"cuDeviceGet"}, slot(d.cuDeviceGet)},
      {{"cuDeviceGetName"}, slot(d.cuDeviceGetName)},
      {{"cuDeviceGetAttribute"}, slot(d.cuDeviceGetAttribute)},
      {{"cuDeviceTotalMem_v2"}, slot(d.cuDeviceTotalMem)},
      {{"cuDevicePrimaryCtxRetain"}, slot(d.cuDevicePrimaryCtxRetain)},
      {{"cuDevicePrimaryCtxRelease_v2"}, slot(d.cuDevicePrimaryCtxRelease)},
      {{"cuCtxSetCurrent"}, slot(d.cuCtxSetCurrent)},
      {{"cuCtxSynchronize"}, slot(d.cuCtxSynchronize)},
      {{"cuMemGetInfo_v2"}, slot(d.cuMemGetInfo)},
      {{"cuMemAlloc_v2"}, slot(d.cuMemAlloc)},
      {{"cuMemFree_v2"}, slot(d.cuMemFree)},
      {{"cuMemAllocHost_v2"}, slot(d.cuMemAllocHost)},
      {{"cuMemFreeHost"}, slot(d.cuMemFreeHost)},
      {{"cuMemcpyHtoDAsync_v2"}, slot(d.cuMemcpyHtoDAsync)},
      {{"cuMemcpyDtoHAsync_v2"}, slot(d.cuMemcpyDtoHAsync)},
      {{"cuMemcpyDtoDAsync_v2"}, slot(d.cuMemcpyDtoDAsync)},
      {{"cuMemcpy2DAsync_v2"}, slot(d.cuMemcpy2DAsync)},
      {{"cuMemsetD8Async"}, slot(d.cuMemsetD8Async)},
      {{"cuModuleLoadDataEx"}, slot(d.cuModuleLoadDataEx)},
      {{"cuModuleUnload"}, slot(d.cuModuleUnload)},
      {{"cuModuleGetFunction"}, slot(d.cuModuleGetFunction)},
      {{"cuFuncSetAttribute"}, slot(d.cuFuncSetAttribute)},
      {{"cuLaunchKernel"}, slot(d.cuLaunchKernel)},
      {{"cuStreamCreate"}, slot(d.cuStreamCreate)},
      {{"cuStreamDestroy_v2"}, slot(d.cuStreamDestroy)},
      {{"cuStreamSynchronize"}, slot(d.cuStreamSynchronize)},
      {{"cuStreamWaitEvent"}, slot(d.cuStreamWaitEvent)},
      {{"cuEventCreate"}, slot(d.cuEventCreate)},
      {{"cuEventDestroy_v2"}, slot(d.cuEventDestroy)},
      {{"cuEventRecord"}, slot(d.cuEventRecord)},
      {{"cuEventQuery"}, slot(d.cuEventQuery)},
      {{"cuEventSynchronize"}, slot(d.cuEventSynchronize)},
      // cuda.h 13.0 binds cuEventElapsedTime to _v2 (added in 12.8, same signature); drivers
      // before 12.8 have only the unversioned one.
      {{"cuEventElapsedTime_v2", "cuEventElapsedTime"}, slot(d.cuEventElapsedTime)},
      {{"cuStreamBeginCapture_v2"}, slot(d.cuStreamBeginCapture)},
      {{"cuStreamEndCapture"}, slot(d.cuStreamEndCapture)},
      {{"cuGraphInstantiateWithFlags"}, slot(d.cuGraphInstantiate)},
      {{"cuGraphLaunch"}, slot(d.cuGraphLaunch)},
      {{"cuGraphExecDestroy"}, slot(d.cuGraphExecDestroy)},
      {{"cuGraphDestroy"}, slot(d.cuGraphDestroy)},
  };
  for (const Symbol &symbol : symbols) {
    *symbol.slot = nullptr;
    for (const char *name : symbol.names)
      if (name && !*symbol.slot)
        *symbol.slot = dlsym(handle, name);
    if (!*symbol.slot) {
      out.error = std::string(kNoCuda) + where + " lacks " + symbol.names[0];
      dlclose(handle);
      return out;
    }
  }

  // From here on the library stays loaded for the life of the process (even when it turns out
  // unusable: its error strings are what the message quotes).
  CUresult result = d.cuInit(0);
  if (result != CUDA_SUCCESS) {
    out.error = std::string(kNoCuda) + "cuInit failed: " + d.describe(result);
    return out;
  }
  result = d.cuDriverGetVersion(&d.driverVersion);
  if (result != CUDA_SUCCESS) {
    out.error = std::string(kNoCuda) + "cuDriverGetVersion failed: " + d.describe(result);
    return out;
  }
  int count = 0;
  result = d.cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS) {
    out.error = std::string(kNoCuda) + "cuDeviceGetCount failed: " + d.describe(result);
    return out;
  }
  if (count <= 0)
    out.error = std::string(kNoCuda) + "no CUDA devices";
  return out;
}

const Outcome &outcome() {
  static const Outcome cached = load();
  return cached;
}

} // namespace

std::string CudaDriver::describe(CUresult result) const {
  const char *name = nullptr, *text = nullptr;
  if (!cuGetErrorName || cuGetErrorName(result, &name) != CUDA_SUCCESS || !name) {
    // Drivers that cannot start cannot name their errors either (a stub libcuda answers every
    // call, cuGetErrorName included, with CUDA_ERROR_STUB_LIBRARY): name the ones that say why
    // CUDA is unusable (cuda.h's values; the texts paraphrase its descriptions).
    struct Known {
      CUresult code;
      const char *text;
    };
    static const Known known[] = {
        {3, "CUDA_ERROR_NOT_INITIALIZED (initialization error)"},
        {34, "CUDA_ERROR_STUB_LIBRARY (the loaded CUDA driver is a stub library)"},
        {46, "CUDA_ERROR_DEVICE_UNAVAILABLE (CUDA-capable device(s) unavailable)"},
        {100, "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"},
        {802, "CUDA_ERROR_SYSTEM_NOT_READY (system not yet initialized)"},
        {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (system has unsupported display driver / cuda "
              "driver combination)"},
        {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (forward compatibility was attempted "
              "on non supported HW)"},
    };
    for (const Known &k : known)
      if (k.code == result)
        return k.text;
    return "CUDA error " + std::to_string(result);
  }
  std::string out = name;
  if (cuGetErrorString && cuGetErrorString(result, &text) == CUDA_SUCCESS && text)
    out += std::string(" (") + text + ")";
  return out;
}

void CudaDriver::check(CUresult result, const std::string &what) const {
  if (result != CUDA_SUCCESS)
    throw Error(what + ": " + describe(result));
}

const CudaDriver &loadCudaDriver() {
  const Outcome &o = outcome();
  if (!o.error.empty())
    throw Error(o.error);
  return o.driver;
}

bool cudaAvailable(std::string *reason) {
  const Outcome &o = outcome();
  if (reason)
    *reason = o.error;
  return o.error.empty();
}

int cudaDeviceCount() {
  const CudaDriver &driver = loadCudaDriver();
  int count = 0;
  driver.check(driver.cuDeviceGetCount(&count), "cuDeviceGetCount");
  return count;
}

} // namespace tcc::rt::cuda
