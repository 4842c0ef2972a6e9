"""verl-facing reward functions: resolve ``(data_source, scorer)`` in the registry and call it.

Every registered scorer name has a router, the module attribute ``reward_plugins.<name>``, with
the signature every verl reward manager uses::

    <name>(data_source, solution_str, ground_truth, extra_info=None, return_dict=True, **kwargs)

Routers are made on demand (:func:`router_for`) and cached, with ``__module__ == "reward_plugins"``
and ``__qualname__ == name``, so ``pickle`` and Ray's cloudpickle carry them by reference. The
router of a name with an ``async def`` scorer is itself a coroutine function (verl's reward loop
awaits it). Keywords verl adds on its own (``reward_router_address``,
``reward_model_tokenizer``) are ignored; ``return_dict`` picks the result shape; every other
keyword is an option of the scorer. Inputs are never mutated.

By default a router returns the scorer's dict (``score`` plus fixed numeric keys, the same on
every call); ``return_dict=False`` returns ``float(score)``, as verl's legacy ``prime`` needs.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, overload

from reward_plugins.errors import InvalidGroundTruth, InvalidInput, InvalidOption
from reward_plugins.registry import Bound, Registration, lookup, registrations_named
from reward_plugins.results import Schema, union

logger = logging.getLogger(__name__)

VERL_CALL_KEYWORDS = frozenset({"reward_router_address", "reward_model_tokenizer"})
"""Keywords that verl's reward-loop managers pass on their own; the routers ignore them."""

LOG_SAMPLE_EVERY = 64
"""At DEBUG level, one response in this many (chosen by a hash of its text) is logged."""


def scorer_options(options: Mapping[str, Any]) -> Mapping[str, Any]:
    """``options`` without the keywords verl adds on its own."""
    if options.keys() & VERL_CALL_KEYWORDS:
        return {k: v for k, v in options.items() if k not in VERL_CALL_KEYWORDS}
    return options


def check_options(scorer: str, data_source: str | None, options: Mapping[str, Any]) -> None:
    """Check ``options`` for ``scorer`` before any sample is scored (adapters call this when
    they are built). Without ``data_source``, against every registration of that name.

    Nothing is scored: the check comes from the options' declared types, the scorer's own
    validator and its result schema (derived for these options).

    Raises:
        UnknownScorer, UnknownDataSource: nothing registered under that name / data source.
        InvalidOption: an unknown option, or a value the scorer refuses.
        PluginError: the scorer's result schema for these options breaks the contract.
    """
    options = scorer_options(options)
    found: Sequence[Registration] = (
        registrations_named(scorer) if data_source is None else (lookup(data_source, scorer),)
    )
    for registration in found:
        _ = registration.bind(options).results  # derived (and checked) once per option set


def result_schema(scorer: str, data_source: str, options: Mapping[str, Any]) -> Schema:
    """The result schema of ``scorer`` for ``data_source`` with ``options``: what the summary,
    the report and ``compare`` read (:mod:`reward_plugins.results`).

    Raises:
        UnknownScorer, UnknownDataSource, InvalidOption: as :func:`check_options`.
        PluginError: the scorer's declared schema breaks the contract.
    """
    return lookup(data_source, scorer).bind(scorer_options(options)).results


def scorer_result_schema(scorer: str, options: Mapping[str, Any]) -> Schema:
    """The result schema of ``scorer`` with ``options`` over every data source it serves (the
    union of its registrations' schemas): for a file whose data sources are not known.

    Raises:
        UnknownScorer, InvalidOption, PluginError: as :func:`result_schema`.
    """
    options = scorer_options(options)
    return union(r.bind(options).results for r in registrations_named(scorer))


def _bind(scorer: str, data_source: str, options: Mapping[str, Any], return_dict: Any) -> Bound:
    if return_dict is not True and return_dict is not False:
        raise InvalidOption(
            f"{scorer}: option 'return_dict' must be a bool, got "
            f"{type(return_dict).__name__}: {return_dict!r:.80}"
        )
    return lookup(data_source, scorer).bind(scorer_options(options) if options else options)


def _check_response(data_source: str, solution_str: Any) -> None:
    if not isinstance(solution_str, str):
        raise InvalidInput(
            f"data_source={data_source!r}: solution_str must be a str, "
            f"got {type(solution_str).__name__}"
        )


@overload
def route(
    scorer: str,
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    options: Mapping[str, Any],
    return_dict: Literal[True] = True,
    extra_info: Mapping[str, Any] | None = None,
) -> dict[str, Any]: ...


@overload
def route(
    scorer: str,
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    options: Mapping[str, Any],
    return_dict: bool,
    extra_info: Mapping[str, Any] | None = None,
) -> dict[str, Any] | float: ...


def route(
    scorer: str,
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    options: Mapping[str, Any],
    return_dict: bool = True,
    extra_info: Mapping[str, Any] | None = None,
) -> dict[str, Any] | float:
    """Score one response with the scorer registered as ``scorer`` for ``data_source``.

    Raises:
        UnknownDataSource, UnknownScorer: nothing registered for ``data_source`` / ``scorer``.
        InvalidGroundTruth: ``ground_truth`` holds no readable gold answers.
        InvalidOption: an option the scorer does not accept, or a refused value.
        InvalidInput: ``solution_str`` is not a string.
    """
    if options or return_dict is not True:
        bound = _bind(scorer, data_source, options, return_dict)
    else:  # verl's usual call: no options, no return_dict to check
        bound = lookup(data_source, scorer).bind(options)
    if type(solution_str) is not str:
        _check_response(data_source, solution_str)
    try:
        result = bound(solution_str, ground_truth, data_source, extra_info)
    except InvalidGroundTruth as error:  # raised by an option such as reject_empty_gold
        if "data_source=" in str(error):
            raise
        raise InvalidGroundTruth(f"data_source={data_source!r}: {error}") from error
    if logger.isEnabledFor(logging.DEBUG):
        _log_sample(scorer, data_source, ground_truth, result, solution_str)
    return result if return_dict else float(result["score"])


