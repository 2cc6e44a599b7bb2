#!/usr/bin/env python3
"""libtccrt's f32 GEMM against this core's FMA peak, OpenBLAS and onnxruntime, in one run.

Interpreter: the `python3` on PATH (pip install -r bench/requirements.txt). Two parts:
  1. `build/bin/tccrt-gemm-bench --json` (ninja -C build tccrt-gemm-bench) at 1 and 2 threads:
     the measured FMA peak of one core, and GFLOP/s of libtccrt's sgemm (operands packed per
     call, and the weight prepacked as compiled programs do) beside OpenBLAS's cblas_sgemm
     (Debian's, with the core it picked for this CPU) on large, transformer, im2col and
     batch-1 shapes;
  2. single-layer ONNX models (MatMul or Gemm(transB=1) by a constant weight, as exporters
     write nn.Linear) through `tcc bench` and onnxruntime's CPU EP, same inputs and threads:
     the skinny shapes (batch 1 to 4) where per-call overheads and GEMV speed matter.
Writes bench/results/<date>-gemm-cpu.md and .json and prints the tables.

  python3 bench/gemm_cpu.py                    # both parts, 1 and 2 threads
  python3 bench/gemm_cpu.py --threads 1 --iters 100
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
import run_cpu  # noqa: E402  (machine info, onnxruntime sessions, timing, the tcc driver)

# name, M, K, N, form: "matmul" (x[M,K] @ W[K,N]) or "linear" (Gemm transB=1, W[N,K], + bias)
LAYERS = [
    ("gemv linear 2048->1000 (classifier)", 1, 2048, 1000, "linear"),
    ("gemv matmul 768->3072 (GPT-2 MLP)", 1, 768, 3072, "matmul"),
    ("gemv linear 256->1024 (LSTM gates)", 1, 256, 1024, "linear"),
    ("batch 4 linear 512->512", 4, 512, 512, "linear"),
    ("batch 1 x 128 tokens linear 384->1536", 128, 384, 1536, "linear"),
    ("batch 1 x 128 tokens matmul 1536->384", 128, 1536, 384, "matmul"),
]


class Layer:
    def __init__(self, root: Path, name: str, m: int, k: int, n: int, form: str, seed: int):
        self.name, self.m, self.k, self.n, self.form = name, m, k, n, form
        self.dir = root / f"layer{seed}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.onnx_path = self.dir / "model.onnx"
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((m, k), dtype=np.float32)
        if form == "linear":
            w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
            b = rng.standard_normal((n,), dtype=np.float32)
            node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)
            inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
        else:
            w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
            node = helper.make_node("MatMul", ["x", "w"], ["y"])
            inits = [numpy_helper.from_array(w, "w")]
        graph = helper.make_graph([node], "layer",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], inits)
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), self.onnx_path)
        self.input = self.dir / "input_0.pb"
        self.input.write_bytes(numpy_helper.from_array(x, "x").SerializeToString())

    def input_paths(self) -> list[Path]:
        return [self.input]

    def fields(self) -> dict:
        return {"m": self.m, "k": self.k, "n": self.n, "form": self.form}

    @property
    def gflop(self) -> float:
        return 2.0 * self.m * self.n * self.k * 1e-9


def gemm_bench(binary: Path, threads: int, repeats: int) -> dict:
    out = subprocess.run([str(binary), "--threads", str(threads), "--repeats", str(repeats), "--json"],
                         capture_output=True, text=True, timeout=1200, check=True).stdout
    return json.loads(out)


def layers_vs_ort(layers: list, tcc: run_cpu.Tcc, threads: int, iters: int) -> list[dict]:
    """Each layer: name, onnx_path, input_paths(), gflop (useful work) and fields() (its shape,
    for the JSON rows); tcc and onnxruntime timed in alternating rounds, outputs compared."""
    rows = []
    for layer in layers:
        ort = run_cpu.OrtRunner(layer, threads)
        art = tcc.compile(layer, f"t{threads}")["artifact"]
        got = tcc.run_outputs(layer, art)
        ref = run_cpu.ort_outputs(layer)
        check = run_cpu.compare(got, ref)
        t_blocks, o_blocks = [], []
        for _ in range(3):  # alternate, so drift hits both
            o_blocks.append(ort.block(10, iters))
            t_blocks.append(tcc.bench(layer, threads, 10, iters, art))
        t, o = run_cpu.combine(t_blocks), run_cpu.combine(o_blocks)
        rows.append({"layer": layer.name, **layer.fields(), "threads": threads, "tcc_ms": t["median_ms"], "ort_ms": o["median_ms"],
                     "ratio": t["median_ms"] / o["median_ms"], "outputs_ok": check["ok"],
                     "tcc_gflops": layer.gflop / (t["median_ms"] * 1e-3),
                     "ort_gflops": layer.gflop / (o["median_ms"] * 1e-3)})
        print(f"  {threads}t {layer.name:52s} tcc {t['median_ms']:.4f} ms  ORT {o['median_ms']:.4f} ms  "
              f"tcc/ORT {rows[-1]['ratio']:.2f}  outputs {'ok' if check['ok'] else 'DIFFER'}", flush=True)
    return rows


def write_results(out_dir: str, name: str, data: dict, md: str) -> None:
    """bench/results-style <date>-<name>.json and .md in out_dir; prints the table."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{dt.date.today().isoformat()}-{name}"
    stem.with_suffix(".json").write_text(json.dumps(data, indent=1))
    stem.with_suffix(".md").write_text(md)
    print(md)
    print(f"-> {stem}.md", flush=True)


