"""tfm's foreign-file readers (libcore/io/) against the writers themselves.

Usage: foreign_readers.py DUMP_VALUES WORKDIR

Python writes the files (numpy's np.savez and np.savez_compressed, torch.save
with pickle protocols 2, 4 and 5, a safetensors file by the documented
layout, JSON by the json module, YAML by PyYAML as Marian's files look) and
builds what each holds in dump_values' encoding (tests/tools/dump_values.cc);
dump_values prints what tfm read. The two must be equal, floats bit for bit
(both sides go through json.dumps, which writes the shortest exact form).
Then cut copies of every file must be refused: exit 1, one line on stderr.
Exit status 0 when everything agrees; every difference is printed.
"""
import argparse
import collections
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import torch
import yaml

DUMP, WORK = sys.argv[1], sys.argv[2]
problems = []

# ---- the expected side: Python values in dump_values' encoding ----

NUMPY_TYPES = {np.float64: "f64", np.float32: "f32", np.float16: "f16", np.int64: "i64", np.int32: "i32",
               np.int16: "i16", np.int8: "i8", np.uint8: "u8", np.bool_: "bool"}
TORCH_TYPES = {torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
               torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
               torch.bool: "bool"}


def enc_float(x):
    if math.isnan(x):
        return {"float": "nan"}
    if math.isinf(x):
        return {"float": "inf" if x > 0 else "-inf"}
    return x


def enc_array(dtype, shape, flat):
    values = [enc_float(float(v)) if dtype in ("f64", "f32", "f16", "bf16") else v for v in flat]
    return {"array": dtype, "shape": list(shape), "values": values}


def enc(x):
    if x is None or isinstance(x, bool) or isinstance(x, str):
        return x
    if isinstance(x, int):
        return x if -2**63 <= x < 2**63 else float(x)  # past int64: the nearest float
    if isinstance(x, float):
        return enc_float(x)
    if isinstance(x, (bytes, bytearray)):
        return {"bytes": bytes(x).hex()}
    if isinstance(x, list):
        return [enc(v) for v in x]
    if isinstance(x, (set, frozenset)):
        return [enc(v) for v in x]  # pickled in iteration order
    if isinstance(x, tuple):
        return {"tuple": [enc(v) for v in x]}
    if isinstance(x, dict):
        return {"dict": [[enc(k), enc(v)] for k, v in x.items()]}
    if isinstance(x, torch.Tensor):
        t = x.detach()
        dtype = TORCH_TYPES[t.dtype]
        flat = t.reshape(-1)
        flat = (flat.double() if dtype.startswith("f") or dtype == "bf16" else flat).tolist()
        return enc_array(dtype, t.shape, flat)
    if isinstance(x, np.ndarray):
        dtype = NUMPY_TYPES[x.dtype.type]
        flat = x.reshape(-1, order="C")
        flat = (flat.astype(np.float64) if dtype.startswith("f") else flat).tolist()
        return enc_array(dtype, x.shape, flat)
    if isinstance(x, argparse.Namespace):
        return {"object": "argparse.Namespace", "args": {"tuple": []}, "state": enc(vars(x))}
    if isinstance(x, torch.dtype):
        return {"global": str(x)}
    raise TypeError(f"no encoding for {type(x)}")


def dump(kind, path):
    r = subprocess.run([DUMP, kind, path], capture_output=True, text=True)
    if r.returncode != 0:
        problems.append(f"{path}: dump_values {kind} failed ({r.returncode}): {r.stderr.strip()}")
        return None
    return json.loads(r.stdout)


def first_difference(got, want, at="$"):
    if type(got) is not type(want):
        return f"{at}: got {json.dumps(got)[:200]}, want {json.dumps(want)[:200]}"
    if isinstance(want, dict):
        if list(got) != list(want):
            return f"{at}: keys {list(got)} != {list(want)}"
        for k in want:
            d = first_difference(got[k], want[k], f"{at}.{k}")
            if d:
                return d
        return None
    if isinstance(want, list):
        if len(got) != len(want):
            return f"{at}: {len(got)} elements, want {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            d = first_difference(g, w, f"{at}[{i}]")
            if d:
                return d
        return None
    if json.dumps(got) != json.dumps(want):  # floats: same shortest form = same bits (-0.0 included)
        return f"{at}: got {json.dumps(got)}, want {json.dumps(want)}"
    return None


def check(kind, path, want):
    got = dump(kind, path)
    if got is None:
        return
    d = first_difference(got, want)
    if d:
        problems.append(f"{os.path.basename(path)}: {d}")


