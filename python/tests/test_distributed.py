"""Data-parallel training from Python: two processes under mpirun, each a tcc.Trainer on its block
of the global batch, give the losses and parameters of one process training on the whole
batch."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tcc

WORKER = r'''
import json, sys
import numpy as np
import tcc
artifact, data, out = sys.argv[1:4]
trainer = tcc.Trainer(artifact, seed=5)
batches = np.load(data)
xs, ys = batches["x"], batches["y"]
rows = trainer.batch_specs[0].shape[0]
block = slice(trainer.data_position * rows, (trainer.data_position + 1) * rows)
losses = [trainer.step(x[block], y[block], learning_rate=0.1) for x, y in zip(xs, ys)]
if trainer.rank == 0:
    np.savez(out, **trainer.state())
    print(json.dumps({"losses": losses, "world_size": trainer.world_size,
                      "data_parallel": trainer.data_parallel}))
'''


def test_data_parallel_matches_one_process(linear_classifier, rng, tmp_path):
    mpirun = shutil.which("mpirun") or ("/usr/bin/mpirun" if os.path.exists("/usr/bin/mpirun") else None)
    if not mpirun:
        pytest.skip("mpirun is not installed (Debian: openmpi-bin)")
    model, w, b = linear_classifier
    xs = rng.standard_normal((6, 8, 6)).astype(np.float32)
    ys = rng.integers(0, 4, (6, 8)).astype(np.int64)
    np.savez(tmp_path / "data.npz", x=xs, y=ys)

    single = tcc.Trainer(tcc.compile(model, train=True, optimizer="adam", batch_size=8), seed=5)
    expected = [single.step(x, y, learning_rate=0.1) for x, y in zip(xs, ys)]

    step = tcc.compile(model, train=True, optimizer="adam", batch_size=8, mesh="dp=2")
    assert step.report["distributed"]["ranks"] == 2
    step.save(tmp_path / "dp2.tcc")
    (tmp_path / "worker.py").write_text(WORKER)
    args = [mpirun, "-np", "2", "--oversubscribe"]
    if os.geteuid() == 0:
        args.append("--allow-run-as-root")
    p = subprocess.run(args + [sys.executable, str(tmp_path / "worker.py"), str(tmp_path / "dp2.tcc"),
                               str(tmp_path / "data.npz"), str(tmp_path / "state.npz")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert result["world_size"] == 2 and result["data_parallel"] == 2
    np.testing.assert_allclose(result["losses"], expected, rtol=1e-5)
    state = np.load(tmp_path / "state.npz")
    for name, value in single.state().items():
        np.testing.assert_allclose(state[name], value, rtol=1e-5, atol=1e-6)
