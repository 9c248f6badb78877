#!/usr/bin/env bash
# The example accelerator plug-in (plugins/example_accelerator/) through the CLI, end to end, on small
# ONNX models written here with onnx.helper, every output compared with numpy:
#   whole  MatMul+Add+Relu (fused as MatMulAddRelu), Gemm(transB), Sigmoid: the whole graph offloaded,
#          no native region;
#   none   Tanh, Softmax: no node offloaded (every refusal named), the plug-in loaded all the same;
#   mixed  Relu(x) on the accelerator, whose output `a` is a graph output and read by native; Tanh(a) and
#          Exp(x) on native, so the graph input x is read by regions in two memory spaces; Mul on the
#          accelerator again.
# Then `tessera compile` to .tsr and `tessera run` of it with the plug-in (--backend-plugin and
# TESSERA_BACKEND_PLUGINS) and without it (must fail naming the plug-in), and
# EXAMPLE_ACCELERATOR_FAIL=compile|load|run|allocate, each a clear error (exit 1) naming the plug-in.
#
# Usage: cli_end_to_end.sh TESSERA_BINARY PLUGIN.so
set -u
TESSERA="$1"
PLUGIN="$2"
PYTHON=/usr/bin/python3
# shellcheck source=../lib/cli_checks.sh
source "$(dirname "$0")/../../lib/cli_checks.sh"

# expect_in "what" FILE "substring": FILE holds the substring.
expect_in() {
  if grep -qF -- "$3" "$2"; then pass; else fail "$1: '$3' not in: $(cat "$2")"; fi
}

# The models, their inputs and numpy's outputs (MODEL.expected/NAME.npy).
"$PYTHON" - "$work" <<'PY' || { echo "FAIL: writing the models"; exit 1; }
import os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

work = sys.argv[1]
rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def save(name, nodes, inputs, outputs, initializers, feeds, expected):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(feeds[n].shape)) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(expected[n].shape)) for n in outputs],
        [numpy_helper.from_array(v, n) for n, v in initializers.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), f"{work}/{name}.onnx")
    for n, v in feeds.items():
        np.save(f"{work}/{name}.{n}.npy", v)
    os.makedirs(f"{work}/{name}.expected")
    for n, v in expected.items():
        np.save(f"{work}/{name}.expected/{n}.npy", v.astype(np.float32))


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


x = f32(4, 6)
W, B, W2, C = f32(6, 5), f32(5), f32(3, 5), f32(3)
r = np.maximum(x.astype(np.float64) @ W + B, 0.0)
save("whole", [helper.make_node("MatMul", ["x", "W"], ["p"], name="mm"),
               helper.make_node("Add", ["B", "p"], ["s"], name="add"),
               helper.make_node("Relu", ["s"], ["r"], name="relu"),
               helper.make_node("Gemm", ["r", "W2", "C"], ["g"], name="gemm", transB=1),
               helper.make_node("Sigmoid", ["g"], ["y"], name="sig")],
     ["x"], ["y"], {"W": W, "B": B, "W2": W2, "C": C}, {"x": x}, {"y": sigmoid(r @ W2.T + C)})

x = f32(2, 5)
t = np.tanh(x.astype(np.float64))
save("none", [helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
              helper.make_node("Softmax", ["t"], ["y"], name="softmax")],
     ["x"], ["y"], {}, {"x": x}, {"y": np.exp(t) / np.exp(t).sum(axis=-1, keepdims=True)})

x = f32(3, 4)
a = np.maximum(x.astype(np.float64), 0.0)
save("mixed", [helper.make_node("Relu", ["x"], ["a"], name="relu"),
               helper.make_node("Tanh", ["a"], ["t"], name="tanh"),
               helper.make_node("Exp", ["x"], ["e"], name="exp"),
               helper.make_node("Mul", ["t", "e"], ["z"], name="mul")],
     ["x"], ["a", "z"], {}, {"x": x}, {"a": a, "z": np.tanh(a) * np.exp(x.astype(np.float64))})
PY

# check MODEL DIR: every output numpy computed is in DIR, same dtype and shape, close in value.
check() {
  "$PYTHON" - "$work/$1.expected" "$2" <<'PY'
import pathlib, sys
import numpy as np
expected, got = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
names = sorted(p.name for p in expected.glob("*.npy"))
if sorted(p.name for p in got.glob("*.npy")) != names:
    sys.exit(f"outputs {sorted(p.name for p in got.glob('*.npy'))}, expected {names}")
for name in names:
    want, have = np.load(expected / name), np.load(got / name)
    if have.dtype != want.dtype or have.shape != want.shape:
        sys.exit(f"{name}: {have.dtype}{have.shape}, expected {want.dtype}{want.shape}")
    if not np.allclose(have, want, rtol=1e-5, atol=1e-6):
        sys.exit(f"{name}: largest difference {np.abs(have - want).max()}")
PY
}

