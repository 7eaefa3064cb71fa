#!/usr/bin/python3
"""An independent reader of tfm checkpoints, written from man/tfm.7
("CHECKPOINT FORMAT") alone: it shares no code with tfm's C++ and exists to
prove that page right.

Needs Python 3, numpy and zstandard (Debian: python3-numpy, python3-zstandard).

    import tfm_checkpoint
    ckpt = tfm_checkpoint.read("model.bin")   # raises CheckpointError
    ckpt.tensors["decoder.w_q"].array         # numpy array of the right shape

    ckpt.bundle                               # a vocabulary bundle, or None
    tfm_checkpoint.read_bundle(open("opus.tfmvocab", "rb").read(), "opus.tfmvocab")

Run as a program, it prints a JSON summary of a checkpoint (no tensor data)
or of a vocabulary bundle (.tfmvocab).
"""
import json
import struct
import sys
import zlib

import numpy as np
import zstandard

MAGIC = bytes([0x89]) + b"TFMCKPT"
VERSION = 1
HEADER_SIZE = 64
RESERVED_NAMES = {1: "config", 2: "tokenizer", 3: "tensor_table", 4: "tensors"}
OPTIONAL_KIND = 5
CODEC_STORED, CODEC_ZSTD = 0, 1
ZSTD_MAX_RATIO = 32768
MAX_RANK = 6
# dtype code -> (name, element size, numpy little-endian type of the stored bits)
DTYPES = {
    0: ("f32", 4, "<f4"),
    1: ("f64", 8, "<f8"),
    2: ("bf16", 2, "<u2"),
    3: ("f16", 2, "<f2"),
    4: ("i32", 4, "<i4"),
}


# The tokenizer slot's vocabulary bundle ("Vocabulary bundle").
BUNDLE_MAGIC = bytes([0x89]) + b"TFMVOCB"
BUNDLE_VERSION = 1
BUNDLE_HEADER = 32


class CheckpointError(Exception):
    pass


class Bundle:
    def __init__(self, source, target, pieces):
        self.source, self.target = source, target  # SentencePiece models (bytes)
        self.pieces = pieces                        # list of str: the piece of each id


def read_bundle(data, where):
    """A vocabulary bundle's bytes -> Bundle; None when `data` does not start
    with the bundle's magic (a SentencePiece model, or nothing)."""
    def fail(msg):
        raise CheckpointError(f"{where}: {msg}")

    if len(data) < len(BUNDLE_MAGIC) or data[:len(BUNDLE_MAGIC)] != BUNDLE_MAGIC:
        return None
    if len(data) < 12:
        fail("truncated vocabulary bundle")
    version = struct.unpack_from("<I", data, 8)[0]
    if version != BUNDLE_VERSION:
        fail(f"vocabulary bundle version {version}, expected {BUNDLE_VERSION}")
    if len(data) < BUNDLE_HEADER + 4:
        fail("truncated vocabulary bundle")
    count, source, target = struct.unpack_from("<IQQ", data, 12)
    if BUNDLE_HEADER + source + target + 3 * count + 4 > len(data):
        fail("truncated vocabulary bundle: the sizes in its header pass its end")
    body = len(data) - 4
    if zlib.crc32(data[:body]) != struct.unpack_from("<I", data, body)[0]:
        fail("vocabulary bundle CRC-32 mismatch")
    if source == 0 or target == 0:
        fail("vocabulary bundle with an empty model")
    cur = Bytes(data[:body], "vocabulary bundle", fail)
    cur.pos = BUNDLE_HEADER
    src, tgt = cur.take(source), cur.take(target)
    pieces = [cur.name() for _ in range(count)]
    if cur.left():
        fail("vocabulary bundle has bytes after its last piece")
    if len(set(pieces)) != len(pieces):
        fail("vocabulary bundle has a piece twice")
    if "<unk>" not in pieces:
        fail("vocabulary bundle without <unk>")
    return Bundle(src, tgt, pieces)


def bundle_summary(b):
    return {"pieces": len(b.pieces), "source": len(b.source), "target": len(b.target),
            "same_model": b.source == b.target, "unk": b.pieces.index("<unk>")}


class Section:
    def __init__(self, name, kind, codec, offset, stored, raw, crc_stored, crc_raw):
        self.name, self.kind, self.codec = name, kind, codec
        self.offset, self.stored, self.raw = offset, stored, raw
        self.crc_stored, self.crc_raw = crc_stored, crc_raw


class Tensor:
    def __init__(self, name, dtype, shape, offset, size):
        self.name, self.dtype, self.shape = name, dtype, shape
        self.offset, self.size = offset, size
        self.array = None  # numpy; bf16 is widened to float32 exactly

    def values(self):
        return self.array.reshape(-1).tolist()


