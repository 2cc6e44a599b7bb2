"""Shared by the distributed tests: their arguments, skipping, and compiling/training with tcc.
Standard library only."""
import argparse
import json
import os
import shutil
import subprocess
import sys


def arguments():
    """The arguments every distributed test takes (tcc, the model, its data, a work folder); tests
    add their own."""
    p = argparse.ArgumentParser()
    p.add_argument("--tcc", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--work-dir", required=True)
    return p


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(77)


def check_prerequisites(data):
    if shutil.which("mpirun") is None:
        skip("mpirun is not on PATH (Debian: apt-get install openmpi-bin; scripts/setup.sh does)")
    if not any(os.path.exists(os.path.join(data, f)) for f in
               ("train-images-idx3-ubyte.gz", "train-images-idx3-ubyte", "train_images.npy")):
        skip(f"no training data in {data} (FashionMNIST: apt-get install dataset-fashion-mnist)")


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, **kw)


def compile_training(tcc, model, out, batch, mesh=None, zero=0, extra=()):
    cmd = [tcc, "compile", model, "--train", "--batch-size", str(batch), "-o", out, *extra]
    if mesh:
        cmd += ["--mesh", mesh]
    if zero:
        cmd += ["--zero", str(zero)]
    r = run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compile failed: {r.stderr}")


def train(tcc, artifact, data, steps, log, nproc=0, extra=(), lr="1e-3"):
    cmd = [tcc, "train", artifact, "--data", data, "--lr", lr, "--max-steps", str(steps),
           "--no-shuffle", "--threads", "1", "--step-log", log, *extra]
    if nproc:
        cmd += ["--nproc", str(nproc)]
    r = run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"training failed ({r.returncode}): {r.stdout}\n{r.stderr}")
    with open(log) as f:
        return json.load(f)
