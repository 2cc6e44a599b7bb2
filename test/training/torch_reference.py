"""The PyTorch side of the FashionMNIST comparisons (test/training/compare_torch.py,
bench/train_cpu.py), for the python3 on PATH (PyPI's torch, onnx, numpy).

- load_idx: a split of an IDX dataset folder (Debian's dataset-fashion-mnist layout), images as
  float32 in [0, 1] shaped [N, 1, 28, 28] (pixel / 255, as tcc train scales them), labels int64.
- mlp_from_onnx: rebuilds the example's forward model (examples/fashion-mnist/make_model.py) as
  an nn.Sequential with the ONNX initializers as its initial weights.
"""
import gzip
import os
import struct

import numpy as np

# IDX element type codes (the third byte of the magic number) -> numpy dtype, big-endian.
IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
SPLITS = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def dataset_missing(data_dir):
    """None if `data_dir` holds the four IDX files (gzipped or not), else what is missing."""
    for images, labels in SPLITS.values():
        for name in (images, labels):
            path = os.path.join(data_dir, name)
            if not (os.path.exists(path) or os.path.exists(path + ".gz")):
                return f"{path}[.gz] not found (Debian: apt-get install dataset-fashion-mnist)"
    return None


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, code, rank = struct.unpack(">HBB", data[:4])
    if zero != 0 or code not in IDX_TYPES:
        raise ValueError(f"{path}: not an IDX file (magic {data[:4].hex()})")
    shape = struct.unpack(f">{rank}I", data[4:4 + 4 * rank])
    return np.frombuffer(data, IDX_TYPES[code], offset=4 + 4 * rank).reshape(shape)


def load_idx(data_dir, split):
    """(images float32 [N,1,28,28] in [0,1], labels int64 [N]) of `split` ("train" or "test")."""
    arrays = []
    for name in SPLITS[split]:
        path = os.path.join(data_dir, name)
        arrays.append(read_idx(path if os.path.exists(path) else path + ".gz"))
    images, labels = arrays
    images = (images.astype(np.float32) / np.float32(255)).reshape(-1, 1, 28, 28)
    return images, labels.astype(np.int64)


def mlp_from_onnx(path, dtype=None):
    """nn.Sequential equal to the ONNX model at `path`, a chain of Flatten, Gemm (transB=1, as
    nn.Linear), Relu and Dropout nodes; initial weights are the model's initializers."""
    import onnx
    import torch
    from onnx import numpy_helper

    model = onnx.load(path)
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    constants = {}
    layers = []
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Constant":
            constants[node.output[0]] = numpy_helper.to_array(attrs["value"])
        elif node.op_type == "Flatten":
            if attrs.get("axis", 1) != 1:
                raise ValueError(f"node {node.name}: Flatten axis {attrs['axis']}")
            layers.append(torch.nn.Flatten())
        elif node.op_type == "Gemm":
            if attrs.get("transB", 0) != 1 or attrs.get("transA", 0) != 0 or \
                    attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
                raise ValueError(f"node {node.name}: only Gemm(transB=1) maps to nn.Linear")
            w, b = weights[node.input[1]], weights[node.input[2]]
            linear = torch.nn.Linear(w.shape[1], w.shape[0])
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(w.copy()))
                linear.bias.copy_(torch.from_numpy(b.copy()))
            layers.append(linear)
        elif node.op_type == "Relu":
            layers.append(torch.nn.ReLU())
        elif node.op_type == "Dropout":
            ratio = float(constants[node.input[1]]) if len(node.input) > 1 and node.input[1] else 0.5
            layers.append(torch.nn.Dropout(ratio))
        else:
            raise ValueError(f"node {node.name}: {node.op_type} has no torch mapping here")
    net = torch.nn.Sequential(*layers)
    return net.to(dtype) if dtype is not None else net
