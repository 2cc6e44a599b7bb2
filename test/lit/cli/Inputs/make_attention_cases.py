"""Writes ONNX backend-test-style cases (model.onnx, test_data_set_0/{input,output}_N.pb) of
16-bit attention into argv[1], for cuda-attention-emulated.test: the CUDA backend runs them with
its generated FlashAttention kernel. Run with Debian's /usr/bin/python3 (python3-onnx,
python3-numpy): opset 17, expected outputs computed in float64 from the 16-bit inputs.

  gpt2_f16:  f16 inputs [1, 2, 80, 64], causal as GPT-2 writes it (Where over a constant
             lower triangle, filled with f16's lowest value), scores scaled by 1/8.
  bert_f16:  f16 inputs [2, 2, 40, 32], an additive padding bias [2, 1, 1, 40] (an input).
  bert_f32:  the same in f32 (cpu-precision.test: --precision bf16 keeps the bias f32).
  gqa_bf16:  f32 inputs cast to bf16 in the graph: q [1, 4, 70, 64], k/v [1, 2, 70, 64]
             repeated to 4 heads (Unsqueeze, Expand, Reshape), a boolean padding mask [1, 1, 1,
             70] (masked_fill with -inf); the result cast back to f32.
  block_f16: a causal self-attention block [2, 40, 64], 2 heads: QKV projection, attention,
             output projection with a bias, all f16 (reference rounded to f16 after each op).
  block_f32: the same block in f32 (for --precision fp16/bf16).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(20261127)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def bf16_round(x):
    """float32 -> the nearest bf16 (ties to even), as float32."""
    bits = np.asarray(x, np.float32).reshape(-1).view(np.uint32).astype(np.uint64)
    bits = (bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
    return bits.astype(np.uint32).view(np.float32).reshape(np.shape(x))


def reference(q, k, v, scale, causal=False, mask=None, bias=None):
    """softmax(scale q k^T [causal] [mask -> -inf] [+ bias]) v in float64; heads of k/v
    repeated to q's."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = scale * q @ np.swapaxes(k, -1, -2)
    if causal:
        lq, lk = s.shape[-2:]
        s = np.where(np.tril(np.ones((lq, lk), bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    if bias is not None:
        s = s + bias
    s = np.exp(s - s.max(-1, keepdims=True))
    return (s / s.sum(-1, keepdims=True)) @ v


def save(name, nodes, inputs, outputs, feeds, expected, initializers=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for i, (vi, a) in enumerate(zip(inputs, feeds)):
        t = numpy_helper.from_array(a, vi.name)
        with open(os.path.join(d, "test_data_set_0", "input_%d.pb" % i), "wb") as f:
            f.write(t.SerializeToString())
    t = numpy_helper.from_array(expected, outputs[0].name)
    with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(t.SerializeToString())


H16, F, B = TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.BOOL

# GPT-2, f16.
shape = [1, 2, 80, 64]
q, k, v = (rng.uniform(-1, 1, shape).astype(np.float16) for _ in range(3))
tri = np.tril(np.ones((80, 80), bool))[None, None]
save("gpt2_f16", [
    node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
    node("MatMul", ["q", "kt"], ["s0"]),
    node("Div", ["s0", "sqrt_d"], ["s1"]),
    node("Where", ["tri", "s1", "lowest"], ["s2"]),
    node("Softmax", ["s2"], ["p"], axis=-1),
    node("MatMul", ["p", "v"], ["y"])],
    [helper.make_tensor_value_info(n, H16, shape) for n in "qkv"],
    [helper.make_tensor_value_info("y", H16, shape)],
    [q, k, v], reference(q, k, v, 1 / 8, causal=True).astype(np.float16),
    [numpy_helper.from_array(tri, "tri"),
     numpy_helper.from_array(np.array(8, np.float16), "sqrt_d"),
     numpy_helper.from_array(np.array(np.finfo(np.float16).min, np.float16), "lowest")])

# BERT padding bias, f16.
shape, bshape = [2, 2, 40, 32], [2, 1, 1, 40]
q, k, v = (rng.uniform(-1, 1, shape).astype(np.float16) for _ in range(3))
bias = np.zeros(bshape, np.float16)
bias[1, ..., 25:] = -10000
def bert(name, dtype, elem):
    """The BERT case with q, k, v and the bias in `dtype` (ONNX type `elem`)."""
    ins = [a.astype(dtype) for a in (q, k, v, bias)]
    save(name, [
        node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        node("MatMul", ["q", "kt"], ["s0"]),
        node("Mul", ["s0", "scale"], ["s1"]),
        node("Add", ["s1", "bias"], ["s2"]),
        node("Softmax", ["s2"], ["p"], axis=-1),
        node("MatMul", ["p", "v"], ["y"])],
        [helper.make_tensor_value_info(n, elem, shape) for n in "qkv"] +
        [helper.make_tensor_value_info("bias", elem, bshape)],
        [helper.make_tensor_value_info("y", elem, shape)],
        ins, reference(*ins[:3], float(dtype(1 / np.sqrt(32))), bias=ins[3]).astype(dtype),
        [numpy_helper.from_array(np.array(1 / np.sqrt(32), dtype), "scale")])


bert("bert_f16", np.float16, H16)
# The same in f32 (for --precision bf16 on the CPU: the bias stays f32 there).
bert("bert_f32", np.float32, F)

# Grouped-query attention with a boolean padding mask, bf16 inside an f32 graph.
qs, kvs, ms = [1, 4, 70, 64], [1, 2, 70, 64], [1, 1, 1, 70]
q = rng.uniform(-1, 1, qs).astype(np.float32)
k, v = (rng.uniform(-1, 1, kvs).astype(np.float32) for _ in range(2))
pad = np.ones(ms, bool)
pad[..., 60:] = False
nodes = [node("Cast", [n], [n + "16"], to=TensorProto.BFLOAT16) for n in "qkv"]
for n in "kv":
    nodes += [node("Unsqueeze", [n + "16", "axis2"], [n + "u"]),
              node("Expand", [n + "u", "rep_shape"], [n + "e"]),
              node("Reshape", [n + "e", "heads"], [n + "r"])]
nodes += [
    node("Transpose", ["kr"], ["kt"], perm=[0, 1, 3, 2]),
    node("MatMul", ["q16", "kt"], ["s0"]),
    node("Mul", ["s0", "scale"], ["s1"]),
    node("Not", ["pad"], ["masked"]),
    node("Where", ["masked", "ninf", "s1"], ["s2"]),
    node("Softmax", ["s2"], ["p"], axis=-1),
    node("MatMul", ["p", "vr"], ["o16"]),
    node("Cast", ["o16"], ["y"], to=F)]
scale = float(bf16_round(np.float32(1 / 8)))
save("gqa_bf16", nodes,
     [helper.make_tensor_value_info("q", F, qs), helper.make_tensor_value_info("k", F, kvs),
      helper.make_tensor_value_info("v", F, kvs), helper.make_tensor_value_info("pad", B, ms)],
     [helper.make_tensor_value_info("y", F, qs)],
     [q, k, v, pad],
     reference(bf16_round(q), bf16_round(k), bf16_round(v), scale, mask=pad).astype(np.float32),
     [helper.make_tensor("axis2", TensorProto.INT64, [1], [2]),
      helper.make_tensor("rep_shape", TensorProto.INT64, [5], [1, 2, 2, 70, 64]),
      helper.make_tensor("heads", TensorProto.INT64, [4], [1, 4, 70, 64]),
      helper.make_tensor("scale", TensorProto.BFLOAT16, [], [scale]),
      helper.make_tensor("ninf", TensorProto.BFLOAT16, [], [-np.inf])])

# The same block in f32 (for --precision): x, weights and the float64 reference in f32.


def block(name, dtype, cast_each):
    """The block of `dtype` with the reference rounded by `cast_each` after every op."""
    xs = x.astype(dtype)
    wq, wo, bo = w_qkv.astype(dtype), w_o.astype(dtype), b_o.astype(dtype)
    qkv = cast_each(xs.astype(np.float64) @ wq.astype(np.float64))
    heads = [cast_each(qkv[..., i * E_:(i + 1) * E_]).reshape(B_, L_, H_, Dh).transpose(0, 2, 1, 3)
             for i in range(3)]
    scale = dtype(1 / np.sqrt(Dh))
    att = cast_each(reference(*heads, float(scale), causal=True))
    merged = att.transpose(0, 2, 1, 3).reshape(B_, L_, E_)
    expected = cast_each(cast_each(merged.astype(np.float64) @ wo.astype(np.float64)).astype(np.float64) + bo)
    nodes = [node("MatMul", ["x", "w_qkv"], ["qkv"]),
             node("Split", ["qkv", "split3"], ["qx", "kx", "vx"], axis=-1)]
    for t in "qkv":
        nodes += [node("Reshape", [t + "x", "split_heads"], [t + "r"]),
                  node("Transpose", [t + "r"], [t], perm=[0, 2, 1, 3])]
    nodes += [
        node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        node("MatMul", ["q", "kt"], ["s0"]),
        node("Mul", ["s0", "scale"], ["s1"]),
        node("Where", ["tri", "s1", "ninf"], ["s2"]),
        node("Softmax", ["s2"], ["p"], axis=-1),
        node("MatMul", ["p", "v"], ["o"]),
        node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        node("Reshape", ["ot", "merge_heads"], ["m"]),
        node("MatMul", ["m", "w_o"], ["proj"]),
        node("Add", ["proj", "b_o"], ["y"])]
    et = H16 if dtype == np.float16 else F
    save(name, nodes, [helper.make_tensor_value_info("x", et, [B_, L_, E_])],
         [helper.make_tensor_value_info("y", et, [B_, L_, E_])], [xs], expected,
         [numpy_helper.from_array(wq, "w_qkv"), numpy_helper.from_array(wo, "w_o"),
          numpy_helper.from_array(bo, "b_o"),
          numpy_helper.from_array(np.array([E_] * 3, np.int64), "split3"),
          numpy_helper.from_array(np.array([B_, L_, H_, Dh], np.int64), "split_heads"),
          numpy_helper.from_array(np.array([B_, L_, E_], np.int64), "merge_heads"),
          numpy_helper.from_array(np.array(scale, dtype), "scale"),
          numpy_helper.from_array(np.tril(np.ones((L_, L_), bool))[None, None], "tri"),
          numpy_helper.from_array(np.array(-np.inf, dtype), "ninf")])


# A causal self-attention block in f16: one QKV projection (a 16-bit GEMM: cuBLASLt on CUDA),
# heads split, attention, heads merged, the output projection with a bias (a GEMM epilogue).
# The reference rounds to f16 after every op, as the f16 graph stores its values.
B_, L_, E_, H_ = 2, 40, 64, 2
Dh = E_ // H_
x = rng.uniform(-1, 1, [B_, L_, E_]).astype(np.float16)
w_qkv = (rng.uniform(-1, 1, [E_, 3 * E_]) / np.sqrt(E_)).astype(np.float16)
w_o = (rng.uniform(-1, 1, [E_, E_]) / np.sqrt(E_)).astype(np.float16)
b_o = rng.uniform(-0.5, 0.5, [E_]).astype(np.float16)


def f16(a):
    return np.asarray(a, np.float64).astype(np.float16)


block("block_f16", np.float16, f16)
block("block_f32", np.float32, lambda a: np.asarray(a, np.float64).astype(np.float32))
