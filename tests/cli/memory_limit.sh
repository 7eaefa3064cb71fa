# Issue 19, item 5: OpenBLAS's GEMM buffers (128 MiB a thread, beside tfm's
# memory plan) are counted in the memory report and checked before the
# first product: under an address-space limit (ulimit -v) that leaves the
# plan room but not them, tfm-train fails at once with one line (exit 1)
# instead of looping in OpenBLAS's allocator, deaf to SIGTERM. With room,
# it trains.
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/fixtures.bash"
if built_with_asan; then echo "built with AddressSanitizer (terabytes of shadow mappings): skipped"; exit 77; fi
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
P=tfm-train

# The address space a run takes at its peak, OpenBLAS's buffer included.
"$TFM_BIN/$P" $FAST -m "$M" -o "$TMP/probe" "$T" --max-steps 20 </dev/null >/dev/null 2>"$TMP/probe.err" &
pid=$!
peak=0
while kill -0 "$pid" 2>/dev/null; do
  v=$(awk '/^VmPeak/ {print $2}' "/proc/$pid/status" 2>/dev/null) || v=
  [ -n "$v" ] && [ "$v" -gt "$peak" ] && peak=$v
  sleep 0.02
done
wait "$pid" || fail "the probe run: $(cat "$TMP/probe.err")"
grep -q "beside the plan, OpenBLAS's GEMM buffers 128.0 MiB" "$TMP/probe.err" \
  || fail "the memory report does not count OpenBLAS's buffers: $(grep memory: "$TMP/probe.err")"
[ "$peak" -gt 200000 ] || fail "the probe run's peak address space: ${peak} KiB"

# 100 MiB less: room for the plan, none for the 128 MiB buffer.
limit=$((peak - 100 * 1024))
start=$SECONDS
(ulimit -v "$limit" && exec timeout -s KILL 120 "$TFM_BIN/$P" $FAST -m "$M" -o "$TMP/tight" "$T" --max-steps 20) \
  </dev/null >"$TMP/out" 2>"$TMP/err"
rc=$?
[ "$rc" -ne 137 ] || fail "ulimit -v $limit: still running after 120 s (killed): $(tail -c 300 "$TMP/err")"
expect_rc 1 "ulimit -v $limit (the peak $peak KiB less 100 MiB)"
expect_one_error_line $P "ulimit -v $limit"
grep -q "out of memory: OpenBLAS needs 128.0 MiB for its GEMM buffers (1 thread x 128 MiB, outside tfm's plan) and cannot have it under the process's limits (ulimit -v" \
  "$TMP/err" || fail "ulimit -v $limit: $(cat "$TMP/err")"
[ $((SECONDS - start)) -lt 60 ] || fail "ulimit -v $limit: took $((SECONDS - start)) s to fail"
[ -e "$TMP/tight/checkpoint_last.bin" ] && fail "ulimit -v $limit: a checkpoint was written"

# With room for the buffer and the margin, the run trains.
(ulimit -v $((peak + 200 * 1024)) && exec timeout -s KILL 300 "$TFM_BIN/$P" $FAST -m "$M" -o "$TMP/room" "$T" --max-steps 5) \
  </dev/null >"$TMP/out" 2>"$TMP/err"
rc=$?
expect_rc 0 "ulimit -v $((peak + 200 * 1024))"
finish
