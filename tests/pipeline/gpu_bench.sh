# pipeline: scripts/gpu-bench's dry run (--device cpu --small), so that the
# second command on a GPU machine cannot rot on machines without one: the same
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
row train-tiny | grep -q "tfm $num tok/s (MFU - of spec, - of GEMM peak -; $num GiB) | torch $num tok/s (-) ${num}x | strong torch $num tok/s (-, [a-z]* attention, SDPA [a-z]*) ${num}x" \
  || fail "train-tiny: not both tokens/s and the ratio: $(row train-tiny)"
[ "$(awk -F'\t' 'NR == 2 { print $1, $3, ($11 > 0), ($14 > 0) }' "$TMP/out/train-tiny.tsv")" = "tiny fp32 1 1" ] \
  || fail "train-tiny.tsv: $(cat "$TMP/out/train-tiny.tsv")"
row decode | grep -q "20 sentences: tfm $num tok/s | torch $num tok/s | ${num}x" \
  || fail "decode: not both tokens/s and the ratio: $(row decode)"
row data-parallel | grep -q "tiny: sum $num ms, $num% hidden" || fail "data-parallel: $(row data-parallel)"
row multi30k | grep -q "BLEU $num on test2016; 10 updates in .* on cpu" || fail "multi30k: $(row multi30k)"
grep -q '^ *BLEU|nrefs:1|' "$TMP/out/multi30k-results.txt" || fail "no BLEU line in multi30k-results.txt"
# --only runs the steps named and no other, --no-reference leaves PyTorch
# out (a dash where its numbers were), a kernels-* step without a GPU is
# skipped and says why; an unknown step is a usage error (one line, 2).
# base-model (run only when named) trains a model, scores it on
# newstest2014 and leaves model.bin in pieces that join back to it;
# decode-copy (the same) decodes with a copying model, which gives back
# its source.
"$TFM_SOURCE/scripts/gpu-bench" --device cpu --small --build "$BUILD" --out "$TMP/only" --jobs 2 \
  --data "$SHARED" --only decode,kernels-base,base-model,decode-copy --no-reference \
  --base-model-dir "$TMP/base-model" >"$TMP/only.txt" 2>&1 ||
  { cat "$TMP/only.txt" >&2; fail "gpu-bench --only decode,kernels-base,base-model,decode-copy --no-reference failed"; }
[ "$(awk 'NR > 3 && $1 != "logs:" { print $1 }' "$TMP/only/table.txt" | tr '\n' ' ')" = \
  "deps configure build decode decode-copy kernels-base base-model " ] \
  || fail "--only decode,kernels-base,base-model,decode-copy: other rows: $(cat "$TMP/only/table.txt")"
awk '$1 == "decode-copy"' "$TMP/only/table.txt" |
  grep -q "ok .*20 sentences at natural lengths: tfm $num tok/s; tfm's BLEU against the source 100.00 (copying)" \
  || fail "decode-copy: $(awk '$1 == "decode-copy"' "$TMP/only/table.txt")"
awk '$1 == "base-model"' "$TMP/only/table.txt" |
  grep -q "ok .*BLEU $num on 20 lines of newstest2014 ($num words an output, the references' $num); 10 updates; model.bin $num bytes in 1 pieces in $TMP/base-model" \
  || fail "base-model: $(awk '$1 == "base-model"' "$TMP/only/table.txt")"
(cd "$TMP/base-model" && cat model.bin.?? >joined.bin && sed 's/model\.bin$/joined.bin/' model.bin.sha256 | sha256sum --quiet -c) \
  || fail "base-model: its pieces do not join back into model.bin"
awk '$1 == "decode"' "$TMP/only/table.txt" | grep -q "20 sentences: tfm $num tok/s | torch - tok/s | -x" \
  || fail "--no-reference: $(awk '$1 == "decode"' "$TMP/only/table.txt")"
awk '$1 == "kernels-base"' "$TMP/only/table.txt" | grep -q "skipped .*not run: --device cpu" \
  || fail "kernels-base on the cpu: $(awk '$1 == "kernels-base"' "$TMP/only/table.txt")"
set +e
"$TFM_SOURCE/scripts/gpu-bench" --device cpu --out "$TMP/bad" --only decode,bogus 2>"$TMP/err"
rc=$?
set -e
[ $rc = 2 ] || fail "gpu-bench --only decode,bogus: exit status $rc, not 2"
grep -q "^gpu-bench: error: --only: no step 'bogus'" "$TMP/err" || fail "no usage error: $(cat "$TMP/err")"

# scripts/ncu-top groups ncu's raw CSV by kernel (tfm's namespaces and the
# argument list dropped), largest first, per unit; a bad file is one line, 1.
cat >"$TMP/ncu.csv" <<'CSV'
==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","gpu__time_duration.sum"
"","","","","","","","usecond"
"0","1","train","h","void tfm::ops::cuda::(anonymous namespace)::add_kernel<float>(const T1 *, int)","1","7","1,000"
"1","1","train","h","sm90_gemm_bf16_kernel","1","7","4,000"
"2","1","train","h","void tfm::ops::cuda::(anonymous namespace)::add_kernel<float>(const T1 *, int)","1","7","2,000"
CSV
"$TFM_SOURCE/scripts/ncu-top" "$TMP/ncu.csv" --per 2 --unit step >"$TMP/top.txt"
[ "$(awk 'NR > 1 { print $1, $2, $3, $NF }' "$TMP/top.txt" | tr '\n' ';')" = \
  "57.1% 2.000 0.5 sm90_gemm_bf16_kernel;42.9% 1.500 1.0 add_kernel<float>;100.0% 3.500 1.5 kernels;" ] \
  || fail "ncu-top: $(cat "$TMP/top.txt")"
set +e
"$TFM_SOURCE/scripts/ncu-top" "$TMP/none.csv" 2>"$TMP/err"
rc=$?
set -e
[ $rc = 1 ] && [ "$(wc -l <"$TMP/err")" = 1 ] && grep -q "^ncu-top: error: .*none.csv" "$TMP/err" \
  || fail "ncu-top on a missing file: status $rc, $(cat "$TMP/err")"
echo "gpu-bench: the dry run ends with its table, every step ok or slow"
