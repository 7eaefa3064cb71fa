# tfm-avgckpt: every option's effect, torn, foreign and mismatched inputs.
source "$(dirname "$0")/common.bash"
P=tfm-avgckpt
: "${TFM_TOOLS:?TFM_TOOLS must name the folder of the test helpers}"
tiny() { "$TFM_TOOLS/tiny_checkpoint" "$@" || fail "tiny_checkpoint $*"; }

run $P --help
expect_rc 0 "--help"
grep -q "^Usage: tfm-avgckpt" "$TMP/out" || fail "--help: no usage line"
run $P --version
expect_rc 0 "--version"

mkdir -p "$TMP/ck"
for step in 100 200 300 400; do tiny "$TMP/ck/checkpoint_$step.bin" --seed $step --step $step; done
cp "$TMP/ck/checkpoint_400.bin" "$TMP/ck/checkpoint_last.bin"
printf 'notes\n' >"$TMP/ck/README"

# k copies of one checkpoint: that checkpoint, and without its state the
# same file tiny_checkpoint writes without --step (the writer is deterministic).
tiny "$TMP/plain.bin" --seed 100
run $P -o "$TMP/avg.bin" "$TMP/ck/checkpoint_100.bin" "$TMP/ck/checkpoint_100.bin" "$TMP/ck/checkpoint_100.bin"
expect_rc 0 "3 copies"
cmp -s "$TMP/avg.bin" "$TMP/plain.bin" || fail "3 copies: not the checkpoint itself (state dropped)"
grep -q "avg.bin: the mean of 3 checkpoints (.* tensors, 44800 parameters)" "$TMP/err" || fail "report: $(cat "$TMP/err")"
run $P -q -o "$TMP/avg.bin" "$TMP/plain.bin"
expect_rc 0 "-q"; [ -s "$TMP/err" ] && fail "-q: stderr: $(cat "$TMP/err")"
cmp -s "$TMP/avg.bin" "$TMP/plain.bin" || fail "one input: not itself"

# --last N DIR: the newest N by step, whatever else lies there.
run $P -o "$TMP/last.bin" --last 2 "$TMP/ck"
expect_rc 0 "--last 2"
grep -q "the newest 2 of .*: .*checkpoint_300.bin .*checkpoint_400.bin$" "$TMP/err" || fail "--last 2 picks: $(cat "$TMP/err")"
run $P -o "$TMP/explicit.bin" "$TMP/ck/checkpoint_300.bin" "$TMP/ck/checkpoint_400.bin"
cmp -s "$TMP/last.bin" "$TMP/explicit.bin" || fail "--last 2 differs from the two files"
run $P -o "$TMP/swapped.bin" "$TMP/ck/checkpoint_400.bin" "$TMP/ck/checkpoint_300.bin"
cmp -s "$TMP/last.bin" "$TMP/swapped.bin" || fail "the order of the inputs matters"
run $P -o "$TMP/x.bin" --last 5 "$TMP/ck"
expect_rc 1 "--last 5 of 4"; expect_one_error_line $P "--last 5 of 4"
grep -q "holds 4 checkpoints with a training step, fewer than the 5 asked for" "$TMP/err" || fail "--last 5: $(cat "$TMP/err")"

# --keep-state: the newest input's sections, verbatim.
run $P -o "$TMP/keep.bin" --keep-state "$TMP/ck/checkpoint_400.bin" "$TMP/ck/checkpoint_300.bin"
expect_rc 0 "--keep-state"
grep -q "training state of .*checkpoint_400.bin" "$TMP/err" || fail "--keep-state: not the newest by step: $(cat "$TMP/err")"
run $P -o "$TMP/keep1.bin" --keep-state "$TMP/ck/checkpoint_400.bin"
cmp -s "$TMP/keep1.bin" "$TMP/ck/checkpoint_400.bin" || fail "--keep-state of one input is not that input"
run $P -o "$TMP/x.bin" --keep-state "$TMP/plain.bin"
expect_rc 1 "--keep-state without state"; expect_one_error_line $P "--keep-state without state"

