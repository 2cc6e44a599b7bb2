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
  conv:   the time of cuDNN alone (torch conv2d, TF32 off) / tcc's time.

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
    kind: str                         # "memory", "gemm" or "conv"
    doc: str
    inputs: list[tuple[str, list[int]]]   # float32 graph inputs
    build: Callable                   # (helper, TensorProto) -> (nodes, initializers, outputs)
    output_shapes: list[list[int]]
    torch_fn: Callable                # (torch, F, *inputs) -> output (what the graph computes)
    baseline_fn: Callable | None = None   # (torch, F, *inputs) -> the library-alone work
    flops: float = 0.0                # gemm/conv: multiply-add = 2
    tags: list[str] = field(default_factory=list)

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
            print(f"{m.name:18s} {m.kind:7s} {m.doc}")
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
        print(f"{m.name:18s} {m.kind:7s} {d / 'model.onnx'}")
    (args.out_dir / "micro.json").write_text(json.dumps(meta, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
