//===- Compiler.cpp - From an imported graph module to a tcc artifact -----===//
//
// Stages (each can be dumped with CompileOptions::dumpDir, and each is a tcc-opt pass):
//   1. -tcc-fuse              graph ops grouped into tcc.fusion ops
//   2. -tcc-lower-to-kernels  tk kernels + the tk program; canonicalize + CSE tidy the kernels
//   3. -tcc-plan-memory       arena offsets
//   4. code generation        cpu: one C++ translation unit per kernel, compiled in parallel
//                             through the disk cache into one shared object.
//                             cuda: one CUDA translation unit per kernel (and per distinct
//                             tk.conv / tk.topk geometry), batched into NVRTC programs compiled
//                             in parallel for every architecture through the disk cache
//   5. the artifact           FlatBuffers (ArtifactWriter)
//
//===----------------------------------------------------------------------===//
#include "tcc/Compiler/Compiler.h"

#include "tcc/Codegen/CppEmitter.h"
#include "tcc/Codegen/CudaLibraryKernels.h"
#include "tcc/Codegen/KernelCompiler.h"
#include "tcc/Codegen/NvrtcCompiler.h"
#include "tcc/Compiler/ArtifactWriter.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>
#include <unistd.h>

using namespace mlir;

namespace tcc {
namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void writeFile(const std::string &path, const std::string &text) {
  std::ofstream f(path);
  if (!f)
    throw Error("cannot write '" + path + "'");
  f << text;
}

void dumpModule(const CompileOptions &options, ModuleOp module, const char *name) {
  if (options.dumpDir.empty())
    return;
  std::string text;
  llvm::raw_string_ostream os(text);
  OpPrintingFlags flags;
  flags.elideLargeElementsAttrs(16);
  module->print(os, flags);
  writeFile(options.dumpDir + "/" + name, text);
}

/// Runs `build`'s passes; errors (with their op locations) become one tcc::Error. With
/// `explain`, remarks go to stderr as they come.
void runPasses(ModuleOp module, const char *stage, bool explain,
               llvm::function_ref<void(PassManager &)> build,
               const char *remarkTag = "fusion") {
  MLIRContext *ctx = module.getContext();
  std::string errors;
  ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &diag) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << diag.getLocation() << ": " << diag;
    for (const Diagnostic &note : diag.getNotes())
      os << "\n  note: " << note.getLocation() << ": " << note;
    if (diag.getSeverity() == DiagnosticSeverity::Remark) {
      if (explain)
        std::cerr << "tcc: " << remarkTag << ": " << text << "\n";
    } else if (diag.getSeverity() == DiagnosticSeverity::Error) {
      errors += (errors.empty() ? "" : "\n") + text;
    }
    return success();
  });
  PassManager pm(ctx);
  build(pm);
  if (failed(pm.run(module)))
    throw Error(std::string(stage) + " failed:\n" +
                (errors.empty() ? std::string("(no diagnostic)") : errors));
}

} // namespace

