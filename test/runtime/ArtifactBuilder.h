//===- ArtifactBuilder.h - Building tcc artifacts by hand for runtime tests ===//
//
// A small description of a program (inputs, outputs, constants, buffers, kernels, launches) that
// finish() serialises with the FlatBuffers builder, the way the compiler's writer does. The CPU
// module is the test kernel library (TCCRT_TEST_KERNELS); a CUDA program (ArtifactBuilder::cuda())
// carries the CUDA images and PTX tests give it instead. Fields left alone get sensible values
// (arena_bytes: the end of the last arena buffer; the module hash: correct); tests override them
// to make broken artifacts.
#pragma once

#include "tcc/Runtime/ArtifactHash.h"
#include "tcc/Runtime/artifact_generated.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tcc::rt::test {

namespace fb = tcc::artifact;

inline std::vector<uint8_t> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline const std::vector<uint8_t> &testKernelModule() {
  static const std::vector<uint8_t> bytes = readFile(TCCRT_TEST_KERNELS);
  return bytes;
}

inline size_t dtypeBytes(fb::DType d) {
  static const size_t sizes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8};
  return sizes[d];
}

inline size_t bytesOf(fb::DType d, const std::vector<int64_t> &shape) {
  size_t n = dtypeBytes(d);
  for (int64_t s : shape)
    n *= (size_t)s;
  return n;
}

class ArtifactBuilder {
public:
  struct Tensor {
    std::string name;
    fb::DType dtype;
    std::vector<int64_t> shape;
    std::vector<std::string> dims = {}; // symbolic tensors: TensorSpec.dims ("" = static)
  };
  struct Buf {
    fb::BufferKind kind;
    uint32_t index;
    uint64_t offset;
    fb::DType dtype;
    std::vector<int64_t> shape;
    std::vector<std::string> dims = {}; // as Tensor::dims
  };
  struct Symbol {
    std::string name;
    int64_t min, max;
  };
  struct ConstantEntry {
    std::string name;
    uint64_t offset, size;
  };
  struct KernelEntry {
    std::string name;
    std::vector<Tensor> params;
  };
  struct Step {
    fb::Step type;
    std::vector<uint32_t> ops; // buffer indices (kernel launch: kernel index first)
    bool flagA = false, flagB = false;
    double alpha = 1, beta = 0;
    std::vector<int64_t> strides, padLow, padHigh, dilations, lhsDilation;
    int64_t groups = 1, dim = 0;
    // CUDA kernel launches (empty on the CPU).
    std::vector<uint32_t> grid, block;
    uint32_t sharedBytes = 0;
    std::string gridWork; // symbolic CUDA programs (KernelLaunch.grid_work)
    uint32_t workPerBlock = 0;
    // Gemm and conv epilogues.
    bool hasBias = false;
    uint32_t bias = 0;
    fb::GemmActivation activation = fb::GemmActivation_None;
    bool hasResidual = false, clamp = false, channelsLast = false;
    uint32_t residual = 0;
    double clampMin = 0, clampMax = 0;
    fb::ConvActivation convActivation = fb::ConvActivation_None;
    double activationAlpha = 0, activationBeta = 0;
    // Collective.
    fb::CollectiveKind collective = fb::CollectiveKind_AllReduce;
    fb::CollectiveReduction reduction = fb::CollectiveReduction_Sum;
    std::vector<uint8_t> axes;
    int64_t dim2 = 0;
  };
  struct CudaImageEntry {
    std::string arch;
    std::vector<uint8_t> cubin;
  };
  struct CudaPtxEntry {
    std::string arch, ptx;
  };

  // Overrides for broken artifacts.
  uint32_t version = fb::Version_Current;
  fb::Device device = fb::Device_CPU;
  std::optional<uint64_t> arenaBytes;
  std::optional<uint64_t> moduleHash;
  std::vector<std::string> isa; // CpuModule.isa
  bool withModule = true;
  // CUDA programs: the CudaModule (written when withCudaModule).
  bool withCudaModule = false;
  std::vector<CudaImageEntry> cudaImages;
  std::vector<CudaPtxEntry> cudaPtx;

  /// A CUDA program: no CPU module, a CUDA module without code yet (tests add cudaImages /
  /// cudaPtx for their kernels).
  static ArtifactBuilder cuda() {
    ArtifactBuilder a;
    a.device = fb::Device_CUDA;
    a.withModule = false;
    a.withCudaModule = true;
    return a;
  }

