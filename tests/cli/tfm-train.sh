# tfm-train: a run and its files, every option's effect, resume, signals, and
# every bad input: one error line, the right exit status, earlier work intact.
source "$(dirname "$0")/common.bash"
P=tfm-train
# One thread: small models are many small ops, which a second thread only
# slows down when the machine is busy (ctest runs tests side by side).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# Data: a copy task over 12 one-letter words, its vocabulary from tfm-tok;
# a second vocabulary and a second corpus for the mismatches.
python3 - "$TMP" <<'PY'
import random, sys
r = random.Random(1)
words = "a b c d e f g h i j k l".split()
lines = [" ".join(r.choice(words) for _ in range(r.randint(2, 7))) for _ in range(600)]
open(sys.argv[1] + "/text", "w").write("\n".join(lines) + "\n")
open(sys.argv[1] + "/text2", "w").write("\n".join(l.replace("a", "m") for l in lines) + "\n")
PY
setup_failed() { echo "FAIL: setting up the data: $*" >&2; exit 1; }
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm.model" --vocab-size 29 "$TMP/text" || setup_failed "tfm-tok train"
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm2.model" --vocab-size 29 "$TMP/text2" || setup_failed "tfm-tok train 2"
"$TFM_BIN/tfm-tok" -m "$TMP/spm.model" "$TMP/text" >"$TMP/tok"
"$TFM_BIN/tfm-tok" -m "$TMP/spm2.model" "$TMP/text2" >"$TMP/tok2"
head -500 "$TMP/tok" >"$TMP/train.tok"
tail -100 "$TMP/tok" >"$TMP/dev.tok"
batch() { "$TFM_BIN/tfm-batch" -q -m "$1" -o "$2" "$3" "$3" --max-tokens 200 || setup_failed "tfm-batch $2"; }
batch "$TMP/spm.model" "$TMP/train.tfmb" "$TMP/train.tok"
batch "$TMP/spm.model" "$TMP/dev.tfmb" "$TMP/dev.tok"
batch "$TMP/spm.model" "$TMP/small.tfmb" "$TMP/dev.tok"
batch "$TMP/spm2.model" "$TMP/other.tfmb" "$TMP/tok2"
M="$TMP/spm.model"
T="$TMP/train.tfmb"
FAST="--preset tiny --warmup 10 --save-every 0"
json() { python3 -c "import json,sys; r=[json.loads(l) for l in open('$1')]; print($2)"; }
batches() {  # batches of the training corpus packed with $1 tokens
  "$TFM_BIN/tfm-batch" info "$T" --max-tokens "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["batches"])'
}

run $P --help
expect_rc 0 "--help"
grep -q "^Usage: tfm-train" "$TMP/out" || fail "--help: no usage line"
# The bash completion offers every option --help lists.
for option in $(grep -oE -- '--[a-z][a-z0-9-]*' "$TMP/out" | sort -u); do
  grep -qE -- "(^|[ \"|(])$option([ \")|]|$)" "$TFM_SOURCE/share/completions/tfm-train.bash" \
    || fail "--help lists $option, the bash completion does not"
done

# ---- a run: checkpoints, best, log, progress ----
run $P $FAST -m "$M" -o "$TMP/ck" "$T" --dev "$TMP/dev.tfmb" --max-steps 6 --valid-every 3 \
  --log "$TMP/log" --log-every 2
expect_rc 0 "a run"
for f in checkpoint_6.bin checkpoint_last.bin checkpoint_best.bin; do
  [ -s "$TMP/ck/$f" ] || fail "a run: no $f"
