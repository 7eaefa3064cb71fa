# pipeline: the pack carried to a GPU machine (scripts/gpu-pack): this build's programs,
# cuda tests and benchmarks with the libraries and data they need, in one
# archive that gpu-check and gpu-bench run with --pack instead of building
# on the GPU's time. Packed here, both dry runs (--device cpu --small) must
# end with their tables, with `unpack` in place of deps, configure and build.
source "$(dirname "$0")/common.bash"
require_shared multi30k/task1/raw/train.en.gz
require_shared wmt14/newstest2014-full/newstest2014.en-de.en
BUILD=$(cd "$TFM_BIN/.." && pwd)
PACK=$TMP/pack.tar.xz
export TMPDIR=$TMP  # where gpu-check and gpu-bench unpack it (110 MB each), removed with $TMP
# (xz's fastest preset: the archive's contents are the point, not its size.)
"$TFM_SOURCE/scripts/gpu-pack" --build "$BUILD" --out "$PACK" --data "$SHARED" --jobs 2 --level 0 >"$TMP/pack.txt" 2>&1 \
  || { cat "$TMP/pack.txt" >&2; fail "gpu-pack failed"; }
grep -q "^gpu-pack: $PACK: [0-9.]* MiB" "$TMP/pack.txt" || fail "gpu-pack said: $(cat "$TMP/pack.txt")"
listing=$(tar -tJf "$PACK")
for f in ./tests/tfm_cuda_tests ./tests/bench/decode ./cmd/tfm-train ./lib/libopenblas.so.0 ./lib/NEEDED \
         ./bench/decode.spm.model ./data/wmt14/newstest2014-full/newstest2014.en-de.en \
         ./data/demo/engKJV2006eb.imp ./data/demo/spaRV1909eb.imp; do
  grep -qxF "$f" <<<"$listing" || fail "$f is not in the pack"
done

# The table's step names: the lines between its header and "logs:".
rows() { awk '$1 == "step" { on = 1; next } on && $1 != "logs:" { print $1 }' "$1" | tr '\n' ' '; }
"$TFM_SOURCE/scripts/gpu-check" --pack "$PACK" --device cpu --small --out "$TMP/check" >"$TMP/check.txt" 2>&1 \
  || { cat "$TMP/check.txt" >&2; fail "gpu-check --pack failed"; }
cat "$TMP/check/table.txt"
[ "$(rows "$TMP/check/table.txt")" = "unpack ctest memcheck racecheck synccheck " ] \
  || fail "gpu-check --pack: not the steps unpack, ctest and the sanitizers: $(rows "$TMP/check/table.txt")"
grep -q '^ctest  *skipped .*no usable CUDA device' "$TMP/check/table.txt" || fail "the packed cuda tests did not run"

# (Without PyTorch beside the benchmarks: it comes from the machine, not the pack,
# and gpu_bench.sh runs it.) The default steps, the demo, whose Bible
# comes from the pack, and decode-copy, whose copying model the pack's
# tiny_checkpoint makes.
"$TFM_SOURCE/scripts/gpu-bench" --pack "$PACK" --device cpu --small --out "$TMP/bench" --no-reference \
  --only train-tiny,decode,decode-copy,data-parallel,multi30k,demo >"$TMP/bench.txt" 2>&1 \
  || { cat "$TMP/bench.txt" >&2; fail "gpu-bench --pack failed"; }
cat "$TMP/bench/table.txt"
[ "$(rows "$TMP/bench/table.txt")" = "unpack train-tiny decode decode-copy data-parallel multi30k demo " ] \
  || fail "gpu-bench --pack: not the steps unpack, the benchmarks and the demo: $(rows "$TMP/bench/table.txt")"
grep -q 'BLEU [0-9.]* on the held-out books; 10 updates' "$TMP/bench/table.txt" || fail "no BLEU from the packed demo"
grep -q "BLEU against the source 100.00 (copying)" "$TMP/bench/table.txt" || fail "the packed copying model did not copy"
awk '$1 == "step" { on = 1; next } on && $1 != "logs:" && $2 != "ok" && $2 != "slow" { exit 1 }' "$TMP/bench/table.txt" \
  || fail "gpu-bench --pack: a step neither ok nor slow"
grep -q 'BLEU [0-9.]* on test2016' "$TMP/bench/table.txt" || fail "no BLEU from the packed programs"

# Not a pack: one line, exit status 1.
echo "not an archive" >"$TMP/bad.tar.xz"
set +e
"$TFM_SOURCE/scripts/gpu-check" --pack "$TMP/bad.tar.xz" --device cpu --small --out "$TMP/bad" 2>"$TMP/err" >/dev/null
rc=$?
set -e
[ $rc = 1 ] || fail "gpu-check with a bad pack: exit status $rc, not 1"
grep -q '^gpu-check: error: .*unpack' "$TMP/err" || fail "no error line for a bad pack: $(cat "$TMP/err")"
echo "gpu-pack: packed here, gpu-check and gpu-bench ran it with --pack"