  std::vector<Tensor> inputs, outputs;
  std::vector<Buf> buffers;
  std::vector<ConstantEntry> constants;
  std::vector<uint8_t> constantData;
  std::vector<KernelEntry> kernels;
  std::vector<Step> steps;
  std::vector<int64_t> meshSizes; // programs with collectives
  std::vector<Symbol> symbols;    // symbolic programs: Program.symbols

  /// Symbolic dims written as text, {"m", "16"}: a number is a static size; anything else a
  /// size expression (the shape holds -1 there, `dims` the text).
  struct SymShape {
    std::vector<int64_t> shape;
    std::vector<std::string> dims;
  };
  static SymShape symShape(const std::vector<std::string> &text) {
    SymShape s;
    for (const std::string &t : text) {
      bool number = !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
      s.shape.push_back(number ? std::stoll(t) : -1);
      s.dims.push_back(number ? "" : t);
    }
    return s;
  }
  /// Symbolic counterparts of input(), output(), arena() and kernel parameters (dims as text).
  uint32_t symbolicInput(fb::DType d, const std::vector<std::string> &dims, std::string name) {
    SymShape s = symShape(dims);
    inputs.push_back({name, d, s.shape, s.dims});
    return symbolicBuffer(fb::BufferKind_Input, (uint32_t)inputs.size() - 1, 0, d, dims);
  }
  uint32_t symbolicOutput(fb::DType d, const std::vector<std::string> &dims, std::string name) {
    SymShape s = symShape(dims);
    outputs.push_back({name, d, s.shape, s.dims});
    return symbolicBuffer(fb::BufferKind_Output, (uint32_t)outputs.size() - 1, 0, d, dims);
  }
  uint32_t symbolicArena(uint64_t offset, fb::DType d, const std::vector<std::string> &dims) {
    return symbolicBuffer(fb::BufferKind_Arena, 0, offset, d, dims);
  }
  uint32_t symbolicBuffer(fb::BufferKind kind, uint32_t index, uint64_t offset, fb::DType d,
                          const std::vector<std::string> &dims) {
    SymShape s = symShape(dims);
    buffers.push_back({kind, index, offset, d, s.shape, s.dims});
    return (uint32_t)buffers.size() - 1;
  }
  static Tensor param(fb::DType d, const std::vector<std::string> &dims) {
    SymShape s = symShape(dims);
    return {"", d, s.shape, s.dims};
  }
  /// The Symbols buffer: i64[symbols.size()].
  uint32_t symbolValues() {
    return buffer(fb::BufferKind_Symbols, 0, 0, fb::DType_I64, {(int64_t)symbols.size()});
  }

