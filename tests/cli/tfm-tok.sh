# tfm-tok: train, encode, decode, every option's effect, and bad input.
source "$(dirname "$0")/common.bash"
unset TFM_MODEL
DATA=/work/shared/data/multi30k/task1/raw
if [ -f "$DATA/train.en.gz" ]; then
  zcat "$DATA/train.en.gz" | head -n 2000 >"$TMP/text.en"
  zcat "$DATA/train.de.gz" | head -n 2000 >"$TMP/text.de"
else  # a small synthetic corpus where the data is not there
  for i in $(seq 1 400); do echo "the cat $i sat on the mat number $((i * 7)) and a dog ran"; done >"$TMP/text.en"
  for i in $(seq 1 400); do echo "die Katze $i sass auf der Matte Nummer $((i * 3)) und ein Hund lief"; done >"$TMP/text.de"
fi
gzip -c "$TMP/text.de" >"$TMP/text.de.gz"
M="$TMP/m.model"

run tfm-tok --help
expect_rc 0 "--help"
grep -q "^Usage: tfm-tok" "$TMP/out" || fail "--help: no usage line"
run tfm-tok train --help
expect_rc 0 "train --help"
grep -q -- "--vocab-size" "$TMP/out" || fail "train --help: no --vocab-size"
run tfm-tok --version
grep -q "^tfm-tok tfm [0-9]" "$TMP/out" || fail "--version: got '$(cat "$TMP/out")'"

# train: one model from a plain and a gzip file; progress on stderr, -q silences it.
run tfm-tok train -o "$M" --vocab-size 500 "$TMP/text.en" "$TMP/text.de.gz"
expect_rc 0 "train"
[ -s "$M" ] || fail "train: no model written"
grep -q "wrote" "$TMP/err" || fail "train: no progress on stderr"
[ "$(ls "$TMP" | grep -c tmp)" -eq 0 ] || fail "train: temporary file left"
run tfm-tok train -q -o "$TMP/q.model" --vocab-size 500 "$TMP/text.en"
expect_rc 0 "train -q"
[ -s "$TMP/err" ] && fail "train -q: stderr not silent: $(cat "$TMP/err")"
run tfm-tok train -v -o "$TMP/v.model" --vocab-size 500 "$TMP/text.en"
grep -q "trainer_interface" "$TMP/err" || fail "train -v: SentencePiece's log not shown"

# reserved pieces and the vocabulary size
printf '<pad>\n<unk>\n<s>\n</s>\n' >"$TMP/reserved"
"$TFM_BIN/tfm-tok" -m "$M" "$TMP/reserved" >/dev/null || fail "encode reserved"
echo "<s> </s>" | "$TFM_BIN/tfm-tok" -d -m "$M" >/dev/null || fail "decode reserved"
printf '0 1 2 3 499\n' | "$TFM_BIN/tfm-tok" -d --ids -m "$M" >/dev/null || fail "decode id 499"
printf '500\n' | "$TFM_BIN/tfm-tok" -d --ids -m "$M" >/dev/null 2>&1 && fail "decode id 500 accepted with vocab 500"

# --model-type unigram, --user-symbols, --max-sentences, --seed, --character-coverage
run tfm-tok train -o "$TMP/u.model" --vocab-size 400 --model-type unigram --user-symbols '<sep>,<2de>' \
  --max-sentences 300 --seed 7 --character-coverage 0.9995 "$TMP/text.en"
expect_rc 0 "train unigram"
grep -q "300 lines\|unigram" "$TMP/err" || fail "train unigram: $(cat "$TMP/err")"
out=$(echo "a<sep>b <2de>" | "$TFM_BIN/tfm-tok" -m "$TMP/u.model")
echo "$out" | grep -q " <sep> " || fail "--user-symbols: <sep> split: $out"
echo "$out" | grep -q "<2de>" || fail "--user-symbols: <2de> split: $out"
"$TFM_BIN/tfm-tok" train -q -o "$TMP/s1.model" --vocab-size 300 --max-sentences 200 --seed 1 "$TMP/text.en"
"$TFM_BIN/tfm-tok" train -q -o "$TMP/s1b.model" --vocab-size 300 --max-sentences 200 --seed 1 "$TMP/text.en"
cmp -s "$TMP/s1.model" "$TMP/s1b.model" || fail "--seed: the same seed gave different models"

