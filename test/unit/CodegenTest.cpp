//===- CodegenTest.cpp - CPU code generator vs the reference kernels ------===//
//
// Differential tests of the C++ emitter: tk kernels for every unary, binary and compare kind,
// select, every cast pair and the reductions are emitted, compiled with compileCpuModule into
// one shared object (a few translation units, compiled in parallel and cached across runs),
// loaded with dlopen and run on random data with special values; results must match
// tcc::kernels bit for bit (NaN matches any NaN), except float reductions, whose order of
// combination is unspecified, and f32/f16/bf16 exp, log, tanh, erf and sigmoid, which the CPU
// computes with the prelude's vectorisable approximations instead of libm: those must be within
// a few ulps (see approxUlps; sampled over the whole f32 range by
// TranscendentalApproximationsAreAccurate). Plus the kernel cache, parallel compiles, threaded loop nests,
// 16-bit conversions over all bit patterns, and error reporting.
//
//===----------------------------------------------------------------------===//

#include "tcc/Codegen/CppEmitter.h"
#include "tcc/Codegen/KernelCompiler.h"
#include "tcc/IR/TccDialect.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Interp/Kernels.h"
#include "tcc/Runtime/KernelAbi.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>

using namespace tcc;
namespace k = tcc::kernels;
namespace cg = tcc::codegen;

namespace {

const std::vector<DType> kAllTypes = {DType::Bool, DType::I8,  DType::I16, DType::I32, DType::I64,
                                      DType::U8,   DType::U16, DType::U32, DType::U64, DType::F16,
                                      DType::BF16, DType::F32, DType::F64};

std::string mlirType(DType t) {
  switch (t) {
  case DType::Bool: return "i1";
  case DType::I8: return "i8";
  case DType::I16: return "i16";
  case DType::I32: return "i32";
  case DType::I64: return "i64";
  case DType::U8: return "ui8";
  case DType::U16: return "ui16";
  case DType::U32: return "ui32";
  case DType::U64: return "ui64";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::F8E4M3FN: return "f8E4M3FN";
  case DType::F8E4M3FNUZ: return "f8E4M3FNUZ";
  case DType::F8E5M2: return "f8E5M2";
  case DType::F8E5M2FNUZ: return "f8E5M2FNUZ";
  case DType::U4: return "ui4";
  case DType::I4: return "i4";
  case DType::U2: return "ui2";
  case DType::I2: return "i2";
  }
  return "?";
}

std::string memref(const Shape &shape, DType t) {
  std::string s = "memref<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + mlirType(t) + ">";
}

// ---- Kernel text -------------------------------------------------------------------------------

/// y[i] = OP(x0[i], x1[i], ...) over n elements; `op` names the loaded operands %a0, %a1, ...
std::string elementwiseKernel(const std::string &name, const std::vector<DType> &ins, DType out,
                              int64_t n, const std::string &op) {
  std::string s = "func.func @" + name + "(";
  for (size_t i = 0; i < ins.size(); ++i)
    s += "%x" + std::to_string(i) + ": " + memref({n}, ins[i]) + ", ";
  s += "%y: " + memref({n}, out) + ") attributes {tk.kernel} {\n";
  s += "  tk.parallel [" + std::to_string(n) + "] {\n  ^bb0(%i: index):\n";
  for (size_t i = 0; i < ins.size(); ++i)
    s += "    %a" + std::to_string(i) + " = tk.load %x" + std::to_string(i) + "[%i] : " +
         memref({n}, ins[i]) + "\n";
  s += op.rfind("%", 0) == 0 ? "    " + op + "\n" : "    %r = " + op + "\n"; // a body or one op
  s += "    tk.store %r, %y[%i] : " + memref({n}, out) + "\n  }\n  return\n}\n";
  return s;
}

/// y[i] = reduce_j x[i, j] (rows) and, when `whole`, y[0] = reduce over all of x (top level).
/// What a reduction kernel of a [rows, cols] input reduces: each row (an output per row), the
/// whole input (one output), or each column (an output per column: the interchanged column
/// loops of the CPU emitter).
enum class ReduceOver { Rows, Whole, Columns };

std::string reduceKernel(const std::string &name, const std::string &kind, DType t, int64_t rows,
                         int64_t cols, ReduceOver over) {
  std::string x = memref({rows, cols}, t), ty = mlirType(t);
  if (over == ReduceOver::Whole)
    return "func.func @" + name + "(%x: " + x + ", %y: " + memref({1}, t) +
           ") attributes {tk.kernel} {\n"
           "  %r = tk.reduce " + kind + " [" + std::to_string(rows) + ", " + std::to_string(cols) +
           "] {\n  ^bb0(%i: index, %j: index):\n"
           "    %v = tk.load %x[%i, %j] : " + x + "\n    tk.yield %v : " + ty + "\n  } : " + ty +
           "\n  %c0 = tk.constant 0 : index\n  tk.store %r, %y[%c0] : " + memref({1}, t) +
           "\n  return\n}\n";
  bool columns = over == ReduceOver::Columns;
  int64_t outputs = columns ? cols : rows, reduced = columns ? rows : cols;
  return "func.func @" + name + "(%x: " + x + ", %y: " + memref({outputs}, t) +
         ") attributes {tk.kernel} {\n  tk.parallel [" + std::to_string(outputs) +
         "] {\n  ^bb0(%i: index):\n    %r = tk.reduce " + kind + " [" + std::to_string(reduced) +
         "] {\n    ^bb0(%j: index):\n      %v = tk.load %x" + (columns ? "[%j, %i]" : "[%i, %j]") +
         " : " + x + "\n      tk.yield %v : " + ty + "\n    } : " + ty +
         "\n    tk.store %r, %y[%i] : " + memref({outputs}, t) + "\n  }\n  return\n}\n";
}

std::string argReduceKernel(const std::string &name, bool isMax, bool last, DType t, int64_t rows,
                            int64_t cols, bool columns) {
  std::string x = memref({rows, cols}, t);
  int64_t outputs = columns ? cols : rows, reduced = columns ? rows : cols;
  return "func.func @" + name + "(%x: " + x + ", %y: " + memref({outputs}, DType::I64) +
         ") attributes {tk.kernel} {\n  tk.parallel [" + std::to_string(outputs) +
         "] {\n  ^bb0(%i: index):\n    %r = tk.arg_reduce " + (isMax ? "max " : "min ") +
         std::to_string(reduced) + " {\n    ^bb0(%j: index):\n      %v = tk.load %x" +
         (columns ? "[%j, %i]" : "[%i, %j]") + " : " + x + "\n      tk.yield %v : " +
         mlirType(t) + "\n    }" + (last ? " {select_last_index}" : "") +
         "\n    tk.store %r, %y[%i] : " + memref({outputs}, DType::I64) +
         "\n  }\n  return\n}\n";
}

// ---- Data --------------------------------------------------------------------------------------

enum class Values { General, NonZero, Shift, Exponent, NearOne, Ties };

template <class T> T fromDouble(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return T((float)v);
  else
    return (T)v;
}

Tensor randomTensor(DType dtype, const Shape &shape, std::mt19937_64 &rng, Values values) {
  Tensor t(dtype, shape);
  static const double specials[] = {0.0,  -0.0,  NAN,    INFINITY, -INFINITY, 0.5,   -0.5,
                                    1.5,  2.5,   -2.5,   1e-6,     -1e-40,    65504, 70000,
                                    1e10, -3e9,  1e19,   -1e19,    3e38,      127.7, -128.9,
                                    255.5, 32768, 4294967296.0};
  std::uniform_real_distribution<double> uniform(-3, 3);
  visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *data = t.data<T>();
    for (int64_t i = 0; i < t.numElements(); ++i) {
      uint64_t bits = rng();
      if constexpr (std::is_same_v<T, bool>) {
        data[i] = bits & 1;
      } else if constexpr (std::is_integral_v<T>) {
        constexpr int width = sizeof(T) * 8;
        T v;
        if (values == Values::Shift)
          v = (T)(bits % (width + 3));
        else if (values == Values::Exponent)
          v = (T)((int64_t)(bits % 10) - (std::is_signed_v<T> ? 2 : 0));
        else if (values == Values::Ties)
          v = (T)(bits % 4);
        else if (bits % 2)
          v = (T)((int64_t)(bits >> 8) % 21 - (std::is_signed_v<T> ? 10 : 0));
        else
          v = (T)(bits >> 3);
        if (values == Values::NonZero && v == 0)
          v = 1;
        data[i] = v;
      } else {
        double v;
        if (values == Values::NearOne)
          v = 0.9 + 0.2 * (double)(bits % 1000) / 1000;
        else if (values == Values::Ties)
          v = (bits % 16 == 0) ? NAN : (double)(bits % 4);
        else if (bits % 5 == 0)
          v = specials[(bits >> 8) % (sizeof(specials) / sizeof(specials[0]))];
        else
          v = uniform(rng);
        if (values == Values::NonZero && v == 0)
          v = 1;
        data[i] = fromDouble<T>(v);
      }
    }
  });
  return t;
}

