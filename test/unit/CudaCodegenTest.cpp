//===- CudaCodegenTest.cpp - The CUDA emitter, run on the host, and NVRTC -===//
//
// Representative graphs (elementwise chains in f32/f16/bf16/f64, broadcasting, softmax and
// layer-norm rows of several lengths, column and middle-axis reductions, argmax, transposes,
// gathers, pads, casts, cumsum, whole-tensor reductions) go through the compiler's pipeline
// (-tcc-fuse, -tcc-lower-to-kernels, canonicalize, CSE, -tcc-plan-memory) and every kernel is
// emitted for CUDA. Without a GPU, the emitted CUDA is checked two ways:
//
//  * Semantics: each kernel's CUDA source is compiled for the host against a small emulation
//    of the CUDA programming model (test/support/CudaHostEmulation.h: one pthread per CUDA
//    thread, blocks one after another, __syncthreads and shuffles as barriers over shared
//    slots, the CPU prelude's helpers; the grid shrunk to at most 3 blocks so the grid-stride
//    loops wrap) and run on seeded random data, against the CPU emitter's kernel on the same
//    data. This exercises the strategies (teams, their combines, vector lanes and tails,
//    clamped teams) for real.
//  * Compilation: every kernel compiles with NVRTC to PTX and sm_80 + sm_90 cubins with no
//    warnings, no spills and no stack frame (the vector temporaries stay in registers);
//    registers are reported. Skipped, visibly, when this build has no NVRTC.
//
//===----------------------------------------------------------------------===//

#include "tcc/Codegen/CppEmitter.h"
#include "tcc/Codegen/CudaEmitter.h"
#include "tcc/Codegen/KernelCompiler.h"
#include "tcc/Codegen/NvrtcCompiler.h"
#include "tcc/Codegen/ScalarEmitter.h"
#include "tcc/IR/CoreBuilder.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Passes/Passes.h"
#include "tcc/Runtime/KernelAbi.h"
#include "tcc/Support/Tensor.h"

#include "CudaHostEmulation.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

using namespace mlir;
using namespace tcc;
namespace cg = tcc::codegen;