done
ls "$TMP"/ck/*tmp* 2>/dev/null && fail "a run: a temporary file is left"
cmp -s "$TMP/ck/checkpoint_6.bin" "$TMP/ck/checkpoint_last.bin" || fail "a run: last is not the newest"
for text in "memory: parameters" "update 2 | epoch 1 | loss" "ppl" "lr" "gnorm" "tok/s" "mem" "ETA" \
  "update 3: dev loss" "done (--max-steps reached): update 6"; do
  grep -qF -- "$text" "$TMP/err" || fail "a run: no '$text' on stderr: $(cat "$TMP/err")"
done
[ "$(json "$TMP/log" '[x["step"] for x in r if x["event"] == "train"]')" = "[2, 4, 6]" ] || fail "--log-every 2: $(cat "$TMP/log")"
[ "$(json "$TMP/log" '[x["step"] for x in r if x["event"] == "valid"]')" = "[3, 6]" ] || fail "--valid-every 3"
[ "$(json "$TMP/log" 'all(k in r[1] for k in ("loss", "nll", "ppl", "lr", "grad_norm", "tokens_per_s", "memory_bytes"))')" = True ] \
  || fail "--log: fields missing: $(sed -n 2p "$TMP/log")"
"$TFM_BIN/tfm-tok" -m "$TMP/ck/checkpoint_6.bin" "$TMP/text" | cmp -s - "$TMP/tok" \
  || fail "a checkpoint does not embed the vocabulary"

# -q: nothing on stderr. A terminal: a live line redrawn in place (at most 5
# times a second, so the first update's at least), erased before the last line.
run $P $FAST -q -m "$M" -o "$TMP/q" "$T" --max-steps 2
expect_rc 0 "-q"
[ -s "$TMP/err" ] && fail "-q: stderr not silent: $(cat "$TMP/err")"
script -qec "'$TFM_BIN/$P' $FAST -m '$M' -o '$TMP/tty' '$T' --max-steps 3" /dev/null >"$TMP/tty.out" 2>&1
grep -q $'\rtfm-train: update [1-3] | epoch' "$TMP/tty.out" || fail "a terminal: no live line: $(head -c 600 "$TMP/tty.out")"
grep -q $'\r\e\\[Ktfm-train: done (--max-steps reached): update 3' "$TMP/tty.out" \
  || fail "a terminal: the live line is not erased before the last line: $(tail -c 300 "$TMP/tty.out")"

# ---- resume ----
# The options come from the checkpoint (--valid-every 3), the corpora from
# the command line, as before.
run $P --resume "$TMP/ck" "$T" --dev "$TMP/dev.tfmb" --max-steps 9 --log "$TMP/log"
expect_rc 0 "resume"
grep -q "resumed from $TMP/ck/checkpoint_last.bin: update 6" "$TMP/err" || fail "resume: $(cat "$TMP/err")"
[ -s "$TMP/ck/checkpoint_9.bin" ] || fail "resume: no checkpoint_9.bin"
[ "$(json "$TMP/log" '[x["step"] for x in r if x["event"] == "valid"]')" = "[3, 6, 9]" ] \
  || fail "resume: the stored --valid-every 3 did not carry over"
run $P --resume "$TMP/ck" --dump-config
grep -q "^valid-every = 3$" "$TMP/out" && grep -q "^max-steps = 9$" "$TMP/out" \
  || fail "--resume --dump-config: $(cat "$TMP/out")"
run $P $FAST --resume "$TMP/ck/checkpoint_6.bin" -o "$TMP/ck6" "$T" --max-steps 7 --lr-scale 2
expect_rc 0 "resume from a file into another directory"
grep -q "will not continue exactly" "$TMP/err" || fail "resume with another --lr-scale: no warning"
# The best the done line names is a file that holds it (issue 38: it named
# ck6/checkpoint_best.bin, which a run without validations never writes):
# the resumed run's, beside the checkpoint resumed, when it is still that best.
[ -e "$TMP/ck6/checkpoint_best.bin" ] && fail "resume into another directory: a best without a validation"
done_line=$(grep "done (--max-steps reached): update 7" "$TMP/err")
best=$(sed -n 's/.*, best \([^ ]*\) (dev ppl [0-9.]* at update \([0-9]*\))$/\1 \2/p' <<<"$done_line")
if [ -n "$best" ]; then
  [ -e "${best% *}" ] || fail "resume into another directory: the best named is not there: $done_line"
  [ "${best% *}" = "$TMP/ck/checkpoint_best.bin" ] || fail "resume into another directory: best: $done_line"
  "$TFM_BIN/tfm-train" --resume "${best% *}" --dump-config >/dev/null \
    || fail "resume into another directory: the best named does not read"
else
  grep -q ", best dev ppl [0-9.]* at update [0-9]*; its checkpoint is not kept$" <<<"$done_line" \
    || fail "resume into another directory: the done line: $done_line"
fi

# ---- every option's effect ----
lr_at() { json "$1" '[x["lr"] for x in r if x["event"] == "train"][0]'; }
run $P $FAST -m "$M" -o "$TMP/o1" "$T" --max-steps 2 --log-every 1 --log "$TMP/o1.log"
run $P $FAST -m "$M" -o "$TMP/o2" "$T" --max-steps 2 --log-every 1 --log "$TMP/o2.log" --lr-scale 2
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(b - 2 * a) > 1e-12 * a)" \
  "$(lr_at "$TMP/o1.log")" "$(lr_at "$TMP/o2.log")" || fail "--lr-scale 2 does not double the learning rate"
run $P $FAST -m "$M" -o "$TMP/o3" "$T" --max-steps 1 --log-every 1 --log "$TMP/o3.log" --warmup 20
[ "$(lr_at "$TMP/o3.log")" != "$(lr_at "$TMP/o1.log")" ] || fail "--warmup has no effect"
loss2() { json "$1" '[x["loss"] for x in r if x["event"] == "train"][1]'; }
run $P $FAST -m "$M" -o "$TMP/o4" "$T" --max-steps 2 --log-every 1 --log "$TMP/o4.log" --seed 2
[ "$(loss2 "$TMP/o4.log")" != "$(loss2 "$TMP/o1.log")" ] || fail "--seed has no effect"
run $P $FAST -m "$M" -o "$TMP/o5" "$T" --max-steps 2 --log-every 1 --log "$TMP/o5.log" --clip-norm 0.01
[ "$(loss2 "$TMP/o5.log")" != "$(loss2 "$TMP/o1.log")" ] || fail "--clip-norm has no effect"
run $P $FAST -m "$M" -o "$TMP/o6" "$T" --max-steps 2 --log-every 1 --log "$TMP/o6.log" --dropout 0
[ "$(loss2 "$TMP/o6.log")" != "$(loss2 "$TMP/o1.log")" ] || fail "--dropout has no effect"
run $P $FAST -m "$M" -o "$TMP/o7" "$T" --max-steps 1 --d-model 16 --d-ff 24
grep -q "d_model 16, d_ff 24" "$TMP/err" || fail "--d-model/--d-ff: $(cat "$TMP/err")"

n=$(batches 200)
run $P $FAST -m "$M" -o "$TMP/e1" "$T" --max-epochs 1
grep -q "done (--max-epochs reached): update $n, epoch 1" "$TMP/err" || fail "--max-epochs 1 ($n batches): $(cat "$TMP/err")"
run $P $FAST -m "$M" -o "$TMP/e2" "$T" --max-epochs 1 --update-freq 2
grep -q "done (--max-epochs reached): update $(((n + 1) / 2))," "$TMP/err" || fail "--update-freq 2: $(cat "$TMP/err")"
m=$(batches 100)
run $P $FAST -m "$M" -o "$TMP/e3" "$T" --max-epochs 1 --max-tokens 100
grep -q "in $m batches of <= 100 tokens" "$TMP/err" && grep -q "update $m, epoch 1" "$TMP/err" \
  || fail "--max-tokens 100 ($m batches): $(cat "$TMP/err")"
run $P $FAST -m "$M" -o "$TMP/t1" "$T" --max-time 2s --save-every 1s --keep-last 0
grep -q "done (--max-time reached)" "$TMP/err" || fail "--max-time: $(cat "$TMP/err")"
[ "$(ls "$TMP"/t1/checkpoint_[0-9]*.bin | wc -l)" -ge 2 ] || fail "--save-every 1s: $(ls "$TMP/t1")"
run $P $FAST -m "$M" -o "$TMP/k1" "$T" --max-steps 8 --save-every-steps 2 --keep-last 2
[ "$(cd "$TMP/k1" && ls checkpoint_[0-9]*.bin | sort | tr '\n' ' ')" = "checkpoint_6.bin checkpoint_8.bin " ] \
  || fail "--save-every-steps 2 --keep-last 2: $(ls "$TMP/k1")"
# Parameters that cannot change (an update far below their rounding): the dev
# perplexity never improves, so --early-stop 2 stops after the third validation.
run $P $FAST -m "$M" -o "$TMP/es" "$T" --dev "$TMP/dev.tfmb" --lr-scale 1e-30 --valid-every 1 --early-stop 2 --max-steps 50
grep -q "done (early stop: the dev perplexity stopped improving): update 3" "$TMP/err" || fail "--early-stop: $(cat "$TMP/err")"
run $P $FAST -m "$M" -o "$TMP/cpu" "$T" --max-steps 1 --device cpu
expect_rc 0 "--device cpu"

# ---- several corpora, weighted (--weights) ----
S="$TMP/small.tfmb"  # the dev lines, of the training corpus's vocabulary
packed() {  # packed FILE: its batches as packed
  "$TFM_BIN/tfm-batch" info "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["batches"])'
}
nt=$(packed "$T") ns=$(packed "$S")
half=$(( (ns + 1) / 2 ))  # round(0.5 ns), halves away from zero
run $P $FAST -m "$M" -o "$TMP/w" "$T" "$S" --weights 1 0.5 --max-epochs 1 --log "$TMP/w.log"
expect_rc 0 "two corpora"
grep -qx "tfm-train: epoch 1: $T 500 pairs ($nt batches), $S [0-9,]* pairs ($half batches)" "$TMP/err" \
  || fail "two corpora: no epoch line of $nt and $half batches: $(cat "$TMP/err")"
grep -q "$S: 100 pairs in $ns batches of <= 200 tokens a side, weight 0.5" "$TMP/err" \
  || fail "two corpora: no line for the second corpus: $(cat "$TMP/err")"
grep -q "done (--max-epochs reached): update $((nt + half)), epoch 1" "$TMP/err" \
  || fail "two corpora: an epoch is not $nt + $half batches: $(cat "$TMP/err")"
[ "$(json "$TMP/w.log" '[[c["batches"] for c in x["corpora"]] for x in r if x["event"] in ("start", "epoch")]')" = "[[$nt, $half]]" ] \
  || fail "two corpora: the start record's corpora: $(cat "$TMP/w.log")"
run $P $FAST -m "$M" -o "$TMP/w2" "$T" "$S" --weights 2 1 --max-epochs 1
grep -q "^tfm-train: epoch 1: $T 1,000 pairs ($((2 * nt)) batches), $S 100 pairs ($ns batches)$" "$TMP/err" \
  || fail "--weights 2 1: $(cat "$TMP/err")"
# Resumed, the run keeps its corpora and weights: into the second epoch,
# which draws another half of the second corpus.
run $P --resume "$TMP/w" "$T" "$S" --max-epochs 2 --log "$TMP/w.log"
expect_rc 0 "two corpora resumed"
grep -q "^tfm-train: epoch 2: $T 500 pairs ($nt batches), $S [0-9,]* pairs ($half batches)$" "$TMP/err" \
  || fail "two corpora resumed: $(cat "$TMP/err")"
[ "$(json "$TMP/w.log" '[(x["epoch"], x["corpora"][1]["weight"]) for x in r if x["event"] == "epoch"]')" = "[(2, 0.5)]" ] \
  || fail "two corpora resumed: the epoch record: $(cat "$TMP/w.log")"
run $P --resume "$TMP/w" --dump-config
grep -qx "weights = 1 0.5" "$TMP/out" || fail "--resume --dump-config: no weights: $(cat "$TMP/out")"
refused $P "resume: other weights" "weights mismatch: $TMP/w/checkpoint_last.bin was trained with --weights 1 0.5, not 1 0.25" \
  $FAST --resume "$TMP/w" "$T" "$S" --weights 1 0.25
refused $P "resume: one corpus of two" "was trained on 2 corpora, 1 given" $FAST --resume "$TMP/w" "$T"
refused $P "resume: the corpora swapped" "corpus mismatch" $FAST --resume "$TMP/w" "$S" "$T"
refused $P "resume: a corpus added" "was trained on 1 corpus, 2 given" $FAST --resume "$TMP/ck" "$T" "$S" --weights 1 1
refused $P "a corpus of another vocabulary" "vocabulary mismatch: $TMP/other.tfmb was made with vocabulary" \
  $FAST -m "$M" -o "$TMP/w3" "$T" "$TMP/other.tfmb"
grep -qF "but $T with" "$TMP/err" || fail "another vocabulary: the first corpus is not named: $(cat "$TMP/err")"
run $P $FAST -m "$M" -o "$TMP/w4" "$T" "$S" --weights 1
expect_rc 2 "--weights: one factor for two corpora"
expect_one_error_line $P "--weights: one factor for two corpora"
grep -qF -- "--weights: 1 factors for 2 training corpora" "$TMP/err" || fail "--weights count: $(cat "$TMP/err")"
# --dump-config carries the weights, and --config reads them back.
run $P $FAST -m "$M" "$T" "$S" --weights 1 0.5 --dump-config
grep -qx "weights = 1 0.5" "$TMP/out" || fail "--dump-config: no weights: $(cat "$TMP/out")"
cp "$TMP/out" "$TMP/w.ini"
run $P --config "$TMP/w.ini" --dump-config
cmp -s "$TMP/out" "$TMP/w.ini" || fail "--config with weights does not give the file back: $(cat "$TMP/out")"
run $P -m "$M" -o "$TMP/w5" --config "$TMP/w.ini" "$T" "$S" --max-steps 1
grep -q "$S: .*, weight 0.5" "$TMP/err" || fail "--config: the weights: $(cat "$TMP/err")"

# --dump-config and --config: the file reads back to itself; options given win.
run $P --preset tiny --update-freq 4 --dump-config
expect_rc 0 "--dump-config"
cp "$TMP/out" "$TMP/run.ini"
grep -q "^d-model = 32$" "$TMP/run.ini" && grep -q "^update-freq = 4$" "$TMP/run.ini" || fail "--dump-config: $(cat "$TMP/run.ini")"
run $P --config "$TMP/run.ini" --dump-config
cmp -s "$TMP/out" "$TMP/run.ini" || fail "--config FILE --dump-config does not give FILE back"
run $P --config "$TMP/run.ini" --d-model 64 --dump-config
grep -q "^d-model = 64$" "$TMP/out" || fail "an option given does not override --config"
sed -i 's/^max-steps = .*/max-steps = 3/; s/^save-every = .*/save-every = 0/; s/^warmup = .*/warmup = 10/' "$TMP/run.ini"
run $P --config "$TMP/run.ini" -m "$M" -o "$TMP/cfg" "$T"
grep -q "d_model 32" "$TMP/err" && grep -q "update 3," "$TMP/err" && grep -q "4 batches an update" "$TMP/err" \
  || fail "training from --config: $(cat "$TMP/err")"

