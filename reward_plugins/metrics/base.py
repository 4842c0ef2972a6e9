"""What every metric shares: input checks, named settings, and the signature string.

A metric is a small callable object built once from its options (validated then, not on the first
sample) and then applied to ``(prediction, targets)``. Its ``signature`` names every setting
that changes the number, e.g. ``"f1|norm:none|tok:words"``, so a reported score can be
reproduced. Instances hold only names and module-level functions, so they pickle (Ray, spawned
workers).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Concatenate, ParamSpec, Protocol, TypeVar, cast, runtime_checkable

import numpy as np

from reward_plugins.errors import InvalidInput, InvalidOption
from reward_plugins.options import Flag, IntIn, OneOf, OptionSpec, check_options, option_specs
from reward_plugins.text import get_normalizer, get_tokenizer
from reward_plugins.text.normalize import Normalizer
from reward_plugins.text.tokenize import Tokenizer

DEFAULT_NORMALIZER = "none"
DEFAULT_TOKENIZER = "words"
"""The default contract of every token metric: ``re.findall(r"\\w+", text.lower())``."""

Targets = str | Iterable[str]
"""One target string, or a non-empty sequence of them (the score is the best over them)."""


def coerce_targets(targets: Targets, metric: str) -> tuple[str, ...]:
    """Return ``targets`` as a non-empty tuple of strings.

    A bare string is one target; any other iterable of strings (list, tuple, 1-D numpy array of
    strings) is a list of targets.

    Example:
        >>> coerce_targets("Paris", "f1")
        ('Paris',)

    Raises:
        TypeError: ``targets`` is not a string or an iterable, or one of its items is not a string
            (the message names the metric, the index and the type).
        ValueError: ``targets`` is empty.
    """
    if isinstance(targets, str):
        return (targets,)
    if isinstance(targets, (bytes, Mapping)) or not isinstance(targets, Iterable):
        raise InvalidInput(
            f"{metric}: targets must be a str or a list of str, got {type(targets).__name__}"
        )
    golds = tuple(targets)
    if not golds:
        raise InvalidInput(f"{metric}: targets is empty; give at least one target string")
    for index, gold in enumerate(golds):
        if not isinstance(gold, str):
            raise InvalidInput(
                f"{metric}: targets[{index}] must be a str, got {type(gold).__name__}"
            )
    return golds


def check_prediction(prediction: object, metric: str) -> str:
    """Return ``prediction`` if it is a string.

    Raises:
        TypeError: it is not (the message names the metric and the type).
    """
    if not isinstance(prediction, str):
        raise InvalidInput(f"{metric}: prediction must be a str, got {type(prediction).__name__}")
    return prediction


def check_choice(value: object, valid: Collection[str], option: str, metric: str) -> str:
    """Deprecated: declare the option ``Annotated[str, OneOf(valid)]``
    (:mod:`reward_plugins.options`).

    Raises:
        InvalidOption: ``value`` is not one of ``valid``; the message lists the valid values.
    """
    _deprecated("check_choice", "OneOf")
    if not OneOf(tuple(valid)).accepts(value):
        raise InvalidOption(OneOf(tuple(valid)).refusal(metric, option, value))
    return cast(str, value)


def check_flag(value: object, option: str, metric: str) -> bool:
    """Deprecated: declare the option ``Annotated[bool, Flag()]`` (:mod:`reward_plugins.options`).

    Raises:
        InvalidOption: ``value`` is not a real ``bool`` (a YAML ``"false"`` is a string).
    """
    _deprecated("check_flag", "Flag")
    if not Flag().accepts(value):
        raise InvalidOption(Flag().refusal(metric, option, value))
    return cast(bool, value)


def check_integer(value: object, valid: range, option: str, metric: str) -> int:
    """Deprecated: declare the option ``Annotated[int, IntIn(low, high)]``
    (:mod:`reward_plugins.options`).

    Raises:
        InvalidOption: it is not an int, or it is out of range (the message gives the range).
    """
    _deprecated("check_integer", "IntIn")
    rule = IntIn(valid.start, valid.stop - 1)
    if not rule.accepts(value):
        raise InvalidOption(rule.refusal(metric, option, value))
    return cast(int, value)


def _deprecated(name: str, rule: str) -> None:
    warnings.warn(
        f"reward_plugins.metrics.base.{name} is deprecated: declare the option with "
        f"reward_plugins.options.{rule} in Annotated metadata; the metric checks it",
        DeprecationWarning,
        stacklevel=3,
    )


def statistics_vector(statistics: object, length: int, metric: str) -> list[int]:
    """A summed statistics vector as a list of Python ints, checked.

    Accepts a 1-D numpy array (int or float dtype holding whole numbers), list or tuple of
    ``length`` non-negative counts.

    Example:
        >>> statistics_vector(np.array([3.0, 4.0]), 2, "bleu")
        [3, 4]

    Raises:
        InvalidInput: not a 1-D vector of ``length`` whole non-negative numbers.
    """
    array = np.asarray(statistics)
    if array.ndim != 1 or len(array) != length or array.dtype.kind not in "iuf":
        raise InvalidInput(
            f"{metric}: statistics must be a 1-D vector of {length} counts, got "
            f"{type(statistics).__name__} of shape {array.shape} and dtype {array.dtype}"
        )
    counts = [int(value) for value in array.tolist()]
    if (array.dtype.kind == "f" and counts != array.tolist()) or min(counts, default=0) < 0:
        raise InvalidInput(f"{metric}: statistics must be whole non-negative counts")
    return counts


@runtime_checkable
class CorpusMetric(Protocol):
    """A metric whose corpus score comes from summed per-sentence statistics (BLEU, chrF)."""

    name: ClassVar[str]

    def sentence_statistics(self, prediction: str, targets: Targets) -> np.ndarray:
        """The statistics vector of one sentence; vectors add up over a corpus."""

    def score_from_statistics(self, statistics: np.ndarray) -> float:
        """The score of a summed statistics vector."""


def corpus_from_statistics(
    metric: CorpusMetric,
    predictions: Sequence[str],
    references: Sequence[Targets],
    width: int,
) -> float:
    """The corpus score: each row's ``sentence_statistics`` summed, then scored.

    ``width`` is the length of a statistics vector (the score of an empty corpus is that of
    ``width`` zeros).

    Raises:
        InvalidInput: ``predictions`` and ``references`` differ in length, or a row is not a
            string or has no reference (the message names the row).
    """
    if len(predictions) != len(references):
        raise InvalidInput(
            f"{metric.name}: {len(predictions)} predictions but {len(references)} reference rows"
        )
    sums = np.zeros(width, dtype=np.int64)
    for row, (prediction, targets) in enumerate(zip(predictions, references, strict=True)):
        try:
            sums += metric.sentence_statistics(prediction, targets)
        except (TypeError, ValueError) as error:
            raise type(error)(f"row {row}: {error}") from None
    return metric.score_from_statistics(sums)


def resolve_normalizer(name: str, metric: str) -> Normalizer:
    """The normalizer named ``name``, with the metric named in the error."""
    try:
        return get_normalizer(name)
    except ValueError as error:
        raise InvalidOption(f"{metric}: {error}") from None


def resolve_tokenizer(name: str, metric: str) -> Tokenizer:
    """The tokenizer named ``name``, with the metric named in the error."""
    try:
        return get_tokenizer(name)
    except ValueError as error:
        raise InvalidOption(f"{metric}: {error}") from None


def reject_with_compat(metric: str, compat: str, **given: object) -> None:
    """Refuse options that a compatibility preset fixes itself.

    Raises:
        ValueError: one of ``given`` is not ``None``.
    """
    fixed = sorted(name for name, value in given.items() if value is not None)
    if fixed:
        raise InvalidOption(
            f"{metric}: compat={compat!r} fixes {', '.join(fixed)}; do not pass "
            f"{'it' if len(fixed) == 1 else 'them'}"
        )


def reject_without_compat(metric: str, **given: object) -> None:
    """Refuse options that only mean something under a compatibility preset.

    Raises:
        ValueError: one of ``given`` is not ``None``.
    """
    for name, value in given.items():
        if value is not None:
            raise InvalidOption(f"{metric}: option {name!r} needs a compat preset")


def f_measure(precision: float, recall: float) -> float:
    """Balanced F-measure, evaluated as ``((2 * P) * R) / (P + R)`` like SQuAD and rouge-score.

    Example:
        >>> f_measure(0.5, 1.0)
        0.6666666666666666
    """
    if precision + recall == 0.0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


class Metric(ABC):
    """A configured metric: ``metric(prediction, targets) -> float`` in [0, 1].

    Its options are the keyword-only parameters of its ``__init__``, declared as every option
    is (:mod:`reward_plugins.options`: type, range or :data:`~reward_plugins.options.Rule`,
    default); :attr:`option_specs` reads them once per class, and each given option is checked
    against them before ``__init__`` runs, which then checks only what one option cannot
    (options a compatibility preset fixes, options that depend on another).
    """

    name: ClassVar[str]
    option_specs: ClassVar[Mapping[str, OptionSpec]] = MappingProxyType({})
    """The options of the class (:func:`reward_plugins.options.option_specs` of ``__init__``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = vars(cls).get("__init__")
        if init is None:
            return
        specs = option_specs(init)
        cls.option_specs = specs

        @functools.wraps(init)
        def checked_init(self: Metric, *args: Any, **options: Any) -> None:
            given = {name: value for name, value in options.items() if name in specs}
            check_options(self.name, specs, given)  # an unknown name: init's TypeError
            init(self, *args, **options)

        cls.__init__ = checked_init  # type: ignore[method-assign,assignment]

    @property
    @abstractmethod
    def signature(self) -> str:
        """Every setting that changes the number, as ``name|key:value|...``."""

    @abstractmethod
    def _score(self, prediction: str, targets: tuple[str, ...]) -> float:
        """Score checked inputs."""

    def __call__(self, prediction: str, targets: Targets) -> float:
        """Score ``prediction`` against ``targets`` (a string, or a non-empty list: best of them).

        Raises:
            InvalidInput: ``prediction`` is not a str, or ``targets`` is not a str or a non-empty
                list of str.
        """
        check_prediction(prediction, self.name)
        return self._score(prediction, coerce_targets(targets, self.name))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.signature}>"

    def _set_tokenization(self, normalizer: str | None, tokenizer: str | None) -> None:
        """Resolve the named normalizer and tokenizer (the defaults for ``None``)."""
        self.normalizer = normalizer if normalizer is not None else DEFAULT_NORMALIZER
        self.tokenizer = tokenizer if tokenizer is not None else DEFAULT_TOKENIZER
        self._normalize = resolve_normalizer(self.normalizer, self.name)
        self._tokenize = resolve_tokenizer(self.tokenizer, self.name)


