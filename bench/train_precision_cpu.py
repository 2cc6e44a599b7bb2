#!/usr/bin/env python3
"""Mixed-precision training on the CPU: tcc train --precision fp32 / bf16 / fp16, FashionMNIST MLP.

Interpreter: the `python3` on PATH with bench/requirements.txt (run_cpu.py's machine record).
Each precision trains the example model (examples/fashion-mnist/model.onnx: 784-256-256-10,
ReLU, Dropout 0.2) with the same recipe, seed and thread count (Adam lr 1e-3, batch 64,
--epochs E), one after another, and reports per precision: the test accuracy after each epoch,
the final and best accuracy with their difference to fp32, the median epoch time (training and
the test-set evaluation, compilation excluded) and its ratio to fp32, and for fp16 the loss scale
and the steps skipped. Writes bench/results/<date>-train-precision-cpu.md and .json.

  python3 bench/train_precision_cpu.py                    # 10 epochs, 1 thread
  python3 bench/train_precision_cpu.py --epochs 2 --threads 2 --precisions fp32 bf16
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


def train(tcc: str, data: str, precision: str, epochs: int, threads: int, seed: int,
          work: Path) -> list[dict]:
    metrics = work / f"metrics-{precision}.json"
    cmd = [tcc, "train", str(ROOT / "examples" / "fashion-mnist" / "model.onnx"), "--data", data,
           "--loss", "cross-entropy", "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "64",
           "--epochs", str(epochs), "--seed", str(seed), "--threads", str(threads),
           "--precision", precision, "--metrics", str(metrics), "--no-cache"]
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"tcc train --precision {precision} failed: {(r.stderr or r.stdout)[-2000:]}")
    return json.loads(metrics.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tcc", default=str(ROOT / "build" / "bin" / "tcc"))
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16", "fp16"])
    ap.add_argument("--out-dir", default=str(BENCH / "results"))
    args = ap.parse_args()
    if "fp32" not in args.precisions:
        args.precisions.insert(0, "fp32")
    info = machine_info()
    runs = {}
    with tempfile.TemporaryDirectory(prefix="tcc-train-precision-") as work:
        for p in args.precisions:
            runs[p] = train(args.tcc, args.data, p, args.epochs, args.threads, args.seed, Path(work))
            last = runs[p][-1]
            print(f"   {p}: test accuracy {last['test_accuracy']:.4f} after {len(runs[p])} epochs", flush=True)

    def epoch_seconds(m):  # per-epoch wall time (the metrics hold each epoch's own)
        return statistics.median(e["seconds"] for e in m)

    base = runs["fp32"]
    rows = []
    for p, m in runs.items():
        final, best = m[-1]["test_accuracy"], max(e["test_accuracy"] for e in m)
        rows.append({
            "precision": p, "accuracy_by_epoch": [e["test_accuracy"] for e in m],
            "final_accuracy": final, "best_accuracy": best,
            "final_minus_fp32_points": 100 * (final - base[-1]["test_accuracy"]),
            "median_epoch_seconds": epoch_seconds(m),
            "epoch_time_over_fp32": epoch_seconds(m) / epoch_seconds(base),
            "final_train_loss": m[-1]["train_loss"],
            "loss_scale": m[-1].get("loss_scale"), "skipped_steps": m[-1].get("skipped_steps")})
    day = info["date"][:10]
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{day}-train-precision-cpu"
    head = ("| precision | test accuracy by epoch (%) | final | best | final − fp32 (points) | "
            "epoch s (median) | epoch time / fp32 | final train loss | loss scale / skipped steps |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        scale = "—" if r["loss_scale"] is None else f"{r['loss_scale']:g} / {r['skipped_steps']}"
        lines.append(f"| {r['precision']} | {' '.join(f'{100 * a:.2f}' for a in r['accuracy_by_epoch'])} | "
                     f"{100 * r['final_accuracy']:.2f} | {100 * r['best_accuracy']:.2f} | "
                     f"{r['final_minus_fp32_points']:+.2f} | {r['median_epoch_seconds']:.2f} | "
                     f"{r['epoch_time_over_fp32']:.2f} | {r['final_train_loss']:.4f} | {scale} |")
    md = [f"# Mixed-precision training, CPU: FashionMNIST MLP, {args.threads} thread(s)", "",
          f"- date: {info['date']}; CPU: {info['cpu']} ({info['cores']} cores; {info['cpu_flags']}); "
          f"{info['os']}; tcc at git {info['git_commit']}{' (dirty)' if info['git_dirty'] else ''}",
          f"- recipe: examples/fashion-mnist/model.onnx (784-256-256-10, Dropout 0.2), Adam lr 1e-3, "
          f"batch 64, {args.epochs} epochs, seed {args.seed}, the same shuffled batches for every "
          "precision; `tcc train --precision P`", "",
          *lines, "",
          "bf16/fp16: the forward model's matrix products in 16 bits with f32 sums, their gradients "
          "16-bit GEMMs too; parameters, optimizer state, softmax and the loss in f32. bf16 GEMMs use "
          "AVX512-BF16 where the CPU has it; f16 ones are converted to f32 while packed (no faster "
          "than f32 on a CPU without AVX512-FP16/AMX-FP16). fp16 adds dynamic loss scaling "
          "(initial 65536; halved on a step with non-finite gradients, which is skipped). Epoch "
          "time: training and the test-set evaluation, compilation excluded.", ""]
    stem.with_suffix(".md").write_text("\n".join(md))
    stem.with_suffix(".json").write_text(json.dumps({"machine": info, "epochs": args.epochs,
                                                     "threads": args.threads, "seed": args.seed,
                                                     "runs": rows}, indent=1) + "\n")
    print("\n".join(lines) + f"\n-> {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
