"""Writes OUT: x[4,3] -> Gemm(3,5) -> BatchNormalization -> Relu -> Dropout(0.25) -> Gemm(5,2),
for the training-mode import lit test (Debian's python3 with python3-onnx)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)


def init(name, shape, lo=-0.5, hi=0.5):
    return numpy_helper.from_array(rng.uniform(lo, hi, shape).astype(np.float32), name)


nodes = [
    helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
    helper.make_node("BatchNormalization", ["h", "scale", "bias", "mean", "var"], ["n"],
                     name="bn", momentum=0.75),
    helper.make_node("Relu", ["n"], ["r"], name="relu"),
    helper.make_node("Dropout", ["r", "ratio"], ["d"], name="drop"),
    helper.make_node("Gemm", ["d", "w2", "b2"], ["logits"], name="fc2", transB=1),
]
inits = [init("w1", (5, 3)), init("b1", (5,)), init("scale", (5,), 0.5, 1.5), init("bias", (5,)),
         init("mean", (5,)), init("var", (5,), 0.5, 1.5),
         numpy_helper.from_array(np.array(0.25, np.float32), "ratio"),
         init("w2", (2, 5)), init("b2", (2,))]
graph = helper.make_graph(nodes, "train", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [4, 2])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
