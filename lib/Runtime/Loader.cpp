//===- Loader.cpp - Verifying and decoding an artifact --------------------===//
//
// An artifact is untrusted input. After the FlatBuffers verifier has checked that every offset
// and vector lies inside the file, this checks what the executor relies on: the version and
// device, dtypes, every index (buffers, kernels, constants, inputs, outputs) in range, every
// buffer's extent inside its base, constants inside constant_data and 64-byte aligned, operand
// shapes of the library calls (as the tk verifiers), and every kernel present in the CPU module,
// whose bytes must match the recorded hash before they reach the dynamic loader. CUDA programs:
// the module's architectures and code, every launch's grid/block/shared memory, only
// KernelLaunch/Gemm/Copy steps, Gemm epilogues; all of it before the driver is touched.
#include "CudaExecutor.h"
#include "DType.h"
#include "HostMemory.h"
#include "Communicator.h"
#include "Program.h"
#include "tcc/Runtime/CpuFeatures.h"
#include "tcc/Runtime/ArtifactHash.h"
#include "tcc/Runtime/artifact_generated.h"
#include "tcc/Support/MeshGeometry.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <thread>
#include <tuple>

namespace tcc::rt {

void AlignedBytes::allocate(size_t n) {
  size = n;
  size_t rounded = (n + 63) / 64 * 64;
  data = static_cast<uint8_t *>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
  if (!data)
    throw std::bad_alloc();
}

AlignedBytes::~AlignedBytes() { std::free(data); }

int resolveNumThreads(int requested) {
  if (requested < 0)
    throw Error("num_threads must be >= 0 (0 = all cores), got " + std::to_string(requested));
  if (requested == 0) {
    unsigned cores = std::thread::hardware_concurrency();
    return cores == 0 ? 1 : (int)cores;
  }
  return requested;
}

namespace fb = tcc::artifact;

namespace {

/// Largest tensor the runtime accepts (bytes); keeps every size computation far from overflow.
constexpr uint64_t kMaxBytes = uint64_t(1) << 56;

const char *kindName(BufferKind k) {
  switch (k) {
  case BufferKind::Input:
    return "input";
  case BufferKind::Output:
    return "output";
  case BufferKind::Constant:
    return "constant";
  case BufferKind::Arena:
    return "arena";
  }
  return "?";
}

/// "1 kernel", "3 kernels".
std::string countOf(size_t n, const char *what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

} // namespace

std::string shapeString(tccrt_dtype dtype, const Shape &s) {
  std::string out = std::string(dtypeName(dtype)) + "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

tccrt_dtype checkDType(unsigned d, const std::string &what) {
  if (!isValidDType(d))
    throw Error(what + " has an invalid dtype (" + std::to_string(d) + ")");
  return (tccrt_dtype)d;
}

/// A [long] vector as a Shape. The FlatBuffers verifier checks a vector's length word, not the
/// alignment of its 8-byte elements; a damaged offset can misalign them.
Shape readShape(const flatbuffers::Vector<int64_t> *v) {
  if (!v)
    return Shape();
  // An empty vector (a rank-0 shape) has no elements to misalign.
  if (v->size() != 0 && reinterpret_cast<uintptr_t>(v->data()) % alignof(int64_t) != 0)
    throw Error("damaged file: a vector of 64-bit integers is misaligned");
  return Shape(v->begin(), v->end());
}

/// Bytes of a contiguous tensor; throws if a dim is negative or the size is absurd.
size_t tensorBytes(tccrt_dtype dtype, const Shape &shape, const std::string &what) {
  if (shape.size() > 64)
    throw Error(what + " has rank " + std::to_string(shape.size()) + " (at most 64)");
  uint64_t bytes = dtypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(what + " has a negative dim: " + shapeString(dtype, shape));
    if (d != 0 && bytes > kMaxBytes / (uint64_t)d)
      throw Error(what + " is too large: " + shapeString(dtype, shape));
    bytes *= (uint64_t)d;
  }
  for (int64_t d : shape) // an empty tensor with absurd other dims is still absurd
    if ((uint64_t)d > kMaxBytes)
      throw Error(what + " is too large: " + shapeString(dtype, shape));
  return (size_t)bytes;
}

namespace {

TensorDesc readTensor(const fb::TensorSpec *spec, const std::string &what) {
  if (!spec)
    throw Error(what + " is missing");
  TensorDesc t;
  t.name = spec->name() ? spec->name()->str() : "";
  t.dtype = checkDType(spec->dtype(), what);
  t.shape = readShape(spec->shape());
  t.bytes = tensorBytes(t.dtype, t.shape, what + " '" + t.name + "'");
  return t;
}

Shape readAttr(const flatbuffers::Vector<int64_t> *v) { return readShape(v); }

} // namespace

std::unique_ptr<Program> Program::load(const void *data, size_t size,
                                       const LoadOptions &options) {
  if (!data && size > 0)
    throw Error("artifact data is null");
  std::unique_ptr<Program> p(new Program());
  p->numThreads_ = resolveNumThreads(options.numThreads);
  if (options.deviceOrdinal < 0)
    throw Error("device_ordinal must be >= 0, got " + std::to_string(options.deviceOrdinal));
  p->file_.allocate(size);
  if (size > 0)
    std::memcpy(p->file_.data, data, size);
  const uint8_t *base = p->file_.data;

  // ---- Structure -------------------------------------------------------------------------------
  if (size < 8 || !fb::ProgramBufferHasIdentifier(base))
    throw Error("not a tcc artifact (" + std::to_string(size) +
                " bytes; expected the file identifier \"TCCA\")");
  if (size >= (size_t(1) << 31))
    throw Error("artifact of " + std::to_string(size) + " bytes exceeds the 2 GiB FlatBuffers limit");
  flatbuffers::Verifier verifier(base, size, /*max_depth=*/64, /*max_tables=*/1u << 28);
  if (!fb::VerifyProgramBuffer(verifier))
    throw Error("damaged artifact: its FlatBuffers structure does not verify");
  const fb::Program *program = fb::GetProgram(base);
  p->decode(program, base);
  if (program->training())
    p->decodeTraining(program->training(), base);
  if (p->device_ == TCCRT_DEVICE_CUDA)
    p->startCuda(options); // everything verified: now the driver
  else if (!program->training() && p->arenaBytes_ > 0)
    p->arena_ = hostAllocate(p->arenaBytes_);
  return p;
}

void Program::startCuda(const LoadOptions &options) {
  cuda_ = std::make_unique<cuda::CudaExecutor>(*this, options, 0);
  if (training_)
    for (EntryDesc &e : training_->entries)
      e.program->cuda_ = std::make_unique<cuda::CudaExecutor>(*e.program, options, cuda_->arena());
}

namespace {

/// "sm_<digits>[a]" / "compute_<digits>[a]".
bool wellFormedArch(const std::string &arch, const std::string &prefix) {
  if (arch.compare(0, prefix.size(), prefix) != 0)
    return false;
  std::string rest = arch.substr(prefix.size());
  if (!rest.empty() && rest.back() == 'a')
    rest.pop_back();
  return !rest.empty() && rest.size() <= 4 &&
         std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// The largest dynamic shared memory any CUDA GPU grants one block (227 KiB opt-in on sm_90
/// and sm_100); the executor checks the actual device's limit.
constexpr uint32_t kMaxSharedBytes = 227 * 1024;

/// A CUDA launch's grid, block and dynamic shared memory, checked against the limits every
/// CUDA GPU has (the executor checks the shared memory against the actual device).
void readCudaGeometry(const fb::KernelLaunch *s, KernelStep &step, const std::string &what) {
  auto dims = [&](const flatbuffers::Vector<uint32_t> *v, const char *name, uint32_t *out) {
    if (!v || v->size() != 3)
      throw Error(what + ": a CUDA launch needs a " + name + " of 3 dims (x, y, z), got " +
                  std::to_string(v ? v->size() : 0));
    for (unsigned j = 0; j < 3; ++j) {
      out[j] = v->Get(j);
      if (out[j] < 1)
        throw Error(what + ": " + name + " dim " + "xyz"[j] + " is 0 (every dim must be >= 1)");
    }
  };
  dims(s->grid(), "grid", step.grid);
  dims(s->block(), "block", step.block);
  auto triple = [](const uint32_t *d) {
    return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " +
           std::to_string(d[2]) + ")";
  };
  if (step.grid[0] > 0x7fffffffu || step.grid[1] > 65535 || step.grid[2] > 65535)
    throw Error(what + ": grid " + triple(step.grid) +
                " exceeds CUDA's limits (2^31 - 1, 65535, 65535)");
  uint64_t threads = (uint64_t)step.block[0] * step.block[1] * step.block[2];
  if (threads > 1024 || step.block[2] > 64)
    throw Error(what + ": block " + triple(step.block) + " has " + std::to_string(threads) +
                " threads; CUDA allows at most 1024 a block (and z <= 64)");
  step.sharedBytes = s->shared_bytes();
  if (step.sharedBytes > kMaxSharedBytes)
    throw Error(what + ": " + std::to_string(step.sharedBytes) +
                " bytes of dynamic shared memory exceed any CUDA GPU's " +
                std::to_string(kMaxSharedBytes) + " bytes a block");
}

} // namespace

void Program::decodeCudaModule(const fb::CudaModule *module, size_t numKernels) {
  size_t images = module && module->images() ? module->images()->size() : 0;
  size_t ptxs = module && module->ptx() ? module->ptx()->size() : 0;
  if (numKernels > 0 && !module)
    throw Error("the artifact has " + countOf(numKernels, "kernel") + " but no CUDA module");
  if (numKernels > 0 && images == 0 && ptxs == 0)
    throw Error("the artifact has " + countOf(numKernels, "kernel") +
                " but its CUDA module holds no cubin and no PTX");
  if (!module)
    return;
  cudaCompiler_ = module->compiler() ? module->compiler()->str() : "";
  for (size_t i = 0; i < images; ++i) {
    const fb::CudaImage *image = module->images()->Get((unsigned)i);
    std::string what = "CUDA image " + std::to_string(i);
    if (!image)
      throw Error(what + " is missing");
    std::string arch = image->arch() ? image->arch()->str() : "";
    if (!wellFormedArch(arch, "sm_"))
      throw Error(what + " has arch '" + arch + "', expected sm_<digits>[a] (e.g. sm_90)");
    if (!image->cubin() || image->cubin()->size() == 0)
      throw Error(what + " (" + arch + ") has no cubin bytes");
    cubins_.push_back(cuda::CudaCode{arch, image->cubin()->Data(), image->cubin()->size()});
  }
  ptxText_.reserve(ptxs); // c_str() pointers below must stay put
  for (size_t i = 0; i < ptxs; ++i) {
    const fb::CudaPtx *ptx = module->ptx()->Get((unsigned)i);
    std::string what = "CUDA PTX " + std::to_string(i);
    if (!ptx)
      throw Error(what + " is missing");
    std::string arch = ptx->arch() ? ptx->arch()->str() : "";
    if (!wellFormedArch(arch, "compute_"))
      throw Error(what + " has arch '" + arch +
                  "', expected compute_<digits>[a] (e.g. compute_80)");
    if (!ptx->ptx() || ptx->ptx()->size() == 0)
      throw Error(what + " (" + arch + ") is empty");
    std::string text = ptx->ptx()->str();
    if (text.find('\0') != std::string::npos)
      throw Error(what + " (" + arch + ") contains a NUL byte");
    ptxText_.push_back(std::move(text)); // NUL-terminated for the driver
    ptx_.push_back(cuda::CudaCode{arch, reinterpret_cast<const uint8_t *>(ptxText_.back().c_str()),
                                  ptxText_.back().size()});
  }
}

void Program::decode(const fb::Program *program, const uint8_t *base) {
  Program *p = this;

  // ---- Header ----------------------------------------------------------------------------------
  if (program->version() != fb::Version_Current)
    throw Error("artifact version " + std::to_string(program->version()) +
                ", this runtime reads " + std::to_string((unsigned)fb::Version_Current));
  if (program->device() != fb::Device_CPU && program->device() != fb::Device_CUDA)
    throw Error("the artifact names an unknown device (" +
                std::to_string((unsigned)program->device()) + ")");
  p->device_ = program->device() == fb::Device_CUDA ? TCCRT_DEVICE_CUDA : TCCRT_DEVICE_CPU;
  const bool onCuda = p->device_ == TCCRT_DEVICE_CUDA;
  p->producer_ = program->producer() ? program->producer()->str() : "";

  if (auto *inputs = program->inputs())
    for (unsigned i = 0; i < inputs->size(); ++i) {
      std::string what = "input " + std::to_string(i);
      p->inputs_.push_back(readTensor(inputs->Get(i), what));
      if (const auto *value = inputs->Get(i)->specialized_value()) {
        if (value->size() != p->inputs_.back().bytes)
          throw Error("damaged artifact: " + what + "'s specialised value has " +
                      std::to_string(value->size()) + " bytes, the input " +
                      std::to_string(p->inputs_.back().bytes));
        p->inputs_.back().specializedValue.assign(value->begin(), value->end());
      }
    }
  if (auto *outputs = program->outputs())
    for (unsigned i = 0; i < outputs->size(); ++i)
      p->outputs_.push_back(readTensor(outputs->Get(i), "output " + std::to_string(i)));

  // ---- Constants -------------------------------------------------------------------------------
  const auto *constantData = program->constant_data();
  uint64_t constantBytes = constantData ? constantData->size() : 0;
  if (constantData && constantBytes > 0 && (constantData->Data() - base) % 64 != 0)
    throw Error("damaged artifact: constant_data is not 64-byte aligned in the file (offset " +
                std::to_string(constantData->Data() - base) + ")");
  p->constantData_ = constantBytes > 0 ? constantData->Data() : nullptr;
  p->constantDataBytes_ = constantBytes;
  if (auto *constants = program->constants())
    for (unsigned i = 0; i < constants->size(); ++i) {
      const fb::Constant *c = constants->Get(i);
      std::string what = "constant " + std::to_string(i);
      if (!c)
        throw Error(what + " is missing");
      if (c->name())
        what += " '" + c->name()->str() + "'";
      if (c->offset() % 64 != 0)
        throw Error(what + " has offset " + std::to_string(c->offset()) +
                    ", not a multiple of 64");
      if (c->offset() > constantBytes || c->size() > constantBytes - c->offset())
        throw Error(what + " (" + std::to_string(c->size()) + " bytes at offset " +
                    std::to_string(c->offset()) + ") ends past constant_data (" +
                    std::to_string(constantBytes) + " bytes)");
      p->constants_.push_back(constantData ? constantData->Data() + c->offset() : nullptr);
      p->constantSizes_.push_back(c->size());
    }

  // ---- Buffers ---------------------------------------------------------------------------------
  p->arenaBytes_ = program->arena_bytes();
  if (p->arenaBytes_ > kMaxBytes)
    throw Error("arena of " + std::to_string(p->arenaBytes_) + " bytes is too large");
  if (auto *buffers = program->buffers())
    for (unsigned i = 0; i < buffers->size(); ++i) {
      const fb::Buffer *b = buffers->Get(i);
      std::string what = "buffer " + std::to_string(i);
      if (!b)
        throw Error(what + " is missing");
      BufferDesc d;
      if (b->kind() > fb::BufferKind_MAX)
        throw Error(what + " has an invalid kind (" + std::to_string((unsigned)b->kind()) + ")");
      d.kind = (BufferKind)b->kind();
      d.index = b->index();
      d.offset = b->offset();
      d.dtype = checkDType(b->dtype(), what);
      d.shape = readShape(b->shape());
      d.bytes = tensorBytes(d.dtype, d.shape, what);
      what += " (" + std::string(kindName(d.kind)) + " " + std::to_string(d.index) + ", " +
              shapeString(d.dtype, d.shape) + " at offset " + std::to_string(d.offset) + ")";
      uint64_t limit = 0;
      std::string baseName;
      switch (d.kind) {
      case BufferKind::Input:
        if (d.index >= p->inputs_.size())
          throw Error(what + ": there are " + std::to_string(p->inputs_.size()) + " inputs");
        limit = p->inputs_[d.index].bytes;
        baseName = "input " + std::to_string(d.index);
        break;
      case BufferKind::Output:
        if (d.index >= p->outputs_.size())
          throw Error(what + ": there are " + std::to_string(p->outputs_.size()) + " outputs");
        limit = p->outputs_[d.index].bytes;
        baseName = "output " + std::to_string(d.index);
        break;
      case BufferKind::Constant:
        if (d.index >= p->constants_.size())
          throw Error(what + ": there are " + std::to_string(p->constants_.size()) +
                      " constants");
        limit = p->constantSizes_[d.index];
        baseName = "constant " + std::to_string(d.index);
        break;
      case BufferKind::Arena:
        d.index = 0;
        limit = p->arenaBytes_;
        baseName = "the arena";
        break;
      }
      if (d.offset > limit || d.bytes > limit - d.offset)
        throw Error(what + ": its " + std::to_string(d.bytes) + " bytes end past " + baseName +
                    " (" + std::to_string(limit) + " bytes)");
      if (d.offset % dtypeSize(d.dtype) != 0)
        throw Error(what + ": offset is not a multiple of the element size");
      p->buffers_.push_back(std::move(d));
    }

  // ---- Kernels and the CPU module --------------------------------------------------------------
  std::vector<std::string> kernelNames;
  std::vector<std::vector<TensorDesc>> kernelParams;
  if (auto *kernels = program->kernels())
    for (unsigned i = 0; i < kernels->size(); ++i) {
      const fb::Kernel *k = kernels->Get(i);
      if (!k || !k->name() || k->name()->size() == 0)
        throw Error("kernel " + std::to_string(i) + " has no name");
      kernelNames.push_back(k->name()->str());
      if (!k->params())
        throw Error("kernel '" + kernelNames.back() +
                    "' has no params (the artifact writer must list its parameter types)");
      std::vector<TensorDesc> params;
      for (unsigned j = 0; j < k->params()->size(); ++j)
        params.push_back(readTensor(k->params()->Get(j), "parameter " + std::to_string(j) +
                                                             " of kernel '" +
                                                             kernelNames.back() + "'"));
      kernelParams.push_back(std::move(params));
    }
  p->kernelNames_ = kernelNames;
  if (onCuda) {
    decodeCudaModule(program->cuda_module(), kernelNames.size());
  } else if (!kernelNames.empty()) {
    const fb::CpuModule *module = program->cpu_module();
    if (!module || !module->shared_object() || module->shared_object()->size() == 0)
      throw Error("the artifact has " + countOf(kernelNames.size(), "kernel") +
                  " but no CPU module");
    const auto *object = module->shared_object();
    if (module->shared_object_hash() == 0)
      throw Error("the CPU module has no shared_object_hash (the artifact writer must set it to "
                  "tcc::rt::artifactHash of the shared object, see ArtifactHash.h)");
    if (!artifactHashMatches(object->Data(), object->size(), module->shared_object_hash()))
      throw Error("damaged artifact: the CPU module's bytes do not match their hash");
    if (const auto *isa = module->isa())
      for (unsigned j = 0; j < isa->size(); ++j) {
        std::string feature = isa->Get(j) ? isa->Get(j)->str() : "";
        if (!cpuHasFeature(feature))
          throw Error("the artifact's kernels were compiled for a CPU with '" + feature +
                      "', which this CPU lacks: compile the model on (or for) this machine");
      }
    p->module_ = std::make_unique<CpuModule>(object->Data(), object->size());
    for (const std::string &name : kernelNames) {
      CpuKernelFn fn = p->module_->lookup(name);
      if (!fn)
        throw Error("kernel '" + name + "' is not exported by the CPU module" +
                    (module->compiler() ? " (built by " + module->compiler()->str() + ")" : ""));
      p->kernels_.push_back(fn);
    }
  }

  // ---- Launch list -----------------------------------------------------------------------------
  // One packed form per constant GEMM operand read the same way (GemmStep::packedA/B).
  using PackingKey = std::tuple<uint32_t, uint64_t, bool, bool, int64_t, int64_t, int64_t, Shape>;
  std::map<PackingKey, std::shared_ptr<PackedOperand>> packings;
  auto sharedPacking = [&](const BufferDesc &operand, bool isA, bool trans, int64_t outer,
                           int64_t k, int64_t batches, const Shape &batchStrides,
                           std::shared_ptr<PackedOperand> own) {
    if (operand.kind != BufferKind::Constant)
      return own;
    PackingKey key{operand.index, operand.offset, isA, trans, outer, k, batches, batchStrides};
    return packings.emplace(key, std::move(own)).first->second;
  };
  auto buffer = [&](uint32_t index, const std::string &what) -> const BufferDesc & {
    if (index >= p->buffers_.size())
      throw Error(what + " names buffer " + std::to_string(index) + "; there are " +
                  std::to_string(p->buffers_.size()));
    return p->buffers_[index];
  };
  auto writable = [&](uint32_t index, const std::string &what) -> const BufferDesc & {
    const BufferDesc &b = buffer(index, what);
    if (b.kind == BufferKind::Input || b.kind == BufferKind::Constant)
      throw Error(what + " writes buffer " + std::to_string(index) + ", which is " +
                  (b.kind == BufferKind::Input ? "an input" : "a constant"));
    return b;
  };
  if (auto *mesh = program->mesh_sizes())
    p->meshSizes_ = readShape(mesh); // (alignment checked: the artifact fuzzer's)
  if (auto *launches = program->launches())
    for (unsigned i = 0; i < launches->size(); ++i) {
      const fb::Launch *launch = launches->Get(i);
      std::string what = "launch " + std::to_string(i);
      if (!launch)
        throw Error(what + " is missing");
      if (launch->step_type() != fb::Step_NONE && !launch->step())
        throw Error(what + " has a step type but no step");
      switch (launch->step_type()) {
      case fb::Step_KernelLaunch: {
        const fb::KernelLaunch *s = launch->step_as_KernelLaunch();
        if (s->kernel() >= kernelNames.size())
          throw Error(what + " runs kernel " + std::to_string(s->kernel()) + "; there are " +
                      std::to_string(kernelNames.size()));
        what += " (kernel '" + kernelNames[s->kernel()] + "')";
        KernelStep step{s->kernel(), {}};
        const std::vector<TensorDesc> &params = kernelParams[s->kernel()];
        size_t numArgs = s->args() ? s->args()->size() : 0;
        if (numArgs != params.size())
          throw Error(what + " passes " + std::to_string(numArgs) + " buffers; the kernel takes " +
                      std::to_string(params.size()));
        for (size_t j = 0; j < numArgs; ++j) {
          uint32_t a = s->args()->Get((unsigned)j);
          const BufferDesc &b = buffer(a, what);
          if (b.dtype != params[j].dtype || b.shape != params[j].shape)
            throw Error(what + " passes buffer " + std::to_string(a) + " (" +
                        shapeString(b.dtype, b.shape) + ") as parameter " + std::to_string(j) +
                        ", which is " + shapeString(params[j].dtype, params[j].shape));
          step.args.push_back(a);
        }
        if (onCuda)
          readCudaGeometry(s, step, what);
        p->steps_.push_back(std::move(step));
        break;
      }
      case fb::Step_Gemm: {
        const fb::Gemm *s = launch->step_as_Gemm();
        what += " (gemm)";
        const BufferDesc &a = buffer(s->a(), what), &b = buffer(s->b(), what),
                         &c = writable(s->c(), what);
        bool gemmTypes = c.dtype == TCCRT_F16 || c.dtype == TCCRT_BF16 ||
                         c.dtype == TCCRT_F32 || c.dtype == TCCRT_F64;
        if (a.dtype != c.dtype || b.dtype != c.dtype || !gemmTypes)
          throw Error(what + ": operands must all be f16, all bf16, all f32 or all f64, got " +
                      shapeString(a.dtype, a.shape) + ", " + shapeString(b.dtype, b.shape) +
                      ", " + shapeString(c.dtype, c.shape));
        GemmStep step{s->a(), s->b(), s->c(), {}};
        try {
          step.geometry = makeGemmGeometry(c.dtype, a.shape, b.shape, c.shape, s->trans_a(),
                                           s->trans_b(), s->alpha(), s->beta());
        } catch (const Error &e) {
          throw Error(what + ": " + e.what());
        }
        if (s->activation() > fb::GemmActivation_MAX)
          throw Error(what + " has an invalid activation (" +
                      std::to_string((unsigned)s->activation()) + ")");
        step.activation = (GemmActivation)s->activation();
        step.hasBias = s->has_bias();
        if (!onCuda && (step.hasBias || step.activation != GemmActivation::None) &&
            (c.dtype != TCCRT_F32 || step.activation == GemmActivation::GeluTanh))
          throw Error(what + " has an epilogue (" + (step.hasBias ? "bias, " : "") +
                      fb::EnumNameGemmActivation(s->activation()) + ") on " +
                      dtypeName(c.dtype) +
                      ": the CPU runtime applies a bias and ReLU to f32 GEMMs only");
        if (step.hasBias) {
          step.bias = s->bias();
          const BufferDesc &bias = buffer(step.bias, what + "'s bias");
          Shape want{step.geometry.n};
          if (bias.dtype != c.dtype || bias.shape != want)
            throw Error(what + ": its bias (buffer " + std::to_string(step.bias) + ", " +
                        shapeString(bias.dtype, bias.shape) + ") must be " +
                        shapeString(c.dtype, want) + ", one value per column of c " +
                        shapeString(c.dtype, c.shape));
        }
        if (!onCuda) {
          const GemmGeometry &g = step.geometry;
          step.packedA = sharedPacking(a, true, g.transA, g.m, g.k, g.numBatches, g.aBatchStrides,
                                       std::move(step.packedA));
          step.packedB = sharedPacking(b, false, g.transB, g.n, g.k, g.numBatches,
                                       g.bBatchStrides, std::move(step.packedB));
        }
        if (onCuda && step.geometry.k == 0 && step.geometry.m > 0 && step.geometry.n > 0 &&
            step.geometry.numBatches > 0 && (step.geometry.beta != 0 || step.hasBias))
          throw Error(what + ": K = 0 with beta != 0 or a bias is an elementwise update of c, "
                      "not a GEMM; the compiler must emit it as a kernel");
        p->steps_.push_back(std::move(step));
        break;
      }
      case fb::Step_Conv: {
        const fb::Conv *s = launch->step_as_Conv();
        what += " (conv)";
        if (onCuda)
          throw Error(what + ": a CUDA program cannot have library conv steps (the compiler "
                      "generates convolution kernels for CUDA)");
        const BufferDesc &x = buffer(s->input(), what), &w = buffer(s->weight(), what),
                         &y = writable(s->output(), what);
        bool convType = y.dtype == TCCRT_F32 || y.dtype == TCCRT_F16 || y.dtype == TCCRT_BF16;
        if (x.dtype != y.dtype || w.dtype != y.dtype || !convType)
          throw Error(what + ": operands must all be f32, all f16 or all bf16, got " +
                      shapeString(x.dtype, x.shape) + ", " + shapeString(w.dtype, w.shape) +
                      ", " + shapeString(y.dtype, y.shape));
        ConvStep step{s->input(), s->weight(), s->output(), {}};
        const bool last = s->channels_last();
        if (last && (y.dtype != TCCRT_F32 || x.shape.size() < 3 || y.shape.size() < 3))
          throw Error(what + ": a channels-last convolution must be f32 with rank >= 3, got " +
                      shapeString(x.dtype, x.shape) + " -> " + shapeString(y.dtype, y.shape));
        // [N, S..., C] -> [N, C, S...]: the geometry is the channels-first convolution's.
        auto firstView = [&](const Shape &shape) {
          if (!last)
            return shape;
          Shape v{shape[0], shape.back()};
          v.insert(v.end(), shape.begin() + 1, shape.end() - 1);
          return v;
        };
        try {
          step.geometry = makeConvGeometry(firstView(x.shape), w.shape, firstView(y.shape),
                                           readAttr(s->strides()), readAttr(s->pad_low()),
                                           readAttr(s->pad_high()), readAttr(s->dilations()),
                                           s->groups(), readAttr(s->lhs_dilation()), y.dtype);
        } catch (const Error &e) {
          throw Error(what + ": " + e.what());
        }
        step.geometry.channelsLast = last;
        step.hasBias = s->has_bias();
        step.hasResidual = s->has_residual();
        step.clamp = s->clamp();
        if ((step.hasBias || step.hasResidual || step.clamp) && y.dtype != TCCRT_F32)
          throw Error(what + " has an epilogue on " + dtypeName(y.dtype) +
                      ": convolution epilogues are for f32 convolutions");
        if (step.hasBias) {
          step.bias = s->bias();
          const BufferDesc &bias = buffer(step.bias, what + "'s bias");
          Shape want{last ? y.shape.back() : y.shape[1]};
          if (bias.dtype != y.dtype || bias.shape != want)
            throw Error(what + ": its bias (buffer " + std::to_string(step.bias) + ", " +
                        shapeString(bias.dtype, bias.shape) + ") must be " +
                        shapeString(y.dtype, want) + ", one value per output channel");
        }
        if (step.hasResidual) {
          step.residual = s->residual();
          const BufferDesc &r = buffer(step.residual, what + "'s residual");
          if (r.dtype != y.dtype || r.shape != y.shape)
            throw Error(what + ": its residual (buffer " + std::to_string(step.residual) + ", " +
                        shapeString(r.dtype, r.shape) + ") must have the output's type " +
                        shapeString(y.dtype, y.shape));
        }
        if (step.clamp) {
          double lo = s->clamp_min(), hi = s->clamp_max();
          if (!(lo <= hi)) // NaN bounds fail too
            throw Error(what + ": its clamp bounds [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "] are not an interval");
          step.clampMin = (float)lo;
          step.clampMax = (float)hi;
        }
        p->workspaceBytes_ = std::max(p->workspaceBytes_, step.geometry.workspaceBytes);
        p->steps_.push_back(std::move(step));
        break;
      }
      case fb::Step_TopK: {
        const fb::TopK *s = launch->step_as_TopK();
        what += " (topk)";
        if (onCuda)
          throw Error(what + ": a CUDA program cannot have library top-k steps (the compiler "
                      "generates top-k kernels for CUDA)");
        const BufferDesc &x = buffer(s->input(), what), &v = writable(s->values(), what),
                         &ix = writable(s->indices(), what);
        try {
          p->steps_.push_back(TopKStep{s->input(), s->values(), s->indices(),
                                       makeTopKGeometry(x.dtype, x.shape, v.dtype, v.shape,
                                                        ix.dtype, ix.shape, s->dim(),
                                                        s->largest())});
        } catch (const Error &e) {
          throw Error(what + ": " + e.what());
        }
        break;
      }
      case fb::Step_Pool: {
        const fb::Pool *s = launch->step_as_Pool();
        what += " (pool)";
        if (onCuda)
          throw Error(what + ": a CUDA program cannot have library pooling steps (the compiler "
                      "generates pooling kernels for CUDA)");
        if (s->kind() > fb::PoolKind_MAX)
          throw Error(what + " has an invalid kind (" + std::to_string((int)s->kind()) + ")");
        const BufferDesc &x = buffer(s->input(), what), &y = writable(s->output(), what);
        if (x.dtype != y.dtype)
          throw Error(what + ": input " + shapeString(x.dtype, x.shape) + " and output " +
                      shapeString(y.dtype, y.shape) + " differ in element type");
        try {
          p->steps_.push_back(PoolStep{
              s->input(), s->output(),
              makePoolGeometry(x.dtype, x.shape, y.shape, s->kind() == fb::PoolKind_Max,
                               readAttr(s->window()), readAttr(s->strides()),
                               readAttr(s->pad_low()), readAttr(s->pad_high()),
                               readAttr(s->dilations()))});
        } catch (const Error &e) {
          throw Error(what + ": " + e.what());
        }
        break;
      }
      case fb::Step_Attention: {
        const fb::Attention *s = launch->step_as_Attention();
        what += " (attention)";
        if (onCuda)
          throw Error(what + ": a CUDA program cannot have library attention steps (the "
                      "compiler decomposes attention for CUDA)");
        const BufferDesc &q = buffer(s->q(), what), &k = buffer(s->k(), what),
                         &v = buffer(s->v(), what), &out = writable(s->output(), what);
        const BufferDesc *mask = s->has_mask() ? &buffer(s->mask(), what + "'s mask") : nullptr;
        const BufferDesc *bias = s->has_bias() ? &buffer(s->bias(), what + "'s bias") : nullptr;
        const bool bf16 = q.dtype == TCCRT_BF16;
        for (const BufferDesc *b : {&q, &k, &v, &out})
          if (b->dtype != (bf16 ? TCCRT_BF16 : TCCRT_F32))
            throw Error(what + ": q, k, v and output must be all f32 or all bf16, got " +
                        shapeString(b->dtype, b->shape));
        if (bias && (bf16 || bias->dtype != TCCRT_F32))
          throw Error(what + ": the bias must be f32, with f32 q, k and v, got " +
                      shapeString(bias->dtype, bias->shape));
        if (mask && mask->dtype != TCCRT_BOOL)
          throw Error(what + ": the mask must be bool, got " + shapeString(mask->dtype, mask->shape));
        try {
          AttentionStep step{
              s->q(), s->k(), s->v(), s->mask(), s->bias(), s->output(),
              makeAttentionGeometry(q.shape, k.shape, v.shape, mask ? &mask->shape : nullptr,
                                    bias ? &bias->shape : nullptr, out.shape, s->scale(),
                                    s->causal(), s->masked_value(), bf16)};
          p->workspaceBytes_ = std::max(p->workspaceBytes_, step.geometry.workspaceBytes);
          p->steps_.push_back(std::move(step));
        } catch (const Error &e) {
          throw Error(what + ": " + e.what());
        }
        break;
      }
      case fb::Step_Copy: {
        const fb::Copy *s = launch->step_as_Copy();
        what += " (copy)";
        const BufferDesc &src = buffer(s->source(), what), &dst = writable(s->target(), what);
        if (src.bytes != dst.bytes)
          throw Error(what + ": source (" + std::to_string(src.bytes) + " bytes) and target (" +
                      std::to_string(dst.bytes) + " bytes) sizes differ");
        p->steps_.push_back(CopyStep{s->source(), s->target()});
        break;
      }
      case fb::Step_Collective: {
        const fb::Collective *s = launch->step_as_Collective();
        what += " (collective)";
        const BufferDesc &x = buffer(s->input(), what), &y = writable(s->output(), what);
        if (x.dtype != y.dtype)
          throw Error(what + ": input and output dtypes differ");
        CollectiveStep step;
        step.kind = static_cast<CollectiveKind>(s->kind());
        step.reduction = static_cast<Reduction>(s->reduction());
        if (s->kind() > fb::CollectiveKind_MAX || s->reduction() > fb::CollectiveReduction_MAX)
          throw Error(what + ": unknown collective kind or reduction");
        step.input = s->input();
        step.output = s->output();
        if (s->axes())
          step.axes.assign(s->axes()->begin(), s->axes()->end());
        step.dim = s->dim();
        step.dim2 = s->dim2();
        step.async = s->async();
        step.dtype = x.dtype;
        step.inShape = x.shape;
        step.outShape = y.shape;
        try {
          checkCollective(step, p->meshSizes_);
        } catch (const Error &e) {
          throw Error(what + ": " + e.what());
        }
        if (step.async && step.kind != CollectiveKind::AllReduce &&
            step.kind != CollectiveKind::ReduceScatter && step.kind != CollectiveKind::AllGather)
          throw Error(what + ": only all_reduce, reduce_scatter and all_gather run asynchronously");
        p->steps_.push_back(std::move(step));
        break;
      }
      case fb::Step_Wait: {
        const fb::Wait *s = launch->step_as_Wait();
        what += " (wait)";
        uint32_t c = s->collective();
        auto *target = c < p->steps_.size() ? std::get_if<CollectiveStep>(&p->steps_[c]) : nullptr;
        if (!target || !target->async)
          throw Error(what + ": launch " + std::to_string(c) +
                      " is not an earlier asynchronous collective");
        for (const Step &earlier : p->steps_)
          if (auto *w = std::get_if<WaitStep>(&earlier); w && w->collective == c)
            throw Error(what + ": launch " + std::to_string(c) + " is already waited for");
        p->steps_.push_back(WaitStep{c});
        break;
      }
      default:
        throw Error(what + " has an unknown step type (" +
                    std::to_string((unsigned)launch->step_type()) + ")");
      }
      // The model nodes the step computes (for profiles).
      std::string nodes;
      if (const auto *names = launch->nodes())
        for (unsigned j = 0; j < names->size(); ++j)
          if (const flatbuffers::String *n = names->Get(j))
            nodes += (nodes.empty() ? "" : ", ") + n->str();
      p->stepNodes_.push_back(std::move(nodes));
    }
  p->describeSteps();

  // ---- Memory, allocated once and reused across runs (the arena by load or decodeTraining) -----
  p->reserveWorkspace();
}

// ---- Training artifacts ------------------------------------------------------------------------
//
// The root program holds no inputs, outputs or launches; the state's initial values lie in
// initial_data (64-byte aligned, like constant_data); every entry is a complete program, decoded
// and verified by decode(). On top, the bindings: one per program input and output, each role
// with its fixed type (State: the state's dtype and shape; LearningRate 0-d f32; RngKey 0-d
// u64; Loss 0-d f32), inputs-only and outputs-only roles where they belong, at most one output
// per state, and per entry what the trainer can serve:
//   train_step, accumulate_step: exactly one Loss output, no Data outputs (nothing receives them)
//   eval: no State or Loss outputs (evaluation changes no state), no LearningRate input
// Every entry takes the same Data inputs in the same order (names, dtypes, shapes): the batch.
// train_step and eval are required; accumulate_step exactly when grad_accumulation > 1.

namespace {

const char *roleName(BindingRole role) {
  switch (role) {
  case BindingRole::Data:
    return "Data";
  case BindingRole::State:
    return "State";
  case BindingRole::LearningRate:
    return "LearningRate";
  case BindingRole::RngKey:
    return "RngKey";
  case BindingRole::Loss:
    return "Loss";
  }
  return "?";
}

bool sameTensor(const TensorDesc &a, const TensorDesc &b) {
  return a.dtype == b.dtype && a.shape == b.shape;
}

} // namespace

void Program::decodeTraining(const fb::Training *t, const uint8_t *base) {
  if (!inputs_.empty() || !outputs_.empty() || !steps_.empty())
    throw Error("damaged artifact: a training artifact's root program has inputs, outputs or "
                "launches (" + std::to_string(inputs_.size()) + ", " +
                std::to_string(outputs_.size()) + ", " + std::to_string(steps_.size()) + ")");
  auto training = std::make_unique<TrainingDesc>();
  training->config = t->config() ? t->config()->str() : "";
  training->gradAccumulation = t->grad_accumulation();
  if (training->gradAccumulation < 1)
    throw Error("training: grad_accumulation is 0 (at least 1 micro-batch per update)");

  // ---- Distributed artifacts: the mesh, and this process's rank ----------------------------------
  if (const auto *sizes = t->mesh_sizes()) {
    training->meshSizes = readShape(sizes); // (alignment checked: the artifact fuzzer's)
    int64_t world = 1;
    for (int64_t n : training->meshSizes) {
      if (n < 1 || n > 65536)
        throw Error("damaged artifact: mesh axis size " + std::to_string(n));
      world *= n;
    }
    if (const auto *axes = t->mesh_axes())
      for (unsigned i = 0; i < axes->size(); ++i)
        training->meshAxes.push_back(axes->Get(i) ? axes->Get(i)->str() : "?");
    std::string mesh;
    for (size_t i = 0; i < training->meshSizes.size(); ++i)
      mesh += (i ? "," : "") + (i < training->meshAxes.size() ? training->meshAxes[i] : "?") +
              "=" + std::to_string(training->meshSizes[i]);
    Communicator *comm = world > 1 ? processCommunicator() : nullptr;
    if (world > 1 && (!comm || comm->size() != world))
      throw Error("this training artifact runs on " + std::to_string(world) + " ranks (mesh " +
                  mesh + "); " +
                  (comm ? "this job has " + std::to_string(comm->size())
                        : std::string("this process was not started by mpirun")) +
                  ": start it with `mpirun -np " + std::to_string(world) +
                  " ...` or `tcc train --nproc " + std::to_string(world) + "`");
    training->worldSize = static_cast<int>(world);
    training->rank = comm ? comm->rank() : 0;
    auto pp = std::find(training->meshAxes.begin(), training->meshAxes.end(), "pp");
    if (pp != training->meshAxes.end() &&
        static_cast<size_t>(pp - training->meshAxes.begin()) < training->meshSizes.size()) {
      training->pipelineAxis = pp - training->meshAxes.begin();
      training->pipelineStage =
          tcc::mesh::coordinates(training->meshSizes, training->rank)[training->pipelineAxis];
    }
  }

  // ---- State and its initial values --------------------------------------------------------------
  const auto *initial = t->initial_data();
  uint64_t initialBytes = initial ? initial->size() : 0;
  if (initialBytes > 0 && (initial->Data() - base) % 64 != 0)
    throw Error("damaged artifact: initial_data is not 64-byte aligned in the file (offset " +
                std::to_string(initial->Data() - base) + ")");
  if (const auto *state = t->state())
    for (unsigned i = 0; i < state->size(); ++i) {
      const fb::StateTensor *st = state->Get(i);
      std::string what = "state " + std::to_string(i);
      if (!st || !st->name() || st->name()->size() == 0)
        throw Error(what + " has no name");
      StateDesc d;
      d.tensor.name = st->name()->str();
      what += " '" + d.tensor.name + "'";
      for (const StateDesc &other : training->state)
        if (other.tensor.name == d.tensor.name)
          throw Error(what + ": two state tensors have this name");
      if (st->kind() > fb::StateKind_MAX)
        throw Error(what + " has an invalid kind (" + std::to_string((unsigned)st->kind()) + ")");
      d.kind = (tccrt_state_kind)st->kind();
      d.tensor.dtype = checkDType(st->dtype(), what);
      d.tensor.shape = readShape(st->shape());
      d.tensor.bytes = tensorBytes(d.tensor.dtype, d.tensor.shape, what);
      uint64_t offset = st->initial_offset();
      if (offset % 64 != 0)
        throw Error(what + " has initial_offset " + std::to_string(offset) +
                    ", not a multiple of 64");
      if (offset > initialBytes || d.tensor.bytes > initialBytes - offset)
        throw Error(what + " (" + std::to_string(d.tensor.bytes) + " bytes at offset " +
                    std::to_string(offset) + ") ends past initial_data (" +
                    std::to_string(initialBytes) + " bytes)");
      d.initial = initial ? initial->Data() + offset : nullptr;
      d.globalShape = d.tensor.shape;
      if (const auto *splits = st->splits()) {
        if (splits->size() != d.tensor.shape.size() || training->meshSizes.empty())
          throw Error(what + ": its splits do not match its shape or the artifact has no mesh");
        for (unsigned k = 0; k < splits->size(); ++k) {
          const auto *axes = splits->Get(k) ? splits->Get(k)->axes() : nullptr;
          d.splits.emplace_back(axes ? std::vector<uint8_t>(axes->begin(), axes->end())
                                     : std::vector<uint8_t>());
        }
        try {
          d.tensor.shape = blockShape(d.globalShape, d.splits, training->meshSizes);
        } catch (const Error &err) {
          throw Error(what + ": " + err.what());
        }
        d.tensor.bytes = tensorBytes(d.tensor.dtype, d.tensor.shape, what);
        d.ownedInitial.resize(d.tensor.bytes);
        if (d.initial)
          copyBlock(d.initial, d.globalShape, dtypeSize(d.tensor.dtype), d.splits,
                    training->meshSizes, training->rank, d.ownedInitial.data());
        d.initial = d.ownedInitial.data();
      }
      d.pipelineStage = st->pipeline_stage();
      if (d.pipelineStage >= 0) {
        if (training->pipelineAxis < 0 ||
            d.pipelineStage >= training->meshSizes[training->pipelineAxis])
          throw Error(what + ": pipeline stage " + std::to_string(d.pipelineStage) +
                      " is not on the mesh's pp axis");
      }
      training->state.push_back(std::move(d));
    }

  // ---- Entries -------------------------------------------------------------------------------
  const std::vector<TensorDesc> *firstBatch = nullptr;
  std::string firstName;
  if (const auto *entries = t->entries())
    for (unsigned i = 0; i < entries->size(); ++i) {
      const fb::Entry *e = entries->Get(i);
      std::string what = "training entry " + std::to_string(i);
      if (!e || !e->name())
        throw Error(what + " has no name");
      if (!training->meshSizes.empty() && (int)e->rank() != training->rank)
        continue; // another rank's program
      EntryDesc entry;
      entry.name = e->name()->str();
      what = "training entry '" + entry.name + "'";
      if (entry.name != "train_step" && entry.name != "accumulate_step" && entry.name != "eval")
        throw Error(what + ": unknown entry point (expected train_step, accumulate_step or eval)");
      for (const EntryDesc &other : training->entries)
        if (other.name == entry.name)
          throw Error(what + " appears twice");
      if (!e->program())
        throw Error(what + " has no program");
      if (e->program()->training())
        throw Error(what + ": its program is itself a training artifact");
      entry.program.reset(new Program());
      entry.program->numThreads_ = numThreads_;
      try {
        entry.program->decode(e->program(), base);
      } catch (const Error &err) {
        throw Error(what + ": " + err.what());
      }
      const Program &prog = *entry.program;
      if (prog.device_ != device_)
        throw Error(what + ": its program is for " +
                    (prog.device_ == TCCRT_DEVICE_CUDA ? "CUDA" : "the CPU") +
                    ", the artifact's root for " +
                    (device_ == TCCRT_DEVICE_CUDA ? "CUDA" : "the CPU"));
      bool isEval = entry.name == "eval";

      auto readBindings = [&](const flatbuffers::Vector<flatbuffers::Offset<fb::Binding>> *list,
                              const std::vector<TensorDesc> &tensors, bool isInput) {
        const char *side = isInput ? "input" : "output";
        size_t count = list ? list->size() : 0;
        if (count != tensors.size())
          throw Error(what + " has " + std::to_string(count) + " " + side + " bindings for " +
                      std::to_string(tensors.size()) + " program " + side + "s");
        std::vector<BindingDesc> out;
        for (size_t j = 0; j < count; ++j) {
          const fb::Binding *b = list->Get((unsigned)j);
          const TensorDesc &tensor = tensors[j];
          std::string where = what + " " + side + " " + std::to_string(j) + " ('" + tensor.name +
                              "', " + shapeString(tensor.dtype, tensor.shape) + ")";
          if (!b)
            throw Error(where + " has no binding");
          if (b->role() > fb::BindingRole_MAX)
            throw Error(where + " has an invalid role (" + std::to_string((unsigned)b->role()) +
                        ")");
          BindingDesc d{(BindingRole)b->role(), 0};
          std::string bound = where + " is bound to " + roleName(d.role);
          switch (d.role) {
          case BindingRole::Data:
            if (!isInput && !isEval)
              throw Error(bound + ": only eval returns data to the caller");
            break;
          case BindingRole::State: {
            d.state = b->state();
            if (d.state >= training->state.size())
              throw Error(bound + " " + std::to_string(d.state) + "; there are " +
                          std::to_string(training->state.size()) + " state tensors");
            const TensorDesc &st = training->state[d.state].tensor;
            if (!sameTensor(tensor, st))
              throw Error(bound + " '" + st.name + "', which is " +
                          shapeString(st.dtype, st.shape));
            if (!isInput && isEval)
              throw Error(bound + ": eval must leave the state unchanged");
            if (!isInput)
              for (const BindingDesc &other : out)
                if (other.role == BindingRole::State && other.state == d.state)
                  throw Error(bound + " '" + st.name + "', which another output already updates");
            break;
          }
          case BindingRole::LearningRate:
          case BindingRole::RngKey: {
            if (!isInput)
              throw Error(bound + ", which only inputs can be");
            if (d.role == BindingRole::LearningRate && isEval)
              throw Error(bound + ": eval takes no learning rate");
            tccrt_dtype want = d.role == BindingRole::LearningRate ? TCCRT_F32 : TCCRT_U64;
            if (tensor.dtype != want || !tensor.shape.empty())
              throw Error(bound + ", which must be " + shapeString(want, {}));
            break;
          }
          case BindingRole::Loss:
            if (isInput)
              throw Error(bound + ", which only outputs can be");
            if (isEval)
              throw Error(bound + ": eval returns its per-sample loss as Data");
            if (tensor.dtype != TCCRT_F32 || !tensor.shape.empty())
              throw Error(bound + ", which must be f32[]");
            break;
          }
          out.push_back(d);
        }
        return out;
      };
      entry.inputs = readBindings(e->inputs(), prog.inputs(), true);
      entry.outputs = readBindings(e->outputs(), prog.outputs(), false);
      if (!isEval) {
        size_t losses = 0;
        for (const BindingDesc &b : entry.outputs)
          losses += b.role == BindingRole::Loss;
        if (losses != 1)
          throw Error(what + " has " + std::to_string(losses) +
                      " outputs bound to Loss; it must have one");
      }

      // The batch: the same Data inputs in every entry.
      std::vector<TensorDesc> batch;
      for (size_t j = 0; j < entry.inputs.size(); ++j)
        if (entry.inputs[j].role == BindingRole::Data)
          batch.push_back(prog.inputs()[j]);
      if (!firstBatch) {
        training->batch = batch;
        firstBatch = &training->batch;
        firstName = entry.name;
      } else {
        bool same = batch.size() == firstBatch->size();
        for (size_t j = 0; same && j < batch.size(); ++j)
          same = batch[j].name == (*firstBatch)[j].name && sameTensor(batch[j], (*firstBatch)[j]);
        if (!same) {
          auto list = [](const std::vector<TensorDesc> &ts) {
            std::string out;
            for (const TensorDesc &x : ts)
              out += (out.empty() ? "" : ", ") + x.name + ": " + shapeString(x.dtype, x.shape);
            return "(" + out + ")";
          };
          throw Error(what + " takes the batch " + list(batch) + ", entry '" + firstName +
                      "' takes " + list(*firstBatch) + ": every entry must take the same");
        }
      }
      training->entries.push_back(std::move(entry));
    }
  // Pointers into `entries` only now that it no longer grows.
  for (const EntryDesc &e : training->entries)
    (e.name == "train_step"        ? training->trainStep
     : e.name == "accumulate_step" ? training->accumulateStep
                                   : training->eval) = &e;
  if (!training->trainStep || !training->eval)
    throw Error(std::string("training artifact without a '") +
                (training->trainStep ? "eval" : "train_step") + "' entry");
  if ((training->gradAccumulation > 1) != (training->accumulateStep != nullptr))
    throw Error("training artifact with grad_accumulation " +
                std::to_string(training->gradAccumulation) +
                (training->accumulateStep ? " has an 'accumulate_step' entry (only > 1 uses one)"
                                          : " but no 'accumulate_step' entry"));

  // One arena, owned by the root, serves every entry: entries run one at a time, and an
  // entry's temporaries are dead when its run ends. (On CUDA the root's executor allocates it
  // on the device and hands it to the entries' executors, see startCuda.)
  uint64_t arenaBytes = 0;
  for (const EntryDesc &e : training->entries)
    arenaBytes = std::max(arenaBytes, e.program->arenaBytes_);
  arenaBytes_ = arenaBytes;
  if (arenaBytes > 0 && device_ == TCCRT_DEVICE_CPU)
    arena_ = hostAllocate(arenaBytes);
  for (EntryDesc &e : training->entries) {
    e.program->arena_ = arena_;
    e.program->ownsArena_ = false;
  }
  training_ = std::move(training);
}

Program::~Program() {
  if (ownsArena_)
    hostFree(arena_);
  hostFree(workspace_);
}

} // namespace tcc::rt
