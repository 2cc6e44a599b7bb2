#!/usr/bin/env python3
"""A stand-in for build/bin/tcc, for testing bench/run_cpu.py without the compiled backend.

Speaks the parts of the tcc CLI contract that the bench uses (`compile`, `bench`, `run`) and does
the work with onnxruntime (no graph optimizations, so its numbers are not ORT's). It fails on
purpose for models whose path contains a substring of $FAKE_TCC_FAIL (comma-separated), and
perturbs the outputs of those matching $FAKE_TCC_WRONG, so the failure and mismatch paths of the
bench can be exercised:

  FAKE_TCC_FAIL=resnet python3 bench/run_cpu.py --tcc bench/fake_tcc.py --iters 3
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper


def matches(var: str, model: str) -> bool:
    return any(s and s in model for s in os.environ.get(var, "").split(","))


def session(model: str, threads: int = 1):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = threads
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def feeds_for(sess, inputs: list[str]):
    feeds = {}
    for i, meta in enumerate(sess.get_inputs()):
        if i < len(inputs):
            t = onnx.TensorProto()
            t.ParseFromString(Path(inputs[i]).read_bytes())
            feeds[meta.name] = numpy_helper.to_array(t)
        else:
            shape = [d if isinstance(d, int) else 1 for d in meta.shape]
            feeds[meta.name] = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return feeds


def source_model(path: str) -> str:
    """An 'artifact' written by `compile` is a JSON pointer to its model."""
    if path.endswith(".tcc"):
        return json.loads(Path(path).read_text())["model"]
    return path


def main() -> int:
    ap = argparse.ArgumentParser(prog="fake_tcc")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile")
    c.add_argument("model")
    c.add_argument("-o", dest="out", required=True)
    c.add_argument("--report")
    c.add_argument("--no-cache", action="store_true")
    c.add_argument("--precision", default="fp32")
    b = sub.add_parser("bench")
    b.add_argument("model")
    b.add_argument("--device", default="cpu")
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--warmup", type=int, default=10)
    b.add_argument("--iters", type=int, default=100)
    b.add_argument("--inputs", nargs="*", default=[])
    b.add_argument("--input-shape", action="append", default=[])
    b.add_argument("--json", action="store_true")
    r = sub.add_parser("run")
    r.add_argument("model")
    r.add_argument("--device", default="cpu")
    r.add_argument("--threads", type=int, default=0)
    r.add_argument("--inputs", nargs="*", default=[])
    r.add_argument("--out-dir", required=True)
    args = ap.parse_args()

    model = source_model(args.model)
    if matches("FAKE_TCC_FAIL", model):
        print(f"tcc: compiling 3 kernels\ntcc: error: node /Conv_3 (Conv): fake failure for {Path(model).parent.name}\n"
              "second line of detail", file=sys.stderr)
        return 1
    if args.cmd == "compile":
        t0 = time.perf_counter()
        session(model)
        dt = time.perf_counter() - t0
        cache = Path(os.environ.get("TCC_CACHE_DIR", "/tmp/fake-tcc-cache"))
        cache.mkdir(parents=True, exist_ok=True)
        marker = cache / (Path(model).parent.name + ".hit")
        hit = marker.exists() and not args.no_cache
        marker.touch()
        Path(args.out).write_text(json.dumps({"model": model}))
        if args.report:
            n = len(onnx.load(model, load_external_data=False).graph.node)
            Path(args.report).write_text(json.dumps({
                "device": "cpu", "kernels": n, "extern_calls": 1, "launches": n + 1,
                "arena_bytes": 1 << 20, "constant_bytes": 1 << 22, "cache_hits": n if hit else 0,
                "compile_seconds": dt * (0.1 if hit else 1.0), "codegen_seconds": 0.0}))
        return 0
    sess = session(model, getattr(args, "threads", 1))
    feeds = feeds_for(sess, args.inputs)
    if args.cmd == "run":
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        outs = sess.run(None, feeds)
        for i, (meta, arr) in enumerate(zip(sess.get_outputs(), outs)):
            if matches("FAKE_TCC_WRONG", model):
                arr = arr * 1.01 + 0.01
            (out / f"output_{i}.pb").write_bytes(numpy_helper.from_array(arr, meta.name).SerializeToString())
        return 0
    # bench
    for _ in range(args.warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(args.iters):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    res = {"compile_seconds": 0.01, "median_ms": statistics.median(times), "min_ms": min(times),
           "max_ms": max(times), "mean_ms": statistics.fmean(times), "iters": args.iters,
           "threads": args.threads}
    print("fake tcc bench: some human-readable line first")
    print(json.dumps(res) if args.json else res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
