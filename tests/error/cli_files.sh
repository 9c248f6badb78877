#!/usr/bin/env bash
# The CLI's files and options: what it writes (only regular files replaced,
# never through a link, no output lost to a name clash), what it reads (.npy
# headers parsed strictly, data exactly as long as the shape), and options
# that used to be accepted and fail later (negative shapes, unknown or
# missing inputs). Usage: cli_files.sh TESSERA MODEL (tiny_resnet.onnx).
set -u
TESSERA="$1"
MODEL="$2"
PY=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
passes=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect_error() {  # expect_error "substring" args...: non-zero exit, no signal, the substring on stderr
  local want="$1"; shift
  timeout 60 "$TESSERA" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -eq 0 ] || [ $rc -ge 124 ] || ! grep -qF -- "$want" "$work/err"; then
    fail "tessera $* -> exit $rc, stderr: $(cat "$work/err")"
  else
    passes=$((passes + 1))
  fi
}

expect_ok() {  # expect_ok args...: exit 0; stdout in $work/out
  if timeout 120 "$TESSERA" "$@" >"$work/out" 2>"$work/err"; then
    passes=$((passes + 1))
  else
    fail "tessera $* -> stderr: $(cat "$work/err")"
  fi
}

check() {  # check "what" command...: the command must succeed
  local what="$1"; shift
  if "$@"; then passes=$((passes + 1)); else fail "$what"; fi
}

# --- compile -o: only a regular file is replaced -------------------------------------------------
mkdir "$work/targets"
mkfifo "$work/targets/fifo.tsr"
mkdir "$work/targets/dir.tsr"
printf 'keep me' > "$work/victim.txt"
ln -s "$work/victim.txt" "$work/targets/link.tsr"
expect_error "is a FIFO; only a regular file is replaced" compile "$MODEL" -o "$work/targets/fifo.tsr"
check "the FIFO is still a FIFO" test -p "$work/targets/fifo.tsr"
expect_error "is a directory" compile "$MODEL" -o "$work/targets/dir.tsr"
expect_error "is a symbolic link" compile "$MODEL" -o "$work/targets/link.tsr"
check "the link is still a link" test -L "$work/targets/link.tsr"
check "the link's target is untouched" test "$(cat "$work/victim.txt")" = "keep me"
printf 'old' > "$work/targets/model.tsr"
expect_ok compile "$MODEL" -o "$work/targets/model.tsr"
check "compile replaced the old file with an artifact" test "$(head -c 7 "$work/targets/model.tsr")" = "TSRARTF"
check "no temporary file is left behind" test -z "$(find "$work/targets" -name '*.tmp-*')"
# Reports go the same way.
expect_error "is a symbolic link" partition "$MODEL" --json "$work/targets/link.tsr"
check "the link's target is untouched by --json" test "$(cat "$work/victim.txt")" = "keep me"

# --- run --output-dir: no link followed out of the folder, no output lost ------------------------
"$PY" - "$work" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper, TensorProto
work = sys.argv[1]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 3])
outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ["a/b", "a_b", "a:b"]]
nodes = [helper.make_node("Add", ["x", "s"], ["a/b"], name="add"),
         helper.make_node("Neg", ["x"], ["a_b"], name="neg"),
         helper.make_node("Mul", ["x", "s"], ["a:b"], name="mul")]
