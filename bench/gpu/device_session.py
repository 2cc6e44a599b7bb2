#!/usr/bin/env python3
"""GPU session, device side (the `device` mode of scripts/gpu-session.sh).

Runs on the GPU machine over the bundle that bench/gpu/bundle.py made (.gpu/): the runtime's
GPU tests, every conformance sample through tccrt-run --compare, the kernel microbenchmarks
against the measured copy bandwidth, cuBLAS/cuDNN alone and (16-bit attention) PyTorch's
scaled_dot_product_attention alone, and the bench models with tcc
(plain and --cuda-graph) against PyTorch eager, torch.compile (default and max-autotune) and
onnxruntime's CUDA execution provider, all on the same inputs. Prints one table and writes
DATE-DEVICE-gpu.md and .json into --out.

Each section that cannot run says "skipped: <reason>" and the others go on; the whole session
keeps to --budget-s (sections that would start after it are skipped, the torch.compile
workers are stopped at it).

Interpreter: the GPU machine's python3 (torch, numpy, onnx, onnxruntime). Here, without a
GPU, `bash scripts/gpu-session.sh device` runs the same code: the GPU sections skip with the
runtime's reason, and a bundle made with `bundle --cpu-check` runs every section on the CPU
(CPU artifacts, torch on the CPU) to test this script; with such a bundle the cpu_vs_ort section
times tcc's CPU artifacts against onnxruntime's CPU EP at 1 and N threads on this machine's CPU
(the GPU machine's host processor there), into DATE-<cpu>-cpu-vs-ort.md.

Timing domains (see bench/README.md, "GPU session"):
  host-to-host: one tccrt_run (inputs copied to the device, run, outputs copied back,
      synchronous) and the same for every peer (torch: .to(device), forward, .cpu());
  device: tcc's summed kernel durations of one run (Nsight Compute, gpu__time_duration,
      --clock-control none --cache-control none) against torch's CUDA-event time.
"""
from __future__ import annotations

import argparse
import csv
import fnmatch
import glob
import io
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "gpu"))
sys.path.insert(0, str(ROOT / "bench" / "models"))

# Tolerances: conformance as `tcc check`; microbenchmarks and models vs. the references.
CONF_RTOL, CONF_ATOL = 1e-3, 1e-5
MICRO_RTOL, MICRO_ATOL = 1e-3, 1e-4


def now() -> float:
    return time.time()


def fmt_ms(v) -> str:
    if v is None:
        return "—"
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def flop_rate(per_s: float) -> str:
    return f"{per_s / 1e12:.1f} TFLOP/s" if per_s >= 1e12 else f"{per_s / 1e9:.3g} GFLOP/s"


def pct(v) -> str:
    return "—" if v is None else f"{100 * v:.0f}%"


def kernel_summary(report: dict | None) -> str:
    """Generated kernels, library calls, the most registers and any spills (from tcc's report)."""
    if not report:
        return ""
    parts = [f"{report.get('kernels', 0)} kernels + {report.get('extern_calls', 0)} library calls"]
    regs, spills = 0, []
    for k in report.get("cuda_kernels") or []:
        for arch, a in (k.get("archs") or {}).items():
            regs = max(regs, a.get("registers", 0))
            if a.get("spill_stores") or a.get("spill_loads"):
                spills.append(f"{k.get('name')}@{arch}")
    if regs:
        parts.append(f"<= {regs} regs")
    if report.get("cuda_kernels") is not None:
        parts.append(f"spills in {', '.join(spills)}" if spills else "no spills")
    return ", ".join(parts)


NCU_UNITS_MS = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0,
                "s": 1e3, "second": 1e3}


