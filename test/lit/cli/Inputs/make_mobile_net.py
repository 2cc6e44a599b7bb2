"""Writes a MobileNetV2-style network for the layout tests (Debian's python3).

  make_mobile_net.py OUT.onnx

x[2, 16, 16, 16] -> inverted residual block (1x1 16->32 + BatchNormalization + Clip(0, 6),
depthwise 3x3 + BN + Clip, 1x1 32->16 + BN, + x) -> depthwise 3x3 stride 2 + BN + Relu ->
1x1 16->64 (8x8 map) + Relu -> depthwise 3x3 + bias -> 1x1 64->16 + the stride-2 output ->
MaxPool 2x2 -> Concat with itself along channels -> GlobalAveragePool -> Flatten -> y[2, 32].
Seeded weights; inference batch norms with random statistics.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)
inits, nodes = [], []


def const(name, array):
    inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))
    return name


def conv(x, out, cin, cout, k=1, stride=1, group=1, bias=False):
    w = const(out + "_w", rng.standard_normal([cout, cin // group, k, k]) / np.sqrt(cin // group * k * k))
    ins = [x, w] + ([const(out + "_b", rng.uniform(-0.1, 0.1, cout))] if bias else [])
    nodes.append(helper.make_node("Conv", ins, [out], name=out, strides=[stride, stride],
                                  pads=[k // 2] * 4, group=group))
    return out


def bn(x, out, c):
    nodes.append(helper.make_node("BatchNormalization", [
        x, const(out + "_s", rng.uniform(0.5, 1.5, c)), const(out + "_b", rng.uniform(-0.2, 0.2, c)),
        const(out + "_m", rng.uniform(-0.1, 0.1, c)), const(out + "_v", rng.uniform(0.5, 2.0, c))], [out],
        name=out, epsilon=1e-5))
    return out


def clip(x, out):
    nodes.append(helper.make_node("Clip", [x, const(out + "_lo", 0.0), const(out + "_hi", 6.0)], [out],
                                  name=out))
    return out


def op(kind, ins, out, **attrs):
    nodes.append(helper.make_node(kind, ins, [out], name=out, **attrs))
    return out


h = clip(bn(conv("x", "e", 16, 32), "e_bn", 32), "e_r")
h = clip(bn(conv(h, "d", 32, 32, 3, group=32), "d_bn", 32), "d_r")
h = bn(conv(h, "p", 32, 16), "p_bn", 16)
h = op("Add", [h, "x"], "res1")
s = op("Relu", [bn(conv(h, "ds", 16, 16, 3, 2, group=16), "ds_bn", 16)], "ds_r")
h = op("Relu", [conv(s, "e2", 16, 64, bias=True)], "e2_r")
h = conv(h, "d2", 64, 64, 3, group=64, bias=True)
h = op("Add", [conv(h, "p2", 64, 16, bias=True), s], "res2")
h = op("MaxPool", [h], "pool", kernel_shape=[2, 2], strides=[2, 2])
h = op("Concat", [h, h], "cat", axis=1)
h = op("GlobalAveragePool", [h], "gap")
op("Flatten", [h], "y")
graph = helper.make_graph(nodes, "mobile_net",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 7
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
