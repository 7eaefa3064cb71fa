# tfm-attnviz: the weights of --json (shapes, distributions, causal and
# forced targets, the same as tfm-decode's decoder), the page in headless
# Chromium (tests/cli/attnviz_page.py: tokens, layers and heads shown, the
# controls change the drawing, nothing loaded from outside, a screenshot),
# the SVG, several sentences, models of other shapes, and bad input. Models
# are random tiny ones from tiny_checkpoint; tests/pipeline/copy.sh
# checks a trained model's known pattern.
source "$(dirname "$0")/common.bash"
unset TFM_MODEL
export OMP_NUM_THREADS=1
for i in $(seq 1 300); do
  echo "the cat $i sat on the mat number $((i * 7)) and a dog ran"
  echo "die Katze $i sass auf der Matte Nummer $((i * 3)) und ein Hund lief"
done >"$TMP/corpus"
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm.model" --vocab-size 64 "$TMP/corpus" || fail "tfm-tok train"
M="$TMP/tiny.bin"  # post-norm, sinusoidal positions, 2 layers x 4 heads
"$TFM_TOOLS/tiny_checkpoint" "$M" --tokenizer "$TMP/spm.model" || fail "checkpoint fixture"
E="$TMP/eos.bin"  # hypotheses that end early
"$TFM_TOOLS/tiny_checkpoint" "$E" --tokenizer "$TMP/spm.model" --eos-logit 2.0 --seed 3 || fail "eos fixture"
P="$TMP/pre.bin"  # pre-norm, learned positions (16 of them), 3 layers x 1 head
"$TFM_TOOLS/tiny_checkpoint" "$P" --tokenizer "$TMP/spm.model" pre_norm=true learned_positions=true \
  max_positions=16 layers=3 heads=1 d_k=16 d_v=16 || fail "pre-norm fixture"
W="$TMP/wide.bin"  # 32 heads (Table 3, rows A)
"$TFM_TOOLS/tiny_checkpoint" "$W" --tokenizer "$TMP/spm.model" heads=32 d_k=1 d_v=1 layers=1 || fail "32-head fixture"
"$TFM_TOOLS/tiny_checkpoint" "$TMP/plain.bin" || fail "checkpoint fixture without tokenizer"
attnviz() { "$TFM_BIN/tfm-attnviz" -q "$@"; }
S1="the cat 12 sat on the mat"
printf '%s\n' "$S1" "a dog ran" "die Katze sass auf der Matte" >"$TMP/three.txt"

run tfm-attnviz --help
expect_rc 0 "--help"
grep -q "^Usage: tfm-attnviz" "$TMP/out" || fail "--help: no usage line"
run tfm-attnviz --version
grep -q "^tfm-attnviz tfm [0-9]" "$TMP/out" || fail "--version: got '$(cat "$TMP/out")'"

# --json: shapes, distributions over the visible keys, causal decoder rows,
# the decoded target (tfm-decode's, same beam) or the forced one.
check_json() {  # check_json FILE MODEL_LAYERS MODEL_HEADS SENTENCES
  python3 - "$@" <<'PY' || fail "--json of $1: weights are not the model's distributions"
import json, sys
path, L, H, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = [json.loads(line) for line in open(path, encoding="utf-8")]
assert len(rows) == n, f"{len(rows)} objects for {n} sentences"
for r in rows:
    S, T = len(r["source"]), len(r["target"])
    assert r["layers"] == L and r["heads"] == H, (r["layers"], r["heads"])
    assert r["target"][-1] == "</s>" and r["target_in"][0] == "<s>" and r["target_in"][1:] == r["target"][:-1]
    for stack, tq, tk in (("enc", S, S), ("dec", T, T), ("cross", T, S)):
        m = r[stack]
        assert len(m) == L and all(len(x) == H for x in m), stack
        for l in range(L):
            for h in range(H):
                assert len(m[l][h]) == tq and all(len(row) == tk for row in m[l][h]), (stack, l, h)
                for i, row in enumerate(m[l][h]):
                    assert abs(sum(row) - 1) < 1e-5, (stack, l, h, i, sum(row))
                    assert all(w >= 0 for w in row)
                    if stack == "dec":
                        assert all(w == 0 for w in row[i + 1:]), ("future key", l, h, i)
PY
}
attnviz -m "$M" "$S1" --json >"$TMP/one.json" || fail "--json"
check_json "$TMP/one.json" 2 4 1
attnviz -m "$M" --json - <"$TMP/three.txt" >"$TMP/three.json" || fail "--json of stdin"
check_json "$TMP/three.json" 2 4 3
attnviz -m "$M" --json -i "$TMP/three.txt" | cmp -s - "$TMP/three.json" || fail "--input differs from stdin"
head -n 1 "$TMP/three.json" | cmp -s - "$TMP/one.json" || fail "a sentence's weights depend on the others"
attnviz -m "$P" --json -i "$TMP/three.txt" --max-len-b 4 >"$TMP/pre.json" || fail "pre-norm model"
check_json "$TMP/pre.json" 3 1 3
attnviz -m "$W" --json "$S1" --max-len-b 3 >"$TMP/wide.json" || fail "32-head model"
check_json "$TMP/wide.json" 1 32 1
gzip -c "$TMP/three.txt" >"$TMP/three.gz"
attnviz -m "$M" --json -i "$TMP/three.gz" | cmp -s - "$TMP/three.json" || fail "gzip input"
TFM_MODEL="$M" "$TFM_BIN/tfm-attnviz" -q --json "$S1" | cmp -s - "$TMP/one.json" || fail "TFM_MODEL not used"

