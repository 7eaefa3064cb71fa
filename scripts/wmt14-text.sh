#!/bin/bash
# wmt14-text.sh: the plain text of a WMT14 task from the files of
# scripts/sources.tsv: the standard training corpora, newstest2013 (dev) and
# newstest2014 (test, the full 3003 lines), English source.
#
# usage: wmt14-text.sh de|fr DOWNLOAD_DIR OUT_DIR
#   DOWNLOAD_DIR holds wmt14/*.tgz (WORK/download, or a DATA_MIRROR)
#   writes OUT_DIR/{train,dev,test}.{src,tgt}: src English, tgt German or
#   French, line i of src aligned with line i of tgt; every file through a
#   temporary name, renamed once all are complete.
#
# Training corpora, concatenated in this order (the members of the
# tarballs as statmt.org ships them):
#   en-de: training/europarl-v7.de-en, commoncrawl.de-en, training/news-commentary-v9.de-en
#   en-fr: the same for fr-en, then un/undoc.2000.fr-en and giga-fren.release2.fixed
# Carriage returns are removed; nothing else is changed or filtered here
# (tfm-batch drops empty, over-long and badly skewed pairs and says how many).
# The test sets come from sacreBLEU's "fake SGML" rule: each <seg> line's
# text, whitespace collapsed.
set -euo pipefail
die() { echo "wmt14-text: error: $*" >&2; exit 1; }
[ $# -eq 3 ] || { echo "usage: wmt14-text.sh de|fr DOWNLOAD_DIR OUT_DIR" >&2; exit 2; }
l=$1 dl=$2/wmt14 out=$3
case $l in de|fr) ;; *) die "unknown language '$l' (de or fr)";; esac
mkdir -p "$out"
tmp=$(mktemp -d "$out/.wmt14-text.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# member TARBALL NAME: a member of a tarball on stdout; a .gz member is decompressed.
member() {
  [ -e "$1" ] || die "missing $1"
  case $2 in
    *.gz) tar -xOf "$1" "$2" | gzip -dc ;;
    *) tar -xOf "$1" "$2" ;;
  esac || die "$1 has no member $2"
}

# corpus TARBALL EN_MEMBER XX_MEMBER: both sides appended to train.{src,tgt}.
corpus() {
  member "$1" "$2" | tr -d '\r' >"$tmp/en"
  member "$1" "$3" | tr -d '\r' >"$tmp/xx"
  local ne nx
  ne=$(wc -l <"$tmp/en") nx=$(wc -l <"$tmp/xx")
  [ "$ne" = "$nx" ] || die "$1: $2 has $ne lines, $3 has $nx"
  cat "$tmp/en" >>"$tmp/train.src"
  cat "$tmp/xx" >>"$tmp/train.tgt"
  echo "wmt14-text: $(basename "$1") ${2%.*}: $ne pairs" >&2
}

# sgm TARBALL MEMBER: the segments of an SGML test file, one a line.
sgm() {
  member "$1" "$2" | perl -CSD -ne 'next unless /^<seg /; s/<seg.*?>(.*)<\/seg>.*/$1/; s/^\s+|\s+$//g; s/\s+/ /g; print "$_\n"'
}

: >"$tmp/train.src"
: >"$tmp/train.tgt"
corpus "$dl/training-parallel-europarl-v7.tgz" "training/europarl-v7.$l-en.en" "training/europarl-v7.$l-en.$l"
corpus "$dl/training-parallel-commoncrawl.tgz" "commoncrawl.$l-en.en" "commoncrawl.$l-en.$l"
corpus "$dl/training-parallel-nc-v9.tgz" "training/news-commentary-v9.$l-en.en" "training/news-commentary-v9.$l-en.$l"
if [ "$l" = fr ]; then
  corpus "$dl/training-parallel-un.tgz" "un/undoc.2000.fr-en.en" "un/undoc.2000.fr-en.fr"
  corpus "$dl/training-giga-fren.tar" "giga-fren.release2.fixed.en.gz" "giga-fren.release2.fixed.fr.gz"
fi
member "$dl/dev.tgz" dev/newstest2013.en | tr -d '\r' >"$tmp/dev.src"
member "$dl/dev.tgz" "dev/newstest2013.$l" | tr -d '\r' >"$tmp/dev.tgt"
sgm "$dl/test-full.tgz" "test-full/newstest2014-${l}en-src.en.sgm" >"$tmp/test.src"
sgm "$dl/test-full.tgz" "test-full/newstest2014-${l}en-ref.$l.sgm" >"$tmp/test.tgt"
for s in dev test; do
  [ "$(wc -l <"$tmp/$s.src")" = "$(wc -l <"$tmp/$s.tgt")" ] || die "$s: source and reference differ in length"
  [ -s "$tmp/$s.src" ] || die "$s: no lines"
done
echo "wmt14-text: en-$l: $(wc -l <"$tmp/train.src") training pairs, newstest2013 $(wc -l <"$tmp/dev.src") lines, newstest2014 $(wc -l <"$tmp/test.src") lines" >&2
for f in train.src train.tgt dev.src dev.tgt test.src test.tgt; do mv -f "$tmp/$f" "$out/$f"; done
