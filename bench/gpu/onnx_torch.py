"""Runs an ONNX graph with PyTorch ops, for PyTorch eager and torch.compile on the bench models.

onnx2torch is not installed on the GPU machine and the bench models are generated with
onnx.helper (bench/models/make_models.py), so this module maps each node to the torch op a
PyTorch model would call (Gemm -> F.linear, Conv -> F.conv2d, BatchNormalization ->
F.batch_norm in eval mode, LayerNormalization -> F.layer_norm, Softmax -> torch.softmax, ...),
with the weights taken from the model's initializers. `OnnxTorch(model).forward` executes the
nodes in order: in eager mode that is one torch call per node, as a hand-written nn.Module in
eval mode would make; torch.compile traces the same function (the node loop unrolls at trace
time) into one graph. Only the ops and attributes the bench models and the microbenchmarks use
are mapped; anything else raises NotImplementedError naming the op, before any run.

Shape-like inputs (Reshape's shape, axes, Clip bounds, ...) must be initializers or Constant
nodes: they are folded to Python values when the module is built, as an exporter would have
them as constants.
"""
from __future__ import annotations

import math

import numpy as np


def _attrs(node) -> dict:
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


class OnnxTorch:
    """A callable running `model` (an onnx.ModelProto) with torch ops on `device`."""

    def __init__(self, model, device: str = "cuda", dtype=None):
        import torch
        from onnx import numpy_helper
        self.torch = torch
        self.device = device
        g = model.graph
        self.consts: dict[str, np.ndarray] = {}   # every initializer / Constant, as numpy
        self.py_consts: dict = {}
        self.params: dict[str, "torch.Tensor"] = {}
        for init in g.initializer:
            arr = numpy_helper.to_array(init)
            self.consts[init.name] = arr
        init_names = set(self.consts)
        self.input_names = [i.name for i in g.input if i.name not in init_names]
        self.output_names = [o.name for o in g.output]
        self.nodes = []
        for node in g.node:
            if node.op_type == "Constant":
                a = _attrs(node)
                if "value" not in a:
                    raise NotImplementedError(f"Constant node {node.name!r} without a 'value' tensor")
                self.consts[node.output[0]] = numpy_helper.to_array(a["value"])
                continue
            fn = getattr(self, "op_" + node.op_type, None)
            if fn is None:
                raise NotImplementedError(f"onnx_torch has no mapping for op {node.op_type!r} (node {node.name!r})")
            self.nodes.append((fn, list(node.input), list(node.output), _attrs(node)))
        # Fold the shape-like inputs now (Reshape shapes, axes, Clip bounds): small constants
        # that are not a node's first input. The NumPy arrays are not kept (torch.compile would
        # trace into them).
        for _, ins, _, _ in self.nodes:
            for n in ins[1:]:
                if n in self.consts and self.consts[n].size <= 64:
                    self.py_consts[n] = self.consts[n].tolist()
        for name, arr in self.consts.items():
            if arr.dtype.kind == "f" or arr.dtype == np.bool_ or arr.dtype.kind in "iu":
                self.params[name] = torch.from_numpy(np.array(arr, copy=True)).to(device)
        del self.consts

    # -- helpers -------------------------------------------------------------------------------
    def const(self, name: str):
        """A constant input as Python values (nested lists or a scalar), folded at build time:
        torch.compile then sees plain Python numbers, not NumPy arrays."""
        if name not in self.py_consts:
            raise NotImplementedError(f"onnx_torch needs {name!r} to be a small constant (initializer or Constant)")
        return self.py_consts[name]

    def scalar(self, name: str) -> float:
        v = self.const(name)
        while isinstance(v, list):
            if len(v) != 1:
                raise NotImplementedError(f"{name!r} is not a scalar")
            v = v[0]
        return float(v)

    def __call__(self, *inputs):
        env = dict(self.params)
        env.update(zip(self.input_names, inputs))
        for fn, ins, outs, attrs in self.nodes:
            res = fn(env, ins, attrs)
            if isinstance(res, tuple):
                for o, r in zip(outs, res):
                    env[o] = r
            else:
                env[outs[0]] = res
        outs = [env[n] for n in self.output_names]
        return outs[0] if len(outs) == 1 else tuple(outs)

    # -- ops -----------------------------------------------------------------------------------
    def op_Identity(self, env, i, a): return env[i[0]]
    def op_Relu(self, env, i, a): return self.torch.relu(env[i[0]])
    def op_Sigmoid(self, env, i, a): return self.torch.sigmoid(env[i[0]])
    def op_Tanh(self, env, i, a): return self.torch.tanh(env[i[0]])
    def op_Erf(self, env, i, a): return self.torch.erf(env[i[0]])
    def op_Sqrt(self, env, i, a): return self.torch.sqrt(env[i[0]])
    def op_Add(self, env, i, a): return env[i[0]] + env[i[1]]
    def op_Sub(self, env, i, a): return env[i[0]] - env[i[1]]
    def op_Mul(self, env, i, a): return env[i[0]] * env[i[1]]
    def op_Div(self, env, i, a): return env[i[0]] / env[i[1]]
    def op_Pow(self, env, i, a): return self.torch.pow(env[i[0]], env[i[1]])
    def op_MatMul(self, env, i, a): return self.torch.matmul(env[i[0]], env[i[1]])

    def op_Gemm(self, env, i, a):
        x, w = env[i[0]], env[i[1]]
        if a.get("transA", 0):
            x = x.t()
        alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
        bias = env[i[2]] if len(i) > 2 and i[2] else None
        if alpha == 1.0 and beta == 1.0:
            F = self.torch.nn.functional
            return F.linear(x, w if a.get("transB", 0) else w.t(), bias)
        y = alpha * self.torch.matmul(x, w.t() if a.get("transB", 0) else w)
        return y + beta * bias if bias is not None else y

    def op_Softmax(self, env, i, a): return self.torch.softmax(env[i[0]], dim=a.get("axis", -1))

    def op_LayerNormalization(self, env, i, a):
        x = env[i[0]]
        axis = a.get("axis", -1) % x.dim()
        shape = tuple(x.shape[axis:])
        bias = env[i[2]] if len(i) > 2 and i[2] else None
        return self.torch.nn.functional.layer_norm(x, shape, env[i[1]], bias, a.get("epsilon", 1e-5))

    def op_Reshape(self, env, i, a):
        x = env[i[0]]
        shape = [int(d) for d in self.const(i[1])]
        if not a.get("allowzero", 0):
            shape = [x.shape[k] if d == 0 else d for k, d in enumerate(shape)]
        return self.torch.reshape(x, shape)

    def op_Transpose(self, env, i, a):
        x = env[i[0]]
        perm = a.get("perm", list(reversed(range(x.dim()))))
        return x.permute(*perm)

    def op_Flatten(self, env, i, a):
        x = env[i[0]]
        axis = a.get("axis", 1) % max(x.dim(), 1)
        return x.reshape(math.prod(x.shape[:axis]), -1)

    def op_Unsqueeze(self, env, i, a):
        x = env[i[0]]
        axes = self.const(i[1])
        axes = sorted(int(v) % (x.dim() + len(axes)) for v in axes)
        for ax in axes:
            x = x.unsqueeze(ax)
        return x

    def op_Cast(self, env, i, a):
        from onnx import helper
        np_type = helper.tensor_dtype_to_np_dtype(a["to"])
        return env[i[0]].to(getattr(self.torch, np.dtype(np_type).name if np_type != np.bool_ else "bool"))

    def op_Gather(self, env, i, a):
        x, idx = env[i[0]], env[i[1]]
        axis = a.get("axis", 0) % x.dim()
        idx = self.torch.where(idx < 0, idx + x.shape[axis], idx)
        return self.torch.index_select(x, axis, idx.reshape(-1)).reshape(
            tuple(x.shape[:axis]) + tuple(idx.shape) + tuple(x.shape[axis + 1:]))

    def op_Clip(self, env, i, a):
        lo = self.scalar(i[1]) if len(i) > 1 and i[1] else None
        hi = self.scalar(i[2]) if len(i) > 2 and i[2] else None
        return self.torch.clamp(env[i[0]], lo, hi)

    def _axes(self, x, i, a, attr_axes):
        axes = a.get("axes") if attr_axes else (self.const(i[1]) if len(i) > 1 and i[1] else None)
        if axes is None or len(axes) == 0:
            return list(range(x.dim()))
        return [int(v) % x.dim() for v in axes]

    def op_ReduceMean(self, env, i, a):  # opset 17: axes is an attribute
        x = env[i[0]]
        return x.mean(dim=self._axes(x, i, a, True), keepdim=bool(a.get("keepdims", 1)))

    def op_ReduceSum(self, env, i, a):   # opset 13+: axes is an input
        x = env[i[0]]
        return x.sum(dim=self._axes(x, i, a, False), keepdim=bool(a.get("keepdims", 1)))

    def op_ReduceL2(self, env, i, a):    # opset 17: axes is an attribute
        x = env[i[0]]
        return self.torch.sqrt((x * x).sum(dim=self._axes(x, i, a, True), keepdim=bool(a.get("keepdims", 1))))

    def op_Conv(self, env, i, a):
        F = self.torch.nn.functional
        x, w = env[i[0]], env[i[1]]
        b = env[i[2]] if len(i) > 2 and i[2] else None
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise NotImplementedError("Conv auto_pad")
        pads = a.get("pads", [0] * 4)
        if pads[0] != pads[2] or pads[1] != pads[3]:
            x = F.pad(x, (pads[1], pads[3], pads[0], pads[2]))
            pads = [0, 0, 0, 0]
        return F.conv2d(x, w, b, stride=a.get("strides", [1, 1]), padding=(pads[0], pads[1]),
                        dilation=a.get("dilations", [1, 1]), groups=a.get("group", 1))

    def op_BatchNormalization(self, env, i, a):
        F = self.torch.nn.functional
        return F.batch_norm(env[i[0]], env[i[3]], env[i[4]], env[i[1]], env[i[2]], False, 0.0,
                            a.get("epsilon", 1e-5))

    def op_MaxPool(self, env, i, a):
        F = self.torch.nn.functional
        pads = a.get("pads", [0] * 4)
        if pads[0] != pads[2] or pads[1] != pads[3]:
            raise NotImplementedError("MaxPool with asymmetric pads")
        return F.max_pool2d(env[i[0]], a["kernel_shape"], a.get("strides", [1, 1]), (pads[0], pads[1]),
                            a.get("dilations", [1, 1]), bool(a.get("ceil_mode", 0)))

    def op_GlobalAveragePool(self, env, i, a):
        x = env[i[0]]
        return x.mean(dim=tuple(range(2, x.dim())), keepdim=True)