# --zstd-level: another size, the same tensors.
run $P -o "$TMP/z19.bin" --zstd-level 19 "$TMP/plain.bin"
expect_rc 0 "--zstd-level 19"
cmp -s "$TMP/z19.bin" "$TMP/plain.bin" && fail "--zstd-level 19: no effect"
run $P -o "$TMP/back.bin" "$TMP/z19.bin"
cmp -s "$TMP/back.bin" "$TMP/plain.bin" || fail "--zstd-level 19 changed the tensors"

# Refused, exit 1, one line naming the file (and the tensor), no output left.
tiny "$TMP/dff.bin" --set d_ff=32
tiny "$TMP/layers.bin" --set layers=1
head -c 3000 "$TMP/plain.bin" >"$TMP/torn.bin"
printf 'hello\n' >"$TMP/foreign.bin"
: >"$TMP/empty.bin"
cp "$TMP/plain.bin" "$TMP/flipped.bin"
printf '\xff' | dd of="$TMP/flipped.bin" bs=1 seek=2000 conv=notrunc 2>/dev/null
check_refused() {  # check_refused WHAT PATTERN INPUT...
  local what=$1 pattern=$2
  shift 2
  rm -f "$TMP/refused.bin"
  run $P -o "$TMP/refused.bin" "$@"
  expect_rc 1 "$what"
  expect_one_error_line $P "$what"
  grep -q -- "$pattern" "$TMP/err" || fail "$what: '$pattern' not in: $(cat "$TMP/err")"
  [ -e "$TMP/refused.bin" ] && fail "$what: an output file was left"
  ls "$TMP" | grep -q 'refused.bin.tmp' && fail "$what: a temporary file was left"
}
check_refused "config" "dff.bin holds another configuration than .*plain.bin: 'd_ff = 32'" "$TMP/plain.bin" "$TMP/dff.bin"
check_refused "tensors" "layers.bin.*'layers = 1'" "$TMP/plain.bin" "$TMP/layers.bin"
check_refused "torn" "torn.bin is truncated" "$TMP/plain.bin" "$TMP/torn.bin"
check_refused "foreign" "foreign.bin is not a tfm checkpoint" "$TMP/plain.bin" "$TMP/foreign.bin"
check_refused "empty" "empty.bin is empty" "$TMP/empty.bin"
check_refused "corrupt" "flipped.bin is corrupt" "$TMP/plain.bin" "$TMP/flipped.bin"
check_refused "missing" "missing.bin" "$TMP/plain.bin" "$TMP/missing.bin"
check_refused "not a directory" "is not a directory" --last 1 "$TMP/plain.bin"
# A failed run leaves an existing output as it was.
cp "$TMP/plain.bin" "$TMP/refused.bin"
run $P -o "$TMP/refused.bin" "$TMP/plain.bin" "$TMP/torn.bin"
cmp -s "$TMP/refused.bin" "$TMP/plain.bin" || fail "a failed run changed the existing output"

# Bad usage: exit 2, one error line, a pointer to --help.
for bad in "" "$TMP/plain.bin" "-o $TMP/x.bin" "-o $TMP/x.bin --last 2" "-o $TMP/x.bin --last 0 $TMP/ck" \
  "-o $TMP/x.bin --last 2 $TMP/ck $TMP/ck" "-o $TMP/x.bin --zstd-level 20 $TMP/plain.bin" \
  "-o $TMP/x.bin --bogus $TMP/plain.bin"; do
  # shellcheck disable=SC2086
  run $P $bad
  expect_rc 2 "'$bad'"
  expect_one_error_line $P "'$bad'"
  grep -q -- "--help" "$TMP/err" || fail "'$bad': no pointer to --help"
done
[ -e "$TMP/x.bin" ] && fail "bad usage left an output"

# The completion script loads and offers the options.
bash -c "source '$TFM_SOURCE/share/completions/tfm-avgckpt.bash'; COMP_WORDS=(tfm-avgckpt --ke); COMP_CWORD=1; _tfm_avgckpt; echo \${COMPREPLY[*]}" \
  | grep -q -- --keep-state || fail "completion: no --keep-state"
finish
