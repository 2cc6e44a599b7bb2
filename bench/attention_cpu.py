#!/usr/bin/env python3
"""Attention at long sequence lengths: tcc's fused kernel against onnxruntime (CPU), in one run.

Interpreter: the `python3` on PATH (pip install -r bench/requirements.txt). Each case is the
attention core of a transformer layer as exporters write it (MatMul(q, Transpose(k)), scale,
mask, Softmax, MatMul(v)) with GPT-2-small heads (12 x 64): causal (the mask computed as
range(L)[None] <= range(L)[:, None], as torch's exporter writes it), and bidirectional with an
additive padding mask (BERT). For each sequence length: `tcc bench` on the compiled artifact vs
`InferenceSession.run` (same inputs and threads, alternating rounds), tcc's planned memory
(the report's arena_bytes: every intermediate of the program), and the peak resident memory of
a process that loads and runs the model once (libtccrt's `tccrt-run`, and onnxruntime in a
fresh python). Outputs are compared where onnxruntime fits in memory. Writes
bench/results/<date>-attention-cpu.md and .json and prints the table.

  python3 bench/attention_cpu.py                         # 1k, 2k, 4k, 8k tokens, 1 and 2 threads
  python3 bench/attention_cpu.py --lengths 1024 --threads 1
  python3 bench/attention_cpu.py --precisions fp32 bf16     # tcc also with --precision bf16
"""
from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import gemm_cpu  # noqa: E402  (results writer, machine lines)
import run_cpu  # noqa: E402  (machine info, the tcc driver, onnxruntime runner)

HEADS, HEAD_DIM = 12, 64


WIDTH = HEADS * HEAD_DIM


def f32(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def i64(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, np.int64), name)


def causal_where(scores: str, out: str, length: int, nodes: list, inits: list) -> None:
    """Where(range(L)[None] <= range(L)[:, None], scores, -inf), as torch's exporter writes it."""
    nodes += [helper.make_node("Range", ["zero", "len", "one"], ["idx"]),
              helper.make_node("Unsqueeze", ["idx", "axis0"], ["col"]),
              helper.make_node("Unsqueeze", ["idx", "axis1"], ["row"]),
              helper.make_node("LessOrEqual", ["col", "row"], ["keep"]),
              helper.make_node("Where", ["keep", scores, "ninf"], [out])]
    inits += [i64("zero", 0), i64("len", length), i64("one", 1), i64("axis0", [0]), i64("axis1", [1]),
              f32("ninf", -np.inf)]


