#!/bin/sh
# The node test cases of the newest onnx (onnx.backend.test.case.node, from PyPI in the peers
# venv that scripts/setup.sh makes) through `tcc check` on one device:
#   check_onnx_node_tests.sh PYTHON TCC DEVICE EXPECTED_FAILURES WORK_DIR
# The cases are written into WORK_DIR (make_onnx_node_tests.py, ~5 s) unless it holds them for
# the same onnx version. Exits 77 (CTest's skip code here), saying why, where PYTHON has no onnx
# of at least 1.23.
set -eu
py="$1" tcc="$2" device="$3" expected="$4" work="$5"
here=$(cd "$(dirname "$0")" && pwd)
if ! version=$("$py" -c 'import onnx, sys; v = tuple(int(x) for x in onnx.__version__.split(".")[:2]); print(onnx.__version__); sys.exit(0 if v >= (1, 23) else 1)' 2>/dev/null); then
  echo "SKIP: $py has no onnx >= 1.23 (scripts/setup.sh installs it into the peers venv from PyPI)"
  exit 77
fi
if ! grep -q "^ONNX $version " "$work/README" 2>/dev/null; then
  rm -rf "$work"
  "$py" "$here/make_onnx_node_tests.py" "$work"
fi
exec "$tcc" check --device "$device" -q --expected-failures "$expected" "$work"