# encode: pieces by default, --ids, 'encode' spelled out, stdin, FILE..., TFM_MODEL
printf 'A man rides a bike.\n\nZwei Hunde spielen.\n' >"$TMP/in"
"$TFM_BIN/tfm-tok" -m "$M" <"$TMP/in" >"$TMP/p1" || fail "encode stdin"
[ "$(wc -l <"$TMP/p1")" -eq 3 ] || fail "encode: not one line per line"
[ -z "$(sed -n 2p "$TMP/p1")" ] || fail "encode: empty line not kept empty"
grep -q "▁" "$TMP/p1" || fail "encode: no pieces"
"$TFM_BIN/tfm-tok" encode -m "$M" "$TMP/in" >"$TMP/p2"
cmp -s "$TMP/p1" "$TMP/p2" || fail "encode FILE differs from stdin"
TFM_MODEL="$M" "$TFM_BIN/tfm-tok" - <"$TMP/in" >"$TMP/p3"
cmp -s "$TMP/p1" "$TMP/p3" || fail "TFM_MODEL not used"
"$TFM_BIN/tfm-tok" -m "$M" --ids "$TMP/in" >"$TMP/i1"
grep -qE '^[0-9]+( [0-9]+)*$' "$TMP/i1" || fail "--ids: not ids"
"$TFM_BIN/tfm-tok" -m "$M" "$TMP/in" "$TMP/in" | cmp -s - <(cat "$TMP/p1" "$TMP/p1") || fail "two FILEs"

# decode: -d and 'decode', pieces and --ids, back to the text
"$TFM_BIN/tfm-tok" -d -m "$M" "$TMP/p1" | cmp -s - "$TMP/in" || fail "decode pieces"
"$TFM_BIN/tfm-tok" --decode -m "$M" "$TMP/p1" | cmp -s - "$TMP/in" || fail "decode pieces (--decode)"
"$TFM_BIN/tfm-tok" decode --ids -m "$M" "$TMP/i1" | cmp -s - "$TMP/in" || fail "decode --ids"

# order and content kept across chunks and threads
"$TFM_BIN/tfm-tok" -m "$M" --threads 1 "$TMP/text.en" >"$TMP/t1"
"$TFM_BIN/tfm-tok" -m "$M" --threads 2 "$TMP/text.en" >"$TMP/t2"
cmp -s "$TMP/t1" "$TMP/t2" || fail "--threads 2 differs from --threads 1"
"$TFM_BIN/tfm-tok" -d -m "$M" "$TMP/t2" | cmp -s - "$TMP/text.en" || fail "round trip of the corpus"

# --side with a plain model: both sides are the one model, nothing changes.
"$TFM_BIN/tfm-tok" -m "$M" --side target "$TMP/in" | cmp -s - "$TMP/p1" || fail "--side target changed a plain model's pieces"
"$TFM_BIN/tfm-tok" -m "$M" --side source --ids "$TMP/in" | cmp -s - "$TMP/i1" || fail "--side source changed a plain model's ids"
"$TFM_BIN/tfm-tok" -d -m "$M" --side source "$TMP/p1" | cmp -s - "$TMP/in" || fail "-d --side source with a plain model"

# A vocabulary bundle (an imported OPUS-MT model's): encoding segments with
# its source model, decoding joins with its target model, --side picks one
# for both, each byte-identical to SentencePiece's own tools with that
# model; ids are the bundle's table's.
for tool in spm_encode spm_decode spm_export_vocab; do
  command -v $tool >/dev/null || fail "$tool not found (Debian package sentencepiece)"
