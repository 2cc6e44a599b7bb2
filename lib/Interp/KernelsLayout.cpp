//===- KernelsLayout.cpp - reshape, transpose, broadcast, slice, pad, ... -===//

#include "KernelUtils.h"

#include <algorithm>

namespace tcc::kernels {
using namespace detail;

namespace {

/// Clamps each start so that a window of `sizes` fits in `shape` (XLA dynamic-slice rule).
std::vector<int64_t> clampStarts(const std::string &op, const Shape &shape,
                                 const std::vector<int64_t> &starts, const Shape &sizes) {
  checkCount(op, "starts", starts.size(), (int64_t)shape.size());
  checkCount(op, "sizes", sizes.size(), (int64_t)shape.size());
  std::vector<int64_t> clamped(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (sizes[d] < 0 || sizes[d] > shape[d])
      fail(op, "window size " + std::to_string(sizes[d]) + " does not fit dim " +
                   std::to_string(shape[d]));
    clamped[d] = std::clamp<int64_t>(starts[d], 0, shape[d] - sizes[d]);
  }
  return clamped;
}

int64_t dot(const std::vector<int64_t> &a, const Shape &b) {
  int64_t sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += a[i] * b[i];
  return sum;
}

/// Source position along one padded dim of `size`, for padded position `i - low`.
int64_t padSource(int64_t i, int64_t size, PadMode mode) {
  if (i >= 0 && i < size)
    return i;
  switch (mode) {
  case PadMode::Constant: return -1;
  case PadMode::Reflect: return i < 0 ? -i : 2 * (size - 1) - i; // valid since low, high < size
  case PadMode::Edge: return std::clamp<int64_t>(i, 0, size - 1);
  case PadMode::Wrap: return ((i % size) + size) % size;
  }
  throw Error("pad: invalid mode");
}

void checkPadDim(int64_t size, int64_t low, int64_t high, PadMode mode) {
  if (low < 0 || high < 0)
    fail("pad", "padding amounts must be >= 0");
  if (mode == PadMode::Constant || (low == 0 && high == 0))
    return;
  if (size == 0)
    fail("pad", "non-constant padding of an empty dim");
  if (mode == PadMode::Reflect && (low >= size || high >= size))
    fail("pad", "reflect padding must be smaller than the dim (" + std::to_string(size) + ")");
}

/// Builds a tensor of `resultShape` where element i takes x's element at
/// (maps[0][i0], maps[1][i1], ...), or `fill` when any map entry is -1.
template <class U>
void gatherThroughMaps(const Tensor &x, Tensor &result,
                       const std::vector<std::vector<int64_t>> &maps, U fill) {
  const Shape &shape = result.shape();
  const U *src = static_cast<const U *>(x.raw());
  U *dst = static_cast<U *>(result.raw());
  if (result.numElements() == 0)
    return;
  if (shape.empty()) {
    dst[0] = src[0];
    return;
  }
  Shape srcStrides = stridesOf(x.shape());
  size_t last = shape.size() - 1;
  Shape outer(shape.begin(), shape.end() - 1);
  const std::vector<int64_t> &lastMap = maps[last];
  int64_t rowLength = shape[last];
  U *row = dst;
  forEachIndex(outer, [&](const std::vector<int64_t> &index) {
    int64_t base = 0;
    bool constantRow = false;
    for (size_t d = 0; d < last; ++d) {
      int64_t s = maps[d][index[d]];
      constantRow |= s < 0;
      base += s * srcStrides[d];
    }
    for (int64_t i = 0; i < rowLength; ++i) {
      int64_t s = lastMap[i];
      row[i] = (constantRow || s < 0) ? fill : src[base + s * srcStrides[last]];
    }
    row += rowLength;
  });
}

} // namespace

Tensor reshape(const Tensor &x, const Shape &shape) {
  checkDefined("reshape", x);
  if (numElements(shape) != x.numElements())
    fail("reshape", "cannot reshape " + x.typeString() + " to " + shapeToString(shape));
  // Tensors are immutable once built, so sharing the buffer is safe.
  return x.reshaped(shape);
}

Tensor transpose(const Tensor &x, const std::vector<int64_t> &perm) {
  checkDefined("transpose", x);
  checkCount("transpose", "perm", perm.size(), x.rank());
  std::vector<bool> seen(perm.size(), false);
  Shape xStrides = stridesOf(x.shape());
  Shape resultShape(perm.size()), srcStrides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    checkAxis("transpose", perm[i], x.rank());
    if (seen[perm[i]])
      fail("transpose", "perm is not a permutation");
    seen[perm[i]] = true;
    resultShape[i] = x.dim(perm[i]);
    srcStrides[i] = xStrides[perm[i]];
  }
  return stridedCopy(x, resultShape, srcStrides, 0);
}

