//===- LibraryTest.cpp - gemm, conv, topk and copy steps against naive loops ===//
#include "ChannelsLast.h"
#include "CpuLibrary.h"
#include "DType.h"
#include "TestUtil.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

using namespace tcc::rt::test;
using Shape = std::vector<int64_t>;

namespace {

//===--- GEMM -------------------------------------------------------------===//

template <class T>
std::vector<T> naiveGemm(const std::vector<T> &a, const Shape &as, const std::vector<T> &b,
                         const Shape &bs, const std::vector<T> &c0, const Shape &cs, bool ta,
                         bool tb, double alpha, double beta) {
  size_t r = cs.size();
  int64_t m = cs[r - 2], n = cs[r - 1], k = ta ? as[r - 2] : as[r - 1];
  int64_t batches = numElements(Shape(cs.begin(), cs.end() - 2));
  std::vector<T> c(c0);
  for (int64_t batch = 0; batch < batches; ++batch) {
    // Batch index of c, then a's and b's (broadcast dims of size 1 read index 0).
    int64_t rest = batch, aBatch = 0, bBatch = 0, aMul = 1, bMul = 1;
    for (size_t d = r - 2; d-- > 0;) {
      int64_t i = rest % cs[d];
      rest /= cs[d];
      aBatch += (as[d] == 1 ? 0 : i) * aMul;
      bBatch += (bs[d] == 1 ? 0 : i) * bMul;
      aMul *= as[d];
      bMul *= bs[d];
    }
    const T *A = a.data() + aBatch * m * k;
    const T *B = b.data() + bBatch * k * n;
    T *C = c.data() + batch * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += (double)(ta ? A[p * m + i] : A[i * k + p]) * (double)(tb ? B[j * k + p] : B[p * n + j]);
        C[i * n + j] = (T)(alpha * acc + (beta == 0 ? 0.0 : beta * (double)C[i * n + j]));
      }
  }
  return c;
}

struct GemmCase {
  Shape a, b, c;
  bool ta, tb;
  double alpha, beta;
};

template <class T> void checkGemm(const GemmCase &g, unsigned seed, int threads = 1) {
  auto dtype = std::is_same_v<T, float> ? fb::DType_F32 : fb::DType_F64;
  auto fa = randomFloats(numElements(g.a), seed), fbv = randomFloats(numElements(g.b), seed + 1),
       fc = randomFloats(numElements(g.c), seed + 2);
  std::vector<T> a(fa.begin(), fa.end()), b(fbv.begin(), fbv.end()), c0(fc.begin(), fc.end());
  ArtifactBuilder art;
  uint32_t ba = art.input(dtype, g.a), bb = art.input(dtype, g.b), bc0 = art.input(dtype, g.c);
  uint32_t out = art.output(dtype, g.c);
  if (g.beta != 0)
    art.copy(bc0, out); // c's initial value for beta
  art.gemm(ba, bb, out, g.ta, g.tb, g.alpha, g.beta);
  auto outputs = runArtifact(art.finish(), {a.data(), b.data(), c0.data()}, threads);
  auto want = naiveGemm(a, g.a, b, g.b, g.beta != 0 ? c0 : std::vector<T>(c0.size()), g.c, g.ta,
                        g.tb, g.alpha, g.beta);
  expectClose(outputs[0].template data<T>(), want, 1e-4, 1e-5, "gemm");
}

TEST(RuntimeGemm, PlainTransposedBatchedBroadcast) {
  std::vector<GemmCase> cases = {
      {{3, 5}, {5, 4}, {3, 4}, false, false, 1, 0},
      {{5, 3}, {5, 4}, {3, 4}, true, false, 1, 0},
      {{3, 5}, {4, 5}, {3, 4}, false, true, 1, 0},
      {{5, 3}, {4, 5}, {3, 4}, true, true, 1, 0},
      {{2, 3, 7, 6}, {1, 3, 6, 5}, {2, 3, 7, 5}, false, false, 1, 0},
      {{1, 3, 6, 7}, {2, 1, 5, 6}, {2, 3, 7, 5}, true, true, 1, 0},
      {{4, 33, 17}, {4, 17, 65}, {4, 33, 65}, false, false, 0.5, 2.0},
      {{1, 64, 40}, {3, 40, 48}, {3, 64, 48}, false, false, -1.5, 0.25},
  };
  unsigned seed = 1;
  for (const GemmCase &g : cases) {
    SCOPED_TRACE("a rank " + std::to_string(g.a.size()) + " seed " + std::to_string(seed));
    checkGemm<float>(g, seed);
    checkGemm<double>(g, seed);
    // Small batched products on several threads: one batch per thread (f32), 2 or 3 threads
    // for 2 to 6 batches.
    for (int threads : {2, 3})
      checkGemm<float>(g, seed + 5, threads);
    seed += 10;
  }
}

/// A GEMM whose a or b is a program constant (a weight: packed once, kept by the step), run
/// twice with other inputs; every batch matrix of the constant, broadcast or not, must be used.
void checkGemmConstant(const GemmCase &g, bool aConstant, unsigned seed, int threads) {
  auto a = randomFloats(numElements(g.a), seed), b = randomFloats(numElements(g.b), seed + 1);
  ArtifactBuilder art;
  uint32_t ba = aConstant ? art.constant(fb::DType_F32, g.a, a.data()) : art.input(fb::DType_F32, g.a);
  uint32_t bb = aConstant ? art.input(fb::DType_F32, g.b) : art.constant(fb::DType_F32, g.b, b.data());
  uint32_t out = art.output(fb::DType_F32, g.c);
  art.gemm(ba, bb, out, g.ta, g.tb, g.alpha, 0);
  auto bytes = art.finish();
  tccrt::Program program = tccrt::Program::fromBuffer(bytes.data(), bytes.size(), threads);
  for (unsigned run = 0; run < 2; ++run) {
    std::vector<float> &variable = aConstant ? b : a;
    variable = randomFloats(variable.size(), seed + 10 + run);
    std::vector<tccrt::Tensor> in = program.makeInputs();
    std::memcpy(in[0].data(), variable.data(), in[0].bytes());
    auto outputs = program.run(in);
    auto want = naiveGemm(a, g.a, b, g.b, std::vector<float>(numElements(g.c)), g.c, g.ta, g.tb,
                          g.alpha, 0.0);
    expectClose(outputs[0].data<float>(), want, 1e-4, 1e-5,
                "run " + std::to_string(run) + (aConstant ? ", a constant" : ", b constant"));
  }
}

TEST(RuntimeGemm, ConstantOperandsArePackedOnceAndReused) {
  std::vector<GemmCase> cases = {
      {{1, 300}, {300, 70}, {1, 70}, false, false, 1, 0},        // batch-1 GEMV-like
      {{40, 33}, {50, 33}, {40, 50}, false, true, 1, 0},         // Gemm with transB weights
      {{2, 3, 20, 17}, {1, 3, 17, 40}, {2, 3, 20, 40}, false, false, 0.5, 0}, // batched, broadcast
      {{3, 1, 9, 20}, {3, 4, 20, 30}, {3, 4, 9, 30}, false, false, 1, 0},
      {{30, 64}, {64, 600}, {30, 600}, false, false, 1, 0},
  };
  unsigned seed = 100;
  for (const GemmCase &g : cases)
    for (bool aConstant : {false, true})
      for (int threads : {1, 2}) {
        SCOPED_TRACE("c rank " + std::to_string(g.c.size()) + " seed " + std::to_string(seed));
        checkGemmConstant(g, aConstant, seed++, threads);
      }
}

TEST(RuntimeGemm, EmptyMatricesInManyBatchesReturnAtOnce) {
  // 2^40 batches of 0 x 0 matrices (the artifact fuzzer's: the batch loop ran for hours).
  const int64_t big = int64_t(1) << 20;
  ArtifactBuilder art;
  uint32_t a = art.input(fb::DType_F32, {big, big, 0, 3}), b = art.input(fb::DType_F32, {big, big, 3, 0});
  uint32_t c = art.output(fb::DType_F32, {big, big, 0, 0});
  art.gemm(a, b, c, false, false, 1, 0);
  auto outputs = runArtifact(art.finish(), {nullptr, nullptr});
  EXPECT_EQ(outputs[0].numElements(), 0u);
}

TEST(RuntimeGemm, StepsReadingOneConstantShareItsPackedForm) {
  // Three GEMVs by one constant weight (as an unrolled recurrence has): correct outputs, and the
  // host allocator holds one packed copy of the weight, not three.
  const int64_t k = 300, n = 700;
  auto w = randomFloats(k * n, 7);
  ArtifactBuilder art;
  uint32_t bw = art.constant(fb::DType_F32, {k, n}, w.data());
  std::vector<uint32_t> xs, ys;
  for (int i = 0; i < 3; ++i) {
    xs.push_back(art.input(fb::DType_F32, {1, k}));
    ys.push_back(art.output(fb::DType_F32, {1, n}));
    art.gemm(xs.back(), bw, ys.back(), false, false, 1, 0);
  }
  auto bytes = art.finish();
  tccrt_allocator_stats before{}, after{};
  tccrt_allocator_get_stats(&before);
  tccrt::Program program = tccrt::Program::fromBuffer(bytes.data(), bytes.size(), 1);
  std::vector<std::vector<float>> inputs;
  std::vector<tccrt::Tensor> in = program.makeInputs();
  for (int i = 0; i < 3; ++i) {
    inputs.push_back(randomFloats(k, 20 + i));
    std::memcpy(in[i].data(), inputs[i].data(), in[i].bytes());
  }
  auto outputs = program.run(in);
  tccrt_allocator_get_stats(&after);
  for (int i = 0; i < 3; ++i)
    expectClose(outputs[i].data<float>(),
                naiveGemm(inputs[i], {1, k}, w, {k, n}, std::vector<float>(n), {1, n}, false,
                          false, 1.0, 0.0),
                1e-4, 1e-5, "gemv " + std::to_string(i));
  uint64_t packed = (uint64_t)(k * n * sizeof(float));
  uint64_t held = after.allocated_bytes - before.allocated_bytes;
  EXPECT_GE(held, packed);
  EXPECT_LT(held, 2 * packed) << "each step packed its own copy of the weight";
}