namespace {

// ---- Graphs ------------------------------------------------------------------------------------

struct GraphCase {
  std::string name;
  std::vector<std::string> inputs; // tensor types, e.g. "tensor<64x1000xf32>"
  std::function<std::vector<Value>(CoreBuilder &, ArrayRef<Value>)> body;
  /// Substrings that some kernel's strategy must contain (the strategy the emitter picks).
  std::vector<std::string> strategies;
  bool specials = false; // NaN/inf among the float inputs
};

Value softmax(CoreBuilder &b, Value x, int64_t dim) {
  Value e = b.unary(UnaryKind::Exp, b.sub(x, b.reduce(ReduceKind::Max, x, {dim}, true)));
  return b.div(e, b.reduce(ReduceKind::Sum, e, {dim}, true));
}

Value layerNorm(CoreBuilder &b, Value x, Value gamma, Value beta) {
  int64_t last = CoreBuilder::rankOf(x) - 1, n = CoreBuilder::shapeOf(x).back();
  Value mean = b.div(b.reduce(ReduceKind::Sum, x, {last}, true), b.scalarLike(x, (double)n));
  Value centred = b.sub(x, mean);
  Value var = b.div(b.reduce(ReduceKind::Sum, b.mul(centred, centred), {last}, true),
                    b.scalarLike(x, (double)n));
  Value inv = b.unary(UnaryKind::Rsqrt, b.add(var, b.scalarLike(x, 1e-5)));
  return b.add(b.mul(b.mul(centred, inv), gamma), beta);
}

Value chain(CoreBuilder &b, Value x, Value y) {
  // exp(x) * y + 1, then tanh and a max with 0: several elementwise ops in one kernel.
  Value v = b.add(b.mul(b.unary(UnaryKind::Exp, x), y), b.scalarLike(x, 1.0));
  return b.max(b.unary(UnaryKind::Tanh, v), b.scalarLike(x, 0.0));
}

Type elementOf(CoreBuilder &b, const std::string &name) {
  MLIRContext *ctx = b.context();
  if (name == "f16")
    return Float16Type::get(ctx);
  if (name == "bf16")
    return BFloat16Type::get(ctx);
  if (name == "f64")
    return Float64Type::get(ctx);
  if (name == "i8")
    return IntegerType::get(ctx, 8);
  if (name == "i32")
    return IntegerType::get(ctx, 32);
  if (name == "i64")
    return IntegerType::get(ctx, 64);
  if (name != "f32")
    throw tcc::Error("unknown element type " + name);
  return Float32Type::get(ctx);
}

std::vector<GraphCase> graphCases() {
  using V = std::vector<Value>;
  std::vector<GraphCase> cases;
  auto add = [&](GraphCase c) { cases.push_back(std::move(c)); };
  add({"chain_f32", {"tensor<64x1000xf32>", "tensor<64x1000xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{chain(b, a[0], a[1])}; },
       {"pointwise vec=4"}});
  // 33 x 130 f16: 130 is no multiple of 8, the flat 4290 neither: groups with a tail.
  add({"chain_f16", {"tensor<33x130xf16>", "tensor<33x130xf16>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{chain(b, a[0], a[1])}; },
       {"pointwise vec=8"}});
  add({"chain_bf16", {"tensor<4x256xbf16>", "tensor<4x256xbf16>"},
       [](CoreBuilder &b, ArrayRef<Value> a) {
         return V{b.mul(b.unary(UnaryKind::Sigmoid, a[0]), a[1])};
       },
       {"pointwise vec=8"}});
  add({"chain_f64", {"tensor<10x30xf64>", "tensor<10x30xf64>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{chain(b, a[0], a[1])}; },
       {"pointwise vec=2"}});
  add({"broadcast", {"tensor<16x24x96xf32>", "tensor<96xf32>", "tensor<16x1x1xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{b.mul(b.add(a[0], a[1]), a[2])}; },
       {"pointwise vec=4"}});
  add({"softmax_1000", {"tensor<64x1000xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{softmax(b, a[0], 1)}; },
       {"row team=32"}});
  // Rows of 37: neither a multiple of 4 nor of 32; 50 rows: a partial last block of teams.
  add({"softmax_37", {"tensor<50x37xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{softmax(b, a[0], 1)}; },
       {"row team=32"}});
  add({"softmax_4096", {"tensor<6x4096xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{softmax(b, a[0], 1)}; },
       {"row team=512"}});
  add({"softmax_f16", {"tensor<40x200xf16>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{softmax(b, a[0], 1)}; }, {"row team=32"}});
  add({"softmax_short", {"tensor<300x10xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{softmax(b, a[0], 1)}; }, {"thread"}});
  add({"softmax_axis0", {"tensor<300x40xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{softmax(b, a[0], 0)}; },
       {"column team=16"}});
  add({"layernorm", {"tensor<32x768xf32>", "tensor<768xf32>", "tensor<768xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{layerNorm(b, a[0], a[1], a[2])}; },
       {"row team=32"}});
  add({"layernorm_bf16", {"tensor<12x100xbf16>", "tensor<100xbf16>", "tensor<100xbf16>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{layerNorm(b, a[0], a[1], a[2])}; },
       {"row team="}});
  add({"column_sum", {"tensor<512x96xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{b.reduce(ReduceKind::Sum, a[0], {0}, false)}; },
       {"column team=16"}});
  add({"column_max_narrow", {"tensor<1000x3xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{b.reduce(ReduceKind::Max, a[0], {0}, false)}; },
       {"column team=16"}, /*specials=*/true});
  add({"middle_axis_sum", {"tensor<8x200x64xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{b.reduce(ReduceKind::Sum, a[0], {1}, false)}; },
       {"column team=16"}});
  add({"last_two_axes_mean", {"tensor<6x20x30xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) {
         return V{b.div(b.reduce(ReduceKind::Sum, a[0], {1, 2}, false), b.scalarLike(a[0], 600.0))};
       },
       {"row team=32"}});
  add({"rows_max_i32", {"tensor<40x200xi32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{b.reduce(ReduceKind::Max, a[0], {1}, false)}; },
       {"row team=32"}});
  add({"rows_sum_f64", {"tensor<20x300xf64>"},
       [](CoreBuilder &b, ArrayRef<Value> a) { return V{b.reduce(ReduceKind::Sum, a[0], {1}, false)}; },
       {"row team=32"}});
  add({"whole_sum", {"tensor<256x300xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) {
         return V{b.reduce(ReduceKind::Sum, a[0], {0, 1}, false)};
       },
       {"row team=1024"}});
  add({"argmax_rows", {"tensor<128x300xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) {
         return V{b.create<ArgReduceOp>(true, a[0], (uint64_t)1, false)};
       },
       {"row team=32"}, /*specials=*/true});
  add({"argmin_last_cols", {"tensor<300x40xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) {
         return V{b.create<ArgReduceOp>(false, a[0], (uint64_t)0, true)};
       },
       {"column team=16"}});
  add({"transpose", {"tensor<64x48xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) {
         return V{b.add(b.transpose(a[0], {1, 0}), b.scalarLike(a[0], 1.0))};
       },
       {"pointwise"}});
  add({"gather", {"tensor<100x32xf32>", "tensor<57xi64>"},
       [](CoreBuilder &b, ArrayRef<Value> a) {
         return V{b.create<GatherOp>(a[0], a[1], (uint64_t)0)};
       },
       {"pointwise"}});
  add({"pad", {"tensor<30x30xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) {
         return V{b.create<PadOp>(a[0], b.scalarLike(a[0], 0.5), ArrayRef<int64_t>{1, 2},
                                  ArrayRef<int64_t>{3, 0}, PadMode::Constant)};
       },
       {"pointwise"}});
  add({"casts", {"tensor<24x40xf32>", "tensor<24x40xi32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) {
         Value h = b.cast(b.cast(a[0], elementOf(b, "f16")), elementOf(b, "f32"));
         Value s = b.add(h, b.cast(a[1], elementOf(b, "f32")));
         return V{b.cast(b.mul(s, b.scalarLike(s, 20.0)), elementOf(b, "i8")),
                  b.cast(s, elementOf(b, "bf16"))};
       },
       {"pointwise"}});
  add({"cumsum", {"tensor<16x50xf32>"},
       [](CoreBuilder &b, ArrayRef<Value> a) {
         return V{b.create<CumsumOp>(a[0], (uint64_t)1, false, false)};
       },
       {"thread"}});
  return cases;
}

struct Kernel {
  std::string graph;
  mutable func::FuncOp fn; // renamed "<graph>_<kernel>"
  cg::CudaKernel cuda;
  std::string cpu; // the CPU emitter's source for the same function
};

/// Builds `c` as func @main and lowers it like the compiler; the kernels stay in `module`.
void lower(const GraphCase &c, ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  OpBuilder ob(ctx);
  ob.setInsertionPointToEnd(module.getBody());
  Location loc = ob.getUnknownLoc();
  std::vector<Type> inputTypes;
  for (const std::string &t : c.inputs) {
    // Parsed through a tiny module: "tensor<AxBxT>".
    std::string text = t.substr(7, t.size() - 8);
    SmallVector<int64_t> shape;
    llvm::StringRef rest(text);
    while (!rest.empty() && std::isdigit((unsigned char)rest[0])) {
      auto [dim, tail] = rest.split('x');
      shape.push_back(std::stoll(dim.str()));
      rest = tail;
    }
    CoreBuilder tmp(ob, loc);
    inputTypes.push_back(RankedTensorType::get(shape, elementOf(tmp, rest.str())));
  }
  auto fn = ob.create<func::FuncOp>(loc, "main", ob.getFunctionType(inputTypes, {}));
  Block *entry = fn.addEntryBlock();
  ob.setInsertionPointToStart(entry);
  CoreBuilder b(ob, loc);
  std::vector<Value> results = c.body(b, SmallVector<Value>(entry->getArguments()));
  ob.create<func::ReturnOp>(loc, results);
  fn.setFunctionType(ob.getFunctionType(inputTypes, ValueRange(results).getTypes()));

  PassManager pm(ctx);
  pm.addNestedPass<func::FuncOp>(createFuse());
  pm.addPass(createLowerToKernels());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createPlanMemory());
  if (failed(pm.run(module)))
    throw tcc::Error("lowering graph '" + c.name + "' failed");
}

/// Every kernel of every graph case, emitted for CUDA and the CPU. Built once.
struct Corpus {
  MLIRContext ctx;
  std::vector<OwningOpRef<ModuleOp>> modules;
  std::vector<Kernel> kernels;
  std::vector<GraphCase> cases = graphCases();

  Corpus() {
    ctx.loadDialect<TccDialect, tk::TkDialect, func::FuncDialect, memref::MemRefDialect>();
    for (const GraphCase &c : cases) {
      modules.push_back(ModuleOp::create(UnknownLoc::get(&ctx)));
      ModuleOp module = *modules.back();
      lower(c, module);
      for (auto fn : llvm::make_early_inc_range(module.getOps<func::FuncOp>())) {
        if (!tk::isKernel(fn))
          continue;
        Kernel k;
        k.graph = c.name;
        cg::CudaEmitOptions options;
        options.argAlignment = cg::cudaArgumentAlignments(fn);
        std::string name = c.name + "_" + fn.getSymName().str();
        if (failed(SymbolTable::replaceAllSymbolUses(fn, StringAttr::get(&ctx, name), module)))
          throw tcc::Error("cannot rename " + name);
        SymbolTable::setSymbolName(fn, name);
        k.fn = fn;
        k.cuda = cg::emitCudaKernel(fn, options);
        // The CPU reference kernel of the same function, under another name.
        SymbolTable::setSymbolName(fn, "cpu_" + name);
        k.cpu = cg::emitCpuKernel(fn);
        SymbolTable::setSymbolName(fn, name);
        kernels.push_back(std::move(k));
      }
    }
  }
};

Corpus &corpus() {
  static Corpus *c = new Corpus; // lives until exit: tests share it
  return *c;
}

// ---- CUDA on the host (test/support/CudaHostEmulation.h) --------------------------------------

std::vector<tcc::testsupport::EmulatedKernel> emulatedKernels(const std::vector<Kernel> &kernels) {
  std::vector<tcc::testsupport::EmulatedKernel> out;
  for (const Kernel &k : kernels) {
    tcc::testsupport::EmulatedKernel e{k.cuda.name, k.cuda.source, {}};
    for (BlockArgument arg : k.fn.getArguments())
      e.paramTypes.push_back(cg::ScalarEmitter(cg::Target::Cpu)
                                 .storageType(cast<MemRefType>(arg.getType()).getElementType()));
    out.push_back(std::move(e));
  }
  return out;
}

/// Random contents for a buffer of `type`: floats uniform in [-2, 2] (with NaN, +-inf and
/// zeros when `specials`), integers small and of both signs, bools fair.
std::vector<uint8_t> randomBuffer(MemRefType type, std::mt19937_64 &rng, bool specials) {
  Type e = type.getElementType();
  int64_t n = type.getNumElements();
  std::vector<uint8_t> bytes((size_t)tk::bufferBytes(type) + 64);
  uint8_t *p = bytes.data();
  std::uniform_real_distribution<double> uniform(-2, 2);
  for (int64_t i = 0; i < n; ++i) {
    double v = uniform(rng);
    if (specials && rng() % 23 == 0) {
      static const double values[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
      v = values[rng() % 5];
    }
    if (e.isF32()) {
      float f = (float)v;
      std::memcpy(p + 4 * i, &f, 4);
    } else if (e.isF64()) {
      std::memcpy(p + 8 * i, &v, 8);
    } else if (e.isF16() || e.isBF16()) {
      uint16_t h = e.isF16() ? Half((float)v).bits : BFloat16((float)v).bits;
      std::memcpy(p + 2 * i, &h, 2);
    } else if (e.isInteger(1)) {
      p[i] = rng() & 1;
    } else {
      int64_t x = (int64_t)(rng() % 301) - 150; // gather indices: some out of range (clamped)
      std::memcpy(p + i * (e.getIntOrFloatBitWidth() / 8), &x, e.getIntOrFloatBitWidth() / 8);
    }
  }
  return bytes;
}

double halfLike(Type e, uint16_t bits) {
  if (e.isF16()) {
    Half h;
    h.bits = bits;
    return (float)h;
  }
  BFloat16 h;
  h.bits = bits;
  return (float)h;
}

/// got vs want element by element: NaN matches NaN, floats within a tolerance that covers the
/// order of float sums, the CPU's approximated transcendentals and one rounding of a 16-bit
/// result; everything else exact.
::testing::AssertionResult sameBuffer(MemRefType type, const uint8_t *got, const uint8_t *want) {
  Type e = type.getElementType();
  int64_t n = type.getNumElements();
  if (!isa<FloatType>(e)) {
    if (std::memcmp(got, want, (size_t)tk::bufferBytes(type)) == 0)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "integer results differ";
  }
  double rtol = e.isBF16() ? 1e-2 : e.isF16() ? 2e-3 : 1e-4;
  int bad = 0;
  std::string report;
  for (int64_t i = 0; i < n; ++i) {
    double a, b;
    if (e.isF32()) {
      float x, y;
      std::memcpy(&x, got + 4 * i, 4);
      std::memcpy(&y, want + 4 * i, 4);
      a = x, b = y;
    } else if (e.isF64()) {
      std::memcpy(&a, got + 8 * i, 8);
      std::memcpy(&b, want + 8 * i, 8);
    } else {
      uint16_t x, y;
      std::memcpy(&x, got + 2 * i, 2);
      std::memcpy(&y, want + 2 * i, 2);
      a = halfLike(e, x);
      b = halfLike(e, y);
    }
    bool ok = (std::isnan(a) && std::isnan(b)) || a == b ||
              std::fabs(a - b) <= rtol * std::max(std::fabs(a), std::fabs(b)) + 1e-5;
    if (!ok && bad++ < 5)
      report += " [" + std::to_string(i) + "] got " + std::to_string(a) + " want " +
                std::to_string(b) + ";";
  }
  if (!bad)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << n << " elements differ:" << report;
}

TEST(CudaCodegenTest, StrategiesArePicked) {
  Corpus &c = corpus();
  for (const GraphCase &g : c.cases) {
    std::string seen;
    for (const Kernel &k : c.kernels)
      if (k.graph == g.name)
        seen += "[" + k.cuda.strategy + "] ";
    for (const std::string &want : g.strategies)
      EXPECT_NE(seen.find(want), std::string::npos)
          << g.name << ": no kernel with strategy '" << want << "'; got " << seen;
  }
}

TEST(CudaCodegenTest, EmulatedKernelsMatchTheCpuKernels) {
  Corpus &c = corpus();
  std::vector<cg::KernelSource> sources;
  for (const Kernel &k : c.kernels)
    sources.push_back({"cpu_" + k.cuda.name, k.cpu});
  sources.push_back(
      {"cuda_emulation", tcc::testsupport::cudaEmulationSource(emulatedKernels(c.kernels))});
  cg::CpuCompileOptions options;
  options.cacheDir = tcc::testsupport::testKernelCacheDir("tcc-cuda-codegen-test-cache");
  cg::CpuModule module = cg::compileCpuModule(sources, options);
  tcc::testsupport::HostLibrary lib(module.sharedObject);
  auto launch = reinterpret_cast<int (*)(void (*)(void **), void **, unsigned, unsigned, unsigned)>(
      lib.get("tcc_emu_launch"));

  std::mt19937_64 rng(20261123);
  for (const Kernel &k : c.kernels) {
    SCOPED_TRACE(k.cuda.name + " (" + k.cuda.strategy + ")");
    bool specials = false;
    for (const GraphCase &g : c.cases)
      if (g.name == k.graph)
        specials = g.specials;
    // The same random contents for every buffer (outputs included: scatters read them).
    std::vector<std::vector<uint8_t>> cpuData, cudaData;
    for (BlockArgument arg : k.fn.getArguments())
      cpuData.push_back(randomBuffer(cast<MemRefType>(arg.getType()), rng, specials));
    cudaData = cpuData;
    std::vector<void *> cpuArgs, cudaArgs;
    for (size_t i = 0; i < cpuData.size(); ++i) {
      cpuArgs.push_back(cpuData[i].data());
      cudaArgs.push_back(cudaData[i].data());
    }
    auto cpu = reinterpret_cast<rt::CpuKernelFn>(lib.get("cpu_" + k.cuda.name));
    cpu(cpuArgs.data(), 1);
    auto wrapper = reinterpret_cast<void (*)(void **)>(lib.get("tcc_emu_" + k.cuda.name));
    const cg::CudaLaunchConfig &l = k.cuda.launch;
    ASSERT_LE(l.block[0] * l.block[1], 1024u);
    ASSERT_LE(l.sharedBytes, 65536u);
    ASSERT_EQ(launch(wrapper, cudaArgs.data(), std::min(l.grid[0], 3u), l.block[0], l.block[1]), 0);
    for (auto [i, arg] : llvm::enumerate(k.fn.getArguments()))
      EXPECT_TRUE(sameBuffer(cast<MemRefType>(arg.getType()), cudaData[i].data(), cpuData[i].data()))
          << "argument " << i;
  }
}

TEST(CudaCodegenTest, VectorAccessesNeedProvenAlignment) {
  Corpus &c = corpus();
  auto chain = llvm::find_if(c.kernels, [](const Kernel &k) { return k.graph == "chain_f32"; });
  ASSERT_NE(chain, c.kernels.end());
  EXPECT_NE(chain->cuda.source.find("tcc_vec<float, 4>"), std::string::npos);
  // Only 4-byte alignment known: no vector accesses, same strategy otherwise.
  cg::CudaEmitOptions options;
  options.defaultAlignment = 4;
  cg::CudaKernel scalar = cg::emitCudaKernel(chain->fn, options);
  EXPECT_EQ(scalar.source.find("tcc_vec<float"), std::string::npos);
  EXPECT_EQ(scalar.strategy, "pointwise");
}

TEST(CudaCodegenTest, PtxasReportIsParsed) {
  std::string log = "warning: something\n"
                    "ptxas info    : 0 bytes gmem\n"
                    "ptxas info    : Compiling entry function 'other' for 'sm_90'\n"
                    "ptxas info    : Used 99 registers, used 0 barriers\n"
                    "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
                    "ptxas info    : Function properties for k\n"
                    "ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 bytes "
                    "spill loads\n"
                    "ptxas info    : Used 40 registers, used 1 barriers, 256 bytes smem, 384 "
                    "bytes cmem[0]\n";
  cg::CudaBinary b;
  ASSERT_TRUE(cg::parsePtxasReport(log, "k", b));
  EXPECT_EQ(b.registers, 40);
  EXPECT_EQ(b.stackBytes, 24);
  EXPECT_EQ(b.spillStoreBytes, 8);
  EXPECT_EQ(b.spillLoadBytes, 12);
  EXPECT_EQ(b.staticSharedBytes, 256);
  EXPECT_FALSE(cg::parsePtxasReport(log, "missing", b));
}

TEST(CudaCodegenTest, AllKernelsCompileWithNvrtcWithoutSpills) {
  if (!cg::nvrtcAvailable())
    GTEST_SKIP() << "no NVRTC in this build: " << cg::nvrtcVersionString();
  Corpus &c = corpus();
  std::vector<cg::KernelSource> sources;
  for (const Kernel &k : c.kernels)
    sources.push_back({k.cuda.name, k.cuda.source});
  cg::CudaCompileOptions options;
  options.cacheDir = tcc::testsupport::testKernelCacheDir("tcc-cuda-codegen-test-cache");
  cg::CudaModule module = cg::compileCudaModule(sources, options);
  ASSERT_EQ(module.kernels.size(), c.kernels.size());
  int maxRegisters = 0;
  for (const cg::CudaCompiledKernel &k : module.kernels) {
    ASSERT_EQ(k.binaries.size(), 2u);
    for (const cg::CudaBinary &b : k.binaries) {
      SCOPED_TRACE(k.name + " " + b.arch);
      // The kernel's code: in the image of its NVRTC program (kernels are batched).
      ASSERT_LT(b.image, module.images.size());
      const cg::CudaImage &image = module.images[b.image];
      EXPECT_EQ(image.arch, b.arch);
      size_t index = &k - module.kernels.data();
      EXPECT_NE(std::find(image.kernels.begin(), image.kernels.end(), index), image.kernels.end());
      ASSERT_GE(image.cubin.size(), 4u);
      EXPECT_EQ(std::memcmp(image.cubin.data(), "\x7f" "ELF", 4), 0);
      EXPECT_NE(image.ptx.find(".target " + b.arch), std::string::npos);
      EXPECT_NE(image.ptx.find(".entry " + k.name), std::string::npos);
      EXPECT_EQ(image.log.find("warning"), std::string::npos) << image.log;
      EXPECT_GT(b.registers, 0);
      EXPECT_EQ(b.spillStoreBytes, 0);
      EXPECT_EQ(b.spillLoadBytes, 0);
      EXPECT_EQ(b.stackBytes, 0) << "local memory: a vector temporary left registers";
      maxRegisters = std::max(maxRegisters, b.registers);
      // Vector accesses of 16 bytes reach the PTX as 16-byte loads and stores.
      if (k.name.rfind("chain_f32", 0) == 0 || k.name.rfind("chain_bf16", 0) == 0 ||
          k.name.rfind("softmax_1000", 0) == 0) {
        // (Searched for in the kernel's own part of its program's PTX.)
        size_t entry = image.ptx.find(".entry " + k.name);
        size_t next = image.ptx.find(".entry ", entry + 1);
        std::string ptx = image.ptx.substr(entry, next == std::string::npos ? next : next - entry);
        EXPECT_NE(ptx.find("ld.global.nc.v4."), std::string::npos);
        EXPECT_NE(ptx.find("st.global.v4."), std::string::npos);
      }
    }
  }
  std::printf("[ nvrtc    ] %zu kernels x %zu archs, %zu cache hits, %.2f s wall, %.2f s NVRTC, "
              "max %d registers\n",
              module.stats.kernels, options.archs.size(), module.stats.cacheHits,
              module.stats.seconds, module.stats.nvrtcSeconds, maxRegisters);
}

TEST(CudaCodegenTest, NvrtcCacheAndErrors) {
  if (!cg::nvrtcAvailable()) {
    EXPECT_THROW(cg::compileCudaModule({{"k", "x"}}, {}), tcc::Error);
    GTEST_SKIP() << "no NVRTC in this build: " << cg::nvrtcVersionString();
  }
  Corpus &c = corpus();
  std::vector<cg::KernelSource> one = {{c.kernels[0].cuda.name, c.kernels[0].cuda.source}};
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tcc-nvrtc-cache", dir));
  cg::CudaCompileOptions options;
  options.cacheDir = dir.str().str();
  options.archs = {"sm_80"};
  cg::CudaModule first = cg::compileCudaModule(one, options);
  cg::CudaModule second = cg::compileCudaModule(one, options);
  EXPECT_EQ(first.stats.cacheHits, 0u);
  EXPECT_EQ(second.stats.cacheHits, 1u);
  EXPECT_EQ(first.images[0].cubin, second.images[0].cubin);
  EXPECT_EQ(first.kernels[0].binaries[0].registers, second.kernels[0].binaries[0].registers);
  options.useCache = false;
  EXPECT_EQ(cg::compileCudaModule(one, options).stats.cacheHits, 0u);
  llvm::sys::fs::remove_directories(dir);

  options.archs = {"compute_90"};
  EXPECT_THROW(cg::compileCudaModule(one, options), tcc::Error); // not a real architecture
  options.archs = {"sm_80"};
  try {
    cg::compileCudaModule({{"broken", "extern \"C\" __global__ void broken() { nope; }"}}, options);
    FAIL() << "a broken kernel compiled";
  } catch (const tcc::Error &e) {
    EXPECT_NE(std::string(e.what()).find("broken"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos) << e.what();
  }
}

} // namespace
