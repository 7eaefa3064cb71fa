# tfm-decode: every option's effect, batch invariance through the program,
# streaming, and bad input. Models are random tiny ones written by
# tiny_checkpoint (tests/tools) with a SentencePiece model
# trained here; --eos-logit gives one whose hypotheses end at all lengths.
source "$(dirname "$0")/common.bash"
unset TFM_MODEL
export OMP_NUM_THREADS=1  # many short runs; the invariance checks use two threads too
for i in $(seq 1 300); do
  echo "the cat $i sat on the mat number $((i * 7)) and a dog ran"
  echo "die Katze $i sass auf der Matte Nummer $((i * 3)) und ein Hund lief"
done >"$TMP/corpus"
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm.model" --vocab-size 64 "$TMP/corpus" || fail "tfm-tok train"
M="$TMP/tiny.bin"
"$TFM_TOOLS/tiny_checkpoint" "$M" --tokenizer "$TMP/spm.model" || fail "checkpoint fixture"
"$TFM_TOOLS/tiny_checkpoint" "$TMP/plain.bin" || fail "checkpoint fixture without tokenizer"
E="$TMP/eos.bin"  # ends hypotheses at many lengths
"$TFM_TOOLS/tiny_checkpoint" "$E" --tokenizer "$TMP/spm.model" --eos-logit 2.0 --seed 1 || fail "eos fixture"
head -n 12 "$TMP/corpus" >"$TMP/text"
"$TFM_BIN/tfm-tok" -m "$M" "$TMP/text" >"$TMP/in"
{ head -n 3 "$TMP/in"; echo; sed -n 4,12p "$TMP/in"; } >"$TMP/in13"  # line 4 empty
"$TFM_BIN/tfm-tok" -m "$M" --ids "$TMP/text" >"$TMP/ids"
json_field() {  # json_field FILE EXPRESSION: python over the JSON lines as `rows`
  python3 -c "import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; print($2)" "$1"
}
decode() { "$TFM_BIN/tfm-decode" -q "$@"; }

run tfm-decode --help
expect_rc 0 "--help"
grep -q "^Usage: tfm-decode" "$TMP/out" || fail "--help: no usage line"
run tfm-decode --version
grep -q "^tfm-decode tfm [0-9]" "$TMP/out" || fail "--version: got '$(cat "$TMP/out")'"

# The filter: one line out per line in, order kept, empty in -> empty out;
# stdin, FILE..., gzip, TFM_MODEL; a memory plan and a summary on stderr.
run tfm-decode -m "$M" "$TMP/in13"
expect_rc 0 "decode"
[ "$(wc -l <"$TMP/out")" -eq 13 ] || fail "decode: $(wc -l <"$TMP/out") lines for 13"
[ -z "$(sed -n 4p "$TMP/out")" ] || fail "decode: the empty line did not stay empty"
grep -q "kv-cache" "$TMP/err" || fail "decode: no memory plan on stderr"
grep -q "13 sentences" "$TMP/err" || fail "decode: no summary on stderr: $(cat "$TMP/err")"
cp "$TMP/out" "$TMP/best"
# The CPU's default batch is 32 sentences: the plan --batch-size 32 makes,
# not 256's; the output the same at each.
plan() { "$TFM_BIN/tfm-decode" -m "$M" "$@" "$TMP/in13" 2>&1 >"$TMP/plan.out" | grep "kv-cache"; }
[ "$(plan)" = "$(plan --batch-size 32)" ] || fail "the CPU's default batch is not 32: $(plan)"
[ "$(plan)" != "$(plan --batch-size 256)" ] || fail "the default batch plans as 256 does"
cmp -s "$TMP/plan.out" "$TMP/best" || fail "--batch-size 256 changes the output"
decode -m "$M" <"$TMP/in13" | cmp -s - "$TMP/best" || fail "stdin differs from FILE"
gzip -c "$TMP/in13" >"$TMP/in13.gz"
decode -m "$M" "$TMP/in13.gz" | cmp -s - "$TMP/best" || fail "gzip input differs"
TFM_MODEL="$M" "$TFM_BIN/tfm-decode" -q - <"$TMP/in13" | cmp -s - "$TMP/best" || fail "TFM_MODEL not used"
decode -m "$M" "$TMP/in13" "$TMP/in13" | cmp -s - <(cat "$TMP/best" "$TMP/best") || fail "two FILEs"
run tfm-decode -q -m "$M" "$TMP/in"
[ -s "$TMP/err" ] && fail "-q: stderr not silent: $(cat "$TMP/err")"
# The threads taking whole batches or each batch's rows: the same bits, on
# one thread, two, and more than the CPUs.
for threads in 1 2 3; do
  for take in batches rows; do
    OMP_NUM_THREADS=$threads decode -m "$M" --threads-take $take --batch-size 4 "$TMP/in13" \
      | cmp -s - "$TMP/best" || fail "--threads-take $take on $threads threads: other outputs"
  done
done
# Its effect: a decoder a thread for batches, one decoder for rows.
OMP_NUM_THREADS=2 "$TFM_BIN/tfm-decode" -m "$M" --threads-take batches "$TMP/in13" 2>&1 >/dev/null \
  | grep -q "(x2: a decoder a thread)" || fail "--threads-take batches on 2 threads: not a decoder a thread"
