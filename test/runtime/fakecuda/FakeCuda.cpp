//===- FakeCuda.cpp - A CUDA driver implemented on the host, for tests ----===//
//
// libtcc-fakecuda.so exports the driver functions libtccrt resolves (CudaDriver.cpp), under the
// same versioned names as libcuda.so.1, so that tests set TCC_CUDA_DRIVER to it and run the
// runtime's CUDA paths on a machine without a GPU.
//
// What it models:
//  * Devices: $TCC_FAKE_CUDA_DEVICES of them (default 1; 0 makes cuInit fail with
//    CUDA_ERROR_NO_DEVICE, as the real driver does), named "tcc fake CUDA device", compute
//    capability $TCC_FAKE_CUDA_CC (default 90, e.g. 86 = 8.6), 4 multiprocessors, the opt-in
//    shared memory per block of that capability. Every call but cuInit, cuDriverGetVersion and
//    the error strings returns CUDA_ERROR_NOT_INITIALIZED before cuInit(0); allocations,
//    streams, events and modules need a current context (a retained primary context made
//    current with cuCtxSetCurrent), else CUDA_ERROR_INVALID_CONTEXT.
//  * Device memory is host memory (256-byte aligned, filled with 0xA5 so reads of
//    uninitialised memory show), in a registry: freeing anything but a live allocation's base
//    and copies or memsets that leave an allocation return CUDA_ERROR_INVALID_VALUE (checked
//    when enqueued, and again when run: a replayed graph touching freed memory gets
//    CUDA_ERROR_ILLEGAL_ADDRESS). $TCC_FAKE_CUDA_MEMORY (bytes) is the device's total memory
//    (default 16 GiB, not reserved): cuMemAlloc beyond it returns CUDA_ERROR_OUT_OF_MEMORY.
//    cuMemFree and cuMemFreeHost first finish all queued work, as the real ones synchronise.
//    Pinned host memory (cuMemAllocHost) is page-aligned host memory in its own registry.
//    cuMemcpy2DAsync_v2 copies device to device only (other memory types: CUDA_ERROR_INVALID_VALUE).
//  * Streams run their work in enqueue order. By default work runs when enqueued (so every
//    event is complete at once). With $TCC_FAKE_CUDA_DEFERRED=1 work is queued per stream and
//    runs only when someone waits: cuStreamSynchronize (that stream), cuEventSynchronize (the
//    recording stream up to the event), cuCtxSynchronize (all streams); until then cuEventQuery
//    returns CUDA_ERROR_NOT_READY. cuStreamWaitEvent makes the waiting stream run the recording
//    stream's work up to the event first. An error from queued work is returned by the call
//    that ran it (not sticky). All streams behave as non-blocking: the legacy default stream's
//    implicit synchronisation with other streams is not modelled.
//  * Events: completion and host timestamps (cuEventElapsedTime between two timing events).
//  * cuLaunchHostFunc (not called by libtccrt): the fake cuBLASLt (FakeCublasLt.cpp) enqueues
//    its host GEMMs through it, so they run in stream order like kernels.
//  * Modules: cuModuleLoadDataEx takes a cubin (ELF with e_machine EM_CUDA; the SM version is
//    read from e_flags and must have the device's major version and a minor not above it, else
//    CUDA_ERROR_NO_BINARY_FOR_GPU) or PTX text (".version" and ".target sm_XY[a]" required, the
//    target not above the device, suffixed targets only on exactly that capability, else
//    CUDA_ERROR_INVALID_PTX with a log in the CU_JIT_ERROR_LOG_BUFFER option's buffer). No code
//    is compiled. tcc_fake_cuda_last_module_kind() says what the last successful load got:
//    "cubin sm_90" or "ptx sm_80".
//  * Kernels: a kernel exists in a module when the PTX has `.entry <name>` or the cubin has a
//    `.nv.info.<name>` section; its parameter count comes from the PTX parameter list (8-byte
//    .u64/.b64/.s64 parameters only) or the cubin's EIATTR_KPARAM_INFO records (8-byte only;
//    other sizes give CUDA_ERROR_NOT_SUPPORTED). The code that runs is the host function
//    `tcc_emu_m<key>_<name>(void **args)`, else `tcc_emu_<name>(void **args)`, of the library
//    $TCC_FAKE_CUDA_KERNELS (dlopen'ed once; <key>: fakeCudaModuleKey of the module's image, so
//    that modules of several programs may each define their own kernel of one name), run
//    by that library's `int tcc_emu_launch(void (*)(void **), void **args, unsigned grid,
//    unsigned blockX, unsigned blockY)` (non-zero: CUDA_ERROR_LAUNCH_FAILED). A kernel without
//    such a function is CUDA_ERROR_NOT_FOUND. cuLaunchKernel copies the argument values when
//    called (args[i] = the 8 bytes params[i] points to) and shrinks the grid to at most 3 blocks
//    in x and 1 in y and z (tcc's kernels cover their work with grid-stride loops, see
//    KernelLaunch in artifact.fbs); a 3-D block (z > 1) or `extra` is CUDA_ERROR_NOT_SUPPORTED;
//    more than 48 KiB of dynamic shared memory needs cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE)
//    first, as on a GPU (the attribute is the only one supported).
//  * Graphs: between cuStreamBeginCapture_v2 and cuStreamEndCapture, work enqueued on the
//    capturing stream is recorded (with its arguments), not run; cuGraphLaunch enqueues the
//    recorded work in order. Capture is per stream (fork/join across streams through events is
//    not modelled), not on the legacy stream. In global and thread-local capture mode the
//    "unsafe" calls cuMemAlloc, cuMemFree, cuMemAllocHost, cuMemFreeHost and cuCtxSynchronize
//    made from the capturing thread (global: any thread), and cuStreamSynchronize of the
//    capturing stream from any thread, fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
//    invalidate the capture, whose cuStreamEndCapture then returns
//    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. As cuda.h documents: waiting in a capture on an
//    event recorded outside it needs CU_EVENT_WAIT_EXTERNAL (else
//    CUDA_ERROR_STREAM_CAPTURE_ISOLATION, invalidating; with it, every replay waits for the
//    event's latest record), an event last recorded in a capture cannot be queried,
//    synchronised or timed (CUDA_ERROR_CAPTURED_EVENT), and work on the legacy stream while a
//    blocking stream (created without CU_STREAM_NON_BLOCKING) captures is
//    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, invalidating. Waiting outside a capture on an event
//    recorded in one (joining streams into a capture) is CUDA_ERROR_NOT_SUPPORTED.
// Not modelled: concurrency between streams (one lock serialises everything), device-side
// faults inside kernels, unified addressing (a device pointer is a host pointer; the fake cannot
// tell a host pointer given where a device one is expected, except for copies' device side),
// multiple contexts per device, and everything tcc does not call.
//
// tcc_fake_cuda_counter(name) exposes counts for tests: "module_loads", "kernel_launches" (run,
// not enqueued), "device_allocs", "device_frees", "live_device_allocations",
// "device_bytes_in_use", "queued_ops" (enqueued, not yet run); -1 for an unknown name.
//
//===----------------------------------------------------------------------===//
#include "CudaDriver.h"
#include "FakeCudaModuleKey.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#define FAKE_API extern "C" __attribute__((visibility("default")))

