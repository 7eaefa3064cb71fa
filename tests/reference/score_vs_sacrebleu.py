"""tfm-score against sacreBLEU 2.6.0 (the project's .venv): every score must
print the same to 4 decimals (and the largest difference is reported).

Inputs: the 16 WMT17 en-de system outputs with their reference, and
perturbed copies of some of them (seeded): deleted, swapped, case-changed
and punctuation-mangled words, empty lines, Unicode punctuation, symbols,
digits and spaces, CJK text, Greek capitals, XML entities. Checked: BLEU
with every tokenizer and every smoothing, lowercased BLEU, two references,
sentence BLEU, chrF, chrF++, chrF with eps smoothing, sentence chrF and TER.

sacreBLEU's Python is the test's cost, so the real systems bring text
variety where it is cheap and the perturbed copies the edge cases: every
system goes through BLEU with the default tokenizer (every smoothing) and
lowercased; the other tokenizers, chrF, chrF++ and TER run on six of them
(SOME) and the perturbed copies. TER in Python takes about 2 ms a line, so
TER runs on the first 300 lines of each file (sentence TER on 200).
Reference statistics are cached per metric and BLEU's smoothings share one
pass. One process: ctest runs the test beside another, one core each.

Usage: python score_vs_sacrebleu.py TFM_SCORE DATA_DIR WORK_DIR
"""
import json
import logging
import random
import subprocess
import sys

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF, TER

if sacrebleu.__version__ != "2.6.0":
    sys.exit(f"FAIL: sacrebleu {sacrebleu.__version__}, expected 2.6.0")

logging.getLogger("sacrebleu").setLevel(logging.ERROR)  # its "tokenized period" warnings
TFM, DATA, WORK = sys.argv[1:4]
WMT = f"{DATA}/sacrebleu-tests/wmt17-newstest2017-en-de"
REF = f"{WMT}/newstest2017-ende-ref.de"
SYSTEMS = [l.split("\t")[0] for l in open(f"{WMT}/expected_scores.tsv", encoding="utf-8").read().splitlines()[1:]]
TER_LINES, SENT_TER_LINES = 300, 200

METRICS = {"bleu": BLEU, "chrf": CHRF, "ter": TER}
JOBS = []  # (kind, hyp, refs, tfm_args, metric, kwargs)


def read(path):
    # As sacreBLEU's command line reads a file.
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip() for line in f]


def write(path, lines):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(line + "\n" for line in lines))


