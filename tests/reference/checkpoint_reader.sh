#!/bin/bash
# Usage: checkpoint_reader.sh CHECKPOINT_FIXTURE TFM_TOK VOCAB_BUNDLE TINY_CHECKPOINT
#
# The fixture (checkpoint_fixture.cc) writes a checkpoint with known
# contents; tfm_checkpoint.py, an independent reader written from man/tfm.7,
# reads it back, and every field and value is checked against the list below
# (the same list as in checkpoint_fixture.cc). Then damaged copies must be
# refused. Then a vocabulary bundle of two models tfm-tok trains and a known
# piece table (tests/tools/vocab_bundle), alone and in a checkpoint's
# tokenizer slot (tests/tools/tiny_checkpoint), is read back part by part.
# Any mismatch, and a missing numpy or zstandard, fails the test: it never
# skips.
set -euo pipefail

usage="usage: checkpoint_reader.sh CHECKPOINT_FIXTURE TFM_TOK VOCAB_BUNDLE TINY_CHECKPOINT"
fixture=${1:?$usage}
tok=${2:?$usage}
vocab_bundle=${3:?$usage}
tiny_checkpoint=${4:?$usage}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Debian's python3-numpy and python3-zstandard live in the system Python.
python=${TFM_PYTHON:-/usr/bin/python3}
[[ -x $python ]] || python=python3

fail() { echo "checkpoint_reader: FAIL: $*" >&2; exit 1; }

"$python" -c 'import numpy, zstandard' 2>/dev/null ||
  fail "$python cannot import numpy and zstandard; install python3-numpy and python3-zstandard"

