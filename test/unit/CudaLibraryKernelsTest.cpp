//===- CudaLibraryKernelsTest.cpp - Generated CUDA conv, top-k, attention, on the host -===//
//
// emitCudaConv, emitCudaTopK, emitCudaAttention and emitCudaAttentionGrad (CudaLibraryKernels.h)
// on many geometries, checked without a GPU two ways, like CudaCodegenTest:
//  * Semantics: every kernel runs through the host emulation of CUDA
//    (test/support/CudaHostEmulation.h) on seeded random data, with its grid shrunk to at most
//    3 blocks so the grid-stride loops wrap (1 block for one conv and one top-k), against the
//    reference kernels (tcc::kernels::conv and topk, the interpreter's, whose semantics
//    libtccrt's runConv/runTopK share).
//    Convolutions sum in another order than the reference, so each output element may differ
//    by the rounding of two f32 dot products of length K = in channels per group * taps: both
//    are within (K - 1) * 2^-24 * sum |w * x| of the exact sum, so the test allows
//    2 * K * 2^-24 * sum |w * x| (the sum of magnitudes computed by the same reference on |x|
//    and |w|). Top-k must match exactly: values bit for bit, indices equal.
//    Attention (f16/bf16 on emulated tensor cores) against the reference on the same 16-bit
//    inputs computed in f32: the kernel rounds the probabilities to the input type before
//    P v and rounds the result, so each output may differ by (2 eps + 2^-16) times the
//    reference computed with |v| (eps = 2^-11 for f16, 2^-8 for bf16); NaN rows (masked
//    entirely) must be NaN. One case reads its bias in f32.
//    Attention's gradient (emitCudaAttentionGrad's two kernels, on the same cases) against the
//    definition's gradient in double (kernels::attentionGrad): see its test for the tolerance.
//  * Compilation: every kernel, and a few too large to run here (64-bit offsets and indices),
//    compiles with NVRTC for sm_80 and sm_90 without spills or a stack frame; registers are
//    printed. Skipped, visibly, without NVRTC.
//
//===----------------------------------------------------------------------===//

#include "tcc/Codegen/CudaLibraryKernels.h"
#include "tcc/Codegen/NvrtcCompiler.h"
#include "tcc/Codegen/ScalarEmitter.h"
#include "tcc/IR/TkDialect.h"
#include "tcc/Interp/Interpreter.h"
#include "tcc/Interp/Kernels.h"
#include "tcc/Support/Tensor.h"

#include "CudaHostEmulation.h"
#include "TestSupport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>

using namespace mlir;
using namespace tcc;
namespace cg = tcc::codegen;
namespace ts = tcc::testsupport;