# The decoded target is tfm-decode's, and its encoder-decoder weights are the
# incremental decoder's for that target (another code path), every layer and head.
"$TFM_BIN/tfm-tok" -m "$E" "$TMP/three.txt" >"$TMP/three.pieces"
attnviz -m "$E" --json --pieces -i "$TMP/three.pieces" >"$TMP/eos.json" || fail "--pieces"
attnviz -m "$E" --json -i "$TMP/three.txt" | cmp -s - "$TMP/eos.json" || fail "--pieces differs from raw text"
for layer in 1 2; do
  "$TFM_BIN/tfm-decode" -q -m "$E" --json --attention --attention-heads --attention-layer $layer \
    "$TMP/three.pieces" >"$TMP/decode$layer.json" || fail "tfm-decode --attention"
  python3 - "$TMP/eos.json" "$TMP/decode$layer.json" $layer <<'PY' || fail "layer $layer: decoded target or weights differ from tfm-decode's"
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
theirs = [json.loads(l)["hypotheses"][0] for l in open(sys.argv[2], encoding="utf-8")]
layer = int(sys.argv[3]) - 1
assert len(ours) == len(theirs) == 3
for o, t in zip(ours, theirs):
    assert o["decoded"] and o["target"][:-1] == t["tokens"], (o["target"], t["tokens"])
    att = t["attention"]  # (|Y|, H, S)
    for y, row in enumerate(att):
        for h, keys in enumerate(row):
            for s, w in enumerate(keys):
                assert abs(w - o["cross"][layer][h][y][s]) < 1e-5, (y, h, s, w, o["cross"][layer][h][y][s])
PY
done
# A forced target: its pieces, not a decoded one; --target-file for several.
attnviz -m "$M" "$S1" --target "die Katze sass" --json >"$TMP/forced.json" || fail "--target"
python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).read())
want = sys.argv[2].split()
assert not r["decoded"] and r["target"] == want + ["</s>"], (r["target"], want)' \
  "$TMP/forced.json" "$(echo "die Katze sass" | "$TFM_BIN/tfm-tok" -m "$M")" || fail "--target: not the forced pieces"
check_json "$TMP/forced.json" 2 4 1
printf 'x y\nz\nder Hund\n' >"$TMP/targets.txt"
attnviz -m "$M" -i "$TMP/three.txt" --target-file "$TMP/targets.txt" --json >"$TMP/forced3.json" || fail "--target-file"
check_json "$TMP/forced3.json" 2 4 3
[ "$(python3 -c 'import json,sys; print(sum(not json.loads(l)["decoded"] for l in open(sys.argv[1])))' "$TMP/forced3.json")" = 3 ] ||
  fail "--target-file: targets were decoded"
# --beam changes the decoded target's search (greedy here), --max-len-b its length.
attnviz -m "$M" "$S1" --json --max-len-a 0 --max-len-b 2 >"$TMP/short.json"
[ "$(python3 -c 'import json,sys; print(len(json.loads(open(sys.argv[1]).read())["target"]))' "$TMP/short.json")" -le 3 ] ||
  fail "--max-len-b 2: target longer than 2 pieces"
