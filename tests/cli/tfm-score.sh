# tfm-score: every option's effect, every bad input.
source "$(dirname "$0")/common.bash"
P=tfm-score
EX="$TFM_SOURCE/../shared/data/sacrebleu-tests/api-examples"
if [ ! -f "$EX/readme.hyp" ]; then
  echo "FAIL: tfm-score's test needs $EX (../shared)" >&2
  exit 1
fi
H=$EX/readme.hyp R0=$EX/readme.ref0 R1=$EX/readme.ref1
json() { python3 -c "import json,sys; d=json.load(open('$TMP/out')); print($1)"; }
tfm_version() { "$TFM_BIN/$P" --version | sed 's/.*tfm \([0-9.]*\).*/\1/'; }
# score ARGS...: runs tfm-score -b -w 6 and puts the number in $got.
score() { run $P -b -w 6 "$@"; got=$(cat "$TMP/out"); }
expect() {  # expect WANT DESCRIPTION
  [ "$rc" -eq 0 ] || fail "$2: exit $rc: $(cat "$TMP/err")"
  [ "$got" = "$1" ] || fail "$2: got '$got', expected '$1'"
}

run $P --help
expect_rc 0 "--help"
grep -q "^Usage: tfm-score" "$TMP/out" || fail "--help: no usage line"
run $P --version
expect_rc 0 "--version"

# The default line: sacreBLEU's format and signature, our version.
run $P -r "$R0" "$R1" -i "$H"
expect_rc 0 "default"
grep -qx 'BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:tfm-[0-9.]* = 48.5 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)' \
  "$TMP/out" || fail "default line: $(cat "$TMP/out")"
# stdin, '-' and gzip give the same.
"$TFM_BIN/$P" -r "$R0" "$R1" <"$H" >"$TMP/stdin" 2>&1 || fail "stdin: exit $?"
cmp -s "$TMP/stdin" "$TMP/out" || fail "stdin differs from -i"
"$TFM_BIN/$P" -r "$R0" "$R1" -i - <"$H" >"$TMP/dash" 2>&1
cmp -s "$TMP/dash" "$TMP/out" || fail "-i - differs from -i"
gzip -c "$R0" >"$TMP/r0.gz"
run $P -r "$TMP/r0.gz" "$R1" -i "$H"
cmp -s "$TMP/out" "$TMP/stdin" || fail "gzip reference differs"

# -b, -w, tokenizers (both spellings), smoothing, -lc: sacreBLEU's values.
score -r "$R0" "$R1" -i "$H"; expect 48.530827 "-b -w 6"
score -r "$R0" "$R1" -i "$H" --tokenize none; expect 49.191957 "--tokenize none"
score -r "$R0" "$R1" -i "$H" -tok intl; expect 43.916235 "-tok intl"
score -r "$R0" "$R1" -i "$H" -tok 13a -s none; expect 48.530827 "-s none"
run $P -r "$R0" -i "$H" -w 0 -b; [ "$(cat "$TMP/out")" = 45 ] || fail "-w 0: $(cat "$TMP/out")"
run $P -r "$R0" -i "$H" --width 3 --score-only; [[ "$(cat "$TMP/out")" =~ ^[0-9]+\.[0-9]{3}$ ]] || fail "--width 3"
S=$EX/sentence.hyp SR=$EX/sentence.ref
score -r "$SR" -i "$S" --sentence-level -w 3; expect 8.493 "--sentence-level (exp)"
score -r "$SR" -i "$S" -sl -s floor -w 5; expect 4.51688 "-s floor"
score -r "$SR" -i "$S" -sl -s floor --smooth-value 0.5 -w 2; expect 10.10 "--smooth-value 0.5"
score -r "$SR" -i "$S" -sl --smooth-method add-k -w 2; expect 14.88 "add-k"
score -r "$SR" -i "$S" -sl -s add-k -sv 2 -w 3; expect 21.389 "-sv 2"
score -r "$SR" -i "$S" -sl -tok char -w 3; expect 40.876 "-tok char"
score -r "$SR" -i "$S" -sl -tok char -lc -w 3; expect 42.027 "-lc"
score -r "$SR" -i "$S" -sl -tok char --lowercase -w 3; expect 42.027 "--lowercase"
run $P -r "$SR" -i "$S" -sl -s floor
grep -q '|eff:yes|tok:13a|smooth:floor\[0.10\]|' "$TMP/out" || fail "sentence signature: $(cat "$TMP/out")"
run $P -r "$SR" -i "$S" -s add-k -sv 2
grep -q '|eff:no|tok:13a|smooth:add-k\[2.00\]|' "$TMP/out" || fail "add-k signature: $(cat "$TMP/out")"

