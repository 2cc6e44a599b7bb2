//===- AttentionShapes.h - The shape rules of scaled dot-product attention ----===//
//
// One statement of tcc.attention's shape rules, for the graph op's type inference, tk.attention's
// verifier and the runtime's check of an artifact's attention step (header-only: the runtime
// links no MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tcc/Support/SymExpr.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tcc {

/// The dim operations the shape rules need, for fixed sizes (int64_t) and for sizes that are
/// expressions of symbols (SymExpr: equal only when the expressions are).
inline std::string attentionDimText(int64_t d) { return std::to_string(d); }
inline std::string attentionDimText(const SymExpr &d) { return d.str(); }
/// Whether `kv` (a key/value batch dim) is positive and divides `q` (the query's).
inline bool attentionDimDivides(int64_t kv, int64_t q) { return kv > 0 && q % kv == 0; }
inline bool attentionDimDivides(const SymExpr &kv, const SymExpr &q) {
  std::optional<int64_t> c = kv.constant();
  return !(c && *c <= 0) && SymExpr::divideExactly(q, kv).has_value();
}

/// Checks q [B..., Lq, D], k [B'..., Lk, D], v [B'..., Lk, Dv] (one rank >= 3; every B'_d equal
/// for k and v, non-zero, and dividing B_d), and mask and bias (when given) of the scores' rank
/// [B..., Lq, Lk] with each dim 1 or the scores'. Returns what is wrong (empty when nothing) and
/// sets `result` to [B..., Lq, Dv]. `Dim` is int64_t or SymExpr.
template <class Dim>
std::string attentionShapeError(const std::vector<Dim> &q, const std::vector<Dim> &k,
                                const std::vector<Dim> &v, const std::vector<Dim> *mask,
                                const std::vector<Dim> *bias, std::vector<Dim> &result) {
  auto str = [](const std::vector<Dim> &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i)
      out += (i ? ", " : "") + attentionDimText(s[i]);
    return out + "]";
  };
  size_t r = q.size();
  if (r < 3 || k.size() != r || v.size() != r)
    return "q " + str(q) + ", k " + str(k) + " and v " + str(v) + " need one rank >= 3";
  for (size_t d = 0; d + 2 < r; ++d)
    if (k[d] != v[d] || !attentionDimDivides(k[d], q[d]))
      return "batch dim " + std::to_string(d) + " of k " + str(k) + " and v " + str(v) +
             " must be equal and divide q's " + str(q);
  if (k[r - 1] != q[r - 1])
    return "the head sizes of q " + str(q) + " and k " + str(k) + " differ";
  if (v[r - 2] != k[r - 2])
    return "the key lengths of k " + str(k) + " and v " + str(v) + " differ";
  std::vector<Dim> scores(q.begin(), q.end() - 1);
  scores.push_back(k[r - 2]);
  for (auto [x, what] : {std::pair{mask, "mask"}, std::pair{bias, "bias"}}) {
    if (!x)
      continue;
    bool ok = x->size() == r;
    for (size_t d = 0; ok && d < r; ++d)
      ok = (*x)[d] == Dim(1) || (*x)[d] == scores[d];
    if (!ok)
      return std::string(what) + " " + str(*x) + " does not broadcast to the scores " + str(scores);
  }
  result.assign(q.begin(), q.end() - 1);
  result.push_back(v[r - 1]);
  return "";
}

/// Row-major element strides of a mask or bias of `shape` over the scores' index space
/// [B..., Lq, Lk] (the same rank): 0 where it broadcasts (a dim of 1). Dim: int64_t, or
/// SymExpr (the CUDA kernel of a symbolic program computes them at run time).
template <class Dim> std::vector<Dim> attentionBroadcastStrides(const std::vector<Dim> &shape) {
  std::vector<Dim> strides(shape.size(), Dim(0));
  Dim stride(1);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = shape[i] == Dim(1) ? Dim(0) : stride;
    stride *= shape[i];
  }
  return strides;
}

/// Why the generated CUDA attention kernel (FlashAttention-2 style, tensor cores) cannot run an
/// attention of element type `elementType` ("f16", "bf16", "f32", ...) and head dims d (q, k)
/// and dv (v); empty when it can. Where it cannot, the compiler decomposes the op.
inline std::string cudaAttentionKernelRefusal(const std::string &elementType, int64_t d,
                                              int64_t dv) {
  if (elementType != "f16" && elementType != "bf16")
    return "the CUDA attention kernel takes f16 or bf16 (got " + elementType + ")";
  if (d % 16 != 0 || d < 16 || d > 128 || dv % 16 != 0 || dv < 16 || dv > 128)
    return "the CUDA attention kernel takes head dims that are multiples of 16 up to 128 (got " +
           std::to_string(d) + " and " + std::to_string(dv) + ")";
  return "";
}

} // namespace tcc
