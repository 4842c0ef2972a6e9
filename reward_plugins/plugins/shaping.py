"""Shaping terms: penalties on the form of a response, each a plain scorer for every data source.

Each term is registered for ``"*"`` (every data source), reads no ground truth (any value is
accepted and ignored), and returns a dict with the same keys on every branch: ``score`` (always
``<= 0``, so a positive weight in a weighted sum subtracts it) and a few diagnostic keys.

- ``length_penalty`` (keys :data:`LENGTH_KEYS`): DAPO's soft overlong punishment, the formula
  of verl's ``dapo`` reward manager (``verl/workers/reward_manager/dapo.py``; DAPO,
  arXiv:2503.14476, section 3.4), on words of the response, words of the answer, or characters
  instead of tokens;
- ``repetition_penalty`` (keys :data:`REPETITION_KEYS`): open-r1's n-gram repetition penalty
  (huggingface/open-r1 ``src/open_r1/rewards.py``, ``get_repetition_penalty_reward``; after
  arXiv:2502.03373, appendix C.2);
- ``answer_list_penalty`` (keys :data:`ANSWER_LIST_KEYS`): an answer that names several
  candidates, under the rule of :mod:`reward_plugins.text.answers`;
- ``language_mix_penalty`` (keys :data:`LANGUAGE_MIX_KEYS`): the share of letters outside the
  expected scripts (:data:`SCRIPTS`).

"The answer" is the last (or, with ``extract="first"``, the first) ``<answer>...</answer>`` span,
stripped, as the Search-R1 QA scorers extract it; a response without one has an empty answer.
Every term is linear in the response length (for a fixed ``ngram_size``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from types import MappingProxyType
from typing import Annotated, Any, Literal

from reward_plugins.cache import SCRIPT_RANGES
from reward_plugins.errors import InvalidOption
from reward_plugins.extract import ExtractMode, scan_tags
from reward_plugins.options import SCORE_LIMIT, Penalty, PositiveInt, Range
from reward_plugins.registry import WILDCARD, scorer
from reward_plugins.results import ResultKey, Schema, keys_of
from reward_plugins.text.answers import MIN_CANDIDATES, count_candidates

MaxPenalty = Annotated[float, Range(-SCORE_LIMIT, 0.0)]
"""open-r1's ``max_penalty``: the (non-positive) score of a fully repeated text."""
MinCandidates = Annotated[int, Range(2, None)]

LengthUnit = Literal["response_words", "answer_words", "characters"]
TextPart = Literal["response", "answer"]

_PENALTY = ResultKey("score", "reward", "score", gdpo=True)
LENGTH_RESULTS: Schema = (
    _PENALTY,
    ResultKey("length", "length", "length"),
    ResultKey("overlong", "rate", "over-long rate"),
)
"""``length`` in the term's ``unit``; ``overlong`` is 1 when the penalty applies."""
REPETITION_RESULTS: Schema = (
    _PENALTY,
    ResultKey("ngrams", "length", "n-grams"),
    ResultKey("distinct_ngrams", "count", "distinct n-grams"),
    ResultKey("repetition", "component", "repetition share"),
)
"""``repetition`` is the share of repeated n-grams, ``1 - distinct_ngrams / ngrams``."""
ANSWER_LIST_RESULTS: Schema = (
    _PENALTY,
    ResultKey("candidates", "count", "answer candidates"),
    ResultKey("answer_found", "rate", "answer rate"),
)
LANGUAGE_MIX_RESULTS: Schema = (
    _PENALTY,
    ResultKey("letters", "length", "letters"),
    ResultKey("foreign_letters", "length", "foreign letters"),
    ResultKey("foreign_share", "component", "foreign-letter share"),
)
"""The terms' result schemas: only ``score`` is a reward dimension for GDPO; the rest restate
it or measure the response."""

LENGTH_KEYS: tuple[str, ...] = keys_of(LENGTH_RESULTS)
REPETITION_KEYS: tuple[str, ...] = keys_of(REPETITION_RESULTS)
ANSWER_LIST_KEYS: tuple[str, ...] = keys_of(ANSWER_LIST_RESULTS)
LANGUAGE_MIX_KEYS: tuple[str, ...] = keys_of(LANGUAGE_MIX_RESULTS)

