#!/usr/bin/env python3
"""Symbolic shapes on CUDA without a GPU: what one compile with size ranges generates, against a
static compile per size, for the three models of bench/symbolic_cpu.py (a BERT-style encoder
layer, a GPT-2-style decoder, a CNN; the same classes, sizes and ranges), in f32 and f16.

Interpreter: .venv-peers/bin/python (torch to export the models). Each model is compiled for CUDA
(NVRTC: PTX and sm_80/sm_90 cubins) once with its ranges and once per size, and the reports'
kernel statistics are compared: kernels, library calls (cuBLASLt GEMMs), the fused attention
kernel, the largest register count, spilling kernels, NVRTC seconds and the planned arena (the
symbolic plan is the ranges' largest; libtccrt re-plans it at each binding). Runtime numbers need
a GPU (bench/gpu); correctness without one is test/lit/cli/symbolic-cuda.test (the kernels
emulated on the host). Writes bench/results/<date>-symbolic-cuda-compile.md and .json.

  .venv-peers/bin/python bench/symbolic_cuda_compile.py
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
import gemm_cpu  # noqa: E402  (results writer, machine lines)
import run_cpu  # noqa: E402  (machine info, the tcc driver)
import symbolic_cpu  # noqa: E402  (the models, their sizes and ranges)


def kernel_stats(report: dict) -> dict:
    kernels = report.get("cuda_kernels", [])
    regs, spilling = 0, []
    for k in kernels:
        for arch, r in k.get("archs", {}).items():
            regs = max(regs, r.get("registers", 0))
            if r.get("spill_stores") or r.get("spill_loads"):
                spilling.append(f"{k['name']} ({arch})")
    return {"kernels": len(kernels), "library_calls": report.get("extern_calls"),
            "attention": sum(1 for k in kernels if k["name"].startswith("attention_")),
            "max_registers": regs, "spilling": sorted(set(spilling)),
            "nvrtc_s": report.get("nvrtc_seconds", 0.0), "arena_bytes": report.get("arena_bytes")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tcc", default=str(ROOT / "build" / "bin" / "tcc"))
    ap.add_argument("--out", default=str(BENCH / "results"))
    args = ap.parse_args()
    info = run_cpu.machine_info()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tcc-symbolic-cuda-") as tmp:
        root = Path(tmp)
        tcc = run_cpu.Tcc(args.tcc, 1800, root)
        for spec in symbolic_cpu.export_models(root):
            for precision in ("fp32", "fp16"):
                def compile_(tag: str, dims: str) -> dict:
                    out, report = root / f"{spec['name']}-{tag}-{precision}.tcc", root / f"{tag}.json"
                    tcc.call(["compile", str(spec["onnx"]), "--device", "cuda", "--precision", precision,
                              "-o", str(out), "--report", str(report), *symbolic_cpu.shape_args(spec, dims)],
                             f"compile {spec['name']} {tag} {precision}")
                    return kernel_stats(json.loads(report.read_text()))
                sym = compile_("symbolic", spec["ranges"])
                rows.append({"model": spec["name"], "precision": precision, "sizes": spec["ranges"],
                             "compile": "symbolic", **sym})
                print(f"{spec['name']:8} {precision} symbolic {spec['ranges']}: {sym}", flush=True)
                for size in spec["sizes"]:
                    dims = "x".join(map(str, size))
                    sta = compile_("static", dims)
                    rows.append({"model": spec["name"], "precision": precision, "sizes": dims,
                                 "compile": "static", **sta})
                    print(f"{spec['name']:8} {precision} static {dims}: {sta}", flush=True)
    md = gemm_cpu.machine_lines("Symbolic shapes on CUDA: one compile with size ranges vs a static compile per size "
                                "(NVRTC, sm_80 and sm_90; no GPU)", info)
    md += ["Kernel statistics of `tcc compile --device cuda` reports. Attention: generated FlashAttention-2 "
           "kernels (f16; f32 attention is decomposed into cuBLASLt GEMMs and a softmax kernel on either "
           "compile). Registers: the largest of any kernel on either architecture. Arena: the compile-time "
           "plan (symbolic: at the ranges' largest sizes; libtccrt re-plans it per binding).", "",
           "| model | precision | compile | sizes | kernels | library calls | attention | max registers | spilling | NVRTC s | arena bytes |",
           "|---|---|---|---|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        md.append(f"| {r['model']} | {r['precision']} | {r['compile']} | {r['sizes']} | {r['kernels']} | "
                  f"{r['library_calls']} | {r['attention']} | {r['max_registers']} | "
                  f"{', '.join(r['spilling']) or 'none'} | {r['nvrtc_s']:.2f} | {r['arena_bytes']} |")
    gemm_cpu.write_results(args.out, "symbolic-cuda-compile", {"machine": info, "rows": rows}, "\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
