"""Checks tcc's output for the bundled MNIST MLP against a numpy forward pass."""
import sys
import numpy as np
import onnx
from onnx import numpy_helper

model = onnx.load(sys.argv[1])
w = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
x = numpy_helper.to_array(onnx.load_tensor(sys.argv[2])).reshape(-1, 784)
h = np.maximum(x @ w["w1"] + w["b1"], 0)
logits = h @ w["w2"] + w["b2"]
e = np.exp(logits - logits.max(axis=1, keepdims=True))
ref = e / e.sum(axis=1, keepdims=True)
got = numpy_helper.to_array(onnx.load_tensor(sys.argv[3]))
assert got.shape == ref.shape, (got.shape, ref.shape)
err = np.abs(got - ref).max()
assert np.allclose(got, ref, rtol=1e-4, atol=1e-6), err
print("mlp matches numpy, max abs error", err)