class TokenPairMetric(Metric):
    """A token metric scored target by target, the best over targets (token F1, ROUGE-L).

    Subclasses set ``compat`` and call :meth:`Metric._set_tokenization` in ``__init__``, and define
    ``pair_score(predicted, gold)`` for two non-empty token lists. Two empty token lists score
    1.0 under the default contract; a compat preset follows its library, which scores them 0.
    """

    compat: str | None

    @property
    def signature(self) -> str:
        compat = f"|compat:{self.compat}" if self.compat else ""
        return f"{self.name}{compat}|norm:{self.normalizer}|tok:{self.tokenizer}"

    @staticmethod
    @abstractmethod
    def pair_score(predicted: list[str], gold: list[str], /) -> float:
        """The score of two non-empty token lists."""

    def _tokens(self, text: str) -> list[str]:
        return self._tokenize(self._normalize(text))

    def _score(self, prediction: str, targets: tuple[str, ...]) -> float:
        predicted = self._tokens(prediction)
        best = 0.0
        for target in targets:
            gold = self._tokens(target)
            if predicted and gold:
                best = max(best, self.pair_score(predicted, gold))
            elif not predicted and not gold and self.compat is None:
                best = 1.0
        return best


OptionsP = ParamSpec("OptionsP")
FirstT = TypeVar("FirstT")
SecondT = TypeVar("SecondT")
ResultT = TypeVar("ResultT")


