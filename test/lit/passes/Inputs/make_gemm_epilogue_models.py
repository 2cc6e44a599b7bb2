"""Writes small ONNX models whose GEMM epilogues cuBLASLt can (or cannot) compute, into argv[1].

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy). Gelu needs opset 20, newer than
this onnx's checker knows, so the models are saved unchecked (tcc's importer takes them).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(0)


def tensor(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def save(name, nodes, inputs, outputs, initializers, opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, os.path.join(out, name + ".onnx"))


x2 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])
y2 = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
x3 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 16])
y3 = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 8])
w = tensor("W", rng.standard_normal((8, 16)))
b = tensor("B", rng.standard_normal((8,)))
wt = tensor("WT", rng.standard_normal((16, 8)))

# nn.Linear + ReLU as ONNX Gemm (transB, C of shape [N]) + Relu.
save("gemm_relu", [helper.make_node("Gemm", ["x", "W", "B"], ["g"], transB=1),
                   helper.make_node("Relu", ["g"], ["y"])], [x2], [y2], [w, b])
# Gelu (opset 20), tanh approximation and the default erf form.
for name, attrs in [("gemm_gelu_tanh", {"approximate": "tanh"}), ("gemm_gelu_erf", {})]:
    save(name, [helper.make_node("Gemm", ["x", "W", "B"], ["g"], transB=1),
                helper.make_node("Gelu", ["g"], ["y"], **attrs)], [x2], [y2], [w, b], opset=20)
# Gemm with alpha and C of shape [1, N] given as a graph input.
c = helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 8])
save("gemm_alpha_c", [helper.make_node("Gemm", ["x", "W", "c"], ["y"], transB=1, alpha=0.5)],
     [x2, c], [y2], [w])
# nn.Linear on a 3-d input as PyTorch exports it (MatMul + Add) + Relu: a batched GEMM.
save("linear3d_relu", [helper.make_node("MatMul", ["x", "WT"], ["m"]),
                       helper.make_node("Add", ["m", "B"], ["a"]),
                       helper.make_node("Relu", ["a"], ["y"])], [x3], [y3], [wt, b])
# The tanh GELU as older PyTorch exports decompose it (Pow, Mul, Tanh, Add), on a 3-d Linear.
save("linear3d_torch_gelu_tanh", [
    helper.make_node("MatMul", ["x", "WT"], ["m"]), helper.make_node("Add", ["m", "B"], ["a"]),
    helper.make_node("Pow", ["a", "three"], ["p"]), helper.make_node("Mul", ["p", "k"], ["kp"]),
    helper.make_node("Add", ["a", "kp"], ["s"]), helper.make_node("Mul", ["s", "sq"], ["i"]),
    helper.make_node("Tanh", ["i"], ["t"]), helper.make_node("Add", ["t", "one"], ["o"]),
    helper.make_node("Mul", ["a", "half"], ["h"]), helper.make_node("Mul", ["h", "o"], ["y"])],
    [x3], [y3], [wt, b, tensor("three", 3.0), tensor("k", 0.044715),
                 tensor("sq", 0.7978845608028654), tensor("one", 1.0), tensor("half", 0.5)])