OMP_NUM_THREADS=2 "$TFM_BIN/tfm-decode" -m "$M" --threads-take rows "$TMP/in13" 2>&1 >/dev/null \
  | grep -q "a decoder a thread" && fail "--threads-take rows on 2 threads: more than one decoder"
run tfm-decode -m "$M" --threads-take columns "$TMP/in13"
expect_rc 2 "--threads-take columns"
cat "$TMP/text" | "$TFM_BIN/tfm-tok" -m "$M" | decode -m "$M" --detok >"$TMP/pipe" || fail "the README pipeline"
[ "$(wc -l <"$TMP/pipe")" -eq 12 ] || fail "pipeline: not one line per line"

# --ids in and out; --detok is the pieces decoded by the checkpoint's model.
decode -m "$M" --ids "$TMP/ids" >"$TMP/out_ids" || fail "--ids"
grep -qvE '^[0-9]+( [0-9]+)*$|^$' "$TMP/out_ids" && fail "--ids: output is not ids"
"$TFM_BIN/tfm-tok" -d --ids -m "$M" "$TMP/out_ids" >"$TMP/a"
"$TFM_BIN/tfm-tok" -d -m "$M" "$TMP/best" | sed 4d >"$TMP/b"
cmp -s "$TMP/a" "$TMP/b" || fail "--ids gives other translations than pieces"
decode -m "$M" --detok "$TMP/in13" >"$TMP/detok"
"$TFM_BIN/tfm-tok" -d -m "$M" "$TMP/best" | cmp -s - "$TMP/detok" || fail "--detok differs from tfm-tok -d"
decode -m "$TMP/plain.bin" --ids "$TMP/ids" >/dev/null || fail "a checkpoint without tokenizer, --ids"

# Batch invariance: the same bits at any batch size, token budget and
# thread count. On a model of 64 rows, given ids (the fixtures above embed
# their tokenizer, so their vocabulary is its 29 pieces, where the scores'
# last bits do move with the batch: issue 19's closing note).
"$TFM_TOOLS/tiny_checkpoint" "$TMP/eos64.bin" --eos-logit 2.0 --seed 1 || fail "eos fixture of 64 rows"
{ head -n 3 "$TMP/ids"; echo; sed -n 4,12p "$TMP/ids"; } >"$TMP/ids13"
decode -m "$TMP/eos64.bin" --ids --json -n 3 "$TMP/ids13" >"$TMP/j64"
for opts in "--batch-size 1" "--batch-size 7" "--max-tokens 10" "--batch-size 3 --max-tokens 40"; do
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=2 decode -m "$TMP/eos64.bin" --ids --json -n 3 $opts "$TMP/ids13" | cmp -s - "$TMP/j64" \
    || fail "$opts changes the output"
done

# --batch-size 1 answers each line before the next is written (a coprocess).
coproc DEC { "$TFM_BIN/tfm-decode" -q -m "$M" --batch-size 1; }
dec_pid=$DEC_PID  # (bash unsets DEC_PID once the coprocess has exited)
for i in 1 2 3; do
  sed -n "${i}p" "$TMP/in" >&"${DEC[1]}"
  IFS= read -r -t 60 line <&"${DEC[0]}" || { fail "--batch-size 1: no answer to line $i"; break; }
  [ "$line" = "$(sed -n "${i}p" "$TMP/best")" ] || fail "--batch-size 1: line $i differs"
done
exec {DEC[1]}>&-
wait "$dec_pid" || fail "--batch-size 1: exit status"

# Search options, each by its observable effect.
decode -m "$E" --json --alpha 0 "$TMP/in" >"$TMP/a0"
[ "$(json_field "$TMP/a0" "all(h['score'] == h['log_prob'] for r in rows for h in r['hypotheses'])")" = True ] \
  || fail "--alpha 0: score is not the log-probability"
for form in gnmt plain; do
  decode -m "$E" --json --alpha 0.6 --length-penalty $form -n 2 "$TMP/in" >"$TMP/lp"
  lp="((5 + n) / 6) ** 0.6"
  [ $form = plain ] && lp="n ** 0.6"
  ok=$(json_field "$TMP/lp" "all(abs(h['score'] * (lambda n: $lp)(len(h['tokens']) + 1) - h['log_prob']) < 1e-9 * abs(h['log_prob']) + 1e-12 for r in rows for h in r['hypotheses'])")
  [ "$ok" = True ] || fail "--length-penalty $form: score != log_prob / lp"
  [ "$(json_field "$TMP/lp" "all(abs(sum(h['token_log_probs']) - h['log_prob']) < 1e-4 for r in rows for h in r['hypotheses'])")" = True ] \
    || fail "--json: token log-probabilities do not sum to log_prob"
