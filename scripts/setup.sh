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
