//===- ArtifactWriter.cpp - Serialise a tk program as a tcc artifact ------===//
//
// Walks the module's tk.program in order and writes the FlatBuffers artifact: one Buffer entry
// per memref value (arguments -> Input/Output, memref.get_global -> Constant, tk.alloc ->
// Arena at its planned offset, tk.view -> the source's base at an added offset), one Launch
// per step, the constants' bytes (64-byte aligned) and the compiled kernels.
//
// CUDA programs: every tk.launch carries its kernel's grid, block and dynamic shared memory;
// tk.conv and tk.topk become launches of the kernels generated for them (their operands, in
// order, are the kernel's parameters); the CudaModule holds the cubins and PTX.
//
// One Writer builds one Program table; an inference artifact is that table as the root, a
// training artifact a root holding the state and one such table per entry point.
//
// Assumes: -tcc-plan-memory has run (every tk.alloc has an offset).
//
//===----------------------------------------------------------------------===//
#include "tcc/Compiler/ArtifactWriter.h"

#include "tcc/IR/Sharding.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Runtime/ArtifactHash.h"
#include "tcc/Runtime/artifact_generated.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <cstring>
#include <limits>

using namespace mlir;
namespace fb = tcc::artifact;

namespace tcc {
namespace {

fb::DType dtypeOf(Type elementType) {
  return static_cast<fb::DType>(static_cast<uint8_t>(dtypeFromType(elementType)));
}

constexpr const char *kProducer = "tcc 0.1.0";

/// A buffer's static shape: -1 for a symbolic dim (dimsVector gives its expression).
flatbuffers::Offset<flatbuffers::Vector<int64_t>> shapeVector(flatbuffers::FlatBufferBuilder &fbb,
                                                              MemRefType type) {
  std::vector<int64_t> shape;
  for (int64_t d : type.getShape())
    shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
  return fbb.CreateVector(shape);
}

/// A buffer's dims as expressions ("" for static ones); none for a static buffer.
flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>>
dimsVector(flatbuffers::FlatBufferBuilder &fbb, MemRefType type) {
  if (type.hasStaticShape())
    return 0;
  std::vector<std::string> dims;
  for (const SymExpr &d : tk::bufferDims(type))
    dims.push_back(d.isConstant() ? "" : d.str());
  return fbb.CreateVectorOfStrings(dims);
}

/// Bytes of a builder's finished buffer.
std::vector<uint8_t> bytesOf(const flatbuffers::FlatBufferBuilder &fbb) {
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

/// Builds the Program table of one module's tk.program into a builder that may hold other
/// programs (a training artifact's entries).
class Writer {
public:
  Writer(flatbuffers::FlatBufferBuilder &fbb, ModuleOp module, const ArtifactContents &contents)
      : module_(module), contents_(contents), fbb_(fbb) {}

  flatbuffers::Offset<fb::Program> build(ArtifactStats *stats);

private:
  uint32_t bufferFor(Value value);
  uint32_t addBuffer(fb::BufferKind kind, uint32_t index, uint64_t offset, MemRefType type,
                     int32_t slot = -1, uint64_t slotOffset = 0);
  uint32_t constantFor(memref::GetGlobalOp get);
  uint32_t kernelFor(StringRef name);
  uint32_t kernelFor(StringRef name, ArrayRef<Value> params);
  /// The program's size symbol values (tk.symbol_values), made at its start when none of its
  /// kernels has needed them yet.
  Value symbolValues(func::FuncOp program);
  using Names = flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>>;
  flatbuffers::Offset<fb::Launch> kernelLaunch(uint32_t kernel, ArrayRef<Value> args,
                                               StringRef name, Names nodes);
  flatbuffers::Offset<fb::CudaModule> cudaModule();
  bool cuda() const { return contents_.device == "cuda"; }
  void addStep(Operation *op);
  flatbuffers::Offset<flatbuffers::Vector<int64_t>> shapeOf(MemRefType type) {
    return shapeVector(fbb_, type);
  }
  flatbuffers::Offset<flatbuffers::Vector<int64_t>> longs(ArrayRef<int64_t> v) {
    return fbb_.CreateVector(v.data(), v.size());
  }

  ModuleOp module_;
  const ArtifactContents &contents_;
  flatbuffers::FlatBufferBuilder &fbb_;
  func::FuncOp program_;
  llvm::DenseMap<Value, size_t> asyncCollectives_; // async tk.collective output -> its launch
  size_t numInputs_ = 0;

  struct BufferLoc {
    fb::BufferKind kind;
    uint32_t index;
    uint64_t offset;
    int32_t slot;        // symbolic programs' arena buffers: their ArenaSlot, else -1
    uint64_t slotOffset;
  };
  std::vector<flatbuffers::Offset<fb::ArenaSlot>> arenaSlots_;
  llvm::DenseMap<Value, uint32_t> bufferIndex_;
  std::vector<BufferLoc> bufferLocs_;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers_;

  llvm::StringMap<uint32_t> constantIndex_;
  std::vector<flatbuffers::Offset<fb::Constant>> constants_;
  std::vector<uint8_t> constantData_;

  llvm::StringMap<uint32_t> kernelIndex_;
  llvm::StringMap<const codegen::CudaLaunchConfig *> cudaLaunch_;
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels_;

  std::vector<flatbuffers::Offset<fb::Launch>> launches_;
  size_t externCalls_ = 0;
};

uint32_t Writer::addBuffer(fb::BufferKind kind, uint32_t index, uint64_t offset,
                           MemRefType type, int32_t slot, uint64_t slotOffset) {
  auto shape = shapeOf(type);
  auto dims = dimsVector(fbb_, type);
  buffers_.push_back(fb::CreateBuffer(fbb_, kind, index, offset, dtypeOf(type.getElementType()),
                                      shape, dims, slot, slotOffset));
  bufferLocs_.push_back({kind, index, offset, slot, slotOffset});
  return buffers_.size() - 1;
}

uint32_t Writer::bufferFor(Value value) {
  if (auto it = bufferIndex_.find(value); it != bufferIndex_.end())
    return it->second;
  auto type = cast<MemRefType>(value.getType());
  uint32_t index;
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    size_t n = arg.getArgNumber();
    index = n < numInputs_ ? addBuffer(fb::BufferKind_Input, n, 0, type)
                           : addBuffer(fb::BufferKind_Output, n - numInputs_, 0, type);
  } else if (auto alloc = value.getDefiningOp<tk::AllocOp>()) {
    if (!alloc.getOffset())
      throw Error("tk.alloc without an arena offset: run -tcc-plan-memory before writing");
    auto lifetime = alloc->getAttrOfType<DenseI64ArrayAttr>(tk::kLifetimeAttr);
    int32_t slot = lifetime && lifetime.size() == 2 ? (int32_t)arenaSlots_.size() : -1;
    index = addBuffer(fb::BufferKind_Arena, 0, *alloc.getOffset(), type, slot, 0);
    if (slot >= 0)
      arenaSlots_.push_back(fb::CreateArenaSlot(fbb_, index, lifetime[0], lifetime[1]));
  } else if (auto view = value.getDefiningOp<tk::ViewOp>()) {
    BufferLoc base = bufferLocs_[bufferFor(view.getSource())];
    index = addBuffer(base.kind, base.index, base.offset + view.getByteOffset(), type, base.slot,
                      base.slotOffset + view.getByteOffset());
  } else if (auto get = value.getDefiningOp<memref::GetGlobalOp>()) {
    index = addBuffer(fb::BufferKind_Constant, constantFor(get), 0, type);
  } else if (value.getDefiningOp<tk::SymbolValuesOp>()) {
    index = addBuffer(fb::BufferKind_Symbols, 0, 0, type);
  } else {
    std::string what;
    llvm::raw_string_ostream os(what);
    value.print(os);
    throw Error("artifact: cannot tell where the buffer " + what + " lives");
  }
  bufferIndex_[value] = index;
  return index;
}

uint32_t Writer::constantFor(memref::GetGlobalOp get) {
  if (auto it = constantIndex_.find(get.getName()); it != constantIndex_.end())
    return it->second;
  auto global = module_.lookupSymbol<memref::GlobalOp>(get.getNameAttr());
  auto init = global ? dyn_cast_or_null<ElementsAttr>(global.getInitialValueAttr()) : nullptr;
  if (!init)
    throw Error("artifact: constant '" + get.getName().str() + "' has no initial value");
  Tensor t = tensorFromAttr(init);
  size_t offset = (constantData_.size() + tk::kBufferAlignment - 1) / tk::kBufferAlignment *
                  tk::kBufferAlignment;
  constantData_.resize(offset + t.byteSize());
  if (t.byteSize())
    std::memcpy(constantData_.data() + offset, t.raw(), t.byteSize());
  constants_.push_back(fb::CreateConstant(fbb_, fbb_.CreateString(get.getName().str()), offset,
                                          t.byteSize()));
  uint32_t index = constants_.size() - 1;
  constantIndex_[get.getName()] = index;
  return index;
}

/// A Kernel entry whose parameters have `types` (made once per name).
static uint32_t addKernel(flatbuffers::FlatBufferBuilder &fbb, StringRef name,
                          ArrayRef<Type> types, llvm::StringMap<uint32_t> &index,
                          std::vector<flatbuffers::Offset<fb::Kernel>> &kernels) {
  if (auto it = index.find(name); it != index.end())
    return it->second;
  std::vector<flatbuffers::Offset<fb::TensorSpec>> params;
  for (Type t : types) {
    auto type = cast<MemRefType>(t);
    params.push_back(fb::CreateTensorSpec(fbb, 0, dtypeOf(type.getElementType()),
                                          shapeVector(fbb, type), 0, dimsVector(fbb, type)));
  }
  auto nameOff = fbb.CreateString(name.str());
  auto paramsVec = fbb.CreateVector(params);
  kernels.push_back(fb::CreateKernel(fbb, nameOff, paramsVec));
  index[name] = kernels.size() - 1;
  return kernels.size() - 1;
}

uint32_t Writer::kernelFor(StringRef name) {
  if (auto it = kernelIndex_.find(name); it != kernelIndex_.end())
    return it->second;
  auto kernel = module_.lookupSymbol<func::FuncOp>(name);
  if (!kernel)
    throw Error("artifact: launched kernel '" + name.str() + "' does not exist");
  return addKernel(fbb_, name, kernel.getFunctionType().getInputs(), kernelIndex_, kernels_);
}

uint32_t Writer::kernelFor(StringRef name, ArrayRef<Value> params) {
  SmallVector<Type> types;
  for (Value v : params)
    types.push_back(v.getType());
  return addKernel(fbb_, name, types, kernelIndex_, kernels_);
}

/// A KernelLaunch step; on CUDA with the launch configuration the kernel was emitted for.
Value Writer::symbolValues(func::FuncOp program) {
  Value found;
  program.walk([&](tk::SymbolValuesOp op) {
    found = op;
    return WalkResult::interrupt();
  });
  if (found)
    return found;
  auto symbols = module_->getAttrOfType<DictionaryAttr>(TccDialect::kSymbolsAttrName);
  Block &entry = program.getBody().front();
  OpBuilder b(&entry, entry.begin());
  return b.create<tk::SymbolValuesOp>(
      program.getLoc(), MemRefType::get({symbols ? (int64_t)symbols.size() : 0}, b.getI64Type()));
}

flatbuffers::Offset<fb::Launch> Writer::kernelLaunch(uint32_t kernel, ArrayRef<Value> args,
                                                     StringRef name, Names nodes) {
  std::vector<uint32_t> argIndices;
  for (Value v : args)
    argIndices.push_back(bufferFor(v));
  auto argsVec = fbb_.CreateVector(argIndices);
  flatbuffers::Offset<flatbuffers::Vector<uint32_t>> grid, block;
  uint32_t shared = 0, workPerBlock = 0;
  flatbuffers::Offset<flatbuffers::String> gridWork;
  if (cuda()) {
    auto it = cudaLaunch_.find(name);
    if (it == cudaLaunch_.end())
      throw Error("artifact: no CUDA code for the launched kernel '" + name.str() + "'");
    const codegen::CudaLaunchConfig &c = *it->second;
    grid = fbb_.CreateVector(c.grid.data(), c.grid.size());
    block = fbb_.CreateVector(c.block.data(), c.block.size());
    shared = c.sharedBytes;
    if (!c.gridWork.empty()) {
      gridWork = fbb_.CreateString(c.gridWork);
      workPerBlock = c.workPerBlock;
    }
  }
  auto step =
      fb::CreateKernelLaunch(fbb_, kernel, argsVec, grid, block, shared, gridWork, workPerBlock);
  return fb::CreateLaunch(fbb_, fb::Step_KernelLaunch, step.Union(), nodes);
}

} // namespace

std::vector<std::string> nodeNames(Location loc) {
  std::vector<std::string> names;
  loc->walk([&](Location l) {
    if (auto name = dyn_cast<NameLoc>(l)) {
      std::string n = name.getName().str();
      if (std::find(names.begin(), names.end(), n) == names.end())
        names.push_back(std::move(n));
      return WalkResult::skip();
    }
    return WalkResult::advance();
  });
  return names;
}

namespace {

void Writer::addStep(Operation *op) {
  flatbuffers::Offset<fb::Launch> launch;
  Names nodes;
  if (isa<tk::LaunchOp, tk::GemmOp, tk::ConvOp, tk::TopKOp, tk::AttentionOp, tk::AttentionGradOp,
          tk::CollectiveOp>(op))
    nodes = fbb_.CreateVectorOfStrings(nodeNames(op->getLoc()));
  if (auto l = dyn_cast<tk::LaunchOp>(op)) {
    SmallVector<Value> args(l.getArgs());
    launch = kernelLaunch(kernelFor(l.getCallee()), args, l.getCallee(), nodes);
  } else if (cuda() && isa<tk::ConvOp, tk::TopKOp, tk::AttentionOp, tk::AttentionGradOp>(op)) {
    // Generated kernels take the op's buffers in operand order; an op launching several
    // kernels (attention's gradient) is a step per kernel.
    auto it = contents_.cudaLibraryCalls.find(op);
    if (it == contents_.cudaLibraryCalls.end() || it->second.empty())
      throw Error("artifact: no CUDA kernel was generated for '" +
                  op->getName().getStringRef().str() + "'");
    for (size_t index : it->second) {
      if (index >= contents_.cudaKernels.size())
        throw Error("artifact: no CUDA kernel was generated for '" +
                    op->getName().getStringRef().str() + "'");
      if (launch.o)
        launches_.push_back(launch);
      const std::string &name = contents_.cudaKernels[index].name;
      SmallVector<Value> args(op->getOperands());
      if (contents_.cudaKernels[index].launch.symbolsArgument)
        args.push_back(symbolValues(op->getParentOfType<func::FuncOp>()));
      launch = kernelLaunch(kernelFor(name, args), args, name, nodes);
    }
  } else if (auto g = dyn_cast<tk::GemmOp>(op)) {
    // The epilogue (bias, activation) is computed by the GEMM library (tcc/Passes/GemmEpilogue.h):
    // cuBLASLt all but the erf GELU, libtccrt's CPU sgemm every one on f32 (each runtime refuses
    // the rest).
    bool hasBias = static_cast<bool>(g.getBias());
    bool onCuda = contents_.device == "cuda";
    bool can = onCuda ? g.getActivation() != tk::GemmActivation::GeluErf
                      : cast<MemRefType>(g.getC().getType()).getElementType().isF32();
    if ((hasBias || g.getActivation() != tk::GemmActivation::None) && !can)
      throw Error("artifact: a tk.gemm with a " +
                  tk::stringifyGemmActivation(g.getActivation()).str() + " epilogue in a '" +
                  contents_.device +
                  "' program (the CPU's sgemm applies epilogues to f32 GEMMs only; cuBLASLt has "
                  "no erf GELU)");
    fb::GemmActivation activation = fb::GemmActivation_None;
    switch (g.getActivation()) {
    case tk::GemmActivation::None:
      break;
    case tk::GemmActivation::Relu:
      activation = fb::GemmActivation_Relu;
      break;
    case tk::GemmActivation::GeluTanh:
      activation = fb::GemmActivation_GeluTanh;
      break;
    case tk::GemmActivation::GeluErf:
      activation = fb::GemmActivation_GeluErf;
      break;
    }
    uint32_t bias = hasBias ? bufferFor(g.getBias()) : 0;
    auto step = fb::CreateGemm(fbb_, bufferFor(g.getA()), bufferFor(g.getB()), bufferFor(g.getC()),
                               g.getTransA(), g.getTransB(), g.getAlpha().convertToDouble(),
                               g.getBeta().convertToDouble(), hasBias, bias, activation);
    launch = fb::CreateLaunch(fbb_, fb::Step_Gemm, step.Union(), nodes);
    ++externCalls_;
  } else if (auto c = dyn_cast<tk::ConvOp>(op)) {
    uint32_t in = bufferFor(c.getInput()), w = bufferFor(c.getWeight()),
             out = bufferFor(c.getOutput());
    auto strides = longs(c.getStrides()), low = longs(c.getPadLow()),
         high = longs(c.getPadHigh()), dil = longs(c.getDilations());
    flatbuffers::Offset<flatbuffers::Vector<int64_t>> lhsDil;
    if (!c.getLhsDilation().empty())
      lhsDil = longs(c.getLhsDilation());
    // The epilogue (tcc/Passes/GemmEpilogue.h, ConvEpilogue): libtccrt's f32 convolutions.
    std::optional<double> lo = c.getClampMinValue(), hi = c.getClampMaxValue();
    uint32_t bias = c.getBias() ? bufferFor(c.getBias()) : 0;
    uint32_t residual = c.getResidual() ? bufferFor(c.getResidual()) : 0;
    fb::ConvActivation activation = fb::ConvActivation_None;
    if (StringAttr act = c.getActivationAttr())
      activation = act.getValue() == "silu" ? fb::ConvActivation_Silu : fb::ConvActivation_HardSwish;
    auto gate = [](FloatAttr v) { return v ? v.getValueAsDouble() : 0.0; };
    auto step = fb::CreateConv(fbb_, in, w, out, strides, low, high, dil, c.getGroups(), lhsDil,
                               static_cast<bool>(c.getBias()), bias,
                               static_cast<bool>(c.getResidual()), residual, lo || hi,
                               lo.value_or(-std::numeric_limits<double>::infinity()),
                               hi.value_or(std::numeric_limits<double>::infinity()),
                               c.getChannelsLast(), activation,
                               gate(c.getActivationAlphaAttr()), gate(c.getActivationBetaAttr()));
    launch = fb::CreateLaunch(fbb_, fb::Step_Conv, step.Union(), nodes);
    ++externCalls_;
  } else if (auto p = dyn_cast<tk::PoolOp>(op)) {
    if (cuda())
      throw Error("artifact: a tk.pool in a CUDA program (the compiler generates pooling "
                  "kernels for CUDA)");
    uint32_t in = bufferFor(p.getInput()), out = bufferFor(p.getOutput());
    auto window = longs(p.getWindow()), strides = longs(p.getStrides()),
         low = longs(p.getPadLow()), high = longs(p.getPadHigh()), dil = longs(p.getDilations());
    auto step = fb::CreatePool(fbb_, in, out,
                               p.getKind() == ReduceKind::Max ? fb::PoolKind_Max
                                                              : fb::PoolKind_Sum,
                               window, strides, low, high, dil);
    launch = fb::CreateLaunch(fbb_, fb::Step_Pool, step.Union(), nodes);
    ++externCalls_;
  } else if (auto t = dyn_cast<tk::TopKOp>(op)) {
    auto step = fb::CreateTopK(fbb_, bufferFor(t.getInput()), bufferFor(t.getValues()),
                               bufferFor(t.getIndices()), t.getDim(), t.getLargest());
    launch = fb::CreateLaunch(fbb_, fb::Step_TopK, step.Union(), nodes);
    ++externCalls_;
  } else if (auto a = dyn_cast<tk::AttentionOp>(op)) {
    if (cuda())
      throw Error("artifact: a tk.attention in a CUDA program (the compiler decomposes attention "
                  "for CUDA)");
    auto step = fb::CreateAttention(
        fbb_, bufferFor(a.getQ()), bufferFor(a.getK()), bufferFor(a.getV()),
        bufferFor(a.getOutput()), (bool)a.getMask(), a.getMask() ? bufferFor(a.getMask()) : 0,
        (bool)a.getBias(), a.getBias() ? bufferFor(a.getBias()) : 0,
        a.getScale().convertToDouble(), a.getCausal(), a.getMaskedValue().convertToDouble());
    launch = fb::CreateLaunch(fbb_, fb::Step_Attention, step.Union(), nodes);
    ++externCalls_;
  } else if (auto a = dyn_cast<tk::AttentionGradOp>(op)) {
    auto step = fb::CreateAttentionGrad(
        fbb_, bufferFor(a.getQ()), bufferFor(a.getK()), bufferFor(a.getV()),
        bufferFor(a.getOutput()), bufferFor(a.getGrad()), bufferFor(a.getGradQ()),
        bufferFor(a.getGradK()), bufferFor(a.getGradV()), (bool)a.getMask(),
        a.getMask() ? bufferFor(a.getMask()) : 0, (bool)a.getBias(),
        a.getBias() ? bufferFor(a.getBias()) : 0, a.getScale().convertToDouble(), a.getCausal(),
        a.getMaskedValue().convertToDouble());
    launch = fb::CreateLaunch(fbb_, fb::Step_AttentionGrad, step.Union(), nodes);
    ++externCalls_;
  } else if (auto c = dyn_cast<tk::CollectiveOp>(op)) {
    MeshAttr mesh = meshOf(op);
    if (!mesh)
      throw Error("artifact: a tk.collective in a module without a tcc.mesh");
    std::vector<uint8_t> axes;
    for (auto a : c.getAxes().getAsRange<StringAttr>())
      axes.push_back(static_cast<uint8_t>(mesh.axisIndex(a.getValue())));
    static const std::map<std::string, fb::CollectiveKind> kinds{
        {"all_reduce", fb::CollectiveKind_AllReduce},
        {"all_gather", fb::CollectiveKind_AllGather},
        {"reduce_scatter", fb::CollectiveKind_ReduceScatter},
        {"all_to_all", fb::CollectiveKind_AllToAll},
        {"broadcast", fb::CollectiveKind_Broadcast},
        {"send", fb::CollectiveKind_Send},
        {"recv", fb::CollectiveKind_Recv}};
    auto kind = kinds.find(c.getKind().str());
    if (kind == kinds.end())
      throw Error("artifact: unknown collective '" + c.getKind().str() + "'");
    auto step = fb::CreateCollective(fbb_, kind->second,
                                     static_cast<fb::CollectiveReduction>(c.getReduction()),
                                     bufferFor(c.getInput()), bufferFor(c.getOutput()),
                                     fbb_.CreateVector(axes), c.getDim(), c.getDim2(),
                                     c.getAsync());
    launch = fb::CreateLaunch(fbb_, fb::Step_Collective, step.Union(), nodes);
    if (c.getAsync())
      asyncCollectives_[c.getOutput()] = launches_.size();
    ++externCalls_;
  } else if (auto w = dyn_cast<tk::WaitOp>(op)) {
    auto it = asyncCollectives_.find(w.getOutput());
    if (it == asyncCollectives_.end())
      throw Error("artifact: a tk.wait without an earlier async tk.collective writing its output");
    auto step = fb::CreateWait(fbb_, static_cast<uint32_t>(it->second));
    asyncCollectives_.erase(it);
    launch = fb::CreateLaunch(fbb_, fb::Step_Wait, step.Union(), nodes);
  } else if (auto c = dyn_cast<tk::CopyOp>(op)) {
    auto step = fb::CreateCopy(fbb_, bufferFor(c.getSource()), bufferFor(c.getTarget()));
    launch = fb::CreateLaunch(fbb_, fb::Step_Copy, step.Union(), nodes);
  } else if (isa<tk::AllocOp, tk::ViewOp, memref::GetGlobalOp, tk::SymbolValuesOp>(op)) {
    for (Value r : op->getResults())
      bufferFor(r);
    return;
  } else if (isa<func::ReturnOp>(op)) {
    return;
  } else {
    throw Error("artifact: the program contains '" + op->getName().getStringRef().str() +
                "', which is not a program step");
  }
  launches_.push_back(launch);
}

flatbuffers::Offset<fb::Program> Writer::build(ArtifactStats *stats) {
  for (auto f : module_.getOps<func::FuncOp>())
    if (tk::isProgram(f)) {
      if (program_)
        throw Error("artifact: the module has more than one tk.program");
      program_ = f;
    }
  if (!program_)
    throw Error("artifact: the module has no tk.program");
  if (contents_.device != "cpu" && contents_.device != "cuda")
    throw Error("artifact: device '" + contents_.device + "' is not known to the writer");
  for (const CudaKernelInfo &k : contents_.cudaKernels)
    cudaLaunch_[k.name] = &k.launch;
  auto numInputsAttr = program_->getAttrOfType<IntegerAttr>(tk::kNumInputsAttr);
  auto namesAttr = program_->getAttrOfType<ArrayAttr>(tk::kArgNamesAttr);
  auto arenaAttr = program_->getAttrOfType<IntegerAttr>(tk::kArenaBytesAttr);
  if (!numInputsAttr || !arenaAttr)
    throw Error("artifact: the program lacks tk.num_inputs or tk.arena_bytes");
  numInputs_ = numInputsAttr.getInt();
  size_t numArgs = program_.getNumArguments();
  if (numInputs_ > numArgs || (namesAttr && namesAttr.size() != numArgs))
    throw Error("artifact: the program's tk.num_inputs/tk.arg_names do not match its arguments");

  for (Operation &op : program_.getBody().front())
    addStep(&op);

  std::vector<flatbuffers::Offset<fb::TensorSpec>> inputs, outputs;
  for (size_t i = 0; i < numArgs; ++i) {
    auto type = cast<MemRefType>(program_.getArgument(i).getType());
    std::string name = "arg" + std::to_string(i);
    if (i < numInputs_ && i < contents_.inputNames.size())
      name = contents_.inputNames[i];
    else if (i >= numInputs_ && i - numInputs_ < contents_.outputNames.size())
      name = contents_.outputNames[i - numInputs_];
    else if (namesAttr)
      name = cast<StringAttr>(namesAttr[i]).str();
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> value;
    if (auto it = contents_.specializedInputs.find(name);
        i < numInputs_ && it != contents_.specializedInputs.end())
      value = fbb_.CreateVector(static_cast<const uint8_t *>(it->second.raw()),
                                it->second.byteSize());
    auto nameOff = fbb_.CreateString(name);
    auto shape = shapeOf(type);
    auto spec = fb::CreateTensorSpec(fbb_, nameOff, dtypeOf(type.getElementType()), shape, value,
                                     dimsVector(fbb_, type));
    (i < numInputs_ ? inputs : outputs).push_back(spec);
  }

  fbb_.ForceVectorAlignment(constantData_.size(), 1, tk::kBufferAlignment);
  auto constantData = fbb_.CreateVector(constantData_);
  flatbuffers::Offset<fb::CpuModule> cpuModule;
  flatbuffers::Offset<fb::CudaModule> cudaModuleOff;
  if (cuda()) {
    cudaModuleOff = cudaModule();
  } else {
    auto object = fbb_.CreateVector(contents_.cpuSharedObject);
    auto compiler = fbb_.CreateString(contents_.cpuCompiler);
    auto isa = fbb_.CreateVectorOfStrings(contents_.cpuIsa);
    cpuModule = fb::CreateCpuModule(
        fbb_, object, compiler,
        rt::artifactHash(contents_.cpuSharedObject.data(), contents_.cpuSharedObject.size()),
        isa);
  }

  auto producer = fbb_.CreateString(kProducer);
  auto inputsVec = fbb_.CreateVector(inputs), outputsVec = fbb_.CreateVector(outputs);
  auto buffersVec = fbb_.CreateVector(buffers_);
  auto constantsVec = fbb_.CreateVector(constants_);
  auto kernelsVec = fbb_.CreateVector(kernels_);
  auto launchesVec = fbb_.CreateVector(launches_);
  flatbuffers::Offset<flatbuffers::Vector<int64_t>> meshSizes;
  if (MeshAttr mesh = meshOf(program_))
    meshSizes = fbb_.CreateVector(std::vector<int64_t>(mesh.getSizes().begin(), mesh.getSizes().end()));
  // Size symbols (symbolic programs), in tcc.symbols order: the Symbols buffer's layout.
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::SymbolRange>>> symbolsVec;
  if (auto symbols = module_->getAttrOfType<DictionaryAttr>(TccDialect::kSymbolsAttrName)) {
    SymbolRanges ranges = symbolRanges(module_);
    std::vector<flatbuffers::Offset<fb::SymbolRange>> entries;
    for (NamedAttribute entry : symbols) {
      SymbolRange r = ranges[entry.getName().str()];
      entries.push_back(fb::CreateSymbolRange(fbb_, fbb_.CreateString(entry.getName().str()),
                                              r.min, r.max));
    }
    symbolsVec = fbb_.CreateVector(entries);
  }
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::ArenaSlot>>> slotsVec;
  if (!arenaSlots_.empty())
    slotsVec = fbb_.CreateVector(arenaSlots_);
  fb::ProgramBuilder pb(fbb_);
  pb.add_version(static_cast<uint32_t>(fb::Version_Current));
  pb.add_producer(producer);
  pb.add_device(cuda() ? fb::Device_CUDA : fb::Device_CPU);
  pb.add_inputs(inputsVec);
  pb.add_outputs(outputsVec);
  pb.add_buffers(buffersVec);
  pb.add_arena_bytes(arenaAttr.getInt());
  pb.add_constants(constantsVec);
  pb.add_constant_data(constantData);
  pb.add_kernels(kernelsVec);
  if (cuda())
    pb.add_cuda_module(cudaModuleOff);
  else
    pb.add_cpu_module(cpuModule);
  pb.add_launches(launchesVec);
  if (!slotsVec.IsNull())
    pb.add_arena_slots(slotsVec);
  if (!meshSizes.IsNull())
    pb.add_mesh_sizes(meshSizes);
  if (!symbolsVec.IsNull())
    pb.add_symbols(symbolsVec);
  flatbuffers::Offset<fb::Program> program = pb.Finish();

  if (stats) {
    stats->kernels = kernels_.size();
    stats->externCalls = externCalls_;
    stats->launches = launches_.size();
    stats->arenaBytes = arenaAttr.getInt();
    stats->constantBytes = constantData_.size();
  }
  return program;
}

flatbuffers::Offset<fb::CudaModule> Writer::cudaModule() {
  // A program without kernels (GEMMs and copies only) has no images.
  std::vector<flatbuffers::Offset<fb::CudaPtx>> ptx;
  for (const CudaCode &c : contents_.cudaPtx) {
    auto arch = fbb_.CreateString(c.arch);
    auto text = fbb_.CreateString(c.bytes);
    ptx.push_back(fb::CreateCudaPtx(fbb_, arch, text));
  }
  std::vector<flatbuffers::Offset<fb::CudaImage>> images;
  for (const CudaCode &c : contents_.cudaCubins) {
    auto arch = fbb_.CreateString(c.arch);
    fbb_.ForceVectorAlignment(c.bytes.size(), 1, tk::kBufferAlignment); // ELF wants alignment
    auto cubin = fbb_.CreateVector(reinterpret_cast<const uint8_t *>(c.bytes.data()),
                                   c.bytes.size());
    images.push_back(fb::CreateCudaImage(fbb_, arch, cubin));
  }
  auto ptxVec = fbb_.CreateVector(ptx);
  auto imagesVec = fbb_.CreateVector(images);
  auto compiler = fbb_.CreateString(contents_.cudaCompiler);
  return fb::CreateCudaModule(fbb_, ptxVec, imagesVec, compiler);
}

} // namespace

std::vector<uint8_t> writeArtifact(ModuleOp module, const ArtifactContents &contents,
                                   ArtifactStats *stats) {
  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  fb::FinishProgramBuffer(fbb, Writer(fbb, module, contents).build(stats));
  return bytesOf(fbb);
}

std::vector<uint8_t> writeTrainingArtifact(const TrainingSpec &spec,
                                           const std::vector<ArtifactContents> &entryContents,
                                           std::vector<ArtifactStats> *stats) {
  if (entryContents.size() != spec.entries.size())
    throw Error("artifact: " + std::to_string(spec.entries.size()) + " training entries but " +
                std::to_string(entryContents.size()) + " compiled programs");
  flatbuffers::FlatBufferBuilder fbb(1 << 16);

  // State: initial values packed at 64-byte boundaries, like constants.
  std::vector<uint8_t> initialData;
  std::vector<flatbuffers::Offset<fb::StateTensor>> state;
  for (const StateSpec &s : spec.state) {
    const Tensor &t = s.initial;
    if (!t.defined())
      throw Error("artifact: training state '" + s.name + "' has no initial value");
    size_t offset = (initialData.size() + tk::kBufferAlignment - 1) / tk::kBufferAlignment *
                    tk::kBufferAlignment;
    initialData.resize(offset + t.byteSize());
    if (t.byteSize())
      std::memcpy(initialData.data() + offset, t.raw(), t.byteSize());
    auto name = fbb.CreateString(s.name);
    auto shape = fbb.CreateVector(t.shape().data(), t.shape().size());
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::DimSplit>>> splits;
    if (!s.splits.empty()) {
      std::vector<flatbuffers::Offset<fb::DimSplit>> dims;
      for (const std::vector<int> &axes : s.splits)
        dims.push_back(fb::CreateDimSplit(fbb, fbb.CreateVector(std::vector<uint8_t>(axes.begin(), axes.end()))));
      splits = fbb.CreateVector(dims);
    }
    state.push_back(fb::CreateStateTensor(
        fbb, name, static_cast<fb::StateKind>(static_cast<uint8_t>(s.kind)),
        static_cast<fb::DType>(static_cast<uint8_t>(t.dtype())), shape, offset,
        s.initializerIndex, splits, s.pipelineStage));
  }

  auto bindings = [&](const std::vector<Binding> &list) {
    std::vector<flatbuffers::Offset<fb::Binding>> out;
    for (const Binding &b : list)
      out.push_back(fb::CreateBinding(fbb, static_cast<fb::BindingRole>(b.role),
                                      b.role == BindingRole::State ? (uint32_t)b.state : 0));
    return fbb.CreateVector(out);
  };
  std::vector<flatbuffers::Offset<fb::Entry>> entries;
  for (size_t i = 0; i < spec.entries.size(); ++i) {
    const EntrySpec &e = spec.entries[i];
    ArtifactStats entryStats;
    auto program = Writer(fbb, e.module.get(), entryContents[i]).build(&entryStats);
    if (stats)
      stats->push_back(entryStats);
    auto name = fbb.CreateString(e.name);
    auto inputs = bindings(e.inputs), outputs = bindings(e.outputs);
    entries.push_back(fb::CreateEntry(fbb, name, program, inputs, outputs, (uint32_t)e.rank));
  }

  auto stateVec = fbb.CreateVector(state);
  fbb.ForceVectorAlignment(initialData.size(), 1, tk::kBufferAlignment);
  auto initialVec = fbb.CreateVector(initialData);
  auto entriesVec = fbb.CreateVector(entries);
  auto config = fbb.CreateString(spec.configJson);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>> meshAxes;
  flatbuffers::Offset<flatbuffers::Vector<int64_t>> meshSizes;
  if (!spec.meshSizes.empty()) {
    meshAxes = fbb.CreateVectorOfStrings(spec.meshAxes);
    meshSizes = fbb.CreateVector(spec.meshSizes);
  }
  auto training = fb::CreateTraining(fbb, stateVec, initialVec, entriesVec,
                                     (uint32_t)spec.gradAccumulation, config, meshAxes, meshSizes);
  auto producer = fbb.CreateString(kProducer);
  fb::ProgramBuilder pb(fbb);
  pb.add_version(static_cast<uint32_t>(fb::Version_Current));
  pb.add_producer(producer);
  pb.add_device(!entryContents.empty() && entryContents[0].device == "cuda" ? fb::Device_CUDA
                                                                          : fb::Device_CPU);
  pb.add_training(training);
  fb::FinishProgramBuffer(fbb, pb.Finish());
  return bytesOf(fbb);
}

} // namespace tcc
