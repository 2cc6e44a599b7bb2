//===- Sharding.h - Device meshes, shardings and collective groups -------------===//
//
// The C++ side of #tcc.mesh and #tcc.sharding (tcc/IR/TccBase.td): mesh coordinates, the groups
// a collective spans, and a sharding as mesh-axis indices, which the sharding pass
// (lib/Passes/Shard.cpp), the interpreter's simulated mesh and the runtime's communicator share.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/IR/TccDialect.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace tcc {

/// Whether `op` communicates (a collective, send or recv).
bool isCollective(mlir::Operation *op);

/// The mesh of the module enclosing `op` (its `tcc.mesh` attribute), or null.
MeshAttr meshOf(mlir::Operation *op);

/// Rank r's coordinate along each mesh axis (row-major over the axes).
llvm::SmallVector<int64_t> meshCoordinates(MeshAttr mesh, int64_t rank);
int64_t rankAt(MeshAttr mesh, llvm::ArrayRef<int64_t> coordinates);

/// The ranks of `rank`'s group over `axes` (mesh axis indices), in group order (the first axis
/// major), and `rank`'s position in it.
struct CollectiveGroup {
  llvm::SmallVector<int64_t> ranks;
  int64_t position = 0;
};
CollectiveGroup collectiveGroup(MeshAttr mesh, llvm::ArrayRef<int> axes, int64_t rank);

/// Mesh axis indices of `names`; fails (with `error` set) on a name the mesh lacks or a repeat.
mlir::FailureOr<llvm::SmallVector<int>> axisIndices(MeshAttr mesh, mlir::ArrayAttr names,
                                                    std::string &error);

/// A sharding as mesh axis indices: per dim the axes splitting it (first major), and the axes
/// over which the value is a partial sum.
struct DimSharding {
  llvm::SmallVector<llvm::SmallVector<int, 2>> dims;
  llvm::SmallVector<int, 2> partial;

  static DimSharding replicated(int64_t rank) {
    DimSharding s;
    s.dims.resize(rank);
    return s;
  }
  bool isReplicated() const;
  bool uses(int axis) const;
  /// The number of blocks dim d is split into.
  int64_t splits(MeshAttr mesh, int64_t d) const;
  /// The shape one rank holds.
  llvm::SmallVector<int64_t> localShape(MeshAttr mesh, llvm::ArrayRef<int64_t> global) const;
  /// The offset of `rank`'s block along dim d, in elements of the global shape.
  int64_t blockOffset(MeshAttr mesh, llvm::ArrayRef<int64_t> global, int64_t d,
                      int64_t rank) const;
  bool operator==(const DimSharding &o) const { return dims == o.dims && partial == o.partial; }
  bool operator!=(const DimSharding &o) const { return !(*this == o); }

  ShardingAttr toAttr(MeshAttr mesh) const;
  /// Checks axes against the mesh and the shape; fails with `error` set.
  static mlir::FailureOr<DimSharding> fromAttr(ShardingAttr attr, MeshAttr mesh,
                                               llvm::ArrayRef<int64_t> shape, std::string &error);
  /// `[[dp], []] partial [tp]`, for messages and explanations.
  std::string str(MeshAttr mesh) const;
};

} // namespace tcc
