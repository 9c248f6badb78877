#!/usr/bin/env bash
# Tutorial 4 end to end (docs/tutorials/04_cpp_embed): installs the C API and the CLI from the build
# tree into a temporary prefix (no root needed), builds the tutorial's program against that prefix with
# find_package(Tessera), and runs it on tiny_resnet as a .tsr (compiled by the installed CLI) and as
# ONNX. What it prints must match what the installed CLI computes for the same inputs (written by numpy
# from the pattern the tutorial documents), and the checker must reject outputs of other inputs.
# A missing dlpack.h must stop find_package(Tessera) with the package to install.
#
# Usage: cpp_embed.sh CMAKE BUILD_DIR SOURCE_DIR
set -u
CMAKE="$1"
BUILD="$2"
SOURCE="$3"
PYTHON=/usr/bin/python3
MODEL="$SOURCE/models/tiny_resnet.onnx"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

die() {
  echo "FAIL: $*"
  exit 1
}

# The Runtime and Development components are the C API and the CLI; the others (the Python package)
# install elsewhere.
for component in Runtime Development; do
  "$CMAKE" --install "$BUILD" --prefix "$prefix" --component "$component" >"$work/install.log" 2>&1 ||
    die "cmake --install --component $component: $(cat "$work/install.log")"
done
for file in lib/libtessera.so include/tessera/tessera.h bin/tessera lib/cmake/Tessera/TesseraConfig.cmake \
            lib/cmake/Tessera/TesseraConfigVersion.cmake lib/cmake/Tessera/TesseraTargets.cmake; do
  [ -f "$prefix/$file" ] || die "the install lacks $file"
done
# Both the installed CLI and the tutorial's program must load the installed library, not the build tree's.
# loaded_library BINARY: the file BINARY loads as libtessera.so.
loaded_library() { realpath -m "$(ldd "$1" | sed -n 's/^[[:space:]]*libtessera\.so => \([^ ]*\) .*/\1/p')"; }
[ "$(loaded_library "$prefix/bin/tessera")" = "$prefix/lib/libtessera.so" ] ||
  die "the installed CLI does not load $prefix/lib/libtessera.so: $(ldd "$prefix/bin/tessera" | grep tessera)"

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
"$CMAKE" -S "$SOURCE/docs/tutorials/04_cpp_embed" -B "$work/example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" >"$work/configure.log" 2>&1 ||
  die "configuring the tutorial: $(cat "$work/configure.log")"
"$CMAKE" --build "$work/example" >"$work/build.log" 2>&1 || die "building the tutorial: $(cat "$work/build.log")"
example="$work/example/tessera_embed"
[ "$(loaded_library "$example")" = "$prefix/lib/libtessera.so" ] ||
  die "the tutorial does not load $prefix/lib/libtessera.so: $(ldd "$example" | grep tessera)"

# The reference: the installed CLI on the inputs the tutorial documents (element i is (i % 256) / 255).
cli="$prefix/bin/tessera"
"$cli" compile "$MODEL" -o "$work/tiny_resnet.tsr" >"$work/cli.log" 2>&1 || die "tessera compile: $(cat "$work/cli.log")"
"$PYTHON" -c "
import numpy as np, sys
np.save(sys.argv[1], ((np.arange(3 * 64 * 64) % 256) / 255.0).astype(np.float32).reshape(1, 3, 64, 64))
" "$work/image.npy" || die "writing image.npy"
"$cli" run "$work/tiny_resnet.tsr" --input image="$work/image.npy" --output-dir "$work/expected" >"$work/cli.log" 2>&1 ||
  die "tessera run: $(cat "$work/cli.log")"
# Outputs of other inputs (random, seeded), which the checker must reject.
"$cli" run "$work/tiny_resnet.tsr" --seed 1 --output-dir "$work/other" >"$work/cli.log" 2>&1 ||
  die "tessera run --seed 1: $(cat "$work/cli.log")"
"$cli" info "$MODEL" >"$work/info.txt" 2>&1 || die "tessera info: $(cat "$work/info.txt")"

