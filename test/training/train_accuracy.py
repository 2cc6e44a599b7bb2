#!/usr/bin/python3
"""End to end: `tcc train` on FashionMNIST must reach a test accuracy.

    train_accuracy.py --tcc build/bin/tcc --model examples/fashion-mnist/model.onnx \
        --data /usr/share/datasets/fashion-mnist --work-dir DIR

Trains the example MLP (with Dropout) with Adam lr 1e-3, batch 64, a fixed seed (and --precision),
for --epochs epochs, reads the per-epoch metrics tcc writes (--metrics) and checks that the test accuracy
reaches --min-accuracy within those epochs (the best epoch's; the issue's wording, "reaches >= 88%
in 10 epochs"). The recipe sits close to 88% (PyTorch eager: 87.4-88.5% after 10 epochs), so the
last epoch alone would pass or fail with the exact float trajectory, which differs between CPUs
(ISA, BLAS kernels); the best of the last epochs is a stable measure of what the training
reached (seeds 1-6 here: 88.3-88.7%). Prints one line per epoch.

Runs with /usr/bin/python3 (no third-party modules). Exits 77 (CTest's skip code here) with the
reason when the dataset is missing; 1 when training fails or falls short.
"""
import argparse
import json
import os
import subprocess
import sys
import time

SKIP = 77
FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
FIELDS = ["epoch", "train_loss", "test_loss", "test_accuracy", "seconds"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tcc", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--min-accuracy", type=float, default=0.88)
    parser.add_argument("--precision", default="fp32",
                        help="tcc train --precision (fp32, bf16, fp16)")
    args = parser.parse_args()

    for name in FILES:
        path = os.path.join(args.data, name)
        if not (os.path.exists(path) or os.path.exists(path + ".gz")):
            print(f"SKIP: FashionMNIST: {path}[.gz] not found "
                  "(Debian: apt-get install dataset-fashion-mnist)")
            return SKIP

    os.makedirs(args.work_dir, exist_ok=True)
    metrics_path = os.path.join(args.work_dir, "metrics.json")
    if os.path.exists(metrics_path):
        os.remove(metrics_path)
    cmd = [args.tcc, "train", args.model, "--data", args.data, "--loss", "cross-entropy",
           "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "64",
           "--epochs", str(args.epochs), "--seed", str(args.seed),
           "--threads", str(args.threads), "--metrics", metrics_path,
           "--precision", args.precision]
    print("$ " + " ".join(cmd), flush=True)
    start = time.monotonic()
    # The progress bar goes to the terminal only; keep the log short.
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - start
    if result.returncode != 0:
        print(result.stdout[-4000:])
        print(f"FAIL: tcc train exited with {result.returncode}")
        return 1
    with open(metrics_path) as f:
        metrics = json.load(f)
    if len(metrics) != args.epochs or any(k not in m for m in metrics for k in FIELDS):
        print(f"FAIL: {metrics_path} should hold {args.epochs} objects with {FIELDS}: {metrics}")
        return 1

    print(f"{'epoch':>5} {'train loss':>10} {'test loss':>10} {'test acc':>9} {'seconds':>8}")
    for m in metrics:
        print(f"{m['epoch']:>5} {m['train_loss']:>10.4f} {m['test_loss']:>10.4f} "
              f"{m['test_accuracy']:>9.4f} {m['seconds']:>8.2f}")
    print(f"wall time of tcc train (compilation included): {wall:.1f} s")
    best = max(metrics, key=lambda m: m["test_accuracy"])
    accuracy, last = best["test_accuracy"], metrics[-1]["test_accuracy"]
    if not accuracy >= args.min_accuracy:
        print(f"FAIL: best test accuracy {accuracy:.4f} in {args.epochs} epochs "
              f"< {args.min_accuracy} (last epoch: {last:.4f})")
        return 1
    print(f"PASS: test accuracy reached {accuracy:.4f} >= {args.min_accuracy} "
          f"(epoch {best['epoch']}; last epoch: {last:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
