"""The per-row half of the report: what a worker keeps of each scored row (:class:`RowStats`),
and the run's name for the page title (:func:`run_name`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from reward_plugins.options import is_finite_number
from reward_plugins.rescore.formats import SUFFIXES
from reward_plugins.rescore.records import ScoredRow

EXCERPT_CHARS = 200
"""Longest excerpt of a response (its end) and experiment name a :class:`RowStats` keeps."""

GENERIC_NAMES: frozenset[str] = frozenset({
    ".", "ckpt", "ckpts", "checkpoint", "checkpoints", "data", "dump", "dumps", "generations",
    "logs", "output", "outputs", "rollout", "rollout_data", "rollouts", "test", "train", "val",
    "validation", "validation_data",
})  # fmt: skip
"""Path components that name no run (verl's dump folders, checkpoint roots): :func:`run_name`
looks past them."""

_NAME_SUFFIXES = (*SUFFIXES, ".json")
"""Endings :func:`run_name` drops from a file name: the input formats', and ``.json``."""


class RowStats(NamedTuple):
    """What the report keeps of one scored row (see :func:`describe_row`)."""

    file: str
    number: int
    step: int | None
    data_source: str
    group: str | None
    """Stable 64-bit BLAKE2b hex digest of the row's ``input`` (``None`` without one)."""
    values: tuple[tuple[str, float], ...]
    """The result's keys holding a finite number (a bool as 0 or 1), in the result's order."""
    logged: float | None
    """The record's own ``score`` when it is a finite number."""
    excerpt: str
    """The response's end, cut to :data:`EXCERPT_CHARS` (``…`` marks a cut)."""
    experiment: str | None = None
    """The record's ``experiment_name`` (or its ``extra_info``'s), when it is a string."""

    def value(self, key: str) -> float | None:
        """The value of result key ``key``, ``None`` when the result holds no number there."""
        for name, value in self.values:
            if name == key:
                return value
        return None

    @property
    def score(self) -> float | None:
        """The re-scored reward (the result's ``score``)."""
        return self.value("score")


def describe_row(row: ScoredRow) -> RowStats:
    """Describe one scored row for :meth:`RunReport.add`, in time linear in its size.

    Every value comes from ``row.result`` (the scorer's own keys); the response is kept only
    as an excerpt to show. Never raises on any response text or record.

    Example:
        >>> from reward_plugins.rescore.records import ScoredRow
        >>> row = ScoredRow("a.jsonl", 1, {"input": "q", "score": 1}, 3, "my_source",
        ...                 "<answer>Paris</answer>", {"score": 1.0, "calls": 2, "note": "x"})
        >>> stats = describe_row(row)
        >>> stats.values, stats.logged, stats.excerpt
        ((('score', 1.0), ('calls', 2.0)), 1.0, '<answer>Paris</answer>')
    """
    values = []
    for key, value in row.result.items():
        number = _number(value)
        if isinstance(key, str) and number is not None:
            values.append((key, number))
    return RowStats(
        file=row.file,
        number=row.number,
        step=row.step,
        data_source=row.data_source,
        group=group_key(row.record.get("input")),
        values=tuple(values),
        logged=_number(row.record.get("score")),
        excerpt=_tail(row.response),
        experiment=_experiment_of(row.record),
    )


def group_key(value: Any) -> str | None:
    """The GRPO group key of an ``input`` value: a 64-bit BLAKE2b hex digest of the string (of
    its sorted-key JSON when it is not a string), the same in every process; ``None`` for
    ``None``."""
    if value is None:
        return None
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
    else:
        try:
            data = json.dumps(value, sort_keys=True, default=str).encode("ascii")
        except (TypeError, ValueError):  # keys that do not sort, circular values
            data = repr(value).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def run_name(inputs: Iterable[str | Path]) -> str:
    """The run's name for the page title: per input, the last component of its absolute path
    that is not a format suffix, a step number (verl's ``{step}.jsonl``) or one of
    :data:`GENERIC_NAMES`, so ``checkpoints/search_r1/grpo_nq/rollouts`` is ``grpo_nq`` (verl's
    ``trainer.experiment_name`` in its default checkpoint layout); the names of several inputs
    joined by ``", "``, each once.

    Example:
        >>> run_name(["/runs/grpo_nq/rollouts", "/runs/grpo_nq/val/120.jsonl"])
        'grpo_nq'
    """
    names: dict[str, None] = {}
    for given in inputs:
        path = Path(given)
        absolute = path.absolute()
        name = None
        for index, part in enumerate(reversed(absolute.parts[1:])):
            stem = _without_suffix(part) if index == 0 else part
            if not stem.isdigit() and stem.lower() not in GENERIC_NAMES:
                name = stem
                break
        names.setdefault(name or path.name or str(path), None)
    return ", ".join(names)


def _without_suffix(name: str) -> str:
    """``name`` without its ending of :data:`_NAME_SUFFIXES` (the longest that matches)."""
    endings = [suffix for suffix in _NAME_SUFFIXES if name.endswith(suffix)]
    return name[: -len(max(endings, key=len))] if endings else name


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a finite number or a bool (as 0 or 1), else ``None``."""
    if isinstance(value, bool) or is_finite_number(value):
        return float(value)
    return None


def _tail(text: str) -> str:
    return text if len(text) <= EXCERPT_CHARS else "…" + text[1 - EXCERPT_CHARS :]


def _experiment_of(record: Mapping[str, Any]) -> str | None:
    name = record.get("experiment_name")
    if not isinstance(name, str):
        info = record.get("extra_info")
        name = info.get("experiment_name") if isinstance(info, Mapping) else None
    if not isinstance(name, str) or not name:
        return None
    return name if len(name) <= EXCERPT_CHARS else name[: EXCERPT_CHARS - 1] + "…"