# check EXAMPLE_OUTPUT EXPECTED_DIR: the inputs and outputs listed as `tessera info` lists them, and per
# output the printed sum and first values equal to the .npy file's.
check() {
  "$PYTHON" - "$1" "$2" "$work/info.txt" <<'PY'
import sys
from pathlib import Path
import numpy as np

printed, expected_dir, info = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
lines = Path(printed).read_text().splitlines()
declared = [l for l in lines if l.startswith(("input ", "output "))]
want = [l for l in Path(info).read_text().splitlines() if l.startswith(("input ", "output "))]
if declared != want:
    sys.exit(f"inputs and outputs printed as {declared}, tessera info says {want}")
results = [l for l in lines if l.startswith("result ")]
if len(results) != len(list(expected_dir.glob("*.npy"))):
    sys.exit(f"{len(results)} results printed for {len(list(expected_dir.glob('*.npy')))} outputs")
for line in results:
    # result NAME: DTYPE[DIMS] sum=S first=V0,V1,...
    _, name, kind, total, first = line.split()
    reference = np.load(expected_dir / (name.rstrip(":") + ".npy"))
    kind_want = f"{reference.dtype}[{'x'.join(map(str, reference.shape))}]"
    if kind != kind_want:
        sys.exit(f"{name} printed as {kind}, expected {kind_want}")
    values = np.array([float(v) for v in first.removeprefix("first=").split(",")])
    flat = reference.astype(np.float64).ravel()
    if len(values) != min(8, flat.size):
        sys.exit(f"{name}: {len(values)} first values printed")
    if not np.allclose(values, flat[: len(values)], rtol=1e-5, atol=1e-7):
        sys.exit(f"{name}: first values {values} differ from {flat[: len(values)]}")
    if not np.isclose(float(total.removeprefix("sum=")), flat.sum(), rtol=1e-5, atol=1e-6):
        sys.exit(f"{name}: {total} differs from sum={flat.sum()}")
PY
}

for model in "$work/tiny_resnet.tsr" "$MODEL"; do
  "$example" "$model" >"$work/printed.txt" 2>"$work/err.txt" || die "tessera_embed $model: $(cat "$work/err.txt")"
  check "$work/printed.txt" "$work/expected" || die "tessera_embed $model printed: $(cat "$work/printed.txt")"
  if check "$work/printed.txt" "$work/other" 2>/dev/null; then
    die "the checker accepted tessera_embed's output for other inputs"
  fi
done
# Threads and an input shape through tsr_options (the model's own shape: anything else is an error).
"$example" "$MODEL" --threads 2 --input-shape image=1x3x64x64 >"$work/printed.txt" 2>"$work/err.txt" ||
  die "tessera_embed with options: $(cat "$work/err.txt")"
check "$work/printed.txt" "$work/expected" || die "tessera_embed with options printed: $(cat "$work/printed.txt")"

# Errors: Tessera's message on stderr and exit code 1.
"$example" "$work/missing.onnx" >/dev/null 2>"$work/err.txt"
rc=$?
[ $rc -eq 1 ] && grep -q "error: loading $work/missing.onnx: .*No such file" "$work/err.txt" ||
  die "a missing model gave exit $rc and: $(cat "$work/err.txt")"
"$example" "$MODEL" --input-shape image=1x3x32 >/dev/null 2>"$work/err.txt"
rc=$?
[ $rc -eq 1 ] && grep -q "^error: loading .*image" "$work/err.txt" ||
  die "a wrong input shape gave exit $rc and: $(cat "$work/err.txt")"

# Without dlpack.h (no include folder searchable), find_package(Tessera) names the package to install.
"$CMAKE" -S "$SOURCE/docs/tutorials/04_cpp_embed" -B "$work/no_dlpack" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_ROOT_PATH=/nonexistent -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY >"$work/configure.log" 2>&1 &&
  die "find_package(Tessera) succeeded without dlpack.h"
tr '\n' ' ' <"$work/configure.log" | grep -q "apt-get install *libdlpack-dev" ||
  die "find_package(Tessera) without dlpack.h said: $(cat "$work/configure.log")"

echo "PASS: installed Tessera found by find_package; tutorial 4 matches the CLI on .tsr and ONNX"