/// c = act(alpha a b + beta c + bias) on the CPU: the sgemm applies the bias and ReLU to each
/// tile it stores (f32).
void checkGemmEpilogue(const GemmCase &g, bool withBias, bool relu, unsigned seed, int threads) {
  int64_t n = g.c.back();
  auto a = randomFloats(numElements(g.a), seed), b = randomFloats(numElements(g.b), seed + 1),
       c0 = randomFloats(numElements(g.c), seed + 2), bias = randomFloats(n, seed + 3);
  ArtifactBuilder art;
  uint32_t ba = art.input(fb::DType_F32, g.a), bb = art.input(fb::DType_F32, g.b);
  uint32_t bc0 = art.input(fb::DType_F32, g.c), bbias = art.input(fb::DType_F32, {n});
  uint32_t out = art.output(fb::DType_F32, g.c);
  if (g.beta != 0)
    art.copy(bc0, out);
  art.gemm(ba, bb, out, g.ta, g.tb, g.alpha, g.beta, withBias ? (int64_t)bbias : -1,
           relu ? fb::GemmActivation_Relu : fb::GemmActivation_None);
  auto outputs = runArtifact(art.finish(), {a.data(), b.data(), c0.data(), bias.data()}, threads);
  auto want = naiveGemm(a, g.a, b, g.b, g.beta != 0 ? c0 : std::vector<float>(c0.size()), g.c,
                        g.ta, g.tb, g.alpha, g.beta);
  for (size_t i = 0; i < want.size(); ++i) {
    if (withBias)
      want[i] += bias[i % n];
    if (relu)
      want[i] = std::max(want[i], 0.0f);
  }
  expectClose(outputs[0].data<float>(), want, 1e-4, 1e-5,
              std::string("epilogue") + (withBias ? " bias" : "") + (relu ? " relu" : ""));
}

TEST(RuntimeGemm, BiasAndReluEpiloguesAppliedInTheTiles) {
  std::vector<GemmCase> cases = {
      {{3, 5}, {4, 5}, {3, 4}, false, true, 1, 0},
      {{1, 700}, {700, 45}, {1, 45}, false, false, 1, 0},           // k past one block, GEMV
      {{2, 37, 50}, {1, 50, 70}, {2, 37, 70}, false, false, 0.5, 1.5}, // batched, alpha, beta
      {{40, 0}, {0, 33}, {40, 33}, false, false, 1, 2},             // K = 0
  };
  unsigned seed = 300;
  for (const GemmCase &g : cases)
    for (int mode = 1; mode < 4; ++mode) {
      SCOPED_TRACE("c rank " + std::to_string(g.c.size()) + " seed " + std::to_string(seed));
      checkGemmEpilogue(g, mode & 1, mode & 2, seed, 1 + mode % 2);
      seed += 5;
    }
}

TEST(RuntimeGemm, EmptyInnerDimGivesBetaTimesC) {
  checkGemm<float>({{2, 0}, {0, 3}, {2, 3}, false, false, 1, 0}, 5);
  checkGemm<float>({{2, 0}, {0, 3}, {2, 3}, false, false, 1, 3}, 6);
  checkGemm<double>({{0, 4}, {4, 3}, {0, 3}, false, false, 1, 0}, 7);
}

//===--- Convolution ------------------------------------------------------===//

struct ConvCase {
  Shape x, w;
  Shape strides, padLow, padHigh, dilations;
  int64_t groups;
  Shape lhsDilation = {}; // empty: 1 in every dim
  int64_t lhsDil(size_t d) const { return lhsDilation.empty() ? 1 : lhsDilation[d]; }
};

Shape convOutShape(const ConvCase &c) {
  Shape y = {c.x[0], c.w[0]};
  for (size_t d = 0; d + 2 < c.x.size(); ++d) {
    int64_t dilatedIn = c.x[d + 2] == 0 ? 0 : (c.x[d + 2] - 1) * c.lhsDil(d) + 1;
    int64_t padded = dilatedIn + c.padLow[d] + c.padHigh[d];
    int64_t span = (c.w[d + 2] - 1) * c.dilations[d] + 1;
    y.push_back(padded < span ? 0 : (padded - span) / c.strides[d] + 1);
  }
  return y;
}

std::vector<float> naiveConv(const ConvCase &c, const std::vector<float> &x,
                             const std::vector<float> &w, const Shape &ys) {
  size_t spatial = c.x.size() - 2;
  Shape inS(c.x.begin() + 2, c.x.end()), kS(c.w.begin() + 2, c.w.end()),
      outS(ys.begin() + 2, ys.end());
  int64_t inSize = numElements(inS), kSize = numElements(kS), outSize = numElements(outS);
  int64_t groupIn = c.x[1] / c.groups, groupOut = c.w[0] / c.groups;
  std::vector<float> y((size_t)numElements(ys));
  std::vector<int64_t> o(spatial), k(spatial);
  for (int64_t n = 0; n < c.x[0]; ++n)
    for (int64_t oc = 0; oc < c.w[0]; ++oc)
      for (int64_t op = 0; op < outSize; ++op) {
        for (int64_t d = spatial, rest = op; d-- > 0;) {
          o[d] = rest % outS[d];
          rest /= outS[d];
        }
        double acc = 0;
        int64_t g = oc / groupOut;
        for (int64_t ic = 0; ic < groupIn; ++ic)
          for (int64_t kp = 0; kp < kSize; ++kp) {
            for (int64_t d = spatial, rest = kp; d-- > 0;) {
              k[d] = rest % kS[d];
              rest /= kS[d];
            }
            int64_t at = 0;
            bool valid = true;
            for (size_t d = 0; d < spatial; ++d) {
              int64_t q = o[d] * c.strides[d] + k[d] * c.dilations[d] - c.padLow[d];
              valid = valid && q >= 0 && q % c.lhsDil(d) == 0 && q / c.lhsDil(d) < inS[d];
              at = at * inS[d] + q / c.lhsDil(d);
            }
            if (valid)
              acc += (double)x[(n * c.x[1] + g * groupIn + ic) * inSize + at] *
                     w[(oc * groupIn + ic) * kSize + kp];
          }
        y[(n * c.w[0] + oc) * outSize + op] = (float)acc;
      }
  return y;
}

/// Whether the runtime takes the Winograd path for c.
bool takesWinograd(const ConvCase &c) {
  return tcc::rt::makeConvGeometry(c.x, c.w, convOutShape(c), c.strides, c.padLow, c.padHigh,
                                   c.dilations, c.groups, c.lhsDilation)
             .winogradTile != 0;
}

/// A conv step's epilogue in a test: a constant bias, a residual input, a clamp.
struct ConvEpilogueCase {
  bool bias = false, residual = false, clamp = false;
  float lo = 0, hi = 0;
  fb::ConvActivation activation = fb::ConvActivation_None;
  float alpha = 0, beta = 0; // hard swish's gate
};

/// The epilogue on the reference output (ConvEpilogue's order).
void applyReference(const ConvEpilogueCase &e, const Shape &ys, const std::vector<float> &bias,
                    const std::vector<float> &residual, std::vector<float> &y) {
  int64_t channels = ys[1], plane = numElements(ys) / std::max<int64_t>(1, ys[0] * ys[1]);
  for (size_t i = 0; i < y.size(); ++i) {
    float v = y[i];
    if (e.bias)
      v += bias[(size_t)((int64_t)i / plane % channels)];
    if (e.residual)
      v += residual[i];
    if (e.clamp)
      v = std::min(std::max(v, e.lo), e.hi);
    if (e.activation == fb::ConvActivation_Silu)
      v = (float)((double)v / (1.0 + std::exp(-(double)v)));
    else if (e.activation == fb::ConvActivation_HardSwish)
      v = v * std::min(std::max(v * e.alpha + e.beta, 0.0f), 1.0f);
    y[i] = v;
  }
}

/// [N, C, S...] data as [N, S..., C] (toLast), or back.
std::vector<float> relayout(const std::vector<float> &v, const Shape &channelsFirst, bool toLast) {
  int64_t n = channelsFirst[0], c = channelsFirst[1], s = numElements(channelsFirst) / std::max<int64_t>(1, n * c);
  std::vector<float> out(v.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < s; ++p) {
        size_t first = (size_t)((i * c + ch) * s + p), last = (size_t)((i * s + p) * c + ch);
        if (toLast)
          out[last] = v[first];
        else
          out[first] = v[last];
      }
  return out;
}

