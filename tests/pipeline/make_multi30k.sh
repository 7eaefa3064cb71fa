# pipeline: `make -f Makefile.data multi30k-ende` end to end, the wiring
# being what is tested: the raw files from DATA_MIRROR=../shared/data
# (checksums checked), tfm-tok, tfm-batch, tfm-train, tfm-avgckpt --last,
# tfm-decode with beam 4 on all of test2016 and tfm-score, with a small
# budget; the BLEU of the summary line must clear a floor. Then make again
# must redo nothing, and a new BEAM must redo the decoding and no training.
#
# Budget: the tiny preset with d_ff 256 (d_model 64, 4 heads of 16: 0.36M
# parameters), a 2,000-piece vocabulary, 400 updates of <= 3,000 tokens a
# side, the last 3 checkpoints (updates 300, 350, 400) averaged; in this
# regime the narrow model learns faster than one of d_model 128 and costs
# half as much (tests/bench/NOTES.md, "The test command's time", has the
# BLEU and times of both). The floor, 9, leaves room for other BLAS kernels
# and thread counts, not for a model that stopped learning (the untrained
# model scores 0.0).
source "$(dirname "$0")/common.bash"
readonly FLOOR=9
MIRROR=$SHARED
require_shared multi30k/task1/raw/train.en.gz

run() {
  make -s -C "$TFM_SOURCE" -f Makefile.data multi30k-ende BIN="$TFM_BIN" WORK="$TMP/work" \
    DATA_MIRROR="$MIRROR" DEVICE=cpu PRESET=tiny VOCAB=2000 MAX_TOKENS=3000 STEPS=400 SAVE_STEPS=50 \
    AVG_LAST=3 TRAIN_ARGS="--d-model 64 --d-ff 256 --d-k 16 --d-v 16 --warmup 200 --valid-every 400" \
    "$@" >"$TMP/out" 2>&1 || { cat "$TMP/out" >&2; fail "make multi30k-ende $*"; }
}
run
W="$TMP/work/multi30k-ende"
summary=$(tail -n 1 "$TMP/out")
echo "$summary"
[ "$summary" = "$(tail -n 1 "$W/results.txt")" ] || fail "the summary line is not the results file's last line"
bleu=$(sed -n 's/^multi30k-ende: BLEU \([0-9.]*\) on test2016 (1000 lines) | 400 updates in .* on cpu | .*results.txt, curves in .*curve.svg$/\1/p' <<<"$summary")
[ -n "$bleu" ] || fail "no BLEU in the summary line: $summary"
grep -q '^ *BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|' "$W/results.txt" || fail "no sacreBLEU line in results.txt"
grep -q "checkpoints of updates 300, 350, 400$" "$W/results.txt" || fail "not the last 3 checkpoints: $(grep averaged "$W/results.txt")"
# The learning curves beside results.txt: tfm-train plot's SVG, 4 training records, 1 validation.
grep -q '^<svg xmlns="http://www.w3.org/2000/svg"' "$W/curve.svg" || fail "no curve.svg beside results.txt"
[ "$(grep -c '<circle' "$W/curve.svg")" -ge 5 ] || fail "curve.svg: $(grep -c '<circle' "$W/curve.svg") points for 5 records"
[ "$(wc -l <"$W/test.hyp")" = 1000 ] || fail "test.hyp has $(wc -l <"$W/test.hyp") lines, not 1000"
python3 -c "import sys; sys.exit(not float(sys.argv[1]) > float(sys.argv[2]))" "$bleu" "$FLOOR" \
  || fail "BLEU $bleu is not above $FLOOR"

# Incremental: nothing to redo; then a new beam redoes the decoding only.
run
! grep -q '^multi30k-ende: tfm-\|^tfm-[a-z]*:' "$TMP/out" || fail "a second make redid steps: $(cat "$TMP/out")"
run BEAM=1
grep -q '^multi30k-ende: tfm-decode --beam 1 ' "$TMP/out" || fail "BEAM=1 did not decode again"
! grep -q '^multi30k-ende: tfm-\(tok\|train\)\|^tfm-\(tok\|batch\|train\|avgckpt\):' "$TMP/out" \
  || fail "BEAM=1 redid more than the decoding: $(cat "$TMP/out")"
echo "multi30k: BLEU $bleu after 400 updates (floor $FLOOR); make redoes nothing, BEAM=1 only the decoding"