namespace {

struct ConvCase {
  std::string name;
  Shape x, w;
  std::vector<int64_t> strides, padLow, padHigh, dilations;
  int64_t groups;
  std::string strategy; // expected substring of the kernel's strategy
};

struct AttentionCase {
  std::string name;
  DType dtype;
  Shape q, k, v;
  bool causal = false;
  Shape mask, bias;            // empty: none
  double maskedValue = -INFINITY;
  unsigned alignment = 16;     // < 16: the kernel's unaligned loads
  bool biasF32 = false;        // the kernels read the bias in f32 (its 16-bit values widened)
};

struct TopKCase {
  std::string name;
  DType dtype;
  Shape x;
  int64_t dim, k;
  bool largest;
};

std::vector<ConvCase> convCases() {
  std::vector<int64_t> one2 = {1, 1}, zero2 = {0, 0};
  return {
      {"pointwise_1x1", {2, 16, 7, 9}, {24, 16, 1, 1}, one2, zero2, zero2, one2, 1, "32x128"},
      {"3x3_pad1", {1, 8, 10, 11}, {40, 8, 3, 3}, one2, one2, one2, one2, 1, "64x64"},
      {"3x3_pad1_stride2", {2, 5, 13, 9}, {7, 5, 3, 3}, {2, 2}, one2, one2, one2, 1, "16x256"},
      {"5x5_dilation2", {1, 3, 17, 15}, {20, 3, 5, 5}, one2, {4, 4}, {4, 4}, {2, 2}, 1,
       "32x128"},
      {"asymmetric_pad", {1, 4, 9, 8}, {6, 4, 3, 2}, one2, {0, 2}, {1, 0}, one2, 1, "16x256"},
      {"negative_pad", {2, 3, 9, 10}, {5, 3, 2, 3}, {1, 2}, {-1, 0}, {0, -2}, one2, 1, "16x256"},
      {"groups2", {2, 8, 9, 9}, {10, 4, 3, 3}, one2, one2, one2, one2, 2, "16x256"},
      {"depthwise", {2, 6, 11, 10}, {6, 1, 3, 3}, one2, one2, one2, one2, 6, "direct"},
      {"depthwise_x2_stride2", {1, 4, 8, 9}, {8, 1, 3, 3}, {2, 2}, one2, {0, 1}, one2, 4,
       "direct"},
      {"conv1d", {3, 5, 40}, {7, 5, 4}, {3}, {2}, {1}, {2}, 1, "16x256"},
      {"depthwise1d", {2, 3, 20}, {3, 1, 5}, {1}, {2}, {2}, {1}, 3, "direct"},
      {"depthwise_multiplier_24", {1, 2, 10, 9}, {48, 1, 3, 3}, one2, one2, one2, one2, 2,
       "32x128"},
      {"depthwise3d_5x5x5", {1, 2, 7, 6, 8}, {2, 1, 5, 5, 5}, {1, 1, 1}, {2, 2, 2}, {2, 2, 2},
       {1, 1, 1}, 2, "direct"},
      {"depthwise1d_long_filter", {1, 2, 150}, {4, 1, 70}, {1}, {3}, {3}, {1}, 2, "direct"},
      {"conv3d", {1, 3, 6, 7, 5}, {4, 3, 3, 2, 3}, {1, 2, 1}, {1, 1, 1}, {1, 0, 1}, {1, 1, 1}, 1,
       "16x256"},
      {"single_in_channel", {3, 1, 12, 12}, {33, 1, 3, 3}, one2, zero2, zero2, one2, 1, "64x64"},
      // Enough channels and pixels for 128 x 128 tiles (M = 96 of 128, N = 184 * 184: 265
      // tiles), K = 9 to keep the emulated run short.
      {"big_tiles", {1, 1, 184, 184}, {96, 1, 3, 3}, one2, one2, one2, one2, 1, "128x128"},
      {"empty_output", {1, 2, 2, 2}, {3, 2, 3, 3}, one2, zero2, zero2, one2, 1, "empty"},
  };
}

std::vector<AttentionCase> attentionCases() {
  std::vector<AttentionCase> c;
  c.push_back({"f16_d64_tails", DType::F16, {2, 3, 70, 64}, {2, 3, 100, 64}, {2, 3, 100, 64}});
  c.push_back({"bf16_d128_causal", DType::BF16, {1, 2, 130, 128}, {1, 2, 130, 128},
               {1, 2, 130, 128}, true});
  c.push_back({"f16_d32_causal_more_keys", DType::F16, {1, 1, 40, 32}, {1, 1, 150, 32},
               {1, 1, 150, 32}, true});
  c.push_back({"bf16_d64_gqa_mask", DType::BF16, {1, 4, 33, 64}, {1, 2, 65, 64},
               {1, 2, 65, 64}, false, {1, 1, 33, 65}});
  c.push_back({"f16_d16_dv48_bias", DType::F16, {2, 3, 20, 16}, {2, 3, 90, 16}, {2, 3, 90, 48},
               false, {}, {2, 1, 1, 90}, -INFINITY, 16, true});
  c.push_back({"f16_causal_finite_mask_bias", DType::F16, {2, 2, 66, 32}, {2, 2, 66, 32},
               {2, 2, 66, 32}, true, {2, 1, 66, 66}, {1, 2, 66, 66}, -1e4});
  c.push_back({"f16_rank3_unaligned", DType::F16, {3, 50, 64}, {3, 50, 64}, {3, 50, 64}, false,
               {}, {}, -INFINITY, 2});
  c.push_back({"bf16_no_keys", DType::BF16, {1, 1, 5, 16}, {1, 1, 0, 16}, {1, 1, 0, 16}});
  return c;
}

std::vector<TopKCase> topkCases() {
  return {
      {"f32_largest", DType::F32, {4, 37}, 1, 5, true},
      {"f32_smallest", DType::F32, {4, 37}, 1, 5, false},
      {"f32_middle_k_eq_size", DType::F32, {3, 50, 4}, 1, 50, false},
      {"f32_dim0", DType::F32, {33, 5}, 0, 3, true},
      {"f32_k1", DType::F32, {6, 100}, 1, 1, true},
      {"f32_1d", DType::F32, {10}, 0, 10, true},
      {"f32_long_rows", DType::F32, {2, 3000}, 1, 7, true},
      {"f32_long_rows_k512", DType::F32, {1, 3000}, 1, 512, false},
      {"i32_long_middle", DType::I32, {1, 4100, 2}, 1, 300, true},
      {"f16_long_k1", DType::F16, {2, 2049}, 1, 1, false},
      {"f32_long_rows_all", DType::F32, {1, 4500}, 1, 4500, false},
      {"f32_long_middle", DType::F32, {1, 2100, 2}, 1, 2100, true},
      {"f16", DType::F16, {6, 100}, 1, 10, true},
      {"bf16_smallest", DType::BF16, {5, 33, 2}, 1, 7, false},
      {"f64_k1_smallest", DType::F64, {3, 200}, 1, 1, false},
      {"i32_all", DType::I32, {7, 64}, 1, 64, true},
      {"i8_smallest", DType::I8, {5, 40}, 1, 9, false},
      {"i16", DType::I16, {3, 41}, 1, 6, true},
      {"i64", DType::I64, {4, 100}, 1, 20, true},
      {"u8", DType::U8, {3, 70}, 1, 10, true},
      {"u16_smallest", DType::U16, {2, 30}, 1, 4, false},
      {"u32", DType::U32, {2, 30}, 1, 4, true},
      {"u64_smallest", DType::U64, {2, 30}, 1, 4, false},
      {"bool", DType::Bool, {3, 70}, 1, 10, true},
      {"k0", DType::F32, {3, 8}, 1, 0, true},
  };
}

/// Floats uniform in [-1, 1].
Tensor randomFloats(const Shape &shape, std::mt19937_64 &rng) {
  Tensor t(DType::F32, shape);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = u(rng);
  return t;
}

/// Values with many ties (small integers) and, for floats, NaN, +-inf and +-0.
Tensor topkInput(DType dtype, const Shape &shape, std::mt19937_64 &rng) {
  Tensor t(dtype, shape);
  int64_t n = t.numElements();
  visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      double v = (double)(int64_t)(rng() % 15) - 7;
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = rng() & 1;
        continue;
      } else if constexpr (std::is_floating_point_v<T>) {
        static const double specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 0.5};
        if (rng() % 6 == 0)
          v = specials[rng() % 7];
        else if (rng() % 2)
          v += std::ldexp((double)(rng() % 1024), -10); // distinct values too
        p[i] = (T)v;
      } else if constexpr (std::is_unsigned_v<T>) {
        p[i] = (T)(rng() % 12);
        if (rng() % 9 == 0)
          p[i] = (T)~(T)0; // the type's maximum
      } else if constexpr (std::is_integral_v<T>) {
        p[i] = (T)v;
        if (rng() % 9 == 0)
          p[i] = rng() % 2 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
      } else { // Half, BFloat16
        static const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f};
        float f = (float)v + (rng() % 2 ? 0.25f : 0.0f);
        if (rng() % 6 == 0)
          f = specials[rng() % 6];
        p[i] = T(f);
      }
    }
  });
  return t;
}