done
decode -m "$E" --scores --beam 1 "$TMP/in" >"$TMP/b1"
decode -m "$E" --scores --beam 4 "$TMP/in" >"$TMP/b4"
cmp -s "$TMP/b1" "$TMP/b4" && fail "--beam 1 and --beam 4 agree on every line"
printf 'beam = 1\nscores = true\n' >"$TMP/decode.ini"
decode -m "$E" --config "$TMP/decode.ini" "$TMP/in" | cmp -s - "$TMP/b1" || fail "--config: beam = 1 not read"
decode -m "$E" --config "$TMP/decode.ini" --beam 4 "$TMP/in" | cmp -s - "$TMP/b4" || fail "--config: the command line does not win"
decode -m "$M" --max-len-a 0 --max-len-b 3 "$TMP/in" | awk 'NF > 3 {exit 1}' || fail "--max-len-b 3: a longer output"
decode -m "$M" --max-len-a 0.5 --max-len-b 0 --ids "$TMP/ids" | paste - "$TMP/ids" |
  awk -F'\t' '{n = split($1, a, " "); m = split($2, b, " "); if (n > int(0.5 * m)) exit 1}' || fail "--max-len-a 0.5: a longer output"
# Early stopping: bound gives what running to the end gives; beam (fairseq's
# rule: stop at beam-size finished hypotheses) may differ. A length penalty
# that rewards length strongly (alpha 2) is where it does: a longer
# hypothesis still running can beat the finished ones.
found=0
for x in 2.0 2.5; do
  for seed in 1 2; do
    "$TFM_TOOLS/tiny_checkpoint" "$TMP/es.bin" --tokenizer "$TMP/spm.model" --eos-logit $x --seed $seed
    for alpha in 0.6 2; do
      decode -m "$TMP/es.bin" --scores -n 2 --alpha $alpha "$TMP/in" --early-stopping bound >"$TMP/es_bound"
      decode -m "$TMP/es.bin" --scores -n 2 --alpha $alpha "$TMP/in" --early-stopping never | cmp -s - "$TMP/es_bound" ||
        fail "--early-stopping bound differs from never (eos logit $x, seed $seed, alpha $alpha)"
      decode -m "$TMP/es.bin" --scores -n 2 --alpha $alpha "$TMP/in" --early-stopping beam | cmp -s - "$TMP/es_bound" || found=1
    done
  done
done
[ $found = 1 ] || fail "--early-stopping beam never differed from bound"

# Output options: --n-best, --scores, --json, --attention*.
decode -m "$E" -n 3 --scores "$TMP/in13" >"$TMP/nb"
[ "$(wc -l <"$TMP/nb")" -eq 37 ] || fail "--n-best 3: $(wc -l <"$TMP/nb") lines for 12 x 3 + 1 empty"
awk -F'\t' '$1 !~ /^[0-9]+$/ || $2 !~ /^-?[0-9]+\.[0-9]+$/ {exit 1}' "$TMP/nb" || fail "--n-best --scores: not LINE<TAB>SCORE<TAB>HYP"
awk -F'\t' '$1 == 4 {n++} END {exit n != 1}' "$TMP/nb" || fail "--n-best: the empty line is not one empty hypothesis"
awk -F'\t' 'prev == $1 && $2 > score + 0 {exit 1} {prev = $1; score = $2}' "$TMP/nb" || fail "--n-best: not best first"
decode -m "$E" -n 3 "$TMP/in13" | cut -f1 | uniq -c | awk '$1 > 3 {exit 1}' || fail "--n-best 3: more than 3"
decode -m "$E" --scores "$TMP/in" | awk -F'\t' 'NF != 2 {exit 1}' || fail "--scores: not SCORE<TAB>HYP"
decode -m "$M" --json --detok --attention -n 2 "$TMP/in13" >"$TMP/j"
[ "$(json_field "$TMP/j" "len(rows)")" = 13 ] || fail "--json: not one object a line"
[ "$(json_field "$TMP/j" "[r['line'] for r in rows] == list(range(1, 14)) and all(len(r['hypotheses']) == (1 if r['line'] == 4 else 2) for r in rows)")" = True ] \
  || fail "--json: lines or n-best wrong"
[ "$(json_field "$TMP/j" "all('text' in h and len(h['attention']) == len(h['tokens']) + 1 for r in rows if r['line'] != 4 for h in r['hypotheses'])")" = True ] \
  || fail "--json --attention: no text or one attention row per token and eos"
[ "$(json_field "$TMP/j" "all(abs(sum(a) - 1) < 1e-4 for r in rows for h in r['hypotheses'] for a in h['attention'])")" = True ] \
  || fail "--attention: rows do not sum to 1"
decode -m "$M" --json --attention --attention-heads "$TMP/in" >"$TMP/jh"
[ "$(json_field "$TMP/jh" "all(len(a) == 4 for r in rows for h in r['hypotheses'] for a in h['attention'])")" = True ] \
  || fail "--attention-heads: not 4 heads per row"
decode -m "$M" --json --attention --attention-layer 1 "$TMP/in" >"$TMP/jl1"
decode -m "$M" --json --attention --attention-layer 2 "$TMP/in" >"$TMP/jl2"
cmp -s "$TMP/jl1" "$TMP/jl2" && fail "--attention-layer 1 and 2 agree"
decode -m "$M" --json --attention "$TMP/in" | cmp -s - "$TMP/jl2" || fail "--attention: not the last layer by default"

