# Issue 19, item 3: what a program writes on stdout is checked. To a full
# disk (/dev/full) every program fails with one line and exit 1, results
# as well as --help; to a pipe whose reader went away (| head -1) it ends
# quietly, without an error line.
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/fixtures.bash"
[ -w /dev/full ] || { echo "no /dev/full here: skipped"; exit 77; }

"$TFM_TOOLS/tiny_checkpoint" "$TMP/m.bin" --tokenizer "$M" || fail "tiny_checkpoint"
head -20 "$TMP/train.tok" >"$TMP/src"
cut -d' ' -f1-2 "$TMP/src" >"$TMP/hyp"
echo "(TOP (S (NP (DT a)) (VP (VB b))))" >"$TMP/trees"

# One command a line: PROGRAM ARGS... (eval'd, so $TMP and friends work).
commands=$(cat <<CMDS
tfm-score -r $TMP/src -i $TMP/hyp
tfm-score -r $TMP/src -i $TMP/hyp --json
tfm-score -r $TMP/src -i $TMP/hyp --metrics chrf -sl
tfm-score -m $TMP/m.bin $TMP/src $TMP/src
tfm-score -m $TMP/m.bin $TMP/src $TMP/src --json
tfm-batch info $T
tfm-batch info $T --json
tfm-batch -m $M -o $TMP/j.tfmb $TMP/src $TMP/src --json
tfm-train --dump-config
tfm-train --preset tiny --dump-config
tfm-info
tfm-info --json
tfm-tok -m $M $TMP/text
tfm-tok -d -m $M $TMP/tok
tfm-decode -m $TMP/m.bin --max-len-b 3 $TMP/src
tfm-tree linearize $TMP/trees
tfm-attnviz -m $TMP/m.bin -o - "a b c"
tfm-train --help
tfm-decode --help
tfm-score --version
CMDS
)
while read -r line; do
  [ -n "$line" ] || continue
  eval "set -- $line"
  program=$1
  shift
  "$TFM_BIN/$program" "$@" </dev/null >/dev/full 2>"$TMP/err"
  rc=$?
  [ "$rc" -eq 1 ] || fail "$line > /dev/full: exit $rc, expected 1 (stderr: $(head -c 300 "$TMP/err"))"
  expect_one_error_line "$program" "$line > /dev/full"
  grep -qi "No space left on device\|cannot write" "$TMP/err" \
    || fail "$line > /dev/full: the error does not say why: $(cat "$TMP/err")"
done <<<"$commands"

# A closed pipe is not an error: no line on stderr, whatever the output's size.
yes "a b c d e f" | head -50000 >"$TMP/big"
for line in "tfm-tok -m $M $TMP/big" "tfm-score -r $TMP/src -i $TMP/hyp -sl" "tfm-batch info $T" \
    "tfm-info" "tfm-train --dump-config"; do
  eval "set -- $line"
  program=$1
  shift
  "$TFM_BIN/$program" "$@" </dev/null 2>"$TMP/err" | head -1 >/dev/null
  [ -s "$TMP/err" ] && grep -q "error" "$TMP/err" && fail "$line | head -1: an error line: $(cat "$TMP/err")"
done
finish
