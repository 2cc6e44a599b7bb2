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
//
// Symbolic programs: the size symbols' names and ranges, every dim expression (it parses and
// reads declared symbols only), the Symbols buffer (i64, one value per symbol), every arena
// buffer inside the arena at every size in the ranges (the plan the compiler made at the
// symbols' max, checked with the same interval bounds), and the launch list's structure. What
// depends on the sizes (extents in inputs and outputs, library geometries) is checked when a
// binding gives them (Binding.cpp), by the same code that checks a static program here.
#include "CudaExecutor.h"
#include "DType.h"
#include "HostMemory.h"
#include "Communicator.h"
#include "Program.h"
#include "tcc/Runtime/CpuFeatures.h"
#include "tcc/Runtime/ArtifactHash.h"
#include "tcc/Runtime/artifact_generated.h"
#include "tcc/Support/Tensor.h" // tcc::Error, thrown by the symbol binder
#include "tcc/Support/MeshGeometry.h"

#include <algorithm>
#include <cmath>
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
  case BufferKind::Symbols:
    return "symbols";
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

Shape readAttr(const flatbuffers::Vector<int64_t> *v) { return readShape(v); }

/// "f32[2, 3]", or for a symbolic tensor "f32[batch, 16]".
std::string typeString(tccrt_dtype dtype, const Shape &shape, const std::vector<SymExpr> &dims) {
  if (dims.empty())
    return shapeString(dtype, shape);
  std::string out = std::string(dtypeName(dtype)) + "[";
  for (size_t d = 0; d < dims.size(); ++d)
    out += (d ? ", " : "") + dims[d].str();
  return out + "]";
}

/// The bytes of `dims` (static dims as constants) at most, over every size in `ranges`: the
/// bound the compiler planned a symbolic buffer at (PlanMemory, tk::bufferBytesExpr).
uint64_t maxBytes(tccrt_dtype dtype, const std::vector<SymExpr> &dims,
                  const SymbolRanges &ranges) {
  try {
    return (uint64_t)std::max<int64_t>(
        0, rangeOf(productOf(dims) * SymExpr((int64_t)dtypeSize(dtype)), ranges).max);
  } catch (const std::exception &) { // an absurd product's coefficients overflow
    return UINT64_MAX;
  }
}

} // namespace

// ---- Tensors and their dims --------------------------------------------------------------------

SymExpr Program::readSizeExpression(const flatbuffers::String *text,
                                    const std::string &where) const {
  std::string error;
  std::optional<SymExpr> e = SymExpr::parse(text->string_view(), &error);
  if (!e)
    throw Error(where + ": '" + text->str() + "' is not a size expression (" + error + ")");
  for (const std::string &name : e->symbols())
    if (!symbolRanges_.count(name))
      throw Error(where + " ('" + text->str() + "') reads the size symbol '" + name +
                  "', which the program does not declare" +
                  (symbolNames_.empty() ? "" : " (it declares " +
                                                   describeSymbolRanges(symbolRanges_) + ")"));
  return *e;
}

/// The expressions of a TensorSpec's or Buffer's `dims` over its `shape`: "" keeps the static size
/// in shape, text is a size expression over the declared symbols (shape holds -1 there). A
/// constant expression becomes a static size in `shape`. Returns the dims when one is symbolic,
/// else none (a static tensor).
std::vector<SymExpr>
Program::readDims(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>> *dims,
                  Shape &shape, const std::string &what) const {
  if (!dims)
    return {};
  if (dims->size() != shape.size())
    throw Error(what + " has " + std::to_string(dims->size()) + " dim expressions for rank " +
                std::to_string(shape.size()));
  std::vector<SymExpr> out;
  bool symbolic = false;
  for (unsigned d = 0; d < dims->size(); ++d) {
    std::string where = what + " dim " + std::to_string(d);
    const flatbuffers::String *text = dims->Get(d);
    if (!text || text->size() == 0) { // a static dim: its size is in `shape`
      if (shape[d] < 0)
        throw Error(where + " has neither a size nor an expression");
      out.push_back(SymExpr(shape[d]));
      continue;
    }
    if (shape[d] != -1)
      throw Error(where + " has both a size (" + std::to_string(shape[d]) +
                  ") and an expression (shape must hold -1 there)");
    std::optional<SymExpr> e = readSizeExpression(text, where);
    if (std::optional<int64_t> c = e->constant()) {
      if (*c < 0)
        throw Error(where + " ('" + text->str() + "') is negative");
      shape[d] = *c;
    }
    symbolic = symbolic || !e->isConstant();
    out.push_back(std::move(*e));
  }
  if (!symbolic)
    out.clear();
  return out;
}

TensorDesc Program::readTensor(const fb::TensorSpec *spec, const std::string &what) const {
  if (!spec)
    throw Error(what + " is missing");
  TensorDesc t;
  t.name = spec->name() ? spec->name()->str() : "";
  t.dtype = checkDType(spec->dtype(), what);
  std::string named = what + " '" + t.name + "'";
  t.shape = readShape(spec->shape());
  t.dims = readDims(spec->dims(), t.shape, named);
  if (t.dims.empty()) {
    t.bytes = tensorBytes(t.dtype, t.shape, named);
    return t;
  }
  if (t.dims.size() > 64)
    throw Error(named + " has rank " + std::to_string(t.dims.size()) + " (at most 64)");
  // t.shape holds -1 in the symbolic dims, and t.bytes is 0, until a binding.
  for (const SymExpr &d : t.dims)
    t.dimTexts.push_back(d.isConstant() ? "" : d.str());
  return t;
}

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
  else if (!program->training() && p->arenaBytes_ > 0 && p->arenaSlots_.empty())
    p->arena_ = hostAllocate(p->arenaBytes_); // (a symbolic program's: at each binding's size)
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
// ---- The program table ---------------------------------------------------------------------------

