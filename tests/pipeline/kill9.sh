# pipeline: kill -9 at random moments of a training that writes a
# checkpoint every update (issue 19). After each of 20 kills every
# checkpoint left in the run directory loads whole, and the next start
# resumes (or, before the first checkpoint, starts again); temporary files
# of the killed writers are gone at the end; and the run, finished, holds
# bit for bit the parameters, Adam moments and training state of the same
# run never interrupted.
source "$(dirname "$0")/common.bash"
PYTHON=/usr/bin/python3  # numpy and zstandard for the checkpoint reader (Debian's)
[ -x "$PYTHON" ] || PYTHON=python3
KILLS=${KILLS:-20}
STEPS=${STEPS:-300}

python3 - "$TMP" <<'PY'
import random, sys
r = random.Random(5)
words = "a b c d e f g h i j k l".split()
src = [[r.choice(words) for _ in range(r.randint(2, 9))] for _ in range(600)]
open(sys.argv[1] + "/src", "w").write("".join(" ".join(s) + "\n" for s in src))
open(sys.argv[1] + "/tgt", "w").write("".join(" ".join(reversed(s)) + "\n" for s in src))
PY
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm.model" --vocab-size 29 "$TMP/src"
for side in src tgt; do "$TFM_BIN/tfm-tok" -m "$TMP/spm.model" "$TMP/$side" >"$TMP/tok.$side"; done
"$TFM_BIN/tfm-batch" -q -m "$TMP/spm.model" -o "$TMP/train.tfmb" "$TMP/tok.src" "$TMP/tok.tgt" --max-tokens 300
ARGS=("$TMP/train.tfmb" --preset tiny --warmup 20 --max-steps "$STEPS" --save-every 0 --save-every-steps 1
      --keep-last 0 --log-every 1000)

start=$SECONDS
"$TFM_BIN/tfm-train" -q -m "$TMP/spm.model" -o "$TMP/a" "${ARGS[@]}" || fail "the uninterrupted run"
per_run=$((SECONDS - start))

# Every checkpoint file in the directory reads whole and as a model (the
# averaging of one reads every byte under its checksums).
check_all() {
  local f
  for f in "$TMP"/b/checkpoint_*.bin; do
    [ -e "$f" ] || continue
    "$TFM_BIN/tfm-avgckpt" -q -o "$TMP/check.bin" "$f" 2>"$TMP/check.err" \
      || fail "after kill $1: $f does not load: $(cat "$TMP/check.err")"
  done
}

RANDOM=19
killed_at=()
for k in $(seq "$KILLS"); do
  if [ -e "$TMP/b/checkpoint_last.bin" ]; then
    "$TFM_BIN/tfm-train" -q --resume "$TMP/b" "${ARGS[@]}" 2>>"$TMP/b.err" &
  else
    "$TFM_BIN/tfm-train" -q -m "$TMP/spm.model" -o "$TMP/b" "${ARGS[@]}" 2>>"$TMP/b.err" &
  fi
  pid=$!
  # 0.2 to 1.2 s: inside the setup, an update or a checkpoint's write.
  sleep "0.$((RANDOM % 10 + 2))"
  [ $((RANDOM % 5)) -eq 0 ] && sleep 0.5
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
  step=$(ls "$TMP/b" 2>/dev/null | sed -n 's/^checkpoint_\([0-9]*\)\.bin$/\1/p' | sort -n | tail -1)
  killed_at+=("${step:-none}")
  check_all "$k"
done
tmps=$(ls "$TMP/b" | grep -c '\.tmp\.' || true)
echo "kill9: $KILLS kills, the newest checkpoint after each: ${killed_at[*]}; $tmps temporary files left by them"

"$TFM_BIN/tfm-train" -q --resume "$TMP/b" "${ARGS[@]}" 2>>"$TMP/b.err" || fail "the last resume: $(tail -3 "$TMP/b.err")"
check_all end
if ls "$TMP/b" | grep -q '\.tmp\.'; then fail "temporary files left: $(ls "$TMP/b" | grep '\.tmp\.')"; fi
grep "error" "$TMP/b.err" && fail "a start said an error"

PYTHONPATH="$TFM_SOURCE/tests/reference" "$PYTHON" - "$TMP" "$STEPS" <<'PY' || fail "the killed run differs from the uninterrupted one"
import sys
import tfm_checkpoint
tmp, steps = sys.argv[1], int(sys.argv[2])
bad = []
for name in (f"checkpoint_{steps}.bin", "checkpoint_last.bin"):
    x, y = tfm_checkpoint.read(f"{tmp}/a/{name}"), tfm_checkpoint.read(f"{tmp}/b/{name}")
    for t in x.tensors:
        if x.tensors[t].array.tobytes() != y.tensors[t].array.tobytes():
            bad.append(f"{name}: tensor {t} differs")
    for s in ("adam.m", "adam.v"):
        if x.sections[s] != y.sections[s]:
            bad.append(f"{name}: section {s} differs")
    state = lambda c: [l for l in c.sections["training_state"].decode().splitlines() if not l.startswith("elapsed")]
    if state(x) != state(y):
        bad.append(f"{name}: training state differs: {set(state(x)) ^ set(state(y))}")
if bad:
    print("\n".join(bad[:20]), file=sys.stderr)
    sys.exit(1)
print(f"kill9: update {steps}: parameters, moments and state identical to the uninterrupted run")
PY
echo "kill9: done in $((SECONDS - start)) s (the uninterrupted run: $per_run s)"
