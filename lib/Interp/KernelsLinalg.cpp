//===- KernelsLinalg.cpp - matmul, conv, reduceWindow ---------------------===//

#include "KernelUtils.h"

#include "tcc/Support/AttentionShapes.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tcc::kernels {
using namespace detail;

namespace {

/// Converts all elements of x to the accumulator type A.
template <class T, class A> std::vector<A> toAccumulator(const Tensor &x) {
  const T *in = x.data<T>();
  std::vector<A> values((size_t)x.numElements());
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = (A)(ComputeType<T>)in[i];
  return values;
}

/// C[M,N] = A[M,K] * B[K,N] on accumulator values.
template <class A> void matmulBlock(const A *a, const A *b, A *c, int64_t m, int64_t k, int64_t n) {
  std::fill(c, c + m * n, A(0));
  for (int64_t i = 0; i < m; ++i) {
    A *row = c + i * n;
    for (int64_t p = 0; p < k; ++p) {
      A scale = a[i * k + p];
      const A *bRow = b + p * n;
      for (int64_t j = 0; j < n; ++j)
        row[j] += scale * bRow[j];
    }
  }
}

// ---- Windows (conv and reduceWindow) ---------------------------------------------------------

/// Where each (kernel position, output position) pair of a window op reads along one dim.
struct WindowDim {
  int64_t outSize = 0;
  int64_t kernelSize = 0;
  /// source[k * outSize + o]: the input index, or -1 for padding or a dilation hole.
  std::vector<int64_t> source;
};

/// The input is dilated by lhsDilation, padded by padLow/padHigh (possibly negative), then
/// windowed with rhsDilation and stride.
WindowDim makeWindowDim(int64_t inSize, int64_t kernel, int64_t stride, int64_t padLow,
                        int64_t padHigh, int64_t lhsDilation, int64_t rhsDilation) {
  WindowDim dim;
  int64_t dilatedIn = inSize == 0 ? 0 : (inSize - 1) * lhsDilation + 1;
  int64_t padded = dilatedIn + padLow + padHigh;
  int64_t effectiveKernel = (kernel - 1) * rhsDilation + 1;
  dim.outSize = padded < effectiveKernel ? 0 : (padded - effectiveKernel) / stride + 1;
  dim.kernelSize = kernel;
  dim.source.resize(dim.outSize * kernel);
  for (int64_t k = 0; k < kernel; ++k)
    for (int64_t o = 0; o < dim.outSize; ++o) {
      int64_t q = o * stride + k * rhsDilation - padLow; // position in the dilated input
      bool valid = q >= 0 && q < dilatedIn && q % lhsDilation == 0;
      dim.source[k * dim.outSize + o] = valid ? q / lhsDilation : -1;
    }
  return dim;
}

/// The outputs of one kernel position along the innermost dim. When `affine`, exactly the
/// outputs [begin, end) are valid and output o reads first + (o - begin) * step.
struct InnerRun {
  bool affine = false;
  int64_t begin = 0, end = 0, first = 0, step = 0;
};

InnerRun analyzeInnerRun(const int64_t *source, int64_t n) {
  InnerRun run;
  while (run.begin < n && source[run.begin] < 0)
    ++run.begin;
  run.end = n;
  while (run.end > run.begin && source[run.end - 1] < 0)
    --run.end;
  run.first = run.begin < n ? source[run.begin] : 0;
  run.step = run.end - run.begin > 1 ? source[run.begin + 1] - source[run.begin] : 1;
  run.affine = true;
  for (int64_t o = run.begin; o < run.end && run.affine; ++o)
    run.affine = source[o] == run.first + (o - run.begin) * run.step;
  return run;
}

/// Calls f(o, s) for every valid output o of one innermost row, reading input index s.
template <class F> void forEachInRow(const InnerRun &run, const int64_t *source, int64_t n, F &&f) {
  if (run.affine && run.step == 1) {
    for (int64_t o = run.begin; o < run.end; ++o)
      f(o, run.first + (o - run.begin));
  } else if (run.affine) {
    for (int64_t o = run.begin, s = run.first; o < run.end; ++o, s += run.step)
      f(o, s);
  } else {
    for (int64_t o = 0; o < n; ++o)
      if (source[o] >= 0)
        f(o, source[o]);
  }
}

/// Window geometry over R >= 1 windowed dims, with the innermost dim's runs precomputed.
struct WindowPlan {
  std::vector<WindowDim> dims;
  std::vector<InnerRun> innerRuns; // per kernel position of the innermost dim
  Shape outShape, kernelShape, inStrides;