void Program::decode(const fb::Program *program, const uint8_t *base) {
  if (program->version() != fb::Version_Current)
    throw Error("artifact version " + std::to_string(program->version()) +
                ", this runtime reads " + std::to_string((unsigned)fb::Version_Current));
  if (program->device() != fb::Device_CPU && program->device() != fb::Device_CUDA)
    throw Error("the artifact names an unknown device (" +
                std::to_string((unsigned)program->device()) + ")");
  device_ = program->device() == fb::Device_CUDA ? TCCRT_DEVICE_CUDA : TCCRT_DEVICE_CPU;
  producer_ = program->producer() ? program->producer()->str() : "";

  decodeSymbols(program); // before the dims that read them
  if (auto *inputs = program->inputs())
    for (unsigned i = 0; i < inputs->size(); ++i) {
      std::string what = "input " + std::to_string(i);
      inputs_.push_back(readTensor(inputs->Get(i), what));
      if (const auto *value = inputs->Get(i)->specialized_value()) {
        if (!inputs_.back().dims.empty())
          throw Error("damaged artifact: " + what + " has symbolic dims and a specialised value");
        if (value->size() != inputs_.back().bytes)
          throw Error("damaged artifact: " + what + "'s specialised value has " +
                      std::to_string(value->size()) + " bytes, the input " +
                      std::to_string(inputs_.back().bytes));
        inputs_.back().specializedValue.assign(value->begin(), value->end());
      }
    }
  if (auto *outputs = program->outputs())
    for (unsigned i = 0; i < outputs->size(); ++i)
      outputs_.push_back(readTensor(outputs->Get(i), "output " + std::to_string(i)));
  decodeConstants(program, base);
  decodeKernels(program);
  arenaBytes_ = program->arena_bytes();
  if (arenaBytes_ > kMaxBytes)
    throw Error("arena of " + std::to_string(arenaBytes_) + " bytes is too large");
  if (auto *mesh = program->mesh_sizes())
    meshSizes_ = readShape(mesh); // (alignment checked: the artifact fuzzer's)
  decodeBuffers(program);

  // The launch list: a static program's now; a symbolic program's at each binding (its
  // structure checked now).
  table_ = program;
  decodeLaunchList(/*shapesKnown=*/!isSymbolic());

  // ---- Memory, allocated once and reused across runs (the arena by load or decodeTraining) -----
  reserveWorkspace();
}

void Program::decodeSymbols(const fb::Program *program) {
  const auto *symbols = program->symbols();
  if (!symbols || symbols->size() == 0)
    return;
  for (unsigned i = 0; i < symbols->size(); ++i) {
    const fb::SymbolRange *r = symbols->Get(i);
    std::string what = "size symbol " + std::to_string(i);
    if (!r || !r->name() || r->name()->size() == 0)
      throw Error(what + " has no name");
    std::string name = r->name()->str();
    what += " ('" + name + "')";
    std::optional<SymExpr> parsed = SymExpr::parse(name);
    if (!parsed || parsed->symbolName() != name)
      throw Error(what + " is not a symbol name (a letter or _, then letters, digits or _)");
    if (r->min() < 0 || r->min() > r->max())
      throw Error(what + " has the range " + std::to_string(r->min()) + ".." +
                  std::to_string(r->max()) + ": sizes need 0 <= min <= max");
    if (!symbolRanges_.emplace(name, SymbolRange{r->min(), r->max()}).second)
      throw Error(what + " is declared twice");
    symbolNames_.push_back(name);
  }
  symbolValues_.assign(symbolNames_.size(), 0); // the Symbols buffer, filled at each binding
}

void Program::decodeConstants(const fb::Program *program, const uint8_t *base) {
  const auto *constantData = program->constant_data();
  uint64_t constantBytes = constantData ? constantData->size() : 0;
  if (constantData && constantBytes > 0 && (constantData->Data() - base) % 64 != 0)
    throw Error("damaged artifact: constant_data is not 64-byte aligned in the file (offset " +
                std::to_string(constantData->Data() - base) + ")");
  constantData_ = constantBytes > 0 ? constantData->Data() : nullptr;
  constantDataBytes_ = constantBytes;
  const auto *constants = program->constants();
  if (!constants)
    return;
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
    constants_.push_back(constantData ? constantData->Data() + c->offset() : nullptr);
    constantSizes_.push_back(c->size());
  }
}

