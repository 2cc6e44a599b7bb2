//===- TrainingSpec.h - What a training artifact is made of ----------------===//
//
// The contract between the training builder (lib/Training: ONNX forward model -> loss,
// gradients, optimizer update as graph functions) and the compiler (compileTraining: each
// entry compiled like an inference model, serialised into one artifact with the state; see
// the Training table of include/tcc/Runtime/artifact.fbs and tccrt_trainer_* in tccrt.h).
//
// Entry points and their bindings (every entry has the same Data inputs, in the same order:
// the model's graph inputs, then the labels):
//   train_step      State(params, optimizer state, step, accumulators), Data..., LearningRate,
//                   [RngKey]  ->  State(next values of everything it updates), Loss
//   accumulate_step (grad_accumulation > 1 only) State(params, accumulators), Data..., [RngKey]
//                   ->  State(accumulators + this micro-batch's gradients), Loss
//   eval            State(params, buffers), Data...  ->  Data "loss" (per sample, the labels'
//                   shape), and for cross-entropy Data "prediction" (i64 argmax, same shape)
// train_step applies the update to (accumulated + its own) gradients / grad_accumulation and
// resets the accumulators to zero.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Support/Tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tcc {

/// Same numbering as artifact.fbs StateKind and tccrt_state_kind.
/// LossScale: fp16 training's dynamic loss scale and its counters (TrainingBuilder.h).
enum class StateKind : uint8_t { Parameter, OptimizerState, Step, GradAccumulator, Buffer, LossScale };

struct StateSpec {
  std::string name;      // Parameter: the ONNX initializer's name; others "<param>.adam_m", "step"
  StateKind kind = StateKind::Parameter;
  Tensor initial;        // the initial value; its dtype and shape are the state's
  int64_t initializerIndex = -1; // Parameter (and Buffer): index in the ONNX initializer list
  /// Distributed training: per dim, the mesh axes splitting it (empty: whole); each rank holds
  /// its block (tcc.sharding semantics). Empty: whole on every rank.
  std::vector<std::vector<int>> splits;
  /// Pipeline parallelism: the stage (coordinate on the mesh axis pp) whose program updates it;
  /// the other stages keep their copy as loaded (checkpoints take the updating stage's). -1:
  /// every rank updates it.
  int64_t pipelineStage = -1;
};

/// Same numbering as artifact.fbs BindingRole.
enum class BindingRole : uint8_t { Data, State, LearningRate, RngKey, Loss };

struct Binding {
  BindingRole role = BindingRole::Data;
  int64_t state = -1;    // role State: index into TrainingSpec::state
};

struct EntrySpec {
  std::string name;      // "train_step", "accumulate_step", "eval"
  /// func.func @main over tensors, graph dialect (as the ONNX importer produces).
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<std::string> inputNames, outputNames; // one per @main argument / result
  std::vector<Binding> inputs, outputs;             // one per @main argument / result
  int64_t rank = 0;      // distributed training: the rank whose program this is
};

struct TrainingSpec {
  std::vector<StateSpec> state; // parameters first, in initializer order
  std::vector<EntrySpec> entries;
  int64_t gradAccumulation = 1;
  std::string configJson;       // loss, optimizer, hyperparameters (recorded in the artifact)
  /// Distributed training (tcc/Training/Parallelism.h): the mesh; entries hold one program per
  /// rank. Empty: one process.
  std::vector<std::string> meshAxes;
  std::vector<int64_t> meshSizes;
};

} // namespace tcc