tmp=$(mktemp -d /tmp/tfm-ckpt-ref-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$fixture" "$tmp/model.bin" || fail "checkpoint_fixture did not write $tmp/model.bin"

PYTHONPATH=$here "$python" - "$tmp/model.bin" <<'PY' || fail "the Python reader disagrees with the fixture"
import sys
import numpy as np
import tfm_checkpoint

ck = tfm_checkpoint.read(sys.argv[1])
bad = []
def expect(what, got, want):
    if got != want:
        bad.append(f"{what}: got {got!r}, want {want!r}")

expect("version", ck.version, 1)
expect("config", ck.config, 'd_model = 512\nheads = 8\nname = "Grüße"\n')
expect("tokenizer", ck.tokenizer, bytes(range(256)) * 4)
expect("sections", ck.sections, {"train.state": b"step = 1234\n", "empty": b""})
expect("section order", [(s.name, s.kind) for s in ck.directory],
       [("config", 1), ("tokenizer", 2), ("tensor_table", 3), ("tensors", 4),
        ("train.state", 5), ("empty", 5)])
expect("codecs", [s.codec for s in ck.directory], [0, 1, 1, 1, 1, 1])

i = np.arange
want = [  # name, dtype, shape, values (all exact in their dtype)
    ("scalar.f32", "f32", (), [1.5]),
    ("vec.f64", "f64", (5,), i(5) * 0.5 - 1),
    ("mat.bf16", "bf16", (3, 4), i(12) * 0.25 - 1),
    ("cube.f16", "f16", (2, 3, 4), i(24) * 0.125 - 1),
    ("ids.i32", "i32", (2, 2, 2, 2), i(16) * 1000 - 7000),
    ("r5.f32", "f32", (1, 2, 1, 3, 1), i(6) - 2.0),
    ("r6.f32", "f32", (2, 1, 2, 1, 2, 1), i(8) * 0.5),
    ("empty.f32", "f32", (0, 7), []),
    ("big.f32", "f32", (1000, 600), (i(600000) % 1013) * 0.5),
]
expect("tensor names", list(ck.tensors), [w[0] for w in want])
for name, dtype, shape, values in want:
    t = ck.tensors.get(name)
    if t is None:
        continue
    expect(f"{name} dtype", t.dtype, dtype)
    expect(f"{name} shape", t.shape, shape)
    expect(f"{name} array shape", t.array.shape, shape)
    expect(f"{name} values", np.array_equal(t.array.reshape(-1).astype(np.float64),
                                            np.asarray(values, dtype=np.float64)), True)
offsets = [t.offset for t in ck.tensors.values()]
expect("offsets increase", offsets, sorted(offsets))
for line in bad:
    print("mismatch:", line, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# The summary program runs and sees all nine tensors.
"$python" "$here/tfm_checkpoint.py" "$tmp/model.bin" > "$tmp/summary.json" ||
  fail "tfm_checkpoint.py could not summarize the checkpoint"
"$python" -c 'import json, sys; sys.exit(len(json.load(open(sys.argv[1]))["tensors"]) != 9)' \
  "$tmp/summary.json" || fail "the summary does not list nine tensors"

# damaged FILE CUT WHAT: copies of FILE with a flipped byte in the middle and
# cut to CUT bytes are refused, for their CRC-32 and as truncated.
damaged() {
  local file=$1 cut=$2 what=$3 size
  size=$(stat -c %s "$file")
  cp "$file" "$tmp/flipped"
  printf '\xa5' | dd of="$tmp/flipped" bs=1 seek=$((size / 2)) conv=notrunc status=none
  if "$python" "$here/tfm_checkpoint.py" "$tmp/flipped" > /dev/null 2> "$tmp/err"; then
    fail "the reader accepted a $what with a flipped byte"
  fi
  grep -q 'CRC-32 mismatch' "$tmp/err" || fail "$what, flipped byte: unexpected error: $(cat "$tmp/err")"
  head -c "$cut" "$file" > "$tmp/cut"
  if "$python" "$here/tfm_checkpoint.py" "$tmp/cut" > /dev/null 2> "$tmp/err"; then
    fail "the reader accepted a truncated $what"
  fi
  grep -q 'truncated' "$tmp/err" || fail "$what, cut: unexpected error: $(cat "$tmp/err")"
}
size=$(stat -c %s "$tmp/model.bin")
damaged "$tmp/model.bin" $((size - 100)) checkpoint

# A vocabulary bundle: the two models' bytes and the table, as written.
for i in $(seq 1 200); do echo "the cat $i sat on the mat and a dog ran $((i * 7)) times"; done >"$tmp/src.txt"
for i in $(seq 1 200); do echo "die Katze $i saß auf der Matte, ein Hund lief $((i * 3)) Mal"; done >"$tmp/tgt.txt"
"$tok" train -q -o "$tmp/src.model" --vocab-size 60 "$tmp/src.txt" || fail "tfm-tok train (source)"
"$tok" train -q -o "$tmp/tgt.model" --vocab-size 70 "$tmp/tgt.txt" || fail "tfm-tok train (target)"
printf '</s>\n<unk>\n▁the\nGrüße\n▁日本\nx\n<pad>\n' >"$tmp/table"
"$vocab_bundle" "$tmp/v.tfmvocab" "$tmp/src.model" "$tmp/tgt.model" "$tmp/table" || fail "vocab_bundle"
"$tiny_checkpoint" "$tmp/bundle.bin" --tokenizer "$tmp/v.tfmvocab" || fail "tiny_checkpoint --tokenizer"
PYTHONPATH=$here "$python" - "$tmp" <<'PY' || fail "the Python reader disagrees with the bundle written"
import sys
import tfm_checkpoint

tmp = sys.argv[1]
want_src, want_tgt = open(f"{tmp}/src.model", "rb").read(), open(f"{tmp}/tgt.model", "rb").read()
want_pieces = ["</s>", "<unk>", "\u2581the", "Grüße", "\u2581日本", "x", "<pad>"]
bad = []
ck = tfm_checkpoint.read(f"{tmp}/bundle.bin")
alone = tfm_checkpoint.read_bundle(open(f"{tmp}/v.tfmvocab", "rb").read(), "v.tfmvocab")
if ck.tokenizer != open(f"{tmp}/v.tfmvocab", "rb").read():
    bad.append("the checkpoint's tokenizer is not the .tfmvocab file's bytes")
for where, b in (("checkpoint", ck.bundle), ("file", alone)):
    if b is None:
        bad.append(f"{where}: not read as a bundle")
        continue
    if b.source != want_src:
        bad.append(f"{where}: source model: {len(b.source)} bytes, not src.model's {len(want_src)}")
    if b.target != want_tgt:
        bad.append(f"{where}: target model: {len(b.target)} bytes, not tgt.model's {len(want_tgt)}")
    if b.pieces != want_pieces:
        bad.append(f"{where}: pieces {b.pieces!r}, want {want_pieces!r}")
if "vocab_size = 7" not in ck.config:
    bad.append(f"config does not say vocab_size = 7: {ck.config!r}")
plain = tfm_checkpoint.read_bundle(want_src, "src.model")
if plain is not None:
    bad.append("a SentencePiece model read as a bundle")
for line in bad:
    print("mismatch:", line, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
"$python" "$here/tfm_checkpoint.py" "$tmp/v.tfmvocab" > "$tmp/bundle.json" ||
  fail "tfm_checkpoint.py could not summarize the bundle"
grep -q '"pieces": 7' "$tmp/bundle.json" || fail "bundle summary: $(cat "$tmp/bundle.json")"
"$python" "$here/tfm_checkpoint.py" "$tmp/bundle.bin" > "$tmp/bundle.json" ||
  fail "tfm_checkpoint.py could not summarize the checkpoint with a bundle"
grep -q '"pieces": 7' "$tmp/bundle.json" || fail "checkpoint summary: no bundle: $(cat "$tmp/bundle.json")"
damaged "$tmp/v.tfmvocab" 40 "vocabulary bundle"
vsize=$(stat -c %s "$tmp/v.tfmvocab")
echo "checkpoint_reader: ok ($size bytes, every field as written; a bundle of $vsize bytes)"
