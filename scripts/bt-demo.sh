#!/bin/bash
# bt-demo.sh: what back-translation gains, on the demo's Bible, offline.
# Run by `make -f Makefile.data demo-bt`.
#
#   bt-demo.sh BIN OUT KJV.imp SPARV.imp
#
# English -> Spanish with little parallel text and more Spanish: the Old
# Testament is the parallel data; of the New Testament's training books
# only the Spanish is kept (target-side monolingual text, their English
# dropped); held-out New Testament books (TEST_BOOKS) are the test set.
# Every model is the demo's CPU model, trained for the same STEPS updates:
#   reverse    Spanish -> English on the Old Testament
#   baseline   English -> Spanish on the Old Testament
#   bt-SEARCH  English -> Spanish on the Old Testament and the New
#              Testament's Spanish with its English made by `reverse`:
#              sampled (tfm-decode --sampling, top-k SAMPLING_TOPK, as
#              Edunov et al. 2018) or by beam search (beam 4). Each
#              synthetic source starts with the reserved piece <BT>
#              (tagged back-translation, Caswell et al. 2019); the two
#              corpora are mixed by tfm-train --weights 1 BT_WEIGHT.
# The vocabulary is one SentencePiece model of every text the user has
# (both sides of the Old Testament and the New Testament's Spanish), with
# <BT> a piece of its own. OUT/results.txt: each English -> Spanish model's
# BLEU on the test books (sacreBLEU's, tfm-score) and its gain over
# baseline. Two trainings at a time, one thread each (THREADS: OpenMP's):
# updates are counted, not timed, so the numbers do not depend on what else
# runs.
set -euo pipefail
bin=${1:?usage: bt-demo.sh BIN OUT KJV.imp SPARV.imp}
out=${2:?} kjv=${3:?} sparv=${4:?}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STEPS=${STEPS:-1600}
WARMUP=${WARMUP:-500}
SAVE_STEPS=${SAVE_STEPS:-100}
AVG_LAST=${AVG_LAST:-4}
VOCAB=${VOCAB:-4000}
BEAM=${BEAM:-4}
SEARCH=${SEARCH:-sampling beam}  # how the synthetic sources are made: sampling, beam or both
SAMPLING_TOPK=${SAMPLING_TOPK:-10}
BT_WEIGHT=${BT_WEIGHT:-1}
SEED=${SEED:-1}
LINES=${LINES:-0}                # keep only the first N pairs and N Spanish lines (0: all; the tests')
THREADS=${THREADS:-1}
DEV_BOOKS=${DEV_BOOKS:-Lamentations,Joel}
TEST_BOOKS=${TEST_BOOKS:-Galatians,Philippians,Titus,I Peter}
TAG='<BT>'
# The demo's CPU model (Makefile.data, demo_MODEL) and its batches.
MODEL=(--preset tiny --layers 2 --d-model 128 --d-ff 512 --heads 4 --d-k 32 --d-v 32 --dropout 0)
say() { echo "demo-bt: $*"; }
die() { echo "demo-bt: error: $*" >&2; exit 1; }
export OMP_NUM_THREADS=$THREADS
# A stage that fails ends the script; the trainings beside it end too.
trap 'jobs -p | xargs -r kill 2>/dev/null || true' EXIT
for s in $SEARCH; do
  case $s in sampling | beam) ;; *) die "SEARCH: '$s' is neither sampling nor beam" ;; esac
done
[ -n "$SEARCH" ] || die "SEARCH is empty: sampling, beam or both"

mkdir -p "$out/text" "$out/tok"
perl "$here/bible-pairs.pl" "$kjv" "$sparv" "$out/text" "$DEV_BOOKS" "$TEST_BOOKS"
# The training verses in two: the Old Testament (before Matthew 1:1), parallel,
# and the New, whose Spanish alone is kept.
nt=$(grep -n '^Matthew 1:1$' "$out/text/train.ref" | cut -d: -f1)
[ -n "$nt" ] || die "no Matthew 1:1 among the training verses"
keep() { awk -v n="$LINES" 'n == 0 || NR <= n'; }  # reads all: no SIGPIPE upstream
head -n $((nt - 1)) "$out/text/train.src" | keep >"$out/text/ot.en"
head -n $((nt - 1)) "$out/text/train.tgt" | keep >"$out/text/ot.es"
tail -n +"$nt" "$out/text/train.tgt" | keep >"$out/text/nt.es"
say "$(wc -l <"$out/text/ot.en") parallel pairs (Old Testament), $(wc -l <"$out/text/nt.es") Spanish verses" \
  "without their English (New Testament), $(wc -l <"$out/text/test.src") held out ($TEST_BOOKS)"

