"""verl's call shapes of the QA rewards, in one place: ``(solution_str, ground_truth,
method="strict", format_score=0.0, score=1.0, **options) -> number``.

With default options each function returns exactly what the function of the same name in verl's
``verl/utils/reward_score/search_r1_like_qa_em.py`` (volcengine/verl 0.9.1) returns:
``compute_score`` and ``compute_score_subem``; ``compute_score_f1`` takes the same shape, and
``compute_score_format`` is Search-R1's ``qa_em_format.compute_score_em``. Each reward has one
name: the registered scorer of that name (reached by verl as ``reward_plugins.<name>``, with the
router's ``(data_source, solution_str, ground_truth, ...)`` shape) and the function here share
its options, which are checked as the registered scorer checks them. ``format_score`` and
``score`` pass through with any type verl accepts (a ``Fraction`` stays a ``Fraction``).

verl's legacy ``batch`` reward manager calls ``reward_plugins.compute_score_batch`` (plural
arguments, a list in input order); it routes by data source, so it lives with the routers
(:mod:`reward_plugins.router`), which no scorer module imports.

:mod:`reward_plugins.plugins.search_r1` re-exports these functions: that module is the public
home of verl's ``search_r1_like_qa_em`` names.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from reward_plugins.groundtruth import coerce_golds
from reward_plugins.plugins.qa_core import SEARCH_R1_DATA_SOURCES, qa_outcome
from reward_plugins.plugins.qa_format import format_outcome
from reward_plugins.registry import Registration, lookup

__all__ = [
    "compute_score",
    "compute_score_f1",
    "compute_score_format",
    "compute_score_subem",
]


def _checked(name: str, options: Mapping[str, Any]) -> None:
    if options:
        _registration(name).bind(options)


@cache
def _registration(name: str) -> Registration:
    return lookup(SEARCH_R1_DATA_SOURCES[0], name)


def compute_score(
    solution_str: str,
    ground_truth: Any,
    method: str = "strict",
    format_score: Any = 0.0,
    score: Any = 1.0,
    **options: Any,
) -> Any:
    """verl's ``search_r1_like_qa_em.compute_score``, configurable (``method`` unused, as in verl).

    Returns ``0`` without an answer, ``format_score`` on a wrong one, ``score`` on an exact match
    (``score * spam_factor`` when spammed). ``options``: those of the ``compute_score`` scorer.
    """
    _checked("compute_score", options)
    golds = coerce_golds(ground_truth)
    return qa_outcome(
        "em", solution_str, golds, format_score=format_score, score=score, with_f1=False, **options
    ).reward


def compute_score_subem(
    solution_str: str,
    ground_truth: Any,
    method: str = "strict",
    format_score: Any = 0.0,
    score: Any = 1.0,
    *,
    penalize_subem: bool = False,
    **options: Any,
) -> Any:
    """verl's ``search_r1_like_qa_em.compute_score_subem``, configurable (``method`` unused).

    ``options``: those of the ``compute_score_subem`` scorer.
    """
    if options or penalize_subem is not False:
        _checked("compute_score_subem", {**options, "penalize_subem": penalize_subem})
    golds = coerce_golds(ground_truth)
    return qa_outcome(
        "subem",
        solution_str,
        golds,
        format_score=format_score,
        score=score,
        penalize=penalize_subem,
        with_f1=False,
        **options,
    ).reward


def compute_score_f1(
    solution_str: str,
    ground_truth: Any,
    method: str = "strict",
    format_score: Any = 0.0,
    score: Any = 1.0,
    **options: Any,
) -> Any:
    """Token-F1 reward with the signature of the functions above (``method`` unused)."""
    _checked("compute_score_f1", options)
    golds = coerce_golds(ground_truth)
    return qa_outcome(
        "f1", solution_str, golds, format_score=format_score, score=score, **options
    ).reward


def compute_score_format(
    solution_str: str, ground_truth: Any, method: str = "strict", **options: Any
) -> Any:
    """Search-R1's ``qa_em_format.compute_score_em`` (``method`` unused; upstream's unused
    ``format_score`` is not accepted). ``options``: those of the ``compute_score_format``
    scorer; ``prompt_included=True`` reproduces upstream on the decoded prompt plus response.
    """
    _checked("compute_score_format", options)
    return format_outcome(solution_str, coerce_golds(ground_truth), **options)[0].reward
