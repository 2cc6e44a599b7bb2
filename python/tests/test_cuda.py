"""CUDA artifacts from Python: compiled here (NVRTC, no GPU needed), refused with the runtime's
reason where no GPU is usable, and on a GPU run on host arrays and on torch CUDA tensors through
DLPack (device memory in and out, never through the host), against torch.

On the GPU machine the compiler is absent: scripts/gpu-session.sh carries the artifacts made by
`python3 python/tests/test_cuda.py --make DIR` and points $TCC_CUDA_TEST_ARTIFACTS at them.
Runs under pytest, or alone (`python3 test_cuda.py`) where pytest is missing."""
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tcc  # noqa: E402

ARTIFACTS = os.environ.get("TCC_CUDA_TEST_ARTIFACTS")


class Skip(Exception):
    pass


STANDALONE = __name__ == "__main__"


def skip(reason):
    if STANDALONE:
        raise Skip(reason)
    import pytest
    pytest.skip(reason)


def make(out_dir):
    """Compiles the test models for CUDA into out_dir, with the MLP's weights."""
    from conftest import make_mlp, make_two_inputs
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mlp, weights = make_mlp(np.random.default_rng(7))
    tcc.compile(mlp, device="cuda", arch="sm_90,sm_80").save(out / "mlp.tcc")
    np.savez(out / "mlp_weights.npz", *weights)
    tcc.compile(make_two_inputs(), device="cuda", arch="sm_90,sm_80").save(out / "two_inputs.tcc")
    # The MLP with a dynamic batch, compiled once for every batch in 1..64 (symbolic shapes).
    for t in list(mlp.graph.input) + list(mlp.graph.output):
        t.type.tensor_type.shape.dim[0].dim_param = "batch"
    tcc.compile(mlp, device="cuda", arch="sm_90,sm_80",
                input_shapes={"x": ((1, 64), 8)}).save(out / "mlp_symbolic.tcc")


def artifacts():
    """(mlp model, its weights, two_inputs model), loaded; skips where they cannot run."""
    ok, why = tcc.device_available("cuda")
    if not ok:
        skip(f"no usable CUDA GPU: {why}")
    if not ARTIFACTS:
        skip("TCC_CUDA_TEST_ARTIFACTS is not set (the GPU session sets it)")
    d = Path(ARTIFACTS)
    weights = np.load(d / "mlp_weights.npz")
    return (tcc.load(d / "mlp.tcc", cuda_graph=True), [weights[f"arr_{i}"] for i in range(3)],
            tcc.load(d / "two_inputs.tcc"))


def test_cuda_symbolic_batch_on_host_and_device():
    mlp, weights, _ = artifacts()
    model = tcc.load(Path(ARTIFACTS) / "mlp_symbolic.tcc", cuda_graph=True)
    assert model.symbols
    rng = np.random.default_rng(13)
    # Each new batch binds the sizes (memory, grids, GEMM plans, a graph captured again).
    for batch in (1, 7, 64, 7, 7, 2):
        x = rng.uniform(-1, 1, (batch, 8)).astype(np.float32)
        (y,) = model(x)
        assert y.shape == (batch, 3)
        np.testing.assert_allclose(y, mlp_reference(x, *weights), rtol=2e-3, atol=1e-4)
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        for batch in (5, 33):
            x = torch.rand((batch, 8), device=torch.device("cuda", 0)) * 2 - 1
            (y,) = model(x)
            assert y.is_cuda and tuple(y.shape) == (batch, 3)
            np.testing.assert_allclose(y.cpu().numpy(), mlp_reference(x.cpu().numpy(), *weights),
                                       rtol=2e-3, atol=1e-4)


def mlp_reference(x, w1, b1, w2):
    logits = np.maximum(x @ w1 + b1, 0) @ w2
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_cuda_compile_here_and_clear_refusal_without_gpu(tmp_path=None):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        try:
            make(d)
        except tcc.TccError as e:
            if "without the CUDA toolkit" in str(e) or "libtcc.so.0 not found" in str(e):
                skip(f"cannot compile for CUDA here: {e}")
            raise
        data = (Path(d) / "two_inputs.tcc").read_bytes()
        ok, why = tcc.device_available("cuda")
        if ok:
            assert tcc.load(data).device == "cuda"
        else:
            try:
                tcc.load(data)
            except tcc.TccError as e:
                assert "no usable CUDA GPU/driver" in str(e), e
            else:
                raise AssertionError("a CUDA artifact loaded without a usable GPU")


def test_cuda_host_arrays():
    mlp, weights, two = artifacts()
    assert mlp.device == "cuda" and mlp.device_name.startswith("cuda:0")
    rng = np.random.default_rng(11)
    for _ in range(3):  # the first run launches plainly, the second captures the graph
        x = rng.uniform(-1, 1, (4, 8)).astype(np.float32)
        np.testing.assert_allclose(mlp(x)[0], mlp_reference(x, *weights), rtol=2e-3, atol=1e-4)
    a, b = (rng.uniform(-1, 1, (2, 3)).astype(np.float32) for _ in range(2))
    z, s = two(a, b)
    np.testing.assert_allclose(z, a * b + a, rtol=1e-6)
    stats = mlp.device_allocator_stats()
    assert stats["allocated_bytes"] > 0


def test_cuda_torch_tensors_stay_on_the_device():
    mlp, weights, two = artifacts()
    try:
        import torch
    except ImportError:
        skip("torch is not installed")
    if not torch.cuda.is_available():
        skip("torch has no CUDA here")
    dev = torch.device("cuda", 0)
    gen = torch.Generator(device=dev).manual_seed(3)
    for _ in range(3):
        # Produced on torch's stream just before the call: the DLPack hand-off orders it.
        x = torch.rand((4, 8), generator=gen, device=dev) * 2 - 1
        (y,) = mlp(x)
        assert y.is_cuda and y.shape == (4, 3) and y.dtype == torch.float32
        ref = mlp_reference(x.cpu().numpy(), *weights)
        np.testing.assert_allclose(y.cpu().numpy(), ref, rtol=2e-3, atol=1e-4)
    a = torch.rand((2, 3), device=dev, requires_grad=True)
    b = torch.rand((2, 3), device=dev)
    out = [torch.full((2, 3), float("nan"), device=dev), torch.full((2,), float("nan"), device=dev)]
    z, s = two(a, b, out=out)
    assert z is out[0]
    torch.testing.assert_close(z, (a * b + a).detach())
    torch.testing.assert_close(s, (a * b + a).detach().sum(1))
    for bad, message in (((a.double(), b), "is float64[2, 3], the model expects float32[2, 3]"),
                         ((a.detach().t().contiguous().t(), b), "is strided"),
                         ((a, b.cpu()), "give every tensor in the memory of the program's GPU")):
        try:
            two(*bad)
        except tcc.TccError as e:
            assert message in str(e), e
        else:
            raise AssertionError(f"no error for {message}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--make":
        make(sys.argv[2])
        sys.exit(0)
    failed = 0
    for name, test in list(globals().items()):
        if name.startswith("test_"):
            try:
                test()
                print(f"{name}: passed")
            except Skip as e:
                print(f"{name}: skipped: {e}")
            except Exception as e:  # noqa: BLE001
                failed += 1
                print(f"{name}: FAILED: {type(e).__name__}: {e}")
    sys.exit(1 if failed else 0)
