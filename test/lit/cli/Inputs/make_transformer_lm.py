"""Writes a small decoder-only transformer language model and data for training tests.

  make_transformer_lm.py OUT [--layers N] [--seq L] [--dim D] [--samples N]

OUT/lm.onnx   tokens x[B, L] (f32 token ids) -> Cast -> embedding Gather + learned positions ->
              N pre-LayerNorm blocks (causal self-attention with 4 heads in the exporters'
              MatMul/Where/Softmax/MatMul form, then a GELU MLP of 4D, each with a residual) ->
              LayerNorm -> the last position -> logits [B, V]: the next token.
OUT/data/     train/test .npy: token sequences t[i+1] = (t[i] + k) mod V, k drawn per sequence,
              labels the token after the last.
Debian's python3 (numpy, onnx) is enough. Seeded: the same files every run.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--seq", type=int, default=32)
ap.add_argument("--dim", type=int, default=32)
ap.add_argument("--vocab", type=int, default=16)
ap.add_argument("--samples", type=int, default=256)
args = ap.parse_args()
os.makedirs(os.path.join(args.out, "data"), exist_ok=True)
rng = np.random.default_rng(7)
V, L, D, H = args.vocab, args.seq, args.dim, 4
Dh = D // H
nodes, inits = [], []


def init(name, array):
    inits.append(numpy_helper.from_array(np.asarray(array), name))
    return name


def weight(name, shape):
    return init(name, (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32))


def node(op, ins, out, **attrs):
    nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
    return out


def const(name, value, dtype=np.float32):
    nodes.append(helper.make_node("Constant", [], [name], name=name,
                                  value=numpy_helper.from_array(np.asarray(value, dtype), name)))
    return name


def layer_norm(x, prefix):
    return node("LayerNormalization", [x, init(prefix + "_g", np.ones(D, np.float32)),
                                       init(prefix + "_b", np.zeros(D, np.float32))],
                prefix + "_out", axis=-1, epsilon=1e-5)


init("split_heads", np.array([0, L, H, Dh], np.int64))
init("merge_heads", np.array([0, L, D], np.int64))
init("tri", np.tril(np.ones((L, L), bool))[None, None])
const("scale", 1 / np.sqrt(Dh))
const("ninf", -np.inf)
const("half", 0.5)
const("one", 1.0)
const("rsqrt2", 1 / np.sqrt(2))

ids = node("Cast", ["x"], "ids", to=TensorProto.INT64)
h = node("Gather", [weight("embedding", [V, D]), ids], "embedded")
h = node("Add", [h, weight("positions", [L, D])], "h0")
for i in range(args.layers):
    p = f"l{i}"
    a = layer_norm(h, p + "_ln1")
    heads = []
    for t in "qkv":
        proj = node("MatMul", [a, weight(f"{p}_w{t}", [D, D])], f"{p}_{t}x")
        r = node("Reshape", [proj, "split_heads"], f"{p}_{t}r")
        heads.append(node("Transpose", [r], f"{p}_{t}", perm=[0, 2, 1, 3]))
    kt = node("Transpose", [heads[1]], p + "_kt", perm=[0, 1, 3, 2])
    s = node("MatMul", [heads[0], kt], p + "_s0")
    s = node("Mul", [s, "scale"], p + "_s1")
    s = node("Where", ["tri", s, "ninf"], p + "_s2")
    pr = node("Softmax", [s], p + "_p", axis=-1)
    o = node("MatMul", [pr, heads[2]], p + "_o")
    o = node("Transpose", [o], p + "_ot", perm=[0, 2, 1, 3])
    o = node("Reshape", [o, "merge_heads"], p + "_m")
    o = node("MatMul", [o, weight(p + "_wo", [D, D])], p + "_proj")
    h = node("Add", [h, o], p + "_res1")
    m = layer_norm(h, p + "_ln2")
    f = node("Add", [node("MatMul", [m, weight(p + "_w1", [D, 4 * D])], p + "_fc1"),
                     init(p + "_b1", np.zeros(4 * D, np.float32))], p + "_fc1b")
    g = node("Erf", [node("Mul", [f, "rsqrt2"], p + "_fs")], p + "_erf")
    g = node("Mul", [node("Mul", [f, "half"], p + "_fh"), node("Add", [g, "one"], p + "_e1")],
             p + "_gelu")
    f = node("MatMul", [g, weight(p + "_w2", [4 * D, D])], p + "_fc2")
    h = node("Add", [h, f], p + "_res2")
h = layer_norm(h, "final")
last = node("Gather", [h, init("last", np.array(L - 1, np.int64))], "last_token", axis=1)
node("MatMul", [last, weight("unembed", [D, V])], "logits")

graph = helper.make_graph(
    nodes, "transformer_lm",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", L])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", V])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(args.out, "lm.onnx"))


def sequences(n):
    start = rng.integers(0, V, n)
    step = rng.integers(1, 4, n)
    tokens = (start[:, None] + step[:, None] * np.arange(L + 1)[None]) % V
    return tokens[:, :L].astype(np.float32), tokens[:, L].astype(np.int64)


for split, n in (("train", args.samples), ("test", args.samples // 4)):
    x, y = sequences(n)
    np.save(os.path.join(args.out, "data", f"{split}_images.npy"), x)
    np.save(os.path.join(args.out, "data", f"{split}_labels.npy"), y)