# SIGINT: the step ends, a checkpoint is written, exit 0 with where it is.
"$TFM_BIN/$P" $FAST -m "$M" -o "$TMP/sig" "$T" --log "$TMP/sig.log" --log-every 1 2>"$TMP/sig.err" &
pid=$!
for _ in $(seq 300); do grep -q '"train"' "$TMP/sig.log" 2>/dev/null && break; sleep 0.1; done
kill -INT "$pid"
wait "$pid"
rc=$?
expect_rc 0 "SIGINT"
grep -q "interrupted by Interrupt after update [0-9]*; checkpoint written to $TMP/sig/checkpoint_[0-9]*.bin" "$TMP/sig.err" \
  || fail "SIGINT: $(cat "$TMP/sig.err")"
[ -s "$TMP/sig/checkpoint_last.bin" ] || fail "SIGINT: no checkpoint"

# ---- bad input: exit 1, one error line, nothing destroyed ----
bad() { refused $P "$@"; }  # bad DESCRIPTION EXPECTED-TEXT ARGS...
# No -m for a new run: bad usage (exit 2), as any required option.
run $P $FAST -o "$TMP/x1" "$T"
expect_rc 2 "no vocabulary"
expect_one_error_line $P "no vocabulary"
grep -qF -- "-m/--vocab is required" "$TMP/err" || fail "no vocabulary: $(cat "$TMP/err")"
bad "another vocabulary" "vocabulary mismatch" $FAST -m "$TMP/spm2.model" -o "$TMP/x2" "$T"
bad "a dev corpus of another vocabulary" "vocabulary mismatch: $TMP/other.tfmb" $FAST -m "$M" -o "$TMP/x3" "$T" --dev "$TMP/other.tfmb"
bad "a missing corpus" "cannot read $TMP/none.tfmb" $FAST -m "$M" -o "$TMP/x4" "$TMP/none.tfmb"
bad "a corpus that is text" "not a tfm corpus" $FAST -m "$M" -o "$TMP/x5" "$TMP/train.tok"
head -c 300 "$T" >"$TMP/cut.tfmb"
bad "a truncated corpus" "truncated" $FAST -m "$M" -o "$TMP/x6" "$TMP/cut.tfmb"
bad "a missing vocabulary" "$TMP/none.model" $FAST -m "$TMP/none.model" -o "$TMP/x7" "$T"
bad "a run directory that holds a run" "already holds a run" $FAST -m "$M" -o "$TMP/ck" "$T"
bad "an output that is a file" "$TMP/train.tok" $FAST -m "$M" -o "$TMP/train.tok" "$T"
bad "a log that cannot be written" "cannot write the log" $FAST -m "$M" -o "$TMP/x8" "$T" --log "$TMP/no/such/dir/log"
bad "too few positions" "over the 4 positions" $FAST -m "$M" -o "$TMP/x9" "$T" --max-positions 4
bad "a schedule without its peak" "--lr-schedule cosine needs --lr" $FAST -m "$M" -o "$TMP/x11" "$T" \
  --lr-schedule cosine --max-steps 50
