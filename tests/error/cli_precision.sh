#!/usr/bin/env bash
# --precision through the CLI: `run --precision bf16` puts the model's
# convolutions on oneDNN in bf16 (the placement says so, the final layer stays
# float32 with the reason) and gives outputs close to the float32 run (cosine
# >= 0.999, compared with numpy); the partition table and JSON show each
# node's precision; an artifact compiled in bf16 keeps it and refuses a new
# --precision; a bad value is a clear error; and where oneDNN may not use
# AVX512_BF16 (ONEDNN_MAX_CPU_ISA=AVX512_CORE) the model runs in float32 with
# one warning and the reason per node. On a CPU without AVX512_BF16 (as
# tests/lib/cpu_isa.py reads /proc/cpuinfo and the caps) only that float32
# fallback is possible, and it is what is checked, at this CPU's own ISA.
#
# Usage: cli_precision.sh TESSERA_BINARY MODEL.onnx (tests use models/tiny_resnet.onnx)
set -u
TESSERA="$1"
MODEL="$2"
PYTHON=/usr/bin/python3
# shellcheck source=../lib/cli_checks.sh
source "$(dirname "$0")/../lib/cli_checks.sh"
# oneDNN's measured choices off, so that the node counts in bf16 below are fixed: with tuning a 3x3
# convolution measured faster in float32 (Winograd) stays float32.
export TESSERA_DNNL_TUNE=0
CPU_ISA="$(dirname "$0")/../lib/cpu_isa.py"
HAS_BF16="$("$PYTHON" "$CPU_ISA" dnnl_bf16)"

# Outputs of a float32 and a bf16 run on the same seeded random inputs.
expect_ok "fp32 run" run "$MODEL" --output-dir "$work/fp32" --seed 7
if [ "$HAS_BF16" = 1 ]; then
if expect_ok "bf16 run" run "$MODEL" --precision bf16 --placement --output-dir "$work/bf16" --seed 7; then
  cp "$work/out" "$work/bf16_placement.txt"
  expect_in "$work/bf16_placement.txt" "(Conv) -> dnnl (region" "convolutions on oneDNN"
  expect_in "$work/bf16_placement.txt" ", bf16" "a node in bf16"
  expect_in "$work/bf16_placement.txt" "float32: final layer kept in float32" "the final layer's reason"
  if [ -s "$work/err" ]; then fail "bf16 run printed on stderr: $(cat "$work/err")"; else pass; fi
fi
"$PYTHON" - "$work/fp32" "$work/bf16" >"$work/compare" 2>&1 <<'PY'
import os, sys
import numpy as np
a_dir, b_dir = sys.argv[1], sys.argv[2]
names = sorted(os.listdir(a_dir))
assert names and names == sorted(os.listdir(b_dir)), (names, os.listdir(b_dir))
for name in names:
    a = np.load(os.path.join(a_dir, name)).astype(np.float64).ravel()
    b = np.load(os.path.join(b_dir, name)).astype(np.float64).ravel()
    cosine = np.dot(a, b) / np.sqrt(np.dot(a, a) * np.dot(b, b))
    err = np.max(np.abs(a - b)) / np.max(np.abs(a))
    print(name, "cosine", cosine, "relative", err)
    assert cosine >= 0.999 and err <= 3e-2, "bf16 too far from float32"
    assert err > 0, "bf16 gave float32's exact outputs: nothing ran in bf16"
PY
if [ $? -eq 0 ]; then pass; else fail "bf16 against fp32: $(cat "$work/compare")"; fi

# The partition report: a precision section in the table, a precision per node in JSON.
if expect_ok "partition bf16" partition "$MODEL" --precision bf16 --json "$work/p.json"; then
  expect_in "$work/out" "Precision:" "table precision section"
  expect_in "$work/out" "compute in bf16 with float32 accumulation (Conv" "table bf16 count"
  "$PYTHON" - "$work/p.json" >"$work/json_check" 2>&1 <<'PY'
import json, sys
nodes = json.load(open(sys.argv[1]))["nodes"]
bf16 = [n["name"] for n in nodes if n["precision"] == "bf16"]
kept = [n["name"] for n in nodes if n["precision_note"]]
assert bf16 and all(n["op_type"] == "Conv" for n in nodes if n["name"] in bf16), bf16
assert kept, "no node says why it stays float32"
print(len(bf16), "bf16,", len(kept), "kept")
PY
  if [ $? -eq 0 ]; then pass; else fail "partition JSON precision: $(cat "$work/json_check")"; fi
fi
fi  # HAS_BF16
expect_ok "partition fp32" partition "$MODEL"
expect_not_in "$work/out" "Precision:" "no precision section without --precision"

# Artifacts keep their precision; a new one is refused.
if [ "$HAS_BF16" = 1 ] && expect_ok "compile bf16" compile "$MODEL" -o "$work/bf16.tsr" --precision bf16; then
  expect_ok "run bf16 artifact" run "$work/bf16.tsr" --placement --output-dir "$work/bf16_artifact" --seed 7
  expect_in "$work/out" ", bf16" "artifact placement in bf16"
  if cmp -s "$work/bf16/$(ls "$work/bf16" | head -1)" "$work/bf16_artifact/$(ls "$work/bf16" | head -1)"; then
    pass
  else
    fail "the bf16 artifact computes other bytes than the bf16 run"
  fi
  expect_error "precision were fixed" run "$work/bf16.tsr" --precision bf16
fi

expect_error "unknown precision 'int4'" run "$MODEL" --precision int4
expect_error "known: fp32" run "$MODEL" --precision ""

# oneDNN capped below AVX512_BF16 (or a CPU without it): float32, one warning, the reason per node.
if [ "$HAS_BF16" = 1 ]; then cap=AVX512_CORE; isa=avx512_core; else cap="${ONEDNN_MAX_CPU_ISA:-}"; isa="$("$PYTHON" "$CPU_ISA" dnnl_isa_name)"; fi
if env ${cap:+ONEDNN_MAX_CPU_ISA=$cap} "$TESSERA" run "$MODEL" --precision bf16 --placement --output-dir "$work/capped" \
     --seed 7 >"$work/out" 2>"$work/err"; then
  pass
  expect_in "$work/err" "warning: --precision bf16: no node runs in bfloat16" "fallback warning"
  expect_in "$work/err" "without AVX512_BF16" "fallback reason in the warning"
  expect_in "$work/out" "float32: this CPU runs oneDNN at $isa" "fallback reason per node"
  expect_not_in "$work/out" ", bf16" "no node in bf16 when capped"
  if [ "$(grep -c '^warning:' "$work/err")" -eq 1 ]; then pass; else fail "expected one warning: $(cat "$work/err")"; fi
  if [ "$HAS_BF16" = 1 ] || cmp -s "$work/fp32/$(ls "$work/fp32" | head -1)" "$work/capped/$(ls "$work/fp32" | head -1)"; then
    pass  # (at the same ISA as the float32 run, the same bytes)
  else
    fail "the float32 fallback computes other bytes than the float32 run"
  fi
else
  fail "capped bf16 run failed: $(cat "$work/err")"
fi

finish_checks
