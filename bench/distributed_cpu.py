#!/usr/bin/env python3
"""Distributed training on the CPU: tcc against PyTorch DDP and FSDP (gloo), side by side.

Every side trains the FashionMNIST example MLP (examples/fashion-mnist/model.onnx: 784-256-256-10,
ReLU, Dropout 0.2; PyTorch rebuilds it from the same initializers) with Adam lr 1e-3 and mean
cross-entropy, on the same random global batches, the same ranks and threads per rank, each rank
feeding its block of every global batch:
  - dp:    tcc `--mesh dp=N` (gradients all-reduced in buckets while backward runs)
           against torch DistributedDataParallel;
  - zero3: tcc `--mesh dp=N --zero 3` (parameters, gradients and Adam state sharded; parameters
           gathered before use) against torch FullyShardedDataParallel, FULL_SHARD, one unit per
           Linear layer.
Both sides run under the same `mpirun -np N` (tcc's ranks through libtccrt's trainer API,
bench/tccrt_trainer.py, on artifacts `tcc compile --train` wrote; torch's ranks rendezvous over
TCP on 127.0.0.1). A step is timed on rank 0 from the batch's hand-over to the loss read back,
median over --steps after --warmup. 1 rank: tcc's single-process artifact against plain torch.

Interpreter: one with torch, onnx and numpy (PyPI); mpirun (Open MPI) on PATH.
Writes bench/results/<date>-distributed-cpu.{md,json} (or --out PREFIX) with the CPU's name.

  python3 bench/distributed_cpu.py --tcc build/bin/tcc                 # ranks 1 2 4, batch 64 512
  python3 bench/distributed_cpu.py --artifacts DIR --no-compile ...     # artifacts compiled before
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
MODEL = ROOT / "examples" / "fashion-mnist" / "model.onnx"
LR = 1e-3
PEERS = {"dp": "torch DDP", "zero3": "torch FSDP (FULL_SHARD)"}


def artifact_name(strategy: str, ranks: int, batch: int) -> str:
    return f"train-b{batch}-{'single' if ranks == 1 else f'{strategy}{ranks}'}.tcc"


def compile_flags(strategy: str, ranks: int) -> list[str]:
    if ranks == 1:
        return []
    return ["--mesh", f"dp={ranks}"] + (["--zero", "3"] if strategy == "zero3" else [])


def global_batches(batch: int, count: int = 8, seed: int = 0):
    """Random FashionMNIST-shaped global batches (the step time does not depend on the data)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    return [(rng.uniform(0, 1, (batch, 1, 28, 28)).astype(np.float32),
             rng.integers(0, 10, batch).astype(np.int64)) for _ in range(count)]


def mpi_rank() -> tuple[int, int]:
    return int(os.environ.get("OMPI_COMM_WORLD_RANK", 0)), int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))


# ------------------------------------------------------------------------------------------
# Workers (one per rank, started by mpirun)
# ------------------------------------------------------------------------------------------
def worker_tcc(args) -> dict:
    sys.path.insert(0, str(BENCH))
    from tccrt_trainer import Trainer
    t = Trainer(str(args.artifact), threads=args.threads, library=args.libtccrt)
    batches = [t.local_batch(x, y) for x, y in global_batches(args.batch)]
    losses, ms = [], []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        losses.append(t.step(batches[step % len(batches)], LR))
        ms.append((time.perf_counter() - t0) * 1e3)
    return {"ms": ms[args.warmup:], "losses": losses, "device": t.device_name}


def worker_torch(args) -> dict:
    import torch
    import torch.distributed as dist
    sys.path.insert(0, str(ROOT / "test" / "training"))
    from torch_reference import mlp_from_onnx
    torch.set_num_threads(args.threads)
    rank, world = mpi_rank()
    model = mlp_from_onnx(str(MODEL)).train()
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=world)
        if args.strategy == "dp":
            from torch.nn.parallel import DistributedDataParallel
            model = DistributedDataParallel(model)
        else:
            from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
            from torch.distributed.fsdp.wrap import ModuleWrapPolicy
            model = FullyShardedDataParallel(model, sharding_strategy=ShardingStrategy.FULL_SHARD,
                                             auto_wrap_policy=ModuleWrapPolicy({torch.nn.Linear}),
                                             use_orig_params=True, device_id=torch.device("cpu"))
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss()
    rows = args.batch // world
    batches = [(torch.from_numpy(x[rank * rows:(rank + 1) * rows].copy()),
                torch.from_numpy(y[rank * rows:(rank + 1) * rows].copy())) for x, y in global_batches(args.batch)]
    losses, ms = [], []
    for step in range(args.warmup + args.steps):
        x, y = batches[step % len(batches)]
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())  # this rank's block; the mean over ranks is compared below
        ms.append((time.perf_counter() - t0) * 1e3)
    if world > 1:
        dist.destroy_process_group()
    return {"ms": ms[args.warmup:], "losses": losses, "device": f"torch {torch.__version__}"}