def refuse_cut(kind, path):
    data = open(path, "rb").read()
    for keep in (len(data) // 2, len(data) - 7, 5):
        cut = path + f".cut{keep}"
        with open(cut, "wb") as f:
            f.write(data[:keep])
        r = subprocess.run([DUMP, kind, cut], capture_output=True, text=True)
        lines = r.stderr.splitlines()
        if r.returncode != 1 or len(lines) != 1 or not lines[0].startswith("dump_values: error: "):
            problems.append(f"{os.path.basename(cut)} ({keep} of {len(data)} bytes): exit {r.returncode}, "
                            f"stderr {r.stderr!r}: want exit 1 and one error line")


def path(name):
    return os.path.join(WORK, name)


# ---- numpy: np.savez and np.savez_compressed ----

rng = np.random.default_rng(40)
marian_yml = 'type: transformer\ndim-emb: 512\nvocabs:\n  - "vocab.spm"\n  - vocab.spm\n# Grüße\n'
arrays = {
    "f32": rng.standard_normal((3, 5)).astype(np.float32),
    "f16": np.array([0.1, -2.5, 65504, 6e-8, -0.0, np.inf, 1e-5], dtype=np.float16),
    "special:model.yml": np.frombuffer(marian_yml.encode("utf-8"), dtype=np.int8),
    "i64": np.array([-2**63, -1, 0, 2**62, 2**63 - 1], dtype=np.int64),
    "bool": np.array([[True, False], [False, True]]),
    "scalar": np.array(3.25),
    "cube": rng.standard_normal((2, 3, 4)),
    "fortran": np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4)),
    "big_endian": np.arange(5, dtype=">f4") / 3,
    "u8": np.arange(250, 256, dtype=np.uint8),
    "empty": np.zeros((0, 4), dtype=np.float32),
}
want_npz = {"dict": [[k, enc(v.astype(v.dtype.newbyteorder("="))) if k == "big_endian" else enc(v)]
                     for k, v in arrays.items()]}
np.savez(path("plain.npz"), **arrays)
np.savez_compressed(path("compressed.npz"), **arrays)
for name in ("plain.npz", "compressed.npz"):
    check("npz", path(name), want_npz)
    refuse_cut("npz", path(name))

# ---- torch.save ----

g = torch.Generator().manual_seed(40)
base = torch.randn(20, generator=g)
state = collections.OrderedDict()
state["f32"] = torch.randn(3, 4, generator=g)
state["f16"] = torch.tensor([0.1, -2.5, 65504, 6e-8, -0.0, float("inf"), 1e-5], dtype=torch.float16)
state["bf16"] = torch.randn(2, 3, generator=g).bfloat16()
state["f64"] = torch.randn(2, 2, generator=g, dtype=torch.float64)
state["i64"] = torch.arange(-5, 7).reshape(3, 4)
state["i32"] = torch.tensor([-2**31, 2**31 - 1], dtype=torch.int32)
state["i16"] = torch.tensor([-300, 300], dtype=torch.int16)
state["i8"] = torch.tensor([-128, 127], dtype=torch.int8)
state["u8"] = torch.tensor([0, 255], dtype=torch.uint8)
state["bool"] = torch.tensor([True, False, True])
state["transposed"] = torch.randn(3, 5, generator=g).t()
state["share_a"] = base[2:8].view(2, 3)
state["share_b"] = base[10:16]
state["every_third"] = base[::3]
state["column"] = torch.randn(4, 6, generator=g)[:, 1:3]
state["param"] = torch.nn.Parameter(torch.randn(4, generator=g))
state["scalar"] = torch.tensor(2.5)
state["empty"] = torch.zeros(0, 3)
torch.save(state, path("state.pt"))
check("torch", path("state.pt"), enc(state))
refuse_cut("torch", path("state.pt"))

shared = [1, "two"]
checkpoint = {
    "args": argparse.Namespace(arch="transformer_wmt_en_de", lr=[0.0005], dropout=0.1,
                               share_all_embeddings=True, max_tokens=None, seed=2**40, name="Grüße"),
    "nested": {"a": [1, 2.5, None, True, False], "b": (1, "x", (2, (3,))), "c": {"d": {}, 5: "five"}},
    "ints": [0, -1, 255, 256, 65535, 65536, 2**31 - 1, -2**31, 2**31, 2**62, -2**63, 2**63 - 1,
             2**64 + 1, -(2**70) - 1, 3**50, 2**100],
    "floats": [0.1, -0.0, 1e308, 5e-324, float("inf"), float("-inf"), float("nan")],
    "bytes": b"\x00\x01\x7f\x80\xff abc",
    "set": {7},
    "shared": shared,
    "shared_again": shared,
    "dtype": torch.float32,
    "model": collections.OrderedDict([("w", torch.ones(2, 2)), ("b", torch.zeros(2))]),
    "linear": torch.nn.Linear(3, 2).state_dict(),  # an OrderedDict with a _metadata attribute (dropped)
}
for protocol in (2, 4, 5):
    name = f"checkpoint_p{protocol}.pt"
    torch.save(checkpoint, path(name), pickle_protocol=protocol)
    check("torch", path(name), enc(checkpoint))
refuse_cut("torch", path("checkpoint_p2.pt"))

# The legacy format is refused with a line that says what to do.
torch.save(state, path("legacy.pt"), _use_new_zipfile_serialization=False)
r = subprocess.run([DUMP, "torch", path("legacy.pt")], capture_output=True, text=True)
if r.returncode != 1 or len(r.stderr.splitlines()) != 1 or "re-save" not in r.stderr:
    problems.append(f"legacy.pt: exit {r.returncode}, stderr {r.stderr!r}: want one line saying to re-save")

