#!/usr/bin/python3
"""Writes the FashionMNIST example's forward model (run with Debian's /usr/bin/python3: it needs
python3-onnx and python3-numpy).

    make_model.py                          # examples/fashion-mnist/model.onnx (committed)
    make_model.py --no-dropout -o OUT.onnx # the same weights without the Dropout nodes

The model is the MLP of the classic FashionMNIST tutorial, laid out as torch.onnx.export writes
an nn.Sequential of nn.Flatten, nn.Linear, nn.ReLU and nn.Dropout (opset 17):

    images [N,1,28,28] -> Flatten -> Gemm 784x256 -> Relu -> Dropout(0.2)
                       -> Gemm 256x256 -> Relu -> Dropout(0.2) -> Gemm 256x10 -> logits [N,10]

N is symbolic ("batch"). Each Gemm has transB=1 with its weight stored [out, in], as nn.Linear
keeps it. Weights and biases are drawn like nn.Linear's default initialisation (uniform in
+-1/sqrt(fan_in): kaiming_uniform_ with a=sqrt(5) for the weight, the same bound for the bias),
from numpy seed 0, so the output is the same on every run. Dropout's ratio is a Constant node,
not an initializer: every floating-point initializer is trained by default.

--no-dropout drops the Dropout nodes and keeps every weight: with the same initial weights and
batches the training loss is deterministic, which test/training/compare_torch.py relies on.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LAYERS = [(784, 256), (256, 256), (256, 10)]
DROPOUT_RATIO = 0.2
SEED = 0


def linear_init(rng, fan_in, fan_out):
    bound = 1.0 / np.sqrt(fan_in)
    weight = rng.uniform(-bound, bound, size=(fan_out, fan_in)).astype(np.float32)
    bias = rng.uniform(-bound, bound, size=(fan_out,)).astype(np.float32)
    return weight, bias


def build(dropout):
    rng = np.random.default_rng(SEED)
    nodes = [helper.make_node("Flatten", ["images"], ["x0"], axis=1, name="flatten")]
    initializers = []
    x = "x0"
    if dropout:
        nodes.append(helper.make_node(
            "Constant", [], ["dropout_ratio"], name="dropout_ratio",
            value=numpy_helper.from_array(np.array(DROPOUT_RATIO, np.float32))))
    for i, (fan_in, fan_out) in enumerate(LAYERS):
        layer = i + 1
        weight, bias = linear_init(rng, fan_in, fan_out)
        initializers += [numpy_helper.from_array(weight, f"fc{layer}.weight"),
                         numpy_helper.from_array(bias, f"fc{layer}.bias")]
        last = layer == len(LAYERS)
        out = "logits" if last else f"fc{layer}"
        nodes.append(helper.make_node("Gemm", [x, f"fc{layer}.weight", f"fc{layer}.bias"], [out],
                                      transB=1, name=f"fc{layer}"))
        if last:
            break
        nodes.append(helper.make_node("Relu", [out], [f"relu{layer}"], name=f"relu{layer}"))
        x = f"relu{layer}"
        if dropout:
            nodes.append(helper.make_node("Dropout", [x, "dropout_ratio"], [f"drop{layer}"],
                                          name=f"dropout{layer}"))
            x = f"drop{layer}"
    graph = helper.make_graph(
        nodes, "fashion_mnist_mlp",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="tcc-examples")
    onnx.checker.check_model(model)
    return model


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-dropout", action="store_true",
                        help="leave out the Dropout nodes (same weights)")
    parser.add_argument("-o", "--output", default=os.path.join(here, "model.onnx"))
    args = parser.parse_args()
    onnx.save(build(dropout=not args.no_dropout), args.output)


if __name__ == "__main__":
    main()
