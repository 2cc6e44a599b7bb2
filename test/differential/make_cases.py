#!/usr/bin/python3
"""Random small ONNX graphs for differential testing of the compiled backends.

Writes N cases in the ONNX backend-test layout (DIR/<case>/model.onnx and
test_data_set_0/input_<i>.pb) with fresh random inputs (never zeros). The expected outputs are
not written here: run_differential.sh computes them with the reference interpreter, so every
backend is compared against the interpreter on the same inputs.

Families: elementwise chains with broadcasting, reductions over random axes (incl. softmax and
layer-norm rows), transposes and reshapes, matmuls (batched, broadcast) with bias/activation
epilogues, convolutions (strides, pads, dilations, groups) and pooling, concat/slice/gather,
scaled dot-product attention in exporters' forms.

Uses Debian's python3-onnx (onnx 1.12) and numpy: run with /usr/bin/python3.
"""
import argparse
import os
import random

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class Graph:
    def __init__(self, rng, nprng):
        self.rng, self.np = rng, nprng
        self.nodes, self.inputs, self.values, self.inits = [], [], [], []
        self.count = 0

    def name(self, prefix):
        self.count += 1
        return f"{prefix}{self.count}"

    def input(self, shape, positive=False):
        n = self.name("x")
        data = self.np.uniform(0.25 if positive else -2.0, 2.0, size=shape).astype(np.float32)
        if not positive:  # keep values away from zero (division, logs)
            data[np.abs(data) < 0.05] = 0.5
        self.inputs.append((n, data))
        return n, list(shape)

    def const(self, array):
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def node(self, op, ins, **attrs):
        out = self.name(op.lower() + "_")
        self.nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    @staticmethod
    def output_info(name):
        vi = onnx.ValueInfoProto()
        vi.name = name
        vi.type.tensor_type.elem_type = TensorProto.FLOAT
        return vi

    def model(self, outputs):
        g = helper.make_graph(
            self.nodes, "random",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, d.shape) for n, d in self.inputs],
            [self.output_info(o) for o in outputs],
            self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 8
        # Graph outputs need a shape: take the inferred ones.
        inferred = onnx.shape_inference.infer_shapes(m)
        types = {vi.name: vi.type for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
        for out in m.graph.output:
            out.type.CopyFrom(types[out.name])
        return m


def rand_shape(rng, rank, lo=1, hi=7):
    return [rng.randint(lo, hi) for _ in range(rank)]


def broadcast_partner(rng, shape):
    """A shape that broadcasts against `shape` (some dims 1, maybe fewer dims)."""
    keep = rng.randint(0, len(shape))
    s = [d if rng.random() < 0.6 else 1 for d in shape[len(shape) - keep:]] if keep else []
    return s


UNARY = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Erf", "Softsign", "Floor", "Ceil"]
BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"]


def elementwise_chain(g, x, shape, rng, length):
    for _ in range(length):
        r = rng.random()
        if r < 0.45:
            op = rng.choice(UNARY)
            if op == "Exp":
                x = g.node("Tanh", [x])
            x = g.node(op, [x])
        elif r < 0.9:
            op = rng.choice(BINARY)
            other, _ = g.input(broadcast_partner(rng, shape), positive=op in ("Div", "Pow"))
            if op == "Pow":
                x = g.node("Abs", [x])
                x = g.node("Add", [x, g.const(np.float32(0.5))])
            x = g.node(op, [x, other] if rng.random() < 0.5 or op in ("Div", "Pow") else [other, x])
        else:
            cond = g.node("Greater", [x, g.const(np.float32(0.0))])
            other, _ = g.input(shape)
            x = g.node("Where", [cond, x, other])
    return x


def family_elementwise(g, rng):
    shape = rand_shape(rng, rng.randint(1, 4))
    x, _ = g.input(shape)
    return [elementwise_chain(g, x, shape, rng, rng.randint(2, 7))]


def family_reduce(g, rng):
    rank = rng.randint(1, 4)
    shape = rand_shape(rng, rank, 2, 9)
    x, _ = g.input(shape)
    x = elementwise_chain(g, x, shape, rng, rng.randint(0, 2))
    axes = sorted(rng.sample(range(rank), rng.randint(1, rank)))
    op = rng.choice(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                     "ReduceL2", "ReduceLogSumExp", "ArgMax", "Softmax", "LayerNorm"])
    keep = rng.randint(0, 1)
    if op == "ReduceSum":
        return [g.node(op, [x, g.const(np.array(axes, np.int64))], keepdims=keep)]
    if op == "ArgMax":
        a = g.node(op, [x], axis=axes[0], keepdims=keep)
        return [g.node("Cast", [a], to=TensorProto.FLOAT)]
    if op == "Softmax":
        return [g.node("Softmax", [x], axis=axes[-1] - rank)]
    if op == "LayerNorm":
        axis = axes[0]
        ns = shape[axis:]
        scale = g.const(g.np.uniform(0.5, 1.5, size=ns).astype(np.float32))
        bias = g.const(g.np.uniform(-1, 1, size=ns).astype(np.float32))
        return [g.node("LayerNormalization", [x, scale, bias], axis=axis, epsilon=1e-5)]
    if op == "ReduceProd":
        x = g.node("Sigmoid", [x])
    r = g.node(op, [x], axes=axes, keepdims=keep)
    if keep and rng.random() < 0.6:  # use the reduction against its input (row fusion)
        r = g.node("Sub", [x, r])
    return [r]


