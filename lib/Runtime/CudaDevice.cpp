//===- CudaDevice.cpp - A CUDA GPU as the runtime sees it -----------------===//
//
// See CudaDevice.h. Teardown (destructors, the device allocator's frees) ignores driver errors:
// by then there is nobody to report them to, and a failing free means the context is already
// broken, which the next checked call reports.
//
//===----------------------------------------------------------------------===//
#include "CudaDevice.h"

#include "Program.h" // tcc::rt::Error

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>

namespace tcc::rt::cuda {

namespace {

std::string deviceLabel(int ordinal) { return "cuda:" + std::to_string(ordinal); }

/// For teardown paths, which must not throw.
void makeCurrentQuietly(const CudaDevice &device) noexcept {
  try {
    device.makeCurrent();
  } catch (...) {
  }
}

/// cuMemAlloc/cuMemFree for the caching allocator: null on out of memory (so the allocator
/// releases its cache and retries), an Error on any other failure.
class DeviceMemory final : public RawAllocator {
public:
  explicit DeviceMemory(const CudaDevice &device) : device(device) {}
  void *allocate(size_t bytes) override {
    device.makeCurrent();
    CUdeviceptr ptr = 0;
    CUresult result = device.driver().cuMemAlloc(&ptr, bytes);
    if (result == CUDA_ERROR_OUT_OF_MEMORY)
      return nullptr;
    device.driver().check(result, "cuMemAlloc of " + std::to_string(bytes) + " bytes on " +
                                      deviceLabel(device.ordinal()));
    return reinterpret_cast<void *>(static_cast<uintptr_t>(ptr));
  }
  void deallocate(void *ptr, size_t) override {
    // Errors are ignored (see the file comment): the allocator has already forgotten the segment.
    makeCurrentQuietly(device);
    (void)device.driver().cuMemFree(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr)));
  }

private:
  const CudaDevice &device;
};

/// CUDA events for the caching allocator's deferred frees, recycled through a pool (the
/// allocator calls these with its mutex held, so no locking of its own is needed).
class DeviceEvents final : public EventHooks {
public:
  explicit DeviceEvents(const CudaDevice &device) : device(device) {}
  ~DeviceEvents() override {
    for (CUevent event : pool)
      (void)device.driver().cuEventDestroy(event);
  }
  Event recordEvent(Stream stream) override {
    device.makeCurrent();
    const CudaDriver &d = device.driver();
    CUevent event = nullptr;
    if (!pool.empty()) {
      event = pool.back();
      pool.pop_back();
    } else {
      d.check(d.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING),
              "cuEventCreate (allocator event) on " + deviceLabel(device.ordinal()));
    }
    CUresult result = d.cuEventRecord(event, reinterpret_cast<CUstream>(stream));
    if (result != CUDA_SUCCESS) {
      pool.push_back(event);
      d.check(result, "cuEventRecord (allocator event) on " + deviceLabel(device.ordinal()));
    }
    return reinterpret_cast<Event>(event);
  }
  bool queryEvent(Event event) override {
    device.makeCurrent();
    CUresult result = device.driver().cuEventQuery(reinterpret_cast<CUevent>(event));
    if (result == CUDA_ERROR_NOT_READY)
      return false;
    device.driver().check(result,
                          "cuEventQuery (allocator event) on " + deviceLabel(device.ordinal()));
    return true;
  }
  void synchronizeEvent(Event event) override {
    device.makeCurrent();
    device.driver().check(device.driver().cuEventSynchronize(reinterpret_cast<CUevent>(event)),
                          "cuEventSynchronize (allocator event) on " +
                              deviceLabel(device.ordinal()));
  }
  void releaseEvent(Event event) override { pool.push_back(reinterpret_cast<CUevent>(event)); }

private:
  const CudaDevice &device;
  std::vector<CUevent> pool;
};

/// "sm_90a" -> {"sm", 90, "a"}; false if `arch` is not <prefix>_<digits><lowercase letters>.
struct ParsedArch {
  std::string prefix;
  int number = 0;
  std::string suffix;
};
bool parseArch(const std::string &arch, ParsedArch &out) {
  size_t underscore = arch.find('_');
  if (underscore == std::string::npos)
    return false;
  out.prefix = arch.substr(0, underscore);
  size_t i = underscore + 1, digits = i;
  while (i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i])))
    ++i;
  if (i == digits || i - digits > 4)
    return false;
  out.number = std::stoi(arch.substr(digits, i - digits));
  out.suffix = arch.substr(i);
  return std::all_of(out.suffix.begin(), out.suffix.end(),
                     [](char c) { return c >= 'a' && c <= 'z'; });
}