done
"$TFM_BIN/tfm-tok" train -q -o "$TMP/src.model" --vocab-size 400 "$TMP/text.en"
"$TFM_BIN/tfm-tok" train -q -o "$TMP/tgt.model" --vocab-size 400 --model-type unigram "$TMP/text.de"
# The table as OPUS-MT's vocab.json numbers it: </s> 0, <unk> 1, the other
# pieces of both models once, shuffled, <pad> last.
{
  printf '</s>\n<unk>\n'
  { spm_export_vocab --model "$TMP/src.model"; spm_export_vocab --model "$TMP/tgt.model"; } | cut -f1 |
    grep -vxE '</s>|<unk>|<pad>' | LC_ALL=C sort -u | shuf --random-source=<(yes 7)
  printf '<pad>\n'
} >"$TMP/table"
B="$TMP/opus.tfmvocab"
"$TFM_TOOLS/vocab_bundle" "$B" "$TMP/src.model" "$TMP/tgt.model" "$TMP/table" || fail "vocab_bundle"
head -n 300 "$TMP/text.en" >"$TMP/b.en"
head -n 300 "$TMP/text.de" >"$TMP/b.de"
spm_encode --model "$TMP/src.model" <"$TMP/b.en" >"$TMP/spm.src.en"
spm_encode --model "$TMP/tgt.model" <"$TMP/b.en" >"$TMP/spm.tgt.en"
spm_encode --model "$TMP/tgt.model" <"$TMP/b.de" >"$TMP/spm.tgt.de"
cmp -s "$TMP/spm.src.en" "$TMP/spm.tgt.en" && fail "bundle: the two models segment alike; the test sees no side"
run tfm-tok -m "$B" "$TMP/b.en"
expect_rc 0 "bundle: encode"
cmp -s "$TMP/out" "$TMP/spm.src.en" || fail "bundle: encoding is not spm_encode's with the source model"
"$TFM_BIN/tfm-tok" -m "$B" --side source "$TMP/b.en" | cmp -s - "$TMP/spm.src.en" || fail "bundle: --side source"
"$TFM_BIN/tfm-tok" encode -m "$B" --side target "$TMP/b.en" | cmp -s - "$TMP/spm.tgt.en" ||
  fail "bundle: --side target is not spm_encode's with the target model"
# Decoding German pieces: the target model gives the text back; the source
# model lacks some of them, as spm_decode with it says.
spm_decode --model "$TMP/tgt.model" <"$TMP/spm.tgt.de" >"$TMP/spm.dec.tgt"
spm_decode --model "$TMP/src.model" <"$TMP/spm.tgt.de" >"$TMP/spm.dec.src"
cmp -s "$TMP/spm.dec.tgt" "$TMP/spm.dec.src" && fail "bundle: the two models decode alike; the test sees no side"
"$TFM_BIN/tfm-tok" -d -m "$B" "$TMP/spm.tgt.de" | cmp -s - "$TMP/spm.dec.tgt" ||
  fail "bundle: decoding is not spm_decode's with the target model"
"$TFM_BIN/tfm-tok" decode --side source -m "$B" "$TMP/spm.tgt.de" | cmp -s - "$TMP/spm.dec.src" ||
  fail "bundle: decode --side source is not spm_decode's with the source model"
# Ids: each piece's line in the table (counted from 0), <unk>'s for a piece
# the table lacks; not SentencePiece's ids.
awk 'NR == FNR { id[$0] = NR - 1; next } { for (i = 1; i <= NF; ++i) printf "%s%s", (i > 1 ? " " : ""), ($i in id ? id[$i] : 1); print "" }' \
  "$TMP/table" "$TMP/spm.tgt.de" >"$TMP/table.ids.de"
"$TFM_BIN/tfm-tok" -m "$B" --side target --ids "$TMP/b.de" >"$TMP/ids.de"
cmp -s "$TMP/ids.de" "$TMP/table.ids.de" || fail "bundle: --ids are not the table's"
spm_encode --model "$TMP/tgt.model" --output_format=id <"$TMP/b.de" | cmp -s - "$TMP/ids.de" &&
  fail "bundle: --ids are SentencePiece's, not the table's"
"$TFM_BIN/tfm-tok" -d --ids -m "$B" "$TMP/ids.de" | cmp -s - "$TMP/spm.dec.tgt" || fail "bundle: decode --ids"
echo "0 1 $(($(wc -l <"$TMP/table") - 1))" | "$TFM_BIN/tfm-tok" -d --ids -m "$B" >/dev/null || fail "bundle: the last id"
echo "$(wc -l <"$TMP/table")" | "$TFM_BIN/tfm-tok" -d --ids -m "$B" >/dev/null 2>&1 && fail "bundle: an id past the table"
# In a checkpoint's tokenizer slot, the same.
"$TFM_TOOLS/tiny_checkpoint" "$TMP/opus.bin" --tokenizer "$B" || fail "tiny_checkpoint --tokenizer bundle"
"$TFM_BIN/tfm-tok" -m "$TMP/opus.bin" --side target "$TMP/b.en" | cmp -s - "$TMP/spm.tgt.en" ||
  fail "bundle in a checkpoint: --side target"