/// Element i of `got` and `ref` agree: bit for bit, NaN matching any NaN, or within the
/// relative `tolerance` for floats.
::testing::AssertionResult sameTensor(const Tensor &got, const Tensor &ref, double tolerance = 0) {
  if (got.dtype() != ref.dtype() || got.shape() != ref.shape())
    return ::testing::AssertionFailure() << "type " << got.typeString() << " vs " << ref.typeString();
  size_t size = dtypeSize(got.dtype());
  int mismatches = 0;
  std::string report;
  for (int64_t i = 0; i < got.numElements(); ++i) {
    const char *g = (const char *)got.raw() + i * size, *r = (const char *)ref.raw() + i * size;
    if (std::memcmp(g, r, size) == 0)
      continue;
    if (isFloat(got.dtype())) {
      double a = got.getDouble(i), b = ref.getDouble(i);
      if (std::isnan(a) && std::isnan(b))
        continue;
      if (tolerance > 0 && std::fabs(a - b) <= tolerance * std::max(1.0, std::fabs(b)))
        continue;
    }
    if (++mismatches <= 5)
      report += "\n  [" + std::to_string(i) + "] got " + std::to_string(got.getDouble(i)) +
                " expected " + std::to_string(ref.getDouble(i));
  }
  if (mismatches)
    return ::testing::AssertionFailure() << mismatches << " mismatching elements" << report;
  return ::testing::AssertionSuccess();
}

/// Ordered position of a float bit pattern (f32, or the 16 bits of f16/bf16), so that adjacent
/// floats differ by 1, across zero and the subnormals too.
int64_t orderedBits(const void *p, size_t size) {
  uint32_t u = 0;
  std::memcpy(&u, p, size);
  uint32_t signBit = size == 4 ? 0x80000000u : 0x8000u;
  return (u & signBit) ? -(int64_t)(u & (signBit - 1)) : (int64_t)u;
}

/// Like sameTensor for f32/f16/bf16, but elements may differ by up to `maxUlp` ulps of their type
/// or by up to `absTolerance`.
::testing::AssertionResult withinUlps(const Tensor &got, const Tensor &ref, int64_t maxUlp,
                                      double absTolerance = 0) {
  if (got.dtype() != ref.dtype() || got.shape() != ref.shape())
    return ::testing::AssertionFailure() << "type " << got.typeString() << " vs " << ref.typeString();
  size_t size = dtypeSize(got.dtype());
  int mismatches = 0;
  std::string report;
  for (int64_t i = 0; i < got.numElements(); ++i) {
    const char *g = (const char *)got.raw() + i * size, *r = (const char *)ref.raw() + i * size;
    double a = got.getDouble(i), b = ref.getDouble(i);
    if (std::memcmp(g, r, size) == 0 || (std::isnan(a) && std::isnan(b)))
      continue;
    if (!std::isnan(a) && !std::isnan(b) &&
        (std::llabs(orderedBits(g, size) - orderedBits(r, size)) <= maxUlp ||
         std::fabs(a - b) <= absTolerance))
      continue;
    if (++mismatches <= 5)
      report += "\n  [" + std::to_string(i) + "] got " + std::to_string(a) + " expected " +
                std::to_string(b);
  }
  if (mismatches)
    return ::testing::AssertionFailure() << mismatches << " elements off by more than " << maxUlp
                                         << " ulp" << report;
  return ::testing::AssertionSuccess();
}

/// The ulp tolerance of unary `kind` on `t` against the reference kernels (libm), or 0 where the
/// generated code must match bit for bit. On the CPU, f32 exp/log/tanh/erf/sigmoid are the
/// prelude's approximations: max 1 ulp from glibc for exp, log and erf, 2 for tanh, 3 for
/// sigmoid against the reference's 1 / (1 + expf(-x)) (2 from the correctly rounded sigmoid);
/// measured over all f32 inputs by lib/Codegen/tools/ulp_check.cpp. f16/bf16 compute these in
/// f32 and round once, so they may differ from the reference by 1 ulp of the 16-bit type (two
/// f32 values a few ulps apart can round to neighbouring halves). f64 keeps libm.
int64_t approxUlps(k::UnaryKind kind, DType t) {
  if (t != DType::F32 && t != DType::F16 && t != DType::BF16)
    return 0;
  switch (kind) {
  case k::UnaryKind::Exp:
  case k::UnaryKind::Log: return t == DType::F32 ? 2 : 1;
  case k::UnaryKind::Tanh:
  case k::UnaryKind::Erf:
  case k::UnaryKind::Sigmoid: return t == DType::F32 ? 3 : 1;
  default: return 0;
  }
}

/// Where the reference's sigmoid 1 / (1 + expf(-x)) flushes to 0 (x < -88.72), ours keeps the
/// subnormal result: an absolute tolerance of the smallest normal f32 covers it.
double approxAbsTolerance(k::UnaryKind kind) {
  return kind == k::UnaryKind::Sigmoid ? 0x1p-126 : 0;
}

// ---- Compiling and loading ---------------------------------------------------------------------

std::unique_ptr<mlir::MLIRContext> makeContext() {
  auto ctx = std::make_unique<mlir::MLIRContext>();
  ctx->loadDialect<TccDialect, tk::TkDialect, mlir::func::FuncDialect,
                   mlir::memref::MemRefDialect>();
  return ctx;
}

/// Emits every kernel of `mlirText`; kernels are spread over `groups` translation units.
std::vector<cg::KernelSource> emitAll(const std::string &mlirText, size_t groups) {
  auto ctx = makeContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(mlirText, ctx.get());
  if (!module)
    throw Error("test kernels do not parse");
  std::vector<cg::KernelSource> sources(groups);
  size_t i = 0;
  for (auto fn : module->getOps<mlir::func::FuncOp>()) {
    cg::KernelSource &s = sources[i++ % groups];
    s.name = s.name.empty() ? fn.getSymName().str() : s.name;
    s.source += cg::emitCpuKernel(fn);
  }
  sources.erase(std::remove_if(sources.begin(), sources.end(),
                               [](const cg::KernelSource &s) { return s.source.empty(); }),
                sources.end());
  return sources;
}