"$bin/tfm-tok" train -q -o "$out/spm.model" --vocab-size "$VOCAB" --user-symbols "$TAG" -- \
  "$out/text/ot.en" "$out/text/ot.es" "$out/text/nt.es"
echo "$TAG" | "$bin/tfm-tok" -m "$out/spm.model" | grep -q "\(^\| \)$TAG\$" ||
  die "the vocabulary does not keep $TAG as one piece"
for f in ot.en ot.es nt.es dev.src dev.tgt test.src; do
  "$bin/tfm-tok" -m "$out/spm.model" "$out/text/$f" >"$out/tok/$f"
done
batch() {  # batch NAME SRC TGT
  "$bin/tfm-batch" -q -m "$out/spm.model" -o "$out/$1.tfmb" --max-tokens 4096 "$2" "$3"
}
batch ot "$out/tok/ot.en" "$out/tok/ot.es"
batch ot-reverse "$out/tok/ot.es" "$out/tok/ot.en"
batch dev "$out/tok/dev.src" "$out/tok/dev.tgt"
batch dev-reverse "$out/tok/dev.tgt" "$out/tok/dev.src"

train() {  # train NAME DEV CORPUS... [-- OPTIONS...]
  local name=$1 dev=$2
  shift 2
  rm -rf "${out:?}/$name"
  "$bin/tfm-train" -o "$out/$name" -m "$out/spm.model" "${MODEL[@]}" --seed "$SEED" \
    --max-steps "$STEPS" --warmup "$WARMUP" --save-every 0 --save-every-steps "$SAVE_STEPS" \
    --log "$out/$name.log.json" --dev "$out/$dev.tfmb" "$@" 2>"$out/$name.log" ||
    { tail -n 5 "$out/$name.log" >&2; die "training $name (its log: $out/$name.log)"; }
  "$bin/tfm-avgckpt" -q -o "$out/$name.bin" --last "$AVG_LAST" "$out/$name"
}
say "reverse (Spanish -> English) and baseline (English -> Spanish): ${MODEL[*]}, $STEPS updates each" \
  "on the Old Testament"
train reverse dev-reverse "$out/ot-reverse.tfmb" &
reverse=$!
train baseline dev "$out/ot.tfmb" &
baseline=$!
wait "$reverse" && wait "$baseline"

# The New Testament's Spanish back-translated, a search at a time; each
# synthetic English source tagged.
translate() {  # translate SEARCH
  local how=(--beam 4)
  [ "$1" = sampling ] && how=(--sampling --sampling-topk "$SAMPLING_TOPK" --seed "$SEED")
  "$bin/tfm-decode" -q -m "$out/reverse.bin" "${how[@]}" <"$out/tok/nt.es" >"$out/tok/nt.en.$1"
  sed "s/^/$TAG /" "$out/tok/nt.en.$1" >"$out/tok/nt.tagged.$1"
  batch "bt-$1" "$out/tok/nt.tagged.$1" "$out/tok/nt.es"
  "$bin/tfm-batch" info "$out/bt-$1.tfmb" | grep -q '^pairs: *[1-9]' ||
    die "bt-$1: no back-translated pair passed tfm-batch's length filters (is the reverse model's output empty?)"
}
pids=()
for s in $SEARCH; do translate "$s" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done
say "bt-{${SEARCH// /,}}: $STEPS updates each on the Old Testament and the back-translated New Testament" \
  "(--weights 1 $BT_WEIGHT)"
pids=()
for s in $SEARCH; do
  train "bt-$s" dev "$out/ot.tfmb" "$out/bt-$s.tfmb" --weights 1 "$BT_WEIGHT" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

: >"$out/results.txt.tmp"
base_bleu=
for m in baseline $(for s in $SEARCH; do echo "bt-$s"; done); do
  "$bin/tfm-decode" -q -m "$out/$m.bin" --beam "$BEAM" --detok <"$out/tok/test.src" >"$out/$m.hyp"
  bleu=$("$bin/tfm-score" -b -i "$out/$m.hyp" -r "$out/text/test.tgt")
  if [ -z "$base_bleu" ]; then
    base_bleu=$bleu
    printf '%-12s BLEU %s  (%s pairs)\n' "$m" "$bleu" "$(wc -l <"$out/text/ot.en")" >>"$out/results.txt.tmp"
  else
    printf '%-12s BLEU %s  (%+.2f; and %s back-translated pairs)\n' "$m" "$bleu" \
      "$(awk -v a="$bleu" -v b="$base_bleu" 'BEGIN { print a - b }')" \
      "$("$bin/tfm-batch" info "$out/$m.tfmb" | awk '$1 == "pairs:" { print $2 }')" >>"$out/results.txt.tmp"
  fi
done
mv -f "$out/results.txt.tmp" "$out/results.txt"
cat "$out/results.txt"
