#!/usr/bin/env python3
"""tcc against onnxruntime, PyTorch eager and torch.compile on the CPU, side by side in one run.

Interpreter: .venv-peers/bin/python (torch, onnx, onnxruntime; scripts/setup.sh makes it). The
generated bench models (bench/models/make_models.py) run in PyTorch through bench/gpu/onnx_torch.py
(each ONNX node as the torch op a hand-written nn.Module calls, weights from the initializers); the
real architectures of bench/models/export_torch.py run as the torchvision / timm / transformers
modules they were exported from (the same seeded weights). Both run eager
and under torch.compile (Inductor's C++ backend, default mode), at the same thread count as tcc
(`tcc bench --threads T`) and onnxruntime (intra-op T). Each peer's outputs are checked against
onnxruntime's; the timings alternate over rounds so that every peer sees the same load (the best
round median of each, ms a run). Writes bench/results/<date>-torch-compile-cpu.md and .json.

  .venv-peers/bin/python bench/torch_compile_cpu.py [--threads 1] [--models mlp transformer_block]
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH / "gpu"))
sys.path.insert(0, str(BENCH / "models"))
import gemm_cpu  # noqa: E402  (results writer, machine lines)
import run_cpu  # noqa: E402  (machine info, the tcc driver, onnxruntime runner, compare, timing)

MODELS = ["mlp", "transformer_block", "mobilenet_v2", "resnet18"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tcc", default=str(BENCH.parent / "build" / "bin" / "tcc"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20, help="timed runs per round")
    ap.add_argument("--out", default=str(BENCH / "results"))
    args = ap.parse_args()
    import onnx
    import torch
    from onnx import numpy_helper
    import export_torch
    import make_models
    from onnx_torch import OnnxTorch
    known = make_models.all_models()
    torch.set_num_threads(args.threads)
    info = run_cpu.machine_info()
    info["torch"] = torch.__version__
    rows = []
    with tempfile.TemporaryDirectory(prefix="tcc-torch-compile-") as tmp:
        tcc = run_cpu.Tcc(args.tcc, 1800, Path(tmp))
        for name in args.models:
            model = known.get(name)
            if model is None or model.kind != "torch":
                model = make_models.build(name, with_outputs=True)
            row = {"model": name}
            rows.append(row)
            ref = run_cpu.ort_outputs(model)
            artifact = tcc.compile(model, "warm")["artifact"]
            row["tcc_check"] = run_cpu.compare(tcc.run_outputs(model, artifact), ref)
            xs = [torch.from_numpy(numpy_helper.to_array(onnx.load_tensor(str(p))).copy())
                  for p in model.input_paths()]
            if model.kind == "torch":  # the exporter's own module, as its users run it
                eager = export_torch.build_module(name)[0]
            else:
                eager = OnnxTorch(onnx.load(str(model.onnx_path)), device="cpu")
            compiled = torch.compile(eager)
            t0 = time.perf_counter()
            with torch.no_grad():
                outs = compiled(*xs)
            row["compile_s"] = time.perf_counter() - t0
            outs = outs.to_tuple() if hasattr(outs, "to_tuple") else outs  # transformers' ModelOutput
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
            row["torch_check"] = run_cpu.compare([o.numpy() for o in outs], ref)
            ort = run_cpu.OrtRunner(model, args.threads)
            blocks = {"tcc": [], "ort": [], "eager": [], "compile": []}
            for _ in range(args.rounds):  # alternating, so that every peer sees the same load
                blocks["tcc"].append(tcc.bench(model, args.threads, args.warmup, args.iters, artifact))
                blocks["ort"].append(ort.block(args.warmup, args.iters))
                with torch.no_grad():
                    blocks["eager"].append(run_cpu.stats(run_cpu.time_runs(lambda: eager(*xs), args.warmup, args.iters)))
                    blocks["compile"].append(run_cpu.stats(run_cpu.time_runs(lambda: compiled(*xs), args.warmup, args.iters)))
            for k, b in blocks.items():
                row[f"{k}_ms"] = min(r["median_ms"] for r in b)
            print(f"{name:18} tcc {row['tcc_ms']:8.3f}  ORT {row['ort_ms']:8.3f}  torch.compile "
                  f"{row['compile_ms']:8.3f}  eager {row['eager_ms']:8.3f} ms; outputs tcc "
                  f"{'ok' if row['tcc_check']['ok'] else 'MISMATCH'}, torch "
                  f"{'ok' if row['torch_check']['ok'] else 'MISMATCH'}", flush=True)
    md = gemm_cpu.machine_lines("CPU: tcc vs onnxruntime vs PyTorch eager and torch.compile (Inductor)", info)
    md += [f"Threads: {args.threads}. torch {info['torch']} (`torch.compile`, default mode, Inductor's C++ "
           f"backend); generated models run node by node with torch ops (bench/gpu/onnx_torch.py), real "
           f"architectures as their torchvision / timm / transformers modules. Best round median "
           f"of {args.rounds} alternating rounds ({args.warmup} warm-up + {args.iters} timed runs each), ms a "
           "run. Ratios below 1: tcc faster. Outputs of tcc and torch.compile checked against onnxruntime.", "",
           "| model | tcc ms | ORT ms | torch.compile ms | eager ms | tcc/ORT | tcc/compile | torch.compile compile s | outputs |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ok = "ok" if r["tcc_check"]["ok"] and r["torch_check"]["ok"] else \
            f"tcc {r['tcc_check'].get('detail', 'ok')}; torch {r['torch_check'].get('detail', 'ok')}"
        md.append(f"| {r['model']} | {r['tcc_ms']:.3f} | {r['ort_ms']:.3f} | {r['compile_ms']:.3f} | "
                  f"{r['eager_ms']:.3f} | {r['tcc_ms'] / r['ort_ms']:.2f} | {r['tcc_ms'] / r['compile_ms']:.2f} | "
                  f"{r['compile_s']:.1f} | {ok} |")
    geo = lambda key: math.exp(sum(math.log(r["tcc_ms"] / r[key]) for r in rows) / len(rows))
    md += ["", f"Geomean tcc/ORT {geo('ort_ms'):.2f}, tcc/torch.compile {geo('compile_ms'):.2f}."]
    gemm_cpu.write_results(args.out, "torch-compile-cpu", {"machine": info, "threads": args.threads, "rows": rows},
                           "\n".join(md) + "\n")
    return 0 if all(r["tcc_check"]["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
