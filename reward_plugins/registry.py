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
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import difflib
import importlib
import inspect
import keyword
import logging
import math
import numbers
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import Any, Literal

from reward_plugins.cache import BOUND_OPTION_SETS, BoundedCache
from reward_plugins.errors import (
    InvalidInput,
    InvalidOption,
    PluginError,
    UnknownDataSource,
    UnknownScorer,
)
from reward_plugins.groundtruth import coerce_golds
from reward_plugins.options import (
    FrozenList,
    OptionSpec,
    check_options,
    describe_value,
    freeze,
    is_finite_number,
    option_specs,
)
from reward_plugins.results import SCORE_ONLY, Schema, SchemaSource, check_schema

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

GroundTruthMode = Literal["golds", "raw"]
CONTEXT_KEYWORDS = frozenset({"extra_info", "data_source"})
"""Keyword-only parameters that receive the call's context instead of being options."""

Validator = Callable[[Mapping[str, Any]], None]
Result = dict[str, Any]


@dataclass(eq=False)
class Registration:
    """A registered scorer: its function, what it receives, its options and where it came from."""

    name: str
    function: Callable[..., Any]
    data_sources: tuple[str, ...]
    ground_truth: GroundTruthMode
    options: Mapping[str, OptionSpec]
    context: frozenset[str]
    """Which of :data:`CONTEXT_KEYWORDS` the function declares."""
    is_async: bool
    origin: str
    """The module, and the entry point and distribution when loaded through one."""
    validate: Validator | None = None
    results: SchemaSource = SCORE_ONLY
    """The result schema (:mod:`reward_plugins.results`), or a function of the options giving
    it; read through :attr:`Bound.results`."""
    default: Bound | None = field(default=None, repr=False)
    """The scorer bound without options, once a call has made it."""
    _bound: BoundedCache[Any, Bound] = field(
        default_factory=lambda: BoundedCache(BOUND_OPTION_SETS), repr=False
    )
    """The scorer bound with each other option set, by :func:`~reward_plugins.options.freeze`."""

    @property
    def qualified_name(self) -> str:
        return f"{self.function.__module__}.{self.function.__qualname__}"

    def bind(self, options: Mapping[str, Any]) -> Bound:
        """The scorer with ``options`` checked, cached by the option set.

        Raises:
            InvalidOption: an unknown option, a missing required one, or a value that the
                option's type, range or the scorer's own validator refuses.
        """
        key = None
        if not options:
            if self.default is not None:
                return self.default
        else:
            try:
                key = freeze(options)
                bound = self._bound.get(key)
            except TypeError:  # an unhashable value: check it every time
                key, bound = None, None
            if bound is not None:
                return bound
        check_options(self.name, self.options, options)
        if self.validate is not None:
            merged = {n: s.default for n, s in self.options.items() if not s.required}
            merged.update(options)
            try:
                self.validate(merged)
            except (TypeError, ValueError, LookupError) as error:
                message = str(error)
                if not message.startswith(f"{self.name}:"):
                    message = f"{self.name}: {message}"
                raise InvalidOption(message) from None
        bound = Bound(self, copy.deepcopy(dict(options)))  # a later edit cannot reach it
        if not options:
            self.default = bound
        elif key is not None:
            self._bound[key] = bound
        return bound


