//===- PoolShapes.h - Which window reductions the CPU runtime pools -------===//
//
// One statement of tk.pool's shape rule, for the runtime (Pool.cpp's makePoolGeometry), the
// tk.pool verifier and the compiler's choice of library pools (FusionUtils' isLibraryPool).
// Header-only: the runtime links no MLIR.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

namespace tcc {

/// The dims a window reduction pools: those whose window, stride, padding or dilation is not
/// the identity, in order. `Seq`: std::vector<int64_t> or llvm::ArrayRef<int64_t>.
template <class Seq>
std::vector<int64_t> pooledDims(const Seq &window, const Seq &strides, const Seq &padLow,
                                const Seq &padHigh, const Seq &dilations) {
  std::vector<int64_t> dims;
  for (size_t d = 0; d < window.size(); ++d)
    if (window[d] != 1 || strides[d] != 1 || dilations[d] != 1 || padLow[d] != 0 ||
        padHigh[d] != 0)
      dims.push_back((int64_t)d);
  return dims;
}

/// Whether `pooled` (pooledDims) is what tk.pool takes: at most two dims, adjacent.
inline bool poolsAdjacentDims(const std::vector<int64_t> &pooled) {
  return pooled.size() <= 1 || (pooled.size() == 2 && pooled[1] == pooled[0] + 1);
}

} // namespace tcc
