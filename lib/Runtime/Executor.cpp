//===- Executor.cpp - Running a loaded program's launch list on the CPU ---===//
//
// CUDA programs are checked here like CPU ones and then run by their CudaExecutor.
#include "ChannelsLast.h"
#include "CudaExecutor.h"
#include "DType.h"
#include "HostMemory.h"
#include "Program.h"

#include <cmath>
#include <chrono>
#include <cstring>

namespace tcc::rt {

void Program::setNumThreads(int numThreads) {
  numThreads_ = resolveNumThreads(numThreads);
  reserveWorkspace();
  if (training_)
    for (EntryDesc &e : training_->entries)
      e.program->setNumThreads(numThreads);
}

std::string Program::deviceName() const {
  if (cuda_)
    return cuda_->deviceName();
  return "cpu (" + std::to_string(numThreads_) + (numThreads_ == 1 ? " thread)" : " threads)");
}

cuda::CudaDevice *Program::cudaDevice() const { return cuda_ ? &cuda_->device() : nullptr; }

void Program::reserveWorkspace() {
  size_t need = workspaceBytes_ * (size_t)numThreads_;
  if (need <= workspaceCapacity_)
    return;
  hostFree(workspace_);
  workspace_ = nullptr;
  workspaceCapacity_ = 0;
  workspace_ = hostAllocate(need);
  workspaceCapacity_ = need;
}

void *Program::bufferAddress(const BufferDesc &b, const void *const *inputs,
                             void *const *outputs) const {
  uint8_t *base = nullptr;
  switch (b.kind) {
  case BufferKind::Input:
    base = static_cast<uint8_t *>(const_cast<void *>(inputs[b.index]));
    break;
  case BufferKind::Output:
    base = static_cast<uint8_t *>(outputs[b.index]);
    break;
  case BufferKind::Constant:
    base = const_cast<uint8_t *>(constants_[b.index]);
    break;
  case BufferKind::Arena:
    base = static_cast<uint8_t *>(arena_);
    break;
  case BufferKind::Symbols: // the bound sizes, which the program owns
    base = reinterpret_cast<uint8_t *>(const_cast<int64_t *>(symbolValues_.data()));
    break;
  }
  // Empty buffers may sit on an empty base (null): hand out a valid, never-read address.
  alignas(64) static uint8_t emptyTensor[64];
  if (!base)
    return b.bytes == 0 ? emptyTensor : nullptr;
  return base + b.offset;
}

namespace {
std::string dims(const std::vector<int64_t> &shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? "x" : "") + std::to_string(shape[i]);
  return out.empty() ? "scalar" : out;
}
} // namespace

