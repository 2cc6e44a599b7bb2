//===- KernelsIndexing.cpp - gather and scatter ---------------------------===//

#include "KernelUtils.h"

namespace tcc::kernels {
using namespace detail;

namespace {

/// Reads the index tensor and checks every value against `dimSize`.
std::vector<int64_t> readCheckedIndices(const std::string &op, const Tensor &indices,
                                        int64_t dimSize) {
  std::vector<int64_t> values = readIndices(op, indices);
  for (int64_t v : values)
    checkIndex(op, v, dimSize);
  return values;
}

/// For the element-wise variants: indices has x's rank and fits inside x off `axis`.
void checkElementsIndexShape(const std::string &op, const Tensor &x, const Tensor &indices,
                             int64_t axis) {
  if (indices.rank() != x.rank())
    fail(op, "indices " + indices.typeString() + " must have the rank of " + x.typeString());
  checkAxis(op, axis, x.rank());
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis && indices.dim(d) > x.dim(d))
      fail(op, "indices " + indices.typeString() + " exceed " + x.typeString() + " in dim " +
                   std::to_string(d));
}

/// Calls f(xOffset, indicesOffset) for every element of `indices`, where xOffset is the
/// element's position in x with its `axis` coordinate replaced by the index value.
template <class F>
void forEachElementIndex(const Tensor &x, const Tensor &indices, int64_t axis,
                         const std::vector<int64_t> &values, F &&f) {
  Shape xStrides = stridesOf(x.shape());
  int64_t axisStride = xStrides[axis];
  xStrides[axis] = 0;
  forEachOffsetPair(indices.shape(), xStrides, 0, stridesOf(indices.shape()), 0,
                    [&](int64_t xOffset, int64_t i) { f(xOffset + values[i] * axisStride, i); });
}

/// Offset into a row-major tensor of index tuple `tuple[0..count)` over its leading dims.
int64_t tupleOffset(const std::string &op, const int64_t *tuple, int64_t count, const Shape &shape,
                    const Shape &strides, int64_t firstDim) {
  int64_t offset = 0;
  for (int64_t j = 0; j < count; ++j)
    offset += checkIndex(op, tuple[j], shape[firstDim + j]) * strides[firstDim + j];
  return offset;
}

/// Copy of x with updates combined in. `enumerate(g)` must call g(xOffset, updateOffset, count)
/// for each run of `count` consecutive elements to update, in order.
template <class Enumerate>
Tensor scatterApply(const std::string &op, const Tensor &x, const Tensor &updates,
                    ScatterReduction reduction, Enumerate &&enumerate) {
  Tensor result = x.clone();
  visitDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    const T *src = updates.data<T>();
    T *dst = result.data<T>();
    if (reduction == ScatterReduction::None) {
      enumerate([&](int64_t d, int64_t s, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          dst[d + i] = src[s + i];
      });
      return;
    }
    // Combine in the compute type and round once at the end.
    std::vector<C> acc(dst, dst + result.numElements());
    auto combineWith = [&](auto combine) {
      enumerate([&](int64_t d, int64_t s, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          acc[d + i] = combine(acc[d + i], (C)src[s + i]);
      });
    };
    switch (reduction) {
    case ScatterReduction::Max: combineWith(maxValues<C>); break;
    case ScatterReduction::Min: combineWith(minValues<C>); break;
    default:
      if constexpr (isBoolType<T>)
        unsupportedDType(op + " with an Add/Mul reduction", x.dtype());
      else if (reduction == ScatterReduction::Add)
        combineWith(addValues<C>);
      else
        combineWith(mulValues<C>);
    }
    for (size_t i = 0; i < acc.size(); ++i)
      dst[i] = T(acc[i]);
  });
  return result;
}

void checkScatterOperands(const std::string &op, const Tensor &x, const Tensor &indices,
                          const Tensor &updates) {
  checkDefined(op, x);
  checkDefined(op, indices);
  checkDefined(op, updates);
  checkSameDType(op, x, updates);
}

} // namespace

Tensor gather(const Tensor &x, const Tensor &indices, int64_t axis) {
  const char *op = "gather";
  checkDefined(op, x);
  checkAxis(op, axis, x.rank());
  std::vector<int64_t> values = readCheckedIndices(op, indices, x.dim(axis));
  Shape resultShape(x.shape().begin(), x.shape().begin() + axis);
  resultShape.insert(resultShape.end(), indices.shape().begin(), indices.shape().end());
  resultShape.insert(resultShape.end(), x.shape().begin() + axis + 1, x.shape().end());
  Tensor result(x.dtype(), resultShape);
  size_t chunk = (size_t)product(x.shape(), axis + 1, x.rank()) * dtypeSize(x.dtype());
  int64_t outer = product(x.shape(), 0, axis);
  const auto *src = static_cast<const uint8_t *>(x.raw());
  auto *dst = static_cast<uint8_t *>(result.raw());
  for (int64_t o = 0; o < outer && chunk; ++o)
    for (int64_t v : values) {
      std::memcpy(dst, src + (o * x.dim(axis) + v) * chunk, chunk);
      dst += chunk;
    }
  return result;
}

