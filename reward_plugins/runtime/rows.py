"""Rows, whatever their format: the columns a job reads, the ground truth and ``extra_info``
a scorer gets, and the ``reward_*`` columns of a result.

Everything here runs in the worker that scores a chunk, so that it scales with the workers;
reading and writing each file format is in :mod:`reward_plugins.rescore.formats`.
"""

from __future__ import annotations

import ast
import functools
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from reward_plugins import cache
from reward_plugins.cache import BoundedCache

RESPONSE_COLUMNS: tuple[str, ...] = ("output", "response", "responses", "solution_str")
"""Response columns looked for, in this order (verl dumps call it ``output``)."""

GROUND_TRUTH_COLUMNS: tuple[str, ...] = ("gts", "ground_truth", "reward_model.ground_truth")
"""Ground-truth columns looked for, in this order; a dotted name is a field of a mapping column."""

EXTRA_INFO_COLUMN = "extra_info"
"""verl's datasets give each row an ``extra_info`` mapping, which verl hands the scorer."""

AGENT_LOOP_COLUMNS: tuple[str, ...] = (
    "tool_rewards",
    "turn_scores",
    "num_turns",
    "rollout_reward_scores",
    "min_global_steps",
    "max_global_steps",
    "extras",
)
"""Fields verl's agent loop adds to ``extra_info`` before the reward manager calls the scorer
(``verl/experimental/agent_loop/agent_loop.py``, the default ``extra_fields``;
``verl/experimental/reward_loop/reward_manager/naive.py`` adds ``num_turns`` and
``rollout_reward_scores``); a row's columns of these names are laid over its ``extra_info``."""

DATA_SOURCE_COLUMN = "data_source"
STEP_COLUMN = "step"
RESULT_PREFIX = "reward_"


class RowFailure(NamedTuple):
    """Why one row was not scored: a short ``reason`` (the category) and a ``detail``."""

    reason: str
    detail: str


# -------------------------------------------------------------------------------- columns


@dataclass(frozen=True)
class Columns:
    """The input columns a job reads; ``data_source`` is ``None`` when ``--data-source`` is used.

    A dotted name (``reward_model.ground_truth``) reads a field of a mapping column.
    """

    response: str
    ground_truth: str
    data_source: str | None


def column_value(record: Mapping[str, Any], name: str) -> Any:
    """The value of column ``name`` in ``record`` (``None`` when absent)."""
    if name in record:
        return record[name]
    parent, dot, child = name.partition(".")
    if dot:
        value = record.get(parent)
        if isinstance(value, Mapping):
            return value.get(child)
    return None


def extra_info(record: Mapping[str, Any]) -> dict[str, Any] | RowFailure:
    """The ``extra_info`` verl would hand the scorer for ``record``: its ``extra_info`` column
    (absent or null: empty) updated with its :data:`AGENT_LOOP_COLUMNS` that are not null (a
    parquet file has every column in every row), as verl's reward managers update it with the
    agent loop's fields."""
    base = record.get(EXTRA_INFO_COLUMN)
    if base is not None and not isinstance(base, Mapping):
        return RowFailure(
            "invalid extra_info",
            f"extra_info (column {EXTRA_INFO_COLUMN!r}) must be an object, got "
            f"{type(base).__name__}",
        )
    info = dict(base or {})
    info.update((name, record[name]) for name in AGENT_LOOP_COLUMNS if record.get(name) is not None)
    return info


def _has_column(records: Sequence[Mapping[str, Any]], name: str) -> bool:
    return any(column_value(record, name) is not None or name in record for record in records)


def find_column(
    records: Sequence[Mapping[str, Any]],
    given: str | None,
    candidates: Sequence[str],
    role: str,
    option: str,
    where: str,
) -> str:
    """The first of ``candidates`` (or the ``given`` name) present in any of ``records``.

    Raises:
        ValueError: none is present; the message names ``where``, the columns seen and
            ``option``.
    """
    for name in (given,) if given else candidates:
        if _has_column(records, name):
            return name
    seen: dict[str, None] = {}
    for record in records:
        seen.update(dict.fromkeys(record))
    looked_for = repr(given) if given else " / ".join(map(repr, candidates))
    raise ValueError(
        f"{where}: no {role} column {looked_for}; columns: {', '.join(seen) or '(none)'}; "
        f"name it with {option}"
    )


# ------------------------------------------------------------------------ ground truths

_shared = BoundedCache[bytes, tuple[Any, bool]](cache.SHARED_GROUND_TRUTHS)


