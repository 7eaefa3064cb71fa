# The bad-input table of every program (bad_inputs.tsv): each row's
# command gives one error line naming its program, holding the row's
# fragment (and no line but the program's own progress), the row's exit
# status (1 bad input, 2 bad usage: docs/architecture.md, "Conventions of
# every program") and no file where the row says none may be. Then the
# messages of issue 19, item 9, that are not errors: JSON stays JSON.
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/fixtures.bash"

"$TFM_TOOLS/tiny_checkpoint" "$TMP/m.bin" --tokenizer "$M" || fail "tiny_checkpoint"
"$TFM_TOOLS/tiny_checkpoint" "$TMP/state.bin" --tokenizer "$M" --step 2 || fail "tiny_checkpoint --step"
$FORGE ckpt-section "$TMP/state.bin" "$TMP/section.bin" 'bad\nname' 9 || fail "forge a section"
$FORGE tfmb-batch-start "$T" "$TMP/batch1.tfmb" 1 || fail "forge a batch table"
head -5 "$TMP/train.tok" >"$TMP/src"
cut -d' ' -f1 "$TMP/src" >"$TMP/hyp"
printf '\n\n\n' >"$TMP/empty"
printf 'beem = 10\n' >"$TMP/beem.ini"

rows=0
while IFS=$'\t' read -r command want fragment no_file; do
  case "$command" in '#'* | '') continue ;; esac
  rows=$((rows + 1))
  eval "fragment=\"$fragment\"; no_file=\"$no_file\""
  # The program: the first word that is not VAR=VALUE.
  program=$(for w in $command; do case "$w" in *=*) ;; *) echo "$w"; break ;; esac; done)
  (export PATH="$TFM_BIN:$PATH"; eval "$command") </dev/null >"$TMP/out" 2>"$TMP/err"
  rc=$?
  [ "$rc" -eq "$want" ] || fail "$command: exit $rc, expected $want (stderr: $(head -c 300 "$TMP/err"))"
  # One error line; any other line is the program's own progress (no
  # second error, no warning, nothing from a library).
  errors=$(grep -c "^$program: error: " "$TMP/err")
  others=$(grep -vc "^$program: \(running on\|training a\|model:\|memory:\)" "$TMP/err")
  [ "$errors" -eq 1 ] && [ "$others" -eq 1 ] \
    || fail "$command: expected one line '$program: error: ...' on stderr, got: $(cat "$TMP/err")"
  grep -qF -- "$fragment" "$TMP/err" || fail "$command: expected '$fragment' in: $(cat "$TMP/err")"
  if [ "$no_file" != "-" ] && [ -e "$no_file" ]; then
    fail "$command: left $no_file"
    rm -rf "$no_file"
  fi
done <"$TFM_SOURCE/tests/cli/bad_inputs.tsv"
[ "$rows" -ge 40 ] || fail "only $rows rows read from bad_inputs.tsv"

# A fingerprint of invalid UTF-8 (the header's checksum right): tfm-batch
# info --json is still JSON, and the text form still one line a field.
$FORGE tfmb-fingerprint "$T" "$TMP/fp.tfmb" 737066ff2dfe0a41 || fail "forge a fingerprint"
run tfm-batch info "$TMP/fp.tfmb" --json
expect_rc 0 "info --json, an invalid-UTF-8 fingerprint"
python3 -c '
import json, sys
d = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
assert d["vocab_fingerprint"] == "spf\u00ff-\u00fe\nA", repr(d["vocab_fingerprint"])
' "$TMP/out" || fail "info --json, an invalid-UTF-8 fingerprint: not JSON: $(cat "$TMP/out")"
finish