# Damaged bundles: exit 1, one line naming the file.
size=$(stat -c %s "$B")
cp "$B" "$TMP/flipped.tfmvocab"
printf '\xa5' | dd of="$TMP/flipped.tfmvocab" bs=1 seek=$((size / 2)) conv=notrunc status=none
run tfm-tok -m "$TMP/flipped.tfmvocab" "$TMP/in"
expect_rc 1 "garbled bundle"
expect_one_error_line tfm-tok "garbled bundle"
grep -q "flipped.tfmvocab is a corrupt tfm vocabulary bundle" "$TMP/err" || fail "garbled bundle: $(cat "$TMP/err")"
[ -s "$TMP/out" ] && fail "garbled bundle: output written"
head -c $((size - 100)) "$B" >"$TMP/cut.tfmvocab"
run tfm-tok -d -m "$TMP/cut.tfmvocab" "$TMP/in"
expect_rc 1 "truncated bundle"
expect_one_error_line tfm-tok "truncated bundle"
grep -q "cut.tfmvocab is a" "$TMP/err" || fail "truncated bundle: $(cat "$TMP/err")"

# Bash completion: every option of --help, and the values of --side.
completion="$TFM_SOURCE/share/completions/tfm-tok.bash"
for option in $("$TFM_BIN/tfm-tok" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
  grep -q -- "$option" "$completion" || fail "completion: $option missing"
done
# shellcheck disable=SC1090
source "$completion"
COMP_WORDS=(tfm-tok --side "")
COMP_CWORD=2
_tfm_tok
[ "${COMPREPLY[*]}" = "source target" ] || fail "completion: --side offers '${COMPREPLY[*]}'"

# Bad usage: exit 2, one error line.
run tfm-tok "$TMP/in"
expect_rc 2 "no model"
expect_one_error_line tfm-tok "no model"
grep -q "TFM_MODEL" "$TMP/err" || fail "no model: does not mention TFM_MODEL"
for bad in "--bogus" "-m $M --threads -1" "-m $M --side both" "train -o $TMP/x.model --model-type word $TMP/text.en" \
  "train $TMP/text.en" "train -o $TMP/x.model" "train -o $TMP/x.model --vocab-size 0 $TMP/text.en" \
  "train -o $TMP/x.model --character-coverage 2 $TMP/text.en"; do
  # shellcheck disable=SC2086
  run tfm-tok $bad
  expect_rc 2 "$bad"
  expect_one_error_line tfm-tok "$bad"
done

# Bad input: exit 1, one error line naming the problem, no output file.
run tfm-tok train -o "$TMP/x.model" --vocab-size 100000 "$TMP/text.en"
expect_rc 1 "vocab too large"
expect_one_error_line tfm-tok "vocab too large"
grep -q "too high" "$TMP/err" || fail "vocab too large: $(cat "$TMP/err")"
run tfm-tok train -o "$TMP/x.model" --vocab-size 300 "$TMP/text.en" "$TMP/missing.txt"
expect_rc 1 "missing training input"
grep -q "missing.txt" "$TMP/err" || fail "missing training input not named"
printf '\x1f\x8bgarbage' >"$TMP/bad.gz"
run tfm-tok train -o "$TMP/x.model" --vocab-size 300 "$TMP/bad.gz"
expect_rc 1 "corrupt gzip"
expect_one_error_line tfm-tok "corrupt gzip"
[ -e "$TMP/x.model" ] && fail "a failed train left $TMP/x.model"
ls "$TMP" | grep -q 'x.model' && fail "a failed train left a temporary file"
run tfm-tok -m "$TMP/none.model" "$TMP/in"
expect_rc 1 "missing model"
grep -q "none.model" "$TMP/err" || fail "missing model not named"
run tfm-tok -m "$TMP/in" "$TMP/in"
expect_rc 1 "garbage model"
expect_one_error_line tfm-tok "garbage model"
run tfm-tok -m "$M" "$TMP/missing.txt"
expect_rc 1 "missing input"
grep -q "missing.txt" "$TMP/err" || fail "missing input not named"
printf '5 6\n7 99999\n' >"$TMP/badids"
run tfm-tok -d --ids -m "$M" "$TMP/badids"
expect_rc 1 "id out of range"
expect_one_error_line tfm-tok "id out of range"
grep -q "badids:2" "$TMP/err" || fail "id out of range: no FILE:LINE: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/out")" -eq 1 ] || fail "id out of range: lines before it not written"
printf '5 x\n' >"$TMP/notids"
run tfm-tok -d --ids -m "$M" "$TMP/notids"
expect_rc 1 "not an id"
grep -q "notids:1" "$TMP/err" || fail "not an id: no FILE:LINE"

