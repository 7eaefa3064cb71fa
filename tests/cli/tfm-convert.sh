# tfm-convert: a tiny Hugging Face Marian directory and a tiny Marian .npz
# (written here with numpy alone) convert and translate; every broken input
# is one error line naming what is wrong, exit 1, and no output file (an
# existing one unchanged).
source "$(dirname "$0")/common.bash"
P=tfm-convert
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
python=/usr/bin/python3
[ -x $python ] || python=python3

run $P --help
expect_rc 0 "--help"
grep -q "^Usage: tfm-convert" "$TMP/out" || fail "--help: no usage line"
run $P --version
expect_rc 0 "--version"

# Two SentencePiece models (source and target) and the pieces they make.
printf '%s\n' "a b c d" "b c d e f" "c d e a b" "f e d c b a" "a c e" "b d f" >"$TMP/text"
"$TFM_BIN/tfm-tok" train -q -o "$TMP/source.spm" --vocab-size 12 "$TMP/text" || fail "tfm-tok train source"
"$TFM_BIN/tfm-tok" train -q -o "$TMP/target.spm" --vocab-size 11 "$TMP/text" || fail "tfm-tok train target"
for s in source target; do "$TFM_BIN/tfm-tok" -m "$TMP/$s.spm" "$TMP/text"; done | tr ' ' '\n' |
  sort -u | grep . >"$TMP/pieces"

# make.py KIND DIR [BREAK]: a model of 1 + 1 layers, d_model 8, in DIR.
#   hf      config.json, model.safetensors (struct + json), vocab.json and
#           the SentencePiece models, as OPUS-MT's (</s> 0, <unk> 1, <pad>
#           last and the decoder's start, swish, a logit bias)
#   marian  model.npz with special:model.yml, opus.vocab.yml, the SentencePiece
#           models
# BREAK spoils one thing: config:KEY=JSON, shape:NAME, drop:NAME,
# extra:NAME, drop-id:ID, no-yml.
cat >"$TMP/make.py" <<'PY'
import json, os, shutil, struct, sys
import numpy as np

kind, out = sys.argv[1], sys.argv[2]
brk = sys.argv[3] if len(sys.argv) > 3 else ""
what, _, arg = brk.partition(":")
here = os.path.dirname(out.rstrip("/")) or "."
pieces = [p for p in open(os.path.join(here, "pieces"), encoding="utf-8").read().split("\n") if p]
D, F = 8, 16
rng = np.random.default_rng(1)
os.makedirs(out, exist_ok=True)
for side in ("source", "target"):
    shutil.copy(os.path.join(here, side + ".spm"), os.path.join(out, side + ".spm"))

def layers(stacks, attention, linear, norm):
    t = {}
    for stack, subs in stacks:
        for sub in subs:
            t.update(attention(stack, sub))
        t.update(linear(stack, "fc1", F, D)); t.update(linear(stack, "fc2", D, F))
        t.update(norm(stack, "final_layer_norm"))
    return t

def r(*shape):
    return (0.5 * rng.standard_normal(shape)).astype("<f4")

