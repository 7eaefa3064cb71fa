"""tfm from Python: the library of tfm's programs, one module over the same core.

    import tfm
    t = tfm.Translator("model.bin")
    t.translate(["Hello world."])          # as tfm-tok | tfm-decode --detok
    tfm.Tokenizer("model.bin").encode(["Hello world."])
    tfm.metrics.bleu(hyps, refs).score     # as tfm-score
    tfm.Checkpoint("model.bin").config
    tfm.average(["a.bin", "b.bin"], "avg.bin")   # as tfm-avgckpt

Errors raise tfm.Error (a RuntimeError) with the programs' one-line message.
"""
from ._tfm import Checkpoint, Error, Hypothesis, ModelScores, Tokenizer, Translator, average
from . import metrics

__all__ = ["Checkpoint", "Error", "Hypothesis", "ModelScores", "Tokenizer", "Translator", "average", "metrics"]