/// The best of `archs` with prefix `prefix` for capability `cc`: numbers above cc never fit,
/// suffixed archs only at exactly cc; `exactOnly` admits only number == cc. Among those that
/// fit: the highest number, a suffixed arch before the plain one (it targets this exact GPU),
/// then the alphabetically first.
std::string bestArch(int cc, const std::vector<std::string> &archs, const char *prefix,
                     bool exactOnly) {
  std::string best;
  ParsedArch bestParsed;
  for (const std::string &arch : archs) {
    ParsedArch p;
    if (!parseArch(arch, p) || p.prefix != prefix || p.number > cc)
      continue;
    if ((exactOnly || !p.suffix.empty()) && p.number != cc)
      continue;
    bool better =
        best.empty() || p.number > bestParsed.number ||
        (p.number == bestParsed.number &&
         (bestParsed.suffix.empty() != p.suffix.empty() ? !p.suffix.empty() : arch < best));
    if (better) {
      best = arch;
      bestParsed = p;
    }
  }
  return best;
}

std::string joinArchs(const std::vector<std::string> &archs) {
  std::vector<std::string> sorted = archs;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string out;
  for (const std::string &a : sorted)
    out += (out.empty() ? "" : ", ") + a;
  return out.empty() ? "none" : out;
}

} // namespace

// ---- CudaDevice ---------------------------------------------------------------------------------

CudaDevice &CudaDevice::get(int ordinal) {
  // Devices live until the process exits and are never destroyed: their memory and contexts
  // go with the process, and no destructor runs after the driver's own exit handlers.
  static std::mutex mutex;
  // (The map is never destroyed either, so the devices stay reachable at exit.)
  static auto *devices = new std::map<int, CudaDevice *>;
  const CudaDriver &driver = loadCudaDriver();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = devices->find(ordinal);
  if (it != devices->end())
    return *it->second;
  int count = cudaDeviceCount();
  if (ordinal < 0 || ordinal >= count)
    throw Error("CUDA device " + std::to_string(ordinal) + " does not exist (" +
                std::to_string(count) + (count == 1 ? " device" : " devices") + ": cuda:0" +
                (count > 1 ? "..cuda:" + std::to_string(count - 1) : "") + ")");
  CudaDevice *device = new CudaDevice(driver, ordinal);
  devices->emplace(ordinal, device);
  return *device;
}

CudaDevice::CudaDevice(const CudaDriver &driver, int ordinal)
    : driver_(&driver), ordinal_(ordinal) {
  const CudaDriver &d = driver;
  std::string label = deviceLabel(ordinal);
  d.check(d.cuDeviceGet(&device_, ordinal), "cuDeviceGet(" + std::to_string(ordinal) + ")");
  char name[256] = {};
  d.check(d.cuDeviceGetName(name, sizeof(name) - 1, device_), "cuDeviceGetName on " + label);
  name_ = name;
  auto attribute = [&](int which, const char *what) {
    int value = 0;
    d.check(d.cuDeviceGetAttribute(&value, which, device_),
            std::string("cuDeviceGetAttribute(") + what + ") on " + label);
    return value;
  };
  int major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major");
  int minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");
  cc_ = major * 10 + minor;
  sms_ = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  d.check(d.cuDeviceTotalMem(&totalMemory_, device_), "cuDeviceTotalMem on " + label);
  d.check(d.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain on " + label);
  makeCurrent();

  raw_ = std::make_unique<DeviceMemory>(*this);
  events_ = std::make_unique<DeviceEvents>(*this);
  CachingAllocator::Options options;
  options.alignment = 256;                       // cuMemAlloc returns at least 256-byte alignment
  options.mediumSegmentBytes = size_t(20) << 20; // PyTorch's CUDA value
  options.events = events_.get();
  options.name = label + " device memory";
  allocator_ = std::make_unique<CachingAllocator>(*raw_, options);
}

void CudaDevice::makeCurrent() const {
  driver_->check(driver_->cuCtxSetCurrent(context_),
                 "cuCtxSetCurrent(" + deviceLabel(ordinal_) + " primary context)");
}

// ---- CudaStream / CudaEvent ---------------------------------------------------------------------

CudaStream::CudaStream(CudaDevice &device) : device_(device) {
  device.makeCurrent();
  device.driver().check(device.driver().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING),
                        "cuStreamCreate on " + deviceLabel(device.ordinal()));
}

CudaStream::~CudaStream() {
  makeCurrentQuietly(device_);
  (void)device_.driver().cuStreamDestroy(stream_);
}

