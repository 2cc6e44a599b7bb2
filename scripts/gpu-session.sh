#!/usr/bin/env bash
# One GPU session in two steps (bench/README.md, "GPU session"):
#
#   bash scripts/gpu-session.sh bundle [--build-dir DIR] [bundle.py options]     # here
#       Builds tcc (scripts/build.sh, unless --build-dir names a build to use), compiles the
#       bench models, the kernel microbenchmarks, a sample of the ONNX conformance node tests
#       and the FashionMNIST training artifact for CUDA (tcc compile --device cuda --arch
#       sm_90,sm_80; the training artifact also with --mesh dp=2, and Debian's Open MPI packages to
#       run it there), bf16 training artifacts of a causal attention layer at 1k and 4k tokens,
#       and copies them with libtccrt, the libraries it needs, tccrt-run and the
#       runtime's test binaries into .gpu/ (ignored by git; at most 60 MiB).
#
#   bash scripts/gpu-session.sh device [device_session.py options]               # there
#       The command for the device tool, with carry [".gpu"]: runs the GPU tests, every
#       conformance sample through tccrt-run --compare, the microbenchmarks and the bench models
#       against PyTorch eager, torch.compile (default, max-autotune) and onnxruntime (CUDA EP),
#       prints one table and writes DATE-DEVICE-gpu.md/.json into $OUT (unset: /tmp/tcc-gpu-session/
#       out; copy results worth keeping into bench/results/). Without a GPU the GPU sections say
#       "skipped: <reason>"; with a bundle made by `bundle --cpu-check` every section runs on the
#       CPU (to test the scripts here). With such a bundle, `device --sections cpu_vs_ort` times its
#       CPU artifacts against onnxruntime's CPU EP at 1 and N threads on the machine's own CPU
#       (DATE-<cpu>-cpu-vs-ort.md; bench/gpu/device_session.py, Session.cpu_vs_ort).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
mode="${1:-}"
[ $# -gt 0 ] && shift

case "$mode" in
bundle)
  build_dir=""
  args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --build-dir) build_dir="$2"; shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
  if [ -z "$build_dir" ]; then
    bash scripts/build.sh
    build_dir="$ROOT/build"
  fi
  # The bundle must never be committed; .gitignore lists /.gpu/.
  python3 bench/gpu/bundle.py --build-dir "$build_dir" --out "$ROOT/.gpu" "${args[@]+"${args[@]}"}"
  du -sh "$ROOT/.gpu"
  echo "device tool: run(command=\"bash scripts/gpu-session.sh device\", carry=[\".gpu\"], timeout_s=600)"
  ;;
device)
  G="$ROOT/.gpu"
  if [ ! -f "$G/manifest.json" ]; then
    echo "gpu-session: $G/manifest.json not found: run 'bash scripts/gpu-session.sh bundle' here first and carry .gpu" >&2
    exit 1
  fi
  PY="${TCC_GPU_PYTHON:-python3}"
  # Unpack the libraries the bundle carries compressed (OpenBLAS) outside the bundle, which must
  # stay small enough to carry.
  unpacked=/tmp/tcc-gpu-session/lib
  mkdir -p "$unpacked"
  for z in "$G"/lib/*.xz; do
    [ -e "$z" ] || continue
    dest="$unpacked/$(basename "${z%.xz}")"
    [ -e "$dest" ] && [ "$dest" -nt "$z" ] || "$PY" -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' "$z" "$dest"
  done
  # The runtime's binaries find libtccrt and OpenBLAS there; the machine's own libstdc++ is used
  # unless it is older than the one we built with (then .gpu/lib-fallback's).
  libpath="$G/lib:$unpacked"
  if ! LD_LIBRARY_PATH="$libpath" "$G/bin/tccrt-run" --device-available cpu >/dev/null 2>&1; then
    libpath="$libpath:$G/lib-fallback"
  fi
  export TCCRT_LIBRARY_PATH="$libpath"
  if ! LD_LIBRARY_PATH="$libpath" "$G/bin/tccrt-run" --device-available cpu >/dev/null; then
    echo "gpu-session: tccrt-run does not start here:" >&2
    LD_LIBRARY_PATH="$libpath" ldd "$G/bin/tccrt-run" >&2 || true
  fi
  # Open MPI for the distributed training check: the GPU machine has none; the bundle carries
  # Debian's packages, unpacked into / (the machine is discarded after the session).
  if ! command -v mpirun >/dev/null 2>&1 && ls "$G"/train/debs/*.deb >/dev/null 2>&1; then
    for d in "$G"/train/debs/*.deb; do dpkg -x "$d" / || echo "gpu-session: could not unpack $d" >&2; done
    ldconfig || true
  fi
  out="${OUT:-/tmp/tcc-gpu-session/out}"
  PYTHONUNBUFFERED=1 exec "$PY" bench/gpu/device_session.py --bundle "$G" --out "$out" "$@"
  ;;
*)
  echo "usage: bash scripts/gpu-session.sh bundle [--build-dir DIR] [--cpu-check] [--models ...] [--conformance N]" >&2
  echo "       bash scripts/gpu-session.sh device [--budget-s S] [--sections ...]" >&2
  exit 2
  ;;
esac