def tfm(args):
    out = subprocess.run([TFM, "--json", "-q"] + args, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"tfm-score {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def corpus(hyp, refs, tfm_args, metric, **kwargs):
    JOBS.append(("corpus", hyp, refs, tfm_args, metric, kwargs))


def sentences(hyp, refs, tfm_args, metric, **kwargs):
    JOBS.append(("sentences", hyp, refs, tfm_args, metric, kwargs))


_cache = {}


def sacrebleu_metric(metric, kwargs, refs):
    """The metric with its references cached (one per configuration and worker)."""
    key = (metric, tuple(sorted(kwargs.items())), tuple(refs))
    if key not in _cache:
        _cache[key] = METRICS[metric](**kwargs, references=[read(r) for r in refs])
    return _cache[key]


def run(job):
    """Returns (checks, failures, largest difference, messages)."""
    kind, hyp, refs, tfm_args, metric, kwargs = job
    what = f"{hyp.rsplit('/', 1)[-1]} {' '.join(tfm_args)}"
    if kind == "corpus":
        got = [json.loads(tfm(["-i", hyp, "-r"] + refs + tfm_args))["value"]]
        m = sacrebleu_metric(metric, kwargs, refs)
        want = [m.corpus_score(read(hyp), None).score]
    elif kind == "smoothings":  # one pass of BLEU statistics, every smoothing from them
        m = sacrebleu_metric(metric, kwargs, refs)
        stats = m._extract_corpus_statistics(read(hyp), None)
        got, want = [], []
        for smooth in ["exp", "floor", "add-k", "none"]:
            got.append(json.loads(tfm(["-i", hyp, "-r"] + refs + tfm_args + ["-s", smooth]))["value"])
            m.smooth_method = smooth
            want.append(m._aggregate_and_compute([list(x) for x in stats]).score)
    else:
        got = [json.loads(l)["value"] for l in tfm(["-i", hyp, "-r"] + refs + ["--sentence-level"] + tfm_args).splitlines()]
        m = METRICS[metric](**kwargs)
        ref_lines = [read(r) for r in refs]
        want = [m.sentence_score(h, [r[i] for r in ref_lines]).score for i, h in enumerate(read(hyp))]
    messages = []
    if len(got) != len(want):
        return 1, 1, 0.0, [f"FAIL: {what}: {len(got)} scores from tfm-score, {len(want)} from sacreBLEU"]
    bad = 0
    for i, (g, w) in enumerate(zip(got, want)):
        if f"{g:.4f}" != f"{w:.4f}":
            bad += 1
            if bad <= 5:
                where = "" if kind == "corpus" else f" line {i + 1}"
                messages.append(f"FAIL: {what}{where}: tfm {g!r}, sacreBLEU {w!r}")
    return len(got), bad, max(abs(g - w) for g, w in zip(got, want)), messages


# ---- perturbed hypotheses ----
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("«»„“”‘’—–…¿¡·‚‹›、。！？（）【】")
SYMBOLS = ["€", "±", "²", "½", "①", "٣", "°C", "™", "→", "≥", "£5", "12.5", "1,000", "3-4", "2.", ",5"]
CJK = ["中文", "东京是日本的首都。", "한국어", "テスト", "漢字かな", "日本語、中文"]
SPACES = ["\u00a0", "\u3000", "\u2009", "\t", "\u202f"]
SPECIAL = ["ΟΔΟΣ", "ΣΑΣ.", "İstanbul", "&amp;", "&quot;x&quot;", "<skipped>", "a&lt;b", "ǅemal", "Straße",
           "\ufeffbom", "...", "..", "U.S.", "e.g.", "z.B.", "Nr.", "'s", "it's"]


def perturb(line, rng):
    if rng.random() < 0.05:
        return ""
    words = line.split(" ")
    out = []
    i = 0
    while i < len(words):
        w = words[i]
        r = rng.random()
        if r < 0.08:
            i += 1
            continue  # deleted
        if r < 0.13 and i + 1 < len(words):
            out += [words[i + 1], w]  # swapped
            i += 2
            continue
        if r < 0.21:
            w = rng.choice([w.upper(), w.lower(), w.capitalize(), w.swapcase()])
        elif r < 0.27:
            p = rng.choice(PUNCT)
            w = rng.choice([w + p, p + w, w + p + p, p + w + p, w.replace(",", ".").replace(".", ",")])
        elif r < 0.29:
            w = w + rng.choice(CJK)
        elif r < 0.31:
            w = rng.choice(SYMBOLS) + rng.choice(["", " ", "-"]) + w
        elif r < 0.33:
            w = w + rng.choice(SPACES) + rng.choice(words)
        elif r < 0.35:
            w = rng.choice(SPECIAL) + rng.choice(["", " "]) + w
        out.append(w)
        i += 1
    return " ".join(out) + rng.choice(["", "", "", " ", "\u00a0", " ."])


rng = random.Random(20171)
PERTURBED = []
for k, name in enumerate(["newstest2017.uedin-nmt.4722.en-de", "newstest2017.online-A.0.en-de",
                          "newstest2017.PROMT-Rule-based.4735.en-de"]):
    path = f"{WORK}/perturbed{k}.de"
    write(path, [perturb(line, rng) for line in read(f"{WMT}/{name}")])
    PERTURBED.append(path)
# A perturbed reference too, so the reference side sees the same text.
write(f"{WORK}/perturbed.ref.de", [perturb(line, rng) for line in read(REF)])
write(f"{WORK}/cjk.de", [" ".join(rng.choice(CJK + PUNCT) for _ in range(rng.randint(0, 12))) for _ in range(500)])
write(f"{WORK}/cjk.ref", [" ".join(rng.choice(CJK + PUNCT) for _ in range(rng.randint(0, 12))) for _ in range(500)])

ALL = [f"{WMT}/{s}" for s in SYSTEMS] + PERTURBED
assert len(SYSTEMS) == 16, SYSTEMS
# The systems of the costlier checks: C-3MA and FBK (in chrF++.py's table),
# KIT, the rule-based PROMT, online-A (its first line starts with a byte-order
# mark) and online-F (the lowest BLEU).
SOME = [f"{WMT}/newstest2017.{s}.en-de" for s in
        ["C-3MA.4959", "FBK.4870", "KIT.4950", "PROMT-Rule-based.4735", "online-A.0", "online-F.0"]]
assert all(s.rsplit("/", 1)[-1] in SYSTEMS for s in SOME), SOME


def head(path, n):
    out = f"{WORK}/head{n}." + path.rsplit("/", 1)[-1]
    write(out, read(path)[:n])
    return out


# ---- BLEU: every tokenizer, every smoothing, lowercase ----
for hyp in ALL:
    for tok in ["13a", "intl", "none", "char"] if hyp in SOME + PERTURBED else ["13a"]:
        JOBS.append(("smoothings", hyp, [REF], ["-tok", tok], "bleu", {"tokenize": tok}))
    corpus(hyp, [REF], ["-lc"], "bleu", lowercase=True)
for hyp in PERTURBED:
    corpus(hyp, [REF], ["-s", "floor", "--smooth-value", "0.5", "-tok", "intl", "-lc"],
           "bleu", smooth_method="floor", smooth_value=0.5, tokenize="intl", lowercase=True)
    corpus(hyp, [REF], ["-s", "add-k", "--smooth-value", "2"], "bleu", smooth_method="add-k", smooth_value=2)
# Two references: another system's output as the second one.
second = f"{WMT}/{SYSTEMS[0]}"
for hyp in ALL[1:4] + PERTURBED:
    corpus(hyp, [REF, second], [], "bleu")
    corpus(hyp, [REF, f"{WORK}/perturbed.ref.de"], ["-tok", "intl"], "bleu", tokenize="intl")
    corpus(hyp, [REF, second], ["--metrics", "chrf", "--chrf-word-order", "2"], "chrf", word_order=2)
for cjk_tok in ["13a", "intl", "char", "none"]:
    corpus(f"{WORK}/cjk.de", [f"{WORK}/cjk.ref"], ["-tok", cjk_tok], "bleu", tokenize=cjk_tok)
corpus(f"{WORK}/cjk.de", [f"{WORK}/cjk.ref"], ["--metrics", "chrf"], "chrf")

# ---- sentence BLEU (effective order), every smoothing ----
for hyp in PERTURBED[:2]:
    for smooth in ["exp", "floor", "add-k", "none"]:
        sentences(hyp, [REF], ["-s", smooth], "bleu", smooth_method=smooth, effective_order=True)
    sentences(hyp, [REF], ["-tok", "char", "-lc"], "bleu", tokenize="char", lowercase=True, effective_order=True)
sentences(ALL[0], [REF], [], "bleu", effective_order=True)
sentences(f"{WORK}/cjk.de", [f"{WORK}/cjk.ref"], ["-tok", "intl"], "bleu", tokenize="intl", effective_order=True)

# ---- chrF, chrF++ ----
for hyp in SOME + PERTURBED:
    corpus(hyp, [REF], ["--metrics", "chrf"], "chrf")
    corpus(hyp, [REF], ["--metrics", "chrf", "--chrf-word-order", "2"], "chrf", word_order=2)
for hyp in PERTURBED:
    corpus(hyp, [REF], ["--metrics", "chrf", "--chrf-eps-smoothing"], "chrf", eps_smoothing=True)
    corpus(hyp, [REF], ["--metrics", "chrf", "--chrf-word-order", "2", "--chrf-lowercase", "--chrf-whitespace"],
           "chrf", word_order=2, lowercase=True, whitespace=True)
    corpus(hyp, [REF], ["--metrics", "chrf", "--chrf-char-order", "4", "--chrf-beta", "1"],
           "chrf", char_order=4, beta=1)
sentences(PERTURBED[0], [REF], ["--metrics", "chrf", "--chrf-word-order", "2"], "chrf", word_order=2)

# ---- TER (a subset of lines: Python's TER is slow) ----
ref_head = head(REF, TER_LINES)
for hyp in SOME + PERTURBED:
    corpus(head(hyp, TER_LINES), [ref_head], ["--metrics", "ter"], "ter")
for hyp in PERTURBED:
    corpus(head(hyp, TER_LINES), [ref_head], ["--metrics", "ter", "--ter-case-sensitive", "--ter-no-punct"],
           "ter", case_sensitive=True, no_punct=True)
    corpus(head(hyp, TER_LINES), [ref_head], ["--metrics", "ter", "--ter-normalized"], "ter", normalized=True)
    corpus(head(hyp, TER_LINES), [ref_head, head(second, TER_LINES)], ["--metrics", "ter"], "ter")
sentences(head(PERTURBED[0], SENT_TER_LINES), [head(REF, SENT_TER_LINES)], ["--metrics", "ter"], "ter")

results = [run(job) for job in JOBS]
checked = sum(r[0] for r in results)
failures = sum(r[1] for r in results)
worst = max(r[2] for r in results)
for r in results:
    for message in r[3]:
        print(message, file=sys.stderr)
print(f"{len(JOBS)} runs, {checked} scores compared with sacreBLEU {sacrebleu.__version__}; "
      f"largest difference {worst:.3g}")
if failures:
    print(f"{failures} check(s) failed", file=sys.stderr)
    sys.exit(1)
print("all checks passed")