# Limits: --max-input-len rejects with FILE:LINE (lines before it written), --truncate cuts.
run tfm-decode -m "$M" --max-input-len 20 "$TMP/in13"
expect_rc 1 "--max-input-len"
expect_one_error_line tfm-decode "--max-input-len"
line=$(awk 'NF > 20 {print NR; exit}' "$TMP/in13")
grep -q "in13:$line" "$TMP/err" || fail "--max-input-len: no FILE:LINE: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/out")" -eq $((line - 1)) ] || fail "--max-input-len: the lines before the bad one were not written"
run tfm-decode -m "$M" --max-input-len 20 --truncate "$TMP/in13"
expect_rc 0 "--truncate"
grep -q "warning" "$TMP/err" || fail "--truncate: no warning"
awk '{NF = (NF > 20 ? 20 : NF)} 1' "$TMP/in13" | decode -m "$M" --max-input-len 20 | cmp -s - "$TMP/out" ||
  fail "--truncate: not the translation of the cut line"
decode -m "$M" --device cpu "$TMP/in13" | cmp -s - "$TMP/best" || fail "--device cpu"
decode -m "$M" --precision fp32 "$TMP/in13" | cmp -s - "$TMP/best" || fail "--precision fp32"
decode -m "$M" --precision auto --device cpu "$TMP/in13" | cmp -s - "$TMP/best" || fail "--precision auto: not fp32 on the CPU"
# int8: 8-bit weights, the same output at any batch size (integer sums), and
# a translation that stays mostly that of fp32 (the random tiny model's margins are thin).
decode -m "$M" --precision int8 "$TMP/in13" >"$TMP/int8" || fail "--precision int8"
[ "$(wc -l <"$TMP/int8")" -eq "$(wc -l <"$TMP/best")" ] || fail "--precision int8: not a line per input"
decode -m "$M" --precision int8 --batch-size 1 "$TMP/in13" | cmp -s - "$TMP/int8" || fail "--precision int8: --batch-size 1 changes the output"
"$TFM_BIN/tfm-decode" -m "$M" --precision int8 "$TMP/in13" 2>&1 >/dev/null | grep "int8 weights" | grep -q "packed weights" \
  || fail "--precision int8: the memory report does not name the int8 weights and their panels"
"$TFM_BIN/tfm-decode" -m "$M" "$TMP/in13" 2>&1 >/dev/null | grep -q "packed weights" \
  || fail "fp32: the memory report does not name the weights packed for the GEMM"
# TFM_ROW_GEMM caps the CPU decoder's path (man tfm.7, for A/B runs): the
# AVX2 and portable paths give the widest one's bits, fp32 and int8 (n-best
# lists and scores); and the attention's, whose head sizes 16, 32 and 64
# take register paths of their own (several heads at once; five heads
# leave one over), with its weights.
for precision in fp32 int8; do
  decode -m "$E" --precision $precision --scores -n 3 "$TMP/in" >"$TMP/path_best" || fail "$precision"
  for path in avx2 portable; do
    TFM_ROW_GEMM=$path decode -m "$E" --precision $precision --scores -n 3 "$TMP/in" | cmp -s - "$TMP/path_best" \
      || fail "TFM_ROW_GEMM=$path changes the $precision output"
  done
done
for heads in "4 16" "4 32" "5 32" "2 64"; do
  read -r h dk <<<"$heads"
  "$TFM_TOOLS/tiny_checkpoint" "$TMP/heads.bin" --tokenizer "$TMP/spm.model" --eos-logit 2.0 --seed 3 \
    --set d_model=64 --set heads="$h" --set d_k="$dk" --set d_v="$dk" || fail "checkpoint fixture, $h heads of $dk"
  decode -m "$TMP/heads.bin" --json --attention --attention-heads -n 2 "$TMP/in" >"$TMP/path_best" \
    || fail "$h heads of $dk"
  TFM_ROW_GEMM=avx2 decode -m "$TMP/heads.bin" --json --attention --attention-heads -n 2 "$TMP/in" \
    | cmp -s - "$TMP/path_best" || fail "TFM_ROW_GEMM=avx2 changes the output of $h heads of $dk"
done
for bad in "--device cuda" "--precision bf16 --device cpu" "--precision int8 --device cuda"; do
  # shellcheck disable=SC2086
  run tfm-decode -m "$M" $bad "$TMP/in"
  expect_rc 1 "$bad"
  expect_one_error_line tfm-decode "$bad"
done

# Bad usage: exit 2, one error line.
run tfm-decode "$TMP/in"
expect_rc 2 "no model"
grep -q "TFM_MODEL" "$TMP/err" || fail "no model: does not mention TFM_MODEL"
for bad in "--bogus" "--beam 0" "--beam 2 --n-best 3" "--alpha -1" "--length-penalty wu" \
  "--early-stopping soon" "--max-len-a -1" "--max-tokens 0" "--batch-size -1" "--max-input-len 0" \
  "--attention" "--attention-heads --json" "--attention-layer 1 --json" "--scores --json" \
  "--device tpu" "--precision fp64" "--config $TMP/missing.ini"; do
  # shellcheck disable=SC2086
  run tfm-decode -m "$M" $bad "$TMP/in"
  expect_rc 2 "$bad"
  expect_one_error_line tfm-decode "$bad"