/// Builds tk ops on memref arguments of a function in `module`.
struct OpFactory {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  OpBuilder b{&ctx};

  OpFactory() {
    ctx.loadDialect<tk::TkDialect, func::FuncDialect, memref::MemRefDialect>();
    module = ModuleOp::create(UnknownLoc::get(&ctx));
  }

  /// A function with arguments of `types`, its body ready for one op.
  Block *function(const std::string &name, ArrayRef<Type> types) {
    b.setInsertionPointToEnd(module->getBody());
    auto fn = b.create<func::FuncOp>(b.getUnknownLoc(), name, b.getFunctionType(types, {}));
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    return entry;
  }

  MemRefType memref(const Shape &shape, DType dtype) {
    return MemRefType::get(shape, typeFromDType(&ctx, dtype));
  }

  tk::ConvOp conv(const ConvCase &c, const Shape &y) {
    Block *entry = function(c.name, {memref(c.x, DType::F32), memref(c.w, DType::F32),
                                     memref(y, DType::F32)});
    return b.create<tk::ConvOp>(b.getUnknownLoc(), entry->getArgument(0), entry->getArgument(1),
                                Value(), Value(), entry->getArgument(2), c.strides, c.padLow,
                                c.padHigh, c.dilations, (uint64_t)c.groups,
                                ArrayRef<int64_t>{}, FloatAttr(), FloatAttr(), false,
                                StringAttr(), FloatAttr(), FloatAttr());
  }

  tk::AttentionOp attention(const AttentionCase &c) {
    Shape out = c.q;
    out.back() = c.v.back();
    std::vector<Type> types = {memref(c.q, c.dtype), memref(c.k, c.dtype), memref(c.v, c.dtype)};
    if (!c.mask.empty())
      types.push_back(memref(c.mask, DType::Bool));
    if (!c.bias.empty())
      types.push_back(memref(c.bias, c.biasF32 ? DType::F32 : c.dtype));
    types.push_back(memref(out, c.dtype));
    Block *entry = function(c.name, types);
    unsigned next = 3;
    Value mask = c.mask.empty() ? Value() : entry->getArgument(next++);
    Value bias = c.bias.empty() ? Value() : entry->getArgument(next++);
    double scale = 1.0 / std::sqrt((double)c.q.back());
    return b.create<tk::AttentionOp>(b.getUnknownLoc(), entry->getArgument(0),
                                     entry->getArgument(1), entry->getArgument(2), mask, bias,
                                     entry->getArgument(next), b.getF64FloatAttr(scale),
                                     c.causal ? b.getUnitAttr() : UnitAttr(),
                                     b.getF64FloatAttr(c.maskedValue));
  }

  tk::AttentionGradOp attentionGrad(const AttentionCase &c) {
    Shape out = c.q, workspace = c.q;
    out.back() = c.v.back();
    workspace.back() = 2;
    std::vector<Type> types = {memref(c.q, c.dtype), memref(c.k, c.dtype), memref(c.v, c.dtype),
                               memref(out, c.dtype), memref(out, c.dtype)};
    if (!c.mask.empty())
      types.push_back(memref(c.mask, DType::Bool));
    if (!c.bias.empty())
      types.push_back(memref(c.bias, c.biasF32 ? DType::F32 : c.dtype));
    for (const Shape &grad : {c.q, c.k, c.v})
      types.push_back(memref(grad, c.dtype));
    types.push_back(memref(workspace, DType::F32));
    Block *entry = function(c.name + "_grad", types);
    unsigned next = 5;
    Value mask = c.mask.empty() ? Value() : entry->getArgument(next++);
    Value bias = c.bias.empty() ? Value() : entry->getArgument(next++);
    double scale = 1.0 / std::sqrt((double)c.q.back());
    auto arg = [&](unsigned i) { return entry->getArgument(i); };
    return b.create<tk::AttentionGradOp>(
        b.getUnknownLoc(), arg(0), arg(1), arg(2), arg(3), arg(4), mask, bias, arg(next),
        arg(next + 1), arg(next + 2), arg(next + 3), b.getF64FloatAttr(scale),
        c.causal ? b.getUnitAttr() : UnitAttr(), b.getF64FloatAttr(c.maskedValue));
  }

  tk::TopKOp topk(const TopKCase &c) {
    Shape v = c.x;
    v[c.dim] = c.k;
    Block *entry = function(c.name, {memref(c.x, c.dtype), memref(v, c.dtype),
                                     memref(v, DType::I64)});
    return b.create<tk::TopKOp>(b.getUnknownLoc(), entry->getArgument(0), entry->getArgument(1),
                                entry->getArgument(2), (uint64_t)c.dim, c.largest);
  }
};

std::string storage(MLIRContext *ctx, DType dtype) {
  return cg::ScalarEmitter(cg::Target::Cpu).storageType(typeFromDType(ctx, dtype));
}

struct ConvRun {
  ConvCase c;
  Tensor x, w, want, magnitude; // magnitude: the reference on |x| and |w|
  cg::CudaKernel kernel;
};

