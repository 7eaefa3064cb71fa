# Progress of every long job (libcore/base/progress.h, man tfm(7) "PROGRESS"):
# tfm-tok train and encode, tfm-batch, tfm-decode, tfm-avgckpt, tfm-score -m.
#   -q                          nothing at all on stderr
#   no terminal, default cadence (a plain line every 30 s): none in a run this
#                               short, so stderr is the summary alone
#   TFM_PROGRESS_INTERVAL=0     a plain "PROGRAM: ..." line at every report
#   a terminal (script(1))      a live line drawn with \r, erased at the end
# The cadence itself (no two lines closer than the interval) is checked in
# tests/unit/core_test.cc ("progress: plain lines at the interval").
source "$(dirname "$0")/common.bash"
unset TFM_MODEL TFM_PROGRESS_INTERVAL
export OMP_NUM_THREADS=1
for i in $(seq 1 3000); do
  echo "the cat $i sat on the mat number $((i * 7)) and a dog ran"
  echo "die Katze $i sass auf der Matte Nummer $((i * 3)) und ein Hund lief"
done >"$TMP/corpus"
head -n 400 "$TMP/corpus" >"$TMP/small"
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm.model" --vocab-size 64 "$TMP/small" || fail "tfm-tok train"
M="$TMP/tiny.bin"
"$TFM_TOOLS/tiny_checkpoint" "$M" --tokenizer "$TMP/spm.model" || fail "checkpoint fixture"
"$TFM_TOOLS/tiny_checkpoint" "$TMP/tiny2.bin" --tokenizer "$TMP/spm.model" --seed 2 || fail "checkpoint fixture 2"
"$TFM_BIN/tfm-tok" -q -m "$TMP/spm.model" "$TMP/corpus" >"$TMP/pieces" || fail "tfm-tok encode"
sed -n '1~2p' "$TMP/pieces" >"$TMP/src"
sed -n '2~2p' "$TMP/pieces" >"$TMP/tgt"
head -n 40 "$TMP/src" >"$TMP/src40"
head -n 40 "$TMP/tgt" >"$TMP/tgt40"

# Each job: NAME#PROGRAM#PATTERN#ARGS (ARGS without -q); its progress
# lines match "^PROGRAM: PATTERN".
jobs=(
  "tok-train#tfm-tok#(reading: .* lines|training on [0-9]+ lines: )#train -o $TMP/out.model --vocab-size 64 $TMP/corpus"
  "tok-encode#tfm-tok#$TMP/corpus: [0-9]+ lines, .* of .* \\([0-9]+%\\) \\| .*/s \\| ETA #-m $TMP/spm.model $TMP/corpus"
  "batch#tfm-batch#$TMP/src: [0-9]+ lines, .*ETA #-m $TMP/spm.model -o $TMP/out.tfmb $TMP/src $TMP/tgt"
  "decode#tfm-decode#[0-9]+ sentences \\([0-9]+%\\) \\| [0-9]+ tokens/s \\| ETA #-m $M --beam 2 --batch-size 8 $TMP/src40"
  "avgckpt#tfm-avgckpt#checkpoint [12] of 2: .* \\| [0-9]+% \\| ETA #-o $TMP/avg.bin $M $TMP/tiny2.bin"
  "score#tfm-score#[0-9]+ of 40 sentences \\([0-9]+%\\) \\| [0-9]+ tokens/s \\| ETA #-m $M --src $TMP/src40 --tgt $TMP/tgt40 --max-tokens 64"
)
for job in "${jobs[@]}"; do
  IFS='#' read -r name program pattern args <<<"$job"
  read -ra argv <<<"$args"
  # -q: nothing on stderr.
  run "$program" -q "${argv[@]}"
  expect_rc 0 "$name -q"
  [ -s "$TMP/err" ] && fail "$name -q: stderr not silent: $(head -c 300 "$TMP/err")"
  # Default cadence: a run this short prints no progress line.
  run "$program" "${argv[@]}"
  expect_rc 0 "$name"
  grep -Eq "^$program: $pattern" "$TMP/err" && fail "$name: a progress line before 30 s: $(cat "$TMP/err")"
  # Interval 0: a line at every report, each a plain line (no \r, no escape).
  TFM_PROGRESS_INTERVAL=0 run "$program" "${argv[@]}"
  expect_rc 0 "$name, TFM_PROGRESS_INTERVAL=0"
  grep -Eq "^$program: $pattern" "$TMP/err" || fail "$name, interval 0: no progress line: $(head -c 600 "$TMP/err")"
  grep -q $'[\r\e]' "$TMP/err" && fail "$name, interval 0: a terminal control character without a terminal"
  cp "$TMP/err" "$TMP/err.$name"
done
# Per report: tfm-decode after each sentence (continuous batching: 40
# lines), tfm-score -m after each batch, tfm-avgckpt after each tensor piece.
n=$(grep -Ec "^tfm-decode: [0-9]+ sentences \(" "$TMP/err.decode")
[ "$n" -eq 40 ] || fail "decode, interval 0: $n progress lines for 40 sentences"
grep -q "^tfm-decode: 40 sentences (100%)" "$TMP/err.decode" || fail "decode: the last line is not 40 sentences, 100%"
grep -q "^tfm-avgckpt: checkpoint 2 of 2: .* | 100% |" "$TMP/err.avgckpt" || fail "avgckpt: no line at 100%"
grep -q "^tfm-score: 40 of 40 sentences (100%)" "$TMP/err.score" || fail "score -m: no line at 100%"

# A bad interval is an error of its own (exit 1, one line).
TFM_PROGRESS_INTERVAL=soon run tfm-decode -m "$M" "$TMP/src40"
expect_rc 1 "TFM_PROGRESS_INTERVAL=soon"
expect_one_error_line tfm-decode "TFM_PROGRESS_INTERVAL=soon"
grep -q "TFM_PROGRESS_INTERVAL must be a number of seconds" "$TMP/err" || fail "bad interval: $(cat "$TMP/err")"

# On a terminal: the live line is drawn in place ("\rtfm-decode: ...") and
# erased ("\r\e[K") before the summary line, which stays.
if script -qec true /dev/null >/dev/null 2>&1; then
  script -qec "'$TFM_BIN/tfm-decode' -m '$M' --beam 2 --batch-size 8 '$TMP/src40' >/dev/null" /dev/null \
    </dev/null >"$TMP/tty" 2>&1 || fail "decode on a terminal"
  grep -q $'\rtfm-decode: [0-9]* sentences (' "$TMP/tty" || fail "terminal: no live line: $(od -c "$TMP/tty" | head)"
  grep -q $'\r\e\\[K' "$TMP/tty" || fail "terminal: the live line is not erased"
  tail -n 1 "$TMP/tty" | sed $'s/.*\e\\[K//' | tr -d '\r' | grep -q "^tfm-decode: 40 sentences, .* tokens/s" \
    || fail "terminal: the summary is not the last line: $(tail -n 1 "$TMP/tty" | od -c | head)"
  script -qec "'$TFM_BIN/tfm-decode' -q -m '$M' '$TMP/src40' >/dev/null" /dev/null </dev/null >"$TMP/tty" 2>&1
  [ -s "$TMP/tty" ] && fail "terminal, -q: not silent: $(od -c "$TMP/tty" | head)"
else
  echo "no script(1) with a terminal here: the live line is not checked"
fi
finish
