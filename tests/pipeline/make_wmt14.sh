# pipeline: the wiring of `make -f Makefile.data wmt14-ende` and
# `wmt14-enfr`, which cannot run end to end here (no WMT training data
# offline). A stand-in DATA_MIRROR laid out like the real one
# (scripts/sources.tsv: wmt14/*.tgz with the members statmt.org ships) is
# built from ../shared/data:
#   training corpora  en-de: 3 x 1,000 lines of the 10k WMT en-de sample;
#                     en-fr: 5 x 600 lines of Multi30k train (en, fr)
#   dev.tgz           dev/newstest2013.{en,de,fr}: 100 lines of Multi30k val
#   test-full.tgz     the real newstest2014 SGML files, cut after their first document
# and each pipeline runs through every step with a tiny model and 20
# updates (VERIFY=0: the stand-ins do not have the real checksums). The
# test checks what each step must have made of that: the text extracted in
# order, every file, the last 2 checkpoints averaged, both BLEU lines for
# en-de (sacreBLEU and the paper's), the summary line.
source "$(dirname "$0")/common.bash"
S=$SHARED
require_shared wmt-en-de-10k-sample/src-train.txt.gz

# The stand-in mirror.
T="$TMP/tree" M="$TMP/mirror/wmt14"
mkdir -p "$T"/{training,un,dev,test-full} "$M"
slice() { sed -n "$2,$3p" "$1"; }  # FILE FIRST LAST
zcat "$S/wmt-en-de-10k-sample/src-train.txt.gz" >"$TMP/sample.en"
zcat "$S/wmt-en-de-10k-sample/tgt-train.txt.gz" >"$TMP/sample.de"
for l in en fr; do zcat "$S/multi30k/task1/raw/train.$l.gz" >"$TMP/m30k.$l"; done
for l in en de fr; do zcat "$S/multi30k/task1/raw/val.$l.gz" | sed -n 1,100p >"$T/dev/newstest2013.$l"; done
for l in en de; do
  slice "$TMP/sample.$l" 1 1000 >"$T/training/europarl-v7.de-en.$l"
  slice "$TMP/sample.$l" 1001 2000 >"$T/commoncrawl.de-en.$l"
  slice "$TMP/sample.$l" 2001 3000 >"$T/training/news-commentary-v9.de-en.$l"
done
for l in en fr; do
  slice "$TMP/m30k.$l" 1 600 >"$T/training/europarl-v7.fr-en.$l"
  slice "$TMP/m30k.$l" 601 1200 >"$T/commoncrawl.fr-en.$l"
  slice "$TMP/m30k.$l" 1201 1800 >"$T/training/news-commentary-v9.fr-en.$l"
  slice "$TMP/m30k.$l" 1801 2400 >"$T/un/undoc.2000.fr-en.$l"
  slice "$TMP/m30k.$l" 2401 3000 | gzip -n >"$T/giga-fren.release2.fixed.$l.gz"
done
for f in deen-src.en deen-ref.de fren-src.en fren-ref.fr; do
  zcat "$S/wmt14/newstest2014-full/sgm/newstest2014-$f.sgm.gz" | awk '!done { print } /<\/doc>/ { done = 1 }' >"$T/test-full/newstest2014-$f.sgm"
  case $f in *-src.*) echo '</srcset>';; *) echo '</refset>';; esac >>"$T/test-full/newstest2014-$f.sgm"
done
(
  cd "$T"
  tar -czf "$M/training-parallel-europarl-v7.tgz" training/europarl-v7.*
  tar -czf "$M/training-parallel-commoncrawl.tgz" commoncrawl.*
  tar -czf "$M/training-parallel-nc-v9.tgz" training/news-commentary-v9.*
  tar -czf "$M/training-parallel-un.tgz" un
  tar -cf "$M/training-giga-fren.tar" giga-fren.release2.fixed.*
  tar -czf "$M/dev.tgz" dev
  tar -czf "$M/test-full.tgz" test-full
)

for task in wmt14-ende wmt14-enfr; do
  l=${task#wmt14-en}
  make -s -C "$TFM_SOURCE" -f Makefile.data "$task" BIN="$TFM_BIN" WORK="$TMP/work" DATA_MIRROR="$TMP/mirror" \
    VERIFY=0 DEVICE=cpu PRESET=tiny VOCAB=1000 MAX_TOKENS=1000 STEPS=20 SAVE_STEPS=5 AVG_LAST=2 \
    TRAIN_ARGS="--warmup 10 --valid-every 10" >"$TMP/$task.out" 2>&1 \
    || { cat "$TMP/$task.out" >&2; fail "make $task"; }
  W="$TMP/work/$task"
  tail -n 1 "$TMP/$task.out"
  # The text: every corpus in order, newstest2013 and the first document of newstest2014.
  segs=$(grep -c '^<seg ' "$T/test-full/newstest2014-${l}en-src.en.sgm")
  [ "$(wc -l <"$W/text/train.src")" = 3000 ] || fail "$task: $(wc -l <"$W/text/train.src") training pairs, not 3000"
  if [ "$l" = de ]; then
    cmp -s "$W/text/train.tgt" <(head -n 3000 "$TMP/sample.de") || fail "$task: the German training side is not the corpora in order"
  else
    cmp -s "$W/text/train.tgt" <(head -n 3000 "$TMP/m30k.fr") || fail "$task: the French training side is not the corpora in order"
  fi
  cmp -s "$W/text/dev.tgt" "$T/dev/newstest2013.$l" || fail "$task: dev is not newstest2013.$l"
  cmp -s "$W/text/test.src" <(head -n "$segs" "$S/wmt14/newstest2014-full/newstest2014.en-$l.en") \
    || fail "$task: the test source is not newstest2014's first $segs lines"
  cmp -s "$W/text/test.tgt" <(head -n "$segs" "$S/wmt14/newstest2014-full/newstest2014.en-$l.$l") \
    || fail "$task: the test reference is not newstest2014's first $segs lines"
  # Every step.
  for f in spm.model train.tfmb dev.tfmb train.done model.bin test.hyp results.txt curve.svg; do
    [ -s "$W/$f" ] || fail "$task: no $f"
  done
  [ "$(wc -l <"$W/test.hyp")" = "$segs" ] || fail "$task: test.hyp has $(wc -l <"$W/test.hyp") lines, not $segs"
  grep -q "^averaged: the checkpoints of updates 15, 20$" "$W/results.txt" || fail "$task: not the last 2 checkpoints"
  grep -q '^ *BLEU|nrefs:1|case:mixed|' "$W/results.txt" || fail "$task: no BLEU line"
  grep -q "^$task: BLEU [0-9.]* on the full newstest2014 ($segs lines)" <(tail -n 1 "$W/results.txt") \
    || fail "$task: bad summary line: $(tail -n 1 "$W/results.txt")"
done
grep -q '^ *BLEU-paper|' "$TMP/work/wmt14-ende/results.txt" || fail "wmt14-ende: no paper-style BLEU"
grep -q ', paper-style BLEU [0-9.]* |' <(tail -n 1 "$TMP/work/wmt14-ende/results.txt") || fail "wmt14-ende: no paper-style BLEU in the summary"
! grep -q '^ *BLEU-paper|' "$TMP/work/wmt14-enfr/results.txt" || fail "wmt14-enfr: a paper-style BLEU (German only)"
echo "wmt14: both pipelines wired end to end on a stand-in mirror"