  /// A graph input and a buffer covering it; returns the buffer index.
  uint32_t input(fb::DType d, std::vector<int64_t> shape, std::string name = "") {
    inputs.push_back({name.empty() ? "in" + std::to_string(inputs.size()) : name, d, shape});
    return buffer(fb::BufferKind_Input, (uint32_t)inputs.size() - 1, 0, d, shape);
  }
  uint32_t output(fb::DType d, std::vector<int64_t> shape, std::string name = "") {
    outputs.push_back({name.empty() ? "out" + std::to_string(outputs.size()) : name, d, shape});
    return buffer(fb::BufferKind_Output, (uint32_t)outputs.size() - 1, 0, d, shape);
  }
  /// A constant with these bytes (64-byte aligned in constant_data) and a buffer covering it.
  uint32_t constant(fb::DType d, std::vector<int64_t> shape, const void *data) {
    size_t size = bytesOf(d, shape);
    uint64_t offset = (constantData.size() + 63) / 64 * 64;
    constantData.resize(offset + size);
    if (size)
      std::memcpy(constantData.data() + offset, data, size);
    constants.push_back({"c" + std::to_string(constants.size()), offset, size});
    return buffer(fb::BufferKind_Constant, (uint32_t)constants.size() - 1, 0, d, shape);
  }
  uint32_t arena(uint64_t offset, fb::DType d, std::vector<int64_t> shape) {
    return buffer(fb::BufferKind_Arena, 0, offset, d, shape);
  }
  uint32_t buffer(fb::BufferKind kind, uint32_t index, uint64_t offset, fb::DType d,
                  std::vector<int64_t> shape) {
    buffers.push_back({kind, index, offset, d, shape});
    return (uint32_t)buffers.size() - 1;
  }
  uint32_t kernel(std::string name, std::vector<Tensor> params) {
    kernels.push_back({name, params});
    return (uint32_t)kernels.size() - 1;
  }
  void launch(uint32_t kernel, std::vector<uint32_t> args) {
    Step s{fb::Step_KernelLaunch};
    s.ops = {kernel};
    s.ops.insert(s.ops.end(), args.begin(), args.end());
    steps.push_back(s);
  }
  /// A CUDA kernel launch.
  void launch(uint32_t kernel, std::vector<uint32_t> args, std::vector<uint32_t> grid,
              std::vector<uint32_t> block, uint32_t sharedBytes = 0) {
    launch(kernel, std::move(args));
    steps.back().grid = std::move(grid);
    steps.back().block = std::move(block);
    steps.back().sharedBytes = sharedBytes;
  }
  void gemm(uint32_t a, uint32_t b, uint32_t c, bool transA = false, bool transB = false,
            double alpha = 1, double beta = 0) {
    Step s{fb::Step_Gemm, {a, b, c}, transA, transB, alpha, beta};
    steps.push_back(s);
  }
  /// A GEMM with an epilogue (bias: a buffer index, or -1 for none).
  void gemm(uint32_t a, uint32_t b, uint32_t c, bool transA, bool transB, double alpha,
            double beta, int64_t bias, fb::GemmActivation activation) {
    gemm(a, b, c, transA, transB, alpha, beta);
    steps.back().hasBias = bias >= 0;
    steps.back().bias = bias >= 0 ? (uint32_t)bias : 0;
    steps.back().activation = activation;
  }
  void conv(uint32_t x, uint32_t w, uint32_t y, std::vector<int64_t> strides,
            std::vector<int64_t> padLow, std::vector<int64_t> padHigh,
            std::vector<int64_t> dilations, int64_t groups,
            std::vector<int64_t> lhsDilation = {}) {
    Step s{fb::Step_Conv, {x, w, y}};
    s.lhsDilation = lhsDilation;
    s.strides = strides;
    s.padLow = padLow;
    s.padHigh = padHigh;
    s.dilations = dilations;
    s.groups = groups;
    steps.push_back(s);
  }
  /// Gives the last step (a conv) an epilogue: bias and residual buffers (kNone: none), and a
  /// clamp to [lo, hi] when clamp.
  void convEpilogue(uint32_t bias, uint32_t residual, bool clamp, double lo = 0, double hi = 0) {
    Step &s = steps.back();
    s.hasBias = bias != kNone;
    s.bias = s.hasBias ? bias : 0;
    s.hasResidual = residual != kNone;
    s.residual = s.hasResidual ? residual : 0;
    s.clamp = clamp;
    s.clampMin = lo;
    s.clampMax = hi;
  }
  /// Gives the last step (a conv) an activation after its epilogue (alpha, beta: hard swish's).
  void convActivation(fb::ConvActivation kind, double alpha = 0, double beta = 0) {
    Step &s = steps.back();
    s.convActivation = kind;
    s.activationAlpha = alpha;
    s.activationBeta = beta;
  }
  /// tk.pool: window, strides, pad_low, pad_high, dilations (4 entries each).
  void pool(uint32_t x, uint32_t y, bool max, std::vector<int64_t> window,
            std::vector<int64_t> strides, std::vector<int64_t> padLow,
            std::vector<int64_t> padHigh, std::vector<int64_t> dilations) {
    Step s{fb::Step_Pool, {x, y}};
    s.flagA = max;
    s.lhsDilation = window; // the window travels in lhsDilation (unused by pools)
    s.strides = strides;
    s.padLow = padLow;
    s.padHigh = padHigh;
    s.dilations = dilations;
    steps.push_back(s);
  }
  void topk(uint32_t x, uint32_t values, uint32_t indices, int64_t dim, bool largest) {
    Step s{fb::Step_TopK, {x, values, indices}};
    s.dim = dim;
    s.flagA = largest;
    steps.push_back(s);
  }
  void copy(uint32_t source, uint32_t target) { steps.push_back(Step{fb::Step_Copy, {source, target}}); }
  /// tk.attention; mask/bias kNone when absent (scale in alpha, masked_value in beta).
  static constexpr uint32_t kNone = ~0u;
  void attention(uint32_t q, uint32_t k, uint32_t v, uint32_t mask, uint32_t bias, uint32_t out,
                 double scale, bool causal, double maskedValue) {
    Step s{fb::Step_Attention, {q, k, v, out, mask, bias}};
    s.alpha = scale;
    s.beta = maskedValue;
    s.flagA = causal;
    steps.push_back(s);
  }
  /// tk.attention_grad; mask/bias kNone when absent.
  void attentionGrad(uint32_t q, uint32_t k, uint32_t v, uint32_t out, uint32_t gradOut,
                     uint32_t gradQ, uint32_t gradK, uint32_t gradV, uint32_t mask, uint32_t bias,
                     double scale, bool causal, double maskedValue) {
    Step s{fb::Step_AttentionGrad, {q, k, v, out, gradOut, gradQ, gradK, gradV, mask, bias}};
    s.alpha = scale;
    s.beta = maskedValue;
    s.flagA = causal;
    steps.push_back(s);
  }
  /// A collective over `axes` of meshSizes (async: all_reduce / reduce_scatter, finished by a
  /// later wait(step index)).
  void collective(fb::CollectiveKind kind, uint32_t in, uint32_t out, std::vector<uint8_t> axes,
                  int64_t dim = 0, int64_t dim2 = 0,
                  fb::CollectiveReduction reduction = fb::CollectiveReduction_Sum,
                  bool async = false) {
    Step s{fb::Step_Collective, {in, out}};
    s.collective = kind;
    s.reduction = reduction;
    s.axes = std::move(axes);
    s.dim = dim;
    s.dim2 = dim2;
    s.flagA = async;
    steps.push_back(s);
  }
  void wait(uint32_t collectiveStep) { steps.push_back(Step{fb::Step_Wait, {collectiveStep}}); }

