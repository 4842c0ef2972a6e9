"""Property-based tests (hypothesis) of the Search-R1 plugin, its routers and tag extraction."""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verl.utils.reward_score import search_r1_like_qa_em as verl_qa

import reward_plugins
from reward_plugins.extract import find_tag_spans, scan_tags
from reward_plugins.options import describe_value
from reward_plugins.plugins import search_r1
from reward_plugins.plugins.search_r1 import QA_RESULT_KEYS, SEARCH_R1_DATA_SOURCES

# Local settings (a global profile would change other modules' hypothesis tests too).
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WORDS = ("Paris", "paris", "the", "a", "an", "London", "New", "York", "city", "no", "yes", "")
ODD_CHARACTERS = " \n\t.,!?'\"-\u00a0\u3000\u200b\x1c\u2019。北京éİß"

words = st.sampled_from(WORDS)
odd_text = st.text(alphabet=st.sampled_from(ODD_CHARACTERS + "abcPT"), max_size=8)
answer_text = st.one_of(
    st.lists(st.one_of(words, odd_text), max_size=4).map(" ".join),
    st.text(max_size=12),
)
golds = st.lists(st.one_of(words, answer_text), max_size=3)
gold_container = st.sampled_from(("list", "tuple", "str"))

FRAGMENTS = (
    "<answer>",
    "</answer>",
    "<think>",
    "</think>",
    "<search>",
    "</search>",
    "<information>",
    "</information>",
    "<answer",
    "answer>",
    "</ answer>",
)
fragment = st.one_of(st.sampled_from(FRAGMENTS), answer_text, st.text(max_size=6))
responses = st.one_of(
    st.lists(fragment, max_size=14).map("".join),
    st.builds(
        lambda answer, count, tail: f"<answer>{answer}</answer>" * count + tail,
        answer_text,
        st.integers(0, 14),
        st.lists(st.sampled_from(FRAGMENTS[:2]), max_size=13).map("".join),
    ),
)
data_sources = st.sampled_from(SEARCH_R1_DATA_SOURCES)
positive = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)


def _target(values: list[str], container: str) -> Any:
    if container == "tuple":
        return tuple(values)
    if container == "str" and len(values) == 1:
        return values[0]
    return list(values)


def _quiet(function: Any, *args: Any, **kwargs: Any) -> Any:
    with contextlib.redirect_stdout(io.StringIO()):
        return function(*args, **kwargs)


@PROPERTY
@given(responses, golds, gold_container)
def test_plugin_functions_equal_verl(response: str, values: list[str], container: str) -> None:
    ground_truth = {"target": _target(values, container)}
    for ours, reference in (
        (search_r1.compute_score, verl_qa.compute_score),
        (search_r1.compute_score_subem, verl_qa.compute_score_subem),
    ):
        got, expected = ours(response, ground_truth), _quiet(reference, response, ground_truth)
        assert type(got) is type(expected) and got == expected
    assert search_r1.extract_solution(response) == verl_qa.extract_solution(response)
    assert search_r1.count_answer_tags(response) == verl_qa.count_answer_tags(response)


@PROPERTY
@given(st.text(max_size=40), golds)
def test_text_functions_equal_verl(text: str, values: list[str]) -> None:
    assert search_r1.normalize_answer(text) == verl_qa.normalize_answer(text)
    for ours, reference in (
        (search_r1.em_check, verl_qa.em_check),
        (search_r1.subem_check, verl_qa.subem_check),
    ):
        assert ours(text, values) == reference(text, values)
        assert type(ours(text, values)) is int


@PROPERTY
@given(
    responses,
    golds,
    positive,
    positive,
    st.integers(1, 15),  # max_answer_tags >= 1: 0 would penalize every correct answer
    st.floats(min_value=0.0, max_value=1.0),
    st.sampled_from(("last", "first")),
)
def test_em_reward_takes_one_of_four_values(
    response: str,
    values: list[str],
    format_score: float,
    score: float,
    max_answer_tags: int,
    spam_factor: float,
    extract: str,
) -> None:
    options = {
        "format_score": format_score,
        "score": score,
        "max_answer_tags": max_answer_tags,
        "spam_factor": spam_factor,
        "extract": extract,
    }
    reward = search_r1.compute_score(response, {"target": values}, **options)
    answer, opening, closing = scan_tags(response, "answer", extract)
    if answer is None:
        assert reward == 0 and type(reward) is int
    else:
        assert reward in (format_score, score, score * spam_factor)
    routed = reward_plugins.compute_score("searchR1_nq", response, values, **options)
    assert routed["score"] == float(reward)
    assert routed["answer_tags"] == max(opening, closing)
    if routed["spam_penalized"]:
        assert routed["em"] == 1.0 and max(opening, closing) > max_answer_tags
        assert routed["score"] == score * spam_factor


