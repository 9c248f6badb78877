#!/usr/bin/env bash
# Plug-ins through the CLI: --backend-plugin and TESSERA_BACKEND_PLUGINS, `tessera backends`,
# refusal reasons in `tessera partition`, and artifacts that record the plug-in: a .tsr compiled
# with the ABI probe runs only where that plug-in is loaded, and a plug-in of another payload
# version or compatibility string is refused with a message that says which.
# Usage: plugin_artifacts.sh TESSERA PROBE_DIR
set -euo pipefail
tessera=$1
probe_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_error "what it must say" command...: the command must fail and print that.
expect_error() {
  local want=$1; shift
  if "$@" >"$work/out" 2>&1; then cat "$work/out"; fail "'$*' succeeded"; fi
  grep -qF -- "$want" "$work/out" || { cat "$work/out"; fail "'$*' did not say: $want"; }
}

/usr/bin/python3 - "$work/model.onnx" <<'PY'
import sys
import onnx
from onnx import TensorProto, helper
nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["b"], name="r2"),
         helper.make_node("Sigmoid", ["b"], ["y"], name="s")]
graph = helper.make_graph(nodes, "relus", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
import numpy as np
np.save(sys.argv[1].replace("model.onnx", "x.npy"), np.array([[-2.0, -0.5, 0.0], [0.25, 1.5, 3.0]], np.float32))
PY
probe=$probe_dir/libabi_probe.so

"$tessera" backends --backend-plugin "$probe" >"$work/backends"
grep -q "^  abi_probe .*version 1 " "$work/backends" || { cat "$work/backends"; fail "backends does not list abi_probe"; }
grep -qF "plug-in $probe (ABI 1.0)" "$work/backends" || { cat "$work/backends"; fail "backends does not name the library"; }
TESSERA_BACKEND_PLUGINS="$probe" "$tessera" backends | grep -q "^  abi_probe " || fail "TESSERA_BACKEND_PLUGINS not read"
expect_error "TESSERA_BACKEND_PLUGINS: backend plug-in '$work/none.so': cannot be loaded" \
  env TESSERA_BACKEND_PLUGINS="$work/none.so" "$tessera" backends

"$tessera" partition "$work/model.onnx" --backend-plugin "$probe" >"$work/partition"
grep -q "^ *0  abi_probe  host  " "$work/partition" || { cat "$work/partition"; fail "no abi_probe region"; }
grep -qF "fused: DoubleRelu: r1, r2" "$work/partition" || { cat "$work/partition"; fail "pattern DoubleRelu not taken"; }
grep -qF "abi_probe runs only Relu, not Sigmoid" "$work/partition" || { cat "$work/partition"; fail "no refusal reason"; }

"$tessera" compile "$work/model.onnx" --backend-plugin "$probe" --backends abi_probe,native -o "$work/model.tsr" >/dev/null
expect_error "needs backend 'abi_probe' (version 1, compiled for 'abi-probe/1'), which is neither built in nor loaded as a plug-in" \
  "$tessera" run "$work/model.tsr"
"$tessera" run "$work/model.tsr" --backend-plugin "$probe" --input x="$work/x.npy" --output-dir "$work/out1" >/dev/null
TESSERA_BACKEND_PLUGINS="$probe" "$tessera" run "$work/model.tsr" --input x="$work/x.npy" --output-dir "$work/out2" >/dev/null
expect_error "was compiled by backend 'abi_probe' with payload version 1" \
  "$tessera" run "$work/model.tsr" --backend-plugin "$probe_dir/libabi_probe_v2.so"
expect_error "was compiled for 'abi-probe/1'; backend 'abi_probe' here is 'abi-probe/2'" \
  "$tessera" run "$work/model.tsr" --backend-plugin "$probe_dir/libabi_probe_compat2.so"
expect_error "was built for plug-in ABI 2.0" "$tessera" backends --backend-plugin "$probe_dir/libabi_probe_major2.so"
expect_error "the name of a built-in backend" "$tessera" backends --backend-plugin "$probe_dir/libabi_probe_named_native.so"

# The outputs against numpy: sigmoid(relu(relu(x))).
/usr/bin/python3 - "$work" <<'PY'
import os, sys
import numpy as np
work = sys.argv[1]
x = np.load(os.path.join(work, "x.npy")).astype(np.float64)
want = 1.0 / (1.0 + np.exp(-np.maximum(x, 0.0)))
for out in ("out1", "out2"):
    y = np.load(os.path.join(work, out, "y.npy"))
    assert y.shape == (2, 3) and y.dtype == np.float32, (y.shape, y.dtype)
    assert np.allclose(y, want, rtol=1e-6, atol=1e-7), (y, want)
PY
echo "plugin artifacts: ok"
