//===- CudaExecutor.cpp - Running a loaded CUDA program on a GPU ----------===//
#include "CudaExecutor.h"

#include "DType.h"

#include <algorithm>
#include <cstring>

namespace tcc::rt::cuda {

namespace {

constexpr size_t kStagingAlignment = 256;

size_t alignUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

/// Dynamic shared memory a block may use without opting in.
constexpr uint32_t kDefaultSharedBytes = 48 * 1024;

} // namespace

CUdeviceptr CudaExecutor::allocate(size_t bytes) {
  void *p = device_.allocator().allocate(bytes, stream_->id());
  blocks_.push_back(p);
  return reinterpret_cast<CUdeviceptr>(p);
}

CUdeviceptr CudaExecutor::ensure(Growable &g, size_t bytes) {
  if (bytes > g.bytes) {
    if (g.block) {
      stream_->synchronize(); // nothing may still use the old block
      device_.allocator().deallocate(g.block);
      g = Growable{};
    }
    g.block = device_.allocator().allocate(bytes, stream_->id());
    g.bytes = bytes;
  }
  return bytes ? reinterpret_cast<CUdeviceptr>(g.block) : 0;
}

CudaExecutor::CudaExecutor(const Program &program, const LoadOptions &options,
                           CUdeviceptr sharedArena)
    : program_(program),
      device_(CudaDevice::get(program.meshSizes_.empty() ? options.deviceOrdinal
                                                         : rankDeviceOrdinal(options.deviceOrdinal))),
      useGraph_(options.cudaGraph), sharedArena_(sharedArena) {
  const CudaDriver &driver = device_.driver();
  device_.makeCurrent();
  stream_ = std::make_unique<CudaStream>(device_);
  pinned_ = std::make_unique<PinnedBuffer>(device_);
  try {
    // ---- Code ------------------------------------------------------------------------------
    if (!program.kernelNames_.empty()) {
      module_ = std::make_unique<CudaModule>(device_, program.cubins_, program.ptx_);
      for (const std::string &name : program.kernelNames_)
        functions_.push_back(module_->function(name));
    }

    // ---- Constants, symbols ----------------------------------------------------------------
    if (program.constantDataBytes_ > 0) {
      constants_ = allocate(program.constantDataBytes_);
      driver.check(driver.cuMemcpyHtoDAsync(constants_, program.constantData_,
                                            program.constantDataBytes_, stream_->get()),
                   "uploading the program's constants (" +
                       std::to_string(program.constantDataBytes_) + " bytes)");
    }
    if (program.isSymbolic())
      symbols_ = allocate(program.symbolValues_.size() * sizeof(int64_t));
    inputBlocks_.resize(program.inputs_.size());
    outputBlocks_.resize(program.outputs_.size());
    if (program.bound()) // a static program; a symbolic one waits for its sizes
      buildLaunchList();
    stream_->synchronize(); // the constants are on the device
  } catch (...) {
    try { // the constants' upload may still be running
      stream_->synchronize();
    } catch (...) {
    }
    ops_.clear();
    collectives_.reset();
    releaseMemory();
    throw;
  }
}

void CudaExecutor::bind() {
  device_.makeCurrent();
  stream_->synchronize(); // the previous binding's runs are done with its buffers
  graph_.reset();
  warmedUp_ = false;
  ops_.clear();
  collectives_.reset();
  const CudaDriver &driver = device_.driver();
  driver.check(driver.cuMemcpyHtoDAsync(symbols_, program_.symbolValues_.data(),
                                        program_.symbolValues_.size() * sizeof(int64_t),
                                        stream_->get()),
               "uploading the size symbols' values");
  buildLaunchList();
  stream_->synchronize(); // the values are on the device before the host's copy changes
}

void CudaExecutor::buildLaunchList() {
  const Program &program = program_;
  const CudaDriver &driver = device_.driver();
  // ---- Memory ------------------------------------------------------------------------------
  arena_ = sharedArena_ ? sharedArena_ : ensure(ownArena_, program.arenaBytes_);
  inputs_.clear();
  outputs_.clear();
  inputStaging_.clear();
  outputStaging_.clear();
  stagingBytes_ = 0;
  for (size_t i = 0; i < program.inputs_.size(); ++i) {
    const TensorDesc &t = program.inputs_[i];
    inputs_.push_back(ensure(inputBlocks_[i], t.bytes));
    inputStaging_.push_back(stagingBytes_);
    stagingBytes_ = alignUp(stagingBytes_ + t.bytes, kStagingAlignment);
  }
  for (size_t i = 0; i < program.outputs_.size(); ++i) {
    const TensorDesc &t = program.outputs_[i];
    outputs_.push_back(ensure(outputBlocks_[i], t.bytes));
    outputStaging_.push_back(stagingBytes_);
    stagingBytes_ = alignUp(stagingBytes_ + t.bytes, kStagingAlignment);
  }
  std::vector<CUdeviceptr> addresses;
  for (const BufferDesc &b : program.buffers_) {
    CUdeviceptr base = 0;
    switch (b.kind) {
    case BufferKind::Input:
      base = inputs_[b.index];
      break;
    case BufferKind::Output:
      base = outputs_[b.index];
      break;
    case BufferKind::Constant:
      base = program.constants_[b.index]
                 ? constants_ + (CUdeviceptr)(program.constants_[b.index] - program.constantData_)
                 : 0;
      break;
    case BufferKind::Arena:
      base = arena_;
      break;
    case BufferKind::Symbols:
      base = symbols_;
      break;
    }
    // Empty buffers may sit on an empty base: their address is never dereferenced.
    addresses.push_back(base ? base + b.offset : 0);
  }

  // ---- The launch list ---------------------------------------------------------------------
  bool hasGemm = false;
  for (const Step &step : program.steps_)
    hasGemm |= std::holds_alternative<GemmStep>(step);
  if (hasGemm && !blas_) {
    blas_ = std::make_unique<CublasLtHandle>(loadCublasLt());
    workspace_ = allocate(kCublasLtWorkspaceBytes);
  }
  opSteps_.clear();
  size_t stepIndex = 0;
  auto add = [&](Op op) { // ops_[k] runs program step opSteps_[k]
    ops_.push_back(std::move(op));
    opSteps_.push_back(stepIndex);
  };
  std::vector<uint32_t> maxShared(functions_.size(), 0);
  size_t scratchBytes = 0;
  int sharedOptIn = -1; // the device's opt-in limit, queried when a launch needs it
  for (size_t i = 0; i < program.steps_.size(); ++i) {
    stepIndex = i;
    const Step &step = program.steps_[i];
    std::string what = "launch " + std::to_string(i);
    if (auto *s = std::get_if<KernelStep>(&step)) {
      what += " (kernel '" + program.kernelNames_[s->kernel] + "')";
      Launch l;
      l.function = functions_[s->kernel];
      std::copy(s->grid, s->grid + 3, l.grid);
      std::copy(s->block, s->block + 3, l.block);
      l.sharedBytes = s->sharedBytes;
      for (uint32_t a : s->args)
        l.values.push_back(addresses[a]);
      if (l.sharedBytes > kDefaultSharedBytes) {
        if (sharedOptIn < 0) {
          CUdevice dev = 0;
          driver.check(driver.cuDeviceGet(&dev, device_.ordinal()), "cuDeviceGet");
          driver.check(
              driver.cuDeviceGetAttribute(
                  &sharedOptIn, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
              "querying the device's shared memory per block");
        }
        if (l.sharedBytes > (uint32_t)sharedOptIn)
          throw Error(what + ": " + std::to_string(l.sharedBytes) +
                      " bytes of dynamic shared memory exceed this GPU's " +
                      std::to_string(sharedOptIn) + " bytes a block");
        maxShared[s->kernel] = std::max(maxShared[s->kernel], l.sharedBytes);
      }
      add(std::move(l));
    } else if (auto *s = std::get_if<GemmStep>(&step)) {
      what += " (gemm)";
      const GemmGeometry &g = s->geometry;
      if (g.m == 0 || g.n == 0 || g.numBatches == 0)
        continue;     // c is empty
      if (g.k == 0) { // the loader allows this only with beta = 0 and no bias: c = act(0) = 0
        add(Fill{addresses[s->c], program.buffers_[s->c].bytes});
        continue;
      }
      add(std::make_unique<CublasLtGemm>(
          *blas_, g, s->activation, addresses[s->a], addresses[s->b], addresses[s->c],
          s->hasBias ? addresses[s->bias] : 0, kCublasLtWorkspaceBytes, what));
    } else if (auto *s = std::get_if<CopyStep>(&step)) {
      size_t bytes = program.buffers_[s->source].bytes;
      CUdeviceptr source = addresses[s->source], target = addresses[s->target];
      if (bytes == 0 || source == target)
        continue;
      bool overlap = source < target + bytes && target < source + bytes;
      if (overlap)
        scratchBytes = std::max(scratchBytes, bytes);
      add(Copy{source, target, overlap ? CUdeviceptr(1) : 0, bytes});
    } else if (std::holds_alternative<CollectiveStep>(step)) {
      add(Collective{i});
    } else if (auto *s = std::get_if<WaitStep>(&step)) {
      add(WaitFor{s->collective});
    } else {
      // The loader refuses conv and top-k steps in CUDA programs.
      throw Error(what + ": not a step a CUDA program can run");
    }
  }
  if (std::any_of(ops_.begin(), ops_.end(),
                  [](const Op &op) { return std::holds_alternative<Collective>(op); })) {
    collectives_ = std::make_unique<DeviceCollectives>(
        device_, program, *stream_, addresses, [this](size_t bytes) { return allocate(bytes); });
    useGraph_ = false; // host staging cannot be captured; NCCL capture is not tried yet
  }
  for (size_t k = 0; k < functions_.size(); ++k)
    if (maxShared[k] > 0)
      driver.check(driver.cuFuncSetAttribute(functions_[k],
                                             CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                             (int)maxShared[k]),
                   "allowing kernel '" + program.kernelNames_[k] + "' " +
                       std::to_string(maxShared[k]) + " bytes of dynamic shared memory");
  if (scratchBytes > 0) {
    scratch_ = ensure(scratchBlock_, scratchBytes);
    for (Op &op : ops_)
      if (auto *c = std::get_if<Copy>(&op); c && c->via)
        c->via = scratch_;
  }
  for (Op &op : ops_) // pointers into each launch's own values (they no longer move)
    if (auto *l = std::get_if<Launch>(&op))
      for (CUdeviceptr &v : l->values)
        l->params.push_back(&v);
  if (stagingBytes_ > 0)
    pinned_->reserve(stagingBytes_);
  if (profiling_)
    makeProfileEvents();
}

void CudaExecutor::makeProfileEvents() {
  profileEvents_.clear();
  for (size_t k = 0; k < 2 * ops_.size(); ++k)
    profileEvents_.push_back(std::make_unique<CudaEvent>(device_, /*timing=*/true));
}

void CudaExecutor::setProfiling(bool enabled) {
  device_.makeCurrent();
  profiling_ = enabled;
  if (enabled)
    makeProfileEvents();
  else
    profileEvents_.clear();
}

std::vector<CudaExecutor::StepTime> CudaExecutor::stepTimes() const {
  std::vector<StepTime> times(program_.steps_.size());
  if (!profiling_ || profileEvents_.size() != 2 * ops_.size() || ops_.empty())
    return times;
  const CudaEvent &first = *profileEvents_[0];
  for (size_t k = 0; k < ops_.size(); ++k) {
    StepTime &t = times[opSteps_[k]];
    double start = profileEvents_[2 * k]->elapsedMs(first) * 1e-3;
    double seconds = profileEvents_[2 * k + 1]->elapsedMs(*profileEvents_[2 * k]) * 1e-3;
    t.startSeconds = t.seconds == 0 ? start : std::min(t.startSeconds, start);
    t.seconds += seconds; // (a step of several ops: their sum)
  }
  return times;
}

CudaExecutor::~CudaExecutor() {
  try {
    device_.makeCurrent();
    stream_->synchronize();
  } catch (...) {
  }
  graph_.reset();
  ops_.clear();
  collectives_.reset();
  releaseMemory();
}

void CudaExecutor::releaseMemory() noexcept {
  std::vector<void *> owned = blocks_;
  for (Growable *g : {&ownArena_, &scratchBlock_})
    owned.push_back(g->block);
  for (std::vector<Growable> *v : {&inputBlocks_, &outputBlocks_})
    for (Growable &g : *v)
      owned.push_back(g.block);
  for (void *p : owned) {
    if (!p)
      continue;
    try {
      device_.allocator().deallocate(p);
    } catch (...) {
    }
  }
  blocks_.clear();
  ownArena_ = scratchBlock_ = Growable{};
  for (std::vector<Growable> *v : {&inputBlocks_, &outputBlocks_})
    std::fill(v->begin(), v->end(), Growable{});
}

void CudaExecutor::enqueueLaunchList() {
  const CudaDriver &driver = device_.driver();
  CUstream stream = stream_->get();
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op &op = ops_[i];
    if (profiling_)
      profileEvents_[2 * i]->record(*stream_);
    if (auto *l = std::get_if<Launch>(&op)) {
      driver.check(driver.cuLaunchKernel(l->function, l->grid[0], l->grid[1], l->grid[2],
                                         l->block[0], l->block[1], l->block[2], l->sharedBytes,
                                         stream, const_cast<void **>(l->params.data()), nullptr),
                   "launching kernel " + std::to_string(i) + " of the launch list");
    } else if (auto *c = std::get_if<Copy>(&op)) {
      if (c->via) {
        driver.check(driver.cuMemcpyDtoDAsync(c->via, c->source, c->bytes, stream), "copy");
        driver.check(driver.cuMemcpyDtoDAsync(c->target, c->via, c->bytes, stream), "copy");
      } else {
        driver.check(driver.cuMemcpyDtoDAsync(c->target, c->source, c->bytes, stream), "copy");
      }
    } else if (auto *f = std::get_if<Fill>(&op)) {
      driver.check(driver.cuMemsetD8Async(f->target, 0, f->bytes, stream), "zeroing a GEMM's c");
    } else if (auto *g = std::get_if<std::unique_ptr<CublasLtGemm>>(&op)) {
      (*g)->enqueue(stream, workspace_);
    } else if (auto *c = std::get_if<Collective>(&op)) {
      collectives_->launch(c->step);
    } else if (auto *w = std::get_if<WaitFor>(&op)) {
      collectives_->wait(w->collective);
    }
    if (profiling_)
      profileEvents_[2 * i + 1]->record(*stream_);
  }
}

void CudaExecutor::copyToHost(void *target, const void *source, size_t bytes) {
  const CudaDriver &driver = device_.driver();
  device_.makeCurrent();
  driver.check(driver.cuMemcpyDtoHAsync(target, reinterpret_cast<CUdeviceptr>(source), bytes,
                                        stream_->get()),
               "copying a device tensor to the host");
  stream_->synchronize();
}

void CudaExecutor::run(const void *const *inputs, void *const *outputs, bool onDevice) {
  const CudaDriver &driver = device_.driver();
  device_.makeCurrent();
  CUstream stream = stream_->get();
  uint8_t *staging =
      stagingBytes_ > 0 && !onDevice ? pinned_->reserve(stagingBytes_) : nullptr;
  try {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      size_t bytes = program_.inputs_[i].bytes;
      if (bytes == 0)
        continue;
      const std::string what = "copying input " + std::to_string(i) + " to the program's buffer";
      if (onDevice) {
        driver.check(driver.cuMemcpyDtoDAsync(inputs_[i], reinterpret_cast<CUdeviceptr>(inputs[i]),
                                              bytes, stream),
                     what);
        continue;
      }
      std::memcpy(staging + inputStaging_[i], inputs[i], bytes);
      driver.check(driver.cuMemcpyHtoDAsync(inputs_[i], staging + inputStaging_[i], bytes, stream),
                   what);
    }
    if (useGraph_ && !profiling_ && !ops_.empty() && (graph_ || warmedUp_)) {
      if (!graph_)
        graph_ = CudaGraph::capture(*stream_, [&] { enqueueLaunchList(); });
      graph_->launch(*stream_);
    } else {
      enqueueLaunchList();
      warmedUp_ = true;
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      size_t bytes = program_.outputs_[i].bytes;
      if (bytes == 0)
        continue;
      const std::string what = "copying output " + std::to_string(i) + " out of the program";
      if (onDevice)
        driver.check(driver.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(outputs[i]),
                                              outputs_[i], bytes, stream),
                     what);
      else
        driver.check(
            driver.cuMemcpyDtoHAsync(staging + outputStaging_[i], outputs_[i], bytes, stream),
            what);
    }
    if (collectives_)
      collectives_->synchronize(); // within the collective deadline
    else
      stream_->synchronize();
  } catch (...) {
    try { // nothing may still be using the staging buffer when the next run fills it
      stream_->synchronize();
    } catch (...) {
    }
    throw;
  }
  if (onDevice)
    return;
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (size_t bytes = program_.outputs_[i].bytes)
      std::memcpy(outputs[i], staging + outputStaging_[i], bytes);
}

std::string CudaExecutor::deviceName() const {
  std::string out = "cuda:" + std::to_string(device_.ordinal()) + " " + device_.name() + " (";
  if (!module_)
    out += "sm_" + std::to_string(device_.computeCapability()) + ", no kernels";
  else if (module_->jitFromPtx())
    out += module_->loadedArch() + " PTX, JIT";
  else
    out += module_->loadedArch() + ", cubin";
  if (collectives_ && collectives_->backend() != CollectiveBackend::None)
    out += "; collectives: " + collectives_->describe();
  return out + ")";
}

} // namespace tcc::rt::cuda