  std::vector<uint8_t> finish() const {
    flatbuffers::FlatBufferBuilder b;
    fb::FinishProgramBuffer(b, build(b));
    return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  }

  /// The Program table in `b` (a root, or a training entry's program); `training` is the root's.
  flatbuffers::Offset<fb::Program> build(flatbuffers::FlatBufferBuilder &b,
                                         flatbuffers::Offset<fb::Training> training = 0) const {
    auto strings = [&](const std::vector<std::string> &texts) {
      std::vector<flatbuffers::Offset<flatbuffers::String>> out;
      for (const std::string &t : texts)
        out.push_back(b.CreateString(t));
      return out;
    };
    auto tensors = [&](const std::vector<Tensor> &ts) {
      std::vector<flatbuffers::Offset<fb::TensorSpec>> out;
      for (const Tensor &t : ts) {
        auto dims = strings(t.dims);
        out.push_back(fb::CreateTensorSpecDirect(b, t.name.c_str(), t.dtype, &t.shape, nullptr,
                                                 t.dims.empty() ? nullptr : &dims));
      }
      return b.CreateVector(out);
    };
    auto in = tensors(inputs), out = tensors(outputs);
    std::vector<flatbuffers::Offset<fb::Buffer>> bufs;
    uint64_t arenaEnd = 0;
    for (const Buf &x : buffers) {
      auto dims = strings(x.dims);
      bufs.push_back(fb::CreateBufferDirect(b, x.kind, x.index, x.offset, x.dtype, &x.shape,
                                            x.dims.empty() ? nullptr : &dims));
      if (x.kind == fb::BufferKind_Arena && x.dims.empty()) // (symbolic: set arenaBytes)
        arenaEnd = std::max<uint64_t>(arenaEnd, x.offset + bytesOf(x.dtype, x.shape));
    }
    auto bufVec = b.CreateVector(bufs);
    std::vector<flatbuffers::Offset<fb::Constant>> consts;
    for (const ConstantEntry &c : constants)
      consts.push_back(fb::CreateConstantDirect(b, c.name.c_str(), c.offset, c.size));
    auto constVec = b.CreateVector(consts);
    b.ForceVectorAlignment(constantData.size(), 1, 64);
    auto data = b.CreateVector(constantData);
    std::vector<flatbuffers::Offset<fb::Kernel>> ks;
    for (const KernelEntry &k : kernels) {
      auto params = tensors(k.params);
      ks.push_back(fb::CreateKernel(b, b.CreateString(k.name), params));
    }
    auto kernelVec = b.CreateVector(ks);
    flatbuffers::Offset<fb::CpuModule> module = 0;
    if (withModule) {
      const std::vector<uint8_t> &so = testKernelModule();
      std::vector<flatbuffers::Offset<flatbuffers::String>> isaNames;
      for (const std::string &f : isa)
        isaNames.push_back(b.CreateString(f));
      module = fb::CreateCpuModuleDirect(
          b, &so, "c++ (test kernels)",
          moduleHash ? *moduleHash : tcc::rt::artifactHash(so.data(), so.size()), &isaNames);
    }
    flatbuffers::Offset<fb::CudaModule> cudaModule = 0;
    if (withCudaModule) {
      std::vector<flatbuffers::Offset<fb::CudaPtx>> ptx;
      for (const CudaPtxEntry &p : cudaPtx)
        ptx.push_back(fb::CreateCudaPtxDirect(b, p.arch.c_str(), p.ptx.c_str()));
      std::vector<flatbuffers::Offset<fb::CudaImage>> images;
      for (const CudaImageEntry &i : cudaImages)
        images.push_back(fb::CreateCudaImageDirect(b, i.arch.c_str(), &i.cubin));
      cudaModule = fb::CreateCudaModuleDirect(b, &ptx, &images, "test (hand-written)");
    }
    std::vector<flatbuffers::Offset<fb::Launch>> launches;
    for (const Step &s : steps) {
      flatbuffers::Offset<void> step;
      switch (s.type) {
      case fb::Step_KernelLaunch: {
        std::vector<uint32_t> args(s.ops.begin() + 1, s.ops.end());
        step = fb::CreateKernelLaunchDirect(b, s.ops[0], &args, s.grid.empty() ? nullptr : &s.grid,
                                            s.block.empty() ? nullptr : &s.block, s.sharedBytes,
                                            s.gridWork.empty() ? nullptr : s.gridWork.c_str(),
                                            s.workPerBlock)
                   .Union();
        break;
      }
      case fb::Step_Gemm:
        step = fb::CreateGemm(b, s.ops[0], s.ops[1], s.ops[2], s.flagA, s.flagB, s.alpha, s.beta,
                              s.hasBias, s.bias, s.activation)
                   .Union();
        break;
      case fb::Step_Conv:
        step = fb::CreateConvDirect(b, s.ops[0], s.ops[1], s.ops[2], &s.strides, &s.padLow,
                                    &s.padHigh, &s.dilations, s.groups,
                                    s.lhsDilation.empty() ? nullptr : &s.lhsDilation,
                                    s.hasBias, s.bias, s.hasResidual, s.residual, s.clamp,
                                    s.clampMin, s.clampMax, s.channelsLast, s.convActivation,
                                    s.activationAlpha, s.activationBeta)
                   .Union();
        break;
      case fb::Step_Pool:
        step = fb::CreatePoolDirect(b, s.ops[0], s.ops[1],
                                    s.flagA ? fb::PoolKind_Max : fb::PoolKind_Sum,
                                    &s.lhsDilation, &s.strides, &s.padLow, &s.padHigh,
                                    &s.dilations)
                   .Union();
        break;
      case fb::Step_TopK:
        step = fb::CreateTopK(b, s.ops[0], s.ops[1], s.ops[2], s.dim, s.flagA).Union();
        break;
      case fb::Step_Copy:
        step = fb::CreateCopy(b, s.ops[0], s.ops[1]).Union();
        break;
      case fb::Step_Attention:
        step = fb::CreateAttention(b, s.ops[0], s.ops[1], s.ops[2], s.ops[3], s.ops[4] != kNone,
                                   s.ops[4] != kNone ? s.ops[4] : 0, s.ops[5] != kNone,
                                   s.ops[5] != kNone ? s.ops[5] : 0, s.alpha, s.flagA, s.beta)
                   .Union();
        break;
      case fb::Step_AttentionGrad:
        step = fb::CreateAttentionGrad(b, s.ops[0], s.ops[1], s.ops[2], s.ops[3], s.ops[4],
                                       s.ops[5], s.ops[6], s.ops[7], s.ops[8] != kNone,
                                       s.ops[8] != kNone ? s.ops[8] : 0, s.ops[9] != kNone,
                                       s.ops[9] != kNone ? s.ops[9] : 0, s.alpha, s.flagA, s.beta)
                   .Union();
        break;
      case fb::Step_Collective:
        step = fb::CreateCollectiveDirect(b, s.collective, s.reduction, s.ops[0], s.ops[1],
                                          &s.axes, s.dim, s.dim2, s.flagA)
                   .Union();
        break;
      case fb::Step_Wait:
        step = fb::CreateWait(b, s.ops[0]).Union();
        break;
      default:
        break;
      }
      launches.push_back(fb::CreateLaunch(b, s.type, step));
    }
    auto launchVec = b.CreateVector(launches);
    auto mesh = meshSizes.empty() ? 0 : b.CreateVector(meshSizes);
    std::vector<flatbuffers::Offset<fb::SymbolRange>> ranges;
    for (const Symbol &x : symbols)
      ranges.push_back(fb::CreateSymbolRangeDirect(b, x.name.c_str(), x.min, x.max));
    auto symbolVec = symbols.empty() ? 0 : b.CreateVector(ranges);
    return fb::CreateProgram(b, version, b.CreateString("tcc test"), device, in, out, bufVec,
                             arenaBytes ? *arenaBytes : arenaEnd, constVec, data, kernelVec,
                             module, cudaModule, launchVec, training, mesh, symbolVec);
  }
};

