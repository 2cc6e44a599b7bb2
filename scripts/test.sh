#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (lit, GoogleTest, ONNX conformance) via CTest,
# then the runtime (libtccrt, tccrt-run and their tests) under AddressSanitizer + UBSan and under
# ThreadSanitizer (presets runtime-asan, runtime-tsan: no MLIR in those builds).
# Last, a short, reproducible run of every libFuzzer harness (scripts/fuzz.sh --ci: the
# runtime's parsers and the ONNX importer, built with clang).
# TCC_PRESET=asan runs the whole suite under AddressSanitizer + UBSan instead (build-asan/);
# TCC_SKIP_RUNTIME_SANITIZERS=1 skips the runtime's sanitizer runs, TCC_SKIP_FUZZ=1 the fuzzing.
# The tests run in a minimal environment (env -i: a fresh machine's PATH, no PYTHONPATH or other
# variables of the calling shell), which proves that whatever they need comes from setup.sh (Debian
# packages, the peers venv) and the build, never from this machine's PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PRESET="${TCC_PRESET:-default}"
TCC_PRESET="$PRESET" bash scripts/build.sh
clean_env=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="${HOME:-/root}" LANG=C.UTF-8)
"${clean_env[@]}" ctest --preset "$PRESET"

if [ "$PRESET" = default ] && [ -z "${TCC_SKIP_RUNTIME_SANITIZERS:-}" ]; then
  for sanitizer in runtime-asan runtime-tsan; do
    if [ "$sanitizer" = runtime-tsan ]; then
      # GCC 12's ThreadSanitizer maps its shadow memory at fixed places that a kernel with more
      # than 28 bits of mmap randomisation can collide with (the program then dies at start).
      bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28)
      if [ "$bits" -gt 28 ] && ! sysctl -qw vm.mmap_rnd_bits=28 2>/dev/null; then
        echo "test.sh: runtime-tsan skipped: vm.mmap_rnd_bits is $bits (ThreadSanitizer needs <= 28; run as root to lower it)" >&2
        continue
      fi
    fi
    echo "== $sanitizer"
    cmake --preset "$sanitizer" >/dev/null
    cmake --build --preset "$sanitizer"
    "${clean_env[@]}" ctest --preset "$sanitizer"
  done
fi

if [ "$PRESET" = default ] && [ -z "${TCC_SKIP_FUZZ:-}" ]; then
  echo "== fuzz"
  bash scripts/fuzz.sh --ci
fi