# chrF, chrF++ and its options; TER and its options; several metrics aligned.
run $P -r "$R0" -i "$H" --metrics chrf
grep -q '^chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:tfm-' "$TMP/out" || fail "chrf: $(cat "$TMP/out")"
run $P -r "$R0" -i "$H" --metrics chrf --chrf-word-order 2
grep -q '^chrF2++|.*|nw:2|' "$TMP/out" || fail "chrF++: $(cat "$TMP/out")"
base=$("$TFM_BIN/$P" -r "$R0" -i "$H" --metrics chrf -b -w 6)
printf 'DAS Haus ist ROT\n' >"$TMP/ch"; printf 'das haus ist rot\n' >"$TMP/cr"
[ "$("$TFM_BIN/$P" -r "$TMP/cr" -i "$TMP/ch" --metrics chrf -b --chrf-lowercase)" = 100.0 ] || fail "--chrf-lowercase"
for opt in "--chrf-char-order 3" "--chrf-beta 1" "--chrf-whitespace" "--chrf-eps-smoothing"; do
  # shellcheck disable=SC2086
  other=$("$TFM_BIN/$P" -r "$R0" -i "$H" --metrics chrf -b -w 6 $opt)
  [ "$other" != "$base" ] || fail "$opt has no effect ($base)"
done
run $P -r "$R0" -i "$H" --metrics ter
grep -q '^TER|nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:tfm-' "$TMP/out" || fail "ter: $(cat "$TMP/out")"
printf 'The Cat , sat .\n' >"$TMP/th"; printf 'the cat sat\n' >"$TMP/tr"
score -r "$TMP/tr" -i "$TMP/th" --metrics ter; expect 66.666667 "ter"
score -r "$TMP/tr" -i "$TMP/th" --metrics ter --ter-no-punct; expect 0.000000 "--ter-no-punct"
score -r "$TMP/tr" -i "$TMP/th" --metrics ter --ter-no-punct --ter-case-sensitive; expect 66.666667 "--ter-case-sensitive"
printf "the cat's bowl.\n" >"$TMP/nh"; printf "the cat 's bowl .\n" >"$TMP/nr"
score -r "$TMP/nr" -i "$TMP/nh" --metrics ter --ter-normalized; expect 0.000000 "--ter-normalized"
run $P -r "$R0" -i "$H" --metrics ter bleu chrf
[ "$(awk '{print $1}' "$TMP/out" | cut -d'|' -f1 | tr '\n' ,)" = "BLEU,chrF2,TER," ] || fail "order: $(cat "$TMP/out")"
[ "$(awk '{print index($0, " = ")}' "$TMP/out" | sort -u | wc -l)" = 1 ] || fail "'=' not aligned: $(cat "$TMP/out")"
run $P -r "$R0" -i "$H" --metrics bleu chrf -b
[ "$(wc -l <"$TMP/out")" = 2 ] || fail "-b with two metrics: $(cat "$TMP/out")"

# --json: sacreBLEU's keys plus the exact value and BLEU's statistics.
run $P -r "$R0" "$R1" -i "$H" --json -w 4
[ "$(json 'd["name"], d["score"], d["nrefs"], d["tok"], round(d["value"], 6), d["sys_len"], d["counts"]')" \
  = "BLEU 48.5308 2 13a 48.530827 17 [14, 7, 5, 3]" ] || fail "--json: $(cat "$TMP/out")"
run $P -r "$R0" -i "$H" --json --metrics bleu chrf ter
[ "$(json '[x["name"] for x in d]')" = "['BLEU', 'chrF2', 'TER']" ] || fail "--json array: $(cat "$TMP/out")"
run $P -r "$SR" -i "$S" --json -sl
python3 -c "import json; [json.loads(l) for l in open('$TMP/out')]" || fail "--json -sl: not JSON lines"

# --paper-bleu: a second BLEU line on Moses-tokenized, ##AT##-split text.
# (tokenizer.perl -l de splits every apostrophe; 13a splits none)
printf "Peter's Haus (rot) sagte:\n" >"$TMP/ph"; printf "Peter ' s Haus ( rot ) sagte :\n" >"$TMP/pr"
run $P -r "$TMP/ph" -i "$TMP/ph" --paper-bleu
grep -q '^BLEU-paper|nrefs:1|tok:moses-de|compound:atat|bleu:multi-bleu|version:tfm-.* = 100.0 100.0/100.0/100.0/100.0' \
  "$TMP/out" || fail "--paper-bleu: $(cat "$TMP/out")"