class Bound:
    """A registration with one checked option set: calls the scorer and shapes its result."""

    __slots__ = ("_results", "keys", "options", "plain", "registration")

    def __init__(self, registration: Registration, options: dict[str, Any]) -> None:
        self.registration = registration
        self.options = options
        self.keys: tuple[str, ...] | None = None
        """The key set of the first result; every later result must have the same."""
        self.plain = (
            registration.ground_truth == "golds"
            and not registration.context
            and not registration.is_async
        )
        """Golds, no context keywords, synchronous: the common case, called directly."""
        self._results: Schema | None = None

    @property
    def results(self) -> Schema:
        """The result schema of the scorer with these options (computed once).

        Raises:
            PluginError: the registration's schema, or its schema function, breaks the
                contract of :func:`reward_plugins.results.check_schema`.
        """
        if self._results is None:
            declared = self.registration.results
            if callable(declared):
                options = self.registration.options
                merged = {n: spec.default for n, spec in options.items() if not spec.required}
                merged.update(self.options)
                declared = declared(merged)
            self._results = check_schema(f"scorer {self.registration.name!r}", declared)
        return self._results

    def _arguments(
        self, ground_truth: Any, data_source: str, extra_info: Mapping[str, Any] | None
    ) -> tuple[Any, dict[str, Any]]:
        """The ground truth and keyword arguments the scorer receives: its golds (or the raw
        ground truth, read-only), its options and the context keywords it declares.

        Raises:
            InvalidGroundTruth: golds that :func:`~reward_plugins.groundtruth.coerce_golds`
                refuses.
            InvalidInput: the scorer declares ``extra_info`` and the caller's is neither a
                mapping nor ``None`` (the message names the scorer and the caller's type).
        """
        registration = self.registration
        if registration.ground_truth == "golds":
            truth = coerce_golds(ground_truth, data_source)
        else:
            truth = read_only(ground_truth)
        if not registration.context:
            return truth, self.options
        options = dict(self.options)
        if "data_source" in registration.context:
            options["data_source"] = data_source
        if "extra_info" in registration.context:
            if extra_info is not None and not isinstance(extra_info, Mapping):
                raise InvalidInput(
                    f"{registration.name}: extra_info must be a mapping, got "
                    f"{type(extra_info).__name__} (None means no extra_info)"
                )
            options["extra_info"] = read_only({} if extra_info is None else extra_info)
        return truth, options

    def __call__(
        self,
        response: str,
        ground_truth: Any,
        data_source: str,
        extra_info: Mapping[str, Any] | None = None,
    ) -> Result:
        """Score one response; a coroutine scorer runs to completion in an event loop."""
        if self.plain:
            golds = coerce_golds(ground_truth, data_source)
            if self.options:
                return self.shape(self.registration.function(response, golds, **self.options))
            return self.shape(self.registration.function(response, golds))
        truth, options = self._arguments(ground_truth, data_source, extra_info)
        result = self.registration.function(response, truth, **options)
        if self.registration.is_async:
            result = run_coroutine(result)
        return self.shape(result)

    async def call_async(
        self,
        response: str,
        ground_truth: Any,
        data_source: str,
        extra_info: Mapping[str, Any] | None = None,
    ) -> Result:
        """Score one response from a running event loop (a sync scorer runs in a thread)."""
        if not self.registration.is_async:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                None, self.__call__, response, ground_truth, data_source, extra_info
            )
        truth, options = self._arguments(ground_truth, data_source, extra_info)
        return self.shape(await self.registration.function(response, truth, **options))

    def shape(self, result: Any) -> Result:
        """The result as a dict with ``score``, every value a finite number, the key set fixed.

        Raises:
            PluginError: the scorer returned something else, or other keys than before.
        """
        keys = self.keys
        if type(result) is not dict or keys is None or tuple(result) != keys:
            result = self._first_or_unusual(result)
        try:  # one pass in C: refuses anything that is not a number, and sums NaN or inf to NaN/inf
            if math.isfinite(math.fsum(result.values())):
                return result
        except (TypeError, ValueError, OverflowError):
            pass
        self._check_values(result)  # raises, naming the key (or accepts an fsum overflow)
        return result

    def _first_or_unusual(self, result: Any) -> Result:
        """A number or non-dict result made a dict; the first key set recorded; another key set
        refused (the same keys in another order are accepted)."""
        if type(result) is float or type(result) is int:
            result = {"score": result}
        elif type(result) is not dict:
            result = self._coerce(result)
        if self.keys is None:
            self._check_values(result)
            self.keys = tuple(result)
        elif result.keys() != set(self.keys):
            raise PluginError(
                f"scorer {self.registration.name!r} ({self.registration.qualified_name}) "
                f"returned keys {sorted(result)}, but its first result with the same options "
                f"had keys {sorted(self.keys)}: verl needs the same keys on every sample"
            )
        return result

    def _coerce(self, result: Any) -> Result:
        if isinstance(result, numbers.Real) and not isinstance(result, bool):
            return {"score": result}
        if isinstance(result, Mapping):
            return dict(result)
        raise PluginError(
            f"scorer {self.registration.name!r} ({self.registration.qualified_name}) must "
            f"return a number or a mapping with 'score', got {type(result).__name__}"
        )

    def _check_values(self, result: Result) -> None:
        name = f"scorer {self.registration.name!r} ({self.registration.qualified_name})"
        if "score" not in result:
            raise PluginError(f"{name} returned a mapping without 'score': keys {sorted(result)}")
        for key, value in result.items():
            if not isinstance(value, numbers.Real):
                raise PluginError(
                    f"{name} returned {key}={value!r:.60} ({type(value).__name__}); result "
                    "values must be numbers (verl averages them)"
                )
            if not isinstance(value, bool) and not is_finite_number(value):  # NaN, inf, 10**400
                shown = describe_value(value) if isinstance(value, numbers.Integral) else value
                raise PluginError(f"{name} returned a non-finite {key} {shown!s}")


