#!/usr/bin/env python3
"""One compile for every input size: a symbolic artifact against static compiles, on the CPU.

Interpreter: .venv-peers/bin/python (torch, onnx, onnxruntime; scripts/setup.sh makes it). Three
models exported by torch.onnx.export with dynamic axes (the classes of
test/unit/Inputs/export_symbolic_models.py, at larger sizes): a BERT-style encoder layer (dynamic
batch and sequence), a GPT-2-style decoder (a causal buffer sliced to the sequence; dynamic
sequence) and a small CNN (dynamic batch and image size). Each is compiled ONCE with size ranges
(`tcc compile --input-shape ids=1..8x1..512`), and for every size also compiled statically
(`--input-shape ids=4x128`). At each size: the symbolic artifact's outputs are compared with
onnxruntime's on the same random inputs, and `tcc bench` times both artifacts (alternating
rounds, the best median of each). The ratio symbolic/static is the cost of not knowing the sizes
at compile time (the issue's target: at most 1.15). Writes bench/results/<date>-symbolic-cpu.md
and .json and prints the table.

  .venv-peers/bin/python bench/symbolic_cpu.py                 # all threads
  .venv-peers/bin/python bench/symbolic_cpu.py --threads 1 --rounds 3
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "test" / "unit" / "Inputs"))
import gemm_cpu  # noqa: E402  (results writer, machine lines)
import run_cpu  # noqa: E402  (machine info, the tcc driver, onnxruntime runner, compare)


def export_models(out: Path) -> list[dict]:
    import torch
    import export_symbolic_models as m  # noqa: E402  (the test models' classes)

    torch.manual_seed(0)
    ids = torch.randint(0, 1000, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.int64)
    specs = [
        dict(name="bert", model=m.Bert(V=1000, D=256, H=4, P=512), args=(ids, mask), inputs=["ids", "mask"],
             axes={"ids": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}},
             ranges="1..8x1..512", sizes=[(1, 16), (4, 128), (8, 512)]),
        dict(name="decoder", model=m.Decoder(V=1000, D=256, H=4, P=512), args=(ids,), inputs=["ids"],
             axes={"ids": {0: "batch", 1: "seq"}}, ranges="1..8x1..512", sizes=[(1, 16), (1, 128), (1, 512)]),
        dict(name="cnn", model=m.Cnn(), args=(torch.randn(2, 3, 32, 32),), inputs=["x"],
             axes={"x": {0: "batch", 2: "h", 3: "w"}}, ranges="1..8x3x32..224x32..224",
             sizes=[(1, 3, 64, 64), (4, 3, 128, 128), (8, 3, 224, 224)]),
    ]
    for s in specs:
        s["onnx"] = out / f"{s['name']}.onnx"
        torch.onnx.export(s.pop("model").eval(), s.pop("args"), str(s["onnx"]), input_names=s["inputs"],
                          dynamic_axes=s.pop("axes"), opset_version=17, dynamo=False)
    return specs


def inputs_for(spec: dict, size: tuple, seed: int, root: Path) -> list[Path]:
    rng = np.random.default_rng(seed)
    paths = []
    for name in spec["inputs"]:
        shape = list(size)  # every input of these models has the size's shape
        if name == "ids":
            a = rng.integers(0, 1000, shape, dtype=np.int64)
        elif name == "mask":
            a = np.ones(shape, np.int64)
            a[:, -1] = 0 if shape[1] > 2 else 1
        else:
            a = rng.standard_normal(shape).astype(np.float32)
        p = root / f"{spec['name']}-{'x'.join(map(str, size))}-{name}.npy"
        np.save(p, a)
        paths.append(p)
    return paths


def shape_args(spec: dict, dims: str) -> list[str]:
    return ["--input-shape", *[f"{n}={dims}" for n in spec["inputs"]]]


def bench_ms(tcc: run_cpu.Tcc, artifact: Path, spec: dict, size: tuple | None, args) -> float:
    """Median ms of `tcc bench`; a symbolic artifact at `size` (a static one runs at its own)."""
    sizes = shape_args(spec, "x".join(map(str, size))) if size else []
    out, _ = tcc.call(["bench", str(artifact), "--threads", str(args.threads), "--json",
                       "--warmup", str(args.warmup), "--iters", str(args.iters), *sizes],
                      f"bench {artifact.name}")
    return float(run_cpu.parse_json_output(out)["median_ms"])


def check_outputs(tcc: run_cpu.Tcc, artifact: Path, spec: dict, inputs: list[Path], root: Path,
                  threads: int) -> dict:
    out_dir = root / f"out-{artifact.stem}-{inputs[0].stem}"
    tcc.call(["run", str(artifact), "--threads", str(threads), "--inputs",
              *map(str, inputs), "--out-dir", str(out_dir)], f"run {artifact.name}")
    got = [run_cpu.read_tensor(out_dir / f"output_{i}.pb")[1] for i in range(len(list(out_dir.glob("output_*.pb"))))]
    sess, _ = run_cpu.ort_session(spec["onnx"], 1)
    feeds = {m.name: np.load(p) for m, p in zip(sess.get_inputs(), inputs)}
    ref = {m.name: o for m, o in zip(sess.get_outputs(), sess.run(None, feeds))}
    return run_cpu.compare(got, ref)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tcc", default=str(ROOT / "build" / "bin" / "tcc"))
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating timing rounds per artifact")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", default=str(BENCH / "results"))
    args = ap.parse_args()
    info = run_cpu.machine_info()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tcc-symbolic-bench-") as tmp:
        root = Path(tmp)
        tcc = run_cpu.Tcc(args.tcc, 1800, root)
        for spec in export_models(root):
            symbolic = root / f"{spec['name']}-symbolic.tcc"
            _, compile_s = tcc.call(["compile", str(spec["onnx"]), "-o", str(symbolic),
                                     *shape_args(spec, spec["ranges"])], f"compile {spec['name']} symbolic")
            for k, size in enumerate(spec["sizes"]):
                dims = "x".join(map(str, size))
                static = root / f"{spec['name']}-{dims}.tcc"
                _, static_s = tcc.call(["compile", str(spec["onnx"]), "-o", str(static), *shape_args(spec, dims)],
                                       f"compile {spec['name']} at {dims}")
                check = check_outputs(tcc, symbolic, spec, inputs_for(spec, size, 100 + k, root), root,
                                      args.threads)
                times = {"symbolic": [], "static": []}
                for _ in range(args.rounds):
                    times["symbolic"].append(bench_ms(tcc, symbolic, spec, size, args))
                    times["static"].append(bench_ms(tcc, static, spec, None, args))
                sym, sta = min(times["symbolic"]), min(times["static"])
                rows.append({"model": spec["name"], "size": dims, "ranges": spec["ranges"],
                             "symbolic_ms": sym, "static_ms": sta, "ratio": sym / sta,
                             "symbolic_compile_s": compile_s, "static_compile_s": static_s,
                             "outputs_vs_ort": check})
                print(f"{spec['name']:8} {dims:>12}: symbolic {sym:8.3f} ms, static {sta:8.3f} ms, "
                      f"ratio {sym / sta:.3f}, vs ORT {'ok' if check['ok'] else check['detail']}", flush=True)
    threads = args.threads or info.get("cores", "all")
    md = gemm_cpu.machine_lines("Symbolic shapes: one compile for every size vs a static compile per size (CPU)", info)
    md += [f"Threads: {threads}. Best median of {args.rounds} alternating `tcc bench` rounds "
           f"({args.warmup} warm-up + {args.iters} timed runs each). Ratio: symbolic / static (target <= 1.15). "
           "Outputs: the symbolic artifact vs onnxruntime on the same random inputs.", "",
           "| model | size | compiled ranges | symbolic ms | static ms | ratio | outputs vs ORT |",
           "|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        c = r["outputs_vs_ort"]
        md.append(f"| {r['model']} | {r['size']} | {r['ranges']} | {r['symbolic_ms']:.3f} | {r['static_ms']:.3f} | "
                  f"{r['ratio']:.2f} | {'ok' if c['ok'] else 'FAIL ' + c['detail']} ({c.get('max_rel_err', 0):.1e}) |")
    gemm_cpu.write_results(args.out, "symbolic-cpu", {"machine": info, "rows": rows}, "\n".join(md) + "\n")
    return 0 if all(r["outputs_vs_ort"]["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