void CudaStream::synchronize() const {
  device_.makeCurrent();
  device_.driver().check(device_.driver().cuStreamSynchronize(stream_),
                         "cuStreamSynchronize on " + deviceLabel(device_.ordinal()));
}

CudaEvent::CudaEvent(CudaDevice &device, bool timing) : device_(device) {
  device.makeCurrent();
  device.driver().check(
      device.driver().cuEventCreate(&event_, timing ? 0 : CU_EVENT_DISABLE_TIMING),
      "cuEventCreate on " + deviceLabel(device.ordinal()));
}

CudaEvent::~CudaEvent() {
  makeCurrentQuietly(device_);
  (void)device_.driver().cuEventDestroy(event_);
}

void CudaEvent::record(const CudaStream &stream) {
  device_.makeCurrent();
  device_.driver().check(device_.driver().cuEventRecord(event_, stream.get()),
                         "cuEventRecord on " + deviceLabel(device_.ordinal()));
}

void CudaEvent::synchronize() const {
  device_.makeCurrent();
  device_.driver().check(device_.driver().cuEventSynchronize(event_),
                         "cuEventSynchronize on " + deviceLabel(device_.ordinal()));
}

float CudaEvent::elapsedMs(const CudaEvent &start) const {
  float ms = 0;
  device_.makeCurrent();
  device_.driver().check(device_.driver().cuEventElapsedTime(&ms, start.event_, event_),
                         "cuEventElapsedTime on " + deviceLabel(device_.ordinal()));
  return ms;
}

// ---- PinnedBuffer -------------------------------------------------------------------------------

PinnedBuffer::~PinnedBuffer() {
  if (!data_)
    return;
  makeCurrentQuietly(device_);
  (void)device_.driver().cuMemFreeHost(data_);
}

uint8_t *PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_)
    return data_;
  const CudaDriver &d = device_.driver();
  device_.makeCurrent();
  // A copy still in flight may read or write the old buffer: let the device finish before it
  // goes (growing is rare: the buffer settles at the largest transfer).
  if (data_) {
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize before growing the pinned staging buffer");
    (void)d.cuMemFreeHost(data_);
    data_ = nullptr;
    capacity_ = 0;
  }
  constexpr size_t kPage = 4096;
  size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  void *ptr = nullptr;
  d.check(d.cuMemAllocHost(&ptr, rounded), "cuMemAllocHost of " + std::to_string(rounded) +
                                               " bytes (pinned staging buffer for " +
                                               deviceLabel(device_.ordinal()) + ")");
  if (reinterpret_cast<uintptr_t>(ptr) % 64 != 0) {
    (void)d.cuMemFreeHost(ptr);
    throw Error("cuMemAllocHost returned memory that is not 64-byte aligned");
  }
  data_ = static_cast<uint8_t *>(ptr);
  capacity_ = rounded;
  return data_;
}

// ---- CudaModule ---------------------------------------------------------------------------------

CudaArchChoice selectCudaArch(int cc, const std::vector<std::string> &cubinArchs,
                              const std::vector<std::string> &ptxArchs) {
  CudaArchChoice choice;
  choice.arch = bestArch(cc, cubinArchs, "sm", /*exactOnly=*/true);
  if (!choice.arch.empty())
    return choice;
  choice.arch = bestArch(cc, ptxArchs, "compute", /*exactOnly=*/false);
  choice.ptx = !choice.arch.empty();
  return choice;
}

