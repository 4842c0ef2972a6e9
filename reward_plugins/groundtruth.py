"""Every ground-truth shape a verl dataset produces, read as a tuple of gold strings.

Accepted: ``{"target": X}`` (any mapping) and a bare ``X``, where ``X`` is a gold or a list,
tuple or 1-D numpy array of golds (pandas reads parquet lists as object arrays, HF datasets as
lists). An empty collection is accepted and never matches, as in verl. A gold is read as a
``str`` under one rule:

- a ``str`` (numpy string scalars and other subclasses too) gives ``str(x)``;
- an ``int`` or a numpy integer gives its digits, ``str(int(x))``: ``72`` gives ``"72"``;
- a ``float`` or a numpy floating scalar with an integral value gives the digits of that integer,
  so that it matches the int: ``72.0`` gives ``"72"``, ``-3.0`` gives ``"-3"``, ``1e20`` gives
  ``"100000000000000000000"``; any other finite float gives ``repr(float(x))``: ``0.5`` gives
  ``"0.5"`` (a numpy ``float32`` is widened first: ``float32(0.1)`` gives
  ``"0.10000000149011612"``).

Everything else raises :class:`~reward_plugins.errors.InvalidGroundTruth` naming the field (such
as ``ground_truth['target'][1]``) and the type received: ``None``, bytes, nested collections, a
``bool`` or ``numpy.bool_`` (not read as 0 or 1), NaN and infinities, complex numbers, ``Decimal``
and ``Fraction``, an int with more digits than ``sys.get_int_max_str_digits()`` allows.

verl gives the rows of a GRPO group one shared ground-truth object, so the golds read from an
object are remembered by its identity, with a copy of the list or array they came from, and
reused only while the object still holds that same target with the same items: a caller that
edits or replaces the target between calls gets the current golds, as verl would. A call reads
the target once and copies its items once; the golds are derived from that copy and memoized with
it, so a thread that edits the target in place during another thread's call cannot leave the
memo pairing the new items with the old golds. The memo keeps the objects it remembers alive,
so it is bounded twice: at most 4096 entries, and at most :data:`MEMO_BYTE_BUDGET` (64 MiB) of
estimated size; it is emptied when either bound would be passed, and a ground truth estimated
above a quarter of the budget is read afresh on every call instead of being remembered.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from reward_plugins import cache
from reward_plugins.errors import InvalidGroundTruth

Golds = tuple[str, ...]


def _type_name(value: object) -> str:
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _invalid(data_source: str | None, field: str, value: object, why: str) -> InvalidGroundTruth:
    where = f"data_source={data_source!r}: " if data_source is not None else ""
    try:
        shown = f"{value!r:.80}"
    except ValueError:  # an int with more digits than sys.get_int_max_str_digits() allows
        shown = "(too long to show)"
    return InvalidGroundTruth(f"{where}{field} {why}, got {_type_name(value)}: {shown}")


_MEMO_SIZE = cache.GROUND_TRUTH_MEMO_ENTRIES
"""The most entries the memo holds; it is cleared when adding one would exceed this."""

MEMO_BYTE_BUDGET = cache.GROUND_TRUTH_MEMO_BYTES
"""The most bytes (64 MiB, as estimated by :func:`_entry_bytes`) that the memo keeps alive.

