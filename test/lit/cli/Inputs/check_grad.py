"""Checks `tcc grad` output for Inputs/make_train_data.py's grad.onnx (Debian's python3).

  check_grad.py MODEL X.pb DIR [DIR2]

Compares DIR/grad_<i>.pb with central finite differences (float64, numpy) of sum(output 0) of
y = (tanh(x @ w + b) * a) @ v, and with DIR2's gradients when given (cpu vs interp).
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
    return ((np.tanh(x @ p["w"] + p["b"]) * p["a"]) @ p["v"]).sum()


checked = 0
for index, name, arr in inits:
    path = os.path.join(sys.argv[3], f"grad_{index}.pb")
    if arr.dtype != np.float32:
        assert not os.path.exists(path), f"{path}: {name} is not a floating-point initializer"
        continue
    proto = onnx.load_tensor(path)
    assert proto.name == name, (proto.name, name)
    got = numpy_helper.to_array(proto)
    assert got.shape == arr.shape and got.dtype == np.float32, (name, got.shape, got.dtype)
    fd = np.zeros(arr.shape)
    eps = 1e-6
    for k in np.ndindex(arr.shape):
        plus = {n: v.copy() for n, v in params.items()}
        minus = {n: v.copy() for n, v in params.items()}
        plus[name][k] += eps
        minus[name][k] -= eps
        fd[k] = (forward(plus) - forward(minus)) / (2 * eps)
    assert np.abs(fd).max() > 1e-3, f"{name}: degenerate test (zero gradient)"
    err = np.abs(got - fd).max()
    assert np.allclose(got, fd, rtol=1e-4, atol=1e-5), f"{name}: max error {err}\n{got}\n{fd}"
    if len(sys.argv) > 4:
        other = numpy_helper.to_array(onnx.load_tensor(os.path.join(sys.argv[4], f"grad_{index}.pb")))
        assert np.allclose(got, other, rtol=1e-5, atol=1e-6), f"{name}: devices differ"
    checked += 1
print(f"{checked} gradients match finite differences")
