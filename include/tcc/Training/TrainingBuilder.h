//===- TrainingBuilder.h - Loss, gradients and optimizer as graph functions -===//
//
// Turns a forward ONNX model into the entry points of a training artifact (TrainingSpec.h):
// imports it with its trainable initializers as function arguments (and Dropout in training
// mode for train_step), appends the loss, builds the gradients with tcc::buildGradients, and
// the optimizer update, all as tcc core ops, so fusion makes each update a few kernels.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Frontend/OnnxImporter.h"
#include "tcc/Training/TrainingSpec.h"

#include "mlir/IR/MLIRContext.h"

#include <set>
#include <string>

namespace onnx {
class ModelProto;
}

namespace tcc {

enum class LossKind { CrossEntropy, MSE };
enum class OptimizerKind { SGD, Adam, AdamW };

struct TrainingOptions {
  LossKind loss = LossKind::CrossEntropy;
  /// Cross-entropy: mean over samples of -sum_c q_c log p_c with q = (1 - s) onehot + s / C.
  double labelSmoothing = 0;
  /// Which model output is the loss's input (logits for cross-entropy, predictions for MSE).
  int64_t outputIndex = 0;
  /// Cross-entropy: the class indices' type, DType::I64 or DType::I32.
  DType labelType = DType::I64;

  OptimizerKind optimizer = OptimizerKind::Adam;
  double momentum = 0;     // SGD (PyTorch semantics: buf = momentum * buf + g; first step buf = g)
  bool nesterov = false;   // SGD
  double weightDecay = 0;  // SGD, Adam: L2 (g += wd * p); AdamW: decoupled (p -= lr * wd * p)
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8; // Adam, AdamW (PyTorch's formulas)
  double clipGradNorm = 0; // > 0: scale gradients so their global L2 norm is at most this
  int64_t gradAccumulation = 1; // micro-batches per optimizer update (gradients averaged)
  /// Pipeline parallelism: train_step computes its batch as this many micro-batches (the
  /// leading dim of the first input and of the labels split in equal parts), each forward and
  /// loss op tagged with its micro-batch (TccDialect::kMicroBatchAttrName); the loss is their
  /// mean, so the gradients are the whole batch's. BatchNormalization's statistics are each
  /// micro-batch's (its running statistics move once per micro-batch, in order), as in
  /// PyTorch's pipelines. buildTraining then needs the model prepared at the micro-batch size.
  int64_t microBatches = 1;
  /// Pipelines combined with data parallelism over this many ranks: the batch's rows are that
  /// many equal blocks (one per data-parallel rank, as the sharding pass splits the batch) and
  /// micro-batch m takes rows [m*b, (m+1)*b) of every block (b = batch / (shards * micro-batches)),
  /// so each rank's micro-batch is a slice of its own rows and no rows move between ranks.
  int64_t microBatchShards = 1;

  /// Initializers to train; empty: every floating-point initializer. Names that are not
  /// floating-point initializers are an error. BatchNormalization's running statistics are
  /// Buffer state (updated from the batches, never trained), and initializers the model needs
  /// at compile time (a Dropout ratio) stay constants: naming either here is an error.
  std::set<std::string> trainable;
  std::set<std::string> frozen; // never trained (applied after `trainable`)

  /// "fp32", or "bf16"/"fp16": torch.autocast's rule on the forward model (matrix products in
  /// 16 bits with f32 sums, the rest f32; attention stays f32), parameters and optimizer state
  /// f32 (master weights), the backward pass as autodiff derives it (16-bit products of 16-bit
  /// gradients). fp16 adds dynamic loss scaling as torch.cuda.amp.GradScaler does: the loss is
  /// multiplied by the state `loss_scale` before differentiation and the gradients divided by
  /// it; a step whose gradients hold an inf or NaN changes no parameter, optimizer state or
  /// step count, halves the scale and counts in `loss_scale.skipped_steps`; after
  /// `lossScaleGrowthInterval` good steps in a row the scale doubles.
  std::string precision = "fp32";
  double initialLossScale = 65536.0;
  int64_t lossScaleGrowthInterval = 2000;
};

/// `model` is prepared (prepareOnnxModel: static input shapes, shape inference). Throws
/// tcc::Error naming the node and op when the model cannot be trained (an op without a
/// gradient on the path from a parameter to the loss, a loss/output shape mismatch, ...).
/// `microBatchModel`: with options.microBatches > 1, the same model prepared with the batch
/// divided by microBatches (train_step's forward runs it once per micro-batch).
TrainingSpec buildTraining(mlir::MLIRContext &ctx, const onnx::ModelProto &model,
                           const TrainingOptions &options, const ImportOptions &importOptions = {},
                           const onnx::ModelProto *microBatchModel = nullptr);

/// What `tcc grad` runs: imports `model` (with `options`, whose parameterInitializers are
/// replaced by every floating-point initializer) and rewrites @main into
/// @main(graph inputs..., initializers...) -> (grad_0, ..., grad_n): the gradients of the sum of
/// output 0 with respect to each initializer, in the order of ImportedModel::parameterIndices.
/// outputNames become "grad_<initializer index>". Throws tcc::Error naming the node on failure.
ImportedModel buildGradientOfSum(mlir::MLIRContext &ctx, const onnx::ModelProto &model,
                                 const ImportOptions &options);

} // namespace tcc