bad "a decay within the warm-up" "must be past --warmup 100" $FAST -m "$M" -o "$TMP/x12" "$T" \
  --lr-schedule linear --lr 1e-3 --warmup 100 --decay-steps 50
# Another schedule and Adam, with weight decay: the run reports its rates,
# and --dump-config carries every optimizer option.
run $P $FAST -m "$M" -o "$TMP/sched" "$T" --lr-schedule cosine --lr 2e-3 --min-lr 1e-4 --warmup 2 --max-steps 4 \
  --adam-beta2 0.999 --adam-eps 1e-8 --weight-decay 0.01 --log-every 1 --device cpu
expect_rc 0 "--lr-schedule cosine with AdamW"
run $P -m "$M" "$T" --lr-schedule inverse-sqrt --lr 5e-4 --weight-decay 0.1 --adam-beta1 0.85 --dump-config
for kv in "lr-schedule = inverse-sqrt" "lr = 0.0005" "weight-decay = 0.1" "adam-beta1 = 0.85" "adam-beta2 = 0.98"; do
  grep -qxF "$kv" "$TMP/out" || fail "--dump-config: no '$kv' in $(cat "$TMP/out")"
done
run $P $FAST -m "$M" -o "$TMP/x13" "$T" --lr-schedule triangle
expect_rc 2 "an unknown schedule"
for p in bf16 fp16 tf32; do
  bad "--precision $p on the CPU" "computes on a GPU only" $FAST -m "$M" -o "$TMP/p$p" "$T" --precision $p