def worker_main(args) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    rank, _ = mpi_rank()
    res = worker_tcc(args) if args.worker == "tcc" else worker_torch(args)
    Path(f"{args.worker_out}.{rank}").write_text(json.dumps(res))
    return 0


# ------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_side(side: str, strategy: str, ranks: int, args, work: Path) -> dict:
    """Runs one side's ranks under mpirun; rank 0's step times and every rank's losses."""
    out = work / f"{side}-{strategy}-{ranks}-{args.batch_now}.json"
    for r in range(ranks):
        Path(f"{out}.{r}").unlink(missing_ok=True)
    cmd = [args.mpirun, "-np", str(ranks), "--oversubscribe", "--bind-to", args.bind_to,
           sys.executable, __file__, "--worker", side, "--worker-out", str(out), "--strategy", strategy,
           "--batch", str(args.batch_now), "--threads", str(args.threads), "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--port", str(free_port()),
           "--artifact", str(args.artifacts / artifact_name(strategy, ranks, args.batch_now)),
           "--libtccrt", args.libtccrt]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS=str(args.threads), TCC_COLLECTIVE_TIMEOUT="120")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout} s"}
    results = [json.loads(Path(f"{out}.{r}").read_text()) for r in range(ranks) if Path(f"{out}.{r}").exists()]
    if p.returncode != 0 or len(results) != ranks:
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-3:]
        return {"error": f"exit {p.returncode}: " + " | ".join(tail)[-400:]}
    # tcc's trainer returns the global batch's loss on every rank; torch each rank's block's.
    losses = [statistics.fmean(step) for step in zip(*(r["losses"] for r in results))]
    return {"ms_per_step": statistics.median(results[0]["ms"]),
            "ms_spread": [round(min(results[0]["ms"]), 3), round(max(results[0]["ms"]), 3)],
            "first_loss": losses[0], "last_loss": losses[-1], "device": results[0]["device"]}


