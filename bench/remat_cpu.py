#!/usr/bin/env python3
"""Activation checkpointing on the CPU: a decoder-only transformer LM trained with --remat off,
--remat auto and --memory-budget 0, side by side in one run.

Interpreter: the `python3` on PATH with numpy and onnx (bench/requirements.txt). The model and
data come from test/lit/cli/Inputs/make_transformer_lm.py (pre-LayerNorm blocks, causal
attention with 4 heads, GELU MLP of 4D, next-token cross-entropy). For each setting: the train
step's saved activation bytes and planned arena from `tcc compile --train --report`, then
`tcc train` for --epochs on the same seed: the process's host allocator peak, the median epoch
time and every step's loss (compared with --remat off's). Writes
bench/results/<date>-remat-cpu.md and .json.

  python3 bench/remat_cpu.py                              # 4 blocks, 128 tokens, batch 8
  python3 bench/remat_cpu.py --layers 8 --seq 256 --dim 256 --epochs 1
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from run_cpu import machine_info  # noqa: E402

SETTINGS = [("off", ["--remat", "off"]), ("auto", ["--remat", "auto"]),
            ("budget 0", ["--memory-budget", "0"])]


def run(cmd: list[str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {(r.stderr or r.stdout)[-2000:]}")
    return r.stdout + r.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tcc", default=str(ROOT / "build" / "bin" / "tcc"))
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out-dir", default=str(BENCH / "results"))
    args = ap.parse_args()
    info = machine_info()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tcc-remat-") as work:
        w = Path(work)
        run([sys.executable, str(ROOT / "test" / "lit" / "cli" / "Inputs" / "make_transformer_lm.py"),
             str(w), "--layers", str(args.layers), "--seq", str(args.seq), "--dim", str(args.dim),
             "--vocab", "32", "--samples", str(args.samples)])
        base_losses = None
        for name, flags in SETTINGS:
            tag = name.replace(" ", "-")
            art, report = w / f"{tag}.tcc", w / f"{tag}.json"
            run([args.tcc, "compile", "--train", str(w / "lm.onnx"), "--batch-size", str(args.batch),
                 "-o", str(art), "--report", str(report), "--no-cache"] + flags)
            entry = {e["name"]: e for e in json.loads(report.read_text())["entries"]}["train_step"]
            metrics, steps = w / f"{tag}-metrics.json", w / f"{tag}-steps.json"
            print(f"== {name}: training", flush=True)
            run([args.tcc, "train", str(art), "--data", str(w / "data"), "--lr", "3e-3",
                 "--epochs", str(args.epochs), "--seed", "1", "--threads", str(args.threads),
                 "--metrics", str(metrics), "--step-log", str(steps)])
            m = json.loads(metrics.read_text())
            losses = json.loads(steps.read_text())
            if base_losses is None:
                base_losses = losses
            diff = max(abs(a - b) / max(abs(a), 1e-30) for a, b in zip(base_losses, losses))
            rows.append({"setting": name, "flags": flags,
                         "activation_bytes": entry["activation_bytes"],
                         "activation_bytes_without_remat": entry["activation_bytes_without_remat"],
                         "arena_bytes": entry["arena_bytes"],
                         "host_peak_bytes": m[-1]["host_peak_bytes"],
                         "epoch_seconds": statistics.median(e["seconds"] for e in m),
                         "final_train_loss": m[-1]["train_loss"],
                         "max_rel_loss_difference_vs_off": diff})
    base = rows[0]
    head = ("| setting | saved activations MB | vs off | train-step arena MB | vs off | process peak MB "
            "| epoch s (median) | vs off | final train loss | max rel. loss diff vs off |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {r['setting']} | {r['activation_bytes'] / 1e6:.1f} | {r['activation_bytes'] / base['activation_bytes']:.2f} | "
            f"{r['arena_bytes'] / 1e6:.1f} | {r['arena_bytes'] / base['arena_bytes']:.2f} | {r['host_peak_bytes'] / 1e6:.1f} | "
            f"{r['epoch_seconds']:.2f} | {r['epoch_seconds'] / base['epoch_seconds']:.2f} | "
            f"{r['final_train_loss']:.4f} | {r['max_rel_loss_difference_vs_off']:.1e} |")
    day = info["date"][:10]
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{day}-remat-cpu"
    md = [f"# Activation checkpointing, CPU: a {args.layers}-block transformer LM, {args.threads} thread(s)", "",
          f"- date: {info['date']}; CPU: {info['cpu']} ({info['cores']} cores; {info['cpu_flags']}); "
          f"{info['os']}; tcc at git {info['git_commit']}{' (dirty)' if info['git_dirty'] else ''}",
          f"- model: test/lit/cli/Inputs/make_transformer_lm.py --layers {args.layers} --seq {args.seq} "
          f"--dim {args.dim} (4 heads, MLP 4x, vocabulary 32), batch {args.batch}, Adam lr 3e-3, "
          f"{args.epochs} epochs of {args.samples // args.batch} steps, seed 1", "",
          *lines, "",
          "Saved activations: forward values the backward pass reads (the compile report's "
          "activation_bytes). Arena: the train step's planned temporaries. Process peak: the host "
          "allocator's peak in `tcc train` (state, batches and temporaries). auto recomputes the "
          "cheap ops (pointwise, data movement, normalisation statistics); budget 0 keeps only block "
          "boundaries and recomputes whole blocks, matrix products included.", ""]
    stem.with_suffix(".md").write_text("\n".join(md))
    stem.with_suffix(".json").write_text(json.dumps({"machine": info, "args": vars(args), "runs": rows},
                                                    indent=1) + "\n")
    print("\n".join(lines) + f"\n-> {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
