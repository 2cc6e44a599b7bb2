//===- Kernels.h - Reference kernels for the tcc core op set --------------===//
//
// One plain, obviously-correct C++ function per core op of the `tcc` dialect, on host Tensors.
// They are the semantics of the core op set: the interpreter calls them op by op, the
// constant folder calls them at compile time, and every backend is tested against them.
// No MLIR here. Invalid input (an index out of range, mismatched shapes) throws tcc::Error.
//
// Conventions shared by all kernels:
//  - Shapes are static and row-major. Attributes are validated by the dialect's verifiers, but
//    kernels check what they rely on and throw tcc::Error instead of reading out of bounds.
//  - 16-bit floats are computed in float and rounded once per op.
//  - Integer arithmetic wraps (two's complement); integer division by zero throws.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Support/Tensor.h"

#include <utility>
#include <vector>

namespace tcc::kernels {

// The enums below are mirrored 1:1 by the dialect's enum attributes (same names, same order).

enum class UnaryKind : uint32_t {
  Neg, Abs, Exp, Log, Sqrt, Rsqrt, Reciprocal,
  Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Tanh, Asinh, Acosh, Atanh,
  Erf, Sigmoid, Floor, Ceil, Round /*half to even*/, Sign,
  Not /*logical not on bool, bitwise not on integers*/
};

enum class BinaryKind : uint32_t {
  Add, Sub, Mul,
  Div /*integers: truncate toward zero*/,
  Rem /*remainder with the sign of the dividend, like C fmod and %*/,
  Pow, Max /*NaN propagates*/, Min /*NaN propagates*/,
  And, Or, Xor /*logical on bool, bitwise on integers*/,
  ShiftLeft, ShiftRight /*unsigned integers; shift >= bit width gives 0*/
};

enum class CompareKind : uint32_t { Eq, Ne, Lt, Le, Gt, Ge };

/// Reductions: Sum (init 0), Prod (init 1), Max (init lowest / -inf; NaN propagates),
/// Min (init highest / +inf; NaN propagates).
enum class ReduceKind : uint32_t { Sum, Prod, Max, Min };

enum class PadMode : uint32_t { Constant, Reflect, Edge, Wrap };

/// How scatter combines an update with the existing element.
enum class ScatterReduction : uint32_t { None, Add, Mul, Max, Min };

// ---- Elementwise (operands of the same shape; binary operands also of the same dtype) ----
Tensor unary(UnaryKind kind, const Tensor &x);
Tensor binary(BinaryKind kind, const Tensor &lhs, const Tensor &rhs);
/// Result is Bool. NaN compares unequal to everything (Ne true).
Tensor compare(CompareKind kind, const Tensor &lhs, const Tensor &rhs);
/// cond is Bool; a and b have the same dtype; all three have the same shape.
Tensor select(const Tensor &cond, const Tensor &a, const Tensor &b);
/// Float->int truncates toward zero (out of range: unspecified but no UB: saturate);
/// anything->Bool is (x != 0); Bool->anything is 0/1; float->float rounds to nearest even.
Tensor cast(const Tensor &x, DType to);
/// Each element's bytes read as `to` (same size; bool is its byte, non-zero bytes read as true).
Tensor bitcast(const Tensor &x, DType to);

// ---- Layout ----
/// Same elements, new shape (element counts equal).
Tensor reshape(const Tensor &x, const Shape &shape);
/// result.shape[i] = x.shape[perm[i]].
Tensor transpose(const Tensor &x, const std::vector<int64_t> &perm);
/// Operand dim i maps to result dim dims[i] (strictly increasing); an operand dim of size 1
/// is broadcast, otherwise it must equal the result dim. Result dims not in `dims` are new.
Tensor broadcastInDim(const Tensor &x, const Shape &resultShape, const std::vector<int64_t> &dims);
/// Elements start[d], start[d]+stride[d], ... < limit[d] in each dim (stride >= 1).
Tensor slice(const Tensor &x, const std::vector<int64_t> &start, const std::vector<int64_t> &limit,
             const std::vector<int64_t> &stride);
/// Reverses the order of elements along each of `dims`.
Tensor reverse(const Tensor &x, const std::vector<int64_t> &dims);
/// Concatenation along `axis`; all inputs agree on dtype and every other dim.
Tensor concat(const std::vector<Tensor> &xs, int64_t axis);
/// Pads each dim d by low[d] before and high[d] after (both >= 0). Constant mode uses the 0-d
/// tensor `value` (same dtype as x); Reflect mirrors without repeating the edge element
/// (needs low,high < dim); Edge repeats the edge element; Wrap pads cyclically.
Tensor pad(const Tensor &x, const Tensor &value, const std::vector<int64_t> &low,
           const std::vector<int64_t> &high, PadMode mode);
/// result[i...] = i_dim (as dtype).
Tensor iota(DType dtype, const Shape &shape, int64_t dim);
/// A window of `sizes` starting at `starts` (clamped so the window fits, like XLA).
Tensor dynamicSlice(const Tensor &x, const std::vector<int64_t> &starts, const Shape &sizes);
/// x with the window at `starts` (clamped so it fits) replaced by `update`.
Tensor dynamicUpdateSlice(const Tensor &x, const Tensor &update, const std::vector<int64_t> &starts);

// ---- Indexing (index tensors are I64 or I32 with values in [0, dim); otherwise throw) ----
/// result.shape = x.shape[:axis] + indices.shape + x.shape[axis+1:] (ONNX Gather / numpy take).
Tensor gather(const Tensor &x, const Tensor &indices, int64_t axis);
/// result.shape = indices.shape; result[i] = x[i with i[axis] replaced by indices[i]].
Tensor gatherElements(const Tensor &x, const Tensor &indices, int64_t axis);
/// ONNX GatherND semantics with `batchDims` leading batch dims.
Tensor gatherND(const Tensor &x, const Tensor &indices, int64_t batchDims);
/// ONNX ScatterElements: copy of x with x[i with i[axis]=indices[i]] (op)= updates[i].
Tensor scatterElements(const Tensor &x, const Tensor &indices, const Tensor &updates, int64_t axis,
                       ScatterReduction reduction);
/// ONNX ScatterND.
Tensor scatterND(const Tensor &x, const Tensor &indices, const Tensor &updates,
                 ScatterReduction reduction);

// ---- Reductions and scans ----
/// Reduces over `dims` (sorted, unique); those dims are removed from the result.
Tensor reduce(ReduceKind kind, const Tensor &x, const std::vector<int64_t> &dims);
/// Index (I64) of the max (isMax) or min along `dim`, which is removed. Ties: the first index,
/// or the last with selectLastIndex. NaN counts as the extreme.
Tensor argReduce(bool isMax, const Tensor &x, int64_t dim, bool selectLastIndex);
/// Running sum along `dim`; `exclusive` leaves out the element itself; `reverse` runs backwards.
Tensor cumsum(const Tensor &x, int64_t dim, bool exclusive, bool reverse);
/// The k largest (or smallest) along `dim`, sorted, ties broken by lower index. NaN sorts
/// above +inf (first when largest, last when smallest), as in numpy and torch.
/// Returns {values, indices (I64)}; `dim` has size k in both.
std::pair<Tensor, Tensor> topk(const Tensor &x, int64_t dim, int64_t k, bool largest);

// ---- Linear algebra and windows ----
/// lhs [B..., M, K] x rhs [B..., K, N] -> [B..., M, N], same batch dims, same dtype.
/// Floats accumulate in double (f64) / float; integers in their own type (wrapping).
Tensor matmul(const Tensor &lhs, const Tensor &rhs);
/// Scaled dot-product attention (tcc.attention): q [B..., Lq, D], k [B'..., Lk, D],
/// v [B'..., Lk, Dv] (B' dims divide B's: grouped-query) -> [B..., Lq, Dv]. Scores
/// scale q k^T, then -inf above the diagonal when `causal`, masked_value where `mask` (bool,
/// may be undefined) is false, plus `bias` (may be undefined); mask and bias broadcast from
/// dims of size 1. Row softmax (max-shifted when the max is finite) in the accumulator type.
Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &mask,
                 const Tensor &bias, double scale, bool causal, double maskedValue);
