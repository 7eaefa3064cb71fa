# A model whose right output is known: tiny_checkpoint --copy
# (tests/tools/copy_model.h) sets weights that copy the source, so that
# tfm-decode's output is its input, ended where the input ends, whatever
# the search, the precision and the batch. The CPU decoding benchmark's
# model at natural lengths is the same construction at base's shape
# (tests/bench/NOTES.md).
source "$(dirname "$0")/common.bash"
export OMP_NUM_THREADS=2

"$TFM_TOOLS/tiny_checkpoint" "$TMP/copy.bin" --copy --seed 4 vocab_size=500 layers=2 d_model=128 d_ff=256 \
  heads=4 d_k=32 d_v=32 max_positions=256 || fail "tiny_checkpoint --copy"
python3 - "$TMP/in.ids" <<'PY'
import random, sys
r = random.Random(7)
lines = [" ".join(str(r.randrange(4, 500)) for _ in range(r.choice([1, 2, 3, r.randint(1, 100)]))) for _ in range(60)]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY

for args in "--beam 4" "--beam 1" "--beam 4 --precision int8" "--beam 4 --early-stopping beam" \
  "--beam 4 --batch-size 1" "--beam 5 --threads-take batches --batch-size 7"; do
  # shellcheck disable=SC2086  # the options split into words
  "$TFM_BIN/tfm-decode" -q -m "$TMP/copy.bin" --ids $args "$TMP/in.ids" >"$TMP/out.ids" \
    2>"$TMP/err" || fail "tfm-decode $args: $(head -c 300 "$TMP/err")"
  cmp -s "$TMP/in.ids" "$TMP/out.ids" ||
    fail "tfm-decode $args: the copying model's outputs are not its inputs:" \
      "$(diff "$TMP/in.ids" "$TMP/out.ids" | head -4)"
done

# Its construction needs what it copies with: refused otherwise.
"$TFM_TOOLS/tiny_checkpoint" "$TMP/pre.bin" --copy pre_norm=true 2>"$TMP/err" &&
  fail "tiny_checkpoint --copy made a pre-norm model"
grep -q "post-norm" "$TMP/err" || fail "tiny_checkpoint --copy of a pre-norm model: $(cat "$TMP/err")"

finish