std::string testCacheDir() {
  llvm::SmallString<128> dir;
  llvm::sys::path::system_temp_directory(true, dir);
  llvm::sys::path::append(dir, "tcc-codegen-test-cache");
  return dir.str().str();
}

/// A loaded shared object.
class Library {
public:
  explicit Library(const std::vector<uint8_t> &bytes) {
    llvm::SmallString<128> path;
    if (llvm::sys::fs::createTemporaryFile("tcc-codegen-test", "so", path))
      throw Error("cannot create a temporary file");
    {
      std::error_code ec;
      llvm::raw_fd_ostream os(path, ec);
      os.write((const char *)bytes.data(), bytes.size());
    }
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    llvm::sys::fs::remove(path);
    if (!handle)
      throw Error(std::string("dlopen: ") + dlerror());
  }
  ~Library() {
    if (handle)
      dlclose(handle);
  }
  rt::CpuKernelFn get(const std::string &name) const {
    void *sym = dlsym(handle, name.c_str());
    if (!sym)
      throw Error("kernel " + name + " not found");
    return reinterpret_cast<rt::CpuKernelFn>(sym);
  }

private:
  void *handle = nullptr;
};

std::unique_ptr<Library> compileAndLoad(const std::string &mlirText, size_t groups,
                                        int jobs = 0) {
  cg::CpuCompileOptions options;
  options.cacheDir = testCacheDir();
  options.jobs = jobs;
  cg::CpuModule m = cg::compileCpuModule(emitAll(mlirText, groups), options);
  return std::make_unique<Library>(m.sharedObject);
}

/// Runs `fn` on `inputs` and a fresh output tensor of `outType`/`outShape`.
Tensor run(rt::CpuKernelFn fn, std::vector<Tensor> inputs, DType outType, const Shape &outShape,
           int threads = 2) {
  Tensor out(outType, outShape);
  std::vector<void *> args;
  for (Tensor &t : inputs)
    args.push_back(t.raw());
  args.push_back(out.raw());
  fn(args.data(), threads);
  return out;
}

// ---- The differential kernel set ---------------------------------------------------------------

constexpr int64_t kN = 517; // not a multiple of any vector width: tails run too
constexpr int64_t kRows = 7, kCols = 301;
constexpr int kNumUnary = 26, kNumBinary = 13, kNumCompare = 6;

std::string unaryName(int kind) { return stringifyUnaryKind((UnaryKind)kind).str(); }
std::string binaryName(int kind) { return stringifyBinaryKind((BinaryKind)kind).str(); }
std::string compareName(int kind) { return stringifyCompareKind((CompareKind)kind).str(); }
std::string reduceName(int kind) { return stringifyReduceKind((ReduceKind)kind).str(); }
std::string dtypeId(DType t) { return dtypeName(t); }

bool referenceSupports(const std::function<void()> &f) {
  try {
    f();
    return true;
  } catch (const Error &) {
    return false;
  }
}

Tensor ones(DType t, const Shape &shape) { return k::cast(Tensor::fromVector<int32_t>(shape, std::vector<int32_t>(numElements(shape), 1)), t); }

bool unarySupported(int kind, DType t) {
  return referenceSupports([&] { k::unary((k::UnaryKind)kind, ones(t, {1})); });
}
bool binarySupported(int kind, DType t) {
  return referenceSupports([&] { k::binary((k::BinaryKind)kind, ones(t, {1}), ones(t, {1})); });
}
bool reduceSupported(int kind, DType t) {
  return referenceSupports([&] { k::reduce((k::ReduceKind)kind, ones(t, {1}), {0}); });
}

Values rhsValues(int kind, DType t) {
  if (!isInteger(t))
    return Values::General;
  switch ((k::BinaryKind)kind) {
  case k::BinaryKind::Div:
  case k::BinaryKind::Rem: return Values::NonZero; // the reference throws on zero
  case k::BinaryKind::ShiftLeft:
  case k::BinaryKind::ShiftRight: return Values::Shift;
  case k::BinaryKind::Pow: return Values::Exponent;
  default: return Values::General;
  }
}

std::string differentialKernels() {
  std::string s;
  for (DType t : kAllTypes) {
    std::string ty = mlirType(t), id = dtypeId(t);
    for (int kind = 0; kind < kNumUnary; ++kind)
      if (unarySupported(kind, t))
        s += elementwiseKernel("unary_" + unaryName(kind) + "_" + id, {t}, t, kN,
                               "tk.unary " + unaryName(kind) + " %a0 : " + ty);
    for (int kind = 0; kind < kNumBinary; ++kind)
      if (binarySupported(kind, t))
        s += elementwiseKernel("binary_" + binaryName(kind) + "_" + id, {t, t}, t, kN,
                               "tk.binary " + binaryName(kind) + " %a0, %a1 : " + ty);
    for (int kind = 0; kind < kNumCompare; ++kind)
      s += elementwiseKernel("compare_" + compareName(kind) + "_" + id, {t, t}, DType::Bool, kN,
                             "tk.compare " + compareName(kind) + " %a0, %a1 : " + ty);
    s += elementwiseKernel("select_" + id, {DType::Bool, t, t}, t, kN,
                           "tk.select %a0, %a1, %a2 : " + ty);
    for (DType to : kAllTypes)
      if (to != t)
        s += elementwiseKernel("cast_" + id + "_" + dtypeId(to), {t}, to, kN,
                               "tk.cast %a0 : " + ty + " to " + mlirType(to));
    for (int kind = 0; kind < 4; ++kind)
      if (reduceSupported(kind, t)) {
        s += reduceKernel("reduce_" + reduceName(kind) + "_" + id, reduceName(kind), t, kRows,
                          kCols, ReduceOver::Rows);
        s += reduceKernel("reduce_all_" + reduceName(kind) + "_" + id, reduceName(kind), t,
                          kRows, kCols, ReduceOver::Whole);
        s += reduceKernel("reduce_columns_" + reduceName(kind) + "_" + id, reduceName(kind), t,
                          kRows, kCols, ReduceOver::Columns);
      }
    if (isFloat(t)) // several ops: 16-bit results are rounded after each, not just at the store
      s += elementwiseKernel("chain_" + id, {t, t, t}, DType::F64, kN,
                             "%m = tk.binary mul %a0, %a1 : " + ty + "\n    %s = tk.binary add %m, %a2 : " +
                                 ty + "\n    %e = tk.unary sigmoid %s : " + ty +
                                 "\n    %r = tk.cast %e : " + ty + " to f64");
    for (bool isMax : {true, false})
      for (bool last : {false, true})
        for (bool columns : {false, true})
          s += argReduceKernel(std::string("arg") + (isMax ? "max" : "min") +
                                   (last ? "_last_" : "_") + (columns ? "columns_" : "") + id,
                               isMax, last, t, kRows, kCols, columns);
  }
  return s;
}

/// The shared object with the differential kernels, built once per process.
const Library &differential() {
  static std::unique_ptr<Library> lib = compileAndLoad(differentialKernels(), 6);
  return *lib;
}

// ---- Elementwise -------------------------------------------------------------------------------

TEST(CodegenTest, UnaryMatchesReference) {
  std::mt19937_64 rng(1);
  int checked = 0;
  for (DType t : kAllTypes)
    for (int kind = 0; kind < kNumUnary; ++kind) {
      if (!unarySupported(kind, t))
        continue;
      Tensor x = randomTensor(t, {kN}, rng, Values::General);
      Tensor got = run(differential().get("unary_" + unaryName(kind) + "_" + dtypeId(t)), {x}, t, {kN});
      Tensor ref = k::unary((k::UnaryKind)kind, x);
      if (int64_t ulps = approxUlps((k::UnaryKind)kind, t))
        EXPECT_TRUE(withinUlps(got, ref, ulps, approxAbsTolerance((k::UnaryKind)kind)))
            << unaryName(kind) << " on " << dtypeName(t);
      else
        EXPECT_TRUE(sameTensor(got, ref)) << unaryName(kind) << " on " << dtypeName(t);
      ++checked;
    }
  EXPECT_GT(checked, 100);
}