def ground_truth(value: Any) -> tuple[Any, bool]:
    """:func:`unstringify` of ``value``, one object per distinct ground truth.

    Every parsed row brings its own copy of its ground truth, though the rows of a GRPO group
    share it: handing the scorer one object per distinct value lets the gold cache of
    :mod:`reward_plugins.groundtruth` (which remembers objects) serve the whole group.

    Raises:
        ValueError: as :func:`unstringify`.
    """
    try:
        key = orjson.dumps(value)
    except TypeError:
        return unstringify(value)
    shared = _shared.get(key)
    if shared is None:
        shared = _shared[key] = unstringify(value)
    return shared


def unstringify(value: Any) -> tuple[Any, bool]:
    """A ground truth as written by older verl dumps, restored: ``(value, was_stringified)``.

    verl dumps rows with ``json.dumps(..., default=str)`` (``verl/trainer/ppo/ray_trainer.py``,
    ``_write_generations``), so a numpy array of gold strings became its ``str``:
    ``"['a' 'b']"``. The rule: a string, on its own or as the ``target`` of a mapping, that is
    exactly ``[`` + one or more quoted Python string literals separated by whitespace + ``]`` is
    read back as the list of those strings. Anything else is left as it is (so ``"[1 2]"`` and
    ``"['a', 'b']"`` stay strings). A string that numpy shortened with ``...`` cannot be restored.

    Raises:
        ValueError: the string is a numpy array shortened with ``...``.
    """
    if isinstance(value, str):
        golds = _numpy_strings(value)
        return (value, False) if golds is None else (list(golds), True)
    if isinstance(value, Mapping) and isinstance(value.get("target"), str):
        golds = _numpy_strings(value["target"])
        if golds is not None:
            return {**value, "target": list(golds)}, True
    return value, False


_PLAIN_ITEM = r"(?:'[^'\\\n]*'|\"[^\"\\\n]*\")"
_PLAIN_ARRAY = re.compile(rf"\[\s*{_PLAIN_ITEM}(?:\s+{_PLAIN_ITEM})*\s*\]")
"""A numpy string array's ``str`` whose items have no escape: their text is the gold itself."""
_PLAIN_ITEMS = re.compile(r"'([^']*)'|\"([^\"]*)\"")


@functools.lru_cache(maxsize=cache.SHARED_GROUND_TRUTHS)  # a GRPO group shares its ground truth
def _numpy_strings(text: str) -> tuple[str, ...] | None:
    """The strings of a numpy 1-D string array's ``str``, or ``None`` if ``text`` is not one."""
    if len(text) < 4 or text[0] != "[" or text[-1] != "]":
        return None
    if _PLAIN_ARRAY.fullmatch(text):
        return tuple(single or double for single, double in _PLAIN_ITEMS.findall(text))
    inner, position, golds = text[1:-1], 0, list[str]()
    while True:
        while position < len(inner) and inner[position].isspace():
            position += 1
        if position == len(inner):
            return tuple(golds) or None
        if inner.startswith("...", position):
            raise ValueError(
                f"{text[:60]!r} is a numpy array that numpy shortened with '...' when the dump "
                "was written; its golds cannot be restored"
            )
        if golds and not inner[position - 1].isspace():
            return None
        item = _string_literal(inner, position)
        if item is None:
            return None
        gold, position = item
        golds.append(gold)


def _string_literal(text: str, position: int) -> tuple[str, int] | None:
    """The Python string literal (quoted, with escapes) at ``position`` of ``text`` and the
    position after it, or ``None`` if there is none."""
    quote = text[position]
    if quote not in "'\"":
        return None
    end = position + 1
    while end < len(text) and text[end] != quote:
        end += 2 if text[end] == "\\" else 1
    if end >= len(text):
        return None
    try:
        gold = ast.literal_eval(text[position : end + 1])
    except (ValueError, SyntaxError):
        return None
    return gold, end + 1


# ----------------------------------------------------------------------------- results


def reward_columns(result: Mapping[str, Any]) -> dict[str, Any]:
    """``{"reward_<key>": value}`` of a scorer's result, numbers as Python's own (a scorer may
    return numpy numbers, which JSON writers refuse)."""
    return {
        RESULT_PREFIX + key: value if type(value) in _PLAIN else _plain(value)
        for key, value in result.items()
    }


_PLAIN = frozenset({float, int, bool})


def _plain(value: Any) -> Any:
    import numpy as np  # only here: the file readers (and the CLI through them) need no numpy

    if isinstance(value, np.bool_):
        return bool(value)
    return int(value) if isinstance(value, numbers.Integral) else float(value)
