# pipeline: scripts/gpu-bench's dry run (--device cpu --small), so that the
# second command of a GPU session cannot rot before a GPU arrives: the same
# steps at toy sizes on this build (the training benchmark next to PyTorch,
# the decoding benchmark next to PyTorch's beam search on 20 sentences of
# newstest2014, multi30k-ende end to end with 10 updates), ending with its
# table. Every step must be ok or slow (under a speed target: a result),
# each benchmark's note must carry both tokens/s, and the multi30k row a BLEU.
# Needs Debian's python3-torch (/usr/bin/python3) like tests/bench.
source "$(dirname "$0")/common.bash"
require_shared multi30k/task1/raw/train.en.gz
require_shared wmt14/newstest2014-full/newstest2014.en-de.en
BUILD=$(cd "$TFM_BIN/.." && pwd)
"$TFM_SOURCE/scripts/gpu-bench" --device cpu --small --build "$BUILD" --out "$TMP/out" --jobs 2 \
  --data "$SHARED" >"$TMP/stdout" 2>&1 || { cat "$TMP/stdout" >&2; fail "gpu-bench --device cpu --small failed"; }
cat "$TMP/out/table.txt"
[ "$(tail -n 1 "$TMP/stdout")" = "logs: $TMP/out" ] || fail "the output does not end with the table"
row() { awk -v s="$1" '$1 == s' "$TMP/out/table.txt"; }
for s in deps configure build train-tiny decode data-parallel multi30k; do
  r=$(row "$s")
  [ -n "$r" ] || fail "no row for step $s in the table"
  case $(awk '{ print $2 }' <<<"$r") in ok|slow) ;; *) fail "step $s: $r" ;; esac
done
num='[0-9][0-9.]*'
row train-tiny | grep -q "tfm $num tok/s (MFU -, $num GiB) | torch $num tok/s (MFU -, -) | ${num}x" \
  || fail "train-tiny: not both tokens/s and the ratio: $(row train-tiny)"
[ "$(awk -F'\t' 'NR == 2 { print $1, $3, ($11 > 0), ($14 > 0) }' "$TMP/out/train-tiny.tsv")" = "tiny fp32 1 1" ] \
  || fail "train-tiny.tsv: $(cat "$TMP/out/train-tiny.tsv")"
row decode | grep -q "20 sentences: tfm $num tok/s | torch $num tok/s | ${num}x" \
  || fail "decode: not both tokens/s and the ratio: $(row decode)"
row data-parallel | grep -q "tiny: sum $num ms, $num% hidden" || fail "data-parallel: $(row data-parallel)"
row multi30k | grep -q "BLEU $num on test2016; 10 updates in .* on cpu" || fail "multi30k: $(row multi30k)"
grep -q '^ *BLEU|nrefs:1|' "$TMP/out/multi30k-results.txt" || fail "no BLEU line in multi30k-results.txt"
echo "gpu-bench: the dry run ends with its table, every step ok or slow"
