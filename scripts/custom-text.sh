#!/bin/bash
# custom-text.sh OUT SRC TGT [DEV_SRC DEV_TGT [TEST_SRC TEST_TGT]]: the text of
# Makefile.data's `custom` task, from the user's parallel files (plain or
# gzip, one sentence a line): OUT/{train,dev,test}.{src,tgt}, trailing
# blanks removed. A dev or test pair not given is held out of SRC/TGT: line
# n goes to dev when n % 100 == 50 and to test when n % 100 == 0, at most
# 2,000 lines each (the rest of those lines stay in training): spread over
# the whole corpus, the same every run. Checked before anything is
# written, each a line and exit status 1: a file missing, empty, or of
# another line count than its other side; too few lines to hold out from.
set -euo pipefail
die() { echo "custom: error: $*" >&2; exit 1; }
out=$1 src=$2 tgt=$3 dev_src=${4:-} dev_tgt=${5:-} test_src=${6:-} test_tgt=${7:-}

lines() {  # lines FILE: its line count (gzip read through), or an error
  [ -f "$1" ] && [ -r "$1" ] || die "$1: no such file (SRC=, TGT=, DEV_*=, TEST_*= name files)"
  local n
  n=$(if gzip -t "$1" 2>/dev/null; then gzip -dc "$1"; else cat "$1"; fi | wc -l)
  [ "$n" -gt 0 ] || die "$1 is empty"
  echo "$n"
}
pair() {  # pair NAME SRC TGT: both given, of one line count
  [ -n "$2" ] && [ -n "$3" ] || die "$1: give both sides (${1}_SRC= and ${1}_TGT=) or neither"
  local a b
  a=$(lines "$2") || exit 1
  b=$(lines "$3") || exit 1
  [ "$a" = "$b" ] || die "$2 has $a lines but $3 has $b: the sides of a pair must align line by line"
  echo "$a"
}
text() { if gzip -t "$1" 2>/dev/null; then gzip -dc "$1"; else cat "$1"; fi | sed 's/[[:space:]]*$//'; }

n=$(pair TRAIN "$src" "$tgt") || exit 1
[ -z "$dev_src$dev_tgt" ] || pair DEV "$dev_src" "$dev_tgt" >/dev/null || exit 1
[ -z "$test_src$test_tgt" ] || pair TEST "$test_src" "$test_tgt" >/dev/null || exit 1
if [ -z "$dev_src" ] || [ -z "$test_src" ]; then
  [ "$n" -ge 200 ] || die "$src has $n lines: too few to hold out a dev and a test set (give DEV_* and TEST_*)"
fi

mkdir -p "$out"
tmp=$(mktemp -d "$out/.text.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The split: a line's set by its number (dev and test held out where not given).
paste -d '\t' <(text "$src" | tr '\t' ' ') <(text "$tgt" | tr '\t' ' ') |
  awk -F'\t' -v dev="$([ -z "$dev_src" ] && echo 1 || echo 0)" -v test="$([ -z "$test_src" ] && echo 1 || echo 0)" \
      -v d="$tmp" '
    { set = "train" }
    dev && NR % 100 == 50 && nd < 2000 { set = "dev"; nd++ }
    test && NR % 100 == 0 && nt < 2000 { set = "test"; nt++ }
    { print $1 > (d "/" set ".src"); print $2 > (d "/" set ".tgt") }'
[ -z "$dev_src" ] || { text "$dev_src" >"$tmp/dev.src"; text "$dev_tgt" >"$tmp/dev.tgt"; }
[ -z "$test_src" ] || { text "$test_src" >"$tmp/test.src"; text "$test_tgt" >"$tmp/test.tgt"; }
for f in train.src train.tgt dev.src dev.tgt test.src test.tgt; do mv -f "$tmp/$f" "$out/$f"; done
echo "custom: $(wc -l <"$out/train.src") training pairs, $(wc -l <"$out/dev.src") dev, $(wc -l <"$out/test.src") test"