/// The kernels' parameter types, then their code: the CPU module (loaded) or the CUDA module
/// (verified; loaded by the executor).
void Program::decodeKernels(const fb::Program *program) {
  if (auto *kernels = program->kernels())
    for (unsigned i = 0; i < kernels->size(); ++i) {
      const fb::Kernel *k = kernels->Get(i);
      if (!k || !k->name() || k->name()->size() == 0)
        throw Error("kernel " + std::to_string(i) + " has no name");
      kernelNames_.push_back(k->name()->str());
      if (!k->params())
        throw Error("kernel '" + kernelNames_.back() +
                    "' has no params (the artifact writer must list its parameter types)");
      std::vector<TensorDesc> params;
      for (unsigned j = 0; j < k->params()->size(); ++j)
        params.push_back(readTensor(k->params()->Get(j), "parameter " + std::to_string(j) +
                                                             " of kernel '" +
                                                             kernelNames_.back() + "'"));
      kernelParams_.push_back(std::move(params));
    }
  if (device_ == TCCRT_DEVICE_CUDA) {
    decodeCudaModule(program->cuda_module(), kernelNames_.size());
    return;
  }
  if (kernelNames_.empty())
    return;
  const fb::CpuModule *module = program->cpu_module();
  if (!module || !module->shared_object() || module->shared_object()->size() == 0)
    throw Error("the artifact has " + countOf(kernelNames_.size(), "kernel") +
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
  module_ = std::make_unique<CpuModule>(object->Data(), object->size());
  for (const std::string &name : kernelNames_) {
    CpuKernelFn fn = module_->lookup(name);
    if (!fn)
      throw Error("kernel '" + name + "' is not exported by the CPU module" +
                  (module->compiler() ? " (built by " + module->compiler()->str() + ")" : ""));
    kernels_.push_back(fn);
  }
}

// ---- Buffers -------------------------------------------------------------------------------------

namespace {

/// "buffer 3 (arena 0, f32[m, 8] at offset 2048)".
std::string describeBuffer(const BufferDesc &b, size_t i) {
  return "buffer " + std::to_string(i) + " (" + kindName(b.kind) + " " +
         std::to_string(b.index) + ", " + typeString(b.dtype, b.shape, b.dims) + " at offset " +
         std::to_string(b.offset) + ")";
}

} // namespace

void Program::decodeBuffers(const fb::Program *program) {
  const auto *buffers = program->buffers();
  if (!buffers)
    return;
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
    d.dims = readDims(b->dims(), d.shape, what);
    d.slot = b->slot();
    d.slotOffset = b->slot_offset();
    if (d.dims.empty())
      d.bytes = tensorBytes(d.dtype, d.shape, what);
    else if (d.dims.size() > 64)
      throw Error(what + " has rank " + std::to_string(d.dims.size()) + " (at most 64)");
    what = describeBuffer(d, i);
    switch (d.kind) {
    case BufferKind::Input:
      if (d.index >= inputs_.size())
        throw Error(what + ": there are " + std::to_string(inputs_.size()) + " inputs");
      break;
    case BufferKind::Output:
      if (d.index >= outputs_.size())
        throw Error(what + ": there are " + std::to_string(outputs_.size()) + " outputs");
      break;
    case BufferKind::Constant:
      if (d.index >= constants_.size())
        throw Error(what + ": there are " + std::to_string(constants_.size()) + " constants");
      if (!d.dims.empty())
        throw Error(what + ": a constant's shape is static");
      break;
    case BufferKind::Arena:
      d.index = 0;
      break;
    case BufferKind::Symbols:
      // The values bound for the run, one i64 per size symbol (symbolValues_).
      if (symbolNames_.empty())
        throw Error(what + ": the program declares no size symbols");
      if (d.dtype != TCCRT_I64 || !d.dims.empty() ||
          d.shape != Shape{(int64_t)symbolNames_.size()} || d.offset != 0)
        throw Error(what + ": the symbol values are i64[" +
                    std::to_string(symbolNames_.size()) + "] at offset 0, one per size symbol");
      d.index = 0;
      break;
    }
    if (d.offset % dtypeSize(d.dtype) != 0)
      throw Error(what + ": offset is not a multiple of the element size");
    buffers_.push_back(std::move(d));
  }
  decodeArenaSlots(program);
  // Extents known now: static buffers in static bases, and symbolic arena buffers at their
  // largest (arena_bytes is planned at every symbol's max). The others at each binding.
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const BufferDesc &b = buffers_[i];
    if (b.kind == BufferKind::Arena && !b.dims.empty()) {
      uint64_t most = maxBytes(b.dtype, b.dims, symbolRanges_);
      if (b.offset > arenaBytes_ || most > arenaBytes_ - b.offset)
        throw Error(describeBuffer(b, i) + ": it takes up to " +
                    (most == UINT64_MAX ? std::string("an unbounded number of")
                                        : std::to_string(most)) +
                    " bytes over the size ranges (" + describeSymbolRanges(symbolRanges_) +
                    "), which end past the arena (" + std::to_string(arenaBytes_) + " bytes)");
      continue;
    }
    bool baseStatic = (b.kind != BufferKind::Input || inputs_[b.index].dims.empty()) &&
                      (b.kind != BufferKind::Output || outputs_[b.index].dims.empty());
    if (b.dims.empty() && baseStatic)
      checkExtent(b, i, b.bytes, baseBytes(b));
  }
}