std::string CompileReport::toJson() const {
  std::ostringstream os;
  os.precision(6);
  os << "{\n  \"device\": \"" << device << "\",\n  \"kernels\": " << kernels
     << ",\n  \"extern_calls\": " << externCalls << ",\n  \"launches\": " << launches
     << ",\n  \"arena_bytes\": " << arenaBytes << ",\n  \"unplanned_bytes\": " << unplannedBytes
     << ",\n  \"constant_bytes\": " << constantBytes << ",\n  \"artifact_bytes\": "
     << artifactBytes << ",\n  \"cache_hits\": " << cacheHits << ",\n  \"compile_seconds\": "
     << compileSeconds << ",\n  \"codegen_seconds\": " << codegenSeconds
     << ",\n  \"layout_copies\": " << layoutCopies << ",\n  \"layout_copy_bytes\": "
     << layoutCopyBytes << ",\n  \"kernel_names\": [";
  for (size_t i = 0; i < kernelNames.size(); ++i)
    os << (i ? ", " : "") << "\"" << kernelNames[i] << "\"";
  os << "]";
  if (!entries.empty()) {
    os << ",\n  \"entries\": [";
    for (size_t i = 0; i < entries.size(); ++i)
      os << (i ? ",\n    " : "\n    ") << "{\"name\": \"" << entries[i].name
         << "\", \"kernels\": " << entries[i].kernels << ", \"launches\": "
         << entries[i].launches << ", \"arena_bytes\": " << entries[i].arenaBytes
         << ", \"activation_bytes\": " << entries[i].activationBytes
         << ", \"activation_bytes_without_remat\": " << entries[i].activationBytesWithoutRemat
         << "}";
    os << "\n  ]";
  }
  if (distributed) {
    const Distributed &d = *distributed;
    os << ",\n  \"distributed\": {\"mesh\": \"" << d.mesh << "\", \"ranks\": " << d.ranks
       << ", \"state_bytes_per_rank\": {\"parameters\": " << d.parameterBytes
       << ", \"optimizer\": " << d.optimizerBytes << ", \"grad_accumulators\": "
       << d.accumulatorBytes << ", \"buffers\": " << d.bufferBytes
       << "}, \"whole_state_bytes\": " << d.wholeStateBytes;
    if (d.stages > 1)
      os << ", \"pipeline\": {\"stages\": " << d.stages << ", \"micro_batches\": " << d.microBatches
         << ", \"largest_stage_share\": " << d.largestStageShare << "}";
    os << ", \"collectives_per_step\": [";
    for (size_t i = 0; i < d.collectives.size(); ++i) {
      const auto &c = d.collectives[i];
      os << (i ? ",\n    " : "\n    ") << "{\"entry\": \"" << c.entry << "\", \"kind\": \""
         << c.kind << "\", \"axes\": \"" << c.axes << "\", \"count\": " << c.count
         << ", \"bytes\": " << c.bytes << ", \"wire_bytes\": " << c.wireBytes << "}";
    }
    os << (d.collectives.empty() ? "]}" : "\n  ]}");
  }
  if (device == "cuda") {
    os << ",\n  \"cuda_archs\": [";
    for (size_t i = 0; i < cudaArchs.size(); ++i)
      os << (i ? ", " : "") << "\"" << cudaArchs[i] << "\"";
    os << "],\n  \"nvrtc_programs\": " << nvrtcPrograms
       << ",\n  \"nvrtc_seconds\": " << nvrtcSeconds << ",\n  \"cuda_kernels\": [";
    auto dims = [&](const std::array<uint32_t, 3> &d) {
      os << "[" << d[0] << ", " << d[1] << ", " << d[2] << "]";
    };
    for (size_t i = 0; i < cudaKernels.size(); ++i) {
      const CudaKernel &k = cudaKernels[i];
      os << (i ? ",\n    " : "\n    ") << "{\"name\": \"" << k.name << "\", \"strategy\": \""
         << k.strategy << "\", \"grid\": ";
      dims(k.grid);
      os << ", \"block\": ";
      dims(k.block);
      os << ", \"shared_bytes\": " << k.sharedBytes << ", \"archs\": {";
      for (size_t a = 0; a < k.archs.size(); ++a) {
        const CudaResources &r = k.archs[a];
        os << (a ? ", " : "") << "\"" << r.arch << "\": {\"registers\": " << r.registers
           << ", \"spill_stores\": " << r.spillStores << ", \"spill_loads\": " << r.spillLoads
           << ", \"stack_bytes\": " << r.stackBytes
           << ", \"static_shared_bytes\": " << r.staticSharedBytes << "}";
      }
      os << "}}";
    }
    os << (cudaKernels.empty() ? "]" : "\n  ]");
  }
  os << "\n}\n";
  return os.str();
}

int CompileReport::maxRegisters(std::string *kernel) const {
  int most = 0;
  for (const CudaKernel &k : cudaKernels)
    for (const CudaResources &r : k.archs)
      if (r.registers > most) {
        most = r.registers;
        if (kernel)
          *kernel = k.name + " on " + r.arch;
      }
  return most;
}

