#!/usr/bin/env bash
# Installs the package the way a user does (pip install, from the libraries of a build) into a
# fresh virtual environment under BUILD/python/ and runs its pytest suite there.
#   bash python/run-tests.sh [BUILD [PYTEST ARGS...]]   (BUILD: default build/, from scripts/build.sh)
# Debian's interpreter and packages only (scripts/setup.sh installs them): never whichever
# python3 comes first on PATH. pip runs offline (--no-index) and builds nothing but the wheel.
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$src/../build}" && pwd)
[ $# -gt 0 ] && shift
work="$build/python"
rm -rf "$work"
mkdir -p "$work/src"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
# pip builds in the source folder: build a copy, so the checkout stays clean.
cp -r "$src/pyproject.toml" "$src/setup.py" "$src/README.md" "$src/tcc" "$work/src/"
TCC_BUILD_DIR="$build" "$work/venv/bin/python" -m pip install --quiet --no-build-isolation \
  --no-deps --no-index "$work/src"
cd "$work"
"$work/venv/bin/python" - <<'PY'
import tcc, pathlib
lib = pathlib.Path(tcc.__file__).parent / "_lib"
assert "venv" in tcc.__file__ and (lib / "libtcc.so.0").exists(), tcc.__file__
print(f"tcc {tcc.__version__} installed at {pathlib.Path(tcc.__file__).parent}")
PY
exec "$work/venv/bin/python" -m pytest -q -rs -p no:cacheprovider --rootdir "$src" "$src/tests" "$@"
