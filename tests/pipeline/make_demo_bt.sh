# pipeline: `make -f Makefile.data demo-bt` with a small budget: every
# stage runs (the reverse model, the sampled back-translations tagged, both
# corpora mixed by tfm-train --weights) and results.txt holds a BLEU for
# each English -> Spanish model. (Beam search's back-translations by a
# model of 20 updates are empty lines, which tfm-batch's length ratio
# filters out: the script stops there with one line, tested below.) What
# the demo gains at its full budget is measured in the README, not here.
#
# Budget: the demo's 2 x 128 model on a 1,000-piece vocabulary, the first
# 400 pairs and 400 Spanish verses, 20 updates, greedy decoding of Titus
# (46 verses). Skipped (77) without the SWORD modules of the demo.
source "$(dirname "$0")/common.bash"
command -v mod2imp >/dev/null || { echo "no mod2imp (libsword-utils): skipped"; exit 77; }
[ -n "$(mod2imp engKJV2006eb 2>/dev/null | head -n 1 || true)" ] || { echo "no SWORD module engKJV2006eb: skipped"; exit 77; }

bt() {  # bt VAR=VALUE...: make demo-bt at the small budget
  make -s -C "$TFM_SOURCE" -f Makefile.data demo-bt BIN="$TFM_BIN" WORK="$TMP" LINES=400 VOCAB=1000 STEPS=20 \
    WARMUP=10 SAVE_STEPS=10 AVG_LAST=2 BEAM=1 TEST_BOOKS=Titus "$@" >"$TMP/out" 2>&1
}
bt SEARCH=sampling || { cat "$TMP/out" >&2; fail "make demo-bt"; }
D=$TMP/demo-bt

# The synthetic sources: one a Spanish verse, each starting with the tag,
# which the vocabulary keeps as one piece.
[ "$(wc -l <"$D/tok/nt.tagged.sampling")" -eq 400 ] || fail "not 400 synthetic sources"
[ "$(grep -cv '^<BT> ' "$D/tok/nt.tagged.sampling")" -eq 0 ] || fail "a synthetic source without the tag"
echo '<BT>' | "$TFM_BIN/tfm-tok" -m "$D/spm.model" | grep -q '\(^\| \)<BT>$' ||
  fail "the tag is not a piece of its own: $(echo '<BT>' | "$TFM_BIN/tfm-tok" -m "$D/spm.model")"
# The back-translation model trained on both corpora, the epoch drawing
# from each.
grep -q "epoch 1: $D/ot.tfmb 400 pairs ([0-9]* batches), $D/bt-sampling.tfmb [0-9,]* pairs" "$D/bt-sampling.log" ||
  fail "bt-sampling: the training log does not count both corpora: $(grep epoch "$D/bt-sampling.log")"
# results.txt: baseline's BLEU, then the back-translation's and its gain.
[ "$(wc -l <"$D/results.txt")" -eq 2 ] || fail "results.txt: $(cat "$D/results.txt")"
grep -Eq '^baseline +BLEU [0-9.]+  \(400 pairs\)$' "$D/results.txt" || fail "results.txt: $(cat "$D/results.txt")"
grep -Eq "^bt-sampling +BLEU [0-9.]+  \([-+][0-9.]+; and [1-9][0-9]* back-translated pairs\)$" "$D/results.txt" ||
  fail "results.txt, bt-sampling: $(cat "$D/results.txt")"
cat "$D/results.txt"

# Beam search's empty back-translations stop the run with one line; a bad
# SEARCH before any work.
bt SEARCH=beam && fail "demo-bt with empty back-translations succeeded"
grep -q "^demo-bt: error: bt-beam: no back-translated pair passed" "$TMP/out" || fail "empty back-translations: $(cat "$TMP/out")"
bt SEARCH=bogus && fail "demo-bt SEARCH=bogus succeeded"
grep -q "^demo-bt: error: SEARCH: 'bogus' is neither sampling nor beam" "$TMP/out" || fail "SEARCH=bogus: $(cat "$TMP/out")"