/// A training artifact: a root program without inputs, outputs or launches, the state with its
/// initial values and entries whose programs are ArtifactBuilders. Fields left alone get
/// sensible values (initial offsets: packed at 64-byte boundaries); tests override them.
class TrainingArtifactBuilder {
public:
  struct State {
    std::string name;
    fb::StateKind kind;
    fb::DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> initial;          // bytesOf(dtype, shape) bytes
    std::optional<uint64_t> initialOffset; // override
  };
  struct Binding {
    fb::BindingRole role;
    uint32_t state = 0;
  };
  struct Entry {
    std::string name;
    ArtifactBuilder program;
    std::vector<Binding> inputs, outputs;
  };

  ArtifactBuilder root = [] {
    ArtifactBuilder a;
    a.withModule = false;
    return a;
  }();
  std::vector<State> state;
  std::vector<Entry> entries;
  uint32_t gradAccumulation = 1;
  std::string config = "{\"loss\": \"test\"}";

  template <class T>
  uint32_t addState(std::string name, fb::StateKind kind, fb::DType dtype,
                    std::vector<int64_t> shape, const std::vector<T> &values) {
    State s{std::move(name), kind, dtype, std::move(shape), {}, std::nullopt};
    s.initial.resize(bytesOf(dtype, s.shape));
    if (values.size() * sizeof(T) != s.initial.size())
      throw std::runtime_error("addState: " + std::to_string(values.size()) + " values for " +
                               std::to_string(s.initial.size()) + " bytes");
    if (!s.initial.empty())
      std::memcpy(s.initial.data(), values.data(), s.initial.size());
    state.push_back(std::move(s));
    return (uint32_t)state.size() - 1;
  }
  Entry *entry(const std::string &name) {
    for (Entry &e : entries)
      if (e.name == name)
        return &e;
    return nullptr;
  }

