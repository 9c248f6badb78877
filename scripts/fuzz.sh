#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (address + undefined-behaviour
# sanitizers, coverage over all of Tessera) into build-fuzz/ and runs each for
# RUNS inputs (default 20000) from a fixed seed, on a seed corpus: the ONNX
# node-test models and a few .npy files. A fixed seed and run count make the
# run repeatable, so CI cannot turn red by chance. The artifact loader is
# seeded with .tsr files compiled from node-test models by build/tessera
# (native only, and split across the test and native backends); run longer by hand with a
# bigger RUNS or another SEED. A crash, leak or sanitizer report fails the
# script and leaves the reproducer in build-fuzz/.
# Usage: scripts/fuzz.sh [RUNS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-20000}"
SEED="${2:-1}"

if ! command -v clang++ >/dev/null || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "ok installed"; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends clang libclang-rt-14-dev
fi

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTESSERA_FUZZ=ON -DTESSERA_SANITIZE=ON -DTESSERA_BUILD_TESTS=OFF >/dev/null
ninja -C build-fuzz fuzz_onnx_import fuzz_npy fuzz_artifact fuzz_model_load

corpus=build-fuzz/corpus
mkdir -p "$corpus/onnx" "$corpus/npy" "$corpus/tsr"
if [ ! -d build/onnx_cases/node ]; then
  /usr/bin/python3 tests/conformance/generate_node_tests.py build/onnx_cases >/dev/null 2>&1
fi
i=0
for m in build/onnx_cases/node/*/model.onnx; do
  cp "$m" "$corpus/onnx/seed_$i.onnx"
  i=$((i + 1))
done
if [ -x build/tessera ]; then
  i=0
  for case in add relu matmul_2d gemm_default_single_elem_vector_bias softmax_axis_1 conv_with_strides_padding \
              maxpool_2d_default transpose_default reshape_reduced_dims if loop11 concat_2d_axis_0 \
              gather_0 slice clip_default_inbounds layer_normalization_2d_axis0 expand_dim_changed; do
    m=build/onnx_cases/node/test_$case/model.onnx
    [ -f "$m" ] || continue
    build/tessera compile "$m" -o "$corpus/tsr/seed_$i.tsr" >/dev/null 2>&1 || true
    build/tessera compile "$m" --backends test,native -o "$corpus/tsr/seed_${i}_test.tsr" >/dev/null 2>&1 || true
    build/tessera compile "$m" --backends native -o "$corpus/tsr/seed_${i}_native.tsr" >/dev/null 2>&1 || true
    i=$((i + 1))
  done
fi
/usr/bin/python3 - "$corpus/npy" <<'PY'
import sys, numpy as np
out = sys.argv[1]
for i, a in enumerate([np.zeros((2, 3), np.float32), np.arange(5, dtype=np.int64), np.ones((1, 1, 2), np.bool_),
                       np.float64(3.5), np.zeros((0, 4), np.uint8)]):
    np.save("%s/seed_%d.npy" % (out, i), a)
PY

cd build-fuzz
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
./fuzz_onnx_import -seed="$SEED" -runs="$RUNS" -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len=65536 corpus/onnx
./fuzz_npy -seed="$SEED" -runs="$((RUNS * 10))" -rss_limit_mb=2048 corpus/npy
./fuzz_artifact -seed="$SEED" -runs="$RUNS" -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len=65536 corpus/tsr
# Whole loads build primitives and pack weights: slower per input, so fewer runs.
./fuzz_model_load -seed="$SEED" -runs="$((RUNS / 10))" -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len=65536 corpus/tsr
echo "fuzz: no crash in $RUNS runs of the importer, $RUNS of the artifact loader, $((RUNS / 10)) whole model loads and $((RUNS * 10)) of the npy reader (seed $SEED)"
