//===- Attention.h - Fused scaled dot-product attention on the CPU -------------===//
//
// tk.attention (tcc.attention's semantics) on contiguous row-major f32 buffers, without ever
// holding the whole score matrix (FlashAttention's online softmax): each work item is a block
// of query rows of one batch (head); it walks the keys in blocks, computes the block's scores
// with the sgemm, applies the causal triangle, mask and bias, rescales its running output by
// the change of the row maxima, and adds the block's probabilities times its values with a
// second sgemm. Memory: one score block and one output block per thread, whatever the sequence
// length. Causal blocks above the diagonal are skipped. In bf16 (q, k, v and the output; the
// bias stays f32) both products are libtccrt's 16-bit GEMMs (AVX512-BF16 or AMX where the CPU
// has them) with f32 sums; scores, bias and softmax stay f32, the probabilities are rounded to
// bf16 for the second product, as FlashAttention does.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Runtime/tccrt.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tcc::rt {

using Shape = std::vector<int64_t>;

struct AttentionGeometry {
  Shape qBatch, kvBatch;            // the batch dims of q, and of k and v (dividing q's)
  int64_t batches = 1;              // product of qBatch
  int64_t lq = 0, lk = 0, d = 0, dv = 0;
  double scale = 1, maskedValue = 0;
  bool causal = false, hasMask = false, hasBias = false;
  bool bf16 = false;                // q, k, v and output bf16 (else f32)
  // Keys past the causal diagonal can be skipped: causal, and no mask with a finite fill (the
  // mask applies after the triangle, so a finite fill would replace its -inf there).
  bool skipAboveDiagonal = false;
  Shape maskStrides, biasStrides;   // per scores dim [B..., Lq, Lk]; 0 where broadcast
  int64_t blockRows = 0, blockCols = 0;
  size_t workspaceBytes = 0;        // per thread (a multiple of 64): a score block, an output
                                    // block, row state, each row's key end (bf16: and the
                                    // probability block in bf16)
};

/// Checks tk.attention's rules (tcc/Support/AttentionShapes.h) on the shapes; `mask`/`bias` null
/// when absent. Throws tcc::rt::Error naming what is wrong.
AttentionGeometry makeAttentionGeometry(const Shape &q, const Shape &k, const Shape &v,
                                        const Shape *mask, const Shape *bias, const Shape &output,
                                        double scale, bool causal, double maskedValue,
                                        bool bf16 = false);

/// "B x LqxLk, head D" and ", causal", ", mask", ", bias" where they apply: the attention and
/// attention gradient steps' names in profiles.
std::string attentionShapeText(const AttentionGeometry &g);

/// Runs on up to numThreads threads; each element of the output is computed by one thread in a
/// fixed order (the result does not depend on the thread count). q, k, v and output hold f32,
/// or bf16 bits (uint16_t) when g.bf16. `mask` (bool) and `bias` (f32) may be null when the
/// geometry has none. `workspace` holds numThreads x g.workspaceBytes (64-byte aligned): the
/// program's per-thread workspace, as for convolutions.
void runAttention(const AttentionGeometry &g, const void *q, const void *k, const void *v,
                  const bool *mask, const float *bias, void *output, void *workspace,
                  int numThreads);

/// The geometry of tk.attention_grad (f32, or bf16 with an f32 bias): the forward's, with the
/// backward's blocks and workspace.
AttentionGeometry makeAttentionGradGeometry(const Shape &q, const Shape &k, const Shape &v,
                                            const Shape *mask, const Shape *bias,
                                            const Shape &output, double scale, bool causal,
                                            double maskedValue, bool bf16 = false);

/// tk.attention_grad: the gradients of attention's result with respect to q, k and v, given
/// the forward's `output` and the result's adjoint `gradOutput` (FlashAttention-2's backward
/// pass): never more of the scores than one block per thread. A first pass recomputes each
/// row's softmax statistics and dO . O; the second walks, per key/value batch (grouped-query
/// heads summed there), its key blocks against every query block, recomputes the
/// probabilities and adds p^T dO to dV, dS^T q to dK and dS k to dQ. With fewer key/value
/// batches than threads the keys are split into chunks with one partial dQ each, summed in
/// chunk order (the rounding of dQ then depends on the thread count; dK and dV never do).
/// Buffers hold f32, or bf16 bits when g.bf16 (the bias f32 in both): then the products run on
/// the 16-bit GEMMs with p and dS rounded to bf16, and every sum is f32 until it is stored.
/// `workspace`: numThreads x g.workspaceBytes, as for runAttention.
void runAttentionBackward(const AttentionGeometry &g, const void *q, const void *k,
                          const void *v, const void *output, const void *gradOutput,
                          const bool *mask, const float *bias, void *gradQ, void *gradK,
                          void *gradV, void *workspace, int numThreads);

} // namespace tcc::rt
