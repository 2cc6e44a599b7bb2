"""Compiles WORKDIR/<case>.onnx once with size ranges and once per size statically, runs both on
the same seeded random input at each size with tccrt-run and compares the outputs (rtol 1e-5).
Prints PASS/FAIL per case and size and "<k> of <n> sizes match".

  check_symbolic_sizes.py WORKDIR INPUT=RANGES SIZE[,SIZE...] CASE...
e.g. `check_symbolic_sizes.py /tmp x=1x2x1..64x1..64 1x2x5x7,1x2x1x13 resize-linear-half_pixel`.
Any python3 works (only the standard library); tcc and tccrt-run come from PATH.
"""
import os
import subprocess
import sys

work, ranges, sizes, cases = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4:]
name = ranges.split("=")[0]
matched = total = 0


def call(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(" ".join(args) + ": " + (r.stdout + r.stderr).strip().splitlines()[-1])
    return r.stdout


for case in cases:
    model = os.path.join(work, f"{case}.onnx")
    symbolic = os.path.join(work, f"{case}-symbolic.tcc")
    call(["tcc", "compile", model, "--input-shape", ranges, "-o", symbolic])
    for size in sizes:
        total += 1
        static = os.path.join(work, f"{case}-{size}.tcc")
        ref = os.path.join(work, f"{case}-{size}-ref")
        try:
            call(["tcc", "compile", model, "--input-shape", f"{name}={size}", "-o", static])
            call(["tccrt-run", static, "--random", "5", "--outputs", ref])
            call(["tccrt-run", symbolic, "--input-shape", f"{name}={size}", "--random", "5",
                  "--compare", ref, "--rtol", "1e-5", "--atol", "1e-6"])
            matched += 1
            print("PASS", case, size)
        except RuntimeError as e:
            print("FAIL", case, size, e)
print(f"{matched} of {total} sizes match")