  int64_t innerOut() const { return dims.back().outSize; }
  const int64_t *innerSource(int64_t k) const { return dims.back().source.data() + k * innerOut(); }
};

WindowPlan makePlan(std::vector<WindowDim> dims, const Shape &inShape) {
  WindowPlan plan;
  plan.dims = std::move(dims);
  for (const WindowDim &d : plan.dims) {
    plan.outShape.push_back(d.outSize);
    plan.kernelShape.push_back(d.kernelSize);
  }
  plan.inStrides = stridesOf(inShape);
  for (int64_t k = 0; k < plan.dims.back().kernelSize; ++k)
    plan.innerRuns.push_back(analyzeInnerRun(plan.innerSource(k), plan.innerOut()));
  return plan;
}

/// For one kernel position, calls f(outIndex, inOffset) for every output element that reads
/// a real input element, where both are linear over the windowed dims.
template <class F>
void forEachWindowTap(const WindowPlan &plan, const std::vector<int64_t> &kernelPos, F &&f) {
  size_t last = plan.dims.size() - 1;
  int64_t rowLength = plan.innerOut();
  int64_t k = kernelPos[last];
  const InnerRun &run = plan.innerRuns[k];
  const int64_t *source = plan.innerSource(k);
  Shape rows(plan.outShape.begin(), plan.outShape.begin() + last);
  int64_t row = 0;
  forEachIndex(rows, [&](const std::vector<int64_t> &index) {
    int64_t offset = 0;
    bool valid = true;
    for (size_t d = 0; d < last && valid; ++d) {
      const WindowDim &dim = plan.dims[d];
      int64_t s = dim.source[kernelPos[d] * dim.outSize + index[d]];
      valid = s >= 0;
      offset += s * plan.inStrides[d];
    }
    if (valid) {
      int64_t outBase = row * rowLength;
      forEachInRow(run, source, rowLength,
                   [&](int64_t o, int64_t s) { f(outBase + o, offset + s); });
    }
    ++row;
  });
}

void checkWindowParam(const std::string &op, const char *what, const std::vector<int64_t> &values,
                      int64_t count, int64_t minimum) {
  checkCount(op, what, values.size(), count);
  for (int64_t v : values)
    if (v < minimum)
      fail(op, std::string(what) + " must be >= " + std::to_string(minimum) + ", got " +
                   std::to_string(v));
}

Shape concatShapes(Shape a, const Shape &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

} // namespace

Tensor matmul(const Tensor &lhs, const Tensor &rhs) {
  const char *op = "matmul";
  checkDefined(op, lhs);
  checkDefined(op, rhs);
  checkSameDType(op, lhs, rhs);
  int64_t rank = lhs.rank();
  bool valid = rank >= 2 && rhs.rank() == rank &&
               std::equal(lhs.shape().begin(), lhs.shape().end() - 2, rhs.shape().begin()) &&
               lhs.dim(rank - 1) == rhs.dim(rank - 2);
  if (!valid)
    fail(op, "incompatible operands " + lhs.typeString() + " and " + rhs.typeString());
  int64_t m = lhs.dim(rank - 2), k = lhs.dim(rank - 1), n = rhs.dim(rank - 1);
  int64_t batches = product(lhs.shape(), 0, rank - 2);
  Shape resultShape = lhs.shape();
  resultShape[rank - 1] = n;
  Tensor result(lhs.dtype(), resultShape);
  visitDType(lhs.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isBoolType<T>) {
      unsupportedDType(op, lhs.dtype());
    } else {
      using A = AccType<T>;
      std::vector<A> a = toAccumulator<T, A>(lhs), b = toAccumulator<T, A>(rhs);
      std::vector<A> c((size_t)(m * n));
      T *out = result.data<T>();
      for (int64_t batch = 0; batch < batches; ++batch) {
        matmulBlock(a.data() + batch * m * k, b.data() + batch * k * n, c.data(), m, k, n);
        for (int64_t i = 0; i < m * n; ++i)
          out[batch * m * n + i] = T(c[i]);
      }
    }
  });
  return result;
}

