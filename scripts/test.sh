#!/usr/bin/env bash
# Quick start, step 2: runs every test (unit, conformance, models, error) with CTest.
# Builds first if needed. Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || scripts/setup.sh
ninja -C build
ctest --test-dir build --output-on-failure -j2 "$@"