size_t CompileReport::spillingKernels() const {
  size_t n = 0;
  for (const CudaKernel &k : cudaKernels)
    n += std::any_of(k.archs.begin(), k.archs.end(),
                     [](const CudaResources &r) { return r.spillStores || r.spillLoads; });
  return n;
}

namespace {

std::string joined(const std::vector<std::string> &list) {
  std::string s;
  for (const std::string &item : list)
    s += (s.empty() ? "" : ",") + item;
  return s;
}

} // namespace

void checkCompileOptions(const CompileOptions &options) {
  if (options.precision != "fp32" && options.precision != "bf16" && options.precision != "fp16")
    throw Error("--precision '" + options.precision + "': expected fp32, bf16 or fp16");
  if (options.layout != "auto" && options.layout != "nhwc" && options.layout != "nchw")
    throw Error("--layout '" + options.layout + "': expected auto, nhwc or nchw");
  if (options.device == "cpu")
    return;
  if (options.device != "cuda")
    throw Error("cannot compile for device '" + options.device + "': tcc compiles for 'cpu' "
                "and 'cuda' (run models on the reference interpreter with tcc run --device "
                "interp)");
  if (options.cudaArchs.empty())
    throw Error("no CUDA architecture to compile for (--arch sm_80,sm_90)");
  for (const std::string &arch : options.cudaArchs)
    codegen::checkCudaArch(arch);
  std::set<std::string> seen;
  for (const std::string &arch : options.cudaArchs)
    if (!seen.insert(arch).second)
      throw Error("CUDA architecture '" + arch + "' is listed twice");
  if (!codegen::nvrtcAvailable())
    throw Error("cannot compile for device 'cuda': this tcc was built without the CUDA "
                "toolkit (NVRTC)");
}

void lowerModule(ModuleOp module, const CompileOptions &options, CompileReport *report) {
  if (!options.dumpDir.empty()) {
    if (auto ec = llvm::sys::fs::create_directories(options.dumpDir))
      throw Error("cannot create '" + options.dumpDir + "': " + ec.message());
    dumpModule(options, module, "0-graph.mlir");
  }

  runPasses(module, "fusion", options.explainFusion, [&](PassManager &pm) {
    // Attention becomes one op; the CPU runtime runs f32 ones with its fused kernel, CUDA
    // f16/bf16 ones with a generated FlashAttention-2-style kernel, the rest go back to core
    // ops.
    // Batch norms after convolutions fold into their weights and a bias (conv epilogues).
    FoldConvAffineOptions foldConv;
    foldConv.explain = options.explainFusion;
    pm.addNestedPass<func::FuncOp>(createFoldConvAffine(foldConv));
    // Then the taps of dilated kernels that only read padding go (their weight slices fold).
    TrimConvTapsOptions trimTaps;
    trimTaps.explain = options.explainFusion;
    pm.addNestedPass<func::FuncOp>(createTrimConvTaps(trimTaps));
    pm.addPass(createFoldConstants());
    RecognizeAttentionOptions recognize;
    recognize.explain = options.explainFusion;
    pm.addNestedPass<func::FuncOp>(createRecognizeAttention(recognize));
    if (options.precision != "fp32") {
      AutocastOptions autocast;
      autocast.precision = options.precision;
      autocast.target = options.device;
      pm.addNestedPass<func::FuncOp>(createAutocast(autocast));
      pm.addPass(createFoldConstants()); // weights converted once, here
    }
    DecomposeAttentionOptions decompose;
    decompose.target = options.device;
    pm.addNestedPass<func::FuncOp>(createDecomposeAttention(decompose));
  });
  if (options.device == "cpu" && options.layout != "nchw") {
    runPasses(
        module, "layout", options.explainLayout,
        [&](PassManager &pm) {
          LayoutOptions layout;
          layout.mode = options.layout;
          layout.explain = options.explainLayout;
          pm.addNestedPass<func::FuncOp>(createLayout(layout));
          pm.addPass(createFoldConstants()); // constants re-laid out once, here
        },
        "layout");
    dumpModule(options, module, "0-layout.mlir");
    if (report)
      module.walk([&](TransposeOp t) {
        if (!t->hasAttr(kLayoutCopyAttrName))
          return;
        ++report->layoutCopies;
        auto type = cast<RankedTensorType>(t.getType());
        report->layoutCopyBytes +=
            (uint64_t)type.getNumElements() * (type.getElementTypeBitWidth() / 8);
      });
  }
  runPasses(module, "fusion", options.explainFusion, [&](PassManager &pm) {
    FuseOptions fuse;
    fuse.explain = options.explainFusion;
    fuse.target = options.device; // which GEMM epilogues the library computes (GemmEpilogue.h)
    pm.addNestedPass<func::FuncOp>(createSinkReshapes());
    pm.addNestedPass<func::FuncOp>(createFuse(fuse));
  });
  dumpModule(options, module, "1-fused.mlir");
  runPasses(module, "lowering to kernels", false, [&](PassManager &pm) {
    LowerToKernelsOptions lower;
    lower.target = options.device;
    pm.addPass(createLowerToKernels(lower));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    pm.addPass(createDedupKernels());
    pm.addPass(createPlanMemory());
  });
  dumpModule(options, module, "2-kernels.mlir");
}