@PROPERTY
@given(
    responses,
    st.one_of(
        st.builds(lambda v: {"max_answer_tags": v}, st.integers(max_value=0)),
        st.builds(
            lambda v: {"spam_factor": v},
            st.one_of(
                st.floats(max_value=0.0, exclude_max=True),
                st.floats(min_value=1.0, exclude_min=True),
                st.floats(allow_nan=True).filter(lambda v: v != v),
            ),
        ),
    ),
)
def test_out_of_range_options_are_refused_everywhere(
    response: str, options: dict[str, Any]
) -> None:
    """max_answer_tags < 1 and spam_factor outside [0, 1] (or NaN) are refused by the plugin
    functions and the routers alike, on every response, before anything is scored."""
    ((name, value),) = options.items()
    expected = "an int >= 1" if name == "max_answer_tags" else "a finite number in [0, 1]"
    calls = [
        (search_r1.compute_score, lambda: search_r1.compute_score(response, ["x"], **options)),
        (
            search_r1.compute_score_subem,
            lambda: search_r1.compute_score_subem(response, ["x"], **options),
        ),
    ]
    calls += [
        (router, lambda router=router: router("searchR1_nq", response, ["x"], **options))
        for router in (
            reward_plugins.compute_score,
            reward_plugins.compute_score_subem,
            reward_plugins.compute_score_f1,
        )
    ]
    for function, call in calls:
        with pytest.raises(reward_plugins.InvalidOption) as caught:
            call()
        assert str(caught.value).startswith(
            f"{function.__name__}: option {name!r} must be {expected}, got {describe_value(value)}"
        )


@PROPERTY
@given(
    responses,
    st.sampled_from(("format_score", "score")),
    st.one_of(
        st.floats(min_value=1e6, exclude_min=True),
        st.floats(max_value=-1e6, exclude_max=True),
        st.floats(allow_nan=True).filter(lambda v: v != v),
    ),
)
def test_router_score_options_are_finite_and_bounded(
    response: str, name: str, value: float
) -> None:
    """Routers refuse a score option outside [-1e6, 1e6] or NaN; the verl-compatible plugin
    function passes format_score/score through as verl does."""
    for router in (
        reward_plugins.compute_score,
        reward_plugins.compute_score_subem,
        reward_plugins.compute_score_f1,
    ):
        with pytest.raises(reward_plugins.InvalidOption) as caught:
            router("searchR1_nq", response, ["x"], **{name: value})
        assert str(caught.value).startswith(
            f"{router.__name__}: option {name!r} must be a finite number in [-1e+06, 1e+06], "
            "got float: "
        )
    search_r1.compute_score(response, ["x"], **{name: value})  # no error


@PROPERTY
@given(responses, golds, positive, positive)
def test_subem_is_at_least_em(response: str, values: list[str], low: float, high: float) -> None:
    format_score, score = min(low, high), max(low, high)
    truth = {"target": values}
    em = search_r1.compute_score(response, truth, format_score=format_score, score=score)
    subem = search_r1.compute_score_subem(response, truth, format_score=format_score, score=score)
    assert subem >= em
    penalized = search_r1.compute_score_subem(
        response, truth, format_score=format_score, score=score, penalize_subem=True
    )
    assert subem >= penalized
    assert penalized in (subem, score * 0.25)
    if format_score == 0.0:  # then a penalized SubEM match still pays at least EM
        assert penalized >= em


@PROPERTY
@given(data_sources, responses, golds)
def test_router_result_invariants(source: str, response: str, values: list[str]) -> None:
    results = [
        router(source, response, {"target": values})
        for router in (
            reward_plugins.compute_score,
            reward_plugins.compute_score_subem,
            reward_plugins.compute_score_f1,
        )
    ]
    em, subem, f1 = results
    for result in results:
        assert tuple(result) == QA_RESULT_KEYS
        assert all(type(value) in (int, float, bool) for value in result.values())
        assert 0.0 <= result["f1"] <= 1.0
        assert result["em"] <= result["subem"]
        if not result["answer_found"]:
            assert result["score"] == result["em"] == result["subem"] == result["f1"] == 0.0
    # the evaluation is shared; only the reward rule and acc differ
    for key in ("em", "subem", "f1", "answer_found", "answer_tags"):
        assert em[key] == subem[key] == f1[key]
    assert (em["acc"], subem["acc"], f1["acc"]) == (em["em"], em["subem"], em["em"])
    assert em["score"] <= subem["score"]


plain_answer = st.lists(st.sampled_from((*WORDS[:-1], "Paris!", "U.S.", "x y")), max_size=5).map(
    " ".join
)


@PROPERTY
@given(plain_answer, plain_answer)
def test_f1_is_symmetric(left: str, right: str) -> None:
    one = reward_plugins.compute_score_f1("searchR1_nq", f"<answer>{left}</answer>", [right])
    two = reward_plugins.compute_score_f1("searchR1_nq", f"<answer>{right}</answer>", [left])
    assert one["f1"] == two["f1"]


@PROPERTY
@given(st.lists(st.tuples(data_sources, responses, golds), max_size=6))
def test_batch_equals_rows(rows: list[tuple[str, str, list[str]]]) -> None:
    sources = [row[0] for row in rows]
    texts = [row[1] for row in rows]
    truths = [{"target": row[2]} for row in rows]
    assert reward_plugins.compute_score_batch(sources, texts, truths) == [
        reward_plugins.compute_score(*row) for row in zip(sources, texts, truths, strict=True)
    ]


SOUP_TOKENS = ("<answer>", "</answer>", "<answer", "answer>", "</", "<", ">", "x", " ", "\n")
soups = st.lists(st.one_of(st.sampled_from(SOUP_TOKENS), st.text(max_size=3)), max_size=20).map(
    "".join
)
ANSWER_PATTERN = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


@settings(PROPERTY, max_examples=1000)
@given(soups)
def test_extraction_equals_regex(text: str) -> None:
    spans = [match.group(1) for match in ANSWER_PATTERN.finditer(text)]
    counts = (text.count("<answer>"), text.count("</answer>"))
    assert find_tag_spans(text) == spans
    assert scan_tags(text, "answer", "last") == (spans[-1].strip() if spans else None, *counts)
    assert scan_tags(text, "answer", "first") == (spans[0].strip() if spans else None, *counts)
