"""The one registry: ``(data_source, scorer name) -> Registration``, and the scorer contract.

A scorer is a function ``fn(response, ground_truth, *, option=default, ...)`` registered with
:func:`scorer`:

- its options are its keyword-only parameters; names, defaults and types are read once from the
  signature and every call's options are checked against them (see :mod:`reward_plugins.options`);
- with ``ground_truth="golds"`` (the default) it receives the gold answers as a tuple of ``str``
  (:func:`~reward_plugins.groundtruth.coerce_golds`); with ``"raw"`` the ground truth as given,
  as a read-only view;
- declaring the keyword ``extra_info`` or ``data_source`` receives them (``extra_info`` as a
  read-only view: verl shares one dict across a GRPO group and mutates it);
- it returns a number or a mapping of numbers holding ``score``; a number ``x`` becomes
  ``{"score": x}``, and the key set must be the same on every call with the same options;
- it may be ``async def``: verl's reward loop awaits it, synchronous callers run it in an event
  loop of their own.

Registrations come from imports: the built-in plugins, and modules named by the entry-point
group ``reward_plugins`` of any installed distribution. An entry point that fails to import is
logged once and recorded (:func:`broken_plugins`); everything else keeps working. A lookup that
misses loads the built-ins and, at most once per process, the entry points, then looks again.

The registrations live in a :class:`Registry` object; :data:`REGISTRY` is the package's one
instance, and the module-level functions here (:func:`lookup`, :func:`scorer`,
:func:`registrations`, ...) act on it. :meth:`Registry.snapshot` and :meth:`Registry.restore`
save and put back its whole state (tests: :mod:`reward_plugins.testing`).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import inspect
import keyword
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import Any

from reward_plugins.errors import PluginError, UnknownDataSource, UnknownScorer
from reward_plugins.options import Declaration, OptionSpec, declared_options, option_specs
from reward_plugins.registration import CONTEXT_KEYWORDS as CONTEXT_KEYWORDS
from reward_plugins.registration import Bound as Bound
from reward_plugins.registration import GroundTruthMode as GroundTruthMode
from reward_plugins.registration import Registration as Registration
from reward_plugins.registration import Result as Result
from reward_plugins.registration import Validator as Validator
from reward_plugins.registration import read_only as read_only
from reward_plugins.registration import run_coroutine as run_coroutine
from reward_plugins.results import SCORE_ONLY, SchemaSource, check_schema

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "reward_plugins"
BUILTIN_PLUGINS: tuple[str, ...] = (
    "reward_plugins.plugins.search_r1",
    "reward_plugins.plugins.composed",
    "reward_plugins.plugins.shaping",
    "reward_plugins.plugins.tool_agent",
)
WILDCARD = "*"
"""``data_sources="*"``: the scorer serves every data source, after exact registrations."""


@dataclass(frozen=True)
class BrokenPlugin:
    """An entry point whose module failed to import (or broke the contract while importing)."""

    entry_point: str
    module: str
    distribution: str
    error: str

    def describe(self) -> str:
        return (
            f"entry point {self.entry_point!r} ({self.module}) of distribution "
            f"{self.distribution!r} failed to load: {self.error}"
        )


@dataclass(frozen=True)
class RegistrySnapshot:
    """The whole state of a :class:`Registry` at one moment (:meth:`Registry.snapshot`).

    ``dataclasses.replace(snapshot, entry_points_loaded=False)`` restores a registry that loads
    the entry points again on its next lookup miss, as a fresh process does.
    """

    scorers: Mapping[str, Mapping[str, Registration]]
    loaded_modules: frozenset[str]
    entry_points_loaded: bool
    broken: Mapping[str, BrokenPlugin]


class Registry:
    """``(data_source, scorer name) -> Registration``, filled by imports of plugin modules.

    Thread-safe: lookups read a table that is replaced, never edited in place, so they need no
    lock and always see whole registrations. :data:`REGISTRY` is the package's instance.
    """

    def __init__(
        self,
        builtin_plugins: tuple[str, ...] = BUILTIN_PLUGINS,
        entry_point_group: str = ENTRY_POINT_GROUP,
    ) -> None:
        self.builtin_plugins = builtin_plugins
        self.entry_point_group = entry_point_group
        self._lock = threading.RLock()
        """Guards writes to the tables below; never held across an import."""
        self._load_lock = threading.RLock()
        """Serializes plugin loading; held across imports (an import never waits for
        :attr:`_lock` holders that wait for it)."""
        self._scorers: dict[str, dict[str, Registration]] = {}
        self._loaded_modules: set[str] = set()
        self._broken: dict[str, BrokenPlugin] = {}
        self._entry_points_loaded = False
        self._importing = threading.local()
        """``origin``: the entry point this thread imports; ``made``: what it registered."""

    # ------------------------------------------------------------------------ registration

    def scorer(
        self,
        name: str,
        data_sources: str | Iterable[str],
        *,
        ground_truth: GroundTruthMode = "golds",
        validate: Validator | None = None,
        results: SchemaSource = SCORE_ONLY,
        options: Declaration | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """The decorator :func:`reward_plugins.registry.scorer`, registering here."""
        sources = (data_sources,) if isinstance(data_sources, str) else tuple(data_sources)
        if ground_truth not in ("golds", "raw"):
            raise PluginError(f"scorer {name!r}: ground_truth must be 'golds' or 'raw'")
        _check_name(name)

        def decorator(function: Callable[..., Any]) -> Callable[..., Any]:
            checked = results if callable(results) else check_schema(f"scorer {name!r}", results)
            registration = Registration(
                name=name,
                function=function,
                data_sources=sources,
                ground_truth=ground_truth,
                options=MappingProxyType(
                    dict(_options_of(name, function, options or _attached(function)))
                ),
                context=_context_of(function),
                is_async=inspect.iscoroutinefunction(function),
                origin=getattr(self._importing, "origin", None) or function.__module__,
                validate=validate,
                results=checked,
            )
            self.add(registration)
            return function

        return decorator

    def add(self, registration: Registration) -> None:
        """Add ``registration`` for each of its data sources, or none of them on a clash.

        Raises:
            PluginError: another function already holds ``(data_source, name)``.
        """
        with self._lock:
            for source in registration.data_sources:
                existing = self._scorers.get(source, {}).get(registration.name)
                if existing is not None and existing.function is not registration.function:
                    raise PluginError(
                        f"scorer {registration.name!r} for data source {source!r} is claimed "
                        f"twice: by {existing.qualified_name} (from {existing.origin}) and by "
                        f"{registration.qualified_name} (from {registration.origin})"
                    )
            for source in registration.data_sources:
                by_name = self._scorers.get(source, {})
                if registration.name not in by_name:
                    self._scorers[source] = {**by_name, registration.name: registration}
                    made = getattr(self._importing, "made", None)
                    if made is not None:
                        made.append((source, registration))

    def _withdraw(self, made: list[tuple[str, Registration]]) -> None:
        with self._lock:
            for source, registration in made:
                by_name = dict(self._scorers.get(source, {}))
                if by_name.get(registration.name) is registration:
                    del by_name[registration.name]
                    self._scorers[source] = by_name
                if not self._scorers.get(source):
                    self._scorers.pop(source, None)

    # ----------------------------------------------------------------------------- loading

    def import_plugin(self, module: str, origin: str | None = None) -> None:
        """Import a plugin module (once); on failure, withdraw whatever it registered."""
        if module in self._loaded_modules:
            return
        self._importing.origin, self._importing.made = origin, []
        try:
            importlib.import_module(module)
        except BaseException:
            self._withdraw(self._importing.made)
            raise
        finally:
            self._importing.origin, self._importing.made = None, None
        self._loaded_modules.add(module)

    def load_plugins(self) -> int:
        """Import the built-in plugins and every module of the entry-point group.

        A module that fails to import is logged once (WARNING) and recorded in
        :meth:`broken_plugins`; its registrations are rolled back, and everything else loads.

        Returns:
            How many modules this call imported (0 when all were already loaded).
        """
        count = 0
        with self._load_lock:
            for module in self.builtin_plugins:
                if module not in self._loaded_modules:
                    self.import_plugin(module)
                    count += 1
            for entry_point in entry_points(group=self.entry_point_group):
                if entry_point.value in self._loaded_modules or entry_point.name in self._broken:
                    continue
                dist = entry_point.dist.name if entry_point.dist is not None else "unknown"
                origin = f"entry point {entry_point.name!r} of distribution {dist!r}"
                try:
                    self.import_plugin(entry_point.value, origin)
                except Exception as error:
                    broken = BrokenPlugin(entry_point.name, entry_point.value, dist, str(error))
                    self._broken[entry_point.name] = broken
                    logger.warning("reward_plugins: %s", broken.describe())
                    continue
                count += 1
            self._entry_points_loaded = True
        return count

    def broken_plugins(self) -> tuple[BrokenPlugin, ...]:
        """The entry points that failed to load."""
        return tuple(self._broken.values())

    def _load_all(self) -> None:
        with self._load_lock:
            loaded_builtins = len(self._loaded_modules) >= len(self.builtin_plugins)
            if not self._entry_points_loaded or not loaded_builtins:
                self.load_plugins()

    # ------------------------------------------------------------------------------ lookup

    def lookup(self, data_source: str, name: str) -> Registration:
        """The registration of scorer ``name`` for ``data_source`` (exact, then ``"*"``).

        Raises:
            UnknownDataSource: ``data_source`` is not a string, or nothing serves it.
            UnknownScorer: no scorer called ``name`` serves ``data_source`` (the message
                suggests the closest registered name).
        """
        try:
            return self._scorers[data_source][name]
        except (KeyError, TypeError):
            return self._lookup_slow(data_source, name)

    def _lookup_slow(self, data_source: Any, name: str) -> Registration:
        if not isinstance(data_source, str):
            raise UnknownDataSource(
                f"data_source must be a str, got {type(data_source).__name__}: {data_source!r:.80}"
            )
        self._load_all()  # waits for an import in progress in another thread
        scorers = self._scorers
        registration = scorers.get(data_source, {}).get(name)
        if registration is None:
            registration = scorers.get(WILDCARD, {}).get(name)
        if registration is not None:
            return registration
        if not any(name in by_name for by_name in scorers.values()):
            raise UnknownScorer(self._unknown_scorer_message(name))
        if data_source not in scorers:
            raise UnknownDataSource(self._unknown_source_message(data_source))
        raise UnknownScorer(
            f"data source {data_source!r} has no scorer {name!r}; its scorers: "
            f"{', '.join(sorted(scorers[data_source]))}"
        )

    def registrations_named(self, name: str) -> tuple[Registration, ...]:
        """Every distinct registration called ``name``, over all data sources.

        Raises:
            UnknownScorer: no scorer has that name.
        """
        self._load_all()
        found: dict[int, Registration] = {}
        for by_name in self._scorers.values():
            registration = by_name.get(name)
            if registration is not None:
                found.setdefault(id(registration), registration)
        if not found:
            raise UnknownScorer(self._unknown_scorer_message(name))
        return tuple(found.values())

    def scorer_names(self) -> tuple[str, ...]:
        """Every registered scorer name, sorted."""
        self._load_all()
        return tuple(sorted({name for by_name in self._scorers.values() for name in by_name}))

    def registered(self) -> Mapping[str, tuple[str, ...]]:
        """Read-only view: each registered data source (``*`` for all) and its scorer names."""
        self._load_all()
        with self._lock:
            items = sorted(self._scorers.items())
            return MappingProxyType({source: tuple(sorted(names)) for source, names in items})

    def registrations(self) -> tuple[Registration, ...]:
        """Every distinct registration, ordered by scorer name, then origin."""
        self._load_all()
        unique = {id(r): r for by_name in self._scorers.values() for r in by_name.values()}
        return tuple(sorted(unique.values(), key=lambda r: (r.name, r.origin)))

    def _unknown_scorer_message(self, name: object) -> str:
        names = sorted({n for by_name in self._scorers.values() for n in by_name})
        message = f"no scorer is registered as {name!r}."
        if isinstance(name, str):
            close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
            if close:
                message = f"{message[:-1]}; did you mean {close[0]!r}?"
        return f"{message} Registered scorers: {', '.join(names) or '(none)'}{self._broken_note()}"

    def _unknown_source_message(self, data_source: str) -> str:
        known = sorted(s for s in self._scorers if s != WILDCARD)
        message = f"no scorer is registered for data_source={data_source!r}"
        close = difflib.get_close_matches(data_source, known, n=1, cutoff=0.5)
        message += f"; did you mean {close[0]!r}?" if close else "."
        listed = ", ".join(known) or "(none)"
        return f"{message} Registered data sources: {listed}{self._broken_note()}"

    def _broken_note(self) -> str:
        if not self._broken:
            return ""
        return ". Not loaded, so their data sources are unknown: " + "; ".join(
            broken.describe() for broken in self._broken.values()
        )

    # ------------------------------------------------------------------- snapshot, restore

    def snapshot(self) -> RegistrySnapshot:
        """The registry's whole state: registrations, loaded modules, entry-point state and
        broken plugins. The built-in plugins are loaded first, so they are part of it."""
        self._load_all()
        with self._load_lock, self._lock:
            return RegistrySnapshot(
                scorers=MappingProxyType({s: dict(n) for s, n in self._scorers.items()}),
                loaded_modules=frozenset(self._loaded_modules),
                entry_points_loaded=self._entry_points_loaded,
                broken=MappingProxyType(dict(self._broken)),
            )

    def restore(self, snapshot: RegistrySnapshot) -> None:
        """Put the registry back in the state ``snapshot`` recorded."""
        with self._load_lock, self._lock:
            self._scorers = {source: dict(by_name) for source, by_name in snapshot.scorers.items()}
            self._loaded_modules = set(snapshot.loaded_modules)
            self._entry_points_loaded = snapshot.entry_points_loaded
            self._broken = dict(snapshot.broken)

    @contextlib.contextmanager
    def preserved(self) -> Iterator[RegistrySnapshot]:
        """``with registry.preserved():`` the block's registrations are undone afterwards."""
        saved = self.snapshot()
        try:
            yield saved
        finally:
            self.restore(saved)


