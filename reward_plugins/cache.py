"""Bounded caches: the one helper, and every cache limit of the package in one place.

The package memoizes what a training step repeats (a scorer bound with an option set, a
recipe, a built metric, a ground truth parsed or normalized once per GRPO group). Every such
memo is bounded, so that a long run with ever-new keys holds a fixed amount of memory: a
:class:`BoundedCache` empties itself when full (cheaper per lookup than an LRU, and the keys of
a run come back soon after they are forgotten), the two memos of ground truths also count their
bytes, and a few functions use :func:`functools.lru_cache`. Their sizes are the constants
below; nothing else in the package states a cache limit (the retriever's result cache is
sized by its ``--cache-mb`` option; the ``functools.cache`` memos take no argument or a
registered scorer's name).
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")

# ---- caches that empty themselves when full (BoundedCache, or a byte budget as well)

BOUND_OPTION_SETS = 1024
"""Per scorer: the scorer bound with each option set (``Registration.bind``)."""

RECIPE_BINDINGS = 256
"""Per composed recipe: its components bound for each data source (``Recipe.bound_for``)."""

RECIPES = 256
"""Composed recipes built from ``compute_score_composed``'s options (``recipe_of``)."""

BUILT_METRICS = 256
"""Metrics built by name and option set for the QA scorers' ``metric=`` option."""

SHARED_GROUND_TRUTHS = 4096
"""Ground truths parsed once and shared by the rows of a dump (``runtime.rows``: its shared
objects, and the ``lru_cache`` of its parser)."""

GROUND_TRUTH_MEMO_ENTRIES = 4096
GROUND_TRUTH_MEMO_BYTES = 64 * 1024 * 1024
"""The gold memo of :mod:`reward_plugins.groundtruth`: at most this many entries and bytes."""

TRAJECTORY_GRAMMARS = 64
"""The trajectory grammar (compiled tag pattern and transitions) of each set of tag names of
``compute_score_format`` (:mod:`reward_plugins.plugins.trajectory`)."""

ROLE_PATTERNS = 64
"""The tag-and-role pattern of each set of roles (:mod:`reward_plugins.tool_trajectory`)."""

GOLD_INDEX_ENTRIES = 4096
GOLD_INDEX_BYTES = 64 * 1024 * 1024
"""The normalized golds of :mod:`reward_plugins.metrics.qa`: at most this many entries per
normalizer, and this many bytes for all normalizers together."""

# ---- functools.lru_cache sizes (least recently used out)

TAG_PATTERNS = 64
"""Compiled ``<tag>...</tag>`` patterns, by tag (:mod:`reward_plugins.extract`: its tag
scanner's patterns, a :class:`BoundedCache`, and its span pattern's ``lru_cache``)."""

SCRIPT_RANGES = 64
"""Merged Unicode ranges by script set, for the language term of
:mod:`reward_plugins.plugins.shaping`."""

TOKENS = 2**16
"""Per-token work of the tokenizers (13a splitting, ROUGE stemming)."""

TOOL_CONFIGS = 16
"""The tools declared by each verl tool config, by path
(:func:`reward_plugins.plugins.tool_agent.declared_tools`)."""


class BoundedCache(dict[K, V]):
    """A dict that empties itself when an assignment would take it past ``limit`` entries.

    Lookups are plain dict lookups (``get``, ``in``, ``[]``); only ``cache[key] = value`` is
    bounded (``update`` and ``setdefault`` are not: do not use them). Emptying the whole cache
    rather than evicting one entry keeps every lookup free of bookkeeping; a key used again is
    simply computed again. Like the dicts it replaces, it relies on the GIL: concurrent
    assignments may briefly hold a few entries over ``limit``, never corrupt it.

    Example:
        >>> cache = BoundedCache[str, int](2)
        >>> cache["a"], cache["b"] = 1, 2
        >>> cache["c"] = 3
        >>> dict(cache)
        {'c': 3}
    """

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        if len(self) >= self.limit and key not in self:
            self.clear()
        super().__setitem__(key, value)
