# Data for the cli tests of issue 19 (sourced after common.bash; not a test
# itself): the copy task of tfm-train.sh, made in $TMP in a few seconds.
#   $M  spm.model (29 pieces)      $T  train.tfmb      $D  dev.tfmb
#   $TMP/train.tok, $TMP/text      $FAST  tfm-train's options for a tiny run
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
python3 - "$TMP" <<'PY'
import random, sys
r = random.Random(1)
words = "a b c d e f g h i j k l".split()
lines = [" ".join(r.choice(words) for _ in range(r.randint(2, 7))) for _ in range(300)]
open(sys.argv[1] + "/text", "w").write("\n".join(lines) + "\n")
PY
setup_failed() { echo "FAIL: setting up the data: $*" >&2; exit 1; }
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm.model" --vocab-size 29 "$TMP/text" || setup_failed "tfm-tok train"
"$TFM_BIN/tfm-tok" -m "$TMP/spm.model" "$TMP/text" >"$TMP/tok" || setup_failed "tfm-tok"
head -250 "$TMP/tok" >"$TMP/train.tok"
tail -50 "$TMP/tok" >"$TMP/dev.tok"
"$TFM_BIN/tfm-batch" -q -m "$TMP/spm.model" -o "$TMP/train.tfmb" "$TMP/train.tok" "$TMP/train.tok" \
  --max-tokens 200 || setup_failed "tfm-batch train"
"$TFM_BIN/tfm-batch" -q -m "$TMP/spm.model" -o "$TMP/dev.tfmb" "$TMP/dev.tok" "$TMP/dev.tok" \
  --max-tokens 200 || setup_failed "tfm-batch dev"
M="$TMP/spm.model"
T="$TMP/train.tfmb"
D="$TMP/dev.tfmb"
FAST="--preset tiny --warmup 10 --save-every 0"
FORGE="python3 $TFM_SOURCE/tests/cli/forge.py"

# Whether the programs were built with AddressSanitizer (it reserves
# terabytes of address space: no ulimit -v test can run under it).
built_with_asan() { ldd "$TFM_BIN/tfm-train" 2>/dev/null | grep -q libasan; }

# A snapshot of a directory's files and their contents, to compare.
snapshot() { (cd "$1" && find . -type f ! -name run.lock | sort | xargs -r md5sum); }
