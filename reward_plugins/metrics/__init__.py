"""Classic metrics behind one dispatcher, with exact compatibility presets, and aggregation.

``score(metric_name, prediction, targets, **options) -> float`` in [0, 1] for the metrics
``exact_match``, ``subem``, ``f1``, ``bleu_4``, ``rouge_l`` and ``accuracy``; every metric
reports the normalizer, tokenizer and smoothing it used through ``signature(...)``.
``compat="squad"`` (``exact_match``, ``f1``), ``compat="sacrebleu"`` (``bleu_4``,
``corpus_bleu``) and ``compat="rouge_score"`` (``rouge_l``) reproduce the reference libraries.
"""

from __future__ import annotations

from reward_plugins.metrics.aggregate import MeanCI, bootstrap_mean
from reward_plugins.metrics.base import Metric, Targets
from reward_plugins.metrics.bleu import Bleu4, BleuStats, bleu_4, corpus_bleu
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
from reward_plugins.metrics.rouge import RougeL, rouge_l

__all__ = [
    "METRICS",
    "Accuracy",
    "Bleu4",
    "BleuStats",
    "ExactMatch",
    "MeanCI",
    "Metric",
    "RougeL",
    "SubEM",
    "Targets",
    "TokenF1",
    "accuracy",
    "bleu_4",
    "bootstrap_mean",
    "corpus_bleu",
    "exact_match",
    "f1",
    "get_metric",
    "metric_options",
    "rouge_l",
    "score",
    "signature",
    "subem",
]
