# tfm-train --init: fine-tuning starts from a checkpoint's parameters and
# architecture with a fresh optimizer; the training knobs may change, the
# architecture and the vocabulary may not; its checkpoints resume exactly.
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/fixtures.bash"
: "${TFM_TOOLS:?TFM_TOOLS must name the folder of the test helpers}"
P=tfm-train
PYTHON=/usr/bin/python3  # numpy and zstandard for the checkpoint reader (Debian's)
[ -x "$PYTHON" ] || PYTHON=python3
json() { python3 -c "import json,sys; r=[json.loads(l) for l in open('$1')]; print($2)"; }
first() { json "$1" "[x['$2'] for x in r if x['event'] == 'train'][0]"; }
# same_model A B [moments]: the two checkpoints hold the same parameters, bit
# for bit (and the same Adam moments); else the first that differs.
same_model() {
  PYTHONPATH="$TFM_SOURCE/tests/reference" "$PYTHON" - "$@" <<'PY'
import sys
import tfm_checkpoint
a, b = tfm_checkpoint.read(sys.argv[1]), tfm_checkpoint.read(sys.argv[2])
if sorted(a.tensors) != sorted(b.tensors):
    sys.exit(f"other tensors: {sorted(a.tensors)} / {sorted(b.tensors)}")
for name in a.tensors:
    if a.tensors[name].array.tobytes() != b.tensors[name].array.tobytes():
        sys.exit(f"tensor {name} differs")
for s in ("adam.m", "adam.v") if sys.argv[3:] else ():
    if a.sections[s] != b.sections[s]:
        sys.exit(f"section {s} differs")
PY
}

# The model fine-tuned: a tiny one trained for a few updates.
BASE="$TMP/base/checkpoint_last.bin"
run $P $FAST -q -m "$M" -o "$TMP/base" "$T" --max-steps 20
expect_rc 0 "the model to fine-tune"
# One batch: the first update's loss is the model's loss on that corpus.
head -40 "$TMP/train.tok" >"$TMP/one.tok"
"$TFM_BIN/tfm-batch" -q -m "$M" -o "$TMP/one.tfmb" "$TMP/one.tok" "$TMP/one.tok" --max-tokens 4096 \
  || setup_failed "tfm-batch one"
ONE="--max-steps 1 --log-every 1 --save-every 0"

# ---- (1) the parameters and the loss of update 1 are the checkpoint's ----
run $P --init "$BASE" -o "$TMP/f1" "$TMP/one.tfmb" $ONE --dropout 0 --log "$TMP/f1.log"
expect_rc 0 "--init"
grep -q "fine-tuning $BASE: its parameters" "$TMP/err" || fail "--init: no line saying so: $(cat "$TMP/err")"
[ "$(json "$TMP/f1.log" "r[0]['init']")" = "$BASE" ] || fail "--init: the start record: $(head -1 "$TMP/f1.log")"
[ "$(json "$TMP/f1.log" "r[1]['step']")" = 1 ] || fail "--init: not update 1 first: $(sed -n 2p "$TMP/f1.log")"
"$TFM_BIN/tfm-score" -m "$BASE" "$TMP/one.tok" "$TMP/one.tok" --json >"$TMP/score.json" || fail "tfm-score -m"
python3 - "$(first "$TMP/f1.log" nll)" "$TMP/score.json" <<'PY' || fail "--init: update 1's loss is not the checkpoint's"
import json, sys
nll = float(sys.argv[1])
s = json.load(open(sys.argv[2]))
s = s[0] if isinstance(s, list) else s
want = -s["log_prob"] / s["tokens"]
sys.exit(abs(nll - want) > 1e-4 * want and f"nll {nll}, the checkpoint's {want}")
PY
run $P $FAST -m "$M" -o "$TMP/r1" "$TMP/one.tfmb" $ONE --dropout 0 --log "$TMP/r1.log"
python3 -c "import sys; sys.exit(float(sys.argv[1]) > float(sys.argv[2]) - 0.3)" \
  "$(first "$TMP/f1.log" loss)" "$(first "$TMP/r1.log" loss)" \
  || fail "--init: update 1's loss $(first "$TMP/f1.log" loss), a new model's $(first "$TMP/r1.log" loss)"
# Step 0 is the checkpoint: an update far below the parameters' rounding
# leaves them as they were.
run $P --init "$BASE" -o "$TMP/f0" "$T" --max-steps 1 --lr-scale 1e-30
expect_rc 0 "--init --lr-scale 1e-30"
err=$(same_model "$BASE" "$TMP/f0/checkpoint_1.bin" 2>&1) || fail "--init: the parameters are not the checkpoint's: $err"
grep -q "^step = 1$" <(PYTHONPATH="$TFM_SOURCE/tests/reference" "$PYTHON" -c "import sys, tfm_checkpoint; \
  print(tfm_checkpoint.read(sys.argv[1]).sections['training_state'].decode())" "$TMP/f0/checkpoint_1.bin") \
  || fail "--init: the run does not start at update 0"
# A model without training state (an average of one: the same parameters)
# fine-tunes the same, bit for bit, Adam's moments included: the training
# state of a checkpoint (moments, counters) is not read.
"$TFM_BIN/tfm-avgckpt" -q -o "$TMP/avg.bin" "$BASE" || fail "tfm-avgckpt"
run $P --init "$TMP/avg.bin" -o "$TMP/fa" "$T" --max-steps 1 --lr-scale 1e-30
expect_rc 0 "--init of a model without training state"
err=$(same_model "$TMP/f0/checkpoint_1.bin" "$TMP/fa/checkpoint_1.bin" moments 2>&1) \
  || fail "--init: the training state of the checkpoint was read: $err"
