#!/usr/bin/env bash
# Tutorial 5 end to end (docs/tutorials/05_backend_plugin): installs the C API, the CLI and the headers
# from the build tree into a temporary prefix (no root needed), builds the example accelerator plug-in
# against that prefix as separate CMake projects (the tutorial's, and plugins/example_accelerator as its
# own top level), checks that the module is C only and links nothing of Tessera's, and runs a model with
# it through the installed CLI: its placement must put the nodes on the plug-in, its outputs must match
# numpy, and a .tsr compiled with it must run only where the plug-in is loaded.
#
# Usage: backend_plugin.sh CMAKE BUILD_DIR SOURCE_DIR
set -u
CMAKE="$1"
BUILD="$2"
SOURCE="$3"
PYTHON=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

die() {
  echo "FAIL: $*"
  exit 1
}

for component in Runtime Development; do
  "$CMAKE" --install "$BUILD" --prefix "$prefix" --component "$component" >"$work/install.log" 2>&1 ||
    die "cmake --install --component $component: $(cat "$work/install.log")"
done
for file in bin/tessera include/tessera/backend_plugin.h lib/cmake/Tessera/TesseraConfig.cmake; do
  [ -f "$prefix/$file" ] || die "the install lacks $file"
done

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
# build NAME SOURCE_FOLDER: configures and builds a project against the prefix; the module's path in $plugin.
build() {
  "$CMAKE" -S "$2" -B "$work/$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" \
    >"$work/configure.log" 2>&1 || die "configuring $2: $(cat "$work/configure.log")"
  "$CMAKE" --build "$work/$1" >"$work/build.log" 2>&1 || die "building $2: $(cat "$work/build.log")"
  plugin="$work/$1/plugins/libtessera_example_accelerator.so"
  [ -f "$plugin" ] || die "building $2 made no $plugin: $(ls -R "$work/$1" | head -40)"
}
build standalone "$SOURCE/plugins/example_accelerator"
build tutorial "$SOURCE/docs/tutorials/05_backend_plugin"

# A C-only module that needs nothing of Tessera's: no libtessera, no C++ runtime; two exported functions.
ldd "$plugin" | grep -qE "libtessera|libstdc\+\+" && die "the plug-in links $(ldd "$plugin" | grep -E 'tessera|stdc')"
exported=$(nm -D --defined-only "$plugin" | awk '$2 == "T" {print $3}' | sort | tr '\n' ' ')
[ "$exported" = "example_accelerator_live_allocations tessera_backend_plugin " ] ||
  die "the plug-in exports: $exported"

cli="$prefix/bin/tessera"
"$cli" backends --backend-plugin "$plugin" >"$work/backends.txt" 2>&1 || die "tessera backends: $(cat "$work/backends.txt")"
grep -q "example_accelerator  version 1" "$work/backends.txt" || die "tessera backends: $(cat "$work/backends.txt")"

# The tutorial's model: y = sigmoid(relu(x W + b) V^T + c), numpy's answer beside it.
"$PYTHON" - "$work" <<'PY' || die "writing the model"
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

work = sys.argv[1]
rng = np.random.default_rng(5)
x, W, b = rng.standard_normal((8, 16), np.float32), rng.standard_normal((16, 32), np.float32), rng.standard_normal(32, np.float32)
V, c = rng.standard_normal((10, 32), np.float32), rng.standard_normal(10, np.float32)
nodes = [helper.make_node("MatMul", ["x", "W"], ["p"], name="fc1"),
         helper.make_node("Add", ["p", "b"], ["s"], name="bias1"),
         helper.make_node("Relu", ["s"], ["h"], name="relu1"),
         helper.make_node("Gemm", ["h", "V", "c"], ["g"], name="fc2", transB=1),
         helper.make_node("Sigmoid", ["g"], ["y"], name="out")]
graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 10])],
                          [numpy_helper.from_array(v, n) for n, v in {"W": W, "b": b, "V": V, "c": c}.items()])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), f"{work}/mlp.onnx")
np.save(f"{work}/x.npy", x)
h = np.maximum(x.astype(np.float64) @ W + b, 0.0)
np.save(f"{work}/expected.npy", (1.0 / (1.0 + np.exp(-(h @ V.T + c)))).astype(np.float32))
PY

use=(--backend-plugin "$plugin" --backends example_accelerator,native)
"$cli" partition "$work/mlp.onnx" "${use[@]}" >"$work/partition.txt" 2>&1 || die "tessera partition: $(cat "$work/partition.txt")"
grep -q "fused: MatMulAddRelu: fc1, bias1, relu1" "$work/partition.txt" &&
  grep -qE "^ +0 +example_accelerator " "$work/partition.txt" && ! grep -qE "^ +[0-9]+ +native " "$work/partition.txt" ||
  die "the model is not all on the plug-in: $(cat "$work/partition.txt")"

# compare DIR: DIR/y.npy equals numpy's.
compare() {
  "$PYTHON" -c "
import sys
import numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
assert np.allclose(got, want, rtol=1e-5, atol=1e-6), np.abs(got - want).max()
" "$1/y.npy" "$work/expected.npy"
}
"$cli" run "$work/mlp.onnx" "${use[@]}" --input x="$work/x.npy" --output-dir "$work/out" >"$work/run.txt" 2>&1 ||
  die "tessera run: $(cat "$work/run.txt")"
compare "$work/out" || die "the outputs differ from numpy's"

"$cli" compile "$work/mlp.onnx" "${use[@]}" -o "$work/mlp.tsr" >"$work/compile.txt" 2>&1 ||
  die "tessera compile: $(cat "$work/compile.txt")"
"$cli" run "$work/mlp.tsr" --backend-plugin "$plugin" --input x="$work/x.npy" --output-dir "$work/out_tsr" \
  >"$work/run.txt" 2>&1 || die "tessera run .tsr: $(cat "$work/run.txt")"
compare "$work/out_tsr" || die "the .tsr's outputs differ from numpy's"
"$cli" run "$work/mlp.tsr" --input x="$work/x.npy" >"$work/run.txt" 2>&1 && die "the .tsr ran without its plug-in"
grep -q "needs backend 'example_accelerator'" "$work/run.txt" || die "without the plug-in: $(cat "$work/run.txt")"

echo "PASS: the example accelerator plug-in builds against an installed Tessera and runs through its CLI"