namespace {

/// Checks tcc.attention's operands and calls row(T{}, batch, kvBatch, i, p, keep) for each
/// query row, in q's element type T: p the row's probabilities (accumulator type), keep[j]
/// false where the causal triangle or the mask replaced score j. Returns the result's shape.
template <class Row>
Shape visitAttentionRows(const char *op, const Tensor &q, const Tensor &k, const Tensor &v,
                         const Tensor &mask, const Tensor &bias, double scale, bool causal,
                         double maskedValue, const Row &row) {
  checkDefined(op, q);
  checkDefined(op, k);
  checkDefined(op, v);
  checkSameDType(op, q, k);
  checkSameDType(op, q, v);
  // tcc.attention's shape rules (one statement of them: tcc/Support/AttentionShapes.h).
  Shape resultShape;
  std::string error = attentionShapeError(q.shape(), k.shape(), v.shape(),
                                          mask.defined() ? &mask.shape() : nullptr,
                                          bias.defined() ? &bias.shape() : nullptr, resultShape);
  if (!error.empty())
    fail(op, error);
  int64_t r = q.rank();
  int64_t lq = q.dim(r - 2), d = q.dim(r - 1), lk = k.dim(r - 2);
  // Strides over the scores' index space (0 where broadcast; all 0 where there is none).
  auto broadcastStrides = [&](const Tensor &t) {
    return t.defined() ? attentionBroadcastStrides(t.shape()) : std::vector<int64_t>(r, 0);
  };
  std::vector<int64_t> maskStrides = broadcastStrides(mask), biasStrides = broadcastStrides(bias);
  if (mask.defined() && mask.dtype() != DType::Bool)
    fail(op, "mask must be bool");
  // The bias has q's type, or is f32 for 16-bit q (tcc.attention).
  const bool f32Bias = bias.defined() && bias.dtype() == DType::F32 && q.dtype() != DType::F32 &&
                       dtypeSize(q.dtype()) == 2;
  if (bias.defined() && !f32Bias)
    checkSameDType(op, q, bias);
  int64_t batches = product(q.shape(), 0, r - 2);
  visitDType(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!isFloatType<T>) {
      unsupportedDType(op, q.dtype());
    } else {
      using A = AccType<T>;
      const T *qd = q.data<T>(), *kd = k.data<T>();
      const T *bd = bias.defined() && !f32Bias ? bias.data<T>() : nullptr;
      const float *bf = f32Bias ? bias.data<float>() : nullptr;
      const bool *md = mask.defined() ? mask.data<bool>() : nullptr;
      std::vector<A> s((size_t)lk);
      std::vector<bool> keep((size_t)lk);
      for (int64_t batch = 0; batch < batches; ++batch) {
        // The key/value batch of this query batch (grouped: i / (B_d / B'_d) per dim).
        int64_t kvBatch = 0, rest = batch;
        std::vector<int64_t> bi(r - 2);
        for (int64_t dim = r - 3; dim >= 0; --dim) {
          bi[dim] = rest % q.dim(dim);
          rest /= q.dim(dim);
        }
        for (int64_t dim = 0; dim < r - 2; ++dim)
          kvBatch = kvBatch * k.dim(dim) + bi[dim] / (q.dim(dim) / k.dim(dim));
        const T *kb = kd + kvBatch * lk * d;
        int64_t maskBase = 0, biasBase = 0;
        for (int64_t dim = 0; dim < r - 2; ++dim) {
          maskBase += bi[dim] * maskStrides[dim];
          biasBase += bi[dim] * biasStrides[dim];
        }
        for (int64_t i = 0; i < lq; ++i) {
          const T *qi = qd + (batch * lq + i) * d;
          A mx = -std::numeric_limits<A>::infinity();
          for (int64_t j = 0; j < lk; ++j) {
            A dot = 0;
            for (int64_t c = 0; c < d; ++c)
              dot += A(qi[c]) * A(kb[j * d + c]);
            A x = A(scale) * dot;
            keep[j] = true;
            if (causal && j > i) {
              x = -std::numeric_limits<A>::infinity();
              keep[j] = false;
            }
            if (md && !md[maskBase + i * maskStrides[r - 2] + j * maskStrides[r - 1]]) {
              x = A(maskedValue);
              keep[j] = false;
            }
            if (bd)
              x += A(bd[biasBase + i * biasStrides[r - 2] + j * biasStrides[r - 1]]);
            if (bf)
              x += A(bf[biasBase + i * biasStrides[r - 2] + j * biasStrides[r - 1]]);
            s[j] = x;
            mx = std::max(mx, x);
          }
          A shift = std::isfinite(mx) ? mx : A(0), sum = 0;
          for (int64_t j = 0; j < lk; ++j)
            sum += (s[j] = std::exp(s[j] - shift));
          for (int64_t j = 0; j < lk; ++j)
            s[j] /= sum;
          row(T{}, batch, kvBatch, i, s, keep);
        }
      }
    }
  });
  return resultShape;
}

} // namespace

Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &mask,
                 const Tensor &bias, double scale, bool causal, double maskedValue) {
  int64_t r = q.rank();
  int64_t lq = q.dim(r - 2), dv = v.dim(r - 1), lk = k.dim(r - 2);
  Tensor result;
  Shape shape = visitAttentionRows(
      "attention", q, k, v, mask, bias, scale, causal, maskedValue,
      [&](auto tag, int64_t batch, int64_t kvBatch, int64_t i, const auto &p,
          const std::vector<bool> &) {
        using T = decltype(tag);
        using A = AccType<T>;
        if (!result.defined()) {
          Shape out(q.shape().begin(), q.shape().end() - 1);
          out.push_back(dv);
          result = Tensor(q.dtype(), out);
        }
        const T *vb = v.data<T>() + kvBatch * lk * dv;
        for (int64_t c = 0; c < dv; ++c) {
          A acc = 0;
          for (int64_t j = 0; j < lk; ++j)
            acc += p[j] * A(vb[j * dv + c]);
          result.data<T>()[(batch * lq + i) * dv + c] = T(acc);
        }
      });
  return result.defined() ? result : Tensor(q.dtype(), shape);
}

