# pipeline: a run interrupted by SIGTERM and resumed gives, bit for bit, the
# losses, gradient norms, validations and final parameters and Adam moments
# of the same run never interrupted. Dropout on, two batches an update, the
# interruption anywhere in an epoch: every counter must survive. Two
# corpora, the second weighted 0.5 (--weights): the subset of it each epoch
# draws, and the mixed order, must survive too. (kill9.sh resumes a
# single corpus.)
source "$(dirname "$0")/common.bash"
PYTHON=/usr/bin/python3  # numpy and zstandard for the checkpoint reader (Debian's)
[ -x "$PYTHON" ] || PYTHON=python3

# Reverse the words of a line: a task the model learns slowly enough to
# keep every update different.
reverse_words 3 300 train=1500 dev=200 extra=400

STEPS=80
ARGS=("$TMP/train.tfmb" "$TMP/extra.tfmb" --weights 1 0.5 --dev "$TMP/dev.tfmb" --preset tiny --update-freq 2 --warmup 20 --max-steps $STEPS
      --valid-every 10 --log-every 1 --save-every 0 --save-every-steps 25)
"$TFM_BIN/tfm-train" -q -m "$TMP/spm.model" -o "$TMP/a" --log "$TMP/a.log" "${ARGS[@]}" || fail "the uninterrupted run"

"$TFM_BIN/tfm-train" -m "$TMP/spm.model" -o "$TMP/b" --log "$TMP/b.log" "${ARGS[@]}" 2>"$TMP/b.err" &
pid=$!
for _ in $(seq 600); do
  n=$(grep -c '"event":"train"' "$TMP/b.log" 2>/dev/null) || n=0
  [ "$n" -ge 12 ] && break
  sleep 0.05
done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 0 ] || fail "SIGTERM: exit $rc, expected 0: $(cat "$TMP/b.err")"
grep -q "interrupted by Terminated after update [0-9]*; checkpoint written to $TMP/b/checkpoint_[0-9]*.bin" "$TMP/b.err" \
  || fail "SIGTERM: no line saying where the checkpoint is: $(cat "$TMP/b.err")"
at=$(python3 -c 'import json, sys; print([r for r in map(json.loads, open(sys.argv[1])) if r["event"] == "stop"][-1]["step"])' "$TMP/b.log")
[ "$at" -ge 12 ] && [ "$at" -lt $STEPS ] || fail "the interruption came at update $at, not inside the run"
"$TFM_BIN/tfm-train" -q --resume "$TMP/b" --log "$TMP/b.log" "${ARGS[@]}" || fail "the resumed run"
echo "resume: interrupted at update $at of $STEPS, resumed"

# Every record of the two runs, and both checkpoints, compared exactly.
PYTHONPATH="$TFM_SOURCE/tests/reference" "$PYTHON" - "$TMP" "$STEPS" <<'PY' || fail "the resumed run differs"
import json, sys
import tfm_checkpoint

tmp, steps = sys.argv[1], int(sys.argv[2])
def records(name):
    out = {}
    for r in map(json.loads, open(f"{tmp}/{name}.log")):
        if r["event"] in ("train", "valid"):
            out[(r["event"], r["step"])] = {k: r[k] for k in ("loss", "nll", "epoch", "lr", "grad_norm", "tokens", "ppl") if k in r}
    return out
a, b = records("a"), records("b")
bad = [f"{k}: {a.get(k)} != {b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
assert len([k for k in a if k[0] == "train"]) == steps, "missing train records"
assert len([k for k in a if k[0] == "valid"]) == steps // 10, "missing validations"
for name in (f"checkpoint_{steps}.bin", "checkpoint_best.bin"):
    x, y = tfm_checkpoint.read(f"{tmp}/a/{name}"), tfm_checkpoint.read(f"{tmp}/b/{name}")
    for t in x.tensors:
        if x.tensors[t].array.tobytes() != y.tensors[t].array.tobytes():
            bad.append(f"{name}: tensor {t} differs")
    # The moments' layout as man tfm.7 gives it: each tensor at an element
    # offset rounded up to a multiple of 64, zeros between.
    import numpy as np
    ends, o = [], 0
    for t in x.tensors.values():
        n = int(np.prod(t.shape))
        ends.append((o, o + n))
        o += (n + 63) // 64 * 64
    for s in ("adam.m", "adam.v"):
        if x.sections[s] != y.sections[s]:
            bad.append(f"{name}: section {s} differs")
        m = np.frombuffer(x.sections[s], dtype="<f4")
        if m.size != o:
            bad.append(f"{name}: section {s} holds {m.size} values, man tfm.7 says {o}")
        gaps = np.ones(m.size, bool)
        for first, end in ends:
            gaps[first:end] = False
        if m.size == o and np.any(m[gaps] != 0):
            bad.append(f"{name}: section {s} has non-zero values between tensors")
    state = lambda c: [l for l in c.sections["training_state"].decode().splitlines() if not l.startswith("elapsed")]
    if state(x) != state(y):
        bad.append(f"{name}: training state differs: {set(state(x)) ^ set(state(y))}")
if bad:
    print("\n".join(bad[:20]), file=sys.stderr)
    sys.exit(1)
print(f"resume: {len(a)} records, parameters and moments identical")
PY
