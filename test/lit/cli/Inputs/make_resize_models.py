"""Writes resize-<case>.onnx into argv[1]: one Resize (scales 1 x 1 x 3 x 2) of an input
[1, 2, h, w] with symbolic h and w, per mode and coordinate_transformation_mode (for
symbolic-resize.test). Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy).
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

cases = [("half_pixel", "nearest", {"nearest_mode": "round_prefer_floor"}),
         ("asymmetric", "nearest", {"nearest_mode": "round_prefer_floor"}),
         ("align_corners", "nearest", {"nearest_mode": "round_prefer_floor"}),
         # Linear and cubic (segmentation heads: F.interpolate(scale_factor=2, mode="bilinear")).
         ("half_pixel", "linear", {}), ("pytorch_half_pixel", "linear", {}),
         ("asymmetric", "cubic", {}), ("half_pixel", "cubic", {"cubic_coeff_a": -0.5}),
         ("align_corners", "linear", {}), ("half_pixel", "cubic", {"exclude_outside": 1})]
for coord, mode, attrs in cases:
    name = coord if mode == "nearest" else f"{mode}-{coord}" + ("-exclude" if attrs.get("exclude_outside") else "")
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", mode=mode,
                            coordinate_transformation_mode=coord, **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([1, 1, 3, 2], np.float32), "scales")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, f"{sys.argv[1]}/resize-{name}.onnx")
