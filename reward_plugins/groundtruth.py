"""Every ground-truth shape a verl dataset produces, read as a tuple of gold strings.

Accepted: ``{"target": X}`` (any mapping) and a bare ``X``, where ``X`` is a ``str``, a numpy
string scalar, or a list, tuple or numpy array of strings (pandas reads parquet lists as object
arrays, HF datasets as lists). An empty collection is accepted and never matches, as in verl.
Everything else raises :class:`~reward_plugins.errors.InvalidGroundTruth`.

verl gives the rows of a GRPO group one shared ground-truth object, so the golds read from an
object are remembered by its identity, with a copy of the list or array they came from, and
reused only while the object still holds that same target with the same items: a caller that
edits or replaces the target between calls gets the current golds, as verl would. A call reads
the target once and copies its items once; the golds are derived from that copy and memoized with
it, so a thread that edits the target in place during another thread's call cannot leave the
memo pairing the new items with the old golds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reward_plugins.errors import InvalidGroundTruth

Golds = tuple[str, ...]


def _type_name(value: object) -> str:
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _invalid(data_source: str | None, field: str, value: object, why: str) -> InvalidGroundTruth:
    where = f"data_source={data_source!r}: " if data_source is not None else ""
    return InvalidGroundTruth(f"{where}{field} {why}, got {_type_name(value)}: {value!r:.80}")


_MEMO_SIZE = 4096
_memo: dict[int, tuple[Any, Any, list[Any] | None, Golds]] = {}
"""``id(ground_truth) -> (ground_truth, target, copy of the target's items or None, golds)``;
holding the object keeps its id from being reused while the entry lives."""

_MISSING = object()


def coerce_golds(ground_truth: Any, data_source: str | None = None) -> Golds:
    """Return the gold answers held by ``ground_truth`` as a tuple of ``str``.

    Args:
        ground_truth: ``{"target": X}`` or a bare ``X`` (see the module docstring).
        data_source: named in the error message, when known.

    Raises:
        InvalidGroundTruth: the shape or an element type is not accepted.

    Example:
        >>> coerce_golds({"target": ["Paris", "paris city"]})
        ('Paris', 'paris city')
        >>> coerce_golds("Paris")
        ('Paris',)
    """
    entry = _memo.get(id(ground_truth))
    if entry is not None and entry[0] is ground_truth and _unchanged(entry):
        return entry[3]
    target, items, golds = _read_golds(ground_truth, data_source)
    _remember(ground_truth, target, items, golds)
    return golds


def _unchanged(entry: tuple[Any, Any, list[Any] | None, Golds]) -> bool:
    """The memoized object still holds the same target, with the same items."""
    ground_truth, target, items, _ = entry
    current = ground_truth.get("target", _MISSING) if type(ground_truth) is dict else ground_truth
    if current is not target:
        return False
    return items is None or (target if type(target) is list else target.tolist()) == items


def _remember(ground_truth: Any, target: Any, items: list[Any] | None, golds: Golds) -> None:
    """Memoize ``golds``, read from ``target`` and its ``items`` snapshot, for an exact dict or a
    bare target whose target can be compared: a str or tuple (immutable), a list or an array
    (compared with the snapshot, which is never read again from the target itself)."""
    if type(ground_truth) is not dict and ground_truth is not target:
        return  # a mapping of another type: _unchanged could not read its target
    if isinstance(target, str) or type(target) is tuple:
        items = None
    elif type(target) is not list and type(target).__name__ != "ndarray":
        return
    if len(_memo) >= _MEMO_SIZE:
        _memo.clear()
    _memo[id(ground_truth)] = (ground_truth, target, items, golds)


def _read_golds(ground_truth: Any, data_source: str | None) -> tuple[Any, list[Any] | None, Golds]:
    """``(target, snapshot of its items, golds)``: the target is read once, a list or array
    target's items are copied once, and the golds come from that copy, so that the memo can
    store them with the very items they were read from while other threads edit the target."""
    field = "ground_truth"
    target = ground_truth
    if type(ground_truth) is dict or isinstance(ground_truth, Mapping):
        if "target" not in ground_truth:
            raise _invalid(data_source, field, ground_truth, "is a mapping without a 'target' key")
        field = "ground_truth['target']"
        target = ground_truth["target"]
    target_type = type(target)
    if target_type is list:
        items = list(target)  # the snapshot: one C-level copy, atomic with respect to threads
    elif target_type is tuple:
        items = target
    elif isinstance(target, str):  # numpy.str_ is a str subclass
        return target, None, (str(target),)
    elif isinstance(target, (list, tuple)):
        items = target
    elif target_type.__name__ == "ndarray" and getattr(target, "ndim", None) == 1:
        items = target.tolist()
    else:
        raise _invalid(
            data_source, field, target, "must be a string or a list, tuple or 1-D array of strings"
        )
    try:
        "".join(items)  # raises TypeError unless every item is a str: the check at C speed
    except TypeError:
        for index, item in enumerate(items):
            if not isinstance(item, str):
                raise _invalid(data_source, f"{field}[{index}]", item, "must be a string") from None
        raise
    # exact str (numpy.str_ items too); a str is returned as is
    return target, items, tuple(map(str, items))
