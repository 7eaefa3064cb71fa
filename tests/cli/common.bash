# Helpers for the cli tests (sourced; not a test itself).
# TFM_BIN: the folder of the built programs; TFM_SOURCE: the source tree.
set -u
: "${TFM_BIN:?TFM_BIN must name the folder of the built programs}"
: "${TFM_SOURCE:?TFM_SOURCE must name the source tree}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# run PROGRAM ARGS...: runs it with stdin from /dev/null; sets $rc, and
# $TMP/out and $TMP/err.
run() {
  local program=$1
  shift
  "$TFM_BIN/$program" "$@" </dev/null >"$TMP/out" 2>"$TMP/err"
  rc=$?
}

expect_rc() {  # expect_rc WANT DESCRIPTION
  [ "$rc" -eq "$1" ] || fail "$2: exit $rc, expected $1 (stderr: $(head -c 300 "$TMP/err"))"
}

expect_one_error_line() {  # expect_one_error_line PROGRAM DESCRIPTION
  local lines
  lines=$(grep -c "^$1: error: " "$TMP/err")
  [ "$lines" -eq 1 ] || fail "$2: expected one '$1: error:' line on stderr, got: $(cat "$TMP/err")"
}

# refused PROGRAM DESCRIPTION EXPECTED-TEXT ARGS...: bad input, exit 1, one
# error line that holds EXPECTED-TEXT.
refused() {
  local program=$1 what=$2 text=$3
  shift 3
  run "$program" "$@"
  expect_rc 1 "$what"
  expect_one_error_line "$program" "$what"
  grep -qF -- "$text" "$TMP/err" || fail "$what: no '$text' in: $(cat "$TMP/err")"
}

finish() {
  if [ "$failures" -gt 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
}