if kind == "hf":
    vocab = {"</s>": 0, "<unk>": 1}
    for p in pieces:
        vocab.setdefault(p, len(vocab))
    vocab["<pad>"] = V = len(vocab)
    V += 1
    config = dict(model_type="marian", vocab_size=V, decoder_vocab_size=V, d_model=D, encoder_layers=1,
                  decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=F,
                  decoder_ffn_dim=F, max_position_embeddings=64, activation_function="swish",
                  scale_embedding=True, pad_token_id=V - 1, eos_token_id=0, decoder_start_token_id=V - 1)
    t = {"model.shared.weight": r(V, D), "final_logits_bias": r(1, V),
         "model.encoder.embed_positions.weight": r(64, D), "model.decoder.embed_positions.weight": r(64, D)}
    def attention(stack, sub):
        a = {f"{stack}.{sub}.{p}_proj.weight": r(D, D) for p in "qkvo"}
        a.update({f"{stack}.{sub}.{p}_proj.bias": r(D) for p in "qkvo"})
        a.update(norm(stack, sub + "_layer_norm"))
        return {k.replace("o_proj", "out_proj"): v for k, v in a.items()}
    def linear(stack, name, o, i):
        return {f"{stack}.{name}.weight": r(o, i), f"{stack}.{name}.bias": r(o)}
    def norm(stack, name):
        return {f"{stack}.{name}.weight": r(D), f"{stack}.{name}.bias": r(D)}
    t.update(layers([("model.encoder.layers.0", ["self_attn"]),
                     ("model.decoder.layers.0", ["self_attn", "encoder_attn"])], attention, linear, norm))
    if what == "config":
        key, _, value = arg.partition("=")
        config[key] = json.loads(value)
    elif what == "shape":
        t[arg] = r(*t[arg].shape, 2)
    elif what == "drop":
        del t[arg]
    elif what == "extra":
        t[arg] = r(D)
    elif what == "drop-id":
        vocab = {k: v for k, v in vocab.items() if v != int(arg)}
    json.dump(config, open(os.path.join(out, "config.json"), "w"))
    json.dump(vocab, open(os.path.join(out, "vocab.json"), "w", encoding="utf-8"), ensure_ascii=False)
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, a in t.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [len(data), len(data) + a.nbytes]}
        data += a.tobytes()
    h = json.dumps(header).encode()
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)
else:
    vocab = {"</s>": 0, "<unk>": 1}
    for p in pieces:
        vocab.setdefault(p, len(vocab))
    V = len(vocab)
    yml = ("type: transformer\ndim-emb: %d\nenc-depth: 1\ndec-depth: 1\ntransformer-heads: 2\n"
           "transformer-dim-ffn: %d\ntransformer-ffn-activation: relu\ntied-embeddings-all: true\n"
           "transformer-preprocess: \"\"\ntransformer-postprocess: dan\ndim-vocabs: [%d, %d]\n" % (D, F, V, V))
    t = {"Wemb": r(V, D), "decoder_ff_logit_out_b": r(1, V)}
    def attention(stack, sub):
        a = {f"{stack}_{sub}_W{p}": r(D, D) for p in "qkvo"}
        a.update({f"{stack}_{sub}_b{p}": r(1, D) for p in "qkvo"})
        a.update(norm(stack, sub + "_Wo"))
        return a
    def linear(stack, name, o, i):
        n = name[-1]
        return {f"{stack}_ffn_W{n}": r(i, o), f"{stack}_ffn_b{n}": r(1, o)}
    def norm(stack, name):
        name = "ffn_ffn" if name == "final_layer_norm" else name
        return {f"{stack}_{name}_ln_scale": r(1, D), f"{stack}_{name}_ln_bias": r(1, D)}
    t.update(layers([("encoder_l1", ["self"]), ("decoder_l1", ["self", "context"])], attention, linear, norm))
    if what != "no-yml":
        t["special:model.yml"] = np.frombuffer(yml.encode() + b"\0", dtype=np.int8)  # as Marian: a C string
    np.savez(os.path.join(out, "model.npz"), **t)
    with open(os.path.join(out, "opus.vocab.yml"), "w", encoding="utf-8") as f:
        f.write("".join(f"{json.dumps(k, ensure_ascii=False)}: {v}\n" for k, v in vocab.items()))
PY
make() { $python "$TMP/make.py" "$@" || fail "make.py $*"; }

# The config text a checkpoint stores first, uncompressed.
config_of() { head -c 1200 "$1" | tr -c '[:print:]\n' '\n' | grep -o '[a-z_]* = .*'; }
has_config() {  # has_config CHECKPOINT WHAT LINE...
  local ck=$1 what=$2 line
  shift 2
  config_of "$ck" >"$TMP/config"
  for line in "$@"; do grep -qxF "$line" "$TMP/config" || fail "$what: no '$line' in: $(tr '\n' ';' <"$TMP/config")"; done
}

# The Hugging Face directory: converted, described, and translating through
# the three-program pipeline.
make hf "$TMP/hf"
run $P "$TMP/hf" -o "$TMP/hf.bin"
expect_rc 0 "hf"
[ -s "$TMP/hf.bin" ] || fail "hf: no checkpoint"
grep -q "hf.bin: 1 + 1 layers, d_model 8, 2 heads, d_ff 16, silu, post-norm from the Hugging Face model in" "$TMP/err" ||
  fail "hf: report: $(cat "$TMP/err")"
