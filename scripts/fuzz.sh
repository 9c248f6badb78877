#!/usr/bin/env bash
# Runs the libFuzzer targets (built with clang, address + undefined-behaviour
# sanitizers, coverage over all of Tessera) for RUNS inputs each (default
# 20000) from a fixed seed, on a seed corpus built afresh each time. A fixed
# seed, run count and corpus make the run repeatable, so CI cannot turn red by
# chance; run longer by hand with a bigger RUNS or another SEED.
#
# The targets live in build-asan/, the sanitizer tree that scripts/sanitize.sh
# configures (and also runs the tests in); this script configures it when
# missing and builds only what fuzzing needs.
#
# Seed corpus (the script fails when any part of it comes out empty):
# - onnx: every ONNX node-test model (generated from python3-onnx);
# - tsr:  node-test models compiled by the sanitized CLI (default backends,
#         native only, and split across the test and native backends), plus the
#         hand-built artifacts of tessera_artifact_tests' Artifact.WritesFuzzSeeds;
# - npy:  a few .npy files.
# fuzz_onnx_import and fuzz_model_load run the models they manage to compile or
# load when their sizes are bounded (tests/fuzz/fuzz_run_model.h), so kernels
# see fuzzed shapes and attributes under the sanitizers. A crash, leak,
# sanitizer report or internal error fails the script and leaves the
# reproducer in build-asan/.
# Usage: scripts/fuzz.sh [RUNS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-20000}"
SEED="${2:-1}"
BUILD=build-asan

[ -f "$BUILD/build.ninja" ] || scripts/sanitize.sh --configure-only
nice -n 19 ninja -C "$BUILD" fuzz_onnx_import fuzz_npy fuzz_artifact fuzz_model_load fuzz_tuning_record tessera_cli tessera_artifact_tests \
  tessera_xnnpack_plugin tessera_example_accelerator_plugin tessera_test_backend_plugin
# Whole loads also see the backend plug-ins' payloads: artifacts compiled with each plug-in join the
# corpus, and fuzz_model_load loads the plug-ins (TESSERA_BACKEND_PLUGINS), so mutated payloads reach
# their load() and, where the plan is bounded, their run().
PLUGINS="$PWD/$BUILD/plugins/libtessera_xnnpack.so:$PWD/$BUILD/plugins/libtessera_example_accelerator.so"
PLUGINS="$PLUGINS:$PWD/$BUILD/plugins/libtessera_test_backend_plugin.so"

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS="suppressions=$PWD/scripts/sanitizers.supp:print_suppressions=0"

corpus="$BUILD/corpus"
rm -rf "$corpus"
mkdir -p "$corpus/onnx" "$corpus/npy" "$corpus/tsr" "$corpus/tuning"
cases="$BUILD/onnx_cases"
[ -d "$cases/node" ] || /usr/bin/python3 tests/conformance/generate_node_tests.py "$cases" >/dev/null
i=0
for m in "$cases"/node/*/model.onnx; do
  [ -f "$m" ] || continue
  cp "$m" "$corpus/onnx/seed_$i.onnx"
  i=$((i + 1))
done

# Artifacts of real compiled models; every case listed here compiles today, so a failure is a bug.
for case in add relu matmul_2d gemm_default_single_elem_vector_bias softmax_axis_1 conv_with_strides_padding \
            maxpool_2d_default transpose_default reshape_reduced_dims if loop11 concat_2d_axis_0 \
            gather_0 slice clip_default_inbounds scan9_sum layer_normalization_2d_axis0 expand_dim_changed \
            sequence_insert_at_back loop13_seq optional_get_element_sequence cast_FLOAT_to_STRING \
            strnormalizer_export_monday_casesensintive_upper; do
  m="$cases/node/test_$case/model.onnx"
  "$BUILD/tessera" compile "$m" -o "$corpus/tsr/${case}.tsr" >/dev/null
  "$BUILD/tessera" compile "$m" --backends test,native -o "$corpus/tsr/${case}_test.tsr" >/dev/null
  "$BUILD/tessera" compile "$m" --backends native -o "$corpus/tsr/${case}_native.tsr" >/dev/null
done
# Hand-built artifacts: every attribute kind, nested subgraphs, an empty graph.
for case in relu matmul_2d gemm_default_single_elem_vector_bias conv_with_strides_padding maxpool_2d_default \
            averagepool_2d_pads add_bcast softmax_axis_1; do
  m="$cases/node/test_$case/model.onnx"
  for backend in xnnpack example_accelerator test_plugin; do
    # A case the plug-in takes no node of still makes a valid seed (all native).
    TESSERA_BACKEND_PLUGINS="$PLUGINS" "$BUILD/tessera" compile "$m" --backends "$backend,native" \
      -o "$corpus/tsr/${case}_${backend}.tsr" >/dev/null
  done
done
TESSERA_ARTIFACT_SEED_DIR="$PWD/$corpus/tsr" "$BUILD/tests/tessera_artifact_tests" \
  --gtest_filter=Artifact.WritesFuzzSeeds >/dev/null

/usr/bin/python3 - "$corpus/npy" <<'PY'
import sys, numpy as np
out = sys.argv[1]
for i, a in enumerate([np.zeros((2, 3), np.float32), np.arange(5, dtype=np.int64), np.ones((1, 1, 2), np.bool_),
                       np.float64(3.5), np.zeros((0, 4), np.uint8), np.array(['a', 'h\u00e9llo', '\u65e5\u672c', '', '\U0001F600']),
                       np.array('s'), np.array(['ab'], dtype='>U3')]):
    np.save("%s/seed_%d.npy" % (out, i), a)
PY

# Tuning records: real ones from the sanitized CLI (a short budget), plus one with every optional field gone.
for case in relu matmul_2d softmax_axis_1; do
  "$BUILD/tessera" tune "$cases/node/test_$case/model.onnx" --backends test,native --budget 1 \
    -o "$corpus/tuning/${case}.json" >/dev/null 2>&1
done
cat > "$corpus/tuning/minimal.json" <<'JSON'
{"format": "tessera-tuning", "version": 1, "model": {"fingerprint": "0"}, "machine": {"cpu": "c", "isa": "i", "threads": 1},
 "precision": "fp32", "backends": ["native"], "chosen": "default", "placement": [{"node": "n\u00e9", "backend": "native"}]}
JSON

for kind in onnx tsr npy tuning; do
  count=$(find "$corpus/$kind" -type f | wc -l)
  if [ "$count" -eq 0 ]; then
    echo "fuzz: the $kind seed corpus is empty" >&2
    exit 1
  fi
  echo "fuzz: $count $kind seeds"
done

cd "$BUILD"
./fuzz_onnx_import -seed="$SEED" -runs="$RUNS" -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len=65536 corpus/onnx
./fuzz_npy -seed="$SEED" -runs="$((RUNS * 10))" -rss_limit_mb=2048 corpus/npy
./fuzz_tuning_record -seed="$SEED" -runs="$((RUNS * 10))" -rss_limit_mb=2048 -max_len=65536 corpus/tuning
./fuzz_artifact -seed="$SEED" -runs="$RUNS" -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len=65536 corpus/tsr
# Whole loads build primitives, pack weights and run: slower per input, so fewer runs.
TESSERA_BACKEND_PLUGINS="$PLUGINS" ./fuzz_model_load -seed="$SEED" -runs="$((RUNS / 10))" -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len=65536 corpus/tsr
echo "fuzz: no finding in $RUNS runs of the importer, $RUNS of the artifact loader, $((RUNS / 10)) whole model loads and $((RUNS * 10)) each of the npy and tuning record readers (seed $SEED)"