void Program::decodeArenaSlots(const fb::Program *program) {
  const auto *slots = program->arena_slots();
  for (unsigned k = 0; slots && k < slots->size(); ++k) {
    const fb::ArenaSlot *s = slots->Get(k);
    std::string what = "arena slot " + std::to_string(k);
    if (!s || s->buffer() >= buffers_.size())
      throw Error(what + " names no buffer");
    const BufferDesc &b = buffers_[s->buffer()];
    if (b.kind != BufferKind::Arena || b.slot != (int32_t)k || b.slotOffset != 0)
      throw Error(what + ": its buffer " + std::to_string(s->buffer()) +
                  " is not the slot's own arena buffer");
    if (s->first() < 0 || s->last() < s->first())
      throw Error(what + " has an empty lifetime");
    arenaSlots_.push_back({s->buffer(), s->first(), s->last()});
  }
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const BufferDesc &b = buffers_[i];
    bool inSlot = b.slot >= 0 && (size_t)b.slot < arenaSlots_.size();
    if (b.slot != -1 && (!inSlot || b.kind != BufferKind::Arena))
      throw Error(describeBuffer(b, i) + ": its arena slot " + std::to_string(b.slot) +
                  " does not exist or it is not in the arena");
    // Slots are placed again at each binding: every arena buffer must move with one.
    if (!arenaSlots_.empty() && b.kind == BufferKind::Arena && !inSlot)
      throw Error(describeBuffer(b, i) + " is in the arena but in no arena slot");
  }
  if (!arenaSlots_.empty() && !isSymbolic())
    throw Error("arena slots in a program without size symbols");
}

uint64_t Program::baseBytes(const BufferDesc &b) const {
  switch (b.kind) {
  case BufferKind::Input:
    return inputs_[b.index].bytes;
  case BufferKind::Output:
    return outputs_[b.index].bytes;
  case BufferKind::Constant:
    return constantSizes_[b.index];
  case BufferKind::Arena:
    return arenaBytes_;
  case BufferKind::Symbols:
    return symbolValues_.size() * sizeof(int64_t);
  }
  return 0;
}

void Program::checkExtent(const BufferDesc &b, size_t i, uint64_t bytes, uint64_t limit) const {
  if (b.offset <= limit && bytes <= limit - b.offset)
    return;
  std::string base = b.kind == BufferKind::Arena     ? "the arena"
                     : b.kind == BufferKind::Symbols ? "the symbol values"
                                                     : kindName(b.kind) + std::string(" ") +
                                                           std::to_string(b.index);
  throw Error(describeBuffer(b, i) + ": its " + std::to_string(bytes) + " bytes end past " +
              base + " (" + std::to_string(limit) + " bytes)");
}

// ---- The launch list -----------------------------------------------------------------------------
//
// Derived from the artifact's launches at the buffers' current shapes: a static program's once at
// load, a symbolic program's at each new binding. At a symbolic program's load (shapesKnown
// false) every launch is checked for what holds at every size (indices, kinds, element types,
// kernel parameters, epilogues), and nothing is kept; the geometries wait for the sizes.

class LaunchListDecoder {
public:
  LaunchListDecoder(Program &p, bool shapesKnown)
      : p_(p), shapesKnown_(shapesKnown), onCuda_(p.device_ == TCCRT_DEVICE_CUDA) {}

  void decode(const fb::Program *program) {
    if (const auto *launches = program->launches())
      for (unsigned i = 0; i < launches->size(); ++i) {
        const fb::Launch *launch = launches->Get(i);
        std::string what = "launch " + std::to_string(i);
        if (!launch)
          throw Error(what + " is missing");
        if (launch->step_type() != fb::Step_NONE && !launch->step())
          throw Error(what + " has a step type but no step");
        steps_.push_back(step(launch, i, what));
        nodes_.push_back(nodesOf(launch));
      }
  }

  /// Hands the launch list to the program (after decode() succeeded with the shapes known).
  void commit() {
    p_.steps_ = std::move(steps_);
    p_.stepNodes_ = std::move(nodes_);
    p_.packings_ = std::move(packings_);
    p_.workspaceBytes_ = workspaceBytes_;
    p_.describeSteps();
    if (p_.profiling_)
      p_.profiles_.resize(p_.steps_.size());
  }

private:
  Step step(const fb::Launch *launch, unsigned i, std::string &what) {
    switch (launch->step_type()) {
    case fb::Step_KernelLaunch:
      return kernelLaunch(launch->step_as_KernelLaunch(), what);
    case fb::Step_Gemm:
      return gemm(launch->step_as_Gemm(), what += " (gemm)");
    case fb::Step_Conv:
      return conv(launch->step_as_Conv(), i, what += " (conv)");
    case fb::Step_TopK:
      return topK(launch->step_as_TopK(), what += " (topk)");
    case fb::Step_Pool:
      return pool(launch->step_as_Pool(), what += " (pool)");
    case fb::Step_Attention:
      return attention(launch->step_as_Attention(), what += " (attention)");
    case fb::Step_AttentionGrad:
      return attentionGrad(launch->step_as_AttentionGrad(), what += " (attention gradient)");
    case fb::Step_Copy:
      return copy(launch->step_as_Copy(), what += " (copy)");
    case fb::Step_Collective:
      return collective(launch->step_as_Collective(), what += " (collective)");
    case fb::Step_Wait:
      return wait(launch->step_as_Wait(), what += " (wait)");
    default:
      throw Error(what + " has an unknown step type (" +
                  std::to_string((unsigned)launch->step_type()) + ")");
    }
  }

  /// The model nodes the step computes (for profiles).
  static std::string nodesOf(const fb::Launch *launch) {
    std::string nodes;
    if (const auto *names = launch->nodes())
      for (unsigned j = 0; j < names->size(); ++j)
        if (const flatbuffers::String *n = names->Get(j))
          nodes += (nodes.empty() ? "" : ", ") + n->str();
    return nodes;
  }

  const BufferDesc &buffer(uint32_t index, const std::string &what) const {
    if (index >= p_.buffers_.size())
      throw Error(what + " names buffer " + std::to_string(index) + "; there are " +
                  std::to_string(p_.buffers_.size()));
    return p_.buffers_[index];
  }