# shortlist: a header, the frequent pieces, a line per source piece;
# each option's effect; written atomically; bad input 1, bad usage 2.
"$TFM_BIN/tfm-tok" -m "$M" "$TMP/text.en" >"$TMP/p.en"
"$TFM_BIN/tfm-tok" -m "$M" "$TMP/text.de" >"$TMP/p.de"
run tfm-tok shortlist --help
expect_rc 0 "shortlist --help"
for option in --output --best --frequent --min-count --alignments; do
  grep -q -- "$option" "$TMP/out" || fail "shortlist --help: no $option"
  grep -qF -- "$(echo "$option" | sed 's/-/\\-/g')" "$TFM_SOURCE/man/tfm-tok.1" || fail "man tfm-tok: no $option"
done
run tfm-tok shortlist -o "$TMP/list" --best 3 --frequent 5 --min-count 2 "$TMP/p.en" "$TMP/p.de"
expect_rc 0 "shortlist"
grep -q "source pieces" "$TMP/err" || fail "shortlist: no summary on stderr"
head -n 1 "$TMP/list" | grep -q "^tfm-shortlist 1 best=3 frequent=5 min-count=2" || fail "shortlist: header $(head -n 1 "$TMP/list")"
[ "$(sed -n 2p "$TMP/list" | cut -f2 | wc -w)" -eq 5 ] || fail "shortlist --frequent 5: not 5 pieces for every sentence"
[ "$(tail -n +3 "$TMP/list" | cut -f2 | awk '{ print NF }' | sort -n | tail -n 1)" -le 3 ] || fail "shortlist --best 3: more"
[ "$(tail -n +3 "$TMP/list" | wc -l)" -gt 10 ] || fail "shortlist: few source pieces"
"$TFM_BIN/tfm-tok" shortlist -q -o "$TMP/list0" --frequent 0 --min-count 1000000 "$TMP/p.en" "$TMP/p.de"
[ "$(wc -l <"$TMP/list0")" -eq 1 ] || fail "shortlist --frequent 0 --min-count 1000000: more than the header"
"$TFM_BIN/tfm-tok" shortlist -q -o "$TMP/list1" --min-count 1 "$TMP/p.en" "$TMP/p.de"
[ "$(wc -l <"$TMP/list1")" -ge "$(wc -l <"$TMP/list")" ] || fail "shortlist --min-count 1: fewer source pieces than 2"
gzip -c "$TMP/p.de" >"$TMP/p.de.gz"
"$TFM_BIN/tfm-tok" shortlist -q -o "$TMP/listgz" --best 3 --frequent 5 "$TMP/p.en" "$TMP/p.de.gz"
cmp -s "$TMP/listgz" "$TMP/list" || fail "shortlist: gzip input differs"
head -n 5 "$TMP/p.de" >"$TMP/p.short"
run tfm-tok shortlist -o "$TMP/nolist" "$TMP/p.en" "$TMP/p.short"
expect_rc 1 "shortlist: sides of different lengths"
expect_one_error_line tfm-tok "shortlist: sides of different lengths"
[ -e "$TMP/nolist" ] && fail "shortlist: a failed build left its file"
ls "$TMP" | grep -q 'nolist' && fail "shortlist: a failed build left a temporary file"
run tfm-tok shortlist -o "$TMP/nolist" "$TMP/p.en" "$TMP/missing.txt"
expect_rc 1 "shortlist: missing input"
grep -q "missing.txt" "$TMP/err" || fail "shortlist: missing input not named"
for bad in "--best 0" "--frequent -1" "--min-count 0" "--bogus"; do
  # shellcheck disable=SC2086
  run tfm-tok shortlist -o "$TMP/nolist" $bad "$TMP/p.en" "$TMP/p.de"
  expect_rc 2 "shortlist $bad"
  expect_one_error_line tfm-tok "shortlist $bad"
