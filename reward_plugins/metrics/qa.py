"""Answer metrics: exact match, substring match, token F1 and label accuracy.

Default contract (one tokenizer for every token metric, ``words``: ``re.findall(r"\\w+",
text.lower())``):

- ``exact_match``: 1.0 when ``prediction.strip() == target.strip()`` for some target (after the
  ``normalizer`` option, ``none`` by default).
- ``subem``: 1.0 when a SQuAD-normalized target is a substring of the SQuAD-normalized
  prediction, as Search-R1's ``subem_check`` (a target that normalizes to "" always matches).
- ``f1``: multiset token F1, best over targets; both token lists empty give 1.0, exactly one
  empty gives 0.0.
- ``accuracy``: label equality up to case (``str.casefold``) and surrounding whitespace.

``compat="squad"`` (``exact_match``, ``f1``) is the official SQuAD v1.1 evaluation: SQuAD
normalization, whitespace tokens, and F1 = 0 when no token is shared, even when both answers
are empty (EM is then 1).

References:
    Rajpurkar et al. 2016, SQuAD, and its ``evaluate-v1.1.py`` (restated in
    ``metric-conventions.md`` section 1); Search-R1 ``qa_em.py`` for SubEM.
"""

from __future__ import annotations

from collections import Counter

from reward_plugins.metrics.base import (
    DEFAULT_NORMALIZER,
    Metric,
    Targets,
    TokenPairMetric,
    check_choice,
    f_measure,
    reject_with_compat,
    resolve_normalizer,
)

SQUAD = "squad"


class ExactMatch(Metric):
    """Exact match with any target, after a named normalizer and ``str.strip``.

    Args:
        normalizer: normalizer name, ``none`` by default (see :mod:`reward_plugins.text`).
        compat: ``"squad"`` for the official SQuAD v1.1 EM (fixes the normalizer).

    Example:
        >>> ExactMatch()(" Paris ", ["paris", "Paris"])
        1.0
        >>> ExactMatch(compat="squad").signature
        'exact_match|compat:squad|norm:squad'

    Raises:
        ValueError: unknown normalizer or compat, or a normalizer given with ``compat``.
    """

    name = "exact_match"

    def __init__(self, *, normalizer: str | None = None, compat: str | None = None) -> None:
        if compat is not None:
            self.compat: str | None = check_choice(compat, (SQUAD,), "compat", self.name)
            reject_with_compat(self.name, compat, normalizer=normalizer)
            normalizer = SQUAD
        else:
            self.compat = None
        self.normalizer = normalizer if normalizer is not None else DEFAULT_NORMALIZER
        self._normalize = resolve_normalizer(self.normalizer, self.name)

    @property
    def signature(self) -> str:
        compat = f"|compat:{self.compat}" if self.compat else ""
        return f"{self.name}{compat}|norm:{self.normalizer}"

    def _score(self, prediction: str, targets: tuple[str, ...]) -> float:
        normalized = self._normalize(prediction).strip()
        return float(any(self._normalize(target).strip() == normalized for target in targets))


class SubEM(Metric):
    """Substring exact match: a normalized target occurs inside the normalized prediction.

    Args:
        normalizer: normalizer name, ``squad`` by default (Search-R1's ``subem_check``).

    Example:
        >>> SubEM()("It is Paris, France.", ["paris"])
        1.0

    Raises:
        ValueError: unknown normalizer.
    """

    name = "subem"

    def __init__(self, *, normalizer: str | None = None) -> None:
        self.normalizer = normalizer if normalizer is not None else SQUAD
        self._normalize = resolve_normalizer(self.normalizer, self.name)

    @property
    def signature(self) -> str:
        return f"{self.name}|norm:{self.normalizer}"

    def _score(self, prediction: str, targets: tuple[str, ...]) -> float:
        normalized = self._normalize(prediction)
        return float(any(self._normalize(target) in normalized for target in targets))


def token_f1(prediction_tokens: list[str], target_tokens: list[str]) -> float:
    """Multiset token F1 of two non-empty token lists; 0.0 when they share no token.

    Example:
        >>> token_f1(["the", "the", "cat"], ["cat", "cat"])
        0.4
    """
    shared = sum((Counter(prediction_tokens) & Counter(target_tokens)).values())
    if shared == 0:
        return 0.0
    return f_measure(shared / len(prediction_tokens), shared / len(target_tokens))


class TokenF1(TokenPairMetric):
    """Token F1 (bag of tokens), the best over targets.

    Args:
        normalizer: normalizer name applied before tokenizing, ``none`` by default.
        tokenizer: tokenizer name, ``words`` by default.
        compat: ``"squad"`` for the official SQuAD v1.1 F1 (fixes normalizer and tokenizer).

    Example:
        >>> TokenF1()("the cat sat", "a cat sat down")
        0.5714285714285715
        >>> TokenF1(compat="squad")("", "")
        0.0
        >>> TokenF1()("", "")
        1.0

    Raises:
        ValueError: unknown normalizer, tokenizer or compat, or one of them given with ``compat``.
    """

    name = "f1"

    def __init__(
        self,
        *,
        normalizer: str | None = None,
        tokenizer: str | None = None,
        compat: str | None = None,
    ) -> None:
        if compat is not None:
            self.compat: str | None = check_choice(compat, (SQUAD,), "compat", self.name)
            reject_with_compat(self.name, compat, normalizer=normalizer, tokenizer=tokenizer)
            normalizer, tokenizer = SQUAD, "split"
        else:
            self.compat = None
        self._set_tokenization(normalizer, tokenizer)

    pair_score = staticmethod(token_f1)


class Accuracy(Metric):
    """Label accuracy: equality with any target up to case folding and surrounding whitespace.

    Example:
        >>> Accuracy()(" Positive", ["negative", "POSITIVE"])
        1.0
    """

    name = "accuracy"

    @property
    def signature(self) -> str:
        return f"{self.name}|norm:strip+casefold"

    def _score(self, prediction: str, targets: tuple[str, ...]) -> float:
        label = prediction.strip().casefold()
        return float(any(target.strip().casefold() == label for target in targets))


def exact_match(
    prediction: str,
    targets: Targets,
    *,
    normalizer: str | None = None,
    compat: str | None = None,
) -> float:
    """1.0 when the normalized, stripped prediction equals a normalized, stripped target.

    See :class:`ExactMatch` for the options.

    Example:
        >>> exact_match("The Cat!", "cat", compat="squad")
        1.0
    """
    return ExactMatch(normalizer=normalizer, compat=compat)(prediction, targets)


def subem(prediction: str, targets: Targets, *, normalizer: str | None = None) -> float:
    """1.0 when a normalized target is a substring of the normalized prediction.

    See :class:`SubEM` for the options.

    Example:
        >>> subem("the capital is Paris", ["Paris", "Lyon"])
        1.0
    """
    return SubEM(normalizer=normalizer)(prediction, targets)


def f1(
    prediction: str,
    targets: Targets,
    *,
    normalizer: str | None = None,
    tokenizer: str | None = None,
    compat: str | None = None,
) -> float:
    """Token F1, the best over targets. See :class:`TokenF1` for the options.

    Example:
        >>> f1("the the cat", "cat cat", compat="squad")
        0.6666666666666666
    """
    return TokenF1(normalizer=normalizer, tokenizer=tokenizer, compat=compat)(prediction, targets)


def accuracy(prediction: str, targets: Targets) -> float:
    """Label accuracy up to case and surrounding whitespace. See :class:`Accuracy`.

    Example:
        >>> accuracy("yes", "Yes ")
        1.0
    """
    return Accuracy()(prediction, targets)
