#!/bin/bash
# Differential test: random small ONNX graphs (make_cases.py) run by the reference interpreter
# and by a compiled backend must agree (tcc check's tolerance).
#
#   run_differential.sh TCC WORK_DIR DEVICE [CASES]
#
# The seed is $TCC_DIFF_SEED if set (use it to reproduce or to draw fresh graphs), else 20261123.
set -euo pipefail
tcc=$1 work=$2 device=$3 cases=${4:-60}
seed=${TCC_DIFF_SEED:-20261123}
here=$(cd "$(dirname "$0")" && pwd)
echo "differential: $cases random graphs, seed $seed (TCC_DIFF_SEED=$seed reproduces), device $device"
rm -rf "$work"
/usr/bin/python3 "$here/make_cases.py" "$work" --cases "$cases" --seed "$seed"
for case in "$work"/*/; do
  set=$case/test_data_set_0
  if ! "$tcc" run --device interp "$case/model.onnx" --inputs "$set"/input_*.pb \
      --out-dir "$set" > /dev/null 2> "$case/interp.err"; then
    echo "interpreter failed on $case:"; cat "$case/interp.err"; exit 1
  fi
done
exec "$tcc" check --device "$device" -q "$work"