/// weightIsInput: the weight is a program input (transformed on every run) rather than a
/// constant (transformed once, cached); such programs run twice, the second time with other
/// weights. `epilogue`: the step's (none by default). channelsLast: the step's input, output
/// (and residual) are [N, S..., C].
void checkConv(const ConvCase &c, unsigned seed, int threads = 1, bool weightIsInput = false,
               const ConvEpilogueCase &epilogue = {}, bool channelsLast = false) {
  Shape ys = convOutShape(c);
  auto x = randomFloats(numElements(c.x), seed), w = randomFloats(numElements(c.w), seed + 1);
  auto bias = randomFloats(c.w[0], seed + 3), residual = randomFloats(numElements(ys), seed + 4);
  auto layout = [&](const Shape &s) {
    if (!channelsLast)
      return s;
    Shape v{s[0]};
    v.insert(v.end(), s.begin() + 2, s.end());
    v.push_back(s[1]);
    return v;
  };
  ArtifactBuilder art;
  uint32_t bx = art.input(fb::DType_F32, layout(c.x));
  uint32_t bw = weightIsInput ? art.input(fb::DType_F32, c.w)
                              : art.constant(fb::DType_F32, c.w, w.data());
  uint32_t br = epilogue.residual ? art.input(fb::DType_F32, layout(ys)) : ArtifactBuilder::kNone;
  uint32_t bb = epilogue.bias ? art.constant(fb::DType_F32, {c.w[0]}, bias.data())
                              : ArtifactBuilder::kNone;
  uint32_t by = art.output(fb::DType_F32, layout(ys));
  art.conv(bx, bw, by, c.strides, c.padLow, c.padHigh, c.dilations, c.groups, c.lhsDilation);
  if (epilogue.bias || epilogue.residual || epilogue.clamp)
    art.convEpilogue(bb, br, epilogue.clamp, epilogue.lo, epilogue.hi);
  art.convActivation(epilogue.activation, epilogue.alpha, epilogue.beta);
  art.steps.back().channelsLast = channelsLast;
  auto artifact = art.finish();
  auto reference = [&](const std::vector<float> &weights) {
    std::vector<float> y = naiveConv(c, x, weights, ys);
    applyReference(epilogue, ys, bias, residual, y);
    return channelsLast ? relayout(y, ys, true) : y;
  };
  std::vector<float> xIn = channelsLast ? relayout(x, c.x, true) : x;
  std::vector<float> residualIn = channelsLast ? relayout(residual, ys, true) : residual;
  // Winograd F(4x4,3x3) is accurate to ~1e-5 of the output's magnitude (see Winograd.cpp), not
  // of each element: outputs near zero get an absolute tolerance of 1e-4 x the largest one.
  auto check = [&](const float *got, const std::vector<float> &want) {
    double atol = 1e-4;
    if (takesWinograd(c)) {
      double largest = 0;
      for (float v : want)
        largest = std::max(largest, (double)std::fabs(v));
      atol = std::max(atol, 1e-4 * largest);
    }
    expectClose(got, want, 1e-4, atol, "conv");
  };
  std::vector<const void *> inputs{xIn.data()};
  if (weightIsInput)
    inputs.push_back(w.data());
  if (epilogue.residual)
    inputs.push_back(residualIn.data());
  auto outputs = runArtifact(artifact, inputs, threads);
  check(outputs[0].data<float>(), reference(w));
  if (!weightIsInput)
    return;
  auto w2 = randomFloats(numElements(c.w), seed + 2);
  inputs[1] = w2.data();
  outputs = runArtifact(artifact, inputs, threads);
  check(outputs[0].data<float>(), reference(w2));
}