using namespace tcc::rt::cuda;

namespace {

// Result codes beyond the ones CudaDriver.h names (cuda.h's values).
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
constexpr CUresult CUDA_ERROR_ILLEGAL_STATE = 401;
constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906;
constexpr CUresult CUDA_ERROR_CAPTURED_EVENT = 907;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908;
constexpr unsigned CU_EVENT_WAIT_EXTERNAL = 1;

struct ErrorText {
  CUresult code;
  const char *name, *text;
};
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
     "the operation cannot be performed in the present state"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
     "dependency created on uncaptured work in another stream"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT",
     "operation not permitted on an event last recorded in a capturing stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
};

const ErrorText *errorText(CUresult code) {
  for (const ErrorText &e : kErrors)
    if (e.code == code)
      return &e;
  return nullptr;
}

using Op = std::function<CUresult()>;
using Clock = std::chrono::steady_clock;

struct Config {
  int devices = 1;
  int cc = 90;
  size_t memory = size_t(16) << 30;
  bool deferred = false;
  std::string kernels;
};

struct Context {
  int device = 0;
  int retained = 0;
};

struct Graph {
  std::vector<Op> ops;
};
struct GraphExec {
  std::vector<Op> ops;
};

struct Stream {
  bool blocking = false; // created without CU_STREAM_NON_BLOCKING
  std::deque<Op> queue;
  Graph *capture = nullptr; // non-null while capturing
  bool invalidated = false;
  int captureMode = 0;
  std::thread::id captureThread;
};

struct Event {
  bool timing = true;
  Stream *stream = nullptr; // where it was last recorded (outside capture)
  uint64_t recorded = 0;    // records enqueued
  uint64_t completed = 0;   // records run
  Clock::time_point time;
  Graph *capturedIn = nullptr; // non-null: last recorded in this capture
};

using EmuKernel = void (*)(void **);
using EmuLaunch = int (*)(EmuKernel, void **, unsigned, unsigned, unsigned);

struct Module;
struct Function {
  Module *module = nullptr;
  std::string name;
  EmuKernel kernel = nullptr;
  int params = 0;
  bool paramsSupported = true;
  int maxDynamicShared = 48 * 1024;
};

struct Module {
  std::string key; // fakeCudaModuleKey of the image
  bool ptx = false;
  std::string text;           // PTX
  std::vector<uint8_t> image; // cubin
  std::map<std::string, std::unique_ptr<Function>> functions;
};

struct State {
  std::recursive_mutex mutex;
  bool initialized = false;
  Config config;
  std::vector<Context> contexts;
  Stream legacy;
  std::set<Stream *> streams;
  std::set<Event *> events;
  std::set<Module *> modules;
  std::set<Function *> functions;
  std::set<Graph *> graphs;
  std::set<GraphExec *> execs;
  std::map<uintptr_t, size_t> device; // live device allocations: base -> bytes
  size_t deviceBytes = 0;
  std::map<uintptr_t, size_t> host; // live pinned allocations
  bool kernelsTried = false;
  void *kernelsHandle = nullptr;
  EmuLaunch launch = nullptr;
  std::string lastModuleKind = "none";
  std::map<std::string, long long> counters;
};

State &state() {
  static State *s = new State; // never destroyed: callers may outlive static destruction
  return *s;
}

thread_local Context *current = nullptr;

using Lock = std::lock_guard<std::recursive_mutex>;

// ---- helpers ------------------------------------------------------------------------------------

bool parseInt(const char *text, long long lo, long long hi, long long &out) {
  if (!text || !*text)
    return false;
  char *end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (*end || v < lo || v > hi)
    return false;
  out = v;
  return true;
}

bool readConfig(Config &c) {
  auto read = [](const char *name, long long lo, long long hi, long long &out) {
    const char *v = std::getenv(name);
    if (!v)
      return true;
    if (parseInt(v, lo, hi, out))
      return true;
    std::fprintf(stderr, "tcc fake CUDA: %s=%s is not an integer in [%lld, %lld]\n", name, v, lo,
                 hi);
    return false;
  };
  long long devices = c.devices, cc = c.cc, memory = (long long)c.memory, deferred = 0;
  if (!read("TCC_FAKE_CUDA_DEVICES", 0, 16, devices) || !read("TCC_FAKE_CUDA_CC", 30, 199, cc) ||
      !read("TCC_FAKE_CUDA_MEMORY", 1, (long long)1 << 50, memory) ||
      !read("TCC_FAKE_CUDA_DEFERRED", 0, 1, deferred))
    return false;
  c.devices = int(devices);
  c.cc = int(cc);
  c.memory = size_t(memory);
  c.deferred = deferred != 0;
  if (const char *k = std::getenv("TCC_FAKE_CUDA_KERNELS"))
    c.kernels = k;
  return true;
}

int maxSharedOptin(int cc) {
  switch (cc) {
  case 70:
  case 72:
    return 96 * 1024;
  case 75:
    return 64 * 1024;
  case 80:
  case 87:
    return 163 * 1024;
  case 86:
  case 89:
    return 99 * 1024;
  case 90:
  case 100:
  case 103:
    return 227 * 1024;
  default:
    return 99 * 1024;
  }
}

