# Issue 19, item 1: a resume never writes over a later part of its run.
# checkpoint_last.bin rolled back to an older checkpoint (cp), or an older
# checkpoint named directly: refused with one line, every file as it was;
# the same checkpoint resumed into another -o, or the newest, runs.
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/fixtures.bash"
P=tfm-train

run $P $FAST -m "$M" -o "$TMP/r" "$T" --dev "$D" --valid-every 2 --max-steps 6 --save-every-steps 2 --keep-last 2
expect_rc 0 "the run"
for f in checkpoint_4.bin checkpoint_6.bin checkpoint_best.bin checkpoint_last.bin; do
  [ -s "$TMP/r/$f" ] || fail "the run: no $f"
done

# The rollback of the issue: an old checkpoint copied over checkpoint_last.bin.
# checkpoint_last.bin is a file of its own, so the copy changes no numbered one.
cp "$TMP/r/checkpoint_4.bin" "$TMP/keep4.bin"
six=$(md5sum <"$TMP/r/checkpoint_6.bin")
cp "$TMP/r/checkpoint_4.bin" "$TMP/r/checkpoint_last.bin"
[ "$(md5sum <"$TMP/r/checkpoint_6.bin")" = "$six" ] || fail "rollback: copying over checkpoint_last.bin changed checkpoint_6.bin"
before=$(snapshot "$TMP/r")
run $P --resume "$TMP/r" "$T" --dev "$D" --max-steps 10 --lr-scale 2
expect_rc 1 "a rolled-back checkpoint_last.bin"
expect_one_error_line $P "a rolled-back checkpoint_last.bin"
grep -q "holds the run up to update 6 (.*checkpoint_6.bin), past update 4 of .*checkpoint_last.bin" "$TMP/err" \
  || fail "rollback: the message does not name both updates: $(cat "$TMP/err")"
[ "$(snapshot "$TMP/r")" = "$before" ] || fail "rollback: the run directory changed"

# An older checkpoint named directly (the rule was already this one).
run $P --resume "$TMP/r/checkpoint_4.bin" "$T" --max-steps 10
expect_rc 1 "an older checkpoint named"
expect_one_error_line $P "an older checkpoint named"
[ "$(snapshot "$TMP/r")" = "$before" ] || fail "an older checkpoint named: the run directory changed"

# checkpoint_best.bin of a later update than the one resumed is the same
# run's when nothing newer is numbered (a crash after a validation): that
# resume runs. The branch goes to another directory.
run $P --resume "$TMP/keep4.bin" -o "$TMP/branch" "$T" --max-steps 8
expect_rc 0 "the old checkpoint into another -o"
[ -s "$TMP/branch/checkpoint_8.bin" ] || fail "branch: no checkpoint_8.bin"
[ "$(snapshot "$TMP/r")" = "$before" ] || fail "branch: the original run changed"

# Back to the newest: the run continues.
cp "$TMP/r/checkpoint_6.bin" "$TMP/r/checkpoint_last.bin"
run $P --resume "$TMP/r" "$T" --max-steps 8
expect_rc 0 "the newest checkpoint resumed"
[ -s "$TMP/r/checkpoint_8.bin" ] || fail "resume: no checkpoint_8.bin"
finish
