# pipeline: tfm-train over two processes under mpirun (libcore/train/data_parallel.h).
#  - two ranks train as one process with --update-freq 2 on the same data,
#    dropout on: the same losses and parameters up to the order of the sums
#    (measured: a relative difference of about 1e-7 after 10 updates; the
#    test allows 1e-5);
#  - a two-rank run stopped by SIGTERM resumes on two ranks (and matches the
#    run never stopped, to the same tolerance) and on one (which says what changed, and carries
#    the global data cursor on);
#  - a rank killed (SIGKILL) or stopped (SIGSTOP: it hangs) makes the job
#    end within 60 s with a line naming the rank, never hang.
# Skipped (77) in a build without MPI or where mpirun is missing.
source "$(dirname "$0")/common.bash"
PYTHON=/usr/bin/python3  # numpy and zstandard for the checkpoint reader (Debian's)
[ -x "$PYTHON" ] || PYTHON=python3

command -v mpirun >/dev/null || { echo "skipped: no mpirun"; exit 77; }
"$TFM_BIN/tfm-info" | grep -q "^mpi: *none" && { echo "skipped: tfm-train built without MPI"; exit 77; }
MPIRUN=(mpirun --oversubscribe -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)

reverse_words 5 200 train=1200 dev=100
COMMON=("$TMP/train.tfmb" -m "$TMP/spm.model" --dev "$TMP/dev.tfmb" --preset tiny --warmup 10 --valid-every 5
        --log-every 1 --save-every 0 --seed 3)

# compare A B TOLERANCE [exact-records]: the train and valid records of the
# two logs, and the parameters of the two runs' last checkpoints.
compare() {
  PYTHONPATH="$TFM_SOURCE/tests/reference" "$PYTHON" - "$@" <<'PY'
import glob, json, os, sys
import numpy as np
import tfm_checkpoint
a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
def records(run):
    out = {}
    for r in map(json.loads, open(run + ".log")):
        if r["event"] in ("train", "valid"):
            out[(r["event"], r["step"])] = (r["loss"], r["nll"])
    return out
ra, rb = records(a), records(b)
assert ra.keys() == rb.keys(), f"different records: {sorted(set(ra) ^ set(rb))}"
for k in ra:
    for x, y in zip(ra[k], rb[k]):
        assert abs(x - y) <= tol * abs(x), f"{k}: {x} vs {y}"
def last(run):
    return max(glob.glob(run + "/checkpoint_[0-9]*.bin"), key=lambda p: int(p.rsplit("_", 1)[1][:-4]))
ca, cb = tfm_checkpoint.read(last(a)), tfm_checkpoint.read(last(b))
assert os.path.basename(last(a)) == os.path.basename(last(b))
worst = 0.0
for name, t in ca.tensors.items():
    # The keys' bias moves no softmax (its gradient is 0 but for rounding),
    # and Adam scales that rounding noise up to full steps: nothing to compare.
    if name.endswith("k_proj.bias"):
        continue
    x, y = t.array.astype(np.float64), cb.tensors[name].array.astype(np.float64)
    worst = max(worst, float(np.linalg.norm(x - y) / max(np.linalg.norm(x), 1e-30)))
print(f"{os.path.basename(a)} vs {os.path.basename(b)}: {len(ra)} records, parameters' worst relative difference {worst:.2e}")
assert worst <= tol, f"parameters differ by {worst:.2e}, over {tol}"
PY
}

# 1. Two ranks = one process with --update-freq 2.
"$TFM_BIN/tfm-train" -q -o "$TMP/one" --log "$TMP/one.log" "${COMMON[@]}" --update-freq 2 --max-steps 10 \
  || fail "one process, --update-freq 2"
"${MPIRUN[@]}" -np 2 "$TFM_BIN/tfm-train" -o "$TMP/two" --log "$TMP/two.log" "${COMMON[@]}" --max-steps 10 \
  2>"$TMP/two.err" || fail "mpirun -np 2: $(cat "$TMP/two.err")"
grep -q "2 ranks x 1 batch an update" "$TMP/two.err" || fail "no effective batch line: $(cat "$TMP/two.err")"
[ ! -e "$TMP/two.log.1" ] && [ "$(grep -c '"event":"start"' "$TMP/two.log")" = 1 ] || fail "more than rank 0 logs"
compare "$TMP/one" "$TMP/two" 1e-5 || fail "two ranks do not train as one process with --update-freq 2"

# 2. SIGTERM, then resume on two ranks and on one (long enough a run for
# the signal to come inside it: about 4 s on one thread a rank).
STEPS=150
"${MPIRUN[@]}" -np 2 "$TFM_BIN/tfm-train" -o "$TMP/full" --log "$TMP/full.log" "${COMMON[@]}" --max-steps $STEPS \
  2>"$TMP/full.err" || fail "the uninterrupted two-rank run: $(cat "$TMP/full.err")"