DEFAULT_NGRAM_SIZE = 3
"""open-r1's default (``repetition_n_grams`` in ``src/open_r1/configs.py``)."""
DEFAULT_MAX_PENALTY = -1.0
"""open-r1's default (``repetition_max_penalty`` in ``src/open_r1/configs.py``)."""


def _answer(response: str, extract: ExtractMode) -> str | None:
    return scan_tags(response, "answer", extract)[0]


def _penalty_score(value: float) -> float:
    """``value`` as a float, with ``-0.0`` made ``0.0`` (a zero penalty prints as ``0.0``)."""
    return float(value) + 0.0


# ---------------------------------------------------------------------------- length_penalty


def measure_length(response: str, unit: LengthUnit, extract: ExtractMode = "last") -> int:
    """The length of ``response`` in ``unit``.

    ``response_words`` and ``answer_words`` count whitespace-separated words (``str.split()``);
    an absent answer has length 0. ``characters`` counts the code points of the response.

    Example:
        >>> text = "I think <answer> Paris, France </answer>"
        >>> [measure_length(text, unit) for unit in ("response_words", "answer_words")]
        [6, 2]
        >>> measure_length("naïve", "characters"), measure_length("no tags", "answer_words")
        (5, 0)
    """
    if unit == "characters":
        return len(response)
    if unit == "response_words":
        return len(response.split())
    answer = _answer(response, extract)
    return 0 if answer is None else len(answer.split())


def overlong_penalty(length: int, max_length: int, buffer: int, penalty: float) -> float:
    """DAPO's soft overlong punishment of a response ``length`` long (verl's formula), held at
    ``-penalty`` past ``max_length``.

    With ``expected = max_length - buffer`` and ``exceed = length - expected``, the score is
    ``max(min(-exceed / buffer * penalty, 0), -penalty)``: 0 up to ``expected``, falling
    linearly to ``-penalty`` at ``max_length``. verl's token counts stop at ``max_length``; a
    word or character count need not, and the floor keeps the reward's scale bounded there.

    Example:
        >>> [overlong_penalty(n, max_length=10, buffer=4, penalty=1.0) for n in (6, 7, 8, 10, 12)]
        [0.0, -0.25, -0.5, -1.0, -1.0]
    """
    expected = max_length - buffer
    exceed = length - expected
    return _penalty_score(max(min(-exceed / buffer * penalty, 0.0), -penalty))


def _check_length(options: Mapping[str, Any]) -> None:
    if options["buffer"] > options["max_length"]:
        raise InvalidOption(
            f"option 'buffer' must be <= max_length ({options['max_length']}), got "
            f"{options['buffer']!r}; valid range: 1 <= buffer <= max_length"
        )


@scorer(
    "length_penalty", WILDCARD, ground_truth="raw", validate=_check_length, results=LENGTH_RESULTS
)
def length_penalty(
    response: str,
    ground_truth: Any,
    *,
    max_length: PositiveInt,
    buffer: PositiveInt,
    penalty: Penalty = 1.0,
    unit: LengthUnit = "response_words",
    extract: ExtractMode = "last",
) -> dict[str, Any]:
    """DAPO's soft overlong penalty on the length in ``unit``; keys :data:`LENGTH_KEYS`.

    ``score`` is :func:`overlong_penalty` of :func:`measure_length`; ``length`` the measured
    length; ``overlong`` 1.0 when the score is negative. ``max_length`` and ``buffer`` (verl's
    ``max_resp_len`` and ``overlong_buffer_cfg.len``) are required, ``1 <= buffer <=
    max_length``; ``penalty`` is verl's ``penalty_factor``. The ground truth is ignored.
    """
    length = measure_length(response, unit, extract)
    score = overlong_penalty(length, max_length, buffer, penalty)
    return {"score": score, "length": length, "overlong": 1.0 if score < 0 else 0.0}


# ------------------------------------------------------------------------ repetition_penalty

_DIRECT_NGRAM_SIZE = 8
"""Up to this size n-grams are compared as tuples of words; above it, by ids (bounded memory)."""