def read_only(value: Any) -> Any:
    """A read-only view of ``value``: mappings become ``MappingProxyType`` over a copy, lists
    :class:`~reward_plugins.options.FrozenList` (a tuple that messages name ``list``), tuples
    tuples, sets frozensets, numpy arrays non-writeable views, all the way down."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: read_only(item) for key, item in value.items()})
    if isinstance(value, (list, FrozenList)):
        return FrozenList(read_only(item) for item in value)
    if isinstance(value, tuple):
        return tuple(read_only(item) for item in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    if type(value).__name__ == "ndarray":
        view = value.view()
        view.flags.writeable = False
        return view
    return value


def run_coroutine(coroutine: Awaitable[Any]) -> Any:
    """Run ``coroutine`` to completion from synchronous code, even inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(coroutine))
    with concurrent.futures.ThreadPoolExecutor(1) as executor:
        return executor.submit(asyncio.run, _await(coroutine)).result()


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


# ---------------------------------------------------------------------------- registration


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


_lock = threading.RLock()
"""Guards writes to the tables below; never held across an import."""
_load_lock = threading.RLock()
"""Serializes plugin loading; held across imports (an import never waits for :data:`_lock`
holders that wait for it)."""
_scorers: dict[str, dict[str, Registration]] = {}
"""Replaced, never edited in place, so a lookup without the lock sees whole registrations."""
_loaded_modules: set[str] = set()
_broken: dict[str, BrokenPlugin] = {}
_entry_points_loaded = False
_importing = threading.local()
"""``origin``: the entry point this thread is importing; ``made``: what that import registered."""


