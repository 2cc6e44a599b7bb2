"""Writes a model using two operators tcc has no lowering for (three nodes in all)."""
import sys
import onnx
from onnx import helper, TensorProto

nodes = [
    helper.make_node("Relu", ["x"], ["r"], name="relu"),
    helper.make_node("StringNormalizer", ["s"], ["n1"], name="norm1"),
    helper.make_node("StringNormalizer", ["n1"], ["n2"], name="norm2"),
    helper.make_node("Frobnicate", ["r"], ["y"], name="frob", domain="com.example"),
]
graph = helper.make_graph(
    nodes, "unsupported",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
     helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
     helper.make_tensor_value_info("n2", TensorProto.STRING, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                helper.make_opsetid("com.example", 1)])
onnx.save(model, sys.argv[1])
