"""tfm-decode against CTranslate2 on the same weights (ct2_vs_tfm.sh).

    ct2_vs_tfm.py CT2_MODEL_DIR SOURCE_PIECES GREEDY_JSON BEAM_JSON ALPHA NAME

GREEDY_JSON and BEAM_JSON are tfm-decode --json outputs for SOURCE_PIECES
(greedy; beam 4 with --length-penalty plain --alpha ALPHA). Checks:
  - greedy: every line's tokens identical;
  - CTranslate2's forced scoring of tfm's greedy outputs (score_batch): each
    token's log-probability, the end token's included, within 1e-4 of
    tfm-decode's token_log_probs;
  - beam 4: at least 90% of the lines identical (the two searches stop a
    sentence by different rules: tfm's bound, CTranslate2's count of ended
    hypotheses); where identical, the scores (log-probability / |Y|^alpha)
    within 1e-4; where not, tfm's score higher (it searched longer).
An output at the maximum length (|x| + 50) ends there in CTranslate2; tfm
forces the end token and counts it in the score, which both checks take
out (beam: the score recomputed without the end token's log-probability,
over |Y| tokens instead of |Y| + 1).
Prints one summary line; exits 1 on a failed check.
"""
import json
import sys

import ctranslate2

LOGPROB_TOL = 1e-4
BEAM_SHARE = 0.90


def main(argv):
    model, source, greedy_json, beam_json, alpha, name = argv[1:7]
    alpha = float(alpha)
    src = [line.split() for line in open(source, encoding="utf-8").read().splitlines()]
    greedy = [json.loads(line)["hypotheses"][0] for line in open(greedy_json, encoding="utf-8")]
    beam = [json.loads(line)["hypotheses"][0] for line in open(beam_json, encoding="utf-8")]
    assert len(src) == len(greedy) == len(beam), (len(src), len(greedy), len(beam))
    tr = ctranslate2.Translator(model, device="cpu", compute_type="float32", intra_threads=1)
    bad = []

    def translate(**options):
        """Every line, with tfm-decode's limit of |x| + 50 tokens: CTranslate2's
        max_decoding_length is one a call, so each call has one source length."""
        out = [None] * len(src)
        for n in sorted({len(s) for s in src}):
            lines = [i for i, s in enumerate(src) if len(s) == n]
            for i, r in zip(lines, tr.translate_batch([src[i] for i in lines], max_batch_size=32,
                                                       max_decoding_length=n + 50, min_decoding_length=0,
                                                       return_scores=True, **options)):
                out[i] = r
        return out

    got = translate(beam_size=1, length_penalty=0)
    same = [r.hypotheses[0] == g["tokens"] for r, g in zip(got, greedy)]

    def log_prob(h, source):
        """tfm's log-probability as CTranslate2 counts it: an output cut at
        the maximum length ends there in CTranslate2, while tfm forces the end
        token and counts its log-probability."""
        at_max = len(h["tokens"]) >= len(source) + 50
        return h["log_prob"] - (h["token_log_probs"][-1] if at_max else 0.0)

    score_err = max((abs(r.scores[0] - log_prob(g, x)) / (len(g["tokens"]) + 1)
                     for r, g, x, s in zip(got, greedy, src, same) if s), default=0.0)
    if not all(same):
        i = same.index(False)
        bad.append(f"greedy: {len(same) - sum(same)} of {len(same)} lines differ; line {i + 1}: "
                   f"tfm {' '.join(greedy[i]['tokens'])!r} ct2 {' '.join(got[i].hypotheses[0])!r}")
    if score_err > LOGPROB_TOL:
        bad.append(f"greedy: scores differ by {score_err:.2e} a token")

    scored = tr.score_batch(src, [g["tokens"] for g in greedy], max_batch_size=32)
    token_err, worst = 0.0, None
    for i, (r, g) in enumerate(zip(scored, greedy)):
        if len(r.log_probs) != len(g["token_log_probs"]):
            bad.append(f"line {i + 1}: ct2 scores {len(r.log_probs)} tokens, tfm {len(g['token_log_probs'])}")
            continue
        for a, b in zip(r.log_probs, g["token_log_probs"]):
            if abs(a - b) > token_err:
                token_err, worst = abs(a - b), (i + 1, a, b)
    if token_err > LOGPROB_TOL:
        bad.append(f"token log-probabilities differ by {token_err:.2e} (line {worst[0]}: ct2 {worst[1]} tfm {worst[2]})")

    def beam_score(h, source):
        """tfm's beam score as CTranslate2 counts it (log_prob above), with
        the plain length penalty over the tokens it counts."""
        if len(h["tokens"]) < len(source) + 50:
            return h["score"]
        return log_prob(h, source) / len(h["tokens"]) ** alpha

    got = translate(beam_size=4, length_penalty=alpha)
    same_beam = [r.hypotheses[0] == b["tokens"] for r, b in zip(got, beam)]
    beam_err = max((abs(r.scores[0] - beam_score(b, x)) for r, b, x, s in zip(got, beam, src, same_beam) if s),
                   default=0.0)
    share = sum(same_beam) / len(same_beam)
    # Where they differ, tfm's result must score at least as well: both keep
    # the same beams step by step, and tfm's bound rule stops a sentence only
    # when no live hypothesis can beat its best, CTranslate2's once beam
    # hypotheses have ended, so CTranslate2's finished hypotheses are among
    # tfm's.
    worse = [i for i, (r, b, x, s) in enumerate(zip(got, beam, src, same_beam))
             if not s and beam_score(b, x) < r.scores[0] - LOGPROB_TOL]
    if share < BEAM_SHARE:
        bad.append(f"beam 4: only {share:.1%} of the lines identical")
    if beam_err > LOGPROB_TOL:
        bad.append(f"beam 4: scores of identical outputs differ by up to {beam_err:.2e}")
    if worse:
        i = worse[0]
        bad.append(f"beam 4: tfm's result scores lower than CTranslate2's on {len(worse)} lines; line {i + 1}: "
                   f"tfm {beam[i]['score']:.6f} ct2 {got[i].scores[0]:.6f}")

    print(f"ct2_vs_tfm {name}: CTranslate2 {ctranslate2.__version__}, {len(src)} lines; greedy identical "
          f"{sum(same)}/{len(same)}, score error {score_err:.1e} a token; token log-probs within "
          f"{token_err:.1e}; beam 4 (plain, alpha {alpha}) identical {sum(same_beam)}/{len(same_beam)}, "
          f"score error {beam_err:.1e}; "
          f"where they differ tfm's scores higher on {len(same_beam) - sum(same_beam) - len(worse)}")
    for line in bad:
        print(f"ct2_vs_tfm {name}: FAIL: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
