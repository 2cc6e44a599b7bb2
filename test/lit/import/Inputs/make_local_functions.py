"""Models calling model-local functions (ModelProto.functions), as PyTorch's dynamo exporter
writes them: one whose function computes a hard swish with an attribute given by the caller, one
whose function body uses an operator tcc lacks."""
import sys
from pathlib import Path

from onnx import TensorProto, helper

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
F = TensorProto.FLOAT
opsets = [helper.make_opsetid("", 17), helper.make_opsetid("my.lib", 1)]

# my.lib::ScaledHardSwish(x) = HardSwish(x) * scale, scale an attribute of the call.
scale = helper.make_attribute("value_float", 0.0)
scale.ref_attr_name = "scale"
body = [helper.make_node("HardSwish", ["x"], ["h"]),
        helper.make_node("Constant", [], ["s"], name="scale_const"),
        helper.make_node("Mul", ["h", "s"], ["y"])]
body[1].attribute.append(scale)
fn = helper.make_function("my.lib", "ScaledHardSwish", ["x"], ["y"], body, opsets[:1], ["scale"])
graph = helper.make_graph(
    [helper.make_node("ScaledHardSwish", ["x"], ["y"], domain="my.lib", name="call", scale=2.0)],
    "g", [helper.make_tensor_value_info("x", F, [4])], [helper.make_tensor_value_info("y", F, [4])])
model = helper.make_model(graph, opset_imports=opsets, functions=[fn])
(out / "local_function.onnx").write_bytes(model.SerializeToString())

# A body with an operator tcc has no lowering for: reported with the node inside the function.
bad = helper.make_function("my.lib", "Counts", ["x"], ["y"],
                           [helper.make_node("StringNormalizer", ["x"], ["y"], name="inside",
                                             case_change_action="LOWER")],
                           opsets[:1], [])
graph = helper.make_graph(
    [helper.make_node("Counts", ["x"], ["y"], domain="my.lib", name="call")],
    "g", [helper.make_tensor_value_info("x", TensorProto.STRING, [4])],
    [helper.make_tensor_value_info("y", TensorProto.STRING, [4])])
model = helper.make_model(graph, opset_imports=opsets, functions=[bad])
(out / "local_function_unsupported.onnx").write_bytes(model.SerializeToString())
