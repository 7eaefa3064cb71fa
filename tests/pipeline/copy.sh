# pipeline: a tiny model learns to copy random sequences: tfm-tok, tfm-batch
# and tfm-train end to end, then greedy decoding of the trained checkpoint
# through tfm-decode must reproduce >= 99% of 500 unseen sequences exactly.
# It takes about 1.5 minutes on 2 idle cores; the time is printed, not
# enforced (speed targets live in tests/bench, never in tests).
set -euo pipefail
: "${TFM_BIN:?}"
# One thread: small models are many small ops, which a second thread only
# slows down when the machine is busy (ctest runs tests side by side).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
start=$SECONDS

# 20 one-letter words, 3 to 10 of them a line: each word one piece.
python3 - "$TMP" <<'PY'
import random, sys
r = random.Random(7)
words = [chr(ord("a") + i) for i in range(20)]
def lines(n):
    return "".join(" ".join(r.choice(words) for _ in range(r.randint(3, 10))) + "\n" for _ in range(n))
open(sys.argv[1] + "/train.txt", "w").write(lines(20000))
open(sys.argv[1] + "/test.txt", "w").write(lines(500))
PY
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm.model" --vocab-size 45 "$TMP/train.txt"
"$TFM_BIN/tfm-tok" -m "$TMP/spm.model" "$TMP/train.txt" >"$TMP/train.tok"
"$TFM_BIN/tfm-tok" -m "$TMP/spm.model" --ids "$TMP/test.txt" >"$TMP/test.ids"
"$TFM_BIN/tfm-batch" -q -m "$TMP/spm.model" -o "$TMP/train.tfmb" "$TMP/train.tok" "$TMP/train.tok" --max-tokens 2000

# The tiny preset twice as wide (d_model 64); no dropout: nothing to regularize.
"$TFM_BIN/tfm-train" -q -m "$TMP/spm.model" -o "$TMP/ck" "$TMP/train.tfmb" --preset tiny \
  --d-model 64 --d-ff 256 --d-k 16 --d-v 16 --dropout 0 --warmup 400 --max-steps 1000 --lr-scale 0.5 --save-every 0 \
  || fail "tfm-train"
trained=$SECONDS
"$TFM_BIN/tfm-decode" -q -m "$TMP/ck/checkpoint_last.bin" --ids --beam 1 <"$TMP/test.ids" >"$TMP/hyp.ids" \
  || fail "greedy decoding"

exact=$(python3 -c '
import sys
ref, hyp = open(sys.argv[1]).read().splitlines(), open(sys.argv[2]).read().splitlines()
assert len(ref) == len(hyp) == 500, (len(ref), len(hyp))
print(sum(r == h for r, h in zip(ref, hyp)) / len(ref))' "$TMP/test.ids" "$TMP/hyp.ids")
seconds=$((SECONDS - start))
echo "copy: exact match $exact on 500 unseen sequences; training $((trained - start)) s, all $seconds s"
python3 -c "import sys; sys.exit(float(sys.argv[1]) < 0.99)" "$exact" || fail "exact match $exact < 0.99"