def parse_ncu_durations(text: str) -> list[tuple[str, float]]:
    """(kernel name, gpu__time_duration.sum in ms) in launch order from `ncu --csv` output: the lines
    from the quoted header on, without ncu's own ==PROF== lines; values may be grouped by
    thousands and are scaled by the Metric Unit column."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        return []
    body = [l for l in lines[start:] if l.strip() and not l.startswith("==")]
    out = []
    for r in csv.DictReader(io.StringIO("\n".join(body))):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = (r.get("Metric Unit") or "ns").strip()
        if unit not in NCU_UNITS_MS:
            raise ValueError(f"ncu reports gpu__time_duration in unit {unit!r}")
        out.append((r.get("Kernel Name", ""), float(r["Metric Value"].replace(",", "")) * NCU_UNITS_MS[unit]))
    return out


def last_run_ms(kernels: list[tuple[str, float]], runs: int) -> tuple[float, int, str]:
    """(summed time, kernel count, note) of the last of `runs` runs of the same launch list. The
    first run may launch more (one-time work): then the run length is the longest period p whose
    last `runs - 1` blocks of kernel names repeat."""
    n = len(kernels)
    names = [k for k, _ in kernels]
    if n % runs == 0 and all(names[i] == names[i % (n // runs)] for i in range(n)):
        per = n // runs
    else:
        per = next((p for p in range(n // runs, 0, -1)
                    if all(names[n - p * (j + 1):n - p * j] == names[n - p:] for j in range(1, runs - 1))), 0)
        if per == 0:
            return sum(ms for _, ms in kernels) / runs, n // runs, f"{n} kernels over {runs} runs with no repeating launch list"
    return sum(ms for _, ms in kernels[-per:]), per, ""


def last_run_kernels(kernels: list[tuple[str, float]], runs: int) -> list[tuple[str, float]]:
    """The (name, ms) of the last of `runs` runs, as last_run_ms splits them; where no launch list
    repeats, every kernel with its time divided by `runs` (an average run)."""
    total, per, note = last_run_ms(kernels, runs)
    if note or per == 0:
        return [(k, ms / runs) for k, ms in kernels]
    return kernels[-per:]


# tcc's attention kernels: "attention_..." or, as tcc numbers its kernels, "k3_attention..."
# (ncu may append the demangled parameter list).
ATTENTION_KERNEL = re.compile(r"^(k\d+_)?attention")


def is_attention_kernel(name: str) -> bool:
    return bool(ATTENTION_KERNEL.match(name.strip()))


def gtest_skip_messages(stdout: str) -> dict[str, str]:
    """Test name -> the first line of its skip message, from GoogleTest's output (its JSON has
    none): the lines between "[ RUN      ] Suite.Test" and "[  SKIPPED ] Suite.Test (N ms)"."""
    out = {}
    for m in re.finditer(r"^\[ RUN      \] (\S+)\n(.*?)^\[  SKIPPED \] \1 ", stdout, re.M | re.S):
        lines = [l.strip() for l in m.group(2).splitlines() if l.strip() and not l.rstrip().endswith("Skipped")]
        out[m.group(1)] = lines[0][:200] if lines else ""
    return out


def self_test() -> int:
    """Checks the parsers above on fixtures (no GPU, torch or onnx needed)."""
    ncu = "\n".join([
        "==PROF== Connected to process 4711 (/x/tccrt-run)",
        '==PROF== Profiling "k0" - 0: 0%....50%....100% - 1 pass',
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"',
        '"0","4711","tccrt-run","h","k0_softmax(float const*, float*)","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0",'
        '"Command line profiler metrics","gpu__time_duration.sum","nsecond","1,234,567"',
        '"1","4711","tccrt-run","h","sm90_xmma_gemm","1","7","(128, 1, 1)","(8, 8, 1)","0","9.0",'
        '"Command line profiler metrics","gpu__time_duration.sum","usecond","12.5"',
        '"1","4711","tccrt-run","h","sm90_xmma_gemm","1","7","(128, 1, 1)","(8, 8, 1)","0","9.0",'
        '"Command line profiler metrics","dram__bytes.sum","byte","4096"',
        "==PROF== Disconnected from process 4711"])
    got = parse_ncu_durations(ncu)
    assert [(k, round(v, 6)) for k, v in got] == [("k0_softmax(float const*, float*)", 1.234567),
                                                  ("sm90_xmma_gemm", 0.0125)], got
    assert parse_ncu_durations("==PROF== no kernels\n") == []
    a, b, w = ("a", 1.0), ("b", 2.0), ("w", 5.0)
    assert last_run_ms([a, b] * 4, 4) == (3.0, 2, "")
    assert last_run_ms([w, a, b] + [a, b] * 3, 4) == (3.0, 2, "")          # a one-time kernel first
    assert last_run_ms([a, a] * 4, 4) == (2.0, 2, "")
    assert last_run_ms([a, b, w], 4)[2].startswith("3 kernels over 4 runs")
    assert last_run_kernels([w, a, b] + [a, b] * 3, 4) == [a, b]
    assert last_run_kernels([a, b, w], 4) == [("a", 0.25), ("b", 0.5), ("w", 1.25)]
    assert is_attention_kernel("attention_f16_causal(half const*, half*)") and is_attention_kernel("k1_attention")
    assert not is_attention_kernel("k0_matmul") and not is_attention_kernel("k2_cast_attention")
    gt = "\n".join([
        "[ RUN      ] Cuda.Runs", "/x/CudaTest.cpp:12: Skipped", "no usable CUDA GPU/driver: libcuda.so.1 not found",
        "", "[  SKIPPED ] Cuda.Runs (0 ms)", "[ RUN      ] Cuda.RunsToo", "[       OK ] Cuda.RunsToo (1 ms)",
        "[ RUN      ] Cuda.RunsTooLong", "/x/CudaTest.cpp:40: Skipped", "", "[  SKIPPED ] Cuda.RunsTooLong (0 ms)"])
    msgs = gtest_skip_messages(gt)
    assert msgs == {"Cuda.Runs": "no usable CUDA GPU/driver: libcuda.so.1 not found", "Cuda.RunsTooLong": ""}, msgs
    assert kernel_summary({"kernels": 2, "extern_calls": 1, "cuda_kernels": [
        {"name": "k0", "archs": {"sm_90": {"registers": 40, "spill_stores": 0, "spill_loads": 0}}},
        {"name": "k1", "archs": {"sm_80": {"registers": 64, "spill_stores": 4, "spill_loads": 4}}}]}) == \
        "2 kernels + 1 library calls, <= 64 regs, spills in k1@sm_80"
    print("device_session self-test: ok")
    return 0


def model_digest(path) -> str:
    """SHA-256 of what the compiled artifact depends on: the graph (nodes, initializers, inputs,
    outputs) and the opsets, not the file's metadata (ir_version, producer version), which may
    differ between onnx releases on the two machines."""
    import hashlib
    import onnx
    m = onnx.load(str(path))
    h = hashlib.sha256(m.graph.SerializeToString())
    for o in m.opset_import:
        h.update(o.SerializeToString())
    return h.hexdigest()


def median(xs):
    return statistics.median(xs) if xs else None


def cpu_info() -> dict:
    """This machine's processor as lscpu names it (else /proc/cpuinfo): model, logical CPUs,
    sockets x cores x threads, NUMA nodes, L3, and its AVX-512 / AMX / AVX-VNNI flags."""
    info: dict = {"model": platform.processor() or "?", "cpus": os.cpu_count(),
                  "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()}
    fields, flags = {}, []
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        fields = {k.strip(): v.strip() for k, _, v in (l.partition(":") for l in out.splitlines()) if v}
        flags = fields.get("Flags", "").split()
    except (OSError, subprocess.TimeoutExpired):
        pass
    if not flags or "Model name" not in fields:
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                k, _, v = line.partition(":")
                if k.strip() == "model name" and "Model name" not in fields:
                    fields["Model name"] = v.strip()
                elif k.strip() == "flags" and not flags:
                    flags = v.split()
        except OSError:
            pass
    info["model"] = fields.get("Model name", info["model"])
    for key, name in (("sockets", "Socket(s)"), ("cores_per_socket", "Core(s) per socket"),
                      ("threads_per_core", "Thread(s) per core"), ("numa_nodes", "NUMA node(s)"),
                      ("l3", "L3 cache"), ("max_mhz", "CPU max MHz")):
        if name in fields:
            info[key] = fields[name]
    info["avx512"] = [f for f in flags if f.startswith("avx512")]
    info["amx"] = [f for f in flags if f.startswith("amx")]
    info["other_isa"] = [f for f in ("avx2", "fma", "f16c", "avx_vnni", "avx_vnni_int8", "avx_ne_convert") if f in flags]
    return info


class Session:
    def __init__(self, args):
        self.args = args
        self.bundle = args.bundle.resolve()
        self.out = args.out.resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.work = Path(args.work).resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        self.deadline = now() + args.budget_s
        self.logf = open(self.out / "session.log", "w")
        self.manifest = json.loads((self.bundle / "manifest.json").read_text())
        self.device = self.manifest["device"]  # "cuda" (a GPU bundle) or "cpu" (--cpu-check)
        self.rt_env = dict(os.environ)
        self.rt_env["LD_LIBRARY_PATH"] = os.environ.get("TCCRT_LIBRARY_PATH", str(self.bundle / "lib"))
        nccl = find_nccl()
        if nccl and "TCC_NCCL_LIBRARY" not in self.rt_env:
            self.rt_env["TCC_NCCL_LIBRARY"] = nccl
        self.tccrt_run = self.bundle / "bin" / "tccrt-run"
        self.sections: dict[str, dict] = {}
        self.rows: list[dict] = []  # the table
        self.info: dict = {"date": time.strftime("%Y-%m-%d")}
        self.device_ok, self.device_reason = False, "the probe did not finish"
        self.torch_ok, self.torch_reason = False, "the probe did not finish"
        self.device_tag, self.ncu = "unknown", None
        self.ncu_kernels: list[tuple[str, float]] = []  # (name, ms) of the last run ncu_device_ms measured
        self.copy_bw = None

    # -- plumbing --------------------------------------------------------------------------------
    def log(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        self.logf.write(line + "\n")
        self.logf.flush()

    def left(self) -> float:
        return self.deadline - now()

    def section(self, name: str, fn, need_s: float = 20) -> None:
        if self.left() < need_s:
            self.skip(name, f"session budget ({self.args.budget_s:.0f} s) nearly spent")
            return
        t0 = now()
        self.log(f"== {name}")
        try:
            fn()
        except SkipSection as e:
            self.skip(name, str(e), quiet=True)
        except Exception as e:  # report and go on with the next section
            import traceback
            self.log(traceback.format_exc())
            self.sections[name] = {"status": f"error: {type(e).__name__}: {e}"}
        self.sections.setdefault(name, {"status": "ok"})
        self.sections[name]["seconds"] = round(now() - t0, 1)
        self.log(f"   {name}: {self.sections[name]['status']} ({self.sections[name]['seconds']} s)")

    def skip(self, name: str, reason: str, quiet: bool = False) -> None:
        self.sections[name] = {"status": f"skipped: {reason}"}
        if not quiet:
            self.log(f"   {name}: skipped: {reason}")

    def rt(self, args: list, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.tccrt_run), *map(str, args)], capture_output=True, text=True,
                              timeout=max(5.0, min(timeout, self.left())), env=self.rt_env)

    def tcc_json(self, args: list, timeout: float = 120) -> tuple[dict | None, str]:
        """tccrt-run ... --json: (result, "") or (None, error), result["exit"] = 0 or 2."""
        try:
            p = self.rt([*args, "--json"], timeout)
        except subprocess.TimeoutExpired:
            return None, f"tccrt-run timed out"
        if p.returncode in (0, 2):
            try:
                res = json.loads(p.stdout.strip().splitlines()[-1])
                res["exit"] = p.returncode
                return res, ""
            except (ValueError, IndexError):
                return None, f"tccrt-run printed no JSON: {p.stdout[-300:]}"
        err = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        return None, err

    # -- availability ----------------------------------------------------------------------------
    def probe(self) -> None:
        info = self.info
        info["date"] = time.strftime("%Y-%m-%d")
        info["time_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        info["host"] = platform.node()
        info["bundle"] = {k: self.manifest.get(k) for k in ("created", "git", "device", "arch", "bundle_bytes")}
        info["python"] = sys.version.split()[0]
        info["nccl_library"] = self.rt_env.get("TCC_NCCL_LIBRARY", "not found")
        p = subprocess.run([str(self.tccrt_run), "--device-available", self.device], capture_output=True,
                           text=True, env=self.rt_env)
        info["tccrt_device"] = (p.stdout.strip() or p.stderr.strip())
        self.device_ok = p.returncode == 0
        self.device_reason = re.sub(r"^\w+: (unavailable: )?", "", info["tccrt_device"])
        try:
            import torch
            info["torch"] = torch.__version__
            self.torch_ok = True
            if self.device == "cuda":
                self.torch_ok = torch.cuda.is_available()
                info["torch_cuda"] = torch.cuda.is_available()
                if self.torch_ok:
                    props = torch.cuda.get_device_properties(0)
                    info["gpu"] = torch.cuda.get_device_name(0)
                    info["gpu_sms"] = props.multi_processor_count
                    info["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
                else:
                    self.torch_reason = "torch.cuda.is_available() is False"
            self.torch_reason = getattr(self, "torch_reason", "")
        except Exception as e:
            self.torch_ok, self.torch_reason = False, f"torch cannot be imported: {e}"
        try:
            import onnxruntime as ort
            info["onnxruntime"] = ort.__version__
            info["ort_providers"] = ort.get_available_providers()
        except Exception as e:
            info["onnxruntime"] = f"unavailable: {e}"
            info["ort_providers"] = []
        smi = shutil.which("nvidia-smi")
        if smi:
            q = subprocess.run([smi, "--query-gpu=name,driver_version,clocks.max.sm,memory.total",
                                "--format=csv,noheader"], capture_output=True, text=True)
            info["nvidia_smi"] = q.stdout.strip() or q.stderr.strip()
        self.ncu = None if self.args.no_ncu else self.find_ncu()
        info["ncu"] = self.ncu or "not found"
        name = info.get("gpu") or ("cpu-check" if self.device == "cpu" else "no-gpu")
        self.device_tag = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        for k, v in info.items():
            self.log(f"   {k}: {v}")

    def find_ncu(self) -> str | None:
        if self.device != "cuda":
            return None
        cands = [shutil.which("ncu"), "/usr/local/cuda/bin/ncu",
                 *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)]
        return next((c for c in cands if c and os.access(c, os.X_OK)), None)

    def need_device(self) -> None:
        if not self.device_ok:
            raise SkipSection(self.device_reason)

    def need_torch(self) -> None:
        if not self.torch_ok:
            raise SkipSection(self.torch_reason)

    # -- GPU tests ---------------------------------------------------------------------------------
    def gpu_tests(self) -> None:
        runs = self.manifest.get("test_runs") or []
        if not runs:
            raise SkipSection("the bundle holds no test programs")
        # Files the test programs name by absolute build paths, put back where they were built.
        for path, rel in (self.manifest.get("build_files") or {}).items():
            if not Path(path).exists():
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(self.bundle / "build-files" / rel, path)
        results = {}
        for run in runs:
            t = run["label"]
            jf = self.work / (re.sub(r"[^\w.-]+", "_", t) + ".json")
            if jf.exists():
                jf.unlink()
            env = dict(self.rt_env, GTEST_OUTPUT=f"json:{jf}", **run.get("env", {}))
            try:
                p = subprocess.run([str(self.bundle / "bin" / run["program"]), *run.get("args", [])],
                                   capture_output=True, text=True, env=env,
                                   timeout=max(10, min(300, self.left() - 60)))
            except subprocess.TimeoutExpired:
                results[t] = {"status": "timed out"}
                self.rows.append({"kind": "tests", "name": t, "check": "timed out"})
                continue
            with open(self.out / "tests.log", "a") as f:  # one file for all (the tool returns 8 files)
                f.write(f"==== {t} (exit {p.returncode})\n{p.stdout[-200000:]}{p.stderr[-50000:]}\n")
            r = {"exit": p.returncode, "passed": 0, "failed": [], "skipped": {}}
            printed = gtest_skip_messages(p.stdout)
            if jf.exists():
                data = json.loads(jf.read_text())
                for suite in data.get("testsuites", []):
                    for case in suite.get("testsuite", []):
                        full = f"{suite['name']}.{case['name']}"
                        if case.get("failures"):
                            r["failed"].append(full)
                        elif case.get("result") == "SKIPPED":
                            r["skipped"][full] = printed.get(full, "")
                        else:
                            r["passed"] += 1
            else:
                r["error"] = (p.stderr.strip().splitlines() or ["no JSON written"])[-1]
            # NCCL bandwidth lines of CudaCollectives.NcclOneRankAllReduceBandwidth.
            for m in re.finditer(r"\[nccl\] all_reduce f32 (\d+) MiB, 1 rank: ([\d.]+) ms each, algbw ([\d.]+) GB/s",
                                 p.stdout):
                self.rows.append({"kind": "nccl", "name": f"all_reduce f32 {m[1]} MiB (1 rank)",
                                  "timing": "device", "tcc": float(m[2]),
                                  "metric": f"algbw {m[3]} GB/s", "check": "ok"})
                r.setdefault("nccl_allreduce", []).append(
                    {"mib": int(m[1]), "ms": float(m[2]), "algbw_gbs": float(m[3])})
            results[t] = r
            skip_reasons = sorted(set(m.split("\n")[0] for m in r["skipped"].values() if m))
            self.log(f"   {t}: exit {p.returncode}, {r['passed']} passed, {len(r['failed'])} failed, "
                     f"{len(r['skipped'])} skipped{' (' + '; '.join(skip_reasons[:2]) + ')' if skip_reasons else ''}")
            self.rows.append({"kind": "tests", "name": t,
                              "check": f"{r['passed']} passed, {len(r['failed'])} failed, {len(r['skipped'])} skipped"
                                       + (f": {r['error']}" if "error" in r else ""),
                              "note": ("FAILED: " + ", ".join(r["failed"][:5]) + (" ..." if len(r["failed"]) > 5 else "")
                                       if r["failed"] else "; ".join(skip_reasons[:1]))})
        self.sections["gpu_tests"] = {"status": "ok", "results": results}

    # -- python ------------------------------------------------------------------------------------
    def python(self) -> None:
        """The Python package's GPU tests (python/tests/test_cuda.py, standalone: pytest may be
        missing here) on the bundle's artifacts, with libtccrt from the bundle: host arrays, and
        torch CUDA tensors through DLPack."""
        artifacts = self.bundle / "python"
        if not (artifacts / "mlp.tcc").exists():
            raise SkipSection("the bundle holds no Python test artifacts (bundle --parts python)")
        lib = self.rt_env["LD_LIBRARY_PATH"].split(":")[0]
        env = dict(self.rt_env, PYTHONPATH=str(ROOT / "python"), TCC_LIBRARY_DIR=lib,
                   TCC_CUDA_TEST_ARTIFACTS=str(artifacts))
        p = subprocess.run([sys.executable, str(ROOT / "python" / "tests" / "test_cuda.py")],
                           capture_output=True, text=True, env=env, timeout=max(30, min(300, self.left() - 30)))
        with open(self.out / "tests.log", "a") as f:
            f.write(f"==== python/tests/test_cuda.py (exit {p.returncode})\n{p.stdout}{p.stderr[-20000:]}\n")
        results = {}
        for line in p.stdout.splitlines():
            name, _, verdict = line.partition(": ")
            if name.startswith("test_"):
                results[name] = verdict
                self.rows.append({"kind": "python", "name": name, "check": verdict[:200]})
                self.log(f"   {name}: {verdict[:200]}")
        if p.returncode and not results:
            self.rows.append({"kind": "python", "name": "test_cuda.py",
                              "check": f"exit {p.returncode}: {p.stderr.strip()[-300:]}"})
        # Call overhead: torch CUDA tensors through DLPack vs through host memory
        # (bench/gpu/python_dlpack.py), on the test MLP and the bench models' artifacts.
        timings = []
        if self.device == "cuda":
            paths = [artifacts / "mlp.tcc", *sorted(self.bundle.glob("models/*/model.tcc"))]
            t = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu" / "python_dlpack.py"), *map(str, paths)],
                               capture_output=True, text=True, env=env, timeout=max(30, min(300, self.left() - 30)))
            for line in t.stdout.splitlines():
                if line.startswith("{"):
                    r = json.loads(line)
                    timings.append(r)
                    name = Path(r["artifact"]).parent.name if r["artifact"].endswith("model.tcc") else "test mlp"
                    self.rows.append({"kind": "python", "name": f"call {name}", "timing": "h2h",
                                      "tcc": r["torch_cuda_dlpack_ms"],
                                      "metric": f"via host {r['torch_cuda_via_host_ms']} ms, numpy {r['numpy_host_ms']} ms",
                                      "check": "ok" if r["outputs_equal"] else "outputs differ"})
            if t.returncode:
                self.rows.append({"kind": "python", "name": "python_dlpack.py",
                                  "check": f"exit {t.returncode}: {t.stderr.strip()[-300:]}"})
        self.sections["python"] = {"status": "ok" if p.returncode == 0 else "failed", "results": results,
                                   "call_timings": timings}

    # -- conformance -------------------------------------------------------------------------------
    def conformance(self) -> None:
        cases = [c for c in self.manifest.get("conformance", []) if c["ok"]]
        if not cases:
            raise SkipSection(self.manifest.get("compile_error") or "no conformance samples in the bundle")
        self.need_device()
        import concurrent.futures as cf

        def one(c):
            d = self.bundle / "conformance" / c["name"]
            ds = d / "test_data_set_0"
            inputs = sorted(ds.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
            args = [d / "model.tcc", "--compare", ds, "--rtol", CONF_RTOL, "--atol", CONF_ATOL]
            if inputs:
                args += ["--inputs", *inputs]
            res, err = self.tcc_json(args, timeout=120)
            if res is None:
                return c["name"], "error", err
            if res["exit"] == 0:
                return c["name"], "pass", ""
            bad = [o for o in res["compare"]["outputs"] if not o["ok"]]
            return c["name"], "fail", "; ".join(o.get("error") or f"{o['mismatches']} mismatches, max abs err {o['max_abs_error']}" for o in bad)
        with cf.ThreadPoolExecutor(4) as ex:
            results = list(ex.map(one, cases))
        n = {k: sum(r[1] == k for r in results) for k in ("pass", "fail", "error")}
        not_compiled = [c["name"] for c in self.manifest["conformance"] if not c["ok"] and not c.get("skipped")]
        self.sections["conformance"] = {"status": "ok", "counts": n, "not_compiled": not_compiled,
                                        "failures": [{"name": a, "status": b, "detail": c} for a, b, c in results if b != "pass"]}
        for a, b, c in results:
            if b != "pass":
                self.log(f"   {b.upper()} {a}: {c}")
        self.rows.append({"kind": "conformance", "name": f"{len(cases)} node tests",
                          "check": f"{n['pass']} passed, {n['fail']} failed, {n['error']} errors"
                                   + (f" ({len(not_compiled)} did not compile)" if not_compiled else "")})

    # -- measurements --------------------------------------------------------------------------------
    def ncu_device_ms(self, args: list, runs: int) -> tuple[float | None, str, int]:
        """Summed kernel durations of the last of `runs` tccrt_run calls under Nsight Compute:
        (ms or None, why not / a note, kernels in that run). Leaves that run's (name, ms) in
        self.ncu_kernels."""
        self.ncu_kernels = []
        if self.device != "cuda":
            return None, "not a GPU run", 0
        if not self.ncu:
            return None, "ncu not found", 0
        logf = self.work / "ncu.csv"
        if logf.exists():
            logf.unlink()
        cmd = [self.ncu, "--csv", "--log-file", str(logf), "--metrics", "gpu__time_duration.sum",
               "--print-units", "base", "--clock-control", "none", "--cache-control", "none",
               "--target-processes", "all", str(self.tccrt_run), *map(str, args)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=self.rt_env,
                               timeout=max(10, min(180, self.left() - 30)))
        except subprocess.TimeoutExpired:
            return None, "ncu timed out", 0
        if not logf.exists():
            return None, f"ncu wrote no report (exit {p.returncode}): {(p.stderr or p.stdout).strip()[-200:]}", 0
        try:
            vals = parse_ncu_durations(logf.read_text(errors="replace"))
        except ValueError as e:
            return None, str(e), 0
        if not vals:
            return None, f"ncu measured no kernels (exit {p.returncode}): {(p.stderr or p.stdout).strip()[-200:]}", 0
        total, per, note = last_run_ms(vals, runs)
        self.ncu_kernels = last_run_kernels(vals, runs)
        return total, note, per

    def copy_bandwidth(self) -> None:
        import torch
        dev = "cuda" if self.device == "cuda" else "cpu"
        n = (256 << 20) // 4 if dev == "cuda" else (64 << 20) // 4
        src = torch.randn(n, device=dev)
        dst = torch.empty_like(src)
        t = self.time_torch(lambda: dst.copy_(src), iters=20, warmup=3)
        self.copy_bw = 2 * 4 * n / (t * 1e-3)  # bytes read + written per second
        self.info["copy_bandwidth_gbs"] = round(self.copy_bw / 1e9, 1)
        self.log(f"   device-to-device copy: {self.copy_bw / 1e9:.0f} GB/s (read + write, {4 * n >> 20} MiB buffers)")
        del src, dst

    def time_torch(self, fn, iters: int, warmup: int) -> float:
        """Median milliseconds of fn() on the device (CUDA events), or wall time on the CPU."""
        import torch
        for _ in range(warmup):
            fn()
        if self.device == "cuda":
            torch.cuda.synchronize()
            ts = []
            for _ in range(iters):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                e.synchronize()
                ts.append(s.elapsed_time(e))
            return statistics.median(ts)
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)

    # -- microbenchmarks -----------------------------------------------------------------------------
    def micro(self) -> None:
        entries = [m for m in self.manifest.get("micro", []) if m["ok"]]
        if self.args.micro:
            # --micro NAME...: only these (shell-style patterns, e.g. 'attn_*').
            entries = [m for m in entries if any(fnmatch.fnmatchcase(m["name"], p) for p in self.args.micro)]
            if not entries:
                raise SkipSection(f"no microbenchmark in the bundle matches --micro {' '.join(self.args.micro)}")
        if not entries:
            raise SkipSection(self.manifest.get("compile_error") or "no microbenchmarks in the bundle")
        self.need_device()
        import numpy as np
        import make_micro
        # Without torch (a CPU check here) tcc's side still runs: unchecked, no reference or metric.
        with_torch = self.torch_ok
        if with_torch:
            import torch
            F = torch.nn.functional
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        else:
            torch = F = None
            self.log(f"   no torch ({self.torch_reason}): tcc runs alone, without references or metrics")
        dev = "cuda" if self.device == "cuda" else "cpu"
        if with_torch:
            self.copy_bandwidth()
        micros = {m.name: m for m in make_micro.micro_list(self.manifest.get("micro_scale", 1))}
        results = []
        iters = 20 if dev == "cuda" else 3
        for e in entries:
            if self.left() < 60:
                results.append({"name": e["name"], "status": "skipped: session budget"})
                continue
            m = micros[e["name"]]
            d = self.work / "micro" / m.name
            d.mkdir(parents=True, exist_ok=True)
            rng = np.random.default_rng(0)
            arrays = [rng.uniform(-1, 1, size=s).astype(np.float32) for _, s in m.inputs]
            paths = []
            for i, a in enumerate(arrays):
                paths.append(d / f"input_{i}.npy")
                np.save(paths[-1], a)
            torch_ms = base_ms = None
            base_note = ""
            if with_torch:
                xs = [torch.from_numpy(a).to(dev) for a in arrays]
                with torch.no_grad():
                    ref = m.torch_fn(torch, F, *xs)
                    np.save(d / "output_0.npy", ref.cpu().numpy())
                    torch_ms = self.time_torch(lambda: m.torch_fn(torch, F, *xs), iters, 3)
                    if m.baseline_fn:
                        # The library's work alone, on inputs prepared outside the timing (the
                        # attention micros' 16-bit casts).
                        bxs = m.baseline_prep(torch, F, *xs) if m.baseline_prep else xs
                        try:
                            base_ms = self.time_torch(lambda: m.baseline_fn(torch, F, *bxs), iters, 3)
                        except Exception as ex:  # e.g. an SDPA backend this device or build lacks
                            base_note = f"baseline failed: {type(ex).__name__}: {str(ex).splitlines()[0] if str(ex) else ''}"[:300]
                        del bxs
                del xs, ref
            art = self.bundle / "micro" / m.name / "model.tcc"
            rtol = m.rtol if m.rtol is not None else MICRO_RTOL
            atol = m.atol if m.atol is not None else MICRO_ATOL
            check_args = ["--compare", d, "--rtol", rtol, "--atol", atol] if with_torch else []
            res, err = self.tcc_json([art, "--inputs", *paths, *check_args, "--iters", iters, "--warmup", 3],
                                     timeout=300)
            r = {"name": m.name, "kind": m.kind, "doc": m.doc, "torch_ms": torch_ms, "baseline_ms": base_ms,
                 "bytes": m.bytes_moved(), "flops": m.flops, "rtol": rtol, "atol": atol}
            if base_note:
                r["baseline_note"] = base_note
            if res is None:
                r["status"] = f"tcc failed: {err}"
                results.append(r)
                self.rows.append({"kind": "micro", "name": m.name, "check": r["status"]})
                self.log(f"   {m.name}: {r['status']}")
                continue
            r["status"] = "ok"
            r["tcc_h2h_ms"] = res.get("median_ms")
            r["compare"] = res.get("compare")
            dev_ms, why, kernels = self.ncu_device_ms([art, "--inputs", *paths, "--iters", 1, "--warmup", 2], runs=4)
            if dev == "cpu":
                dev_ms, why = r["tcc_h2h_ms"], ""  # on the CPU a run has no copies
            r["tcc_device_ms"], r["device_note"], r["kernels"] = dev_ms, why, kernels
            # The attention kernel alone (its 16-bit casts are kernels of their own), where ncu
            # names one: then the attention metric uses it.
            attn_ms = None
            if m.kind == "attention" and dev == "cuda" and dev_ms:
                attn = [(k, ms) for k, ms in self.ncu_kernels if is_attention_kernel(k)]
                if attn:
                    attn_ms = sum(ms for _, ms in attn)
                    r["attention_kernel_ms"] = attn_ms
                    r["attention_kernels"] = sorted({k.split("(")[0] for k, _ in attn})
            if not with_torch:
                metric = "n/a (no torch)"
            elif dev_ms:
                if m.kind == "memory":
                    r["fraction"] = m.bytes_moved() / (dev_ms * 1e-3) / self.copy_bw
                    r["torch_fraction"] = m.bytes_moved() / (torch_ms * 1e-3) / self.copy_bw
                    metric = f"{pct(r['fraction'])} of copy BW (torch {pct(r['torch_fraction'])})"
                else:
                    t = attn_ms or dev_ms
                    lib = {"gemm": "cuBLAS", "conv": "cuDNN", "block": "torch"}.get(m.kind, "SDPA")
                    r["fraction"] = base_ms / t if base_ms else None
                    rate = m.flops / (t * 1e-3)
                    r["tflops"] = rate / 1e12
                    if m.kind == "attention" and base_ms:
                        r["baseline_tflops"] = m.flops / (base_ms * 1e-3) / 1e12
                    metric = ((f"{pct(r['fraction'])} of {lib} alone; " if base_ms else f"{lib} alone n/a; ") +
                              flop_rate(rate) +
                              (f" (SDPA {flop_rate(r['baseline_tflops'] * 1e12)})" if r.get("baseline_tflops") else ""))
            else:
                metric = f"device time n/a ({why})"
            results.append(r)
            if with_torch:
                check = ("ok" if res["exit"] == 0 else "MISMATCH") + f" (max abs {res['compare']['max_abs_error']:.1e})"
            else:
                check = "unchecked (no torch)"
            self.rows.append({"kind": "micro", "name": m.name, "timing": "device", "tcc": dev_ms,
                              "eager": torch_ms, "metric": metric, "check": check,
                              "note": "; ".join(x for x in (
                                  f"attention kernel {fmt_ms(attn_ms)} ms" if attn_ms else "",
                                  f"tcc h2h {fmt_ms(r['tcc_h2h_ms'])} ms, {kernels} kernel(s) run" if dev == "cuda" else "",
                                  f"rtol {rtol:g}, atol {atol:g}" if (rtol, atol) != (MICRO_RTOL, MICRO_ATOL) else "",
                                  base_note, kernel_summary(e.get("report"))) if x)})
            self.log(f"   {m.name}: tcc {fmt_ms(dev_ms)} ms"
                     + (f" (attention kernel {fmt_ms(attn_ms)} ms)" if attn_ms else "")
                     + f", torch {fmt_ms(torch_ms)} ms, {metric}, {check}" + (f"; {base_note}" if base_note else ""))
            shutil.rmtree(d, ignore_errors=True)
        self.sections["micro"] = {"status": "ok" if with_torch else "ok (no torch: tcc alone, unchecked)",
                                  "results": results,
                                  "copy_bandwidth_gbs": self.copy_bw / 1e9 if self.copy_bw else None}

    # -- bench models ----------------------------------------------------------------------------------
    def models(self) -> None:
        entries = [m for m in self.manifest.get("models", []) if m.get("ok")]
        left_out = [m for m in self.manifest.get("models", []) if not m.get("ok")]
        for m in left_out:
            self.rows.append({"kind": "model", "name": m["name"], "check": f"skipped: {m.get('error')}"})
        if not entries:
            raise SkipSection(self.manifest.get("compile_error") or "no bench models in the bundle")
        self.need_device()
        import numpy as np
        import onnx
        from onnx import numpy_helper
        import make_models
        self.model_results = {}
        for e in entries:
            name = e["name"]
            r = self.model_results.setdefault(name, {"name": name, "flops": e.get("flops"),
                                                     "kernel_summary": kernel_summary(e.get("report"))})
            try:
                model = make_models.build(name, with_outputs=True)
            except Exception as ex:
                r["status"] = f"make_models.py failed here: {ex}"
                continue
            # The inputs and references are regenerated here; a model that comes out different
            # (other NumPy/onnx releases) is still timed, but its outputs cannot be checked.
            differs = model_digest(model.onnx_path) != e.get("graph_sha256")
            r["dir"] = str(model.dir)
            refs = [numpy_helper.to_array(onnx.load_tensor(str(p))) for p in model.output_paths()]
            scale = max(float(np.abs(a).max()) for a in refs if a.size) if refs else 1.0
            art = self.bundle / "models" / name / "model.tcc"
            ins = model.input_paths()
            base = [art, "--inputs", *ins, "--compare", model.dir / "test_data_set_0",
                    "--rtol", 1e-3, "--atol", 1e-4 * scale]
            iters = 50 if self.device == "cuda" else 5
            res, err = self.tcc_json([*base, "--iters", iters, "--warmup", 10], timeout=180)
            if res is None:
                r["status"] = f"tcc failed: {err}"
                continue
            r["status"] = "ok"
            r["tcc_ms"] = res.get("median_ms")
            r["tcc_p10_ms"], r["tcc_p90_ms"] = res.get("p10_ms"), res.get("p90_ms")
            r["check"] = ("ok" if res["exit"] == 0 else "MISMATCH") + f" (max abs {res['compare']['max_abs_error']:.1e})"
            if differs:
                r["check"] = ("n/a: the model regenerated here differs from the one compiled (NumPy/onnx "
                              "releases), so outputs are not comparable; times stand")
            r["device_name"] = res.get("device_name")
            r["device_allocator"] = res.get("device_allocator")
            if self.device == "cuda":
                g, gerr = self.tcc_json([*base, "--iters", iters, "--warmup", 10, "--cuda-graph"], timeout=180)
                r["tcc_graph_ms"] = g.get("median_ms") if g else None
                r["tcc_graph_error"] = gerr
                if g and g["exit"] != 0:
                    r["check"] += "; graph MISMATCH"
                dev_ms, why, k = self.ncu_device_ms([art, "--inputs", *ins, "--iters", 1, "--warmup", 2], runs=4)
                r["tcc_device_ms"], r["device_note"], r["kernels"] = dev_ms, why, k
            self.log(f"   {name}: tcc {fmt_ms(r.get('tcc_ms'))} ms h2h, graph {fmt_ms(r.get('tcc_graph_ms'))} ms, "
                     f"device {fmt_ms(r.get('tcc_device_ms'))} ms, {r['check']}")
        self.sections["models"] = {"status": "ok", "results": self.model_results}

    # -- symbolic shapes -------------------------------------------------------------------------
    def symbolic(self) -> None:
        """bench/symbolic_cpu.py's models on the GPU: one artifact compiled with size ranges
        against a static compile per size (bundle part `symbolic`), at each size on the same
        seeded inputs: outputs compared, host-to-host medians timed (plain and CUDA graph); the
        ratio symbolic/static is the cost of not knowing the sizes at compile time."""
        entries = [e for e in self.manifest.get("symbolic", []) if e.get("ok")]
        if not entries:
            raise SkipSection("no symbolic artifacts in the bundle (bundle part `symbolic`)")
        self.need_device()
        results = []
        scratch = Path(tempfile.mkdtemp(prefix="tcc-symbolic-"))
        for e in entries:
            d = self.bundle / "symbolic" / e["name"]
            for size in e["sizes"]:
                if not size["ok"]:
                    continue
                r = {"model": e["name"], "precision": e["precision"], "size": size["dims"],
                     "ranges": e["ranges"]}
                ref = scratch / f"{e['name']}-{size['dims']}" # (outputs stay off the returned files)
                static = [d / f"static-{size['dims']}.tcc", "--random", 7]
                symbolic = [d / "symbolic.tcc", "--input-shape", *size["input_shape"], "--random", 7]
                tol = ["--rtol", 2e-2 if e["precision"] != "fp32" else 1e-3, "--atol", 1e-3]
                base, err = self.tcc_json([*static, "--outputs", ref, "--iters", 50, "--warmup", 10])
                if base is None:
                    r["status"] = f"static failed: {err}"
                    results.append(r)
                    continue
                sym, err = self.tcc_json([*symbolic, "--compare", ref, *tol, "--iters", 50, "--warmup", 10])
                if sym is None:
                    r["status"] = f"symbolic failed: {err}"
                    results.append(r)
                    continue
                r["check"] = ("ok" if sym["exit"] == 0 else "MISMATCH") + \
                    f" (max abs {sym['compare']['max_abs_error']:.1e})"
                r["static_ms"], r["symbolic_ms"] = base.get("median_ms"), sym.get("median_ms")
                graphs = {}
                for tag, cmd in (("static", static), ("symbolic", symbolic)):
                    g, _ = self.tcc_json([*cmd, "--iters", 50, "--warmup", 10, "--cuda-graph"])
                    graphs[tag] = g.get("median_ms") if g else None
                r["static_graph_ms"], r["symbolic_graph_ms"] = graphs["static"], graphs["symbolic"]
                r["status"] = "ok"
                ratio = r["symbolic_ms"] / r["static_ms"] if r["static_ms"] else None
                r["ratio"] = ratio
                if graphs["static"] and graphs["symbolic"]:
                    r["graph_ratio"] = graphs["symbolic"] / graphs["static"]
                self.rows.append({"kind": "symbolic", "name": f"{e['name']} {size['dims']} ({e['precision']})",
                                  "timing": "h2h", "tcc": r["symbolic_ms"], "graph": r["symbolic_graph_ms"],
                                  "metric": f"symbolic/static {ratio:.2f}" if ratio else "",
                                  "check": r["check"], "note": f"static {fmt_ms(r['static_ms'])} ms, graph "
                                                               f"{fmt_ms(r['static_graph_ms'])} ms"})
                self.log(f"   symbolic {e['name']} {size['dims']}: {fmt_ms(r['symbolic_ms'])} vs static "
                         f"{fmt_ms(r['static_ms'])} ms, {r['check']}")
                results.append(r)
        self.sections["symbolic"] = {"status": "ok", "results": results}

    def peers(self, plan=(("eager", 120), ("ort", 120), ("default", 240))) -> None:
        res = getattr(self, "model_results", None)
        if not res:
            raise SkipSection("no bench model ran with tcc (models: "
                              f"{self.sections.get('models', {}).get('status', 'not run')})")
        self.need_torch()
        names = [n for n, r in res.items() if r.get("status") == "ok"]
        if not names:
            raise SkipSection("no bench model ran with tcc")
        status = {}
        # Each mode in its own process: a slow compile is stopped at its time limit and what
        # finished before is kept (one JSON line per model).
        for mode, limit in plan:
            budget = min(limit, self.left() - 20)
            if budget < 20:
                status[mode] = "skipped: session budget"
                continue
            outf = self.work / f"peer-{mode}.jsonl"
            cmd = [sys.executable, __file__, "--peer", mode, "--device", self.device, "--peer-out", str(outf),
                   *(["--models-dir", str(self.args.models_dir)] if self.args.models_dir else []), "--models", *names]
            self.log(f"   peer {mode} (limit {budget:.0f} s)")
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=budget)
                status[mode] = "ok" if p.returncode == 0 else f"exit {p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1][:300]}"
                if p.stderr:
                    (self.work / f"peer-{mode}.log").write_text(p.stderr)
            except subprocess.TimeoutExpired:
                status[mode] = f"stopped after {budget:.0f} s"
            if outf.exists():
                for line in outf.read_text().splitlines():
                    d = json.loads(line)
                    res[d["model"]].setdefault("peers", {})[mode] = d
            self.log(f"   peer {mode}: {status[mode]}")
        name = "peers" if plan[0][0] == "eager" else "autotune"
        self.sections[name] = {"status": "ok", "modes": status}

    def autotune(self) -> None:
        self.peers(plan=(("max-autotune", 300),))

    # -- tcc's CPU backend vs onnxruntime's CPU EP on this host (a --cpu-check bundle) ---------------
    def cpu_vs_ort(self) -> None:
        """The bundle's CPU artifacts (tccrt-run --threads T) against onnxruntime's
        CPUExecutionProvider (intra_op_num_threads=T, inter_op 1, sequential, ORT_ENABLE_ALL: the
        session bench/run_cpu.py makes) on the same inputs, at 1 thread, the physical cores and all
        usable CPUs (--cpu-threads). Per model and T: CPU_ROUNDS rounds alternating the two (tcc
        first in rounds 1 and 3, ORT in round 2), each a warm-up and a timed block of the same length;
        each side's latency is the median of its round medians. tcc's outputs are checked by
        tccrt-run --compare in every round, ORT's once per T, against make_models.py's reference
        outputs (ORT without graph optimizations). Writes DATE-<cpu>-cpu-vs-ort.md into --out; the
        raw numbers are in the session's .json (sections.cpu_vs_ort)."""
        if self.device != "cpu":
            raise SkipSection("needs a CPU bundle (bundle --cpu-check)")
        entries = [m for m in self.manifest.get("models", []) if m.get("ok")]
        if not entries:
            raise SkipSection(self.manifest.get("compile_error") or "no bench models in the bundle")
        self.need_device()
        import numpy as np
        import onnx
        import onnxruntime as ort
        from onnx import numpy_helper
        import make_models
        sys.path.insert(0, str(ROOT / "bench"))
        import run_cpu  # its onnxruntime session, output check and timing helpers
        cpu = cpu_info()
        self.info["cpu"] = (f"{cpu['model']}, {cpu['usable_cpus']} CPUs, AMX: {' '.join(cpu['amx']) or 'none'}, "
                            f"AVX-512: {' '.join(cpu['avx512']) or 'none'}")
        physical = None
        try:
            physical = int(cpu["sockets"]) * int(cpu["cores_per_socket"])
        except (KeyError, ValueError):
            pass
        threads = self.args.cpu_threads or sorted({1, min(physical or cpu["usable_cpus"], cpu["usable_cpus"]),
                                                   cpu["usable_cpus"]})
        results = []
        for e in entries:
            name = e["name"]
            try:
                model = make_models.build(name, with_outputs=True)
            except Exception as ex:
                results.append({"model": name, "error": f"make_models.py failed here: {ex}"})
                continue
            differs = model_digest(model.onnx_path) != e.get("graph_sha256")
            ref = {t.name: numpy_helper.to_array(t) for t in (onnx.load_tensor(str(p)) for p in model.output_paths())}
            scale = max((float(np.abs(a).max()) for a in ref.values() if a.size), default=1.0)
            art = self.bundle / "models" / name / "model.tcc"
            ins = model.input_paths()
            for t in threads:
                r = {"model": name, "threads": t, "gflop": (e.get("flops") or 0) / 1e9 or None}
                results.append(r)
                if self.left() < 15:
                    r["error"] = "skipped: session budget"
                    continue
                meter = run_cpu.CpuMeter()
                try:
                    sess, r["ort_init_s"] = run_cpu.ort_session(model.onnx_path, t)
                    feeds = run_cpu.ort_feeds(sess, ins)
                    r["ort_check"] = run_cpu.compare(sess.run(None, feeds), ref)
                    # Block length from ORT's latency: CPU_BLOCK_S of timed runs per block.
                    est = statistics.median(run_cpu.time_runs(lambda: sess.run(None, feeds), 2, 3))
                except Exception as ex:
                    r["error"] = f"onnxruntime: {type(ex).__name__}: {str(ex).splitlines()[0] if str(ex) else ''}"[:300]
                    continue
                iters = max(CPU_MIN_ITERS, min(CPU_MAX_ITERS, int(CPU_BLOCK_S / max(est, 1e-3) * 1e3)))
                warmup = max(3, iters // 5)
                r.update(iters_per_round=iters, warmup_per_round=warmup)
                tcc_blocks, ort_blocks, tcc_err, tcc_ok, tcc_abs = [], [], "", True, 0.0
                for k in range(CPU_ROUNDS):
                    for side in (("tcc", "ort") if k % 2 == 0 else ("ort", "tcc")):
                        if side == "ort":
                            ort_blocks.append(run_cpu.stats(run_cpu.time_runs(lambda: sess.run(None, feeds),
                                                                              warmup, iters)))
                            continue
                        if tcc_err:
                            continue
                        res, err = self.tcc_json([art, "--inputs", *ins, "--compare", model.dir / "test_data_set_0",
                                                  "--rtol", 1e-3, "--atol", 1e-4 * scale, "--threads", t,
                                                  "--warmup", warmup, "--iters", iters], timeout=120)
                        if res is None or "median_ms" not in res:
                            tcc_err = err or "tccrt-run reported no times"
                            continue
                        tcc_ok &= res["exit"] == 0
                        tcc_abs = max(tcc_abs, res.get("compare", {}).get("max_abs_error") or 0.0)
                        tcc_blocks.append({k2: res[k2] for k2 in ("median_ms", "min_ms", "max_ms", "p10_ms", "p90_ms")
                                           if k2 in res} | {"iters": iters})
                        r["tcc_device_name"] = res.get("device_name")
                del sess
                r["others_cpu"] = meter.others()
                r["ort"] = run_cpu.combine(ort_blocks)
                if tcc_err:
                    r["error"] = f"tcc: {tcc_err}"
                else:
                    r["tcc"] = run_cpu.combine(tcc_blocks)
                    r["tcc_check"] = {"ok": tcc_ok, "max_rel_err": tcc_abs / scale if scale else tcc_abs}
                    r["ratio"] = r["tcc"]["median_ms"] / r["ort"]["median_ms"]
                if differs:
                    r["check_note"] = ("the model regenerated here differs from the one compiled (NumPy/onnx "
                                       "releases): outputs not comparable, times stand")
                self.log(f"   {name} {t}t: tcc {fmt_ms(r.get('tcc', {}).get('median_ms'))} ms, "
                         f"ORT {fmt_ms(r['ort']['median_ms'])} ms"
                         + (f", tcc/ORT {r['ratio']:.2f}" if r.get("ratio") else f", {r.get('error')}")
                         + f" ({iters} iters x {CPU_ROUNDS} rounds; others' CPU {r['others_cpu']:.0%})")
        # The table, and the rows of the session's table.
        def check(c):
            if not c:
                return "—"
            return ("ok" if c["ok"] else "MISMATCH") + f" ({c.get('max_rel_err', float('nan')):.0e})"
        geo = {}
        for r in results:
            if r.get("ratio"):
                geo.setdefault(r["threads"], []).append(r["ratio"])
            self.rows.append({"kind": "cpu-ort", "name": f"{r['model']} {r.get('threads', '')}t".strip(),
                              "timing": "wall", "tcc": r.get("tcc", {}).get("median_ms"),
                              "ort": r.get("ort", {}).get("median_ms"),
                              "metric": f"tcc/ORT {r['ratio']:.2f}" if r.get("ratio") else "",
                              "check": r.get("error") or f"tcc {check(r.get('tcc_check'))}, ORT {check(r.get('ort_check'))}",
                              "note": r.get("check_note", "")})
        geomean = {t: math.exp(sum(map(math.log, v)) / len(v)) for t, v in geo.items()}
        lines = [f"# tcc CPU backend vs onnxruntime CPU EP — {self.info['date']}, {cpu['model']}", "",
                 f"- CPU: {cpu['model']} ({cpu['usable_cpus']} usable of {cpu['cpus']} CPUs; "
                 f"{cpu.get('sockets', '?')} socket(s) x {cpu.get('cores_per_socket', '?')} cores x "
                 f"{cpu.get('threads_per_core', '?')} threads; NUMA nodes {cpu.get('numa_nodes', '?')}; "
                 f"L3 {cpu.get('l3', '?')}" + (f"; max {cpu['max_mhz']} MHz" if cpu.get("max_mhz") else "")
                 + f"); host {platform.node()}",
                 f"- AMX: {' '.join(cpu['amx']) or 'none'}; AVX-512: {' '.join(cpu['avx512']) or 'none'}; "
                 f"also {' '.join(cpu['other_isa'])}",
                 f"- tcc: git {self.manifest.get('git')}, artifacts compiled {self.manifest.get('created')} on "
                 f"{self.manifest.get('host_cpu') or self.manifest.get('host')} (kernels `-march=native` there; libtccrt "
                 f"picks its GEMM kernels by cpuid here{', TCC_GEMM_ISA=' + os.environ['TCC_GEMM_ISA'] if os.environ.get('TCC_GEMM_ISA') else ''}); "
                 f"tccrt-run --threads T, per-run wall time inside the process",
                 f"- onnxruntime {ort.__version__}: CPUExecutionProvider, intra_op_num_threads=T, inter_op_num_threads=1, "
                 f"sequential, ORT_ENABLE_ALL; wall time of each sess.run() (Python call included, ~10 us); "
                 f"numpy {np.__version__}, Python {platform.python_version()}",
                 f"- Method: per model and T, {CPU_ROUNDS} rounds alternating tcc and ORT (tcc first in rounds 1 and 3, ORT "
                 f"in round 2; tcc in its own tccrt-run process, ORT's session idle meanwhile), each a warm-up "
                 f"and a timed block of the same number of runs (about {CPU_BLOCK_S:g} s of ORT runs, "
                 f"{CPU_MIN_ITERS}-{CPU_MAX_ITERS}); latency = median of the round medians, [min-max] over the "
                 f"round medians. Same inputs (make_models.py, seeded); check: outputs vs onnxruntime without graph "
                 f"optimizations, |d| <= 1e-3|ref| + 1e-4 max|ref| (max|d|/max|ref| in brackets). "
                 f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
                 f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}.",
                 "- tcc/ORT < 1: tcc faster. others' CPU: the share of the machine other processes used meanwhile.",
                 "", "| model | GFLOP | threads | tcc ms [round range] | ORT ms [round range] | tcc/ORT | tcc GFLOP/s | "
                 "ORT GFLOP/s | iters x rounds | check tcc | check ORT | others' CPU |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|"]

        def cell(side):
            if not side:
                return "—"
            ms = [b["median_ms"] for b in side["rounds"]]
            return f"{fmt_ms(side['median_ms'])} [{fmt_ms(min(ms))}-{fmt_ms(max(ms))}]"

        def rate(r, side):
            v = (r.get(side) or {}).get("median_ms")
            return f"{r['gflop'] / (v * 1e-3):.1f}" if v and r.get("gflop") else "—"
        for r in results:
            if "threads" not in r:
                lines.append(f"| {r['model']} | | | {r.get('error')} | | | | | | | | |")
                continue
            err = r.get("error", "")
            lines.append("| " + " | ".join([
                r["model"], f"{r['gflop']:.3f}" if r.get("gflop") else "—", str(r["threads"]),
                cell(r.get("tcc")) if not err.startswith("tcc") else err[:150], cell(r.get("ort")),
                f"{r['ratio']:.2f}" if r.get("ratio") else "—", rate(r, "tcc"), rate(r, "ort"),
                f"{r['iters_per_round']} x {CPU_ROUNDS}" if r.get("iters_per_round") else (err[:150] or "—"),
                check(r.get("tcc_check")) + (f" ({r['check_note']})" if r.get("check_note") else ""),
                check(r.get("ort_check")),
                f"{r['others_cpu']:.0%}" if r.get("others_cpu") is not None else "—"]).replace("\n", " ") + " |")
        if geomean:
            lines += ["", "Geometric mean of tcc/ORT: " + ", ".join(
                f"{t} thread{'s' if t > 1 else ''} {g:.2f} ({len(geo[t])} models)" for t, g in sorted(geomean.items()))]
        text = "\n".join(lines) + "\n"
        tag = re.sub(r"[^a-z0-9]+", "-", cpu["model"].lower()).strip("-")[:60] or "cpu"
        path = self.out / f"{self.info['date']}-{tag}-cpu-vs-ort.md"
        path.write_text(text)
        print("\n" + text, flush=True)
        self.log(f"   wrote {path}")
        self.sections["cpu_vs_ort"] = {"status": "ok", "cpu": cpu, "threads": threads, "results": results,
                                       "geomean_tcc_over_ort": geomean, "report": path.name}

    # -- distributed training on the host CPU: tcc vs torch DDP / FSDP ------------------------------
    def distributed_cpu(self) -> None:
        """bench/distributed_cpu.py on this machine's CPU with the bundle's CPU training artifacts:
        tcc dp / ZeRO-3 against torch DDP / FSDP (gloo) at the bundle's rank counts, 1 thread per
        rank. Writes DATE-<cpu>-distributed-cpu.md/.json into --out."""
        cfg = self.manifest.get("distributed_cpu") or {}
        if not cfg.get("ok"):
            raise SkipSection(cfg.get("error") or "no distributed CPU artifacts in the bundle (bundle --parts distributed)")
        if not shutil.which("mpirun"):
            raise SkipSection("mpirun not found (the bundle's Open MPI packages were not unpacked)")
        import lzma
        arts = self.work / "distributed-cpu"
        arts.mkdir(parents=True, exist_ok=True)
        for z in (self.bundle / "distributed-cpu").glob("*.tcc.xz"):
            (arts / z.name[:-3]).write_bytes(lzma.decompress(z.read_bytes()))
        cpus = len(os.sched_getaffinity(0))
        ranks = [r for r in cfg["ranks"] if r <= cpus]
        slug = re.sub(r"[^a-z0-9]+", "-", cpu_info()["model"].lower()).strip("-")[:40]
        prefix = self.out / f"{time.strftime('%Y-%m-%d')}-{slug}-distributed-cpu"
        cmd = [sys.executable, str(ROOT / "bench" / "distributed_cpu.py"), "--no-compile",
               "--artifacts", str(arts), "--ranks", *map(str, ranks),
               "--batches", *map(str, cfg["batches"]), "--libtccrt", "libtccrt.so.0", "--out", str(prefix),
               "--timeout", "120"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.rt_env, timeout=max(30, self.left() - 10))
        with open(self.out / "tests.log", "a") as f:
            f.write(f"==== distributed_cpu (exit {p.returncode})\n{p.stdout[-20000:]}{p.stderr[-20000:]}\n")
        if not Path(f"{prefix}.json").exists():
            raise RuntimeError(f"bench/distributed_cpu.py exit {p.returncode}: " + (p.stderr.strip().splitlines() or [""])[-1])
        data = json.loads(Path(f"{prefix}.json").read_text())
        self.sections["distributed_cpu"] = {"status": "ok" if p.returncode == 0 else "partial", "results": data}
        for r in data["rows"]:
            self.rows.append({"kind": "distributed-cpu", "name": f"fashion-mnist b{r['batch']} {r['ranks']} ranks {r['strategy']}",
                              "timing": "h2h", "tcc": r["tcc"].get("ms_per_step"), "metric": "",
                              "check": r["tcc"].get("error", ""), "note": f"torch {r['torch'].get('ms_per_step', r['torch'].get('error'))}"})
        self.log(f"   distributed CPU: geomean tcc/torch over multi-rank rows {data.get('geomean_multi_rank')}")

    def worker_sides(self, mode: list[str], extra: list[str], stem: str, limit_s: float, label: str) -> dict:
        """{"tcc": ..., "torch": ...}: this script's worker `mode` run once per side in a process
        of its own (libtccrt's environment for tcc), each within `limit_s` (and the budget left);
        a side's result is the JSON it wrote to WORK/<stem>-<side>.json, else {"error": ...}."""
        res = {}
        for side, env in (("tcc", self.rt_env), ("torch", None)):
            if side == "torch" and not self.torch_ok:
                res[side] = {"error": self.torch_reason}
                continue
            outf = self.work / f"{stem}-{side}.json"
            cmd = [sys.executable, __file__, *mode, side, "--device", self.device,
                   "--bundle", str(self.bundle), *extra, "--peer-out", str(outf)]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                   timeout=max(10, min(limit_s, self.left() - 20)))
                res[side] = json.loads(outf.read_text()) if outf.exists() else {
                    "error": f"exit {p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1][:300]}"}
            except subprocess.TimeoutExpired:
                res[side] = {"error": "timed out"}
            self.log(f"   {label}{side}: { {k: v for k, v in res[side].items() if k != 'losses'} }")
        return res

    # -- attention training (bench/attention_layer.py's layer, bf16) ----------------------------------
    def attention_train(self) -> None:
        """tcc's bf16 train step of one causal attention layer (attention forward and backward on
        the generated FlashAttention-2 kernels) against PyTorch eager with SDPA (flash) under
        autocast(bf16), same weights, data, SGD and mse loss, each in a process of its own."""
        arts = [a for a in self.manifest.get("attention_train") or [] if a.get("ok")]
        if not arts:
            raise SkipSection("no attention training artifact in the bundle")
        self.need_device()
        results = []
        for a in arts:
            res = {"length": a["length"], "heads": a["heads"], "head_dim": a["head_dim"]}
            res.update(self.worker_sides(["--attention-worker"], ["--train-artifact", a["artifact"]],
                                         f"attn-train-{a['length']}", 180, f"{a['length']} tokens, "))
            t, p = res.get("tcc", {}), res.get("torch", {})
            if t.get("losses") and p.get("losses"):
                res["max_rel_loss_difference"] = max(abs(x - y) / max(abs(y), 1e-30)
                                                     for x, y in zip(t["losses"], p["losses"]))
            ratio = t["ms_per_step"] / p["ms_per_step"] if t.get("ms_per_step") and p.get("ms_per_step") else None
            self.rows.append({"kind": "training", "name": f"attention layer train step, {a['length']} tokens, "
                              f"{a['heads']}x{a['head_dim']} heads, bf16, SGD", "timing": "h2h",
                              "tcc": t.get("ms_per_step"), "eager": p.get("ms_per_step"),
                              "metric": f"tcc/eager {ratio:.2f}" if ratio else "",
                              "check": t.get("error", "") or (f"max rel. loss diff {res['max_rel_loss_difference']:.1e}"
                                                              if "max_rel_loss_difference" in res else ""),
                              "note": p.get("error", "")})
            results.append(res)
        self.sections["attention_train"] = {"status": "ok", "results": results}

    # -- training (FashionMNIST artifact) ------------------------------------------------------------
    def training(self) -> None:
        tr = self.manifest.get("training") or {}
        if not tr.get("ok"):
            raise SkipSection(tr.get("error") or self.manifest.get("compile_error") or "no training artifact in the bundle")
        self.need_device()
        res = self.worker_sides(["--train-worker"], [], "train", 120, "")
        t, p = res.get("tcc", {}), res.get("torch", {})
        res["distributed"] = self.distributed_training(t)
        self.sections["training"] = {"status": "ok", "results": res}
        ratio = t.get("ms_per_step") / p.get("ms_per_step") if t.get("ms_per_step") and p.get("ms_per_step") else None
        self.rows.append({"kind": "training", "name": "fashion-mnist step (batch 64, Adam)", "timing": "h2h",
                          "tcc": t.get("ms_per_step"), "eager": p.get("ms_per_step"),
                          "metric": f"tcc/eager {ratio:.2f}" if ratio else "",
                          "check": t.get("error") or f"loss {t.get('first_loss', 0):.3f} -> {t.get('last_loss', 0):.3f}",
                          "note": p.get("error") or f"torch loss {p.get('first_loss', 0):.3f} -> {p.get('last_loss', 0):.3f}"})

    def distributed_training(self, single: dict) -> dict:
        """The bundle's dp=2 training artifacts as two ranks under mpirun on this GPU (two ranks on
        one GPU: collectives staged through MPI; NCCL refuses a GPU shared by ranks, tried once
        with TCC_CUDA_COLLECTIVES=nccl): rank 0's losses against the single-process run's."""
        variants = [v for v in (self.manifest.get("training") or {}).get("distributed", []) if v.get("ok")]
        if not variants:
            return {"skipped": "no distributed training artifacts in the bundle"}
        mpirun = shutil.which("mpirun")
        if not mpirun:
            return {"skipped": "mpirun not found (the bundle's Open MPI packages were not unpacked)"}
        runs = [(v["label"], v["artifact"], {}) for v in variants]
        runs.insert(1, ("dp2 again", variants[0]["artifact"], {}))
        runs.append(("dp2 nccl", variants[0]["artifact"], {"TCC_CUDA_COLLECTIVES": "nccl"}))
        out = {}
        for label, artifact, extra_env in runs:
            if self.left() < 30:
                out[label] = {"skipped": "session budget"}
                continue
            outf = self.work / ("train-" + re.sub(r"[^\w.-]+", "_", label) + ".json")
            env = dict(self.rt_env, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       TCC_COLLECTIVE_TIMEOUT="60", **extra_env)
            for stale in self.work.glob(outf.name + ".*"):
                stale.unlink()
            cmd = [mpirun, "-np", "2", "--oversubscribe", sys.executable, __file__, "--train-worker", "tcc",
                   "--device", self.device, "--bundle", str(self.bundle), "--train-artifact", artifact,
                   "--peer-out", str(outf)]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                   timeout=max(10, min(120, self.left() - 20)))
                with open(self.out / "tests.log", "a") as f:
                    f.write(f"==== dp=2 training {label} (exit {p.returncode})\n{p.stdout[-20000:]}{p.stderr[-20000:]}\n")
                ranks = [json.loads(Path(f"{outf}.{r}").read_text()) if Path(f"{outf}.{r}").exists() else None
                         for r in range(2)]
                r0 = ranks[0] or {"error": f"exit {p.returncode}: " +
                                  ((p.stderr.strip().splitlines() or [''])[-1][:300])}
            except subprocess.TimeoutExpired:
                r0 = {"error": "timed out"}
            if "losses" in r0 and "losses" in single:
                a, b = r0["losses"], single["losses"]
                rel = [abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)]
                r0["max_rel_loss_diff"] = max(rel)
                r0["first_step_off_1e-5"] = next((i for i, d in enumerate(rel) if d > 1e-5), None)
                r0["first_losses"] = [(round(x, 7), round(y, 7)) for x, y in zip(a[:6], b[:6])]
                # Per-step loss differences, and the state: replicas (rank 0 vs 1) and vs 1 process.
                r0["rel_loss_diff_by_step"] = [float(f"{d:.1e}") for d in rel[:40]]
                import numpy as np
                st = {}
                for k in SNAPSHOT_STEPS:
                    f0, f1 = Path(f"{outf}.state{k}.0.npy"), Path(f"{outf}.state{k}.1.npy")
                    fs = Path(f"{self.work / 'train-tcc.json'}.state{k}.single.npy")
                    if f0.exists() and f1.exists() and fs.exists():
                        x0, x1, xs = np.load(f0), np.load(f1), np.load(fs)
                        st[k] = {"rank0_vs_rank1": float(np.abs(x0 - x1).max()),
                                 "rank0_vs_single": float(np.abs(x0 - xs).max() / max(np.abs(xs).max(), 1e-30))}
                r0["state_diff_by_step"] = st
                if label == "dp2 again" and "losses" in out.get("dp2", {}):
                    r0["same_as_first_dp2_run"] = a == out["dp2"]["losses"]
            out[label] = r0
            self.log(f"   dp=2 {label}: { {k: v for k, v in r0.items() if k != 'losses'} }")
            self.rows.append({"kind": "training", "name": f"fashion-mnist dp=2, 2 ranks on 1 GPU: {label}",
                              "timing": "h2h", "tcc": r0.get("ms_per_step"),
                              "metric": (f"max rel loss diff vs 1 process {r0['max_rel_loss_diff']:.1e} "
                                         f"(first step off: {r0['first_step_off_1e-5']})"
                                         if "max_rel_loss_diff" in r0 else ""),
                              "check": r0.get("error") or f"loss {r0.get('first_loss', 0):.3f} -> {r0.get('last_loss', 0):.3f}",
                              "note": r0.get("device_name", "")})
        for r in out.values():
            r.pop("losses", None)
        single.pop("losses", None)
        return out

    def model_rows(self) -> None:
        res = getattr(self, "model_results", {}) or {}
        ratios_c, ratios_g = [], []
        for name, r in res.items():
            if r.get("status") != "ok":
                self.rows.append({"kind": "model", "name": name, "check": r.get("status")})
                continue
            peers = r.get("peers", {})

            def h2h(mode):
                p = peers.get(mode)
                if not p:
                    return None
                return p.get("h2h_ms") if not p.get("error") else None
            compile_ms = h2h("default")
            best_tcc = min([v for v in (r.get("tcc_ms"), r.get("tcc_graph_ms")) if v] or [None]) if r.get("tcc_ms") else None
            ratio = best_tcc / compile_ms if best_tcc and compile_ms else None
            if ratio:
                ratios_c.append(ratio)
            notes = []
            for mode in ("eager", "ort", "default", "max-autotune"):
                p = peers.get(mode)
                if p and p.get("error"):
                    notes.append(f"{mode}: {p['error'][:120]}")
                elif p and p.get("dev_ms") is not None:
                    notes.append(f"{mode} dev {fmt_ms(p['dev_ms'])}")
                if p and p.get("max_abs_err") is not None and p.get("max_abs_err") > 1e-2:
                    notes.append(f"{mode} differs from ORT CPU by {p['max_abs_err']:.1e}")
            if r.get("tcc_device_ms") is not None:
                notes.insert(0, f"tcc dev {fmt_ms(r['tcc_device_ms'])} ({r.get('kernels')} kernels)")
            elif r.get("device_note"):
                notes.insert(0, f"tcc dev n/a: {r['device_note']}")
            if r.get("tcc_graph_error"):
                notes.insert(0, f"tcc --cuda-graph failed: {r['tcc_graph_error'][:150]}")
            if r.get("kernel_summary"):
                notes.append(r["kernel_summary"])
            self.rows.append({"kind": "model", "name": name, "timing": "h2h", "tcc": r.get("tcc_ms"),
                              "graph": r.get("tcc_graph_ms"), "eager": h2h("eager"), "compile": compile_ms,
                              "autotune": h2h("max-autotune"), "ort": h2h("ort"),
                              "metric": f"tcc/compile {ratio:.2f}" if ratio else "",
                              "check": r.get("check"), "note": "; ".join(notes)})
        if ratios_c:
            self.info["geomean_tcc_over_compile"] = math.exp(sum(map(math.log, ratios_c)) / len(ratios_c))

    # -- report ----------------------------------------------------------------------------------------
    def report(self) -> None:
        cols = [("kind", "kind"), ("name", "name"), ("timing", "timing"), ("tcc", "tcc ms"),
                ("graph", "tcc graph ms"), ("eager", "eager ms"), ("compile", "compile ms"),
                ("autotune", "max-autotune ms"), ("ort", "ORT ms"), ("metric", "metric"), ("check", "check"),
                ("note", "note")]
        def cell(row, key):
            v = row.get(key)
            if isinstance(v, float) or (v is None and key in ("tcc", "graph", "eager", "compile", "autotune", "ort")):
                return fmt_ms(v)
            return str(v or "")
        table = ["| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
        for row in self.rows:
            table.append("| " + " | ".join(cell(row, k).replace("|", "/") for k, _ in cols) + " |")
        head = [f"# GPU session {self.info['date']} on {self.info.get('gpu') or self.device_tag}", ""]
        for k in ("time_utc", "host", "cpu", "gpu", "nvidia_smi", "tccrt_device", "nccl_library", "torch", "onnxruntime", "ort_providers",
                  "ncu", "copy_bandwidth_gbs", "geomean_tcc_over_compile"):
            if k in self.info:
                v = self.info[k]
                head.append(f"- {k}: {v:.3f}" if isinstance(v, float) else f"- {k}: {v}")
        head.append(f"- bundle: {self.info['bundle']}")
        head.append("")
        head.append("Sections:")
        for name, s in self.sections.items():
            head.append(f"- {name}: {s['status']} ({s.get('seconds', 0)} s)")
        head += ["", "Timing: `h2h` = host-to-host per run (inputs copied in, outputs copied out, synchronous) for "
                 "every peer; `device` = tcc's summed kernel time of one run (ncu) vs torch's CUDA-event time. "
                 "micro metric: bytes moved / time as a fraction of the measured copy bandwidth (memory), or "
                 "cuBLAS/cuDNN-alone time / tcc time (gemm, conv), or SDPA-alone time (flash, or memory-efficient "
                 "with a bias; 16-bit q, k, v cast beforehand) / tcc time (attention: its attention kernel's alone "
                 "where ncu names one). tcc/compile < 1: tcc faster.", ""]
        if any(r.get("kind") == "cpu-ort" for r in self.rows):
            head[-1:] = ["", "`cpu-ort` rows: tcc's CPU artifact vs onnxruntime's CPU EP at T threads, wall time per run "
                         "(the cpu_vs_ort section's *-cpu-vs-ort.md has the method); tcc/ORT < 1: tcc faster.", ""]
        text = "\n".join(head + table) + "\n"
        print("\n" + text, flush=True)
        stem = f"{self.info['date']}-{self.device_tag}-gpu"
        (self.out / f"{stem}.md").write_text(text)
        (self.out / f"{stem}.json").write_text(json.dumps(
            {"info": self.info, "sections": self.sections, "rows": self.rows, "manifest": self.manifest},
            indent=1, default=str) + "\n")
        self.log(f"wrote {self.out / (stem + '.md')} and .json")


class SkipSection(Exception):
    pass


# ---- peers (a separate process per mode) ---------------------------------------------------------
def peer_main(args) -> int:
    import numpy as np
    import onnx
    from onnx import numpy_helper
    import make_models
    models = make_models.all_models()
    dev = args.device
    out = open(args.peer_out, "w")
    for name in args.models:
        m = models[name]
        rec = {"model": name, "mode": args.mode}
        try:
            feeds = [numpy_helper.to_array(onnx.load_tensor(str(p))) for p in m.input_paths()]
            refs = [numpy_helper.to_array(onnx.load_tensor(str(p))) for p in m.output_paths()]
            iters = 50 if dev == "cuda" else 5
            if args.mode == "ort":
                rec.update(run_ort(m, feeds, refs, dev, iters))
            else:
                rec.update(run_torch(m, feeds, refs, dev, args.mode, iters))
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        out.write(json.dumps(rec) + "\n")
        out.flush()
        print(f"{name} {args.mode}: {rec}", file=sys.stderr, flush=True)
    return 0


# The sections main() runs, in this order (after the probe); cpu_vs_ort only with a CPU bundle
# (bundle --cpu-check) or when named.
SECTIONS = ("gpu_tests", "python", "conformance", "models", "symbolic", "cpu_vs_ort", "training", "attention_train",
            "distributed_cpu",
            "peers", "micro", "autotune")
# cpu_vs_ort: rounds per model and thread count, and each round's timed block (from ORT's latency).
CPU_ROUNDS, CPU_BLOCK_S, CPU_MIN_ITERS, CPU_MAX_ITERS = 3, 0.3, 10, 400

TRAIN_STEPS, TRAIN_WARMUP, TRAIN_BATCH = 200, 20, 64
# attention_train: timed steps after warm-up ones, over ATTN_SAMPLES samples; the losses of the
# first ATTN_SAMPLES steps are compared.
ATTN_STEPS, ATTN_WARMUP, ATTN_SAMPLES, ATTN_LR = 20, 3, 4, 1e-2
SNAPSHOT_STEPS = (1, 2, 4, 8, 12, 15, 16, 17, 24, 40)  # state saved after these steps, to compare runs


def find_nccl() -> str:
    """libnccl.so.2 for libtccrt's CUDA collectives: the CUDA toolkit's, else a Python package's
    (nvidia-nccl, as PyTorch's wheels install it); "" if none."""
    candidates = [Path(p) / "libnccl.so.2" for p in ("/usr/local/cuda/lib64", "/usr/local/cuda/lib",
                                                     "/usr/lib/x86_64-linux-gnu")]
    try:
        import nvidia.nccl  # type: ignore
        for base in nvidia.nccl.__path__:
            candidates.append(Path(base) / "lib" / "libnccl.so.2")
    except Exception:
        pass
    for c in candidates:
        if c.exists():
            return str(c)
    return ""


def train_batches(n: int, seed: int = 0):
    """Random FashionMNIST-shaped batches (the timing does not depend on the data)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    return [(rng.uniform(0, 1, (TRAIN_BATCH, 1, 28, 28)).astype(np.float32),
             rng.integers(0, 10, TRAIN_BATCH).astype(np.int64)) for _ in range(n)]


def train_worker_tcc(args) -> dict:
    """Train steps through libtccrt's trainer API (bench/tccrt_trainer.py; libtccrt found on
    LD_LIBRARY_PATH). A distributed artifact (under mpirun): this rank feeds its block of each
    global batch."""
    import numpy as np
    sys.path.insert(0, str(ROOT / "bench"))
    from tccrt_trainer import Trainer
    t = Trainer(str(Path(args.bundle) / "train" / (args.train_artifact or "train.tcc")))
    batches = [t.local_batch(images, labels) for images, labels in train_batches(8)]
    losses, ts = [], []
    for step in range(TRAIN_WARMUP + TRAIN_STEPS):
        t0 = time.perf_counter()
        losses.append(t.step(batches[step % len(batches)], 1e-3))
        ts.append((time.perf_counter() - t0) * 1e3)
        if step + 1 in SNAPSHOT_STEPS:  # the state, for comparing runs (saved beside --peer-out)
            rank = os.environ.get("OMPI_COMM_WORLD_RANK", "single")
            np.save(f"{args.peer_out}.state{step + 1}.{rank}.npy", t.float_state())
    return {"ms_per_step": statistics.median(ts[TRAIN_WARMUP:]), "first_loss": losses[0], "last_loss": losses[-1],
            "device_name": t.device_name, "steps": TRAIN_STEPS, "rank": t.rank, "world_size": t.world_size,
            "losses": losses}


def train_worker_torch(args) -> dict:
    """The same steps in PyTorch eager: the example's MLP from its ONNX initializers, Adam, mean
    cross-entropy, the batch copied from the host and the loss read back every step."""
    import torch
    sys.path.insert(0, str(ROOT / "test" / "training"))
    from torch_reference import mlp_from_onnx
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = args.device
    model = mlp_from_onnx(str(ROOT / "examples" / "fashion-mnist" / "model.onnx")).to(dev).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    lossf = torch.nn.CrossEntropyLoss()
    batches = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in train_batches(8)]
    losses, ts = [], []
    for step in range(TRAIN_WARMUP + TRAIN_STEPS):
        x, y = batches[step % len(batches)]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(x.to(dev)), y.to(dev))
        loss.backward()
        opt.step()
        losses.append(loss.item())
        ts.append((time.perf_counter() - t0) * 1e3)
    return {"ms_per_step": statistics.median(ts[TRAIN_WARMUP:]), "first_loss": losses[0], "last_loss": losses[-1],
            "steps": TRAIN_STEPS}


def attention_run(args):
    """The attention_train section's artifact description (from the bundle's manifest)."""
    manifest = json.loads((Path(args.bundle) / "manifest.json").read_text())
    return next(a for a in manifest["attention_train"] if a["artifact"] == args.train_artifact)


def attention_worker_tcc(args) -> dict:
    """ATTN_STEPS train steps of the attention layer through libtccrt's trainer API."""
    sys.path.insert(0, str(ROOT / "bench"))
    from attention_layer import layer_data
    from tccrt_trainer import Trainer
    a = attention_run(args)
    t = Trainer(str(Path(args.bundle) / "attention-train" / a["artifact"]))
    xs, ys = layer_data(a["length"], ATTN_SAMPLES, a["seed"], a["heads"])["train"]
    batches = [t.local_batch(xs[i:i + 1], ys[i:i + 1]) for i in range(ATTN_SAMPLES)]
    losses, ts = [], []
    for step in range(ATTN_WARMUP + ATTN_STEPS):
        t0 = time.perf_counter()
        losses.append(t.step(batches[step % ATTN_SAMPLES], ATTN_LR))
        ts.append((time.perf_counter() - t0) * 1e3)
    return {"ms_per_step": statistics.median(ts[ATTN_WARMUP:]), "losses": losses[:ATTN_SAMPLES],
            "device_name": t.device_name}


