#!/usr/bin/env python3
"""Training on the CPU: tcc train vs PyTorch eager vs torch.compile, FashionMNIST MLP.

Interpreter: the `python3` on PATH (PyPI torch, onnx, onnxruntime, numpy). Every side trains the
example model (examples/fashion-mnist/model.onnx: 784-256-256-10, ReLU, Dropout 0.2) from the
same initial weights with Adam lr 1e-3, mean cross-entropy, batch 64, on the same thread count:
  - tcc: `tcc train --threads N --metrics` (its compilation happens before epoch 1 and is
    reported apart: wall time minus the epochs);
  - PyTorch eager and torch.compile (default mode, the model compiled; the optimizer eager), each
    in its own process with torch.set_num_threads(N) and OMP_NUM_THREADS=N.
An epoch is the same work everywhere, as `tcc train` defines it: 937 shuffled batches of 64 (the
last incomplete batch dropped), then the whole test set evaluated in batches of 64. The epoch time
compared is the median over epochs 2..E (epoch 1 holds torch.compile's compilation; it is shown
apart). Ratios are tcc / peer (< 1: tcc faster).

It also records (a) the training curve: per-epoch test accuracy of tcc and PyTorch eager over
--curve-epochs (10) epochs at the largest thread count (these runs also give that thread count's
timings); (b) test/training/compare_torch.py's result: the first 100 losses of tcc and PyTorch,
no dropout, same batches.

Writes bench/results/<date>-train-cpu.md and .json.

  python3 bench/train_cpu.py                              # 1 and 2 threads, ~15 min on 2 cores
  python3 bench/train_cpu.py --threads 2 --epochs 2 --curve-epochs 0 --no-compare   # quick
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "test" / "training"))
from torch_reference import dataset_missing, load_idx, mlp_from_onnx  # noqa: E402

MODEL = ROOT / "examples" / "fashion-mnist" / "model.onnx"
BATCH = 64
LR = 1e-3


# ------------------------------------------------------------------------------------------
# PyTorch worker (runs in its own process: one thread setting per process)
# ------------------------------------------------------------------------------------------
def torch_worker(args) -> dict:
    import torch
    torch.set_num_threads(args.threads[0])
    torch.manual_seed(args.seed)
    x_train, y_train = map(torch.from_numpy, load_idx(args.data, "train"))
    x_test, y_test = map(torch.from_numpy, load_idx(args.data, "test"))
    net = mlp_from_onnx(str(args.model))
    model = torch.compile(net) if args.worker == "compile" else net
    optimizer = torch.optim.Adam(net.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps = len(x_train) // BATCH
    generator = torch.Generator().manual_seed(args.seed)
    epochs = []
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        model.train()
        order = torch.randperm(len(x_train), generator=generator)
        loss_sum = 0.0
        for i in range(steps):
            rows = order[i * BATCH:(i + 1) * BATCH]
            optimizer.zero_grad()
            loss = loss_fn(model(x_train[rows]), y_train[rows])
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()  # tcc reads every step's loss too
        train_seconds = time.perf_counter() - start
        model.eval()
        test_loss, correct = 0.0, 0
        with torch.no_grad():
            for i in range(0, len(x_test), BATCH):
                logits = model(x_test[i:i + BATCH])
                test_loss += torch.nn.functional.cross_entropy(
                    logits, y_test[i:i + BATCH], reduction="sum").item()
                correct += int((logits.argmax(1) == y_test[i:i + BATCH]).sum())
        epochs.append({"epoch": epoch, "train_loss": loss_sum / steps,
                       "test_loss": test_loss / len(x_test), "test_accuracy": correct / len(x_test),
                       "seconds": time.perf_counter() - start, "train_seconds": train_seconds})
        print(json.dumps(epochs[-1]), file=sys.stderr, flush=True)
    return {"epochs": epochs, "torch": torch.__version__}


# ------------------------------------------------------------------------------------------
# The driver
# ------------------------------------------------------------------------------------------
def run_torch(mode: str, threads: int, epochs: int, args) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [sys.executable, __file__, "--worker", mode, "--threads", str(threads),
           "--epochs", str(epochs), "--seed", str(args.seed), "--data", args.data,
           "--model", str(args.model)]
    meter = CpuMeter()
    start = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                       timeout=args.timeout)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1:] or ["failed"]}
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r.update(wall_seconds=wall, others_cpu=meter.others())
    return r


def run_tcc(threads: int, epochs: int, args, work: Path) -> dict:
    metrics = work / f"tcc-{threads}t.json"
    cmd = [args.tcc, "train", str(args.model), "--data", args.data, "--loss", "cross-entropy",
           "--optimizer", "adam", "--lr", repr(LR), "--batch-size", str(BATCH),
           "--epochs", str(epochs), "--seed", str(args.seed), "--threads", str(threads),
           "--metrics", str(metrics)]
    env = dict(os.environ, TCC_CACHE_DIR=str(work / "cache"))  # compile time without cache hits
    meter = CpuMeter()
    start = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                       timeout=args.timeout)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1:] or ["failed"]}
    epochs_json = json.loads(metrics.read_text())
    return {"epochs": epochs_json, "wall_seconds": wall, "others_cpu": meter.others(),
            "setup_seconds": wall - sum(e["seconds"] for e in epochs_json)}


def steady(r: dict) -> float | None:
    """Median epoch seconds over epochs 2.. (epoch 1 when there is only one)."""
    if not r or "epochs" not in r:
        return None
    secs = [e["seconds"] for e in r["epochs"]]
    return statistics.median(secs[1:] if len(secs) > 1 else secs)


def fmt(v, spec=".2f", none="—"):
    return none if v is None else format(v, spec)


def write_results(info: dict, runs: dict, curve: dict | None, compare: dict | None, args) -> Path:
    day = info["date"][:10]
    base = Path(args.out_dir) / f"{day}-train-cpu"
    md = ["# Training on the CPU: tcc vs PyTorch eager vs torch.compile (FashionMNIST MLP)", "",
          f"- date: {info['date']}; host: {info['host']}",
          f"- CPU: {info['cpu']} ({info['cores']} cores, {info['affinity']} usable; "
          f"{info['cpu_flags']}); memory {info['memory']}; {info['os']}",
          f"- tcc: `{args.tcc}` built from {args.tcc_source or 'the tree at git ' + info['git_commit']}"
          f"{' (with uncommitted changes)' if info['git_dirty'] and not args.tcc_source else ''}; "
          f"torch {info.get('torch', '?')}; python {info['python']}",
          f"- model `examples/fashion-mnist/model.onnx` (784-256-256-10, ReLU, Dropout 0.2), Adam "
          f"lr {LR:g}, batch {BATCH}, seed {args.seed}; an epoch = 937 shuffled batches + the test "
          "set (10000 images, batches of 64)",
          f"- load average at start {info['loadavg_start']:.2f}, at end "
          f"{info.get('loadavg_end', float('nan')):.2f} (2 shared cores: a high load means noisy "
          "numbers); others' CPU = share of the machine other processes used during the run", "",
          "## Epoch time", "",
          "| threads | tcc s/epoch | eager s/epoch | compile s/epoch | tcc/eager | tcc/compile "
          "| tcc setup s | compile epoch 1 s | others' CPU (tcc/eager/compile) |",
          "|---|---|---|---|---|---|---|---|---|"]
    for t in args.threads:
        r = runs[t]
        tc, ea, co = steady(r["tcc"]), steady(r["eager"]), steady(r["compile"])
        first = r["compile"]["epochs"][0]["seconds"] if "epochs" in r["compile"] else None
        others = "/".join(fmt(r[k].get("others_cpu"), ".0%") for k in ("tcc", "eager", "compile"))
        md.append(f"| {t} | {fmt(tc)} | {fmt(ea)} | {fmt(co)} | "
                  f"{fmt(tc / ea if tc and ea else None, '.3f')} | "
                  f"{fmt(tc / co if tc and co else None, '.3f')} | "
                  f"{fmt(r['tcc'].get('setup_seconds'), '.1f')} | {fmt(first, '.1f')} | {others} |")
        for k in ("tcc", "eager", "compile"):
            if "error" in r[k]:
                md.append(f"\n{k} at {t} thread(s) failed: {r[k]['error']}\n")
    md += ["", "s/epoch: median over epochs 2.. of each run (tcc: `seconds` of `--metrics`; "
           "PyTorch: wall time of the same loop). tcc setup: wall time of `tcc train` minus its "
           "epochs (data loading, building the backward pass, compiling with an empty kernel "
           "cache). compile epoch 1: torch.compile's first epoch, its compilation included.", ""]
    if curve:
        md += [f"## Training curve ({args.curve_epochs} epochs, {max(args.threads)} threads, "
               "with Dropout)", "",
               "| epoch | tcc test acc | eager test acc | tcc train loss | eager train loss |",
               "|---|---|---|---|---|"]
        for a, b in zip(curve["tcc"], curve["eager"]):
            md.append(f"| {a['epoch']} | {a['test_accuracy']:.4f} | {b['test_accuracy']:.4f} | "
                      f"{a['train_loss']:.4f} | {b['train_loss']:.4f} |")
        md += ["", "The two runs start from the same weights but shuffle and drop out with "
               "different generators, so the curves agree in trend, not digit by digit.", ""]
    if compare:
        md += ["## Loss of the first 100 steps vs PyTorch (no dropout, same batches)", ""]
        if "error" in compare:
            md.append(f"failed: {compare['error']}")
        else:
            md += [f"max relative difference tcc vs torch float32: "
                   f"**{compare['max_rel_tcc_vs_torch']:.2e}**; torch float32 vs float64: "
                   f"{compare['max_rel_torch_f32_vs_f64']:.2e} (1 thread; "
                   "`test/training/compare_torch.py`)", "",
                   "| step | tcc | torch f32 | rel diff | torch f64 |", "|---|---|---|---|---|"]
            for s in (1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100):
                if s <= compare["steps"]:
                    a, b, c = (compare[k][s - 1] for k in ("tcc", "torch_f32", "torch_f64"))
                    md.append(f"| {s} | {a:.7f} | {b:.7f} | {abs(a - b) / abs(b):.2e} | {c:.7f} |")
        md.append("")
    base.with_suffix(".md").write_text("\n".join(md))
    raw = {"machine": info, "tcc": args.tcc, "tcc_source": args.tcc_source, "seed": args.seed,
           "batch_size": BATCH, "lr": LR, "epochs": args.epochs, "curve_epochs": args.curve_epochs,
           "by_threads": {str(t): {**runs[t], "steady_seconds": {
               k: steady(runs[t][k]) for k in ("tcc", "eager", "compile")}}
               for t in args.threads},
           "compare_first_steps": compare}
    base.with_suffix(".json").write_text(json.dumps(raw, indent=1) + "\n")
    print("\n".join(md))
    return base


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tcc", default=str(ROOT / "build" / "bin" / "tcc"))
    ap.add_argument("--tcc-source", help="what the tcc binary was built from (default: git HEAD)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--model", default=str(MODEL), help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--epochs", type=int, default=3, help="epochs per timing run (default 3)")
    ap.add_argument("--curve-epochs", type=int, default=10,
                    help="epochs of the curve runs at the largest thread count (0: none)")
    ap.add_argument("--no-compare", action="store_true", help="skip the first-100-steps check")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                    help="before each run, wait up to S s until others use < 15%% of the CPU")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    ap.add_argument("--out-dir", default=str(BENCH / "results"))
    ap.add_argument("--worker", choices=["eager", "compile"], help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        print(json.dumps(torch_worker(args)))
        return 0
    missing = dataset_missing(args.data)
    if missing:
        print(f"FashionMNIST: {missing}", file=sys.stderr)
        return 2
    import torch
    info = machine_info()
    info["torch"] = torch.__version__
    runs = {}
    curve = None
    with tempfile.TemporaryDirectory(prefix="tcc-train-bench-") as tmp:
        work = Path(tmp)
        for t in args.threads:
            epochs = args.epochs
            if t == max(args.threads) and args.curve_epochs:
                epochs = max(epochs, args.curve_epochs)
            runs[t] = {}
            for name in ("tcc", "eager", "compile"):
                n = epochs if name != "compile" else args.epochs
                wait_quiet(args.wait_quiet)
                print(f"{name}, {t} thread(s), {n} epochs ...", flush=True)
                runs[t][name] = (run_tcc(t, n, args, work) if name == "tcc"
                                 else run_torch(name, t, n, args))
                print(f"   {fmt(steady(runs[t][name]))} s/epoch "
                      f"{runs[t][name].get('error', '')}", flush=True)
            if epochs == args.curve_epochs and all("epochs" in runs[t][k] for k in ("tcc", "eager")):
                curve = {k: runs[t][k]["epochs"] for k in ("tcc", "eager")}
        compare = None
        if not args.no_compare:
            import compare_torch
            nodropout = work / "model-nodropout.onnx"
            wait_quiet(args.wait_quiet)
            try:
                subprocess.run(["/usr/bin/python3", str(MODEL.parent / "make_model.py"),
                                "--no-dropout", "-o", str(nodropout)], check=True)
                compare = compare_torch.compare(args.tcc, str(nodropout), args.data)
            except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
                compare = {"error": str(e)}
    info["loadavg_end"] = os.getloadavg()[0]
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    base = write_results(info, runs, curve, compare, args)
    print(f"-> {base}.md")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(BENCH))
    from run_cpu import CpuMeter, machine_info, wait_quiet  # noqa: E402
    sys.exit(main())
