"""Writes a small convolutional network for the --precision tests (Debian's python3).

  make_conv_net.py OUT.onnx

x[2, 8, 16, 16] -> Conv 3x3 stride 2 (8 -> 16) + bias -> Relu -> Conv 1x1 (16 -> 24) -> Relu
-> Conv 3x3 stride 1 (24 -> 24, an 8 x 8 output: the CPU runs it with Winograd in f32) -> Relu
-> depthwise Conv 3x3 (24 groups) -> y. Seeded weights.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(11)


def w(name, shape):
    fan_in = int(np.prod(shape[1:]))
    return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name)


inits = [w("w1", [16, 8, 3, 3]), numpy_helper.from_array(rng.uniform(-0.1, 0.1, 16).astype(np.float32), "b1"),
         w("w2", [24, 16, 1, 1]), w("w3", [24, 24, 3, 3]), w("w4", [24, 1, 3, 3])]
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"]),
    helper.make_node("Conv", ["r1", "w2"], ["c2"]),
    helper.make_node("Relu", ["c2"], ["r2"]),
    helper.make_node("Conv", ["r2", "w3"], ["c3"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c3"], ["r3"]),
    helper.make_node("Conv", ["r3", "w4"], ["y"], pads=[1, 1, 1, 1], group=24),
]
graph = helper.make_graph(nodes, "conv_net",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 24, 8, 8])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 7
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
