"""Python call overhead on a GPU: a CUDA artifact called from the tcc package with torch CUDA
tensors (DLPack: device to device, no host staging) against the same call through host memory
(tensor.cpu().numpy(), then the outputs back with .cuda()), and libtccrt's own host-to-host
run for reference. Median of timed calls, each synchronous. Prints one JSON line per artifact.

    python3 bench/gpu/python_dlpack.py ARTIFACT.tcc [...]   (PYTHONPATH=python, TCC_LIBRARY_DIR=...)
"""
import json
import statistics
import sys
import time

import numpy as np
import torch

import tcc


def median_ms(fn, iters=200, warmup=20):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main():
    dev = torch.device("cuda", 0)
    for path in sys.argv[1:]:
        model = tcc.load(path)
        rng = np.random.default_rng(0)
        host = [rng.uniform(-1, 1, s.shape).astype(s.dtype) for s in model.inputs]
        cuda = [torch.from_numpy(a).to(dev) for a in host]

        def through_host():
            outs = model(*[t.cpu().numpy() for t in cuda])
            return [torch.from_numpy(o).to(dev) for o in outs]

        device_ms = median_ms(lambda: model(*cuda))
        host_ms = median_ms(through_host)
        numpy_ms = median_ms(lambda: model(*host))
        same = all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(model(*cuda), through_host()))
        print(json.dumps({"artifact": path, "device_name": model.device_name,
                          "input_bytes": sum(a.nbytes for a in host),
                          "torch_cuda_dlpack_ms": round(device_ms, 4),
                          "torch_cuda_via_host_ms": round(host_ms, 4),
                          "numpy_host_ms": round(numpy_ms, 4), "outputs_equal": same}), flush=True)


if __name__ == "__main__":
    main()