def count_distinct_ngrams(words: Sequence[str], ngram_size: int) -> int:
    """How many distinct runs of ``ngram_size`` consecutive items ``words`` holds.

    Time and memory are linear in ``len(words)`` for small sizes; for sizes above
    :data:`_DIRECT_NGRAM_SIZE` each n-gram gets an exact integer id by doubling (the id of a
    run of ``a + b`` words is the id of the pair (id of its first ``a``, id of its last ``b``)),
    in ``O(len(words) * log(ngram_size))`` time and linear memory.

    Example:
        >>> count_distinct_ngrams("a b c a b c".split(), 3), count_distinct_ngrams(["a"], 2)
        (3, 0)
    """
    if ngram_size <= _DIRECT_NGRAM_SIZE:
        return len(set(zip(*(words[start:] for start in range(ngram_size)), strict=False)))
    return len(set(_ngram_ids(words, ngram_size)))


def _ngram_ids(words: Sequence[str], ngram_size: int) -> list[int]:
    """``ids[i]`` names ``words[i : i + ngram_size]``: equal ids exactly for equal n-grams."""
    vocabulary: dict[str, int] = {}
    power = [vocabulary.setdefault(word, len(vocabulary)) for word in words]
    power_size = 1
    ids: list[int] | None = None
    ids_size = 0
    remaining = ngram_size
    while True:
        if remaining & 1:
            ids = power if ids is None else _join(ids, power, ids_size)
            ids_size += power_size
        remaining >>= 1
        if not remaining:
            return ids if ids is not None else []
        power = _join(power, power, power_size)
        power_size *= 2


def _join(left: list[int], right: list[int], offset: int) -> list[int]:
    """Ids of the runs made of the ``left`` run at ``i`` followed by the ``right`` run at
    ``i + offset`` (``offset`` is the ``left`` runs' length)."""
    table: dict[tuple[int, int], int] = {}
    return [table.setdefault(pair, len(table)) for pair in zip(left, right[offset:], strict=False)]


def repetition_counts(text: str, ngram_size: int) -> tuple[int, int]:
    """``(n-grams, distinct n-grams)`` of the lower-cased whitespace-separated words of
    ``text``; ``(0, 0)`` when it has fewer than ``ngram_size`` words.

    Example:
        >>> repetition_counts("This is a this IS a test", 2)
        (6, 4)
    """
    words = text.lower().split()
    total = len(words) - ngram_size + 1
    if total <= 0:
        return 0, 0
    return total, count_distinct_ngrams(words, ngram_size)


@scorer("repetition_penalty", WILDCARD, ground_truth="raw", results=REPETITION_RESULTS)
def repetition_penalty(
    response: str,
    ground_truth: Any,
    *,
    ngram_size: PositiveInt = DEFAULT_NGRAM_SIZE,
    max_penalty: MaxPenalty = DEFAULT_MAX_PENALTY,
) -> dict[str, Any]:
    """open-r1's n-gram repetition penalty; keys :data:`REPETITION_KEYS`.

    ``repetition = 1 - distinct_ngrams / ngrams`` over the lower-cased whitespace-separated
    words of the response, and ``score = repetition * max_penalty`` (``max_penalty <= 0``); a
    response with fewer than ``ngram_size`` words scores 0 with every key 0. Defaults are
    open-r1's (3 and -1.0). The ground truth is ignored.
    """
    total, distinct = repetition_counts(response, ngram_size)
    if total == 0:
        return {"score": 0.0, "ngrams": 0, "distinct_ngrams": 0, "repetition": 0.0}
    scaling = 1 - distinct / total
    return {
        "score": _penalty_score(scaling * max_penalty),
        "ngrams": total,
        "distinct_ngrams": distinct,
        "repetition": scaling,
    }


# ----------------------------------------------------------------------- answer_list_penalty


@scorer("answer_list_penalty", WILDCARD, ground_truth="raw", results=ANSWER_LIST_RESULTS)
def answer_list_penalty(
    response: str,
    ground_truth: Any,
    *,
    min_candidates: MinCandidates = MIN_CANDIDATES,
    penalty: Penalty = 1.0,
    extract: ExtractMode = "last",
) -> dict[str, Any]:
    """``-penalty`` when the answer names ``min_candidates`` candidates or more, else 0; keys
    :data:`ANSWER_LIST_KEYS`.

    ``candidates`` is :func:`reward_plugins.text.answers.count_candidates` of the answer (0
    without one), ``answer_found`` 1.0 when an answer span was found. The ground truth is
    ignored.
    """
    answer = _answer(response, extract)
    candidates = 0 if answer is None else count_candidates(answer)
    return {
        "score": _penalty_score(-penalty) if candidates >= min_candidates else 0.0,
        "candidates": candidates,
        "answer_found": 0.0 if answer is None else 1.0,
    }