struct AttentionRun {
  AttentionCase c;
  Tensor q, k, v, mask, bias; // the kernel's inputs (16-bit, bool)
  Tensor want, magnitude;     // f32: the reference, and the reference on |v|
  cg::CudaKernel kernel;
};

struct AttentionGradRun {
  AttentionCase c;
  Tensor q, k, v, out, grad, mask, bias; // the kernels' inputs (16-bit, bool; bias maybe f32)
  std::vector<Tensor> want;              // f32: dq, dk, dv of the definition (double sums)
  std::array<cg::CudaKernel, 2> kernels;
};

struct TopKRun {
  TopKCase c;
  Tensor x, wantValues, wantIndices;
  cg::CudaKernel kernel;
};

Tensor absolute(const Tensor &t) {
  Tensor a = t.clone();
  for (int64_t i = 0; i < a.numElements(); ++i)
    a.data<float>()[i] = std::fabs(a.data<float>()[i]);
  return a;
}

/// All kernels of all cases and their reference results, built once.
struct Corpus {
  OpFactory ops;
  std::vector<ConvRun> convs;
  std::vector<TopKRun> topks;
  std::vector<AttentionRun> attentions;
  std::vector<AttentionGradRun> attentionGrads;
  /// Geometries too large to run here, compiled only: 64-bit offsets in the conv (an input of
  /// 2^32 + elements) and 64-bit indices in top-k (a line of 2^32 elements).
  std::vector<std::pair<std::string, cg::CudaKernel>> compileOnly;

  Corpus() {
    std::mt19937_64 rng(20261123);
    for (const ConvCase &c : convCases()) {
      ConvRun r{c, randomFloats(c.x, rng), randomFloats(c.w, rng), {}, {}, {}};
      std::vector<int64_t> ones(c.strides.size(), 1);
      r.want = kernels::conv(r.x, r.w, c.strides, c.padLow, c.padHigh, ones, c.dilations,
                             c.groups);
      r.magnitude = kernels::conv(absolute(r.x), absolute(r.w), c.strides, c.padLow, c.padHigh,
                                  ones, c.dilations, c.groups);
      r.kernel = cg::emitCudaConv(ops.conv(c, r.want.shape()));
      convs.push_back(std::move(r));
    }
    for (const TopKCase &c : topkCases()) {
      TopKRun r{c, topkInput(c.dtype, c.x, rng), {}, {}, {}};
      std::tie(r.wantValues, r.wantIndices) = kernels::topk(r.x, c.dim, c.k, c.largest);
      r.kernel = cg::emitCudaTopK(ops.topk(c));
      topks.push_back(std::move(r));
    }
    for (const AttentionCase &c : attentionCases()) {
      AttentionRun r{c, {}, {}, {}, {}, {}, {}, {}, {}};
      auto input = [&](const Shape &shape) {
        return kernels::cast(randomFloats(shape, rng), c.dtype);
      };
      r.q = input(c.q);
      r.k = input(c.k);
      r.v = input(c.v);
      Tensor maskF32, biasF32;
      if (!c.mask.empty()) {
        // A quarter masked, and the first row masked entirely (NaN with -inf).
        r.mask = Tensor(DType::Bool, c.mask);
        std::bernoulli_distribution keep(0.75);
        int64_t lk = c.mask.back();
        for (int64_t i = 0; i < r.mask.numElements(); ++i)
          r.mask.data<bool>()[i] = i >= lk && keep(rng);
      }
      if (!c.bias.empty()) {
        r.bias = input(c.bias);
        biasF32 = kernels::cast(r.bias, DType::F32);
        if (c.biasF32)
          r.bias = biasF32;
      }
      double scale = 1.0 / std::sqrt((double)c.q.back());
      Tensor q32 = kernels::cast(r.q, DType::F32), k32 = kernels::cast(r.k, DType::F32),
             v32 = kernels::cast(r.v, DType::F32);
      r.want = kernels::attention(q32, k32, v32, r.mask, biasF32, scale, c.causal, c.maskedValue);
      r.magnitude = kernels::attention(q32, k32, absolute(v32), r.mask, biasF32, scale,
                                       c.causal, c.maskedValue);
      r.kernel = cg::emitCudaAttention(ops.attention(c), c.alignment);
      // The gradient's inputs: the forward's output rounded to the input type, as the
      // forward kernel stores it, and a random adjoint.
      AttentionGradRun gr{c, r.q, r.k, r.v, kernels::cast(r.want, c.dtype), input(r.want.shape()),
                          r.mask, r.bias, {}, {}};
      gr.want = kernels::attentionGrad(q32, k32, v32, kernels::cast(gr.out, DType::F32),
                                       kernels::cast(gr.grad, DType::F32), r.mask, biasF32,
                                       scale, c.causal, c.maskedValue);
      gr.kernels = cg::emitCudaAttentionGrad(ops.attentionGrad(c), c.alignment);
      attentions.push_back(std::move(r));
      attentionGrads.push_back(std::move(gr));
    }
    for (DType dtype : {DType::F16, DType::BF16}) {
      AttentionCase big{std::string("attention_8k_causal_gqa_mask_") + dtypeName(dtype), dtype, {64, 16, 8192, 128}, {64, 4, 8192, 128},
                        {64, 4, 8192, 128}, true, {64, 1, 1, 8192}, {}};
      compileOnly.push_back({big.name, cg::emitCudaAttention(ops.attention(big), 16)});
      AttentionCase d64{std::string("attention_d64_bias_") + dtypeName(dtype), dtype, {8, 12, 1024, 64}, {8, 12, 1024, 64},
                        {8, 12, 1024, 64}, false, {}, {8, 1, 1, 1024}};
      compileOnly.push_back({d64.name, cg::emitCudaAttention(ops.attention(d64), 16)});
      // GPT-2 small's heads, causal: spilled on sm_80 when registers were capped at 168.
      AttentionCase gpt2{std::string("attention_gpt2_causal_") + dtypeName(dtype), dtype,
                         {8, 12, 1024, 64}, {8, 12, 1024, 64}, {8, 12, 1024, 64}, true};
      compileOnly.push_back({gpt2.name, cg::emitCudaAttention(ops.attention(gpt2), 16)});
      // The backward kernels of the same geometries (64-bit-free but large; head dim 128 takes
      // the 32-row query tiles).
      for (const AttentionCase &g : {big, d64, gpt2})
        for (const cg::CudaKernel &k : cg::emitCudaAttentionGrad(ops.attentionGrad(g), 16))
          compileOnly.push_back({g.name + "_grad", k});
    }
    ConvCase huge{"conv_64bit", {2, 8, 1 << 14, 1 << 14}, {16, 8, 3, 3}, {2, 2}, {1, 1}, {1, 1},
                  {1, 1}, 1, ""};
    compileOnly.push_back({huge.name, cg::emitCudaConv(ops.conv(huge, {2, 16, 1 << 13, 1 << 13}))});
    ConvCase hugeDepthwise{"depthwise_64bit", {1, 32, 1 << 14, 1 << 14}, {32, 1, 3, 3},
                           {1, 1}, {1, 1}, {1, 1}, {1, 1}, 32, ""};
    compileOnly.push_back({hugeDepthwise.name,
                           cg::emitCudaConv(ops.conv(hugeDepthwise, {1, 32, 1 << 14, 1 << 14}))});
    compileOnly.push_back({"topk_64bit_filter", cg::emitCudaTopK(ops.topk(
                               {"topk_64bit_filter", DType::F32, {int64_t(1) << 32}, 0, 5,
                                true}))});
    compileOnly.push_back({"topk_64bit_merge", cg::emitCudaTopK(ops.topk(
                              {"topk_64bit_merge", DType::BF16, {int64_t(1) << 32}, 0, 4096,
                               false}))});
  }

