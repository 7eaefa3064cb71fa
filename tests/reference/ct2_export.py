"""CTranslate2 on a model tfm's native writer made (ct2_export.sh).

    ct2_export.py same DIR_A DIR_B NAME
        the two model directories hold the same files, byte for byte; where
        not, the variables of the two model.bin (names, shapes, dtypes,
        values) are compared and the first difference said
    ct2_export.py agree CT2_DIR SOURCE_PIECES GREEDY_JSON TARGET_PIECES SCORE_JSON NAME
        CTranslate2 (compute type float32, CPU) loads CT2_DIR; its greedy
        output equals tfm-decode's (GREEDY_JSON: --beam 1 --json) on every
        line, and its forced scoring (score_batch) of tfm's outputs and of
        the references TARGET_PIECES gives every token's log-probability,
        the end token's included, within 1e-4 of tfm-decode's
        token_log_probs and of tfm-score -m's (SCORE_JSON: -sl --json)
    ct2_export.py ready
        exits 77 (skipped), saying so, where ctranslate2, numpy or zstandard
        cannot be imported
    ct2_export.py corpus DIR
        DIR/{train,test}.{src,tgt}: 8000 and 40 sentences of 3 to 12
        one-letter words and their reversals
    ct2_export.py pieces DIR
        prints a bundle's piece table: <pad> <unk> <s> </s>, then the pieces
        of DIR/train.tok.{src,tgt}
    ct2_export.py loads CT2_DIR SOURCE_PIECES NAME
        CTranslate2 loads CT2_DIR (int8 weights: compute type int8) and
        translates every line
Prints one line; exits 1 on a failed check.
"""
import filecmp
import json
import os
import struct
import sys

LOGPROB_TOL = 1e-4
DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")


def read_model_bin(path):
    """model.bin as {name: (shape, dtype, bytes)} and {alias: target}, read
    from the format's description (ct2.h), independently of the writer."""
    b = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, b, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("H")
        s = b[pos:pos + n - 1].decode("utf-8")
        assert b[pos + n - 1] == 0, f"{path}: a string without its NUL at {pos}"
        pos += n
        return s

    header = (take("I"), string(), take("I"))
    variables = {}
    for _ in range(take("I")):
        name = string()
        shape = tuple(take("I") for _ in range(take("B")))
        dtype = DTYPES[take("B")]
        n = take("I")
        variables[name] = (shape, dtype, b[pos:pos + n])
        pos += n
    aliases = {}
    for _ in range(take("I")):
        alias = string()
        aliases[alias] = string()
    assert pos == len(b), f"{path}: {len(b) - pos} bytes after the aliases"
    return header, variables, aliases


def same(a, b):
    files = sorted(os.listdir(a))
    if files != sorted(os.listdir(b)):
        return [f"files differ: {files} and {sorted(os.listdir(b))}"]
    bad = [f for f in files if not filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False)]
    if "model.bin" in bad:
        ha, va, aa = read_model_bin(os.path.join(a, "model.bin"))
        hb, vb, ab = read_model_bin(os.path.join(b, "model.bin"))
        if ha != hb:
            return [f"model.bin headers differ: {ha} and {hb}"]
        if va.keys() != vb.keys():
            return [f"variables only in one: {sorted(va.keys() ^ vb.keys())[:5]}"]
        for name in sorted(va):
            if va[name] != vb[name]:
                return [f"variable {name} differs: {va[name][:2]} and {vb[name][:2]}"]
        if aa != ab:
            return [f"aliases differ: {sorted(set(aa.items()) ^ set(ab.items()))[:5]}"]
    return [f"{f} differs" for f in bad]


def translator(model):
    import ctranslate2
    with open(os.path.join(model, "model.bin"), "rb") as f:
        int8 = b"weight_scale" in f.read()
    return ctranslate2.Translator(model, device="cpu", compute_type="int8" if int8 else "float32",
                                  intra_threads=1)


def translate(tr, src):
    """Every line greedily, with tfm-decode's limit of |x| + 50 tokens (one
    limit a call, so one source length a call)."""
    out = [None] * len(src)
    for n in sorted({len(s) for s in src}):
        lines = [i for i, s in enumerate(src) if len(s) == n]
        for i, r in zip(lines, tr.translate_batch([src[i] for i in lines], beam_size=1, max_batch_size=32,
                                                   max_decoding_length=n + 50, min_decoding_length=0)):
            out[i] = r.hypotheses[0]
    return out


