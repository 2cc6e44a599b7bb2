//===- Pipeline.h - Pipeline parallelism: stages, schedules, send/recv -----------===//
//
// A micro-batched training step (the training builder's train_step with micro-batches: each
// micro-batch's forward and loss ops carry `tcc.micro_batch` = m) becomes one program per
// pipeline stage:
//   - Stages. The forward of micro-batch 0 is cut into `stages` consecutive pieces of about
//     equal cost (2*M*N*K per matrix product, 2*output*kernel per convolution, one per output
//     element for the rest), each cut placed where the fewest bytes cross it within a tenth of
//     a stage's cost of the balanced point; every micro-batch's forward is cut alike. Autodiff's
//     ops for a forward op's product run on its stage. Every other op (gradient sums, the
//     optimizer, collectives the sharding pass inserted) runs on the lowest stage among the
//     ops it reads, so gradients flow back stage by stage and each parameter is updated where
//     its gradient arrives, in the forward of the latest micro-batch it reads when it reads
//     forward values only (a tensor-parallel block's all-reduce), else in that micro-batch's
//     backward; ops that read only arguments and constants run on every stage.
//   - Schedules. Each stage runs its ops in groups: the argument-only prologue, then the forward
//     F(m) and backward B(m) of each micro-batch in GPipe order (all F, then all B) or 1F1B
//     order (stage s runs min(M, S-1-s) forwards ahead, then alternates B and F, as
//     Megatron-LM and PipeDream-Flush); within a group, program order.
//   - Communication. A value another stage needs is sent (tcc.send over the pipeline axis)
//     right after it is computed and received (tcc.recv) just before its first use there; each
//     crossing value has its own tag, so stages may receive in another order than they send.
//     A result computed on one stage is broadcast from it (the loss; a parameter read by
//     several stages, e.g. tied embeddings) or, where the caller names the argument holding
//     the same state, that argument is returned unchanged on the other stages.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace tcc {

enum class PipelineSchedule { GPipe, OneFOneB };

/// "gpipe" or "1f1b"; false for anything else.
bool parsePipelineSchedule(llvm::StringRef text, PipelineSchedule &out);

class PipelinePlan {
public:
  /// Plans `step` (ops tagged with kMicroBatchAttr 0..microBatches-1) over `stages` stages of
  /// the mesh axis `axis`. Emits an error on `step` and fails when the micro-batches' forwards
  /// differ or a stage would be empty.
  static mlir::FailureOr<PipelinePlan> build(mlir::func::FuncOp step, int64_t stages,
                                             int64_t microBatches, PipelineSchedule schedule,
                                             llvm::StringRef axis = "pp");

  /// Stage `stage`'s program, inserted before `step` and named `name`: same signature as
  /// `step`. `resultArgument[i]` (optional; -1 or the size of `step`'s results otherwise) is
  /// the argument holding the state result i updates: returned unchanged on stages that do not
  /// compute it (instead of a broadcast from the stage that does).
  mlir::func::FuncOp partition(int64_t stage, llvm::StringRef name,
                               llvm::ArrayRef<int64_t> resultArgument = {}) const;

  /// The stage computing each result of `step` (-1: every stage).
  const std::vector<int64_t> &resultStages() const { return resultStage_; }
  /// One line per decision (the cuts, their cost shares and crossing bytes, what is sent).
  const std::vector<std::string> &decisions() const { return decisions_; }
  /// Per step: the values that cross stages (each sent once per stage that reads it) and
  /// their bytes.
  int64_t crossingValues() const { return static_cast<int64_t>(tag_.size()); }
  /// Each stage's share of the forward's arithmetic (the cost model above), summing to 1.
  const std::vector<double> &stageShares() const { return stageShares_; }
  int64_t crossingBytes() const { return crossingBytes_; }

private:
  mlir::func::FuncOp step_;
  int64_t stages_ = 1, microBatches_ = 1;
  PipelineSchedule schedule_ = PipelineSchedule::OneFOneB;
  std::string axis_;
  std::vector<mlir::Operation *> ops_;       // the body's ops in program order (no terminator)
  llvm::DenseMap<mlir::Operation *, int64_t> stage_, group_; // group: see Pipeline.cpp
  llvm::DenseMap<mlir::Value, int64_t> tag_; // values that cross stages
  llvm::DenseMap<mlir::Operation *, uint64_t> needed_; // every-stage ops: stages that use them
  std::vector<int64_t> resultStage_;
  std::vector<double> stageShares_;
  int64_t crossingBytes_ = 0;
  std::vector<std::string> decisions_;

  int64_t stageOf(mlir::Value v) const;
  /// The position of `group` in stage `stage`'s schedule.
  int64_t position(int64_t stage, int64_t group) const;
};

} // namespace tcc
