#!/usr/bin/python3
"""Writes a small decoder-only transformer language model and its data (run with Debian's
/usr/bin/python3: it needs python3-onnx and python3-numpy). The distributed-training tests
train it under every strategy; it exercises what real language models have: an embedding
gather, learned positions, layer normalisation, causal multi-head attention (heads split by
Reshape/Transpose), a ReLU MLP, residuals and a language-model head.

    make_model.py -o DIR    # DIR/model.onnx and DIR/data/{train,test}_{images,labels}.npy

    tokens [N, 16] (float token ids, cast to int64) -> Gather(wte 32x32) + wpe
      -> 2 x [LayerNorm -> Q,K,V (MatMul 32x32 + bias) -> 4 heads of causal attention
              -> output projection -> residual -> LayerNorm -> MLP 32x64, ReLU, 64x32 -> residual]
      -> LayerNorm -> MatMul 32x32 (vocabulary) -> logits [N, 32 classes, 16 positions]

Opset 17; N is symbolic. The data: sequences of 17 tokens t_i = (start + i * step) mod 32 with a
random start and step in {1, 2, 3}; the model reads the first 16 and predicts the next token at
every position (labels [N, 16]). Fixed seeds: the same files on every run.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOCAB, SEQ, DIM, HEADS, HIDDEN, LAYERS = 32, 16, 32, 4, 64, 2
TRAIN, TEST = 1024, 256
SEED = 0


def build(rng):
    inits, nodes = [], []

    def param(name, shape, scale):
        inits.append(numpy_helper.from_array(
            rng.normal(0, scale, size=shape).astype(np.float32), name))
        return name

    def const(name, value):
        # A Constant node, not an initializer: tcc trains every float initializer.
        nodes.append(helper.make_node("Constant", [], [name], name=name,
                                      value=numpy_helper.from_array(np.asarray(value), name)))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def ones(name, n):
        inits.append(numpy_helper.from_array(np.ones(n, np.float32), name))
        return name

    def zeros(name, n):
        inits.append(numpy_helper.from_array(np.zeros(n, np.float32), name))
        return name

    def linear(x, prefix, fan_in, fan_out):
        w = param(f"{prefix}.weight", (fan_in, fan_out), 1 / np.sqrt(fan_in))
        b = zeros(f"{prefix}.bias", fan_out)
        return node("Add", [node("MatMul", [x, w], f"{prefix}.matmul"), b], prefix)

    def layer_norm(x, prefix):
        return node("LayerNormalization", [x, ones(f"{prefix}.weight", DIM),
                                           zeros(f"{prefix}.bias", DIM)], prefix, axis=-1)

    head = DIM // HEADS
    const("heads_shape", np.array([0, SEQ, HEADS, head], np.int64))
    const("model_shape", np.array([0, SEQ, DIM], np.int64))
    const("scale", np.array(1 / np.sqrt(head), np.float32))
    mask = np.triu(np.full((SEQ, SEQ), -1e9, np.float32), k=1)
    const("causal_mask", mask)

    ids = node("Cast", ["tokens"], "ids", to=TensorProto.INT64)
    tok = node("Gather", [param("wte", (VOCAB, DIM), 0.5), ids], "embed")
    h = node("Add", [tok, param("wpe", (SEQ, DIM), 0.1)], "positions")
    for l in range(LAYERS):
        p = f"h{l}"
        a = layer_norm(h, f"{p}.ln1")
        heads = {}
        for n, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
            x = linear(a, f"{p}.attn.{n}", DIM, DIM)
            x = node("Reshape", [x, "heads_shape"], f"{p}.attn.{n}.heads")
            heads[n] = node("Transpose", [x], f"{p}.attn.{n}.t", perm=perm)
        s = node("MatMul", [heads["q"], heads["k"]], f"{p}.attn.scores")
        s = node("Mul", [s, "scale"], f"{p}.attn.scaled")
        s = node("Add", [s, "causal_mask"], f"{p}.attn.masked")
        s = node("Softmax", [s], f"{p}.attn.softmax", axis=-1)
        c = node("MatMul", [s, heads["v"]], f"{p}.attn.context")
        c = node("Transpose", [c], f"{p}.attn.context.t", perm=[0, 2, 1, 3])
        c = node("Reshape", [c, "model_shape"], f"{p}.attn.merge")
        h = node("Add", [h, linear(c, f"{p}.attn.out", DIM, DIM)], f"{p}.attn.residual")
        m = layer_norm(h, f"{p}.ln2")
        f = node("Relu", [linear(m, f"{p}.mlp.fc", DIM, HIDDEN)], f"{p}.mlp.relu")
        h = node("Add", [h, linear(f, f"{p}.mlp.proj", HIDDEN, DIM)], f"{p}.mlp.residual")
    h = layer_norm(h, "ln_f")
    logits = node("MatMul", [h, param("lm_head.weight", (DIM, VOCAB), 1 / np.sqrt(DIM))], "lm_head")
    node("Transpose", [logits], "logits", perm=[0, 2, 1])

    graph = helper.make_graph(
        nodes, "tiny_lm",
        [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, ["batch", SEQ])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", VOCAB, SEQ])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="tcc examples/tiny-lm/make_model.py")
    onnx.checker.check_model(model)
    return model


def sequences(rng, n):
    start = rng.integers(0, VOCAB, size=(n, 1))
    step = rng.integers(1, 4, size=(n, 1))
    seq = (start + step * np.arange(SEQ + 1)) % VOCAB
    return seq[:, :SEQ].astype(np.float32), seq[:, 1:].astype(np.int64)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-o", "--out-dir", default=os.path.dirname(os.path.abspath(__file__)))
    a = p.parse_args()
    rng = np.random.default_rng(SEED)
    os.makedirs(os.path.join(a.out_dir, "data"), exist_ok=True)
    onnx.save(build(rng), os.path.join(a.out_dir, "model.onnx"))
    for split, n in (("train", TRAIN), ("test", TEST)):
        x, y = sequences(rng, n)
        np.save(os.path.join(a.out_dir, "data", f"{split}_images.npy"), x)
        np.save(os.path.join(a.out_dir, "data", f"{split}_labels.npy"), y)


if __name__ == "__main__":
    main()
