# tfm-batch: build, info, every option's effect, every bad input.
source "$(dirname "$0")/common.bash"
P=tfm-batch
DATA="$TFM_SOURCE/../shared/data/multi30k/task1/raw"
if ! command -v spm_train >/dev/null || [ ! -f "$DATA/train.en.gz" ]; then
  # Both come with the setup (make -f Makefile.data deps, ../shared): fail, never skip.
  echo "FAIL: tfm-batch's test needs spm_train (Debian's sentencepiece) and $DATA" >&2
  exit 1
fi
zcat "$DATA/train.en.gz" | head -300 >"$TMP/en"
zcat "$DATA/train.de.gz" | head -300 >"$TMP/de"
cat "$TMP/en" "$TMP/de" >"$TMP/both"
spm_train --input="$TMP/both" --model_prefix="$TMP/spm" --vocab_size=500 --model_type=bpe \
  --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3 >/dev/null 2>&1 || { echo "spm_train failed" >&2; exit 1; }
M="$TMP/spm.model"
spm_encode --model="$M" <"$TMP/en" >"$TMP/en.tok"
spm_encode --model="$M" <"$TMP/de" >"$TMP/de.tok"
json() { python3 -c "import json,sys; d=json.load(open('$TMP/out')); print($1)"; }

run $P --help
expect_rc 0 "--help"
grep -q "^Usage: tfm-batch" "$TMP/out" || fail "--help: no usage line"
run $P info --help
expect_rc 0 "info --help"

# A plain build, then info.
run $P -m "$M" -o "$TMP/a.tfmb" "$TMP/en.tok" "$TMP/de.tok"
expect_rc 0 "build"
[ -s "$TMP/a.tfmb" ] || fail "build: no output file"
grep -q "300 of 300 pairs" "$TMP/err" || fail "build: no summary: $(cat "$TMP/err")"
grep -q "skipped: 0 empty" "$TMP/err" || fail "build: no filter counts"
ls "$TMP"/a.tfmb?* 2>/dev/null && fail "build: a temporary file is left"
run $P info "$TMP/a.tfmb"
expect_rc 0 "info"
for key in pairs tokens batches efficiency histogram vocabulary max_tokens; do
  grep -q "^$key:" "$TMP/out" || fail "info: no '$key:' line"
done
grep -q "^pairs: *300$" "$TMP/out" || fail "info: wrong pair count"
fp=$(python3 -c "print(1)" >/dev/null; "$TFM_BIN/$P" info "$TMP/a.tfmb" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["vocab_fingerprint"])')
[[ "$fp" == spm-* ]] || fail "info --json: fingerprint '$fp'"
run $P info "$TMP/a.tfmb" --json
[ "$(json 'd["pairs"], d["vocab_size"], d["packed_max_tokens"]')" = "300 500 25000" ] || fail "info --json: $(cat "$TMP/out")"
[ "$(json 'sum(h["src"] for h in d["histogram"])')" = 300 ] || fail "info --json: histogram does not sum to 300"

# --threads: the file does not depend on it; gzip and stdin read the same.
run $P -m "$M" -o "$TMP/t1.tfmb" "$TMP/en.tok" "$TMP/de.tok" --threads 1
expect_rc 0 "--threads 1"
cmp -s "$TMP/a.tfmb" "$TMP/t1.tfmb" || fail "--threads 1: differs from every core"
run $P -m "$M" -o "$TMP/t3.tfmb" "$TMP/en.tok" "$TMP/de.tok" --threads 3
cmp -s "$TMP/a.tfmb" "$TMP/t3.tfmb" || fail "--threads 3: differs from every core"
gzip -c "$TMP/en.tok" >"$TMP/en.tok.gz"
"$TFM_BIN/$P" -m "$M" -o "$TMP/z.tfmb" - "$TMP/de.tok" <"$TMP/en.tok.gz" 2>"$TMP/err" \
  || fail "gzip on stdin: $(cat "$TMP/err")"
cmp -s "$TMP/a.tfmb" "$TMP/z.tfmb" || fail "gzip on stdin: differs from the plain files"

