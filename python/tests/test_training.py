"""The training-step API: one SGD step against numpy's gradient, losses falling, state, and
checkpoints that resume bit-identically."""
import numpy as np
import pytest

import tcc


def softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def batch(rng, n=8):
    return rng.standard_normal((n, 6)).astype(np.float32), rng.integers(0, 4, n).astype(np.int64)


def test_sgd_step_matches_numpy(linear_classifier, rng):
    model, w, b = linear_classifier
    step = tcc.compile(model, train=True, loss="cross-entropy", optimizer="sgd", batch_size=8)
    assert step.is_training and step.report["entries"]
    trainer = tcc.Trainer(step, seed=3)
    assert [s.shape for s in trainer.batch_specs] == [(8, 6), (8,)]
    assert trainer.config["optimizer"] == "sgd" and trainer.config["loss"] == "cross_entropy"
    np.testing.assert_array_equal(trainer.state()["w"], w)

    x, y = batch(rng)
    p = softmax(x @ w + b)
    expected_loss = -np.log(p[np.arange(8), y]).mean()
    grad = p.copy()
    grad[np.arange(8), y] -= 1
    grad /= 8
    lr = 0.5
    loss = trainer.step(x, y, learning_rate=lr)
    assert loss == pytest.approx(expected_loss, rel=1e-5)
    state = trainer.state()
    np.testing.assert_allclose(state["w"], w - lr * x.T @ grad, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state["b"], b - lr * grad.sum(0), rtol=1e-5, atol=1e-6)
    assert trainer.steps == 1 and trainer.micro_steps == 1 and trainer.seed == 3


def test_adam_trains_and_checkpoints_resume_exactly(linear_classifier, rng, tmp_path):
    model, w, b = linear_classifier
    step = tcc.compile(model, train=True, loss="cross-entropy", optimizer="adam",
                       batch_size=8, weight_decay=0.01)
    trainer = tcc.Trainer(step)
    # A separable problem: the class is the argmax of the first four features.
    data = [batch(rng) for _ in range(40)]
    data = [(x, np.argmax(x[:, :4], 1).astype(np.int64)) for x, _ in data]
    losses = [trainer.step(x, y, learning_rate=0.05) for x, y in data[:20]]
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5])
    per_sample, predicted = trainer.eval(*data[0])
    assert per_sample.shape == (8,) and predicted.dtype == np.int64
    assert (predicted == data[0][1]).mean() >= 0.5

    trainer.save(tmp_path / "ckpt", user_data=b"epoch=1")
    optimizer_state = trainer.state(kinds=("optimizer",))
    assert optimizer_state and all(np.isfinite(v).all() for v in optimizer_state.values())
    continued = [trainer.step(x, y, learning_rate=0.05) for x, y in data[20:]]

    resumed = tcc.Trainer(step.artifact)  # the same artifact, loaded again
    assert resumed.load(tmp_path / "ckpt") == b"epoch=1"
    assert resumed.steps == 20
    again = [resumed.step(x, y, learning_rate=0.05) for x, y in data[20:]]
    assert again == continued
    for name, value in trainer.state(kinds=("parameter", "optimizer")).items():
        np.testing.assert_array_equal(resumed.state(kinds=("parameter", "optimizer"))[name], value)


def test_set_state_and_errors(linear_classifier, rng):
    model, w, b = linear_classifier
    step = tcc.compile(model, train=True, optimizer="sgd", batch_size=4)
    trainer = tcc.Trainer(step)
    trainer.set_state({"w": np.zeros_like(w), "b": np.ones_like(b)})
    x, y = batch(rng, 4)
    per_sample, _ = trainer.eval(x, y)
    np.testing.assert_allclose(per_sample, np.log(4.0), rtol=1e-6)  # equal logits
    with pytest.raises(tcc.TccError, match=r"no state tensors named \['v'\]"):
        trainer.set_state({"v": w})
    with pytest.raises(tcc.TccError, match="unknown state kinds"):
        trainer.state(kinds=("gradients",))
    with pytest.raises(tcc.TccError, match=r"batch tensor 0 \('x'\) has shape \(8, 6\)"):
        trainer.step(*batch(rng, 8), learning_rate=0.1)
    with pytest.raises(tcc.TccError, match="training artifact: run it with tcc.Trainer"):
        step(x)
    with pytest.raises(tcc.TccError, match="Trainer takes a training artifact"):
        tcc.Trainer(tcc.compile(model, input_shapes={"x": (4, 6)}))
    with pytest.raises(tcc.TccError, match="batch-size must be given"):
        tcc.compile(model, train=True)
    with pytest.raises(tcc.TccError, match="input_shape does not apply to training"):
        tcc.compile(model, train=True, batch_size=4, input_shapes={"x": (4, 6)})


def test_train_on_a_data_folder(linear_classifier, rng, tmp_path):
    """tcc.train: `tcc train`'s loop from Python, on .npy files; metrics per epoch, the trained
    model saved and usable, and the run's options kept apart from compiling's."""
    model, _, _ = linear_classifier
    path = tmp_path / "linear.onnx"
    path.write_bytes(model.SerializeToString())
    x = rng.standard_normal((320, 6)).astype(np.float32)
    y = np.argmax(x[:, :4], 1).astype(np.int64)
    data = tmp_path / "data"
    data.mkdir()
    for name, values in (("train_images", x[:256]), ("train_labels", y[:256]),
                         ("test_images", x[256:]), ("test_labels", y[256:])):
        np.save(data / f"{name}.npy", values)
    metrics = tcc.train(path, data, lr=0.05, epochs=4, seed=1, batch_size=16, optimizer="adam",
                        checkpoint=tmp_path / "ckpt", save_model=tmp_path / "trained.onnx")
    assert [m["epoch"] for m in metrics] == [1, 2, 3, 4]
    assert [m["steps"] for m in metrics] == [16, 32, 48, 64]
    assert metrics[-1]["train_loss"] < 0.7 * metrics[0]["train_loss"]
    assert metrics[-1]["test_accuracy"] > 0.8
    assert (tmp_path / "ckpt").is_dir()
    trained = tcc.compile(tmp_path / "trained.onnx", input_shapes={"x": (64, 6)})
    (logits,) = trained(x[256:])
    assert (np.argmax(logits, 1) == y[256:]).mean() == pytest.approx(metrics[-1]["test_accuracy"])

    with pytest.raises(tcc.TccError, match="--lr must be a positive learning rate"):
        tcc.train(path, data, lr=0, batch_size=16)
    with pytest.raises(tcc.TccError, match="option lr applies to training runs"):
        tcc.compile(model, lr=0.1)