  const BufferDesc &writable(uint32_t index, const std::string &what) const {
    const BufferDesc &b = buffer(index, what);
    if (b.kind == BufferKind::Input || b.kind == BufferKind::Constant ||
        b.kind == BufferKind::Symbols)
      throw Error(what + " writes buffer " + std::to_string(index) + ", which is " +
                  (b.kind == BufferKind::Input      ? "an input"
                   : b.kind == BufferKind::Constant ? "a constant"
                                                    : "the symbol values"));
    return b;
  }

  /// Rethrows a geometry's error with the launch named.
  template <class F> auto named(const std::string &what, F &&f) -> decltype(f()) {
    try {
      return f();
    } catch (const Error &e) {
      throw Error(what + ": " + e.what());
    }
  }

  KernelStep kernelLaunch(const fb::KernelLaunch *s, std::string &what) {
    if (s->kernel() >= p_.kernelNames_.size())
      throw Error(what + " runs kernel " + std::to_string(s->kernel()) + "; there are " +
                  std::to_string(p_.kernelNames_.size()));
    what += " (kernel '" + p_.kernelNames_[s->kernel()] + "')";
    KernelStep step{s->kernel(), {}};
    const std::vector<TensorDesc> &params = p_.kernelParams_[s->kernel()];
    size_t numArgs = s->args() ? s->args()->size() : 0;
    if (numArgs != params.size())
      throw Error(what + " passes " + std::to_string(numArgs) + " buffers; the kernel takes " +
                  std::to_string(params.size()));
    for (size_t j = 0; j < numArgs; ++j) {
      uint32_t a = s->args()->Get((unsigned)j);
      const BufferDesc &b = buffer(a, what);
      // The same type, symbolic dims included: the kernel indexes the buffer by its own dims.
      if (b.dtype != params[j].dtype || b.dims != params[j].dims ||
          (b.dims.empty() && b.shape != params[j].shape))
        throw Error(what + " passes buffer " + std::to_string(a) + " (" +
                    typeString(b.dtype, b.shape, b.dims) + ") as parameter " + std::to_string(j) +
                    ", which is " + typeString(params[j].dtype, params[j].shape, params[j].dims));
      step.args.push_back(a);
    }
    if (onCuda_) {
      readCudaGeometry(s, step, what);
      shrinkGrid(s, step, what);
    }
    return step;
  }

  /// KernelLaunch.grid_work: at a binding, no more blocks than the bound sizes' work needs.
  void shrinkGrid(const fb::KernelLaunch *s, KernelStep &step, const std::string &what) {
    if (!s->grid_work() || s->grid_work()->size() == 0)
      return;
    SymExpr work = p_.readSizeExpression(s->grid_work(), what + ": its grid work");
    if (s->work_per_block() == 0)
      throw Error(what + ": its grid work has no work per block (must be >= 1)");
    if (!shapesKnown_)
      return;
    int64_t units = 0;
    try {
      units = evaluateSym(work, p_.symbolBindings_);
    } catch (const tcc::Error &e) {
      throw Error(what + ": its grid work: " + e.what());
    }
    uint64_t blocks = units <= 0 ? 1 : ((uint64_t)units + s->work_per_block() - 1) / s->work_per_block();
    step.grid[0] = (uint32_t)std::clamp<uint64_t>(blocks, 1, step.grid[0]);
  }

  GemmStep gemm(const fb::Gemm *s, const std::string &what) {
    const BufferDesc &a = buffer(s->a(), what), &b = buffer(s->b(), what),
                     &c = writable(s->c(), what);
    bool gemmTypes = c.dtype == TCCRT_F16 || c.dtype == TCCRT_BF16 || c.dtype == TCCRT_F32 ||
                     c.dtype == TCCRT_F64;
    if (a.dtype != c.dtype || b.dtype != c.dtype || !gemmTypes)
      throw Error(what + ": operands must all be f16, all bf16, all f32 or all f64, got " +
                  typeString(a.dtype, a.shape, a.dims) + ", " +
                  typeString(b.dtype, b.shape, b.dims) + ", " +
                  typeString(c.dtype, c.shape, c.dims));
    GemmStep step{s->a(), s->b(), s->c(), {}};
    if (s->activation() > fb::GemmActivation_MAX)
      throw Error(what + " has an invalid activation (" +
                  std::to_string((unsigned)s->activation()) + ")");
    step.activation = (GemmActivation)s->activation();
    step.hasBias = s->has_bias();
    if (!onCuda_ && (step.hasBias || step.activation != GemmActivation::None) &&
        c.dtype != TCCRT_F32)
      throw Error(what + " has an epilogue (" + (step.hasBias ? "bias, " : "") +
                  fb::EnumNameGemmActivation(s->activation()) + ") on " + dtypeName(c.dtype) +
                  ": the CPU runtime applies epilogues to f32 GEMMs only");
    if (onCuda_ && step.activation == GemmActivation::GeluErf)
      throw Error(what + " has an erf GELU epilogue: cuBLASLt has none (the compiler leaves it "
                         "to a generated kernel on CUDA)");
    const BufferDesc *bias = nullptr;
    if (step.hasBias) {
      step.bias = s->bias();
      bias = &buffer(step.bias, what + "'s bias");
    }
    if (!shapesKnown_)
      return step;
    step.geometry = named(what, [&] {
      return makeGemmGeometry(c.dtype, a.shape, b.shape, c.shape, s->trans_a(), s->trans_b(),
                              s->alpha(), s->beta());
    });
    const GemmGeometry &g = step.geometry;
    if (bias) {
      Shape want{g.n};
      if (bias->dtype != c.dtype || bias->shape != want)
        throw Error(what + ": its bias (buffer " + std::to_string(step.bias) + ", " +
                    shapeString(bias->dtype, bias->shape) + ") must be " +
                    shapeString(c.dtype, want) + ", one value per column of c " +
                    shapeString(c.dtype, c.shape));
    }
    if (!onCuda_) {
      step.packedA = sharedPacking(a, true, g.transA, g.m, g.k, g.aBatchStrides,
                                   std::move(step.packedA));
      step.packedB = sharedPacking(b, false, g.transB, g.n, g.k, g.bBatchStrides,
                                   std::move(step.packedB));
    }
    if (onCuda_ && g.k == 0 && g.m > 0 && g.n > 0 && g.numBatches > 0 &&
        (g.beta != 0 || step.hasBias))
      throw Error(what + ": K = 0 with beta != 0 or a bias is an elementwise update of c, "
                  "not a GEMM; the compiler must emit it as a kernel");
    return step;
  }