# --json summary; -q silences the summary.
run $P -m "$M" -o "$TMP/b.tfmb" "$TMP/en.tok" "$TMP/de.tok" --json
[ "$(json 'd["pairs"], d["lines"]')" = "300 300" ] || fail "--json: $(cat "$TMP/out")"
[ "$(json 'd["bytes"]')" = "$(stat -c %s "$TMP/b.tfmb")" ] || fail "--json: bytes"
[ "$(json '0 < d["src_efficiency"] <= 1 and 0 < d["tgt_efficiency"] <= 1')" = True ] \
  || fail "--json: efficiencies $(cat "$TMP/out")"
run $P -q -m "$M" -o "$TMP/b.tfmb" "$TMP/en.tok" "$TMP/de.tok"
expect_rc 0 "-q"
[ -s "$TMP/err" ] && fail "-q: stderr not silent: $(cat "$TMP/err")"
run $P -v -m "$M" -o "$TMP/b.tfmb" "$TMP/en.tok" "$TMP/de.tok"
expect_rc 0 "-v"

# --max-tokens: smaller budget, more batches; info --max-tokens re-packs.
run $P -m "$M" -o "$TMP/c.tfmb" "$TMP/en.tok" "$TMP/de.tok" --max-tokens 300 --json
[ "$(json 'd["batches"] > 10 and d["max_tokens"] == 300')" = True ] || fail "--max-tokens 300: $(cat "$TMP/out")"
run $P info "$TMP/c.tfmb" --json
[ "$(json 'd["packed_max_tokens"]')" = 300 ] || fail "info: packed max tokens not 300"
run $P info "$TMP/a.tfmb" --max-tokens 300 --json
[ "$(json 'd["batches"] > 10 and d["max_tokens"] == 300')" = True ] || fail "info --max-tokens: $(cat "$TMP/out")"

# --max-len and --max-ratio filter, counted.
run $P -m "$M" -o "$TMP/d.tfmb" "$TMP/en.tok" "$TMP/de.tok" --max-len 12 --json
[ "$(json 'd["skipped"]["max_len"] > 0 and d["pairs"] + d["skipped"]["max_len"] == 300')" = True ] \
  || fail "--max-len 12: $(cat "$TMP/out")"
run $P -m "$M" -o "$TMP/d.tfmb" "$TMP/en.tok" "$TMP/de.tok" --max-ratio 1.1 --json
[ "$(json 'd["skipped"]["max_ratio"] > 0')" = True ] || fail "--max-ratio 1.1: $(cat "$TMP/out")"

# Empty sides and invalid UTF-8: skipped and counted, or --strict fatal.
{ head -5 "$TMP/en.tok"; echo ""; printf 'bad \xff byte\n'; } >"$TMP/s"
{ head -5 "$TMP/de.tok"; echo "▁ein"; echo "▁ein"; } >"$TMP/t"
run $P -m "$M" -o "$TMP/e.tfmb" "$TMP/s" "$TMP/t" --json
expect_rc 0 "skips"
[ "$(json 'd["pairs"], d["skipped"]["empty"], d["skipped"]["invalid_utf8"]')" = "5 1 1" ] || fail "skips: $(cat "$TMP/out")"
grep -q "invalid UTF-8 ($TMP/s:7)" "$TMP/err" || fail "invalid UTF-8 not reported with file:line: $(cat "$TMP/err")"
run $P -m "$M" -o "$TMP/f.tfmb" "$TMP/s" "$TMP/t" --strict
expect_rc 1 "--strict"
expect_one_error_line $P "--strict"
grep -q "$TMP/s:7" "$TMP/err" || fail "--strict: no file:line"
[ -e "$TMP/f.tfmb" ] && fail "--strict: output written"

# --tsv gives the same corpus as two files.
paste "$TMP/en.tok" "$TMP/de.tok" >"$TMP/tsv"
run $P -m "$M" -o "$TMP/g.tfmb" --tsv "$TMP/tsv"
expect_rc 0 "--tsv"
cmp -s "$TMP/a.tfmb" "$TMP/g.tfmb" || fail "--tsv: differs from SRC TGT"
"$TFM_BIN/$P" -m "$M" -o "$TMP/g2.tfmb" --tsv - <"$TMP/tsv" 2>"$TMP/err" || fail "--tsv -: $(cat "$TMP/err")"
cmp -s "$TMP/a.tfmb" "$TMP/g2.tfmb" || fail "--tsv -: differs from SRC TGT"
printf 'no tab here\n' >"$TMP/badtsv"
run $P -m "$M" -o "$TMP/h.tfmb" --tsv "$TMP/badtsv"
expect_rc 1 "--tsv without TAB"
expect_one_error_line $P "--tsv without TAB"

