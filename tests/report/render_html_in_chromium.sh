#!/bin/bash
# Checks that an HTML placement report really renders in a browser: Debian's
# headless Chromium loads the page, its script must have run to the end
# (body data-rendered="ok") and drawn the expected number of nodes, and a
# screenshot must come out as a non-empty PNG.
#
# Usage: render_html_in_chromium.sh REPORT.html [EXPECTED_NODE_COUNT]
# Without EXPECTED_NODE_COUNT, the count the page was generated with
# (body data-expected-node-count) is expected.
# A sample page: TESSERA_REPORT_SAMPLE_HTML=/tmp/r.html \
#   build/tests/tessera_report_tests --gtest_filter='*WritesSample*'
# (add TESSERA_REPORT_SAMPLE_NODES=10000 for a 10,000-node ladder).
set -u

fail() {
  echo "render_html_in_chromium: FAIL: $*" >&2
  exit 1
}

[ $# -ge 1 ] && [ $# -le 2 ] || fail "usage: $0 REPORT.html [EXPECTED_NODE_COUNT]"
html=$1
expected=${2:-}
chromium=/usr/bin/chromium
# Missing Chromium is a failure, not a skip: otherwise this check would pass
# silently on every machine that never had it.
[ -x "$chromium" ] || fail "chromium is not installed (scripts/setup.sh installs it)"
[ -f "$html" ] || fail "no such file: $html"
if [ -n "$expected" ] && ! [[ "$expected" =~ ^[0-9]+$ ]]; then
  fail "EXPECTED_NODE_COUNT must be a number, not '$expected'"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/tessera_chromium.XXXXXX") || fail "cannot make a temporary directory"
trap 'rm -rf "$work"' EXIT
url="file://$(realpath "$html")"
# A private profile and home keep runs independent of each other and of the user.
flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-extensions
       --user-data-dir="$work/profile" --window-size=1400,1000)
export HOME="$work"

if ! timeout 180 "$chromium" "${flags[@]}" --dump-dom "$url" >"$work/dom.html" 2>"$work/dom.log"; then
  tail -n 20 "$work/dom.log" >&2
  fail "chromium --dump-dom failed on $html"
fi
body=$(grep -o '<body[^>]*>' "$work/dom.html" | head -n 1)
[ -n "$body" ] || fail "the dumped DOM of $html has no <body> element"

rendered=$(sed -n 's/.*data-rendered="\([^"]*\)".*/\1/p' <<<"$body")
[ "$rendered" = "ok" ] ||
  fail "the page's script did not finish: body data-rendered=\"${rendered:-<missing>}\" (expected \"ok\")"

drawn=$(sed -n 's/.*data-node-count="\([0-9]*\)".*/\1/p' <<<"$body")
if [ -z "$expected" ]; then
  expected=$(sed -n 's/.*data-expected-node-count="\([0-9]*\)".*/\1/p' <<<"$body")
  [ -n "$expected" ] || fail "no expected node count given and the page does not state one"
fi
[ "$drawn" = "$expected" ] || fail "the page drew ${drawn:-no} nodes, expected $expected"

if ! timeout 180 "$chromium" "${flags[@]}" --screenshot="$work/screenshot.png" "$url" \
    >"$work/shot.log" 2>&1; then
  tail -n 20 "$work/shot.log" >&2
  fail "chromium --screenshot failed on $html"
fi
[ -s "$work/screenshot.png" ] || fail "chromium wrote no screenshot (or an empty one)"
signature=$(head -c 8 "$work/screenshot.png" | od -An -tx1 | tr -d ' \n')
[ "$signature" = "89504e470d0a1a0a" ] || fail "the screenshot is not a PNG (starts with $signature)"

echo "render_html_in_chromium: OK: $html rendered, $drawn nodes drawn, screenshot $(stat -c %s "$work/screenshot.png") bytes"