Tensor gatherElements(const Tensor &x, const Tensor &indices, int64_t axis) {
  const char *op = "gatherElements";
  checkDefined(op, x);
  checkDefined(op, indices);
  checkElementsIndexShape(op, x, indices, axis);
  std::vector<int64_t> values = readCheckedIndices(op, indices, x.dim(axis));
  Tensor result(x.dtype(), indices.shape());
  visitElementSize(dtypeSize(x.dtype()), [&](auto tag) {
    using U = decltype(tag);
    const U *src = static_cast<const U *>(x.raw());
    U *dst = static_cast<U *>(result.raw());
    forEachElementIndex(x, indices, axis, values, [&](int64_t s, int64_t i) { dst[i] = src[s]; });
  });
  return result;
}

Tensor gatherND(const Tensor &x, const Tensor &indices, int64_t batchDims) {
  const char *op = "gatherND";
  checkDefined(op, x);
  std::vector<int64_t> values = readIndices(op, indices);
  int64_t q = indices.rank(), r = x.rank(), b = batchDims;
  if (q < 1 || r < 1)
    fail(op, "operands must have rank >= 1");
  if (b < 0 || b >= std::min(q, r))
    fail(op, "batchDims " + std::to_string(b) + " out of range");
  for (int64_t d = 0; d < b; ++d)
    if (indices.dim(d) != x.dim(d))
      fail(op, "batch dims of " + indices.typeString() + " and " + x.typeString() + " differ");
  int64_t k = indices.dim(q - 1);
  if (k < 1 || k > r - b)
    fail(op, "index tuple length " + std::to_string(k) + " out of range [1, " +
                 std::to_string(r - b) + "]");
  Shape resultShape(indices.shape().begin(), indices.shape().end() - 1);
  resultShape.insert(resultShape.end(), x.shape().begin() + b + k, x.shape().end());
  Tensor result(x.dtype(), resultShape);

  Shape xStrides = stridesOf(x.shape());
  int64_t batches = product(x.shape(), 0, b);
  int64_t tuplesPerBatch = product(indices.shape(), b, q - 1);
  int64_t batchSize = product(x.shape(), b, r);
  size_t elementSize = dtypeSize(x.dtype());
  size_t chunk = (size_t)product(x.shape(), b + k, r) * elementSize;
  const auto *src = static_cast<const uint8_t *>(x.raw());
  auto *dst = static_cast<uint8_t *>(result.raw());
  for (int64_t batch = 0; batch < batches; ++batch)
    for (int64_t t = 0; t < tuplesPerBatch; ++t) {
      const int64_t *tuple = values.data() + (batch * tuplesPerBatch + t) * k;
      int64_t offset = batch * batchSize + tupleOffset(op, tuple, k, x.shape(), xStrides, b);
      if (chunk)
        std::memcpy(dst, src + offset * elementSize, chunk);
      dst += chunk;
    }
  return result;
}

Tensor scatterElements(const Tensor &x, const Tensor &indices, const Tensor &updates, int64_t axis,
                       ScatterReduction reduction) {
  const char *op = "scatterElements";
  checkScatterOperands(op, x, indices, updates);
  checkElementsIndexShape(op, x, indices, axis);
  if (updates.shape() != indices.shape())
    fail(op, "updates " + updates.typeString() + " must have the shape of the indices " +
                 indices.typeString());
  std::vector<int64_t> values = readCheckedIndices(op, indices, x.dim(axis));
  return scatterApply(op, x, updates, reduction, [&](auto apply) {
    forEachElementIndex(x, indices, axis, values, [&](int64_t d, int64_t i) { apply(d, i, 1); });
  });
}

Tensor scatterND(const Tensor &x, const Tensor &indices, const Tensor &updates,
                 ScatterReduction reduction) {
  const char *op = "scatterND";
  checkScatterOperands(op, x, indices, updates);
  std::vector<int64_t> values = readIndices(op, indices);
  int64_t q = indices.rank(), r = x.rank();
  if (q < 1)
    fail(op, "indices must have rank >= 1");
  int64_t k = indices.dim(q - 1);
  if (k > r)
    fail(op, "index tuple length " + std::to_string(k) + " exceeds the rank of " + x.typeString());
  Shape expected(indices.shape().begin(), indices.shape().end() - 1);
  expected.insert(expected.end(), x.shape().begin() + k, x.shape().end());
  if (updates.shape() != expected)
    fail(op, "updates " + updates.typeString() + " must have shape " + shapeToString(expected));
  Shape xStrides = stridesOf(x.shape());
  int64_t tuples = product(indices.shape(), 0, q - 1);
  int64_t chunk = product(x.shape(), k, r);
  std::vector<int64_t> offsets(tuples);
  for (int64_t t = 0; t < tuples; ++t)
    offsets[t] = tupleOffset(op, values.data() + t * k, k, x.shape(), xStrides, 0);
  return scatterApply(op, x, updates, reduction, [&](auto apply) {
    for (int64_t t = 0; t < tuples; ++t)
      apply(offsets[t], t * chunk, chunk);
  });
}

} // namespace tcc::kernels
