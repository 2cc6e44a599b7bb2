#!/usr/bin/env python3
"""Builds the GPU-session bundle (the `bundle` mode of scripts/gpu-session.sh).

Everything the GPU machine needs and cannot make itself (it has no MLIR, so no tcc compiler):
CUDA artifacts of the bench models, of the kernel microbenchmarks and of a sample of the ONNX
conformance node tests, libtccrt with the libraries it needs that the machine lacks, tccrt-run
and the runtime's test binaries. What is made there instead (deterministically, from files the
working tree carries): the bench models' ONNX files, inputs and reference outputs
(bench/models/make_models.py, checked against the SHA-256 recorded here) and the
microbenchmarks' inputs.

  python3 bench/gpu/bundle.py --build-dir build --out .gpu [--budget-mib 60] [--conformance N]
      [--models mlp transformer_block ...] [--micro 'attn_*' ...] [--arch sm_90,sm_80] [--cpu-check]

Interpreter: the python3 on PATH (onnx, numpy, onnxruntime: bench/requirements.txt).
Writes OUT/manifest.json, which bench/gpu/device_session.py reads; prints a summary with sizes.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import fnmatch
import json
import lzma
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "models"))
sys.path.insert(0, str(ROOT / "bench" / "gpu"))

TESTDATA = Path("/usr/share/libonnx-testdata/data")
# Libraries the GPU machine's image provides itself (glibc, the GCC runtime); the rest of what
# ldd resolves is carried. libstdc++/libgcc_s go to lib-fallback/, used only if the machine's own
# are too old for our binaries (its glibc and GCC are newer than Debian 12's).
SYSTEM_LIBS = re.compile(r"^(libc|libm|libdl|libpthread|librt|ld-linux[-\w]*|libresolv|libutil)\.so")
FALLBACK_LIBS = re.compile(r"^(libstdc\+\+|libgcc_s)\.so")
# Compressed with xz in the bundle, unpacked on the machine (OpenBLAS is ~37 MB, ~1/4 packed).
COMPRESS_ABOVE = 4 << 20
# How the device runs each test program (label, program, environment, arguments); programs not
# built are left out. tccrt-cuda-tests: only its OnDevice tests on the real driver (its fake-driver
# tests need a process each, as CTest runs them here, and need no GPU).
TEST_RUNS = [
    ("tccrt-tests", "tccrt-tests", {}, []),
    ("tccrt-cuda-tests (real driver)", "tccrt-cuda-tests", {"TCC_CUDA_TEST_DRIVER": "real"}, ["--gtest_filter=OnDevice.*"]),
    ("tccrt-cuda-runtime-tests", "tccrt-cuda-runtime-tests", {}, []),
]
# Attention training artifacts (device_session.py's attention_train section): lengths, heads of
# 64 and the weights' seed (the device rebuilds the same weights and data for PyTorch).
ATTENTION_TRAIN_LENGTHS, ATTENTION_TRAIN_HEADS, ATTENTION_TRAIN_SEED = (1024, 4096), 8, 0
# The bench models in the order they get room in the bundle (resnet18's weights alone are 47 MB).
MODEL_PRIORITY = ["mlp", "transformer_block", "mobilenet_v2", "resnet18", "minilm_l6"]


# Debian's Open MPI and the libraries its launcher and plugins load (ldd of orterun, orted,
# libmpi and the MCA plugins), for the distributed training check on the GPU machine.
MPI_PACKAGES = ["openmpi-bin", "openmpi-common", "libopenmpi3", "libpmix2", "libhwloc15", "libevent-core-2.1-7",
                "libevent-pthreads-2.1-7", "libfabric1", "libibverbs1", "libnl-3-200", "libnl-route-3-200",
                "libnuma1", "libpsm-infinipath1", "libpsm2-2", "librdmacm1", "libucx0", "libmunge2"]


def log(msg: str) -> None:
    print(f"[bundle] {msg}", flush=True)


def run(cmd: list[str], timeout: float = 600, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env)


def first_error(p: subprocess.CompletedProcess) -> str:
    text = (p.stderr or "") + (p.stdout or "")
    lines = [l for l in text.splitlines() if l.strip()]
    for l in lines:
        if "error" in l.lower():
            return l.strip()[:400]
    return (lines[-1].strip() if lines else f"exit {p.returncode}")[:400]


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


# ---- binaries and libraries ------------------------------------------------------------------
def needed_libs(binary: Path, env) -> dict[str, str]:
    """soname -> resolved path, from ldd (with the build's library dir on LD_LIBRARY_PATH)."""
    p = run(["ldd", binary], env=env)
    libs = {}
    for line in p.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (\S+) \(", line)
        if m:
            libs[m.group(1)] = m.group(2)
        elif "not found" in line:
            raise RuntimeError(f"ldd {binary}: {line.strip()}")
    return libs


def readelf_needed(binary: Path) -> list[str]:
    out = run(["readelf", "-d", "--wide", binary]).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def copy_runtime(build: Path, out: Path, manifest: dict) -> None:
    bin_dir, lib_dir, fb_dir = out / "bin", out / "lib", out / "lib-fallback"
    for d in (bin_dir, lib_dir, fb_dir):
        d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LD_LIBRARY_PATH=str(build / "lib"))
    binaries = {"tccrt-run": build / "bin" / "tccrt-run"}
    # The CPU GEMM benchmark (no MLIR; not built by default): the GPU machine's host processor
    # measured beside the GPU. Built here first, so that it matches the libtccrt carried.
    if run(["cmake", "--build", build, "--target", "tccrt-gemm-bench"]).returncode == 0:
        binaries["tccrt-gemm-bench"] = build / "bin" / "tccrt-gemm-bench"
    tests = {}
    # The runtime's test binaries: GoogleTest programs linking libtccrt and no MLIR (their CUDA
    # tests skip without a GPU here and run there).
    for exe in sorted((build / "bin").glob("tccrt*-tests")):
        needed = readelf_needed(exe)
        bad = [n for n in needed if re.search(r"mlir|llvm|protobuf", n, re.I)]
        if bad:
            manifest["skipped_binaries"][exe.name] = f"needs {', '.join(bad)} (not on the GPU machine)"
            continue
        tests[exe.name] = exe
    for name, path in {**binaries, **tests}.items():
        if not path.exists():
            raise RuntimeError(f"{path} is missing: build it first (scripts/build.sh)")
        shutil.copy2(path, bin_dir / name)
    manifest["tests"] = sorted(tests)
    manifest["test_runs"] = [{"label": label, "program": prog, "env": env, "args": args}
                             for label, prog, env, args in TEST_RUNS if prog in tests]
    # Files the test programs name by their absolute build paths (test kernel modules, the fake
    # CUDA driver, PTX/cubins made by nvcc): carried in build-files/, put back at the same paths
    # there.
    files_dir = out / "build-files"
    build_files = {}
    for exe in tests.values():
        strings = run(["strings", "-n", "8", exe]).stdout.split()
        for s in strings:
            if s.startswith(str(build) + "/") and Path(s).is_file() and s not in build_files:
                rel = Path(s).relative_to(build)
                (files_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(s, files_dir / rel)
                build_files[s] = str(rel)
    manifest["build_files"] = build_files
    libs: dict[str, str] = {}
    for path in [build / "lib" / "libtccrt.so.0", *binaries.values(), *tests.values()]:
        libs.update(needed_libs(path, env))
    libs["libtccrt.so.0"] = str((build / "lib" / "libtccrt.so.0").resolve())
    carried, packed = [], []
    for soname, path in sorted(libs.items()):
        if SYSTEM_LIBS.match(soname):
            continue
        dest_dir = fb_dir if FALLBACK_LIBS.match(soname) else lib_dir
        src = Path(path).resolve()
        if src.stat().st_size > COMPRESS_ABOVE:
            (dest_dir / (soname + ".xz")).write_bytes(lzma.compress(src.read_bytes(), preset=6))
            packed.append(soname)
        else:
            shutil.copy2(src, dest_dir / soname)
        carried.append(soname)
    manifest["libs"] = carried
    manifest["packed_libs"] = packed


# ---- compiling -------------------------------------------------------------------------------
class Compiler:
    def __init__(self, tcc: Path, arch: str, device: str):
        self.tcc, self.arch, self.device = tcc, arch, device

    def compile(self, model: Path, out: Path, inputs: list[Path] = (), report: Path | None = None,
                extra: list[str] = (), train: bool = False) -> tuple[bool, str, float]:
        cmd = [self.tcc, "compile", *(["--train"] if train else []), model, "-o", out, "--device", self.device]
        if self.device == "cuda":
            cmd += ["--arch", self.arch]
        if inputs:
            cmd += ["--inputs", *inputs]
        if report:
            cmd += ["--report", report]
        cmd += list(extra)
        t0 = time.time()
        try:
            p = run(cmd, timeout=900)
        except subprocess.TimeoutExpired:
            return False, "tcc compile timed out after 900 s", time.time() - t0
        ok = p.returncode == 0 and out.exists()
        return ok, "" if ok else first_error(p), time.time() - t0


def bundle_symbolic(comp: Compiler, out: Path, manifest: dict, budget: int, device: str) -> None:
    """bench/symbolic_cpu.py's models (exported with the peers venv's torch), each compiled once
    with its size ranges and once per size: the device session times both at each size on the
    same seeded inputs (tccrt-run --random) and compares their outputs. f16 for the transformers
    (their attention is the fused kernel), f32 for the CNN; CUDA only."""
    if device != "cuda":
        manifest["notes"].append("symbolic: CUDA bundles only")
        return
    peers = ROOT / ".venv-peers" / "bin" / "python"
    src = out / "symbolic-onnx"
    code = ("import sys; sys.path.insert(0, 'bench'); import symbolic_cpu, json, pathlib; "
            "specs = symbolic_cpu.export_models(pathlib.Path(sys.argv[1])); "
            "print(json.dumps([{k: str(v) if k == 'onnx' else v for k, v in s.items()} for s in specs]))")
    src.mkdir()
    p = run([peers, "-c", code, src], timeout=600) if peers.exists() else None
    if p is None or p.returncode != 0:
        why = "no peers venv (scripts/setup.sh)" if p is None else first_error(p)
        manifest["notes"].append(f"symbolic: the models were not exported: {why}")
        log(f"symbolic: {why}")
        shutil.rmtree(src)
        return
    # Smallest first (the transformers' f32 constants are ~3 MB an artifact): each model goes in
    # while the bundle keeps to its budget.
    specs = sorted(json.loads(p.stdout.strip().splitlines()[-1]), key=lambda sp: sp["name"] != "cnn")
    for spec in specs:
        precision = "fp32" if spec["name"] == "cnn" else "fp16"
        d = out / "symbolic" / spec["name"]
        d.mkdir(parents=True)
        shapes = lambda dims: ["--input-shape", *[f"{n}={dims}" for n in spec["inputs"]]]
        entry = {"name": spec["name"], "precision": precision, "ranges": spec["ranges"], "sizes": []}
        ok, err, _ = comp.compile(Path(spec["onnx"]), d / "symbolic.tcc", report=d / "symbolic.json",
                                  extra=["--precision", precision, *shapes(spec["ranges"])])
        entry.update(ok=ok, error=err)
        for size in spec["sizes"] if ok else []:
            dims = "x".join(map(str, size))
            sok, serr, _ = comp.compile(Path(spec["onnx"]), d / f"static-{dims}.tcc",
                                        extra=["--precision", precision, *shapes(dims)])
            entry["sizes"].append({"dims": dims, "input_shape": shapes(dims)[1:], "ok": sok, "error": serr})
        if dir_size(out) - dir_size(src) > budget:  # (the exported ONNX files are not carried)
            shutil.rmtree(d)
            entry.update(ok=False, error="left out: over the bundle budget (bundle --parts symbolic alone)")
        manifest["symbolic"].append(entry)
        log(f"symbolic {spec['name']} ({precision}): {'ok' if entry['ok'] else 'FAILED: ' + entry['error']}, "
            f"{sum(s['ok'] for s in entry['sizes'])} static sizes")
    shutil.rmtree(src)


def conformance_cases(n: int) -> list[Path]:
    """Every k-th node test (name order) that the CPU backend is expected to pass."""
    root = TESTDATA / "node"
    if not root.is_dir():
        return []
    xfail = set()
    for line in (ROOT / "test" / "conformance" / "expected-failures-cpu.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            xfail.add(line.split()[0])
    cases = [d for d in sorted(root.iterdir())
             if d.name not in xfail and (d / "model.onnx").exists() and (d / "test_data_set_0").is_dir()]
    if n <= 0 or not cases:
        return []
    step = max(1, len(cases) // n)
    return cases[::step][:n]


def sorted_pb(d: Path, prefix: str) -> list[Path]:
    return sorted(d.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", type=Path, default=ROOT / "build")
    ap.add_argument("--out", type=Path, default=ROOT / ".gpu")
    ap.add_argument("--budget-mib", type=float, default=60.0,
                    help="largest bundle; less if the working tree and the bundle would exceed the 64 MiB the "
                         "device tool carries")
    ap.add_argument("--arch", default="sm_90,sm_80")
    ap.add_argument("--conformance", type=int, default=150, help="node tests in the sample (0: none)")
    ap.add_argument("--conformance-cases", type=Path, nargs="+", default=None, metavar="DIR",
                    help="these case folders instead of the sample (e.g. the onnx 1.23 node cases that "
                         "test/conformance/check_onnx_node_tests.sh writes into the build tree)")
    ap.add_argument("--models", nargs="*", default=None, help="bench models, in priority order (default: all by priority)")
    ap.add_argument("--models-only", action="store_true",
                    help="only the bench models (no microbenchmarks, conformance sample or training artifact): "
                         "for a second call with a model that does not fit beside them (resnet18)")
    ap.add_argument("--parts", nargs="+",
                    default=["micro", "conformance", "training", "models", "distributed", "python", "symbolic"],
                    choices=["micro", "conformance", "training", "models", "distributed", "python", "symbolic"],
                    help="what to compile (default: all; distributed: the CPU training artifacts of "
                         "bench/distributed_cpu.py, --distributed-ranks, batches 64 and 512; python: "
                         "the CUDA artifacts of python/tests/test_cuda.py; symbolic: bench/symbolic_cpu.py's "
                         "models compiled once with size ranges and once per size, for the symbolic/static "
                         "ratio on the GPU)")
    ap.add_argument("--distributed-ranks", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--models-dir", type=Path, default=None,
                    help="where make_models.py writes the bench models (default bench/models/generated)")
    ap.add_argument("--micro", nargs="+", default=None, metavar="NAME",
                    help="only the microbenchmarks matching these names or shell patterns, e.g. --micro 'attn_*' "
                         "(default: all; bench/gpu/make_micro.py --list names them)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cpu-check", action="store_true",
                    help="compile for the CPU instead (device CPU, small microbenchmarks): to test the device "
                         "mode on a machine without a GPU")
    args = ap.parse_args()
    if args.models_only:
        args.parts = ["models"]

    build = args.build_dir.resolve()
    out = args.out.resolve()
    tcc = build / "bin" / "tcc"
    if not tcc.exists():
        log(f"error: {tcc} not found: build first (scripts/build.sh)")
        return 1
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    device = "cpu" if args.cpu_check else "cuda"
    git = run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).stdout.strip()
    dirty = bool(run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).stdout.strip())
    manifest: dict = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(), "git": git + ("+dirty" if dirty else ""), "device": device,
        "arch": args.arch if device == "cuda" else None, "budget_mib": args.budget_mib,
        "skipped_binaries": {}, "models": [], "micro": [], "conformance": [], "training": None,
        "symbolic": [],
        "notes": [],
    }
    t_start = time.time()
    copy_runtime(build, out, manifest)
    comp = Compiler(tcc, args.arch, device)
    # The device tool carries the working tree (tracked and untracked-not-ignored files) and the
    # bundle, 64 MiB in all: the bundle gets what the tree leaves, less a margin, at most
    # --budget-mib.
    listed = run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"]).stdout
    tree = sum((ROOT / f).stat().st_size for f in listed.split("\0") if f and (ROOT / f).is_file())
    # A --cpu-check bundle is not carried anywhere (and a sanitizer build's runtime is larger).
    budget_mib = args.budget_mib if args.cpu_check else min(args.budget_mib, 64 - tree / 2**20 - 0.5)
    args.budget_mib = round(budget_mib, 1)
    manifest["budget_mib"] = args.budget_mib
    manifest["working_tree_bytes"] = tree
    log(f"working tree {tree / 2**20:.1f} MiB: the bundle may take {args.budget_mib:g} MiB")
    budget = int(budget_mib * (1 << 20))

    # Probe: does `tcc compile --device cuda` work at all here? One tiny model first, so that a
    # missing backend is reported once instead of per case.
    import make_micro
    import onnx
    from device_session import cpu_info, model_digest
    # The compiling machine's processor: CPU artifacts' kernels are built with -march=native here.
    manifest["host_cpu"] = cpu_info()["model"]
    probe_dir = out / "probe"
    probe_dir.mkdir()
    probe = probe_dir / "model.onnx"
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(probe))
    compiler_ok, err, _ = comp.compile(probe, probe_dir / "model.tcc")
    shutil.rmtree(probe_dir)
    if not compiler_ok:
        manifest["compile_error"] = f"tcc compile --device {device} does not work here: {err}"
        log(manifest["compile_error"])
    scale = 16 if args.cpu_check else 1
    manifest["micro_scale"] = scale
    if compiler_ok and "python" in args.parts and device == "cuda":
        # The Python package's GPU tests: their artifacts, compiled here through the package
        # (Debian's interpreter has its numpy and onnx; libtcc from this build).
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), TCC_LIBRARY_DIR=str(build / "lib"))
        p = run(["/usr/bin/python3", ROOT / "python" / "tests" / "test_cuda.py", "--make", out / "python"],
                env=env, timeout=600)
        manifest["python"] = {"ok": p.returncode == 0, "error": p.stderr.strip()[-400:]}
        log(f"python: {'ok' if p.returncode == 0 else 'FAILED: ' + p.stderr.strip()[-400:]}")

    if compiler_ok and "micro" in args.parts:
        # Microbenchmarks: graphs with every tensor an input (artifacts of a few KB).
        micro_dir = out / "micro"
        micros = make_micro.micro_list(scale)
        if args.micro:
            micros = [m for m in micros if any(fnmatch.fnmatchcase(m.name, p) for p in args.micro)]
            if not micros:
                log(f"warning: no microbenchmark matches --micro {' '.join(args.micro)}")
        for m in micros:
            d = micro_dir / m.name
            d.mkdir(parents=True)
            onnx.save(make_micro.build_model(m), str(d / "model.onnx"))
            # --precision is CUDA-only: a CPU check of the session compiles the f32 graph.
            extra = ["--precision", m.precision] if device == "cuda" and m.precision != "fp32" else []
            ok, err, secs = comp.compile(d / "model.onnx", d / "model.tcc", report=d / "report.json",
                                         extra=extra)
            (d / "model.onnx").unlink()
            entry = {"name": m.name, "ok": ok, "error": err, "compile_seconds": round(secs, 2)}
            if ok:
                entry["report"] = json.loads((d / "report.json").read_text())
            manifest["micro"].append(entry)
            log(f"micro {m.name}: {'ok' if ok else 'FAILED: ' + err}")

    if compiler_ok and "conformance" in args.parts:
        # Conformance sample: the CPU backend's passing node tests, compiled with their inputs.
        cases = ([c for c in args.conformance_cases if (c / "model.onnx").exists()]
                 if args.conformance_cases else conformance_cases(args.conformance))
        # Only what the CPU backend passes here, by `tcc check` itself (cases with sequence or
        # optional values are skipped by it).
        if cases:
            p = run([tcc, "check", "-j", args.jobs, *cases], timeout=1800)
            verdict = {}
            for line in p.stdout.splitlines():
                m = re.match(r"^(PASS|FAIL|SKIP|XFAIL)\s+([^\s:]+)(:.*)?$", line)
                if m:
                    verdict[m.group(2)] = line.strip()
            manifest["conformance_not_passing_cpu"] = {c.name: verdict.get(c.name, "no verdict from tcc check")
                                                       for c in cases if not verdict.get(c.name, "").startswith("PASS")}
            cases = [c for c in cases if verdict.get(c.name, "").startswith("PASS")]
            log(f"conformance: {len(cases)} of the sampled node tests pass tcc check on the CPU here "
                f"({len(manifest['conformance_not_passing_cpu'])} do not: left out)")
        conf_dir = out / "conformance"

        def one(case: Path):
            d = conf_dir / case.name
            ds = d / "test_data_set_0"
            ds.mkdir(parents=True)
            src = case / "test_data_set_0"
            inputs = sorted_pb(src, "input")
            ok, err, secs = comp.compile(case / "model.onnx", d / "model.tcc", inputs)
            if not ok and "is not a valid TensorProto file" in err:
                # Sequence/optional values: `tcc check` skips these cases too.
                shutil.rmtree(d)
                return {"name": case.name, "ok": False, "skipped": True, "error": err, "inputs": len(inputs)}
            if ok:
                for p in inputs + sorted_pb(src, "output"):
                    shutil.copy2(p, ds / p.name)
            else:
                shutil.rmtree(d)
            return {"name": case.name, "ok": ok, "error": err, "inputs": len(inputs)}
        with cf.ThreadPoolExecutor(args.jobs) as ex:
            manifest["conformance"] = list(ex.map(one, cases))
        n_ok = sum(c["ok"] for c in manifest["conformance"])
        n_na = sum(bool(c.get("skipped")) for c in manifest["conformance"])
        log(f"conformance: {n_ok} of {len(cases)} sampled node tests compiled ({n_na} hold sequence or "
            f"optional values: skipped, as tcc check does)")
        for c in manifest["conformance"]:
            if not c["ok"] and not c.get("skipped"):
                log(f"  {c['name']}: {c['error']}")

    if compiler_ok and "training" in args.parts:
        # Training artifact (FashionMNIST example), if --train compiles for the device.
        tr = out / "train"
        tr.mkdir()
        ok, err, secs = comp.compile(ROOT / "examples" / "fashion-mnist" / "model.onnx", tr / "train.tcc",
                                     extra=["--batch-size", "64", "--optimizer", "adam"], train=True)
        manifest["training"] = {"ok": ok, "error": err, "batch_size": 64, "optimizer": "adam",
                                "model": "examples/fashion-mnist/model.onnx"}
        if ok:
            # The same with data parallelism over 2 ranks, run there under mpirun (the machine's
            # Open MPI, else Debian's packages carried here and unpacked there by gpu-session.sh):
            # as compiled by default, with one all_reduce per gradient (no buckets), and for the
            # CPU (to tell the CUDA path from the rest).
            variants = [("dp2", "train-dp2.tcc", []), ("dp2-no-buckets", "train-dp2-b0.tcc", ["--bucket-mb", "0"]),
                        ("dp2-cpu", "train-dp2-cpu.tcc", None)]
            manifest["training"]["distributed"] = []
            for label, name, extra in variants:
                device = comp.device
                if extra is None:
                    comp.device, extra = "cpu", []
                ok2, err2, _ = comp.compile(ROOT / "examples" / "fashion-mnist" / "model.onnx", tr / name, train=True,
                                            extra=["--batch-size", "64", "--optimizer", "adam", "--mesh", "dp=2", *extra])
                comp.device = device
                manifest["training"]["distributed"].append({"label": label, "artifact": name, "ok": ok2, "error": err2})
                log(f"{label} training artifact: {'ok' if ok2 else 'FAILED: ' + err2}")
            debs = tr / "debs"
            debs.mkdir()
            p = subprocess.run(["apt-get", "download", *MPI_PACKAGES], cwd=debs, capture_output=True, text=True)
            log("Open MPI packages: " + ("downloaded" if p.returncode == 0 else
                                         "FAILED: " + (p.stderr.strip().splitlines() or [""])[-1]))
        else:
            shutil.rmtree(tr)
        log(f"training artifact: {'ok' if ok else 'FAILED: ' + err}")

    if compiler_ok and "training" in args.parts:
        # Training through long causal attention (bench/attention_train_cpu.py's layer, 8 heads
        # of 64, SGD so the artifact holds no optimizer state): --precision bf16, whose step runs
        # attention forward and backward on the generated FlashAttention-2 kernels on CUDA.
        sys.path.insert(0, str(ROOT / "bench"))
        import attention_layer as layer
        at = out / "attention-train"
        at.mkdir()
        manifest["attention_train"] = []
        for length in ATTENTION_TRAIN_LENGTHS:
            model = at / f"layer-{length}.onnx"
            layer.write_model(model, length, ATTENTION_TRAIN_SEED, heads=ATTENTION_TRAIN_HEADS)
            name = f"layer-{length}-bf16.tcc"
            ok, err, _ = comp.compile(model, at / name, train=True, extra=[
                "--loss", "mse", "--batch-size", "1", "--optimizer", "sgd", "--precision", "bf16"])
            model.unlink()
            manifest["attention_train"].append({
                "length": length, "heads": ATTENTION_TRAIN_HEADS, "head_dim": layer.HEAD_DIM,
                "seed": ATTENTION_TRAIN_SEED, "precision": "bf16", "optimizer": "sgd",
                "artifact": name, "ok": ok, "error": err})
            log(f"attention training artifact ({length} tokens): {'ok' if ok else 'FAILED: ' + err}")

    if compiler_ok and "distributed" in args.parts and "training" in args.parts:
        # CPU training artifacts for bench/distributed_cpu.py (tcc vs torch DDP/FSDP on the host's
        # CPU; mpirun from the training part's Open MPI packages).
        dist = out / "distributed-cpu"
        cmd = [sys.executable, str(ROOT / "bench" / "distributed_cpu.py"), "--tcc", str(comp.tcc), "--artifacts", str(dist),
               "--compile-only", "--ranks", *map(str, args.distributed_ranks), "--batches", "64", "512"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        # Mostly zeros (Adam's initial moments): xz makes them a few times smaller; the device
        # session unpacks them.
        for art in dist.glob("*.tcc"):
            art.with_suffix(".tcc.xz").write_bytes(lzma.compress(art.read_bytes(), preset=6))
            art.unlink()
        manifest["distributed_cpu"] = {"ok": p.returncode == 0, "ranks": args.distributed_ranks, "batches": [64, 512],
                                       "error": (p.stdout + p.stderr).strip()[-500:] if p.returncode else ""}
        log(f"distributed CPU artifacts: {'ok' if p.returncode == 0 else 'FAILED: ' + manifest['distributed_cpu']['error']}")

    if compiler_ok and "models" in args.parts:
        # Bench models: regenerated deterministically by make_models.py (here and there).
        import make_models
        if args.models_dir:
            make_models.GENERATED = args.models_dir.resolve()
            make_models.FLOPS_FILE = make_models.GENERATED / "flops.json"
        names = args.models if args.models is not None else MODEL_PRIORITY
        models_dir = out / "models"
        for name in names:
            entry = {"name": name}
            manifest["models"].append(entry)
            try:
                model = make_models.build(name, with_outputs=True)
            except Exception as e:  # e.g. minilm_l6 without its weights package
                entry.update(ok=False, error=f"make_models.py failed: {e}")
                log(f"model {name}: {entry['error']}")
                continue
            d = models_dir / name
            d.mkdir(parents=True)
            ok, err, secs = comp.compile(model.onnx_path, d / "model.tcc", model.input_paths(), d / "report.json")
            entry.update(ok=ok, error=err, compile_seconds=round(secs, 2), graph_sha256=model_digest(model.onnx_path),
                         flops=model.flops)
            if not ok:
                shutil.rmtree(d)
                log(f"model {name}: FAILED: {err}")
                continue
            entry["report"] = json.loads((d / "report.json").read_text())
            size = (d / "model.tcc").stat().st_size
            entry["artifact_bytes"] = size
            if dir_size(out) > budget:
                shutil.rmtree(d)
                runtime = sum(dir_size(out / d) for d in ("bin", "lib", "lib-fallback", "build-files"))
                if size + runtime > budget:
                    why = (f"left out: its artifact ({size / 2**20:.1f} MiB) with the runtime "
                           f"({runtime / 2**20:.1f} MiB) exceeds the {args.budget_mib:g} MiB bundle "
                           "(the device tool carries 64 MiB in all)")
                else:
                    why = (f"left out: its artifact ({size / 2**20:.1f} MiB) does not fit the {args.budget_mib:g} MiB "
                           f"bundle beside the others; bundle it alone for a second call: bundle --models-only "
                           f"--models {name}")
                entry.update(ok=False, error=why)
            log(f"model {name}: {'ok' if entry['ok'] else entry['error']}"
                + (f" ({size / 2**20:.1f} MiB)" if entry["ok"] else ""))

    if compiler_ok and "symbolic" in args.parts:
        bundle_symbolic(comp, out, manifest, budget, device)

    manifest["bundle_bytes"] = dir_size(out)
    manifest["bundle_seconds"] = round(time.time() - t_start, 1)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = dir_size(out)
    log(f"{out}: {total / 2**20:.1f} MiB ({', '.join(f'{p.name} {dir_size(p) / 2**20:.1f}' for p in sorted(out.iterdir()) if p.is_dir())}) "
        f"in {time.time() - t_start:.0f} s")
    if total > budget:
        log(f"error: the bundle is {total / 2**20:.1f} MiB, over the {args.budget_mib:g} MiB budget")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
