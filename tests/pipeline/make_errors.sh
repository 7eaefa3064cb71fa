# pipeline: how the pipelines of Makefile.data fail. Each failure is one
# line naming what is wrong, a nonzero exit, and no partial file left where
# the next run would take it for a good one:
#   - DATA_MIRROR without a file the task needs;
#   - a file of DATA_MIRROR whose checksum is not the recorded one (and
#     VERIFY=0, which takes it anyway);
#   - a demo book name that is not in the Bible (when the SWORD modules
#     are installed, as make -f Makefile.data deps does);
#   - ptb-parse's held-out files: past the sample's, or in both dev and test.
# No training runs: every failure comes before it.
source "$(dirname "$0")/common.bash"
S=$SHARED
require_shared multi30k/task1/raw/train.en.gz

# expect_failure WHAT PATTERN make-args...: make fails, and its first line on stderr matches PATTERN.
expect_failure() {
  local what=$1 pattern=$2
  shift 2
  if make -s -C "$TFM_SOURCE" -f Makefile.data BIN="$TFM_BIN" DEVICE=cpu "$@" >"$TMP/out" 2>"$TMP/err"; then
    fail "$what: make succeeded"
  fi
  head -n 1 "$TMP/err" | grep -q -- "$pattern" || fail "$what: expected '$pattern', got: $(cat "$TMP/err")"
  echo "$what: $(head -n 1 "$TMP/err")"
}

# A mirror without the files.
mkdir -p "$TMP/empty"
expect_failure "missing file" "^fetch: error: DATA_MIRROR has no multi30k/task1/raw/" \
  multi30k-ende WORK="$TMP/w1" DATA_MIRROR="$TMP/empty"
[ -z "$(find "$TMP/w1" -type f -o -type l 2>/dev/null)" ] || fail "missing file: files left: $(find "$TMP/w1")"

# A mirror whose train.en.gz is not the one sources.tsv records.
mkdir -p "$TMP/bad/multi30k/task1/raw"
cp "$S"/multi30k/task1/raw/*.gz "$TMP/bad/multi30k/task1/raw/"
zcat "$S/multi30k/task1/raw/train.en.gz" | sed '1s/^/x/' | gzip -n >"$TMP/bad/multi30k/task1/raw/train.en.gz"
expect_failure "checksum" "^fetch: error: checksum mismatch: multi30k/task1/raw/train.en.gz in DATA_MIRROR .* has sha256 [0-9a-f]\{64\}, expected d79cfa99" \
  multi30k-ende WORK="$TMP/w2" DATA_MIRROR="$TMP/bad"
[ ! -e "$TMP/w2/download/multi30k/task1/raw/train.en.gz" ] || fail "checksum: the bad file was taken"
[ -z "$(find "$TMP/w2" -name '*.part')" ] || fail "checksum: a partial file was left"
# VERIFY=0 takes it (and everything else from the mirror): stop after the text.
make -s -C "$TFM_SOURCE" -f Makefile.data BIN="$TFM_BIN" WORK="$TMP/w2" DATA_MIRROR="$TMP/bad" VERIFY=0 \
  "$TMP/w2/multi30k-ende/text/train.src" || fail "VERIFY=0 refused the file"
[ "$(head -c 1 "$TMP/w2/multi30k-ende/text/train.src")" = x ] || fail "VERIFY=0: not the mirror's file"

# A book that is not there.
if command -v mod2imp >/dev/null && [ -n "$(mod2imp engKJV2006eb 2>/dev/null | head -c 1)" ]; then
  expect_failure "bad book" "^bible-pairs.pl: error: no book 'Hezekiah' in " \
    demo WORK="$TMP/w3" TEST_BOOKS=Ruth,Hezekiah
  [ -z "$(ls "$TMP/w3/demo/text" 2>/dev/null)" ] || fail "bad book: text files left: $(ls "$TMP/w3/demo/text")"
else
  echo "bad book: not checked (no SWORD modules; make -f Makefile.data deps installs them)"
fi
# ptb-parse's split: a file the sample does not have; a file in dev and test.
require_shared ptb-sample/treebank.zip
expect_failure "PTB file range" "^ptb-split.pl: error: TEST: no file wsj_0200 in " \
  ptb-parse WORK="$TMP/w4" DATA_MIRROR="$S" PTB_TEST=0180-0200
expect_failure "PTB dev and test" "^ptb-split.pl: error: wsj_0179 is both in DEV and in TEST" \
  ptb-parse WORK="$TMP/w4" DATA_MIRROR="$S" PTB_TEST=0179-0199
[ -z "$(ls "$TMP/w4/ptb-parse/raw" 2>/dev/null)" ] || fail "PTB split: files left: $(ls "$TMP/w4/ptb-parse/raw")"
echo "errors: each one line, nonzero exit, no partial file"