model = helper.make_model(helper.make_graph(nodes, "g", [x, s], outs), opset_imports=[helper.make_opsetid("", 13)])
onnx.save(model, work + "/clash.onnx")
np.save(work + "/x.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
np.save(work + "/s.npy", np.full((2, 3), 3, np.float32))
EOF
expect_ok run "$work/clash.onnx" --input "x=$work/x.npy" --input "s=$work/s.npy" --output-dir "$work/clash_out"
check "the clash is reported" grep -qF "'a/b' and 'a_b' would both be written to a_b.npy" "$work/out"
check "all three outputs are written, each with its own values" "$PY" - "$work" <<'EOF'
import sys, os, numpy as np
work = sys.argv[1]
out = work + "/clash_out"
assert sorted(os.listdir(out)) == ["a_b.npy", "a_b~2.npy", "a_b~3.npy"], os.listdir(out)
x = np.arange(6, dtype=np.float32).reshape(2, 3)
assert np.array_equal(np.load(out + "/a_b.npy"), x + 3)      # a/b, the first output
assert np.array_equal(np.load(out + "/a_b~2.npy"), -x)       # a_b
assert np.array_equal(np.load(out + "/a_b~3.npy"), x * 3)    # a:b
EOF
mkdir "$work/out_dir"
printf 'outside' > "$work/outside.npy"
ln -s "$work/outside.npy" "$work/out_dir/probabilities.npy"
expect_error "is a symbolic link" run "$MODEL" --output-dir "$work/out_dir"
check "the file outside the output folder is untouched" test "$(cat "$work/outside.npy")" = "outside"

# --- options ---------------------------------------------------------------------------------------
expect_error "'1x3x64x-3' is not a shape" run "$MODEL" --input-shape image=1x3x64x-3
expect_error "'-3' is not a shape" compile "$MODEL" -o "$work/neg.tsr" --input-shape batch=-3
check "no artifact is written for a bad shape" test ! -e "$work/neg.tsr"
expect_error "is not a shape" run "$MODEL" --input-shape image=1x3xx64x64
expect_error "is not a shape" run "$MODEL" --input-shape image=1x3x64x
expect_error "is not a shape" run "$MODEL" --input-shape image=
expect_error "--input-shape names 'image' twice" run "$MODEL" --input-shape image=1x3x64x64 --input-shape image=1x3x64x64
expect_error "--input names 'x' twice" run "$work/clash.onnx" --input "x=$work/x.npy" --input "x=$work/s.npy"
expect_error "out of range" run "$MODEL" --threads 4294967297
expect_error "is not an integer" run "$MODEL" --threads ' 2'
expect_error "--input names 'nope', which is not an input of the model (its inputs: image)" \
  run "$MODEL" --input "nope=$work/x.npy"
expect_error "no --input given for 's'" run "$work/clash.onnx" --input "x=$work/x.npy"
expect_ok run "$work/clash.onnx" --input "x=$work/x.npy" --random-inputs
check "a random input is reported as such" grep -qF "input s: float32[2x3] random" "$work/out"
expect_ok run "$MODEL"
check "random inputs without --input are reported" grep -qF "input image: float32[1x3x64x64] random" "$work/out"

# --- .npy headers and data -------------------------------------------------------------------------
"$PY" - "$work" <<'EOF'
import sys, struct, numpy as np
work = sys.argv[1]
def npy(header, data=b"\0" * 24, version=1, header_len=None):
    h = header.encode("latin1")
    n = len(h) if header_len is None else header_len
    prefix = b"\x93NUMPY" + bytes([version, 0]) + (struct.pack("<H", n) if version == 1 else struct.pack("<I", n))
    return prefix + h + data
good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
cases = {
    "maybe": "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }",
    "fortran": "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
    "bigendian": "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
    "structured": "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }",
    "descr_unknown": "{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }",
    "not_tuple": "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }",
    "negative": "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, -3), }",
    "float_dim": "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3), }",
    "no_comma": "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }",
    "extra_key": "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}",
    "twice": "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
    "missing": "{'descr': '<f4', 'shape': (2, 3), }",
    "trailing": good + " garbage",
}
for name, header in cases.items():
    open("%s/%s.npy" % (work, name), "wb").write(npy(header))
open(work + "/short.npy", "wb").write(npy(good, b"\0" * 20))
open(work + "/long.npy", "wb").write(npy(good, b"\0" * 28))
open(work + "/huge_header.npy", "wb").write(npy(good, version=2, header_len=2**31))
open(work + "/ok.npy", "wb").write(npy(good))
bool_header = "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 3), }"
open(work + "/bad_bool.npy", "wb").write(npy(bool_header, b"\0\1\2\0\0\0"))
EOF
for c in "maybe:'fortran_order' is 'Maybe', not True or False" "fortran:Fortran-order" "bigendian:big-endian" \
         "structured:structured dtypes" "descr_unknown:unsupported npy dtype '<c8'" "not_tuple:is not a tuple" \
         "negative:tuple of non-negative integers" "float_dim:tuple of non-negative integers" \
         "no_comma:tuple of non-negative integers" "extra_key:unknown key 'x'" "twice:'descr' is given twice" \
         "missing:needs 'descr', 'fortran_order' and 'shape'" "trailing:unexpected text after the header" \
         "short:truncated npy data: 20 bytes, the shape needs 24" "long:longer than its shape needs (24 bytes, then 4 more)" \
         "huge_header:longer than the 65536-byte limit" "bad_bool:neither 0 nor 1"; do
  expect_error "${c#*:}" run "$work/clash.onnx" --input "x=$work/${c%%:*}.npy" --input "s=$work/x.npy"
done
expect_error "is a directory" run "$work/clash.onnx" --input "x=$work/targets" --input "s=$work/x.npy"
expect_ok run "$work/clash.onnx" --input "x=$work/ok.npy" --input "s=$work/x.npy"
# A pipe is read to its end, no further than the header says.
expect_ok run "$work/clash.onnx" --input "x=/dev/stdin" --input "s=$work/x.npy" < <(cat "$work/ok.npy")
expect_error "longer than its shape needs" run "$work/clash.onnx" --input "x=/dev/stdin" --input "s=$work/x.npy" < <(cat "$work/long.npy")
expect_error "truncated npy data" run "$work/clash.onnx" --input "x=/dev/stdin" --input "s=$work/x.npy" < <(cat "$work/short.npy")

echo "$passes passed, $failures failed"
[ $failures -eq 0 ]
