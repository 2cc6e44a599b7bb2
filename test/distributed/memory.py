#!/usr/bin/env python3
"""ZeRO's memory, measured: rank 0's host allocator peak (tcc train --metrics host_peak_bytes)
under dp=2, dp=2 ZeRO-3 and dp=4 ZeRO-3 falls with the state a rank holds, and stays within its
budget: twice its share of the state (the trainer double-buffers what a step updates) plus its
planned temporaries (--report arena bytes of its entries) plus 2 MiB (batches, outputs, GEMM
packing buffers)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import arguments, check_prerequisites, compile_training, run  # noqa: E402


def main():
    p = arguments()
    a = p.parse_args()
    check_prerequisites(a.data)
    os.makedirs(a.work_dir, exist_ok=True)
    w = lambda name: os.path.join(a.work_dir, name)  # noqa: E731
    failures, peaks = [], []
    for mesh, zero, ranks in [("dp=2", 0, 2), ("dp=2", 3, 2), ("dp=4", 3, 4)]:
        name = mesh.replace("=", "") + f"_zero{zero}"
        report = w(name + ".report.json")
        compile_training(a.tcc, a.model, w(name + ".tcc"), 64, mesh, zero, ["--report", report])
        r = run([a.tcc, "train", w(name + ".tcc"), "--nproc", str(ranks), "--data", a.data,
                 "--lr", "1e-3", "--max-steps", "20", "--threads", "1", "--metrics",
                 w(name + ".metrics.json")], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"training failed: {r.stderr}")
        with open(report) as f:
            rep = json.load(f)
        with open(w(name + ".metrics.json")) as f:
            peak = json.load(f)[-1]["host_peak_bytes"]
        state = sum(rep["distributed"]["state_bytes_per_rank"].values())
        temps = sum(e["arena_bytes"] for e in rep["entries"] if e["name"].endswith("/rank0"))
        budget = 2 * state + temps + (2 << 20)
        label = mesh + (f" zero {zero}" if zero else "")
        print(f"{label:<14} state/rank {state / 2**20:6.2f} MiB  temporaries {temps / 2**20:6.2f} MiB"
              f"  peak {peak / 2**20:6.2f} MiB  budget {budget / 2**20:6.2f} MiB")
        if peak > budget:
            failures.append(f"{label}: peak {peak} bytes over its budget {budget}")
        peaks.append((label, peak))
    for (l1, p1), (l2, p2) in zip(peaks, peaks[1:]):
        if not p2 < p1:
            failures.append(f"{l2} peaks at {p2} bytes, not below {l1}'s {p1}")
    if failures:
        sys.exit("FAILED:\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    main()
