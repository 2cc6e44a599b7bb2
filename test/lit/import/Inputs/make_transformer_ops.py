"""Opset-23 transformer operators (RMSNormalization, RotaryEmbedding, Attention) in small models,
written with Debian's onnx 1.12 (whose helper does not check operators it does not know)."""
import sys
from pathlib import Path

from onnx import TensorProto, helper

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
F, B = TensorProto.FLOAT, TensorProto.BOOL


def save(name, nodes, inputs, outputs):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    (out / f"{name}.onnx").write_bytes(model.SerializeToString())


q, k, v = ("q", F, [2, 4, 8, 16]), ("k", F, [2, 2, 8, 16]), ("v", F, [2, 2, 8, 16])
save("attention", [helper.make_node("Attention", ["q", "k", "v", "mask"], ["y"], is_causal=1)],
     [q, k, v, ("mask", B, [8, 8])], [("y", F, [2, 4, 8, 16])])
save("attention_softcap", [helper.make_node("Attention", ["q", "k", "v"], ["y"], softcap=30.0)],
     [q, k, v], [("y", F, [2, 4, 8, 16])])
save("attention_3d", [helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=4,
                                       kv_num_heads=2)],
     [("q", F, [2, 8, 64]), ("k", F, [2, 8, 32]), ("v", F, [2, 8, 32])], [("y", F, [2, 8, 64])])
save("attention_3d_no_heads", [helper.make_node("Attention", ["q", "k", "v"], ["y"])],
     [("q", F, [2, 8, 64]), ("k", F, [2, 8, 32]), ("v", F, [2, 8, 32])], [("y", F, [2, 8, 64])])
save("rms", [helper.make_node("RMSNormalization", ["x", "scale"], ["y"], axis=-1, epsilon=1e-6)],
     [("x", F, [2, 3, 8]), ("scale", F, [8])], [("y", F, [2, 3, 8])])
save("rotary", [helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"],
                                 interleaved=1)],
     [("x", F, [1, 2, 3, 8]), ("cos", F, [16, 4]), ("sin", F, [16, 4]),
      ("pos", TensorProto.INT64, [1, 3])], [("y", F, [1, 2, 3, 8])])