  /// One packed form per constant GEMM operand read the same way (GemmStep::packedA/B), taken
  /// from the previous binding's when there is one: a constant's packing depends on its own
  /// shape (static) and how it is read, not on the other operand's dims.
  std::shared_ptr<PackedOperand> sharedPacking(const BufferDesc &operand, bool isA, bool trans,
                                               int64_t outer, int64_t k,
                                               const Shape &batchStrides,
                                               std::shared_ptr<PackedOperand> own) {
    if (operand.kind != BufferKind::Constant)
      return own;
    int64_t matrices = 1; // the operand's own (its batch dims fit: the geometry checked them)
    for (size_t d = 0; d + 2 < operand.shape.size(); ++d)
      matrices *= operand.shape[d];
    Program::PackingKey key{operand.index, operand.offset, isA,      trans,
                            outer,         k,              matrices, batchStrides};
    if (auto it = packings_.find(key); it != packings_.end())
      return it->second;
    if (auto it = p_.packings_.find(key); it != p_.packings_.end())
      own = it->second;
    return packings_.emplace(key, std::move(own)).first->second;
  }

  ConvStep conv(const fb::Conv *s, unsigned i, const std::string &what) {
    if (onCuda_)
      throw Error(what + ": a CUDA program cannot have library conv steps (the compiler "
                  "generates convolution kernels for CUDA)");
    const BufferDesc &x = buffer(s->input(), what), &w = buffer(s->weight(), what),
                     &y = writable(s->output(), what);
    bool convType = y.dtype == TCCRT_F32 || y.dtype == TCCRT_F16 || y.dtype == TCCRT_BF16;
    if (x.dtype != y.dtype || w.dtype != y.dtype || !convType)
      throw Error(what + ": operands must all be f32, all f16 or all bf16, got " +
                  typeString(x.dtype, x.shape, x.dims) + ", " +
                  typeString(w.dtype, w.shape, w.dims) + ", " +
                  typeString(y.dtype, y.shape, y.dims));
    ConvStep step{s->input(), s->weight(), s->output(), {}};
    const bool last = s->channels_last();
    if (last && (y.dtype != TCCRT_F32 || x.shape.size() < 3 || y.shape.size() < 3))
      throw Error(what + ": a channels-last convolution must be f32 with rank >= 3, got " +
                  typeString(x.dtype, x.shape, x.dims) + " -> " +
                  typeString(y.dtype, y.shape, y.dims));
    step.hasBias = s->has_bias();
    step.hasResidual = s->has_residual();
    step.clamp = s->clamp();
    switch (s->activation()) {
    case fb::ConvActivation_None:
      break;
    case fb::ConvActivation_Silu:
      step.activation.kind = ActivationKind::Silu;
      break;
    case fb::ConvActivation_HardSwish:
      step.activation = {ActivationKind::HardSwish, (float)s->activation_alpha(),
                         (float)s->activation_beta()};
      if (!std::isfinite(step.activation.alpha) || !std::isfinite(step.activation.beta))
        throw Error(what + ": its hard swish gate (" + std::to_string(s->activation_alpha()) +
                    " x + " + std::to_string(s->activation_beta()) + ") is not finite");
      break;
    default:
      throw Error(what + ": unknown activation " + std::to_string((int)s->activation()));
    }
    if ((step.hasBias || step.hasResidual || step.clamp ||
         step.activation.kind != ActivationKind::None) &&
        y.dtype != TCCRT_F32)
      throw Error(what + " has an epilogue on " + dtypeName(y.dtype) +
                  ": convolution epilogues are for f32 convolutions");
    const BufferDesc *bias = nullptr, *residual = nullptr;
    if (step.hasBias) {
      step.bias = s->bias();
      bias = &buffer(step.bias, what + "'s bias");
    }
    if (step.hasResidual) {
      step.residual = s->residual();
      residual = &buffer(step.residual, what + "'s residual");
    }
    if (step.clamp) {
      double lo = s->clamp_min(), hi = s->clamp_max();
      if (!(lo <= hi)) // NaN bounds fail too
        throw Error(what + ": its clamp bounds [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "] are not an interval");
      step.clampMin = (float)lo;
      step.clampMax = (float)hi;
    }
    if (!shapesKnown_)
      return step;
    // [N, S..., C] -> [N, C, S...]: the geometry is the channels-first convolution's.
    auto firstView = [&](const Shape &shape) {
      if (!last)
        return shape;
      Shape v{shape[0], shape.back()};
      v.insert(v.end(), shape.begin() + 1, shape.end() - 1);
      return v;
    };
    step.geometry = named(what, [&] {
      return makeConvGeometry(firstView(x.shape), w.shape, firstView(y.shape),
                              readAttr(s->strides()), readAttr(s->pad_low()),
                              readAttr(s->pad_high()), readAttr(s->dilations()), s->groups(),
                              readAttr(s->lhs_dilation()), y.dtype);
    });
    step.geometry.channelsLast = last;
    if (bias) {
      Shape want{last ? y.shape.back() : y.shape[1]};
      if (bias->dtype != y.dtype || bias->shape != want)
        throw Error(what + ": its bias (buffer " + std::to_string(step.bias) + ", " +
                    shapeString(bias->dtype, bias->shape) + ") must be " +
                    shapeString(y.dtype, want) + ", one value per output channel");
    }
    if (residual && (residual->dtype != y.dtype || residual->shape != y.shape))
      throw Error(what + ": its residual (buffer " + std::to_string(step.residual) + ", " +
                  shapeString(residual->dtype, residual->shape) +
                  ") must have the output's type " + shapeString(y.dtype, y.shape));
    keepWeightCache(step, i);
    workspaceBytes_ = std::max(workspaceBytes_, step.geometry.workspaceBytes);
    return step;
  }