CudaModule::CudaModule(CudaDevice &device, const std::vector<CudaCode> &cubins,
                       const std::vector<CudaCode> &ptx)
    : device_(device) {
  std::vector<std::string> cubinArchs, ptxArchs;
  for (const CudaCode &c : cubins)
    cubinArchs.push_back(c.arch);
  for (const CudaCode &c : ptx)
    ptxArchs.push_back(c.arch);
  int cc = device.computeCapability();
  CudaArchChoice choice = selectCudaArch(cc, cubinArchs, ptxArchs);
  std::string label =
      deviceLabel(device.ordinal()) + " (" + device.name() + ", sm_" + std::to_string(cc) + ")";
  if (choice.arch.empty())
    throw Error("no code in the artifact runs on " + label + ": it holds cubins for " +
                joinArchs(cubinArchs) + " and PTX for " + joinArchs(ptxArchs) +
                "; a GPU runs cubins of exactly its architecture (sm_" + std::to_string(cc) +
                ") or PTX of a compute_XY with XY <= " + std::to_string(cc));
  arch_ = choice.arch;
  jit_ = choice.ptx;

  const CudaDriver &d = device.driver();
  device.makeCurrent();
  const std::vector<CudaCode> &images = jit_ ? ptx : cubins;
  size_t count = std::count_if(images.begin(), images.end(),
                               [&](const CudaCode &c) { return c.arch == arch_; });
  size_t index = 0;
  for (const CudaCode &code : images) {
    if (code.arch != arch_)
      continue;
    ++index;
    std::string what = "loading " + std::string(jit_ ? "PTX " : "cubin ") + arch_ + " image " +
                       std::to_string(index) + " of " + std::to_string(count) + " on " + label;
    if (!code.data || code.size == 0) {
      for (CUmodule m : modules_)
        (void)d.cuModuleUnload(m);
      throw Error(what + ": the image is empty");
    }
    // PTX goes to the driver as a NUL-terminated string: copy it so that termination does
    // not depend on the caller's buffer.
    std::string text;
    const void *image = code.data;
    if (jit_) {
      text.assign(reinterpret_cast<const char *>(code.data), code.size);
      text.erase(text.find_last_not_of('\0') + 1);
      image = text.c_str();
    }
    std::vector<char> log(16384, '\0');
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log.data(), reinterpret_cast<void *>(uintptr_t(log.size() - 1))};
    CUmodule module = nullptr;
    CUresult result = d.cuModuleLoadDataEx(&module, image, 2, options, values);
    if (result != CUDA_SUCCESS) {
      for (CUmodule m : modules_)
        (void)d.cuModuleUnload(m);
      modules_.clear();
      std::string message = what + ": " + d.describe(result);
      std::string logText(log.data());
      while (!logText.empty() && (logText.back() == '\n' || logText.back() == ' '))
        logText.pop_back();
      if (!logText.empty())
        message += "\n" + std::string(jit_ ? "JIT" : "loader") + " log:\n" + logText;
      throw Error(message);
    }
    modules_.push_back(module);
  }
}

CudaModule::~CudaModule() {
  makeCurrentQuietly(device_);
  for (CUmodule m : modules_)
    (void)device_.driver().cuModuleUnload(m);
}

CUfunction CudaModule::function(const std::string &name) const {
  const CudaDriver &d = device_.driver();
  device_.makeCurrent();
  for (CUmodule module : modules_) {
    CUfunction f = nullptr;
    CUresult result = d.cuModuleGetFunction(&f, module, name.c_str());
    if (result == CUDA_SUCCESS)
      return f;
    if (result != CUDA_ERROR_NOT_FOUND)
      d.check(result, "cuModuleGetFunction(" + name + ") in " + arch_ + " on " +
                          deviceLabel(device_.ordinal()));
  }
  throw Error("kernel " + name + " is in none of the " + std::to_string(modules_.size()) + " " +
              arch_ + (jitFromPtx() ? " PTX" : " cubin") + " images loaded on " +
              deviceLabel(device_.ordinal()));
}

// ---- CudaGraph ----------------------------------------------------------------------------------

void CudaGraph::begin() {
  CudaDevice &device = stream_.device();
  device.makeCurrent();
  device.driver().check(
      device.driver().cuStreamBeginCapture(stream_.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      "cuStreamBeginCapture on " + deviceLabel(device.ordinal()));
}

void CudaGraph::end() {
  CudaDevice &device = stream_.device();
  const CudaDriver &d = device.driver();
  device.makeCurrent();
  d.check(d.cuStreamEndCapture(stream_.get(), &graph_),
          "cuStreamEndCapture on " + deviceLabel(device.ordinal()));
  d.check(d.cuGraphInstantiate(&exec_, graph_, 0),
          "cuGraphInstantiateWithFlags on " + deviceLabel(device.ordinal()));
}

void CudaGraph::abort() noexcept {
  CudaDevice &device = stream_.device();
  const CudaDriver &d = device.driver();
  makeCurrentQuietly(device);
  CUgraph graph = nullptr;
  if (d.cuStreamEndCapture(stream_.get(), &graph) == CUDA_SUCCESS && graph)
    (void)d.cuGraphDestroy(graph);
}

CudaGraph::~CudaGraph() {
  makeCurrentQuietly(stream_.device());
  const CudaDriver &d = stream_.device().driver();
  if (exec_)
    (void)d.cuGraphExecDestroy(exec_);
  if (graph_)
    (void)d.cuGraphDestroy(graph_);
}

void CudaGraph::launch(const CudaStream &stream) const {
  CudaDevice &device = stream.device();
  device.makeCurrent();
  device.driver().check(device.driver().cuGraphLaunch(exec_, stream.get()),
                        "cuGraphLaunch on " + deviceLabel(device.ordinal()));
}

} // namespace tcc::rt::cuda