  std::vector<ts::EmulatedKernel> emulated() {
    std::vector<ts::EmulatedKernel> out;
    for (const ConvRun &r : convs)
      out.push_back({r.kernel.name, r.kernel.source, {"float", "float", "float"}});
    for (const TopKRun &r : topks) {
      std::string t = storage(&ops.ctx, r.c.dtype);
      out.push_back({r.kernel.name, r.kernel.source, {t, t, "int64_t"}});
    }
    for (const AttentionRun &r : attentions) {
      std::string t = storage(&ops.ctx, r.c.dtype);
      std::vector<std::string> types = {t, t, t};
      if (r.mask.defined())
        types.push_back("uint8_t");
      if (r.bias.defined())
        types.push_back(storage(&ops.ctx, r.bias.dtype()));
      types.push_back(t);
      out.push_back({r.kernel.name, r.kernel.source, types});
    }
    for (const AttentionGradRun &r : attentionGrads) {
      std::string t = storage(&ops.ctx, r.c.dtype);
      std::vector<std::string> types = {t, t, t, t, t};
      if (r.mask.defined())
        types.push_back("uint8_t");
      if (r.bias.defined())
        types.push_back(storage(&ops.ctx, r.bias.dtype()));
      types.insert(types.end(), {t, t, t, "float"});
      for (const cg::CudaKernel &k : r.kernels)
        out.push_back({k.name, k.source, types});
    }
    return out;
  }
};

Corpus &corpus() {
  static Corpus *c = new Corpus; // lives until exit: tests share it
  return *c;
}

const ts::CudaHostEmulation &emulation() {
  static ts::CudaHostEmulation *e = new ts::CudaHostEmulation(
      corpus().emulated(), ts::testKernelCacheDir("tcc-cuda-library-test-cache"));
  return *e;
}

/// Launches `k` with its block and a grid of at most `maxGrid` blocks (the kernels are
/// grid-stride: 1 block runs every tile or line itself, 3 blocks wrap unevenly).
void launch(const cg::CudaKernel &k, const std::vector<void *> &args, unsigned maxGrid) {
  ASSERT_LE(k.launch.block[0] * k.launch.block[1] * k.launch.block[2], 1024u);
  ASSERT_EQ(k.launch.block[1] * k.launch.block[2], 1u);
  ASSERT_EQ(k.launch.grid[1] * k.launch.grid[2], 1u);
  ASSERT_GE(k.launch.grid[0], 1u);
  ASSERT_LE(k.launch.sharedBytes, 227u * 1024); // the emulation's buffer, an H100's opt-in limit
  emulation().launch(k.name, args, std::min(k.launch.grid[0], maxGrid), k.launch.block[0]);
}

TEST(CudaLibraryKernelsTest, ConvStrategiesArePicked) {
  for (const ConvRun &r : corpus().convs)
    EXPECT_NE(r.kernel.strategy.find(r.c.strategy), std::string::npos)
        << r.c.name << ": strategy " << r.kernel.strategy << ", expected " << r.c.strategy;
}

TEST(CudaLibraryKernelsTest, TopKStrategiesArePicked) {
  std::map<std::string, std::string> want = {
      {"f32_largest", "one bitonic sort of 64"},
      {"f32_long_rows", "threshold filter"},
      {"f32_long_rows_k512", "threshold filter"},
      {"f16_long_k1", "threshold filter"},
      {"f32_long_rows_all", "merged in place"},
      {"f32_long_middle", "merged in place"},
  };
  for (const TopKRun &r : corpus().topks) {
    if (r.c.k == 0) {
      EXPECT_EQ(r.kernel.strategy, "empty");
    } else if (want.count(r.c.name)) {
      EXPECT_NE(r.kernel.strategy.find(want[r.c.name]), std::string::npos)
          << r.c.name << ": strategy " << r.kernel.strategy;
    }
  }
}