REGISTRY = Registry()
"""The package's registry: the built-in plugins and the ``reward_plugins`` entry points."""


# -------------------------------------------------------------------- reading a signature


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise PluginError(f"scorer name must be a Python identifier, got {name!r}")
    if name.startswith("_"):
        raise PluginError(f"scorer name {name!r} must not start with '_'")
    if name in _reserved_names():
        raise PluginError(
            f"scorer name {name!r} is taken by the reward_plugins package itself; choose another"
        )


def _reserved_names() -> frozenset[str]:
    """Public attributes and submodules of ``reward_plugins`` that are not routers."""
    import pkgutil
    import sys

    package = sys.modules.get("reward_plugins")
    if package is None:
        return frozenset()
    names = {m.name for m in pkgutil.iter_modules(package.__path__)}
    names.update(
        attribute
        for attribute, value in vars(package).items()
        if not getattr(value, "__reward_plugins_router__", False)
    )
    return frozenset(names)


def _options_of(
    name: str, function: Callable[..., Any], declaration: Declaration | None
) -> Mapping[str, OptionSpec]:
    """The options of a scorer: its ``declaration``, or else its keyword-only parameters.

    Raises:
        PluginError: the signature breaks the contract (two positional parameters, options as
            keyword-only parameters; ``**options`` only with a declaration, whose fields hold
            every keyword-only parameter), or an annotation cannot be checked.
    """
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError) as error:
        raise PluginError(f"scorer {name!r}: no readable signature ({error})") from None
    positional = [
        p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    variadic = [p.name for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD]
    if len(positional) != 2 or (variadic and declaration is None):
        raise PluginError(
            f"scorer {name!r} ({function.__module__}.{function.__qualname__}) must take "
            "(response, ground_truth, *, option=default, ...): two positional parameters, "
            "options as keyword-only parameters, no **kwargs"
        )
    try:
        if declaration is None:
            return option_specs(function, skip=CONTEXT_KEYWORDS)
        specs = declared_options(declaration)
    except (TypeError, NameError) as error:
        raise PluginError(f"scorer {name!r}: {error}") from None
    undeclared = [
        p.name
        for p in parameters
        if p.kind is inspect.Parameter.KEYWORD_ONLY
        and p.name not in specs
        and p.name not in CONTEXT_KEYWORDS
    ]
    if undeclared:
        raise PluginError(
            f"scorer {name!r}: keyword-only parameter(s) {', '.join(undeclared)} are not "
            f"fields of its options declaration {declaration.__qualname__}"
        )
    differing = [
        p.name
        for p in parameters
        if p.name in specs
        and p.kind is inspect.Parameter.KEYWORD_ONLY
        and p.default is not specs[p.name].default
        and p.default != specs[p.name].default
    ]
    if differing:
        raise PluginError(
            f"scorer {name!r}: the default of parameter(s) {', '.join(differing)} differs "
            f"from its options declaration {declaration.__qualname__}"
        )
    return specs


def _attached(function: Callable[..., Any]) -> Declaration | None:
    """The declaration the deprecated ``qa_core.with_options`` attached, if any."""
    return getattr(function, "__reward_plugins_options__", None)


def _context_of(function: Callable[..., Any]) -> frozenset[str]:
    parameters = inspect.signature(function).parameters
    return frozenset(
        n
        for n in CONTEXT_KEYWORDS
        if n in parameters and parameters[n].kind is inspect.Parameter.KEYWORD_ONLY
    )


# ------------------------------------------------------------- the default registry's API


def scorer(
    name: str,
    data_sources: str | Iterable[str],
    *,
    ground_truth: GroundTruthMode = "golds",
    validate: Validator | None = None,
    results: SchemaSource = SCORE_ONLY,
    options: Declaration | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register a scorer under ``name`` for ``data_sources`` (``"*"`` for all).

    Args:
        name: the scorer's name, an identifier: verl reaches it as
            ``custom_reward_function.name``, i.e. as the attribute ``reward_plugins.<name>``.
        data_sources: one data source, several, or ``"*"`` (every data source, looked up after
            exact matches).
        ground_truth: ``"golds"`` (a tuple of gold strings) or ``"raw"`` (the ground truth as
            given, read-only).
        validate: called once per option set with every option (defaults filled in); raises
            :class:`~reward_plugins.errors.InvalidOption` (or ``ValueError``) to refuse it.
        results: the result schema, a tuple of :class:`~reward_plugins.results.ResultKey`, or
            a function of the options (defaults filled in) returning one; by default
            ``score`` alone. The summary, the report and ``compare`` read it.
        options: the scorer's options declaration (:mod:`reward_plugins.options`: a frozen
            dataclass whose fields are the options), for a scorer written as
            ``(response, ground_truth, **options)``; by default the options are the
            function's keyword-only parameters.

    Returns the function unchanged. Registering the same function again is a no-op.

    Raises:
        PluginError: ``name`` is not a usable name, the function's signature breaks the
            contract, or another function already holds ``(data_source, name)``.

    Example:
        >>> from reward_plugins import scorer
        >>> @scorer("length_bonus", "my_source")
        ... def length_bonus(response: str, golds: tuple[str, ...], *, scale: float = 1.0):
        ...     return scale * min(len(response), 100) / 100
    """
    return REGISTRY.scorer(
        name,
        data_sources,
        ground_truth=ground_truth,
        validate=validate,
        results=results,
        options=options,
    )


register = scorer
"""The older name of :func:`scorer`."""


def load_plugins() -> int:
    """:meth:`Registry.load_plugins` of :data:`REGISTRY`."""
    return REGISTRY.load_plugins()


def broken_plugins() -> tuple[BrokenPlugin, ...]:
    """The entry points that failed to load in this process."""
    return REGISTRY.broken_plugins()


def lookup(data_source: str, name: str) -> Registration:
    """:meth:`Registry.lookup` of :data:`REGISTRY`."""
    return REGISTRY.lookup(data_source, name)


def registrations_named(name: str) -> tuple[Registration, ...]:
    """:meth:`Registry.registrations_named` of :data:`REGISTRY`."""
    return REGISTRY.registrations_named(name)


def scorer_names() -> tuple[str, ...]:
    """Every registered scorer name, sorted."""
    return REGISTRY.scorer_names()


def registered() -> Mapping[str, tuple[str, ...]]:
    """Read-only view: each registered data source (``*`` for all) and its scorer names."""
    return REGISTRY.registered()


def registrations() -> tuple[Registration, ...]:
    """Every distinct registration, ordered by scorer name, then origin."""
    return REGISTRY.registrations()
