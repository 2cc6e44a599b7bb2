#!/usr/bin/env python3
"""tcc vs onnxruntime on the CPU, side by side in one run, reported as ratios.

Interpreter: the `python3` on PATH (pip install -r bench/requirements.txt). For each model
(bench/models/make_models.py lists them) this measures, on the same machine and inputs:
  - tcc: compile time cold (fresh TCC_CACHE_DIR) and warm (second compile, cache hit) from
    `tcc compile --report`; latency from `tcc bench --json --threads N`; outputs from `tcc run`
    of the compiled artifact, checked against onnxruntime's;
  - onnxruntime (CPUExecutionProvider, intra_op_num_threads=N, inter_op_num_threads=1, graph
    optimizations ALL): session creation time and the wall time of each sess.run().
Writes bench/results/<date>-cpu-<N>t.md and .json per thread count, and prints the tables and
the geometric mean of the tcc/ORT latency ratios (< 1: tcc faster).

  python3 bench/run_cpu.py                          # all models, 1 and 2 threads
  python3 bench/run_cpu.py --threads 1 --iters 5 --models mlp transformer_block
  python3 bench/run_cpu.py --tcc bench/fake_tcc.py --out-dir /tmp/r   # test the script itself
  python3 bench/run_cpu.py --precision bf16         # also tcc --precision bf16, same rounds

With --precision P, tcc also compiles each model with `--precision P` and times that artifact in
the same rounds; the table gains its latency, its ratio to tcc's f32 build and to ORT (f32), and
its output error against ORT's f32 outputs, max|Δ|/max|ref|, judged against PRECISION_TOL[P].
Results go to <date>-cpu-<N>t-<P>.md/.json.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH / "models"))
import make_models  # noqa: E402

RTOL = 1e-3  # |tcc - ort| <= RTOL*|ort| + ATOL_REL*max|ort| elementwise
ATOL_REL = 1e-4
# --precision builds: max|tcc - ort| / max|ort| over each output (16-bit products: bf16 keeps 8
# significant bits, f16 11; errors grow with depth and k).
PRECISION_TOL = {"bf16": 5e-2, "fp16": 1e-2}


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------
def read_tensor(path: Path) -> tuple[str, np.ndarray]:
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return t.name, numpy_helper.to_array(t)


def first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line[:200]
    return "(no output)"


def error_line(text: str) -> str:
    """The line of tcc's stderr that names the error (progress lines come first), else the last."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for l in lines:
        if "error" in l.lower():
            return l[:240]
    return lines[-1][:240] if lines else "(no output)"


def tcc_cmd(tcc: str) -> list[str]:
    return [sys.executable, tcc] if tcc.endswith(".py") else [tcc]


def run_proc(cmd: list[str], timeout: float, env: dict | None = None) -> tuple[int, str, str, float]:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout, p.stderr, time.perf_counter() - t0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out, f"timed out after {timeout:.0f} s", time.perf_counter() - t0
    except OSError as e:
        return 127, "", f"cannot run {cmd[0]}: {e}", time.perf_counter() - t0


class TccError(Exception):
    pass