TEST(CudaLibraryKernelsTest, EmulatedConvMatchesTheReference) {
  for (const ConvRun &r : corpus().convs) {
    unsigned maxGrid = &r - corpus().convs.data() == 1 ? 1 : 3;
    SCOPED_TRACE(r.c.name + " (" + r.kernel.strategy + ", " + r.kernel.name + ")");
    Tensor got(DType::F32, r.want.shape());
    for (int64_t i = 0; i < got.numElements(); ++i)
      got.data<float>()[i] = NAN; // every element must be written
    Tensor x = r.x.clone(), w = r.w.clone();
    launch(r.kernel, {x.raw(), w.raw(), got.raw()}, maxGrid);
    int64_t k = r.c.w[1];
    for (size_t d = 2; d < r.c.w.size(); ++d)
      k *= r.c.w[d];
    double rtol = 2.0 * (double)k * std::ldexp(1.0, -24);
    int bad = 0;
    std::string report;
    for (int64_t i = 0; i < got.numElements(); ++i) {
      double g = got.data<float>()[i], want = r.want.data<float>()[i];
      double tol = rtol * r.magnitude.data<float>()[i];
      if (!(std::fabs(g - want) <= tol) && bad++ < 5)
        report += " [" + std::to_string(i) + "] got " + std::to_string(g) + " want " +
                  std::to_string(want) + " (tolerance " + std::to_string(tol) + ");";
    }
    EXPECT_EQ(bad, 0) << bad << " of " << got.numElements() << " elements differ:" << report;
    EXPECT_EQ(std::memcmp(x.raw(), r.x.raw(), x.byteSize()), 0) << "the input was written";
    EXPECT_EQ(std::memcmp(w.raw(), r.w.raw(), w.byteSize()), 0) << "the weight was written";
  }
}

TEST(CudaLibraryKernelsTest, EmulatedTopKMatchesTheReferenceExactly) {
  for (const TopKRun &r : corpus().topks) {
    unsigned maxGrid = &r - corpus().topks.data() == 2 ? 1 : 3;
    SCOPED_TRACE(r.c.name + " (" + r.kernel.strategy + ", " + r.kernel.name + ")");
    Tensor values(r.c.dtype, r.wantValues.shape()), indices(DType::I64, r.wantIndices.shape());
    std::memset(values.raw(), 0xA5, values.byteSize());
    std::memset(indices.raw(), 0xA5, indices.byteSize());
    Tensor x = r.x.clone();
    launch(r.kernel, {x.raw(), values.raw(), indices.raw()}, maxGrid);
    int64_t n = indices.numElements(), bad = 0;
    size_t es = dtypeSize(r.c.dtype);
    std::string report;
    for (int64_t i = 0; i < n; ++i) {
      bool same = indices.data<int64_t>()[i] == r.wantIndices.data<int64_t>()[i] &&
                  std::memcmp((const char *)values.raw() + i * es,
                              (const char *)r.wantValues.raw() + i * es, es) == 0;
      if (!same && bad++ < 5)
        report += " [" + std::to_string(i) + "] index " +
                  std::to_string(indices.data<int64_t>()[i]) + " want " +
                  std::to_string(r.wantIndices.data<int64_t>()[i]) + ";";
    }
    EXPECT_EQ(bad, 0) << bad << " of " << n << " results differ:" << report;
    EXPECT_EQ(std::memcmp(x.raw(), r.x.raw(), x.byteSize()), 0) << "the input was written";
  }
}

TEST(CudaLibraryKernelsTest, EmulatedAttentionMatchesTheReference) {
  for (const AttentionRun &r : corpus().attentions) {
    unsigned maxGrid = &r - corpus().attentions.data() == 0 ? 1 : 3;
    SCOPED_TRACE(r.c.name + " (" + r.kernel.name + ")");
    Tensor got(r.c.dtype, r.want.shape());
    std::memset(got.raw(), 0xFF, got.byteSize()); // NaN: every element must be written
    Tensor q = r.q.clone(), k = r.k.clone(), v = r.v.clone();
    std::vector<void *> args = {q.raw(), k.raw(), v.raw()};
    Tensor mask = r.mask.defined() ? r.mask.clone() : Tensor(),
           bias = r.bias.defined() ? r.bias.clone() : Tensor();
    if (mask.defined())
      args.push_back(mask.raw());
    if (bias.defined())
      args.push_back(bias.raw());
    args.push_back(got.raw());
    launch(r.kernel, args, maxGrid);
    Tensor got32 = kernels::cast(got, DType::F32);
    double eps = r.c.dtype == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    int64_t bad = 0, nans = 0;
    std::string report;
    for (int64_t i = 0; i < got32.numElements(); ++i) {
      double g = got32.data<float>()[i], want = r.want.data<float>()[i];
      double tol = (2 * eps + std::ldexp(1.0, -16)) * r.magnitude.data<float>()[i] + 1e-6;
      bool ok = std::isnan(want) ? std::isnan(g) : std::fabs(g - want) <= tol;
      nans += std::isnan(want);
      if (!ok && bad++ < 5)
        report += " [" + std::to_string(i) + "] got " + std::to_string(g) + " want " +
                  std::to_string(want) + " (tolerance " + std::to_string(tol) + ");";
    }
    EXPECT_EQ(bad, 0) << bad << " of " << got32.numElements() << " elements differ:" << report;
    if (r.mask.defined() && std::isinf(r.c.maskedValue))
      EXPECT_GT(nans, 0) << "the fully masked row should be NaN";
    EXPECT_EQ(std::memcmp(q.raw(), r.q.raw(), q.byteSize()), 0) << "q was written";
    EXPECT_EQ(std::memcmp(v.raw(), r.v.raw(), v.byteSize()), 0) << "v was written";
  }
}