"$TFM_BIN/tfm-tok" -m "$E" <<<"$S1" >"$TMP/s1.pieces"
for beam in 1 3; do
  want=$("$TFM_BIN/tfm-decode" -q -m "$E" --beam $beam --alpha 0.2 "$TMP/s1.pieces")
  got=$(attnviz -m "$E" "$S1" --json --beam $beam --alpha 0.2 | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["target"][:-1]))')
  [ "$got" = "$want" ] || fail "--beam $beam --alpha 0.2: target '$got', tfm-decode '$want'"
done

# Several sentences: one page; --max-sentences reads the first N, with a warning.
run tfm-attnviz -m "$M" --json --max-sentences 2 -i "$TMP/three.txt"
expect_rc 0 "--max-sentences"
[ "$(wc -l <"$TMP/out")" -eq 2 ] || fail "--max-sentences 2: $(wc -l <"$TMP/out") sentences"
grep -q "first 2 sentences" "$TMP/err" || fail "--max-sentences: no warning"

# The page: written atomically to -o or to stdout; opened in Chromium.
run tfm-attnviz -m "$M" -i "$TMP/three.txt" -o "$TMP/page.html"
expect_rc 0 "the page"
[ -s "$TMP/page.html" ] && [ ! -s "$TMP/out" ] || fail "-o: the page is not in the file alone"
grep -q "3 sentences, 2 layers x 4 heads" "$TMP/err" || fail "no summary on stderr: $(cat "$TMP/err")"
attnviz -m "$M" - <"$TMP/three.txt" | cmp -s - "$TMP/page.html" || fail "the page on stdout differs"
python3 "$TFM_SOURCE/tests/cli/attnviz_page.py" "$TMP/page.html" "$TMP/three.json" "$TMP/page.png" ||
  fail "the page in headless chromium"
[ -s "$TMP/page.png" ] && cp "$TMP/page.png" "${TFM_BUILD:-$TMP}/tfm-attnviz-cli.png"
# What the page opens on: --stack, --layer, --heads, --view, --sentence.
page_view() {  # the page's first view, from its data: stack layer heads mode sentence
  python3 -c '
import json, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
d = json.loads(re.search(r"<script type=\"application/json\" id=\"tfm-data\">(.*?)</script>", text, re.S).group(1))
print(d["stack"], d["layer"], ",".join(map(str, d["heads"])) or "-", d["mode"], d["sentence"])' "$1"
}
[ "$(page_view "$TMP/page.html")" = "enc 1 - paper 0" ] || fail "default view: $(page_view "$TMP/page.html")"
attnviz -m "$M" -i "$TMP/three.txt" --stack cross --layer 1 --heads 2,4 --view grid --sentence 3 -o "$TMP/view.html"
[ "$(page_view "$TMP/view.html")" = "cross 0 1,3 grid 2" ] || fail "the view options: $(page_view "$TMP/view.html")"

# Installed, the program needs nothing beside it: the page is compiled in.
if [ -n "${TFM_BUILD:-}" ]; then
  cmake --install "$TFM_BUILD" --prefix "$TMP/prefix" >"$TMP/install.log" 2>&1 || fail "cmake --install: $(tail -3 "$TMP/install.log")"
  (cd / && "$TMP/prefix/bin/tfm-attnviz" -q -m "$M" -i "$TMP/three.txt") | cmp -s - "$TMP/page.html" ||
    fail "the installed tfm-attnviz writes another page"
  [ -f "$TMP/prefix/share/bash-completion/completions/tfm-attnviz" ] || fail "cmake --install: no completion"
fi

# --svg: the paper's view of one stack, layer and heads, as XML.
attnviz -m "$M" "$S1" --svg --stack dec --layer 1 --heads 1,3 -o "$TMP/fig.svg" || fail "--svg"
python3 - "$TMP/fig.svg" "$TMP/one.json" <<'PY' || fail "--svg: not the chosen heads' weights"
import json, sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
r = json.loads(open(sys.argv[2]).read())
assert "decoder self-attention, layer 1, heads 1, 3" in "".join(root.find(ns + "text").itertext())
groups = root.findall(ns + "g")
assert [g.get("data-head") for g in groups] == ["1", "3"]
for g in groups:
    h = int(g.get("data-head")) - 1
    want = sorted(round(w, 3) for row in r["dec"][0][h] for w in row if w >= 0.01)
    got = sorted(float(l.get("stroke-opacity")) for l in g.findall(ns + "line"))
    assert len(got) == len(want) and all(abs(a - b) < 1e-9 for a, b in zip(got, want)), h
