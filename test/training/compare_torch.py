#!/usr/bin/env python3
"""tcc train vs PyTorch on the first steps of FashionMNIST: same initial weights, same batches.

    compare_torch.py --tcc build/bin/tcc --model MODEL.onnx --data /usr/share/datasets/fashion-mnist

MODEL.onnx is the example MLP without Dropout (examples/fashion-mnist/make_model.py
--no-dropout), so both sides compute the same function. PyTorch (CPU, float32) trains the MLP
rebuilt from the model's initializers on the first --steps batches of --batch-size training
images in file order, with Adam at --lr (PyTorch's defaults otherwise) and mean cross-entropy;
`tcc train --no-shuffle --max-steps N --step-log` does the same. Every step's loss must agree
within --tolerance, relative. A PyTorch float64 run of the same steps is shown beside them: how
far float32 rounding alone moves the losses.

Runs with the python3 on PATH (CMake: TCC_TORCH_PYTHON). Exits 77 (CTest's skip code here) with the reason when torch is
not importable or the dataset is missing; 1 when the losses differ or tcc fails.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    # numpy as well as torch: a bare interpreter has neither, and then this comparison skips.
    from torch_reference import dataset_missing, load_idx, mlp_from_onnx  # noqa: E402
except ModuleNotFoundError as e:
    print(f"SKIP: {e.name} is not importable by {sys.executable}; this comparison needs numpy "
          f"and torch")
    sys.exit(SKIP)


def torch_losses(model_path, images, labels, steps, batch_size, lr, threads, dtype):
    """Per-step mean losses of PyTorch training on batches [i*bs, (i+1)*bs), i < steps."""
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    net = mlp_from_onnx(model_path, dtype)
    net.train()
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    x_all = torch.from_numpy(images[:steps * batch_size]).to(dtype)
    y_all = torch.from_numpy(labels[:steps * batch_size])
    losses = []
    for i in range(steps):
        x = x_all[i * batch_size:(i + 1) * batch_size]
        y = y_all[i * batch_size:(i + 1) * batch_size]
        optimizer.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def tcc_losses(tcc, model_path, data_dir, steps, batch_size, lr, threads, work_dir):
    step_log = os.path.join(work_dir, "steps.json")
    cmd = [tcc, "train", model_path, "--data", data_dir, "--loss", "cross-entropy",
           "--optimizer", "adam", "--lr", repr(lr), "--batch-size", str(batch_size),
           "--epochs", "1", "--seed", "0", "--no-shuffle", "--max-steps", str(steps),
           "--threads", str(threads), "--step-log", step_log]
    print("$ " + " ".join(cmd), flush=True)
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"tcc train failed (exit {result.returncode}):\n{result.stdout}")
    with open(step_log) as f:
        return [float(v) for v in json.load(f)]


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def compare(tcc, model_path, data_dir, steps=100, batch_size=64, lr=1e-3, threads=1,
            work_dir=None):
    """Runs both sides; returns a dict with the per-step losses and the largest differences."""
    images, labels = load_idx(data_dir, "train")
    import torch
    ref32 = torch_losses(model_path, images, labels, steps, batch_size, lr, threads, torch.float32)
    ref64 = torch_losses(model_path, images, labels, steps, batch_size, lr, threads, torch.float64)
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        got = tcc_losses(tcc, model_path, data_dir, steps, batch_size, lr, threads, tmp)
    if len(got) != steps:
        raise RuntimeError(f"tcc's step log has {len(got)} losses, expected {steps}")
    return {
        "steps": steps, "batch_size": batch_size, "lr": lr, "threads": threads,
        "torch_version": torch.__version__,
        "tcc": got, "torch_f32": ref32, "torch_f64": ref64,
        "max_rel_tcc_vs_torch": max(relative(a, b) for a, b in zip(got, ref32)),
        "max_rel_torch_f32_vs_f64": max(relative(a, b) for a, b in zip(ref32, ref64)),
    }


def print_table(r):
    shown = sorted({1, 2, 3, 5, 10, 20, 50, r["steps"]} & set(range(1, r["steps"] + 1)))
    worst = max(range(r["steps"]), key=lambda i: relative(r["tcc"][i], r["torch_f32"][i])) + 1
    shown = sorted(set(shown) | {worst})
    print(f"{'step':>5} {'tcc':>12} {'torch f32':>12} {'rel diff':>9} {'torch f64':>12} "
          f"{'f32 vs f64':>10}")
    for s in shown:
        a, b, c = r["tcc"][s - 1], r["torch_f32"][s - 1], r["torch_f64"][s - 1]
        mark = "  <- largest" if s == worst else ""
        print(f"{s:>5} {a:>12.7f} {b:>12.7f} {relative(a, b):>9.2e} {c:>12.7f} "
              f"{relative(b, c):>10.2e}{mark}")
    print(f"max relative difference over {r['steps']} steps: tcc vs torch f32 "
          f"{r['max_rel_tcc_vs_torch']:.3e}; torch f32 vs f64 {r['max_rel_torch_f32_vs_f64']:.3e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tcc", required=True)
    parser.add_argument("--model", required=True, help="the MLP without Dropout")
    parser.add_argument("--data", required=True, help="IDX folder (dataset-fashion-mnist)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--json", help="also write the losses and differences here")
    args = parser.parse_args()

    try:
        import onnx  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e.name} is not importable by {sys.executable} ({e}); this comparison "
              "needs PyPI's torch and onnx (`python3 -m pip install torch onnx`, or point CMake's "
              "TCC_TORCH_PYTHON at an interpreter that has them)")
        return SKIP
    missing = dataset_missing(args.data)
    if missing:
        print(f"SKIP: FashionMNIST: {missing}")
        return SKIP

    try:
        r = compare(args.tcc, args.model, args.data, args.steps, args.batch_size, args.lr,
                    args.threads)
    except (RuntimeError, OSError, ValueError) as e:
        print(f"FAIL: {e}")
        return 1
    print_table(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1)
    if r["max_rel_tcc_vs_torch"] > args.tolerance:
        print(f"FAIL: tcc's losses differ from PyTorch's by more than {args.tolerance} relative")
        return 1
    print(f"PASS: within {args.tolerance} relative")
    return 0


if __name__ == "__main__":
    sys.exit(main())