Tensor broadcastInDim(const Tensor &x, const Shape &resultShape, const std::vector<int64_t> &dims) {
  const char *op = "broadcastInDim";
  checkDefined(op, x);
  checkCount(op, "dims", dims.size(), x.rank());
  checkSortedDims(op, dims, (int64_t)resultShape.size());
  numElements(resultShape); // validates the shape
  Shape xStrides = stridesOf(x.shape());
  Shape srcStrides(resultShape.size(), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t size = x.dim(i), target = resultShape[dims[i]];
    if (size != 1 && size != target)
      fail(op, "operand dim " + std::to_string(i) + " of size " + std::to_string(size) +
                   " cannot broadcast to " + std::to_string(target));
    if (size != 1)
      srcStrides[dims[i]] = xStrides[i];
  }
  return stridedCopy(x, resultShape, srcStrides, 0);
}

Tensor slice(const Tensor &x, const std::vector<int64_t> &start, const std::vector<int64_t> &limit,
             const std::vector<int64_t> &stride) {
  const char *op = "slice";
  checkDefined(op, x);
  checkCount(op, "start", start.size(), x.rank());
  checkCount(op, "limit", limit.size(), x.rank());
  checkCount(op, "stride", stride.size(), x.rank());
  Shape xStrides = stridesOf(x.shape());
  Shape resultShape(x.rank()), srcStrides(x.rank());
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > x.dim(d) || stride[d] < 1)
      fail(op, "invalid bounds [" + std::to_string(start[d]) + ", " + std::to_string(limit[d]) +
                   ") step " + std::to_string(stride[d]) + " for dim " + std::to_string(d) +
                   " of " + x.typeString());
    resultShape[d] = (limit[d] - start[d] + stride[d] - 1) / stride[d];
    srcStrides[d] = xStrides[d] * stride[d];
  }
  return stridedCopy(x, resultShape, srcStrides, dot(start, xStrides));
}

Tensor reverse(const Tensor &x, const std::vector<int64_t> &dims) {
  checkDefined("reverse", x);
  std::vector<bool> reversed(x.rank(), false);
  for (int64_t d : dims) {
    checkAxis("reverse", d, x.rank());
    if (reversed[d])
      fail("reverse", "duplicate dim " + std::to_string(d));
    reversed[d] = true;
  }
  Shape srcStrides = stridesOf(x.shape());
  int64_t base = 0;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (!reversed[d])
      continue;
    base += (x.dim(d) - 1) * srcStrides[d];
    srcStrides[d] = -srcStrides[d];
  }
  return stridedCopy(x, x.shape(), srcStrides, base);
}

Tensor concat(const std::vector<Tensor> &xs, int64_t axis) {
  const char *op = "concat";
  if (xs.empty())
    fail(op, "no operands");
  for (const Tensor &x : xs)
    checkDefined(op, x);
  const Tensor &first = xs.front();
  checkAxis(op, axis, first.rank());
  Shape resultShape = first.shape();
  resultShape[axis] = 0;
  for (const Tensor &x : xs) {
    checkSameDType(op, first, x);
    bool compatible = x.rank() == first.rank();
    for (int64_t d = 0; compatible && d < x.rank(); ++d)
      compatible = d == axis || x.dim(d) == first.dim(d);
    if (!compatible)
      fail(op, "operand " + x.typeString() + " does not match " + first.typeString());
    resultShape[axis] += x.dim(axis);
  }
  Tensor result(first.dtype(), resultShape);
  size_t elementSize = dtypeSize(first.dtype());
  int64_t outer = product(resultShape, 0, axis);
  size_t resultRow = (size_t)product(resultShape, axis, resultShape.size()) * elementSize;
  auto *dst = static_cast<uint8_t *>(result.raw());
  size_t column = 0;
  for (const Tensor &x : xs) {
    size_t chunk = (size_t)product(x.shape(), axis, x.shape().size()) * elementSize;
    const auto *src = static_cast<const uint8_t *>(x.raw());
    for (int64_t o = 0; o < outer && chunk; ++o)
      std::memcpy(dst + o * resultRow + column, src + o * chunk, chunk);
    column += chunk;
  }
  return result;
}

