#!/usr/bin/env python3
"""Sharded checkpoints: a dp=2 run checkpointed half-way resumes on dp=1, dp=4 and dp=2 with
ZeRO-3 (resharded on load) with the losses of an uninterrupted single-process run; and the
weights of a distributed run (ZeRO-3, its checkpoint resumed in one process and saved as ONNX)
equal the single-process run's."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import arguments, check_prerequisites, compile_training, run, train  # noqa: E402


def max_rel(a, b):
    return max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, b))


def main():
    p = arguments()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--tolerance", type=float, default=1e-5)
    a = p.parse_args()
    check_prerequisites(a.data)
    try:
        import numpy
        import onnx
        from onnx import numpy_helper
    except ImportError as e:
        from common import skip
        skip(f"the weight comparison needs numpy and onnx in /usr/bin/python3 ({e})")
    os.makedirs(a.work_dir, exist_ok=True)
    w = lambda name: os.path.join(a.work_dir, name)  # noqa: E731
    half = a.steps // 2
    failures = []

    compile_training(a.tcc, a.model, w("single.tcc"), 64)
    reference = train(a.tcc, w("single.tcc"), a.data, a.steps, w("single.json"))
    compile_training(a.tcc, a.model, w("dp2.tcc"), 64, "dp=2")
    ck = w("ck")
    train(a.tcc, w("dp2.tcc"), a.data, half, w("first.json"), nproc=2, extra=["--checkpoint", ck])
    for name, mesh, zero, ranks in [("dp1", None, 0, 0), ("dp4", "dp=4", 0, 4),
                                    ("dp2zero3", "dp=2", 3, 2)]:
        compile_training(a.tcc, a.model, w(name + ".tcc"), 64, mesh, zero)
        losses = train(a.tcc, w(name + ".tcc"), a.data, a.steps, w(name + ".json"), nproc=ranks,
                       extra=["--resume", ck])
        worst = max_rel(losses, reference)
        print(f"dp=2 checkpoint at step {half} resumed as {name}: losses differ by {worst:.3g}")
        if len(losses) != len(reference) or worst > a.tolerance:
            failures.append(f"resumed as {name}: {len(losses)} losses, differ by {worst:.3g}")

    # Weights: ZeRO-3 for all the steps, its checkpoint resumed in one process and saved.
    compile_training(a.tcc, a.model, w("zero3.tcc"), 64, "dp=2", 3)
    train(a.tcc, w("zero3.tcc"), a.data, a.steps, w("zero3.json"), nproc=2,
          extra=["--checkpoint", w("ck3")])
    for out, extra in [(w("single.onnx"), []), (w("zero3.onnx"), ["--resume", w("ck3")])]:
        r = run([a.tcc, "train", a.model, "--batch-size", "64", "--data", a.data, "--lr", "1e-3",
                 "--max-steps", str(a.steps), "--no-shuffle", "--threads", "1", "--save-model",
                 out, *extra], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"training failed: {r.stderr}")
    single = {t.name: numpy_helper.to_array(t) for t in onnx.load(w("single.onnx")).graph.initializer}
    zero3 = {t.name: numpy_helper.to_array(t) for t in onnx.load(w("zero3.onnx")).graph.initializer}
    worst = 0.0
    for name, ref in single.items():
        if ref.dtype.kind != "f":
            continue
        scale = max(float(numpy.abs(ref).max()), 1e-30)
        worst = max(worst, float(numpy.abs(zero3[name] - ref).max()) / scale)
    print(f"weights after {a.steps} steps, ZeRO-3 on 2 ranks vs one process: max diff {worst:.3g} "
          "of each tensor's largest magnitude")
    if worst > a.tolerance:
        failures.append(f"ZeRO-3 weights differ by {worst:.3g}")
    if failures:
        sys.exit("FAILED:\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    main()