run $P -r "$TMP/pr" -i "$TMP/ph" --paper-bleu -b
[ "$(sed -n 2p "$TMP/out")" = 100.0 ] || fail "--paper-bleu tokenizes both sides alike: $(cat "$TMP/out")"
[ "$(sed -n 1p "$TMP/out")" != 100.0 ] || fail "--paper-bleu: 13a should differ here: $(cat "$TMP/out")"

# --metrics parseval: EVALB's two summaries; XX-tagged hypotheses; error
# sentences named on stderr and left out; -b, -w, --json.
G='(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))'
printf '%s\n%s\n' "$G" "$G" >"$TMP/gold.trees"
printf '%s\n%s\n' "$G" "${G/(PP/(SBAR}" >"$TMP/test.trees"
run $P -r "$TMP/gold.trees" -i "$TMP/test.trees" --metrics parseval
expect_rc 0 "parseval"
[ "$(cat "$TMP/out")" = "$(printf ' PARSEVAL|evalb:collins|len:all|tags:own|version:tfm-%s = 90.00 (P = 90.00 R = 90.00 CM = 50.00 TA = 100.00 sent = 2 error = 0 skip = 0)\nPARSEVAL|evalb:collins|len:<=40|tags:own|version:tfm-%s = 90.00 (P = 90.00 R = 90.00 CM = 50.00 TA = 100.00 sent = 2 error = 0 skip = 0)' "$(tfm_version)" "$(tfm_version)")" ] \
  || fail "parseval lines: $(cat "$TMP/out")"
run $P -r "$TMP/gold.trees" -i "$TMP/test.trees" --metrics parseval -b -w 3
[ "$(cat "$TMP/out")" = "$(printf '90.000\n90.000')" ] || fail "parseval -b -w 3: $(cat "$TMP/out")"
run $P -r "$TMP/gold.trees" -i "$TMP/test.trees" --metrics parseval --json
[ "$(json '[(x["name"], x["len"], x["score"], x["matched"], x["gold_brackets"], x["tagging_accuracy"]) for x in d]')" \
  = "[('PARSEVAL', 'all', 90, 9, 10, 100), ('PARSEVAL', '<=40', 90, 9, 10, 100)]" ] || fail "parseval --json: $(cat "$TMP/out")"
sed 's/(\([^ ()]*\) \([^ ()]*\))/(XX \2)/g' "$TMP/test.trees" >"$TMP/xx.trees"
run $P -r "$TMP/gold.trees" -i "$TMP/xx.trees" --metrics parseval
grep -q '^ PARSEVAL|evalb:collins|len:all|tags:none|.* = 90.00 (P = 90.00 R = 90.00 CM = 50.00 TA = n/a sent = 2 ' "$TMP/out" \
  || fail "parseval of XX tags: $(cat "$TMP/out")"
printf '%s\n%s\n' "$G" "${G/(DT the) /}" >"$TMP/short.trees"
run $P -r "$TMP/gold.trees" -i "$TMP/short.trees" --metrics parseval -b
expect_rc 0 "parseval with an error sentence"
[ "$(cat "$TMP/out")" = "$(printf '100.00\n100.00')" ] || fail "the error sentence counted: $(cat "$TMP/out")"
grep -q "^tfm-score: warning: line 2: length mismatch: 6 gold words, 5 test words" "$TMP/err" || fail "error sentence: $(cat "$TMP/err")"
# As EVALB (issue 38): a "(TOP )" hypothesis is skipped, not an error; blank
# lines past the last gold tree are left out with a warning; a test tree
# more is still an error.
printf '%s
(TOP )

' "$G" >"$TMP/top.trees"
run $P -r "$TMP/gold.trees" -i "$TMP/top.trees" --metrics parseval
expect_rc 0 "parseval of (TOP ) and a blank line after"
grep -q '^ PARSEVAL|.*len:all.* = 100.00 (.* sent = 2 error = 0 skip = 1)' "$TMP/out" || fail "(TOP ): $(cat "$TMP/out")"
grep -q "^tfm-score: warning: $TMP/top.trees has 1 blank line after its last tree, past the 2 trees of $TMP/gold.trees: left out" \
  "$TMP/err" || fail "a blank line past the gold: $(cat "$TMP/err")"
