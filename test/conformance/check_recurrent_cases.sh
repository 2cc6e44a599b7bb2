#!/bin/sh
# RNN/GRU/LSTM cases the ONNX backend tests lack (bidirectional, reverse, sequence_lens, layout
# 1, ...; make_recurrent_cases.py, onnxruntime's outputs as the reference) through `tcc check`:
#   check_recurrent_cases.sh PYTHON TCC DEVICE WORK_DIR
# The cases are written into WORK_DIR (~2 s) unless it holds them from the same script. Exits
# 77 (CTest's skip code here), saying why, where PYTHON cannot import onnx and onnxruntime.
set -eu
py="$1" tcc="$2" device="$3" work="$4"
here=$(cd "$(dirname "$0")" && pwd)
if ! "$py" -c 'import numpy, onnx, onnxruntime' 2>/dev/null; then
  echo "SKIP: $py cannot import numpy, onnx and onnxruntime (scripts/setup.sh installs them into the peers venv from PyPI)"
  exit 77
fi
stamp=$(cksum < "$here/make_recurrent_cases.py")
if [ "$(cat "$work/.source" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$work"
  "$py" "$here/make_recurrent_cases.py" "$work"
  echo "$stamp" > "$work/.source"
fi
exec "$tcc" check --device "$device" -q "$work"