V=$(($(wc -l <"$TMP/pieces") + 3))
has_config "$TMP/hf.bin" "hf" "vocab_size = $V" "layers = 1" "activation = silu" "position_layout = halves" \
  "output_bias = true" "decoder_start_id = $((V - 1))" "eos_id = 0" "source_eos = true"
grep -q "scale_embeddings\|tie_output" "$TMP/config" && fail "hf: a default written: $(cat "$TMP/config")"
echo "a b c" | "$TFM_BIN/tfm-tok" -m "$TMP/hf.bin" | "$TFM_BIN/tfm-decode" -q -m "$TMP/hf.bin" --max-len-b 5 |
  "$TFM_BIN/tfm-tok" -d -m "$TMP/hf.bin" >"$TMP/hyp" 2>"$TMP/err" || fail "hf: the pipeline failed: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/hyp")" -eq 1 ] || fail "hf: the pipeline gave $(wc -l <"$TMP/hyp") lines, not 1"
run $P -q "$TMP/hf" -o "$TMP/again.bin" --from hf
expect_rc 0 "--from hf"; [ -s "$TMP/err" ] && fail "-q: stderr: $(cat "$TMP/err")"
cmp -s "$TMP/hf.bin" "$TMP/again.bin" || fail "the same directory twice: different checkpoints"

# Fine-tuning the converted model: its vocabulary's corpus, tfm-train --init,
# a checkpoint of the same variant.
"$TFM_BIN/tfm-tok" -m "$TMP/hf.bin" "$TMP/text" >"$TMP/ft.src" || fail "tfm-tok, source side"
"$TFM_BIN/tfm-tok" -m "$TMP/hf.bin" --side target "$TMP/text" >"$TMP/ft.tgt" || fail "tfm-tok, target side"
"$TFM_BIN/tfm-batch" -q -m "$TMP/hf.bin" -o "$TMP/ft.tfmb" "$TMP/ft.src" "$TMP/ft.tgt" || fail "tfm-batch"
run tfm-train -q --init "$TMP/hf.bin" -o "$TMP/ft" "$TMP/ft.tfmb" --max-steps 2 --warmup 2 --save-every 0
expect_rc 0 "tfm-train --init"
has_config "$TMP/ft/checkpoint_last.bin" "tfm-train --init" "activation = silu" "decoder_start_id = $((V - 1))"

# --source-spm / --target-spm / --vocab: files from elsewhere.
make hf "$TMP/moved"
mkdir -p "$TMP/elsewhere"
mv "$TMP/moved/source.spm" "$TMP/moved/target.spm" "$TMP/moved/vocab.json" "$TMP/elsewhere/"
run $P -q "$TMP/moved" -o "$TMP/moved.bin" --source-spm "$TMP/elsewhere/source.spm" \
  --target-spm "$TMP/elsewhere/target.spm" --vocab "$TMP/elsewhere/vocab.json"
expect_rc 0 "--source-spm --target-spm --vocab"
cmp -s "$TMP/hf.bin" "$TMP/moved.bin" || fail "--source-spm --target-spm --vocab: another checkpoint"

# The Marian .npz: the vocabulary gains <pad>, the decoder's start.
make marian "$TMP/marian"
run $P "$TMP/marian/model.npz" -o "$TMP/marian.bin"
expect_rc 0 "marian"
Vm=$(($(wc -l <"$TMP/pieces") + 2))
has_config "$TMP/marian.bin" "marian" "vocab_size = $((Vm + 1))" "decoder_start_id = $Vm" "eos_id = 0" \
  "position_layout = halves" "source_eos = true" "output_bias = true"
grep -q "^activation" "$TMP/config" && fail "marian: relu written: $(cat "$TMP/config")"
echo "a b c" | "$TFM_BIN/tfm-tok" -m "$TMP/marian.bin" | "$TFM_BIN/tfm-decode" -q -m "$TMP/marian.bin" --max-len-b 5 \
  >"$TMP/hyp" 2>"$TMP/err" || fail "marian: tfm-decode failed: $(cat "$TMP/err")"
