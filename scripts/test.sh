#!/usr/bin/env bash
# Quick start, step 2: runs every test (unit, conformance, models, error, python, torch, tutorial, plugins,
# serve) with CTest. Builds first if needed. Extra arguments go to ctest (e.g. -L unit).
#
# Then, unless arguments were given or TESSERA_TEST_ISA_CAPS=0, the tests whose results depend on the
# instruction set (CTest label "isa": the unit tests, three ONNX node-case runs and the PyTorch model checks)
# again under each cap below this CPU's (tests/lib/cpu_isa.py lower_caps): native's kernels capped with
# TESSERA_ISA and oneDNN's with ONEDNN_MAX_CPU_ISA, so that an AVX-512 machine also checks what an
# AVX2-only or an AVX-512-without-VNNI CPU must compute (int8 without VNNI, float32 instead of bf16).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || scripts/setup.sh
ninja -C build
ctest --test-dir build --output-on-failure -j2 "$@"
if [ $# -gt 0 ] || [ "${TESSERA_TEST_ISA_CAPS:-1}" = 0 ]; then
  exit 0
fi
for cap in $(/usr/bin/python3 tests/lib/cpu_isa.py lower_caps); do
  IFS=: read -r name native_isa dnnl_isa <<<"$cap"
  echo "=== the instruction-set-dependent tests (label isa) again, capped: $name" \
       "(TESSERA_ISA=${native_isa:-unset} ONEDNN_MAX_CPU_ISA=$dnnl_isa)"
  env ${native_isa:+TESSERA_ISA=$native_isa} ONEDNN_MAX_CPU_ISA="$dnnl_isa" \
    ctest --test-dir build --output-on-failure -j2 -L isa
done
