#!/usr/bin/env python3
"""Checks `tcc plan`'s predicted step times against measured ones on this machine.

For each strategy, `tcc plan --json` gives the prediction; the measurement is the difference of
two `tcc train --nproc N` runs (--max-steps S and 2S, epoch evaluation and start-up cancel out)
divided by S. Prints a table of predicted, measured and their ratio, and writes it as Markdown
and JSON (--out PREFIX). Standard library only.

    python3 bench/plan_check.py --tcc build/bin/tcc --model examples/fashion-mnist/model.onnx \
        --data /usr/share/datasets/fashion-mnist --batch 64 --out bench/results/DATE-plan-cpu
"""
import argparse
import json
import os
import platform
import subprocess
import tempfile
import time


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tcc", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--link-bandwidth", default="5")
    p.add_argument("--link-latency", default="2")
    p.add_argument("--strategies", default=";dp=2;tp=2;dp=2:3;pp=2;dp=2,pp=2",
                   help="MESH[:ZERO] separated by ';' ('' is one rank); pp meshes run "
                        "--micro-batches of --micro-batches")
    p.add_argument("--micro-batches", default="4")
    p.add_argument("--out")
    a = p.parse_args()
    rows = []
    work = tempfile.mkdtemp(prefix="tcc-plan-check-")
    for spec in a.strategies.split(";"):
        mesh, _, zero = spec.partition(":")
        ranks = 1
        for part in filter(None, mesh.split(",")):
            ranks *= int(part.split("=")[1])
        extra = (["--mesh", mesh] if mesh else []) + (["--zero", zero] if zero else [])
        if "pp=" in mesh:
            extra += ["--micro-batches", a.micro_batches]
        plan = json.loads(subprocess.run(
            [a.tcc, "plan", a.model, "--batch-size", str(a.batch), "--link-bandwidth",
             a.link_bandwidth, "--link-latency", a.link_latency, "--json", *extra],
            check=True, capture_output=True, text=True).stdout)[0]
        artifact = os.path.join(work, f"s{len(rows)}.tcc")
        subprocess.run([a.tcc, "compile", a.model, "--train", "--batch-size", str(a.batch), "-o",
                        artifact, *extra], check=True, capture_output=True)
        times = []
        for steps in (a.steps, 2 * a.steps):
            cmd = [a.tcc, "train", artifact, "--data", a.data, "--lr", "1e-3", "--threads", "1",
                   "--max-steps", str(steps), "--no-shuffle"]
            if ranks > 1:
                cmd += ["--nproc", str(ranks)]
            start = time.time()
            subprocess.run(cmd, check=True, capture_output=True)
            times.append(time.time() - start)
        measured = (times[1] - times[0]) / a.steps * 1e3
        predicted = plan["predicted_step_ms"]
        label = (mesh or "1 rank") + (f" zero {zero}" if zero else "")
        rows.append({"strategy": label, "ranks": ranks, "predicted_ms": predicted,
                     "measured_ms": measured, "ratio": predicted / measured,
                     "compute_ms": plan["compute_ms"], "communication_ms": plan["communication_ms"]})
        print(f"{label:<18} {ranks:>5} predicted {predicted:7.3f} ms  measured {measured:7.3f} ms"
              f"  ratio {predicted / measured:5.2f}", flush=True)
    if a.out:
        meta = {"cpu": cpu_name(), "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
                "model": os.path.basename(a.model), "batch": a.batch,
                "link_bandwidth_GBps": float(a.link_bandwidth), "link_latency_us": float(a.link_latency)}
        with open(a.out + ".json", "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
        with open(a.out + ".md", "w") as f:
            f.write(f"# tcc plan: predicted vs measured step time ({meta['date']})\n\n")
            f.write(f"CPU: {meta['cpu']}, {meta['cores']} cores; model {meta['model']}, global batch "
                    f"{a.batch}, 1 thread per rank; link model {a.link_bandwidth} GB/s, "
                    f"{a.link_latency} us. Measured: difference of {a.steps}- and "
                    f"{2 * a.steps}-step runs under mpirun.\n\n")
            f.write("| strategy | ranks | predicted ms | measured ms | predicted / measured |\n")
            f.write("|---|---:|---:|---:|---:|\n")
            for r in rows:
                f.write(f"| {r['strategy']} | {r['ranks']} | {r['predicted_ms']:.3f} | "
                        f"{r['measured_ms']:.3f} | {r['ratio']:.2f} |\n")


if __name__ == "__main__":
    main()
