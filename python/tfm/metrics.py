"""tfm-score's text metrics, sacreBLEU 2.x's numbers (help(tfm.metrics.bleu) and the rest)."""
from ._tfm import metrics as _metrics

Score = _metrics.Score
bleu = _metrics.bleu
chrf = _metrics.chrf
ter = _metrics.ter
parseval = _metrics.parseval
__doc__ = _metrics.__doc__

__all__ = ["Score", "bleu", "chrf", "parseval", "ter"]
