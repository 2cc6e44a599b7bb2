#!/usr/bin/env python3
"""Training through attention at long sequence lengths, CPU: tcc against PyTorch eager (SDPA).

Interpreter: the `python3` on PATH with numpy and onnx (bench/requirements.txt) and PyPI torch
(bench/requirements-torch.txt) for the peer. The model is one causal self-attention layer with
GPT-2-small heads (width 768, 12 heads of 64) as exporters write it (q, k, v and output
projections; MatMul(q, Transpose(k)), scale, Where(causal), Softmax, MatMul(v)), trained with
Adam (lr 1e-4) on an mse loss, batch 1, the same initial weights and data on both sides.

For each sequence length:
  - tcc: `tcc compile --train --report`: the train step's planned temporaries (arena) and saved
    activations; then `tcc train --metrics --step-log` for --epochs epochs of --samples steps:
    the median over epochs 2.. of the epoch's time per step (an epoch also evaluates the one
    test sample), and the process's peak resident memory;
  - PyTorch eager in a fresh process: the same layer with F.scaled_dot_product_attention
    (is_causal=True: its CPU flash-attention kernel, forward and backward), the same epochs
    (steps, then the test sample evaluated), timed the same way, and the peak resident memory;
  - the step losses of both, compared (largest relative difference).
With --precisions fp32 bf16, each precision is a row: tcc `--precision bf16` (products and
attention, forward and backward, in bf16 with f32 sums; parameters and Adam state f32) against
torch.autocast("cpu", bfloat16) around the same step.
tcc's attention gradient is tcc.attention_grad, the runtime's fused backward pass: no score
matrix is held (the decomposed gradient held 2-3 of them, 12 x L x L floats each). Ratios are
tcc / torch (< 1: tcc faster or smaller). Writes bench/results/<date>-attention-train-cpu.md
and .json.

  python3 bench/attention_train_cpu.py                     # 512 .. 4096 tokens, 1 thread
  python3 bench/attention_train_cpu.py --lengths 1024 --threads 2 --epochs 2
  python3 bench/attention_train_cpu.py --precisions fp32 bf16
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
import gemm_cpu  # noqa: E402  (results writer)
from run_cpu import machine_info  # noqa: E402

from attention_layer import HEAD_DIM, HEADS, WIDTH, write_data, write_model  # noqa: E402  (the layer)
LR = 1e-4


def run(cmd: list[str], env: dict | None = None) -> tuple[str, int]:
    """Runs cmd; returns its output and its own peak resident memory in bytes (wait4's)."""
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {text[-3000:]}")
    return text, usage.ru_maxrss * 1024


def torch_worker(args) -> None:
    """In a fresh process: the PyTorch side of one length; prints a JSON line."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    w = Path(args.work)
    weights = {n: torch.from_numpy(np.load(w / f"{n}.npy")) for n in ("Wq", "Wk", "Wv", "Wo")}
    params = [torch.nn.Parameter(weights[n].clone()) for n in ("Wq", "Wk", "Wv", "Wo")]
    opt = torch.optim.Adam(params, lr=LR)
    xs = torch.from_numpy(np.load(w / "data" / "train_images.npy"))
    ys = torch.from_numpy(np.load(w / "data" / "train_labels.npy"))
    test_x = torch.from_numpy(np.load(w / "data" / "test_images.npy"))
    test_y = torch.from_numpy(np.load(w / "data" / "test_labels.npy"))
    L = xs.shape[1]

    def heads(t):
        return t.view(1, L, HEADS, HEAD_DIM).transpose(1, 2)

    bf16 = args.precision == "bf16"

    def forward(x):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            q, k, v = heads(x @ params[0]), heads(x @ params[1]), heads(x @ params[2])
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return (o.transpose(1, 2).reshape(1, L, WIDTH) @ params[3]).float()

    # As `tcc train` does: an epoch is its steps, then the test sample evaluated.
    times, losses = [], []
    for epoch in range(args.epochs):
        start = time.perf_counter()
        for i in range(xs.shape[0]):
            loss = F.mse_loss(forward(xs[i:i + 1]), ys[i:i + 1])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss))
        with torch.no_grad():
            float(F.mse_loss(forward(test_x), test_y))
        times.append((time.perf_counter() - start) / xs.shape[0])
    steady = times[1:] or times
    print(json.dumps({"step_seconds": statistics.median(steady), "losses": losses,
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "torch": torch.__version__}))


def measure(args, length: int, precision: str) -> dict:
    """One row: tcc and (unless --no-torch) torch at `length` tokens in `precision`."""
    with tempfile.TemporaryDirectory(prefix="tcc-attn-train-") as work:
        w = Path(work)
        weights = write_model(w / "layer.onnx", length, args.seed)
        for n, a in weights.items():
            np.save(w / f"{n}.npy", a)
        write_data(w / "data", length, args.samples, args.seed)
        print(f"== {length} tokens, {precision}: tcc", flush=True)
        report = w / "report.json"
        run([args.tcc, "compile", "--train", str(w / "layer.onnx"), "--loss", "mse",
             "--batch-size", "1", "--precision", precision, "-o", str(w / "layer.tcc"),
             "--report", str(report), "--no-cache"])
        entry = {e["name"]: e for e in json.loads(report.read_text())["entries"]}["train_step"]
        metrics, steps = w / "metrics.json", w / "steps.json"
        _, tcc_rss = run([args.tcc, "train", str(w / "layer.tcc"), "--data", str(w / "data"),
                          "--lr", str(LR), "--epochs", str(args.epochs), "--no-shuffle",
                          "--threads", str(args.threads), "--metrics", str(metrics),
                          "--step-log", str(steps)])
        m = json.loads(metrics.read_text())
        # An epoch's time per step (`steps` counts from the start of training); the epoch
        # includes evaluating the one test sample, as the torch side's does.
        per_step = [e["seconds"] / (e["steps"] - (m[i - 1]["steps"] if i else 0))
                    for i, e in enumerate(m)]
        steady = per_step[1:] or per_step
        row = {"length": length, "precision": precision, "arena_bytes": entry["arena_bytes"],
               "activation_bytes": entry["activation_bytes"],
               "score_matrix_bytes": HEADS * length * length * 4,
               "tcc_step_seconds": statistics.median(steady), "tcc_peak_rss_bytes": tcc_rss,
               "tcc_host_peak_bytes": m[-1]["host_peak_bytes"]}
        tcc_losses = json.loads(steps.read_text())
        if not args.no_torch:
            print(f"== {length} tokens, {precision}: torch", flush=True)
            env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
            out, _ = run([sys.executable, __file__, "--worker", "1", "--work", str(w),
                          "--threads", str(args.threads), "--epochs", str(args.epochs),
                          "--precision", precision], env)
            t = json.loads(out.strip().splitlines()[-1])
            row.update({"torch_step_seconds": t["step_seconds"],
                        "torch_peak_rss_bytes": t["peak_rss_bytes"], "torch": t["torch"],
                        "max_rel_loss_difference": max(
                            abs(a - b) / max(abs(b), 1e-30) for a, b in zip(tcc_losses, t["losses"]))})
        return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tcc", default=str(ROOT / "build" / "bin" / "tcc"))
    ap.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--samples", type=int, default=3, help="training steps per epoch")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--precisions", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    ap.add_argument("--no-torch", action="store_true", help="tcc only")
    ap.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)  # the worker's
    ap.add_argument("--out-dir", default=str(BENCH / "results"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        torch_worker(args)
        return 0
    info = machine_info()
    rows = []
    for length in args.lengths:
        for precision in args.precisions:
            rows.append(measure(args, length, precision))
            print(json.dumps(rows[-1]), flush=True)
    head = ("| tokens | precision | score matrix MB (one) | tcc arena MB | tcc saved activations MB | tcc step ms "
            "| torch step ms | tcc/torch | tcc peak RSS MB | torch peak RSS MB | max rel. loss diff |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    fmt = lambda v, s=".1f": "—" if v is None else format(v, s)  # noqa: E731
    for r in rows:
        ts = r.get("torch_step_seconds")
        lines.append(
            f"| {r['length']} | {r['precision']} | {r['score_matrix_bytes'] / 1e6:.1f} | {r['arena_bytes'] / 1e6:.1f} | "
            f"{r['activation_bytes'] / 1e6:.1f} | {r['tcc_step_seconds'] * 1e3:.1f} | "
            f"{fmt(ts and ts * 1e3)} | {fmt(ts and r['tcc_step_seconds'] / ts, '.2f')} | "
            f"{r['tcc_peak_rss_bytes'] / 1e6:.0f} | {fmt(r.get('torch_peak_rss_bytes') and r['torch_peak_rss_bytes'] / 1e6, '.0f')} | "
            f"{fmt(r.get('max_rel_loss_difference'), '.1e')} |")
    md = [f"# Training through causal attention, CPU, {args.threads} thread(s)", "",
          f"- date: {info['date']}; CPU: {info['cpu']} ({info['cores']} cores; {info['cpu_flags']}); "
          f"{info['os']}; tcc at git {info['git_commit']}{' (dirty)' if info['git_dirty'] else ''}"
          + (f"; torch {rows[0]['torch']}" if rows and "torch" in rows[0] else ""),
          f"- model: one causal self-attention layer, width {WIDTH}, {HEADS} heads of {HEAD_DIM}, "
          f"batch 1, mse, Adam lr {LR}; {args.epochs} epochs of {args.samples} steps, same weights "
          "and data on both sides; step time: an epoch's time per step (its steps and the evaluation "
          "of one test sample), median over epochs 2..", "",
          *lines, "",
          "Score matrix: one [12, L, L] f32 tensor, what a materialised attention holds per "
          "softmax (its gradient held two or three). tcc arena: the train step's planned "
          "temporaries (compile report). Peak RSS: the whole process (torch's includes its "
          "libraries, about 300-400 MB). Loss difference: every step's loss, tcc vs torch.", ""]
    gemm_cpu.write_results(args.out_dir, "attention-train-cpu",
                           {"machine": info, "args": vars(args), "runs": rows}, "\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