TEST(CodegenTest, BinaryMatchesReference) {
  std::mt19937_64 rng(2);
  for (DType t : kAllTypes)
    for (int kind = 0; kind < kNumBinary; ++kind) {
      if (!binarySupported(kind, t))
        continue;
      Tensor a = randomTensor(t, {kN}, rng, kind == (int)k::BinaryKind::Pow && isInteger(t)
                                                ? Values::Ties
                                                : Values::General);
      Tensor b = randomTensor(t, {kN}, rng, rhsValues(kind, t));
      Tensor got = run(differential().get("binary_" + binaryName(kind) + "_" + dtypeId(t)), {a, b},
                       t, {kN});
      EXPECT_TRUE(sameTensor(got, k::binary((k::BinaryKind)kind, a, b)))
          << binaryName(kind) << " on " << dtypeName(t);
    }
}

TEST(CodegenTest, MaxMinWithAConstantMatchReference) {
  // max and min with a constant operand that is not NaN (a ReLU, a clamp) are emitted as one
  // comparison and select: the same results as the general NaN-propagating helpers (a NaN
  // operand wins, equal operands give the first: +-0 ties), for the constant on either side.
  const double constants[] = {0.0, -0.0, 6.0, -INFINITY};
  std::string text;
  for (DType t : {DType::F32, DType::F16, DType::F64})
    for (size_t c = 0; c < 4; ++c)
      for (const char *kind : {"max", "min"})
        for (bool left : {false, true}) {
          static const char *const decimal[] = {"0.0", "-0.0", "6.0"};
          std::string ty = mlirType(t), m = memref({kN}, t);
          std::string name = std::string(kind) + (left ? "_l" : "_r") + std::to_string(c) + "_" +
                             dtypeId(t);
          std::string lit = c < 3                 ? decimal[c] // -inf as its bits:
                            : t == DType::F32     ? "0xFF800000"
                            : t == DType::F16     ? "0xFC00"
                                                  : "0xFFF0000000000000";
          text += "func.func @" + name + "(%x: " + m + ", %y: " + m +
                  ") attributes {tk.kernel} {\n  %c = tk.constant " + lit + " : " + ty +
                  "\n  tk.parallel [" + std::to_string(kN) +
                  "] {\n  ^bb0(%i: index):\n    %v = tk.load %x[%i] : " + m +
                  "\n    %r = tk.binary " + kind + (left ? " %c, %v" : " %v, %c") + " : " + ty +
                  "\n    tk.store %r, %y[%i] : " + m + "\n  }\n  return\n}\n";
        }
  std::vector<cg::KernelSource> sources = emitAll(text, 1);
  EXPECT_EQ(sources[0].source.find("tcc_max<float>(v"), std::string::npos)
      << "a constant operand takes the comparison";
  auto lib = compileAndLoad(text, 2);
  std::mt19937_64 rng(21);
  for (DType t : {DType::F32, DType::F16, DType::F64})
    for (size_t c = 0; c < 4; ++c)
      for (const char *kind : {"max", "min"})
        for (bool left : {false, true}) {
          Tensor x = randomTensor(t, {kN}, rng, Values::General);
          Tensor cv(t, {kN});
          visitDType(t, [&](auto tag) {
            using T = decltype(tag);
            for (int64_t i = 0; i < kN; ++i)
              cv.data<T>()[i] = fromDouble<T>(constants[c]);
          });
          k::BinaryKind op = std::string(kind) == "max" ? k::BinaryKind::Max : k::BinaryKind::Min;
          Tensor want = left ? k::binary(op, cv, x) : k::binary(op, x, cv);
          std::string name = std::string(kind) + (left ? "_l" : "_r") + std::to_string(c) + "_" +
                             dtypeId(t);
          EXPECT_TRUE(sameTensor(run(lib->get(name), {x}, t, {kN}), want)) << name;
        }
}

TEST(CodegenTest, OpChainsRoundAfterEachOp) {
  std::mt19937_64 rng(9);
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    Tensor a = randomTensor(t, {kN}, rng, Values::General);
    Tensor b = randomTensor(t, {kN}, rng, Values::General);
    Tensor c = randomTensor(t, {kN}, rng, Values::General);
    Tensor ref = k::cast(k::unary(k::UnaryKind::Sigmoid,
                                  k::binary(k::BinaryKind::Add, k::binary(k::BinaryKind::Mul, a, b), c)),
                         DType::F64);
    Tensor got = run(differential().get("chain_" + dtypeId(t)), {a, b, c}, DType::F64, {kN});
    if (t == DType::F64) {
      EXPECT_TRUE(sameTensor(got, ref)) << dtypeName(t);
    } else { // sigmoid is approximated: compare in t (the cast to f64 is exact)
      EXPECT_TRUE(withinUlps(k::cast(got, t), k::cast(ref, t),
                             approxUlps(k::UnaryKind::Sigmoid, t), 0x1p-126))
          << dtypeName(t);
    }
  }
}

TEST(CodegenTest, TranscendentalApproximationsAreAccurate) {
  // Every 1021st f32 bit pattern (~4.2M values over the whole range, subnormals, infinities
  // and NaNs included) plus edge cases, against glibc (exp, log, tanh, erf) or the double
  // sigmoid rounded to float. The exhaustive check over all 2^32 inputs is
  // lib/Codegen/tools/ulp_check.cpp.
  const std::vector<float> edges = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1.0f, -1.0f,
                                    0x1p-149f, -0x1p-149f, 0x1p-126f, 0x1.fffffep127f,
                                    -0x1.fffffep127f, 88.72283f, 88.72284f, -87.33654f,
                                    -103.97208f, -104.0f, 0.625f, -0.625f, 0.921875f, 4.0f,
                                    9.0f, -9.0f, 0.5f, 2.0f, 1e-30f, -1e-30f};
  constexpr uint64_t kStride = 1021;
  const int64_t n = (int64_t)(((uint64_t)1 << 32) / kStride) + (int64_t)edges.size();
  Tensor x(DType::F32, {n});
  float *xs = x.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = (uint32_t)((uint64_t)i * kStride);
    float v;
    std::memcpy(&v, &bits, 4);
    xs[i] = i < n - (int64_t)edges.size() ? v : edges[i - (n - (int64_t)edges.size())];
  }
  struct Case {
    const char *op;
    int64_t maxUlp;
    float (*reference)(float);
  };
  const Case cases[] = {
      {"exp", 2, [](float v) { return std::exp(v); }},
      {"log", 2, [](float v) { return std::log(v); }},
      {"tanh", 3, [](float v) { return std::tanh(v); }},
      {"erf", 3, [](float v) { return std::erf(v); }},
      {"sigmoid", 2, [](float v) { return (float)(1.0 / (1.0 + std::exp(-(double)v))); }},
  };
  std::string text;
  for (const Case &c : cases)
    text += elementwiseKernel(std::string("approx_") + c.op, {DType::F32}, DType::F32, n,
                              std::string("tk.unary ") + c.op + " %a0 : f32");
  auto lib = compileAndLoad(text, 1);
  for (const Case &c : cases) {
    Tensor got = run(lib->get(std::string("approx_") + c.op), {x}, DType::F32, {n});
    Tensor ref(DType::F32, {n});
    for (int64_t i = 0; i < n; ++i)
      ref.data<float>()[i] = c.reference(xs[i]);
    EXPECT_TRUE(withinUlps(got, ref, c.maxUlp)) << c.op;
    if (std::string(c.op) == "sigmoid") // never NaN for a non-NaN input, always in [0, 1]
      for (int64_t i = 0; i < n; ++i) {
        if (!std::isnan(xs[i])) {
          ASSERT_TRUE(got.data<float>()[i] >= 0.0f && got.data<float>()[i] <= 1.0f) << xs[i];
        }
      }
  }
}