class Checkpoint:
    def __init__(self):
        self.version = None
        self.file_size = None
        self.config = None      # str
        self.tokenizer = None   # bytes
        self.bundle = None      # Bundle when the tokenizer is one
        self.tensors = {}       # name -> Tensor, in table order
        self.sections = {}      # optional sections: name -> bytes, in file order
        self.directory = []     # every Section, in file order


class Bytes:
    """Reads little-endian fields from bytes, failing cleanly at the end."""

    def __init__(self, data, where, fail):
        self.data, self.pos, self.where, self.fail = data, 0, where, fail

    def take(self, n):
        if len(self.data) - self.pos < n:
            self.fail(f"{self.where} ends in the middle of an entry")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def uint(self, size):
        return int.from_bytes(self.take(size), "little")

    def name(self):
        n = self.uint(2)
        if n == 0:
            self.fail(f"{self.where} holds an empty name")
        raw = self.take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.fail(f"{self.where} holds a name that is not UTF-8")

    def left(self):
        return len(self.data) - self.pos


def read(path, tensors=True):
    def fail(msg):
        raise CheckpointError(f"{path}: {msg}")

    with open(path, "rb") as f:
        blob = f.read()
    ck = Checkpoint()
    ck.file_size = len(blob)

    # Header: magic, then version, then everything else.
    if not blob or blob[:len(MAGIC)] != MAGIC[:len(blob)]:
        fail("not a tfm checkpoint")
    if len(blob) < 12:
        fail("truncated inside the header")
    ck.version = struct.unpack_from("<I", blob, 8)[0]
    if ck.version != VERSION:
        fail(f"format version {ck.version}, expected {VERSION}")
    if len(blob) < HEADER_SIZE:
        fail("truncated inside the header")
    (reserved1, file_size, dir_offset, dir_size, n_entries, dir_crc) = struct.unpack_from(
        "<IQQQII", blob, 12)
    header_crc = struct.unpack_from("<I", blob, 60)[0]
    if zlib.crc32(blob[:60]) != header_crc:
        fail("header CRC-32 mismatch")
    if reserved1 != 0 or any(blob[48:60]):
        fail("reserved header bytes are not zero")
    if len(blob) < file_size:
        fail(f"truncated: {len(blob)} bytes, header says {file_size}")
    if len(blob) != file_size:
        fail(f"{len(blob)} bytes, header says {file_size}")
    if dir_offset < HEADER_SIZE or dir_offset + dir_size != file_size:
        fail("directory does not end the file")
    directory = blob[dir_offset:]
    if zlib.crc32(directory) != dir_crc:
        fail("directory CRC-32 mismatch")

    # Directory: sections tile [64, dir_offset).
    cur = Bytes(directory, "directory", fail)
    expected = HEADER_SIZE
    by_name = {}
    for _ in range(n_entries):
        name = cur.name()
        kind, codec = cur.uint(2), cur.uint(2)
        offset, stored, raw = cur.uint(8), cur.uint(8), cur.uint(8)
        crc_stored, crc_raw = cur.uint(4), cur.uint(4)
        if kind not in RESERVED_NAMES and kind != OPTIONAL_KIND:
            fail(f"section {name!r} has unknown kind {kind}")
        if kind in RESERVED_NAMES and name != RESERVED_NAMES[kind]:
            fail(f"section {name!r} has kind {kind}")
        if kind == OPTIONAL_KIND and name in RESERVED_NAMES.values():
            fail(f"optional section uses the reserved name {name!r}")
        if name in by_name:
            fail(f"two sections named {name!r}")
        if codec not in (CODEC_STORED, CODEC_ZSTD):
            fail(f"section {name!r} has unknown codec {codec}")
        if offset != expected or offset + stored > dir_offset:
            fail(f"section {name!r} is not where the one before it ends")
        expected = offset + stored
        if codec == CODEC_STORED and raw != stored:
            fail(f"stored section {name!r} has raw size {raw} != stored size {stored}")
        if codec == CODEC_ZSTD and raw > ZSTD_MAX_RATIO * stored:
            fail(f"section {name!r} claims {raw} raw bytes from {stored} stored")
        sec = Section(name, kind, codec, offset, stored, raw, crc_stored, crc_raw)
        by_name[name] = sec
        ck.directory.append(sec)
    if cur.left():
        fail("directory has bytes after its last entry")
    if expected != dir_offset:
        fail("sections do not reach the directory")
    for name in RESERVED_NAMES.values():
        if name not in by_name:
            fail(f"no {name!r} section")

    def content(sec):
        data = blob[sec.offset:sec.offset + sec.stored]
        if zlib.crc32(data) != sec.crc_stored:
            fail(f"section {sec.name!r}: stored CRC-32 mismatch")
        if sec.codec == CODEC_STORED:
            out = data
        else:
            dobj = zstandard.ZstdDecompressor().decompressobj()
            parts, got, step = [], 0, 1 << 20
            try:
                for i in range(0, len(data), step):
                    if dobj.eof:
                        fail(f"section {sec.name!r}: bytes after its zstd frame")
                    part = dobj.decompress(data[i:i + step])
                    got += len(part)
                    if got > sec.raw:
                        fail(f"section {sec.name!r} decompresses past {sec.raw} bytes")
                    parts.append(part)
            except zstandard.ZstdError as e:
                fail(f"section {sec.name!r}: zstd: {e}")
            if not dobj.eof:
                fail(f"section {sec.name!r}: incomplete zstd frame")
            if dobj.unused_data:
                fail(f"section {sec.name!r}: bytes after its zstd frame")
            out = b"".join(parts)
        if len(out) != sec.raw:
            fail(f"section {sec.name!r}: {len(out)} raw bytes, directory says {sec.raw}")
        if zlib.crc32(out) != sec.crc_raw:
            fail(f"section {sec.name!r}: raw CRC-32 mismatch")
        return out

    try:
        ck.config = content(by_name["config"]).decode("utf-8")
    except UnicodeDecodeError:
        fail("config is not UTF-8")

    # Tensor table.
    data_size = by_name["tensors"].raw
    cur = Bytes(content(by_name["tensor_table"]), "tensor table", fail)
    count = cur.uint(4)
    end = 0
    for _ in range(count):
        name = cur.name()
        code, rank = cur.uint(1), cur.uint(1)
        if code not in DTYPES:
            fail(f"tensor {name!r} has unknown dtype code {code}")
        if rank > MAX_RANK:
            fail(f"tensor {name!r} has rank {rank}")
        shape = tuple(cur.uint(8) for _ in range(rank))
        offset, size = cur.uint(8), cur.uint(8)
        dtype, elem, _ = DTYPES[code]
        need = elem
        for d in shape:
            need *= d  # Python integers do not overflow
        if need != size:
            fail(f"tensor {name!r} {dtype} {shape} needs {need} bytes, table says {size}")
        if name in ck.tensors:
            fail(f"tensor {name!r} appears twice")
        if offset < end:
            fail(f"tensor {name!r} overlaps the one before it")
        if offset + size > data_size:
            fail(f"tensor {name!r} ends past the tensor data")
        end = offset + size
        ck.tensors[name] = Tensor(name, dtype, shape, offset, size)
    if cur.left():
        fail("tensor table has bytes after its last entry")

    if tensors:
        ck.tokenizer = content(by_name["tokenizer"])
        ck.bundle = read_bundle(ck.tokenizer, f"{path}: tokenizer")
        data = content(by_name["tensors"])
        np_types = {name: np_type for name, _, np_type in DTYPES.values()}
        for t in ck.tensors.values():
            np_type = np.dtype(np_types[t.dtype])
            a = np.frombuffer(data, dtype=np_type, count=t.size // np_type.itemsize,
                              offset=t.offset).reshape(t.shape)
            if t.dtype == "bf16":  # the upper half of a binary32
                a = (a.astype("<u4") << 16).view("<f4")
            t.array = a
        for sec in ck.directory:
            if sec.kind == OPTIONAL_KIND:
                ck.sections[sec.name] = content(sec)
    return ck


