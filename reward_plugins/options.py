"""Options: one declaration (default, type, range and doc of each option), one checker.

An options declaration is a frozen dataclass whose fields are the options: each field's
annotation gives the type and range (``Annotated[float, Range(0, 1), "what it does"]``; a
``str`` in the metadata is the option's doc) and its default the default (no default: the
option is required)::

    @dataclass(frozen=True, kw_only=True)
    class LengthOptions:
        max_length: Annotated[PositiveInt, "the length that starts the penalty"]
        penalty: Annotated[Penalty, "the penalty at max_length + buffer"] = 1.0

:func:`declared_options` reads a declaration once into :class:`OptionSpec` objects, and
:func:`check_options` checks a caller's values against them. A scorer passes its declaration
to :func:`reward_plugins.scorer` (``options=``); a scorer that does not (every third-party
plugin, by the documented contract) declares its options as keyword-only parameters, which
:func:`declaration_of` turns into a declaration once (:func:`option_specs`). The checks follow
the declared types:

- ``bool``: a real ``bool`` (YAML's ``"false"`` is a string and is refused);
- ``int``: an ``int`` that is not a ``bool``, of magnitude at most :data:`INT_LIMIT` (2**53,
  exact as a float);
- ``float``: an ``int`` or ``float`` whose float is finite (NaN, infinities and integers beyond
  the largest float are refused);
- ``str``, ``Literal[...]``, ``X | None``, ``tuple[str, ...]`` / ``Sequence[str]``,
  ``Mapping[str, ...]``;
- ``Annotated[T, Range(low, high)]``: ``T``, within ``[low, high]``. :data:`Score`,
  :data:`Factor`, :data:`Penalty`, :data:`PositiveInt` and :data:`NonNegativeInt` are the
  common ones.

A parameter without an annotation is checked against the type of its default (``bool``,
``int``, ``float`` or ``str``), or not at all. Scorers may add cross-option checks of their own
(``validate=`` in :func:`reward_plugins.scorer`).

Numbers are judged before any float conversion (a 400-digit integer is compared with the bounds
as an integer, exactly), so a check raises :class:`InvalidOption`, never an ``OverflowError``;
:func:`is_finite_number` and :func:`finite_number` are the package's one finite-number check, and
:func:`describe_value` shows a refused value in a message ("an integer of 400 digits").
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from reward_plugins.errors import InvalidOption

SCORE_LIMIT = 1e6
"""Every score option (a reward paid on some branch), and every weight and scale of a composed
recipe, lies within ``[-SCORE_LIMIT, SCORE_LIMIT]``."""
INT_LIMIT = 2**53
"""The largest magnitude of an ``int`` option: every int up to it is exact as a float."""
_FLOAT_MAX = sys.float_info.max
_SHOWN_DIGITS = 20
"""Integers with more digits are shown by their number of digits, not written out."""


@dataclass(frozen=True)
class Range:
    """Inclusive bounds of a numeric option; ``None`` leaves a side open."""

    low: float | None = None
    high: float | None = None

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            return f"in [{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f">= {self.low:g}"
        return f"<= {self.high:g}"

    def __contains__(self, value: float) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


@dataclass(frozen=True)
class OneOf:
    """A ``str`` option that takes one of ``values`` (``None`` too when its type allows it),
    refused as "unknown <option> <value>; valid values: ..." (the metrics' message)."""

    values: tuple[str, ...]

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.values

    def describe(self) -> str:
        return f"one of {', '.join(sorted(self.values))}"

    def refusal(self, owner: str, name: str, value: Any) -> str:
        return f"{owner}: unknown {name} {value!r}; valid values: {', '.join(sorted(self.values))}"


@dataclass(frozen=True)
class IntIn:
    """An ``int`` option (not a ``bool``) within ``low..high``, refused as "must be an int"
    or "must be in low..high" (the metrics' messages)."""

    low: int
    high: int

    def accepts(self, value: Any) -> bool:
        return type(value) is int and self.low <= value <= self.high

    def describe(self) -> str:
        return f"an int in {self.low}..{self.high}"

    def refusal(self, owner: str, name: str, value: Any) -> str:
        if type(value) is not int:
            return f"{owner}: option {name!r} must be an int, got {type(value).__name__}: {value!r}"
        return f"{owner}: option {name!r} must be in {self.low}..{self.high}, got {value}"


@dataclass(frozen=True)
class AtLeast:
    """An integral option (not a ``bool``) of at least ``low``, refused as "must be an int >=
    low" or "must be >= low" (the metrics' messages)."""

    low: int

    def accepts(self, value: Any) -> bool:
        return (
            isinstance(value, numbers.Integral)
            and not isinstance(value, bool)
            and int(value) >= self.low
        )

    def describe(self) -> str:
        return f"an int >= {self.low}"

    def refusal(self, owner: str, name: str, value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return (
                f"{owner}: option {name!r} must be an int >= {self.low}, got "
                f"{type(value).__name__}: {value!r}"
            )
        return f"{owner}: option {name!r} must be >= {self.low}, got {int(value)}"


@dataclass(frozen=True)
class Flag:
    """A ``bool`` option (``None`` too when its type allows it), refused as "must be a bool,
    got <type>: <value>" (the metrics' message)."""

    def accepts(self, value: Any) -> bool:
        return type(value) is bool

    def describe(self) -> str:
        return "a bool"

    def refusal(self, owner: str, name: str, value: Any) -> str:
        return f"{owner}: option {name!r} must be a bool, got {type(value).__name__}: {value!r}"


Rule = OneOf | IntIn | AtLeast | Flag
"""Metadata of an ``Annotated`` option that checks the value and words its refusal itself."""

Score = Annotated[float, Range(-SCORE_LIMIT, SCORE_LIMIT)]
"""A reward paid on some branch: a finite number within ``[-1e6, 1e6]``."""
Factor = Annotated[float, Range(0.0, 1.0)]
"""A multiplier of a reward: a finite number within ``[0, 1]``."""
Penalty = Annotated[float, Range(0.0, SCORE_LIMIT)]
"""The size of a penalty, subtracted from a reward: a finite number within ``[0, 1e6]``."""
PositiveInt = Annotated[int, Range(1, None)]
NonNegativeInt = Annotated[int, Range(0, None)]

REQUIRED: Any = inspect.Parameter.empty
"""The default of an option that has none: the caller must give it."""

Check = Callable[[Any], bool]


@dataclass(frozen=True)
class OptionSpec:
    """One option: its name, default (:data:`REQUIRED` if none), expected type, check and doc."""

    name: str
    default: Any
    expected: str
    """What the option takes, in words ("a number in [0, 1]")."""
    accepts: Check
    doc: str = ""
    """What the option does (the ``str`` in its ``Annotated`` metadata), or ``""``."""
    rule: Rule | None = None
    """The option's :data:`Rule`, which words a refusal; ``None``: the standard message."""

    def refusal(self, owner: str, value: Any) -> str:
        """The message refusing ``value`` for this option of ``owner``."""
        if self.rule is not None:
            return self.rule.refusal(owner, self.name, value)
        return f"{owner}: option {self.name!r} must be {self.expected}, got {describe_value(value)}"

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


Declaration = type
"""A frozen dataclass whose fields are options (see the module docstring)."""


@functools.cache
def declared_options(declaration: Declaration) -> Mapping[str, OptionSpec]:
    """The options of ``declaration`` in field order, read once (the result is read-only).

    Raises:
        TypeError: ``declaration`` is not a dataclass, or a field's annotation is one this
            module cannot check or does not resolve.
    """
    if not dataclasses.is_dataclass(declaration):
        raise TypeError(f"an options declaration must be a dataclass, got {declaration!r}")
    try:
        hints = typing.get_type_hints(declaration, include_extras=True)
    except NameError as error:
        raise TypeError(f"option annotation of {declaration.__qualname__}: {error}") from None
    specs = {}
    for spec_field in dataclasses.fields(declaration):
        default = spec_field.default
        if spec_field.default_factory is not dataclasses.MISSING:
            default = spec_field.default_factory()
        elif default is dataclasses.MISSING:
            default = REQUIRED
        annotation = hints[spec_field.name]
        expected, accepts = _checker(annotation)
        metadata = getattr(annotation, "__metadata__", ())
        doc = next((m for m in metadata if isinstance(m, str)), "")
        rule = next((m for m in metadata if isinstance(m, Rule)), None)
        specs[spec_field.name] = OptionSpec(spec_field.name, default, expected, accepts, doc, rule)
    return types.MappingProxyType(specs)


def declaration_of(function: Callable[..., Any], skip: frozenset[str] = frozenset()) -> Declaration:
    """The options declaration of ``function``'s keyword-only parameters (but those in
    ``skip``): a frozen dataclass with one field per parameter, its annotation (or the type
    of its default, for a bare parameter) and its default.

    Raises:
        TypeError, NameError: an annotation that does not resolve.
    """
    signature = inspect.signature(function, eval_str=True)
    fields: list[tuple[str, Any, Any]] = []
    for parameter in signature.parameters.values():
        if parameter.kind is not inspect.Parameter.KEYWORD_ONLY or parameter.name in skip:
            continue
        annotation = parameter.annotation
        if annotation is inspect.Parameter.empty:
            annotation = _type_of_default(parameter.default)
        default = parameter.default
        if default is REQUIRED:
            made = dataclasses.field()
        elif type(default).__hash__ is None:  # dataclasses refuse a mutable default
            made = dataclasses.field(default_factory=functools.partial(_same, default))
        else:
            made = dataclasses.field(default=default)
        fields.append((parameter.name, annotation, made))
    name = f"{getattr(function, '__name__', 'scorer')}_options"
    return dataclasses.make_dataclass(name, fields, frozen=True, kw_only=True)


def _same(value: Any) -> Any:
    return value


def option_specs(
    function: Callable[..., Any], skip: frozenset[str] = frozenset()
) -> Mapping[str, OptionSpec]:
    """The options of ``function``: its keyword-only parameters, except the names in ``skip``,
    read through their declaration (:func:`declaration_of`, :func:`declared_options`).

    Raises:
        TypeError: an annotation this module cannot check, or one that does not resolve.
    """
    return declared_options(declaration_of(function, skip))


def defaults_of(declaration: Declaration) -> dict[str, Any]:
    """The default of every option of ``declaration`` that has one."""
    return {n: s.default for n, s in declared_options(declaration).items() if not s.required}


def _type_of_default(default: Any) -> Any:
    return type(default) if type(default) in (bool, int, float, str) else Any


def _checker(annotation: Any) -> tuple[str, Check]:
    """``(description, predicate)`` for a type annotation."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if annotation is Any or annotation is object:
        return "any value", lambda value: True
    if origin is Annotated:
        return _annotated_checker(arguments)
    if origin is Union or origin is types.UnionType:
        members = [_checker(argument) for argument in arguments]
        return (
            " or ".join(expected for expected, _ in members),
            lambda value: any(accepts(value) for _, accepts in members),
        )
    if origin is Literal:
        return (
            f"one of {', '.join(map(repr, arguments))}",
            lambda value: any(type(value) is type(c) and value == c for c in arguments),
        )
    plain = _plain_checker(annotation)
    if plain is not None:
        return plain
    if origin in (tuple, list, Sequence) or annotation in (tuple, list):
        return _sequence_checker(arguments)
    if origin in (dict, Mapping) or annotation in (dict, Mapping):
        return "a mapping", lambda value: isinstance(value, Mapping)
    raise TypeError(f"option annotation {annotation!r} is not one reward_plugins can check")


def _annotated_checker(arguments: tuple[Any, ...]) -> tuple[str, Check]:
    """``Annotated[T, ...]``: ``T``'s check, within the first :class:`Range` if there is one;
    with a :data:`Rule`, the rule's check (or ``None`` where ``T`` takes it)."""
    base_expected, base_accepts = _checker(arguments[0])
    rule = next((a for a in arguments[1:] if isinstance(a, Rule)), None)
    if rule is not None:
        optional = base_accepts(None)
        return (
            rule.describe() + (" or None" if optional else ""),
            lambda value: (optional and value is None) or rule.accepts(value),
        )
    bounds = next((a for a in arguments[1:] if isinstance(a, Range)), None)
    if bounds is None:
        return base_expected, base_accepts
    return (
        f"{base_expected} {bounds.describe()}",
        lambda value: base_accepts(value) and value in bounds,
    )


def _plain_checker(annotation: Any) -> tuple[str, Check] | None:
    """The check of ``None``, ``bool``, ``int``, ``float`` or ``str``; ``None`` for another."""
    plain: tuple[tuple[Any, str, Check], ...] = (
        (type(None), "None", lambda value: value is None),
        (bool, "a bool", lambda value: type(value) is bool),
        (int, "an int", _is_bounded_int),
        (float, "a finite number", is_finite_number),
        (str, "a str", lambda value: isinstance(value, str)),
    )
    return next(((expected, check) for kind, expected, check in plain if annotation is kind), None)


def _sequence_checker(arguments: tuple[Any, ...]) -> tuple[str, Check]:
    """``tuple[T, ...]``, ``Sequence[T]``, ``list[T]``: a list (not a string) of ``T``."""
    item_expected, item_accepts = _checker(arguments[0] if arguments else Any)
    return (
        f"a list of {item_expected.removeprefix('a ').removeprefix('an ')}",
        lambda value: (
            isinstance(value, Sequence)
            and not isinstance(value, (str, bytes))
            and all(item_accepts(item) for item in value)
        ),
    )


def _is_bounded_int(value: Any) -> bool:
    return (
        isinstance(value, int) and not isinstance(value, bool) and -INT_LIMIT <= value <= INT_LIMIT
    )


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a real number (numpy's too), not a ``bool``, whose float is finite.

    Integers are compared with the largest float as integers, so one of 400 digits is refused
    rather than overflowing; a float (or a fraction) is tested with :func:`math.isfinite`.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    if isinstance(value, numbers.Integral):
        return -_FLOAT_MAX <= int(value) <= _FLOAT_MAX
    try:
        return math.isfinite(value)
    except (OverflowError, ValueError, TypeError):  # a Fraction beyond the floats
        return False


def finite_number(value: Any, what: str, bounds: Range | None = None) -> Any:
    """``value`` itself when it is a finite number (:func:`is_finite_number`) within ``bounds``.

    Raises:
        InvalidOption: "``what`` must be a finite number [within bounds], got ..." naming the
            type of ``value`` (and its number of digits for a huge integer).
    """
    if is_finite_number(value) and (bounds is None or value in bounds):
        return value
    within = f" {bounds.describe()}" if bounds is not None else ""
    raise InvalidOption(f"{what} must be a finite number{within}, got {describe_value(value)}")


class FrozenList(tuple):
    """A list made read-only by the registry.

    :func:`reward_plugins.registry.read_only` turns each ``list`` of a scorer's ``extra_info``
    (and of a raw ground truth) into one, so that messages can name the type the caller gave.
    It is a ``tuple`` in every other respect: it compares equal to the tuple of its items,
    hashes and prints like it, pickles (as a ``FrozenList``) and ``json.dumps`` writes it as a
    JSON list.
    """

    __slots__ = ()


def describe_value(value: Any, width: int = 80) -> str:
    """``value`` for a message: its type and its ``repr`` cut to ``width`` characters; an integer
    of more than 20 digits as "an integer of N digits" (never written out: a 5,000-digit
    integer does not even convert to a string).

    A value made read-only by the registry is shown as the caller gave it: a
    :class:`FrozenList` as a ``list``, a ``MappingProxyType`` as a ``dict``, all the way down
    (``dict: {'a': [1]}``, not ``mappingproxy({'a': (1,)})``).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        digits = _digit_count(value)
        if digits > _SHOWN_DIGITS:
            sign = "a negative " if value < 0 else "an "
            return f"{sign}integer of {digits} digits"
    try:
        shown = repr(_as_given(value))
    except (ValueError, RecursionError):  # an integer too long to convert, or too deep a nesting
        shown = "(too large to show)"
    return f"{_type_name(value)}: {shown[:width]}"


def _type_name(value: Any) -> str:
    """The name of ``value``'s type as the caller gave it: ``list`` for a :class:`FrozenList`,
    ``dict`` for a ``MappingProxyType``."""
    if isinstance(value, FrozenList):
        return "list"
    if isinstance(value, types.MappingProxyType):
        return "dict"
    return type(value).__name__


def _as_given(value: Any) -> Any:
    """``value`` with every :class:`FrozenList` made a ``list`` and every ``MappingProxyType`` a
    ``dict`` again, all the way down; any other value itself (for its ``repr`` only)."""
    if isinstance(value, FrozenList):
        return [_as_given(item) for item in value]
    if type(value) is tuple:
        return tuple(_as_given(item) for item in value)
    if isinstance(value, types.MappingProxyType):
        return {key: _as_given(item) for key, item in value.items()}
    return value


def _digit_count(value: int) -> int:
    """The number of decimal digits of ``abs(value)``, without converting it to a string."""
    magnitude = abs(value)
    if magnitude < 10:
        return 1
    digits = int((magnitude.bit_length() - 1) * 0.30102999566398120) + 1  # log10(2)
    if 10 ** (digits - 1) > magnitude:  # float rounding of the estimate, either way
        digits -= 1
    elif 10**digits <= magnitude:
        digits += 1
    return digits


def check_options(owner: str, specs: Mapping[str, OptionSpec], options: Mapping[str, Any]) -> None:
    """Check ``options`` against ``specs``; ``owner`` names the scorer in the message.

    Raises:
        InvalidOption: an unknown option (the message lists the valid ones), a required option
            missing, or a value its type refuses (the message names the expected type, the
            received type and the value).
    """
    unknown = options.keys() - specs.keys()
    if unknown:
        shown = sorted(repr(k) if isinstance(k, str) else describe_value(k) for k in unknown)
        raise InvalidOption(
            f"{owner}: unknown option(s) {', '.join(shown)}; "
            f"valid options: {', '.join(sorted(specs)) or '(none)'}"
        )
    missing = [spec.name for spec in specs.values() if spec.required and spec.name not in options]
    if missing:
        raise InvalidOption(f"{owner}: missing required option(s) {', '.join(map(repr, missing))}")
    for name, value in options.items():
        spec = specs[name]
        if not spec.accepts(value):
            raise InvalidOption(spec.refusal(owner, value))


def freeze(value: Any) -> Any:
    """A hashable equivalent of an option value (lists and mappings become tuples).

    Raises:
        TypeError: a value that stays unhashable.
    """
    if isinstance(value, Mapping):
        return ("__mapping__", tuple(sorted((k, freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)) or (
        isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    ):
        return ("__sequence__", tuple(freeze(item) for item in value))
    hash(value)
    return (type(value), value)  # 1, 1.0 and True are different options
