//===- Shard.h - Sharding propagation and SPMD partitioning -------------------===//
//
// GSPMD-style, on the graph dialect: a function's arguments and results carry shardings
// (#tcc.sharding; none means replicated) over the module's mesh (#tcc.mesh). ShardingPlan::build
// propagates them forward through every op, one rule per op kind (lib/Passes/Shard.cpp), and
// records what each op needs of its operands; ShardingPlan::partition then writes one rank's
// program: local shapes, and collectives wherever a value's sharding differs from what its
// consumer needs (all_reduce / reduce_scatter for pending partial sums, all_gather to undo a
// split, all_to_all to move one, a local slice to make one). It runs on training graphs after
// autodiff, so backward collectives come from the same rules as forward ones.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/IR/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <string>
#include <vector>

namespace tcc {

/// One collective a partitioned program runs per call.
struct CollectiveRecord {
  std::string kind;  // "all_reduce", "all_gather", "reduce_scatter", "all_to_all"
  std::string axes;  // "dp" or "dp,tp"
  int64_t bytes = 0; // its local operand on one rank
  /// What one rank sends with ring algorithms over a group of n: all_reduce 2(n-1)/n of its
  /// operand, reduce_scatter and all_to_all (n-1)/n, all_gather (n-1) times (the cost model's
  /// input; an all_reduce and a reduce_scatter + all_gather pair move the same).
  int64_t wireBytes = 0;
  std::string value; // the value resharded and the op that needed it
};

/// What propagation decided and what partitioning inserted, for --explain-sharding and
/// --report.
struct ShardingReport {
  std::vector<std::string> decisions;          // one line per op
  std::vector<CollectiveRecord> collectives;   // of the last partition() given this report
};

class ShardingPlan {
public:
  /// Propagates the shardings of `func`'s arguments and results (its module must have a
  /// tcc.mesh) through its body. Fails with an error at the function for graphs it cannot
  /// shard (collectives already present).
  static mlir::FailureOr<ShardingPlan> build(mlir::func::FuncOp func, ShardingReport *report = nullptr);

  /// Writes rank `rank`'s program as a new function named `name` next to the original.
  /// Throws tcc::Error on an internal inconsistency.
  mlir::func::FuncOp partition(int64_t rank, llvm::StringRef name,
                               ShardingReport *report = nullptr) const;

  /// The most bytes partition() puts into one all_reduce (bucketAllReduces); 0: no buckets.
  void setBucketBytes(int64_t bytes) { bucketBytes = bytes; }

  MeshAttr mesh() const { return mesh_; }
  /// The sharding chosen for a value of the original function.
  const DimSharding &shardingOf(mlir::Value v) const { return values_.find(v)->second; }

  /// What an op needs: its operands' shardings, its results' shardings, and the axes to
  /// all-reduce (with `afterKind`) right after it (a max/min reduction over a split dim).
  struct OpPlan {
    llvm::SmallVector<DimSharding> operands, results;
    llvm::SmallVector<int, 2> reduceAfter;
    CollectiveReduceKind afterKind = CollectiveReduceKind::Max;
  };

private:
  mlir::func::FuncOp func_;
  MeshAttr mesh_;
  llvm::DenseMap<mlir::Value, DimSharding> values_;
  llvm::DenseMap<mlir::Operation *, OpPlan> ops_;
  llvm::SmallVector<DimSharding> resultNeeds_;
  int64_t bucketBytes = 25 << 20; // PyTorch DDP's default bucket
};

/// Gradient buckets, as PyTorch DDP makes them: consecutive all_reduce sums over the same axes
/// and element type whose results are all used only after the last of them are flattened,
/// concatenated and reduced as one, up to `capBytes` a bucket (fewer, larger messages). The
/// bucket's all_reduce sits where its last member was. `report`'s records are merged the same
/// way.
void bucketAllReduces(mlir::func::FuncOp fn, int64_t capBytes, ShardingReport *report = nullptr);

} // namespace tcc
