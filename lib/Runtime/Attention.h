//===- Attention.h - Fused scaled dot-product attention on the CPU -------------===//
//
// tk.attention (tcc.attention's semantics) on contiguous row-major f32 buffers, without ever
// holding the whole score matrix (FlashAttention's online softmax): each work item is a block
// of query rows of one batch (head); it walks the keys in blocks, computes the block's scores
// with the sgemm, applies the causal triangle, mask and bias, rescales its running output by
// the change of the row maxima, and adds the block's probabilities times its values with a
// second sgemm. Memory: one score block and one output block per thread, whatever the sequence
// length. Causal blocks above the diagonal are skipped.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Runtime/tccrt.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tcc::rt {

using Shape = std::vector<int64_t>;

struct AttentionGeometry {
  Shape qBatch, kvBatch;            // the batch dims of q, and of k and v (dividing q's)
  int64_t batches = 1;              // product of qBatch
  int64_t lq = 0, lk = 0, d = 0, dv = 0;
  double scale = 1, maskedValue = 0;
  bool causal = false, hasMask = false, hasBias = false;
  // Keys past the causal diagonal can be skipped: causal, and no mask with a finite fill (the
  // mask applies after the triangle, so a finite fill would replace its -inf there).
  bool skipAboveDiagonal = false;
  Shape maskStrides, biasStrides;   // per scores dim [B..., Lq, Lk]; 0 where broadcast
  int64_t blockRows = 0, blockCols = 0;
  size_t workspaceBytes = 0;        // per thread (a multiple of 64): a score block, an output
                                    // block, row state and each row's key end
};

/// Checks tk.attention's rules (tcc/Support/AttentionShapes.h) on the shapes; `mask`/`bias` null
/// when absent. Throws tcc::rt::Error naming what is wrong.
AttentionGeometry makeAttentionGeometry(const Shape &q, const Shape &k, const Shape &v,
                                        const Shape *mask, const Shape *bias, const Shape &output,
                                        double scale, bool causal, double maskedValue);

/// Runs on up to numThreads threads; each element of the output is computed by one thread in a
/// fixed order (the result does not depend on the thread count). `mask` (bool) and `bias` may
/// be null when the geometry has none. `workspace` holds numThreads x g.workspaceBytes
/// (64-byte aligned): the program's per-thread workspace, as for convolutions.
void runAttention(const AttentionGeometry &g, const float *q, const float *k, const float *v,
                  const bool *mask, const float *bias, float *output, void *workspace,
                  int numThreads);

} // namespace tcc::rt
