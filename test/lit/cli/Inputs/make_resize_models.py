"""Writes resize-<mode>.onnx into argv[1]: one Resize (nearest, scales 1 x 1 x 3 x 2) of an input
[1, 2, h, w] with symbolic h and w, per coordinate_transformation_mode (for
symbolic-resize.test). Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy).
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

for mode, nearest in [("half_pixel", "round_prefer_floor"), ("asymmetric", "round_prefer_floor"),
                      ("align_corners", "round_prefer_floor")]:
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", mode="nearest",
                            coordinate_transformation_mode=mode, nearest_mode=nearest)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([1, 1, 3, 2], np.float32), "scales")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, f"{sys.argv[1]}/resize-{mode}.onnx")
