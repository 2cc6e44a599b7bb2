"""Summarises a CUDA artifact from `flatc --json --strict-json --defaults-json`, one fact a line.

Prints the device and compiler, each image (arch, whether the cubin is an ELF file) and PTX
(arch, its .target), each kernel (name pattern-free: its params) with the image of each arch
that defines it (exactly one is required: "in one image per arch" or what is wrong), and the
launch list (KernelLaunch with kernel name, grid, block, shared bytes; other steps by kind).
"""
import json
import re
import sys

artifact = json.load(open(sys.argv[1]))
print("device", artifact["device"])
module = artifact.get("cuda_module")
if module is None:
    print("no cuda_module")
    sys.exit(0)
print("compiler", module["compiler"])
images = module.get("images", [])
ptxs = module.get("ptx", [])
for image in images:
    elf = bytes(image["cubin"][:4]) == b"\x7fELF"
    print("image", image["arch"], "ELF" if elf else "not ELF")
for p in ptxs:
    target = re.search(r"^\.target (\S+)", p["ptx"], re.M)
    print("ptx", p["arch"], ".target", target.group(1) if target else "?")

archs = sorted({i["arch"] for i in images})
kernels = artifact.get("kernels", [])
for k in kernels:
    name = k["name"]
    params = " ".join("%s%s" % (p["dtype"], p["shape"]) for p in k.get("params", []))
    print("kernel", name, "params", params)
    where = []
    for arch in archs:
        # A cubin names each kernel in its .nv.info.<name> section; the PTX has .entry <name>(.
        cubins = [i for i in images if i["arch"] == arch and
                  (".nv.info." + name + "\0").encode() in bytes(i["cubin"])]
        entries = [p for p in ptxs if p["arch"] == "compute_" + arch[3:] and
                   re.search(r"\.entry " + re.escape(name) + r"\(", p["ptx"])]
        if len(cubins) != 1 or len(entries) != 1:
            where.append("%s: %d cubins, %d PTX" % (arch, len(cubins), len(entries)))
    print("  in one image per arch" if not where else "  " + "; ".join(where))

for launch in artifact["launches"]:
    kind, step = launch["step_type"], launch["step"]
    if kind == "KernelLaunch":
        print("KernelLaunch %s grid=%s block=%s shared=%d args=%d" % (
            kernels[step["kernel"]]["name"], step.get("grid"), step.get("block"),
            step.get("shared_bytes", 0), len(step["args"])))
    else:
        print(kind)