def pieces(path):
    return [line.split() for line in open(path, encoding="utf-8").read().splitlines()]


def agree(model, source, greedy_json, target, score_json):
    src, tgt = pieces(source), pieces(target)
    greedy = [json.loads(line)["hypotheses"][0] for line in open(greedy_json, encoding="utf-8")]
    forced = [json.loads(line) for line in open(score_json, encoding="utf-8")]
    assert len(src) == len(greedy) == len(tgt) == len(forced), (len(src), len(greedy), len(tgt), len(forced))
    tr = translator(model)
    bad = []
    got = translate(tr, src)
    diff = [i for i, (h, g) in enumerate(zip(got, greedy)) if h != g["tokens"]]
    if diff:
        i = diff[0]
        bad.append(f"greedy: {len(diff)} of {len(src)} lines differ; line {i + 1}: "
                   f"tfm {' '.join(greedy[i]['tokens'])!r} ct2 {' '.join(got[i])!r}")
    worst, tokens = (0.0, None), 0
    for what, outputs, tfm in (("tfm-decode", [g["tokens"] for g in greedy], greedy), ("tfm-score", tgt, forced)):
        for i, (r, t) in enumerate(zip(tr.score_batch(src, outputs), tfm)):
            if len(r.log_probs) != len(t["token_log_probs"]):
                bad.append(f"{what} line {i + 1}: ct2 scores {len(r.log_probs)} tokens, tfm {len(t['token_log_probs'])}")
                continue
            tokens += len(r.log_probs)
            for a, b in zip(r.log_probs, t["token_log_probs"]):
                if abs(a - b) > worst[0]:
                    worst = (abs(a - b), f"{what} line {i + 1}: ct2 {a:.6f} tfm {b:.6f}")
    if worst[0] > LOGPROB_TOL:
        bad.append(f"token log-probabilities differ by up to {worst[0]:.2e} ({worst[1]})")
    return bad, f"{len(src)} lines greedy identical, {tokens} token log-probs within {worst[0]:.1e}"


def loads(model, source):
    src = pieces(source)
    got = translate(translator(model), src)
    bad = [] if all(h is not None for h in got) else ["lines without a translation"]
    return bad, f"loaded, {len(src)} lines translated, {sum(map(len, got))} tokens"


def corpus(out):
    import random
    r = random.Random(5)
    words = [chr(ord("a") + i) for i in range(26)] + ["A", "B", "C", "D"]
    for name, n in (("train", 8000), ("test", 40)):
        src = [[r.choice(words) for _ in range(r.randint(3, 12))] for _ in range(n)]
        with open(f"{out}/{name}.src", "w") as f:
            f.writelines(" ".join(s) + "\n" for s in src)
        with open(f"{out}/{name}.tgt", "w") as f:
            f.writelines(" ".join(reversed(s)) + "\n" for s in src)


def main(argv):
    mode = argv[1]
    if mode == "ready":
        try:
            import ctranslate2, numpy, zstandard  # noqa: F401
        except ImportError as e:
            print(f"ct2_export: skipped: {sys.executable}: {e} (make -f Makefile.data deps)")
            return 77
        return 0
    if mode == "corpus":
        return corpus(argv[2])
    if mode == "pieces":
        used = {p for side in ("src", "tgt") for p in open(f"{argv[2]}/train.tok.{side}").read().split()}
        print("\n".join(["<pad>", "<unk>", "<s>", "</s>"] + sorted(used)))
        return 0
    if mode == "same":
        bad, ok, name = same(argv[2], argv[3]), "byte-identical to tfm-to-ct2's", argv[4]
    elif mode == "agree":
        (bad, ok), name = agree(*argv[2:7]), argv[7]
    elif mode == "loads":
        (bad, ok), name = loads(*argv[2:4]), argv[4]
    else:
        print(f"ct2_export.py: unknown mode {mode}", file=sys.stderr)
        return 2
    for b in bad:
        print(f"ct2_export ({name}): {b}", file=sys.stderr)
    if not bad:
        print(f"ct2_export ({name}): {ok}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
