# pipeline: a small model trained for a fixed budget on Multi30k En-De must
# bring the dev perplexity under a threshold: tfm-tok, tfm-batch and
# tfm-train end to end on real data, validation on the dev set included.
#
# Budget: 250 updates of about 2,000 target tokens (two layers, d_model 64,
# d_ff 256, a 2,000-piece shared vocabulary), validated at update 250. The
# threshold is about 15% above the perplexity this budget gives on one
# thread (tests/bench/NOTES.md, "The test command's time"): room for other
# BLAS kernels and thread counts, not for a regression (an untrained model
# is near the vocabulary's size).
set -euo pipefail
: "${TFM_BIN:?}" "${TFM_SOURCE:?}"
readonly THRESHOLD=63
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # see copy.sh
DATA="$TFM_SOURCE/../shared/data/multi30k/task1/raw"
[ -f "$DATA/train.en.gz" ] || { echo "FAIL: Multi30k is missing ($DATA; see ../shared/data/MANIFEST.md)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for split in train val; do
  for lang in en de; do zcat "$DATA/$split.$lang.gz" >"$TMP/$split.$lang"; done
done
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm.model" --vocab-size 2000 "$TMP/train.en" "$TMP/train.de"
for split in train val; do
  for lang in en de; do "$TFM_BIN/tfm-tok" -m "$TMP/spm.model" "$TMP/$split.$lang" >"$TMP/$split.tok.$lang"; done
  "$TFM_BIN/tfm-batch" -q -m "$TMP/spm.model" -o "$TMP/$split.tfmb" "$TMP/$split.tok.en" "$TMP/$split.tok.de" \
    --max-tokens 2000
done

"$TFM_BIN/tfm-train" -q -m "$TMP/spm.model" -o "$TMP/ck" "$TMP/train.tfmb" --dev "$TMP/val.tfmb" \
  --preset tiny --d-model 64 --d-ff 256 --d-k 16 --d-v 16 --warmup 200 --max-steps 250 \
  --valid-every 250 --save-every 0 --log "$TMP/log" || fail "tfm-train"
[ -s "$TMP/ck/checkpoint_best.bin" ] || fail "no best checkpoint"
ppl=$(python3 -c '
import json, sys
valid = [r for r in map(json.loads, open(sys.argv[1])) if r["event"] == "valid"]
assert [r["step"] for r in valid] == [250], valid
print(valid[-1]["ppl"])' "$TMP/log")
echo "multi30k: dev perplexity $ppl after 250 updates (threshold $THRESHOLD)"
python3 -c "import sys; sys.exit(not float(sys.argv[1]) < float(sys.argv[2]))" "$ppl" "$THRESHOLD" \
  || fail "dev perplexity $ppl is not under $THRESHOLD"