# A model that embeds no vocabulary: accepted when its size is the corpus's.
"$TFM_TOOLS/tiny_checkpoint" "$TMP/novocab.bin" vocab_size=29 || fail "tiny_checkpoint"
"$TFM_TOOLS/tiny_checkpoint" "$TMP/novocab30.bin" vocab_size=30 || fail "tiny_checkpoint"
run $P --init "$TMP/novocab.bin" -o "$TMP/fn" "$T" --max-steps 1
expect_rc 0 "--init of a model without a vocabulary"
grep -q "warning: $TMP/novocab.bin embeds no vocabulary" "$TMP/err" || fail "no vocabulary: no warning: $(cat "$TMP/err")"

# ---- (2) a corpus of another vocabulary, a model of another size ----
sed 's/a/m/g' "$TMP/text" >"$TMP/text2"
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm2.model" --vocab-size 29 "$TMP/text2" || setup_failed "tfm-tok train 2"
"$TFM_BIN/tfm-tok" -m "$TMP/spm2.model" "$TMP/text2" >"$TMP/tok2" || setup_failed "tfm-tok 2"
"$TFM_BIN/tfm-batch" -q -m "$TMP/spm2.model" -o "$TMP/other.tfmb" "$TMP/tok2" "$TMP/tok2" || setup_failed "tfm-batch 2"
fp() { "$TFM_BIN/tfm-batch" info "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["vocab_fingerprint"])'; }
bad() { refused $P "$@"; }  # bad DESCRIPTION EXPECTED-TEXT ARGS...
bad "--init: a corpus of another vocabulary" \
  "vocabulary mismatch: $TMP/other.tfmb was made with vocabulary $(fp "$TMP/other.tfmb"), but $BASE (its embedded vocabulary) is $(fp "$T")" \
  --init "$BASE" -o "$TMP/x1" "$TMP/other.tfmb"
bad "--init: a model without a vocabulary, of another size" \
  "$TMP/novocab30.bin embeds no vocabulary, and $T was made with one of 29 pieces" \
  --init "$TMP/novocab30.bin" -o "$TMP/x2" "$T"
[ -e "$TMP/x1" ] || [ -e "$TMP/x2" ] && fail "a refused fine-tuning left a directory"

# ---- (3) --init and --resume: bad usage ----
run $P --init "$BASE" --resume "$TMP/base" "$T"
expect_rc 2 "--init with --resume"
expect_one_error_line $P "--init with --resume"
grep -qE -- "--(init|resume) excludes --(resume|init)" "$TMP/err" || fail "--init with --resume: $(cat "$TMP/err")"

# ---- (4) the architecture is the checkpoint's; the training knobs are new ----
bad "--init with another --d-model" "architecture mismatch: $BASE holds another model than the options ask for: d_model = 32 (asked: 64)" \
  --init "$BASE" -o "$TMP/x3" "$T" --d-model 64
bad "--init with another preset" "d_model = 32 (asked: 512)" --init "$BASE" -o "$TMP/x4" "$T" --preset base
run $P --init "$BASE" --preset tiny --d-model 32 --dropout 0.3 --lr-scale 0.5 --dump-config
expect_rc 0 "--init with the checkpoint's own architecture"
cp "$TMP/out" "$TMP/ft.ini"
for line in "init = $BASE" "d-model = 32" "dropout = 0.3" "lr-scale = 0.5" "warmup = 4000"; do
  grep -qx -- "$line" "$TMP/ft.ini" || fail "--init --dump-config: no '$line' in: $(cat "$TMP/ft.ini")"
done
run $P --config "$TMP/ft.ini" --dump-config
cmp -s "$TMP/out" "$TMP/ft.ini" || fail "--init: --config FILE --dump-config does not give FILE back"
run $P --config "$TMP/ft.ini" -o "$TMP/fc" "$TMP/one.tfmb" $ONE --log "$TMP/fc.log"
expect_rc 0 "--init from --config"
run $P --resume "$TMP/fc" --dump-config
grep -qx "dropout = 0.3" "$TMP/out" || fail "--init --dropout 0.3: the run's checkpoint has $(grep dropout "$TMP/out")"
[ "$(first "$TMP/fc.log" nll)" != "$(first "$TMP/f1.log" nll)" ] || fail "--init --dropout 0.3: no effect on the loss"
run $P --config "$TMP/ft.ini" --resume "$TMP/fc" "$T"
expect_rc 2 "init in --config with --resume"

# ---- (5) a fine-tuning run resumed continues exactly ----
TUNE=(--init "$BASE" "$T" --lr-scale 0.5 --warmup 5 --update-freq 2 --log-every 1 --save-every 0)
run $P "${TUNE[@]}" -o "$TMP/a" --max-steps 6 --log "$TMP/a.log"
expect_rc 0 "fine-tuning, uninterrupted"
run $P "${TUNE[@]}" -o "$TMP/b" --max-steps 3 --log "$TMP/b.log"
expect_rc 0 "fine-tuning, first part"
run $P --resume "$TMP/b" "$T" --max-steps 6 --log "$TMP/b.log"
expect_rc 0 "fine-tuning, resumed"
losses() { json "$1" "[(x['step'], x['loss'], x['grad_norm']) for x in r if x['event'] == 'train']"; }
[ "$(losses "$TMP/a.log")" = "$(losses "$TMP/b.log")" ] \
  || fail "fine-tuning resumed: other losses: $(losses "$TMP/a.log") / $(losses "$TMP/b.log")"
err=$(same_model "$TMP/a/checkpoint_6.bin" "$TMP/b/checkpoint_6.bin" moments 2>&1) \
  || fail "fine-tuning resumed: other parameters: $err"

finish
