#!/usr/bin/env bash
# Configures and builds tcc into ./build (or $TCC_BUILD_DIR) with the `default` preset.
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET="${TCC_PRESET:-default}"
cmake --preset "$PRESET" >/dev/null
cmake --build --preset "$PRESET"
