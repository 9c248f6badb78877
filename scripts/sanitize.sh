#!/usr/bin/env bash
# Builds Tessera, its tests and its libFuzzer targets with clang under
# AddressSanitizer + UndefinedBehaviorSanitizer (with LeakSanitizer) into ONE
# tree, build-asan/, runs the unit, conformance, model and error tests there,
# then the fixed-seed fuzz rounds of scripts/fuzz.sh on the same build. Any
# sanitizer report fails the test it happens in, and so the script: ASan stops
# at its first report, and UBSan findings are not recoverable
# (-fno-sanitize-recover=undefined in CMakeLists.txt, halt_on_error here).
#
# The model tests run tests/models/check_models.py with /usr/bin/python3, which
# is not instrumented: it runs the sanitized build-asan/tessera CLI as a
# subprocess, and the child inherits ASAN_OPTIONS / UBSAN_OPTIONS from here, so
# no LD_PRELOAD of the ASan runtime into Python is needed.
#
# oneDNN (libdnnl) and its OpenMP runtime are Debian's uninstrumented builds:
# ASan sees their memory through malloc/free only, and its JIT code is not
# checked. scripts/sanitizers.supp holds the (commented) leak suppressions for
# them, if any are needed; nothing else is switched off.
#
# The tree is built with `nice -n 19`: on a shared machine other builds come
# first. It is -O1 with line tables and without NDEBUG, so the IR verifier runs
# between compile passes too.
#
# Usage: scripts/sanitize.sh [FUZZ_RUNS [SEED]]   (defaults 200000 and 1; FUZZ_RUNS=0 skips fuzzing)
#        scripts/sanitize.sh --configure-only     (install clang/libomp and configure build-asan)
# The ONNX node conformance cases run once here, by the runner directly rather than by the
# conformance ctest: the runner forks a child per case and records a crash (a sanitizer
# report is one) without failing for a case that is not on the passing list, so this script
# fails on any sanitizer report or crash in its output instead. Values are not compared with
# the passing list here: the gcc build (scripts/test.sh) does that, and 15 listed cases
# (window functions, RoiAlign, bicubic GridSample) differ by ~1e-5 relative under clang -O1.
# Environment: SANITIZE_LABELS (default 'unit|models|error|plugins|serve'),
#              SANITIZE_EXCLUDE (a ctest -E regex of tests to leave out; default ^serve_dask$|^conformance_node_).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-asan

# clang, its sanitizer and libFuzzer runtimes, and LLVM's OpenMP (oneDNN's
# threads are OpenMP's; clang's -fopenmp needs libomp).
scripts/install-packages.sh sanitize clang libclang-rt-14-dev libomp-14-dev

CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DTESSERA_SANITIZE=ON -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=ON >/dev/null
[ "${1:-}" = "--configure-only" ] && exit 0

FUZZ_RUNS="${1:-200000}"
SEED="${2:-1}"
LABELS="${SANITIZE_LABELS:-unit|models|error|plugins|serve}"
# serve_dask imports the tessera Python extension into Debian's uninstrumented interpreter, which cannot
# load the sanitized library (the python-labelled tests are left out for the same reason). The plug-ins'
# runs of the ONNX node cases (conformance_node_*: 4 minutes each here, over a third of this stage) are
# left out for time: the cases run once below with the default backends, and each plug-in's ABI test,
# CLI test and model checks run here.
EXCLUDE="${SANITIZE_EXCLUDE:-^serve_dask$|^conformance_node_}"

start=$(date +%s)
# What the tests and fuzz rounds run (not the benchmarks: they mean nothing under ASan).
nice -n 19 ninja -C "$BUILD" tessera_cli tessera_capi tessera_unit_tests tessera_conformance tessera_error_tests \
  tessera_partition_tests tessera_artifact_tests tessera_backend_tests tessera_report_tests tessera_npy_tests \
  fuzz_onnx_import fuzz_npy fuzz_artifact fuzz_model_load fuzz_tuning_record \
  tessera_plugin_abi_tests tessera_test_backend_plugin tessera_xnnpack_plugin tessera_xnnpack_plugin_test \
  tessera_example_accelerator_plugin tessera_example_accelerator_test tessera_serve
built=$(date +%s)
echo "sanitize: build took $((built - start)) s"

# max_allocation_size_mb: the conformance runner sets no address-space limit under ASan (see run_node_tests.cc).
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:max_allocation_size_mb=8192:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$PWD/scripts/sanitizers.supp:print_suppressions=0"
ctest_args=(--test-dir "$BUILD" --output-on-failure -j2 -L "$LABELS")
[ -n "$EXCLUDE" ] && ctest_args+=(-E "$EXCLUDE")
ctest "${ctest_args[@]}"
tested=$(date +%s)
echo "sanitize: tests ($LABELS) took $((tested - built)) s"

[ -d "$BUILD/onnx_cases/node" ] || /usr/bin/python3 tests/conformance/generate_node_tests.py "$BUILD/onnx_cases" >/dev/null
log="$BUILD/conformance_sanitize.log"
TESSERA_POISON=1 "$BUILD/tests/tessera_conformance" "$BUILD/onnx_cases/node" --threads 2 >"$log" 2>&1 || true
grep -E "^conformance: .* of [0-9]+ cases" "$log" || { echo "sanitize: the conformance runner did not finish (see $log)" >&2; exit 1; }
if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:| [1-9][0-9]* crashed" "$log"; then
  grep -E -A20 "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|^crashed" "$log" | head -100 >&2
  echo "sanitize: sanitizer report or crash in the conformance cases (see $log)" >&2
  exit 1
fi
conformed=$(date +%s)
echo "sanitize: conformance cases took $((conformed - tested)) s"
tested=$conformed

if [ "$FUZZ_RUNS" != 0 ]; then
  scripts/fuzz.sh "$FUZZ_RUNS" "$SEED"
  echo "sanitize: fuzzing took $(($(date +%s) - tested)) s"
fi
echo "sanitize: clean (build, tests and fuzzing: $(($(date +%s) - start)) s)"
