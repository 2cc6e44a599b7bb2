#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, AddressSanitizer + UBSan, test/fuzz/: presets `fuzz`
# for the runtime's, `fuzz-import` for the ONNX importer's), seeds their corpora and runs them.
#
#   bash scripts/fuzz.sh                          # every harness for 20 s
#   bash scripts/fuzz.sh --ci                     # what CI runs: fixed seed and run counts
#   bash scripts/fuzz.sh --runs 10000000 artifact # 10 million executions of one harness
#   bash scripts/fuzz.sh --seconds 600 --record   # ... and append the counts to bench/results
#
# Harnesses: tensor-file (.npy and TensorProto readers), artifact (the artifact loader, and a
# run of what it accepts), checkpoint (the checkpoint loader), onnx-import (model parsing, ONNX's
# checks and shape inference, import into the tcc dialect). Seeds: .pb files and models of
# Debian's ONNX test data; artifacts compiled by build/bin/tcc (the main build: bash
# scripts/build.sh) from ONNX conformance cases, and a small training artifact, whose
# checkpoint seeds the checkpoint harness. Corpora grow in build-fuzz/corpus/<harness>; a crash
# or leak leaves its input in build-fuzz/findings/ and fails the script with libFuzzer's
# report. --ci starts each harness from its seeds alone with a fixed random seed and run count
# (about 20 s each here), so that CI's outcome depends on the code, not on the luck of one run;
# longer runs explore.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=20 runs="" record="" ci="" harnesses=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --record) record=1; shift ;;
    --ci) ci=1; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    tensor-file|artifact|checkpoint|onnx-import) harnesses+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#harnesses[@]} -gt 0 ] || harnesses=(tensor-file artifact checkpoint onnx-import)

tcc=build/bin/tcc
if [ ! -x "$tcc" ]; then
  echo "fuzz.sh: $tcc is missing (the seeds are compiled with it): bash scripts/build.sh" >&2
  exit 2
fi
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
if [[ " ${harnesses[*]} " == *" onnx-import "* ]]; then
  cmake --preset fuzz-import >/dev/null
  cmake --build --preset fuzz-import # the harness and what it links only
fi

out=build-fuzz
seeds="$out/seeds" corpus="$out/corpus" findings="$out/findings"
mkdir -p "$findings"

# ---- Seeds (made once) ---------------------------------------------------------------------
testdata=/usr/share/libonnx-testdata/data/node
if [ ! -f "$seeds/.done" ]; then
  rm -rf "$seeds"
  mkdir -p "$seeds/tensor-file" "$seeds/artifact" "$seeds/checkpoint"
  # Every tenth test-data tensor: all dtypes and ranks the suite has, ~300 files.
  find "$testdata" -name '*.pb' | sort | awk 'NR % 10 == 0' | while read -r f; do
    cp "$f" "$seeds/tensor-file/$(echo "$f" | md5sum | cut -c1-16).pb"
  done
  # Conformance cases that reach every kind of step: kernels, GEMMs, convolutions (im2col,
  # Winograd, depthwise, transposed), top-k, copies.
  for c in test_add test_relu test_matmul_2d test_gemm_default_vector_bias test_conv_with_strides_padding \
           test_basic_conv_with_padding test_convtranspose test_top_k test_concat_2d_axis_0 \
           test_maxpool_2d_default test_softmax_axis_1 test_reduce_sum_keepdims_random \
           test_gather_0 test_identity test_reshape_reordered_all_dims test_cumsum_1d; do
    [ -f "$testdata/$c/model.onnx" ] || continue
    # (TopK's k is an input: specialised on the case's inputs when the plain compile refuses.)
    "$tcc" compile "$testdata/$c/model.onnx" -o "$seeds/artifact/$c.tcc" --no-cache >/dev/null 2>&1 ||
      "$tcc" compile "$testdata/$c/model.onnx" -o "$seeds/artifact/$c.tcc" --no-cache \
        --inputs "$testdata/$c"/test_data_set_0/input_*.pb >/dev/null 2>&1 ||
      echo "fuzz.sh: seed $c did not compile; going on without it" >&2
  done
  # A training artifact (8 -> 4 linear layer, cross-entropy, Adam): the checkpoint harness's
  # trainer, and its checkpoint the seed.
  # (Debian's interpreter, with the python3-onnx and python3-numpy setup.sh installs: never
  # whichever python3 comes first on PATH.)
  /usr/bin/python3 - "$seeds/linear.onnx" <<'EOF'
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper, save
rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")
b = numpy_helper.from_array(rng.standard_normal((4,)).astype(np.float32), "b")
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])], "linear",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w, b])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
EOF
  "$tcc" compile --train "$seeds/linear.onnx" --batch-size 2 -o "$seeds/artifact/train.tcc" --no-cache >/dev/null 2>&1
  # The storage-only types (float8 variants, packed 4-/2-bit integers): TensorProtos of each in
  # raw_data and in int32_data, and an artifact casting into float8 and int4 and back.
  /usr/bin/python3 - "$seeds/tensor-file" "$seeds/cast8.onnx" <<'EOF'
import sys
from onnx import TensorProto, helper, save
for code in (17, 18, 19, 20, 21, 22, 25, 26):
    packed = {21: 3, 22: 3, 25: 2, 26: 2}.get(code, 5)  # bytes for 5 elements
    raw, typed = TensorProto(), TensorProto()
    for t in (raw, typed):
        t.data_type, t.name = code, f"t{code}"
        t.dims.append(5)
    raw.raw_data = bytes((37 * i + code) % 256 for i in range(packed))
    typed.int32_data.extend((53 * i + code) % 256 for i in range(packed))
    for kind, t in (("raw", raw), ("typed", typed)):
        with open(f"{sys.argv[1]}/dtype{code}-{kind}.pb", "wb") as f:
            f.write(t.SerializeToString())
