"""Small ONNX models for the package's tests, written with onnx.helper (Debian's python3-onnx)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the tests build their models with the onnx package")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def mlp(rng):
    return make_mlp(rng)


def make_mlp(rng):
    """y = softmax(relu(x @ w1 + b1) @ w2), x: f32[4, 8]; returns (model, weights)."""
    w1 = rng.standard_normal((8, 16)).astype(np.float32)
    b1 = rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((16, 3)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"], name="mm1"),
             helper.make_node("Add", ["h0", "b1"], ["h1"], name="add1"),
             helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
             helper.make_node("MatMul", ["h2", "w2"], ["logits"], name="mm2"),
             helper.make_node("Softmax", ["logits"], ["y"], axis=-1, name="softmax")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])],
                   [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                    numpy_helper.from_array(w2, "w2")])
    return model, (w1, b1, w2)


def mlp_reference(x, w1, b1, w2):
    logits = np.maximum(x @ w1 + b1, 0) @ w2
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture
def two_inputs():
    return make_two_inputs()


def make_two_inputs():
    """z = a * b + a (f32[2, 3]) and its sum over axis 1 (f32[2])."""
    nodes = [helper.make_node("Mul", ["a", "b"], ["ab"]),
             helper.make_node("Add", ["ab", "a"], ["z"]),
             helper.make_node("ReduceSum", ["z"], ["s"], axes=[1], keepdims=0)]
    return _model(nodes, [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
                          helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])],
                  [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3]),
                   helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])], opset=12)


@pytest.fixture
def dynamic_batch():
    """y = x * 2 + 1 with x: f32[N, 5], N dynamic."""
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    one = numpy_helper.from_array(np.array(1, np.float32), "one")
    nodes = [helper.make_node("Mul", ["x", "two"], ["t"]),
             helper.make_node("Add", ["t", "one"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], [two, one])


@pytest.fixture
def linear_classifier(rng):
    """logits = x @ w + b, x: f32[B, 6], 4 classes; returns (model, w, b)."""
    w = (0.3 * rng.standard_normal((6, 4))).astype(np.float32)
    b = (0.1 * rng.standard_normal(4)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
             helper.make_node("Add", ["xw", "b"], ["logits"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 6])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", 4])],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return model, w, b


@pytest.fixture
def unsupported():
    """Two nodes of an operator tcc has no lowering for (StringNormalizer: tcc has no string
    tensors), feeding a Concat."""
    def normalize(name, out):
        return helper.make_node("StringNormalizer", ["x"], [out], name=name,
                                case_change_action="LOWER")
    nodes = [normalize("count_a", "ca"), normalize("count_b", "cb"),
             helper.make_node("Concat", ["ca", "cb"], ["y"], name="both", axis=0)]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.STRING, [2, 4])],
                  [helper.make_tensor_value_info("y", TensorProto.STRING, [4, 4])], opset=13)