TEST(CodegenTest, IntegerDivisionByZeroGivesZero) {
  for (DType t : {DType::I8, DType::I32, DType::I64, DType::U16, DType::U64}) {
    Tensor a = k::cast(Tensor::fromVector<int64_t>({kN}, std::vector<int64_t>(kN, 7)), t);
    Tensor b(t, {kN}); // zeros
    for (const char *kind : {"div", "rem"}) {
      Tensor got = run(differential().get(std::string("binary_") + kind + "_" + dtypeId(t)), {a, b},
                       t, {kN});
      for (int64_t i = 0; i < kN; ++i)
        ASSERT_EQ(got.getInt(i), 0) << kind << " on " << dtypeName(t);
    }
  }
  // min / -1 wraps; min % -1 is 0.
  Tensor a = Tensor::fromVector<int32_t>({kN}, std::vector<int32_t>(kN, INT32_MIN));
  Tensor b = Tensor::fromVector<int32_t>({kN}, std::vector<int32_t>(kN, -1));
  EXPECT_EQ(run(differential().get("binary_div_i32"), {a, b}, DType::I32, {kN}).getInt(3), INT32_MIN);
  EXPECT_EQ(run(differential().get("binary_rem_i32"), {a, b}, DType::I32, {kN}).getInt(3), 0);
}

TEST(CodegenTest, CompareAndSelectMatchReference) {
  std::mt19937_64 rng(3);
  for (DType t : kAllTypes) {
    for (int kind = 0; kind < kNumCompare; ++kind) {
      Tensor a = randomTensor(t, {kN}, rng, Values::Ties);
      Tensor b = randomTensor(t, {kN}, rng, Values::Ties);
      Tensor got = run(differential().get("compare_" + compareName(kind) + "_" + dtypeId(t)),
                       {a, b}, DType::Bool, {kN});
      EXPECT_TRUE(sameTensor(got, k::compare((k::CompareKind)kind, a, b)))
          << compareName(kind) << " on " << dtypeName(t);
    }
    Tensor c = randomTensor(DType::Bool, {kN}, rng, Values::General);
    Tensor a = randomTensor(t, {kN}, rng, Values::General);
    Tensor b = randomTensor(t, {kN}, rng, Values::General);
    EXPECT_TRUE(sameTensor(run(differential().get("select_" + dtypeId(t)), {c, a, b}, t, {kN}),
                           k::select(c, a, b)))
        << "select on " << dtypeName(t);
  }
}

TEST(CodegenTest, CastsBetweenAllTypesMatchReference) {
  std::mt19937_64 rng(4);
  for (DType from : kAllTypes)
    for (DType to : kAllTypes) {
      if (from == to)
        continue;
      Tensor x = randomTensor(from, {kN}, rng, Values::General);
      Tensor got = run(differential().get("cast_" + dtypeId(from) + "_" + dtypeId(to)), {x}, to, {kN});
      EXPECT_TRUE(sameTensor(got, k::cast(x, to))) << dtypeName(from) << " -> " << dtypeName(to);
    }
}

// ---- Reductions --------------------------------------------------------------------------------

TEST(CodegenTest, ReductionsMatchReference) {
  std::mt19937_64 rng(5);
  for (DType t : kAllTypes)
    for (int kind = 0; kind < 4; ++kind) {
      if (!reduceSupported(kind, t))
        continue;
      Values values = kind == (int)k::ReduceKind::Prod && isFloat(t) ? Values::NearOne
                                                                     : Values::General;
      Tensor x = randomTensor(t, {kRows, kCols}, rng, values);
      if (isFloat(t) && kind >= 2) { // a NaN in row 2 only: the other rows have none
        for (int64_t i = 0; i < x.numElements(); ++i)
          if (std::isnan(x.getDouble(i)) && i / kCols != 2)
            std::memset((char *)x.raw() + i * dtypeSize(t), 0, dtypeSize(t));
      }
      // Float sums and products combine in another order: allow rounding differences.
      double tolerance = isFloat(t) && kind < 2 ? (t == DType::F16 || t == DType::BF16 ? 2e-2 : 1e-5) : 0;
      std::string id = reduceName(kind) + "_" + dtypeId(t);
      Tensor rows = run(differential().get("reduce_" + id), {x}, t, {kRows});
      EXPECT_TRUE(sameTensor(rows, k::reduce((k::ReduceKind)kind, x, {1}), tolerance)) << id;
      Tensor all = run(differential().get("reduce_all_" + id), {x}, t, {1});
      EXPECT_TRUE(sameTensor(all, k::reduce((k::ReduceKind)kind, x, {0, 1}).reshaped({1}), tolerance))
          << "all " << id;
      // Over the rows of each column (interchanged: a block of columns per step): the NaNs of
      // row 2 reach the max/min of their columns alone.
      Tensor columns = run(differential().get("reduce_columns_" + id), {x}, t, {kCols});
      EXPECT_TRUE(sameTensor(columns, k::reduce((k::ReduceKind)kind, x, {0}), tolerance))
          << "columns " << id;
    }
}

TEST(CodegenTest, ArgReduceTiesAndNaN) {
  std::mt19937_64 rng(6);
  for (DType t : kAllTypes)
    for (bool isMax : {true, false})
      for (bool last : {false, true}) {
        Tensor x = randomTensor(t, {kRows, kCols}, rng, Values::Ties);
        std::string name = std::string("arg") + (isMax ? "max" : "min") + (last ? "_last_" : "_") + dtypeId(t);
        Tensor got = run(differential().get(name), {x}, DType::I64, {kRows});
        EXPECT_TRUE(sameTensor(got, k::argReduce(isMax, x, 1, last))) << name;
        std::string columnsName = std::string("arg") + (isMax ? "max" : "min") +
                                  (last ? "_last_" : "_") + "columns_" + dtypeId(t);
        Tensor columns = run(differential().get(columnsName), {x}, DType::I64, {kCols});
        EXPECT_TRUE(sameTensor(columns, k::argReduce(isMax, x, 0, last))) << columnsName;
      }
}

// ---- 16-bit floats over all bit patterns ---------------------------------------------------------