mv "$TMP/marian/opus.vocab.yml" "$TMP/marian/v.yml"
run $P -q "$TMP/marian/model.npz" -o "$TMP/marian2.bin" --from marian --vocab "$TMP/marian/v.yml"
expect_rc 0 "marian --vocab"
cmp -s "$TMP/marian.bin" "$TMP/marian2.bin" || fail "marian --vocab: another checkpoint"

# Refused: exit 1, one line naming the problem; no new file, an existing
# one unchanged, no temporary file left.
mkdir -p "$TMP/o"
printf 'precious\n' >"$TMP/o/keep.bin"
refused_input() {  # refused_input WHAT TEXT ARGS...
  local what=$1 text=$2
  shift 2
  refused $P "$what" "$text" "$@" -o "$TMP/o/new.bin"
  run $P "$@" -o "$TMP/o/keep.bin"
  expect_rc 1 "$what (over a file)"
  [ "$(ls -A "$TMP/o")" = keep.bin ] || fail "$what: left $(ls -A "$TMP/o" | tr '\n' ' ')"
  [ "$(cat "$TMP/o/keep.bin")" = precious ] || fail "$what: changed the existing output"
}
make hf "$TMP/noconfig" && rm "$TMP/noconfig/config.json"
refused_input "no config.json" "without config.json" "$TMP/noconfig"
refused_input "no config.json, --from hf" "has no config.json" "$TMP/noconfig" --from hf
make hf "$TMP/gelu_new" 'config:activation_function="gelu_new"'
refused_input "gelu_new" "activation_function = gelu_new" "$TMP/gelu_new"
make hf "$TMP/dvocab" 'config:decoder_vocab_size=7'
refused_input "decoder_vocab_size" "decoder_vocab_size = 7" "$TMP/dvocab"
make hf "$TMP/shape" shape:model.encoder.layers.0.fc1.weight
refused_input "a wrong shape" "'model.encoder.layers.0.fc1.weight' is (16, 8, 2)" "$TMP/shape"
make hf "$TMP/missing" drop:model.decoder.layers.0.encoder_attn.k_proj.bias
refused_input "a missing tensor" "decoder.layers.0.encoder_attn.k_proj.bias" "$TMP/missing"
make hf "$TMP/extra" extra:model.encoder.layer_norm.weight
refused_input "an unknown tensor" "'model.encoder.layer_norm.weight'" "$TMP/extra"
make hf "$TMP/noid" drop-id:3
refused_input "vocab.json without id 3" "no piece has id 3" "$TMP/noid"
make hf "$TMP/nospm" && rm "$TMP/nospm/source.spm"
refused_input "no source.spm" "no SentencePiece models" "$TMP/nospm"
make hf "$TMP/torn" && truncate -s -100 "$TMP/torn/model.safetensors"
refused_input "a truncated model.safetensors" "model.safetensors" "$TMP/torn"
make marian "$TMP/noyml" no-yml
refused_input "an .npz without special:model.yml" "no special:model.yml" "$TMP/noyml/model.npz"

# Bad usage: exit 2, no output.
for bad in "" "$TMP/hf" "-o $TMP/o/new.bin" "$TMP/hf -o $TMP/o/new.bin --from" \
  "$TMP/hf -o $TMP/o/new.bin --bogus"; do
  # shellcheck disable=SC2086
  run $P $bad
  expect_rc 2 "'$bad'"
  expect_one_error_line $P "'$bad'"
done
[ "$(ls -A "$TMP/o")" = keep.bin ] || fail "bad usage left $(ls -A "$TMP/o" | tr '\n' ' ')"

# The completion script loads and offers the options and the toolkits.
bash -c "source '$TFM_SOURCE/share/completions/tfm-convert.bash'; COMP_WORDS=(tfm-convert --so); COMP_CWORD=1; _tfm_convert; echo \${COMPREPLY[*]}" \
  | grep -q -- --source-spm || fail "completion: no --source-spm"
bash -c "source '$TFM_SOURCE/share/completions/tfm-convert.bash'; COMP_WORDS=(tfm-convert --from ''); COMP_CWORD=2; _tfm_convert; echo \${COMPREPLY[*]}" \
  | grep -qx "auto hf marian fairseq" || fail "completion: --from does not offer auto hf marian fairseq"
finish