// The backward kernels (dq with the row statistics, then dk and dv) against the definition's
// gradient in double. The kernels round P and dS to the input type for their products and round
// each result, so an element may differ by a few roundings of the tensor's largest terms: the
// test allows 4 eps times the largest |element| of each gradient (a result computed without
// the statistics' shift, the scale or dO.O misses by far more). NaN where the definition is
// NaN (rows masked entirely).
TEST(CudaLibraryKernelsTest, EmulatedAttentionGradientMatchesTheDefinition) {
  for (const AttentionGradRun &r : corpus().attentionGrads) {
    unsigned maxGrid = &r - corpus().attentionGrads.data() == 0 ? 1 : 3;
    SCOPED_TRACE(r.c.name + " (" + r.kernels[0].name + ", " + r.kernels[1].name + ")");
    Shape workspaceShape = r.c.q;
    workspaceShape.back() = 2;
    Tensor dq(r.c.dtype, r.c.q), dk(r.c.dtype, r.c.k), dv(r.c.dtype, r.c.v),
        workspace(DType::F32, workspaceShape);
    for (Tensor *t : {&dq, &dk, &dv, &workspace})
      std::memset(t->raw(), 0xFF, t->byteSize()); // NaN: every element must be written
    std::vector<Tensor> inputs = {r.q.clone(), r.k.clone(), r.v.clone(), r.out.clone(),
                                  r.grad.clone()};
    if (r.mask.defined())
      inputs.push_back(r.mask.clone());
    if (r.bias.defined())
      inputs.push_back(r.bias.clone());
    std::vector<void *> args;
    for (Tensor &t : inputs)
      args.push_back(t.raw());
    for (Tensor *t : {&dq, &dk, &dv, &workspace})
      args.push_back(t->raw());
    for (const cg::CudaKernel &k : r.kernels)
      launch(k, args, maxGrid);
    double eps = r.c.dtype == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const char *names[3] = {"dq", "dk", "dv"};
    Tensor *got[3] = {&dq, &dk, &dv};
    for (int which = 0; which < 3; ++which) {
      Tensor got32 = kernels::cast(*got[which], DType::F32);
      const Tensor &want = r.want[which];
      double largest = 0;
      for (int64_t i = 0; i < want.numElements(); ++i)
        if (std::isfinite(want.data<float>()[i]))
          largest = std::max(largest, (double)std::fabs(want.data<float>()[i]));
      double tol = 4 * eps * largest + 1e-6;
      int64_t bad = 0;
      std::string report;
      for (int64_t i = 0; i < got32.numElements(); ++i) {
        double g = got32.data<float>()[i], w = want.data<float>()[i];
        bool ok = std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= tol;
        if (!ok && bad++ < 5)
          report += " [" + std::to_string(i) + "] got " + std::to_string(g) + " want " +
                    std::to_string(w) + ";";
      }
      EXPECT_EQ(bad, 0) << names[which] << ": " << bad << " of " << got32.numElements()
                        << " elements differ by more than " << tol << ":" << report;
    }
    for (size_t i = 0; i < 5; ++i) {
      const Tensor &original = i == 0 ? r.q : i == 1 ? r.k : i == 2 ? r.v : i == 3 ? r.out : r.grad;
      EXPECT_EQ(std::memcmp(inputs[i].raw(), original.raw(), original.byteSize()), 0)
          << "input " << i << " was written";
    }
  }
}

TEST(CudaLibraryKernelsTest, AttentionOutsideTheKernelIsRefused) {
  OpFactory ops;
  AttentionCase c = attentionCases()[0];
  c.dtype = DType::F32;
  EXPECT_CONTAINS(test::errorOf([&] { cg::emitCudaAttention(ops.attention(c), 16); }),
                  "f16 or bf16 (got f32)");
  c = attentionCases()[0];
  c.q.back() = c.k.back() = c.v.back() = 72;
  EXPECT_CONTAINS(test::errorOf([&] { cg::emitCudaAttention(ops.attention(c), 16); }),
                  "multiples of 16 up to 128 (got 72 and 72)");
  c.q.back() = c.k.back() = c.v.back() = 256;
  EXPECT_CONTAINS(cg::cudaAttentionUnsupported(ops.attention(c)), "got 256 and 256");
}

TEST(CudaLibraryKernelsTest, NamesComeFromTheGeometry) {
  Corpus &c = corpus();
  std::regex conv("conv_[0-9a-f]{16}"), topk("topk_[0-9a-f]{16}");
  std::set<std::string> names;
  for (const ConvRun &r : c.convs) {
    EXPECT_TRUE(std::regex_match(r.kernel.name, conv)) << r.kernel.name;
    names.insert(r.kernel.name);
  }
  for (const TopKRun &r : c.topks) {
    EXPECT_TRUE(std::regex_match(r.kernel.name, topk)) << r.kernel.name;
    names.insert(r.kernel.name);
  }
  EXPECT_EQ(names.size(), c.convs.size() + c.topks.size()) << "two geometries share a name";
  // The same geometry again (another op, another function): the same kernel.
  const ConvRun &r = c.convs[1];
  cg::CudaKernel again = cg::emitCudaConv(c.ops.conv(r.c, r.want.shape()));
  EXPECT_EQ(again.name, r.kernel.name);
  EXPECT_EQ(again.source, r.kernel.source);
  const TopKRun &t = c.topks[0];
  EXPECT_EQ(cg::emitCudaTopK(c.ops.topk(t.c)).source, t.kernel.source);
}

