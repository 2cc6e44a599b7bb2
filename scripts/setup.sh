#!/usr/bin/env bash
# Installs everything tcc needs to build and test on Debian 12 (idempotent).
# Run as root (or with sudo available). Safe to run again: installed packages are skipped.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache lld
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  libflatbuffers-dev flatbuffers-compiler libopenblas-dev libopenblas-openmp-dev
  libcli11-dev libgtest-dev
  zlib1g-dev libzstd-dev
  libonnx-testdata python3-onnx python3-numpy dataset-fashion-mnist
  python3-venv python3-pip python3-setuptools python3-wheel python3-pytest
  openmpi-bin libopenmpi3
  clang-14 libclang-rt-14-dev libomp-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all packages present"

# The peers the comparison tests run against (PyTorch, onnxruntime) and the onnx that writes
# the newest ONNX node test cases, from PyPI, in a virtual environment of Debian's interpreter
# (which also sees Debian's numpy): never whatever python3 is first on PATH. CMake finds it at
# .venv-peers/ (TCC_PEERS_PYTHON). Best effort: where PyPI cannot be reached the tests that need
# it skip, each saying why. TCC_SKIP_PEERS=1 skips this step.
PEERS_VENV="$(cd "$(dirname "$0")/.." && pwd)/.venv-peers"
PEERS=(torch==2.5.1 onnxruntime==1.32.0 onnx==1.23.2)
if [ -n "${TCC_SKIP_PEERS:-}" ]; then
  echo "setup: peers venv skipped (TCC_SKIP_PEERS): the comparisons with PyTorch and onnxruntime will skip"
elif "$PEERS_VENV/bin/python" -c "import torch, onnxruntime, onnx; assert onnx.__version__ == '1.23.2'" >/dev/null 2>&1; then
  echo "setup: peers venv present ($PEERS_VENV)"
else
  echo "setup: installing ${PEERS[*]} into $PEERS_VENV (PyPI)"
  if /usr/bin/python3 -m venv --system-site-packages "$PEERS_VENV" &&
     timeout 1500 "$PEERS_VENV/bin/pip" install -q --disable-pip-version-check "${PEERS[@]}"; then
    echo "setup: peers venv ready"
  else
    echo "setup: could not install ${PEERS[*]} from PyPI: the comparisons with PyTorch and onnxruntime will skip" >&2
  fi
fi
