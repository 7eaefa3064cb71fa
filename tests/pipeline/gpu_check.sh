# pipeline: scripts/gpu-check's dry run (--device cpu --small), so that the
# first command on a GPU machine cannot rot on machines without one: it reuses
# this build, builds the cuda test executable, runs `ctest -L cuda` and the
# small run that compute-sanitizer would wrap, and must end with its table:
# every step ok, or skipped where no GPU is usable here (ctest, memcheck,
# racecheck, synccheck), and no other status.
source "$(dirname "$0")/common.bash"
BUILD=$(cd "$TFM_BIN/.." && pwd)
"$TFM_SOURCE/scripts/gpu-check" --device cpu --small --build "$BUILD" --out "$TMP/out" --jobs 2 \
  >"$TMP/stdout" 2>&1 || { cat "$TMP/stdout" >&2; fail "gpu-check --device cpu --small failed"; }
cat "$TMP/out/table.txt"
[ "$(tail -n 1 "$TMP/stdout")" = "logs: $TMP/out" ] || fail "the output does not end with the table"
for s in deps configure build ctest memcheck racecheck synccheck; do
  row=$(awk -v s="$s" '$1 == s' "$TMP/out/table.txt")
  [ -n "$row" ] || fail "no row for step $s in the table"
  status=$(awk '{ print $2 }' <<<"$row")
  [ -s "$TMP/out/$s.log" ] || fail "no log $s.log for step $s"
  case $status in
    ok) ;;
    skipped)
      case $s in ctest|memcheck|racecheck|synccheck) ;; *) fail "step $s skipped: $row" ;; esac
      grep -q 'skipped: no usable CUDA device\|running on cuda' "$TMP/out/$s.log" \
        || fail "step $s skipped without the cuda tests saying why: $(cat "$TMP/out/$s.log")" ;;
    *) fail "step $s: $row" ;;
  esac
done
# No step runs past --budget: with none left, every step after deps is
# no-time, the table still comes, and the exit status is 1.
set +e
"$TFM_SOURCE/scripts/gpu-check" --device cpu --small --build "$BUILD" --out "$TMP/late" --budget 1 >"$TMP/late.txt" 2>&1
rc=$?
set -e
[ $rc = 1 ] || fail "gpu-check --budget 1: exit status $rc, not 1"
[ "$(awk '$2 == "no-time"' "$TMP/late/table.txt" | wc -l)" = 6 ] \
  || fail "gpu-check --budget 1: not 6 steps no-time: $(cat "$TMP/late.txt")"
# --no-sanitizers: the tests alone, no sanitizer rows.
"$TFM_SOURCE/scripts/gpu-check" --device cpu --small --build "$BUILD" --out "$TMP/tests" --no-sanitizers \
  >"$TMP/tests.txt" 2>&1 || { cat "$TMP/tests.txt" >&2; fail "gpu-check --no-sanitizers failed"; }
[ "$(awk 'NR > 3 && $1 != "logs:" { print $1 }' "$TMP/tests/table.txt" | tr '\n' ' ')" = "deps configure build ctest " ] \
  || fail "gpu-check --no-sanitizers: $(cat "$TMP/tests/table.txt")"
# A usage error is one line and exit status 2.
set +e
"$TFM_SOURCE/scripts/gpu-check" --device tpu --out "$TMP/bad" 2>"$TMP/err"
rc=$?
set -e
[ $rc = 2 ] || fail "gpu-check --device tpu: exit status $rc, not 2"
grep -q "^gpu-check: error: --device must be cpu or cuda" "$TMP/err" || fail "no usage error: $(cat "$TMP/err")"
echo "gpu-check: the dry run ends with its table, every step ok or skipped"