def summary(ck):
    if ck.tokenizer is None:
        tokenizer = None
    elif ck.bundle is not None:
        tokenizer = {"bundle": bundle_summary(ck.bundle)}
    else:
        tokenizer = {"sentencepiece": len(ck.tokenizer)} if ck.tokenizer else {}
    return {
        "version": ck.version,
        "tokenizer": tokenizer,
        "file_size": ck.file_size,
        "config": ck.config,
        "sections": [{"name": s.name, "kind": s.kind, "codec": s.codec, "stored": s.stored,
                      "raw": s.raw} for s in ck.directory],
        "tensors": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape),
                     "offset": t.offset, "bytes": t.size} for t in ck.tensors.values()],
    }


def main(argv):
    if len(argv) != 2:
        print("usage: tfm_checkpoint.py CHECKPOINT", file=sys.stderr)
        return 2
    try:
        with open(argv[1], "rb") as f:
            head = f.read(len(BUNDLE_MAGIC))
        if head == BUNDLE_MAGIC:
            with open(argv[1], "rb") as f:
                out = {"bundle": bundle_summary(read_bundle(f.read(), argv[1]))}
        else:
            out = summary(read(argv[1]))
    except (CheckpointError, OSError) as e:
        print(f"tfm_checkpoint.py: error: {e}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
