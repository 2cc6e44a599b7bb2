"""Compares the output_<i>.pb files of the first directory with those of the others.

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy). Tolerance: |got - ref| <=
1e-5 |ref| + 1e-6 (exact for integers); prints "same" per directory or the first difference
and exits 1.
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


ref = outputs(sys.argv[1])
failed = False
for d in sys.argv[2:]:
    got = outputs(d)
    if len(got) != len(ref):
        print("%s: %d outputs, expected %d" % (d, len(got), len(ref)))
        failed = True
        continue
    for i, (g, r) in enumerate(zip(got, ref)):
        if g.shape != r.shape or g.dtype != r.dtype or not np.allclose(g, r, rtol=1e-5, atol=1e-6):
            print("%s: output %d differs: %s vs %s" % (d, i, g.ravel()[:4], r.ravel()[:4]))
            failed = True
            break
    else:
        print(d, "same")
sys.exit(1 if failed else 0)
