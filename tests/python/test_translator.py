# tfm.Translator against the programs it mirrors, bit for bit:
# translate(text) as tfm-tok | tfm-decode --detok, translate(pieces) as
# tfm-decode, n-best lists, scores and attention as tfm-decode --json
# (its float32 numbers in their shortest form, which reads back exactly), score() as tfm-score -m --json.
import json
import threading
import time

import numpy as np
import pytest

import tfm
from conftest import run


@pytest.fixture(scope="module")
def translator(data):
    return tfm.Translator(str(data.model), device="cpu")


def sources(data):
    return data.lines[:40] + [""] + data.lines[40:60]


def test_text_as_tok_decode_detok(data, translator):
    src = data.file("src.txt", sources(data))
    pieces = run("tfm-tok", "-q", "-m", data.model, src)
    piece_file = data.file("src.pieces", pieces.splitlines())
    want = run("tfm-decode", "-q", "-m", data.model, "--device", "cpu", "--detok", piece_file).splitlines()
    assert translator.translate(sources(data)) == want


def test_pieces_as_decode(data, translator):
    pieces = run("tfm-tok", "-q", "-m", data.model, data.file("src.txt", sources(data))).splitlines()
    want = run("tfm-decode", "-q", "-m", data.model, "--device", "cpu", "--beam", 2, "--alpha", 1.0,
               "--max-len-a", 0.5, "--max-len-b", 3, data.file("src.pieces", pieces)).splitlines()
    got = translator.translate([p.split() for p in pieces], beam=2, alpha=1.0, max_len_a=0.5, max_len_b=3)
    assert got == [w.split() for w in want]


def test_nbest_scores_attention_as_json(data, translator):
    src = sources(data)[30:50]
    pieces = run("tfm-tok", "-q", "-m", data.model, data.file("src.txt", src)).splitlines()
    out = run("tfm-decode", "-q", "-m", data.model, "--device", "cpu", "--beam", 4, "-n", 3, "--json",
              "--attention", "--detok", data.file("src.pieces", pieces))
    want = [json.loads(line) for line in out.splitlines()]
    got = translator.translate(src, beam=4, n_best=3, return_scores=True, return_attention=True)
    assert len(got) == len(want)
    for hyps, line in zip(got, want):
        assert len(hyps) == len(line["hypotheses"])
        for h, w in zip(hyps, line["hypotheses"]):
            assert h.output == w["text"]
            assert h.score == w["score"] and h.log_prob == w["log_prob"]
            # JSON writes a float32 in its shortest form: the same float32.
            assert np.array_equal(np.float32(h.token_log_probs), np.float32(w["token_log_probs"]))
            a = np.asarray(w["attention"], dtype=np.float32).reshape(h.attention.shape)
            assert h.attention.dtype == np.float32 and h.attention.shape[0] == len(w["token_log_probs"])
            assert np.array_equal(h.attention, a)


def test_attention_array_owns_no_copy(data, translator):
    (h,) = translator.translate([data.lines[0]], return_attention=True)[0]
    # The array views the search's buffer, kept alive by its owner (no copy made).
    assert not h.attention.flags.owndata and h.attention.base is not None


def test_score_as_score_m(data, translator):
    src, tgt = data.lines[:30], data.lines[30:60]
    s = data.file("score.src", run("tfm-tok", "-q", "-m", data.model, data.file("s.txt", src)).splitlines())
    t = data.file("score.tgt", run("tfm-tok", "-q", "-m", data.model, data.file("t.txt", tgt)).splitlines())
    want = json.loads(run("tfm-score", "-q", "-m", data.model, "--device", "cpu", "--json", s, t))
    got = translator.score(src, tgt)
    assert got.log_prob == want["log_prob"] and got.perplexity == want["perplexity"]
    assert got.tokens == want["tokens"] and len(got.sentences) == want["sentences"]
    lines = run("tfm-score", "-q", "-m", data.model, "--device", "cpu", "-sl", "-w", 6, s, t).splitlines()
    assert [f"{x:.6f}" for x in got.sentences] == [line.split("\t")[0] for line in lines]


def test_length_penalty_and_early_stopping_as_decode(data, translator):
    pieces = run("tfm-tok", "-q", "-m", data.model, data.file("src.txt", sources(data))).splitlines()
    for lp, es in (("plain", "beam"), ("gnmt", "never")):
        want = run("tfm-decode", "-q", "-m", data.model, "--device", "cpu", "--length-penalty", lp,
                   "--early-stopping", es, "--scores", "-n", 2, data.file("src.pieces", pieces)).splitlines()
        got = translator.translate([p.split() for p in pieces], n_best=2, return_scores=True,
                                   length_penalty=lp, early_stopping=es)
        fields = [line.split("\t") for line in want]  # LINE, SCORE, HYPOTHESIS
        hyps = [h for nbest in got for h in nbest]
        assert [f[2].split() for f in fields] == [h.output for h in hyps]
        assert [float(f[1]) for f in fields] == pytest.approx([h.score for h in hyps], abs=1e-5)
    with pytest.raises(tfm.Error, match="early stopping must be bound, beam or never, got 'soon'"):
        translator.translate(data.lines[:1], early_stopping="soon")
    with pytest.raises(tfm.Error, match="length penalty must be gnmt or plain"):
        translator.translate(data.lines[:1], length_penalty="")


def test_options_cached_and_changed(data, translator):
    one = translator.translate(data.lines[:5], beam=1)
    four = translator.translate(data.lines[:5], beam=4)
    assert translator.translate(data.lines[:5], beam=1) == one
    assert translator.translate(data.lines[:5], beam=4) == four


def test_help_reads_like_the_man_page():
    doc = tfm.Translator.__doc__
    for word in ("tfm-decode", "beam", "n_best", "return_attention", "precision", "score(sources, targets)"):
        assert word in doc


def test_gil_released(data, translator):
    # Python runs beside a translate call: the main thread's loop never
    # waits for the whole call, as it would if the call held the GIL.
    done, span = threading.Event(), []

    def work():
        start = time.perf_counter()
        translator.translate(data.lines[:120], beam=4)
        span.append(time.perf_counter() - start)
        done.set()

    worker = threading.Thread(target=work)
    last, gap = time.perf_counter(), 0.0
    worker.start()
    while not done.is_set():
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    worker.join()
    assert span[0] > 0.05, "the call is too short to tell"
    assert gap < span[0] / 3, f"the main thread waited {gap:.3f} s of the call's {span[0]:.3f} s"


def test_threads_change_nothing(data, translator):
    # threads=2: two decoders take the batches (or split them); a line's
    # output does not depend on its batch (libcore/decode/translate.h).
    two = tfm.Translator(str(data.model), device="cpu", threads=2)
    def hyps(t):
        return [[(h.output, h.score) for h in x] for x in t.translate(sources(data), n_best=2)]

    assert hyps(two) == hyps(translator)