def machine_lines(title: str, info: dict) -> list[str]:
    return [f"# {title}", "",
            f"- date: {info['date']}; host: {info['host']}",
            f"- CPU: {info['cpu']} ({info['cores']} cores; {info['cpu_flags']}); {info['os']}",
            f"- tcc at git {info['git_commit']}{' (dirty)' if info['git_dirty'] else ''}; onnxruntime "
            f"{info['onnxruntime']} (CPUExecutionProvider, ORT_ENABLE_ALL)", ""]


def layers_markdown(layers: list[dict], intro: str) -> list[str]:
    lines = ["## Single layers: tcc vs onnxruntime", "", intro, "",
             "| layer | threads | tcc ms | ORT ms | tcc/ORT | tcc GFLOP/s | ORT GFLOP/s | outputs |",
             "|---|---|---|---|---|---|---|---|"]
    for r in layers:
        rate = (lambda g: f"{g:.1f}" if g else "—")  # memory-bound layers (pooling) count no flops
        lines.append(f"| {r['layer']} | {r['threads']} | {r['tcc_ms']:.4f} | {r['ort_ms']:.4f} | {r['ratio']:.2f} | "
                     f"{rate(r['tcc_gflops'])} | {rate(r['ort_gflops'])} | {'ok' if r['outputs_ok'] else 'DIFFER'} |")
    for t in sorted({r["threads"] for r in layers}):
        rs = [r["ratio"] for r in layers if r["threads"] == t]
        lines.append(f"\ngeometric mean tcc/ORT, {t} thread(s): **{math.exp(sum(map(math.log, rs)) / len(rs)):.2f}**")
    return lines


def markdown(info: dict, kernels: dict[int, dict], layers: list[dict]) -> str:
    lines = machine_lines("libtccrt sgemm vs FMA peak, OpenBLAS and onnxruntime (CPU)", info)
    for threads, k in kernels.items():
        peak = k["fma_peak_512_gflops"] if k["family"] == "avx512" else k["fma_peak_256_gflops"]
        lines += [f"## GEMM kernels, {threads} thread{'s' if threads > 1 else ''}", "",
                  f"sgemm family **{k['family']}**; OpenBLAS core `{k['openblas_core']}`; measured FMA peak of "
                  f"one core: 512-bit {k['fma_peak_512_gflops']:.1f}, 256-bit {k['fma_peak_256_gflops']:.1f} GFLOP/s "
                  f"(x{threads} threads = {peak * threads:.1f}). Best of repeated calls, same operands.", "",
                  "| shape | m | n | k | tcc GFLOP/s | tcc, weight prepacked | OpenBLAS | tcc % of peak | tcc/OpenBLAS time |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for s in k["shapes"]:
            pct = 100 * s["tcc_gflops"] / (peak * threads) if peak else float("nan")
            lines.append(f"| {s['what']} | {s['m']} | {s['n']} | {s['k']}{' (B^T)' if s['trans_b'] else ''} | "
                         f"{s['tcc_gflops']:.1f} | {s['tcc_prepacked_gflops']:.1f} | {s['openblas_gflops']:.1f} | "
                         f"{pct:.0f}% | {s['openblas_gflops'] / s['tcc_gflops']:.2f} |")
        lines.append("")
    if layers:
        lines += layers_markdown(layers, "One ONNX node with a constant weight (Gemm transB=1 + bias as exporters "
                                 "write nn.Linear, or MatMul), `tcc bench` on the compiled artifact vs "
                                 "`InferenceSession.run`, median of 3 alternating rounds.")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--iters", type=int, default=200, help="timed runs per round for the layers (default 200)")
    ap.add_argument("--repeats", type=int, default=10, help="repeats per shape in tccrt-gemm-bench (default 10)")
    ap.add_argument("--tcc", default=str(ROOT / "build" / "bin" / "tcc"))
    ap.add_argument("--gemm-bench", default=str(ROOT / "build" / "bin" / "tccrt-gemm-bench"))
    ap.add_argument("--no-layers", action="store_true", help="only the kernel part")
    ap.add_argument("--out-dir", default=str(BENCH / "results"))
    args = ap.parse_args()

    binary = Path(args.gemm_bench)
    if not binary.exists():
        print(f"{binary} is missing: ninja -C build tccrt-gemm-bench", file=sys.stderr)
        return 2
    info = run_cpu.machine_info()
    kernels = {}
    for t in args.threads:
        print(f"== tccrt-gemm-bench, {t} thread(s)", flush=True)
        kernels[t] = gemm_bench(binary, t, args.repeats)
        for s in kernels[t]["shapes"]:
            print(f"  {s['what']:28s} tcc {s['tcc_gflops']:7.1f}  prepacked {s['tcc_prepacked_gflops']:7.1f}  "
                  f"OpenBLAS {s['openblas_gflops']:7.1f} GFLOP/s", flush=True)
    rows = []
    if not args.no_layers:
        with tempfile.TemporaryDirectory(prefix="tcc-gemm-bench-") as tmp:
            work = Path(tmp)
            layers = [Layer(work / "models", *spec, seed=i) for i, spec in enumerate(LAYERS)]
            tcc = run_cpu.Tcc(args.tcc, 600, work / "tcc")
            print("== single layers vs onnxruntime", flush=True)
            for t in args.threads:
                rows += layers_vs_ort(layers, tcc, t, args.iters)
    write_results(args.out_dir, "gemm-cpu", {"machine": info, "kernels": kernels, "layers": rows},
                  markdown(info, kernels, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
