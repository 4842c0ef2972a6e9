"""What the engine hands to per-row collectors (the run report): one scored row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class ScoredRow(NamedTuple):
    """One row that was scored, as seen in the worker process that scored it.

    ``file`` is the input file as the user named it; ``number`` the 1-based line (JSONL) or row
    (parquet) in it; ``record`` the input row's columns as read (the dump's own ``input``,
    ``score`` and ``step`` among them when present); ``step`` the row's integer ``step`` column
    (``None`` when absent); ``data_source`` the data source it was scored under; ``response``
    the scored text; ``result`` the scorer's result (``score`` and the scorer's other keys).
    """

    file: str
    number: int
    record: Mapping[str, Any]
    step: int | None
    data_source: str
    response: str
    result: Mapping[str, float]
