"""A registered scorer (:class:`Registration`) and a scorer bound to one checked option set
(:class:`Bound`): what a lookup in :mod:`reward_plugins.registry` returns and what the routers
call.

:class:`Bound` holds the scorer contract's call side: the golds (or the raw ground truth, as a
read-only view), the context keywords, the event loop of an ``async def`` scorer, and the shape
of the result (a dict holding ``score``, every value a finite number, the same keys on every
call with the same options).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import math
import numbers
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from reward_plugins.cache import BOUND_OPTION_SETS, BoundedCache
from reward_plugins.errors import InvalidInput, InvalidOption, PluginError
from reward_plugins.groundtruth import coerce_golds
from reward_plugins.options import (
    FrozenList,
    OptionSpec,
    check_options,
    describe_value,
    freeze,
    is_finite_number,
)
from reward_plugins.results import SCORE_ONLY, Schema, SchemaSource, check_schema

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
