"""Writes ONNX models holding scaled dot-product attention in the forms exporters write, into
argv[1] (for recognize-attention.test). Run with Debian's /usr/bin/python3 (python3-onnx,
python3-numpy): opset 17.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
F, B = TensorProto.FLOAT, TensorProto.BOOL


def const(name, array, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(array, dtype=dtype), name)


def info(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def save(name, nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name + ".onnx"))


def softmax_pv(scores, v="v", out_name="o"):
    return [node("Softmax", [scores], ["p"], axis=-1), node("MatMul", ["p", v], [out_name])]


# BERT (HF): x [2, 6, 32] -> q/k/v heads [2, 4, 6, 8] by Reshape + Transpose, scores divided by
# sqrt(8), an additive padding mask [2, 1, 1, 6] (an input), heads merged back.
heads = []
for t in "qkv":
    heads += [node("Reshape", [t + "x", "split"], [t + "r"]),
              node("Transpose", [t + "r"], [t], perm=[0, 2, 1, 3])]
save("bert", heads + [
    node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
    node("MatMul", ["q", "kt"], ["s0"]),
    node("Div", ["s0", "sqrt_d"], ["s1"]),
    node("Add", ["s1", "mask"], ["s2"]),
    *softmax_pv("s2"),
    node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
    node("Reshape", ["ot", "merge"], ["y"])],
    [info("qx", [2, 6, 32]), info("kx", [2, 6, 32]), info("vx", [2, 6, 32]), info("mask", [2, 1, 1, 6])],
    [info("y", [2, 6, 32])],
    [const("split", [2, 6, 4, 8], np.int64), const("merge", [2, 6, 32], np.int64),
     const("sqrt_d", np.sqrt(8.0))])

# GPT-2 (HF): Where(causal triangle constant, scores, lowest float), then an additive mask.
tri = np.tril(np.ones((5, 5), dtype=bool))[None, None]
qkv = [info(t, [1, 2, 5, 4]) for t in "qkv"]
save("gpt2", [
    node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
    node("MatMul", ["q", "kt"], ["s0"]),
    node("Div", ["s0", "two"], ["s1"]),
    node("Where", ["tri", "s1", "lowest"], ["s2"]),
    node("Add", ["s2", "mask"], ["s3"]),
    *softmax_pv("s3")],
    qkv + [info("mask", [1, 1, 1, 5])], [info("o", [1, 2, 5, 4])],
    [const("tri", tri, bool), const("two", 2.0), const("lowest", np.finfo(np.float32).min)])

# masked_fill(pad, -inf): Where(pad, -inf, scores) with a boolean input: the mask is its negation.
save("masked_fill", [
    node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
    node("MatMul", ["q", "kt"], ["s0"]),
    node("Where", ["pad", "ninf", "s0"], ["s1"]),
    *softmax_pv("s1")],
    qkv + [info("pad", [1, 1, 1, 5], B)], [info("o", [1, 2, 5, 4])],
    [const("ninf", -np.inf)])

# torch's SDPA export: q and k^T each scaled by sqrt(scale), no scaling of the scores.
save("sdpa", [
    node("Mul", ["q", "root"], ["qs"]),
    node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
    node("Mul", ["kt", "root"], ["kts"]),
    node("MatMul", ["qs", "kts"], ["s0"]),
    *softmax_pv("s0")],
    qkv, [info("o", [1, 2, 5, 4])], [const("root", np.sqrt(0.5))])

# Grouped-query attention (Llama's repeat_kv): k, v [1, 2, 5, 4] unsqueezed, expanded to
# [1, 2, 3, 5, 4] and reshaped to 6 heads; q has 6 heads.
rep = []
for t in "kv":
    rep += [node("Unsqueeze", [t, "axis2"], [t + "u"]),
            node("Expand", [t + "u", "wide"], [t + "e"]),
            node("Reshape", [t + "e", "six"], [t + "6"])]
save("gqa", rep + [
    node("Transpose", ["k6"], ["kt"], perm=[0, 1, 3, 2]),
    node("MatMul", ["q", "kt"], ["s0"]),
    node("Mul", ["s0", "half"], ["s1"]),
    *softmax_pv("s1", v="v6")],
    [info("q", [1, 6, 5, 4]), info("k", [1, 2, 5, 4]), info("v", [1, 2, 5, 4])],
    [info("o", [1, 6, 5, 4])],
    [const("axis2", [2], np.int64), const("wide", [1, 2, 3, 5, 4], np.int64),
     const("six", [1, 6, 5, 4], np.int64), const("half", 0.5)])

# A causal mask computed from a range, too large to fold (1100 x 1100 > max-fold-elements):
# keep = col <= row.
L = 1100
save("causal_range", [
    node("Range", ["zero", "len", "one"], ["idx"]),
    node("Unsqueeze", ["idx", "axis0"], ["col"]),
    node("Unsqueeze", ["idx", "axis1"], ["row"]),
    node("LessOrEqual", ["col", "row"], ["keep"]),
    node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
    node("MatMul", ["q", "kt"], ["s0"]),
    node("Where", ["keep", "s0", "ninf"], ["s1"]),
    *softmax_pv("s1")],
    [info(t, [1, 1, L, 4]) for t in "qkv"], [info("o", [1, 1, L, 4])],
    [const("zero", 0, np.int64), const("len", L, np.int64), const("one", 1, np.int64),
     const("axis0", [0], np.int64), const("axis1", [1], np.int64), const("ninf", -np.inf)])

# Keys given already transposed ([.., D, Lk]): a transpose is inserted.
save("keys_transposed", [node("MatMul", ["q", "kt"], ["s0"]), *softmax_pv("s0")],
     [info("q", [2, 5, 4]), info("kt", [2, 4, 7]), info("v", [2, 7, 3])], [info("o", [2, 5, 3])])

# Not attention: the probabilities are also an output (they must be materialised), and a scale
# applied after the mask (it would scale the mask too).
save("probs_output", [
    node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
    node("MatMul", ["q", "kt"], ["s0"]),
    *softmax_pv("s0")],
    qkv, [info("o", [1, 2, 5, 4]), info("p", [1, 2, 5, 5])])
save("scale_after_mask", [
    node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
    node("MatMul", ["q", "kt"], ["s0"]),
    node("Add", ["s0", "mask"], ["s1"]),
    node("Mul", ["s1", "half"], ["s2"]),
    *softmax_pv("s2")],
    qkv + [info("mask", [1, 1, 5, 5])], [info("o", [1, 2, 5, 4])], [const("half", 0.5)])