done
run tfm-tok shortlist "$TMP/p.en" "$TMP/p.de"
expect_rc 2 "shortlist without -o"

# --alignments: counted by link and ranked by c(s,t) / c(s), where sentence
# co-occurrence ranks by Dice: 'a' is linked to x twice and to y once, but
# shares a sentence with y three times and with x twice. tfm-decode's
# "PIECES ||| LINKS" lines give the same list as separate files.
printf 'a b\na b\na\n' >"$TMP/al.src"
printf 'x y\nx y\ny\n' >"$TMP/al.tgt"
printf '0-0 1-1\n0-0 1-1\n0-0\n' >"$TMP/al.links"
paste -d '|' "$TMP/al.tgt" "$TMP/al.links" | sed 's/|/ ||| /' >"$TMP/al.decoded"
"$TFM_BIN/tfm-tok" shortlist -q -o "$TMP/al.dice" --frequent 0 --min-count 1 "$TMP/al.src" "$TMP/al.tgt"
[ "$(tail -n +2 "$TMP/al.dice")" = "$(printf 'a\ty x\nb\tx y')" ] || fail "shortlist: Dice ranking $(cat "$TMP/al.dice")"
"$TFM_BIN/tfm-tok" shortlist -q -o "$TMP/al.lex" --frequent 0 --min-count 1 --alignments "$TMP/al.links" \
  "$TMP/al.src" "$TMP/al.tgt" || fail "shortlist --alignments"
head -n 1 "$TMP/al.lex" | grep -q " by=links$" || fail "shortlist --alignments: header $(head -n 1 "$TMP/al.lex")"
[ "$(tail -n +2 "$TMP/al.lex")" = "$(printf 'a\tx y\nb\ty')" ] || fail "shortlist --alignments: ranking $(cat "$TMP/al.lex")"
"$TFM_BIN/tfm-tok" shortlist -q -o "$TMP/al.lex2" --frequent 0 --min-count 1 --alignments "$TMP/al.decoded" \
  "$TMP/al.src" "$TMP/al.decoded" || fail "shortlist --alignments on tfm-decode's output"
cmp -s "$TMP/al.lex" "$TMP/al.lex2" || fail "shortlist --alignments: tfm-decode's output gives another list"
"$TFM_BIN/tfm-tok" shortlist -q -o "$TMP/al.min" --frequent 0 --min-count 2 --alignments "$TMP/al.links" \
  "$TMP/al.src" "$TMP/al.tgt"
[ "$(tail -n +2 "$TMP/al.min")" = "$(printf 'a\tx\nb\ty')" ] || fail "shortlist --alignments --min-count 2: $(cat "$TMP/al.min")"
printf '0-0 1-1\n0-0 1-2\n0-0\n' >"$TMP/al.past"
printf '0-0 1-1\n0-0 1+1\n0-0\n' >"$TMP/al.notlink"
printf '0-0 1-1\n0-0 1-1\n' >"$TMP/al.short"
for bad in "al.past:2" "al.notlink:2" "al.short ends at line 2"; do
  run tfm-tok shortlist -o "$TMP/nolist" --alignments "$TMP/${bad%%[: ]*}" "$TMP/al.src" "$TMP/al.tgt"
  expect_rc 1 "shortlist --alignments ${bad%%[: ]*}"
  expect_one_error_line tfm-tok "shortlist --alignments ${bad%%[: ]*}"
  grep -q "$bad" "$TMP/err" || fail "shortlist --alignments: '$bad' not said: $(cat "$TMP/err")"
  [ -e "$TMP/nolist" ] && fail "shortlist --alignments ${bad%%[: ]*}: a failed build left its file"
done

finish
