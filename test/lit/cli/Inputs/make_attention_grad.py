"""Writes OUT/attention.onnx and OUT/attention_x.pb for grad-attention.test (Debian's python3).

  make_attention_grad.py OUT [nobias]

With `nobias`, OUT/attention_nobias.onnx: the same layer without the bias (its attention's
gradient is then one tcc.attention_grad).

A causal self-attention layer as exporters write it: x [2, 6, 8] -> q, k, v projections
(Wq, Wk, Wv [8, 8]), heads split by Reshape + Transpose (2 heads of 4), scores divided by
sqrt(4), Where(constant causal triangle, scores, -inf), plus a learned additive bias B
[1, 2, 6, 6], Softmax, times v, heads merged, output projection Wo [8, 8].
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
with_bias = sys.argv[2:] != ["nobias"]
rng = np.random.default_rng(7)
f32 = lambda name, a: numpy_helper.from_array(np.asarray(a, np.float32), name)  # noqa: E731
i64 = lambda name, a: numpy_helper.from_array(np.asarray(a, np.int64), name)  # noqa: E731
nodes, inits = [], []
for t in "qkv":
    inits.append(f32("W" + t, rng.uniform(-0.6, 0.6, (8, 8))))
    nodes += [helper.make_node("MatMul", ["x", "W" + t], [t + "p"]),
              helper.make_node("Reshape", [t + "p", "split"], [t + "r"]),
              helper.make_node("Transpose", [t + "r"], [t], perm=[0, 2, 1, 3])]
# The scale and the fill are Constant nodes: float initializers would be trained parameters.
nodes += [helper.make_node("Constant", [], ["root"], value=f32("root", 2.0)),
          helper.make_node("Constant", [], ["ninf"], value=f32("ninf", -np.inf)),
          helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
          helper.make_node("MatMul", ["q", "kt"], ["s0"]),
          helper.make_node("Div", ["s0", "root"], ["s1"]),
          helper.make_node("Where", ["tri", "s1", "ninf"], ["s2"]),
          helper.make_node("Add", ["s2", "B"], ["s3"]) if with_bias else
          helper.make_node("Identity", ["s2"], ["s3"]),
          helper.make_node("Softmax", ["s3"], ["p"], axis=-1),
          helper.make_node("MatMul", ["p", "v"], ["o"]),
          helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
          helper.make_node("Reshape", ["ot", "merge"], ["om"]),
          helper.make_node("MatMul", ["om", "Wo"], ["y"])]
bias = f32("B", rng.uniform(-1, 1, (1, 2, 6, 6)))
inits += [bias] if with_bias else []
inits += [f32("Wo", rng.uniform(-0.6, 0.6, (8, 8))),
          i64("split", [2, 6, 2, 4]), i64("merge", [2, 6, 8]),
          numpy_helper.from_array(np.tril(np.ones((6, 6), bool))[None, None], "tri")]
graph = helper.make_graph(nodes, "attention",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 8])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(out, "attention.onnx" if with_bias else "attention_nobias.onnx"))
onnx.save_tensor(numpy_helper.from_array(rng.uniform(-1, 1, (2, 6, 8)).astype(np.float32), "x"),
                 os.path.join(out, "attention_x.pb"))
