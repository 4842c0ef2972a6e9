"""The one registry: ``(data_source, scorer name) -> scorer function``.

A scorer takes ``(solution_str, golds, **options)``, where ``golds`` is the tuple of gold strings
that :func:`~reward_plugins.groundtruth.coerce_golds` produced, and returns a mapping with a
``score`` key and a fixed set of numeric keys. Its options are its keyword-only parameters; the
router rejects any other keyword with a :class:`TypeError` that lists them.

Plugins register at import time with :func:`register`. Other distributions add plugins through the
entry-point group ``reward_plugins``: each entry point names a module whose import registers its
scorers. Entry points are loaded by :func:`load_plugins`, and automatically the first time a
lookup misses.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import Any

from reward_plugins.errors import UnknownDataSource

ENTRY_POINT_GROUP = "reward_plugins"
BUILTIN_PLUGINS: tuple[str, ...] = ("reward_plugins.plugins.search_r1",)

Scorer = Callable[..., Mapping[str, Any]]


@dataclass(frozen=True)
class Registration:
    """A registered scorer and the option names it accepts."""

    function: Scorer
    options: frozenset[str]


_lock = threading.RLock()
_scorers: dict[str, dict[str, Registration]] = {}
_loaded_modules: set[str] = set()
_entry_points_loaded = False


def _option_names(function: Scorer) -> frozenset[str]:
    parameters = inspect.signature(function).parameters.values()
    return frozenset(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)


def register(
    name: str, data_sources: Iterable[str], options: Iterable[str] | None = None
) -> Callable[[Scorer], Scorer]:
    """Decorator registering a scorer under ``name`` for each of ``data_sources``.

    ``options`` names the keywords the scorer accepts; by default its keyword-only parameters.
    Registering the same function again is a no-op; another function under a taken
    ``(data_source, name)`` raises :class:`ValueError`.

    Example:
        >>> @register("length_bonus", ["my_source"])  # doctest: +SKIP
        ... def length_bonus(solution_str, golds, *, scale=1.0):
        ...     return {"score": scale * min(len(solution_str), 100) / 100}
    """
    sources = [data_sources] if isinstance(data_sources, str) else list(data_sources)

    def decorator(function: Scorer) -> Scorer:
        registration = Registration(
            function, _option_names(function) if options is None else frozenset(options)
        )
        with _lock:
            for source in sources:
                existing = _scorers.get(source, {}).get(name)
                if existing is not None and existing.function is not function:
                    raise ValueError(
                        f"scorer {name!r} for data source {source!r} is already registered as "
                        f"{existing.function.__module__}.{existing.function.__qualname__}"
                    )
            for source in sources:
                _scorers.setdefault(source, {})[name] = registration
        return function

    return decorator


def _import_plugin(module: str) -> None:
    if module not in _loaded_modules:
        importlib.import_module(module)
        _loaded_modules.add(module)


def load_plugins() -> int:
    """Import every module named in the ``reward_plugins`` entry-point group.

    Returns:
        How many modules this call imported (0 when all were already loaded).

    Raises:
        ImportError: an entry point's module failed to import; the message names the entry point.
    """
    global _entry_points_loaded
    count = 0
    with _lock:
        for module in BUILTIN_PLUGINS:
            if module not in _loaded_modules:
                _import_plugin(module)
                count += 1
        for entry_point in entry_points(group=ENTRY_POINT_GROUP):
            if entry_point.value in _loaded_modules:
                continue
            try:
                _import_plugin(entry_point.value)
            except Exception as error:
                raise ImportError(
                    f"reward_plugins entry point {entry_point.name!r} "
                    f"({entry_point.value}) failed to import: {error}"
                ) from error
            count += 1
        _entry_points_loaded = True
    return count


def _ensure_builtins() -> None:
    if len(_loaded_modules) < len(BUILTIN_PLUGINS):
        with _lock:
            for module in BUILTIN_PLUGINS:
                _import_plugin(module)


def lookup(data_source: str, name: str) -> Registration:
    """The registration of scorer ``name`` for ``data_source``.

    Raises:
        UnknownDataSource: nothing is registered for ``data_source`` (after loading entry points),
            or ``data_source`` has no scorer called ``name``.
    """
    by_name = _scorers.get(data_source)
    if by_name is None:
        _ensure_builtins()
        by_name = _scorers.get(data_source)
        if by_name is None and not _entry_points_loaded:
            load_plugins()
            by_name = _scorers.get(data_source)
        if by_name is None:
            raise UnknownDataSource(_unknown_source_message(data_source))
    registration = by_name.get(name)
    if registration is None:
        raise UnknownDataSource(
            f"data source {data_source!r} has no scorer {name!r}; "
            f"its scorers: {', '.join(sorted(by_name))}"
        )
    return registration


def _unknown_source_message(data_source: object) -> str:
    known = sorted(_scorers)
    message = f"no scorer is registered for data_source={data_source!r}"
    if isinstance(data_source, str):
        close = difflib.get_close_matches(data_source, known, n=1, cutoff=0.5)
        if close:
            message += f"; did you mean {close[0]!r}?"
    return f"{message} Registered data sources: {', '.join(known) or '(none)'}"


def registered() -> Mapping[str, tuple[str, ...]]:
    """Read-only view: each registered data source and the names of its scorers, sorted."""
    _ensure_builtins()
    with _lock:
        return MappingProxyType({s: tuple(sorted(n)) for s, n in sorted(_scorers.items())})