done
# auto, the default, is fp32 on the CPU (bf16 on a GPU).
run tfm-train $FAST -m "$M" -o "$TMP/pauto" "$T" --precision auto --max-steps 1 --device cpu
expect_rc 0 "--precision auto"
grep -q "on cpu in fp32" "$TMP/err" || fail "--precision auto: not fp32 on the CPU: $(cat "$TMP/err")"
bad "--device cuda" "cuda" $FAST -m "$M" -o "$TMP/x10" "$T" --device cuda
# Out of memory while planning: the sizes and what to lower.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1
bad "a model too big for memory" "lower --max-tokens" $FAST -m "$M" -o "$TMP/x11" "$T" --d-model 1048576 --d-ff 4194304
grep -q "out of memory.*the plan needs parameters .*total" "$TMP/err" || fail "out of memory: no plan: $(cat "$TMP/err")"
# NaN: a learning rate that blows the model up; K bad steps, then an error
# that names the last good checkpoint.
bad "NaN steps" "stopped after 3 updates in a row with a NaN" $FAST -m "$M" -o "$TMP/nan" "$T" \
  --lr-scale 1e30 --max-bad-steps 3 --save-every-steps 1 --max-steps 20
grep -q "last good checkpoint is $TMP/nan/checkpoint_1.bin" "$TMP/err" || fail "NaN: $(cat "$TMP/err")"
[ "$(grep -c "warning: update [0-9]* skipped: the loss or the gradient is NaN" "$TMP/err")" -eq 3 ] \
  || fail "NaN: each bad step is not reported: $(cat "$TMP/err")"