def scorer(
    name: str,
    data_sources: str | Iterable[str],
    *,
    ground_truth: GroundTruthMode = "golds",
    validate: Validator | None = None,
    results: SchemaSource = SCORE_ONLY,
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
    sources = (data_sources,) if isinstance(data_sources, str) else tuple(data_sources)
    if ground_truth not in ("golds", "raw"):
        raise PluginError(f"scorer {name!r}: ground_truth must be 'golds' or 'raw'")
    _check_name(name)

    def decorator(function: Callable[..., Any]) -> Callable[..., Any]:
        registration = Registration(
            name=name,
            function=function,
            data_sources=sources,
            ground_truth=ground_truth,
            options=MappingProxyType(_options_of(name, function)),
            context=_context_of(function),
            is_async=inspect.iscoroutinefunction(function),
            origin=getattr(_importing, "origin", None) or function.__module__,
            validate=validate,
            results=results if callable(results) else check_schema(f"scorer {name!r}", results),
        )
        _publish(registration)
        return function

    return decorator


register = scorer
"""The older name of :func:`scorer`."""


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


def _options_of(name: str, function: Callable[..., Any]) -> dict[str, OptionSpec]:
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
    if len(positional) != 2 or variadic:
        raise PluginError(
            f"scorer {name!r} ({function.__module__}.{function.__qualname__}) must take "
            "(response, ground_truth, *, option=default, ...): two positional parameters, "
            "options as keyword-only parameters, no **kwargs"
        )
    try:
        return option_specs(function, skip=CONTEXT_KEYWORDS)
    except (TypeError, NameError) as error:
        raise PluginError(f"scorer {name!r}: {error}") from None


def _context_of(function: Callable[..., Any]) -> frozenset[str]:
    parameters = inspect.signature(function).parameters
    return frozenset(
        n
        for n in CONTEXT_KEYWORDS
        if n in parameters and parameters[n].kind is inspect.Parameter.KEYWORD_ONLY
    )


def _publish(registration: Registration) -> None:
    """Add ``registration`` for each of its data sources, or none of them on a clash."""
    with _lock:
        for source in registration.data_sources:
            existing = _scorers.get(source, {}).get(registration.name)
            if existing is not None and existing.function is not registration.function:
                raise PluginError(
                    f"scorer {registration.name!r} for data source {source!r} is claimed twice: "
                    f"by {existing.qualified_name} (from {existing.origin}) and by "
                    f"{registration.qualified_name} (from {registration.origin})"
                )
        for source in registration.data_sources:
            by_name = _scorers.get(source, {})
            if registration.name not in by_name:
                _scorers[source] = {**by_name, registration.name: registration}
                made = getattr(_importing, "made", None)
                if made is not None:
                    made.append((source, registration))


def _import_plugin(module: str, origin: str | None = None) -> None:
    """Import a plugin module; on failure, withdraw whatever it registered."""
    if module in _loaded_modules:
        return
    _importing.origin, _importing.made = origin, []
    try:
        importlib.import_module(module)
    except BaseException:
        with _lock:
            for source, registration in _importing.made:
                by_name = dict(_scorers.get(source, {}))
                name = registration.name
                if by_name.get(name) is registration:
                    del by_name[name]
                    _scorers[source] = by_name
                if not _scorers.get(source):
                    _scorers.pop(source, None)
        raise
    finally:
        _importing.origin, _importing.made = None, None
    _loaded_modules.add(module)


def load_plugins() -> int:
    """Import the built-in plugins and every module of the ``reward_plugins`` entry points.

    A module that fails to import is logged once (WARNING) and recorded in
    :func:`broken_plugins`; its registrations are rolled back, and everything else loads.

    Returns:
        How many modules this call imported (0 when all were already loaded).
    """
    global _entry_points_loaded
    count = 0
    with _load_lock:
        for module in BUILTIN_PLUGINS:
            if module not in _loaded_modules:
                _import_plugin(module)
                count += 1
        for entry_point in entry_points(group=ENTRY_POINT_GROUP):
            if entry_point.value in _loaded_modules or entry_point.name in _broken:
                continue
            distribution = entry_point.dist.name if entry_point.dist is not None else "unknown"
            origin = f"entry point {entry_point.name!r} of distribution {distribution!r}"
            try:
                _import_plugin(entry_point.value, origin)
            except Exception as error:
                broken = BrokenPlugin(entry_point.name, entry_point.value, distribution, str(error))
                _broken[entry_point.name] = broken
                logger.warning("reward_plugins: %s", broken.describe())
                continue
            count += 1
        _entry_points_loaded = True
    return count


def broken_plugins() -> tuple[BrokenPlugin, ...]:
    """The entry points that failed to load in this process."""
    return tuple(_broken.values())


def _load_all() -> None:
    with _load_lock:
        if not _entry_points_loaded or len(_loaded_modules) < len(BUILTIN_PLUGINS):
            load_plugins()


# ---------------------------------------------------------------------------------- lookup


def lookup(data_source: str, name: str) -> Registration:
    """The registration of scorer ``name`` for ``data_source`` (exact, then ``"*"``).

    Raises:
        UnknownDataSource: ``data_source`` is not a string, or nothing is registered for it.
        UnknownScorer: no scorer called ``name`` serves ``data_source``.
    """
    try:
        return _scorers[data_source][name]
    except (KeyError, TypeError):
        return _lookup_slow(data_source, name)


def _lookup_slow(data_source: Any, name: str) -> Registration:
    if not isinstance(data_source, str):
        raise UnknownDataSource(
            f"data_source must be a str, got {type(data_source).__name__}: {data_source!r:.80}"
        )
    _load_all()  # waits for any import in progress in another thread: registrations are whole
    registration = _scorers.get(data_source, {}).get(name)
    if registration is None:
        registration = _scorers.get(WILDCARD, {}).get(name)
    if registration is not None:
        return registration
    if not any(name in by_name for by_name in _scorers.values()):
        raise UnknownScorer(_unknown_scorer_message(name))
    if data_source not in _scorers:
        raise UnknownDataSource(_unknown_source_message(data_source))
    raise UnknownScorer(
        f"data source {data_source!r} has no scorer {name!r}; its scorers: "
        f"{', '.join(sorted(_scorers[data_source]))}"
    )


def registrations_named(name: str) -> tuple[Registration, ...]:
    """Every distinct registration called ``name``, over all data sources.

    Raises:
        UnknownScorer: no scorer has that name.
    """
    _load_all()
    found: dict[int, Registration] = {}
    for by_name in _scorers.values():
        registration = by_name.get(name)
        if registration is not None:
            found.setdefault(id(registration), registration)
    if not found:
        raise UnknownScorer(_unknown_scorer_message(name))
    return tuple(found.values())


def scorer_names() -> tuple[str, ...]:
    """Every registered scorer name, sorted."""
    _load_all()
    return tuple(sorted({name for by_name in _scorers.values() for name in by_name}))


def _unknown_scorer_message(name: object) -> str:
    names = sorted({n for by_name in _scorers.values() for n in by_name})
    message = f"no scorer is registered as {name!r}."
    if isinstance(name, str):
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        if close:
            message = f"{message[:-1]}; did you mean {close[0]!r}?"
    return f"{message} Registered scorers: {', '.join(names) or '(none)'}{_broken_note()}"


def _unknown_source_message(data_source: str) -> str:
    known = sorted(s for s in _scorers if s != WILDCARD)
    message = f"no scorer is registered for data_source={data_source!r}"
    close = difflib.get_close_matches(data_source, known, n=1, cutoff=0.5)
    message += f"; did you mean {close[0]!r}?" if close else "."
    return f"{message} Registered data sources: {', '.join(known) or '(none)'}{_broken_note()}"


def _broken_note() -> str:
    if not _broken:
        return ""
    return ". Not loaded, so their data sources are unknown: " + "; ".join(
        broken.describe() for broken in _broken.values()
    )


def registered() -> Mapping[str, tuple[str, ...]]:
    """Read-only view: each registered data source (``*`` for all) and its scorer names."""
    _load_all()
    with _lock:
        return MappingProxyType({s: tuple(sorted(n)) for s, n in sorted(_scorers.items())})


def registrations() -> tuple[Registration, ...]:
    """Every distinct registration, ordered by scorer name, then origin."""
    _load_all()
    unique = {id(r): r for by_name in _scorers.values() for r in by_name.values()}
    return tuple(sorted(unique.values(), key=lambda r: (r.name, r.origin)))