done

# Bad input: exit 1, one error line naming the problem.
run tfm-decode -m "$TMP/none.bin" "$TMP/in"
expect_rc 1 "missing checkpoint"
grep -q "none.bin" "$TMP/err" || fail "missing checkpoint not named"
for wrong in "$TMP/spm.model" "$TMP/in"; do
  run tfm-decode -m "$wrong" "$TMP/in"
  expect_rc 1 "not a checkpoint: $wrong"
  expect_one_error_line tfm-decode "not a checkpoint: $wrong"
done
head -c 2000 "$M" >"$TMP/torn.bin"
run tfm-decode -m "$TMP/torn.bin" "$TMP/in"
expect_rc 1 "torn checkpoint"
expect_one_error_line tfm-decode "torn checkpoint"
run tfm-decode -m "$TMP/plain.bin" "$TMP/in"
expect_rc 1 "no tokenizer"
grep -q -- "--ids" "$TMP/err" || fail "no tokenizer: does not point to --ids"
run tfm-decode -m "$M" --attention-layer 3 --attention --json "$TMP/in"
expect_rc 2 "--attention-layer past the layers"  # a bad value: usage
expect_one_error_line tfm-decode "--attention-layer past the layers"
printf '5 6\n7 64\n' >"$TMP/badids"
run tfm-decode -m "$M" --ids "$TMP/badids"
expect_rc 1 "id out of range"
expect_one_error_line tfm-decode "id out of range"
grep -q "badids:2" "$TMP/err" || fail "id out of range: no FILE:LINE: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/out")" -eq 1 ] || fail "id out of range: the line before it was not written"
printf '5 x\n' >"$TMP/notids"
run tfm-decode -m "$M" --ids "$TMP/notids"
expect_rc 1 "not an id"
grep -q "notids:1" "$TMP/err" || fail "not an id: no FILE:LINE"
run tfm-decode -m "$M" "$TMP/missing.txt"
expect_rc 1 "missing input"
grep -q "missing.txt" "$TMP/err" || fail "missing input not named"

