"""What the reward server scores and what it gets back, shared by every protocol and the pool.

A :class:`Row` is one verl-style call (``data_source``, ``solution_str``, ``ground_truth``,
``extra_info``). Its outcome is the scorer's result dict, or a
:class:`~reward_plugins.rescore.rows.RowFailure` whose ``reason`` is one of the failure kinds:
the engine's (``invalid ground truth``, ``unknown data source``, ``scorer error``, ...) or the
pool's below.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reward_plugins.rescore.rows import RowFailure

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
