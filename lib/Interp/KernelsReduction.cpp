//===- KernelsReduction.cpp - reduce, argReduce, cumsum, topk -------------===//

#include "KernelUtils.h"
#include "tcc/Support/TopKOrder.h"

#include <algorithm>
#include <numeric>

namespace tcc::kernels {
using namespace detail;

namespace {

/// A tensor viewed as [outer, size, inner] around dimension `dim`.
struct AxisView {
  int64_t outer, size, inner;
};

AxisView viewAround(const Tensor &x, int64_t dim) {
  return {product(x.shape(), 0, dim), x.dim(dim), product(x.shape(), dim + 1, x.rank())};
}

Shape withoutDim(const Shape &shape, int64_t dim) {
  Shape result = shape;
  result.erase(result.begin() + dim);
  return result;
}

/// Strict "a beats b" for argmax/argmin: NaN beats everything, in both directions.
template <class C> bool moreExtreme(C a, C b, bool largest) {
  if (isNaN(a) || isNaN(b))
    return isNaN(a) && !isNaN(b);
  return largest ? b < a : a < b;
}

} // namespace

Tensor reduce(ReduceKind kind, const Tensor &x, const std::vector<int64_t> &dims) {
  const char *op = "reduce";
  checkDefined(op, x);
  checkSortedDims(op, dims, x.rank());
  std::vector<bool> reduced(x.rank(), false);
  for (int64_t d : dims)
    reduced[d] = true;
  Shape resultShape;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (!reduced[d])
      resultShape.push_back(x.dim(d));
  // Stride of each x dim in the result; 0 for reduced dims, so they all land on one element.
  Shape resultStrides = stridesOf(resultShape);
  Shape accStrides(x.rank(), 0);
  for (int64_t d = 0, r = 0; d < x.rank(); ++d)
    if (!reduced[d])
      accStrides[d] = resultStrides[r++];

  return visitReduction(op, kind, x.dtype(), [&](auto kindTag, auto tag) -> Tensor {
    using T = decltype(tag);
    using C = ComputeType<T>;
    using R = Reducer<decltype(kindTag)::value, C>;
    std::vector<C> acc((size_t)numElements(resultShape), R::identity());
    const T *in = x.data<T>();
    forEachOffsetPair(x.shape(), stridesOf(x.shape()), 0, accStrides, 0,
                      [&](int64_t s, int64_t a) { acc[a] = R::combine(acc[a], (C)in[s]); });
    Tensor result(x.dtype(), resultShape);
    T *out = result.data<T>();
    for (size_t i = 0; i < acc.size(); ++i)
      out[i] = T(acc[i]);
    return result;
  });
}

Tensor argReduce(bool isMax, const Tensor &x, int64_t dim, bool selectLastIndex) {
  const char *op = "argReduce";
  checkDefined(op, x);
  checkAxis(op, dim, x.rank());
  if (x.dim(dim) == 0)
    fail(op, "cannot reduce an empty dim");
  AxisView v = viewAround(x, dim);
  Tensor result(DType::I64, withoutDim(x.shape(), dim));
  int64_t *out = result.data<int64_t>();
  visitDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    const T *in = x.data<T>();
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t i = 0; i < v.inner; ++i) {
        const T *line = in + o * v.size * v.inner + i;
        int64_t best = 0;
        C bestValue = (C)line[0];
        for (int64_t j = 1; j < v.size; ++j) {
          C value = (C)line[j * v.inner];
          bool tie = !moreExtreme(value, bestValue, isMax) && !moreExtreme(bestValue, value, isMax);
          if (moreExtreme(value, bestValue, isMax) || (tie && selectLastIndex)) {
            best = j;
            bestValue = value;
          }
        }
        out[o * v.inner + i] = best;
      }
  });
  return result;
}

Tensor cumsum(const Tensor &x, int64_t dim, bool exclusive, bool reverse) {
  const char *op = "cumsum";
  checkDefined(op, x);
  checkAxis(op, dim, x.rank());
  AxisView v = viewAround(x, dim);
  Tensor result(x.dtype(), x.shape());
  visitDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    if constexpr (isBoolType<T>) {
      unsupportedDType(op, x.dtype());
    } else {
      const T *in = x.data<T>();
      T *out = result.data<T>();
      std::vector<C> running((size_t)v.inner);
      for (int64_t o = 0; o < v.outer; ++o) {
        std::fill(running.begin(), running.end(), C(0));
        for (int64_t step = 0; step < v.size; ++step) {
          int64_t j = reverse ? v.size - 1 - step : step;
          int64_t base = (o * v.size + j) * v.inner;
          for (int64_t i = 0; i < v.inner; ++i) {
            C before = running[i];
            running[i] = addValues(before, (C)in[base + i]);
            out[base + i] = T(exclusive ? before : running[i]);
          }
        }
      }
    }
  });
  return result;
}

std::pair<Tensor, Tensor> topk(const Tensor &x, int64_t dim, int64_t k, bool largest) {
  const char *op = "topk";
  checkDefined(op, x);
  checkAxis(op, dim, x.rank());
  if (k < 0 || k > x.dim(dim))
    fail(op, "k " + std::to_string(k) + " out of range [0, " + std::to_string(x.dim(dim)) + "]");
  AxisView v = viewAround(x, dim);
  Shape resultShape = x.shape();
  resultShape[dim] = k;
  Tensor values(x.dtype(), resultShape);
  Tensor indices(DType::I64, resultShape);
  int64_t *outIndex = indices.data<int64_t>();
  visitDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    const T *in = x.data<T>();
    T *outValue = values.data<T>();
    topKLines<C>(in, v.outer, v.size, v.inner, k, largest, [](T e) { return (C)e; }, outValue,
                 outIndex);
  });
  return {values, indices};
}

} // namespace tcc::kernels