def gpt2_block(length: int, rng) -> tuple[list, list, dict]:
    """One GPT-2-small layer (pre-LayerNorm, fused QKV projection, causal attention, output
    projection, tanh-GELU MLP of width 4 x 768, residuals), as torch exports it at opset 17."""
    w = lambda name, *shape: f32(name, rng.standard_normal(shape) * 0.02)  # noqa: E731
    n = helper.make_node
    inits = [f32("g1", np.ones(WIDTH)), f32("b1", np.zeros(WIDTH)), f32("g2", np.ones(WIDTH)),
             f32("b2", np.zeros(WIDTH)), w("Wqkv", WIDTH, 3 * WIDTH), w("bqkv", 3 * WIDTH),
             w("Wo", WIDTH, WIDTH), w("bo", WIDTH), w("W1", WIDTH, 4 * WIDTH), w("bm1", 4 * WIDTH),
             w("W2", 4 * WIDTH, WIDTH), w("bm2", WIDTH), i64("thirds", [WIDTH] * 3),
             i64("split", [1, length, HEADS, HEAD_DIM]), i64("merge", [1, length, WIDTH]),
             f32("scale", 1 / math.sqrt(HEAD_DIM)), f32("half", 0.5), f32("one_f", 1.0),
             f32("c", math.sqrt(2 / math.pi)), f32("k3", 0.044715), f32("three", 3.0)]
    nodes = [n("LayerNormalization", ["x", "g1", "b1"], ["ln1"], axis=-1, epsilon=1e-5),
             n("MatMul", ["ln1", "Wqkv"], ["qkv0"]), n("Add", ["qkv0", "bqkv"], ["qkv"]),
             n("Split", ["qkv", "thirds"], ["qm", "km", "vm"], axis=-1)]
    for t in "qkv":
        nodes += [n("Reshape", [t + "m", "split"], [t + "r"]),
                  n("Transpose", [t + "r"], [t], perm=[0, 2, 1, 3])]
    nodes += [n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), n("MatMul", ["q", "kt"], ["s0"]),
              n("Mul", ["s0", "scale"], ["s1"])]
    causal_where("s1", "s2", length, nodes, inits)
    nodes += [n("Softmax", ["s2"], ["p"], axis=-1), n("MatMul", ["p", "v"], ["o"]),
              n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), n("Reshape", ["ot", "merge"], ["om"]),
              n("MatMul", ["om", "Wo"], ["pr0"]), n("Add", ["pr0", "bo"], ["pr"]), n("Add", ["x", "pr"], ["x2"]),
              n("LayerNormalization", ["x2", "g2", "b2"], ["ln2"], axis=-1, epsilon=1e-5),
              n("MatMul", ["ln2", "W1"], ["h0"]), n("Add", ["h0", "bm1"], ["h"]),
              # tanh GELU: 0.5 h (1 + tanh(c (h + 0.044715 h^3)))
              n("Pow", ["h", "three"], ["h3"]), n("Mul", ["h3", "k3"], ["h3k"]), n("Add", ["h", "h3k"], ["inner0"]),
              n("Mul", ["inner0", "c"], ["inner"]), n("Tanh", ["inner"], ["th"]), n("Add", ["th", "one_f"], ["th1"]),
              n("Mul", ["h", "th1"], ["g0"]), n("Mul", ["g0", "half"], ["g"]),
              n("MatMul", ["g", "W2"], ["m0"]), n("Add", ["m0", "bm2"], ["m"]), n("Add", ["x2", "m"], ["y"])]
    x = rng.standard_normal([1, length, WIDTH]).astype(np.float32)
    return nodes, inits, {"x": x}


class AttentionCase:
    def __init__(self, root: Path, kind: str, length: int, seed: int):
        self.kind, self.length = kind, length
        self.name = (f"GPT-2 block (768 wide, causal), {length} tokens" if kind == "gpt2-block" else
                     f"{kind} attention, {HEADS} heads x {HEAD_DIM}, {length} tokens")
        self.dir = root / f"{kind}-{length}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.onnx_path = self.dir / "model.onnx"
        rng = np.random.default_rng(seed)
        if kind == "gpt2-block":
            nodes, inits, arrays = gpt2_block(length, rng)
            self.save(nodes, inits, arrays, [1, length, WIDTH])
            return
        shape = [1, HEADS, length, HEAD_DIM]
        arrays = {t: rng.standard_normal(shape, dtype=np.float32) for t in "qkv"}
        nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                 helper.make_node("MatMul", ["q", "kt"], ["s0"]),
                 helper.make_node("Mul", ["s0", "scale"], ["s1"])]
        inits = [f32("scale", 1 / math.sqrt(HEAD_DIM))]
        if kind == "causal":
            causal_where("s1", "s2", length, nodes, inits)
        else:  # padding: the last eighth of the keys masked out
            pad = np.zeros([1, 1, 1, length], np.float32)
            pad[..., length - length // 8:] = -1e4
            arrays["mask"] = pad
            nodes.append(helper.make_node("Add", ["s1", "mask"], ["s2"]))
        nodes += [helper.make_node("Softmax", ["s2"], ["p"], axis=-1),
                  helper.make_node("MatMul", ["p", "v"], ["o"])]
        self.save(nodes, inits, arrays, shape)

    def save(self, nodes: list, inits: list, arrays: dict, out_shape: list[int]) -> None:
        inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in arrays.items()]
        graph = helper.make_graph(nodes, "attention", inputs,
                                  [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, out_shape)],
                                  inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, self.onnx_path)
        self.inputs = []
        for i, (n, a) in enumerate(arrays.items()):
            p = self.dir / f"input_{i}.pb"
            p.write_bytes(numpy_helper.from_array(a, n).SerializeToString())
            self.inputs.append(p)

    def input_paths(self) -> list[Path]:
        return self.inputs

    def fields(self) -> dict:
        return {"kind": self.kind, "tokens": self.length, "heads": HEADS, "head_dim": HEAD_DIM}

    @property
    def gflop(self) -> float:
        """q k^T and p v (2 flops per multiply-add; causal: the half below the diagonal), and
        for a block its four projections."""
        full = 2 * 2 * HEADS * self.length * self.length * HEAD_DIM * 1e-9
        if self.kind == "padding":
            return full
        projections = 2 * self.length * WIDTH * (3 * WIDTH + WIDTH + 8 * WIDTH) * 1e-9
        return full / 2 + (projections if self.kind == "gpt2-block" else 0)


