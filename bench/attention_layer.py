"""One causal self-attention layer with heads of 64 as exporters write it, and its seeded
weights and data: what bench/attention_train_cpu.py trains on the CPU and the GPU session's
attention_train section (bench/gpu/device_session.py) on a GPU, tcc against PyTorch. Only numpy
at import (the GPU machine's PyTorch side needs the weights and data, not the ONNX model).

Layer: q, k, v = x Wq, x Wk, x Wv split into heads; MatMul(q, Transpose(k)), / sqrt(64),
Where(causal), Softmax, MatMul(v); heads merged; y = o Wo. Weights [in, out] uniform in
+-1/sqrt(width); data standard normal.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

HEADS, HEAD_DIM = 12, 64  # GPT-2 small's heads (the CPU bench's default)
WIDTH = HEADS * HEAD_DIM


def layer_weights(seed: int, heads: int = HEADS) -> dict[str, np.ndarray]:
    """The layer's initial weights for `heads` heads of HEAD_DIM (x @ W layout, [in, out])."""
    width = heads * HEAD_DIM
    rng = np.random.default_rng(seed)
    return {n: (rng.uniform(-1, 1, (width, width)) / np.sqrt(width)).astype(np.float32)
            for n in ("Wq", "Wk", "Wv", "Wo")}


def layer_data(length: int, samples: int, seed: int, heads: int = HEADS):
    """{split: (inputs, targets)}: `samples` train and 1 test sample of [length, width]."""
    rng = np.random.default_rng(seed + 1)
    width = heads * HEAD_DIM
    return {split: (rng.standard_normal((n, length, width), np.float32),
                    rng.standard_normal((n, length, width), np.float32))
            for split, n in (("train", samples), ("test", 1))}


def write_model(path: Path, length: int, seed: int, heads: int = HEADS) -> dict[str, np.ndarray]:
    """The layer as an ONNX model; returns its weights (layer_weights)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    width = heads * HEAD_DIM
    weights = layer_weights(seed, heads)
    nodes = []
    for t in "qkv":
        nodes += [helper.make_node("MatMul", ["x", "W" + t], [t + "p"]),
                  helper.make_node("Reshape", [t + "p", "split"], [t + "r"]),
                  helper.make_node("Transpose", [t + "r"], [t], perm=[0, 2, 1, 3])]
    nodes += [helper.make_node("Constant", [], ["root"],
                               value=numpy_helper.from_array(np.float32(np.sqrt(HEAD_DIM)), "root")),
              helper.make_node("Constant", [], ["ninf"],
                               value=numpy_helper.from_array(np.float32(-np.inf), "ninf")),
              helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q", "kt"], ["s0"]),
              helper.make_node("Div", ["s0", "root"], ["s1"]),
              helper.make_node("Where", ["tri", "s1", "ninf"], ["s2"]),
              helper.make_node("Softmax", ["s2"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["o"]),
              helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ot", "merge"], ["om"]),
              helper.make_node("MatMul", ["om", "Wo"], ["y"])]
    inits = [numpy_helper.from_array(w, n) for n, w in weights.items()]
    inits += [numpy_helper.from_array(np.array([1, length, heads, HEAD_DIM], np.int64), "split"),
              numpy_helper.from_array(np.array([1, length, width], np.int64), "merge"),
              numpy_helper.from_array(np.tril(np.ones((length, length), bool))[None, None], "tri")]
    graph = helper.make_graph(
        nodes, "attention_layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, length, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, length, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return weights


def write_data(folder: Path, length: int, samples: int, seed: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for split, (x, y) in layer_data(length, samples, seed).items():
        np.save(folder / f"{split}_images.npy", x)
        np.save(folder / f"{split}_labels.npy", y)