# Resuming with what does not match the checkpoint.
bad "resume: another corpus" "corpus mismatch" $FAST --resume "$TMP/ck" "$TMP/small.tfmb"
bad "resume: another vocabulary" "vocabulary mismatch" $FAST --resume "$TMP/ck" -m "$TMP/spm2.model" "$T"
bad "resume: another architecture" "architecture mismatch" $FAST --resume "$TMP/ck" "$T" --d-model 64
bad "resume: another preset" "d_model = 32 (asked: 512)" --resume "$TMP/ck" "$T" --preset base
bad "resume: other batches" "resume with --max-tokens 200" $FAST --resume "$TMP/ck" "$T" --max-tokens 100
bad "resume: no checkpoint in the directory" "no checkpoint_last.bin" $FAST --resume "$TMP/q/.." "$T"
bad "resume: not a checkpoint" "not a tfm checkpoint" $FAST --resume "$TMP/train.tok" "$T"
bad "resume: no such file" "no such file" $FAST --resume "$TMP/none.bin" "$T"
bad "resume: an earlier checkpoint over the later ones" "would overwrite its later checkpoints" \
  $FAST --resume "$TMP/ck/checkpoint_6.bin" "$T" --dev "$TMP/dev.tfmb"

# A checkpoint that cannot be written (the directory is not writable, the
# disk is full) is an error that leaves the checkpoint before it intact.
run $P $FAST -m "$M" -o "$TMP/ro" "$T" --max-steps 2
cp "$TMP/ro/checkpoint_last.bin" "$TMP/before.bin"
chmod 755 "$TMP"
if [ "$(id -u)" = 0 ]; then  # root writes anywhere: run as nobody
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
else
  chmod a-w "$TMP/ro"
  as_user=()
