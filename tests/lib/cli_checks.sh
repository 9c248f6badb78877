# Checks shared by the CLI test scripts (sourced, not run): a scratch folder $work removed on exit, pass
# and fail counters, expect_ok / expect_error around "$TESSERA" (set it before sourcing) and
# expect_in / expect_not_in on files. A script
# ends with `finish_checks`, which prints the counts and fails when any check failed.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
passes=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
pass() { passes=$((passes + 1)); }

# expect_ok "what" args...: exits 0; stdout in $work/out, stderr in $work/err.
expect_ok() {
  local what="$1"; shift
  "$TESSERA" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -ne 0 ]; then
    fail "$what: tessera $* -> exit $rc: $(cat "$work/err")"
    return 1
  fi
  pass
}

# expect_error "substring" args...: exits exactly 1 (an error, not a signal) with the substring on stderr.
expect_error() {
  local want="$1"; shift
  "$TESSERA" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -ne 1 ]; then
    fail "tessera $* -> exit $rc (expected 1): $(cat "$work/err")"
  elif ! grep -qF -- "$want" "$work/err"; then
    fail "tessera $*: stderr lacks '$want': $(cat "$work/err")"
  else
    pass
  fi
}

# expect_in FILE "substring" "what": FILE holds the substring (else the failure shows its start).
expect_in() {
  if grep -qF -- "$2" "$1"; then pass; else fail "$3: '$2' not in $(basename "$1"): $(head -c 3000 "$1")"; fi
}

# expect_not_in FILE "substring" "what": FILE does not hold the substring.
expect_not_in() {
  if grep -qF -- "$2" "$1"; then fail "$3: '$2' in $(basename "$1")"; else pass; fi
}

finish_checks() {
  echo "$passes checks passed, $failures failed"
  [ $failures -eq 0 ]
}