TEST(CodegenTest, HalfConversionsAreExact) {
  // Every f16 / bf16 bit pattern widened to f32, and a dense sweep of f32 patterns (plus every
  // halfway point between adjacent f16 values) narrowed to f16 and bf16.
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i)
    all[i] = (uint16_t)i;
  std::vector<float> floats;
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 4093)
    floats.push_back([](uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }((uint32_t)bits));
  for (uint32_t i = 0; i < 0x7C00; ++i) {
    Half a, b;
    a.bits = (uint16_t)i;
    b.bits = (uint16_t)(i + 1);
    float halfway = ((float)a + (float)b) / 2; // exact in float
    floats.push_back(halfway);
    floats.push_back(-halfway);
  }
  int64_t n = (int64_t)floats.size();
  std::string text = elementwiseKernel("widen_f16", {DType::F16}, DType::F32, 65536, "tk.cast %a0 : f16 to f32") +
                     elementwiseKernel("widen_bf16", {DType::BF16}, DType::F32, 65536, "tk.cast %a0 : bf16 to f32") +
                     elementwiseKernel("narrow_f16", {DType::F32}, DType::F16, n, "tk.cast %a0 : f32 to f16") +
                     elementwiseKernel("narrow_bf16", {DType::F32}, DType::BF16, n, "tk.cast %a0 : f32 to bf16");
  auto lib = compileAndLoad(text, 1);
  for (DType t : {DType::F16, DType::BF16}) {
    Tensor x(t, {65536}, all.data());
    std::string suffix = t == DType::F16 ? "f16" : "bf16";
    EXPECT_TRUE(sameTensor(run(lib->get("widen_" + suffix), {x}, DType::F32, {65536}), k::cast(x, DType::F32)));
    Tensor f(DType::F32, {n}, floats.data());
    Tensor got = run(lib->get("narrow_" + suffix), {f}, t, {n});
    Tensor ref = k::cast(f, t);
    // NaN payloads are kept exactly too: compare bits.
    EXPECT_EQ(std::memcmp(got.raw(), ref.raw(), got.byteSize()), 0) << "f32 -> " << suffix;
  }
}

// ---- Storage-only types: float8 and 4-/2-bit integers ------------------------------------------

TEST(CodegenTest, StorageOnlyCastsMatchReference) {
  // Into each float8 type: a sweep of f32 bit patterns (every 4093rd, with the specials) and the
  // halfway points between its adjacent values; out of it: every code. 4- and 2-bit integers:
  // wrapping from i64 and f32, and every value back to f32. Bits must match the reference.
  const DType f8s[] = {DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ};
  const DType ints[] = {DType::I4, DType::U4, DType::I2, DType::U2};
  std::vector<float> floats = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e9f, -1e9f};
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 4093)
    floats.push_back([](uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }((uint32_t)bits));
  for (DType t : f8s)
    for (int code = 0; code + 1 < 128; ++code) {
      float a = float8ToFloat(t, (uint8_t)code), b = float8ToFloat(t, (uint8_t)(code + 1));
      if (std::isfinite(a) && std::isfinite(b)) {
        floats.push_back((a + b) / 2);
        floats.push_back(-(a + b) / 2);
      }
    }
  std::vector<int64_t> wide;
  for (int64_t v = -300; v <= 300; ++v)
    wide.push_back(v);
  wide.push_back(INT64_MIN);
  wide.push_back(INT64_MAX);
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i)
    codes[i] = (uint8_t)i;
  const int64_t nf = (int64_t)floats.size(), nw = (int64_t)wide.size();
  std::string text;
  auto castKernel = [&](DType from, DType to, int64_t n) {
    std::string name = "cast_" + dtypeId(from) + "_" + dtypeId(to);
    text += elementwiseKernel(name, {from}, to, n,
                              "tk.cast %a0 : " + mlirType(from) + " to " + mlirType(to));
    return name;
  };
  for (DType t : f8s) {
    castKernel(DType::F32, t, nf);
    castKernel(t, DType::F32, 256);
    castKernel(t, DType::F16, 256);
    castKernel(t, DType::I32, 256);
  }
  castKernel(DType::F8E4M3FN, DType::F8E5M2, 256);
  for (DType t : ints) {
    castKernel(DType::I64, t, nw);
    castKernel(DType::F32, t, nf);
    castKernel(t, DType::F32, 256);
  }
  auto lib = compileAndLoad(text, 1);
  auto check = [&](const Tensor &x, DType to) {
    std::string name = "cast_" + dtypeId(x.dtype()) + "_" + dtypeId(to);
    Tensor got = run(lib->get(name), {x}, to, x.shape());
    Tensor ref = k::cast(x, to);
    EXPECT_EQ(std::memcmp(got.raw(), ref.raw(), ref.byteSize()), 0) << name;
  };
  Tensor f(DType::F32, {nf}, floats.data());
  Tensor w(DType::I64, {nw}, wide.data());
  for (DType t : f8s) {
    check(f, t);
    Tensor all(t, {256}, codes.data());
    check(all, DType::F32);
    check(all, DType::F16);
    check(all, DType::I32);
  }
  check(Tensor(DType::F8E4M3FN, {256}, codes.data()), DType::F8E5M2);
  for (DType t : ints) {
    check(w, t);
    check(f, t);
    std::vector<uint8_t> values(256);
    for (int i = 0; i < 256; ++i)
      values[i] = wrapSubByteInt(t, i);
    check(Tensor(t, {256}, values.data()), DType::F32);
  }
}

TEST(CodegenTest, BitcastsMatchReference) {
  // Every pair of distinct element types of one storage size, on values with their specials.
  std::mt19937_64 rng(9);
  std::vector<DType> types = kAllTypes;
  types.insert(types.end(), {DType::F8E4M3FN, DType::F8E5M2FNUZ});
  std::string text;
  std::vector<std::pair<DType, DType>> pairs;
  for (DType from : types)
    for (DType to : types)
      if (from != to && dtypeSize(from) == dtypeSize(to)) {
        pairs.push_back({from, to});
        text += elementwiseKernel("bitcast_" + dtypeId(from) + "_" + dtypeId(to), {from}, to, kN,
                                  "tk.bitcast %a0 : " + mlirType(from) + " to " + mlirType(to));
      }
  auto lib = compileAndLoad(text, 1);
  for (auto [from, to] : pairs) {
    Tensor x = isStorageOnly(from) ? tcc::randomTensor(from, {kN}, rng())
                                   : randomTensor(from, {kN}, rng, Values::General);
    std::string name = "bitcast_" + dtypeId(from) + "_" + dtypeId(to);
    Tensor got = run(lib->get(name), {x}, to, {kN});
    Tensor ref = k::bitcast(x, to);
    // NaN payloads may be quieted by a float load: compare values where the reference is NaN.
    bool same = true;
    for (int64_t i = 0; i < kN && same; ++i) {
      bool refNaN = (isFloat(to) || isFloat8(to)) && std::isnan(ref.getDouble(i));
      same = refNaN ? std::isnan(got.getDouble(i))
                    : std::memcmp((char *)got.raw() + i * dtypeSize(to),
                                  (char *)ref.raw() + i * dtypeSize(to), dtypeSize(to)) == 0;
    }
    EXPECT_TRUE(same) << name;
  }
}

// ---- Loop skeleton: threads, nested loops, apply, for ------------------------------------------

