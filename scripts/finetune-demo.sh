#!/bin/bash
# finetune-demo.sh: what fine-tuning (tfm-train --init) gains, on the demo's
# Bible, offline. Run by `make -f Makefile.data demo-finetune`.
#
#   finetune-demo.sh BIN OUT KJV.imp SPARV.imp
#
# The two halves of the Bible are two domains: a base model learns English
# -> Spanish on the Old Testament alone (the demo's model and its 1,600
# updates, STEPS_BASE), then three models are tested on held-out books of
# the New Testament (TEST_BOOKS):
#   base         the Old Testament model as it is
#   fine-tuned   base, then STEPS_ADAPT updates on the New Testament's other
#                books (tfm-train --init: its weights and architecture, a
#                fresh optimizer and schedule)
#   scratch      the same STEPS_ADAPT updates on the same New Testament
#                books from a random start, same model, same schedule
# The vocabulary is the base model's (SentencePiece on the Old Testament),
# as fine-tuning a model one has found requires. Each line of OUT/results.txt
# is a model and its BLEU (sacreBLEU's, tfm-score) on the held-out books.
# One thread a training (THREADS: OpenMP's); updates are counted, not timed, so the
# numbers do not depend on what else runs.
set -euo pipefail
bin=${1:?usage: finetune-demo.sh BIN OUT KJV.imp SPARV.imp}
out=${2:?} kjv=${3:?} sparv=${4:?}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STEPS_BASE=${STEPS_BASE:-1600}
STEPS_ADAPT=${STEPS_ADAPT:-400}
THREADS=${THREADS:-1}
DEV_BOOKS=${DEV_BOOKS:-Lamentations,Joel}
TEST_BOOKS=${TEST_BOOKS:-Galatians,Philippians,Titus,I Peter}
# The demo's CPU model (Makefile.data, demo_MODEL) and its batches.
MODEL=(--preset tiny --layers 2 --d-model 128 --d-ff 512 --heads 4 --d-k 32 --d-v 32 --dropout 0)
say() { echo "demo-finetune: $*"; }
export OMP_NUM_THREADS=$THREADS

mkdir -p "$out/text" "$out/tok"
perl "$here/bible-pairs.pl" "$kjv" "$sparv" "$out/text" "$DEV_BOOKS" "$TEST_BOOKS"
# The training verses in two: the Old Testament (before Matthew 1:1) and the New.
nt=$(grep -n '^Matthew 1:1$' "$out/text/train.ref" | cut -d: -f1)
[ -n "$nt" ] || { echo "demo-finetune: error: no Matthew 1:1 among the training verses" >&2; exit 1; }
for side in src tgt; do
  head -n $((nt - 1)) "$out/text/train.$side" >"$out/text/ot.$side"
  tail -n +"$nt" "$out/text/train.$side" >"$out/text/nt.$side"
done
say "$(wc -l <"$out/text/ot.src") Old Testament pairs, $(wc -l <"$out/text/nt.src") New Testament pairs," \
  "$(wc -l <"$out/text/test.src") held out ($TEST_BOOKS)"

"$bin/tfm-tok" train -q -o "$out/spm.model" --vocab-size 4000 -- "$out/text/ot.src" "$out/text/ot.tgt"
for f in ot.src ot.tgt nt.src nt.tgt dev.src dev.tgt test.src; do
  "$bin/tfm-tok" -m "$out/spm.model" "$out/text/$f" >"$out/tok/$f"
done
for c in ot nt dev; do
  "$bin/tfm-batch" -q -m "$out/spm.model" -o "$out/$c.tfmb" --max-tokens 4096 "$out/tok/$c.src" "$out/tok/$c.tgt"
done

train() {  # train NAME STEPS WARMUP CORPUS OPTIONS...
  local name=$1 steps=$2 warmup=$3 corpus=$4
  shift 4
  rm -rf "${out:?}/$name"
  "$bin/tfm-train" -q -o "$out/$name" "$@" --max-steps "$steps" --warmup "$warmup" --save-every 0 \
    --save-every-steps 100 --log "$out/$name.log.json" "$out/$corpus.tfmb" --dev "$out/dev.tfmb"
  "$bin/tfm-avgckpt" -q -o "$out/$name.bin" --last 4 "$out/$name"
}
say "base: ${MODEL[*]}, $STEPS_BASE updates on the Old Testament"
train base "$STEPS_BASE" 500 ot -m "$out/spm.model" "${MODEL[@]}"
say "fine-tuned and scratch: $STEPS_ADAPT updates each on the New Testament"
train fine-tuned "$STEPS_ADAPT" 100 nt --init "$out/base.bin" &
train scratch "$STEPS_ADAPT" 100 nt -m "$out/spm.model" "${MODEL[@]}" &
wait %1 && wait %2

: >"$out/results.txt.tmp"
for m in base fine-tuned scratch; do
  "$bin/tfm-decode" -q -m "$out/$m.bin" --beam 4 --detok <"$out/tok/test.src" >"$out/$m.hyp"
  bleu=$("$bin/tfm-score" -b -i "$out/$m.hyp" -r "$out/text/test.tgt")
  printf '%-11s BLEU %s\n' "$m" "$bleu" >>"$out/results.txt.tmp"
done
mv -f "$out/results.txt.tmp" "$out/results.txt"
cat "$out/results.txt"
