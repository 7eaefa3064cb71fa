# Issue 19, item 2: one writer to a run directory. While a training runs in
# X, a second `-o X` or `--resume X` is refused with one line naming the
# holder's pid (exit 1), and X is the first run's alone.
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/fixtures.bash"
P=tfm-train

# The first run: long enough to be running while the others start; it
# writes no checkpoint until it is stopped (the race of the issue: two runs
# started together, neither finding the other's checkpoint_last.bin).
"$TFM_BIN/$P" $FAST -m "$M" -o "$TMP/x" "$T" --max-steps 100000 --max-time 2m --save-every-steps 0 \
  </dev/null >"$TMP/first.out" 2>"$TMP/first.err" &
first=$!
# Set up (its model line) means locked.
for _ in $(seq 600); do grep -q "model:" "$TMP/first.err" && break; sleep 0.1; done
grep -q "model:" "$TMP/first.err" || fail "the first run did not start: $(cat "$TMP/first.err")"

run $P $FAST -m "$M" -o "$TMP/x" "$T" --max-steps 2
expect_rc 1 "a second -o X"
expect_one_error_line $P "a second -o X"
grep -q "$TMP/x is in use: another process (pid $first)" "$TMP/err" \
  || fail "a second -o X: the holder is not named: $(cat "$TMP/err")"
[ -e "$TMP/x/checkpoint_2.bin" ] && fail "a second -o X wrote a checkpoint"

kill -TERM "$first"
wait "$first"
[ $? -eq 0 ] || fail "the first run: exit $? after SIGTERM: $(cat "$TMP/first.err")"
[ -s "$TMP/x/checkpoint_last.bin" ] || fail "the first run: no checkpoint_last.bin"

# Two resumes of one run at once: the second is refused while the first runs.
"$TFM_BIN/$P" --resume "$TMP/x" "$T" --max-steps 100000 --max-time 2m \
  </dev/null >"$TMP/first.out" 2>"$TMP/first.err" &
first=$!
for _ in $(seq 600); do grep -q "resumed from" "$TMP/first.err" && break; sleep 0.1; done
run $P --resume "$TMP/x" "$T" --max-steps 100000
expect_rc 1 "a second --resume X"
expect_one_error_line $P "a second --resume X"
grep -q "is in use: another process (pid $first)" "$TMP/err" \
  || fail "a second --resume X: the holder is not named: $(cat "$TMP/err")"
kill -TERM "$first"
wait "$first"
[ $? -eq 0 ] || fail "the first resume: exit $? after SIGTERM: $(cat "$TMP/first.err")"

# The lock goes with its holder: the run resumes.
run $P --resume "$TMP/x" "$T" --max-steps 1000000 --max-time 1s
expect_rc 0 "a resume after the others ended"
finish