void Program::describeSteps() {
  stepKinds_.clear();
  stepNames_.clear();
  for (const Step &step : steps_) {
    std::string kind, name;
    if (auto *s = std::get_if<KernelStep>(&step)) {
      kind = "kernel";
      name = s->kernel < kernelNames_.size() ? kernelNames_[s->kernel] : "?";
    } else if (auto *s = std::get_if<GemmStep>(&step)) {
      const GemmGeometry &g = s->geometry;
      kind = "gemm";
      name = "gemm " + std::string(dtypeName(g.dtype)) + " " + std::to_string(g.m) + "x" +
             std::to_string(g.n) + "x" + std::to_string(g.k) +
             (g.numBatches > 1 ? " x" + std::to_string(g.numBatches) + " batches" : "") +
             (g.transA ? " a^T" : "") + (g.transB ? " b^T" : "") + (s->hasBias ? " +bias" : "") +
             (s->activation == GemmActivation::Relu       ? " +relu"
              : s->activation == GemmActivation::GeluTanh ? " +gelu_tanh"
              : s->activation == GemmActivation::GeluErf  ? " +gelu_erf"
                                                          : "");
    } else if (auto *s = std::get_if<ConvStep>(&step)) {
      const ConvGeometry &g = s->geometry;
      kind = "conv";
      const char *path = g.channelsLast ? channelsLastPathName(channelsLastPath(g))
                         : g.transposed                                ? "col2im gemm"
                         : g.winogradTile                              ? "winograd"
                         : g.groupIn == 1 && g.kernel.size() == 2   ? "depthwise"
                         : g.pointwise                              ? "1x1 gemm"
                                                                    : "im2col gemm";
      name = "conv " + std::to_string(g.batch) + "x" + std::to_string(g.inChannels) + "x" +
             dims(g.inSpatial) + " -> " + std::to_string(g.outChannels) + "x" +
             dims(g.outSpatial) + ", kernel " + dims(g.kernel) +
             (g.groups > 1 ? ", groups " + std::to_string(g.groups) : "") + " (" + path +
             (g.channelsLast ? ", channels last" : "") + ")" +
             (s->hasBias ? " +bias" : "") + (s->hasResidual ? " +residual" : "") +
             (s->clamp ? " +clamp" : "") +
             (s->activation.kind == ActivationKind::Silu        ? " +silu"
              : s->activation.kind == ActivationKind::HardSwish ? " +hardswish"
                                                                : "");
    } else if (auto *s = std::get_if<PoolStep>(&step)) {
      const PoolGeometry &g = s->geometry;
      kind = "pool";
      name = std::string(g.max ? "max" : "sum") + " pool " + std::to_string(g.kh) + "x" +
             std::to_string(g.kw) + " stride " + std::to_string(g.sh) + "x" +
             std::to_string(g.sw) + ", " + std::to_string(g.outer) + " x " +
             std::to_string(g.ih) + "x" + std::to_string(g.iw) + " -> " + std::to_string(g.oh) +
             "x" + std::to_string(g.ow) +
             (g.inner > 1 ? " x " + std::to_string(g.inner) + " channels last" : "");
    } else if (auto *s = std::get_if<TopKStep>(&step)) {
      kind = "topk";
      name = "topk " + std::to_string(s->geometry.k) + " of " + std::to_string(s->geometry.size);
    } else if (auto *s = std::get_if<AttentionStep>(&step)) {
      kind = "attention";
      name = "attention " + attentionShapeText(s->geometry);
    } else if (auto *s = std::get_if<AttentionGradStep>(&step)) {
      kind = "attention";
      name = "attention gradient " + attentionShapeText(s->geometry);
    } else if (auto *s = std::get_if<CollectiveStep>(&step)) {
      kind = "collective";
      name = collectiveName(*s) + (s->async ? " (async)" : "");
    } else if (auto *s = std::get_if<WaitStep>(&step)) {
      kind = "wait";
      name = "wait for launch " + std::to_string(s->collective);
    } else if (auto *s = std::get_if<CopyStep>(&step)) {
      kind = "copy";
      name = "copy " + std::to_string(buffers_[s->source].bytes) + " bytes";
    }
    stepKinds_.push_back(std::move(kind));
    stepNames_.push_back(std::move(name));
  }
}

void Program::setProfiling(bool enabled) {
  if (cuda_)
    cuda_->setProfiling(enabled); // CUDA events around each launch
  profiling_ = enabled;
  profiles_.assign(enabled ? steps_.size() : 0, StepProfile());
}

void Program::collectCudaProfile() {
  std::vector<cuda::CudaExecutor::StepTime> times = cuda_->stepTimes();
  profiles_.resize(steps_.size());
  for (size_t i = 0; i < times.size() && i < profiles_.size(); ++i)
    profiles_[i].record(times[i].startSeconds, times[i].seconds);
}