def family_layout(g, rng):
    rank = rng.randint(2, 4)
    shape = rand_shape(rng, rank, 2, 6)
    x, _ = g.input(shape)
    perm = list(range(rank))
    rng.shuffle(perm)
    t = g.node("Transpose", [x], perm=perm)
    tshape = [shape[p] for p in perm]
    t = elementwise_chain(g, t, tshape, rng, rng.randint(1, 3))
    choice = rng.random()
    if choice < 0.3:
        total = int(np.prod(tshape))
        t = g.node("Reshape", [t, g.const(np.array([tshape[0], total // tshape[0]], np.int64))])
    elif choice < 0.55:
        y, _ = g.input(tshape)
        t = g.node("Concat", [t, y], axis=rng.randrange(rank))
    elif choice < 0.8:
        axis = rng.randrange(rank)
        start = rng.randint(0, tshape[axis] - 1)
        t = g.node("Slice", [t, g.const(np.array([start], np.int64)),
                             g.const(np.array([tshape[axis]], np.int64)),
                             g.const(np.array([axis], np.int64))])
    else:
        axis = rng.randrange(rank)
        idx = g.np.integers(-tshape[axis], tshape[axis], size=rng.randint(1, 5)).astype(np.int64)
        t = g.node("Gather", [t, g.const(idx)], axis=axis)
    return [t]


def family_matmul(g, rng):
    m, k, n = rng.randint(1, 40), rng.randint(1, 40), rng.randint(1, 40)
    batch = rand_shape(rng, rng.randint(0, 2), 1, 4)
    a, _ = g.input(batch + [m, k])
    if rng.random() < 0.5:
        b = g.const(g.np.uniform(-1, 1, size=(k, n)).astype(np.float32))
    else:
        b, _ = g.input([1 if (d > 1 and rng.random() < 0.3) else d for d in batch] + [k, n])
    y = g.node("MatMul", [a, b])
    if rng.random() < 0.7:
        y = g.node("Add", [y, g.const(g.np.uniform(-1, 1, size=(n,)).astype(np.float32))])
    act = rng.choice([None, "Relu", "Sigmoid", "Tanh"])
    if act:
        y = g.node(act, [y])
    return [y]


def family_gemm(g, rng):
    m, k, n = rng.randint(1, 50), rng.randint(1, 50), rng.randint(1, 50)
    ta, tb = rng.randint(0, 1), rng.randint(0, 1)
    a, _ = g.input([k, m] if ta else [m, k])
    b = g.const(g.np.uniform(-1, 1, size=(n, k) if tb else (k, n)).astype(np.float32))
    c = g.const(g.np.uniform(-1, 1, size=(n,)).astype(np.float32))
    y = g.node("Gemm", [a, b, c], transA=ta, transB=tb, alpha=rng.choice([1.0, 0.5]),
               beta=rng.choice([1.0, 2.0]))
    return [g.node("Relu", [y]) if rng.random() < 0.5 else y]


def family_conv(g, rng):
    dims = rng.choice([1, 2, 2, 2, 3])
    groups = rng.choice([1, 1, 2])
    cin = groups * rng.randint(1, 4)
    cout = groups * rng.randint(1, 4)
    spatial = [rng.randint(6, 10) for _ in range(dims)]
    kernel = [rng.randint(1, 3) for _ in range(dims)]
    strides = [rng.randint(1, 2) for _ in range(dims)]
    dil = [rng.randint(1, 2) for _ in range(dims)]
    pads = [rng.randint(0, 1) for _ in range(2 * dims)]
    x, _ = g.input([rng.randint(1, 2), cin] + spatial)
    w = g.const(g.np.uniform(-1, 1, size=[cout, cin // groups] + kernel).astype(np.float32))
    bias = g.const(g.np.uniform(-1, 1, size=[cout]).astype(np.float32))
    y = g.node("Conv", [x, w, bias], kernel_shape=kernel, strides=strides, dilations=dil,
               pads=pads, group=groups)
    act = rng.random()
    if act < 0.4:
        y = g.node("Relu", [y])
    elif act < 0.55:  # SiLU as torch exports it
        y = g.node("Mul", [y, g.node("Sigmoid", [y])])
    elif act < 0.7:
        y = g.node("HardSwish", [y])
    out = [(s + pads[i] + pads[dims + i] - d * (k - 1) - 1) // st + 1
           for i, (s, k, st, d) in enumerate(zip(spatial, kernel, strides, dil))]
    if rng.random() < 0.4 and dims == 2 and min(out) >= 2:  # a 2x2 window fits
        pool = rng.choice(["MaxPool", "AveragePool"])
        y = g.node(pool, [y], kernel_shape=[2, 2], strides=[1, 1])
    if rng.random() < 0.3:
        y = g.node("GlobalAveragePool", [y])
    return [y]


def family_atrous(g, rng):
    """Dilated convolutions on maps not much larger than their dilation (DeepLab's atrous
    pyramid): outer taps that read only padding, trimmed by the compiler (-tcc-trim-conv-taps),
    and (the large ones) taps that read padding at many positions, split into regions."""
    if rng.random() < 0.3:  # large enough to be split into regions by live taps
        dims, cin, cout = 2, rng.randint(48, 96), rng.randint(48, 96)
        spatial = [rng.randint(10, 16) for _ in range(dims)]
        kernel = [3, 3]
        strides = [rng.choice([1, 1, 2]) for _ in range(dims)]
        dil = [rng.randint(4, 12) for _ in range(dims)]
        pads = dil + dil
    else:
        dims = rng.choice([1, 2, 2])
        cin, cout = rng.randint(1, 5), rng.randint(1, 5)
        spatial = [rng.randint(2, 9) for _ in range(dims)]
        kernel = [rng.choice([2, 3, 3, 5]) for _ in range(dims)]
        strides = [rng.choice([1, 1, 2]) for _ in range(dims)]
        dil = [rng.randint(2, 12) for _ in range(dims)]
        pads = [rng.randint(0, d * (k - 1)) for d, k in zip(dil + dil, kernel + kernel)]  # lows, highs
    for i in range(dims):  # at least one output position
        need = dil[i] * (kernel[i] - 1) + 1 - spatial[i] - pads[i] - pads[dims + i]
        if need > 0:
            pads[dims + i] += need
    x, _ = g.input([1, cin] + spatial)
    w = g.const(g.np.uniform(-1, 1, size=[cout, cin] + kernel).astype(np.float32))
    bias = g.const(g.np.uniform(-1, 1, size=[cout]).astype(np.float32))
    return [g.node("Conv", [x, w, bias], kernel_shape=kernel, strides=strides, dilations=dil, pads=pads)]


def family_attention(g, rng):
    """Scaled dot-product attention as exporters write it (the CPU recognises it and runs its
    fused kernel): heads split from [B, L, H*D] or given, grouped-query keys and values repeated
    by Unsqueeze + Expand + Reshape, the scale on the scores or on q and k^T, an additive or a
    boolean mask (or a constant causal triangle), lengths across the kernel's blocks."""
    b, hkv = rng.randint(1, 2), rng.randint(1, 2)
    h = hkv * rng.choice([1, 1, 2, 3])
    lq = rng.choice([1, rng.randint(2, 20), rng.randint(60, 140)])
    lk = lq if rng.random() < 0.5 else rng.choice([rng.randint(1, 30), rng.randint(250, 300)])
    d, dv = rng.choice([4, 8, 16]), rng.choice([4, 8, 12])
    q, _ = g.input([b, h, lq, d])
    k, _ = g.input([b, hkv, lk, d])
    v, _ = g.input([b, hkv, lk, dv])
    if hkv != h:  # repeat_kv
        rep = h // hkv
        for name in ("k", "v"):
            x = k if name == "k" else v
            width = d if name == "k" else dv
            x = g.node("Unsqueeze", [x, g.const(np.array([2], np.int64))])
            x = g.node("Expand", [x, g.const(np.array([b, hkv, rep, lk, width], np.int64))])
            x = g.node("Reshape", [x, g.const(np.array([b, h, lk, width], np.int64))])
            if name == "k":
                k = x
            else:
                v = x
    kt = g.node("Transpose", [k], perm=[0, 1, 3, 2])
    scale = float(1 / np.sqrt(d))
    how = rng.choice(["div", "mul", "both"])
    if how == "both":
        root = g.const(np.array(np.sqrt(scale), np.float32))
        s = g.node("MatMul", [g.node("Mul", [q, root]), g.node("Mul", [kt, root])])
    else:
        s = g.node("MatMul", [q, kt])
        s = g.node("Div", [s, g.const(np.array(np.sqrt(d), np.float32))]) if how == "div" else \
            g.node("Mul", [s, g.const(np.array(scale, np.float32))])
    mask = rng.choice(["none", "additive", "bool", "causal"] if lq == lk else
                      ["none", "additive", "bool"])
    if mask == "additive":
        m, _ = g.input(rng.choice([[b, 1, 1, lk], [1, 1, lq, lk]]))
        s = g.node("Add", [s, m])
    elif mask == "bool":
        keep = g.np.random(size=(b, 1, lq, lk)) < 0.7
        keep[..., 0] = True
        fill = rng.choice([-np.inf, float(np.finfo(np.float32).min)])
        s = g.node("Where", [g.const(keep), s, g.const(np.array(fill, np.float32))])
    elif mask == "causal":
        tri = np.tril(np.ones((lq, lk), dtype=bool))[None, None]
        s = g.node("Where", [g.const(tri), s, g.const(np.array(-np.inf, np.float32))])
    p = g.node("Softmax", [s], axis=-1)
    return [g.node("MatMul", [p, v])]


FAMILIES = [family_elementwise, family_reduce, family_layout, family_matmul, family_gemm,
            family_conv, family_atrous, family_attention]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("--cases", type=int, default=60)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--families", nargs="+", choices=[f.__name__[len("family_"):] for f in FAMILIES],
                   help="only these families (default: all, in turn)")
    args = p.parse_args()
    families = [f for f in FAMILIES if not args.families or f.__name__[len("family_"):] in args.families]
    rng = random.Random(args.seed)
    for i in range(args.cases):
        family = families[i % len(families)]
        g = Graph(random.Random(rng.random()), np.random.default_rng(rng.randrange(1 << 30)))
        outputs = family(g, g.rng)
        name = f"diff_{i:03d}_{family.__name__[len('family_'):]}"
        case = os.path.join(args.out_dir, name)
        os.makedirs(os.path.join(case, "test_data_set_0"), exist_ok=True)
        model = g.model(outputs)
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(case, "model.onnx"))
        for j, (n, data) in enumerate(g.inputs):
            t = numpy_helper.from_array(data, n)
            with open(os.path.join(case, "test_data_set_0", f"input_{j}.pb"), "wb") as f:
                f.write(t.SerializeToString())


if __name__ == "__main__":
    main()
