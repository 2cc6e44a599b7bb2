//===- Transformer.cpp - ONNX's transformer operators (opset 23 on) --------===//
//
// RMSNormalization, RotaryEmbedding and Attention, which ONNX added in opset 23 (after the
// ONNX 1.12 the build links, so neither its schemas nor its function bodies are available):
// lowered here from their definitions in the ONNX specification.
//  * Attention (with opset 24's nonpad_kv_seqlen and opset 25's sliding windows) becomes
//    tcc.attention where its semantics are the op's (scale, an upper-left causal triangle, a
//    boolean mask or an additive bias, grouped-query heads), so the fused kernels run it; the
//    rest (softcap, a key/value cache with a causal mask, which ONNX aligns bottom-right, a
//    softmax precision, the qk_matmul_output output, padding lengths, windows) is built from
//    core ops. A fully masked query row gives zeros, as ONNX specifies.
//
//===----------------------------------------------------------------------===//
#include "../NodeContext.h"

#include "tcc/Frontend/OnnxModel.h"
#include "tcc/Interp/Interpreter.h"

#include <cmath>

using namespace mlir;

namespace tcc::onnx_import {
namespace {

using Shape64 = SmallVector<int64_t>;

Shape64 shapeOf(Value v) { return Shape64(CoreBuilder::shapeOf(v)); }

void requireFloat(NodeContext &n, Value v, const char *what) {
  if (!isa<FloatType>(CoreBuilder::elementTypeOf(v)))
    n.fail(std::string(what) + " must be a floating-point tensor");
}

/// Y = X / sqrt(mean(X^2 over dims axis..rank-1) + epsilon) * scale, computed in f32
/// (stash_type 1, the only one ONNX defines a computation for) and cast back.
void lowerRMSNormalization(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0), scale = n.input(1);
  requireFloat(n, x, "X");
  int64_t rank = n.inputRank(0);
  if (rank == 0)
    n.fail("X must have rank >= 1");
  if (n.attrInt("stash_type", 1) != 1)
    n.fail("stash_type " + std::to_string(n.attrInt("stash_type", 1)) +
           " is not supported (1: float)");
  int64_t axis = n.normalizeAxis(n.attrInt("axis", -1), rank);
  Type t = CoreBuilder::elementTypeOf(x), f32 = b.builder().getF32Type();
  Value xf = b.cast(x, f32);
  Shape64 dims;
  for (int64_t d = axis; d < rank; ++d)
    dims.push_back(d);
  Value meanSquare = meanKeep(b, b.mul(xf, xf), dims);
  Value rms = b.unary(UnaryKind::Sqrt, b.add(meanSquare, b.scalarLike(meanSquare,
                                                                      n.attrFloat("epsilon", 1e-5))));
  Value normalized = b.div(xf, rms);
  n.setOutput(0, b.cast(b.mul(normalized, b.cast(scale, f32)), t));
}

/// Rotates pairs of the first rotary_embedding_dim features of each head by the angles whose
/// cosines and sines the caches hold (indexed by position_ids when given): halves (x1 = first
/// half, x2 = second) or, interleaved, even and odd features. X is [B, H, S, D], or [B, S, H*D]
/// with num_heads.
void lowerRotaryEmbedding(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value x = n.input(0), cosCache = n.input(1), sinCache = n.input(2);
  requireFloat(n, x, "X");
  Shape64 inShape = shapeOf(x);
  int64_t rank = inShape.size();
  if (rank != 3 && rank != 4)
    n.fail("X must have rank 3 or 4, got " + std::to_string(rank));
  int64_t batch = inShape[0];
  if (rank == 4) {
    x = b.transpose(x, {0, 2, 1, 3}); // [B, S, H, D]
  } else {
    int64_t heads = n.attrInt("num_heads", 0);
    if (heads <= 0 || inShape[2] % heads)
      n.fail("a rank-3 X needs num_heads dividing its hidden size " + std::to_string(inShape[2]));
    x = b.reshape(x, {batch, inShape[1], heads, inShape[2] / heads});
  }
  Shape64 s = shapeOf(x); // [B, S, H, D]
  int64_t seq = s[1], head = s[3];
  int64_t rotary = n.attrInt("rotary_embedding_dim", 0);
  if (rotary == 0)
    rotary = head;
  if (rotary < 2 || rotary > head || rotary % 2)
    n.fail("rotary_embedding_dim " + std::to_string(rotary) + " must be even and at most the " +
           "head size " + std::to_string(head));
  int64_t half = rotary / 2;
  if (n.hasInput(3)) {
    Value ids = b.cast(n.input(3), b.builder().getI64Type());
    cosCache = b.create<GatherOp>(cosCache, ids, (uint64_t)0);
    sinCache = b.create<GatherOp>(sinCache, ids, (uint64_t)0);
  }
  for (Value c : {cosCache, sinCache})
    if (shapeOf(c) != Shape64{batch, seq, half})
      n.fail("the cos and sin caches (indexed by position_ids when given) must be [" +
             std::to_string(batch) + ", " + std::to_string(seq) + ", " + std::to_string(half) +
             "]");
  Type t = CoreBuilder::elementTypeOf(x);
  Value cos = b.reshape(b.cast(cosCache, t), {batch, seq, 1, half});
  Value sin = b.reshape(b.cast(sinCache, t), {batch, seq, 1, half});
  Value rotate = b.sliceDim(x, 3, 0, rotary);
  bool interleaved = n.attrInt("interleaved", 0) != 0;
  Value x1 = interleaved ? b.sliceDim(rotate, 3, 0, rotary, 2) : b.sliceDim(rotate, 3, 0, half);
  Value x2 = interleaved ? b.sliceDim(rotate, 3, 1, rotary, 2) : b.sliceDim(rotate, 3, half, rotary);
  Value real = b.sub(b.mul(cos, x1), b.mul(sin, x2));
  Value imag = b.add(b.mul(sin, x1), b.mul(cos, x2));
  Value rotated;
  if (interleaved) {
    Shape64 pair = {batch, seq, s[2], half, 1};
    rotated = b.reshape(b.concat({b.reshape(real, pair), b.reshape(imag, pair)}, 4),
                        {batch, seq, s[2], rotary});
  } else {
    rotated = b.concat({real, imag}, 3);
  }
  Value y = rotary < head ? b.concat({rotated, b.sliceDim(x, 3, rotary, head)}, 3) : rotated;
  n.setOutput(0, rank == 4 ? b.transpose(y, {0, 2, 1, 3}) : b.reshape(y, inShape));
}

// ---- Attention ---------------------------------------------------------------------------

/// [B, S, H*D] -> [B, H, S, D].
Value splitHeads(CoreBuilder &b, Value x, int64_t heads) {
  Shape64 s = shapeOf(x);
  return b.transpose(b.reshape(x, {s[0], s[1], heads, s[2] / heads}), {0, 2, 1, 3});
}

/// [B, H, S, D] -> [B, S, H*D], splitHeads' inverse.
Value mergeHeads(CoreBuilder &b, Value x) {
  Shape64 s = shapeOf(x);
  return b.reshape(b.transpose(x, {0, 2, 1, 3}), {s[0], s[2], s[1] * s[3]});
}

/// [B, Hkv, S, D] -> [B, Hkv * reps, S, D], each head repeated reps times in a row.
Value repeatHeads(CoreBuilder &b, Value x, int64_t reps) { return repeatInterleave(b, x, 1, reps); }

// ---- TensorScatter -----------------------------------------------------------------------------

/// TensorScatter (opset 24; KV-cache updates in place): batch b of `update` (S positions along
/// `axis`) is written into `past_cache` (L positions) from position write_indices[b] (0 when
/// absent), wrapping around L in circular mode. As a select: position p of batch b takes
/// update's position p - write_indices[b] (mod L when circular) where that is in [0, S).
void lowerTensorScatter(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value past = n.input(0), update = n.input(1);
  std::string mode = n.attrString("mode", "linear");
  if (mode != "linear" && mode != "circular")
    n.fail("mode must be linear or circular, got '" + mode + "'");
  Shape64 ps = shapeOf(past), us = shapeOf(update);
  int64_t rank = ps.size();
  if (rank < 2 || (int64_t)us.size() != rank)
    n.fail("past_cache and update must have one rank, at least 2");
  int64_t axis = n.normalizeAxis(n.attrInt("axis", -2), rank);
  if (axis == 0)
    n.fail("axis must not be the batch axis 0");
  for (int64_t d = 0; d < rank; ++d)
    if (d == axis ? us[d] > ps[d] : us[d] != ps[d])
      n.fail("update must match past_cache except along axis " + std::to_string(axis) +
             ", where it may be shorter");
  if (CoreBuilder::elementTypeOf(past) != CoreBuilder::elementTypeOf(update))
    n.fail("past_cache and update must have one element type");
  Type i64 = b.builder().getI64Type();
  const int64_t batch = ps[0], length = ps[axis], count = us[axis];
  Value start;
  if (n.hasInput(2)) {
    Value w = n.input(2);
    if (CoreBuilder::typeOf(w).getNumElements() != batch)
      n.fail("write_indices must hold one index per batch entry (" + std::to_string(batch) + ")");
    Shape64 perBatch(rank, 1);
    perBatch[0] = batch;
    start = b.reshape(b.cast(w, i64), perBatch);
  } else {
    start = b.splat(b.tensorType({}, i64), 0);
  }
  Value offset = b.sub(b.iota(ps, i64, axis), start);
  if (mode == "circular") {
    Value len = b.scalarLike(offset, (double)length);
    offset = b.binary(BinaryKind::Rem, b.add(b.binary(BinaryKind::Rem, offset, len), len), len);
  }
  Value inRange = b.binary(BinaryKind::And, b.compare(CompareKind::Ge, offset, b.scalarLike(offset, 0)),
                           b.compare(CompareKind::Lt, offset, b.scalarLike(offset, (double)count)));
  Value index = b.select(inRange, offset, b.splatLike(offset, 0));
  Value taken = b.create<GatherElementsOp>(update, index, (uint64_t)axis);
  n.setOutput(0, b.select(inRange, taken, past));
}

// ---- LinearAttention ---------------------------------------------------------------------------

/// LinearAttention (opset 27; linear-attention and gated-delta-rule recurrences): per kv head a
/// state S [d_k, d_v] (past_state, or zeros) runs over the T positions, in f32:
///   gated: S *= exp(decay_t) (per key dim or per head);
///   delta: v_t = beta_t * (v_t - k_t^T S);
///   S += k_t v_t^T;  out_t = scale * q_t^T S (each kv head read by its group of q heads).
/// One tcc.loop over T (buildScanLoop); outputs [B, T, Hq * d_v] and the final state.
void lowerLinearAttention(NodeContext &n) {
  CoreBuilder &b = n.b();
  std::string rule = n.attrString("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    n.fail("update_rule must be linear, gated, delta or gated_delta, got '" + rule + "'");
  const bool gating = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  const int64_t qHeads = n.requireAttrInt("q_num_heads"), kvHeads = n.requireAttrInt("kv_num_heads");
  if (qHeads <= 0 || kvHeads <= 0 || qHeads % kvHeads != 0)
    n.fail("q_num_heads must be a positive multiple of kv_num_heads");
  if (gating != n.hasInput(4))
    n.fail("update_rule '" + rule + (gating ? "' needs" : "' takes no") + " decay input");
  if (delta != n.hasInput(5))
    n.fail("update_rule '" + rule + (delta ? "' needs" : "' takes no") + " beta input");
  Value query = n.input(0), key = n.input(1), value = n.input(2);
  Type outType = CoreBuilder::elementTypeOf(query), f32 = b.builder().getF32Type();
  if (!isa<FloatType>(outType))
    n.fail("query, key and value must be floating-point tensors");
  for (Value v : {query, key, value})
    if (CoreBuilder::rankOf(v) != 3)
      n.fail("query, key and value must be [B, T, heads * head size]");
  Shape64 qs = shapeOf(query), ks = shapeOf(key), vs = shapeOf(value);
  const int64_t batch = qs[0], length = qs[1];
  if (qs[2] % qHeads || ks[2] % kvHeads || vs[2] % kvHeads || ks[0] != batch || vs[0] != batch ||
      ks[1] != length || vs[1] != length || qs[2] / qHeads != ks[2] / kvHeads)
    n.fail("query [B, T, Hq * d_k], key [B, T, Hkv * d_k] and value [B, T, Hkv * d_v] disagree");
  const int64_t dk = qs[2] / qHeads, dv = vs[2] / kvHeads, group = qHeads / kvHeads;
  double scale = n.attrFloat("scale", 0.0);
  if (scale == 0.0)
    scale = 1.0 / std::sqrt((double)dk);
  auto heads = [&](Value x, int64_t h) { return splitHeads(b, b.cast(x, f32), h); }; // [B, H, T, D]
  std::vector<Value> xs{heads(query, qHeads), heads(key, kvHeads), heads(value, kvHeads)};
  if (gating) {
    Value decay = n.input(4);
    Shape64 ds = shapeOf(decay);
    if (ds.size() != 3 || ds[0] != batch || ds[1] != length ||
        (ds[2] != kvHeads && ds[2] != kvHeads * dk))
      n.fail("decay must be [B, T, Hkv] or [B, T, Hkv * d_k]");
    xs.push_back(heads(decay, kvHeads)); // [B, Hkv, T, 1 or d_k]
  }
  if (delta) {
    Value beta = n.input(5);
    Shape64 bs = shapeOf(beta);
    if (bs.size() != 3 || bs[0] != batch || bs[1] != length || (bs[2] != kvHeads && bs[2] != 1))
      n.fail("beta must be [B, T, Hkv] or [B, T, 1]");
    xs.push_back(heads(beta, bs[2])); // [B, Hkv or 1, T, 1]
  }
  Shape64 stateShape{batch, kvHeads, dk, dv};
  Type stateType = outType;
  Value state;
  if (n.hasInput(3)) {
    state = n.input(3);
    if (shapeOf(state) != stateShape)
      n.fail("past_state must be [B, Hkv, d_k, d_v] = " +
             shapeToString(Shape(stateShape.begin(), stateShape.end())));
    stateType = CoreBuilder::elementTypeOf(state);
    state = b.cast(state, f32);
  } else {
    state = b.splat(b.tensorType(stateShape, f32), 0.0);
  }
  ScanBody body = [&](ArrayRef<Value> in) -> std::vector<Value> {
    Value s = in[0], q = in[1], k = in[2], v = in[3]; // [B, H, D] each
    size_t next = 4;
    if (gating) { // decay [B, Hkv, 1 or d_k] scales the state's rows
      Value g = in[next++];
      s = b.mul(s, b.reshape(b.unary(UnaryKind::Exp, g), {batch, kvHeads, shapeOf(g)[2], 1}));
    }
    Value kCol = b.reshape(k, {batch, kvHeads, dk, 1});
    if (delta) { // v - k^T S, scaled by beta [B, Hkv or 1, 1]
      Value retrieved = b.matmul(b.reshape(k, {batch, kvHeads, 1, dk}), s);
      Value bt = in[next++];
      Value beta = b.reshape(bt, {batch, shapeOf(bt)[1], 1, 1});
      v = b.mul(beta, b.sub(b.reshape(v, {batch, kvHeads, 1, dv}), retrieved));
    }
    s = b.add(s, b.mul(kCol, b.reshape(v, {batch, kvHeads, 1, dv})));
    Value read = group == 1 ? s : repeatHeads(b, s, group); // [B, Hq, d_k, d_v]
    Value out = b.matmul(b.reshape(q, {batch, qHeads, 1, dk}), read);
    out = b.mul(b.reshape(out, {batch, qHeads, dv}), b.scalarLike(out, scale));
    return {s, out};
  };
  std::vector<int64_t> axes(xs.size(), 2), reversed(xs.size(), 0);
  ScanResult r = buildScanLoop(n, body, {state}, xs, axes, reversed, length, Value());
  // [T, B, Hq, d_v] -> [B, T, Hq * d_v]
  Value out = b.reshape(b.transpose(r.stacked[0], {1, 0, 2, 3}), {batch, length, qHeads * dv});
  n.setOutput(0, b.cast(out, outType));
  if (n.hasOutput(1))
    n.setOutput(1, b.cast(r.finalStates[0], stateType));
}

/// A value of `shape` (rank 4, like the scores) from `x` of lower or equal rank, right-aligned.
Value toRank4(CoreBuilder &b, Value x) {
  Shape64 s = shapeOf(x);
  Shape64 padded(4 - s.size(), 1);
  padded.append(s.begin(), s.end());
  return b.reshape(x, padded);
}

/// The shape of a rank-4 mask broadcast to [.., Lq, Lk] (its leading dims kept).
Shape64 broadcastShape(Value mask, int64_t lq, int64_t lk) {
  Shape64 s = shapeOf(mask);
  s[2] = lq, s[3] = lk;
  return s;
}

/// Softmax along the last dim where a row of -inf gives zeros (not NaN).
Value safeSoftmax(CoreBuilder &b, Value s) {
  int64_t last = CoreBuilder::shapeOf(s).size() - 1;
  Value max = b.reduce(ReduceKind::Max, s, {last}, true);
  Value ninf = b.scalarLike(max, -INFINITY);
  Value shift = b.select(b.compare(CompareKind::Eq, max, ninf), b.splatLike(max, 0), max);
  Value e = b.unary(UnaryKind::Exp, b.sub(s, shift));
  Value sum = b.reduce(ReduceKind::Sum, e, {last}, true);
  sum = b.select(b.compare(CompareKind::Eq, sum, b.splatLike(sum, 0)), b.splatLike(sum, 1), sum);
  return b.div(e, sum);
}

/// The element type the `softmax_precision` attribute names, if given (a float type).
std::optional<Type> softmaxPrecision(NodeContext &n) {
  if (!n.hasAttr("softmax_precision"))
    return std::nullopt;
  auto dtype = dtypeFromOnnx((int32_t)n.attrInt("softmax_precision", 1));
  if (!dtype || !isFloat(*dtype))
    n.fail("softmax_precision must name a floating-point type");
  return typeFromDType(n.context(), *dtype);
}

/// FlexAttention (ai.onnx.preview 1): softmax(score_mod(scale * Q K^T)) V with optional
/// subgraphs: `score_mod` maps the scores [B, H, L, S] and `prob_mod` the probabilities, each
/// imported inline. K and V heads repeat for grouped queries; the scores and softmax are in
/// f32 for 16-bit inputs (or `softmax_precision`), as in ONNX's reference; sqrt(scale) goes on
/// Q and on K.
void lowerFlexAttention(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value q = n.input(0), k = n.input(1), v = n.input(2);
  requireFloat(n, q, "Q");
  Type t = CoreBuilder::elementTypeOf(q);
  if (CoreBuilder::elementTypeOf(k) != t || CoreBuilder::elementTypeOf(v) != t)
    n.fail("Q, K and V must have one element type");
  if (n.inputRank(0) != 4 || n.inputRank(1) != 4 || n.inputRank(2) != 4)
    n.fail("Q, K and V must be [B, H, sequence, head size]");
  Shape64 qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  if (ks[1] != vs[1] || ks[2] != vs[2] || ks[3] != qs[3] || qs[1] % ks[1] != 0)
    n.fail("K and V must share heads and length, K the head size of Q, and Q's heads be a "
           "multiple of K's");
  if (qs[1] != ks[1]) {
    k = repeatHeads(b, k, qs[1] / ks[1]);
    v = repeatHeads(b, v, qs[1] / ks[1]);
  }
  double scale = n.hasAttr("scale") ? n.attrFloat("scale", 0.0) : 1.0 / std::sqrt((double)qs[3]);
  Type ct = softmaxPrecision(n).value_or(t.getIntOrFloatBitWidth() < 32 ? b.builder().getF32Type() : t);
  Value root = b.scalarLike(q, std::sqrt((double)(float)scale));
  Value scores = b.matmul(b.mul(q, root), b.transpose(b.mul(k, root), {0, 1, 3, 2}));
  scores = b.cast(scores, ct);
  auto applyMod = [&](const char *name, Value x) {
    if (!n.hasAttr(name))
      return x;
    std::vector<Value> out = n.inlineSubgraph(n.attrGraph(name), {x}, name);
    if (out.size() != 1 || CoreBuilder::shapeOf(out[0]) != CoreBuilder::shapeOf(x))
      n.fail(std::string(name) + " must give one tensor of its input's shape");
    return b.cast(out[0], ct);
  };
  scores = applyMod("score_mod", scores);
  Value shifted = b.sub(scores, b.reduce(ReduceKind::Max, scores, {3}, true));
  Value e = b.unary(UnaryKind::Exp, shifted);
  Value probs = applyMod("prob_mod", b.div(e, b.reduce(ReduceKind::Sum, e, {3}, true)));
  n.setOutput(0, b.cast(b.matmul(probs, b.cast(v, ct)), t));
}

void lowerAttention(NodeContext &n) {
  CoreBuilder &b = n.b();
  Value q = n.input(0), k = n.input(1), v = n.input(2);
  requireFloat(n, q, "Q");
  int64_t rank = n.inputRank(0);
  if (rank != 3 && rank != 4)
    n.fail("Q must have rank 3 or 4, got " + std::to_string(rank));
  if (n.inputRank(1) != rank || n.inputRank(2) != rank)
    n.fail("Q, K and V must have the same rank");
  Type t = CoreBuilder::elementTypeOf(q);
  if (CoreBuilder::elementTypeOf(k) != t || CoreBuilder::elementTypeOf(v) != t)
    n.fail("Q, K and V must have one element type");
  int64_t leftWindow = n.attrInt("left_window_size", -1), rightWindow = n.attrInt("right_window_size", -1);
  if (leftWindow < -1 || rightWindow < -1)
    n.fail("left_window_size and right_window_size must be -1 (unbounded) or >= 0");
  if (rank == 3) {
    int64_t qHeads = n.attrInt("q_num_heads", 0), kvHeads = n.attrInt("kv_num_heads", 0);
    if (qHeads <= 0 || kvHeads <= 0)
      n.fail("rank-3 inputs need q_num_heads and kv_num_heads");
    for (auto [x, heads, what] : {std::tuple{q, qHeads, "Q"}, {k, kvHeads, "K"}, {v, kvHeads, "V"}})
      if (shapeOf(x)[2] % heads)
        n.fail(std::string(what) + "'s hidden size " + std::to_string(shapeOf(x)[2]) +
               " is not a multiple of its " + std::to_string(heads) + " heads");
    q = splitHeads(b, q, qHeads);
    k = splitHeads(b, k, kvHeads);
    v = splitHeads(b, v, kvHeads);
  }
  Shape64 qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  int64_t batch = qs[0], qHeads = qs[1], lq = qs[2], d = qs[3];
  if (ks[0] != batch || vs[0] != batch || ks[3] != d || vs[1] != ks[1] || vs[2] != ks[2])
    n.fail("K [B, Hkv, Lk, D] and V [B, Hkv, Lk, Dv] do not fit Q [B, Hq, Lq, D]");
  if (qHeads % ks[1])
    n.fail("the " + std::to_string(qHeads) + " query heads are not a multiple of the " +
           std::to_string(ks[1]) + " key/value heads");

  // The key/value cache: present = concat(past, new) along the sequence.
  bool past = n.hasInput(4) || n.hasInput(5);
  int64_t pastLength = 0;
  if (past) {
    if (!n.hasInput(4) || !n.hasInput(5))
      n.fail("past_key and past_value must be given together");
    pastLength = shapeOf(n.input(4))[2];
    k = b.concat({n.input(4), k}, 2);
    v = b.concat({n.input(5), v}, 2);
  }
  if (n.hasOutput(1))
    n.setOutput(1, k);
  if (n.hasOutput(2))
    n.setOutput(2, v);
  int64_t lk = shapeOf(k)[2], reps = qHeads / shapeOf(k)[1];

  double scale = n.attrFloat("scale", 1.0 / std::sqrt((double)d));
  bool causal = n.attrInt("is_causal", 0) != 0;
  double softcap = n.attrFloat("softcap", 0.0);
  int64_t qkMode = n.attrInt("qk_matmul_output_mode", 0);
  std::optional<Type> softmaxType = softmaxPrecision(n);

  // The mask, padded along the keys to Lk (with false or -inf) and made rank 4.
  Value mask;
  bool boolMask = false;
  if (n.hasInput(3)) {
    mask = n.input(3);
    Shape64 m = shapeOf(mask);
    if (m.empty() || m.size() > 4)
      n.fail("attn_mask must have rank 1 to 4");
    boolMask = CoreBuilder::elementTypeOf(mask).isInteger(1);
    if (!boolMask && CoreBuilder::elementTypeOf(mask) != t)
      n.fail("attn_mask must be bool or Q's type");
    if (m.back() > lk)
      n.fail("attn_mask covers " + std::to_string(m.back()) + " keys, more than the " +
             std::to_string(lk));
    if (m.back() < lk) {
      Shape64 padShape = m;
      padShape.back() = lk - m.back();
      Value pad = boolMask ? b.cast(b.splat(RankedTensorType::get(padShape, t), 0), b.builder().getI1Type())
                           : b.splat(RankedTensorType::get(padShape, t), -INFINITY);
      mask = b.concat({mask, pad}, m.size() - 1);
    }
    mask = toRank4(b, mask);
  }
  Value nonpad = n.hasInput(6) ? b.cast(n.input(6), b.builder().getI64Type()) : Value();
  if (nonpad && past)
    n.fail("nonpad_kv_seqlen cannot be combined with past_key/past_value");

  // The fused op where its semantics are the whole node's.
  bool fusable = softcap == 0 && !n.hasOutput(3) && !nonpad && !(causal && past) &&
                 (!softmaxType || *softmaxType == t) && leftWindow < 0 && rightWindow < 0;
  if (fusable) {
    Value boolArg = boolMask ? mask : Value(), biasArg = boolMask ? Value() : mask;
    Value y = b.create<AttentionOp>(q, k, v, boolArg, biasArg, b.builder().getF64FloatAttr(scale),
                                    causal ? b.builder().getUnitAttr() : UnitAttr(),
                                    b.builder().getF64FloatAttr(-INFINITY));
    if (mask) { // a fully masked query row is zeros, not the fused softmax's NaN
      Value allowed = boolMask ? mask
                               : b.compare(CompareKind::Gt, mask, b.splatLike(mask, -INFINITY));
      if (causal) { // key j is visible to query i iff j <= i
        Type i64 = b.builder().getI64Type();
        Value visible = b.compare(CompareKind::Le, b.iota({1, 1, lq, lk}, i64, 3),
                                  b.iota({1, 1, lq, lk}, i64, 2));
        allowed = b.binary(BinaryKind::And, b.broadcastTo(allowed, broadcastShape(allowed, lq, lk)),
                           b.broadcastTo(visible, broadcastShape(allowed, lq, lk)));
      }
      Value any = b.reduce(ReduceKind::Max, b.cast(allowed, t), {3}, true);
      Value rowMasked = b.compare(CompareKind::Eq, any, b.splatLike(any, 0));
      y = b.select(b.broadcastTo(rowMasked, shapeOf(y)), b.splatLike(y, 0), y);
    }
    n.setOutput(0, rank == 3 ? mergeHeads(b, y) : y);
    return;
  }

  // The general form, step by step as the specification writes it.
  if (reps > 1) {
    k = repeatHeads(b, k, reps);
    v = repeatHeads(b, v, reps);
  }
  Value root = b.scalarLike(q, std::sqrt(scale));
  Value scores = b.matmul(b.mul(q, root), b.transpose(b.mul(k, root), {0, 1, 3, 2}));
  if (softcap > 0) {
    Value cap = b.scalarLike(scores, softcap);
    scores = b.mul(b.unary(UnaryKind::Tanh, b.div(scores, cap)), cap);
  }
  // The additive bias [.., Lq, Lk]: the mask (true -> 0, false -> -inf), then the causal
  // triangle aligned bottom-right (key j visible to query i iff j <= i + offset), the sliding
  // windows (opset 25), then the padding of nonpad_kv_seqlen.
  auto additive = [&](Value allowed) {
    return b.select(allowed, b.splat(RankedTensorType::get(shapeOf(allowed), t), 0),
                    b.splat(RankedTensorType::get(shapeOf(allowed), t), -INFINITY));
  };
  Value bias = b.splat(RankedTensorType::get({1, 1, lq, lk}, t), 0);
  if (mask)
    bias = b.add(bias, boolMask ? additive(mask) : mask);
  Type i64 = b.builder().getI64Type();
  Value row = b.iota({1, 1, lq, lk}, i64, 2), col = b.iota({1, 1, lq, lk}, i64, 3);
  // The query's position among the keys: i + offset (the cache's length, or per batch
  // nonpad_kv_seqlen - Lq).
  Value offset = nonpad ? b.reshape(b.sub(nonpad, b.scalarLike(nonpad, (double)lq)), {batch, 1, 1, 1})
                        : b.constantI64({pastLength}, {1, 1, 1, 1});
  Value position = b.add(row, offset);
  if (causal)
    bias = b.add(bias, additive(b.compare(CompareKind::Le, col, position)));
  // Sliding windows: key j is visible iff position - left <= j <= position + right.
  if (leftWindow >= 0)
    bias = b.add(bias, additive(b.compare(CompareKind::Ge, col,
                                          b.sub(position, b.scalarLike(position, (double)leftWindow)))));
  if (rightWindow >= 0)
    bias = b.add(bias, additive(b.compare(CompareKind::Le, col,
                                          b.add(position, b.scalarLike(position, (double)rightWindow)))));
  if (nonpad)
    bias = b.add(bias, additive(b.compare(CompareKind::Lt, col, b.reshape(nonpad, {batch, 1, 1, 1}))));
  Value withBias = b.add(scores, bias);
  Value probabilities = softmaxType ? b.cast(safeSoftmax(b, b.cast(withBias, *softmaxType)), t)
                                    : safeSoftmax(b, withBias);
  // A query row whose bias is all -inf sees no key: zeros (decided on the bias, not the scores).
  Value biasMax = b.reduce(ReduceKind::Max, bias, {3}, true);
  Value rowMasked = b.compare(CompareKind::Eq, biasMax, b.splatLike(biasMax, -INFINITY));
  probabilities = b.select(b.broadcastTo(rowMasked, shapeOf(probabilities)),
                           b.splatLike(probabilities, 0), probabilities);
  if (n.hasOutput(3)) {
    Value out = qkMode == 3 ? probabilities : qkMode == 2 ? withBias : scores;
    if (qkMode < 0 || qkMode > 3)
      n.fail("qk_matmul_output_mode must be 0 to 3, got " + std::to_string(qkMode));
    n.setOutput(3, b.broadcastTo(out, shapeOf(withBias)));
  }
  Value y = b.matmul(probabilities, v);
  n.setOutput(0, rank == 3 ? mergeHeads(b, y) : y);
}

} // namespace

void registerTransformerOps(OpRegistry &r) {
  r.add("RMSNormalization", lowerRMSNormalization);
  r.add("RotaryEmbedding", lowerRotaryEmbedding);
  r.add("Attention", lowerAttention);
  r.add("LinearAttention", lowerLinearAttention);
  r.add("TensorScatter", lowerTensorScatter);
  r.add("FlexAttention", lowerFlexAttention, "ai.onnx.preview");
}

} // namespace tcc::onnx_import