nodes = [helper.make_node("Cast", ["x"], ["f8"], to=17), helper.make_node("Cast", ["f8"], ["a"], to=1),
         helper.make_node("Cast", ["x"], ["i4"], to=22), helper.make_node("Cast", ["i4"], ["b"], to=1),
         helper.make_node("Add", ["a", "b"], ["y"])]
graph = helper.make_graph(nodes, "cast8", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), sys.argv[2])
EOF
  "$tcc" compile "$seeds/cast8.onnx" -o "$seeds/artifact/cast8.tcc" --no-cache >/dev/null 2>&1 ||
    echo "fuzz.sh: the float8 seed did not compile; going on without it" >&2
  # Symbolic programs (size symbols, dim expressions, arena slots, the binder; on CUDA also the
  # kernels' grid work), compiled with size ranges; the CUDA one where this tcc has NVRTC.
  symbolicModel=test/unit/Inputs/bert-dynamic.onnx
  "$tcc" compile "$symbolicModel" --input-shape ids=1..4x1..16 mask=1..4x1..16 \
    -o "$seeds/artifact/symbolic.tcc" --no-cache >/dev/null 2>&1 ||
    echo "fuzz.sh: the symbolic seed did not compile; going on without it" >&2
  "$tcc" compile "$symbolicModel" --input-shape ids=1..4x1..16 mask=1..4x1..16 --device cuda \
    -o "$seeds/artifact/symbolic-cuda.tcc" --no-cache >/dev/null 2>&1 ||
    echo "fuzz.sh: no symbolic CUDA seed (this tcc compiles for the CPU only?); going on without it" >&2
  TCC_FUZZ_TRAINING_ARTIFACT="$seeds/artifact/train.tcc" TCC_FUZZ_SEED_OUT="$seeds/checkpoint/seed.ck" \
    "$out/bin/fuzz-checkpoint" -runs=0 >/dev/null 2>&1
  touch "$seeds/.done"
fi
if [ ! -d "$seeds/onnx-import" ]; then
  mkdir -p "$seeds/onnx-import"
  # Every fourth conformance model: ~300 models over all operators the suite has.
  find "$testdata" -name model.onnx | sort | awk 'NR % 4 == 0' | while read -r f; do
    cp "$f" "$seeds/onnx-import/$(basename "$(dirname "$f")").onnx"
  done
fi

# ---- Runs ----------------------------------------------------------------------------------
# Allocations above 2 GiB fail (the code must report them, not die); libFuzzer's own limits sit
# above that. allow_user_poisoning=0, as for the asan test preset: LLVM's BumpPtrAllocator,
# inlined into our code (tcc attribute storage), poisons slab memory that Debian's
# uninstrumented libMLIR then hands out from the same context allocator (a false report).
export ASAN_OPTIONS="allocator_may_return_null=1:max_allocation_size_mb=2048:detect_leaks=1:allow_user_poisoning=0"
export UBSAN_OPTIONS="print_stacktrace=1"
export TCC_FUZZ_TRAINING_ARTIFACT="$seeds/artifact/train.tcc"
limit=(-max_total_time="$seconds")
[ -n "$runs" ] && limit=(-runs="$runs")
summary=()
# --ci: runs per harness (~20 s each on a Zen 4 core under ASan).
declare -A ciRuns=([tensor-file]=600000 [artifact]=300000 [checkpoint]=300000 [onnx-import]=100000)
for h in "${harnesses[@]}"; do
  bin="$out/bin/fuzz-$h"
  [ "$h" = onnx-import ] && bin="build-fuzz-import/bin/fuzz-$h"
  dir="$corpus/$h"
  if [ -n "$ci" ]; then
    dir="$out/ci-corpus/$h"
    rm -rf "$dir"
    limit=(-seed=1 -runs="${ciRuns[$h]}")
  fi
  mkdir -p "$dir"
  log="$out/fuzz-$h.log"
  echo "== fuzz-$h (${limit[*]})"
  if ! "$bin" "$dir" "$seeds/$h" "${limit[@]}" -rss_limit_mb=4096 \
       -malloc_limit_mb=4096 -timeout=30 -print_final_stats=1 -artifact_prefix="$findings/$h-" \
       >"$log" 2>&1; then
    tail -60 "$log" >&2
    echo "fuzz.sh: fuzz-$h found a failure; its input is in $findings/ (log: $log)" >&2
    exit 1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' || echo '?')
  units=$(ls "$dir" | wc -l)
  line="fuzz-$h: $execs executions in $secs s, no crash; corpus $units inputs"
  echo "$line"
  summary+=("$line")
done

if [ -n "$record" ]; then
  file="bench/results/$(date +%F)-fuzz.md"
  [ -f "$file" ] || printf '# Fuzzing tcc'"'"'s parsers of untrusted input (scripts/fuzz.sh)\n\n' >"$file"
  cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
  {
    echo "- $(date -u +%FT%TZ), $cpu, git $(git rev-parse --short HEAD), clang-14 libFuzzer + ASan + UBSan:"
    for l in "${summary[@]}"; do echo "  - $l"; done
  } >>"$file"
  echo "fuzz.sh: recorded in $file"
fi
