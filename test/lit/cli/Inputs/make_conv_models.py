"""Writes conv-<case>.onnx into argv[1]: single convolutions of an input [n, 8, h, w] with
symbolic n, h and w (for symbolic-cuda.test): depthwise (groups 8, stride 2: the CUDA direct
kernel), depthwise with a channel multiplier of 2, and a transposed convolution (stride 2: the
implicit GEMM over a dilated input). Run with Debian's /usr/bin/python3 (python3-onnx, -numpy).
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(3)
cases = [("depthwise", "Conv", (8, 1, 3, 3), dict(group=8, strides=[2, 2], pads=[1, 1, 1, 1])),
         ("multiplier", "Conv", (16, 1, 3, 3), dict(group=8, pads=[1, 1, 1, 1])),
         ("transposed", "ConvTranspose", (8, 4, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1],
                                                              output_padding=[1, 1]))]
for name, op, wshape, attrs in cases:
    w = numpy_helper.from_array(rng.standard_normal(wshape).astype(np.float32), "w")
    node = helper.make_node(op, ["x", "w"], ["y"], name=name, **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, f"{sys.argv[1]}/conv-{name}.onnx")