void Program::checkRunArguments(const void *const *inputs, void *const *outputs,
                                bool onDevice) {
  if (training_)
    throw Error("this is a training artifact: it runs through the trainer API "
                "(tccrt_trainer_create, tccrt_trainer_step, tccrt_trainer_eval), not tccrt_run");
  if (!bound())
    throw Error(unboundMessage());
  if (!inputs && !inputs_.empty())
    throw Error("inputs is null; the program has " + std::to_string(inputs_.size()) + " inputs");
  if (!outputs && !outputs_.empty())
    throw Error("outputs is null; the program has " + std::to_string(outputs_.size()) +
                " outputs");
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const TensorDesc &in = inputs_[i];
    if (!inputs[i] && in.bytes > 0)
      throw Error("input " + std::to_string(i) + " ('" + in.name + "') is null");
    if (in.specializedValue.empty())
      continue;
    const void *value = inputs[i];
    std::vector<uint8_t> copied;
    if (onDevice) {
      copied.resize(in.bytes);
      cuda_->copyToHost(copied.data(), inputs[i], in.bytes);
      value = copied.data();
    }
    if (std::memcmp(value, in.specializedValue.data(), in.bytes) != 0)
      throw Error("input " + std::to_string(i) + " ('" + in.name + "') differs from the value "
                  "the program was compiled for: the model needs this input's value at compile "
                  "time (a shape or a count), so recompile with this input");
  }
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (!outputs[i] && outputs_[i].bytes > 0)
      throw Error("output " + std::to_string(i) + " ('" + outputs_[i].name + "') is null");
}

void *Program::cudaStream() const { return cuda_ ? cuda_->stream() : nullptr; }

void Program::runOnDevice(const void *const *inputs, void *const *outputs) {
  if (!cuda_)
    throw Error("this is a CPU program: its tensors are in host memory (run it with tccrt_run)");
  checkRunArguments(inputs, outputs, true);
  cuda_->run(inputs, outputs, true);
  if (profiling_)
    collectCudaProfile();
}

