# tfm.Tokenizer against tfm-tok (encode) and tfm-tok -d (decode), from a
# SentencePiece model and from a checkpoint that embeds it.
import tfm
from conftest import run


def test_encode_as_tok(data):
    lines = data.lines[:50] + ["", "  a  b ", "ünïcödé x"]
    want = run("tfm-tok", "-q", "-m", data.spm, data.file("tok.txt", lines)).split("\n")[:-1]
    for path in (data.spm, data.model):
        assert tfm.Tokenizer(str(path)).encode(lines) == [w.split() for w in want]


def test_decode_as_tok_d(data):
    tok = tfm.Tokenizer(str(data.spm))
    pieces = tok.encode(data.lines[:50]) + [[]]
    want = run("tfm-tok", "-q", "-d", "-m", data.spm,
               data.file("tok.pieces", [" ".join(p) for p in pieces])).split("\n")[:-1]
    assert tok.decode(pieces) == want
    assert tok.decode(pieces[:50]) == data.lines[:50]
    assert len(tok) == tok.size == 29
