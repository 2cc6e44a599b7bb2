//===- Attention.h - tcc.attention in core ops -------------------------------===//
//
// The one place that spells tcc.attention's semantics in core ops: the decomposition that
// -tcc-decompose-attention writes where no fused kernel applies, and that the op's
// vector-Jacobian product recomputes its probabilities with.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/IR/CoreBuilder.h"
#include "tcc/IR/TccDialect.h"

namespace tcc {

/// The values of one decomposed attention (every one of q's batch shape).
struct AttentionCore {
  mlir::Value k, v;      // k and v repeated to q's batch dims (grouped-query heads expanded)
  mlir::Value keep;      // i1 over the scores: false where causal or the mask removes a score;
                         // null when neither applies
  mlir::Value probs;     // softmax of the scores [B..., Lq, Lk]
  mlir::Value result;    // probs v
};

/// What tcc.attention and tcc.attention_grad share: the forward's operands and attributes.
struct AttentionOperands {
  mlir::Value q, k, v, mask, bias; // mask/bias null when absent
  double scale = 1, maskedValue = 0;
  bool causal = false;
};
AttentionOperands attentionOperands(AttentionOp op);
AttentionOperands attentionOperands(AttentionGradOp op);

/// Builds the attention from core ops at b's insertion point: matmul, scale, causal and mask
/// selects, bias add, the max-shifted softmax of the frontend's Softmax, matmul. A 16-bit
/// attention is computed in f32 (its operands widened, its result narrowed): scores, softmax
/// and sums in f32, as the fused kernels keep them; the core's other values are then f32.
AttentionCore buildAttentionCore(CoreBuilder &b, const AttentionOperands &a);
inline AttentionCore buildAttentionCore(CoreBuilder &b, AttentionOp op) {
  return buildAttentionCore(b, attentionOperands(op));
}

/// The gradients of the attention given its result's adjoint `grad`, from core ops (the
/// probabilities recomputed; in f32 for a 16-bit attention, the gradients narrowed): those of
/// q, k, v where wanted (else null), and `scores`, the adjoint of the scores before the causal
/// and mask replacements zero it (for a bias's gradient, f32 for a 16-bit attention; null
/// unless wanted).
struct AttentionGrads {
  mlir::Value q, k, v, scores;
};
AttentionGrads buildAttentionGradCore(CoreBuilder &b, const AttentionOperands &a, mlir::Value grad,
                                      bool wantQ, bool wantK, bool wantV, bool wantScores);

/// Replaces `op` by its core-op gradients (those of its results that are used) and erases it:
/// -tcc-decompose-attention's rewrite, and autodiff's before differentiating it again.
void decomposeAttentionGrad(AttentionGradOp op);

/// k or v [B'..., L, X] repeated to q's batch dims `qBatch` (each B'_d divides B_d; query batch
/// index i reads i / (B_d / B'_d)).
mlir::Value expandToQueryBatch(CoreBuilder &b, mlir::Value kv, llvm::ArrayRef<SymExpr> qBatch);
/// The adjoint of expandToQueryBatch: sums the gradient of the expanded value over each group
/// of query batch indices that read one key/value index, giving `kvShape`.
mlir::Value sumToKeyBatch(CoreBuilder &b, mlir::Value grad, llvm::ArrayRef<SymExpr> kvShape);

} // namespace tcc
