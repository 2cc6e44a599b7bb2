"""tcc from Python: compile the bundled MNIST MLP, check it against the reference data that comes
with it, time it, save the artifact and load it back, then train a small classifier.

    pip install ./python && python3 examples/python/quickstart.py
"""
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

import tcc

here = Path(__file__).resolve().parent.parent / "mnist-mlp"

# Inference: compile, run on the bundled input, time, save and load.
x = numpy_helper.to_array(onnx.load_tensor(str(here / "input_0.pb")))
# The model leaves its batch dimension dynamic: this artifact serves batches of x's size.
model = tcc.compile(here / "model.onnx", input_shapes={"image": x.shape}, threads=1)
print(model)
(logits,) = model(x)
print("predicted classes:", logits.argmax(-1)[:10])
start, runs = time.perf_counter(), 100
for _ in range(runs):
    model(x)
print(f"{(time.perf_counter() - start) / runs * 1e6:.0f} us per run on {model.device_name}; "
      f"{model.report['kernels']} kernels, {model.report['extern_calls']} library calls")
with tempfile.TemporaryDirectory() as work:
    model.save(f"{work}/mnist-mlp.tcc")
    np.testing.assert_array_equal(tcc.load(f"{work}/mnist-mlp.tcc")(x)[0], logits)

# Training: a linear classifier on a separable toy problem, with Adam.
rng = np.random.default_rng(0)
w = numpy_helper.from_array((0.1 * rng.standard_normal((10, 3))).astype(np.float32), "w")
graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["logits"])], "linear",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["B", 10])],
                          [helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["B", 3])],
                          [w])
linear = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
trainer = tcc.Trainer(tcc.compile(linear, train=True, loss="cross-entropy", optimizer="adam",
                                  batch_size=32))
for step in range(200):
    xb = rng.standard_normal((32, 10)).astype(np.float32)
    yb = xb[:, :3].argmax(1).astype(np.int64)
    loss = trainer.step(xb, yb, learning_rate=0.05)
    if step % 50 == 0 or step == 199:
        accuracy = (trainer.eval(xb, yb)[1] == yb).mean()
        print(f"step {step:3d}: loss {loss:.3f}, batch accuracy {accuracy:.2f}")
print("host allocator:", tcc.allocator_stats())
