"""Runs ONNX backend-test cases as compiled CUDA artifacts without a GPU.

Usage (under lit's %fakecuda, which points libtccrt at the fake CUDA driver and cuBLASLt):
  run_emulated.py [--rtol R --atol A] [--precision P] WORKDIR CASE_DIR...
For each case: `tcc compile --device cuda` on its first data set's inputs (with --dump-dir),
`tcc-cuda-emulate` builds the host library of its kernels, and `tccrt-run` runs the artifact on
the fake driver (kernels emulated on the host, $TCC_FAKE_CUDA_KERNELS) and compares the outputs
with the case's expected ones (rtol 1e-3, atol 1e-5 unless given, as tcc check). Prints PASS/FAIL per case
and exits 1 if any fails. Any python3 works (only the standard library).
"""
import glob
import os
import subprocess
import sys

args = sys.argv[1:]
tolerance, compile_flags = [], []
while args and args[0] in ("--rtol", "--atol", "--precision"):
    (compile_flags if args[0] == "--precision" else tolerance).extend(args[:2])
    args = args[2:]
work, cases = args[0], args[1:]
os.makedirs(work, exist_ok=True)
failed = 0
for case in cases:
    name = os.path.basename(os.path.normpath(case))
    data = os.path.join(case, "test_data_set_0")
    inputs = sorted(glob.glob(os.path.join(data, "input_*.pb")),
                    key=lambda p: int(os.path.basename(p)[6:-3]))
    artifact = os.path.join(work, name + ".tcc")
    dump = os.path.join(work, name + "-dump")
    lib = os.path.join(work, name + ".so")
    steps = [
        ["tcc", "compile", os.path.join(case, "model.onnx"), "--device", "cuda", "-o", artifact,
         "--dump-dir", dump] + compile_flags + (["--inputs"] + inputs if inputs else []),
        ["tcc-cuda-emulate", artifact, os.path.join(dump, "kernels"), "-o", lib],
        ["tccrt-run", artifact, "--compare", data] + tolerance +
        (["--inputs"] + inputs if inputs else []),
    ]
    env = dict(os.environ, TCC_FAKE_CUDA_KERNELS=lib)
    for step in steps:
        r = subprocess.run(step, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            failed += 1
            detail = (r.stdout + r.stderr).strip().splitlines()
            print("FAIL %s: %s: %s" % (name, step[0], detail[-1] if detail else r.returncode))
            break
    else:
        print("PASS", name)
print("%d of %d failed" % (failed, len(cases)))
sys.exit(1 if failed else 0)