# ---------------------------------------------------------------------- language_mix_penalty

SCRIPTS: Mapping[str, tuple[tuple[int, int], ...]] = MappingProxyType(
    {
        # Basic Latin, Latin-1 Supplement, Latin Extended-A and -B, IPA Extensions, Spacing
        # Modifier Letters; Phonetic Extensions (+ Supplement); Latin Extended Additional;
        # Latin Extended-C; Latin Extended-D; Latin Extended-E; Latin ligatures (ﬁ, ﬂ, ...);
        # fullwidth Latin letters.
        "Latin": (
            (0x0000, 0x02FF),
            (0x1D00, 0x1DBF),
            (0x1E00, 0x1EFF),
            (0x2C60, 0x2C7F),
            (0xA720, 0xA7FF),
            (0xAB30, 0xAB6F),
            (0xFB00, 0xFB06),
            (0xFF21, 0xFF3A),
            (0xFF41, 0xFF5A),
        ),
        # Greek and Coptic; Greek Extended.
        "Greek": ((0x0370, 0x03FF), (0x1F00, 0x1FFF)),
        # Cyrillic; Cyrillic Supplement; Cyrillic Extended-C; Cyrillic Extended-B.
        "Cyrillic": ((0x0400, 0x052F), (0x1C80, 0x1C8F), (0xA640, 0xA69F)),
        # Armenian; Armenian ligatures.
        "Armenian": ((0x0530, 0x058F), (0xFB13, 0xFB17)),
        # Hebrew; Hebrew presentation forms.
        "Hebrew": ((0x0590, 0x05FF), (0xFB1D, 0xFB4F)),
        # Arabic; Arabic Supplement; Arabic Extended-A; presentation forms A and B.
        "Arabic": (
            (0x0600, 0x06FF),
            (0x0750, 0x077F),
            (0x08A0, 0x08FF),
            (0xFB50, 0xFDFF),
            (0xFE70, 0xFEFF),
        ),
        # Devanagari; Devanagari Extended.
        "Devanagari": ((0x0900, 0x097F), (0xA8E0, 0xA8FF)),
        "Bengali": ((0x0980, 0x09FF),),
        "Thai": ((0x0E00, 0x0E7F),),
        # Georgian; Georgian Extended (Mtavruli); Georgian Supplement.
        "Georgian": ((0x10A0, 0x10FF), (0x1C90, 0x1CBF), (0x2D00, 0x2D2F)),
        # Hangul Jamo; Hangul Compatibility Jamo; Jamo Extended-A; Hangul Syllables; Jamo
        # Extended-B; halfwidth Hangul letters.
        "Hangul": (
            (0x1100, 0x11FF),
            (0x3130, 0x318F),
            (0xA960, 0xA97F),
            (0xAC00, 0xD7FF),
            (0xFFA0, 0xFFDC),
        ),
        "Hiragana": ((0x3040, 0x309F),),
        # Katakana (with the prolonged sound mark); Katakana Phonetic Extensions; halfwidth
        # Katakana.
        "Katakana": ((0x30A0, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F)),
        # Iteration and closing marks (々, 〆); CJK Unified Ideographs Extension A; CJK Unified
        # Ideographs; CJK Compatibility Ideographs; the supplementary ideographic planes 2 and 3.
        "Han": (
            (0x3005, 0x3007),
            (0x3400, 0x4DBF),
            (0x4E00, 0x9FFF),
            (0xF900, 0xFAFF),
            (0x20000, 0x3FFFF),
        ),
    }
)
"""The script names ``language_mix_penalty`` accepts, each with its Unicode code point ranges
(inclusive): whole Unicode blocks, so a letter counts for the script of its block. Only letters
(``str.isalpha()``) are ever counted, so the digits, punctuation and symbols of a block do not
matter. A letter in no listed range (Ethiopic, Tamil, ...) is outside every choice."""

