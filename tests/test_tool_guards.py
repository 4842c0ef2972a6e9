"""Which tool responses count, and the opt-in guards of ``compute_score_tool``, case by case:
the pairing of responses with calls (verl's tool agent loop and Search-R1's loop), the formats,
and each guard's count and penalty."""

from __future__ import annotations

import json
from typing import Any

import pytest

import reward_plugins
from reward_plugins import InvalidOption
from reward_plugins.tool_trajectory import parse_trajectory

GOLDS = ["Paris"]
PARIS_DOC = "Doc 1(Title: Paris) Paris is the capital of France."
LYON_DOC = "Doc 1(Title: Lyon) Lyon is a city in France."
UNKNOWN_TOOL = '<tool_call>{"name": "calc", "arguments": {}}</tool_call>'


def call(query: str = "capital of France", **arguments: Any) -> str:
    body = json.dumps({"name": "search", "arguments": arguments or {"query": query}})
    return f"<tool_call>\n{body}\n</tool_call>"


def responses(*documents: str) -> str:
    """A tool turn as Qwen2.5's template renders consecutive tool messages."""
    blocks = "".join(f"\n<tool_response>\n{d}\n</tool_response>" for d in documents)
    return f"\nuser{blocks}\nassistant\n"


def score(text: str, **options: Any) -> dict[str, Any]:
    return reward_plugins.compute_score_tool("searchR1_nq", text, GOLDS, **options)


def counted(text: str, **options: Any) -> list[int | None]:
    """The call each response answers, in order (``None``: the model wrote it)."""
    return [r.call for r in parse_trajectory(text, **options).responses]


# --- which responses count ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pairs"),
    [
        # one call, its response
        (f"{call()}{responses(PARIS_DOC)}", [0]),
        # two calls in a turn, verl ran the first only (max_parallel_calls=1)
        (f"{call('a')}{call('b')}{responses(PARIS_DOC)}", [0]),
        # two calls, two responses, in order
        (f"{call('a')}{call('b')}{responses(LYON_DOC, PARIS_DOC)}", [0, 1]),
        # one call and two responses: the round holds a forged one, so none counts
        (f"{call()}{responses(LYON_DOC, PARIS_DOC)}", [None, None]),
        # the model wrote a tool turn before verl's: three blocks for one call
        (f"{call()}{responses(PARIS_DOC)}<answer>x</answer>{responses(LYON_DOC)}", [None, None]),
        # a call verl drops (invalid JSON) gets no response: the response answers the next call
        ('<tool_call>{"name": </tool_call>' + f"{call()}{responses(PARIS_DOC)}", [1]),
        # only a dropped call: the response answers nothing
        ('<tool_call>{"name": </tool_call>' + responses(PARIS_DOC), [None]),
        # a call to an unknown tool is executed (verl answers "Unknown function")
        (f"{UNKNOWN_TOOL}{responses('Unknown function')}", [0]),
        # a response in the model's own turn, then a real one
        (f"{call()}<tool_response>{PARIS_DOC}</tool_response>{responses(LYON_DOC)}", [None, 0]),
        # rounds: each call's responses come before the next call
        (f"{call('a')}{responses(LYON_DOC)}{call('b')}{responses(PARIS_DOC)}", [0, 1]),
        # Search-R1: <information> right after </search>, whitespace between
        (f"<search>q</search>\n\n<information>{PARIS_DOC}</information>", [0]),
        # text between: the model wrote it (Search-R1 cuts the model's text at </search>)
        (f"<search>q</search> so <information>{PARIS_DOC}</information>", [None]),
        # one <information> per search
        ("<search>q</search><information>a</information><information>b</information>", [0, None]),
        # a <tool_response> does not answer a <search>, nor <information> a <tool_call>
        (f"<search>q</search>{responses(PARIS_DOC)}", [None]),
        (f"{call()}<information>{PARIS_DOC}</information>", [None]),
    ],
)
def test_which_responses_answer_a_call(text: str, pairs: list[int | None]) -> None:
    assert counted(text) == pairs


def test_a_forged_response_is_never_retrieval_and_breaks_the_format() -> None:
    honest = f"{call()}{responses(PARIS_DOC)}<answer>Paris</answer>"
    forged = (
        f"{call()}{responses(LYON_DOC)}<information>{PARIS_DOC}</information><answer>Paris</answer>"
    )
    result = score(forged, retrieval_score=0.1)
    assert (result["retrieval_hit"], result["forged_responses"], result["format_valid"]) == (
        0.0,
        1,
        0.0,
    )
    assert result["score"] == 1.0  # the answer only: no retrieval paid
    assert score(honest, retrieval_score=0.1)["score"] == pytest.approx(1.1)
    assert score(forged, forged_response_penalty=0.3)["score"] == pytest.approx(0.7)


def test_tool_format_names_the_calls_the_loop_runs() -> None:
    pair = f"<search>capital</search>\n<information>{PARIS_DOC}</information><answer>Paris</answer>"
    anyway = score(pair, retrieval_score=0.1)
    assert (anyway["tool_calls"], anyway["retrieval_hit"], anyway["forged_responses"]) == (1, 1, 0)
    hermes = score(pair, retrieval_score=0.1, tool_format="hermes")
    assert (hermes["tool_calls"], hermes["retrieval_hit"], hermes["forged_responses"]) == (0, 0, 1)
    verl = f"{call()}{responses(PARIS_DOC)}<answer>Paris</answer>"
    search_r1 = score(verl, tool_format="search_r1")
    assert (search_r1["tool_calls"], search_r1["forged_responses"]) == (0, 1)
    assert score(verl, tool_format="hermes")["forged_responses"] == 0
    with pytest.raises(InvalidOption, match="tool_format"):
        score(verl, tool_format="chatml")


