#!/usr/bin/env bash
# CLI error handling: each bad invocation exits non-zero with a clear message
# on stderr, and never crashes (exit code >= 128 would mean a signal).
set -u
TESSERA="$1"
MODEL="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
passes=0

expect_error() {  # expect_error "substring" args...
  local want="$1"; shift
  "$TESSERA" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -eq 0 ] || [ $rc -ge 128 ] || ! grep -qF -- "$want" "$work/err"; then
    echo "FAIL: tessera $* -> exit $rc, stderr: $(cat "$work/err")"
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}

printf 'not a model' > "$work/bad.onnx"
printf '\x93NUMPY\x01\x00\x10\x00{garbage' > "$work/bad.npy"
/usr/bin/python3 -c "import numpy as np; np.save('$work/wrong_shape.npy', np.zeros((1,3,8,8), np.float32)); np.save('$work/wrong_dtype.npy', np.zeros((1,3,64,64), np.float64))"

expect_error "usage" 
expect_error "unknown command 'frobnicate'" frobnicate "$MODEL"
expect_error "no model given" run
expect_error "cannot open" run "$work/missing.onnx"
expect_error "bad.onnx" run "$work/bad.onnx"
expect_error "unknown option '--bogus'" run "$MODEL" --bogus
expect_error "--input names 'nope', which is not an input of the model" run "$MODEL" --input "nope=$work/wrong_shape.npy"
expect_error "bad.npy" run "$MODEL" --input "image=$work/bad.npy"
expect_error "input 'image' is float32[1x3x64x64] in the model, but the given shape is 1x3x8x8" run "$MODEL" --input "image=$work/wrong_shape.npy"
expect_error "holds float64, the model expects float32" run "$MODEL" --input "image=$work/wrong_dtype.npy"
expect_error "is not an integer" run "$MODEL" --threads many
expect_error "threads must be between" run "$MODEL" --threads 0
expect_error "'ghost', which is neither an input" run "$MODEL" --input-shape ghost=1x2

# And the happy path writes sanitized output names.
if "$TESSERA" run "$MODEL" --output-dir "$work/out_dir" >/dev/null 2>"$work/err" && [ -f "$work/out_dir/probabilities.npy" ]; then
  passes=$((passes + 1))
else
  echo "FAIL: run with --output-dir: $(cat "$work/err")"; failures=$((failures + 1))
fi
echo "$passes passed, $failures failed"
[ $failures -eq 0 ]
