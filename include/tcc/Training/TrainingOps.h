//===- TrainingOps.h - Losses and optimizer updates as core ops -------------===//
//
// The pieces buildTraining (TrainingBuilder.h) assembles its entry points from, each emitted
// with a tcc::CoreBuilder as plain core ops. They are public so that tests can check each one
// on the interpreter, apart from the model and its gradients.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/IR/CoreBuilder.h"
#include "tcc/Training/TrainingBuilder.h"

#include "llvm/ADT/SmallVector.h"

#include <string>
#include <vector>

namespace tcc {

struct LossValues {
  mlir::Value perSample;  // f32, the labels' shape
  mlir::Value mean;       // f32, 0-d: the mean of perSample
  mlir::Value prediction; // cross-entropy: i64 argmax over the class dim, the labels' shape
};

/// The labels tensor type the loss expects for `output`: cross-entropy on logits [N, C, d...]
/// takes class indices [N, d...] of `labelType` (i64 or i32); MSE takes f32 targets of the
/// output's shape. Throws tcc::Error when the output cannot feed the loss.
mlir::RankedTensorType labelTypeFor(mlir::MLIRContext *ctx, const TrainingOptions &options,
                                    mlir::RankedTensorType output);

/// Cross-entropy (log-softmax over dim 1, shifted by its max; label smoothing as in
/// TrainingOptions) or mean squared error, computed in f32 (f64 for an f64 output); the
/// results are f32. A label outside [0, C) selects no class: its sample's loss is only the
/// smoothing term (0 without smoothing); nothing checks labels at run time.
LossValues buildLoss(CoreBuilder &b, const TrainingOptions &options, mlir::Value output,
                     mlir::Value labels);

/// Names of the optimizer's per-parameter state tensors (suffixes of "<param>."), in the order
/// buildOptimizerUpdate takes and returns them: SGD with momentum {"momentum_buffer"}, Adam and
/// AdamW {"adam_m", "adam_v"}, plain SGD none.
std::vector<std::string> optimizerStateNames(const TrainingOptions &options);

/// Scales `grads` so that their global L2 norm is at most `maxNorm`, as
/// torch.nn.utils.clip_grad_norm_: total = sqrt(sum_i ||g_i||^2) (each norm in its gradient's
/// type, the total in f32), coef = min(maxNorm / (total + 1e-6), 1), g_i * coef.
llvm::SmallVector<mlir::Value> clipGradNorm(CoreBuilder &b, llvm::ArrayRef<mlir::Value> grads,
                                            double maxNorm);

struct OptimizerUpdate {
  llvm::SmallVector<mlir::Value> params;             // the next parameter values
  std::vector<llvm::SmallVector<mlir::Value>> state; // [parameter][optimizerStateNames slot]
  mlir::Value step;                                  // step + 1
};

/// One optimizer step, op for op as PyTorch's single-tensor SGD / Adam / AdamW compute it in
/// the parameters' type (scalar hyperparameter arithmetic in f64, as PyTorch does in Python):
/// weight decay, momentum or moments, bias correction from `step` (the i64 0-d count of steps
/// taken before this one), the update with the 0-d f32 learning rate `lr`. `grads` are final
/// (clipped and averaged); `state[i]` holds parameter i's optimizerStateNames values.
OptimizerUpdate buildOptimizerUpdate(CoreBuilder &b, const TrainingOptions &options,
                                     llvm::ArrayRef<mlir::Value> params,
                                     llvm::ArrayRef<mlir::Value> grads,
                                     llvm::ArrayRef<llvm::SmallVector<mlir::Value>> state,
                                     mlir::Value step, mlir::Value lr);

} // namespace tcc