# Mismatched line counts: one line naming both files and counts, no output.
head -7 "$TMP/de.tok" >"$TMP/short"
run $P -m "$M" -o "$TMP/i.tfmb" "$TMP/en.tok" "$TMP/short"
expect_rc 1 "mismatch"
expect_one_error_line $P "mismatch"
grep -q "en.tok has 300 lines but .*short has 7" "$TMP/err" || fail "mismatch: $(cat "$TMP/err")"
[ -e "$TMP/i.tfmb" ] && fail "mismatch: output written"
# An existing output survives a failed run.
cp "$TMP/a.tfmb" "$TMP/keep.tfmb"
run $P -m "$M" -o "$TMP/keep.tfmb" "$TMP/en.tok" "$TMP/short"
cmp -s "$TMP/a.tfmb" "$TMP/keep.tfmb" || fail "failed run damaged an existing output"

# Bad inputs to info: missing, not a corpus, truncated, flipped, wrong version.
run $P info "$TMP/nope.tfmb"
expect_rc 1 "info missing"; expect_one_error_line $P "info missing"
run $P info "$TMP/en.tok"
expect_rc 1 "info text file"; grep -q "not a tfm corpus" "$TMP/err" || fail "info text: $(cat "$TMP/err")"
size=$(stat -c %s "$TMP/a.tfmb")
for cut in 0 5 100 200 $((size / 2)) $((size - 1)); do
  head -c "$cut" "$TMP/a.tfmb" >"$TMP/cut.tfmb"
  run $P info "$TMP/cut.tfmb"
  expect_rc 1 "truncated at $cut"; expect_one_error_line $P "truncated at $cut"
  grep -q "cut.tfmb" "$TMP/err" || fail "truncated at $cut: file not named"
done
for at in 3 9 20 90 130 $((size - 10)); do
  python3 -c "import sys; b=bytearray(open('$TMP/a.tfmb','rb').read()); b[$at]^=0x40; open('$TMP/flip.tfmb','wb').write(b)"
  run $P info "$TMP/flip.tfmb"
  expect_rc 1 "flip at $at"; expect_one_error_line $P "flip at $at"
done
python3 -c "b=bytearray(open('$TMP/a.tfmb','rb').read()); b[8]=9; open('$TMP/v.tfmb','wb').write(b)"
run $P info "$TMP/v.tfmb"
expect_rc 1 "wrong version"; grep -q "version 9" "$TMP/err" || fail "wrong version: $(cat "$TMP/err")"
python3 -c "b=bytearray(open('$TMP/a.tfmb','rb').read()); b[8]=1; open('$TMP/v.tfmb','wb').write(b)"
run $P info "$TMP/v.tfmb"
expect_rc 1 "version 1"; expect_one_error_line $P "version 1"
grep -q "version 1, which this tfm no longer reads.*make it again with tfm-batch" "$TMP/err" \
  || fail "version 1: $(cat "$TMP/err")"

# Bad vocab and unreadable text.
run $P -m "$TMP/en.tok" -o "$TMP/j.tfmb" "$TMP/en.tok" "$TMP/de.tok"
expect_rc 1 "bad vocab"; expect_one_error_line $P "bad vocab"
run $P -m "$M" -o "$TMP/j.tfmb" "$TMP/missing" "$TMP/de.tok"
expect_rc 1 "missing source"; expect_one_error_line $P "missing source"
[ -e "$TMP/j.tfmb" ] && fail "bad input: output written"

# Bad usage: exit 2, one error line, pointer to --help.
for bad in "--bogus" "-o x a b" "-m $M a b" "-m $M -o x a" "-m $M -o x --tsv f a b" \
  "-m $M -o x a b --max-len 0" "-m $M -o x a b --max-len 5000" "-m $M -o x a b --max-tokens 0" \
  "-m $M -o x a b --max-ratio 0.5" "-m $M -o x a b --max-tokens abc" "-m $M -o x a b --threads -1" \
  "-m $M -o x a b --threads x" "-m $M -o x - -" "info" "info a b" "info a --threads 2" "info a --strict" "info a --max-len 9" "-o x info a"; do
  # shellcheck disable=SC2086
  run $P $bad
  expect_rc 2 "$bad"
  expect_one_error_line $P "$bad"
  grep -q -- "--help" "$TMP/err" || fail "$bad: no pointer to --help"
done

finish