/// tcc.attention_grad: {dq, dk, dv} of attention(q, k, v, ...) given its `output` and the
/// output's adjoint `grad` (dv = p^T grad, ds = p (grad v^T - rowsum(grad * output)) where the
/// score is kept, dq = scale ds k, dk = scale ds^T q; key/value gradients summed over their
/// query heads), accumulated in double.
std::vector<Tensor> attentionGrad(const Tensor &q, const Tensor &k, const Tensor &v,
                                  const Tensor &output, const Tensor &grad, const Tensor &mask,
                                  const Tensor &bias, double scale, bool causal,
                                  double maskedValue);
/// N-d convolution (cross-correlation), input [N, C, S...], weight [O, C/groups, K...] ->
/// [N, O, S'...]. Per spatial dim d: the input is dilated by lhsDilation[d] (lhsDilation-1
/// zeros between elements; used for transposed convolution), padded by padLow[d]/padHigh[d]
/// (may be negative), then windowed with kernel dilation rhsDilation[d] and stride strides[d].
Tensor conv(const Tensor &input, const Tensor &weight, const std::vector<int64_t> &strides,
            const std::vector<int64_t> &padLow, const std::vector<int64_t> &padHigh,
            const std::vector<int64_t> &lhsDilation, const std::vector<int64_t> &rhsDilation,
            int64_t groups);
/// Sliding-window reduction over every dim of x (windows of size 1 leave a dim alone).
/// Padding elements take the reduction's identity (0 for Sum, -inf/lowest for Max, ...).
/// out[d] = floor((x[d] + padLow[d] + padHigh[d] - dilation[d]*(window[d]-1) - 1) / stride[d]) + 1.
Tensor reduceWindow(ReduceKind kind, const Tensor &x, const std::vector<int64_t> &window,
                    const std::vector<int64_t> &strides, const std::vector<int64_t> &padLow,
                    const std::vector<int64_t> &padHigh, const std::vector<int64_t> &dilations);

} // namespace tcc::kernels
