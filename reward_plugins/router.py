"""verl-facing reward functions: resolve ``(data_source, scorer)`` in the registry and call it.

Each router is a plain module-level function (``pickle`` and Ray's cloudpickle both carry it by
reference) with the signature every verl reward manager uses::

    compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)

Keywords verl adds on its own (``reward_router_address``, ``reward_model_tokenizer``) are ignored;
``return_dict`` picks the result shape; every other keyword is an option of the scorer and an
unknown one raises :class:`TypeError` listing the valid ones. Inputs are never mutated.

By default a router returns the scorer's dict (``score`` plus fixed numeric keys, the same on
every call); ``return_dict=False`` returns ``float(score)``, as verl's legacy ``prime`` needs.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from reward_plugins.errors import InvalidGroundTruth
from reward_plugins.groundtruth import coerce_golds
from reward_plugins.registry import Registration, lookup

logger = logging.getLogger(__name__)

VERL_CALL_KEYWORDS = frozenset({"reward_router_address", "reward_model_tokenizer"})
"""Keywords that verl's reward-loop managers pass on their own; the routers ignore them."""

LOG_SAMPLE_EVERY = 64
"""At DEBUG level, one response in this many (chosen by a hash of its text) is logged."""


def check_options(scorer: str, data_source: str, options: Mapping[str, Any]) -> Registration:
    """Resolve ``scorer`` for ``data_source`` and check ``options`` before any sample is scored.

    Names are checked against the scorer's options; values by scoring one response without an
    answer against one gold, so a bad value fails at configuration time (adapters call this when
    they are built).

    Raises:
        UnknownDataSource: nothing registered for ``data_source`` / ``scorer``.
        TypeError: an unknown option (the message lists the valid ones) or a value of a wrong type.
        ValueError: a value the scorer rejects.
    """
    registration = lookup(data_source, scorer)
    _reject_unknown(scorer, data_source, registration, options)
    registration.function("", ("gold",), **_scorer_options(options))
    return registration


def _reject_unknown(
    scorer: str, data_source: str, registration: Registration, options: Mapping[str, Any]
) -> None:
    unknown = options.keys() - registration.options - VERL_CALL_KEYWORDS
    if unknown:
        raise TypeError(
            f"{scorer}() got unknown option(s) {', '.join(map(repr, sorted(unknown)))} "
            f"for data_source={data_source!r}; valid options: "
            f"{', '.join(sorted(registration.options)) or '(none)'}"
        )


def _scorer_options(options: Mapping[str, Any]) -> Mapping[str, Any]:
    if options.keys() & VERL_CALL_KEYWORDS:
        return {k: v for k, v in options.items() if k not in VERL_CALL_KEYWORDS}
    return options


def route(
    scorer: str,
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    options: Mapping[str, Any],
    return_dict: bool = True,
) -> dict[str, Any] | float:
    """Score one response with the scorer registered as ``scorer`` for ``data_source``.

    Raises:
        UnknownDataSource: nothing registered for ``data_source`` / ``scorer``.
        InvalidGroundTruth: ``ground_truth`` holds no readable gold answers.
        TypeError: an option the scorer does not accept, or ``solution_str`` is not a string.
    """
    registration = lookup(data_source, scorer)
    if options:
        _reject_unknown(scorer, data_source, registration, options)
        options = _scorer_options(options)
    if not isinstance(solution_str, str):
        raise TypeError(
            f"data_source={data_source!r}: solution_str must be a str, "
            f"got {type(solution_str).__name__}"
        )
    golds = coerce_golds(ground_truth, data_source)
    try:
        result = registration.function(solution_str, golds, **options)
    except InvalidGroundTruth as error:  # raised by an option such as reject_empty_gold
        raise InvalidGroundTruth(f"data_source={data_source!r}: {error}") from error
    if logger.isEnabledFor(logging.DEBUG) and _sampled(solution_str):
        logger.debug(
            "%s %s golds=%r result=%r response=%r", scorer, data_source, golds, result, solution_str
        )
    return result if return_dict else float(result["score"])


def _sampled(text: str) -> bool:
    return zlib.crc32(text.encode("utf-8", "surrogatepass")) % LOG_SAMPLE_EVERY == 0


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    return_dict: bool = True,
    **kwargs: Any,
) -> dict[str, Any] | float:
    """Exact-match reward (verl's ``search_r1_like_qa_em.compute_score`` by default)."""
    return route("compute_score", data_source, solution_str, ground_truth, kwargs, return_dict)


def compute_score_subem(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    return_dict: bool = True,
    **kwargs: Any,
) -> dict[str, Any] | float:
    """Substring-match reward (verl's ``compute_score_subem`` by default)."""
    return route(
        "compute_score_subem", data_source, solution_str, ground_truth, kwargs, return_dict
    )


def compute_score_f1(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    return_dict: bool = True,
    **kwargs: Any,
) -> dict[str, Any] | float:
    """Token-F1 reward: ``score`` times the best SQuAD token F1 of the answer."""
    return route("compute_score_f1", data_source, solution_str, ground_truth, kwargs, return_dict)


def compute_score_format(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    return_dict: bool = True,
    **kwargs: Any,
) -> dict[str, Any] | float:
    """Search-R1's format-aware reward: structure, final-format and retrieval scores over EM."""
    return route(
        "compute_score_format", data_source, solution_str, ground_truth, kwargs, return_dict
    )


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
    scorer: str = "compute_score",
    return_dict: bool = True,
    **kwargs: Any,
) -> list[dict[str, Any] | float]:
    """verl's legacy ``batch`` manager convention: plural arguments, a list in input order.

    ``scorer`` names the per-sample router to apply (``compute_score`` by default).

    Raises:
        ValueError: the argument lists differ in length.
    """
    lengths = {len(data_sources), len(solution_strs), len(ground_truths)}
    if extra_infos is not None:
        lengths.add(len(extra_infos))
    if len(lengths) != 1:
        raise ValueError(
            "compute_score_batch: data_sources, solution_strs, ground_truths and extra_infos "
            f"must have the same length, got {len(data_sources)}, {len(solution_strs)}, "
            f"{len(ground_truths)}, {'-' if extra_infos is None else len(extra_infos)}"
        )
    return [
        route(scorer, source, solution, truth, kwargs, return_dict)
        for source, solution, truth in zip(data_sources, solution_strs, ground_truths, strict=True)
    ]
