#!/usr/bin/python3
"""Writes the bundled example models (run with Debian's /usr/bin/python3: it needs python3-onnx
and python3-numpy). The outputs are committed; rerun only to change them.

mnist-mlp/model.onnx: a 784-128-10 MLP classifier with a dynamic batch dim, fixed random weights
(seed 0), softmax output; mnist-mlp/input_0.pb: a batch of 4 random 28x28 "images" in [0, 1).
"""
import os
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0)


def mlp():
    w1 = (rng.standard_normal((784, 128)) * np.sqrt(2 / 784)).astype(np.float32)
    b1 = (rng.standard_normal(128) * 0.01).astype(np.float32)
    w2 = (rng.standard_normal((128, 10)) * np.sqrt(2 / 128)).astype(np.float32)
    b2 = (rng.standard_normal(10) * 0.01).astype(np.float32)
    nodes = [
        helper.make_node("Flatten", ["image"], ["flat"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["flat", "w1", "b1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["h_relu"], name="relu1"),
        helper.make_node("Gemm", ["h_relu", "w2", "b2"], ["logits"], name="fc2"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes, "mnist_mlp",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 28, 28])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="tcc-examples")
    onnx.checker.check_model(model)
    out = os.path.join(here, "mnist-mlp")
    onnx.save(model, os.path.join(out, "model.onnx"))
    image = rng.random((4, 1, 28, 28), dtype=np.float32)
    with open(os.path.join(out, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(image, "image").SerializeToString())


if __name__ == "__main__":
    mlp()