  /// Launch i's packed (transformed) weights from the previous binding, while they stay valid:
  /// the same weights packed for the same geometry but the batch size (sameWeightPacking).
  void keepWeightCache(ConvStep &step, unsigned i) {
    if (i >= p_.steps_.size())
      return;
    auto *old = std::get_if<ConvStep>(&p_.steps_[i]);
    if (old && old->weight == step.weight && sameWeightPacking(old->geometry, step.geometry))
      step.weightCache = std::move(old->weightCache);
  }

  TopKStep topK(const fb::TopK *s, const std::string &what) {
    if (onCuda_)
      throw Error(what + ": a CUDA program cannot have library top-k steps (the compiler "
                  "generates top-k kernels for CUDA)");
    const BufferDesc &x = buffer(s->input(), what), &v = writable(s->values(), what),
                     &ix = writable(s->indices(), what);
    TopKStep step{s->input(), s->values(), s->indices(), {}};
    if (shapesKnown_)
      step.geometry = named(what, [&] {
        return makeTopKGeometry(x.dtype, x.shape, v.dtype, v.shape, ix.dtype, ix.shape, s->dim(),
                                s->largest());
      });
    return step;
  }

  PoolStep pool(const fb::Pool *s, const std::string &what) {
    if (onCuda_)
      throw Error(what + ": a CUDA program cannot have library pooling steps (the compiler "
                  "generates pooling kernels for CUDA)");
    if (s->kind() > fb::PoolKind_MAX)
      throw Error(what + " has an invalid kind (" + std::to_string((int)s->kind()) + ")");
    const BufferDesc &x = buffer(s->input(), what), &y = writable(s->output(), what);
    if (x.dtype != y.dtype)
      throw Error(what + ": input " + typeString(x.dtype, x.shape, x.dims) + " and output " +
                  typeString(y.dtype, y.shape, y.dims) + " differ in element type");
    PoolStep step{s->input(), s->output(), {}};
    if (shapesKnown_)
      step.geometry = named(what, [&] {
        return makePoolGeometry(x.dtype, x.shape, y.shape, s->kind() == fb::PoolKind_Max,
                                readAttr(s->window()), readAttr(s->strides()),
                                readAttr(s->pad_low()), readAttr(s->pad_high()),
                                readAttr(s->dilations()));
      });
    return step;
  }

  /// An attention step's optional mask (bool) and bias (f32: the kernels' scores are f32),
  /// null when absent.
  template <class Step>
  std::pair<const BufferDesc *, const BufferDesc *> attentionMaskAndBias(const Step &s,
                                                                         const std::string &what) {
    const BufferDesc *mask = s.has_mask() ? &buffer(s.mask(), what + "'s mask") : nullptr;
    const BufferDesc *bias = s.has_bias() ? &buffer(s.bias(), what + "'s bias") : nullptr;
    if (bias && bias->dtype != TCCRT_F32)
      throw Error(what + ": the bias must be f32 (the scores are f32), got " +
                  typeString(bias->dtype, bias->shape, bias->dims));
    if (mask && mask->dtype != TCCRT_BOOL)
      throw Error(what + ": the mask must be bool, got " +
                  typeString(mask->dtype, mask->shape, mask->dims));
    return {mask, bias};
  }