# --- the guards --------------------------------------------------------------------------------


def test_min_searches_counts_answered_valid_calls() -> None:
    options = {"min_searches": 2, "missing_search_penalty": 0.25}
    two = f"{call('a')}{responses(LYON_DOC)}{call('b')}{responses(PARIS_DOC)}<answer>Paris</answer>"
    assert (score(two, **options)["score"], score(two)["searches"]) == (1.0, 2)
    one = f"{call('a')}{responses(PARIS_DOC)}<answer>Paris</answer>"
    assert score(one, **options)["score"] == 0.75
    unanswered = f"{call('a')}{call('b')}{responses(PARIS_DOC)}<answer>Paris</answer>"
    assert score(unanswered, **options)["score"] == 0.75  # verl ran one of the two
    invalid = f"{call(q='a')}{responses('error')}<answer>Paris</answer>"
    result = score(invalid, **options)
    assert (result["searches"], result["unsearched"], result["score"]) == (0, 1.0, 0.5)


def test_repeated_queries_compare_normalized_queries() -> None:
    text = (
        f"{call('Capital of France?')}{responses(LYON_DOC)}"
        f"{call(query_list=['capital  of france', 'largest city of France'])}{responses(LYON_DOC)}"
        f"{call('the capital of France')}{responses(PARIS_DOC)}<answer>Paris</answer>"
    )
    result = score(text, repeated_query_penalty=0.1)
    # "capital  of france" and "the capital of France" repeat "Capital of France?" (SQuAD's
    # normalization drops articles, punctuation and case)
    assert (result["repeated_queries"], result["score"]) == (2, pytest.approx(0.8))
    assert score(text, repeated_query_penalty=0.1, normalizer="unicode")["repeated_queries"] == 1


def test_calls_beyond_the_free_budget_cost() -> None:
    calls = "".join(f"{call(f'q{i}')}{responses(LYON_DOC)}" for i in range(5))
    text = calls + "<answer>Paris</answer>"
    assert score(text)["extra_tool_calls"] == 3  # free_tool_calls defaults to 2
    assert score(text, extra_call_penalty=0.1)["score"] == pytest.approx(0.7)
    assert score(text, extra_call_penalty=0.1, free_tool_calls=5)["score"] == 1.0


def test_searching_after_answering_is_named_and_invalid() -> None:
    text = f"<answer>Paris</answer>{call()}{responses(PARIS_DOC)}<answer>Paris</answer>"
    result = score(text)
    assert (result["score"], result["searched_after_answer"], result["format_valid"]) == (
        1.0,
        1.0,
        0.0,
    )
    assert score(text, invalid_format_score=-0.2)["score"] == -0.2


@pytest.mark.parametrize(
    ("document", "answer", "grounded"),
    [
        (PARIS_DOC, "Paris", 1.0),  # the gold is in the response
        (LYON_DOC, "Paris", 0.0),  # recalled, not retrieved
        ("Doc 1 The capital is paris, france.", "Paris, France", 1.0),  # the answer itself
        ("Doc 1 Parisian cafes.", "Paris", 1.0),  # SubEM's rule, as retrieval_hit
    ],
)
def test_grounding(document: str, answer: str, grounded: float) -> None:
    text = f"{call()}{responses(document)}<answer>{answer}</answer>"
    result = score(text, answer_rule="subem", require_grounding=True, format_score=0.1)
    assert result["grounded"] == grounded
    assert result["score"] == (1.0 if grounded else 0.1)
    assert result["acc"] == 1.0  # correctness, grounded or not
    assert score(text, answer_rule="subem", format_score=0.1)["score"] == 1.0  # off by default


def test_grounding_needs_a_real_response() -> None:
    no_search = score("<answer>Paris</answer>", require_grounding=True)
    forged = score(f"<information>{PARIS_DOC}</information><answer>Paris</answer>")
    assert (no_search["grounded"], no_search["score"], forged["grounded"]) == (0.0, 0.0, 0.0)
    empty = score(f"{call()}{responses(LYON_DOC)}<answer></answer>", require_grounding=True)
    assert empty["grounded"] == 0.0  # an empty answer is in every text, so it grounds nothing


@pytest.mark.parametrize(
    "option",
    [
        "missing_search_penalty",
        "repeated_query_penalty",
        "extra_call_penalty",
        "forged_response_penalty",
    ],
)
def test_penalties_are_not_negative(option: str) -> None:
    with pytest.raises(InvalidOption, match=option):
        score("<answer>Paris</answer>", **{option: -0.1})


@pytest.mark.parametrize(("option", "value"), [("min_searches", -1), ("free_tool_calls", 1.5)])
def test_counts_are_whole_numbers(option: str, value: Any) -> None:
    with pytest.raises(InvalidOption, match=option):
        score("<answer>Paris</answer>", **{option: value})


def test_the_guard_keys_are_there_whatever_the_options() -> None:
    keys = (
        "searches",
        "unsearched",
        "repeated_queries",
        "extra_tool_calls",
        "forged_responses",
        "searched_after_answer",
        "grounded",
    )
    result = score("<answer>Paris</answer>")
    assert {key: result[key] for key in keys} == {
        "searches": 0,
        "unsearched": 1.0,
        "repeated_queries": 0,
        "extra_tool_calls": 0,
        "forged_responses": 0,
        "searched_after_answer": 0.0,
        "grounded": 0.0,
    }
