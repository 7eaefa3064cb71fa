# pipeline: kill -9 at random moments of a training on two weighted
# corpora that writes a checkpoint every update (issue 19). After each of up to 20 kills every
# checkpoint left in the run directory loads whole, and the next start
# resumes (or, before the first checkpoint, starts again); temporary files
# of the killed writers are gone at the end; and the run, finished, holds
# bit for bit the parameters, Adam moments and training state of the same
# run never interrupted. The moments of the kills scale with the time of
# the uninterrupted run, so that a fast machine is killed as often as a
# slow one; a start that finishes the run before its kill ends the kills.
source "$(dirname "$0")/common.bash"
PYTHON=/usr/bin/python3  # numpy and zstandard for the checkpoint reader (Debian's)
[ -x "$PYTHON" ] || PYTHON=python3
KILLS=${KILLS:-20}
STEPS=${STEPS:-300}

# Two corpora, the second upsampled by 1.5 (issue 42): each epoch's
# seeded share of its batches must come out the same after every kill.
reverse_words 5 300 train=600 extra=200
ARGS=("$TMP/train.tfmb" "$TMP/extra.tfmb" --weights 1 1.5 --preset tiny --warmup 20 --max-steps "$STEPS" --save-every 0 --save-every-steps 1
      --keep-last 0 --log-every 1000)

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
start=$SECONDS
run_ms=$(now_ms)
"$TFM_BIN/tfm-train" -q -m "$TMP/spm.model" -o "$TMP/a" "${ARGS[@]}" || fail "the uninterrupted run"
run_ms=$(( $(now_ms) - run_ms ))
per_run=$((SECONDS - start))
# A kill comes 50 ms plus up to a KILLSth of the run after its start: on
# average the KILLS kills go through about half of the run.
window_ms=$(( run_ms / KILLS + 1 ))

# Every checkpoint file in the directory reads whole and as a model (the
# averaging of one reads every byte under its checksums). A file read whole
# after an earlier kill and not written since (the same inode, size and
# modification time) is not read again.
declare -A checked=()
check_all() {
  local f id
  while IFS= read -r f; do
    id=$(stat -c '%i %s %.9Y' "$f")
    [ "${checked[$f]:-}" = "$id" ] && continue
    "$TFM_BIN/tfm-avgckpt" -q -o "$TMP/check.bin" "$f" 2>"$TMP/check.err" \
      || fail "after kill $1: $f does not load: $(cat "$TMP/check.err")"
    checked[$f]=$id
  done < <(find "$TMP/b" -maxdepth 1 -name 'checkpoint_*.bin' 2>/dev/null | sort)
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
  # Inside the setup, an update or a checkpoint's write.
  ms=$(( 50 + (RANDOM * 32768 + RANDOM) % window_ms ))
  sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
  kill -9 "$pid" 2>/dev/null || true
  status=0
  wait "$pid" 2>/dev/null || status=$?
  # (No run directory yet when the kill came before the start made it: on
  # a busy machine the first kill can.)
  step=$({ find "$TMP/b" -maxdepth 1 -name 'checkpoint_*.bin' -printf '%f\n' 2>/dev/null || true; } \
           | sed -n 's/^checkpoint_\([0-9]*\)\.bin$/\1/p' | sort -n | tail -1)
  check_all "$k"
  if [ "$status" -ne 137 ]; then  # it ended before its kill: finished, or failed
    [ "$status" -eq 0 ] && [ "$step" = "$STEPS" ] \
      || fail "start $k ended by itself with exit code $status at checkpoint ${step:-none}: $(tail -3 "$TMP/b.err")"
    break
  fi
  killed_at+=("${step:-none}")
done
kills=${#killed_at[@]}
# Too few kills could come from an uninterrupted run slowed by a neighbour
# (its time sets the kills' window): a quarter of them still tests.
[ "$kills" -ge $((KILLS / 4)) ] || fail "only $kills of $KILLS starts were killed before the run finished"
tmps=$(find "$TMP/b" -maxdepth 1 -name '*.tmp.*' | wc -l)
echo "kill9: $kills kills, the newest checkpoint after each: ${killed_at[*]}; $tmps temporary files left by them"

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
