"""The metric table and the dispatcher: ``score(metric_name, prediction, targets, **options)``.

This table is the only place where metric names are compared; callers pass a name through.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from reward_plugins.errors import InvalidOption
from reward_plugins.metrics.base import Metric, Targets
from reward_plugins.metrics.bleu import Bleu, Bleu4
from reward_plugins.metrics.chrf import Chrf
from reward_plugins.metrics.qa import Accuracy, ExactMatch, SubEM, TokenF1
from reward_plugins.metrics.rouge import ROUGE_METRICS

_METRICS: dict[str, type[Metric]] = {
    metric.name: metric
    for metric in (ExactMatch, SubEM, TokenF1, Bleu4, Bleu, Chrf, *ROUGE_METRICS, Accuracy)
}
METRICS: Mapping[str, type[Metric]] = MappingProxyType(_METRICS)
"""Read-only view: metric name -> metric class (options: its ``option_specs``)."""
_OPTIONS: dict[str, tuple[str, ...]] = {
    name: tuple(metric.option_specs) for name, metric in _METRICS.items()
}


def metric_options(metric_name: str) -> tuple[str, ...]:
    """The option names ``metric_name`` accepts.

    Example:
        >>> metric_options("f1")
        ('normalizer', 'tokenizer', 'compat')

    Raises:
        ValueError: unknown metric name (the message lists the valid ones).
    """
    return _OPTIONS[_metric_class(metric_name).name]


def _metric_class(metric_name: str) -> type[Metric]:
    try:
        return _METRICS[metric_name]
    except (KeyError, TypeError):
        raise InvalidOption(
            f"unknown metric {metric_name!r}; valid names: {', '.join(sorted(_METRICS))}"
        ) from None


def get_metric(metric_name: str, **options: object) -> Metric:
    """Build the metric ``metric_name`` with ``options``, validated now; reuse it for many calls.

    Example:
        >>> get_metric("rouge_l", compat="rouge_score")("a b", ["a c"])
        0.5

    Raises:
        ValueError: unknown metric name, or an invalid option value.
        TypeError: an option the metric does not take (the message lists the valid ones).
    """
    metric_class = _metric_class(metric_name)
    valid = metric_options(metric_name)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise InvalidOption(
            f"{metric_name}: unknown option(s) {', '.join(unknown)}; valid options: "
            f"{', '.join(valid) if valid else '(none)'}"
        )
    return metric_class(**options)


def score(metric_name: str, prediction: str, targets: Targets, **options: object) -> float:
    """Score ``prediction`` against ``targets`` with the metric named ``metric_name``; in [0, 1].

    Args:
        metric_name: ``exact_match``, ``subem``, ``f1``, ``bleu_4``, ``rouge_l`` or ``accuracy``.
        prediction: the text scored.
        targets: a string, or a non-empty list of strings (the score is the best over them, or
            the merged references under ``compat="sacrebleu"``).
        **options: the metric's options (see :func:`metric_options` and the metric classes).

    Example:
        >>> score("f1", "The cat sat.", ["a cat sat", "dog"])
        0.6666666666666666
        >>> score("bleu_4", "the cat sat on a mat", ["the cat sat on the mat"], compat="sacrebleu")
        0.537284965911771

    Raises:
        ValueError: unknown metric name (listing every valid name), invalid option value, or
            an empty target list.
        TypeError: unknown option (listing the valid ones), or inputs that are not strings.
    """
    return get_metric(metric_name, **options)(prediction, targets)


def signature(metric_name: str, **options: object) -> str:
    """The signature of ``metric_name`` under ``options``: every setting behind its number.

    Example:
        >>> signature("f1")
        'f1|norm:none|tok:words'

    Raises:
        ValueError, TypeError: as :func:`score`.
    """
    return get_metric(metric_name, **options).signature
