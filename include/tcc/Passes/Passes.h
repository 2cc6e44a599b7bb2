//===- Passes.h - tcc graph passes --------------------------------------===//
#pragma once

#include "tcc/IR/TccDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace tcc {

class AttentionOp;

#define GEN_PASS_DECL
#include "tcc/Passes/Passes.h.inc"

/// Marks the transposes -tcc-layout leaves between channels-first and channels-last values
/// (each one a copy at run time: the report's layout_copies).
constexpr llvm::StringLiteral kLayoutCopyAttrName = TccDialect::kLayoutCopyAttrName;

/// If every operand of `op` is a tcc.constant and no result exceeds `maxElements`, evaluates
/// it with the reference kernels and replaces its results by constants; returns true then.
/// Evaluation errors (e.g. an index out of range) leave the op alone: they surface at run time.
/// `onReplace(old, new)` is called for each result before the op is erased.
bool foldConstantOp(mlir::Operation *op, int64_t maxElements,
                    llvm::function_ref<void(mlir::Value, mlir::Value)> onReplace = {});

/// -tcc-recognize-attention on one function (lib/Passes/Attention.cpp): every decomposed
/// scaled dot-product attention whose intermediates nothing else uses becomes a tcc.attention.
/// The training builder runs it before autodiff, so the op's gradient rule (which recomputes
/// the probabilities) replaces the saved score matrices. With `explain`, each recognised op and
/// each softmax-times-v that is not one (with the reason) is a remark.
void recognizeAttention(mlir::func::FuncOp f, bool explain = false);

/// Whether `target` ("cpu", "cuda") has a fused kernel for `op` computed in `elementType`: the
/// CPU runtime's takes f32, or bf16 with an f32 bias; CUDA's generated one f16/bf16 with head
/// dims multiples of 16 up to 128 (static), and a bias in f32 or the element type.
/// -tcc-decompose-attention and -tcc-autocast decide with it.
bool hasFusedAttentionKernel(AttentionOp op, mlir::Type elementType, llvm::StringRef target);
/// Whether `target` has a fused kernel for tcc.attention_grad: the same conditions, on q's
/// element type.
bool hasFusedAttentionGradKernel(AttentionGradOp op, llvm::StringRef target);

/// A training step's activation memory (lib/Passes/Remat.cpp): the bytes of the values that the
/// loss (result `lossResult`; -1: the last) is computed from and that ops after the loss (the
/// backward pass, the optimizer) read. -tcc-remat lowers it.
uint64_t savedActivationBytes(mlir::func::FuncOp f, int64_t lossResult = -1);


#define GEN_PASS_REGISTRATION
#include "tcc/Passes/Passes.h.inc"

} // namespace tcc
