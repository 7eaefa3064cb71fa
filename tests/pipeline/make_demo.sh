# pipeline: `make -f Makefile.data demo` with a small budget, twice, the
# second time while `yes` keeps a core busy: the budget is a number of
# updates and nothing depends on the clock, so both runs must average the
# same checkpoints into the same model and print the same translations and
# BLEU (docs/demo.md). Also: curve.svg beside results.txt and named
# by the summary line; MAX_TIME= turns the budget into time (no step limit).
#
# Budget: the demo's 2 x 128 model on a 1,000-piece vocabulary, 20 updates,
# checkpoints every 10, the last 2 averaged, greedy decoding of Ruth (85
# verses). Skipped (77) without the SWORD modules of the demo.
source "$(dirname "$0")/common.bash"
command -v mod2imp >/dev/null || { echo "no mod2imp (libsword-utils): skipped"; exit 77; }
[ -n "$(mod2imp engKJV2006eb 2>/dev/null | head -n 1 || true)" ] || { echo "no SWORD module engKJV2006eb: skipped"; exit 77; }

demo() {  # demo WORK [VAR=VALUE...]
  local work=$1
  shift
  make -s -C "$TFM_SOURCE" -f Makefile.data demo BIN="$TFM_BIN" WORK="$work" DEVICE=cpu VOCAB=1000 STEPS=20 \
    SAVE_STEPS=10 AVG_LAST=2 BEAM=1 TEST_BOOKS=Ruth TRAIN_ARGS="--valid-every 10 --log-every 10" \
    "$@" >"$work.out" 2>&1 || { cat "$work.out" >&2; fail "make demo WORK=$work $*"; }
}
demo "$TMP/a"
# At the lowest priority: a core it finds idle it keeps busy, and it takes
# nothing from a test that ctest runs beside this one.
nice -n 19 yes >/dev/null &
busy=$!
trap 'kill $busy 2>/dev/null || true; rm -rf "$TMP"' EXIT
demo "$TMP/b"
kill "$busy"

A=$TMP/a/demo B=$TMP/b/demo
for f in model.bin test.hyp; do
  cmp -s "$A/$f" "$B/$f" || fail "$f differs between a run on an idle core and one beside yes"
done
# results.txt: the same but for the times of training and the folders.
untimed() { sed "s/ in [0-9]*h*[0-9]*m[0-9]*s* / in TIME /; s|$TMP/[ab]/|WORK/|g" "$1"; }
diff <(untimed "$A/results.txt") <(untimed "$B/results.txt") >"$TMP/diff" ||
  fail "results.txt differs beyond the times: $(cat "$TMP/diff")"
grep -q "^training: 20 updates (epoch 1) in .* on cpu (--max-steps reached)" "$A/results.txt" ||
  fail "training line: $(grep '^training' "$A/results.txt")"
grep -q "^averaged: the checkpoints of updates 10, 20$" "$A/results.txt" ||
  fail "averaged: $(grep '^averaged' "$A/results.txt")"

# The summary (the results' last line, printed last) names curve.svg, which
# holds 2 training records and 2 validations.
summary=$(tail -n 1 "$TMP/a.out")
[ "$summary" = "$(tail -n 1 "$A/results.txt")" ] || fail "the summary is not results.txt's last line: $summary"
[[ $summary == "demo: BLEU "*" | 20 updates in "*" on cpu | $A/results.txt, curves in $A/curve.svg" ]] ||
  fail "summary line: $summary"
grep -q '^<svg xmlns="http://www.w3.org/2000/svg"' "$A/curve.svg" || fail "no SVG in curve.svg"
[ "$(grep -c '<circle' "$A/curve.svg")" -eq 4 ] || fail "curve.svg: $(grep -c '<circle' "$A/curve.svg") points, not 4"
grep -q "demo: training loss and dev perplexity" "$A/curve.svg" || fail "curve.svg: no title"

# MAX_TIME=: a time budget, no step limit (the resumed run's limits).
make -s -C "$TFM_SOURCE" -f Makefile.data BIN="$TFM_BIN" WORK="$TMP/a" DEVICE=cpu MAX_TIME=1m "$A/run.opts"
grep -q -- "--max-steps 0 --max-time 1m " "$A/run.opts" || fail "MAX_TIME=1m: $(cat "$A/run.opts")"
make -s -C "$TFM_SOURCE" -f Makefile.data BIN="$TFM_BIN" WORK="$TMP/a" DEVICE=cpu "$A/run.opts"
grep -q -- "--max-steps 1600 --max-time 0 " "$A/run.opts" || fail "the default budget: $(cat "$A/run.opts")"
echo "$summary"