  std::vector<uint8_t> finish() const {
    flatbuffers::FlatBufferBuilder b;
    std::vector<uint8_t> initial;
    std::vector<flatbuffers::Offset<fb::StateTensor>> states;
    for (const State &s : state) {
      uint64_t offset = (initial.size() + 63) / 64 * 64;
      initial.resize(offset + s.initial.size());
      if (!s.initial.empty())
        std::memcpy(initial.data() + offset, s.initial.data(), s.initial.size());
      states.push_back(fb::CreateStateTensorDirect(b, s.name.c_str(), s.kind, s.dtype, &s.shape,
                                                   s.initialOffset ? *s.initialOffset : offset));
    }
    auto bindings = [&](const std::vector<Binding> &list) {
      std::vector<flatbuffers::Offset<fb::Binding>> out;
      for (const Binding &x : list)
        out.push_back(fb::CreateBinding(b, x.role, x.state));
      return b.CreateVector(out);
    };
    std::vector<flatbuffers::Offset<fb::Entry>> es;
    for (const Entry &e : entries) {
      auto program = e.program.build(b);
      auto in = bindings(e.inputs), out = bindings(e.outputs);
      es.push_back(fb::CreateEntry(b, b.CreateString(e.name), program, in, out));
    }
    auto stateVec = b.CreateVector(states);
    b.ForceVectorAlignment(initial.size(), 1, 64);
    auto initialVec = b.CreateVector(initial);
    auto entryVec = b.CreateVector(es);
    auto training = fb::CreateTraining(b, stateVec, initialVec, entryVec, gradAccumulation,
                                       b.CreateString(config));
    fb::FinishProgramBuffer(b, root.build(b, training));
    return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  }
};

} // namespace tcc::rt::test
