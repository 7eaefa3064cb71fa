#!/bin/bash
# Usage: checkpoint_reader.sh CHECKPOINT_FIXTURE
#
# The fixture (checkpoint_fixture.cc) writes a checkpoint with known
# contents; tfm_checkpoint.py, an independent reader written from man/tfm.7,
# reads it back, and every field and value is checked against the list below
# (the same list as in checkpoint_fixture.cc). Then damaged copies must be
# refused. Any mismatch, and a missing numpy or zstandard, fails the test:
# it never skips.
set -euo pipefail

fixture=${1:?usage: checkpoint_reader.sh CHECKPOINT_FIXTURE}
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

# Damaged copies are refused: a flipped byte in the middle, a cut file.
size=$(stat -c %s "$tmp/model.bin")
cp "$tmp/model.bin" "$tmp/flipped.bin"
printf '\xa5' | dd of="$tmp/flipped.bin" bs=1 seek=$((size / 2)) conv=notrunc status=none
if "$python" "$here/tfm_checkpoint.py" "$tmp/flipped.bin" > /dev/null 2> "$tmp/err"; then
  fail "the reader accepted a checkpoint with a flipped byte"
fi
grep -q 'CRC-32 mismatch' "$tmp/err" || fail "flipped byte: unexpected error: $(cat "$tmp/err")"
head -c $((size - 100)) "$tmp/model.bin" > "$tmp/cut.bin"
if "$python" "$here/tfm_checkpoint.py" "$tmp/cut.bin" > /dev/null 2> "$tmp/err"; then
  fail "the reader accepted a truncated checkpoint"
fi
grep -q 'truncated' "$tmp/err" || fail "cut file: unexpected error: $(cat "$tmp/err")"
echo "checkpoint_reader: ok ($size bytes, every field as written)"
