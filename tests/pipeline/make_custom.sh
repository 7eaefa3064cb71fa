# pipeline: `make -f Makefile.data custom SRC= TGT=`, a user's own files,
# the wiring being what is tested: the WMT en-de 10k sample (gzip) with dev
# and test held out (1% each, spread over the corpus), then with DEV_* and
# TEST_* given as plain files, a tiny budget (20 updates): every split the
# right size and disjoint, the usual results file, summary line and curves.
# Bad input stops before any training, with one "custom: error:" line:
# no files named, sides of different lengths, an empty file, one side of a
# pair, a corpus too small to hold out from.
source "$(dirname "$0")/common.bash"
require_shared wmt-en-de-10k-sample/src-train.txt.gz
S=$SHARED/wmt-en-de-10k-sample
run() {
  make -s -C "$TFM_SOURCE" -f Makefile.data custom BIN="$TFM_BIN" WORK="$TMP/work" DEVICE=cpu PRESET=tiny \
    VOCAB=500 STEPS=20 SAVE_STEPS=10 AVG_LAST=2 TRAIN_ARGS="--warmup 10 --valid-every 10 --log-every 5" \
    "$@" >"$TMP/out" 2>&1
}
W="$TMP/work/custom"
run SRC="$S/src-train.txt.gz" TGT="$S/tgt-train.txt.gz" || { cat "$TMP/out" >&2; fail "make custom"; }
for f in train dev test; do [ "$(wc -l <"$W/text/$f.src")" = "$(wc -l <"$W/text/$f.tgt")" ] || fail "$f: sides differ"; done
[ "$(wc -l <"$W/text/dev.src")" = 100 ] && [ "$(wc -l <"$W/text/test.src")" = 100 ] \
  && [ "$(wc -l <"$W/text/train.src")" = 9800 ] || fail "held out: not 9,800 / 100 / 100 lines"
[ "$(gzip -dc "$S/src-train.txt.gz" | sed -n '50p;100p' | sed 's/[[:space:]]*$//')" = \
  "$(head -n 1 "$W/text/dev.src"; head -n 1 "$W/text/test.src")" ] || fail "held out: not lines 50 and 100 first"

summary=$(tail -n 1 "$TMP/out")
grep -q "^custom: BLEU [0-9.]* on 1% of .*src-train.txt.gz held out (100 lines) | 20 updates in .* on cpu | .*results.txt, curves in .*curve.svg$" \
  <<<"$summary" || fail "summary line: $summary"
grep -q '^ *BLEU|nrefs:1|' "$W/results.txt" || fail "no BLEU line in results.txt"
grep -q '^<svg' "$W/curve.svg" || fail "no curve.svg"

# DEV_* and TEST_* given (plain text): used as they are, SRC/TGT all for training.
gzip -dc "$S/src-train.txt.gz" | sed -n 1,9000p >"$TMP/train.en"; gzip -dc "$S/tgt-train.txt.gz" | sed -n 1,9000p >"$TMP/train.de"
gzip -dc "$S/src-train.txt.gz" | sed -n '9001,9050p' >"$TMP/dev.en"; gzip -dc "$S/tgt-train.txt.gz" | sed -n '9001,9050p' >"$TMP/dev.de"
gzip -dc "$S/src-train.txt.gz" | sed -n '9051,9080p' >"$TMP/test.en"; gzip -dc "$S/tgt-train.txt.gz" | sed -n '9051,9080p' >"$TMP/test.de"
run SRC="$TMP/train.en" TGT="$TMP/train.de" DEV_SRC="$TMP/dev.en" DEV_TGT="$TMP/dev.de" TEST_SRC="$TMP/test.en" \
  TEST_TGT="$TMP/test.de" || { cat "$TMP/out" >&2; fail "make custom with DEV_* and TEST_*"; }
[ "$(wc -l <"$W/text/train.src")" = 9000 ] && [ "$(wc -l <"$W/text/dev.src")" = 50 ] \
  && [ "$(wc -l <"$W/text/test.tgt")" = 30 ] || fail "DEV_*, TEST_*: not 9,000 / 50 / 30 lines"
grep -q "on $TMP/test.en (30 lines)" <<<"$(tail -n 1 "$TMP/out")" || fail "summary: $(tail -n 1 "$TMP/out")"

# Bad input: one error line, exit status non-zero, no training started.
head -n 10 "$TMP/train.de" >"$TMP/short.de"
: >"$TMP/empty"
bad() {  # bad DESCRIPTION EXPECTED ARGS...
  local what=$1 want=$2
  shift 2
  rm -rf "$TMP/work"
  run "$@" && fail "$what: make succeeded"
  [ "$(grep -c '^custom: error: ' "$TMP/out")" = 1 ] || fail "$what: not one error line: $(cat "$TMP/out")"
  grep -q "^custom: error: .*$want" "$TMP/out" || fail "$what: $(grep error "$TMP/out")"
  [ ! -e "$W/train" ] || fail "$what: training started"
}
bad "no files" "give your parallel files"
bad "sides of other lengths" "has 9000 lines but .*short.de has 10" SRC="$TMP/train.en" TGT="$TMP/short.de"
bad "an empty file" "empty is empty" SRC="$TMP/empty" TGT="$TMP/empty"
bad "a missing file" "no such file" SRC="$TMP/none.en" TGT="$TMP/train.de"
bad "one side of the dev pair" "give both sides" SRC="$TMP/train.en" TGT="$TMP/train.de" DEV_SRC="$TMP/dev.en"
bad "too small to hold out from" "too few to hold out" SRC="$TMP/short.de" TGT="$TMP/short.de"
echo "make custom: held out and given dev/test, results and curves; bad input refused before training"