The memo is cleared when adding an entry would exceed this, and a ground truth whose entry alone
is estimated above a quarter of the budget (16 MiB) is not memoized at all (it is read on every
call). Read at each insertion, so it can be changed at run time."""

_ENTRY_BYTES = 200
"""Estimated bytes of one entry besides its items: the entry tuple, its dict slot, the golds
tuple and the items list."""

_ITEM_BYTES = 64
"""Estimated bytes per gold besides the strings: the pointers to it in the golds tuple, the items
copy and the target, and a number item itself (a small int or a float)."""

_MemoEntry = tuple[Any, Any, list[Any] | None, Golds, int, tuple[type, ...] | None]

_memo: dict[int, _MemoEntry] = {}
"""``id(ground_truth) -> (ground_truth, target, copy of the target's items or None, golds,
estimated bytes, the items' types when they are not all str)``; holding the object keeps its id
from being reused while the entry lives. The types are compared too where items can be numbers,
because equal numbers of other types are other golds, or none (``True == 1``)."""

_memo_total = 0
"""The sum of the estimated bytes of the memo's entries."""

_memo_lock = threading.Lock()
"""Serializes the memo's insertions and evictions, so that ``_memo_total`` stays exact; lookups
need no lock."""

_MISSING = object()
_IMMUTABLE_TARGETS = (tuple, int, float)


def coerce_golds(ground_truth: Any, data_source: str | None = None) -> Golds:
    """Return the gold answers held by ``ground_truth`` as a tuple of ``str``.

    Args:
        ground_truth: ``{"target": X}`` or a bare ``X`` (see the module docstring).
        data_source: named in the error message, when known.

    Raises:
        InvalidGroundTruth: the shape or an element is not accepted (the message names the
            field, such as ``ground_truth['target'][1]``, and the type received).

    Example:
        >>> coerce_golds({"target": ["Paris", "paris city"]})
        ('Paris', 'paris city')
        >>> coerce_golds("Paris")
        ('Paris',)
        >>> coerce_golds({"target": [72, 72.0, 0.5, "seventy-two"]})
        ('72', '72', '0.5', 'seventy-two')
    """
    entry = _memo.get(id(ground_truth))
    if entry is not None and entry[0] is ground_truth and _unchanged(entry):
        return entry[3]
    target, items, golds, all_str = _read_golds(ground_truth, data_source)
    _remember(ground_truth, target, items, golds, all_str)
    return golds


def _unchanged(entry: _MemoEntry) -> bool:
    """The memoized object still holds the same target, with the same items."""
    ground_truth, target, items, _, _, types = entry
    current = ground_truth.get("target", _MISSING) if type(ground_truth) is dict else ground_truth
    if current is not target:
        return False
    if items is None:
        return True
    current = target if type(target) is list else target.tolist()
    return current == items and (types is None or tuple(map(type, current)) == types)


def _remember(
    ground_truth: Any, target: Any, items: Sequence[Any] | None, golds: Golds, all_str: bool
) -> None:
    """Memoize ``golds``, read from ``target`` and its ``items`` snapshot (``all_str``: whose items
    are all str), for an exact dict or a bare target whose target can be compared: a str, int,
    float or tuple (immutable), a list or an array (compared with the snapshot, which is never
    read again from the target itself).

    The memo stays within :data:`MEMO_BYTE_BUDGET` and ``_MEMO_SIZE`` entries: it is cleared when
    this entry would exceed either, and an entry over a quarter of the budget is not stored.
    """
    global _memo_total
    if type(ground_truth) is not dict and ground_truth is not target:
        return  # a mapping of another type: _unchanged could not read its target
    snapshot: list[Any] | None
    if isinstance(target, str) or type(target) in _IMMUTABLE_TARGETS:
        snapshot = None
    elif type(items) is list and (type(target) is list or type(target).__name__ == "ndarray"):
        snapshot = items
    else:
        return
    size = _entry_bytes(target, snapshot, golds)
    key = id(ground_truth)
    with _memo_lock:
        stale = _memo.pop(key, None)
        if stale is not None:
            _memo_total -= stale[4]
        budget = MEMO_BYTE_BUDGET
        if size > budget // 4:
            return
        if len(_memo) >= _MEMO_SIZE or _memo_total + size > budget:
            _memo.clear()
            _memo_total = 0
        types = None if all_str or snapshot is None else tuple(map(type, snapshot))
        _memo[key] = (ground_truth, target, snapshot, golds, size, types)
        _memo_total += size


def _entry_bytes(target: Any, items: list[Any] | None, golds: Golds) -> int:
    """The estimated bytes that a memo entry keeps alive (the estimate the byte budget counts).

    ``_ENTRY_BYTES + _ITEM_BYTES * len(golds)`` plus the character data of the strings, counted
    with ``str.__sizeof__`` (1, 2 or 4 bytes per character, as CPython stores them) and, for an
    array target, its buffer (``nbytes``). When every item is a str, the items and the golds are
    counted as two separate copies of their concatenation (each gold is a copy when the item is a
    str subclass such as ``numpy.str_``; for exact str items they are the same objects, so the
    estimate is then up to twice the real size: conservative). Otherwise each str item, each
    ``int`` item and each gold is counted by its own size.
    """
    if items is not None:
        sources: Sequence[Any] = items
    else:
        sources = target if type(target) is tuple else (target,)
    try:
        size = 2 * str.__sizeof__("".join(sources))  # every item a str: the common case
    except TypeError:
        size = sum(map(_item_bytes, sources)) + sum(map(str.__sizeof__, golds))
    if items is not None and type(target) is not list:
        size += int(target.nbytes)
    return _ENTRY_BYTES + _ITEM_BYTES * len(golds) + size


def _item_bytes(item: Any) -> int:
    """The bytes of an item beyond ``_ITEM_BYTES``: a string's or an ``int``'s size, else 0."""
    if isinstance(item, str):
        return str.__sizeof__(item)
    return int.__sizeof__(item) if isinstance(item, int) else 0


def _memo_bytes() -> int:
    """The estimated bytes held by the memo now (see :func:`_entry_bytes`)."""
    return _memo_total


def _clear_memo() -> None:
    """Forget every memoized ground truth."""
    global _memo_total
    with _memo_lock:
        _memo.clear()
        _memo_total = 0


def _read_golds(
    ground_truth: Any, data_source: str | None
) -> tuple[Any, Sequence[Any] | None, Golds, bool]:
    """``(target, snapshot of its items, golds, whether the items are all str)``.

    The target is read once, a list or array target's items are copied once, and the golds come
    from that copy, so that the memo can store them with the very items they were read from while
    other threads edit the target.
    """
    field = "ground_truth"
    target = ground_truth
    if type(ground_truth) is dict or isinstance(ground_truth, Mapping):
        if "target" not in ground_truth:
            raise _invalid(data_source, field, ground_truth, "is a mapping without a 'target' key")
        field = "ground_truth['target']"
        target = ground_truth["target"]
    target_type = type(target)
    items: Sequence[Any]
    if target_type is list:
        items = list(target)  # the snapshot: one C-level copy, atomic with respect to threads
    elif target_type is tuple:
        items = target
    elif isinstance(target, str):  # numpy.str_ is a str subclass
        return target, None, (str(target),), True
    elif isinstance(target, (list, tuple)):
        items = target
    elif target_type.__name__ == "ndarray" and getattr(target, "ndim", None) == 1:
        items = target.tolist()
    else:
        gold = _number_gold(target, field, data_source)
        if gold is None:
            raise _invalid(
                data_source,
                field,
                target,
                "must be a string, a number, or a list, tuple or 1-D array of strings and numbers",
            )
        return target, None, (gold,), False
    try:
        "".join(items)  # raises TypeError unless every item is a str: the check at C speed
    except TypeError:
        return target, items, _mixed_golds(items, field, data_source), False
    # exact str (numpy.str_ items too); a str is returned as is
    return target, items, tuple(map(str, items)), True


def _mixed_golds(items: Sequence[Any], field: str, data_source: str | None) -> Golds:
    """The golds of items that are not all str: each a str or a number (see the module
    docstring), else :class:`InvalidGroundTruth` naming the item's field."""
    golds = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            golds.append(str(item))
            continue
        item_field = f"{field}[{index}]"
        gold = _number_gold(item, item_field, data_source)
        if gold is None:
            raise _invalid(data_source, item_field, item, "must be a string or a number")
        golds.append(gold)
    return tuple(golds)


def _number_gold(value: Any, field: str, data_source: str | None) -> str | None:
    """The gold of a number (see the module docstring), or ``None`` when ``value`` is no number.

    Raises:
        InvalidGroundTruth: ``value`` is a bool, NaN or an infinity, or an int with more digits
            than ``sys.get_int_max_str_digits()`` allows.
    """
    numpy = sys.modules.get("numpy")  # a numpy scalar exists only once numpy is imported
    if isinstance(value, bool) or (numpy is not None and isinstance(value, numpy.bool_)):
        raise _invalid(data_source, field, value, "must be a string or a number, not a boolean")
    if isinstance(value, int) or (numpy is not None and isinstance(value, numpy.integer)):
        number: int | float = int(value)
    elif isinstance(value, float) or (numpy is not None and isinstance(value, numpy.floating)):
        number = float(value)
        if not math.isfinite(number):
            raise _invalid(data_source, field, value, "must be a string or a finite number")
        if not number.is_integer():
            return repr(number)
        number = int(number)
    else:
        return None
    try:
        return str(number)
    except ValueError:  # more digits than sys.get_int_max_str_digits() (Python 3.11+)
        raise _invalid(
            data_source, field, value, "has more digits than an int may be written with"
        ) from None