def compile_artifacts(args, configs) -> dict:
    errors = {}
    args.artifacts.mkdir(parents=True, exist_ok=True)
    for batch, strategy, ranks in configs:
        path = args.artifacts / artifact_name(strategy, ranks, batch)
        if path.exists():
            continue
        cmd = [args.tcc, "compile", "--train", str(MODEL), "-o", str(path), "--batch-size", str(batch),
               "--optimizer", "adam", *compile_flags(strategy, ranks)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        print(f"compiled {path.name}: {'ok' if p.returncode == 0 else p.stderr.strip()[-300:]}", flush=True)
        if p.returncode != 0:
            errors[path.name] = p.stderr.strip()[-300:]
    return errors


def markdown(data: dict) -> str:
    lines = [f"# Distributed training on the CPU: tcc vs PyTorch DDP / FSDP ({data['date']})", "",
             f"- CPU: {data['cpu']} ({data['cores']} logical cores); {data['threads']} thread(s) per rank, "
             f"mpirun --bind-to {data['bind_to']}",
             f"- {data['torch']}; tcc {data['tcc_device']}",
             f"- FashionMNIST MLP 784-256-256-10 (dropout 0.2), Adam, global batch split over the ranks; "
             f"median of {data['steps']} steps after {data['warmup']} on rank 0",
             "- ratio = tcc / torch step time (< 1: tcc faster). dp: DDP; zero3: FSDP FULL_SHARD, one unit per Linear.",
             "", "| global batch | ranks | strategy | tcc ms/step | torch ms/step | tcc/torch | losses (first -> last) tcc, torch |",
             "|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        t, p = r["tcc"], r["torch"]
        ratio = f"{t['ms_per_step'] / p['ms_per_step']:.2f}" if "ms_per_step" in t and "ms_per_step" in p else "-"

        def ms(x):
            return f"{x['ms_per_step']:.3f}" if "ms_per_step" in x else f"error: {x.get('error', '?')}"

        def loss(x):
            return f"{x['first_loss']:.3f} -> {x['last_loss']:.3f}" if "first_loss" in x else "-"
        lines.append(f"| {r['batch']} | {r['ranks']} | {r['strategy'] if r['ranks'] > 1 else 'single process'} | "
                     f"{ms(t)} | {ms(p)} | {ratio} | {loss(t)}, {loss(p)} |")
    if data["ratios"]:
        lines += ["", f"Geometric mean of tcc/torch over the multi-rank rows: {data['geomean_multi_rank']:.2f}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tcc", default=str(ROOT / "build" / "bin" / "tcc"), help="compiles the artifacts")
    ap.add_argument("--artifacts", type=Path, default=None, help="where the artifacts are (or are written)")
    ap.add_argument("--no-compile", action="store_true", help="use the artifacts in --artifacts as they are")
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--batches", type=int, nargs="+", default=[64, 512], help="global batch sizes")
    ap.add_argument("--strategies", nargs="+", default=["dp", "zero3"], choices=sorted(PEERS))
    ap.add_argument("--threads", type=int, default=1, help="threads per rank, both sides")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--bind-to", default="core", help="mpirun --bind-to (core, none, ...)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per mpirun")
    ap.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    built = ROOT / "build" / "lib" / "libtccrt.so.0"
    ap.add_argument("--libtccrt", default=str(built) if built.exists() else "libtccrt.so.0",
                    help="libtccrt to load (default: the build's, else the one on LD_LIBRARY_PATH)")
    ap.add_argument("--out", default=None, help="results prefix (default bench/results/<date>-distributed-cpu)")
    ap.add_argument("--compile-only", action="store_true", help="compile the artifacts and stop")
    # Internal: one rank of one side.
    ap.add_argument("--worker", choices=["tcc", "torch"], help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    ap.add_argument("--strategy", default="dp", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=64, help=argparse.SUPPRESS)
    ap.add_argument("--artifact", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args)

    date = datetime.date.today().isoformat()
    args.artifacts = args.artifacts or Path(os.environ.get("TMPDIR", "/tmp")) / "tcc-distributed-cpu"
    configs = [(b, s, n) for b in args.batches for n in args.ranks for s in (args.strategies if n > 1 else ["dp"])]
    errors = {} if args.no_compile else compile_artifacts(args, configs)
    if args.compile_only:
        return 1 if errors else 0
    sys.path.insert(0, str(BENCH))
    from plan_check import cpu_name
    import torch
    work = args.artifacts / "runs"
    work.mkdir(parents=True, exist_ok=True)
    rows, ratios = [], []
    for batch, strategy, ranks in configs:
        args.batch_now = batch
        row = {"batch": batch, "ranks": ranks, "strategy": strategy}
        for side in ("tcc", "torch"):
            name = artifact_name(strategy, ranks, batch)
            row[side] = ({"error": f"compile: {errors[name]}"} if side == "tcc" and name in errors
                         else run_side(side, strategy, ranks, args, work))
        if ranks > 1 and "ms_per_step" in row["tcc"] and "ms_per_step" in row["torch"]:
            ratios.append(row["tcc"]["ms_per_step"] / row["torch"]["ms_per_step"])
        print(f"batch {batch:4d} ranks {ranks} {strategy:6s} tcc {row['tcc'].get('ms_per_step', row['tcc'].get('error'))} "
              f"torch {row['torch'].get('ms_per_step', row['torch'].get('error'))}", flush=True)
        rows.append(row)
    tcc_device = next((r["tcc"]["device"] for r in rows if "device" in r["tcc"]), "?")
    data = {"date": date, "cpu": cpu_name(), "cores": os.cpu_count(), "machine": platform.machine(),
            "threads": args.threads, "bind_to": args.bind_to, "steps": args.steps, "warmup": args.warmup,
            "torch": f"torch {torch.__version__} (gloo)", "tcc_device": tcc_device, "rows": rows, "ratios": ratios,
            "geomean_multi_rank": statistics.geometric_mean(ratios) if ratios else None}
    prefix = Path(args.out or (ROOT / "bench" / "results" / f"{date}-distributed-cpu"))
    prefix.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{prefix}.json").write_text(json.dumps(data, indent=1) + "\n")
    Path(f"{prefix}.md").write_text(markdown(data))
    print(markdown(data))
    print(f"wrote {prefix}.md and .json")
    return 0 if all("ms_per_step" in r[s] for r in rows for s in ("tcc", "torch")) else 1


if __name__ == "__main__":
    sys.exit(main())
