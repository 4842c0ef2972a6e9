"""Classic metrics behind one dispatcher, with exact compatibility presets, and aggregation.

``score(metric_name, prediction, targets, **options) -> float`` in [0, 1] for the metrics of
:data:`METRICS`: ``exact_match``, ``subem``, ``f1``, ``accuracy``, ``bleu`` (any order) and
``bleu_4``, ``chrf`` (and chrF++), ``rouge_1``, ``rouge_2``, ``rouge_n``, ``rouge_l`` and
``rouge_lsum`` (each with ``measure`` f, p or r); every metric reports the settings behind its
number through ``signature(...)``. ``compat="squad"``/``"squad_v2"`` (``exact_match``, ``f1``),
``compat="sacrebleu"`` (``bleu``, ``bleu_4``, ``chrf``, ``corpus_bleu``, ``corpus_chrf``) and
``compat="rouge_score"`` (the ROUGE metrics) reproduce the reference libraries;
:func:`squad_v2_scores` gives SQuAD 2.0's HasAns/NoAns breakdown and :func:`paired_test`
sacrebleu's paired significance tests.
"""

from __future__ import annotations

from reward_plugins.metrics.aggregate import MeanCI, bootstrap_mean
from reward_plugins.metrics.base import Metric, Targets
from reward_plugins.metrics.bleu import Bleu, Bleu4, BleuStats, bleu_4, corpus_bleu
from reward_plugins.metrics.chrf import Chrf, chrf, corpus_chrf
from reward_plugins.metrics.dispatch import METRICS, get_metric, metric_options, score, signature
from reward_plugins.metrics.qa import (
    Accuracy,
    ExactMatch,
    SubEM,
    TokenF1,
    accuracy,
    exact_match,
    f1,
    subem,
)
from reward_plugins.metrics.rouge import (
    Rouge1,
    Rouge2,
    RougeL,
    RougeLsum,
    RougeN,
    RougeScores,
    rouge_1,
    rouge_2,
    rouge_l,
    rouge_lsum,
    rouge_n,
)
from reward_plugins.metrics.significance import PairedResult, paired_test, paired_test_values
from reward_plugins.metrics.squad_v2 import squad_v2_scores

__all__ = [
    "METRICS",
    "Accuracy",
    "Bleu",
    "Bleu4",
    "BleuStats",
    "Chrf",
    "ExactMatch",
    "MeanCI",
    "Metric",
    "PairedResult",
    "Rouge1",
    "Rouge2",
    "RougeL",
    "RougeLsum",
    "RougeN",
    "RougeScores",
    "SubEM",
    "Targets",
    "TokenF1",
    "accuracy",
    "bleu_4",
    "bootstrap_mean",
    "chrf",
    "corpus_bleu",
    "corpus_chrf",
    "exact_match",
    "f1",
    "get_metric",
    "metric_options",
    "paired_test",
    "paired_test_values",
    "rouge_1",
    "rouge_2",
    "rouge_l",
    "rouge_lsum",
    "rouge_n",
    "score",
    "signature",
    "squad_v2_scores",
    "subem",
]
