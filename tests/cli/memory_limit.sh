# Issue 19, item 5: OpenBLAS's GEMM buffers (128 MiB a thread, beside tfm's
# memory plan) are counted in the memory report and checked before the
# first product: under an address-space limit (ulimit -v) that leaves the
# plan room but not them, tfm-train fails at once with one line (exit 1)
# instead of looping in OpenBLAS's allocator, deaf to SIGTERM. With room,
# it trains. Issue 38: under a limit too tight for OpenBLAS even to start
# (it maps its buffers inside dlopen and retries a failed mapping forever),
# every program that multiplies matrices says so in one line within
# seconds, with one thread or two.
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
# (Before the library loads when the limit leaves no room to start it.)
grep -Eq "out of memory: OpenBLAS (needs 128.0 MiB for its GEMM buffers \(1 thread x 128 MiB, outside tfm's plan\) and cannot have it under the process's limits \(ulimit -v|maps 128.0 MiB for its GEMM buffers as it starts \(1 thread x 128 MiB\) and 64.0 MiB more for itself, and the address-space limit \(ulimit -v)" \
  "$TMP/err" || fail "ulimit -v $limit: $(cat "$TMP/err")"
grep -q "fewer threads" "$TMP/err" && fail "ulimit -v $limit: fewer threads advised to a run of one: $(cat "$TMP/err")"
[ $((SECONDS - start)) -lt 60 ] || fail "ulimit -v $limit: took $((SECONDS - start)) s to fail"
[ -e "$TMP/tight/checkpoint_last.bin" ] && fail "ulimit -v $limit: a checkpoint was written"

# With room for the buffer and the margin, the run trains.
(ulimit -v $((peak + 200 * 1024)) && exec timeout -s KILL 300 "$TFM_BIN/$P" $FAST -m "$M" -o "$TMP/room" "$T" --max-steps 5) \
  </dev/null >"$TMP/out" 2>"$TMP/err"
rc=$?
expect_rc 0 "ulimit -v $((peak + 200 * 1024))"

"$TFM_TOOLS/tiny_checkpoint" "$TMP/m.bin" --tokenizer "$M" || fail "tiny_checkpoint"
head -5 "$TMP/tok" >"$TMP/src.tok"
for threads in 1 2; do
  for cmd in "tfm-train $FAST -m $M -o $TMP/v$threads $T --max-steps 2" \
             "tfm-decode -m $TMP/m.bin --device cpu $TMP/text" \
             "tfm-score -m $TMP/m.bin --device cpu $TMP/src.tok $TMP/src.tok"; do
    start=$SECONDS
    # (timeout outside the limit: a hang is killed whatever the limit does to it.)
    OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
      timeout -s KILL 60 bash -c 'ulimit -v 150000 && exec "$@"' _ $(sed "s|^|$TFM_BIN/|" <<<"$cmd") \
      </dev/null >"$TMP/out" 2>"$TMP/err"
    rc=$?
    what="ulimit -v 150000, $threads thread(s): ${cmd%% *}"
    cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
    started=$(( threads < cpus ? threads : cpus ))  # OpenBLAS starts no more than the CPUs
    [ "$rc" -ne 137 ] || { fail "$what: still running after 60 s (killed)"; continue; }
    expect_rc 1 "$what"
    expect_one_error_line "${cmd%% *}" "$what"
    grep -q "out of memory: OpenBLAS maps $((started * 128)).0 MiB for its GEMM buffers as it starts.*(ulimit -v 146.5 MiB" \
      "$TMP/err" || fail "$what: $(cat "$TMP/err")"
    if [ "$started" -gt 1 ]; then
      grep -q "or use fewer threads (OMP_NUM_THREADS=1)" "$TMP/err" || fail "$what: no advice of fewer threads"
    else
      grep -q "fewer threads" "$TMP/err" && fail "$what: fewer threads advised to a run of one"
    fi
    [ $((SECONDS - start)) -lt 20 ] || fail "$what: took $((SECONDS - start)) s to fail"
  done
done
[ -e "$TMP/v1/checkpoint_last.bin" ] && fail "ulimit -v 150000: a checkpoint was written"
finish