"${MPIRUN[@]}" -np 2 "$TFM_BIN/tfm-train" -o "$TMP/cut" --log "$TMP/cut.log" "${COMMON[@]}" --max-steps $STEPS \
  2>"$TMP/cut.err" &
pid=$!
for _ in $(seq 1200); do
  n=$(grep -c '"event":"train"' "$TMP/cut.log" 2>/dev/null) || n=0
  [ "$n" -ge 8 ] && break
  sleep 0.05
done
# mpirun forwards the signal to every rank (and exits 1 itself, having been
# signalled, however its ranks end): the ranks agree to stop, rank 0 writes.
kill -TERM "$pid"
wait "$pid" || true
grep -q "interrupted by Terminated after update" "$TMP/cut.err" || fail "SIGTERM: $(cat "$TMP/cut.err")"
at=$(python3 -c 'import json, sys; print([r for r in map(json.loads, open(sys.argv[1])) if r["event"] == "stop"][-1]["step"])' "$TMP/cut.log")
[ "$at" -ge 8 ] && [ "$at" -lt $STEPS ] || fail "the interruption came at update $at, not inside the run"
cp -r "$TMP/cut" "$TMP/cut1"
cp "$TMP/cut.log" "$TMP/cut1.log"
"${MPIRUN[@]}" -np 2 "$TFM_BIN/tfm-train" -q --resume "$TMP/cut" --log "$TMP/cut.log" "${COMMON[@]}" --max-steps $STEPS \
  || fail "resuming on two ranks"
compare "$TMP/full" "$TMP/cut" 1e-5 || fail "the run resumed on two ranks differs from the one never stopped"
"$TFM_BIN/tfm-train" --resume "$TMP/cut1" --log "$TMP/cut1.log" "${COMMON[@]}" --max-steps $STEPS 2>"$TMP/cut1.err" \
  || fail "resuming on one rank: $(cat "$TMP/cut1.err")"
grep -q "the run had 2 ranks, this one has 1: an update takes 1 x 1 batches now, 2 x 1 before" "$TMP/cut1.err" \
  || fail "resuming on one rank does not say what changed: $(cat "$TMP/cut1.err")"
PYTHONPATH="$TFM_SOURCE/tests/reference" "$PYTHON" - "$TMP/cut1/checkpoint_$STEPS.bin" "$at" "$STEPS" <<'PY' || fail "the data cursor"
import sys, tfm_checkpoint
state = dict(l.split(" = ", 1) for l in tfm_checkpoint.read(sys.argv[1]).sections["training_state"].decode().splitlines()
             if " = " in l)
at, steps = int(sys.argv[2]), int(sys.argv[3])
# Two batches an update before the stop, one after: no batch repeated or skipped.
assert int(state["micro_batches"]) == 2 * at + (steps - at), state["micro_batches"]
assert state["ranks"] == "1", state["ranks"]
PY
echo "data_parallel: stopped at update $at of $STEPS, resumed on 2 ranks and on 1"

# 3. A rank that dies, and a rank that hangs: the job ends, naming it.
# rank_pid N: the pid of rank N of the running job.
rank_pid() {
  for p in $(pgrep -f "$TFM_BIN/tfm-train .*$TMP/$2"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return; }
  done
}
for how in KILL STOP; do
  run=lost-$how
  "${MPIRUN[@]}" -np 2 "$TFM_BIN/tfm-train" -o "$TMP/$run" --log "$TMP/$run.log" "${COMMON[@]}" --max-steps 100000 \
    --dist-timeout 5s 2>"$TMP/$run.err" &
  pid=$!
  for _ in $(seq 1200); do
    n=$(grep -c '"event":"train"' "$TMP/$run.log" 2>/dev/null) || n=0
    [ "$n" -ge 3 ] && break
    sleep 0.05
  done
  victim=$(rank_pid 1 "$run")
  [ -n "$victim" ] || { kill -KILL "$pid"; fail "$how: rank 1's process not found"; }
  kill -"$how" "$victim"
  start=$SECONDS
  rc=0
  timeout 60 tail --pid="$pid" -f /dev/null || { kill -KILL "$pid" "$victim"; fail "$how: the job still runs 60 s after rank 1 was stopped"; }
  wait "$pid" || rc=$?
  [ "$rc" -ne 0 ] || fail "$how: the job exited 0 with a rank gone"
  grep -Eq "rank 1|process rank 1|rank 1 with PID" "$TMP/$run.err" || fail "$how: no line names rank 1: $(cat "$TMP/$run.err")"
  echo "data_parallel: rank 1 ${how}ed: the job ended in $((SECONDS - start)) s, exit $rc: $(grep -m1 -E 'rank 1' "$TMP/$run.err")"
done
