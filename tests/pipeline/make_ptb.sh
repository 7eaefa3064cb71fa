# pipeline: `make -f Makefile.data ptb-parse` end to end with a small
# budget, the wiring being what is tested: the PTB sample from
# DATA_MIRROR=../shared/data (checksum checked), split by file
# (scripts/ptb-split.pl), tfm-tree clean, words and linearize, tfm-tok with
# the brackets as pieces of their own, tfm-batch, tfm-train, tfm-avgckpt,
# tfm-decode, tfm-tree delinearize and tfm-score --metrics parseval. Every
# step's output is checked, and the F1 of the summary line must clear a
# floor. Then make again must redo nothing, and a new BEAM must redo the
# decoding, the trees and the scores, and no training.
#
# Budget: two layers of d_model 64 (d_ff 256; 0.36M parameters with a
# 2,000-piece vocabulary), 200 updates of <= 2,048 tokens a side, the last
# 2 checkpoints (updates 100, 200) averaged, greedy decoding of the 245 test
# sentences. 200 updates teach the trees' labels and shapes, not their
# alignment with the words (tests/bench/NOTES.md, "The test command's
# time", has the F1): a flat (S XX ... XX) for every sentence scores 9.55,
# an untrained model 0.00 (it writes no constituent). The floor, 5, is
# above what an untrained or broken chain gives, and leaves room for other
# BLAS kernels and thread counts.
source "$(dirname "$0")/common.bash"
readonly FLOOR=5
require_shared ptb-sample/treebank.zip

run() {
  make -s -C "$TFM_SOURCE" -f Makefile.data ptb-parse BIN="$TFM_BIN" WORK="$TMP/work" DATA_MIRROR="$SHARED" \
    DEVICE=cpu PRESET=tiny VOCAB=2000 MAX_TOKENS=2048 STEPS=200 SAVE_STEPS=100 AVG_LAST=2 BEAM=1 \
    TRAIN_ARGS="--d-model 64 --d-ff 256 --d-k 16 --d-v 16 --warmup 100 --valid-every 200" \
    "$@" >"$TMP/out" 2>&1 || { cat "$TMP/out" >&2; fail "make ptb-parse $*"; }
}
run
W="$TMP/work/ptb-parse"
lines() { wc -l <"$1" | tr -d ' '; }

# The split, by file: every tree once.
grep -qx "ptb-split: 199 files, 3914 trees: train 3396 (159 files), dev 273 (wsj_0160-0179), test 245 (wsj_0180-0199)" \
  "$TMP/out" || fail "split: $(grep ptb-split "$TMP/out")"
for s in train dev test; do [ -s "$W/raw/$s.mrg" ] || fail "raw/$s.mrg is missing or empty"; done
head -c 200 "$W/raw/train.mrg" | tr -s ' \n' ' ' | grep -qF '( (S (NP-SBJ (NP (NNP Pierre) (NNP Vinken) )' \
  || fail "raw/train.mrg: not wsj_0001 first: $(head -c 200 "$W/raw/train.mrg")"
# Cleaned trees, sentences and sequences, one a line, aligned.
for s in train:3396 dev:273 test:245; do
  for f in trees src tgt; do
    [ "$(lines "$W/text/${s%:*}.$f")" = "${s#*:}" ] || fail "text/${s%:*}.$f: $(lines "$W/text/${s%:*}.$f") lines"
  done
done
first="(TOP (S (NP (NP (NNP Pierre) (NNP Vinken)) (, ,) (ADJP (NP (CD 61) (NNS years)) (JJ old)) (, ,)) (VP (MD will) (VP (VB join) (NP (DT the) (NN board)) (PP (IN as) (NP (DT a) (JJ nonexecutive) (NN director))) (NP (NNP Nov.) (CD 29)))) (. .)))"
[ "$(head -n 1 "$W/text/train.trees")" = "$first" ] || fail "train.trees: $(head -n 1 "$W/text/train.trees")"
[ "$(head -n 1 "$W/text/train.src")" = "Pierre Vinken , 61 years old , will join the board as a nonexecutive director Nov. 29 ." ] \
  || fail "train.src: $(head -n 1 "$W/text/train.src")"
