"""Checks a `tcc train --save-model` output against the model it was trained from.

  check_saved_train_model.py ORIGINAL.onnx SAVED.onnx

Runs with the comparison tests' interpreter (scripts/setup.sh's peers venv, lit's %peers-python). The saved model must be the original
with only its floating-point initializers changed (same names, types, shapes, order; the same
nodes, inputs and outputs), and onnxruntime must run it and agree with a numpy forward pass of
Inputs/make_train_data.py's MLP (Dropout is the identity in inference).
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

orig, saved = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
assert [n.SerializeToString() for n in orig.graph.node] == [n.SerializeToString() for n in saved.graph.node]
assert orig.graph.input == saved.graph.input and orig.graph.output == saved.graph.output
assert orig.opset_import == saved.opset_import and orig.ir_version == saved.ir_version
assert len(orig.graph.initializer) == len(saved.graph.initializer)
w = {}
for a, b in zip(orig.graph.initializer, saved.graph.initializer):
    assert (a.name, a.data_type, list(a.dims)) == (b.name, b.data_type, list(b.dims)), (a.name, b.name)
    before, after = numpy_helper.to_array(a), numpy_helper.to_array(b)
    assert not np.array_equal(before, after), f"{a.name} was not trained"
    w[b.name] = after

x = np.random.default_rng(3).uniform(0, 1, (5, 2, 3)).astype(np.float32)
(got,) = ort.InferenceSession(sys.argv[2], providers=["CPUExecutionProvider"]).run(None, {"x": x})
h = np.maximum(x.reshape(5, 6) @ w["w1"].T + w["b1"], 0)
ref = h @ w["w2"].T + w["b2"]
assert np.allclose(got, ref, rtol=1e-5, atol=1e-5), np.abs(got - ref).max()
print("onnxruntime runs the trained model:", len(w), "initializers trained")
