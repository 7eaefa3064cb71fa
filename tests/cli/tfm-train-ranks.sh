# tfm-train over several processes (mpirun, MPMD: each rank its own
# command line): ranks that disagree on the setup, or where one cannot
# start, refuse together: rank 0 says why in one line naming the rank and
# the difference, every process exits non-zero, no checkpoint is written.
# The options of several processes (--dist-timeout, --bucket-mb) are in
# --help. Skipped (77) without MPI.
source "$(dirname "$0")/common.bash"
export OMP_NUM_THREADS=1
command -v mpirun >/dev/null || { echo "skipped: no mpirun"; exit 77; }
"$TFM_BIN/tfm-info" | grep -q "^mpi: *none" && { echo "skipped: tfm-train built without MPI"; exit 77; }
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)

python3 - "$TMP" <<'PY'
import random, sys
r = random.Random(2)
words = "a b c d e f g h".split()
lines = [" ".join(r.choice(words) for _ in range(r.randint(2, 6))) for _ in range(300)]
open(sys.argv[1] + "/text", "w").write("\n".join(lines) + "\n")
PY
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm.model" --vocab-size 20 "$TMP/text" || { echo "FAIL: tfm-tok train" >&2; exit 1; }
"$TFM_BIN/tfm-tok" -m "$TMP/spm.model" "$TMP/text" >"$TMP/tok"
"$TFM_BIN/tfm-batch" -q -m "$TMP/spm.model" -o "$TMP/train.tfmb" "$TMP/tok" "$TMP/tok" --max-tokens 200
head -100 "$TMP/tok" >"$TMP/short.tok"
"$TFM_BIN/tfm-batch" -q -m "$TMP/spm.model" -o "$TMP/other.tfmb" "$TMP/short.tok" "$TMP/short.tok" --max-tokens 200

T=("$TFM_BIN/tfm-train" -m "$TMP/spm.model" --preset tiny --max-steps 2 --save-every 0 --dist-timeout 30s)
# mpmd DESCRIPTION OUT RANK0-ARGS -- RANK1-ARGS: both ranks, each its own arguments.
mpmd() {
  local what=$1 out=$2
  shift 2
  local a=() b=()
  while [ "$1" != -- ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  rm -rf "$out"
  "${MPIRUN[@]}" -np 1 "${T[@]}" -o "$out" "${a[@]}" : -np 1 "${T[@]}" -o "$out" "${b[@]}" \
    </dev/null >"$TMP/out" 2>"$TMP/err"
  rc=$?
  [ "$rc" -ne 0 ] || fail "$what: exit 0"
  [ "$(grep -c '^tfm-train: error: ' "$TMP/err")" -eq 1 ] \
    || fail "$what: expected one 'tfm-train: error:' line, got: $(cat "$TMP/err")"
  grep -q "tfm-train (rank 1): error" "$TMP/err" && fail "$what: rank 1 spoke too: $(cat "$TMP/err")"
  ls "$out"/checkpoint_* >/dev/null 2>&1 && fail "$what: a checkpoint was written"
}

mpmd "another --lr-scale on rank 1" "$TMP/run" "$TMP/train.tfmb" -- "$TMP/train.tfmb" --lr-scale 2
grep -q "rank 1 differs from rank 0: it has lr-scale = 2 where rank 0 has lr-scale = 1" "$TMP/err" \
  || fail "the difference is not named: $(cat "$TMP/err")"

mpmd "another model on rank 1" "$TMP/run" "$TMP/train.tfmb" -- "$TMP/train.tfmb" --d-ff 96
grep -q "rank 1 differs from rank 0: it has d-ff = 96" "$TMP/err" || fail "d-ff: $(cat "$TMP/err")"

mpmd "another corpus on rank 1" "$TMP/run" "$TMP/train.tfmb" -- "$TMP/other.tfmb"
grep -q "rank 1 differs from rank 0: it has corpus = " "$TMP/err" || fail "corpus: $(cat "$TMP/err")"

mpmd "a missing corpus on rank 1" "$TMP/run" "$TMP/train.tfmb" -- "$TMP/missing.tfmb"
grep -q "rank 1: .*missing.tfmb" "$TMP/err" || fail "the missing corpus is not named: $(cat "$TMP/err")"

# The same command everywhere trains, and only rank 0 writes.
"${MPIRUN[@]}" -np 2 "${T[@]}" -o "$TMP/ok" "$TMP/train.tfmb" </dev/null >"$TMP/out" 2>"$TMP/err"
rc=$?
expect_rc 0 "two ranks, one command"
[ -f "$TMP/ok/checkpoint_2.bin" ] || fail "two ranks: no checkpoint_2.bin"
grep -q "rank 1" "$TMP/err" && fail "two ranks: rank 1 spoke: $(cat "$TMP/err")"

# --device cuda:N names one GPU for all the ranks (CPU build: no GPU either way).
run tfm-train --help
for option in --dist-timeout --bucket-mb; do
  grep -q -- "$option" "$TMP/out" || fail "--help lacks $option"
done
finish