# run_and_check "what" MODEL FILE [options...]: tessera run FILE with MODEL's inputs, outputs checked.
run_and_check() {
  local what="$1" model="$2" file="$3"; shift 3
  local out="$work/out.$model.$passes"
  expect_ok "$what" run "$file" --input x="$work/$model.x.npy" --output-dir "$out" "$@" || return
  if check "$model" "$out" >"$work/check" 2>&1; then pass; else fail "$what: $(cat "$work/check")"; fi
}

use=(--backend-plugin "$PLUGIN" --backends example_accelerator,native)

# Listed, with its version and library.
expect_ok "backends" backends --backend-plugin "$PLUGIN" &&
  expect_in "backends" "$work/out" "example_accelerator  version 1" &&
  expect_in "backends" "$work/out" "plug-in $PLUGIN (ABI 1."

# whole: one accelerator region, the pattern fused, nothing on native.
if expect_ok "partition whole" partition "$work/whole.onnx" "${use[@]}"; then
  expect_in "partition whole" "$work/out" "5 nodes run in 1 region"
  expect_in "partition whole" "$work/out" "fused: MatMulAddRelu: mm, add, relu"
  grep -qE "^ +[0-9]+ +native " "$work/out" && fail "whole: a native region: $(cat "$work/out")"
  expect_in "partition whole" "$work/out" "example-acceler"
fi
run_and_check "run whole" whole "$work/whole.onnx" "${use[@]}"
run_and_check "run whole --profile" whole "$work/whole.onnx" "${use[@]}" --profile &&
  expect_in "profile" "$work/out" "on example_accelerator"

# none: everything refused, with reasons; runs on native with the plug-in loaded.
if expect_ok "partition none" partition "$work/none.onnx" "${use[@]}"; then
  expect_in "partition none" "$work/out" "example_accelerator: op Tanh is not implemented on this device"
  expect_in "partition none" "$work/out" "example_accelerator: op Softmax is not implemented on this device"
  grep -qE "^ +[0-9]+ +example_accelerator " "$work/out" && fail "none: an accelerator region: $(cat "$work/out")"
fi
run_and_check "run none" none "$work/none.onnx" "${use[@]}"

# mixed: accelerator, native, accelerator; `a` leaves region 0 both as a graph output and for native.
if expect_ok "partition mixed" partition "$work/mixed.onnx" "${use[@]}"; then
  expect_in "partition mixed" "$work/out" "4 nodes run in 3 regions"
  grep -qE "^ +0 +example_accelerator " "$work/out" && grep -qE "^ +1 +native " "$work/out" &&
    grep -qE "^ +2 +example_accelerator " "$work/out" || fail "mixed: not accelerator, native, accelerator: $(cat "$work/out")"
fi
run_and_check "run mixed" mixed "$work/mixed.onnx" "${use[@]}"
run_and_check "run mixed, 2 threads" mixed "$work/mixed.onnx" "${use[@]}" --threads 2
run_and_check "run mixed, native only" mixed "$work/mixed.onnx" --backend-plugin "$PLUGIN" --backends native

# Artifacts: the .tsr records the plug-in; it runs only where the plug-in is loaded.
for model in whole mixed; do
  expect_ok "compile $model" compile "$work/$model.onnx" "${use[@]}" -o "$work/$model.tsr" || continue
  run_and_check "run $model.tsr" "$model" "$work/$model.tsr" --backend-plugin "$PLUGIN"
  TESSERA_BACKEND_PLUGINS="$PLUGIN" run_and_check "run $model.tsr (TESSERA_BACKEND_PLUGINS)" "$model" "$work/$model.tsr"
  expect_error "needs backend 'example_accelerator' (version 1" run "$work/$model.tsr" --input x="$work/$model.x.npy"
done

# Injected failures: exit 1, the plug-in and the step named, no crash.
for step in compile load run; do
  EXAMPLE_ACCELERATOR_FAIL=$step expect_error \
    "backend plug-in 'example_accelerator': $step: example_accelerator: injected failure in $step" \
    run "$work/mixed.onnx" "${use[@]}" --input x="$work/mixed.x.npy"
done
EXAMPLE_ACCELERATOR_FAIL=allocate expect_error "example_accelerator: injected failure in allocate" \
  run "$work/mixed.onnx" "${use[@]}" --input x="$work/mixed.x.npy"
EXAMPLE_ACCELERATOR_FAIL=compile expect_error "example_accelerator: injected failure in compile" \
  compile "$work/whole.onnx" "${use[@]}" -o "$work/failed.tsr"
[ -e "$work/failed.tsr" ] && fail "a failed compile wrote $work/failed.tsr"
if [ -f "$work/mixed.tsr" ]; then
  for step in load run; do
    EXAMPLE_ACCELERATOR_FAIL=$step expect_error \
      "backend plug-in 'example_accelerator': $step: example_accelerator: injected failure in $step" \
      run "$work/mixed.tsr" --backend-plugin "$PLUGIN" --input x="$work/mixed.x.npy"
  done
fi

finish_checks
