#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (lit, GoogleTest, ONNX conformance) via CTest.
# TCC_PRESET=asan runs the same under AddressSanitizer + UBSan (build dir build-asan).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PRESET="${TCC_PRESET:-default}"
TCC_PRESET="$PRESET" bash scripts/build.sh
ctest --preset "$PRESET"
