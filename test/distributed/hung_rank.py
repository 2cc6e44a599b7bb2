#!/usr/bin/env python3
"""A rank that stops answering (SIGSTOP) mid-training ends the whole job within the collective
deadline: non-zero exit, an error naming the rank, the collective and the step, no process
left behind."""
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import arguments, check_prerequisites, compile_training  # noqa: E402


def rank_pids(tcc, artifact):
    """The ranks: command lines that start with tcc (not mpirun's, which also names them)."""
    out = subprocess.run(["pgrep", "-f", f"^{tcc} train {artifact} --data"], capture_output=True,
                         text=True).stdout.split()
    return [int(p) for p in out]


def main():
    p = arguments()
    p.add_argument("--timeout", type=float, default=3)
    a = p.parse_args()
    check_prerequisites(a.data)
    os.makedirs(a.work_dir, exist_ok=True)
    artifact = os.path.join(a.work_dir, "dp2.tcc")
    compile_training(a.tcc, a.model, artifact, 64, "dp=2")
    job = subprocess.Popen([a.tcc, "train", artifact, "--nproc", "2", "--data", a.data, "--lr",
                            "1e-3", "--epochs", "100", "--threads", "1", "--collective-timeout",
                            str(a.timeout)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    # Stop a rank once training runs: after rank 0 reported its first epoch (both ranks are
    # then past MPI's start-up, which has no deadline of ours).
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(iter(job.stdout.readline, "")),
                              daemon=True)
    reader.start()
    deadline = time.time() + 120
    while not any(line.startswith("epoch 1/") for line in lines) and time.time() < deadline:
        if job.poll() is not None:
            sys.exit("FAILED: the job ended before a rank was stopped:\n" + "".join(lines))
        time.sleep(0.05)
    pids = rank_pids(a.tcc, artifact)
    if len(pids) != 2:
        job.kill()
        sys.exit(f"FAILED: expected 2 ranks, found {pids}")
    victim = pids[-1]
    os.kill(victim, signal.SIGSTOP)
    stopped = time.time()
    try:
        job.wait(timeout=a.timeout + 60)
    except subprocess.TimeoutExpired:
        job.kill()
        os.kill(victim, signal.SIGKILL)
        sys.exit("FAILED: the job did not end after a rank hung")
    reader.join(timeout=5)
    output = "".join(lines)
    took = time.time() - stopped
    try:
        os.kill(victim, signal.SIGCONT)
    except ProcessLookupError:
        pass
    print(output[-2000:])
    print(f"job ended {took:.1f} s after the rank stopped (deadline {a.timeout} s), exit {job.returncode}")
    problems = []
    if job.returncode == 0:
        problems.append("the job exited 0")
    if "did not complete within" not in output or "micro-step" not in output:
        problems.append("no error naming the collective and the step")
    if not any(f"rank {r}:" in output for r in (0, 1)):
        problems.append("no error naming the rank")
    if took > a.timeout + 30:
        problems.append(f"took {took:.1f} s")
    time.sleep(0.5)
    left = rank_pids(a.tcc, artifact)
    if left:
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        problems.append(f"processes left behind: {left}")
    if problems:
        sys.exit("FAILED: " + "; ".join(problems))


if __name__ == "__main__":
    main()