Tensor pad(const Tensor &x, const Tensor &value, const std::vector<int64_t> &low,
           const std::vector<int64_t> &high, PadMode mode) {
  const char *op = "pad";
  checkDefined(op, x);
  checkCount(op, "low", low.size(), x.rank());
  checkCount(op, "high", high.size(), x.rank());
  if (mode == PadMode::Constant) {
    checkDefined(op, value);
    checkSameDType(op, x, value);
    if (value.rank() != 0)
      fail(op, "padding value must be a 0-d tensor, got " + value.typeString());
  }
  Shape resultShape(x.rank());
  std::vector<std::vector<int64_t>> maps(x.rank());
  for (int64_t d = 0; d < x.rank(); ++d) {
    checkPadDim(x.dim(d), low[d], high[d], mode);
    resultShape[d] = x.dim(d) + low[d] + high[d];
    maps[d].resize(resultShape[d]);
    for (int64_t i = 0; i < resultShape[d]; ++i)
      maps[d][i] = padSource(i - low[d], x.dim(d), mode);
  }
  Tensor result(x.dtype(), resultShape);
  visitElementSize(dtypeSize(x.dtype()), [&](auto tag) {
    using U = decltype(tag);
    U fill{};
    if (mode == PadMode::Constant)
      std::memcpy(&fill, value.raw(), sizeof fill);
    gatherThroughMaps<U>(x, result, maps, fill);
  });
  return result;
}

Tensor iota(DType dtype, const Shape &shape, int64_t dim) {
  checkAxis("iota", dim, (int64_t)shape.size());
  Tensor result(dtype, shape);
  int64_t inner = product(shape, dim + 1, shape.size());
  int64_t size = shape[dim];
  visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T *out = result.data<T>();
    for (int64_t i = 0, n = result.numElements(); i < n; ++i)
      out[i] = convertScalar<T>((int64_t)((i / inner) % size));
  });
  return result;
}

Tensor dynamicSlice(const Tensor &x, const std::vector<int64_t> &starts, const Shape &sizes) {
  checkDefined("dynamicSlice", x);
  std::vector<int64_t> clamped = clampStarts("dynamicSlice", x.shape(), starts, sizes);
  Shape strides = stridesOf(x.shape());
  return stridedCopy(x, sizes, strides, dot(clamped, strides));
}

Tensor dynamicUpdateSlice(const Tensor &x, const Tensor &update,
                          const std::vector<int64_t> &starts) {
  const char *op = "dynamicUpdateSlice";
  checkDefined(op, x);
  checkDefined(op, update);
  checkSameDType(op, x, update);
  if (update.rank() != x.rank())
    fail(op, "update " + update.typeString() + " does not match the rank of " + x.typeString());
  std::vector<int64_t> clamped = clampStarts(op, x.shape(), starts, update.shape());
  Tensor result = x.clone();
  Shape xStrides = stridesOf(x.shape());
  visitElementSize(dtypeSize(x.dtype()), [&](auto tag) {
    using U = decltype(tag);
    const U *src = static_cast<const U *>(update.raw());
    U *dst = static_cast<U *>(result.raw());
    forEachOffsetPair(update.shape(), stridesOf(update.shape()), 0, xStrides,
                      dot(clamped, xStrides), [&](int64_t s, int64_t d) { dst[d] = src[s]; });
  });
  return result;
}

} // namespace tcc::kernels
