# Issue 19, item 6: temporary checkpoints left by a writer that died
# (kill -9 while writing: checkpoint_N.bin.tmp.PID.N, full size on a real
# model) are removed by the next writer of the run, under the run's lock,
# when their process is gone; a live process's are left alone.
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/fixtures.bash"
P=tfm-train

run $P $FAST -m "$M" -o "$TMP/r" "$T" --max-steps 2 --save-every-steps 1
expect_rc 0 "the run"
# A pid that has ended, and one that runs (this test's shell).
sh -c 'echo $$ >"$1"' sh "$TMP/dead.pid"
dead=$(cat "$TMP/dead.pid")
kill -0 "$dead" 2>/dev/null && { echo "pid $dead is running again: skipped"; exit 77; }
for f in "checkpoint_3.bin.tmp.$dead.0" "checkpoint_best.bin.tmp.$dead.1" "checkpoint_last.bin.tmp.$dead.0" \
    "checkpoint_3.bin.tmp.$dead"; do
  head -c 5000 /dev/urandom >"$TMP/r/$f"
done
live="checkpoint_9.bin.tmp.$$.0"
: >"$TMP/r/$live"
: >"$TMP/r/notes.tmp.$dead.0"  # not a checkpoint's: not ours to remove

run $P --resume "$TMP/r" "$T" --max-steps 3
expect_rc 0 "a resume"
left=$(cd "$TMP/r" && ls | grep "\.tmp\." | sort | tr '\n' ' ')
[ "$left" = "$live notes.tmp.$dead.0 " ] || fail "a resume left the temporary files: $left"
grep -q "removed 4 temporary checkpoint files of a writer that died while writing" "$TMP/err" \
  || fail "a resume did not say what it removed: $(cat "$TMP/err")"
[ -s "$TMP/r/checkpoint_3.bin" ] || fail "a resume: no checkpoint_3.bin"

# A new run into a directory holding only such leftovers: cleaned too.
mkdir -p "$TMP/n"
: >"$TMP/n/checkpoint_5.bin.tmp.$dead.0"
run $P $FAST -m "$M" -o "$TMP/n" "$T" --max-steps 1
expect_rc 0 "a new run over leftovers"
[ -e "$TMP/n/checkpoint_5.bin.tmp.$dead.0" ] && fail "a new run left a dead writer's temporary file"
finish