CudaProgramKernels emitCudaProgram(ModuleOp module) {
  CudaProgramKernels out;
  for (auto f : module.getOps<func::FuncOp>()) {
    if (!tk::isKernel(f))
      continue;
    codegen::CudaEmitOptions options;
    options.argAlignment = codegen::cudaArgumentAlignments(f);
    out.kernels.push_back(codegen::emitCudaKernel(f, options));
  }
  llvm::StringMap<size_t> byName;
  for (const codegen::CudaKernel &k : out.kernels)
    byName[k.name] = &k - out.kernels.data();
  for (auto f : module.getOps<func::FuncOp>()) {
    if (!tk::isProgram(f))
      continue;
    f.walk([&](Operation *op) {
      if (!isa<tk::ConvOp, tk::TopKOp, tk::AttentionOp, tk::AttentionGradOp>(op))
        return;
      std::vector<codegen::CudaKernel> launched;
      try {
        if (auto conv = dyn_cast<tk::ConvOp>(op)) {
          launched.push_back(codegen::emitCudaConv(conv));
        } else if (auto topk = dyn_cast<tk::TopKOp>(op)) {
          launched.push_back(codegen::emitCudaTopK(topk));
        } else {
          unsigned alignment = 16;
          for (Value buffer : op->getOperands())
            alignment = std::min(alignment, codegen::cudaBufferAlignment(buffer));
          if (auto a = dyn_cast<tk::AttentionOp>(op)) {
            launched.push_back(codegen::emitCudaAttention(a, alignment));
          } else {
            auto kernels = codegen::emitCudaAttentionGrad(cast<tk::AttentionGradOp>(op), alignment);
            launched.assign(kernels.begin(), kernels.end());
          }
        }
      } catch (const Error &e) {
        // Name the (first) model node it computes.
        std::vector<std::string> nodes = nodeNames(op->getLoc());
        throw Error(nodes.empty() ? std::string(e.what())
                                  : "node '" + nodes.front() + "': " + e.what());
      }
      for (codegen::CudaKernel &k : launched) {
        auto [it, inserted] = byName.try_emplace(k.name, out.kernels.size());
        if (inserted)
          out.kernels.push_back(std::move(k));
        else if (out.kernels[it->second].source != k.source)
          throw Error("two different CUDA kernels are named '" + k.name + "'");
        out.libraryCalls[op].push_back(it->second);
      }
    });
  }
  return out;
}