std::vector<Tensor> attentionGrad(const Tensor &q, const Tensor &k, const Tensor &v,
                                  const Tensor &output, const Tensor &grad, const Tensor &mask,
                                  const Tensor &bias, double scale, bool causal,
                                  double maskedValue) {
  const char *op = "attention_grad";
  checkDefined(op, output);
  checkDefined(op, grad);
  checkSameDType(op, q, output);
  checkSameDType(op, q, grad);
  int64_t r = q.rank();
  int64_t lq = q.dim(r - 2), d = q.dim(r - 1), lk = k.dim(r - 2), dv = v.dim(r - 1);
  std::vector<Tensor> grads = {Tensor(q.dtype(), q.shape()), Tensor(k.dtype(), k.shape()),
                               Tensor(v.dtype(), v.shape())};
  std::vector<std::vector<double>> sums = {std::vector<double>((size_t)q.numElements()),
                                           std::vector<double>((size_t)k.numElements()),
                                           std::vector<double>((size_t)v.numElements())};
  Shape shape = visitAttentionRows(
      op, q, k, v, mask, bias, scale, causal, maskedValue,
      [&](auto tag, int64_t batch, int64_t kvBatch, int64_t i, const auto &p,
          const std::vector<bool> &keep) {
        using T = decltype(tag);
        const T *g = grad.data<T>() + (batch * lq + i) * dv;
        const T *o = output.data<T>() + (batch * lq + i) * dv;
        const T *qi = q.data<T>() + (batch * lq + i) * d;
        const T *kb = k.data<T>() + kvBatch * lk * d, *vb = v.data<T>() + kvBatch * lk * dv;
        // rowsum(grad * output): the row's sum of p dP.
        double dot = 0;
        for (int64_t c = 0; c < dv; ++c)
          dot += double(g[c]) * double(o[c]);
        for (int64_t j = 0; j < lk; ++j) {
          double dp = 0;
          for (int64_t c = 0; c < dv; ++c) {
            dp += double(g[c]) * double(vb[j * dv + c]);
            sums[2][(kvBatch * lk + j) * dv + c] += double(p[j]) * double(g[c]);
          }
          double ds = keep[j] ? scale * double(p[j]) * (dp - dot) : 0.0;
          for (int64_t c = 0; c < d; ++c) {
            sums[0][(batch * lq + i) * d + c] += ds * double(kb[j * d + c]);
            sums[1][(kvBatch * lk + j) * d + c] += ds * double(qi[c]);
          }
        }
      });
  if (output.shape() != shape || grad.shape() != shape)
    fail(op, "output and grad must have the attention's result shape");
  for (int o = 0; o < 3; ++o)
    visitDType(q.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (isFloatType<T>)
        for (size_t i = 0; i < sums[o].size(); ++i)
          grads[o].data<T>()[i] = T(sums[o][i]);
    });
  return grads;
}