# Bash completion: every option of --help, and values for the choices.
completion="$TFM_SOURCE/share/completions/tfm-decode.bash"
for option in $("$TFM_BIN/tfm-decode" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
  grep -q -- "$option" "$completion" || fail "completion: $option missing"
done
complete_words() {  # complete_words WORD...: what completing the last word offers
  COMP_WORDS=(tfm-decode "$@")
  COMP_CWORD=$#
  COMPREPLY=()
  _tfm_decode
  echo "${COMPREPLY[*]}"
}
# shellcheck disable=SC1090
source "$completion"
[ "$(complete_words --length-penalty "")" = "gnmt plain" ] || fail "completion: --length-penalty"
[ "$(complete_words --early-stopping b)" = "bound beam" ] || fail "completion: --early-stopping"
complete_words --n-be | grep -q -- "--n-best" || fail "completion: --n-best"

# Sampling: -n samples a line as LINE<TAB>HYP lines, the same at any batch
# size or thread split (each line's draws are keyed by its number), other
# samples under another seed, top-k 1 is greedy search; bad values are
# usage errors.
decode -m "$E" --sampling -n 3 --seed 5 "$TMP/in" >"$TMP/s1" || fail "sampling"
[ "$(wc -l <"$TMP/s1")" -eq $((3 * $(wc -l <"$TMP/in"))) ] || fail "sampling: not 3 lines a line"
[ "$(cut -f1 "$TMP/s1" | uniq -c | awk '{ print $1 }' | sort -u)" = 3 ] || fail "sampling: LINE numbers"
decode -m "$E" --sampling -n 3 --seed 5 --batch-size 1 "$TMP/in" | cmp -s - "$TMP/s1" || fail "sampling: batch size 1"
OMP_NUM_THREADS=2 decode -m "$E" --sampling -n 3 --seed 5 --threads-take batches --batch-size 2 "$TMP/in" |
  cmp -s - "$TMP/s1" || fail "sampling: two threads taking batches"
decode -m "$E" --sampling -n 3 --seed 6 "$TMP/in" | cmp -s - "$TMP/s1" && fail "sampling: seeds 5 and 6 drew alike"
decode -m "$E" --sampling --sampling-topk 1 --temperature 0.5 "$TMP/in" >"$TMP/s2" || fail "sampling top-k 1"
decode -m "$E" --beam 1 "$TMP/in" | cmp -s - "$TMP/s2" || fail "sampling: top-k 1 is not greedy search"
for bad in "--sampling --sampling-topp 0" "--sampling --sampling-topp 1.5" "--sampling --temperature 0" \
           "--seed 3" "--sampling-topk 4" "--sampling --beam 2"; do
  # shellcheck disable=SC2086
  run tfm-decode -m "$E" $bad "$TMP/in"
  expect_rc 2 "$bad"
  expect_one_error_line tfm-decode "$bad"
done

# Ensembles: -m twice. Copies of one model give its output and scores bit
# for bit; a zero weight leaves a model out; two models give their own;
# models with other vocabularies are refused, naming both.
"$TFM_TOOLS/tiny_checkpoint" "$TMP/other.bin" --tokenizer "$TMP/spm.model" --seed 5 || fail "second model fixture"
decode -m "$M" -n 2 --scores "$TMP/in" >"$TMP/one" || fail "decode one model"
decode -m "$M" -m "$M" -m "$M" -n 2 --scores "$TMP/in" | cmp -s - "$TMP/one" || fail "ensemble of copies: not the model's output"
decode -m "$M" -m "$TMP/other.bin" --weights 1,0 -n 2 --scores "$TMP/in" | cmp -s - "$TMP/one" ||
  fail "ensemble with a zero weight: not the first model's output"
decode -m "$M" -m "$TMP/other.bin" -n 2 --scores "$TMP/in" | cmp -s - "$TMP/one" && fail "ensemble of two models: the first's output"
run tfm-decode -m "$M" -m "$TMP/other.bin" "$TMP/in"
expect_rc 0 "ensemble"
[ "$(grep -c "^tfm-decode: .* on cpu: model " "$TMP/err")" = 2 ] || fail "ensemble: memory not reported a model: $(cat "$TMP/err")"
run tfm-decode -m "$M" -m "$TMP/plain.bin" "$TMP/in"
expect_rc 1 "ensemble of other vocabularies"
expect_one_error_line tfm-decode "ensemble of other vocabularies"
grep -q "tiny.bin and .*plain.bin have other vocabularies" "$TMP/err" || fail "ensemble: the refusal names neither model"
run tfm-decode -m "$M" -m "$TMP/other.bin" --weights 1 "$TMP/in"
expect_rc 2 "--weights of another count"
run tfm-decode -m "$M" -m "$TMP/other.bin" --shortlist "$TMP/in" "$TMP/in"
expect_rc 2 "an ensemble with a shortlist"

# Alignments: each target piece's most attended source piece, as the JSON's
# attention weights give it (computed here apart), " ||| i-j" after the
# hypothesis; words: those links merged at the pieces' word boundaries.
decode -m "$M" --json --attention --alignment pieces "$TMP/in" >"$TMP/al.json" || fail "--alignment with --json"
python3 - "$TMP/al.json" <<'PY' || fail "--alignment: not the attention's argmax"
import json, sys
for line in open(sys.argv[1]):
    for h in json.loads(line)["hypotheses"]:
        want = [[max(range(len(row)), key=lambda i: (row[i], -i)), j] for j, row in enumerate(h["attention"][:len(h["tokens"])])]
        assert h["alignment"] == want, (h["alignment"], want)
PY
decode -m "$M" --alignment pieces "$TMP/in" >"$TMP/al.txt" || fail "--alignment pieces"
decode -m "$M" "$TMP/in" | cmp -s - <(sed 's/ |||.*//' "$TMP/al.txt") || fail "--alignment changed the hypotheses"
decode -m "$M" --alignment words "$TMP/in" >"$TMP/alw.txt" || fail "--alignment words"
python3 - "$TMP/in" "$TMP/al.txt" "$TMP/alw.txt" <<'PY' || fail "--alignment words: not the pieces' links merged to words"
import sys
def words(pieces):
    out, w = [], -1
    for i, p in enumerate(pieces):
        w += i == 0 or p.startswith("\u2581")
        out.append(w)
    return out
for src, al, alw in zip(open(sys.argv[1]), open(sys.argv[2]), open(sys.argv[3])):
    hyp, links = al.rstrip("\n").split(" |||")
    sw, tw = words(src.split()), words(hyp.split())
    want = sorted({(sw[int(x)], tw[int(y)]) for x, y in (l.split("-") for l in links.split())})
    got = [tuple(int(v) for v in l.split("-")) for l in alw.rstrip("\n").split(" |||")[1].split()]
    assert got == want, (got, want)
PY
run tfm-decode -m "$M" --alignment pieces --alignment-heads 99 "$TMP/in"
expect_rc 2 "--alignment-heads past the heads"
run tfm-decode -m "$M" --alignment-layer 1 "$TMP/in"
expect_rc 2 "--alignment-layer without --alignment"
run tfm-decode -m "$TMP/plain.bin" --ids --alignment words "$TMP/ids"
expect_rc 1 "--alignment words without a tokenizer"
expect_one_error_line tfm-decode "--alignment words without a tokenizer"

# Target prefixes (--prefix FILE, a line a line) and constraints (--constraints,
# TAB fields): every output starts with its prefix and contains every
# phrase, at any beam, batch or thread split; without them, or with empty
# ones, the output is the plain one bit for bit; bad files and fields are
# bad input naming FILE:LINE, bad combinations usage.
awk '{ print $1, $2 }' "$TMP/ids13" | sed 's/^ $//' >"$TMP/prefix13"  # line 4 empty: no prefix
awk 'NF { printf "%s\t%s %s\t%s\n", $0, $3, $4, $5; next } { print }' "$TMP/ids13" >"$TMP/cons13"
decode -m "$M" --ids "$TMP/ids13" >"$TMP/plain13"
sed 's/.*//' "$TMP/ids13" >"$TMP/noprefix13"
decode -m "$M" --ids --prefix "$TMP/noprefix13" "$TMP/ids13" | cmp -s - "$TMP/plain13" || fail "--prefix of empty lines changes the output"
decode -m "$M" --ids --constraints "$TMP/ids13" | cmp -s - "$TMP/plain13" || fail "--constraints without TAB fields changes the output"
for beam in 1 4; do
  decode -m "$M" --ids --beam $beam -n $beam --json --prefix "$TMP/prefix13" --constraints "$TMP/cons13" >"$TMP/pc$beam" \
    || fail "--prefix --constraints, beam $beam"
  ok=$(python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
pre = [l.split() for l in open(sys.argv[2])]
cons = [[c.split() for c in l.rstrip('\n').split('\t')[1:]] for l in open(sys.argv[3])]
has = lambda t, p: any(t[i:i + len(p)] == p for i in range(len(t) - len(p) + 1))
print(len(rows) == 13 and all(len(r['hypotheses']) == (1 if r['line'] == 4 else $beam) and all(
    [str(x) for x in h['tokens'][:len(pre[i])]] == pre[i] and all(has([str(x) for x in h['tokens']], c) for c in cons[i])
    for h in r['hypotheses']) for i, r in enumerate(rows)))" "$TMP/pc$beam" "$TMP/prefix13" "$TMP/cons13")
  [ "$ok" = True ] || fail "--prefix --constraints, beam $beam: an output without its prefix or a phrase"
done
for opts in "--batch-size 1" "--batch-size 3 --max-tokens 20" "--threads-take rows"; do
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=2 decode -m "$M" --ids --beam 4 -n 4 --json --prefix "$TMP/prefix13" --constraints $opts "$TMP/cons13" |
    cmp -s - "$TMP/pc4" || fail "--prefix --constraints: $opts changes the output"
done
gzip -c "$TMP/prefix13" >"$TMP/prefix13.gz"
decode -m "$M" --ids --beam 4 -n 4 --json --prefix - --constraints "$TMP/cons13" <"$TMP/prefix13.gz" | cmp -s - "$TMP/pc4" \
  || fail "--prefix - (gzip on stdin) differs from --prefix FILE"
# Prefixes count over all inputs: two FILEs, one prefix file.
cat "$TMP/prefix13" "$TMP/prefix13" >"$TMP/prefix26"
decode -m "$M" --ids --beam 4 -n 4 --json --prefix "$TMP/prefix26" --constraints "$TMP/cons13" "$TMP/cons13" >"$TMP/pc26"
python3 -c "
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
sys.exit(a[13:] != [dict(r, line=r['line'] + 13) for r in b])" "$TMP/pc26" "$TMP/pc4" \
  || fail "--prefix over two FILEs: the second FILE's lines do not take their prefixes"
decode -m "$E" --sampling -n 2 --prefix "$TMP/prefix13" --ids "$TMP/ids13" |
  awk -F'\t' 'NR == FNR { prefix[NR] = $0; next } prefix[$1] != "" && index($2 " ", prefix[$1] " ") != 1 { exit 1 }' \
    "$TMP/prefix13" - || fail "--sampling --prefix: a sample without its prefix"
# A line's output grows to hold its phrases.
printf '5 6\t7 8 9 10 11 12\n' >"$TMP/longcons"
decode -m "$M" --ids --constraints --max-len-a 0 --max-len-b 2 "$TMP/longcons" | grep -q "7 8 9 10 11 12" \
  || fail "--constraints: a phrase longer than --max-len-b not met"
head -n 5 "$TMP/prefix13" >"$TMP/prefix5"
run tfm-decode -m "$M" --ids --prefix "$TMP/prefix5" "$TMP/ids13"
expect_rc 1 "--prefix with fewer lines"
expect_one_error_line tfm-decode "--prefix with fewer lines"
grep -q "prefix5:6" "$TMP/err" || fail "--prefix with fewer lines: no FILE:LINE of the prefix file: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/out")" -eq 5 ] || fail "--prefix with fewer lines: the lines before were not written"
run tfm-decode -m "$M" --ids --prefix "$TMP/prefix26" "$TMP/ids13"
expect_rc 1 "--prefix with more lines"
expect_one_error_line tfm-decode "--prefix with more lines"
grep -q "prefix26:14" "$TMP/err" || fail "--prefix with more lines: no FILE:LINE of the prefix file: $(cat "$TMP/err")"
printf '5 6\t7\n5 6\t\t8\n' >"$TMP/emptycons"
printf '5 6\t7\t\n' >"$TMP/trailingtab"
for bad in emptycons trailingtab; do
  run tfm-decode -m "$M" --ids --constraints "$TMP/$bad"
  expect_rc 1 "--constraints, $bad"
  expect_one_error_line tfm-decode "--constraints, $bad"
  grep -q "is empty ($TMP/$bad:[12])" "$TMP/err" || fail "--constraints, $bad: no FILE:LINE: $(cat "$TMP/err")"
done
printf '\t7\n' >"$TMP/emptysource"
refused tfm-decode "--constraints on an empty line" "emptysource:1" -m "$M" --ids --constraints "$TMP/emptysource"
# Planned: 2 tokens for a line of 3, and 3 more for a prefix.
printf '5 6 7 8 9 10\n' >"$TMP/longprefix"
printf '5 6\n' >"$TMP/short"
refused tfm-decode "a prefix over the planned length" "short:1" \
  -m "$M" --ids --max-len-a 0 --max-len-b 2 --max-input-len 3 --prefix "$TMP/longprefix" "$TMP/short"
refused tfm-decode "a missing prefix file" "missing.prefix" -m "$M" --ids --prefix "$TMP/missing.prefix" "$TMP/ids13"
for bad in "--constraints --sampling" "--prefix -"; do
  # shellcheck disable=SC2086
  run tfm-decode -m "$M" --ids $bad
  expect_rc 2 "$bad"
  expect_one_error_line tfm-decode "$bad"
done

# --shortlist: every output piece is a candidate of its line (its source
# pieces' lists, the pieces every line gets, eos), the same at any batch
# size, fp32 and int8; bad files exit 1 naming FILE:LINE, bad usage 2.
awk 'NR % 2 == 1' "$TMP/corpus" | head -n 200 | "$TFM_BIN/tfm-tok" -m "$M" >"$TMP/sl.src"
awk 'NR % 2 == 0' "$TMP/corpus" | head -n 200 | "$TFM_BIN/tfm-tok" -m "$M" >"$TMP/sl.tgt"
"$TFM_BIN/tfm-tok" shortlist -q -o "$TMP/list" --best 4 --frequent 3 --min-count 1 "$TMP/sl.src" "$TMP/sl.tgt" \
  || fail "tfm-tok shortlist"
for precision in fp32 int8; do
  decode -m "$E" --precision $precision --shortlist "$TMP/list" "$TMP/in" >"$TMP/listed" || fail "--shortlist ($precision)"
  [ "$(wc -l <"$TMP/listed")" -eq "$(wc -l <"$TMP/in")" ] || fail "--shortlist: not a line per input"
  decode -m "$E" --precision $precision --shortlist "$TMP/list" --batch-size 1 "$TMP/in" | cmp -s - "$TMP/listed" \
    || fail "--shortlist ($precision): --batch-size 1 changes the output"
  python3 - "$TMP/list" "$TMP/in" "$TMP/listed" <<'PY' || fail "--shortlist ($precision): an output piece outside its line's candidates"
import sys
lines = open(sys.argv[1]).read().split("\n")[1:]
every, lists = set(), {}
for l in lines:
    if not l: continue
    src, tgts = l.split("\t")
    if src: lists[src] = set(tgts.split())
    else: every = set(tgts.split())
for src, out in zip(open(sys.argv[2]), open(sys.argv[3])):
    allowed = set(every)
    for p in src.split(): allowed |= lists.get(p, set())
    extra = [p for p in out.split() if p not in allowed]
    # a line's set is filled up with the lowest ids to 2 W pieces when shorter
    if len(allowed) >= 8 and extra: sys.exit(f"{extra} not among {sorted(allowed)}")
PY
done
decode -m "$E" --shortlist "$TMP/list" --scores "$TMP/in" >/dev/null || fail "--shortlist --scores"
"$TFM_BIN/tfm-decode" -m "$E" --shortlist "$TMP/list" "$TMP/in" 2>&1 >/dev/null | grep -q "shortlist of up to" \
  || fail "--shortlist: the memory report does not name the shortlist"
run tfm-decode -m "$E" --shortlist "" "$TMP/in"
expect_rc 2 "--shortlist ''"
expect_one_error_line tfm-decode "--shortlist ''"
run tfm-decode -m "$E" --shortlist "$TMP/no-list" "$TMP/in"
expect_rc 1 "missing shortlist"
expect_one_error_line tfm-decode "missing shortlist"
grep -q "no-list" "$TMP/err" || fail "missing shortlist not named"
printf 'tfm-shortlist 1\n\xe2\x96\x81the\tnot-a-piece-here\n' >"$TMP/badlist"
printf 'a shortlist\n' >"$TMP/notlist"
for bad in badlist notlist; do
  run tfm-decode -m "$E" --shortlist "$TMP/$bad" "$TMP/in"
  expect_rc 1 "bad shortlist $bad"
  expect_one_error_line tfm-decode "bad shortlist $bad"
  grep -q "$bad:[12]" "$TMP/err" || fail "bad shortlist $bad: no FILE:LINE: $(cat "$TMP/err")"
  [ -s "$TMP/out" ] && fail "bad shortlist $bad: output written"
done
run tfm-decode -m "$TMP/plain.bin" --ids --shortlist "$TMP/list" "$TMP/ids"
expect_rc 1 "--shortlist without a tokenizer"
expect_one_error_line tfm-decode "--shortlist without a tokenizer"

# Several GPUs, the Unix way (man tfm-decode, EXAMPLES): parts decoded
# apart and joined in order give the output of one run.
decode -m "$E" "$TMP/in" >"$TMP/whole" || fail "decode the whole"
split -n l/3 -d "$TMP/in" "$TMP/part."
for p in "$TMP"/part.0?; do decode -m "$E" "$p" >"$p.out" || fail "decode $p"; done
cat "$TMP"/part.0?.out | cmp -s - "$TMP/whole" || fail "split, decoded apart and joined: not one run's output"

finish
