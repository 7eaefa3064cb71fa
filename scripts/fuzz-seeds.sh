#!/usr/bin/env bash
# The seed corpora of the fuzz targets (tests/fuzz/): valid files made by
# the built programs, nothing downloaded.
#
#   scripts/fuzz-seeds.sh BIN OUT     BIN: the folder of tfm-tok, tfm-batch, tfm-train, tfm-avgckpt
#
# OUT/spm.model (TFM_FUZZ_SPM of fuzz_pieces), and OUT/checkpoint/,
# OUT/tfmb/, OUT/pieces/, OUT/config/, OUT/foreign/ with a few small valid
# inputs each (foreign/: written by Debian's numpy and torch, in
# /usr/bin/python3).
set -euo pipefail
bin=$1
out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
mkdir -p "$out"/{checkpoint,tfmb,pieces,config,foreign}

python3 - "$tmp" <<'PY'
import random, sys
r = random.Random(7)
words = "a b c d e f g h i j k l the cat sat on mat".split()
src = [[r.choice(words) for _ in range(r.randint(1, 12))] for _ in range(400)]
open(sys.argv[1] + "/src", "w").write("".join(" ".join(s) + "\n" for s in src))
open(sys.argv[1] + "/tgt", "w").write("".join(" ".join(reversed(s)) + "\n" for s in src))
PY
"$bin/tfm-tok" train -q -o "$out/spm.model" --vocab-size 40 "$tmp/src" "$tmp/tgt"
"$bin/tfm-tok" -m "$out/spm.model" "$tmp/src" >"$tmp/src.tok"
"$bin/tfm-tok" -m "$out/spm.model" "$tmp/tgt" >"$tmp/tgt.tok"

# Pieces: TSV lines as tfm-batch --tsv reads them (the first byte is the
# target's mode byte), some with unknown pieces, blanks and long lines.
# (sed reads to the end: head would exit early and, under pipefail, paste's
# SIGPIPE would fail the script when paste is still writing.)
paste "$tmp/src.tok" "$tmp/tgt.tok" | sed -n '1,40p' >"$tmp/tsv"
for i in 0 1 2 3; do
  { printf "\\x$(printf %02x $((i * 37 + 5)))"; sed -n "$((i * 10 + 1)),$((i * 10 + 10))p" "$tmp/tsv"; } >"$out/pieces/seed$i"
done
{ printf '\x00'; printf '▁a ▁b\t▁x ▁y ▁zz\n\t\n▁the\t▁cat\n'; } >"$out/pieces/unknown"

# Corpora: two budgets, a short one.
"$bin/tfm-batch" -q -m "$out/spm.model" -o "$out/tfmb/train.tfmb" "$tmp/src.tok" "$tmp/tgt.tok" --max-tokens 200
"$bin/tfm-batch" -q -m "$out/spm.model" -o "$out/tfmb/wide.tfmb" "$tmp/src.tok" "$tmp/tgt.tok" --max-tokens 4000
head -3 "$tmp/src.tok" >"$tmp/s3"
head -3 "$tmp/tgt.tok" >"$tmp/t3"
"$bin/tfm-batch" -q -m "$out/spm.model" -o "$out/tfmb/three.tfmb" "$tmp/s3" "$tmp/t3" --max-tokens 50

# Checkpoints: a training's (with its state) and an average (without),
# of a model small enough to fuzz quickly.
small=(--preset tiny --layers 1 --d-model 8 --d-ff 8 --heads 2 --d-k 4 --d-v 4 --max-positions 64)
"$bin/tfm-train" -q -m "$out/spm.model" -o "$tmp/run" "$out/tfmb/three.tfmb" "${small[@]}" \
  --max-steps 1 --save-every 0 --warmup 1
cp "$tmp/run/checkpoint_1.bin" "$out/checkpoint/trained.bin"
"$bin/tfm-avgckpt" -q -o "$out/checkpoint/average.bin" "$tmp/run/checkpoint_1.bin"
"$bin/tfm-train" -q -m "$out/spm.model" -o "$tmp/run2" "$out/tfmb/three.tfmb" "${small[@]}" \
  --learned-positions --pre-norm --max-steps 1 --save-every 0 --warmup 1
cp "$tmp/run2/checkpoint_1.bin" "$out/checkpoint/prenorm.bin"

# Configurations: what --dump-config writes, for each preset, split into
# the model's part (keys spelled as checkpoints spell them: d_model) and
# the training knobs' part.
for preset in tiny base big; do
  "$bin/tfm-train" --preset "$preset" --dump-config >"$tmp/$preset.ini"
  sed -n '/^# Training/,$p' "$tmp/$preset.ini" >"$out/config/$preset-train.ini"
  sed '/^# Training/,$d' "$tmp/$preset.ini" | awk -F' = ' '/ = /{gsub("-", "_", $1); print $1 " = " $2; next} {print}' \
    >"$out/config/$preset-model.ini"
done
printf 'layers = 2\nd_model = 32\n[model]\n# a comment\nlabel_smoothing = 0.1\nsave-every = 1h30m\n' \
  >"$out/config/mixed.ini"
printf 'layers = 2\nencoder_layers = 3\nactivation = silu\nposition_layout = halves\noutput_bias = true\n'\
'tie_output = false\ndecoder_start_id = 5\neos_id = 0\nsource_eos = true\nscale_embeddings = false\n' \
  >"$out/config/variants.ini"

# Other toolkits' files, each behind the byte that picks fuzz_foreign's reader
# (0 JSON, 1 YAML, 2 safetensors, 3 npz, 4 torch.save).
/usr/bin/python3 - "$out/foreign" <<'PY'
import io, json, struct, sys, argparse, collections
import numpy as np, torch
out = sys.argv[1]
def put(name, kind, data):
    open(f"{out}/{name}", "wb").write(bytes([kind]) + data)
put("config.json", 0, json.dumps({"model_type": "marian", "d_model": 16, "vocab": {"\u00e9": 1, "a\"b": 2},
                                  "list": [1, 2.5, None, True, -3e-7]}).encode())
put("model.yml", 1, b'type: transformer\ndim-emb: 16\ntransformer-preprocess: ""\ndim-vocabs:\n  - 8\n  - 8\n'
    b'tied-embeddings-all: true\n')
put("vocab.yml", 1, '"</s>": 0\n"<unk>": 1\n\u2581a: 2\n\'b\'\'c\': 3\n"\\u00e9": 4\n'.encode())
t = np.arange(6, dtype=np.float32).reshape(2, 3)
header = json.dumps({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                     "b": {"dtype": "F16", "shape": [2], "data_offsets": [24, 28]},
                     "__metadata__": {"format": "pt"}}).encode()
put("model.safetensors", 2, struct.pack("<Q", len(header)) + header + t.tobytes() + np.ones(2, np.float16).tobytes())
for name, save in (("model.npz", np.savez), ("compressed.npz", np.savez_compressed)):
    b = io.BytesIO()
    save(b, W=t, b=np.ones((1, 3), np.float32), **{"special:model.yml": np.frombuffer(b"type: transformer\0", np.int8)})
    put(name, 3, b.getvalue())
b = io.BytesIO()
w = torch.arange(12, dtype=torch.float32).reshape(3, 4)
torch.save({"args": argparse.Namespace(arch="transformer", encoder_layers=2),
            "model": collections.OrderedDict(w=w, t=w.t(), h=w.half(), i=torch.tensor([1, 2]))}, b)
put("checkpoint.pt", 4, b.getvalue())
PY
echo "fuzz-seeds: $(find "$out" -type f | wc -l) files in $out"
