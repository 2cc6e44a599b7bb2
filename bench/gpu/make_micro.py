#!/usr/bin/env python3
"""Kernel microbenchmarks for the GPU session: small ONNX graphs on large tensors.

Every tensor of a microbenchmark is a graph input (no initializers but scalar constants), so the
compiled artifacts stay a few kilobytes and can be carried to the GPU machine; the device side
(bench/gpu/device_session.py) draws the inputs there with NumPy, runs the PyTorch reference on
the same inputs and compares.

Each entry says how its time is judged:
  memory: bytes read + written (inputs + outputs) / time, as a fraction of the device-to-device
          copy bandwidth measured in the same session (torch copy_, counting read + write);
  gemm:   the time of cuBLAS alone (torch.matmul, TF32 off) for the same product / tcc's time;
  conv:   the time of cuDNN alone (torch conv2d, TF32 off) / tcc's time;
  attention: the time of PyTorch's scaled_dot_product_attention alone (flash backend, or the
          memory-efficient one where there is a bias: flash takes no mask) on q, k, v already
          cast to 16 bits / tcc's time (its attention kernel's alone where ncu names one).

The attention graphs take float32 inputs (tccrt-run reads .npy files; NumPy has no bf16), cast
q, k, v (and the bias) to float16 or bfloat16 and compute attention in that type as exporters
write it: MatMul(q, Transpose(k)) * scale -> [Where(causal keep, s, fill) | + bias] -> Softmax
-> MatMul(p, v), then Cast the result back to float32. The causal keep mask is computed in the
graph (Range, Unsqueeze, LessOrEqual: range(L)[None] <= range(L)[:, None]), not an [L, L]
constant, so the artifacts stay small; `tcc compile --explain-fusion` recognises each graph as
one attention op (causal where masked).

  python3 bench/gpu/make_micro.py --out-dir DIR          # writes DIR/<name>/model.onnx
  python3 bench/gpu/make_micro.py --list [--scale 16]

Interpreter: the python3 on PATH with onnx and numpy (bench/requirements.txt); the torch
references run only where torch is (the GPU machine).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

OPSET = 17


@dataclass
class Micro:
    name: str
    kind: str                         # "memory", "gemm", "conv", "attention" or "block"
    doc: str
    inputs: list[tuple[str, list[int]]]   # float32 graph inputs
    build: Callable                   # (helper, TensorProto) -> (nodes, initializers, outputs)
    output_shapes: list[list[int]]
    torch_fn: Callable                # (torch, F, *inputs) -> output (what the graph computes)
    baseline_fn: Callable | None = None   # (torch, F, *inputs) -> the library-alone work
    flops: float = 0.0                # gemm/conv/attention: multiply-add = 2
    tags: list[str] = field(default_factory=list)
    # (torch, F, *inputs) -> the tensors baseline_fn takes, made once outside its timing (the
    # attention micros' casts to 16 bits); None: baseline_fn takes the inputs.
    baseline_prep: Callable | None = None
    rtol: float | None = None         # tccrt-run --compare tolerances; None: the session's default
    atol: float | None = None
    # tcc compile --precision (CUDA only: a CPU check of the session compiles in f32).
    precision: str = "fp32"

    def bytes_moved(self) -> int:
        n = sum(math.prod(s) for _, s in self.inputs) + sum(math.prod(s) for s in self.output_shapes)
        return 4 * n


def _scalar(helper, TP, name, value):
    return helper.make_tensor(name, TP.FLOAT, [], [value])


def _ew_chain(helper, TP):
    # y = relu(x * 1.5 + 0.5) * sigmoid(x) - tanh(x) * 0.25: five elementwise ops, one fused kernel.
    inits = [_scalar(helper, TP, "a", 1.5), _scalar(helper, TP, "b", 0.5), _scalar(helper, TP, "c", 0.25)]
    n = [helper.make_node("Mul", ["x", "a"], ["t0"]), helper.make_node("Add", ["t0", "b"], ["t1"]),
         helper.make_node("Relu", ["t1"], ["t2"]), helper.make_node("Sigmoid", ["x"], ["t3"]),
         helper.make_node("Mul", ["t2", "t3"], ["t4"]), helper.make_node("Tanh", ["x"], ["t5"]),
         helper.make_node("Mul", ["t5", "c"], ["t6"]), helper.make_node("Sub", ["t4", "t6"], ["y"])]
    return n, inits


def _ew_torch(torch, F, x):
    return torch.relu(x * 1.5 + 0.5) * torch.sigmoid(x) - torch.tanh(x) * 0.25


def _gelu_erf(helper, TP, x, out, tag):
    inits = [_scalar(helper, TP, f"sqrt2_{tag}", math.sqrt(2.0)), _scalar(helper, TP, f"one_{tag}", 1.0),
             _scalar(helper, TP, f"half_{tag}", 0.5)]
    n = [helper.make_node("Div", [x, f"sqrt2_{tag}"], [f"g0_{tag}"]),
         helper.make_node("Erf", [f"g0_{tag}"], [f"g1_{tag}"]),
         helper.make_node("Add", [f"g1_{tag}", f"one_{tag}"], [f"g2_{tag}"]),
         helper.make_node("Mul", [x, f"g2_{tag}"], [f"g3_{tag}"]),
         helper.make_node("Mul", [f"g3_{tag}", f"half_{tag}"], [out])]
    return n, inits


ATTN_TYPES = {"f16": ("FLOAT16", "float16"), "bf16": ("BFLOAT16", "bfloat16")}
# tccrt-run --compare tolerances for 16-bit attention (outputs are |o| < 1 here).
ATTN_TOL = {"f16": (2e-2, 2e-2), "bf16": (5e-2, 5e-2)}


def _attn_scale(dt: str, head_dim: int) -> float:
    """1/sqrt(D) rounded to the 16-bit type, as the graph's constant holds it (the reference uses
    the same value)."""
    x = np.float32(1.0 / math.sqrt(head_dim))
    if dt == "f16":
        return float(np.float16(x))
    bits = int(x.view(np.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # round to nearest even, as onnx does
    return float(np.array(bits, np.uint32).view(np.float32))


def _attn_fill(dt: str) -> float:
    """The causal Where's fill: the type's lowest value, as GPT-2 exports it (torch.finfo.min), for
    bf16 (-3.39e38); -inf for f16, whose lowest (-65504) tcc's recognizer takes for a finite
    fill (a boolean mask, not `causal`: it wants <= -1e30)."""
    return -3.3895313892515355e38 if dt == "bf16" else -math.inf


def _attention_graph(h, TP, dt: str, head_dim: int, seq: int, mask: str):
    """Cast q, k, v (and bias) to `dt`; MatMul(q, Transpose(k)) * scale; the mask; Softmax;
    MatMul(., v); Cast to float32. mask: "" (none), "causal" or "bias" (an additive input)."""
    to = getattr(TP, ATTN_TYPES[dt][0])
    inits = [h.make_tensor("scale", to, [], [_attn_scale(dt, head_dim)])]
    n = [h.make_node("Cast", [x], [x + "16"], to=to) for x in ("q", "k", "v")]
    n += [h.make_node("Transpose", ["k16"], ["kt"], perm=[0, 1, 3, 2]),
          h.make_node("MatMul", ["q16", "kt"], ["s0"]),
          h.make_node("Mul", ["s0", "scale"], ["s1"])]
    scores = "s1"
    if mask == "causal":
        # GPT-2's form, Where(keep, scores, fill), with keep = range(L)[None] <= range(L)[:, None]
        # computed in the graph (no [L, L] constant in the artifact).
        inits += [h.make_tensor("zero", TP.INT64, [], [0]), h.make_tensor("len", TP.INT64, [], [seq]),
                  h.make_tensor("one", TP.INT64, [], [1]), h.make_tensor("ax0", TP.INT64, [1], [0]),
                  h.make_tensor("ax1", TP.INT64, [1], [1]),
                  h.make_tensor("fill", to, [], [_attn_fill(dt)])]
        n += [h.make_node("Range", ["zero", "len", "one"], ["pos"]),
              h.make_node("Unsqueeze", ["pos", "ax0"], ["col"]),
              h.make_node("Unsqueeze", ["pos", "ax1"], ["row"]),
              h.make_node("LessOrEqual", ["col", "row"], ["keep"]),
              h.make_node("Where", ["keep", "s1", "fill"], ["s2"])]
        scores = "s2"
    elif mask == "bias":
        n += [h.make_node("Cast", ["bias"], ["bias16"], to=to), h.make_node("Add", ["s1", "bias16"], ["s2"])]
        scores = "s2"
    n += [h.make_node("Softmax", [scores], ["p"], axis=-1), h.make_node("MatMul", ["p", "v16"], ["o"]),
          h.make_node("Cast", ["o"], ["y"], to=TP.FLOAT)]
    return n, inits


def _block_graph(h, TP, seq: int, heads: int):
    """A causal self-attention block in f32, every weight an input: qkv = x @ w_qkv, split into
    `heads` heads, causal attention (the mask computed in the graph), heads merged,
    y = . @ w_o + b_o."""
    inits = [h.make_tensor("zero", TP.INT64, [], [0]), h.make_tensor("len", TP.INT64, [], [seq]),
             h.make_tensor("one", TP.INT64, [], [1]), h.make_tensor("ax0", TP.INT64, [1], [0]),
             h.make_tensor("ax1", TP.INT64, [1], [1]), h.make_tensor("fill", TP.FLOAT, [], [-math.inf]),
             h.make_tensor("heads_shape", TP.INT64, [4], [0, 0, heads, -1]),
             h.make_tensor("merge_shape", TP.INT64, [3], [0, 0, -1])]
    # Opset 17's Split without sizes: three equal parts.
    # Weights drawn uniform(-1, 1) are scaled by 1/sqrt(E) in the graph (initialisation-sized:
    # activations stay O(1) and the softmax is not one-hot).
    n = [h.make_node("Mul", ["w_qkv", "w_scale"], ["w_qkv_s"]),
         h.make_node("Mul", ["w_o", "w_scale"], ["w_o_s"]),
         h.make_node("MatMul", ["x", "w_qkv_s"], ["qkv"]),
         h.make_node("Split", ["qkv"], ["qx", "kx", "vx"], axis=-1)]
    for t in "qkv":
        n += [h.make_node("Reshape", [t + "x", "heads_shape"], [t + "r"]),
              h.make_node("Transpose", [t + "r"], [t], perm=[0, 2, 1, 3])]
    n += [h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
          h.make_node("MatMul", ["q", "kt"], ["s0"]),
          h.make_node("Mul", ["s0", "scale"], ["s1"]),
          h.make_node("Range", ["zero", "len", "one"], ["pos"]),
          h.make_node("Unsqueeze", ["pos", "ax0"], ["col"]),
          h.make_node("Unsqueeze", ["pos", "ax1"], ["row"]),
          h.make_node("LessOrEqual", ["col", "row"], ["keep"]),
          h.make_node("Where", ["keep", "s1", "fill"], ["s2"]),
          h.make_node("Softmax", ["s2"], ["p"], axis=-1),
          h.make_node("MatMul", ["p", "v"], ["o"]),
          h.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
          h.make_node("Reshape", ["ot", "merge_shape"], ["m"]),
          h.make_node("MatMul", ["m", "w_o_s"], ["proj"]),
          h.make_node("Add", ["proj", "b_o"], ["y"])]
    return n, inits


def _block_micro(name: str, batch: int, seq: int, embed: int, heads: int, precision: str,
                 scale: int) -> Micro:
    """The f32 block of _block_graph compiled with --precision `precision` against PyTorch
    eager in f32 (the check) and under torch.autocast to the same 16-bit type (the baseline)."""
    batch, seq = max(1, batch // scale), max(1, seq // scale)
    dh = embed // heads

    def torch_block(torch, F, x, w_qkv, w_o, b_o):
        b, l, e = x.shape
        w_qkv, w_o = w_qkv * (1 / math.sqrt(e)), w_o * (1 / math.sqrt(e))
        q, k, v = (t.reshape(b, l, heads, dh).transpose(1, 2) for t in (x @ w_qkv).split(e, dim=-1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / math.sqrt(dh))
        return a.transpose(1, 2).reshape(b, l, e) @ w_o + b_o

    def autocast(torch, F, *xs):
        if precision == "fp32":
            return torch_block(torch, F, *xs)
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        with torch.autocast("cuda" if xs[0].is_cuda else "cpu", dtype=dtype):
            return torch_block(torch, F, *xs)

    def build(h, TP):
        n, inits = _block_graph(h, TP, seq, heads)
        return n, inits + [h.make_tensor("scale", TP.FLOAT, [], [1 / math.sqrt(dh)]),
                           h.make_tensor("w_scale", TP.FLOAT, [], [1 / math.sqrt(embed)])]

    flops = 2.0 * batch * seq * embed * 4 * embed + 4.0 * batch * heads * seq * seq * dh / 2
    tol = {"fp32": (1e-4, 1e-4), "fp16": (1e-2, 1e-2), "bf16": (4e-2, 4e-2)}[precision]
    return Micro(name, "block",
                 f"causal self-attention block x [{batch},{seq},{embed}], {heads} heads, f32 graph compiled "
                 f"with --precision {precision} (vs torch eager {precision}: autocast for 16 bits)",
                 [("x", [batch, seq, embed]), ("w_qkv", [embed, 3 * embed]), ("w_o", [embed, embed]),
                  ("b_o", [embed])], build, [[batch, seq, embed]], torch_block, autocast, flops=flops,
                 rtol=tol[0], atol=tol[1],
                 precision=precision)


def _attention_micro(name: str, dt: str, shape: list[int], mask: str, scale: int) -> Micro:
    """q = k = v of `shape` [B, H, L, D]; the batch and L divided by `scale` (at least 1)."""
    b, heads, seq, dim = shape
    b, seq = max(1, b // scale), max(1, seq // scale)
    qkv = [b, heads, seq, dim]
    sc = _attn_scale(dt, dim)
    causal = mask == "causal"
    inputs = [("q", qkv), ("k", qkv), ("v", qkv)] + ([("bias", [b, 1, 1, seq])] if mask == "bias" else [])

    def cast(torch, xs):
        t = getattr(torch, ATTN_TYPES[dt][1])
        return tuple(x.to(t) for x in xs)

    def sdpa(torch, F, q, k, v, bias=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=causal, scale=sc)

    def reference(torch, F, *xs):
        return sdpa(torch, F, *cast(torch, xs)).float()

    def baseline(torch, F, *xs):
        # Flash takes no mask: with a bias, the memory-efficient kernel.
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION if mask == "bias" else SDPBackend.FLASH_ATTENTION):
            return sdpa(torch, F, *xs)
    what = {"causal": "causal (in-graph range mask, Where)", "bias": f"additive bias [{b},1,1,{seq}]",
            "": "no mask"}[mask]
    flops = 4.0 * b * heads * seq * seq * dim / (2 if causal else 1)
    rtol, atol = ATTN_TOL[dt]
    return Micro(
        name, "attention", f"{dt} attention q=k=v [{b},{heads},{seq},{dim}], {what}, cast from/to f32 "
        f"(vs SDPA {'efficient' if mask == 'bias' else 'flash'})",
        inputs, lambda h, TP: _attention_graph(h, TP, dt, dim, seq, mask), [qkv], reference, baseline,
        flops=flops, baseline_prep=lambda torch, F, *xs: cast(torch, xs), rtol=rtol, atol=atol)


def micro_list(scale: int = 1) -> list[Micro]:
    """The microbenchmarks; `scale` > 1 divides the large dimensions (for a CPU check of the
    session's code, not for measurements)."""
    def d(n: int) -> int:
        return max(1, n // scale)
    R, C = d(16384), 4096  # 64 Mi floats = 256 MiB per tensor at scale 1
    E = d(8192)
    out: list[Micro] = []
    out.append(Micro(
        "ew_chain", "memory", f"relu(x*1.5+0.5)*sigmoid(x) - tanh(x)*0.25 on {E}x8192 f32 (one fused kernel)",
        [("x", [E, 8192])], lambda h, TP: _ew_chain(h, TP), [[E, 8192]], _ew_torch))
    out.append(Micro(
        "softmax_rows", "memory", f"Softmax over the last axis of {R}x{C} f32 (block per row)",
        [("x", [R, C])], lambda h, TP: ([h.make_node("Softmax", ["x"], ["y"], axis=-1)], []), [[R, C]],
        lambda torch, F, x: torch.softmax(x, dim=-1)))
    S = d(262144)
    out.append(Micro(
        "softmax_rows_256", "memory", f"Softmax over the last axis of {S}x256 f32 (short rows: warp per row)",
        [("x", [S, 256])], lambda h, TP: ([h.make_node("Softmax", ["x"], ["y"], axis=-1)], []),
        [[S, 256]], lambda torch, F, x: torch.softmax(x, dim=-1)))
    out.append(Micro(
        "layernorm_rows", "memory", f"LayerNormalization over the last axis of {R}x{C} f32 with scale and bias",
        [("x", [R, C]), ("scale", [C]), ("bias", [C])],
        lambda h, TP: ([h.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1, epsilon=1e-5)], []),
        [[R, C]], lambda torch, F, x, s, b: F.layer_norm(x, (x.shape[-1],), s, b, 1e-5)))
    out.append(Micro(
        "reduce_cols", "memory", f"ReduceSum over axis 0 of {R}x{C} f32 (a column reduction)",
        [("x", [R, C])],
        lambda h, TP: ([h.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
                       [h.make_tensor("axes", TP.INT64, [1], [0])]),
        [[C]], lambda torch, F, x: x.sum(dim=0)))

    def mm(torch, F, a, b):
        return torch.matmul(a, b)
    G = d(4096)
    out.append(Micro(
        "gemm_4096", "gemm", f"MatMul {G}x{G} @ {G}x{G} f32",
        [("a", [G, G]), ("b", [G, G])],
        lambda h, TP: ([h.make_node("MatMul", ["a", "b"], ["y"])], []), [[G, G]], mm, mm,
        flops=2.0 * G ** 3))
    out.append(Micro(
        "gemm_skinny", "gemm", f"MatMul 64x{G} @ {G}x{G} f32 (a batch-64 linear layer: weight-bandwidth bound)",
        [("a", [64, G]), ("b", [G, G])],
        lambda h, TP: ([h.make_node("MatMul", ["a", "b"], ["y"])], []), [[64, G]], mm, mm,
        flops=2.0 * 64 * G * G))
    out.append(Micro(
        "gemm_bias_relu", "gemm", f"Gemm(transB=1) {G}x{G} @ ({G}x{G})^T + bias, Relu (nn.Linear + ReLU as exported)",
        [("a", [G, G]), ("w", [G, G]), ("bias", [G])],
        lambda h, TP: ([h.make_node("Gemm", ["a", "w", "bias"], ["t"], transB=1),
                        h.make_node("Relu", ["t"], ["y"])], []),
        [[G, G]], lambda torch, F, a, w, b: torch.relu(F.linear(a, w, b)),
        lambda torch, F, a, w, b: torch.matmul(a, w.t()), flops=2.0 * G ** 3))

    def gelu_graph(h, TP):
        nodes = [h.make_node("MatMul", ["a", "w"], ["t0"]), h.make_node("Add", ["t0", "bias"], ["t1"])]
        gn, gi = _gelu_erf(h, TP, "t1", "y", "g")
        return nodes + gn, gi
    M, K, N = d(8192), d(1024), d(4096)
    out.append(Micro(
        "gemm_bias_gelu", "gemm", f"MatMul {M}x{K} @ {K}x{N} + bias, GELU (erf form): a transformer FFN up-projection",
        [("a", [M, K]), ("w", [K, N]), ("bias", [N])], gelu_graph, [[M, N]],
        lambda torch, F, a, w, b: F.gelu(torch.matmul(a, w) + b),
        lambda torch, F, a, w, b: torch.matmul(a, w), flops=2.0 * M * K * N))
    B = d(1024)
    out.append(Micro(
        "bmm", "gemm", f"batched MatMul 16 x ({B}x{B} @ {B}x{B}) f32",
        [("a", [16, B, B]), ("b", [16, B, B])],
        lambda h, TP: ([h.make_node("MatMul", ["a", "b"], ["y"])], []), [[16, B, B]], mm, mm,
        flops=2.0 * 16 * B ** 3))
    N = d(32)
    out.append(Micro(
        "conv3x3", "conv", f"Conv 3x3 pad 1, {N}x64x56x56 input, 64 filters, with bias (a ResNet stage-1 conv)",
        [("x", [N, 64, 56, 56]), ("w", [64, 64, 3, 3]), ("bias", [64])],
        lambda h, TP: ([h.make_node("Conv", ["x", "w", "bias"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])], []),
        [[N, 64, 56, 56]], lambda torch, F, x, w, b: F.conv2d(x, w, b, padding=1),
        lambda torch, F, x, w, b: F.conv2d(x, w, b, padding=1), flops=2.0 * N * 64 * 56 * 56 * 64 * 9))
    # Attention in 16 bits against PyTorch's SDPA (flash; memory-efficient with a bias).
    out.append(_attention_micro("attn_f16_causal_d64", "f16", [4, 16, 2048, 64], "causal", scale))
    out.append(_attention_micro("attn_f16_causal_d128", "f16", [1, 16, 8192, 128], "causal", scale))
    out.append(_attention_micro("attn_bf16_causal_d128", "bf16", [2, 16, 4096, 128], "causal", scale))
    out.append(_attention_micro("attn_f16_bias_d64", "f16", [8, 12, 1024, 64], "bias", scale))
    out.append(_attention_micro("attn_bf16_d64", "bf16", [8, 16, 1024, 64], "", scale))
    # A GPT-2-small-sized block (768 wide, 12 heads) in f32 run with --precision.
    out.append(_block_micro("block_gpt2_fp32", 8, 1024, 768, 12, "fp32", scale))
    out.append(_block_micro("block_gpt2_fp16", 8, 1024, 768, 12, "fp16", scale))
    out.append(_block_micro("block_gpt2_bf16", 8, 1024, 768, 12, "bf16", scale))
    # Sequence-length sweep (causal f16, one sequence of 16 heads; 8k d128 is above).
    for dim, lengths in ((64, (1024, 4096, 8192, 16384)), (128, (1024, 2048, 4096, 16384))):
        for seq in lengths:
            out.append(_attention_micro(f"attn_sweep_f16_causal_d{dim}_{seq // 1024}k", "f16",
                                        [1, 16, seq, dim], "causal", scale))
    return out


def build_model(m: Micro):
    import onnx
    from onnx import TensorProto, helper
    nodes, inits = m.build(helper, TensorProto)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in m.inputs]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, m.output_shapes[0])]
    graph = helper.make_graph(nodes, m.name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="tcc bench/gpu/make_micro.py")
    model.doc_string = m.doc
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", type=Path, help="write <name>/model.onnx and micro.json here")
    ap.add_argument("--list", action="store_true", help="print the microbenchmarks and exit")
    ap.add_argument("--scale", type=int, default=1, help="divide the large dimensions (CPU checks only)")
    args = ap.parse_args()
    micros = micro_list(args.scale)
    if args.list or not args.out_dir:
        for m in micros:
            print(f"{m.name:22s} {m.kind:9s} {m.doc}")
        return 0
    import onnx
    args.out_dir.mkdir(parents=True, exist_ok=True)
    meta = []
    for m in micros:
        d = args.out_dir / m.name
        d.mkdir(exist_ok=True)
        onnx.save(build_model(m), str(d / "model.onnx"))
        meta.append({"name": m.name, "kind": m.kind, "doc": m.doc, "inputs": m.inputs,
                     "outputs": m.output_shapes, "bytes": m.bytes_moved(), "flops": m.flops})
        print(f"{m.name:22s} {m.kind:9s} {d / 'model.onnx'}")
    (args.out_dir / "micro.json").write_text(json.dumps(meta, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