MARKUP = re.compile(r"</?[A-Za-z_][\w.:-]*/?>|<[|\uff5c][^<>|\uff5c]*[|\uff5c]>")
"""Markup that ``language_mix_penalty`` removes before counting: tags such as ``<think>``,
``</answer>``, ``<br/>`` and special tokens such as ``<|im_end|>`` (or with the fullwidth
bars U+FF5C of DeepSeek's ``end▁of▁sentence`` token). No match attempt reads past the next
``<``, so one pass is linear."""

_ASCII_LETTERS = bytes(range(ord("A"), ord("Z") + 1)) + bytes(range(ord("a"), ord("z") + 1))


@lru_cache(maxsize=SCRIPT_RANGES)
def _script_ranges(scripts: frozenset[str]) -> tuple[list[int], list[int]]:
    """``(starts, ends)`` of the merged ranges of ``scripts``, sorted, for a bisection."""
    starts: list[int] = []
    ends: list[int] = []
    for start, end in sorted(r for name in scripts for r in SCRIPTS[name]):
        if starts and start <= ends[-1] + 1:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(start)
            ends.append(end)
    return starts, ends


def count_foreign_letters(text: str, scripts: Sequence[str]) -> tuple[int, int]:
    """``(letters, letters outside scripts)``: letters are the characters of ``text`` for which
    ``str.isalpha()`` holds; each is inside when its code point lies in a range of
    :data:`SCRIPTS` of one of ``scripts``.

    Example:
        >>> count_foreign_letters("Paris (Париж), 42!", ["Latin"])
        (10, 5)
        >>> count_foreign_letters("東京は Tokyo", ["Han", "Hiragana", "Katakana"])
        (8, 5)
    """
    if text.isascii():  # ASCII letters are A-Z and a-z, all Latin
        letters = len(text) - len(text.encode("ascii").translate(None, _ASCII_LETTERS))
        return letters, 0 if "Latin" in scripts else letters
    starts, ends = _script_ranges(frozenset(scripts))
    letters = foreign = 0
    for char, count in Counter(text).items():
        if char.isalpha():
            letters += count
            code = ord(char)
            index = bisect_right(starts, code) - 1
            if index < 0 or code > ends[index]:
                foreign += count
    return letters, foreign


def strip_markup(text: str) -> str:
    """``text`` without :data:`MARKUP` (tags and special tokens).

    Example:
        >>> strip_markup("<think>hmm</think><answer>Paris</answer><|im_end|> a < b > c")
        'hmmParis a < b > c'
    """
    return MARKUP.sub("", text) if "<" in text else text


def _check_scripts(options: Mapping[str, Any]) -> None:
    scripts = options["scripts"]
    unknown = [name for name in scripts if name not in SCRIPTS]
    if unknown or not scripts:
        got = f"unknown script(s) {', '.join(map(repr, unknown))}" if unknown else "an empty list"
        raise InvalidOption(
            f"option 'scripts' must be a non-empty list of script names, got {got}; "
            f"valid names: {', '.join(SCRIPTS)}"
        )


@scorer(
    "language_mix_penalty",
    WILDCARD,
    ground_truth="raw",
    validate=_check_scripts,
    results=LANGUAGE_MIX_RESULTS,
)
def language_mix_penalty(
    response: str,
    ground_truth: Any,
    *,
    scripts: tuple[str, ...] = ("Latin",),
    penalty: Penalty = 1.0,
    text: TextPart = "response",
    extract: ExtractMode = "last",
) -> dict[str, Any]:
    """``-penalty`` times the share of letters outside ``scripts``; keys
    :data:`LANGUAGE_MIX_KEYS`.

    Letters are counted by :func:`count_foreign_letters` on the response or, with
    ``text="answer"``, on the answer (empty without one), after removing :data:`MARKUP`. No
    letters: share and score 0. The ground truth is ignored.
    """
    part = response if text == "response" else (_answer(response, extract) or "")
    letters, foreign = count_foreign_letters(strip_markup(part), scripts)
    share = foreign / letters if letters else 0.0
    return {
        "score": _penalty_score(-penalty * share),
        "letters": letters,
        "foreign_letters": foreign,
        "foreign_share": share,
    }