fi
"${as_user[@]}" "$TFM_BIN/$P" $FAST --resume "$TMP/ro" "$T" --max-steps 4 </dev/null >"$TMP/out" 2>"$TMP/err"
rc=$?
chmod u+w "$TMP/ro"
expect_rc 1 "an unwritable checkpoint directory"
expect_one_error_line $P "an unwritable checkpoint directory"
# Refused before any update: the run's lock cannot be made there.
grep -q "cannot lock the run directory $TMP/ro" "$TMP/err" || fail "unwritable: $(cat "$TMP/err")"
cmp -s "$TMP/before.bin" "$TMP/ro/checkpoint_last.bin" || fail "unwritable: the last checkpoint changed"
(trap '' XFSZ; ulimit -f 64; exec "$TFM_BIN/$P" $FAST --resume "$TMP/ro" "$T" --max-steps 4 </dev/null >"$TMP/out" 2>"$TMP/err")
rc=$?
expect_rc 1 "a full disk"
# checkpoint_last.bin is written first (checkpoint_dir.h).
grep -q "cannot write $TMP/ro/checkpoint_last.bin: File too large" "$TMP/err" || fail "full disk: $(cat "$TMP/err")"
cmp -s "$TMP/before.bin" "$TMP/ro/checkpoint_last.bin" || fail "full disk: the last checkpoint changed"
ls "$TMP"/ro/*tmp* 2>/dev/null && fail "full disk: a temporary file is left"

# ---- bad usage: exit 2, one error line, a pointer to --help ----
printf 'bogus = 1\n' >"$TMP/bogus.ini"
printf 'd-model = wide\n' >"$TMP/bad.ini"
for args in "" "$T" "-m $M $T" "--bogus -o d $T" "-o d $T --lr-scale 0" "-o d $T --lr-scale x" \
  "-o d $T --precision fp64" "-o d $T --save-every soon" "-o d $T --warmup 0" "-o d $T --update-freq 0" \
  "-o d $T --d-model x" "-o d $T --pre-norm maybe" "-o d $T --preset huge" "-o d $T --keep-last -1" \
  "-o d $T --device bogus" "-o d $T --config $TMP/none.ini" "-o d $T --config $TMP/bogus.ini" \
  "-o d $T --config $TMP/bad.ini" "-o d $T $T --weights 1" "-o d $T --weights 0" "-o d $T --weights x" \
  "-o d $T --weights inf"; do
  # shellcheck disable=SC2086
  run $P $args
  expect_rc 2 "usage: '$args'"
  expect_one_error_line $P "usage: '$args'"
  grep -q -- "--help" "$TMP/err" || fail "usage: '$args': no pointer to --help"
done

finish