  AttentionStep attention(const fb::Attention *s, const std::string &what) {
    if (onCuda_)
      throw Error(what + ": a CUDA program cannot have library attention steps (the "
                  "compiler decomposes attention for CUDA)");
    const BufferDesc &q = buffer(s->q(), what), &k = buffer(s->k(), what),
                     &v = buffer(s->v(), what), &out = writable(s->output(), what);
    // Plain variables: the geometry lambda below captures them (clang 14's C++17 cannot
    // capture structured bindings).
    const BufferDesc *mask, *bias;
    std::tie(mask, bias) = attentionMaskAndBias(*s, what);
    const bool bf16 = q.dtype == TCCRT_BF16;
    for (const BufferDesc *b : {&q, &k, &v, &out})
      if (b->dtype != (bf16 ? TCCRT_BF16 : TCCRT_F32))
        throw Error(what + ": q, k, v and output must be all f32 or all bf16, got " +
                    typeString(b->dtype, b->shape, b->dims));
    AttentionStep step{s->q(), s->k(), s->v(), s->mask(), s->bias(), s->output(), {}};
    if (!shapesKnown_)
      return step;
    step.geometry = named(what, [&] {
      return makeAttentionGeometry(q.shape, k.shape, v.shape, mask ? &mask->shape : nullptr,
                                   bias ? &bias->shape : nullptr, out.shape, s->scale(),
                                   s->causal(), s->masked_value(), bf16);
    });
    workspaceBytes_ = std::max(workspaceBytes_, step.geometry.workspaceBytes);
    return step;
  }

  AttentionGradStep attentionGrad(const fb::AttentionGrad *s, const std::string &what) {
    if (onCuda_)
      throw Error(what + ": a CUDA program cannot have library attention gradients (the "
                  "compiler decomposes them for CUDA)");
    const BufferDesc &q = buffer(s->q(), what), &k = buffer(s->k(), what),
                     &v = buffer(s->v(), what), &out = buffer(s->output(), what),
                     &gradOut = buffer(s->grad_output(), what), &gq = writable(s->grad_q(), what),
                     &gk = writable(s->grad_k(), what), &gv = writable(s->grad_v(), what);
    // Plain variables: the geometry lambda below captures them (clang 14's C++17 cannot
    // capture structured bindings).
    const BufferDesc *mask, *bias;
    std::tie(mask, bias) = attentionMaskAndBias(*s, what);
    const bool bf16 = q.dtype == TCCRT_BF16;
    for (const BufferDesc *b : {&q, &k, &v, &out, &gradOut, &gq, &gk, &gv})
      if (b->dtype != (bf16 ? TCCRT_BF16 : TCCRT_F32))
        throw Error(what + ": q, k, v, the output and every gradient must be all f32 or all "
                    "bf16, got " + typeString(b->dtype, b->shape, b->dims));
    AttentionGradStep step{s->q(),      s->k(),      s->v(),      s->output(), s->grad_output(),
                           s->grad_q(), s->grad_k(), s->grad_v(), s->mask(),   s->bias(),
                           {}};
    if (!shapesKnown_)
      return step;
    step.geometry = named(what, [&] {
      for (auto [grad, of, name] : {std::tuple{&gq, &q, "q"}, {&gk, &k, "k"}, {&gv, &v, "v"},
                                    {&gradOut, &out, "the output"}})
        if (grad->shape != of->shape)
          throw Error(std::string("the gradient of ") + name + " " +
                      shapeString(TCCRT_F32, grad->shape) + " must have its shape " +
                      shapeString(TCCRT_F32, of->shape));
      return makeAttentionGradGeometry(q.shape, k.shape, v.shape, mask ? &mask->shape : nullptr,
                                       bias ? &bias->shape : nullptr, out.shape, s->scale(),
                                       s->causal(), s->masked_value(), bf16);
    });
    workspaceBytes_ = std::max(workspaceBytes_, step.geometry.workspaceBytes);
    return step;
  }

  CopyStep copy(const fb::Copy *s, const std::string &what) {
    const BufferDesc &src = buffer(s->source(), what), &dst = writable(s->target(), what);
    if (shapesKnown_ && src.bytes != dst.bytes)
      throw Error(what + ": source (" + std::to_string(src.bytes) + " bytes) and target (" +
                  std::to_string(dst.bytes) + " bytes) sizes differ");
    return CopyStep{s->source(), s->target()};
  }

  CollectiveStep collective(const fb::Collective *s, const std::string &what) {
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
    if (step.async && step.kind != CollectiveKind::AllReduce &&
        step.kind != CollectiveKind::ReduceScatter && step.kind != CollectiveKind::AllGather)
      throw Error(what + ": only all_reduce, reduce_scatter and all_gather run asynchronously");
    if (!shapesKnown_)
      return step;
    step.inShape = x.shape;
    step.outShape = y.shape;
    named(what, [&] { checkCollective(step, p_.meshSizes_); });
    return step;
  }

  WaitStep wait(const fb::Wait *s, const std::string &what) {
    uint32_t c = s->collective();
    auto *target = c < steps_.size() ? std::get_if<CollectiveStep>(&steps_[c]) : nullptr;
    if (!target || !target->async)
      throw Error(what + ": launch " + std::to_string(c) +
                  " is not an earlier asynchronous collective");
    for (const Step &earlier : steps_)
      if (auto *w = std::get_if<WaitStep>(&earlier); w && w->collective == c)
        throw Error(what + ": launch " + std::to_string(c) + " is already waited for");
    return WaitStep{c};
  }

  Program &p_;
  const bool shapesKnown_, onCuda_;
  std::vector<Step> steps_;
  std::vector<std::string> nodes_;
  std::map<Program::PackingKey, std::shared_ptr<PackedOperand>> packings_;
  size_t workspaceBytes_ = 0;
};

void Program::decodeLaunchList(bool shapesKnown) {
  LaunchListDecoder decoder(*this, shapesKnown);
  decoder.decode(table_);
  if (shapesKnown)
    decoder.commit();
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
      if (prog.isSymbolic())
        throw Error(what + ": its program has size symbols (" +
                    describeSymbolRanges(prog.symbolRanges_) +
                    "); training artifacts have static shapes");
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