def parse_json_output(stdout: str) -> dict:
    """The whole stdout as JSON, else the last line that is a JSON object."""
    s = stdout.strip()
    try:
        obj = json.loads(s)
        if isinstance(obj, dict):
            return obj
    except ValueError:
        pass
    for line in reversed(s.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise TccError(f"no JSON object in tcc bench output: {first_line(stdout)}")


def count(v) -> int | None:
    if v is None:
        return None
    return len(v) if isinstance(v, (list, dict)) else int(v)


def machine_info() -> dict:
    cpu = platform.processor() or "?"
    try:
        # The model name alone can be vague on VMs ("AMD EPYC" for Zen 4 and Zen 5 alike):
        # family and model number name the microarchitecture (AMD family 25: Zen 3/4, 26: Zen 5).
        fields = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
        if "model name" in fields:
            cpu = fields["model name"]
        if "cpu family" in fields and "model" in fields:
            cpu += f" (cpu family {fields['cpu family']}, model {fields['model']})"
    except OSError:
        pass
    flags = ""
    try:
        txt = Path("/proc/cpuinfo").read_text()
        fl = next((l.split(":", 1)[1].split() for l in txt.splitlines() if l.startswith("flags")), [])
        flags = " ".join(f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile") if f in fl)
    except (OSError, StopIteration):
        pass
    mem = "?"
    try:
        kb = int(next(l for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")).split()[1])
        mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    def git(*a):
        try:
            return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    import onnxruntime as ort
    return {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": cpu,
        "cpu_flags": flags,
        "cores": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{sys.executable} {platform.python_version()}",
        "onnxruntime": ort.__version__,
        "numpy": np.__version__,
        "onnx": onnx.__version__,
        "git_commit": git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "loadavg_start": os.getloadavg()[0],
    }


# ------------------------------------------------------------------------------------------
# onnxruntime
# ------------------------------------------------------------------------------------------
def ort_session(model_path: Path, threads: int):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    t0 = time.perf_counter()
    sess = ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])
    return sess, time.perf_counter() - t0


def ort_feeds(sess, inputs: list[Path]) -> dict:
    metas = sess.get_inputs()
    if len(inputs) != len(metas):
        raise RuntimeError(f"{len(inputs)} input files for {len(metas)} graph inputs")
    return {m.name: read_tensor(p)[1] for m, p in zip(metas, inputs)}


def time_runs(fn, warmup: int, iters: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def stats(times: list[float]) -> dict:
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
            "mean_ms": statistics.fmean(times), "iters": len(times)}


def ort_outputs(model) -> dict:
    sess, _ = ort_session(model.onnx_path, 1)
    return {m.name: o for m, o in zip(sess.get_outputs(), sess.run(None, ort_feeds(sess, model.input_paths())))}


class OrtRunner:
    """One session per thread count, kept across rounds."""

    def __init__(self, model, threads: int):
        self.sess, self.init_seconds = ort_session(model.onnx_path, threads)
        self.feeds = ort_feeds(self.sess, model.input_paths())

    def block(self, warmup: int, iters: int) -> dict:
        return stats(time_runs(lambda: self.sess.run(None, self.feeds), warmup, iters))


def combine(blocks: list[dict]) -> dict:
    """Rounds of timing blocks -> one result: median of the round medians, min of mins, max of maxes."""
    return {"median_ms": statistics.median(b["median_ms"] for b in blocks),
            "min_ms": min(b["min_ms"] for b in blocks), "max_ms": max(b["max_ms"] for b in blocks),
            "iters": sum(int(b.get("iters", 0)) for b in blocks), "rounds": blocks}


class CpuMeter:
    """How busy the machine was with other processes while we measured: (all non-idle CPU time
    from /proc/stat - this process's and its children's CPU time) / (wall time * cores)."""

    def __init__(self):
        self.t0, self.busy0, self.own0 = time.perf_counter(), self._busy(), self._own()

    @staticmethod
    def _busy() -> float:
        try:
            f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
            return (sum(f) - f[3] - (f[4] if len(f) > 4 else 0)) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError):
            return float("nan")

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def others(self) -> float:
        wall = time.perf_counter() - self.t0
        other = (self._busy() - self.busy0) - (self._own() - self.own0)
        return max(0.0, other / (wall * (os.cpu_count() or 1))) if wall > 0 else float("nan")


# ------------------------------------------------------------------------------------------
# tcc
# ------------------------------------------------------------------------------------------
class Tcc:
    def __init__(self, path: str, timeout: float, workdir: Path):
        self.cmd = tcc_cmd(path)
        self.timeout = timeout
        self.workdir = workdir
        self.cache = workdir / "cache"  # one fresh cache per run of this script

    def env(self) -> dict:
        e = dict(os.environ)
        e["TCC_CACHE_DIR"] = str(self.cache)
        return e

    def call(self, args: list[str], what: str) -> tuple[str, float]:
        rc, out, err, wall = run_proc(self.cmd + args, self.timeout, self.env())
        if rc != 0:
            raise TccError(f"{what} (exit {rc}): {error_line(err or out)}")
        return out, wall

    def compile(self, model, tag: str, precision: str | None = None) -> dict:
        d = self.workdir / model.name
        d.mkdir(parents=True, exist_ok=True)
        suffix = f"-{precision}" if precision else ""
        art, rep = d / f"model{suffix}.tcc", d / f"report-{tag}{suffix}.json"
        flags = ["--precision", precision] if precision else []
        _, wall = self.call(["compile", str(model.onnx_path), "-o", str(art), "--report", str(rep)] + flags,
                            f"tcc compile ({tag}{suffix})")
        try:
            report = json.loads(rep.read_text())
        except (OSError, ValueError) as e:
            raise TccError(f"tcc compile ({tag}): unreadable report: {e}")
        report["process_seconds"] = wall
        report["artifact"] = str(art)
        return report

    def run_outputs(self, model, artifact: str) -> list[np.ndarray]:
        out_dir = self.workdir / model.name / "outputs"
        shutil.rmtree(out_dir, ignore_errors=True)
        self.call(["run", artifact, "--device", "cpu", "--threads", "1", "--inputs", *map(str, model.input_paths()),
                   "--out-dir", str(out_dir)], "tcc run")
        files = sorted(out_dir.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        if not files:
            raise TccError("tcc run wrote no output_<i>.pb")
        return [read_tensor(f)[1] for f in files]

    def bench(self, model, threads: int, warmup: int, iters: int, artifact: str | None = None) -> dict:
        """Times the compiled artifact when there is one (no recompile per round), else the model."""
        target = artifact or str(model.onnx_path)
        out, wall = self.call(["bench", target, "--device", "cpu", "--threads", str(threads),
                               "--warmup", str(warmup), "--iters", str(iters), "--json",
                               "--inputs", *map(str, model.input_paths())], "tcc bench")
        res = parse_json_output(out)
        missing = [k for k in ("median_ms", "min_ms", "max_ms") if k not in res]
        if missing:
            raise TccError(f"tcc bench --json lacks {', '.join(missing)}")
        res["process_seconds"] = wall
        return res


def compare(got: list[np.ndarray], ref: dict[str, np.ndarray], normwise: float | None = None) -> dict:
    """Elementwise (RTOL, ATOL_REL), or with `normwise` max|Δ|/max|ref| <= normwise per output."""
    refs = list(ref.values())
    if len(got) != len(refs):
        return {"ok": False, "detail": f"{len(got)} outputs, ORT has {len(refs)}"}
    worst, details, ok = 0.0, [], True
    for (name, r), g in zip(ref.items(), got):
        if g.shape != r.shape:
            ok = False
            details.append(f"{name}: shape {list(g.shape)} vs {list(r.shape)}")
            continue
        if r.dtype.kind not in "fc":
            if not np.array_equal(g, r):
                ok = False
                details.append(f"{name}: {int(np.sum(g != r))} elements differ")
            continue
        g64, r64 = g.astype(np.float64), r.astype(np.float64)
        scale = float(np.max(np.abs(r64))) if r64.size else 0.0
        err = np.abs(g64 - r64)
        rel = float(np.max(err) / scale) if scale > 0 and err.size else 0.0
        if normwise is not None:
            bad = np.array([rel > normwise])
        else:
            bad = ~(err <= RTOL * np.abs(r64) + ATOL_REL * max(scale, 1e-30))
        worst = max(worst, rel)
        if bad.any() or not np.isfinite(g64).all():
            ok = False
            details.append(f"{name}: {int(bad.sum())}/{bad.size} elements off, max|err|/max|ref| {rel:.2e}")
    return {"ok": ok, "max_rel_err": worst, "detail": "; ".join(details)}


# ------------------------------------------------------------------------------------------
# the run
# ------------------------------------------------------------------------------------------
def wait_quiet(limit_s: float, threshold: float = 0.15) -> float | None:
    """Waits (up to limit_s) until other processes use under `threshold` of the machine over a
    2 s sample. Returns the seconds waited, or None if it never got quiet."""
    if limit_s <= 0:
        return 0.0
    t0 = time.perf_counter()
    while True:
        m = CpuMeter()
        time.sleep(2.0)
        busy = m.others()
        waited = time.perf_counter() - t0
        if busy < threshold:
            return waited
        if waited >= limit_s:
            print(f"   still {busy:.0%} busy after {waited:.0f} s: measuring anyway", flush=True)
            return None


def bench_model(model, threads_list, args, tcc: Tcc | None) -> dict:
    row = {"model": model.name, "kind": model.kind, "path": str(model.onnx_path),
           "gflop": model.flops / 1e9 if model.flops else None,
           "tcc": {"compile": {}, "by_threads": {}}, "ort": {"by_threads": {}}}
    print(f"== {model.name}", flush=True)
    try:
        ref = ort_outputs(model)
    except Exception as e:  # noqa: BLE001
        ref = None
        row["ort"]["error"] = first_line(str(e))
        print(f"   ort: FAILED {row['ort']['error']}", flush=True)
    tc = row["tcc"]
    tcc_ok = tcc is not None
    if tcc is not None:
        try:
            tc["compile"]["cold"] = tcc.compile(model, "cold")
            tc["compile"]["warm"] = tcc.compile(model, "warm")
            c, w = tc["compile"]["cold"], tc["compile"]["warm"]
            print(f"   tcc compile: cold {c.get('compile_seconds', float('nan')):.2f} s, "
                  f"warm {w.get('compile_seconds', float('nan')):.2f} s", flush=True)
            if count(c.get("cache_hits")):
                tc["compile"]["note"] = "cold compile hit the cache (TCC_CACHE_DIR ignored?)"
        except TccError as e:
            tc["error"] = str(e)
            tcc_ok = False
            print(f"   tcc: FAILED {e}", flush=True)
        if tcc_ok and ref is not None:
            try:
                tc["check"] = compare(tcc.run_outputs(model, tc["compile"]["warm"]["artifact"]), ref)
            except TccError as e:
                tc["check"] = {"ok": False, "detail": str(e)}
            print(f"   tcc outputs vs ORT: {'ok' if tc['check']['ok'] else 'MISMATCH ' + tc['check']['detail']}",
                  flush=True)
    p = args.precision
    lp = {"by_threads": {}} if tcc_ok and p else None
    if lp is not None:
        row["tcc_precision"] = lp
        try:
            lp["compile"] = tcc.compile(model, "warm", p)
            if ref is not None:
                lp["check"] = compare(tcc.run_outputs(model, lp["compile"]["artifact"]), ref, PRECISION_TOL[p])
                print(f"   tcc {p} outputs vs ORT f32: max|err|/max|ref| {lp['check'].get('max_rel_err', float('nan')):.1e}"
                      f"{'' if lp['check']['ok'] else ' MISMATCH ' + lp['check']['detail']}", flush=True)
        except TccError as e:
            lp["error"] = str(e)
            print(f"   tcc {p}: FAILED {e}", flush=True)
    per_round = max(1, args.iters // args.rounds)
    for t in threads_list:
        waited = wait_quiet(args.wait_quiet)
        if waited and waited > 3:
            print(f"   waited {waited:.0f} s for a quiet machine", flush=True)
        meter = CpuMeter()
        ort_blocks, tcc_blocks, ort = [], [], None
        if ref is not None:
            try:
                ort = OrtRunner(model, t)
                row["ort"]["by_threads"][t] = {"init_seconds": ort.init_seconds}
            except Exception as e:  # noqa: BLE001
                row["ort"]["by_threads"][t] = {"error": first_line(str(e))}
        tcc_err, lp_blocks, lp_err = None, [], None
        for _ in range(args.rounds):  # alternate the peers so that both see the same load
            if ort is not None:
                ort_blocks.append(ort.block(args.warmup, per_round))
            if tcc_ok and tcc_err is None:
                try:
                    tcc_blocks.append(tcc.bench(model, t, args.warmup, per_round,
                                                tc["compile"].get("warm", {}).get("artifact")))
                except TccError as e:
                    tcc_err = str(e)
            if lp is not None and "error" not in lp and lp_err is None:
                try:
                    lp_blocks.append(tcc.bench(model, t, args.warmup, per_round, lp["compile"]["artifact"]))
                except TccError as e:
                    lp_err = str(e)
        if lp is not None and (lp_blocks or lp_err):
            lp["by_threads"][t] = {"error": lp_err} if lp_err else combine(lp_blocks)
            if not lp_err:
                print(f"   tcc {p} {t}t: median {lp['by_threads'][t]['median_ms']:.3f} ms", flush=True)
        others = meter.others()
        if ort_blocks:
            row["ort"]["by_threads"][t].update(combine(ort_blocks))
            r = row["ort"]["by_threads"][t]
            print(f"   ort  {t}t: median {r['median_ms']:.3f} ms (init {r['init_seconds']:.2f} s)", flush=True)
        if tcc_err is not None:
            tc["by_threads"][t] = {"error": tcc_err}
            print(f"   tcc  {t}t: FAILED {tcc_err}", flush=True)
        elif tcc_blocks:
            tc["by_threads"][t] = combine(tcc_blocks)
            print(f"   tcc  {t}t: median {tc['by_threads'][t]['median_ms']:.3f} ms", flush=True)
        row.setdefault("others_cpu", {})[t] = others
        if others > 0.1:
            print(f"   note: other processes used {others:.0%} of the machine meanwhile: noisy", flush=True)
    return row


def fmt_ms(r: dict | None) -> str:
    if not r or "median_ms" not in r:
        return "—"
    return f"{r['median_ms']:.3f} ({r['min_ms']:.3f}–{r['max_ms']:.3f})"


def ratio(row, t) -> float | None:
    a = row["tcc"]["by_threads"].get(t, {})
    b = row["ort"]["by_threads"].get(t, {})
    if "median_ms" in a and "median_ms" in b and b["median_ms"] > 0:
        return a["median_ms"] / b["median_ms"]
    return None


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def precision_cells(row, t: int, p: str) -> str:
    """The --precision columns: latency, vs tcc f32, vs ORT, output error."""
    lp = row.get("tcc_precision")
    if lp is None:
        return " — | — | — | — |"
    if "error" in lp:
        return f" tcc {p} failed: {lp['error']} | — | — | — |"
    b = lp["by_threads"].get(t, {})
    if "median_ms" not in b:
        return f" {b.get('error', '—')} | — | — | — |"
    f32 = row["tcc"]["by_threads"].get(t, {}).get("median_ms")
    ort = row["ort"]["by_threads"].get(t, {}).get("median_ms")
    vs32 = f"{b['median_ms'] / f32:.2f}" if f32 else "—"
    vsort = f"{b['median_ms'] / ort:.2f}" if ort else "—"
    chk = lp.get("check")
    err = "—" if chk is None else f"{chk.get('max_rel_err', float('nan')):.1e}" + ("" if chk["ok"] else " MISMATCH")
    return f" {fmt_ms(b)} | {vs32} | {vsort} | {err} |"


def table(rows: list[dict], t: int, p: str | None = None) -> tuple[str, float | None]:
    head = ("| model | GFLOP | tcc ms median (min–max) | ORT ms median (min–max) | tcc/ORT | "
            "tcc GFLOP/s | compile cold / warm s | ORT init s | kernels / extern | outputs | others' CPU |")
    if p:
        head += f" tcc {p} ms median (min–max) | {p}/f32 | {p}/ORT | {p} err |"
    lines = [head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    ratios, model_ratios = [], []
    for row in rows:
        tc, o = row["tcc"], row["ort"]["by_threads"].get(t, {})
        tr = tc["by_threads"].get(t, {})
        r = ratio(row, t)
        if r is not None:
            ratios.append(r)
            if row["kind"] != "debian":
                model_ratios.append(r)
        if "error" in tc:
            tcc_ms = f"tcc failed: {tc['error']}"
        elif "error" in tr:
            tcc_ms = f"tcc failed: {tr['error']}"
        elif not tc["compile"]:
            tcc_ms = "not run"
        else:
            tcc_ms = fmt_ms(tr)
        err = o.get("error") or row["ort"].get("error")
        ort_ms = fmt_ms(o) if not err else f"ORT failed: {err}"
        gfs = f"{row['gflop'] / (tr['median_ms'] / 1e3):.1f}" if row["gflop"] and "median_ms" in tr else "—"
        cc = tc["compile"]
        comp = "—"
        if "cold" in cc and "warm" in cc:
            comp = f"{cc['cold'].get('compile_seconds', float('nan')):.2f} / {cc['warm'].get('compile_seconds', float('nan')):.2f}"
        kern = "—"
        if "warm" in cc:
            kern = f"{count(cc['warm'].get('kernels'))} / {count(cc['warm'].get('extern_calls'))}"
        chk = tc.get("check")
        chk_s = "—" if chk is None else ("ok" if chk["ok"] else f"MISMATCH: {chk['detail']}")
        if chk and chk["ok"] and chk.get("max_rel_err"):
            chk_s += f" ({chk['max_rel_err']:.0e})"
        init = f"{o['init_seconds']:.2f}" if "init_seconds" in o else "—"
        oc = row.get("others_cpu", {}).get(t)
        oth = "—" if oc is None or oc != oc else f"{oc:.0%}"
        gflop = "—" if row["gflop"] is None else f"{row['gflop']:.3f}"
        lines.append(f"| {row['model']} | {gflop} | {tcc_ms} | {ort_ms} | "
                     f"{'—' if r is None else f'{r:.2f}'} | {gfs} | {comp} | {init} | {kern} | {chk_s} | {oth} |"
                     + (precision_cells(row, t, p) if p else ""))
    return "\n".join(lines), geomean(ratios), geomean(model_ratios), len(model_ratios)


def precision_geomean(rows: list[dict], t: int) -> str:
    xs = []
    for r in rows:
        b = r.get("tcc_precision", {}).get("by_threads", {}).get(t, {})
        f32 = r["tcc"]["by_threads"].get(t, {}).get("median_ms")
        if "median_ms" in b and f32:
            xs.append(b["median_ms"] / f32)
    g = geomean(xs)
    return "—" if g is None else f"{g:.3f}"


def write_results(rows, t, info, args, out_dir: Path) -> Path:
    p = args.precision
    tab, g, gm_models, n_models = table(rows, t, p)
    day = info["date"][:10]
    base = out_dir / (f"{day}-cpu-{t}t" + (f"-{p}" if p else ""))
    gm = "—" if g is None else f"{g:.3f}"
    n = sum(1 for r in rows if ratio(r, t) is not None)
    md = [f"# tcc vs onnxruntime, CPU, {t} thread{'s' if t > 1 else ''}", "",
          f"- date: {info['date']}; host: {info['host']}",
          f"- CPU: {info['cpu']} ({info['cores']} cores, {info['affinity']} usable; {info['cpu_flags']}); memory {info['memory']}; {info['os']}",
          f"- tcc: `{args.tcc}` ({info.get('tcc_version', 'not run')}), built from "
          + (args.tcc_source or f"the tree at git {info['git_commit']}"
             f"{' (with uncommitted changes)' if info['git_dirty'] else ''}") + "; "
          f"onnxruntime {info['onnxruntime']} (CPUExecutionProvider, intra_op={t}, inter_op=1, ORT_ENABLE_ALL); "
          f"python {info['python']}",
          f"- {args.iters} timed runs in {args.rounds} rounds (ORT and tcc alternate), {args.warmup} warmup runs per round; load average at start {info['loadavg_start']:.2f}, "
          f"at end {info.get('loadavg_end', float('nan')):.2f} (2 shared cores: a high load means noisy numbers)",
          f"- geometric mean of tcc/ORT over {n} model(s): **{gm}** (< 1: tcc faster); over the "
          f"{n_models} full models (without the single-operator `deb_*` rows): "
          f"**{'—' if gm_models is None else f'{gm_models:.3f}'}**",
          *([f"- tcc `--precision {p}` in the same rounds: geometric mean of {p}/f32 over the models: "
             f"**{precision_geomean(rows, t)}**; output error: max|Δ|/max|ref| against ORT's f32 outputs, "
             f"judged against {PRECISION_TOL[p]:g}"] if p else []),
          "", tab, "",
          "Latency: median (min–max) of one run in ms, without compilation (the median is the median of "
          "the rounds' medians); tcc's from `tcc bench --json`, ORT's from wall time around "
          "`InferenceSession.run`. Others' CPU: share of the machine other processes used while this "
          "model was timed (above ~10% the row is noisy). Compile: `tcc compile --report` "
          "compile_seconds with a fresh TCC_CACHE_DIR (cold) and again (warm). Outputs: tcc's vs ORT's, "
          f"|Δ| ≤ {RTOL:g}·|ref| + {ATOL_REL:g}·max|ref|; the number in brackets is max|Δ|/max|ref|.", ""]
    base.with_suffix(".md").write_text("\n".join(md))
    raw = {"machine": info, "tcc_source": args.tcc_source, "threads": t, "warmup": args.warmup, "iters": args.iters, "rounds": args.rounds,
           "tcc": args.tcc,
           "geomean_tcc_over_ort": g, "geomean_tcc_over_ort_full_models": gm_models, "models": []}
    for r in rows:
        raw["models"].append({"model": r["model"], "kind": r["kind"], "path": r["path"], "gflop": r["gflop"],
                              "ratio_tcc_over_ort": ratio(r, t),
                              "others_cpu": r.get("others_cpu", {}).get(t),
                              "ort": r["ort"]["by_threads"].get(t), "tcc": {
                                  "compile": r["tcc"]["compile"], "check": r["tcc"].get("check"),
                                  "error": r["tcc"].get("error"), "bench": r["tcc"]["by_threads"].get(t)},
                              **({"tcc_precision": {"precision": p, **{k: v for k, v in r["tcc_precision"].items() if k != "by_threads"},
                                                    "bench": r["tcc_precision"]["by_threads"].get(t)}}
                                 if p and "tcc_precision" in r else {})})
    base.with_suffix(".json").write_text(json.dumps(raw, indent=1, default=str) + "\n")
    gmm = "—" if gm_models is None else f"{gm_models:.3f}"
    print(f"\n## {t} thread(s)\n\n{tab}\n\ngeometric mean tcc/ORT ({n} models): {gm}; "
          f"full models only ({n_models}): {gmm}   -> {base}.md\n", flush=True)
    return base


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread counts (default: 1 2)")
    ap.add_argument("--iters", type=int, default=50, help="timed runs per model (default 50)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed runs before each round (default 5)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="split --iters into this many rounds, alternating ORT and tcc (default 3)")
    ap.add_argument("--models", nargs="+", help="subset of models (default: all; see --list)")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                    help="before timing each model and thread count, wait up to S seconds until other "
                         "processes use under 15%% of the CPU (default 0: do not wait)")
    ap.add_argument("--tcc", default=str(ROOT / "build" / "bin" / "tcc"), help="tcc binary (default build/bin/tcc)")
    ap.add_argument("--tcc-source", default=None,
                    help="what the tcc binary was built from, for the header (default: this tree's git HEAD)")
    ap.add_argument("--no-tcc", action="store_true", help="onnxruntime only")
    ap.add_argument("--precision", choices=sorted(PRECISION_TOL),
                    help="also time tcc --precision P (16-bit products) in the same rounds")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds for each tcc command (default 1200)")
    ap.add_argument("--out-dir", default=str(BENCH / "results"), help="where results go (default bench/results)")
    ap.add_argument("--keep-work", action="store_true", help="keep tcc's artifacts, reports and cache")
    args = ap.parse_args()

    models = make_models.all_models()
    if args.list:
        for m in models.values():
            print(f"{m.name:18s} {m.kind:9s} {m.dir}")
        return 0
    names = args.models or list(models)
    unknown = [n for n in names if n not in models]
    if unknown:
        print(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(models)}", file=sys.stderr)
        return 2
    missing = [n for n in names if not models[n].onnx_path.exists()]
    if missing:
        print(f"missing model files for {', '.join(missing)}: run python3 bench/models/make_models.py", file=sys.stderr)
        return 2
    tcc = None
    work = Path(tempfile.mkdtemp(prefix="tcc-bench-"))
    if not args.no_tcc:
        if not (Path(args.tcc).exists() or shutil.which(args.tcc)):
            print(f"warning: tcc not found at {args.tcc}; every tcc column will say so", file=sys.stderr)
        tcc = Tcc(args.tcc, args.timeout, work)
    info = machine_info()
    if tcc is not None:
        rc, out, err, _ = run_proc(tcc.cmd + ["--version"], 30)
        info["tcc_version"] = first_line(out or err) if rc == 0 else f"(--version failed: {first_line(err or out)})"
    print(f"{info['cpu']}, {info['cores']} cores, load {info['loadavg_start']:.2f}; ORT {info['onnxruntime']}; "
          f"tcc {args.tcc if tcc else '(skipped)'}; work dir {work}", flush=True)
    rows = []
    try:
        for n in names:
            rows.append(bench_model(models[n], args.threads, args, tcc))
    finally:
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    info["loadavg_end"] = os.getloadavg()[0]
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for t in args.threads:
        write_results(rows, t, info, args, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
