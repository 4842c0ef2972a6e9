"""One row scored outside the trainer: what the engine, the reward server and the pool score
and what they get back.

A :class:`Row` is one verl-style call (``data_source``, ``solution_str``, ``ground_truth``,
``extra_info``). Its outcome is the scorer's result dict, or a
:class:`~reward_plugins.runtime.rows.RowFailure` whose ``reason`` is one of the failure kinds:
the engine's (``invalid ground truth``, ``unknown data source``, ``scorer error``, ...) or the
pool's below.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reward_plugins.errors import InvalidGroundTruth, UnknownDataSource, UnknownScorer
from reward_plugins.registry import registrations_named
from reward_plugins.router import route
from reward_plugins.runtime.rows import RowFailure

TIMEOUT = "timeout"
"""The row's scorer ran past the row timeout; its worker was killed and replaced."""
CRASH = "crash"
"""The worker died while scoring the row (a segfault, ``os._exit``, killed for memory)."""
DEADLINE = "deadline"
"""The request's deadline passed before the row was scored (it was never started)."""


@dataclass(frozen=True, slots=True)
class Row:
    """One response to score, as verl's ``compute_score`` receives it."""

    data_source: str
    solution_str: str
    ground_truth: Any
    extra_info: Mapping[str, Any] | None = None


Outcome = dict[str, Any] | RowFailure
"""A row's result dict, or why it has none."""

ScoreRows = Callable[[Sequence[Row], Mapping[str, Any], float | None], Awaitable[list[Outcome]]]
"""``await score_rows(rows, options, deadline)``: one outcome per row, in order; ``deadline``
is a :func:`time.monotonic` time or ``None``. :meth:`ScorerPool.score` is one."""


def takes_extra_info(scorer: str) -> bool:
    """Whether a registration of ``scorer`` receives ``extra_info`` (the row's, see
    :func:`~reward_plugins.runtime.rows.extra_info`); only then is it built for each row."""
    return any("extra_info" in found.context for found in registrations_named(scorer))


def score_one(
    scorer: str,
    options: Mapping[str, Any],
    source: str,
    response: str,
    truth: Any,
    extra_info: Mapping[str, Any] | None = None,
) -> dict[str, Any] | RowFailure:
    """Score one row; a row the scorer cannot read becomes a :class:`RowFailure`."""
    try:
        return dict(route(scorer, source, response, truth, options, extra_info=extra_info))
    except InvalidGroundTruth as error:
        return RowFailure("invalid ground truth", f"invalid ground truth: {error}")
    except UnknownDataSource as error:
        return RowFailure("unknown data source", f"unknown data source: {error}")
    except UnknownScorer as error:
        return RowFailure("unknown scorer", f"unknown scorer: {error}")
    except Exception as error:
        return RowFailure("scorer error", f"scorer error: {type(error).__name__}: {error}")
