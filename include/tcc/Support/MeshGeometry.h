//===- MeshGeometry.h - Ranks, coordinates and groups of a device mesh ------===//
//
// Plain arithmetic (no MLIR), shared by the IR (#tcc.mesh, tcc/IR/Sharding.h), the interpreter
// and libtccrt: rank r's coordinates are row-major over the axis sizes; a group over some axes
// is the ranks that differ from r only on them, ordered by their coordinates over those axes
// (the first axis major), which is also a rank's position in it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

namespace tcc::mesh {

inline std::vector<int64_t> coordinates(const std::vector<int64_t> &sizes, int64_t rank) {
  std::vector<int64_t> coords(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    coords[i] = rank % sizes[i];
    rank /= sizes[i];
  }
  return coords;
}

inline int64_t rankAt(const std::vector<int64_t> &sizes, const std::vector<int64_t> &coords) {
  int64_t rank = 0;
  for (size_t i = 0; i < sizes.size(); ++i)
    rank = rank * sizes[i] + coords[i];
  return rank;
}

/// Rank `rank`'s combined coordinate over `axes` (indices into sizes, the first major).
template <class Axes>
int64_t positionOver(const std::vector<int64_t> &sizes, const Axes &axes, int64_t rank) {
  std::vector<int64_t> coords = coordinates(sizes, rank);
  int64_t position = 0;
  for (auto a : axes)
    position = position * sizes[a] + coords[a];
  return position;
}

/// The ranks of `rank`'s group over `axes`, in group order.
template <class Axes>
std::vector<int64_t> groupRanks(const std::vector<int64_t> &sizes, const Axes &axes, int64_t rank) {
  std::vector<int64_t> coords = coordinates(sizes, rank);
  int64_t size = 1;
  for (auto a : axes)
    size *= sizes[a];
  std::vector<int64_t> ranks;
  for (int64_t p = 0; p < size; ++p) {
    std::vector<int64_t> c = coords;
    int64_t rest = p;
    for (size_t i = axes.size(); i-- > 0;) {
      c[axes[i]] = rest % sizes[axes[i]];
      rest /= sizes[axes[i]];
    }
    ranks.push_back(rankAt(sizes, c));
  }
  return ranks;
}

} // namespace tcc::mesh