TEST(CodegenTest, ThreadedSoftmaxAndBroadcast) {
  // Large enough for OpenMP threads: a row softmax (outer parallel with two reductions and an
  // inner parallel), a broadcast add over [2, 40000] (few outer rows: the inner dim is split
  // across threads), and a full sum over 131072 elements at the top level.
  const char *text = R"mlir(
func.func @softmax(%x: memref<300x257xf32>, %y: memref<300x257xf32>) attributes {tk.kernel} {
  tk.parallel [300] {
  ^bb0(%i: index):
    %m = tk.reduce max [257] {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<300x257xf32>
      tk.yield %v : f32
    } : f32
    %s = tk.reduce sum [257] {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<300x257xf32>
      %d = tk.binary sub %v, %m : f32
      %e = tk.unary exp %d : f32
      tk.yield %e : f32
    } : f32
    tk.parallel [257] {
    ^bb0(%j: index):
      %v = tk.load %x[%i, %j] : memref<300x257xf32>
      %d = tk.binary sub %v, %m : f32
      %e = tk.unary exp %d : f32
      %r = tk.binary div %e, %s : f32
      tk.store %r, %y[%i, %j] : memref<300x257xf32>
    }
  }
  return
}
func.func @bcast(%a: memref<2x40000xf32>, %b: memref<40000xf32>, %y: memref<2x40000xf32>) attributes {tk.kernel} {
  tk.parallel [2, 40000] {
  ^bb0(%i: index, %j: index):
    %u = tk.load %a[%i, %j] : memref<2x40000xf32>
    %v = tk.load %b[%j] : memref<40000xf32>
    %r = tk.binary add %u, %v : f32
    tk.store %r, %y[%i, %j] : memref<2x40000xf32>
  }
  return
}
func.func @sum(%x: memref<256x512xi32>, %y: memref<1xi32>) attributes {tk.kernel} {
  %r = tk.reduce sum [256, 512] {
  ^bb0(%i: index, %j: index):
    %v = tk.load %x[%i, %j] : memref<256x512xi32>
    tk.yield %v : i32
  } : i32
  %c0 = tk.constant 0 : index
  tk.store %r, %y[%c0] : memref<1xi32>
  return
}
)mlir";
  auto lib = compileAndLoad(text, 1);
  std::mt19937_64 rng(7);
  Tensor x = randomTensor(DType::F32, {300, 257}, rng, Values::NearOne);
  Tensor m = k::reduce(k::ReduceKind::Max, x, {1});
  Tensor shifted = k::binary(k::BinaryKind::Sub, x, k::broadcastInDim(m, {300, 257}, {0}));
  Tensor e = k::unary(k::UnaryKind::Exp, shifted);
  Tensor ref = k::binary(k::BinaryKind::Div, e,
                         k::broadcastInDim(k::reduce(k::ReduceKind::Sum, e, {1}), {300, 257}, {0}));
  for (int threads : {1, 2, 3})
    EXPECT_TRUE(sameTensor(run(lib->get("softmax"), {x}, DType::F32, {300, 257}, threads), ref, 1e-5));

  Tensor a = randomTensor(DType::F32, {2, 40000}, rng, Values::General);
  Tensor b = randomTensor(DType::F32, {40000}, rng, Values::General);
  Tensor bref = k::binary(k::BinaryKind::Add, a, k::broadcastInDim(b, {2, 40000}, {1}));
  for (int threads : {1, 2, 0})
    EXPECT_TRUE(sameTensor(run(lib->get("bcast"), {a, b}, DType::F32, {2, 40000}, threads), bref));

  Tensor s = randomTensor(DType::I32, {256, 512}, rng, Values::General);
  EXPECT_TRUE(sameTensor(run(lib->get("sum"), {s}, DType::I32, {1}),
                         k::reduce(k::ReduceKind::Sum, s, {0, 1}).reshaped({1})));
}

TEST(CodegenTest, TransposesRunInTiles) {
  // Loops that transpose run in 16 x 16 tiles of the two dims (CpuEmitter's
  // emitTransposeTiles): channels-last [1, 37, 45, 40] to channels-first with a bias and ReLU
  // (f32: whole tiles through a buffer and tcc_transpose16, partial ones at both ends element
  // by element), a [64, 48] i32 transpose (no buffer: i32 is stored element by element in the
  // tiles), and one with two f32 outputs (no buffer either). Against the interpreter's
  // transpose, on 1 to 3 threads.
  const char *text = R"mlir(
func.func @to_first(%b: memref<40xf32>, %x: memref<1x37x45x40xf32>, %y: memref<1x40x37x45xf32>) attributes {tk.kernel} {
  %c0 = tk.constant 0 : index
  %z = tk.constant 0.0 : f32
  tk.parallel [1, 40, 37, 45] {
  ^bb0(%n: index, %c: index, %h: index, %w: index):
    %v = tk.load %x[%n, %h, %w, %c] : memref<1x37x45x40xf32>
    %bb = tk.load %b[%c] : memref<40xf32>
    %s = tk.binary add %v, %bb : f32
    %r = tk.binary max %s, %z : f32
    tk.store %r, %y[%c0, %c, %h, %w] : memref<1x40x37x45xf32>
  }
  return
}
func.func @ints(%x: memref<64x48xi32>, %y: memref<48x64xi32>) attributes {tk.kernel} {
  tk.parallel [48, 64] {
  ^bb0(%i: index, %j: index):
    %v = tk.load %x[%j, %i] : memref<64x48xi32>
    tk.store %v, %y[%i, %j] : memref<48x64xi32>
  }
  return
}
func.func @two(%x: memref<32x48xf32>, %y: memref<48x32xf32>, %z: memref<48x32xf32>) attributes {tk.kernel} {
  tk.parallel [48, 32] {
  ^bb0(%i: index, %j: index):
    %v = tk.load %x[%j, %i] : memref<32x48xf32>
    %d = tk.binary add %v, %v : f32
    tk.store %v, %y[%i, %j] : memref<48x32xf32>
    tk.store %d, %z[%i, %j] : memref<48x32xf32>
  }
  return
}
)mlir";
  std::vector<cg::KernelSource> sources = emitAll(text, 1);
  ASSERT_EQ(sources.size(), 1u);
  const std::string &src = sources[0].source;
  const size_t call = src.find("tcc_transpose16(tile");
  EXPECT_NE(call, std::string::npos) << src;
  EXPECT_EQ(call, src.rfind("tcc_transpose16(tile")) << "only to_first takes the buffer";
  auto lib = compileAndLoad(text, 1);
  std::mt19937_64 rng(11);
  Tensor b = randomTensor(DType::F32, {40}, rng, Values::General);
  Tensor x = randomTensor(DType::F32, {1, 37, 45, 40}, rng, Values::General);
  Tensor sum = k::binary(k::BinaryKind::Add, x, k::broadcastInDim(b, {1, 37, 45, 40}, {3}));
  Tensor relu = k::binary(k::BinaryKind::Max, sum,
                          k::broadcastInDim(Tensor::scalar(0.0f), {1, 37, 45, 40}, {}));
  Tensor want = k::transpose(relu, {0, 3, 1, 2});
  Tensor xi = randomTensor(DType::I32, {64, 48}, rng, Values::General);
  Tensor xf = randomTensor(DType::F32, {32, 48}, rng, Values::General);
  for (int threads : {1, 2, 3}) {
    EXPECT_TRUE(sameTensor(run(lib->get("to_first"), {b, x}, DType::F32, {1, 40, 37, 45}, threads),
                           want));
    EXPECT_TRUE(sameTensor(run(lib->get("ints"), {xi}, DType::I32, {48, 64}, threads),
                           k::transpose(xi, {1, 0})));
    Tensor y(DType::F32, {48, 32}), z(DType::F32, {48, 32});
    std::vector<void *> args = {xf.raw(), y.raw(), z.raw()};
    lib->get("two")(args.data(), threads);
    Tensor t = k::transpose(xf, {1, 0});
    EXPECT_TRUE(sameTensor(y, t));
    EXPECT_TRUE(sameTensor(z, k::binary(k::BinaryKind::Add, t, t)));
  }
}

