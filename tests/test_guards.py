"""The opt-in answer guards, on and off, for every QA scorer (plugin function and router).

Guards: ``subem_word_boundary``, ``max_answer_words``, ``reject_empty_gold``, ``normalizer``.
Expected rewards are worked by hand from each guard's rule (the table in
``docs/reward-hacks.md``) and the decision tables upstream: verl's
``verl/utils/reward_score/search_r1_like_qa_em.py`` (no answer: 0; a match: ``score``;
otherwise ``format_score``) and, for ``compute_score_format``, ``compute_score_em`` in
Search-R1's ``verl/utils/reward_score/qa_em_format.py``. The property tests compare with oracles
written here from the same rules (SQuAD v1.1 normalization and token F1, as in the official
``evaluate-v1.1.py``), sharing no code with ``reward_plugins``.

Settings: the QA scorers run with ``format_score=0.1`` so that "no match paid" (0.1) differs from
"no answer" (0); ``compute_score_format`` runs with Search-R1's v0.3 scores (s=0.2, f=0.1) on a
valid trajectory ``<think>t</think><answer>...</answer>``, so a wrong answer gets s = 0.2.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reward_plugins
from reward_plugins import InvalidGroundTruth, InvalidOption
from reward_plugins.plugins import search_r1

SCORERS = ("compute_score", "compute_score_subem", "compute_score_f1", "compute_score_format")
VIAS = ("plugin", "router")
QA_SETTING = {"format_score": 0.1}
FORMAT_SETTING = {"structure_format_score": 0.2, "final_format_score": 0.1}
PARIS_FULLWIDTH = "\uff30\uff41\uff52\uff49\uff53"  # FULLWIDTH LATIN "Paris"
RIGHT_SINGLE_QUOTE = "\u2019"
IDEOGRAPHIC_FULL_STOP = "\u3002"


def _solution(scorer: str, answer: str) -> str:
    if scorer == "compute_score_format":
        return f"<think>t</think><answer>{answer}</answer>"
    return f"<answer>{answer}</answer>"


def _call(scorer: str, via: str, solution: str, golds: list[str], **options: Any) -> Any:
    setting = FORMAT_SETTING if scorer == "compute_score_format" else QA_SETTING
    if via == "plugin":
        return getattr(search_r1, scorer)(solution, {"target": golds}, **setting, **options)
    return getattr(reward_plugins, scorer)("searchR1_nq", solution, golds, **setting, **options)


def reward(scorer: str, via: str, answer: str, golds: list[str], **options: Any) -> float:
    result = _call(scorer, via, _solution(scorer, answer), golds, **options)
    return result["score"] if via == "router" else result


class GuardCase(NamedTuple):
    name: str
    guard: dict[str, Any]
    golds: list[str]
    answer: str
    expected: dict[str, tuple[float, float]]
    """Per scorer: (reward with the guard off, reward with it on)."""


_ALL_ONE_OFF = {scorer: (1.0, 1.0) for scorer in SCORERS}

GUARD_CASES = [
    # --- subem_word_boundary: "yes" is a character substring of "yesterday", not a token.
    GuardCase(
        "word boundary: yesterday",
        {"subem_word_boundary": True},
        ["yes"],
        "yesterday",
        {
            "compute_score": (0.1, 0.1),
            "compute_score_subem": (1.0, 0.1),
            "compute_score_f1": (0.1, 0.1),
            "compute_score_format": (0.2, 0.2),
        },
    ),
    GuardCase(
        "word boundary: legitimate 'Yes, it is.'",
        {"subem_word_boundary": True},
        ["yes"],
        "Yes, it is.",
        {
            "compute_score": (0.1, 0.1),
            "compute_score_subem": (1.0, 1.0),
            "compute_score_f1": (0.5, 0.5),  # P = 1/3, R = 1
            "compute_score_format": (0.2, 0.2),
        },
    ),
    # "parislondonberlin" (commas deleted by the normalization) is one token.
    GuardCase(
        "word boundary: run-together enumeration",
        {"subem_word_boundary": True},
        ["Paris"],
        "Paris,London,Berlin",
        {
            "compute_score": (0.1, 0.1),
            "compute_score_subem": (1.0, 0.1),
            "compute_score_f1": (0.1, 0.1),
            "compute_score_format": (0.2, 0.2),
        },
    ),
    # --- max_answer_words: words of the extracted answer, split on whitespace.
    GuardCase(
        "max words: 5-word exact answer, limit 4",
        {"max_answer_words": 4},
        ["Paris is the capital city"],
        "Paris is the capital city",
        {
            "compute_score": (1.0, 0.1),
            "compute_score_subem": (1.0, 0.1),
            "compute_score_f1": (1.0, 0.1),
            "compute_score_format": (1.0, 0.2),
        },
    ),
    GuardCase(
        "max words: 5-word exact answer, limit 5 (boundary kept)",
        {"max_answer_words": 5},
        ["Paris is the capital city"],
        "Paris is the capital city",
        _ALL_ONE_OFF,
    ),
    GuardCase(
        "max words: enumeration",
        {"max_answer_words": 3},
        ["Paris"],
        "It is Paris, London, Berlin",
        {
            "compute_score": (0.1, 0.1),
            "compute_score_subem": (1.0, 0.1),
            "compute_score_f1": (0.2 / 0.6, 0.1),  # P = 1/5, R = 1: F1 = 1/3
            "compute_score_format": (0.2, 0.2),
        },
    ),
    GuardCase(
        "max words: legitimate 'Paris, France'",
        {"max_answer_words": 3},
        ["Paris"],
        "Paris, France",
        {
            "compute_score": (0.1, 0.1),
            "compute_score_subem": (1.0, 1.0),
            "compute_score_f1": (2 / 3, 2 / 3),
            "compute_score_format": (0.2, 0.2),
        },
    ),
    # --- reject_empty_gold: "the" normalizes to "", which is a substring of everything and
    # equal to an empty answer.
    GuardCase(
        "empty gold: any answer",
        {"reject_empty_gold": True},
        ["the", "Paris"],
        "Lyon",
        {
            "compute_score": (0.1, 0.1),
            "compute_score_subem": (1.0, 0.1),
            "compute_score_f1": (0.1, 0.1),
            "compute_score_format": (0.2, 0.2),
        },
    ),
    GuardCase(
        "empty gold: empty answer",
        {"reject_empty_gold": True},
        ["the", "Paris"],
        "",
        {
            "compute_score": (1.0, 0.1),
            "compute_score_subem": (1.0, 0.1),
            "compute_score_f1": (0.1, 0.1),  # SQuAD F1 of two empty token lists is 0
            "compute_score_format": (1.0, 0.2),
        },
    ),
    GuardCase(
        "empty gold: legitimate 'Paris'",
        {"reject_empty_gold": True},
        ["the", "Paris"],
        "Paris",
        _ALL_ONE_OFF,
    ),
    # --- normalizer="unicode": full-width, CJK and curly-quote answers match.
    GuardCase(
        "unicode: full-width Paris",
        {"normalizer": "unicode"},
        ["Paris"],
        PARIS_FULLWIDTH,
        {
            "compute_score": (0.1, 1.0),
            "compute_score_subem": (0.1, 1.0),
            "compute_score_f1": (0.1, 1.0),
            "compute_score_format": (0.2, 1.0),
        },
    ),
    GuardCase(
        "unicode: ideographic full stop",
        {"normalizer": "unicode"},
        ["北京"],
        "北京" + IDEOGRAPHIC_FULL_STOP,
        {
            "compute_score": (0.1, 1.0),
            "compute_score_subem": (1.0, 1.0),  # "北京" is a substring of "北京。" already
            "compute_score_f1": (0.1, 1.0),
            "compute_score_format": (0.2, 1.0),
        },
    ),
    GuardCase(
        "unicode: curly apostrophe",
        {"normalizer": "unicode"},
        ["O'Neil"],
        f"O{RIGHT_SINGLE_QUOTE}Neil",
        {
            "compute_score": (0.1, 1.0),
            "compute_score_subem": (0.1, 1.0),
            "compute_score_f1": (0.1, 1.0),
            "compute_score_format": (0.2, 1.0),
        },
    ),
    GuardCase(
        "unicode: legitimate 'Paris'", {"normalizer": "unicode"}, ["Paris"], "Paris", _ALL_ONE_OFF
    ),
    # The unicode normalizer is language-neutral: it keeps English articles, so an answer
    # that matched only because "the" was dropped no longer matches.
    GuardCase(
        "unicode: articles are kept",
        {"normalizer": "unicode"},
        ["Eiffel Tower"],
        "The Eiffel Tower",
        {
            "compute_score": (1.0, 0.1),
            "compute_score_subem": (1.0, 1.0),
            "compute_score_f1": (1.0, 0.8),  # P = 2/3, R = 1
            "compute_score_format": (1.0, 0.2),
        },
    ),
]


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("scorer", SCORERS)
@pytest.mark.parametrize("case", GUARD_CASES, ids=lambda case: case.name)
def test_guard_off_and_on(case: GuardCase, scorer: str, via: str) -> None:
    off, on = case.expected[scorer]
    assert reward(scorer, via, case.answer, case.golds) == pytest.approx(off, abs=1e-12)
    assert reward(scorer, via, case.answer, case.golds, **case.guard) == pytest.approx(
        on, abs=1e-12
    )


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("scorer", SCORERS)
def test_every_guard_at_once_keeps_a_legitimate_answer(scorer: str, via: str) -> None:
    guards = {
        "subem_word_boundary": True,
        "max_answer_words": 3,
        "reject_empty_gold": True,
        "normalizer": "unicode",
    }
    assert reward(scorer, via, "Paris", ["", "Paris"], **guards) == 1.0
    # and none of them turns a missing answer into anything but 0
    no_answer = "<think>t</think>" if scorer == "compute_score_format" else "no tags"
    result = _call(scorer, via, no_answer, ["", "Paris"], **guards)
    assert (result["score"] if via == "router" else result) == 0


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("scorer", SCORERS)
def test_only_empty_golds_with_reject_empty_gold_is_invalid(scorer: str, via: str) -> None:
    golds = ["", "the", "?!", " "]
    off = {
        "compute_score": 0.1,
        "compute_score_subem": 1.0,
        "compute_score_f1": 0.1,
        "compute_score_format": 0.2,
    }
    assert reward(scorer, via, "Paris", golds) == off[scorer]
    with pytest.raises(InvalidGroundTruth, match="reject_empty_gold"):
        reward(scorer, via, "Paris", golds, reject_empty_gold=True)


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("scorer", SCORERS)
def test_bad_guard_values_raise(scorer: str, via: str) -> None:
    with pytest.raises(ValueError, match="ascii"):
        reward(scorer, via, "Paris", ["Paris"], normalizer="ascii")
    for bad in ("3", 3.0, True):
        with pytest.raises(TypeError, match="max_answer_words"):
            reward(scorer, via, "Paris", ["Paris"], max_answer_words=bad)


def test_guards_show_in_the_router_dict() -> None:
    """``subem`` follows the word-boundary rule; ``acc`` is 0 when a match is not paid."""
    for scorer in SCORERS:
        route = getattr(reward_plugins, scorer)
        setting = FORMAT_SETTING if scorer == "compute_score_format" else QA_SETTING
        solution = _solution(scorer, "yesterday")
        assert route("searchR1_nq", solution, "yes", **setting)["subem"] == 1.0
        bounded = route("searchR1_nq", solution, "yes", subem_word_boundary=True, **setting)
        assert bounded["subem"] == 0.0
        long = _solution(scorer, "Paris is the capital city")
        capped = route(
            "searchR1_nq", long, "Paris is the capital city", max_answer_words=4, **setting
        )
        assert (capped["em"], capped["acc"]) == (1.0, 0.0)


# --------------------------------------------------------------- retrieval and the guards

_WRONG_WITH_SEARCH = (
    "<think>t</think><search>q</search><information>{doc}</information>"
    "<think>t</think><answer>Lyon</answer>"
)
RETRIEVAL = {"structure_format_score": 0.2, "final_format_score": 0.1, "retrieval_score": 0.1}


def test_unicode_normalizer_applies_to_the_retrieval_check() -> None:
    solution = _WRONG_WITH_SEARCH.format(doc=f"{PARIS_FULLWIDTH} is the capital.")
    plain = reward_plugins.compute_score_format("searchR1_nq", solution, "Paris", **RETRIEVAL)
    folded = reward_plugins.compute_score_format(
        "searchR1_nq", solution, "Paris", normalizer="unicode", **RETRIEVAL
    )
    assert (plain["score"], plain["retrieval_hit"]) == (pytest.approx(0.2), 0.0)
    assert (folded["score"], folded["retrieval_hit"]) == (pytest.approx(0.3), 1.0)


def test_reject_empty_gold_applies_to_the_retrieval_check() -> None:
    """An empty gold is a substring of every information block; dropped, it pays no retrieval.

    With golds ["", "Paris"] and a retrieved block without "Paris", a wrong answer on a valid
    trajectory gets s + r = 0.3 by default (upstream's behaviour) and s = 0.2 with the guard.
    """
    solution = _WRONG_WITH_SEARCH.format(doc="Lyon is a city in France.")
    golds = ["", "Paris"]
    route = reward_plugins.compute_score_format
    off = route("searchR1_nq", solution, golds, **RETRIEVAL)
    assert (off["score"], off["retrieval_hit"]) == (pytest.approx(0.3), 1.0)
    on = route("searchR1_nq", solution, golds, reject_empty_gold=True, **RETRIEVAL)
    assert (on["score"], on["retrieval_hit"]) == (pytest.approx(0.2), 0.0)
    plugin = search_r1.compute_score_format(
        solution, {"target": golds}, reject_empty_gold=True, **RETRIEVAL
    )
    assert plugin == pytest.approx(0.2)


# --------------------------------------------------------------- properties against oracles


def _squad(text: str) -> str:
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def _whole_tokens(answer: str, gold: str) -> bool:
    """The gold's tokens occur as a contiguous run of the answer's tokens (empty: both empty)."""
    answer_tokens, gold_tokens = _squad(answer).split(), _squad(gold).split()
    if not gold_tokens:
        return not answer_tokens
    width = len(gold_tokens)
    return any(
        answer_tokens[i : i + width] == gold_tokens for i in range(len(answer_tokens) - width + 1)
    )


def _f1(answer: str, gold: str) -> float:
    answer_tokens, gold_tokens = _squad(answer).split(), _squad(gold).split()
    same = sum((Counter(answer_tokens) & Counter(gold_tokens)).values())
    if not same:
        return 0.0
    precision, recall = same / len(answer_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


_WORDS = ["Paris", "paris", "yes", "yesterday", "no", "not", "the", "a", "1", "1990", "", "!"]
_text = st.lists(st.sampled_from(_WORDS), max_size=5).map(" ".join) | st.sampled_from(
    ["Paris,London", "The Paris!", "an", "  "]
)
_golds = st.lists(_text, min_size=1, max_size=3)
_guards = st.fixed_dictionaries(
    {
        "subem_word_boundary": st.booleans(),
        "max_answer_words": st.none() | st.integers(0, 4),
        "reject_empty_gold": st.booleans(),
    }
)


def _expected(rule: str, answer: str, golds: list[str], guards: dict[str, Any]) -> Any:
    """Reward by the issue's rules, or the exception type expected."""
    if guards["reject_empty_gold"]:
        golds = [gold for gold in golds if _squad(gold)]
        if not golds:
            return InvalidGroundTruth
    limit = guards["max_answer_words"]
    if limit is not None and len(answer.split()) > limit:
        return 0.1
    if rule == "em":
        matched = any(_squad(gold) == _squad(answer) for gold in golds)
        return 1.0 if matched else 0.1
    if rule == "subem":
        if guards["subem_word_boundary"]:
            matched = any(_whole_tokens(answer, gold) for gold in golds)
        else:
            matched = any(_squad(gold) in _squad(answer) for gold in golds)
        return 1.0 if matched else 0.1
    best = max(_f1(answer, gold) for gold in golds)
    return best if best > 0 else 0.1


@settings(max_examples=400, deadline=None)
@given(answer=_text, golds=_golds, guards=_guards, rule=st.sampled_from(["em", "subem", "f1"]))
def test_guards_match_the_rules_on_generated_answers(
    answer: str, golds: list[str], guards: dict[str, Any], rule: str
) -> None:
    function = {
        "em": search_r1.compute_score,
        "subem": search_r1.compute_score_subem,
        "f1": search_r1.compute_score_f1,
    }[rule]
    expected = _expected(rule, answer, golds, guards)
    solution = f"<answer>{answer}</answer>"
    if expected is InvalidGroundTruth:
        with pytest.raises(InvalidGroundTruth):
            function(solution, {"target": golds}, format_score=0.1, **guards)
        return
    got = function(solution, {"target": golds}, format_score=0.1, **guards)
    assert got == pytest.approx(expected, abs=1e-12)


def test_word_boundary_applies_to_the_retrieval_check() -> None:
    """Gold "yes" inside "yesterday" in a retrieved block is no retrieval hit under the guard."""
    response = (
        "<think>t</think><search>q</search><information>It rained yesterday.</information>"
        "<think>t</think><answer>no</answer>"
    )
    options = {"structure_format_score": 0.2, "retrieval_score": 0.1}
    assert search_r1.compute_score_format(response, ["yes"], **options) == 0.30000000000000004
    guarded = search_r1.compute_score_format(response, ["yes"], subem_word_boundary=True, **options)
    assert guarded == 0.2


def test_negative_max_answer_words_is_rejected() -> None:
    message = "compute_score: option 'max_answer_words' must be an int >= 0 or None, got int: -1"
    with pytest.raises(InvalidOption) as caught:
        search_r1.compute_score("<answer>Paris</answer>", ["Paris"], max_answer_words=-1)
    assert str(caught.value) == message
    with pytest.raises(InvalidOption) as caught:
        reward_plugins.compute_score(
            "searchR1_nq", "<answer>Paris</answer>", ["Paris"], max_answer_words=-1
        )
    assert str(caught.value) == message