Tensor conv(const Tensor &input, const Tensor &weight, const std::vector<int64_t> &strides,
            const std::vector<int64_t> &padLow, const std::vector<int64_t> &padHigh,
            const std::vector<int64_t> &lhsDilation, const std::vector<int64_t> &rhsDilation,
            int64_t groups) {
  const char *op = "conv";
  checkDefined(op, input);
  checkDefined(op, weight);
  checkSameDType(op, input, weight);
  if (input.rank() < 2 || weight.rank() != input.rank())
    fail(op, "expected input [N, C, S...] and weight [O, C/groups, K...] of equal rank, got " +
                 input.typeString() + " and " + weight.typeString());
  int64_t spatial = input.rank() - 2;
  if (spatial == 0) // no spatial dims: the same as one spatial dim of size 1
    return reshape(conv(reshape(input, concatShapes(input.shape(), {1})),
                        reshape(weight, concatShapes(weight.shape(), {1})), {1}, {0}, {0}, {1}, {1},
                        groups),
                   {input.dim(0), weight.dim(0)});
  checkWindowParam(op, "strides", strides, spatial, 1);
  checkWindowParam(op, "padLow", padLow, spatial, std::numeric_limits<int64_t>::min());
  checkWindowParam(op, "padHigh", padHigh, spatial, std::numeric_limits<int64_t>::min());
  checkWindowParam(op, "lhsDilation", lhsDilation, spatial, 1);
  checkWindowParam(op, "rhsDilation", rhsDilation, spatial, 1);
  int64_t batch = input.dim(0), channels = input.dim(1), outChannels = weight.dim(0);
  if (groups < 1 || channels % groups || outChannels % groups || weight.dim(1) != channels / groups)
    fail(op, "channels of " + input.typeString() + " and " + weight.typeString() +
                 " do not match " + std::to_string(groups) + " groups");

  Shape inSpatialShape(input.shape().begin() + 2, input.shape().end());
  std::vector<WindowDim> dims;
  for (int64_t d = 0; d < spatial; ++d) {
    if (weight.dim(d + 2) < 1)
      fail(op, "kernel dims must be >= 1, got " + weight.typeString());
    dims.push_back(makeWindowDim(inSpatialShape[d], weight.dim(d + 2), strides[d], padLow[d],
                                 padHigh[d], lhsDilation[d], rhsDilation[d]));
  }
  WindowPlan plan = makePlan(std::move(dims), inSpatialShape);
  Tensor result(input.dtype(), concatShapes({batch, outChannels}, plan.outShape));
  int64_t inSize = numElements(inSpatialShape), outSize = numElements(plan.outShape);
  int64_t kernelSize = numElements(plan.kernelShape);
  int64_t groupIn = channels / groups, groupOut = outChannels / groups;

  visitDType(input.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isBoolType<T>) {
      unsupportedDType(op, input.dtype());
    } else {
      using A = AccType<T>;
      std::vector<A> in = toAccumulator<T, A>(input), w = toAccumulator<T, A>(weight);
      std::vector<A> acc((size_t)outSize);
      T *out = result.data<T>();
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t oc = 0; oc < outChannels; ++oc) {
          std::fill(acc.begin(), acc.end(), A(0));
          int64_t group = oc / groupOut;
          for (int64_t ic = 0; ic < groupIn; ++ic) {
            const A *inBase = in.data() + (n * channels + group * groupIn + ic) * inSize;
            const A *wBase = w.data() + (oc * groupIn + ic) * kernelSize;
            int64_t tap = 0;
            forEachIndex(plan.kernelShape, [&](const std::vector<int64_t> &kernelPos) {
              A scale = wBase[tap++];
              forEachWindowTap(plan, kernelPos,
                               [&](int64_t o, int64_t s) { acc[o] += scale * inBase[s]; });
            });
          }
          T *dst = out + (n * outChannels + oc) * outSize;
          for (int64_t i = 0; i < outSize; ++i)
            dst[i] = T(acc[i]);
        }
    }
  });
  return result;
}

