"""Compares the output_<i>.pb files of the first directory with those of the others.

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy). Tolerance: |got - ref| <=
1e-5 |ref| + 1e-6 (exact for integers), or with `--normwise E` max|got - ref| <= E max|ref| per
output (16-bit builds against f32); prints "same" per directory or the first difference and
exits 1.
"""
import glob
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def outputs(d):
    files = sorted(glob.glob(os.path.join(d, "output_*.pb")))
    if not files:
        sys.exit("no output_*.pb in " + d)
    result = []
    for f in files:
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        result.append(numpy_helper.to_array(t))
    return result


args = sys.argv[1:]
normwise = None
if "--normwise" in args:
    i = args.index("--normwise")
    normwise = float(args[i + 1])
    del args[i:i + 2]


def close(g, r):
    if normwise is None:
        return np.allclose(g, r, rtol=1e-5, atol=1e-6)
    r64, g64 = r.astype(np.float64), g.astype(np.float64)
    return bool(np.max(np.abs(g64 - r64)) <= normwise * np.max(np.abs(r64)))


ref = outputs(args[0])
failed = False
for d in args[1:]:
    got = outputs(d)
    if len(got) != len(ref):
        print("%s: %d outputs, expected %d" % (d, len(got), len(ref)))
        failed = True
        continue
    for i, (g, r) in enumerate(zip(got, ref)):
        if g.shape != r.shape or g.dtype != r.dtype or not close(g, r):
            print("%s: output %d differs: %s vs %s" % (d, i, g.ravel()[:4], r.ravel()[:4]))
            failed = True
            break
    else:
        print(d, "same")
sys.exit(1 if failed else 0)
