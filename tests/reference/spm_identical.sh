# spm_identical: tfm-tok against Debian's SentencePiece tools (spm_encode,
# spm_decode) with the same model: byte-identical pieces, ids and text.
# Usage: spm_identical.sh TFM_TOK. A missing spm_* tool or data set fails.
set -u
tok=$1
DATA=${TFM_DATA:-/work/shared/data}/multi30k/task1/raw
for tool in spm_encode spm_decode; do
  command -v $tool >/dev/null || { echo "FAIL: $tool not found (Debian package sentencepiece)" >&2; exit 1; }
done
[ -f "$DATA/train.en.gz" ] || { echo "FAIL: no Multi30k at $DATA" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

zcat "$DATA/train.en.gz" | head -n 5000 >"$TMP/train.en"
zcat "$DATA/train.de.gz" | head -n 5000 >"$TMP/train.de"
"$tok" train -q -o "$TMP/m.model" --vocab-size 8000 "$TMP/train.en" "$TMP/train.de" \
  || { echo "FAIL: tfm-tok train" >&2; exit 1; }
# Edge cases: empty lines, runs of spaces, tabs, CR, invalid UTF-8, no final newline.
printf 'hello  world\n\n\xff\xfe bad \xc3\n  lead and trail  \ttab\r\nlast line' >"$TMP/edge"

for side in en de edge; do
  if [ "$side" = edge ]; then in="$TMP/edge"; else in="$TMP/val.$side"; zcat "$DATA/val.$side.gz" >"$in"; fi
  for format in piece id; do
    flag=; [ "$format" = id ] && flag=--ids
    "$tok" -m "$TMP/m.model" $flag "$in" >"$TMP/tfm.$format" || fail "$side: tfm-tok encode $format"
    spm_encode --model "$TMP/m.model" --output_format=$format <"$in" >"$TMP/spm.$format"
    cmp "$TMP/tfm.$format" "$TMP/spm.$format" || fail "$side: encode --output_format=$format differs"
    "$tok" -d -m "$TMP/m.model" $flag "$TMP/spm.$format" >"$TMP/tfm.text" || fail "$side: tfm-tok decode $format"
    spm_decode --model "$TMP/m.model" --input_format=$format <"$TMP/spm.$format" >"$TMP/spm.text"
    cmp "$TMP/tfm.text" "$TMP/spm.text" || fail "$side: decode --input_format=$format differs"
    # decode(encode(x)) with tfm-tok alone equals spm's round trip
    "$tok" -m "$TMP/m.model" $flag "$in" | "$tok" -d -m "$TMP/m.model" $flag >"$TMP/tfm.round"
    cmp "$TMP/tfm.round" "$TMP/spm.text" || fail "$side: tfm-tok round trip ($format) differs from spm's"
  done
done

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
