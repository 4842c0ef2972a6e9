"""Every ground-truth shape a verl dataset produces, read as a tuple of gold strings.

Accepted: ``{"target": X}`` (any mapping) and a bare ``X``, where ``X`` is a ``str``, a numpy
string scalar, or a list, tuple or numpy array of strings (pandas reads parquet lists as object
arrays, HF datasets as lists). An empty collection is accepted and never matches, as in verl.
Everything else raises :class:`~reward_plugins.errors.InvalidGroundTruth`.
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
    field = "ground_truth"
    target = ground_truth
    if type(ground_truth) is dict or isinstance(ground_truth, Mapping):
        if "target" not in ground_truth:
            raise _invalid(data_source, field, ground_truth, "is a mapping without a 'target' key")
        field = "ground_truth['target']"
        target = ground_truth["target"]
    target_type = type(target)
    if target_type is list or target_type is tuple:
        items = target
    elif isinstance(target, str):  # numpy.str_ is a str subclass
        return (str(target),)
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
    return tuple(map(str, items))  # exact str (numpy.str_ items too); a str is returned as is
