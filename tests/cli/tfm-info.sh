# tfm-info: help, version, report, --json, --device, -q, bad usage.
source "$(dirname "$0")/common.bash"

run tfm-info --help
expect_rc 0 "--help"
grep -q "^Usage: tfm-info" "$TMP/out" || fail "--help: no usage line on stdout"
[ -s "$TMP/err" ] && fail "--help: wrote to stderr"

run tfm-info --version
expect_rc 0 "--version"
grep -q "^tfm-info tfm [0-9]" "$TMP/out" || fail "--version: got '$(cat "$TMP/out")'"

run tfm-info
expect_rc 0 "plain run"
for key in version cpu blas device; do
  grep -q "^$key:" "$TMP/out" || fail "plain run: no '$key:' line"
done
grep -q "^blas:.* core [A-Za-z]" "$TMP/out" || fail "plain run: no BLAS core named"

if "$TFM_BIN/tfm-info" --json | grep -q '"devices":\[\]'; then has_gpu=0; else has_gpu=1; fi

# Without a GPU, auto runs on the CPU and says so exactly once; -q silences it.
run tfm-info --device auto
expect_rc 0 "--device auto"
if [ "$has_gpu" -eq 0 ]; then
  grep -q "^device:  cpu$" "$TMP/out" || fail "--device auto without GPU: not cpu"
  [ "$(grep -c 'running on the CPU' "$TMP/err")" -eq 1 ] || fail "--device auto: expected one notice, got: $(cat "$TMP/err")"
  run tfm-info -q
  [ -s "$TMP/err" ] && fail "-q: stderr not silent: $(cat "$TMP/err")"
  run tfm-info --device cuda
  expect_rc 1 "--device cuda without a GPU"
  expect_one_error_line tfm-info "--device cuda without a GPU"
else
  grep -q "^device:  cuda:0$" "$TMP/out" || fail "--device auto with a GPU: not cuda:0"
  run tfm-info --device cuda:0
  expect_rc 0 "--device cuda:0 with a GPU"
  run tfm-info --device cuda:4096
  expect_rc 1 "--device cuda:4096"
  expect_one_error_line tfm-info "--device cuda:4096"
fi

run tfm-info --device cpu
expect_rc 0 "--device cpu"
grep -q "^device:  cpu$" "$TMP/out" || fail "--device cpu: not cpu"
[ -s "$TMP/err" ] && fail "--device cpu: notice printed although cpu was asked for"

# --json: one valid JSON object with the same facts.
run tfm-info --json --device cpu
expect_rc 0 "--json"
python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["device"]=="cpu"; assert d["blas"]["core"]; assert "devices" in d["cuda"]' <"$TMP/out" \
  || fail "--json: not the expected JSON: $(cat "$TMP/out")"

# -v shows no error and still succeeds
run tfm-info -v --device cpu
expect_rc 0 "-v"

# Bad usage: exit 2, one error line, a pointer to --help.
for bad in "--bogus" "--device gpu" "--device cuda:x" "extra-argument"; do
  # shellcheck disable=SC2086
  run tfm-info $bad
  expect_rc 2 "$bad"
  expect_one_error_line tfm-info "$bad"
  grep -q -- "--help" "$TMP/err" || fail "$bad: no pointer to --help"
done

finish