TEST(CudaLibraryKernelsTest, BadGeometriesAreErrors) {
  OpFactory ops;
  ConvCase c = convCases()[1];
  // Output 9x11 where the convolution gives 10x11.
  EXPECT_CONTAINS(test::errorOf([&] { cg::emitCudaConv(ops.conv(c, {1, 40, 9, 11})); }),
                  "output spatial dim 0 is 9");
  // Dynamic shapes.
  {
    Block *entry = ops.function("dynamic", {MemRefType::get({ShapedType::kDynamic, 8, 10, 11},
                                                            ops.b.getF32Type()),
                                            ops.memref(c.w, DType::F32),
                                            ops.memref({1, 40, 10, 11}, DType::F32)});
    auto op = ops.b.create<tk::ConvOp>(ops.b.getUnknownLoc(), entry->getArgument(0),
                                       entry->getArgument(1), Value(), Value(),
                                       entry->getArgument(2), c.strides, c.padLow, c.padHigh,
                                       c.dilations, (uint64_t)1, ArrayRef<int64_t>{},
                                       FloatAttr(), FloatAttr(), false, StringAttr(), FloatAttr(),
                                       FloatAttr());
    EXPECT_CONTAINS(test::errorOf([&] { cg::emitCudaConv(op); }), "dynamic shape");
  }
  // Channels that do not agree with groups.
  c.groups = 3;
  EXPECT_CONTAINS(test::errorOf([&] { cg::emitCudaConv(ops.conv(c, {1, 40, 10, 11})); }),
                  "channel counts do not agree with groups = 3");
  // Top-k: k above the size; dim out of range.
  TopKCase t = topkCases()[0];
  t.k = 38;
  EXPECT_CONTAINS(test::errorOf([&] { cg::emitCudaTopK(ops.topk(t)); }), "k <= 37");
  t = topkCases()[0];
  {
    Block *entry = ops.function("bad_dim", {ops.memref({4, 37}, DType::F32),
                                            ops.memref({4, 5}, DType::F32),
                                            ops.memref({4, 5}, DType::I64)});
    auto op = ops.b.create<tk::TopKOp>(ops.b.getUnknownLoc(), entry->getArgument(0),
                                       entry->getArgument(1), entry->getArgument(2),
                                       (uint64_t)2, true);
    EXPECT_CONTAINS(test::errorOf([&] { cg::emitCudaTopK(op); }), "dim 2 is out of range");
  }
}

TEST(CudaLibraryKernelsTest, AllKernelsCompileWithNvrtcWithoutSpills) {
  if (!cg::nvrtcAvailable())
    GTEST_SKIP() << "no NVRTC in this build: " << cg::nvrtcVersionString();
  Corpus &c = corpus();
  std::vector<cg::KernelSource> sources;
  std::vector<std::string> what;
  for (const ConvRun &r : c.convs) {
    sources.push_back({r.kernel.name, r.kernel.source});
    what.push_back("conv " + r.c.name + " [" + r.kernel.strategy + "]");
  }
  for (const TopKRun &r : c.topks) {
    sources.push_back({r.kernel.name, r.kernel.source});
    what.push_back("topk " + r.c.name + " [" + r.kernel.strategy + "]");
  }
  for (const AttentionRun &r : c.attentions) {
    sources.push_back({r.kernel.name, r.kernel.source});
    what.push_back("attention " + r.c.name + " [" + r.kernel.strategy + "]");
  }
  for (const AttentionGradRun &r : c.attentionGrads)
    for (const cg::CudaKernel &k : r.kernels) {
      sources.push_back({k.name, k.source});
      what.push_back("attention gradient " + r.c.name + " [" + k.strategy + "]");
    }
  for (const auto &[name, kernel] : c.compileOnly) {
    sources.push_back({kernel.name, kernel.source});
    what.push_back(name + " (compiled only) [" + kernel.strategy + "]");
  }
  // TCC_TEST_DUMP_DIR=DIR writes every kernel's source to DIR/<name>.cu (to read, or for nvcc
  // -Xptxas -v once the prelude's integer typedefs are replaced by <stdint.h>).
  if (const char *dir = std::getenv("TCC_TEST_DUMP_DIR"))
    for (const cg::KernelSource &k : sources)
      std::ofstream(std::string(dir) + "/" + k.name + ".cu") << k.source;
  cg::CudaCompileOptions options;
  options.cacheDir = ts::testKernelCacheDir("tcc-cuda-library-test-cache");
  cg::CudaModule module = cg::compileCudaModule(sources, options);
  ASSERT_EQ(module.kernels.size(), sources.size());
  for (size_t i = 0; i < module.kernels.size(); ++i) {
    const cg::CudaCompiledKernel &k = module.kernels[i];
    ASSERT_EQ(k.binaries.size(), 2u);
    std::string line = "[ nvrtc    ] " + what[i] + ":";
    for (const cg::CudaBinary &b : k.binaries) {
      SCOPED_TRACE(what[i] + " " + b.arch);
      EXPECT_GT(b.registers, 0);
      EXPECT_LE(b.registers, 255);
      EXPECT_EQ(b.spillStoreBytes, 0);
      EXPECT_EQ(b.spillLoadBytes, 0);
      EXPECT_EQ(b.stackBytes, 0) << "local memory";
      line += " " + b.arch + " " + std::to_string(b.registers) + " registers, " +
              std::to_string(b.staticSharedBytes) + " B smem;";
    }
    std::printf("%s\n", line.c_str());
  }
}

} // namespace
