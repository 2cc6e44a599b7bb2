//===- ColumnSums.cpp - Sums over outer dims as a GEMV with a ones vector ----------===//
//
// A sum over dims that lie outside a contiguous run of kept dims is a column sum: for a
// channels-last global average pool ([N, H, W, C] summed over H and W), a bias gradient ([B, C]
// summed over B). A kernel that gives each output element its own loop over the reduced dims
// reads memory C floats apart, one cache line per element, and re-reads the input once per
// output element when it does not fit in cache (a 56x56x144 pool: ~0.3 ms on a Zen 4 core,
// where reading it once takes ~0.05). The same sum is ones[1, R] x X[R, K]: one row of a GEMM,
// which the CPU's sgemm runs along contiguous rows of X, K lanes at a time, reading X once.
//
// Rewritten: an f32 tcc.reduce sum with static shapes whose reduced dims are one contiguous run
// [r0, r1) followed by at least one kept dim, with R = the reduced elements >= 2, K = the
// elements of the kept dims after them >= kMinColumns and A = those before them (the batch) at
// most R / 8 (many small batched GEMMs would cost more than the kernel). Result: reshape(X) to
// [A, R, K] (a view), tcc.matmul of a [1, R] ones constant (broadcast over the batch) with it,
// reshape to the reduce's result. What the reduce's input was fused from is then materialised
// for the GEMM (and a convolution's activation goes back into its tiles).
//
//===----------------------------------------------------------------------===//
#include "tcc/Passes/Passes.h"
#include "tcc/IR/CoreBuilder.h"
#include "tcc/IR/TccDialect.h"

#include "mlir/IR/Builders.h"

namespace tcc {
#define GEN_PASS_DEF_COLUMNSUMS
#include "tcc/Passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

/// Kept elements after the reduced dims, at least: one 16-float vector.
constexpr int64_t kMinColumns = 16;

struct ColumnSumsPass : impl::ColumnSumsBase<ColumnSumsPass> {
  using ColumnSumsBase::ColumnSumsBase;

  void runOnOperation() override {
    SmallVector<ReduceOp> sums;
    getOperation()->walk([&](ReduceOp r) {
      if (r.getKind() == ReduceKind::Sum && r->getParentOp() == getOperation().getOperation())
        sums.push_back(r);
    });
    for (ReduceOp r : sums)
      rewrite(r);
  }

  void rewrite(ReduceOp r) {
    auto x = dyn_cast<RankedTensorType>(r.getX().getType());
    auto y = dyn_cast<RankedTensorType>(r.getType());
    if (!x || !y || !x.hasStaticShape() || !y.hasStaticShape() || !x.getElementType().isF32())
      return;
    SmallVector<int64_t> dims = llvm::to_vector(r.getDims());
    llvm::sort(dims);
    if (dims.empty())
      return;
    int64_t r0 = dims.front(), r1 = dims.back() + 1, rank = x.getRank();
    if (r1 - r0 != (int64_t)dims.size() || r1 >= rank)
      return; // not one run, or no kept dim after it: a row sum
    ArrayRef<int64_t> shape = x.getShape();
    int64_t batch = ShapedType::getNumElements(shape.take_front(r0)),
            rows = ShapedType::getNumElements(shape.slice(r0, r1 - r0)),
            columns = ShapedType::getNumElements(shape.drop_front(r1));
    if (rows < 2 || columns < kMinColumns || batch * 8 > rows)
      return;
    OpBuilder b(r);
    CoreBuilder cb(b, r.getLoc());
    Value ones = cb.splat(cb.tensorType({1, rows}, x.getElementType()), 1.0);
    Value matrix = batch == 1 ? cb.reshape(r.getX(), {rows, columns})
                              : cb.reshape(r.getX(), {batch, rows, columns});
    Value sum = cb.reshape(cb.matmul(ones, matrix), y.getShape());
    if (explain) {
      InFlightDiagnostic remark = r.emitRemark();
      remark << "a sum of " << rows << " rows of " << columns << " contiguous values";
      if (batch > 1)
        remark << " (batch " << batch << ")";
      remark << ": a GEMM row with a ones vector";
    }
    r.getResult().replaceAllUsesWith(sum);
    r->erase();
  }
};

} // namespace
} // namespace tcc