namespace {

/// With --dump-dir: each kernel's source as <dump>/kernels/<name><ext>.
void dumpKernelSources(const CompileOptions &options,
                       const std::vector<codegen::KernelSource> &sources, const char *ext) {
  if (options.dumpDir.empty())
    return;
  llvm::sys::fs::create_directories(options.dumpDir + "/kernels");
  for (const auto &k : sources)
    writeFile(options.dumpDir + "/kernels/" + k.name + ext, k.source);
}

/// The kernel compilers' progress callback: "tcc: compiling <what> done/total" on one line of a
/// terminal's stderr; none when stderr is not a terminal or `--progress` is off.
std::function<void(size_t, size_t)> progressLine(const CompileOptions &options,
                                                 size_t kernels, size_t minKernels,
                                                 std::string what) {
  if (!options.progress || !isatty(STDERR_FILENO) || kernels < minKernels)
    return nullptr;
  return [what = std::move(what)](size_t done, size_t total) {
    std::fprintf(stderr, "\rtcc: compiling %s %zu/%zu", what.c_str(), done, total);
    if (done == total)
      std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

/// Stage 4 for the CPU: every kernel function a C++ translation unit, compiled into one shared
/// object.
void generateCpu(ModuleOp module, const CompileOptions &options,
                 const std::string &kernelPrefix, CompileReport &report,
                 ArtifactContents &contents) {
  // Code generation: every kernel function becomes a translation unit.
  std::vector<codegen::KernelSource> sources;
  for (auto f : module.getOps<func::FuncOp>()) {
    if (!tk::isKernel(f))
      continue;
    sources.push_back({f.getName().str(), codegen::emitCpuKernel(f)});
    report.kernelNames.push_back(kernelPrefix + f.getName().str());
  }
  dumpKernelSources(options, sources, ".cpp");
  codegen::CpuCompileOptions cc;
  cc.cacheDir = options.cacheDir;
  cc.useCache = options.useCache;
  cc.jobs = options.jobs;
  cc.progress = progressLine(options, sources.size(), 2, "kernels");
  codegen::CpuModule cpu = codegen::compileCpuModule(sources, cc);
  report.kernels += sources.size();
  report.cacheHits += cpu.stats.cacheHits;
  report.codegenSeconds += cpu.stats.seconds;
  contents.cpuSharedObject = std::move(cpu.sharedObject);
  contents.cpuCompiler = cpu.compiler;
  contents.cpuIsa = cpu.isa;
}

/// Stage 4 for CUDA: the module's CUDA kernels (emitCudaProgram) compiled with NVRTC for every
/// architecture.
void generateCuda(ModuleOp module, const CompileOptions &options,
                  const std::string &kernelPrefix, CompileReport &report,
                  ArtifactContents &contents) {
  CudaProgramKernels emitted = emitCudaProgram(module);
  std::vector<codegen::KernelSource> sources;
  for (const codegen::CudaKernel &k : emitted.kernels)
    sources.push_back({k.name, k.source});
  dumpKernelSources(options, sources, ".cu");
  codegen::CudaCompileOptions cc;
  cc.archs = options.cudaArchs;
  cc.cacheDir = options.cacheDir;
  cc.useCache = options.useCache;
  cc.jobs = options.jobs;
  if (options.cudaKernelsPerProgram)
    cc.maxKernelsPerProgram = options.cudaKernelsPerProgram;
  cc.progress = progressLine(options, sources.size(), 1,
                             "CUDA kernels for " + joined(options.cudaArchs));
  codegen::CudaModule cuda = codegen::compileCudaModule(sources, cc);

  report.cudaArchs = options.cudaArchs;
  report.kernels += sources.size();
  report.codegenSeconds += cuda.stats.seconds;
  report.nvrtcSeconds += cuda.stats.nvrtcSeconds;
  report.nvrtcPrograms += cuda.stats.programs;
  for (size_t i = 0; i < emitted.kernels.size(); ++i) {
    const codegen::CudaKernel &k = emitted.kernels[i];
    report.kernelNames.push_back(kernelPrefix + k.name);
    CompileReport::CudaKernel r;
    r.name = kernelPrefix + k.name;
    r.strategy = k.strategy;
    r.grid = k.launch.grid;
    r.block = k.launch.block;
    r.sharedBytes = k.launch.sharedBytes;
    bool cached = true;
    for (const codegen::CudaBinary &b : cuda.kernels[i].binaries) {
      r.archs.push_back({b.arch, b.registers, b.spillStoreBytes, b.spillLoadBytes, b.stackBytes,
                         b.staticSharedBytes});
      cached &= cuda.images[b.image].cacheHit;
    }
    report.cacheHits += cached;
    report.cudaKernels.push_back(std::move(r));
    contents.cudaKernels.push_back({k.name, k.launch});
  }
  contents.cudaLibraryCalls = std::move(emitted.libraryCalls);
  for (codegen::CudaImage &image : cuda.images) {
    std::string virtualArch = "compute_" + image.arch.substr(3);
    contents.cudaPtx.push_back({virtualArch, std::move(image.ptx)});
    contents.cudaCubins.push_back({image.arch, std::string(image.cubin.begin(), image.cubin.end())});
  }
  contents.cudaCompiler = cuda.compiler;
}

/// Stages 1-4 on one module (rewritten in place): fusion, lowering, memory planning and code
/// generation for the device. Returns what the artifact writer needs besides the module; adds
/// the module's kernels (named `kernelPrefix` + name), cache hits, codegen time and unplanned
/// bytes to `report`.
ArtifactContents compileProgram(ModuleOp module, const CompileOptions &options,
                                const std::string &kernelPrefix, CompileReport &report) {
  lowerModule(module, options, &report);
  ArtifactContents contents;
  contents.device = options.device;
  if (options.device == "cuda")
    generateCuda(module, options, kernelPrefix, report, contents);
  else
    generateCpu(module, options, kernelPrefix, report, contents);
  for (auto f : module.getOps<func::FuncOp>())
    if (tk::isProgram(f))
      f.walk([&](tk::AllocOp a) { report.unplannedBytes += tk::bufferBytes(a.getType()); });
  contents.specializedInputs = options.specializedInputs;
  contents.inputNames = options.inputNames;
  contents.outputNames = options.outputNames;
  return contents;
}

/// The written program's share of the report.
void addStats(CompileReport &report, const ArtifactStats &stats) {
  report.externCalls += stats.externCalls;
  report.launches += stats.launches;
  report.arenaBytes += stats.arenaBytes;
  report.constantBytes += stats.constantBytes;
}

std::string typeString(DType dtype, const Shape &shape) {
  std::string s = dtypeName(dtype);
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The spec's entries against their @main functions and the state: the writer records bindings
/// as given, and a wrong one would only surface when the runtime rejects the artifact.
/// A state tensor's shape on one rank (its global shape divided by its splits).
Shape localStateShape(const TrainingSpec &spec, const StateSpec &s) {
  Shape shape = s.initial.shape();
  for (size_t d = 0; d < s.splits.size() && d < shape.size(); ++d)
    for (int axis : s.splits[d])
      shape[d] /= spec.meshSizes.at(axis);
  return shape;
}

void checkTrainingSpec(const TrainingSpec &spec) {
  if (spec.gradAccumulation < 1)
    throw Error("training: grad_accumulation must be >= 1, got " +
                std::to_string(spec.gradAccumulation));
  std::set<std::string> names;
  for (const EntrySpec &e : spec.entries) {
    std::string what = "training entry '" + e.name + "'" +
                       (spec.meshSizes.empty() ? "" : " of rank " + std::to_string(e.rank));
    if (!names.insert(e.name + "#" + std::to_string(e.rank)).second)
      throw Error(what + " appears twice");
    ModuleOp module = e.module.get();
    auto main = module ? module.lookupSymbol<func::FuncOp>("main") : nullptr;
    if (!main)
      throw Error(what + " has no func.func @main");
    FunctionType type = main.getFunctionType();
    if (e.inputs.size() != type.getNumInputs() || e.outputs.size() != type.getNumResults())
      throw Error(what + ": " + std::to_string(e.inputs.size()) + " input and " +
                  std::to_string(e.outputs.size()) + " output bindings for @main with " +
                  std::to_string(type.getNumInputs()) + " arguments and " +
                  std::to_string(type.getNumResults()) + " results");
    if ((!e.inputNames.empty() && e.inputNames.size() != e.inputs.size()) ||
        (!e.outputNames.empty() && e.outputNames.size() != e.outputs.size()))
      throw Error(what + ": inputNames/outputNames do not match @main's arguments/results");
    auto check = [&](const Binding &b, Type t, bool isInput, size_t i) {
      std::string where = what + " " + (isInput ? "input " : "output ") + std::to_string(i);
      auto tensor = dyn_cast<RankedTensorType>(t);
      if (!tensor || !tensor.hasStaticShape())
        throw Error(where + " is not a statically shaped tensor");
      DType dtype = dtypeFromType(tensor.getElementType());
      Shape shape(tensor.getShape().begin(), tensor.getShape().end());
      auto expect = [&](DType want, const Shape &wantShape, const std::string &role) {
        if (dtype != want || shape != wantShape)
          throw Error(where + " (" + role + ") is " + typeString(dtype, shape) + ", expected " +
                      typeString(want, wantShape));
      };
      switch (b.role) {
      case BindingRole::Data:
        break;
      case BindingRole::State:
        if (b.state < 0 || (size_t)b.state >= spec.state.size())
          throw Error(where + " is bound to state " + std::to_string(b.state) + "; there are " +
                      std::to_string(spec.state.size()) + " state tensors");
        expect(spec.state[b.state].initial.dtype(), localStateShape(spec, spec.state[b.state]),
               "state '" + spec.state[b.state].name + "'");
        break;
      case BindingRole::LearningRate:
      case BindingRole::RngKey:
        if (!isInput)
          throw Error(where + " is bound to an input-only role");
        expect(b.role == BindingRole::LearningRate ? DType::F32 : DType::U64, {},
               b.role == BindingRole::LearningRate ? "learning rate" : "rng key");
        break;
      case BindingRole::Loss:
        if (isInput)
          throw Error(where + " is bound to Loss, an output-only role");
        expect(DType::F32, {}, "loss");
        break;
      }
    };
    for (size_t i = 0; i < e.inputs.size(); ++i)
      check(e.inputs[i], type.getInput(i), true, i);
    for (size_t i = 0; i < e.outputs.size(); ++i)
      check(e.outputs[i], type.getResult(i), false, i);
  }
}

} // namespace

CompiledModel compileModule(ModuleOp module, const CompileOptions &options) {
  auto start = std::chrono::steady_clock::now();
  checkCompileOptions(options);
  CompiledModel out;
  out.report.device = options.device;
  ArtifactContents contents = compileProgram(module, options, "", out.report);
  ArtifactStats stats;
  out.artifact = writeArtifact(module, contents, &stats);
  addStats(out.report, stats);
  out.report.artifactBytes = out.artifact.size();
  out.report.compileSeconds = secondsSince(start);
  return out;
}

/// A training step's saved activations (after, before): with options.remat, -tcc-remat
/// recomputes the cheap ones (within options.memoryBudget: whole blocks) in the backward pass
/// first. eval saves nothing.
std::pair<uint64_t, uint64_t> checkpointActivations(ModuleOp module, const std::string &entry,
                                                    const CompileOptions &options) {
  if (entry == "eval")
    return {0, 0};
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return {0, 0};
  uint64_t before = savedActivationBytes(main);
  if (!options.remat)
    return {before, before};
  runPasses(module, "activation checkpointing", options.explainFusion, [&](PassManager &pm) {
    RematOptions remat;
    remat.budget = options.memoryBudget;
    remat.explain = options.explainFusion;
    pm.addNestedPass<func::FuncOp>(createRemat(remat));
  });
  return {savedActivationBytes(main), before};
}

CompiledModel compileTraining(TrainingSpec &spec, const CompileOptions &options) {
  auto start = std::chrono::steady_clock::now();
  checkCompileOptions(options);
  checkTrainingSpec(spec);
  CompiledModel out;
  CompileReport &report = out.report;
  report.device = options.device;
  std::vector<ArtifactContents> contents;
  std::vector<size_t> kernelsBefore;
  std::vector<std::pair<uint64_t, uint64_t>> activations; // per entry: after, before remat
  for (EntrySpec &e : spec.entries) {
    CompileOptions entryOptions = options;
    // The training builder applied --precision to the forward model (TrainingOptions): the
    // entries' backward passes and optimizers are not autocast again.
    entryOptions.precision = "fp32";
    entryOptions.inputNames = e.inputNames;
    entryOptions.outputNames = e.outputNames;
    std::string entryName = spec.meshSizes.empty() ? e.name : e.name + "/rank" + std::to_string(e.rank);
    if (!options.dumpDir.empty())
      entryOptions.dumpDir = options.dumpDir + "/" + entryName;
    kernelsBefore.push_back(report.kernels);
    activations.push_back(checkpointActivations(*e.module, e.name, options));
    try {
      contents.push_back(compileProgram(*e.module, entryOptions, entryName + "/", report));
    } catch (const Error &err) {
      throw Error("training entry '" + entryName + "': " + err.what());
    }
  }
  std::vector<ArtifactStats> stats;
  out.artifact = writeTrainingArtifact(spec, contents, &stats);
  for (size_t i = 0; i < stats.size(); ++i) {
    addStats(report, stats[i]);
    size_t kernelsAfter = i + 1 < kernelsBefore.size() ? kernelsBefore[i + 1] : report.kernels;
    report.entries.push_back({spec.meshSizes.empty() ? spec.entries[i].name
                                                     : spec.entries[i].name + "/rank" +
                                                           std::to_string(spec.entries[i].rank),
                              kernelsAfter - kernelsBefore[i],
                              stats[i].launches, stats[i].arenaBytes, activations[i].first,
                              activations[i].second});
  }
  // The state each rank holds: what its entries bind (a pipeline stage holds no other stage's
  // parameters and optimizer state); reported for the rank that holds the most.
  std::map<int64_t, std::set<int64_t>> heldByRank;
  for (const EntrySpec &e : spec.entries)
    for (const auto *bindings : {&e.inputs, &e.outputs})
      for (const Binding &b : *bindings)
        if (b.role == BindingRole::State)
          heldByRank[spec.meshSizes.empty() ? 0 : e.rank].insert(b.state);
  auto localBytes = [&](const StateSpec &st) -> uint64_t {
    return numElements(localStateShape(spec, st)) * dtypeSize(st.initial.dtype());
  };
  int64_t fullest = -1;
  uint64_t most = 0;
  for (const auto &[rank, held] : heldByRank) {
    uint64_t bytes = 0;
    for (int64_t s : held)
      bytes += localBytes(spec.state[s]);
    if (fullest < 0 || bytes > most) {
      fullest = rank;
      most = bytes;
    }
  }
  report.stateBytes = most;
  if (!spec.meshSizes.empty()) {
    CompileReport::Distributed d;
    d.ranks = 1;
    for (size_t i = 0; i < spec.meshSizes.size(); ++i) {
      d.ranks *= spec.meshSizes[i];
      d.mesh += (i ? "," : "") + spec.meshAxes[i] + "=" + std::to_string(spec.meshSizes[i]);
    }
    for (size_t s = 0; s < spec.state.size(); ++s) {
      const StateSpec &st = spec.state[s];
      d.wholeStateBytes += st.initial.byteSize();
      if (!heldByRank[fullest].count(static_cast<int64_t>(s)))
        continue;
      uint64_t local = localBytes(st);
      (st.kind == StateKind::Parameter         ? d.parameterBytes
       : st.kind == StateKind::OptimizerState  ? d.optimizerBytes
       : st.kind == StateKind::GradAccumulator ? d.accumulatorBytes
                                               : d.bufferBytes) += local;
    }
    report.distributed = d;
  }
  report.artifactBytes = out.artifact.size();
  report.compileSeconds = secondsSince(start);
  return out;
}

} // namespace tcc