printf '%s
%s
%s
' "$G" "$G" "$G" >"$TMP/three.trees"
run $P -r "$TMP/gold.trees" -i "$TMP/three.trees" --metrics parseval
expect_rc 1 "parseval of a tree more than the gold"

# -q silences nothing that is not there; -v is accepted.
run $P -q -r "$R0" -i "$H"; expect_rc 0 "-q"; [ -s "$TMP/err" ] && fail "-q: stderr: $(cat "$TMP/err")"
run $P -v -r "$R0" -i "$H"; expect_rc 0 "-v"

# Bad input: exit 1, one error line.
head -2 "$R0" >"$TMP/short"
run $P -r "$R0" "$TMP/short" -i "$H"
expect_rc 1 "count mismatch"; expect_one_error_line $P "count mismatch"
grep -q "readme.hyp has 3 lines but .*short has 2" "$TMP/err" || fail "count mismatch: $(cat "$TMP/err")"
run $P -r "$TMP/missing" -i "$H"
expect_rc 1 "missing reference"; expect_one_error_line $P "missing reference"; grep -q missing "$TMP/err" || fail "missing: not named"
run $P -r "$R0" -i "$TMP/missing"
expect_rc 1 "missing hypotheses"; expect_one_error_line $P "missing hypotheses"
: >"$TMP/empty"
run $P -r "$TMP/empty" -i "$TMP/empty"
expect_rc 1 "empty"; expect_one_error_line $P "empty"
printf 'ok\nbad \xff byte\nok\n' >"$TMP/bad"
run $P -r "$R0" -i "$TMP/bad"
expect_rc 1 "invalid UTF-8"; expect_one_error_line $P "invalid UTF-8"
grep -q "bad:2)" "$TMP/err" || fail "invalid UTF-8: no FILE:LINE: $(cat "$TMP/err")"

# Bad usage: exit 2, one error line, a pointer to --help.
for bad in "" "-i $H" "-r $R0 --bogus" "-r $R0 -tok 14a" "-r $R0 --tokenize zh" "-r $R0 -s laplace" \
  "-r $R0 --metrics bleu meteor" "-r $R0 --metrics" "-r $R0 --smooth-value 0.5" "-r $R0 -s exp -sv 1" \
  "-r $R0 -w -1" "-r $R0 -w x" "-r $R0 --chrf-word-order -1" "-r $R0 -sl --metrics bleu chrf" \
  "-r $R0 -sl --paper-bleu" "-r $R0 --json -b" "-m model.bin -r $R0" "-r $R0 --metrics parseval bleu" \
  "-r $R0 $R1 --metrics parseval" "-r $R0 --metrics parseval -sl" "-r $R0 --metrics parseval --paper-bleu"; do
  # shellcheck disable=SC2086
  run $P $bad
  expect_rc 2 "'$bad'"
  expect_one_error_line $P "'$bad'"
  grep -q -- "--help" "$TMP/err" || fail "'$bad': no pointer to --help"
done

# -m: model scores (forced decoding) of a tiny random model with an embedded tokenizer.
: "${TFM_TOOLS:?TFM_TOOLS must name the folder of the test helpers}"
cat "$R0" "$R1" "$H" "$S" "$SR" >"$TMP/text"
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm.model" --vocab-size 60 "$TMP/text" || fail "tfm-tok train"
"$TFM_TOOLS/tiny_checkpoint" "$TMP/m.bin" --tokenizer "$TMP/spm.model" || fail "tiny_checkpoint"
"$TFM_BIN/tfm-tok" -m "$TMP/m.bin" "$TMP/text" >"$TMP/src.pc"
"$TFM_BIN/tfm-tok" -m "$TMP/m.bin" "$H" "$R0" "$R1" "$S" "$SR" >"$TMP/tgt.pc"
"$TFM_BIN/tfm-tok" -m "$TMP/m.bin" --ids "$TMP/text" >"$TMP/src.ids"
"$TFM_BIN/tfm-tok" -m "$TMP/m.bin" --ids "$H" "$R0" "$R1" "$S" "$SR" >"$TMP/tgt.ids"
n=$(wc -l <"$TMP/src.pc")
M="-m $TMP/m.bin"
# shellcheck disable=SC2086
run $P $M "$TMP/src.pc" "$TMP/tgt.pc"
expect_rc 0 "-m"
grep -qE "^PPL = [0-9]+\.[0-9]{4} \(log-prob = -[0-9]+\.[0-9]{4}, tokens = [0-9]+, sentences = $n\)$" "$TMP/out" \
  || fail "-m corpus line: $(cat "$TMP/out")"
