#!/usr/bin/env bash
# The CLI end to end with two backends: `tessera partition` reports regions
# and refusals (table, JSON listing every node, DOT, HTML), `tessera compile`
# writes a .tsr artifact and a report, and `tessera run` of the artifact gives
# the same numbers as the ONNX model run with --backends test,native and as
# native alone (compared as .npy files with numpy). Bad placements and
# damaged artifacts must fail with exit code 1 and a clear message, never a
# signal.
#
# Usage: cli_partition.sh TESSERA_BINARY MODEL.onnx (tests use models/tiny_resnet.onnx)
set -u
TESSERA="$1"
MODEL="$2"
PYTHON=/usr/bin/python3
# shellcheck source=../lib/cli_checks.sh
source "$(dirname "$0")/../lib/cli_checks.sh"

# --- partition: table, refusals, JSON, DOT, HTML ---
if expect_ok "partition" partition "$MODEL" --backends test,native --json "$work/p.json" --dot "$work/p.dot" \
     --html "$work/p.html"; then
  cp "$work/out" "$work/table.txt"
  expect_in "$work/table.txt" "Region  Backend  Memory" "region table header"
  expect_in "$work/table.txt" "test-device" "a region in the test backend's memory"
  expect_in "$work/table.txt" "Backend 'test' refused" "refusal summary"
  expect_in "$work/table.txt" "Conv is not declared" "refusal reason"
  expect_in "$work/table.txt" "Copies between memory spaces" "copy total"
  # JSON: valid, and lists every node of the model exactly once across the regions.
  if "$PYTHON" -m json.tool "$work/p.json" >/dev/null 2>"$work/json_err"; then pass; else fail "JSON: $(cat "$work/json_err")"; fi
  "$PYTHON" - "$work/p.json" "$MODEL" >"$work/json_check" 2>&1 <<'EOF'
import json, sys
import onnx
report = json.load(open(sys.argv[1]))
model_nodes = [n.name for n in onnx.load(sys.argv[2]).graph.node]
listed = [name for region in report["regions"] for name in region["nodes"]]
backends = {region["backend"] for region in report["regions"]}
problems = []
if sorted(listed) != sorted(model_nodes):
    problems.append("regions list %d nodes, the model has %d: missing %s, extra %s" % (
        len(listed), len(model_nodes), sorted(set(model_nodes) - set(listed)), sorted(set(listed) - set(model_nodes))))
if backends != {"test", "native"}:
    problems.append("backends used: %s" % sorted(backends))
if report.get("backends") != ["test", "native"]:
    problems.append("backends listed: %s" % report.get("backends"))
print("\n".join(problems) or "ok")
sys.exit(1 if problems else 0)
EOF
  if [ $? -eq 0 ]; then pass; else fail "JSON content: $(cat "$work/json_check")"; fi
  expect_in "$work/p.dot" "digraph" "DOT file"
  expect_in "$work/p.html" "<svg" "HTML file"
fi

# --- compile to an artifact, with a report ---
if expect_ok "compile" compile "$MODEL" -o "$work/model.tsr" --backends test,native --report "$work/report.json"; then
  expect_in "$work/out" "regions" "compile summary"
  if "$PYTHON" -m json.tool "$work/report.json" >/dev/null 2>&1; then pass; else fail "compile --report JSON is not valid"; fi
fi

# --- the artifact runs without the ONNX file, like the ONNX model on both backends and like native ---
cp "$MODEL" "$work/copy.onnx"
expect_ok "run onnx test,native" run "$work/copy.onnx" --backends test,native --seed 3 --output-dir "$work/mixed"
expect_ok "run onnx native" run "$work/copy.onnx" --backends native --seed 3 --output-dir "$work/native"
rm -f "$work/copy.onnx"
if expect_ok "run tsr" run "$work/model.tsr" --seed 3 --output-dir "$work/artifact" --profile; then
  expect_in "$work/out" "19 copies" "profile copies"
  expect_in "$work/out" "test-device" "profile regions"
  expect_in "$work/out" "region 7" "per-region times"