Tensor reduceWindow(ReduceKind kind, const Tensor &x, const std::vector<int64_t> &window,
                    const std::vector<int64_t> &strides, const std::vector<int64_t> &padLow,
                    const std::vector<int64_t> &padHigh, const std::vector<int64_t> &dilations) {
  const char *op = "reduceWindow";
  checkDefined(op, x);
  int64_t rank = x.rank();
  if (rank == 0) // a single element, reduced with the identity
    return reduceWindow(kind, x.reshaped({1}), {1}, {1}, {0}, {0}, {1}).reshaped({});
  checkWindowParam(op, "window", window, rank, 1);
  checkWindowParam(op, "strides", strides, rank, 1);
  checkWindowParam(op, "padLow", padLow, rank, std::numeric_limits<int64_t>::min());
  checkWindowParam(op, "padHigh", padHigh, rank, std::numeric_limits<int64_t>::min());
  checkWindowParam(op, "dilations", dilations, rank, 1);
  std::vector<WindowDim> dims;
  for (int64_t d = 0; d < rank; ++d)
    dims.push_back(
        makeWindowDim(x.dim(d), window[d], strides[d], padLow[d], padHigh[d], 1, dilations[d]));
  WindowPlan plan = makePlan(std::move(dims), x.shape());

  return visitReduction(op, kind, x.dtype(), [&](auto kindTag, auto tag) -> Tensor {
    using T = decltype(tag);
    using C = ComputeType<T>;
    using R = Reducer<decltype(kindTag)::value, C>;
    std::vector<C> acc((size_t)numElements(plan.outShape), R::identity());
    const T *in = x.data<T>();
    forEachIndex(plan.kernelShape, [&](const std::vector<int64_t> &windowPos) {
      forEachWindowTap(plan, windowPos,
                       [&](int64_t o, int64_t s) { acc[o] = R::combine(acc[o], (C)in[s]); });
    });
    Tensor result(x.dtype(), plan.outShape);
    T *out = result.data<T>();
    for (size_t i = 0; i < acc.size(); ++i)
      out[i] = T(acc[i]);
    return result;
  });
}

} // namespace tcc::kernels