cp "$TMP/out" "$TMP/corpus"
# shellcheck disable=SC2086
run $P $M --src "$TMP/src.pc" --tgt "$TMP/tgt.pc"; cmp -s "$TMP/out" "$TMP/corpus" || fail "--src/--tgt differ from SRC TGT"
# shellcheck disable=SC2086
"$TFM_BIN/$P" $M --src - --tgt "$TMP/tgt.pc" <"$TMP/src.pc" >"$TMP/dash" 2>/dev/null
cmp -s "$TMP/dash" "$TMP/corpus" || fail "--src - differs"
# shellcheck disable=SC2086
run $P $M "$TMP/src.ids" "$TMP/tgt.ids" --ids; cmp -s "$TMP/out" "$TMP/corpus" || fail "--ids differs from pieces"
# shellcheck disable=SC2086
run $P $M "$TMP/src.pc" "$TMP/tgt.pc" --device cpu; cmp -s "$TMP/out" "$TMP/corpus" || fail "--device cpu differs"
# shellcheck disable=SC2086
run $P $M "$TMP/src.pc" "$TMP/tgt.pc" --device cuda
[ "$rc" -eq 0 ] || { expect_rc 1 "--device cuda"; expect_one_error_line $P "--device cuda"; }
# --precision int8: 8-bit weights; a perplexity near fp32's, and the GPU refused.
# shellcheck disable=SC2086
run $P $M "$TMP/src.pc" "$TMP/tgt.pc" --precision int8 --json
expect_rc 0 "--precision int8"
python3 - "$TMP/out" "$TMP/corpus" <<'PY' || fail "--precision int8: perplexity far from fp32's"
import json, re, sys
int8 = json.load(open(sys.argv[1]))["perplexity"]
fp32 = float(re.match(r"PPL = ([0-9.]+)", open(sys.argv[2]).read()).group(1))
sys.exit(0 if int8 != fp32 and abs(int8 / fp32 - 1) < 0.05 else 1)
PY
# shellcheck disable=SC2086
run $P $M "$TMP/src.pc" "$TMP/tgt.pc" --precision int8 --device cuda
expect_rc 1 "--precision int8 --device cuda"; expect_one_error_line $P "--precision int8 --device cuda"
# -sl: a total and one log-probability per target token, eos included, in input order.
# shellcheck disable=SC2086
run $P $M "$TMP/src.pc" "$TMP/tgt.pc" -sl -w 6
cp "$TMP/out" "$TMP/sl"
python3 - "$TMP/sl" "$TMP/tgt.pc" "$TMP/corpus" <<'PY' || fail "-sl: totals, token counts or perplexity wrong"
import math, re, sys
lines = open(sys.argv[1]).read().splitlines()
tgt = open(sys.argv[2]).read().splitlines()
assert len(lines) == len(tgt), (len(lines), len(tgt))
total = tokens = 0
for line, t in zip(lines, tgt):
    head, rest = line.split("\t")
    lps = [float(x) for x in rest.split(" ")]
    assert len(lps) == len(t.split()) + 1, line
    assert all(x < 0 for x in lps) and abs(sum(lps) - float(head)) < 1e-4, line
    total += float(head); tokens += len(lps)
m = re.match(r"PPL = ([0-9.]+) \(log-prob = (-[0-9.]+), tokens = ([0-9]+)", open(sys.argv[3]).read())
assert int(m.group(3)) == tokens and abs(float(m.group(2)) - total) < 1e-3
assert abs(float(m.group(1)) - math.exp(-total / tokens)) < 1e-3
PY
# Batching (sorted by length, any --max-tokens) changes neither values nor order.
for mt in 1 7 100000; do
  # shellcheck disable=SC2086
  run $P $M "$TMP/src.pc" "$TMP/tgt.pc" -sl -w 6 --max-tokens $mt
  python3 - "$TMP/out" "$TMP/sl" <<'PY' || fail "--max-tokens $mt changes the scores"