labels = [t.text for t in root.findall(ns + "text")[1:]]
assert labels == r["target"] + r["target_in"], labels
PY
attnviz -m "$M" -i "$TMP/three.txt" --svg --sentence 2 | grep -q '>og<' || fail "--svg --sentence 2: not sentence 2"

# Bad input: one error line, exit 1 (2 for usage), and no file.
bad() {  # bad RC DESCRIPTION ARGS...: with -o, which must not appear
  local want=$1 what=$2
  shift 2
  rm -f "$TMP/bad.html"
  run tfm-attnviz "$@" -o "$TMP/bad.html"
  expect_rc "$want" "$what"
  expect_one_error_line tfm-attnviz "$what"
  [ -e "$TMP/bad.html" ] && fail "$what: a file was written"
  ls "$TMP" | grep -q '^bad.html.' && fail "$what: a temporary file was left"
}
printf 'a dog\n\nthe cat\n' >"$TMP/empty-line.txt"
bad 1 "an empty sentence" -m "$M" -i "$TMP/empty-line.txt"
grep -q "empty-line.txt:2" "$TMP/err" || fail "an empty sentence: no FILE:LINE: $(cat "$TMP/err")"
bad 1 "an empty argument" -m "$M" " "
long=$(seq 1 40 | tr '\n' ' ')
bad 1 "a sentence over the positions" -m "$P" "$long"
grep -q "longer than the model's 16 positions" "$TMP/err" || fail "long sentence: $(cat "$TMP/err")"
bad 1 "a target over the positions" -m "$P" "a dog" --target "$long"
bad 1 "--layer past the model" -m "$M" "$S1" --layer 3
grep -q "layers 1 to 2" "$TMP/err" || fail "--layer 3: $(cat "$TMP/err")"
bad 1 "a head past the model" -m "$M" "$S1" --heads 2,5
grep -q "head 5" "$TMP/err" || fail "--heads 5: $(cat "$TMP/err")"
bad 1 "--sentence past the input" -m "$M" "$S1" --sentence 2
bad 1 "a missing checkpoint" -m "$TMP/missing.bin" "$S1"
grep -q "missing.bin" "$TMP/err" || fail "missing checkpoint not named"
bad 1 "a checkpoint without a tokenizer" -m "$TMP/plain.bin" "$S1"
bad 1 "a missing input" -m "$M" -i "$TMP/missing.txt"
bad 1 "--target with several sentences" -m "$M" -i "$TMP/three.txt" --target "x"
bad 1 "--target-file of another length" -m "$M" -i "$TMP/three.txt" --target-file "$TMP/s1.pieces"
bad 2 "--layer 0" -m "$M" "$S1" --layer 0
bad 2 "--heads 0" -m "$M" "$S1" --heads 0
bad 2 "--stack foo" -m "$M" "$S1" --stack foo
bad 2 "--svg and --json" -m "$M" "$S1" --svg --json
bad 2 "SENTENCE and --input" -m "$M" "$S1" -i "$TMP/three.txt"
bad 2 "--json with a view" -m "$M" "$S1" --json --layer 1
bad 2 "no model" "$S1"
: >"$TMP/none.txt"
bad 1 "no sentence" -m "$M" -i "$TMP/none.txt"

# Bash completion: every option of --help, and values for the choices.
completion="$TFM_SOURCE/share/completions/tfm-attnviz.bash"
for option in $("$TFM_BIN/tfm-attnviz" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
  grep -q -- "$option" "$completion" || fail "completion: $option missing"
done
complete_words() {
  COMP_WORDS=(tfm-attnviz "$@")
  COMP_CWORD=$#
  COMPREPLY=()
  _tfm_attnviz
  echo "${COMPREPLY[*]}"
}
# shellcheck disable=SC1090
source "$completion"
[ "$(complete_words --stack "")" = "enc dec cross" ] || fail "completion: --stack"
[ "$(complete_words --view h)" = "heatmap" ] || fail "completion: --view"
complete_words --target- | grep -q -- "--target-file" || fail "completion: --target-file"

finish