CUresult needContext() {
  State &s = state();
  if (!s.initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!current || current->retained <= 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

Stream *streamOf(CUstream handle) {
  State &s = state();
  if (!handle)
    return &s.legacy;
  Stream *stream = reinterpret_cast<Stream *>(handle);
  return s.streams.count(stream) ? stream : nullptr;
}

std::vector<Stream *> allStreams() {
  State &s = state();
  std::vector<Stream *> out{&s.legacy};
  out.insert(out.end(), s.streams.begin(), s.streams.end());
  return out;
}

/// An API call that stream capture forbids (see the file comment): invalidates the captures it
/// would break and says so.
CUresult unsafeDuringCapture(Stream *only = nullptr) {
  CUresult result = CUDA_SUCCESS;
  for (Stream *stream : allStreams()) {
    if (!stream->capture || (only && stream != only))
      continue;
    bool applies =
        stream->captureMode == 0 || (stream->captureMode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                                     stream->captureThread == std::this_thread::get_id());
    if (applies) {
      stream->invalidated = true;
      result = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  return result;
}

/// Runs `stream`'s queued work in order until `done()` holds or the queue is empty; returns
/// the first error.
CUresult drain(
    Stream *stream, const std::function<bool()> &done = [] { return false; }) {
  CUresult first = CUDA_SUCCESS;
  while (!done() && !stream->queue.empty()) {
    Op op = std::move(stream->queue.front());
    stream->queue.pop_front();
    --state().counters["queued_ops"];
    CUresult r = op();
    if (first == CUDA_SUCCESS)
      first = r;
  }
  return first;
}

CUresult drainAll() {
  CUresult first = CUDA_SUCCESS;
  for (bool again = true; again;) {
    again = false;
    for (Stream *stream : allStreams()) {
      if (stream->queue.empty())
        continue;
      again = true;
      CUresult r = drain(stream);
      if (first == CUDA_SUCCESS)
        first = r;
    }
  }
  return first;
}

/// Work on (or a wait for) the legacy stream while a blocking stream captures would make the
/// capture depend on it: the capture is invalidated.
CUresult legacyDuringBlockingCapture(Stream *stream) {
  State &s = state();
  if (stream != &s.legacy)
    return CUDA_SUCCESS;
  CUresult result = CUDA_SUCCESS;
  for (Stream *other : s.streams)
    if (other->capture && other->blocking) {
      other->invalidated = true;
      result = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
  return result;
}

CUresult enqueue(Stream *stream, Op op) {
  if (CUresult r = legacyDuringBlockingCapture(stream))
    return r;
  if (stream->capture) {
    if (stream->invalidated)
      return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    stream->capture->ops.push_back(std::move(op));
    return CUDA_SUCCESS;
  }
  if (state().config.deferred) {
    stream->queue.push_back(std::move(op));
    ++state().counters["queued_ops"];
    return CUDA_SUCCESS;
  }
  return op();
}

/// Whether [ptr, ptr + bytes) lies inside one live device allocation.
bool deviceRange(CUdeviceptr ptr, size_t bytes) {
  State &s = state();
  auto it = s.device.upper_bound(static_cast<uintptr_t>(ptr));
  if (it == s.device.begin())
    return false;
  --it;
  uintptr_t p = static_cast<uintptr_t>(ptr);
  return p >= it->first && bytes <= it->second && p - it->first <= it->second - bytes;
}

/// The rules every async memory operation follows: a valid stream; nothing to do for 0 bytes;
/// host pointers non-null and device ranges inside live allocations when enqueued (else
/// CUDA_ERROR_INVALID_VALUE) and still inside them when the work runs (else
/// CUDA_ERROR_ILLEGAL_ADDRESS: freed in between); then `copy()` runs in stream order.
template <class Ranges, class Copy>
CUresult enqueueMemoryOp(CUstream handle, size_t bytes, bool hostPointersValid, Ranges ranges,
                         Copy copy) {
  Stream *stream = streamOf(handle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (bytes == 0)
    return CUDA_SUCCESS;
  if (!hostPointersValid || !ranges())
    return CUDA_ERROR_INVALID_VALUE;
  return enqueue(stream, [=] {
    if (!ranges())
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    copy();
    return CUDA_SUCCESS;
  });
}

// ---- module parsing -----------------------------------------------------------------------------

/// The target of a PTX text ("sm_80", "sm_90a"), empty if there is no .target directive.
std::string ptxTarget(const std::string &text) {
  size_t pos = 0;
  while ((pos = text.find(".target", pos)) != std::string::npos) {
    bool lineStart =
        pos == 0 || text[pos - 1] == '\n' || text[pos - 1] == ' ' || text[pos - 1] == '\t';
    pos += 7;
    if (!lineStart || pos >= text.size() || (text[pos] != ' ' && text[pos] != '\t'))
      continue;
    size_t begin = text.find_first_not_of(" \t", pos);
    size_t end = text.find_first_of(" \t,\r\n", begin);
    return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  }
  return "";
}

/// "sm_90a" -> 90 and suffix "a"; false when malformed.
bool splitSm(const std::string &target, int &number, std::string &suffix) {
  if (target.compare(0, 3, "sm_") != 0)
    return false;
  size_t i = 3;
  while (i < target.size() && std::isdigit(static_cast<unsigned char>(target[i])))
    ++i;
  if (i == 3)
    return false;
  number = std::atoi(target.c_str() + 3);
  suffix = target.substr(i);
  return true;
}

/// Finds `.entry <name>` in PTX; returns false if absent, else its parameter count and
/// whether all parameters are 8-byte scalars.
bool ptxEntry(const std::string &text, const std::string &name, int &params, bool &supported) {
  size_t pos = 0;
  while ((pos = text.find(".entry", pos)) != std::string::npos) {
    pos += 6;
    size_t begin = text.find_first_not_of(" \t\r\n", pos);
    if (begin == std::string::npos || text.compare(begin, name.size(), name) != 0)
      continue;
    size_t after = begin + name.size();
    if (after < text.size() && (std::isalnum(static_cast<unsigned char>(text[after])) ||
                                text[after] == '_' || text[after] == '$'))
      continue;
    params = 0;
    supported = true;
    size_t open = text.find_first_not_of(" \t\r\n", after);
    if (open == std::string::npos || text[open] != '(')
      return true;
    size_t close = text.find(')', open);
    std::string list =
        text.substr(open + 1, close == std::string::npos ? std::string::npos : close - open - 1);
    size_t p = 0;
    while ((p = list.find(".param", p)) != std::string::npos) {
      p += 6;
      size_t comma = list.find(',', p);
      std::string decl = list.substr(p, comma == std::string::npos ? std::string::npos : comma - p);
      ++params;
      if (decl.find(".u64") == std::string::npos && decl.find(".b64") == std::string::npos &&
          decl.find(".s64") == std::string::npos)
        supported = false;
    }
    return true;
  }
  return false;
}

template <class T> T readLE(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// The size of a 64-bit ELF image from its header (the section and program header tables are
/// its last parts); 0 if the header is not a 64-bit little-endian ELF.
size_t elfSize(const uint8_t *image) {
  if (image[4] != 2 || image[5] != 1) // ELFCLASS64, ELFDATA2LSB
    return 0;
  uint64_t phoff = readLE<uint64_t>(image + 0x20), shoff = readLE<uint64_t>(image + 0x28);
  uint16_t phentsize = readLE<uint16_t>(image + 0x36), phnum = readLE<uint16_t>(image + 0x38);
  uint16_t shentsize = readLE<uint16_t>(image + 0x3a), shnum = readLE<uint16_t>(image + 0x3c);
  uint64_t size = 64;
  size = std::max<uint64_t>(size, phoff + uint64_t(phentsize) * phnum);
  size = std::max<uint64_t>(size, shoff + uint64_t(shentsize) * shnum);
  return size > (uint64_t(1) << 30) ? 0 : size_t(size);
}

/// Finds section `.nv.info.<name>` in a cubin; returns false if absent, else the kernel's
/// parameter count (EIATTR_KPARAM_INFO records) and whether all are 8 bytes.
bool cubinEntry(const std::vector<uint8_t> &elf, const std::string &name, int &params,
                bool &supported) {
  const uint8_t *d = elf.data();
  uint64_t shoff = readLE<uint64_t>(d + 0x28);
  uint16_t shentsize = readLE<uint16_t>(d + 0x3a), shnum = readLE<uint16_t>(d + 0x3c);
  uint16_t shstrndx = readLE<uint16_t>(d + 0x3e);
  if (shentsize < 64 || shstrndx >= shnum)
    return false;
  auto section = [&](unsigned i, uint64_t &offset, uint64_t &size) {
    const uint8_t *h = d + shoff + uint64_t(i) * shentsize;
    offset = readLE<uint64_t>(h + 0x18);
    size = readLE<uint64_t>(h + 0x20);
    return offset <= elf.size() && size <= elf.size() - offset;
  };
  uint64_t strOff, strSize;
  if (!section(shstrndx, strOff, strSize))
    return false;
  std::string wanted = ".nv.info." + name;
  for (unsigned i = 0; i < shnum; ++i) {
    uint32_t nameOff = readLE<uint32_t>(d + shoff + uint64_t(i) * shentsize);
    if (nameOff >= strSize)
      continue;
    const char *secName = reinterpret_cast<const char *>(d + strOff + nameOff);
    if (strnlen(secName, strSize - nameOff) != wanted.size() || wanted != secName)
      continue;
    uint64_t off, size;
    if (!section(i, off, size))
      return false;
    params = 0;
    supported = true;
    // Records: format byte, attribute byte, then per format: 0x01 nothing, 0x02 one byte
    // (+1 pad), 0x03 two bytes, 0x04 a 16-bit length and that many bytes.
    for (uint64_t p = off; p + 2 <= off + size;) {
      uint8_t format = d[p], attribute = d[p + 1];
      if (format == 0x04) {
        if (p + 4 > off + size)
          break;
        uint16_t len = readLE<uint16_t>(d + p + 2);
        if (attribute == 0x17 && len >= 12 && p + 4 + 12 <= off + size) { // EIATTR_KPARAM_INFO
          ++params;
          uint32_t flags = readLE<uint32_t>(d + p + 4 + 8);
          if ((flags >> 18) != 8)
            supported = false;
        }
        p += 4 + len;
      } else if (format == 0x01) {
        p += 2;
      } else if (format == 0x02 || format == 0x03) {
        p += 4;
      } else {
        break;
      }
    }
    return true;
  }
  return false;
}

void writeLog(char *log, unsigned *capacity, const std::string &text) {
  if (!log || !capacity || *capacity == 0)
    return;
  size_t n = std::min<size_t>(text.size(), *capacity - 1);
  std::memcpy(log, text.data(), n);
  log[n] = '\0';
  *capacity = unsigned(n + 1);
}

void loadKernelLibrary() {
  State &s = state();
  if (s.kernelsTried)
    return;
  s.kernelsTried = true;
  if (s.config.kernels.empty())
    return;
  s.kernelsHandle = dlopen(s.config.kernels.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!s.kernelsHandle) {
    const char *why = dlerror();
    std::fprintf(stderr, "tcc fake CUDA: cannot load $TCC_FAKE_CUDA_KERNELS (%s): %s\n",
                 s.config.kernels.c_str(), why ? why : "unknown error");
    return;
  }
  s.launch = reinterpret_cast<EmuLaunch>(dlsym(s.kernelsHandle, "tcc_emu_launch"));
  if (!s.launch)
    std::fprintf(stderr, "tcc fake CUDA: %s has no tcc_emu_launch\n", s.config.kernels.c_str());
}

} // namespace

#define LOCKED                                                                                     \
  State &S = state();                                                                              \
  Lock lock(S.mutex)
#define NEED_INIT                                                                                  \
  if (!S.initialized)                                                                              \
  return CUDA_ERROR_NOT_INITIALIZED
#define NEED_CONTEXT                                                                               \
  if (CUresult r_ = needContext())                                                                 \
  return r_

// ---- initialisation, errors, devices, contexts --------------------------------------------------

FAKE_API CUresult cuInit(unsigned flags) {
  LOCKED;
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (S.initialized)
    return CUDA_SUCCESS;
  Config config;
  if (!readConfig(config))
    return CUDA_ERROR_INVALID_VALUE;
  if (config.devices == 0)
    return CUDA_ERROR_NO_DEVICE;
  S.config = config;
  S.contexts.resize(config.devices);
  for (int i = 0; i < config.devices; ++i)
    S.contexts[i].device = i;
  S.initialized = true;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDriverGetVersion(int *version) {
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGetErrorName(CUresult error, const char **name) {
  if (!name)
    return CUDA_ERROR_INVALID_VALUE;
  const ErrorText *e = errorText(error);
  *name = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuGetErrorString(CUresult error, const char **text) {
  if (!text)
    return CUDA_ERROR_INVALID_VALUE;
  const ErrorText *e = errorText(error);
  *text = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuDeviceGetCount(int *count) {
  LOCKED;
  NEED_INIT;
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  *count = S.config.devices;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  LOCKED;
  NEED_INIT;
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= S.config.devices)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
  LOCKED;
  NEED_INIT;
  if (!name || length <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= S.config.devices)
    return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, size_t(length), "tcc fake CUDA device");
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
  LOCKED;
  NEED_INIT;
  if (!value)
    return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= S.config.devices)
    return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = 4;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *value = S.config.cc / 10;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *value = S.config.cc % 10;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *value = maxSharedOptin(S.config.cc);
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
  LOCKED;
  NEED_INIT;
  if (!bytes)
    return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= S.config.devices)
    return CUDA_ERROR_INVALID_DEVICE;
  *bytes = S.config.memory;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice device) {
  LOCKED;
  NEED_INIT;
  if (!ctx)
    return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= S.config.devices)
    return CUDA_ERROR_INVALID_DEVICE;
  ++S.contexts[device].retained;
  *ctx = reinterpret_cast<CUcontext>(&S.contexts[device]);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  LOCKED;
  NEED_INIT;
  if (device < 0 || device >= S.config.devices)
    return CUDA_ERROR_INVALID_DEVICE;
  if (S.contexts[device].retained <= 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  --S.contexts[device].retained;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  LOCKED;
  NEED_INIT;
  Context *c = reinterpret_cast<Context *>(ctx);
  if (c && (S.contexts.empty() || c < &S.contexts.front() || c > &S.contexts.back()))
    return CUDA_ERROR_INVALID_CONTEXT;
  current = c;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxSynchronize() {
  LOCKED;
  NEED_CONTEXT;
  if (CUresult r = unsafeDuringCapture())
    return r;
  return drainAll();
}

// ---- memory -------------------------------------------------------------------------------------

FAKE_API CUresult cuMemGetInfo_v2(size_t *freeBytes, size_t *totalBytes) {
  LOCKED;
  NEED_CONTEXT;
  if (!freeBytes || !totalBytes)
    return CUDA_ERROR_INVALID_VALUE;
  *totalBytes = S.config.memory;
  *freeBytes = S.config.memory - S.deviceBytes;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) {
  LOCKED;
  NEED_CONTEXT;
  if (CUresult r = unsafeDuringCapture())
    return r;
  if (!ptr || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  size_t rounded = (bytes + 255) / 256 * 256;
  if (rounded < bytes || rounded > S.config.memory - S.deviceBytes)
    return CUDA_ERROR_OUT_OF_MEMORY;
  void *p = std::aligned_alloc(256, rounded);
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0xA5, rounded);
  S.device[reinterpret_cast<uintptr_t>(p)] = bytes;
  S.deviceBytes += rounded;
  ++S.counters["device_allocs"];
  *ptr = reinterpret_cast<uintptr_t>(p);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr ptr) {
  LOCKED;
  NEED_CONTEXT;
  if (CUresult r = unsafeDuringCapture())
    return r;
  auto it = S.device.find(static_cast<uintptr_t>(ptr));
  if (it == S.device.end())
    return CUDA_ERROR_INVALID_VALUE;
  CUresult pending = drainAll();
  S.deviceBytes -= (it->second + 255) / 256 * 256;
  std::free(reinterpret_cast<void *>(it->first));
  S.device.erase(it);
  ++S.counters["device_frees"];
  return pending;
}

FAKE_API CUresult cuMemAllocHost_v2(void **ptr, size_t bytes) {
  LOCKED;
  NEED_CONTEXT;
  if (CUresult r = unsafeDuringCapture())
    return r;
  if (!ptr || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  size_t rounded = (bytes + 4095) / 4096 * 4096;
  void *p = rounded < bytes ? nullptr : std::aligned_alloc(4096, rounded);
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  S.host[reinterpret_cast<uintptr_t>(p)] = bytes;
  *ptr = p;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemFreeHost(void *ptr) {
  LOCKED;
  NEED_CONTEXT;
  if (CUresult r = unsafeDuringCapture())
    return r;
  auto it = S.host.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == S.host.end())
    return CUDA_ERROR_INVALID_VALUE;
  CUresult pending = drainAll();
  std::free(ptr);
  S.host.erase(it);
  return pending;
}

FAKE_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes,
                                       CUstream handle) {
  LOCKED;
  NEED_CONTEXT;
  return enqueueMemoryOp(
      handle, bytes, src != nullptr, [=] { return deviceRange(dst, bytes); },
      [=] { std::memcpy(reinterpret_cast<void *>(static_cast<uintptr_t>(dst)), src, bytes); });
}

FAKE_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream handle) {
  LOCKED;
  NEED_CONTEXT;
  return enqueueMemoryOp(
      handle, bytes, dst != nullptr, [=] { return deviceRange(src, bytes); },
      [=] { std::memcpy(dst, reinterpret_cast<const void *>(static_cast<uintptr_t>(src)), bytes); });
}

FAKE_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                       CUstream handle) {
  LOCKED;
  NEED_CONTEXT;
  return enqueueMemoryOp(
      handle, bytes, true, [=] { return deviceRange(src, bytes) && deviceRange(dst, bytes); },
      [=] {
        std::memmove(reinterpret_cast<void *>(static_cast<uintptr_t>(dst)),
                     reinterpret_cast<const void *>(static_cast<uintptr_t>(src)), bytes);
      });
}

/// Device-to-device pitched copies only (what libtccrt's collectives use to pack blocks).
FAKE_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *c, CUstream handle) {
  LOCKED;
  NEED_CONTEXT;
  if (!c || c->srcMemoryType != CU_MEMORYTYPE_DEVICE || c->dstMemoryType != CU_MEMORYTYPE_DEVICE ||
      c->WidthInBytes > c->srcPitch || c->WidthInBytes > c->dstPitch)
    return CUDA_ERROR_INVALID_VALUE;
  if (c->Height == 0 || c->WidthInBytes == 0)
    return CUDA_SUCCESS;
  CUDA_MEMCPY2D k = *c;
  CUdeviceptr src = k.srcDevice + k.srcY * k.srcPitch + k.srcXInBytes;
  CUdeviceptr dst = k.dstDevice + k.dstY * k.dstPitch + k.dstXInBytes;
  size_t srcSpan = (k.Height - 1) * k.srcPitch + k.WidthInBytes;
  size_t dstSpan = (k.Height - 1) * k.dstPitch + k.WidthInBytes;
  return enqueueMemoryOp(
      handle, srcSpan, true, [=] { return deviceRange(src, srcSpan) && deviceRange(dst, dstSpan); },
      [=] {
        for (size_t row = 0; row < k.Height; ++row)
          std::memmove(reinterpret_cast<void *>(static_cast<uintptr_t>(dst + row * k.dstPitch)),
                       reinterpret_cast<const void *>(static_cast<uintptr_t>(src + row * k.srcPitch)),
                       k.WidthInBytes);
      });
}

FAKE_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes,
                                  CUstream handle) {
  LOCKED;
  NEED_CONTEXT;
  return enqueueMemoryOp(
      handle, bytes, true, [=] { return deviceRange(dst, bytes); },
      [=] { std::memset(reinterpret_cast<void *>(static_cast<uintptr_t>(dst)), value, bytes); });
}

// ---- modules and kernels ------------------------------------------------------------------------

FAKE_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned numOptions,
                                     CUjit_option *options, void **optionValues) {
  LOCKED;
  NEED_CONTEXT;
  if (!module || !image || (numOptions && (!options || !optionValues)))
    return CUDA_ERROR_INVALID_VALUE;
  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: the capacity is passed in the value slot itself, and
  // the driver writes the bytes it used (with the NUL) back there.
  char *log = nullptr;
  int sizeSlot = -1;
  for (unsigned i = 0; i < numOptions; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
      log = static_cast<char *>(optionValues[i]);
    else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      sizeSlot = int(i);
  }
  auto setLog = [&](const std::string &text) {
    if (!log || sizeSlot < 0)
      return;
    unsigned capacity = unsigned(reinterpret_cast<uintptr_t>(optionValues[sizeSlot]));
    writeLog(log, &capacity, text);
    optionValues[sizeSlot] = reinterpret_cast<void *>(uintptr_t(capacity));
  };
  auto fail = [&](CUresult result, const std::string &text) {
    setLog(text);
    return result;
  };
  int cc = S.config.cc;
  auto m = std::make_unique<Module>();
  const uint8_t *bytes = static_cast<const uint8_t *>(image);
  std::string kind;
  if (std::memcmp(bytes,
                  "\x7f"
                  "ELF",
                  4) == 0) {
    size_t size = elfSize(bytes);
    if (size == 0)
      return fail(CUDA_ERROR_INVALID_IMAGE, "fake CUDA: not a 64-bit little-endian ELF image");
    uint16_t machine = readLE<uint16_t>(bytes + 0x12);
    if (machine != 190) // EM_CUDA
      return fail(CUDA_ERROR_INVALID_IMAGE,
                  "fake CUDA: ELF machine " + std::to_string(machine) + " is not EM_CUDA (190)");
    uint32_t flags = readLE<uint32_t>(bytes + 0x30);
    int sm = bytes[8] >= 8 ? int((flags >> 8) & 0xff) : int(flags & 0xff); // EI_ABIVERSION
    if (sm / 10 != cc / 10 || sm % 10 > cc % 10)
      return fail(CUDA_ERROR_NO_BINARY_FOR_GPU, "fake CUDA: cubin for sm_" + std::to_string(sm) +
                                                    " does not run on sm_" + std::to_string(cc));
    m->image.assign(bytes, bytes + size);
    kind = "cubin sm_" + std::to_string(sm);
  } else {
    m->ptx = true;
    m->text = static_cast<const char *>(image);
    if (m->text.find(".version") == std::string::npos)
      return fail(CUDA_ERROR_INVALID_PTX, "ptxas fatal   : fake CUDA: no .version directive");
    std::string target = ptxTarget(m->text);
    int number = 0;
    std::string suffix;
    if (!splitSm(target, number, suffix))
      return fail(CUDA_ERROR_INVALID_PTX,
                  "ptxas fatal   : fake CUDA: no usable .target directive (got '" + target + "')");
    if (number > cc || (!suffix.empty() && number != cc))
      return fail(CUDA_ERROR_INVALID_PTX, "ptxas fatal   : fake CUDA: .target " + target +
                                              " cannot be compiled for sm_" + std::to_string(cc));
    kind = "ptx " + target;
  }
  m->key = m->ptx ? fakeCudaModuleKey(m->text.data(), m->text.size())
                  : fakeCudaModuleKey(m->image.data(), m->image.size());
  setLog("");
  S.lastModuleKind = kind;
  ++S.counters["module_loads"];
  Module *raw = m.release();
  S.modules.insert(raw);
  *module = reinterpret_cast<CUmodule>(raw);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuModuleUnload(CUmodule handle) {
  LOCKED;
  NEED_INIT;
  Module *module = reinterpret_cast<Module *>(handle);
  if (!S.modules.erase(module))
    return CUDA_ERROR_INVALID_HANDLE;
  for (auto &entry : module->functions)
    S.functions.erase(entry.second.get());
  delete module;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuModuleGetFunction(CUfunction *function, CUmodule handle, const char *name) {
  LOCKED;
  NEED_CONTEXT;
  Module *module = reinterpret_cast<Module *>(handle);
  if (!function || !name)
    return CUDA_ERROR_INVALID_VALUE;
  if (!S.modules.count(module))
    return CUDA_ERROR_INVALID_HANDLE;
  auto it = module->functions.find(name);
  if (it != module->functions.end()) {
    *function = reinterpret_cast<CUfunction>(it->second.get());
    return CUDA_SUCCESS;
  }
  int params = 0;
  bool supported = true;
  bool present = module->ptx ? ptxEntry(module->text, name, params, supported)
                             : cubinEntry(module->image, name, params, supported);
  if (!present)
    return CUDA_ERROR_NOT_FOUND;
  if (!supported)
    return CUDA_ERROR_NOT_SUPPORTED;
  loadKernelLibrary();
  if (!S.kernelsHandle || !S.launch)
    return CUDA_ERROR_NOT_FOUND;
  auto kernel = reinterpret_cast<EmuKernel>(
      dlsym(S.kernelsHandle, ("tcc_emu_m" + module->key + "_" + name).c_str()));
  if (!kernel)
    kernel = reinterpret_cast<EmuKernel>(
        dlsym(S.kernelsHandle, (std::string("tcc_emu_") + name).c_str()));
  if (!kernel)
    return CUDA_ERROR_NOT_FOUND;
  auto f = std::make_unique<Function>();
  f->module = module;
  f->name = name;
  f->kernel = kernel;
  f->params = params;
  Function *raw = f.get();
  module->functions.emplace(name, std::move(f));
  S.functions.insert(raw);
  *function = reinterpret_cast<CUfunction>(raw);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuFuncSetAttribute(CUfunction handle, int attribute, int value) {
  LOCKED;
  NEED_INIT;
  Function *f = reinterpret_cast<Function *>(handle);
  if (!S.functions.count(f))
    return CUDA_ERROR_INVALID_HANDLE;
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (value < 0 || value > maxSharedOptin(S.config.cc))
    return CUDA_ERROR_INVALID_VALUE;
  f->maxDynamicShared = value;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuLaunchKernel(CUfunction handle, unsigned gridX, unsigned gridY, unsigned gridZ,
                                 unsigned blockX, unsigned blockY, unsigned blockZ,
                                 unsigned sharedBytes, CUstream stream_, void **params,
                                 void **extra) {
  LOCKED;
  NEED_CONTEXT;
  Function *f = reinterpret_cast<Function *>(handle);
  if (!S.functions.count(f))
    return CUDA_ERROR_INVALID_HANDLE;
  Stream *stream = streamOf(stream_);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (extra || blockZ > 1)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (!gridX || !gridY || !gridZ || !blockX || !blockY || !blockZ ||
      uint64_t(blockX) * blockY * blockZ > 1024 || (f->params > 0 && !params))
    return CUDA_ERROR_INVALID_VALUE;
  if (sharedBytes > unsigned(std::max(f->maxDynamicShared, 0)))
    return CUDA_ERROR_INVALID_VALUE;
  std::vector<void *> args(size_t(f->params));
  for (int i = 0; i < f->params; ++i) {
    if (!params[i])
      return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(&args[size_t(i)], params[i], sizeof(void *));
  }
  EmuKernel kernel = f->kernel;
  EmuLaunch launch = S.launch;
  unsigned grid = std::min(gridX, 3u);
  return enqueue(stream, [=]() mutable {
    ++state().counters["kernel_launches"];
    return launch(kernel, args.data(), grid, blockX, blockY) == 0 ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_LAUNCH_FAILED;
  });
}

// ---- streams and events -------------------------------------------------------------------------

FAKE_API CUresult cuStreamCreate(CUstream *handle, unsigned flags) {
  LOCKED;
  NEED_CONTEXT;
  if (!handle || (flags & ~CU_STREAM_NON_BLOCKING))
    return CUDA_ERROR_INVALID_VALUE;
  Stream *stream = new Stream;
  stream->blocking = !(flags & CU_STREAM_NON_BLOCKING);
  S.streams.insert(stream);
  *handle = reinterpret_cast<CUstream>(stream);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamDestroy_v2(CUstream handle) {
  LOCKED;
  NEED_INIT;
  Stream *stream = reinterpret_cast<Stream *>(handle);
  if (!S.streams.count(stream))
    return CUDA_ERROR_INVALID_HANDLE;
  // Queued work still runs (the real driver releases the stream once it is done).
  drain(stream);
  if (stream->capture)
    delete stream->capture;
  for (Event *event : S.events)
    if (event->stream == stream)
      event->stream = nullptr;
  S.streams.erase(stream);
  delete stream;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamSynchronize(CUstream handle) {
  LOCKED;
  NEED_CONTEXT;
  Stream *stream = streamOf(handle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (stream->capture) { // waiting for work that is being recorded: breaks the capture
    stream->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (CUresult r = legacyDuringBlockingCapture(stream))
    return r;
  return drain(stream);
}

FAKE_API CUresult cuEventCreate(CUevent *handle, unsigned flags) {
  LOCKED;
  NEED_CONTEXT;
  if (!handle || (flags & ~3u))
    return CUDA_ERROR_INVALID_VALUE;
  Event *event = new Event;
  event->timing = !(flags & CU_EVENT_DISABLE_TIMING);
  S.events.insert(event);
  *handle = reinterpret_cast<CUevent>(event);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuEventDestroy_v2(CUevent handle) {
  LOCKED;
  NEED_INIT;
  Event *event = reinterpret_cast<Event *>(handle);
  if (!S.events.erase(event))
    return CUDA_ERROR_INVALID_HANDLE;
  delete event; // queued records check the registry before touching it
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuEventRecord(CUevent handle, CUstream stream_) {
  LOCKED;
  NEED_CONTEXT;
  Event *event = reinterpret_cast<Event *>(handle);
  if (!S.events.count(event))
    return CUDA_ERROR_INVALID_HANDLE;
  Stream *stream = streamOf(stream_);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (stream->capture) { // a node of the graph: it stamps the event when replayed
    if (stream->invalidated)
      return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    event->capturedIn = stream->capture;
    return enqueue(stream, [event] {
      if (state().events.count(event))
        event->time = Clock::now();
      return CUDA_SUCCESS;
    });
  }
  if (CUresult r = legacyDuringBlockingCapture(stream))
    return r;
  event->capturedIn = nullptr;
  uint64_t generation = ++event->recorded;
  event->stream = stream;
  return enqueue(stream, [event, generation] {
    if (state().events.count(event)) {
      event->completed = std::max(event->completed, generation);
      event->time = Clock::now();
    }
    return CUDA_SUCCESS;
  });
}

FAKE_API CUresult cuEventQuery(CUevent handle) {
  LOCKED;
  NEED_INIT;
  Event *event = reinterpret_cast<Event *>(handle);
  if (!S.events.count(event))
    return CUDA_ERROR_INVALID_HANDLE;
  if (event->capturedIn)
    return CUDA_ERROR_CAPTURED_EVENT;
  return event->completed >= event->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

FAKE_API CUresult cuEventSynchronize(CUevent handle) {
  LOCKED;
  NEED_INIT;
  Event *event = reinterpret_cast<Event *>(handle);
  if (!S.events.count(event))
    return CUDA_ERROR_INVALID_HANDLE;
  if (event->capturedIn)
    return CUDA_ERROR_CAPTURED_EVENT;
  if (event->completed >= event->recorded || !event->stream)
    return CUDA_SUCCESS;
  uint64_t generation = event->recorded;
  return drain(event->stream, [event, generation] { return event->completed >= generation; });
}

FAKE_API CUresult cuEventElapsedTime_v2(float *ms, CUevent startHandle, CUevent endHandle) {
  LOCKED;
  NEED_INIT;
  Event *start = reinterpret_cast<Event *>(startHandle),
        *end = reinterpret_cast<Event *>(endHandle);
  if (!ms)
    return CUDA_ERROR_INVALID_VALUE;
  if (!S.events.count(start) || !S.events.count(end) || !start->timing || !end->timing ||
      start->recorded == 0 || end->recorded == 0)
    return CUDA_ERROR_INVALID_HANDLE;
  if (start->capturedIn || end->capturedIn)
    return CUDA_ERROR_CAPTURED_EVENT;
  if (start->completed < start->recorded || end->completed < end->recorded)
    return CUDA_ERROR_NOT_READY;
  *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamWaitEvent(CUstream stream_, CUevent handle, unsigned flags) {
  LOCKED;
  NEED_CONTEXT;
  Stream *stream = streamOf(stream_);
  Event *event = reinterpret_cast<Event *>(handle);
  if (!stream || !S.events.count(event))
    return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~CU_EVENT_WAIT_EXTERNAL)
    return CUDA_ERROR_INVALID_VALUE;
  if (stream->capture) {
    if (event->capturedIn) // recorded earlier in this (single-stream) capture: already ordered
      return event->capturedIn == stream->capture ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
    if (!(flags & CU_EVENT_WAIT_EXTERNAL)) { // a dependency on uncaptured work
      stream->invalidated = true;
      return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    // An external wait node: each replay waits for the event's latest record at that time.
    return enqueue(stream, [event] {
      State &s = state();
      if (!s.events.count(event) || !event->stream ||
          (event->stream != &s.legacy && !s.streams.count(event->stream)))
        return CUDA_SUCCESS;
      uint64_t generation = event->recorded;
      return drain(event->stream, [event, generation] { return event->completed >= generation; });
    });
  }
  if (flags & CU_EVENT_WAIT_EXTERNAL)
    return CUDA_ERROR_INVALID_VALUE; // only meaningful during capture
  if (event->capturedIn)             // would join another stream into the capture: not modelled
    return CUDA_ERROR_NOT_SUPPORTED;
  if (event->completed >= event->recorded || !event->stream)
    return legacyDuringBlockingCapture(stream);
  Stream *source = event->stream;
  uint64_t generation = event->recorded;
  return enqueue(stream, [source, event, generation] {
    State &s = state();
    if (!s.events.count(event) || (source != &s.legacy && !s.streams.count(source)))
      return CUDA_SUCCESS;
    return drain(source, [event, generation] { return event->completed >= generation; });
  });
}

// cuLaunchHostFunc: the host function runs in stream order (deferred, captured and replayed
// like any other work). libtccrt does not call it; the fake cuBLASLt (FakeCublasLt.cpp) enqueues
// its products through it. The function runs with the fake's lock held and must not call the
// driver.
FAKE_API CUresult cuLaunchHostFunc(CUstream handle, void (*fn)(void *), void *userData) {
  LOCKED;
  NEED_CONTEXT;
  Stream *stream = streamOf(handle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!fn)
    return CUDA_ERROR_INVALID_VALUE;
  return enqueue(stream, [fn, userData] {
    fn(userData);
    return CUDA_SUCCESS;
  });
}

// ---- graphs -------------------------------------------------------------------------------------

FAKE_API CUresult cuStreamBeginCapture_v2(CUstream handle, int mode) {
  LOCKED;
  NEED_CONTEXT;
  if (!handle)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; // the legacy stream cannot be captured
  Stream *stream = streamOf(handle);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  if (mode < 0 || mode > 2)
    return CUDA_ERROR_INVALID_VALUE;
  if (stream->capture)
    return CUDA_ERROR_ILLEGAL_STATE;
  stream->capture = new Graph;
  stream->invalidated = false;
  stream->captureMode = mode;
  stream->captureThread = std::this_thread::get_id();
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamEndCapture(CUstream handle, CUgraph *graph) {
  LOCKED;
  NEED_CONTEXT;
  Stream *stream = streamOf(handle);
  if (!stream || !handle)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!graph)
    return CUDA_ERROR_INVALID_VALUE;
  if (!stream->capture)
    return CUDA_ERROR_ILLEGAL_STATE;
  if (stream->captureMode != 2 && stream->captureThread != std::this_thread::get_id())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  Graph *captured = stream->capture;
  stream->capture = nullptr;
  if (stream->invalidated) {
    stream->invalidated = false;
    delete captured;
    *graph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  S.graphs.insert(captured);
  *graph = reinterpret_cast<CUgraph>(captured);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph handle,
                                              unsigned long long flags) {
  LOCKED;
  NEED_CONTEXT;
  Graph *graph = reinterpret_cast<Graph *>(handle);
  if (!exec)
    return CUDA_ERROR_INVALID_VALUE;
  if (!S.graphs.count(graph))
    return CUDA_ERROR_INVALID_HANDLE;
  (void)flags; // instantiation flags change nothing the fake models
  GraphExec *e = new GraphExec{graph->ops};
  S.execs.insert(e);
  *exec = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphLaunch(CUgraphExec handle, CUstream stream_) {
  LOCKED;
  NEED_CONTEXT;
  GraphExec *exec = reinterpret_cast<GraphExec *>(handle);
  if (!S.execs.count(exec))
    return CUDA_ERROR_INVALID_HANDLE;
  Stream *stream = streamOf(stream_);
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  for (const Op &op : exec->ops)
    if (CUresult r = enqueue(stream, op))
      return r;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphExecDestroy(CUgraphExec handle) {
  LOCKED;
  NEED_INIT;
  GraphExec *exec = reinterpret_cast<GraphExec *>(handle);
  if (!S.execs.erase(exec))
    return CUDA_ERROR_INVALID_HANDLE;
  delete exec;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphDestroy(CUgraph handle) {
  LOCKED;
  NEED_INIT;
  Graph *graph = reinterpret_cast<Graph *>(handle);
  if (!S.graphs.erase(graph))
    return CUDA_ERROR_INVALID_HANDLE;
  delete graph;
  return CUDA_SUCCESS;
}

// ---- test hooks ---------------------------------------------------------------------------------

FAKE_API const char *tcc_fake_cuda_last_module_kind() {
  LOCKED;
  static thread_local std::string copy;
  copy = S.lastModuleKind;
  return copy.c_str();
}

FAKE_API long long tcc_fake_cuda_counter(const char *name) {
  LOCKED;
  std::string n = name ? name : "";
  if (n == "live_device_allocations")
    return (long long)S.device.size();
  if (n == "device_bytes_in_use")
    return (long long)S.deviceBytes;
  if (n == "module_loads" || n == "kernel_launches" || n == "device_allocs" ||
      n == "device_frees" || n == "queued_ops")
    return S.counters[n];
  return -1;
}