[ "$(head -n 1 "$W/text/train.tgt")" = "(S (NP (NP XX XX )NP XX (ADJP (NP XX XX )NP XX )ADJP XX )NP (VP XX (VP XX (NP XX XX )NP (PP XX (NP XX XX XX )NP )PP (NP XX XX )NP )VP )VP XX )S" ] \
  || fail "train.tgt: $(head -n 1 "$W/text/train.tgt")"
! grep -q -- '-NONE-\|NP-SBJ' "$W/text/train.trees" || fail "train.trees: empty elements or function tags left"
# Every bracket and XX is one piece.
[ "$(head -n 1 "$W/tok/train.tgt" | wc -w)" = "$(head -n 1 "$W/text/train.tgt" | wc -w)" ] \
  || fail "tok/train.tgt: brackets split: $(head -n 1 "$W/tok/train.tgt")"
# No pair filtered away: the targets are 2-4 times longer than the sources.
grep -qx "pairs: *3396" <("$TFM_BIN/tfm-batch" info "$W/train.tfmb") || fail "train.tfmb: $("$TFM_BIN/tfm-batch" info "$W/train.tfmb" | grep pairs)"
[ "$(cat "$W/train.done")" = "--max-steps reached" ] || fail "train.done: $(cat "$W/train.done")"
grep -q "^averaged: the checkpoints of updates 100, 200$" "$W/results.txt" || fail "not the last 2 checkpoints: $(grep averaged "$W/results.txt")"
grep -q "^decoding: --beam 1 --alpha 0.3 --max-len-a 1 --max-len-b 300$" "$W/results.txt" \
  || fail "decoding: $(grep decoding "$W/results.txt")"
[ "$(lines "$W/test.hyp")" = 245 ] || fail "test.hyp: $(lines "$W/test.hyp") lines"
[ "$(lines "$W/test.trees")" = 245 ] || fail "test.trees: $(lines "$W/test.trees") lines"
grep -q "^tfm-tree: 245 trees, [0-9]* repaired" "$W/delinearize.txt" || fail "delinearize.txt: $(cat "$W/delinearize.txt")"
# The trees hold the test sentences' words.
"$TFM_BIN/tfm-tree" words -q "$W/test.trees" | cmp -s - "$W/text/test.src" || fail "test.trees: not the test sentences' words"

summary=$(tail -n 1 "$TMP/out")
echo "$summary"
[ "$summary" = "$(tail -n 1 "$W/results.txt")" ] || fail "the summary line is not the results file's last line"
grep -q '^ PARSEVAL|evalb:collins|len:all|tags:none|version:tfm-[0-9.]* = [0-9.]* (P = .* TA = n/a sent = 245 error = 0 skip = 0)$' \
  "$W/results.txt" || fail "no EVALB line in results.txt: $(grep PARSEVAL "$W/results.txt")"
f1=$(sed -n 's/^ptb-parse: F1 \([0-9.]*\) on wsj_0180-0199 (245 sentences; [0-9.]* on the 230 of <= 40 words) | 200 updates in .* on cpu | .*results.txt\(, curves in .*curve.svg\)\{0,1\}$/\1/p' <<<"$summary")
[ -n "$f1" ] || fail "no F1 in the summary line: $summary"
python3 -c "import sys; sys.exit(not float(sys.argv[1]) > float(sys.argv[2]))" "$f1" "$FLOOR" \
  || fail "F1 $f1 is not above $FLOOR"

# Incremental: nothing to redo; then a new beam redoes the decoding and what follows only.
run
! grep -q '^ptb-parse: tfm-\|^tfm-[a-z]*:\|^ptb-split' "$TMP/out" || fail "a second make redid steps: $(cat "$TMP/out")"
run BEAM=2
grep -q '^ptb-parse: tfm-decode --beam 2 ' "$TMP/out" || fail "BEAM=2 did not decode again"
! grep -q '^ptb-parse: tfm-\(tok\|train\)\|^tfm-\(tok\|batch\|train\|avgckpt\):\|^ptb-split' "$TMP/out" \
  || fail "BEAM=2 redid more than the decoding: $(cat "$TMP/out")"
grep -q "^decoding: --beam 2 " "$W/results.txt" || fail "BEAM=2: results.txt not redone"
echo "ptb-parse: F1 $f1 after 200 updates (floor $FLOOR); make redoes nothing, BEAM=2 only the decoding on"