# Runs argv[1:] and prints its peak resident memory in KiB. A fresh interpreter forks it: a child
# forked from this (large) process would count this process's pages in its maximum.
PEAK_RSS = """
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if rc == 0 else -1)
"""


def peak_rss_mib(cmd: list[str]) -> float:
    """Peak resident memory of `cmd` (MiB); NaN when it fails."""
    out = subprocess.run([sys.executable, "-c", PEAK_RSS, *cmd], capture_output=True, text=True).stdout
    kib = int(out.strip() or -1)
    return kib / 1024 if kib >= 0 else float("nan")


ORT_ONCE = """
import sys, onnxruntime as ort, onnx, numpy as np
from onnx import numpy_helper
opts = ort.SessionOptions(); opts.intra_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], opts, providers=["CPUExecutionProvider"])
feeds = {i.name: numpy_helper.to_array(onnx.load_tensor(p)) for i, p in zip(s.get_inputs(), sys.argv[2:])}
s.run(None, feeds)
"""


def measure(case: AttentionCase, tcc: run_cpu.Tcc, tccrt_run: Path, threads: int, iters: int,
            ort_max_tokens: int, precision: str) -> dict:
    report = tcc.compile(case, f"t{threads}", None if precision == "fp32" else precision)
    art = report["artifact"]
    row = {"case": case.name, **case.fields(), "threads": threads, "precision": precision,
           "arena_mib": report["arena_bytes"] / 2**20,
           "tcc_peak_rss_mib": peak_rss_mib([str(tccrt_run), art, "--threads", "1", "--warmup", "0",
                                             "--inputs", *map(str, case.input_paths())])}
    run_ort = case.length <= ort_max_tokens
    t_blocks, o_blocks = [], []
    ort = run_cpu.OrtRunner(case, threads) if run_ort else None
    for _ in range(3):
        if ort:
            o_blocks.append(ort.block(1, iters))
        t_blocks.append(tcc.bench(case, threads, 1, iters, art))
    t = run_cpu.combine(t_blocks)
    row.update(tcc_ms=t["median_ms"], tcc_gflops=case.gflop / (t["median_ms"] * 1e-3))
    if run_ort:
        o = run_cpu.combine(o_blocks)
        ort = None  # free its session before the memory measurements
        # 16-bit products: compared norm-wise (max |difference| / max |reference|).
        check = run_cpu.compare(tcc.run_outputs(case, art), run_cpu.ort_outputs(case),
                                normwise=None if precision == "fp32" else 2e-2)
        row.update(ort_ms=o["median_ms"], ratio=t["median_ms"] / o["median_ms"], outputs_ok=check["ok"],
                   ort_gflops=case.gflop / (o["median_ms"] * 1e-3),
                   ort_peak_rss_mib=peak_rss_mib([sys.executable, "-c", ORT_ONCE, str(case.onnx_path),
                                                  *map(str, case.input_paths())]))
    print(f"  {threads}t {precision} {case.name:44s} tcc {row['tcc_ms']:9.2f} ms  arena {row['arena_mib']:8.1f} MiB  "
          f"peak {row['tcc_peak_rss_mib']:7.0f} MiB" +
          (f"  ORT {row['ort_ms']:9.2f} ms peak {row['ort_peak_rss_mib']:7.0f} MiB  tcc/ORT {row['ratio']:.2f}  "
           f"outputs {'ok' if row['outputs_ok'] else 'DIFFER'}" if run_ort else "  (ORT not run)"), flush=True)
    return row