void Program::run(const void *const *inputs, void *const *outputs) {
  checkRunArguments(inputs, outputs, false);
  if (cuda_) {
    cuda_->run(inputs, outputs);
    if (profiling_)
      collectCudaProfile();
    return;
  }

  addresses_.resize(buffers_.size());
  for (size_t i = 0; i < buffers_.size(); ++i)
    addresses_[i] = bufferAddress(buffers_[i], inputs, outputs);

  int threads = numThreads_;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point runStart = profiling_ ? Clock::now() : Clock::time_point();
  for (size_t index = 0; index < steps_.size(); ++index) {
    const Step &step = steps_[index];
    const Clock::time_point stepStart = profiling_ ? Clock::now() : Clock::time_point();
    if (auto *s = std::get_if<KernelStep>(&step)) {
      args_.resize(s->args.size());
      for (size_t i = 0; i < s->args.size(); ++i)
        args_[i] = addresses_[s->args[i]];
      kernels_[s->kernel](args_.data(), threads);
    } else if (auto *s = std::get_if<GemmStep>(&step)) {
      SgemmEpilogue epilogue;
      if (s->hasBias)
        epilogue.bias = static_cast<const float *>(addresses_[s->bias]);
      if (s->activation == GemmActivation::Relu) {
        epilogue.clamp = true;
        epilogue.lo = 0.0f;
        epilogue.hi = INFINITY;
      } else if (s->activation == GemmActivation::GeluErf) {
        epilogue.activation.kind = ActivationKind::GeluErf;
      } else if (s->activation == GemmActivation::GeluTanh) {
        epilogue.activation.kind = ActivationKind::GeluTanh;
      }
      runGemm(s->geometry, addresses_[s->a], addresses_[s->b], addresses_[s->c], threads,
              s->packedA.get(), buffers_[s->a].kind == BufferKind::Constant, s->packedB.get(),
              buffers_[s->b].kind == BufferKind::Constant, &epilogue);
    } else if (auto *s = std::get_if<ConvStep>(&step)) {
      bool constantWeight = buffers_[s->weight].kind == BufferKind::Constant;
      if (s->geometry.dtype == TCCRT_F32) {
        ConvEpilogue epilogue;
        if (s->hasBias)
          epilogue.bias = static_cast<const float *>(addresses_[s->bias]);
        if (s->hasResidual)
          epilogue.residual = static_cast<const float *>(addresses_[s->residual]);
        epilogue.clamp = s->clamp;
        epilogue.lo = s->clampMin;
        epilogue.hi = s->clampMax;
        epilogue.activation = s->activation;
        runConv(s->geometry, static_cast<const float *>(addresses_[s->input]),
                static_cast<const float *>(addresses_[s->weight]),
                static_cast<float *>(addresses_[s->output]), static_cast<float *>(workspace_),
                threads, &s->weightCache, constantWeight, &epilogue);
      } else
        runConv16(s->geometry, static_cast<const uint16_t *>(addresses_[s->input]),
                  static_cast<const uint16_t *>(addresses_[s->weight]),
                  static_cast<uint16_t *>(addresses_[s->output]), workspace_, threads,
                  &s->weightCache, constantWeight);
    } else if (auto *s = std::get_if<PoolStep>(&step)) {
      runPool(s->geometry, static_cast<const float *>(addresses_[s->input]),
              static_cast<float *>(addresses_[s->output]), threads);
    } else if (auto *s = std::get_if<TopKStep>(&step)) {
      runTopK(s->geometry, addresses_[s->input], addresses_[s->values],
              static_cast<int64_t *>(addresses_[s->indices]));
    } else if (auto *s = std::get_if<AttentionStep>(&step)) {
      const AttentionGeometry &g = s->geometry;
      runAttention(g, addresses_[s->q], addresses_[s->k], addresses_[s->v],
                   g.hasMask ? static_cast<const bool *>(addresses_[s->mask]) : nullptr,
                   g.hasBias ? static_cast<const float *>(addresses_[s->bias]) : nullptr,
                   addresses_[s->output], workspace_, threads);
    } else if (auto *s = std::get_if<AttentionGradStep>(&step)) {
      const AttentionGeometry &g = s->geometry;
      runAttentionBackward(g, addresses_[s->q], addresses_[s->k], addresses_[s->v],
                           addresses_[s->output], addresses_[s->gradOutput],
                           g.hasMask ? static_cast<const bool *>(addresses_[s->mask]) : nullptr,
                           g.hasBias ? static_cast<const float *>(addresses_[s->bias]) : nullptr,
                           addresses_[s->gradQ], addresses_[s->gradK], addresses_[s->gradV],
                           workspace_, threads);
    } else if (auto *s = std::get_if<CollectiveStep>(&step)) {
      Communicator *comm = s->groupSize > 1 ? processCommunicator() : nullptr;
      std::string what = "launch " + std::to_string(index) + " (" + stepNames_[index] +
                         (stepNodes_[index].empty() ? "" : ", nodes " + stepNodes_[index]) + ")";
      if (s->async || s->kind == CollectiveKind::Send) {
        // Sends (pipeline stages) complete by the end of the run: the peer may receive them
        // in another order than they were sent.
        pending_.resize(steps_.size());
        pending_[index] = startCollective(*s, meshSizes_, addresses_[s->input],
                                          addresses_[s->output], comm, what);
      } else {
        runCollective(*s, meshSizes_, addresses_[s->input], addresses_[s->output], comm,
                      collectiveScratch_, what);
      }
    } else if (auto *s = std::get_if<WaitStep>(&step)) {
      if (s->collective < pending_.size() && pending_[s->collective]) {
        processCommunicator()->finish(*pending_[s->collective]);
        pending_[s->collective].reset();
      }
    } else if (auto *s = std::get_if<CopyStep>(&step)) {
      size_t bytes = buffers_[s->source].bytes;
      if (bytes > 0 && addresses_[s->source] != addresses_[s->target])
        std::memmove(addresses_[s->target], addresses_[s->source], bytes);
    }
    // Started collectives progress while the program computes (MPI moves data only inside
    // its calls).
    for (std::optional<PendingCollective> &p : pending_)
      if (p) {
        processCommunicator()->poke(*p);
        break;
      }
    if (profiling_) {
      Clock::time_point end = Clock::now();
      profiles_[index].record(std::chrono::duration<double>(stepStart - runStart).count(),
                              std::chrono::duration<double>(end - stepStart).count());
    }
  }
  for (std::optional<PendingCollective> &p : pending_)
    if (p) {
      processCommunicator()->finish(*p);
      p.reset();
    }
}

} // namespace tcc::rt
