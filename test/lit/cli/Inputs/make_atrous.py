"""Writes a DeepLab-style atrous pyramid for the live-tap tests (Debian's python3).

  make_atrous.py OUT.onnx

x[1, 128, 16, 15] -> 3x3 convolutions + bias + Relu, "same" padding: at dilations 6, 12 and 24
(every tap partly live, the same at a larger rate, the centre alone) -> Concat -> y[1, 192, 16,
15]; and grouped (2 groups) at dilation (12, 5) with stride (2, 1) -> z[1, 64, 8, 15]. Seeded
weights.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(11)
inits, nodes = [], []


def const(name, array):
    inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))
    return name


def branch(name, cin, cout, dilations, strides=(1, 1), group=1):
    w = const(name + "_w", rng.standard_normal([cout, cin // group, 3, 3]) / np.sqrt(cin // group * 9))
    b = const(name + "_b", rng.uniform(-0.1, 0.1, cout))
    nodes.append(helper.make_node("Conv", ["x", w, b], [name + "_c"], name=name, strides=list(strides),
                                  dilations=list(dilations), group=group,
                                  pads=[dilations[0], dilations[1], dilations[0], dilations[1]]))
    nodes.append(helper.make_node("Relu", [name + "_c"], [name + "_r"], name=name + "_relu"))
    return name + "_r"


pyramid = [branch("d6", 128, 64, (6, 6)), branch("d12", 128, 64, (12, 12)), branch("d24", 128, 64, (24, 24))]
strided = branch("g", 128, 64, (12, 5), strides=(2, 1), group=2)
nodes.append(helper.make_node("Identity", [strided], ["z"], name="z"))
nodes.append(helper.make_node("Concat", pyramid, ["y"], name="cat", axis=1))
graph = helper.make_graph(nodes, "atrous",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128, 16, 15])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 192, 16, 15]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 64, 8, 15])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 7
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
