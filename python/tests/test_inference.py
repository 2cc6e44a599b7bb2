"""Compiling and running models through the package: against numpy references on fresh random
inputs, every way of giving a model and its inputs, saving and loading, and the errors."""
import threading

import numpy as np
import pytest

import tcc
from conftest import mlp_reference


def random_input(rng, shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("given", ["path", "bytes", "proto"])
def test_compile_and_run_matches_numpy(mlp, rng, tmp_path, given):
    model, weights = mlp
    path = tmp_path / "mlp.onnx"
    path.write_bytes(model.SerializeToString())
    source = {"path": str(path), "bytes": model.SerializeToString(), "proto": model}[given]
    compiled = tcc.compile(source)
    assert compiled.device == "cpu" and compiled.device_name.startswith("cpu")
    assert [(s.name, s.dtype_name, s.shape) for s in compiled.inputs] == [("x", "float32", (4, 8))]
    assert [(s.name, s.shape) for s in compiled.outputs] == [("y", (4, 3))]
    assert compiled.report["kernels"] + compiled.report["extern_calls"] > 0
    for _ in range(3):
        x = random_input(rng, (4, 8))
        (y,) = compiled(x)
        np.testing.assert_allclose(y, mlp_reference(x, *weights), rtol=1e-5, atol=1e-6)


def test_save_and_load(mlp, rng, tmp_path):
    model, weights = mlp
    compiled = tcc.compile(model, threads=1)
    x = random_input(rng, (4, 8))
    expected = compiled(x)[0]
    compiled.save(tmp_path / "mlp.tcc")
    from_file = tcc.load(tmp_path / "mlp.tcc", threads=2)
    from_bytes = tcc.load((tmp_path / "mlp.tcc").read_bytes())
    assert from_file.report is None
    np.testing.assert_array_equal(from_file(x)[0], expected)
    np.testing.assert_array_equal(from_bytes(x)[0], expected)


def test_inputs_by_name_and_out_arrays(two_inputs, rng):
    compiled = tcc.compile(two_inputs)
    a, b = random_input(rng, (2, 3)), random_input(rng, (2, 3))
    z, s = compiled(b=b, a=a)
    np.testing.assert_allclose(z, a * b + a, rtol=1e-6)
    np.testing.assert_allclose(s, (a * b + a).sum(1), rtol=1e-5)
    out = [np.full((2, 3), np.nan, np.float32), np.full(2, np.nan, np.float32)]
    results = compiled(a, b, out=out)
    assert results[0] is out[0] and results[1] is out[1]
    np.testing.assert_array_equal(out[0], z)
    # Strided inputs are made contiguous; Python lists are converted.
    wide = random_input(rng, (2, 6))
    np.testing.assert_allclose(compiled(wide[:, ::2], b)[0], wide[:, ::2] * b + wide[:, ::2],
                               rtol=1e-6)
    np.testing.assert_allclose(compiled(a.tolist(), b)[0], z, rtol=1e-6)


class DLPackOnly:
    """A tensor that only speaks DLPack (as torch's and other frameworks' CPU tensors do)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_inputs_are_not_copied(two_inputs, rng):
    compiled = tcc.compile(two_inputs)
    a, b = random_input(rng, (2, 3)), random_input(rng, (2, 3))
    view = tcc._as_array(DLPackOnly(a), compiled.inputs[0], "input 0")
    assert np.shares_memory(view, a)
    z, _ = compiled(DLPackOnly(a), DLPackOnly(b))
    np.testing.assert_allclose(z, a * b + a, rtol=1e-6)


def test_torch_tensors_in_and_out(two_inputs, rng):
    torch = pytest.importorskip("torch", reason="torch is not installed in this environment")
    compiled = tcc.compile(two_inputs)
    a = torch.from_numpy(random_input(rng, (2, 3))).requires_grad_()
    b = torch.from_numpy(random_input(rng, (2, 3)))
    z, s = compiled(a, b)
    assert isinstance(z, torch.Tensor) and isinstance(s, torch.Tensor)
    torch.testing.assert_close(z, (a * b + a).detach())


def test_input_shapes_fix_a_dynamic_dimension(dynamic_batch, rng):
    with pytest.raises(tcc.TccError, match="'x' has a dynamic shape"):
        tcc.compile(dynamic_batch)
    compiled = tcc.compile(dynamic_batch, input_shapes={"x": (3, 5)})
    x = random_input(rng, (3, 5))
    np.testing.assert_allclose(compiled(x)[0], x * 2 + 1, rtol=1e-6)
    with pytest.raises(tcc.TccError, match=r"input 0 \('x'\) has shape \(4, 5\), the model was "
                                           r"compiled for \(3, 5\)"):
        compiled(random_input(rng, (4, 5)))


def test_size_ranges_make_one_program_for_every_size(dynamic_batch, rng):
    compiled = tcc.compile(dynamic_batch, input_shapes={"x": ((1, 8), 5)})
    assert compiled.symbols == {"N": (1, 8)}
    assert compiled.input_dims(0) == ("N", 5)
    assert compiled.inputs[0].shape == (-1, 5)  # unbound until the sizes are known
    for n in (1, 3, 8, 3):
        x = random_input(rng, (n, 5))
        (y,) = compiled(x)
        assert y.shape == (n, 5)
        np.testing.assert_allclose(y, x * 2 + 1, rtol=1e-6)
    compiled.set_input_shapes((6, 5))
    assert compiled.outputs[0].shape == (6, 5)
    assert compiled.arena_bytes == 0  # x * 2 + 1 is one kernel: no temporaries
    out = [np.empty((6, 5), np.float32)]
    x = random_input(rng, (6, 5))
    compiled(x, out=out)
    np.testing.assert_allclose(out[0], x * 2 + 1, rtol=1e-6)
    with pytest.raises(tcc.TccError, match=r"input 'x' dim 0 is 9, outside the compiled "
                                           r"assumption N in 1\.\.8"):
        compiled(random_input(rng, (9, 5)))
    # The range is also a string; a saved artifact keeps the ranges.
    again = tcc.compile(dynamic_batch, input_shapes={"x": ("2..4", 5)})
    assert again.symbols == {"N": (2, 4)}


def test_bad_inputs_are_clear_errors(two_inputs, rng):
    compiled = tcc.compile(two_inputs)
    a = random_input(rng, (2, 3))
    with pytest.raises(tcc.TccError, match=r"input 1 \('b'\) is float64, the model expects float32"):
        compiled(a, a.astype(np.float64))
    with pytest.raises(tcc.TccError, match=r"1 inputs given, the program takes 2 \(a, b\)"):
        compiled(a)
    with pytest.raises(tcc.TccError, match=r"missing \['b'\], unknown \['c'\]"):
        compiled(a=a, c=a)
    with pytest.raises(tcc.TccError, match=r"out\[1\] must be a writeable C-contiguous"):
        compiled(a, a, out=[np.empty((2, 3), np.float32), np.empty(3, np.float32)])


def test_compile_errors_name_the_problem(unsupported, tmp_path):
    with pytest.raises(tcc.TccError) as e:
        tcc.compile(unsupported)
    message = str(e.value)
    assert "StringNormalizer" in message and "count_a" in message and "count_b" in message
    with pytest.raises(tcc.TccError, match="not a valid ONNX model"):
        tcc.compile(b"\x08\x07garbage")
    with pytest.raises(tcc.TccError, match="cannot open model file"):
        tcc.compile(str(tmp_path / "missing.onnx"))
    with pytest.raises(tcc.TccError, match="unknown option 'optimiser'"):
        tcc.compile(unsupported, optimiser="adam")
    with pytest.raises(tcc.TccError, match="momentum applies to training artifacts"):
        tcc.compile(unsupported, momentum=0.9)
    with pytest.raises(tcc.TccError, match="--precision 'fp8'"):
        tcc.compile(unsupported, precision="fp8")
    with pytest.raises(tcc.TccError, match="--layout 'nchw16c'"):
        tcc.compile(unsupported, layout="nchw16c")
    with pytest.raises(TypeError, match="model must be a path, bytes or an onnx.ModelProto"):
        tcc.compile(42)


def test_damaged_artifact_is_refused(mlp):
    artifact = bytearray(tcc.compile(mlp[0]).artifact)
    artifact[len(artifact) // 2] ^= 0xFF
    with pytest.raises(tcc.TccError, match="loading the artifact"):
        tcc.load(bytes(artifact))


def test_models_run_concurrently(mlp, rng):
    model, weights = mlp
    compiled = [tcc.compile(model, threads=1) for _ in range(2)]
    xs = [random_input(rng, (4, 8)) for _ in range(2)]
    results = [None, None]

    def run(i):
        for _ in range(20):
            results[i] = compiled[i](xs[i])[0]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        np.testing.assert_allclose(results[i], mlp_reference(xs[i], *weights), rtol=1e-5,
                                   atol=1e-6)


def test_profile_and_allocator(mlp, rng):
    compiled = tcc.compile(mlp[0])
    rows = compiled.profile(random_input(rng, (4, 8)), runs=3)
    assert rows and all(r["calls"] == 3 for r in rows)
    assert any("mm1" in r["nodes"] for r in rows)
    stats = tcc.allocator_stats()
    assert stats["peak_allocated_bytes"] >= stats["allocated_bytes"]
    assert stats["num_allocs"] > 0
    tcc.empty_cache()
    assert tcc.device_available("cpu") == (True, "")
    ok, why = tcc.device_available("cuda")
    assert ok or why
    assert tcc.runtime_version().startswith("tccrt") and tcc.compiler_version().startswith("tcc")
    with pytest.raises(tcc.TccError, match="device_allocator_stats"):
        compiled.device_allocator_stats()