def markdown(info: dict, rows: list[dict]) -> str:
    lines = gemm_cpu.machine_lines("Attention at long sequences: tcc vs onnxruntime (CPU)", info)
    lines += ["One attention core (q, k, v [1, 12, L, 64] inputs; scale; causal mask computed from a range, or "
              "an additive padding mask; Softmax; MatMul), `tcc bench` on the compiled artifact vs "
              "`InferenceSession.run`, median of 3 alternating rounds. tcc recognises the pattern and runs its "
              "fused online-softmax kernel; onnxruntime runs the graph as written. *arena*: tcc's planned "
              "intermediates; *peak RSS*: a process loading the model and running it once, 1 thread "
              "(`tccrt-run`, the deployable runtime; onnxruntime in a fresh python: about 60 MiB of that is "
              "the interpreter, numpy and onnx). Inputs and output alone are 4 x L x 3 KiB.", "",
              "| case | threads | tcc precision | tcc ms | ORT ms (f32) | tcc/ORT | tcc GFLOP/s | ORT GFLOP/s | tcc arena MiB | tcc peak RSS MiB | ORT peak RSS MiB | outputs |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        has = "ort_ms" in r
        head = f"| {r['case']} | {r['threads']} | {r.get('precision', 'fp32')} | {r['tcc_ms']:.2f} | "
        lines.append(head + f"{r['ort_ms']:.2f} | {r['ratio']:.2f} | {r['tcc_gflops']:.1f} | {r['ort_gflops']:.1f} | "
                     if has else head + f"- | - | {r['tcc_gflops']:.1f} | - | ")
        lines[-1] += (f"{r['arena_mib']:.1f} | {r['tcc_peak_rss_mib']:.0f} | "
                      f"{r['ort_peak_rss_mib']:.0f} | {'ok' if r['outputs_ok'] else 'DIFFER'} |" if has else
                      f"{r['arena_mib']:.1f} | {r['tcc_peak_rss_mib']:.0f} | - | - |")
    for p in sorted({r.get("precision", "fp32") for r in rows}):
        for t in sorted({r["threads"] for r in rows}):
            rs = [r["ratio"] for r in rows if r["threads"] == t and "ratio" in r and r.get("precision", "fp32") == p]
            if rs:
                lines.append(f"\ngeometric mean tcc ({p}) / ORT (f32), {t} thread(s): "
                             f"**{math.exp(sum(map(math.log, rs)) / len(rs)):.2f}**")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--kinds", nargs="+", default=["causal", "padding", "gpt2-block"],
                    choices=["causal", "padding", "gpt2-block"])
    ap.add_argument("--iters", type=int, default=3, help="timed runs per round (default 3)")
    ap.add_argument("--precisions", nargs="+", default=["fp32"], choices=["fp32", "bf16"],
                    help="tcc's --precision for each case (onnxruntime runs the f32 model)")
    ap.add_argument("--ort-max-tokens", type=int, default=4096,
                    help="run onnxruntime up to this length (it materialises every L x L score matrix)")
    ap.add_argument("--tcc", default=str(run_cpu.ROOT / "build" / "bin" / "tcc"))
    ap.add_argument("--out-dir", default=str(BENCH / "results"))
    args = ap.parse_args()

    info = run_cpu.machine_info()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tcc-attention-bench-") as tmp:
        work = Path(tmp)
        tcc = run_cpu.Tcc(args.tcc, 1800, work / "tcc")
        for kind in args.kinds:
            for i, length in enumerate(args.lengths):
                case = AttentionCase(work / "models", kind, length, seed=i)
                for t in args.threads:
                    for precision in args.precisions:
                        rows.append(measure(case, tcc, Path(args.tcc).parent / "tccrt-run", t,
                                            args.iters, args.ort_max_tokens, precision))
    gemm_cpu.write_results(args.out_dir, "attention-cpu", {"machine": info, "rows": rows}, markdown(info, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
