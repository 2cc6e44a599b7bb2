"""Writes Pow models with constant exponents into argv[1] (for pow.test; Debian's python3)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
for name, exponent in [("pow2", np.float32(2)), ("pow3", np.float32(3)), ("pow4", np.full([3], 4, np.float32)),
                       ("pow2_5", np.float32(2.5)), ("pow3_wider", np.full([2, 3], 3, np.float32))]:
    graph = helper.make_graph(
        [helper.make_node("Pow", ["x", "e"], ["y"])], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(exponent, "e")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, os.path.join(out, name + ".onnx"))