fi
"$PYTHON" - "$work/mixed" "$work/native" "$work/artifact" >"$work/compare" 2>&1 <<'EOF'
import os, sys
import numpy as np
mixed_dir, native_dir, artifact_dir = sys.argv[1:4]
names = sorted(os.listdir(native_dir))
problems = [] if names else ["no outputs written"]
for name in names:
    native = np.load(os.path.join(native_dir, name))
    mixed = np.load(os.path.join(mixed_dir, name))
    artifact = np.load(os.path.join(artifact_dir, name))
    if not np.array_equal(mixed, artifact):
        problems.append("%s: artifact differs from the compiled model" % name)
    if mixed.shape != native.shape or not np.allclose(mixed, native, rtol=1e-5, atol=1e-6):
        problems.append("%s: test,native differs from native (max %g)" % (name, np.max(np.abs(mixed - native))))
print("\n".join(problems) or "ok")
sys.exit(1 if problems else 0)
EOF
if [ $? -eq 0 ]; then pass; else fail "outputs: $(cat "$work/compare")"; fi

# Compiling is deterministic, and an artifact re-saved through compile is byte-identical.
if expect_ok "compile again" compile "$MODEL" -o "$work/again.tsr" --backends test,native &&
   expect_ok "re-save the artifact" compile "$work/model.tsr" -o "$work/resaved.tsr"; then
  if cmp -s "$work/model.tsr" "$work/again.tsr"; then pass; else fail "two compiles of the same model differ"; fi
  if cmp -s "$work/model.tsr" "$work/resaved.tsr"; then pass; else fail "a re-saved artifact differs"; fi
fi

# An artifact takes no placement options or input shapes; its inputs are checked when it runs.
expect_error "compiled artifact" run "$work/model.tsr" --backends native
expect_error "compiled artifact" run "$work/model.tsr" --place op:Relu=native
expect_error "compiled artifact" run "$work/model.tsr" --input-shape image=1x3x64x64
"$PYTHON" -c "import numpy as np, sys; np.save(sys.argv[1], np.zeros((1, 3, 8, 8), np.float32))" "$work/small.npy"
expect_error "input 'image': expected float32[1x3x64x64], got float32[1x3x8x8]" run "$work/model.tsr" \
  --input "image=$work/small.npy"

# --- placement errors ---
expect_error "/stem/stem.0/Conv' (Conv)" run "$MODEL" --strict --backends test
expect_error "/GlobalAveragePool' (GlobalAveragePool)" partition "$MODEL" --strict --backends test
expect_error "backend 'test' cannot run node '/stem/stem.0/Conv'" run "$MODEL" --backends test,native \
  --place /stem/stem.0/Conv=test
expect_error "unknown backend 'acme_npu' (known: dnnl, test, native; a plug-in backend is loaded with --backend-plugin" run "$MODEL" --backends acme_npu,native
expect_in "$work/err" "native" "built-in backends listed"
expect_error "no node named" partition "$MODEL" --backends test,native --place node:ghost=native

# --- damaged artifacts: exit 1 and a message naming the file, never a signal ---
size=$(stat -c %s "$work/model.tsr")
for length in 8 64 200 $((size / 2)) $((size - 1)); do
  head -c "$length" "$work/model.tsr" >"$work/truncated.tsr"
  expect_error "truncated.tsr" run "$work/truncated.tsr"
done
"$PYTHON" -c "
import sys
data = bytearray(open(sys.argv[1], 'rb').read())
data[len(data) // 2] ^= 0x5A
open(sys.argv[2], 'wb').write(data)" "$work/model.tsr" "$work/flipped.tsr"
expect_error "flipped.tsr" run "$work/flipped.tsr"
expect_error "flipped.tsr" info "$work/flipped.tsr"

finish_checks
