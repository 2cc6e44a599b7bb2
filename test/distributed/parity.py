#!/usr/bin/env python3
"""Every parallel strategy, run as real processes under mpirun, gives the per-step losses of the
single-process run with the same global batch, within --tolerance relative. Models: the
FashionMNIST example (an MLP with dropout) and the tiny transformer language model
(examples/tiny-lm: embedding, causal attention, layer norms)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import arguments, check_prerequisites, compile_training, train  # noqa: E402

STRATEGIES = [  # (mesh, zero, ranks, more compile options)
    ("dp=2", 0, 2, []), ("dp=4", 0, 4, []), ("dp=2", 1, 2, []), ("dp=2", 2, 2, []),
    ("dp=2", 3, 2, []), ("tp=2", 0, 2, []), ("dp=2,tp=2", 0, 4, []), ("dp=2,tp=2", 3, 4, []),
    # Pipeline stages: 2 stages, 4 micro-batches, both schedules.
    ("pp=2", 0, 2, ["--micro-batches", "4"]),
    ("pp=2", 0, 2, ["--micro-batches", "4", "--pipeline-schedule", "gpipe"]),
    # Pipelines on 2-D meshes: each data-parallel rank's rows in micro-batches, ZeRO over dp,
    # Megatron pairs split over tp within each stage.
    ("dp=2,pp=2", 0, 4, ["--micro-batches", "4"]),
    ("dp=2,pp=2", 1, 4, ["--micro-batches", "4"]),
    ("tp=2,pp=2", 0, 4, ["--micro-batches", "4", "--pipeline-schedule", "gpipe"]),
]


def main():
    p = arguments()
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", default="1e-3")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--sharding-file", help="JSON overrides: also run dp=2 with them")
    a = p.parse_args()
    check_prerequisites(a.data)
    os.makedirs(a.work_dir, exist_ok=True)
    w = lambda name: os.path.join(a.work_dir, name)  # noqa: E731

    compile_training(a.tcc, a.model, w("single.tcc"), a.batch)
    reference = train(a.tcc, w("single.tcc"), a.data, a.steps, w("single.json"), lr=a.lr)
    failures = []
    print(f"{'strategy':<22} {'ranks':>5} {'max rel. loss diff':>20}")
    strategies = list(STRATEGIES)
    if a.sharding_file:
        strategies.append(("dp=2", 0, 2, ["--sharding-file", a.sharding_file]))
    for mesh, zero, ranks, more in strategies:
        name = (mesh.replace("=", "").replace(",", "_") + (f"_zero{zero}" if zero else "") +
                "".join("_" + os.path.basename(m).split(".")[0] for m in more if not m.startswith("--")))
        compile_training(a.tcc, a.model, w(name + ".tcc"), a.batch, mesh, zero, more)
        losses = train(a.tcc, w(name + ".tcc"), a.data, a.steps, w(name + ".json"), nproc=ranks,
                       lr=a.lr)
        if len(losses) != len(reference):
            failures.append(f"{name}: {len(losses)} losses, expected {len(reference)}")
            continue
        worst = max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(losses, reference))
        label = (mesh + (f" zero {zero}" if zero else "") +
                 (" +file" if any(m.endswith(".json") for m in more) else
                  "".join(" " + m.lstrip("-") for m in more)))
        print(f"{label:<22} {ranks:>5} {worst:>20.3g}")
        if worst > a.tolerance:
            failures.append(f"{label}: losses differ by {worst:.3g} relative (> {a.tolerance})")
    if failures:
        sys.exit("FAILED:\n  " + "\n  ".join(failures))
    print(f"all {len(strategies)} strategies match the single-process losses over {a.steps} steps")


if __name__ == "__main__":
    main()
