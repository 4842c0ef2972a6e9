"""SQuAD 2.0's corpus report (``evaluate-v2.0.py`` of github.com/rajpurkar/SQuAD-explorer):
EM and F1 over all, answerable (``HasAns``) and unanswerable (``NoAns``) questions, the
no-answer threshold and the best thresholds. Row scores are those of ``exact_match`` and
``f1`` with ``compat="squad_v2"`` (:mod:`reward_plugins.metrics.qa`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from reward_plugins.errors import InvalidInput
from reward_plugins.metrics.base import Targets, check_prediction, coerce_targets
from reward_plugins.metrics.qa import answerable_golds, squad_v2_exact, squad_v2_f1
from reward_plugins.options import describe_value, finite_number, is_finite_number
from reward_plugins.text import normalize_squad


def squad_v2_scores(
    predictions: Sequence[str],
    targets: Sequence[Targets],
    *,
    na_probabilities: Sequence[float] | None = None,
    na_threshold: float = 1.0,
) -> dict[str, float]:
    """The official SQuAD 2.0 report of a corpus, on the 0-1 scale (the official script's 0-100
    divided by 100 at the end; ``*_total`` and ``best_*_thresh`` are not rescaled).

    Row ``i`` is scored as ``exact_match``/``f1`` with ``compat="squad_v2"``. A question is
    answerable (``HasAns``) when ``targets[i]`` holds at least one target, as the official
    script's ``bool(qa["answers"])``; give ``[]`` for an unanswerable question. With
    ``na_probabilities`` (the model's probability that each question has no answer), a row
    whose probability exceeds ``na_threshold`` is taken as answered "no answer": it scores
    ``float(not answerable)`` for both EM and F1.

    Returns the official keys, in the official order: ``exact``, ``f1``, ``total``, then
    ``HasAns_exact``, ``HasAns_f1``, ``HasAns_total`` when some question is answerable and
    ``NoAns_*`` when some is not; with ``na_probabilities`` also ``best_exact``,
    ``best_exact_thresh``, ``best_f1``, ``best_f1_thresh`` (the best scores over thresholds,
    from the scores before the threshold, as the script does when given an ``--na-prob-file``).

    Example:
        >>> report = squad_v2_scores(["Paris", "the", "Rome"], [["Paris"], [], "Lyon"])
        >>> report["exact"], report["HasAns_exact"], report["NoAns_f1"], report["NoAns_total"]
        (0.6666666666666667, 0.5, 1.0, 1)

    Raises:
        InvalidInput: the lengths of ``predictions``, ``targets`` and ``na_probabilities``
            differ (the message names them), no prediction, a prediction or target that is not
            a string, a probability that is not a finite number (NaN, an infinity).
        InvalidOption: ``na_threshold`` is not a finite number.

    References:
        github.com/rajpurkar/SQuAD-explorer, ``evaluate-v2.0.py`` (``get_raw_scores``,
        ``apply_no_ans_threshold``, ``make_eval_dict``, ``find_all_best_thresh``).
    """
    name = "squad_v2_scores"
    rows = _sequence(predictions, "predictions", name)
    golds = _sequence(targets, "targets", name)
    if len(rows) != len(golds):
        raise InvalidInput(f"{name}: {len(rows)} predictions but {len(golds)} targets")
    if not rows:
        raise InvalidInput(f"{name}: no predictions to score")
    finite_number(na_threshold, f"{name}: na_threshold")
    probabilities = _probabilities(na_probabilities, len(rows), name)
    exact: list[float] = []
    f1_scores: list[float] = []
    has_answer: list[bool] = []
    for row, (prediction, answers) in enumerate(zip(rows, golds, strict=True)):
        check_prediction(prediction, f"{name}: predictions[{row}]")
        answer_tuple = _answers(answers, f"{name}: targets[{row}]")
        index = answerable_golds(answer_tuple) if answer_tuple else None
        normalized = normalize_squad(prediction)
        exact.append(squad_v2_exact(normalized, index))
        f1_scores.append(squad_v2_f1(normalized, index))
        has_answer.append(bool(answer_tuple))
    threshold = float(na_threshold)
    exact_kept = _apply_threshold(exact, probabilities, has_answer, threshold)
    f1_kept = _apply_threshold(f1_scores, probabilities, has_answer, threshold)
    report = _report(exact_kept, f1_kept, range(len(rows)))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        group = [row for row, answerable in enumerate(has_answer) if answerable is wanted]
        if group:
            for key, value in _report(exact_kept, f1_kept, group).items():
                report[f"{prefix}_{key}"] = value
    if na_probabilities is not None:
        for key, scores in (("exact", exact), ("f1", f1_scores)):
            best, best_threshold = _best_threshold(rows, scores, probabilities, has_answer)
            report[f"best_{key}"] = best
            report[f"best_{key}_thresh"] = best_threshold
    return report


def _sequence(values: object, field: str, name: str) -> list[Any]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidInput(f"{name}: {field} must be a list, got {type(values).__name__}")
    return list(values)


def _answers(value: object, where: str) -> tuple[str, ...]:
    """A row's targets as a tuple; an empty list is an unanswerable question."""
    if not isinstance(value, str) and isinstance(value, (list, tuple)) and not value:
        return ()
    return coerce_targets(value, where)  # type: ignore[arg-type]


def _probabilities(values: Sequence[float] | None, count: int, name: str) -> list[float]:
    if values is None:
        return [0.0] * count
    probabilities = _sequence(values, "na_probabilities", name)
    if len(probabilities) != count:
        raise InvalidInput(f"{name}: {count} predictions but {len(probabilities)} na_probabilities")
    for row, value in enumerate(probabilities):
        if not is_finite_number(value):
            raise InvalidInput(
                f"{name}: na_probabilities[{row}] must be a finite number, got "
                f"{describe_value(value)}"
            )
    return [float(value) for value in probabilities]


def _apply_threshold(
    scores: list[float], probabilities: list[float], has_answer: list[bool], threshold: float
) -> list[float]:
    """A row predicted to have no answer scores ``float(not answerable)``."""
    return [
        float(not answerable) if probability > threshold else score
        for score, probability, answerable in zip(scores, probabilities, has_answer, strict=True)
    ]


def _report(exact: list[float], f1_scores: list[float], rows: Iterable[int]) -> dict[str, float]:
    selected = list(rows)
    total = len(selected)
    # The official script's percentages, in its operation order, then on the 0-1 scale.
    return {
        "exact": 100.0 * sum(exact[row] for row in selected) / total / 100,
        "f1": 100.0 * sum(f1_scores[row] for row in selected) / total / 100,
        "total": total,
    }


def _best_threshold(
    predictions: list[str],
    scores: list[float],
    probabilities: list[float],
    has_answer: list[bool],
) -> tuple[float, float]:
    """The best corpus score over no-answer thresholds, and the threshold giving it.

    Questions are taken by increasing probability; moving the threshold past one gains its
    score if it is answerable, and loses 1 if it is not and the prediction is non-empty.
    """
    current: float = sum(1 for answerable in has_answer if not answerable)
    best, best_threshold = current, 0.0
    for row in sorted(range(len(scores)), key=probabilities.__getitem__):
        if has_answer[row]:
            current += scores[row]
        elif predictions[row]:
            current -= 1
        if current > best:
            best, best_threshold = current, probabilities[row]
    return 100.0 * best / len(scores) / 100, best_threshold
