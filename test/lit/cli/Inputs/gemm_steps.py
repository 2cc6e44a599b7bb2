"""Prints an artifact's launch list, one line per step, from `flatc --json --defaults-json`.

A Gemm line names its epilogue: alpha, the bias buffer (kind and shape) and the activation.
"""
import json
import sys

artifact = json.load(open(sys.argv[1]))
buffers = artifact["buffers"]


def describe(i):
    b = buffers[i]
    return "%s%s" % (b["kind"], b["shape"])


print("device", artifact["device"])
for launch in artifact["launches"]:
    kind, step = launch["step_type"], launch["step"]
    if kind != "Gemm":
        print(kind)
        continue
    bias = describe(step["bias"]) if step["has_bias"] else "none"
    print("Gemm c=%s alpha=%g beta=%g bias=%s activation=%s" % (
        describe(step["c"]), step["alpha"], step["beta"], bias, step["activation"]))
