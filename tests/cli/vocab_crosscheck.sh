# Issue 19, item 4: the corpus, the SentencePiece model and the checkpoint
# agree on the vocabulary, or the program says which two disagree. A .tfmb
# whose header says 46056 pieces (its checksums right) is refused before a
# 46056-row model is trained; a checkpoint whose embedded model has another
# size than its configuration is refused by every reader.
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/fixtures.bash"

$FORGE tfmb-vocab "$T" "$TMP/big.tfmb" 46056 || fail "forge"
run tfm-batch info "$TMP/big.tfmb"
expect_rc 0 "the forged corpus reads as a corpus"
grep -q "46056 pieces" "$TMP/out" || fail "the forged corpus: $(cat "$TMP/out")"

run tfm-train $FAST -m "$M" -o "$TMP/run" "$TMP/big.tfmb" --max-steps 1
expect_rc 1 "a corpus of 46056 pieces with a 29-piece model"
expect_one_error_line tfm-train "corpus vs model"
grep -q "vocabulary mismatch: $TMP/big.tfmb says its vocabulary (spm-[0-9a-f]*) has 46056 pieces, but $M has 29" \
  "$TMP/err" || fail "corpus vs model: $(cat "$TMP/err")"
[ -e "$TMP/run/checkpoint_1.bin" ] && fail "corpus vs model: a checkpoint was written"

# The dev corpus too.
run tfm-train $FAST -m "$M" -o "$TMP/run2" "$T" --dev "$TMP/big.tfmb" --max-steps 1
expect_rc 1 "a dev corpus of 46056 pieces"
grep -q "vocabulary mismatch: $TMP/big.tfmb says" "$TMP/err" || fail "dev vs model: $(cat "$TMP/err")"

# A resume on it: the checkpoint's embedded model against the corpus.
run tfm-train $FAST -m "$M" -o "$TMP/ok" "$T" --max-steps 1
expect_rc 0 "a run"
run tfm-train --resume "$TMP/ok" "$TMP/big.tfmb" --max-steps 2
expect_rc 1 "a resume on a corpus of 46056 pieces"
grep -q "vocabulary mismatch: $TMP/big.tfmb says its vocabulary .* has 46056 pieces, but $TMP/ok/checkpoint_last.bin (its embedded vocabulary) has 29" \
  "$TMP/err" || fail "resume vs corpus: $(cat "$TMP/err")"

# A checkpoint of 40 rows embedding the 29-piece model: every reader refuses it.
"$TFM_TOOLS/tiny_checkpoint" "$TMP/m40.bin" --tokenizer "$M" --set vocab_size=40 || fail "tiny_checkpoint"
echo "a b c" >"$TMP/src"
for line in "tfm-decode -m $TMP/m40.bin $TMP/src" "tfm-score -m $TMP/m40.bin $TMP/src $TMP/src" \
    "tfm-attnviz -m $TMP/m40.bin -o $TMP/a.html a" "tfm-avgckpt -o $TMP/avg.bin $TMP/m40.bin"; do
  eval "set -- $line"
  program=$1
  shift
  run "$program" "$@"
  expect_rc 1 "$line"
  expect_one_error_line "$program" "$line"
  grep -q "vocabulary mismatch: $TMP/m40.bin embeds a SentencePiece model of 29 pieces (spm-[0-9a-f]*), but its configuration says vocab_size = 40" \
    "$TMP/err" || fail "$line: $(cat "$TMP/err")"
done
[ -e "$TMP/avg.bin" ] || [ -e "$TMP/a.html" ] && fail "a refused checkpoint left an output"
finish
