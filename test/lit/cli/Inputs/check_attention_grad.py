"""Checks `tcc grad` output for Inputs/make_attention_grad.py's model (Debian's python3).

  check_attention_grad.py MODEL X.pb DIR

Compares DIR/grad_<i>.pb (one per float initializer: Wq, Wk, Wv, B, Wo) with central finite
differences (float64, numpy) of sum(y). A model without B is the layer without the bias.
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

model = onnx.load(sys.argv[1])
x = numpy_helper.to_array(onnx.load_tensor(sys.argv[2])).astype(np.float64)
inits = [(i, t.name, numpy_helper.to_array(t)) for i, t in enumerate(model.graph.initializer)]
params = {name: arr.astype(np.float64) for _, name, arr in inits if arr.dtype == np.float32}


def forward(p):
    heads = lambda t: (x @ p["W" + t]).reshape(2, 6, 2, 4).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = heads("q"), heads("k"), heads("v")
    s = q @ k.transpose(0, 1, 3, 2) / 2.0
    s = np.where(np.tril(np.ones((6, 6), bool)), s, -np.inf) + p.get("B", 0.0)
    e = np.exp(s - s.max(-1, keepdims=True))
    o = (e / e.sum(-1, keepdims=True)) @ v
    return (o.transpose(0, 2, 1, 3).reshape(2, 6, 8) @ p["Wo"]).sum()


checked = 0
for index, name, arr in inits:
    if arr.dtype != np.float32:
        continue
    got = numpy_helper.to_array(onnx.load_tensor(os.path.join(sys.argv[3], f"grad_{index}.pb")))
    want = np.zeros(arr.shape)
    for j in range(arr.size):
        h = 1e-6
        plus, minus = dict(params), dict(params)
        plus[name] = params[name].copy()
        minus[name] = params[name].copy()
        plus[name].flat[j] += h
        minus[name].flat[j] -= h
        want.flat[j] = (forward(plus) - forward(minus)) / (2 * h)
    err = np.abs(got - want).max() / (1 + np.abs(want).max())
    assert err < 1e-4, f"{name}: gradient differs from finite differences by {err}"
    checked += 1
print(f"{checked} gradients match finite differences")