def attention_worker_torch(args) -> dict:
    """The same steps in PyTorch eager: SDPA (is_causal, flash on a GPU) under autocast(bf16),
    f32 parameters, SGD, mse; the batch copied from the host and the loss read back every step."""
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, str(ROOT / "bench"))
    from attention_layer import HEAD_DIM, layer_data, layer_weights
    a = attention_run(args)
    dev, heads, L = args.device, a["heads"], a["length"]
    width = heads * HEAD_DIM
    w = layer_weights(a["seed"], heads)
    params = [torch.nn.Parameter(torch.from_numpy(w[n]).to(dev)) for n in ("Wq", "Wk", "Wv", "Wo")]
    opt = torch.optim.SGD(params, lr=ATTN_LR)
    xs, ys = layer_data(L, ATTN_SAMPLES, a["seed"], heads)["train"]
    batches = [(torch.from_numpy(xs[i:i + 1]), torch.from_numpy(ys[i:i + 1])) for i in range(ATTN_SAMPLES)]

    def split(t):
        return t.view(1, L, heads, HEAD_DIM).transpose(1, 2)

    losses, ts = [], []
    for step in range(ATTN_WARMUP + ATTN_STEPS):
        x, y = batches[step % ATTN_SAMPLES]
        t0 = time.perf_counter()
        x, y = x.to(dev), y.to(dev)
        with torch.autocast(dev, dtype=torch.bfloat16):
            q, k, v = split(x @ params[0]), split(x @ params[1]), split(x @ params[2])
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            out = (o.transpose(1, 2).reshape(1, L, width) @ params[3]).float()
        loss = F.mse_loss(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        ts.append((time.perf_counter() - t0) * 1e3)
    return {"ms_per_step": statistics.median(ts[ATTN_WARMUP:]), "losses": losses[:ATTN_SAMPLES],
            "torch": torch.__version__}


def max_abs_err(outs, refs) -> float:
    import numpy as np
    return max(float(np.abs(np.asarray(o, dtype=np.float64) - r).max()) if r.size else 0.0 for o, r in zip(outs, refs))


def run_ort(m, feeds, refs, dev, iters) -> dict:
    import onnxruntime as ort
    provider = "CUDAExecutionProvider" if dev == "cuda" else "CPUExecutionProvider"
    if provider not in ort.get_available_providers():
        return {"error": f"onnxruntime {ort.__version__} has no {provider} (providers: {', '.join(ort.get_available_providers())})"}
    sess = ort.InferenceSession(str(m.onnx_path), providers=[provider])
    if sess.get_providers()[0] != provider:
        return {"error": f"onnxruntime fell back to {sess.get_providers()}"}
    names = [i.name for i in sess.get_inputs()]
    feed = dict(zip(names, feeds))
    outs = sess.run(None, feed)
    for _ in range(5):
        sess.run(None, feed)
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run(None, feed)
        ts.append((time.perf_counter() - t0) * 1e3)
    return {"h2h_ms": statistics.median(ts), "max_abs_err": max_abs_err(outs, refs), "provider": provider}


def run_torch(m, feeds, refs, dev, mode, iters) -> dict:
    import onnx
    import torch
    from onnx_torch import OnnxTorch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    f = OnnxTorch(onnx.load(str(m.onnx_path)), dev)
    fn = f if mode == "eager" else torch.compile(f, mode=mode)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    rec = {}
    with torch.inference_mode():
        xs = [torch.from_numpy(a).to(dev) for a in feeds]
        t0 = time.perf_counter()
        outs = fn(*xs)
        sync()
        rec["first_call_s"] = round(time.perf_counter() - t0, 2)
        outs = outs if isinstance(outs, tuple) else (outs,)
        rec["max_abs_err"] = max_abs_err([o.cpu().numpy() for o in outs], refs)

        def h2h():
            ys = fn(*[torch.from_numpy(a).to(dev) for a in feeds])
            ys = ys if isinstance(ys, tuple) else (ys,)
            return [y.cpu() for y in ys]
        for _ in range(10):
            h2h()
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            h2h()
            ts.append((time.perf_counter() - t0) * 1e3)
        rec["h2h_ms"] = statistics.median(ts)
        if dev == "cuda":
            ds = []
            for _ in range(iters):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn(*xs)
                e.record()
                e.synchronize()
                ds.append(s.elapsed_time(e))
            rec["dev_ms"] = statistics.median(ds)
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", type=Path, default=ROOT / ".gpu")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "/tmp/tcc-gpu-session/out"),
                    help="where the report goes ($OUT, else /tmp/tcc-gpu-session/out)")
    ap.add_argument("--work", default="/tmp/tcc-gpu-session", help="scratch space (inputs, references)")
    ap.add_argument("--budget-s", type=float, default=480,
                    help="the whole session, in seconds (the device tool stops a call at 600)")
    ap.add_argument("--no-ncu", action="store_true", help="do not measure device times with Nsight Compute")
    ap.add_argument("--self-test", action="store_true", help="check the output parsers on fixtures and exit")
    ap.add_argument("--models-dir", type=Path, default=None,
                    help="where make_models.py regenerates the bench models (default bench/models/generated)")
    ap.add_argument("--sections", nargs="*", default=None,
                    metavar="SECTION",
                    help="run only these (in the session's order): gpu_tests python conformance models cpu_vs_ort "
                         "training attention_train distributed_cpu peers micro autotune (the probe always runs; "
                         "attention_train: a bf16 causal attention layer's train step against PyTorch SDPA; cpu_vs_ort: tcc's CPU "
                         "artifacts vs onnxruntime's CPU EP at 1 and N threads, a --cpu-check bundle's default; "
                         "distributed_cpu: bench/distributed_cpu.py, tcc dp/ZeRO-3 vs torch DDP/FSDP on the host CPU)")
    ap.add_argument("--cpu-threads", nargs="+", type=int, default=None, metavar="T",
                    help="cpu_vs_ort section: thread counts (default: 1, the physical cores and all usable CPUs)")
    ap.add_argument("--micro", nargs="+", default=None, metavar="NAME",
                    help="micro section: only the microbenchmarks matching these names or shell patterns, e.g. "
                         "--micro 'attn_*' (bench/gpu/make_micro.py --list names them)")
    # Internal: one peer mode / training side in its own process.
    ap.add_argument("--peer", choices=["eager", "ort", "default", "max-autotune"], help=argparse.SUPPRESS)
    ap.add_argument("--train-worker", choices=["tcc", "torch"], help=argparse.SUPPRESS)
    ap.add_argument("--attention-worker", choices=["tcc", "torch"], help=argparse.SUPPRESS)
    ap.add_argument("--train-artifact", help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    ap.add_argument("--peer-out", help=argparse.SUPPRESS)
    ap.add_argument("--models", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    unknown = sorted(set(args.sections or ()) - set(SECTIONS))
    if unknown:
        ap.error(f"--sections: no section {', '.join(unknown)} (there are: {' '.join(SECTIONS)})")
    if args.self_test:
        return self_test()
    if args.models_dir:
        import make_models
        make_models.GENERATED = args.models_dir.resolve()
        make_models.FLOPS_FILE = make_models.GENERATED / "flops.json"
    if args.peer:
        args.mode = args.peer
        return peer_main(args)
    if args.train_worker or args.attention_worker:
        if args.attention_worker:
            fn = attention_worker_tcc if args.attention_worker == "tcc" else attention_worker_torch
        else:
            fn = train_worker_tcc if args.train_worker == "tcc" else train_worker_torch
        try:
            res = fn(args)
        except Exception as e:
            res = {"error": f"{type(e).__name__}: {e}"[:400]}
        rank = os.environ.get("OMPI_COMM_WORLD_RANK")
        Path(args.peer_out + (f".{rank}" if rank else "")).write_text(json.dumps(res))
        return 0
    if not (args.bundle / "manifest.json").exists():
        print(f"device_session: {args.bundle}/manifest.json not found: make the bundle first "
              f"(bash scripts/gpu-session.sh bundle) and carry it ([\".gpu\"])", file=sys.stderr)
        return 1
    s = Session(args)
    want = set(args.sections) if args.sections else None
    s.section("probe", s.probe, need_s=0)

    def maybe(name, fn, need):
        if want is None or name in want:
            s.section(name, fn, need)
    # In order of importance: what is left for later sections shrinks as the budget is spent.
    maybe("gpu_tests", s.gpu_tests, 60)
    maybe("python", s.python, 20)
    maybe("conformance", s.conformance, 60)
    maybe("models", s.models, 60)
    maybe("symbolic", s.symbolic, 30)
    if s.device == "cpu" or (want and "cpu_vs_ort" in want):
        maybe("cpu_vs_ort", s.cpu_vs_ort, 30)
    maybe("training", s.training, 40)
    maybe("attention_train", s.attention_train, 40)
    maybe("distributed_cpu", s.distributed_cpu, 60)
    maybe("peers", s.peers, 40)
    maybe("micro", s.micro, 90)
    maybe("autotune", s.autotune, 60)
    s.model_rows()
    s.report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
