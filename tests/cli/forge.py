"""Whole but wrong files for the cli tests: every checksum right, one field
changed, as an adversarial user (or a bug elsewhere) would make them.

  forge.py tfmb-vocab IN OUT N           a .tfmb whose header says N pieces
  forge.py tfmb-fingerprint IN OUT HEX   its fingerprint bytes (hex) replaced
  forge.py tfmb-batch-start IN OUT N     its first batch starting at pair N
  forge.py ckpt-section IN OUT NAME KIND the first extra section renamed NAME
                                         (\\n allowed) with kind code KIND

Layouts: man/tfm-batch.1 (FILE FORMAT), man/tfm.7 (CHECKPOINT FORMAT).
"""
import struct
import sys
import zlib


def tfmb(path):
    return bytearray(open(path, "rb").read())


def tfmb_seal(b):
    blocks, batches = struct.unpack_from("<II", b, 68)
    table = 128 + 32 * blocks + 8 * batches
    struct.pack_into("<I", b, 76, zlib.crc32(bytes(b[128:table])))
    struct.pack_into("<I", b, 124, zlib.crc32(bytes(b[:124])))
    return b


def ckpt_section(src, name, kind):
    b = bytearray(open(src, "rb").read())
    dir_offset, dir_bytes = struct.unpack_from("<QQ", b, 24)
    (count,) = struct.unpack_from("<I", b, 40)
    d = bytes(b[dir_offset:dir_offset + dir_bytes])
    out, pos, done = bytearray(), 0, False
    reserved = {b"config", b"tokenizer", b"tensor_table", b"tensors"}
    for _ in range(count):
        (n,) = struct.unpack_from("<H", d, pos)
        old = d[pos + 2:pos + 2 + n]
        rest = bytearray(d[pos + 2 + n:pos + 2 + n + 36])
        pos += 2 + n + 36
        if not done and old not in reserved:
            old = name
            struct.pack_into("<H", rest, 0, kind)
            done = True
        out += struct.pack("<H", len(old)) + old + rest
    assert done, "no extra section to forge (write the file with --step)"
    b = b[:dir_offset] + out
    struct.pack_into("<QQQ", b, 16, len(b), dir_offset, len(out))
    struct.pack_into("<I", b, 44, zlib.crc32(bytes(out)))
    struct.pack_into("<I", b, 60, zlib.crc32(bytes(b[:60])))
    return b


def main():
    what, src, dst = sys.argv[1:4]
    if what == "tfmb-vocab":
        b = tfmb(src)
        struct.pack_into("<Q", b, 48, int(sys.argv[4]))
        b = tfmb_seal(b)
    elif what == "tfmb-fingerprint":
        b = tfmb(src)
        fp = bytes.fromhex(sys.argv[4])
        b[80:124] = fp + bytes(44 - len(fp))
        b = tfmb_seal(b)
    elif what == "tfmb-batch-start":
        b = tfmb(src)
        (blocks,) = struct.unpack_from("<I", b, 68)
        struct.pack_into("<I", b, 128 + 32 * blocks, int(sys.argv[4]))
        b = tfmb_seal(b)
    elif what == "ckpt-section":
        b = ckpt_section(src, sys.argv[4].encode().decode("unicode_escape").encode("latin-1"), int(sys.argv[5]))
    else:
        sys.exit("forge.py: unknown forgery " + what)
    open(dst, "wb").write(bytes(b))


main()