TEST(RuntimeConv, TwoDimensional) {
  checkConv({{2, 4, 9, 9}, {6, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}, 1);
  checkConv({{1, 3, 11, 10}, {5, 3, 3, 2}, {2, 3}, {1, 0}, {2, 1}, {2, 1}, 1}, 2);
  checkConv({{1, 3, 8, 8}, {4, 3, 5, 5}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1}, 3);
}

TEST(RuntimeConv, GroupsAndDepthwise) {
  checkConv({{2, 6, 7, 7}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2}, 4);
  checkConv({{1, 8, 9, 9}, {8, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 8}, 5);
  checkConv({{1, 4, 6, 6}, {8, 1, 3, 3}, {1, 1}, {0, 2}, {1, 0}, {2, 2}, 4}, 6);
}

TEST(RuntimeConv, DepthwisePhased) {
  // Depthwise 2-D convs (groups of one input channel) take the phased direct path
  // (Depthwise.h): strides 1, 2 and 3, pads 0/1, asymmetric and negative, channel multipliers
  // 1 and 2, widths 1..17, dilation 2, kernels 3x3 and others, batch 2, 1..3 threads.
  unsigned seed = 100;
  for (int64_t width = 1; width <= 17; ++width)
    for (int64_t stride : {1, 2})
      for (int64_t pad : {0, 1}) {
        if (width + 2 * pad < 3)
          continue;
        checkConv({{1, 3, 5 + width % 4, width}, {3, 1, 3, 3}, {stride, stride}, {pad, pad},
                   {pad, pad}, {1, 1}, 3},
                  seed++, (int)(width % 3) + 1);
      }
  std::vector<ConvCase> cases = {
      {{2, 4, 12, 11}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 4},     // batch 2
      {{2, 4, 13, 12}, {4, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 4},     // stride 2
      {{1, 3, 10, 9}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 3},      // multiplier 2
      {{2, 3, 11, 14}, {6, 1, 3, 3}, {2, 2}, {0, 1}, {1, 0}, {1, 1}, 3},     // asymmetric
      {{1, 5, 9, 10}, {5, 1, 3, 3}, {2, 1}, {1, 0}, {0, 2}, {1, 1}, 5},      // strides 2, 1
      {{1, 4, 15, 13}, {4, 1, 3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 4},     // dilation 2
      {{1, 4, 15, 16}, {8, 1, 3, 3}, {2, 2}, {1, 2}, {2, 1}, {2, 2}, 4},     // dilation 2, s2
      {{1, 4, 11, 12}, {4, 1, 3, 3}, {1, 1}, {-1, 1}, {1, -1}, {1, 1}, 4},   // negative pads
      {{1, 3, 16, 14}, {3, 1, 3, 3}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 3},     // stride 3
      {{2, 3, 12, 13}, {3, 1, 5, 5}, {2, 2}, {2, 2}, {2, 2}, {1, 1}, 3},     // 5x5
      {{1, 2, 9, 8}, {4, 1, 2, 3}, {1, 2}, {0, 1}, {1, 1}, {1, 1}, 2},       // 2x3
      {{1, 2, 6, 7}, {2, 1, 1, 1}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, 2},       // 1x1 strided
      {{2, 32, 28, 28}, {32, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 32},  // MobileNet-like
      {{1, 24, 14, 14}, {24, 1, 3, 3}, {2, 2}, {0, 1}, {0, 1}, {1, 1}, 24},  // TF "same" s2
      {{1, 2, 40, 130}, {2, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2},    // row blocks
      {{1, 2, 71, 300}, {4, 1, 3, 3}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 2},    // row blocks, s2
  };
  for (const ConvCase &c : cases)
    for (int threads : {1, 2, 3}) {
      checkConv(c, seed, threads);
      checkConv(c, seed + 1, threads, /*weightIsInput=*/true);
      seed += 2;
    }
}

TEST(RuntimeConv, DamagedChannelCountsAreRejectedWithoutOverflow) {
  // Found by fuzz-artifact: weight[1] * groups overflowed int64 before the channel check.
  try {
    tcc::rt::makeConvGeometry({1, 4, 8, 8}, {8, 3298534883329, 3, 3}, {1, 8, 6, 6}, {1, 1}, {0, 0},
                              {0, 0}, {1, 1}, 8589934592, {}, TCCRT_F32);
    FAIL() << "accepted";
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find("channel counts do not agree with groups"),
              std::string::npos) << e.what();
  }
}

TEST(RuntimeConv, NegativePads) {
  checkConv({{1, 2, 10, 9}, {3, 2, 3, 3}, {1, 1}, {-1, -2}, {-2, 1}, {1, 1}, 1}, 7);
  checkConv({{1, 2, 12}, {2, 2, 2}, {2}, {-3}, {-1}, {2}, 1}, 8);
}

TEST(RuntimeConv, OneAndThreeDimensional) {
  checkConv({{1, 3, 17}, {5, 3, 4}, {3}, {2}, {1}, {1}, 1}, 9);
  checkConv({{2, 4, 20}, {4, 2, 3}, {1}, {0}, {0}, {3}, 2}, 10);
  checkConv({{1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {0, 1, 1}, {2, 1, 1}, 1},
            11);
}

TEST(RuntimeConv, PointwiseIsAPlainGemm) {
  checkConv({{2, 8, 7, 7}, {16, 8, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1}, 12);
  checkConv({{1, 8, 5, 5}, {6, 4, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 2}, 13);
  checkConv({{1, 8, 9, 9}, {6, 8, 1, 1}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, 1}, 14); // strided
  checkConv({{1, 4, 5, 5}, {6, 4, 1, 1}, {1, 1}, {1, 0}, {0, 1}, {1, 1}, 1}, 15);  // padded
}

TEST(RuntimeConv, Winograd) {
  // 3x3 stride 1 with >= 8 channels a group and outputs >= 12x12: the Winograd F(4x4,3x3) path
  // (F(2x2,3x3) for outputs of 6x6 to 11x11).
  // Output sizes not a multiple of 4 (clipped border tiles), pads 0/1/2, asymmetric and
  // negative, groups 1 and 2, batch 2, one and several threads, weights constant or inputs.
  std::vector<ConvCase> cases = {
      {{1, 8, 16, 16}, {8, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},      // 16x16
      {{2, 16, 15, 17}, {24, 16, 3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1},   // 13x15
      {{1, 32, 14, 13}, {16, 32, 3, 3}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 1},   // 16x15
      {{2, 64, 19, 18}, {64, 64, 3, 3}, {1, 1}, {0, 2}, {1, 0}, {1, 1}, 1},   // 18x18
      {{2, 32, 21, 14}, {48, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2},   // groups 2
      {{1, 16, 18, 17}, {16, 8, 3, 3}, {1, 1}, {2, 0}, {0, 1}, {1, 1}, 2},    // 18x16
      {{1, 8, 20, 19}, {8, 8, 3, 3}, {1, 1}, {-1, 1}, {0, -2}, {1, 1}, 1},    // negative pads
      {{1, 64, 28, 28}, {64, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},   // ResNet-like
      // More input channels than one k block of the sgemm (384): V spans two blocks.
      {{1, 400, 14, 13}, {24, 400, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}, // 14x13
      // Outputs of 6 to 11: F(2x2,3x3).
      {{1, 8, 9, 9}, {8, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},        // 9x9
      {{1, 64, 7, 7}, {32, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},     // 7x7 (ResNet)
      {{2, 16, 8, 13}, {16, 8, 3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 2},     // 6x11, groups
  };
  unsigned seed = 40;
  for (const ConvCase &c : cases) {
    ASSERT_TRUE(takesWinograd(c));
    for (int threads : {1, 2, 3}) {
      checkConv(c, seed, threads);
      checkConv(c, seed + 10, threads, /*weightIsInput=*/true);
      ++seed;
    }
  }
  // Just outside the path: too few channels, stride 2, outputs below 6x6.
  EXPECT_FALSE(takesWinograd({{1, 4, 16, 16}, {8, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}));
  EXPECT_FALSE(takesWinograd({{1, 8, 32, 32}, {8, 8, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1}));
  EXPECT_FALSE(takesWinograd({{1, 8, 7, 9}, {8, 8, 3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1}));
}

TEST(RuntimeConv, EpiloguesOnEveryPath) {
  // A per-channel bias, a residual, a clamp (ReLU, ReLU6, [-0.5, 0.5]) and an activation (SiLU,
  // hard swish with its gate, after a clamp too) applied as each path
  // writes its output: im2col (one thread and column tiles over two), 1x1, Winograd F(4x4) and
  // F(2x2), depthwise, transposed (after col2im), grouped, 1-D and 3-D; weights constant or
  // inputs. Each combination against the reference convolution followed by the epilogue.
  std::vector<ConvCase> cases = {
      {{1, 3, 11, 10}, {5, 3, 3, 2}, {2, 3}, {1, 0}, {2, 1}, {2, 1}, 1},       // im2col
      {{1, 64, 30, 30}, {32, 64, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1},    // column tiles
      {{2, 8, 7, 7}, {16, 8, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1},        // 1x1
      {{1, 8, 5, 5}, {6, 4, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 2},         // 1x1 groups
      {{2, 16, 15, 17}, {24, 16, 3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1},    // Winograd 4
      {{1, 64, 7, 7}, {32, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},      // Winograd 2
      {{2, 32, 21, 14}, {48, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2},    // Winograd groups
      {{2, 32, 28, 28}, {32, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 32},    // depthwise
      {{1, 3, 10, 9}, {6, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 3},        // depthwise x2
      {{2, 6, 7, 5}, {5, 6, 4, 4}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 1, {2, 2}}, // transposed
      {{1, 3, 17}, {5, 3, 4}, {3}, {2}, {1}, {1}, 1},                           // 1-D
      {{1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {0, 1, 1}, {2, 1, 1}, 1}, // 3-D
  };
  std::vector<ConvEpilogueCase> epilogues = {
      {true, false, true, 0.0f, INFINITY},   // bias + ReLU
      {true, true, true, 0.0f, 6.0f},        // bias + residual + ReLU6
      {false, true, false},                  // residual alone
      {true, false, true, -0.5f, 0.5f},      // bias + clamp
      {true, false, false, 0, 0, fb::ConvActivation_Silu},                      // bias + SiLU
      {true, true, false, 0, 0, fb::ConvActivation_HardSwish, 1.0f / 6, 0.5f},   // + hard swish
      {false, false, true, -1.0f, 4.0f, fb::ConvActivation_HardSwish, 0.25f, 0.25f},
  };
  unsigned seed = 500;
  for (const ConvCase &c : cases)
    for (size_t e = 0; e < epilogues.size(); ++e) {
      SCOPED_TRACE("case " + std::to_string(&c - cases.data()) + ", epilogue " +
                   std::to_string(e));
      checkConv(c, seed, 1 + (int)(e % 2), /*weightIsInput=*/e == 3 || e == 6, epilogues[e]);
      seed += 5;
    }
}

TEST(RuntimeConv, ChannelsLast) {
  // [N, S..., C] input and output: 1x1 (one GEMM with the positions as rows; batch 2, 7x7
  // maps with more channels than a panel), depthwise (strides 1 and 2, pads, dilation, 5x5,
  // batch 2; channels in vectors of 16, 8 and 4 and alone; groups of 1 to 8 columns at once;
  // long interior runs, 5x5 and stride 2 among them; 7x7; rows of 1 and 2), dense with at most
  // kDenseDirectMaxReduction values per output (direct) and the rest through channels-first
  // copies (Winograd, groups, 1-D, transposed); each with and without an epilogue, one and two
  // threads, weights constant or inputs.
  std::vector<ConvCase> cases = {
      {{2, 8, 7, 7}, {16, 8, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1},        // 1x1
      {{1, 96, 7, 7}, {70, 96, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1},      // 1x1 7x7
      {{1, 5, 11, 9}, {3, 5, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1},        // 1x1 odd
      {{2, 32, 12, 11}, {32, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 32},    // depthwise
      {{1, 24, 14, 14}, {24, 1, 3, 3}, {2, 2}, {0, 1}, {0, 1}, {1, 1}, 24},    // s2 "same"
      {{1, 17, 13, 15}, {17, 1, 3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 17},    // dilation 2
      {{2, 20, 9, 10}, {20, 1, 5, 5}, {2, 1}, {2, 2}, {2, 1}, {1, 1}, 20},     // 5x5
      {{1, 72, 6, 7}, {72, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 72},      // 64 + 8
      {{1, 16, 5, 19}, {16, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 16},     // 4 columns
      {{1, 40, 6, 13}, {40, 1, 5, 5}, {1, 2}, {2, 2}, {2, 1}, {1, 1}, 40},     // 2 columns
      {{1, 7, 5, 14}, {7, 1, 3, 3}, {1, 1}, {0, 2}, {1, 0}, {1, 2}, 7},        // 4 + 3
      {{1, 33, 6, 11}, {33, 1, 3, 3}, {1, 2}, {1, 1}, {1, 1}, {2, 1}, 33},     // 32 + 1
      {{1, 48, 4, 9}, {48, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 48},      // 4 + 2 + 1 cols
      // Long interior runs (kernels 3 and 5 wide, strides 1 and 2).
      {{1, 20, 4, 30}, {20, 1, 3, 3}, {1, 2}, {1, 1}, {1, 1}, {1, 1}, 20},     // s2, 16 + 4 ch
      {{1, 13, 3, 26}, {13, 1, 5, 5}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 13},     // 8 + 4 + 1 ch
      {{2, 64, 5, 21}, {64, 1, 5, 5}, {2, 2}, {2, 2}, {2, 2}, {1, 1}, 64},     // 5x5 s2
      // 5x5 and 7x7 (each input vector loaded once per filter row): groups of 8 columns and
      // fewer, reaching into the padding, asymmetric pads.
      {{1, 31, 5, 15}, {31, 1, 7, 7}, {1, 1}, {3, 3}, {3, 3}, {1, 1}, 31},     // 16+8+4+3 ch
      {{1, 24, 4, 7}, {24, 1, 5, 5}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 24},      // 7 columns
      {{1, 16, 6, 20}, {16, 1, 5, 5}, {1, 1}, {0, 1}, {0, 3}, {1, 1}, 16},     // pads 1 / 3
      // Rows of 1 and 2 columns (every square filter's group sizes from 1 to 8 are above).
      {{1, 32, 3, 2}, {32, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 32},      // 2 columns
      {{1, 16, 2, 1}, {16, 1, 5, 5}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 16},      // 1 column
      // Dense with small filters, direct: output channels in blocks of 64, 32 and 16 (and a
      // tail), 24, 4 and 1 columns at once, strides, dilation, negative pads, batch 2.
      {{1, 3, 11, 10}, {5, 3, 3, 2}, {2, 3}, {1, 0}, {2, 1}, {2, 1}, 1},       // 5 channels
      {{1, 3, 32, 60}, {32, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1},      // MobileNet stem
      {{2, 3, 23, 61}, {64, 3, 7, 7}, {2, 2}, {3, 3}, {3, 3}, {1, 1}, 1},      // ResNet stem
      {{1, 5, 9, 55}, {40, 5, 3, 3}, {1, 1}, {1, 1}, {0, 2}, {2, 1}, 1},       // 32 + 8
      {{1, 2, 6, 50}, {16, 2, 5, 5}, {1, 1}, {-1, 2}, {1, 2}, {1, 1}, 1},      // 16, neg. pad
      {{1, 16, 15, 17}, {24, 16, 3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1},    // 144 values
      {{1, 24, 15, 17}, {24, 24, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},    // 216: Winograd
      {{1, 6, 7, 7}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2},         // groups
      {{1, 4, 6, 6}, {8, 1, 3, 3}, {1, 1}, {0, 2}, {1, 0}, {2, 2}, 4},         // multiplier 2
      {{1, 3, 17}, {5, 3, 4}, {3}, {2}, {1}, {1}, 1},                           // 1-D
      {{1, 8, 5, 6}, {4, 8, 2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, {2, 2}},  // transposed
  };
  ConvEpilogueCase all{true, true, true, 0.0f, 6.0f};
  ConvEpilogueCase silu{true, false, false, 0, 0, fb::ConvActivation_Silu};
  ConvEpilogueCase hardSwish{true, true, false, 0, 0, fb::ConvActivation_HardSwish, 1.0f / 6, 0.5f};
  unsigned seed = 900;
  for (const ConvCase &c : cases)
    for (int variant = 0; variant < 5; ++variant) {
      SCOPED_TRACE("case " + std::to_string(&c - cases.data()) + ", variant " +
                   std::to_string(variant));
      checkConv(c, seed, 1 + variant % 2, /*weightIsInput=*/variant == 2,
                variant == 0   ? ConvEpilogueCase{}
                : variant == 3 ? silu
                : variant == 4 ? hardSwish
                               : all,
                /*channelsLast=*/true);
      seed += 5;
    }
}

TEST(RuntimeConv, ChannelsLastActivationInRegistersIsActivateRows) {
  // The square depthwise path (AVX-512) applies SiLU and hard swish to its sums in registers:
  // bit for bit the convolution with its bias alone followed by activateRows (which the Sgemm
  // tests hold to the generated kernels' definitions). 3x3 (weights in registers), 5x5 at
  // stride 2 and 7x7; 48 channels (three vectors of 16) and 40 (16 + 16 + 8: the last vector
  // through activateRows); rows of 9, 14 and 5 columns.
  struct Case {
    Shape x, w;
    int64_t stride, pad;
  };
  const std::vector<Case> cases = {{{1, 48, 6, 9}, {48, 1, 3, 3}, 1, 1},
                                   {{2, 40, 5, 14}, {40, 1, 3, 3}, 1, 1},
                                   {{1, 48, 7, 10}, {48, 1, 5, 5}, 2, 2},
                                   {{1, 40, 4, 5}, {40, 1, 7, 7}, 1, 3}};
  unsigned seed = 70;
  for (const Case &c : cases) {
    const int64_t C = c.x[1], k = c.w[2];
    const int64_t oh = (c.x[2] + 2 * c.pad - k) / c.stride + 1;
    const int64_t ow = (c.x[3] + 2 * c.pad - k) / c.stride + 1;
    auto g = tcc::rt::makeConvGeometry(c.x, c.w, {c.x[0], C, oh, ow}, {c.stride, c.stride},
                                       {c.pad, c.pad}, {c.pad, c.pad}, {1, 1}, C);
    g.channelsLast = true;
    auto x = randomFloats(numElements(c.x), seed), w = randomFloats(numElements(c.w), seed + 1);
    auto bias = randomFloats(C, seed + 2);
    for (float &v : x)
      v *= 8.0f; // sums well past SiLU's and hard swish's bends
    for (tcc::rt::ActivationKind kind :
         {tcc::rt::ActivationKind::Silu, tcc::rt::ActivationKind::HardSwish}) {
      SCOPED_TRACE("case " + std::to_string(&c - cases.data()) + ", activation " +
                   std::to_string((int)kind));
      tcc::rt::ConvEpilogue fused;
      fused.bias = bias.data();
      fused.activation.kind = kind;
      fused.activation.alpha = 1.0f / 6;
      fused.activation.beta = 0.5f;
      tcc::rt::ConvEpilogue biasOnly;
      biasOnly.bias = bias.data();
      const size_t n = (size_t)(c.x[0] * oh * ow * C);
      std::vector<float> got(n), want(n);
      tcc::rt::runConvChannelsLast(g, x.data(), w.data(), got.data(), nullptr, 1, nullptr, false,
                                   &fused);
      tcc::rt::runConvChannelsLast(g, x.data(), w.data(), want.data(), nullptr, 1, nullptr,
                                   false, &biasOnly);
      tcc::rt::activateRows(fused.activation, want.data(), (int64_t)n / C, C, C);
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i)
        if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && ++bad <= 3)
          ADD_FAILURE() << "element " << i << ": " << got[i] << " vs " << want[i];
      EXPECT_EQ(bad, 0u);
    }
    seed += 5;
  }
}

TEST(RuntimeConv, EpilogueResidualMayBeTheOutput) {
  // A residual in the output's own bytes is read before the output is written, on every path.
  std::vector<ConvCase> cases = {
      {{1, 8, 9, 9}, {8, 8, 5, 5}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 1},     // im2col
      {{1, 8, 9, 9}, {8, 8, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1},     // 1x1
      {{1, 8, 16, 16}, {8, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},   // Winograd
      {{1, 8, 9, 9}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 8},     // depthwise
  };
  for (const ConvCase &c : cases) {
    Shape ys = convOutShape(c);
    ASSERT_EQ(ys, c.x);
    auto g = tcc::rt::makeConvGeometry(c.x, c.w, ys, c.strides, c.padLow, c.padHigh,
                                       c.dilations, c.groups);
    auto x = randomFloats(numElements(c.x), 7), w = randomFloats(numElements(c.w), 8);
    auto y = x; // the output starts as the residual
    std::vector<float> want = naiveConv(c, x, w, ys);
    for (size_t i = 0; i < want.size(); ++i)
      want[i] += x[i];
    void *ws = std::aligned_alloc(64, std::max<size_t>(64, (g.workspaceBytes + 63) / 64 * 64));
    tcc::rt::ConvEpilogue e;
    e.residual = y.data();
    tcc::rt::runConv(g, x.data(), w.data(), y.data(), static_cast<float *>(ws), 1, nullptr,
                     false, &e);
    std::free(ws);
    expectClose(y.data(), want, 1e-4, 1e-3, "conv into its residual");
  }
}

TEST(RuntimeConv, EmptyOutputs) {
  checkConv({{1, 2, 2, 2}, {3, 2, 3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1}, 16);
  checkConv({{0, 2, 4, 4}, {3, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}, 17);
}

TEST(RuntimeConv, LargeTiledAndThreaded) {
  // 576 im2col rows x 3136 columns: several workspace tiles, im2col on two threads.
  checkConv({{1, 64, 56, 56}, {32, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}, 18, 2);
  checkConv({{2, 16, 30, 31}, {8, 16, 3, 3}, {2, 1}, {1, 1}, {0, 1}, {1, 2}, 1}, 19, 2);
  // Threaded work items across images, groups and column tiles; more threads than items.
  checkConv({{3, 8, 20, 20}, {8, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 4}, 20, 3);
  checkConv({{1, 6, 5, 5}, {6, 3, 3, 3}, {1, 1}, {-1, 0}, {1, 2}, {1, 1}, 2}, 21, 8);
  checkConv({{2, 3, 9, 10, 11}, {4, 3, 3, 2, 3}, {2, 1, 3}, {1, 0, 2}, {1, 1, -1}, {1, 2, 1}, 1},
            22, 2);
  checkConv({{2, 8, 7, 7}, {16, 8, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1}, 23, 2);
}

TEST(RuntimeConv, DilatedInputIsGemmAndCol2im) {
  // Transposed convolutions as ONNX ConvTranspose lowers them (kernel flipped, input dilated
  // by the stride, padded by k - 1 - pad): 2x2 s2 (no overlap), 4x4 s2 p1 (overlapping
  // windows), 3x3 s2 with output padding, groups, depthwise upsampling, 1-D and 3-D, batches,
  // rhs dilation and stride, negative pads; 1 to 3 threads. Plus a strided conv's input
  // gradient shape (lhs dilation 2 with an uneven end) and column tiles (large maps).
  unsigned seed = 300;
  std::vector<ConvCase> cases = {
      {{1, 8, 5, 6}, {4, 8, 2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, {2, 2}},
      {{2, 6, 7, 5}, {5, 6, 4, 4}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 1, {2, 2}},
      {{1, 4, 6, 6}, {3, 4, 3, 3}, {1, 1}, {1, 1}, {2, 2}, {1, 1}, 1, {2, 2}},
      {{1, 6, 5, 4}, {8, 3, 3, 3}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 2, {2, 3}},
      {{2, 4, 6, 5}, {4, 1, 4, 4}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 4, {2, 2}},
      {{1, 3, 11}, {2, 3, 5}, {1}, {3}, {4}, {1}, 1, {3}},
      {{1, 2, 3, 4, 3}, {3, 2, 2, 3, 2}, {1, 1, 1}, {1, 2, 1}, {1, 2, 0}, {1, 1, 1}, 1, {2, 2, 2}},
      {{1, 3, 6, 7}, {4, 3, 3, 3}, {2, 1}, {2, 1}, {1, 2}, {2, 1}, 1, {2, 2}},
      {{1, 3, 6, 7}, {4, 3, 3, 3}, {1, 1}, {-1, 1}, {1, -2}, {1, 1}, 1, {3, 2}},
      {{2, 5, 9, 8}, {3, 5, 3, 3}, {1, 1}, {2, 2}, {3, 3}, {1, 1}, 1, {2, 2}},
      {{1, 8, 30, 40}, {64, 8, 4, 4}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 1, {2, 2}}, // 3 tiles
      {{1, 2, 1, 1}, {3, 2, 3, 3}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 1, {2, 2}},
  };
  for (const ConvCase &c : cases)
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE("case x" + ::testing::PrintToString(c.x) + " w" +
                   ::testing::PrintToString(c.w) + ", " + std::to_string(threads) + " threads");
      checkConv(c, seed, threads);
      checkConv(c, seed + 1, threads, /*weightIsInput=*/true);
      seed += 3;
    }
  // No input pixels: the output is all zeros.
  checkConv({{1, 2, 0, 3}, {3, 2, 3, 3}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, 1, {2, 2}}, seed);
}

//===--- Top-k ------------------------------------------------------------===//

/// The reference order: NaN above +inf; ties by lower index; smallest = the reverse order.
template <class T>
void naiveTopK(const std::vector<double> &x, const Shape &s, int64_t dim, int64_t k,
               bool largest, std::vector<T> &values, std::vector<int64_t> &indices,
               const std::vector<T> &raw) {
  int64_t outer = numElements(Shape(s.begin(), s.begin() + dim)), size = s[dim],
          inner = numElements(Shape(s.begin() + dim + 1, s.end()));
  values.assign(outer * k * inner, T());
  indices.assign(outer * k * inner, 0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> order(size);
      std::iota(order.begin(), order.end(), 0);
      auto key = [&](int64_t j) { return x[(o * size + j) * inner + i]; };
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        double va = key(a), vb = key(b);
        if (largest) {
          if (std::isnan(va) || std::isnan(vb))
            return std::isnan(va) && !std::isnan(vb);
          return va > vb;
        }
        if (std::isnan(va) || std::isnan(vb))
          return !std::isnan(va) && std::isnan(vb);
        return va < vb;
      });
      for (int64_t j = 0; j < k; ++j) {
        values[(o * k + j) * inner + i] = raw[(o * size + order[j]) * inner + i];
        indices[(o * k + j) * inner + i] = order[j];
      }
    }
}

template <class T>
void checkTopK(fb::DType dtype, const Shape &s, int64_t dim, int64_t k, bool largest,
               const std::vector<T> &raw, const std::vector<double> &asDouble) {
  Shape out = s;
  out[dim] = k;
  ArtifactBuilder art;
  uint32_t bx = art.input(dtype, s), bv = art.output(dtype, out),
           bi = art.output(fb::DType_I64, out);
  art.topk(bx, bv, bi, dim, largest);
  auto outputs = runArtifact(art.finish(), {raw.data()});
  std::vector<T> values;
  std::vector<int64_t> indices;
  naiveTopK(asDouble, s, dim, k, largest, values, indices, raw);
  SCOPED_TRACE("dtype " + std::to_string(dtype) + " dim " + std::to_string(dim) + " k " +
               std::to_string(k) + (largest ? " largest" : " smallest"));
  ASSERT_EQ(outputs[1].numElements(), indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    EXPECT_EQ(outputs[1].template data<int64_t>()[i], indices[i]) << "index " << i;
    EXPECT_EQ(std::memcmp(outputs[0].template data<T>() + i, &values[i], sizeof(T)), 0) << "value " << i;
  }
}

/// tk.pool against its definition: every output the max (NaN wins) or sum over the window's
/// in-image taps (padding contributes nothing).
void checkPool(const Shape &x, bool max, const Shape &window, const Shape &strides,
               const Shape &padLow, const Shape &padHigh, const Shape &dilations, unsigned seed,
               int threads, bool withNaN = false) {
  Shape y(4);
  for (int d = 0; d < 4; ++d) {
    int64_t padded = x[d] + padLow[d] + padHigh[d], span = (window[d] - 1) * dilations[d] + 1;
    y[d] = padded < span ? 0 : (padded - span) / strides[d] + 1;
  }
  auto in = randomFloats(numElements(x), seed);
  if (withNaN)
    in[in.size() / 3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> want((size_t)numElements(y));
  std::vector<int64_t> o(4), t(4);
  for (size_t i = 0; i < want.size(); ++i) {
    for (int d = 3, rest = (int)i; d >= 0; --d) {
      o[d] = rest % y[d];
      rest /= (int)y[d];
    }
    double acc = max ? -INFINITY : 0.0;
    bool nan = false;
    for (t[0] = 0; t[0] < window[0]; ++t[0])
      for (t[1] = 0; t[1] < window[1]; ++t[1])
        for (t[2] = 0; t[2] < window[2]; ++t[2])
          for (t[3] = 0; t[3] < window[3]; ++t[3]) {
            int64_t at = 0;
            bool inside = true;
            for (int d = 0; d < 4; ++d) {
              int64_t q = o[d] * strides[d] - padLow[d] + t[d] * dilations[d];
              inside = inside && q >= 0 && q < x[d];
              at = at * x[d] + q;
            }
            if (!inside)
              continue;
            float v = in[(size_t)at];
            nan = nan || v != v;
            acc = max ? std::max(acc, (double)v) : acc + v;
          }
    want[i] = nan ? std::numeric_limits<float>::quiet_NaN() : (float)acc;
  }
  ArtifactBuilder art;
  uint32_t bx = art.input(fb::DType_F32, x), by = art.output(fb::DType_F32, y);
  art.pool(bx, by, max, window, strides, padLow, padHigh, dilations);
  auto outputs = runArtifact(art.finish(), {in.data()}, threads);
  const float *got = outputs[0].data<float>();
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    bool ok = std::isnan(want[i]) ? std::isnan(got[i])
                                  : std::fabs(got[i] - want[i]) <= 1e-5 * (1 + std::fabs(want[i]));
    if (!ok && ++bad <= 5)
      ADD_FAILURE() << "output " << i << " is " << got[i] << ", expected " << want[i];
  }
  EXPECT_EQ(bad, 0u);
}

TEST(RuntimePool, MaxAndSumChannelsFirstAndLast) {
  // ResNet's 3x3 stride-2 pad-1 max pool, 2x2 stride 2, asymmetric pads, dilation, a window
  // larger than the image, odd sizes, sums (average pools), a NaN in a window; NCHW (pooled
  // dims 2, 3) and NHWC (1, 2); one to three threads.
  unsigned seed = 1000;
  for (int threads : {1, 3}) {
    checkPool({2, 3, 17, 16}, true, {1, 1, 3, 3}, {1, 1, 2, 2}, {0, 0, 1, 1}, {0, 0, 1, 1},
              {1, 1, 1, 1}, seed++, threads);
    checkPool({1, 4, 8, 9}, true, {1, 1, 2, 2}, {1, 1, 2, 2}, {0, 0, 0, 0}, {0, 0, 0, 1},
              {1, 1, 1, 1}, seed++, threads);
    checkPool({1, 2, 11, 10}, false, {1, 1, 3, 2}, {1, 1, 1, 3}, {0, 0, 2, 0}, {0, 0, 1, 1},
              {1, 1, 2, 1}, seed++, threads);
    checkPool({1, 2, 3, 4}, true, {1, 1, 5, 5}, {1, 1, 1, 1}, {0, 0, 2, 2}, {0, 0, 2, 2},
              {1, 1, 1, 1}, seed++, threads);
    checkPool({2, 9, 9, 5}, true, {1, 3, 3, 1}, {1, 2, 2, 1}, {0, 1, 1, 0}, {0, 1, 1, 0},
              {1, 1, 1, 1}, seed++, threads); // channels last
    checkPool({1, 6, 7, 20}, false, {1, 2, 3, 1}, {1, 2, 1, 1}, {0, 0, 1, 0}, {0, 1, 1, 0},
              {1, 1, 1, 1}, seed++, threads); // channels last, sum
    checkPool({1, 3, 12, 12}, true, {1, 1, 3, 3}, {1, 1, 2, 2}, {0, 0, 1, 1}, {0, 0, 1, 1},
              {1, 1, 1, 1}, seed++, threads, /*withNaN=*/true);
  }
}

TEST(RuntimePool, RefusesWhatItDoesNotModel) {
  auto refuse = [](const Shape &x, const Shape &y, const Shape &window, const std::string &why) {
    ArtifactBuilder art;
    uint32_t bx = art.input(fb::DType_F32, x), by = art.output(fb::DType_F32, y);
    art.pool(bx, by, true, window, {1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}, {1, 1, 1, 1});
    auto bytes = art.finish();
    try {
      tccrt::Program::fromBuffer(bytes.data(), bytes.size(), 1);
      ADD_FAILURE() << "loaded a pool step that must be refused: " << why;
    } catch (const tccrt::Error &e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refuse({1, 2, 4, 4}, {1, 2, 3, 3}, {1, 2, 2, 2}, "at most two adjacent dims");
  refuse({1, 2, 4, 4}, {1, 2, 3, 4}, {1, 1, 2, 2}, "must be f32[1, 2, 3, 3]");
}

TEST(RuntimeTopK, FloatsWithTiesAndNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Shape s = {3, 7, 4};
  std::vector<float> x(numElements(s));
  std::mt19937 rng(3);
  std::vector<float> pool = {0.5f, -1.0f, 2.0f, 2.0f, nan, inf, -inf, 0.0f, -0.0f, 3.0f};
  for (float &v : x)
    v = pool[rng() % pool.size()];
  std::vector<double> d(x.begin(), x.end());
  for (int64_t dim = 0; dim < 3; ++dim)
    for (bool largest : {true, false})
      for (int64_t k : {int64_t(0), int64_t(1), int64_t(2), s[dim]})
        checkTopK<float>(fb::DType_F32, s, dim, k, largest, x, d);
  std::vector<double> xd(d);
  checkTopK<double>(fb::DType_F64, s, 1, 5, true, xd, d);
}

TEST(RuntimeTopK, Integers) {
  Shape s = {4, 9};
  std::mt19937 rng(4);
  std::vector<int32_t> i32(36);
  std::vector<uint8_t> u8(36);
  std::vector<int64_t> i64(36);
  for (size_t i = 0; i < 36; ++i) {
    i32[i] = (int32_t)(rng() % 7) - 3;
    u8[i] = (uint8_t)(rng() % 5 + 250);
    i64[i] = (int64_t)(rng() % 5) * 1000000000000ll - 2000000000000ll;
  }
  checkTopK<int32_t>(fb::DType_I32, s, 1, 4, true, i32, std::vector<double>(i32.begin(), i32.end()));
  checkTopK<int32_t>(fb::DType_I32, s, 0, 3, false, i32, std::vector<double>(i32.begin(), i32.end()));
  checkTopK<uint8_t>(fb::DType_U8, s, 1, 9, true, u8, std::vector<double>(u8.begin(), u8.end()));
  checkTopK<int64_t>(fb::DType_I64, s, 1, 2, false, i64, std::vector<double>(i64.begin(), i64.end()));
}

TEST(RuntimeTopK, HalfAndBFloat16ComparedAsFloats) {
  // f16: 1.0 = 0x3c00, -2.0 = 0xc000, 0.5 = 0x3800, NaN = 0x7e00, +inf = 0x7c00, tiny subnormal
  // 0x0001; bf16: 1.0 = 0x3f80, -2.0 = 0xc000, 0.5 = 0x3f00, NaN = 0x7fc0, +inf = 0x7f80.
  std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x3800, 0x7e00, 0x7c00, 0x0001, 0x3c00, 0x8001};
  std::vector<double> f16d = {1.0, -2.0, 0.5, NAN, INFINITY, 5.96e-8, 1.0, -5.96e-8};
  std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x3f00, 0x7fc0, 0x7f80, 0x3f80, 0xbf00, 0x0000};
  std::vector<double> bf16d = {1.0, -2.0, 0.5, NAN, INFINITY, 1.0, -0.5, 0.0};
  for (bool largest : {true, false}) {
    checkTopK<uint16_t>(fb::DType_F16, {8}, 0, 8, largest, f16, f16d);
    checkTopK<uint16_t>(fb::DType_BF16, {2, 4}, 1, 3, largest, bf16, bf16d);
  }
}

//===--- Copies and views -------------------------------------------------===//

TEST(RuntimeCopy, ThroughArenaViews) {
  // input [4, 16] -> arena at 128 -> a view of its second half as [2, 16] -> output.
  std::vector<float> x = randomFloats(64, 20);
  ArtifactBuilder art;
  uint32_t in = art.input(fb::DType_F32, {4, 16});
  uint32_t whole = art.arena(128, fb::DType_F32, {4, 16});
  uint32_t half = art.arena(128 + 2 * 16 * 4, fb::DType_F32, {2, 16});
  uint32_t flat = art.arena(0, fb::DType_F32, {32});
  uint32_t out = art.output(fb::DType_F32, {32});
  art.copy(in, whole);
  art.copy(half, flat);
  art.copy(flat, out);
  auto outputs = runArtifact(art.finish(), {x.data()});
  EXPECT_EQ(std::memcmp(outputs[0].data<float>(), x.data() + 32, 32 * sizeof(float)), 0);
}

} // namespace

//===--- Attention --------------------------------------------------------===//

namespace {

struct AttentionCase {
  Shape q, k, v, mask, bias; // mask/bias empty: none
  double scale;
  bool causal;
  double maskedValue = -std::numeric_limits<double>::infinity();
};

/// The f32 cases of the forward and backward tests.
std::vector<AttentionCase> attentionCases() {
  return {
      // One block, then several row and key blocks (forward 56 x 512, backward 56 x 256)
      // with ragged ends.
      {{2, 3, 7, 16}, {2, 3, 9, 16}, {2, 3, 9, 8}, {}, {}, 0.25, false},
      {{1, 2, 130, 64}, {1, 2, 600, 64}, {1, 2, 600, 64}, {}, {}, 0.125, false},
      // Causal, with as many, fewer and more keys than queries.
      {{1, 2, 300, 32}, {1, 2, 300, 32}, {1, 2, 300, 32}, {}, {}, 0.2, true},
      {{1, 1, 1100, 8}, {1, 1, 1100, 8}, {1, 1, 1100, 8}, {}, {}, 0.4, true},
      {{1, 1, 70, 8}, {1, 1, 40, 8}, {1, 1, 40, 8}, {}, {}, 0.3, true},
      {{1, 1, 40, 8}, {1, 1, 333, 8}, {1, 1, 333, 24}, {}, {}, 0.3, true},
      // A padding mask [B, 1, 1, Lk], a full boolean mask with a finite fill, a bias (the
      // gradient test does not differentiate it).
      {{2, 4, 33, 16}, {2, 4, 700, 16}, {2, 4, 700, 16}, {2, 1, 1, 700}, {}, 0.25, false},
      {{2, 2, 65, 16}, {2, 2, 65, 16}, {2, 2, 65, 16}, {2, 2, 65, 65}, {}, 0.25, false, -1e9},
      {{2, 3, 20, 8}, {2, 3, 600, 8}, {2, 3, 600, 8}, {}, {1, 3, 20, 600}, 1.0, false},
      {{2, 3, 20, 8}, {2, 3, 30, 8}, {2, 3, 30, 8}, {1, 1, 20, 30}, {2, 1, 1, 30}, 0.5, true},
      // Causal with a finite fill: where the mask is false the fill replaces the triangle's
      // -inf too, so keys past the diagonal count (no block may be skipped).
      {{1, 2, 70, 8}, {1, 2, 600, 8}, {1, 2, 600, 8}, {1, 2, 70, 600}, {}, 0.5, true, -30.0},
      // Grouped-query (8 query heads over 2 key/value heads) and multi-query attention: the
      // key/value gradients sum over their query heads.
      {{2, 8, 50, 16}, {2, 2, 270, 16}, {2, 2, 270, 16}, {}, {}, 0.25, true},
      {{3, 4, 1, 32}, {3, 1, 77, 32}, {3, 1, 77, 32}, {3, 1, 1, 77}, {}, 0.17, false},
      // One key/value batch, many keys: the backward's key chunks with partial dQ on more than
      // one thread.
      {{1, 1, 90, 16}, {1, 1, 1100, 16}, {1, 1, 1100, 16}, {}, {}, 0.25, false},
      // No keys (the output is zeros), a head size of 0 (uniform probabilities).
      {{2, 3, 4, 8}, {2, 3, 0, 8}, {2, 3, 0, 5}, {}, {}, 0.5, false},
      {{1, 2, 9, 0}, {1, 2, 7, 0}, {1, 2, 7, 3}, {}, {}, 0.5, true},
      // Rank 3 (heads folded into the batch), a mask that removes whole rows (NaN rows).
      {{6, 17, 8}, {6, 19, 8}, {6, 19, 8}, {6, 17, 1}, {}, 0.5, false},
  };
}

/// Calls row(batch, kvBatch, i, p, keep) for every query row of tcc.attention: p the row's
/// probabilities softmax(scale q k^T, causal, mask, bias) in double, keep[j] false where the
/// causal triangle or the mask replaced score j.
template <class Row>
void forEachAttentionRow(const AttentionCase &c, const std::vector<float> &q,
                         const std::vector<float> &k, const std::vector<uint8_t> &mask,
                         const std::vector<float> &bias, const Row &row) {
  size_t r = c.q.size();
  int64_t lq = c.q[r - 2], d = c.q[r - 1], lk = c.k[r - 2];
  // Element of a broadcasting operand at a scores index.
  auto at = [&](const Shape &shape, const Shape &index) {
    int64_t off = 0;
    for (size_t i = 0; i < r; ++i)
      off = off * shape[i] + (shape[i] == 1 ? 0 : index[i]);
    return off;
  };
  int64_t batches = numElements(Shape(c.q.begin(), c.q.end() - 2));
  for (int64_t batch = 0; batch < batches; ++batch) {
    Shape index(r, 0);
    int64_t rest = batch, kvBatch = 0, mul = 1;
    for (size_t dim = r - 2; dim-- > 0;) {
      index[dim] = rest % c.q[dim];
      rest /= c.q[dim];
      kvBatch += index[dim] / (c.q[dim] / c.k[dim]) * mul;
      mul *= c.k[dim];
    }
    for (int64_t i = 0; i < lq; ++i) {
      std::vector<double> s((size_t)lk);
      std::vector<bool> keep((size_t)lk, true);
      double mx = -INFINITY;
      for (int64_t j = 0; j < lk; ++j) {
        double dot = 0;
        for (int64_t x = 0; x < d; ++x)
          dot += (double)q[(batch * lq + i) * d + x] * k[(kvBatch * lk + j) * d + x];
        s[j] = c.scale * dot;
        index[r - 2] = i;
        index[r - 1] = j;
        if (c.causal && j > i) {
          s[j] = -INFINITY;
          keep[j] = false;
        }
        if (!c.mask.empty() && !mask[at(c.mask, index)]) {
          s[j] = c.maskedValue;
          keep[j] = false;
        }
        if (!c.bias.empty())
          s[j] += bias[at(c.bias, index)];
        mx = std::max(mx, s[j]);
      }
      double shift = std::isfinite(mx) ? mx : 0, sum = 0;
      for (double &e : s)
        sum += (e = std::exp(e - shift));
      for (double &e : s)
        e /= sum;
      row(batch, kvBatch, i, s, keep);
    }
  }
}

/// tcc.attention in double, one row at a time.
std::vector<float> naiveAttention(const AttentionCase &c, const std::vector<float> &q,
                                  const std::vector<float> &k, const std::vector<float> &v,
                                  const std::vector<uint8_t> &mask, const std::vector<float> &bias) {
  size_t r = c.q.size();
  int64_t lq = c.q[r - 2], lk = c.k[r - 2], dv = c.v[r - 1];
  std::vector<float> out((size_t)(numElements(Shape(c.q.begin(), c.q.end() - 2)) * lq * dv));
  forEachAttentionRow(c, q, k, mask, bias,
                      [&](int64_t batch, int64_t kvBatch, int64_t i, const std::vector<double> &p,
                          const std::vector<bool> &) {
                        for (int64_t x = 0; x < dv; ++x) {
                          double acc = 0;
                          for (int64_t j = 0; j < lk; ++j)
                            acc += p[j] * v[(kvBatch * lk + j) * dv + x];
                          out[(batch * lq + i) * dv + x] = (float)acc;
                        }
                      });
  return out;
}

/// Rounds x to bf16 in place (the reference then sees the rounded values); returns the bits.
std::vector<uint16_t> roundToBf16(std::vector<float> &x) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    bits[i] = tcc::rt::floatToBfloat16(x[i]);
    x[i] = tcc::rt::bfloat16ToFloat(bits[i]);
  }
  return bits;
}

/// Random q, k, v and bias for a case, and its mask (a quarter false).
struct AttentionInputs {
  std::vector<float> q, k, v, bias;
  std::vector<uint8_t> mask;
};
AttentionInputs randomAttentionInputs(const AttentionCase &c, unsigned seed) {
  AttentionInputs in{randomFloats(numElements(c.q), seed),
                     randomFloats(numElements(c.k), seed + 1),
                     randomFloats(numElements(c.v), seed + 2),
                     randomFloats(c.bias.empty() ? 0 : numElements(c.bias), seed + 3),
                     std::vector<uint8_t>(c.mask.empty() ? 0 : numElements(c.mask))};
  std::mt19937 rng(seed);
  for (uint8_t &m : in.mask)
    m = rng() % 4 != 0;
  return in;
}

/// Adds the case's mask and bias, where it has them, as the artifact's next inputs (their data
/// to `inputs`); returns their buffers, kNone when absent.
std::pair<uint32_t, uint32_t> addMaskAndBias(ArtifactBuilder &art, const AttentionCase &c,
                                             const AttentionInputs &in,
                                             std::vector<const void *> &inputs) {
  uint32_t mask = ArtifactBuilder::kNone, bias = ArtifactBuilder::kNone;
  if (!c.mask.empty()) {
    mask = art.input(fb::DType_Bool, c.mask);
    inputs.push_back(in.mask.data());
  }
  if (!c.bias.empty()) {
    bias = art.input(fb::DType_F32, c.bias);
    inputs.push_back(in.bias.data());
  }
  return {mask, bias};
}

/// Compares a step's output (f32, or bf16 bits when `bf16`) with the reference `want` within
/// (rtol, atol); a row whose every score is masked to -inf is NaN in both.
void expectAttentionOutput(const tccrt::Tensor &out, std::vector<float> want, bool bf16,
                           double rtol, double atol, const char *what) {
  std::vector<float> got(want.size());
  for (size_t i = 0; i < want.size(); ++i)
    got[i] = bf16 ? tcc::rt::bfloat16ToFloat(out.data<uint16_t>()[i]) : out.data<float>()[i];
  for (size_t i = 0; i < want.size(); ++i)
    if (std::isnan(want[i]) && std::isnan(got[i]))
      want[i] = got[i] = 0;
  expectClose(got.data(), want, rtol, atol, what);
}

/// The kernel against the definition in double. In bf16 (`bf16`: q, k, v and the output bf16,
/// the bias f32) on the bf16-rounded operands: the probabilities are rounded to bf16 before the
/// second product, so about 2^-8 relative.
void checkAttention(const AttentionCase &c, unsigned seed, int threads, bool bf16 = false) {
  AttentionInputs in = randomAttentionInputs(c, seed);
  std::vector<float> &q = in.q, &k = in.k, &v = in.v, &bias = in.bias;
  std::vector<uint8_t> &mask = in.mask;
  std::vector<uint16_t> qb, kb, vb;
  std::vector<const void *> inputs = {q.data(), k.data(), v.data()};
  if (bf16) {
    qb = roundToBf16(q), kb = roundToBf16(k), vb = roundToBf16(v);
    inputs = {qb.data(), kb.data(), vb.data()};
  }
  const fb::DType type = bf16 ? fb::DType_BF16 : fb::DType_F32;
  Shape out(c.q.begin(), c.q.end() - 1);
  out.push_back(c.v.back());
  ArtifactBuilder art;
  uint32_t bq = art.input(type, c.q), bk = art.input(type, c.k), bv = art.input(type, c.v);
  auto [bm, bb] = addMaskAndBias(art, c, in, inputs);
  uint32_t bo = art.output(type, out);
  art.attention(bq, bk, bv, bm, bb, bo, c.scale, c.causal, c.maskedValue);
  auto outputs = runArtifact(art.finish(), inputs, threads);
  auto want = naiveAttention(c, q, k, v, mask, bias);
  if (bf16)
    expectAttentionOutput(outputs[0], want, true, 2e-2, 1e-2, "bf16 attention");
  else
    expectAttentionOutput(outputs[0], want, false, 2e-5, 2e-6, "attention");
}

} // namespace

namespace {

/// tk.attention_grad against the gradient of the definition, in double: dV = p^T dO,
/// dS = p (dP - rowsum(p dP)) where the score is kept, dQ = scale dS k, dK = scale dS^T q, the
/// key/value gradients summed over their query heads. The step reads the forward's output as
/// the reference computed it. In bf16 (`bf16`: q, k, v, the output, dO and the gradients; the
/// bias f32) on the rounded operands, p and dS rounded to bf16 for the products: about 2^-8.
void checkAttentionGrad(const AttentionCase &c, unsigned seed, int threads, bool bf16 = false) {
  AttentionInputs in = randomAttentionInputs(c, seed);
  std::vector<float> &q = in.q, &k = in.k, &v = in.v, &bias = in.bias;
  std::vector<uint8_t> &mask = in.mask;
  std::vector<uint16_t> q16, k16, v16;
  if (bf16)
    q16 = roundToBf16(q), k16 = roundToBf16(k), v16 = roundToBf16(v);
  Shape outShape(c.q.begin(), c.q.end() - 1);
  outShape.push_back(c.v.back());
  auto out = naiveAttention(c, q, k, v, mask, bias);
  auto gradOut = randomFloats(out.size(), seed + 4);
  std::vector<uint16_t> out16, gradOut16;
  if (bf16)
    out16 = roundToBf16(out), gradOut16 = roundToBf16(gradOut);
  size_t r = c.q.size();
  int64_t lq = c.q[r - 2], d = c.q[r - 1], lk = c.k[r - 2], dv = c.v[r - 1];
  std::vector<double> dq(q.size()), dk(k.size()), dvv(v.size());
  forEachAttentionRow(c, q, k, mask, bias,
                      [&](int64_t batch, int64_t kvBatch, int64_t i, const std::vector<double> &p,
                          const std::vector<bool> &keep) {
                        const float *g = gradOut.data() + (batch * lq + i) * dv;
                        std::vector<double> dp((size_t)lk);
                        double dot = 0;
                        for (int64_t j = 0; j < lk; ++j) {
                          for (int64_t x = 0; x < dv; ++x) {
                            dp[j] += (double)g[x] * v[(kvBatch * lk + j) * dv + x];
                            dvv[(kvBatch * lk + j) * dv + x] += p[j] * g[x];
                          }
                          dot += p[j] * dp[j];
                        }
                        for (int64_t j = 0; j < lk; ++j) {
                          double ds = keep[j] ? c.scale * p[j] * (dp[j] - dot) : 0;
                          for (int64_t x = 0; x < d; ++x) {
                            dq[(batch * lq + i) * d + x] += ds * k[(kvBatch * lk + j) * d + x];
                            dk[(kvBatch * lk + j) * d + x] += ds * q[(batch * lq + i) * d + x];
                          }
                        }
                      });
  ArtifactBuilder art;
  const fb::DType type = bf16 ? fb::DType_BF16 : fb::DType_F32;
  uint32_t bq = art.input(type, c.q), bk = art.input(type, c.k), bv = art.input(type, c.v),
           bo = art.input(type, outShape), bg = art.input(type, outShape);
  std::vector<const void *> inputs = {q.data(), k.data(), v.data(), out.data(), gradOut.data()};
  if (bf16)
    inputs = {q16.data(), k16.data(), v16.data(), out16.data(), gradOut16.data()};
  auto [bm, bb] = addMaskAndBias(art, c, in, inputs);
  uint32_t gq = art.output(type, c.q), gk = art.output(type, c.k), gv = art.output(type, c.v);
  art.attentionGrad(bq, bk, bv, bo, bg, gq, gk, gv, bm, bb, c.scale, c.causal, c.maskedValue);
  auto outputs = runArtifact(art.finish(), inputs, threads);
  const char *names[] = {"dq", "dk", "dv"};
  const std::vector<double> *wants[] = {&dq, &dk, &dvv};
  for (int o = 0; o < 3; ++o) {
    std::vector<float> want(wants[o]->begin(), wants[o]->end());
    if (bf16)
      expectAttentionOutput(outputs[o], want, true, 3e-2, 1e-2, names[o]);
    else
      expectAttentionOutput(outputs[o], want, false, 1e-4, 1e-5, names[o]);
  }
}

} // namespace

TEST(RuntimeAttention, GradientMatchesTheDefinitionAcrossBlocksMasksAndGroups) {
  std::vector<AttentionCase> cases = attentionCases();
  unsigned seed = 200;
  for (const AttentionCase &c : cases)
    for (int threads : {1, 3}) {
      SCOPED_TRACE("gradient case " + std::to_string(seed) + " threads " + std::to_string(threads));
      checkAttentionGrad(c, seed, threads);
      ++seed;
    }
}

TEST(RuntimeAttention, Bf16GradientMatchesTheDefinitionWithinRounding) {
  std::vector<AttentionCase> cases = {
      {{1, 2, 130, 64}, {1, 2, 600, 64}, {1, 2, 600, 64}, {}, {}, 0.125, false},
      {{1, 2, 300, 32}, {1, 2, 300, 32}, {1, 2, 300, 32}, {}, {}, 0.2, true},
      {{2, 4, 33, 16}, {2, 4, 700, 16}, {2, 4, 700, 16}, {2, 1, 1, 700}, {}, 0.25, false},
      {{2, 3, 20, 8}, {2, 3, 30, 8}, {2, 3, 30, 8}, {1, 1, 20, 30}, {2, 1, 1, 30}, 0.5, true},
      {{2, 8, 50, 16}, {2, 2, 270, 16}, {2, 2, 270, 16}, {}, {}, 0.25, true},
      {{1, 1, 90, 16}, {1, 1, 1100, 16}, {1, 1, 1100, 16}, {}, {}, 0.25, false},
  };
  unsigned seed = 300;
  for (const AttentionCase &c : cases)
    for (int threads : {1, 3}) {
      SCOPED_TRACE("bf16 gradient case " + std::to_string(seed) + " threads " +
                   std::to_string(threads));
      checkAttentionGrad(c, seed, threads, /*bf16=*/true);
      ++seed;
    }
}

TEST(RuntimeAttention, Bf16MatchesTheDefinitionWithinRounding) {
  // Blocks with ragged ends, causal, a padding mask, grouped queries; the 16-bit products run
  // on whichever family the CPU has (AMX, AVX512-BF16, or converted panels).
  std::vector<AttentionCase> cases = {
      {{2, 3, 7, 16}, {2, 3, 9, 16}, {2, 3, 9, 8}, {}, {}, 0.25, false},
      {{1, 2, 130, 64}, {1, 2, 600, 64}, {1, 2, 600, 64}, {}, {}, 0.125, false},
      {{1, 2, 300, 32}, {1, 2, 300, 32}, {1, 2, 300, 32}, {}, {}, 0.2, true},
      {{2, 4, 33, 16}, {2, 4, 700, 16}, {2, 4, 700, 16}, {2, 1, 1, 700}, {}, 0.25, false},
      {{2, 8, 50, 16}, {2, 2, 270, 16}, {2, 2, 270, 16}, {}, {}, 0.25, true},
      {{2, 3, 4, 8}, {2, 3, 0, 8}, {2, 3, 0, 5}, {}, {}, 0.5, false},
      // An f32 bias (BERT's additive padding mask, a relative-position bias) on the f32 scores.
      {{2, 3, 20, 8}, {2, 3, 600, 8}, {2, 3, 600, 8}, {}, {1, 3, 20, 600}, 1.0, false},
      {{2, 3, 20, 8}, {2, 3, 30, 8}, {2, 3, 30, 8}, {1, 1, 20, 30}, {2, 1, 1, 30}, 0.5, true},
  };
  unsigned seed = 90;
  for (const AttentionCase &c : cases)
    for (int threads : {1, 3}) {
      SCOPED_TRACE("bf16 case " + std::to_string(seed) + " threads " + std::to_string(threads));
      checkAttention(c, seed, threads, /*bf16=*/true);
      ++seed;
    }
}

TEST(RuntimeAttention, MatchesTheDefinitionAcrossBlocksMasksAndGroups) {
  std::vector<AttentionCase> cases = attentionCases();
  unsigned seed = 10;
  for (const AttentionCase &c : cases)
    for (int threads : {1, 3}) {
      SCOPED_TRACE("case " + std::to_string(seed) + " threads " + std::to_string(threads));
      checkAttention(c, seed, threads);
      ++seed;
    }
}
