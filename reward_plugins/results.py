"""What a scorer returns, declared: the result schema.

Each registration carries a schema, a tuple of :class:`ResultKey`: every key its result dict
holds, with a kind, a human label and whether verl's GDPO may weigh it as a reward dimension.
The engine (summary, report, ``compare``), ``recipe keys`` and the docs read the schema; none of
them knows a plugin's keys.

Kinds:

- ``reward``: the value verl trains on; exactly one key, ``score``.
- ``component``: a term of the reward or a quality score (EM, F1, a recipe's weighted part).
- ``rate``: 0 or 1 per row (an answer was found, the spam rule fired); its mean is a rate on
  [0, 1].
- ``count``: a whole number per row (tool calls, answer candidates).
- ``length``: a size per row (words, characters).
- ``diagnostic``: anything else kept in the output; never charted.

The summary shows the mean of every key (with its interval) under its label, in the schema's
order. A scorer that declares nothing returns ``score`` alone (:data:`SCORE_ONLY`); a key a
result holds that its schema does not declare is treated as a ``diagnostic`` labelled by its
name (:func:`complete`).

The schema may depend on the options (a composed recipe's keys are its components'): a
registration then gives a function ``options -> schema``, called once per option set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from reward_plugins.errors import PluginError

ResultKind = Literal["reward", "component", "rate", "count", "length", "diagnostic"]
RESULT_KINDS: tuple[str, ...] = get_args(ResultKind)


@dataclass(frozen=True)
class ResultKey:
    """One key of a scorer's result dict.

    Attributes:
        key: the result dict's key.
        kind: one of :data:`RESULT_KINDS` (see the module docstring).
        label: how a summary, a report or a table names it ("EM", "answer rate").
        gdpo: whether verl's GDPO (a per-dimension advantage) may weigh it as a reward
            dimension; true for rewards and components on a meaningful scale, false for
            indicators and diagnostics.
    """

    key: str
    kind: ResultKind
    label: str
    gdpo: bool = False


Schema = tuple[ResultKey, ...]
SchemaSource = Iterable[ResultKey] | Callable[[Mapping[str, Any]], Iterable[ResultKey]]
"""What :func:`reward_plugins.scorer` takes as ``results``: a schema, or a function of the
options (every option, defaults filled in) returning one."""

SCORE_ONLY: Schema = (ResultKey("score", "reward", "score", gdpo=True),)
"""The schema of a scorer that declares none: a number, or a dict holding ``score``."""


def check_schema(owner: str, schema: Iterable[ResultKey]) -> Schema:
    """``schema`` as a tuple, checked: :class:`ResultKey` items, string keys, no key twice, known
    kinds, and ``score`` present as the one ``reward``.

    Raises:
        PluginError: naming ``owner`` (the scorer) and what is wrong.
    """
    try:
        items = tuple(schema)
    except TypeError:
        raise PluginError(
            f"{owner}: results must be ResultKey items, got {type(schema).__name__}"
        ) from None
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, ResultKey):
            raise PluginError(
                f"{owner}: results must be ResultKey items, got {type(item).__name__}"
            )
        if not isinstance(item.key, str) or not item.key:
            raise PluginError(f"{owner}: a result key must be a non-empty str, got {item.key!r}")
        if item.key in seen:
            raise PluginError(f"{owner}: result key {item.key!r} is declared twice")
        if item.kind not in RESULT_KINDS:
            raise PluginError(
                f"{owner}: result key {item.key!r} has kind {item.kind!r}; "
                f"kinds are {', '.join(RESULT_KINDS)}"
            )
        if (item.kind == "reward") != (item.key == "score"):
            raise PluginError(f"{owner}: 'score', and only 'score', is of kind 'reward'")
        seen.add(item.key)
    if "score" not in seen:
        raise PluginError(f"{owner}: results must declare 'score' (kind 'reward')")
    return items


def keys_of(schema: Schema) -> tuple[str, ...]:
    """The keys of ``schema``, in its order."""
    return tuple(item.key for item in schema)


def complete(schema: Schema, keys: Iterable[str]) -> Schema:
    """The schema of a result with ``keys``: the declared items of those keys, in the declared
    order, then each undeclared key as a ``diagnostic`` labelled by its name."""
    present = list(keys)
    declared = {item.key: item for item in schema}
    known = [item for item in schema if item.key in set(present)]
    extra = [ResultKey(k, "diagnostic", k) for k in present if k not in declared]
    return tuple(known + extra)


def union(schemas: Iterable[Schema]) -> Schema:
    """One schema for several (a run scored by several registrations): each key once, first
    declaration wins, in order of first appearance."""
    merged: dict[str, ResultKey] = {}
    for schema in schemas:
        for item in schema:
            merged.setdefault(item.key, item)
    return tuple(merged.values())