def takes_options_of(
    metric_class: Callable[OptionsP, Metric],
) -> Callable[
    [Callable[Concatenate[FirstT, SecondT, ...], ResultT]],
    Callable[Concatenate[FirstT, SecondT, OptionsP], ResultT],
]:
    """Give a metric's free function the options of its class, declared once on the class.

    The decorated function takes its two inputs (``prediction, targets`` or ``predictions,
    references``) and ``**options``, which it passes to ``metric_class``; the class checks
    them, so the errors name the metric. Type checkers see the class's options as the
    function's keyword parameters; at run time the function is returned itself, its
    ``option_specs`` set to the class's :attr:`Metric.option_specs` (a keyword-only parameter
    the function declares itself replaces the class's default of that name).

    Example:
        >>> from reward_plugins.metrics.qa import ExactMatch
        >>> @takes_options_of(ExactMatch)
        ... def exact(prediction: str, targets: Targets, **options: Any) -> float:
        ...     return ExactMatch(**options)(prediction, targets)
        >>> list(exact.option_specs), exact("A!", "a", normalizer="squad")
        (['normalizer', 'compat'], 1.0)

    Raises:
        TypeError: the function declares a keyword-only parameter the class does not take.
    """
    specs: Mapping[str, OptionSpec] = getattr(metric_class, "option_specs", {})

    def decorate(
        function: Callable[Concatenate[FirstT, SecondT, ...], ResultT],
    ) -> Callable[Concatenate[FirstT, SecondT, OptionsP], ResultT]:
        own = inspect.signature(function).parameters.values()
        replaced = {p.name: p.default for p in own if p.kind is p.KEYWORD_ONLY}
        unknown = sorted(set(replaced) - set(specs))
        if unknown:
            raise TypeError(f"{function.__name__}: {metric_class} takes no option {unknown}")
        function.option_specs = MappingProxyType(  # type: ignore[attr-defined]
            {
                name: dataclasses.replace(spec, default=replaced[name])
                if name in replaced
                else spec
                for name, spec in specs.items()
            }
        )
        return cast("Callable[Concatenate[FirstT, SecondT, OptionsP], ResultT]", function)

    return decorate