# ---- safetensors, written by the documented layout ----

tensors = collections.OrderedDict([
    ("w.f32", torch.randn(2, 3, generator=g)),
    ("w.f16", torch.randn(4, generator=g).half()),
    ("w.bf16", torch.randn(3, 2, generator=g).bfloat16()),
    ("w.f64", torch.randn(2, generator=g, dtype=torch.float64)),
    ("ids.i64", torch.tensor([[-2**63, 2**63 - 1]])),
    ("ids.i32", torch.tensor([7, -7], dtype=torch.int32)),
    ("ids.i16", torch.tensor([-1], dtype=torch.int16)),
    ("ids.i8", torch.tensor([-128, 5], dtype=torch.int8)),
    ("ids.u8", torch.tensor([200], dtype=torch.uint8)),
    ("mask", torch.tensor([[True], [False]])),
    ("scalar", torch.tensor(-1.5)),
    ("empty", torch.zeros(0, 2)),
])
NAMES = {"f64": "F64", "f32": "F32", "f16": "F16", "bf16": "BF16", "i64": "I64", "i32": "I32", "i16": "I16",
         "i8": "I8", "u8": "U8", "bool": "BOOL"}
header, blobs, offset = {"__metadata__": {"format": "pt", "note": "Grüße"}}, [], 0
for name, t in tensors.items():
    raw = t.contiguous().view(torch.uint8).numpy().tobytes() if t.dim() else t.reshape(1).view(torch.uint8).numpy().tobytes()
    header[name] = {"dtype": NAMES[TORCH_TYPES[t.dtype]], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
    blobs.append(raw)
    offset += len(raw)
text = json.dumps(header, ensure_ascii=False).encode("utf-8")
text += b" " * (-len(text) % 8)
with open(path("model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
want = {"dict": [["__metadata__", enc(header["__metadata__"])]] + [[k, enc(v)] for k, v in tensors.items()]}
check("safetensors", path("model.safetensors"), want)
refuse_cut("safetensors", path("model.safetensors"))

# ---- JSON (config.json, vocab.json) ----

config = {"d_model": 512, "dropout": 0.1, "tiny": 5e-324, "big": 2**70, "neg": -2**63, "name": "Grüße \u2028 😀",
          "escapes": "\"\\/\b\f\n\r\t\x01", "list": [1, [2, [3, {}]], None, True, False], "obj": {"k": -0.0}}
for ascii_only in (True, False):
    name = f"config_{int(ascii_only)}.json"
    with open(path(name), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=ascii_only, indent=1)
    check("json", path(name), enc(config))
refuse_cut("json", path("config_1.json"))

# ---- YAML: Marian's model.yml and vocabulary as PyYAML writes them ----
# (Values on which YAML 1.1, PyYAML's, and 1.2, tfm's, agree.)

model_yml = {"type": "transformer", "dim-emb": 512, "dim-vocabs": [32000, 32000], "label-smoothing": 0.1,
             "eps": 1e-08, "tied-embeddings-all": True, "relative-paths": False, "empty": "", "none": None,
             "version": "v1.12.0 65bf82ff 2023-02-21 09:56:29 -0800", "vocabs": ["vocab.spm", "vocab two.spm"],
             "quoted-number": "123", "quoted-bool": "true", "colon": "a: b", "hash": "a #b"}
pieces = ["</s>", "<unk>", "\u2581the", "\x01", 'a"b', "it's", "\\", "#", "- x", ": y", "true", "123", " lead",
          "trail ", "\u2028", "😀", "é", "\x7f", "\x85", "[x", "{", "*a", "&a", "!", "%", "@", "`", "|", ">", ",",
          "?", "null", "~", "", "a:b", "a: b", "tab\there", "\ufeff"]
vocab = {p: i for i, p in enumerate(pieces)}
for style in ("block", "flow"):
    name = f"model_{style}.yml"
    with open(path(name), "w", encoding="utf-8") as f:
        yaml.safe_dump(model_yml, f, sort_keys=False, width=10**6, default_flow_style=None if style == "flow" else False)
    check("yaml", path(name), enc(model_yml))
# Written as UTF-8, U+0085 and U+2028 are line breaks to YAML 1.1 (PyYAML
# folds them in a quoted key) but not to YAML 1.2 (yaml-cpp, Marian's, and
# tfm): those two are checked escaped only.
for unicode in (True, False):
    name = f"vocab_{int(unicode)}.yml"
    v = {p: i for p, i in vocab.items() if not unicode or p not in ("\x85", "\u2028")}
    with open(path(name), "w", encoding="utf-8") as f:
        yaml.safe_dump(v, f, sort_keys=False, width=10**6, allow_unicode=unicode)
    check("yaml", path(name), enc(v))

for p in problems:
    print("foreign_readers: mismatch:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
