# tfm.metrics against tfm-score (the same line, the same numbers) and
# against sacreBLEU's Python API (installed in .venv by Makefile.data deps).
import pytest
import sacrebleu

import tfm
from conftest import run

HYPS = ["The cat sat on the mat.", "A quick brown fox jumps.", "Nothing matches here!", "It's 3.5% more, isn't it?"]
REFS = ["The cat is on the mat.", "The quick brown fox jumped.", "Something else entirely.", "It is 3.5% more, isn't it?"]
REFS2 = ["There is a cat on the mat.", "A fast brown fox jumps.", "Nothing matches.", "It's 3.5 % more."]


def tfm_score(data, *args, refs=(REFS,)):
    paths = [data.file(f"ref{i}", r) for i, r in enumerate(refs)]
    return run("tfm-score", "-q", "-i", data.file("hyp", HYPS), "-r", *paths, *args).rstrip("\n")


@pytest.mark.parametrize("refs", [(REFS,), (REFS, REFS2)])
def test_as_tfm_score(data, refs):
    arg = list(refs) if len(refs) > 1 else refs[0]
    assert str(tfm.metrics.bleu(HYPS, arg)) == tfm_score(data, refs=refs)
    assert str(tfm.metrics.bleu(HYPS, arg, tokenize="intl", lowercase=True, width=3)) == \
        tfm_score(data, "-tok", "intl", "-lc", "-w", 3, refs=refs)
    assert str(tfm.metrics.chrf(HYPS, arg)) == tfm_score(data, "--metrics", "chrf", refs=refs)
    assert str(tfm.metrics.chrf(HYPS, arg, word_order=2)) == \
        tfm_score(data, "--metrics", "chrf", "--chrf-word-order", 2, refs=refs)
    assert str(tfm.metrics.ter(HYPS, arg)) == tfm_score(data, "--metrics", "ter", refs=refs)


def test_as_sacrebleu():
    for refs in ([REFS], [REFS, REFS2]):
        metric = sacrebleu.BLEU()
        b, s = tfm.metrics.bleu(HYPS, refs), metric.corpus_score(HYPS, refs)
        assert b.score == pytest.approx(s.score, abs=1e-9) and b.name == "BLEU"
        # The same signature but for the version: tfm's own.
        assert b.signature.split("|")[:-1] == str(metric.get_signature()).split("|")[:-1]
        assert b.signature.split("|")[-1].startswith("version:tfm-")
        assert tfm.metrics.chrf(HYPS, refs).score == pytest.approx(sacrebleu.corpus_chrf(HYPS, refs).score, abs=1e-9)
        assert tfm.metrics.chrf(HYPS, refs, word_order=2).score == \
            pytest.approx(sacrebleu.corpus_chrf(HYPS, refs, word_order=2).score, abs=1e-9)
        assert tfm.metrics.ter(HYPS, refs).score == pytest.approx(sacrebleu.corpus_ter(HYPS, refs).score, abs=1e-9)
    assert float(tfm.metrics.bleu(HYPS, REFS)) == tfm.metrics.bleu(HYPS, REFS).score


def test_parseval_as_tfm_score(data):
    gold = ["(S (NP (DT The) (NN cat)) (VP (VBD sat)))", "(S (NP (PRP It)) (VP (VBZ works)))"]
    test = ["(S (NP (DT The)) (NN cat) (VP (VBD sat)))", "(S (NP (PRP It)) (VP (VBZ works)))"]
    want = run("tfm-score", "-q", "--metrics", "parseval", "-i", data.file("test.trees", test),
               "-r", data.file("gold.trees", gold)).splitlines()
    # tfm-score aligns its two lines on '='; each Score alone is not padded.
    assert [str(s) for s in tfm.metrics.parseval(test, gold)] == [line.lstrip() for line in want]


def test_mismatch_is_an_error():
    with pytest.raises(tfm.Error, match="must pair up"):
        tfm.metrics.bleu(HYPS, REFS[:2])