TEST(CodegenTest, ApplyForAndCarriedValues) {
  // tk.apply with floordiv/mod/ceildiv on negative values; tk.for with a running sum and a
  // swap of two carried values (yields that read other carried values).
  const char *text = R"mlir(
func.func @affine(%y: memref<41x3xi64>) attributes {tk.kernel} {
  tk.parallel [41] {
  ^bb0(%i: index):
    %n = tk.apply affine_map<(d0) -> (d0 - 20)>(%i)
    %f = tk.apply affine_map<(d0) -> (d0 floordiv 7)>(%n)
    %m = tk.apply affine_map<(d0) -> (d0 mod 7)>(%n)
    %c = tk.apply affine_map<(d0) -> (d0 ceildiv 7)>(%n)
    %c0 = tk.constant 0 : index
    %c1 = tk.constant 1 : index
    %c2 = tk.constant 2 : index
    %fi = tk.cast %f : index to i64
    %mi = tk.cast %m : index to i64
    %ci = tk.cast %c : index to i64
    tk.store %fi, %y[%i, %c0] : memref<41x3xi64>
    tk.store %mi, %y[%i, %c1] : memref<41x3xi64>
    tk.store %ci, %y[%i, %c2] : memref<41x3xi64>
  }
  return
}
func.func @scan(%x: memref<5x9xf32>, %y: memref<5x9xf32>, %z: memref<5x2xf32>) attributes {tk.kernel} {
  tk.parallel [5] {
  ^bb0(%i: index):
    %zero = tk.constant 0.0 : f32
    %one = tk.constant 1.0 : f32
    %r:3 = tk.for 9 iter_args(%zero, %zero, %one : f32, f32, f32) {
    ^bb0(%j: index, %acc: f32, %p: f32, %q: f32):
      %v = tk.load %x[%i, %j] : memref<5x9xf32>
      %s = tk.binary add %acc, %v : f32
      tk.store %s, %y[%i, %j] : memref<5x9xf32>
      tk.yield %s, %q, %p : f32, f32, f32
    } : f32, f32, f32
    %c0 = tk.constant 0 : index
    %c1 = tk.constant 1 : index
    tk.store %r#1, %z[%i, %c0] : memref<5x2xf32>
    tk.store %r#2, %z[%i, %c1] : memref<5x2xf32>
  }
  return
}
)mlir";
  auto lib = compileAndLoad(text, 1);
  Tensor a = run(lib->get("affine"), {}, DType::I64, {41, 3});
  auto floordiv = [](int64_t x, int64_t y) { return (int64_t)std::floor((double)x / y); };
  for (int64_t i = 0; i < 41; ++i) {
    int64_t n = i - 20;
    EXPECT_EQ(a.getInt(i * 3), floordiv(n, 7)) << n;
    EXPECT_EQ(a.getInt(i * 3 + 1), n - 7 * floordiv(n, 7)) << n;
    EXPECT_EQ(a.getInt(i * 3 + 2), (int64_t)std::ceil((double)n / 7)) << n;
  }
  std::mt19937_64 rng(8);
  Tensor x = randomTensor(DType::F32, {5, 9}, rng, Values::NearOne);
  Tensor y(DType::F32, {5, 9}), z(DType::F32, {5, 2});
  void *args[] = {x.raw(), y.raw(), z.raw()};
  lib->get("scan")(args, 1);
  EXPECT_TRUE(sameTensor(y, k::cumsum(x, 1, false, false)));
  for (int64_t i = 0; i < 5; ++i) { // 9 swaps: odd, so (0, 1) ends as (1, 0)
    EXPECT_EQ(z.getDouble(i * 2), 1.0);
    EXPECT_EQ(z.getDouble(i * 2 + 1), 0.0);
  }
}

// ---- Kernel compiler and cache -----------------------------------------------------------------

std::string freshDir() {
  llvm::SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("tcc-codegen-cache-test", dir))
    throw Error("cannot create a temporary directory");
  return dir.str().str();
}

size_t countFiles(const std::string &dir, llvm::StringRef ext) {
  size_t n = 0;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ext)
      ++n;
  return n;
}

std::vector<cg::KernelSource> smallKernels(float scale) {
  std::string text;
  for (int i = 0; i < 2; ++i)
    text += elementwiseKernel("scale" + std::to_string(i), {DType::F32}, DType::F32, 64,
                              "tk.binary mul %a0, %a0 : f32");
  auto sources = emitAll(text, 2);
  sources[1].source += "\n// variant " + std::to_string(scale) + "\n";
  return sources;
}

TEST(CodegenTest, CacheHitsMissesAndBypass) {
  std::string dir = freshDir();
  cg::CpuCompileOptions options;
  options.cacheDir = dir;
  cg::CpuModule first = cg::compileCpuModule(smallKernels(1), options);
  EXPECT_EQ(first.stats.kernels, 2u);
  EXPECT_EQ(first.stats.cacheHits, 0u);
  EXPECT_FALSE(first.stats.linkCacheHit);
  EXPECT_EQ(countFiles(dir + "/cpu", ".o"), 2u);
  EXPECT_EQ(countFiles(dir + "/cpu", ".so"), 1u);
  EXPECT_NE(first.compiler.find("-march=native"), std::string::npos);

  cg::CpuModule second = cg::compileCpuModule(smallKernels(1), options);
  EXPECT_EQ(second.stats.cacheHits, 2u);
  EXPECT_TRUE(second.stats.linkCacheHit);
  EXPECT_EQ(second.sharedObject, first.sharedObject);
  EXPECT_LT(second.stats.seconds, first.stats.seconds);
  EXPECT_LT(second.stats.seconds, 0.1);

  cg::CpuModule changed = cg::compileCpuModule(smallKernels(2), options);
  EXPECT_EQ(changed.stats.cacheHits, 1u);
  EXPECT_FALSE(changed.stats.linkCacheHit);
  EXPECT_EQ(countFiles(dir + "/cpu", ".o"), 3u);

  options.useCache = false;
  cg::CpuModule bypass = cg::compileCpuModule(smallKernels(1), options);
  EXPECT_EQ(bypass.stats.cacheHits, 0u);
  EXPECT_FALSE(bypass.stats.linkCacheHit);
  EXPECT_EQ(countFiles(dir + "/cpu", ".o"), 3u);
  Library lib(bypass.sharedObject);
  Tensor x = Tensor::fromVector<float>({64}, std::vector<float>(64, 3.0f));
  EXPECT_EQ(run(lib.get("scale1"), {x}, DType::F32, {64}).getDouble(5), 9.0);
  llvm::sys::fs::remove_directories(dir);
}

TEST(CodegenTest, ParallelCompileReportsProgress) {
  std::string dir = freshDir();
  std::string text;
  for (int i = 0; i < 6; ++i)
    text += elementwiseKernel("k" + std::to_string(i), {DType::F32}, DType::F32, 32,
                              "tk.unary " + unaryName(i) + " %a0 : f32");
  cg::CpuCompileOptions options;
  options.cacheDir = dir;
  options.jobs = 3;
  std::vector<size_t> seen;
  options.progress = [&](size_t done, size_t total) {
    EXPECT_EQ(total, 6u);
    seen.push_back(done);
  };
  cg::CpuModule m = cg::compileCpuModule(emitAll(text, 6), options);
  EXPECT_EQ(seen, (std::vector<size_t>{1, 2, 3, 4, 5, 6}));
  Library lib(m.sharedObject);
  for (int i = 0; i < 6; ++i)
    lib.get("k" + std::to_string(i));
  llvm::sys::fs::remove_directories(dir);
}

TEST(CodegenTest, CompilerErrorsAndUnsupportedOps) {
  cg::CpuCompileOptions options;
  options.useCache = false;
  try {
    cg::compileCpuModule({{"broken", "extern \"C\" void broken() { this is not C++; }"}}, options);
    FAIL() << "expected a compile error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("broken"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("error"), std::string::npos) << e.what();
  }

  auto ctx = makeContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(
      elementwiseKernel("shl", {DType::I32, DType::I32}, DType::I32, 4,
                        "tk.binary shift_left %a0, %a1 : i32"),
      ctx.get());
  ASSERT_TRUE(module);
  try {
    cg::emitCpuKernel(*module->getOps<mlir::func::FuncOp>().begin());
    FAIL() << "expected an emitter error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("tk.binary"), std::string::npos) << e.what();
  }
}

} // namespace