async def route_async(
    scorer: str,
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    options: Mapping[str, Any],
    return_dict: bool = True,
    extra_info: Mapping[str, Any] | None = None,
) -> dict[str, Any] | float:
    """:func:`route` for a running event loop: awaits an async scorer, runs a sync one in a
    thread."""
    bound = _bind(scorer, data_source, options, return_dict)
    _check_response(data_source, solution_str)
    result = await bound.call_async(solution_str, ground_truth, data_source, extra_info)
    if logger.isEnabledFor(logging.DEBUG):
        _log_sample(scorer, data_source, ground_truth, result, solution_str)
    return result if return_dict else float(result["score"])


def _log_sample(
    scorer: str, data_source: str, ground_truth: Any, result: Any, solution_str: str
) -> None:
    if _sampled(solution_str):
        logger.debug(
            "%s %s ground_truth=%r result=%r response=%r",
            scorer,
            data_source,
            ground_truth,
            result,
            solution_str,
        )


def _sampled(text: str) -> bool:
    return zlib.crc32(text.encode("utf-8", "surrogatepass")) % LOG_SAMPLE_EVERY == 0


# ------------------------------------------------------------------------------- routers

_routers: dict[str, Callable[..., Any]] = {}
_routers_lock = threading.Lock()


def _make_router(name: str, is_async: bool) -> Callable[..., Any]:
    if is_async:

        async def router(
            data_source: str,
            solution_str: str,
            ground_truth: Any,
            extra_info: Mapping[str, Any] | None = None,
            return_dict: bool = True,
            **kwargs: Any,
        ) -> dict[str, Any] | float:
            return await route_async(
                name, data_source, solution_str, ground_truth, kwargs, return_dict, extra_info
            )

        made: Callable[..., Any] = router
    else:

        def router(  # type: ignore[misc]
            data_source: str,
            solution_str: str,
            ground_truth: Any,
            extra_info: Mapping[str, Any] | None = None,
            return_dict: bool = True,
            **kwargs: Any,
        ) -> dict[str, Any] | float:
            return route(
                name, data_source, solution_str, ground_truth, kwargs, return_dict, extra_info
            )

        made = router
    made.__module__ = "reward_plugins"
    made.__name__ = made.__qualname__ = name
    made.__doc__ = (
        f"verl reward function for the scorer {name!r}: "
        "``(data_source, solution_str, ground_truth, extra_info=None, return_dict=True, "
        "**options)``; see ``reward-plugins list`` for its options."
    )
    made.__reward_plugins_router__ = True  # type: ignore[attr-defined]
    return made


def router_for(name: str) -> Callable[..., Any]:
    """The router of scorer ``name``: the object ``reward_plugins.<name>`` (made once).

    Raises:
        UnknownScorer: no scorer is registered under ``name``.
    """
    router = _routers.get(name)
    if router is None:
        is_async = any(r.is_async for r in registrations_named(name))
        with _routers_lock:
            router = _routers.setdefault(name, _make_router(name, is_async))
    return router


def made_routers() -> dict[str, Callable[..., Any]]:
    """A copy of the routers made so far, by name (for :func:`restore_routers`)."""
    with _routers_lock:
        return dict(_routers)


def restore_routers(saved: Mapping[str, Callable[..., Any]]) -> None:
    """Forget the routers made since ``saved`` (:func:`made_routers`) was taken; a router of
    a scorer registered in between is made again on demand."""
    with _routers_lock:
        _routers.clear()
        _routers.update(saved)


def _builtin_router(name: str, doc: str) -> Callable[..., Any]:
    router = _routers[name] = _make_router(name, is_async=False)
    router.__doc__ = doc
    return router


compute_score = _builtin_router(
    "compute_score", "Exact-match reward (verl's ``search_r1_like_qa_em.compute_score``)."
)
compute_score_subem = _builtin_router(
    "compute_score_subem", "Substring-match reward (verl's ``compute_score_subem``)."
)
compute_score_f1 = _builtin_router(
    "compute_score_f1", "Token-F1 reward: ``score`` times the best SQuAD token F1 of the answer."
)
compute_score_format = _builtin_router(
    "compute_score_format",
    "Search-R1's format-aware reward: structure, final-format and retrieval scores over EM.",
)
compute_score_metric = _builtin_router(
    "compute_score_metric",
    "Any metric of ``reward_plugins.metrics`` as a reward on the answer span (option ``metric``).",
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

    ``scorer`` names the registered scorer to apply (``compute_score`` by default).

    Raises:
        InvalidInput: the argument lists differ in length.
    """
    lengths = {len(data_sources), len(solution_strs), len(ground_truths)}
    if extra_infos is not None:
        lengths.add(len(extra_infos))
    if len(lengths) != 1:
        raise InvalidInput(
            "compute_score_batch: data_sources, solution_strs, ground_truths and extra_infos "
            f"must have the same length, got {len(data_sources)}, {len(solution_strs)}, "
            f"{len(ground_truths)}, {'-' if extra_infos is None else len(extra_infos)}"
        )
    infos = extra_infos if extra_infos is not None else [None] * len(data_sources)
    return [
        route(scorer, source, solution, truth, kwargs, return_dict, info)
        for source, solution, truth, info in zip(
            data_sources, solution_strs, ground_truths, infos, strict=True
        )
    ]
