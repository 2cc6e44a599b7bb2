//===- TopKOrder.h - Top-k along a line, in one order for every backend ---===//
//
// The semantics of tcc.topk, shared by the reference kernel (lib/Interp) and the runtime's
// library call (lib/Runtime): the k best elements of each line, sorted, NaN ranking above
// +inf, ties going to the lower index. Header-only and dependency-free, so the runtime can use
// it without linking the interpreter.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

namespace tcc {

/// Strict "a > b" in the sort order of topk, where NaN sits above +inf (numpy / torch).
template <class C> bool greaterNaNLast(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a) || std::isnan(b))
      return std::isnan(a) && !std::isnan(b);
  }
  return b < a;
}

/// For every line of `in` (laid out [outer, size, inner], the line running along `size`),
/// writes its k largest (or smallest) elements in order and their positions in the line to
/// `outValues` / `outIndices` (laid out [outer, k, inner]). Elements are compared as
/// `toCompute(element)` (of type C).
template <class C, class T, class ToCompute>
void topKLines(const T *in, int64_t outer, int64_t size, int64_t inner, int64_t k, bool largest,
               ToCompute toCompute, T *outValues, int64_t *outIndices) {
  // No lines, no scratch (a line's length alone may be huge when another dim is 0: the
  // artifact fuzzer's top-k of [0, 3e15] asked for 24 PB of scratch).
  if (outer == 0 || inner == 0 || k == 0)
    return;
  std::vector<int64_t> order((size_t)size);
  std::vector<C> line((size_t)size);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t j = 0; j < size; ++j)
        line[j] = toCompute(in[(o * size + j) * inner + i]);
      std::iota(order.begin(), order.end(), 0);
      // A total order (value, then index), so partial_sort gives the stable top k.
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
        C first = largest ? line[a] : line[b];
        C second = largest ? line[b] : line[a];
        if (greaterNaNLast(first, second))
          return true;
        if (greaterNaNLast(second, first))
          return false;
        return a < b;
      });
      for (int64_t j = 0; j < k; ++j) {
        int64_t at = (o * k + j) * inner + i;
        outValues[at] = in[(o * size + order[j]) * inner + i];
        outIndices[at] = order[j];
      }
    }
}

} // namespace tcc