import sys
a, b = (open(f).read().split() for f in sys.argv[1:])
assert len(a) == len(b) and all(abs(float(x) - float(y)) <= 2e-5 * (1 + abs(float(y))) for x, y in zip(a, b))
PY
done
# -b, -w, --json.
# shellcheck disable=SC2086
run $P $M "$TMP/src.pc" "$TMP/tgt.pc" -sl -b -w 6
[ "$(cat "$TMP/out")" = "$(cut -f1 "$TMP/sl")" ] || fail "-sl -b: not the totals"
# shellcheck disable=SC2086
run $P $M "$TMP/src.pc" "$TMP/tgt.pc" -b -w 2
[[ "$(cat "$TMP/out")" =~ ^[0-9]+\.[0-9]{2}$ ]] || fail "-m -b -w 2: $(cat "$TMP/out")"
# shellcheck disable=SC2086
run $P $M "$TMP/src.pc" "$TMP/tgt.pc" --json
[ "$(json 'd["name"], d["sentences"], abs(d["perplexity"] - __import__("math").exp(-d["log_prob"] / d["tokens"])) < 1e-9')" \
  = "PPL $n True" ] || fail "-m --json: $(cat "$TMP/out")"
# shellcheck disable=SC2086
run $P $M "$TMP/src.pc" "$TMP/tgt.pc" --json -sl
python3 -c "
import json
for i, l in enumerate(open('$TMP/out')):
    d = json.loads(l)
    assert d['line'] == i + 1 and d['tokens'] == len(d['token_log_probs'])
    assert abs(sum(d['token_log_probs']) - d['log_prob']) < 1e-9
" || fail "-m --json -sl"
# Bad input: exit 1, one error line.
head -3 "$TMP/tgt.pc" >"$TMP/short.pc"
printf '4 5\n\n' >"$TMP/nosrc"; printf '4\n5\n' >"$TMP/two"; printf '4 60\n9\n' >"$TMP/bigid"
head -c 2000 "$TMP/m.bin" >"$TMP/torn.bin"
"$TFM_TOOLS/tiny_checkpoint" "$TMP/notok.bin"
for bad in "$M $TMP/src.pc $TMP/short.pc|short.pc has 3" "$M $TMP/nosrc $TMP/two --ids|nosrc:2" \
  "$M $TMP/two $TMP/bigid --ids|bigid:1" "-m $TMP/torn.bin $TMP/src.pc $TMP/tgt.pc|torn.bin is truncated" \
  "-m $TMP/missing.bin $TMP/src.pc $TMP/tgt.pc|missing.bin" "-m $TMP/notok.bin $TMP/src.pc $TMP/tgt.pc|notok.bin" \
  "$M $TMP/src.pc $TMP/missing|missing"; do
  # shellcheck disable=SC2086
  run $P ${bad%%|*}
  expect_rc 1 "'${bad%%|*}'"; expect_one_error_line $P "'${bad%%|*}'"
  grep -q -- "${bad##*|}" "$TMP/err" || fail "'${bad%%|*}': '${bad##*|}' not in $(cat "$TMP/err")"
done
# Bad usage: the other mode's options, files and stdin.
for bad in "$M" "$M $TMP/src.pc" "$M $TMP/src.pc $TMP/tgt.pc --src $TMP/src.pc" "$M --src - --tgt -" \
  "$M $TMP/src.pc $TMP/tgt.pc --metrics chrf" "$M $TMP/src.pc $TMP/tgt.pc -i $H" \
  "$M $TMP/src.pc $TMP/tgt.pc -tok none" "$M $TMP/src.pc $TMP/tgt.pc --max-tokens 0" \
  "$M $TMP/src.pc $TMP/tgt.pc --device gpu" "-r $R0 -i $H --src $TMP/src.pc" "-r $R0 -i $H --ids" \
  "-r $R0 -i $H --max-tokens 5" "-r $R0 -i $H --device cpu" "-r $R0 -i $H $TMP/src.pc" \
  "-r $R0 -i $H --precision int8" "$M $TMP/src.pc $TMP/tgt.pc --precision bf16"; do
  # shellcheck disable=SC2086
  run $P $bad
  expect_rc 2 "'$bad'"; expect_one_error_line $P "'$bad'"
done

# The completion script loads and offers the options.
bash -c "source '$TFM_SOURCE/share/completions/tfm-score.bash'; COMP_WORDS=(tfm-score --met); COMP_CWORD=1; _tfm_score; echo \${COMPREPLY[*]}" \
  | grep -q -- --metrics || fail "completion: no --metrics"
bash -c "source '$TFM_SOURCE/share/completions/tfm-score.bash'; COMP_WORDS=(tfm-score --max); COMP_CWORD=1; _tfm_score; echo \${COMPREPLY[*]}" \
  | grep -q -- --max-tokens || fail "completion: no --max-tokens"
finish
