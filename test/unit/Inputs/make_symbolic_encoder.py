"""Writes symbolic-encoder.onnx: one self-attention block whose batch and sequence axes are
dynamic (dim_params "batch" and "seq"), in the form exporters write it: the head split reads
Shape(x) through Gather/Unsqueeze/Concat, the merge reshapes with 0 and -1, LayerNormalization
comes from ONNX's function body; a second output is a ReduceMean over the sequence.

  make_symbolic_encoder.py OUT.onnx      (Debian's python3: numpy, onnx; seeded)

The file is committed (test/unit/Inputs/symbolic-encoder.onnx); SymbolicShapeTest reads it.
"""
import numpy as np, onnx, sys
from onnx import helper, numpy_helper, TensorProto as TP
rng = np.random.default_rng(0)
D, H = 16, 2
nodes, inits = [], []
def init(name, a):
    inits.append(numpy_helper.from_array(np.asarray(a), name)); return name
def node(op, ins, out, **kw):
    nodes.append(helper.make_node(op, ins, [out], name=out, **kw)); return out
w = [init(f"w{i}", rng.standard_normal((D, D)).astype(np.float32) / 4) for i in range(4)]
shape = node("Shape", ["x"], "shape")
b = node("Gather", [shape, init("i0", np.array(0, np.int64))], "b", axis=0)
s = node("Gather", [shape, init("i1", np.array(1, np.int64))], "s", axis=0)
b1 = node("Unsqueeze", [b, init("ax0", np.array([0], np.int64))], "b1")
s1 = node("Unsqueeze", [s, init("ax0b", np.array([0], np.int64))], "s1")
heads = node("Concat", [b1, s1, init("hd", np.array([H, D // H], np.int64))], "heads", axis=0)
def split(t, name):
    r = node("Reshape", [t, heads], name + "_r")
    return node("Transpose", [r], name + "_t", perm=[0, 2, 1, 3])
q = split(node("MatMul", ["x", w[0]], "q"), "q")
k = split(node("MatMul", ["x", w[1]], "k"), "k")
v = split(node("MatMul", ["x", w[2]], "v"), "v")
kt = node("Transpose", [k], "kt", perm=[0, 1, 3, 2])
sc = node("Div", [node("MatMul", [q, kt], "qk"), init("scale", np.array(np.sqrt(D // H), np.float32))], "sc")
m = node("Unsqueeze", ["mask", init("ax12", np.array([1, 2], np.int64))], "m")
p = node("Softmax", [node("Add", [sc, m], "scm")], "p", axis=-1)
o = node("Transpose", [node("MatMul", [p, v], "pv")], "o", perm=[0, 2, 1, 3])
o = node("Reshape", [o, init("back", np.array([0, 0, -1], np.int64))], "o2")
y = node("Add", [node("MatMul", [o, w[3]], "proj"), init("bias", rng.standard_normal(D).astype(np.float32))], "y")
y = node("LayerNormalization", [y, init("g", np.ones(D, np.float32)), init("beta", np.zeros(D, np.float32))], "ln", axis=-1)
y = node("Relu", [y], "out")
# Mean over the sequence (an element count that is a size symbol, read at run time).
node("ReduceMean", ["x"], "mean", axes=[1], keepdims=0)
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, ["batch", "seq", D]),
                                   helper.make_tensor_value_info("mask", TP.FLOAT, ["batch", "seq"])],
                      [helper.make_tensor_value_info("out", TP.FLOAT, ["batch", "seq", D]),
                       helper.make_tensor_value_info("mean", TP.FLOAT, ["batch", D])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
