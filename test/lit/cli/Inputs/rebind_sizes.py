"""Runs one artifact compiled with size ranges at a sequence of sizes in ONE process (each call
binds new sizes: the CUDA executor grows its memory, uploads the symbol values, shrinks its grids
and plans its GEMMs again), against a reference artifact (the CPU one) on the same random inputs.

  rebind_sizes.py ARTIFACT REFERENCE [--cuda-graph] [--int NAME] SIZES...
SIZES: "ids=2x7,mask=2x7" per call. Integer inputs get values in [0, 8). Prints PASS/FAIL per
call and "<k> of <n> calls match"; exits 1 on a mismatch.
"""
import sys

import numpy as np
import tcc

args = sys.argv[1:]
graph = "--cuda-graph" in args
args = [a for a in args if a != "--cuda-graph"]
artifact, reference, calls = args[0], args[1], args[2:]
model = tcc.load(artifact, cuda_graph=graph)
ref = tcc.load(reference)
rng = np.random.default_rng(0)
matched = 0
for call in calls:
    feeds = {}
    for item in call.split(","):
        name, dims = item.split("=")
        shape = [int(d) for d in dims.split("x")]
        dtype = next(i.dtype for i in ref.inputs if i.name == name)
        feeds[name] = (rng.integers(0, 8, shape).astype(dtype) if np.issubdtype(dtype, np.integer)
                       else rng.standard_normal(shape).astype(dtype))
    got, want = model(**feeds), ref(**feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    want = want if isinstance(want, (list, tuple)) else [want]
    ok = all(g.shape == w.shape and np.allclose(g, w, rtol=1e-3, atol=1e-5) for g, w in zip(got, want))
    err = max(float(np.abs(g - w).max()) if g.shape == w.shape and g.size else 0.0 for g, w in zip(got, want))
    matched += ok
    print("PASS" if ok else "FAIL", call, f"max abs err {err:.2e}")
print(f"{matched} of {len(calls)} calls match")
sys.exit(0 if matched == len(calls) else 1)
