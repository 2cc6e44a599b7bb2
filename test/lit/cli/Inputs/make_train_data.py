"""Writes tiny training inputs for the `tcc train` / `tcc grad` lit tests (Debian's python3).

  make_train_data.py OUT

OUT/mlp.onnx      x[N,2,3] -> Flatten -> Gemm(6,8) -> Relu -> Dropout(0.2) -> Gemm(8,3): logits
OUT/mlp4.onnx     the same with a 4x4 input (does not fit the data)
OUT/mse.onnx      x[N,2,3] -> Flatten -> Gemm(6,6) -> Tanh: regression onto the flattened image
OUT/grad.onnx     x[2,3] -> MatMul(3,4) -> Add -> Tanh -> Mul(x, a) -> MatMul(4,2): for tcc grad
OUT/npy/          train/test images (uint8, 2x3) and labels (int64) as .npy pairs
OUT/idx/          the same data as IDX files, the training ones gzipped
OUT/mse/          the npy images with float32 targets [N,6] (the flattened image, scaled)
OUT/bad/          an IDX folder whose t10k labels are truncated
OUT/badclass/     the npy data whose test labels hold class 3 (the mlp has 3 classes: 0..2)
All data is seeded random; classes follow a simple rule of the pixels so training can learn.
"""
import gzip
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(1234)


def init(name, shape, scale=0.5):
    return numpy_helper.from_array(rng.uniform(-scale, scale, shape).astype(np.float32), name)


def save(graph, name):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name))


def mlp(name, dims):
    nodes = [
        # The ratio is a Constant node, not an initializer: every float initializer is trained.
        helper.make_node("Constant", [], ["ratio"],
                         value=numpy_helper.from_array(np.array(0.2, np.float32))),
        helper.make_node("Flatten", ["x"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "w1", "b1"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Dropout", ["r", "ratio"], ["d"]),
        helper.make_node("Gemm", ["d", "w2", "b2"], ["logits"], transB=1),
    ]
    features = int(np.prod(dims))
    inits = [init("w1", (8, features)), init("b1", (8,)), init("w2", (3, 8)), init("b2", (3,))]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"] + dims)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3])], inits)
    save(graph, name)


os.makedirs(out, exist_ok=True)
mlp("mlp.onnx", [2, 3])
mlp("mlp4.onnx", [4, 4])

graph = helper.make_graph(
    [helper.make_node("Flatten", ["x"], ["flat"], axis=1),
     helper.make_node("Gemm", ["flat", "w", "b"], ["h"]),
     helper.make_node("Tanh", ["h"], ["y"])],
    "mse", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6])],
    [init("w", (6, 6)), init("b", (6,))])
save(graph, "mse.onnx")

graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["m"]),
     helper.make_node("Add", ["m", "b"], ["s"]),
     helper.make_node("Tanh", ["s"], ["t"]),
     helper.make_node("Mul", ["t", "a"], ["u"]),
     helper.make_node("MatMul", ["u", "v"], ["y"])],
    "grad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
    # An integer initializer at index 1: gradients are numbered by initializer index (0, 2, 3, 4).
    [init("w", (3, 4), 1.0), numpy_helper.from_array(np.arange(3, dtype=np.int64), "unused_int"),
     init("b", (4,), 1.0), init("a", (2, 4), 1.0), init("v", (4, 2), 1.0)])
save(graph, "grad.onnx")
grad_x = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
onnx.save_tensor(numpy_helper.from_array(grad_x, "x"), os.path.join(out, "grad_x.pb"))


def dataset(n):
    images = rng.integers(1, 256, (n, 2, 3), dtype=np.uint8)
    # Class: the brightest pixel of the first row (balanced, and a small MLP learns it).
    labels = images[:, 0, :].argmax(axis=1).astype(np.int64)
    return images, labels


train_x, train_y = dataset(384)
test_x, test_y = dataset(21)  # not a multiple of the batch: the last eval batch is padded

os.makedirs(os.path.join(out, "npy"), exist_ok=True)
for name, arr in [("train_images", train_x), ("train_labels", train_y),
                  ("test_images", test_x), ("test_labels", test_y)]:
    np.save(os.path.join(out, "npy", name + ".npy"), arr)

os.makedirs(os.path.join(out, "badclass"), exist_ok=True)
bad_test_y = test_y.copy()
bad_test_y[5] = 3
for name, arr in [("train_images", train_x), ("train_labels", train_y),
                  ("test_images", test_x), ("test_labels", bad_test_y)]:
    np.save(os.path.join(out, "badclass", name + ".npy"), arr)

os.makedirs(os.path.join(out, "mse"), exist_ok=True)
for name, arr in [("train_images", train_x), ("test_images", test_x)]:
    np.save(os.path.join(out, "mse", name + ".npy"), arr)
    targets = (arr.reshape(len(arr), 6).astype(np.float32) / 255.0 - 0.5)
    np.save(os.path.join(out, "mse", name.replace("images", "labels") + ".npy"), targets)


def idx(arr):
    header = struct.pack(">BBBB", 0, 0, 0x08, arr.ndim)
    header += b"".join(struct.pack(">I", d) for d in arr.shape)
    return header + arr.astype(np.uint8).tobytes()


for folder, gz_train, cut in [("idx", True, False), ("bad", False, True)]:
    os.makedirs(os.path.join(out, folder), exist_ok=True)
    files = [("train-images-idx3-ubyte", train_x, gz_train), ("train-labels-idx1-ubyte", train_y, gz_train),
             ("t10k-images-idx3-ubyte", test_x, False), ("t10k-labels-idx1-ubyte", test_y, False)]
    for name, arr, packed in files:
        data = idx(arr)
        if cut and name.startswith("t10k-labels"):
            data = data[:-5]
        if packed:
            with gzip.open(os.path.join(out, folder, name + ".gz"), "wb") as f:
                f.write(data)
        else:
            with open(os.path.join(out, folder, name), "wb") as f:
                f.write(data)
