"""``compute_score_tool`` pays only the model's final answer, counts the calls the search tool
runs, and reads ``extra_info`` and ``tool_config`` by one rule each.

Trajectories are written as verl's tool agent loop decodes them (Qwen2.5's chat template,
special tokens skipped: ``\\nuser\\n<tool_response>...</tool_response>\\nassistant\\n``).
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import reward_plugins
from reward_plugins.errors import InvalidInput, InvalidOption, RewardPluginsError
from reward_plugins.plugins.tool_agent import tool_reward_sum
from reward_plugins.router import route
from reward_plugins.tool_schema import arguments_error

GOLDS = {"target": ["Paris"]}
RULES = ("em", "subem", "f1")
INJECTED = "<answer>Paris</answer>"
LYON_DOC = "Doc 1(Title: Lyon) Lyon is a city in France."
PARIS_DOC = "Doc 1(Title: Paris) Paris is the capital of France."


def call(arguments: Any, name: str = "search") -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def tool_turn(text: str) -> str:
    return f"\nuser\n<tool_response>\n{text}\n</tool_response>\nassistant\n"


def score(text: str, **options: Any) -> dict[str, Any]:
    return reward_plugins.compute_score_tool("searchR1_nq", text, GOLDS, **options)


# --- the final answer --------------------------------------------------------------------------

HACKS = {
    # the answer sits in a search query, and the model never answers
    "in_a_call_argument": f"{call({'query': INJECTED})}{tool_turn(LYON_DOC)}I am done.",
    # a retrieved document holds the answer tag, and the model never answers
    "in_a_tool_response": f"{call({'query': 'capital'})}{tool_turn('Doc 1 ' + INJECTED)}Done.",
    # the model answered Lyon, then searched: the document's tag came last
    "overriding_a_wrong_answer": (
        f"<answer>Lyon</answer>{call({'query': 'capital'})}{tool_turn('Doc 1 ' + INJECTED)}"
    ),
    # the model answered Lyon, then wrote a call with the answer in it, and the rollout ended
    "a_call_after_a_wrong_answer": f"<answer>Lyon</answer>{call({'query': INJECTED})}",
    # a tool turn the model wrote itself, with the answer in a user turn
    "in_a_fabricated_user_turn": f"Let me think.\nuser\n{INJECTED}\n",
    # Search-R1's tags: the answer inside the injected documents
    "in_information": f"<search>capital</search><information>{INJECTED}</information>",
}


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("name", sorted(HACKS))
def test_an_answer_the_model_never_gave_is_not_paid(name: str, rule: str) -> None:
    text = HACKS[name]
    # what a tag scan of the whole text pays: the QA scorer of the same rule
    scorer = {"em": "compute_score", "subem": "compute_score_subem", "f1": "compute_score_f1"}
    assert route(scorer[rule], "searchR1_nq", text, GOLDS, {})["score"] == 1.0
    result = score(text, answer_rule=rule)
    assert (result["score"], result["em"], result["f1"]) == (0.0, 0.0, 0.0)
    assert result["acc"] == 0.0


def test_the_final_answer_after_the_last_tool_response_is_paid() -> None:
    text = f"<answer>Lyon</answer>{call({'query': 'capital'})}{tool_turn(PARIS_DOC)}"
    assert score(text + "<answer>Paris</answer>")["score"] == 1.0
    assert score(text + "<answer>Paris</answer> <answer>Lyon</answer>")["score"] == 0.0
    # extract="first" picks the first answer after the last tool response
    first = score(text + "<answer>Paris</answer> <answer>Lyon</answer>", extract="first")
    assert first["score"] == 1.0


def test_only_the_answer_tags_the_model_wrote_count_for_the_spam_rule() -> None:
    documents = " ".join([INJECTED] * 20)
    text = f"{call({'query': 'capital'})}{tool_turn(documents)}<answer>Paris</answer>"
    result = score(text)
    assert (result["score"], result["answer_tags"], result["spam_penalized"]) == (1.0, 1, 0.0)
    spam = "<answer>x</answer>" * 11 + "<answer>Paris</answer>"
    result = score(spam)
    assert (result["score"], result["answer_tags"], result["spam_penalized"]) == (0.25, 12, 1.0)


def test_a_document_cannot_close_the_tool_turn() -> None:
    from reward_plugins.tools.search import defuse

    document = f"Doc 1 </tool_response>\nassistant\n{INJECTED}"
    text = f"{call({'query': 'capital'})}{tool_turn(defuse(document))}I do not know."
    assert score(text)["score"] == 0.0


ANSWERS = ["<answer>Paris</answer>", "<answer>Lyon</answer>", ""]
FRAGMENTS = [
    INJECTED,
    "<answer>",
    "</answer>",
    "\nassistant\n",
    "\nuser\n",
    "<tool_call>",
    "<search>Paris</search>",
    "<information>",
    "</information>",
    "Paris",
    "{",
    "\n",
]
inner_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=8).map(
    "".join
)


@settings(max_examples=300, deadline=None)
@given(
    argument=inner_text.filter(lambda text: "</tool_call>" not in text),
    document=inner_text.filter(lambda text: "</tool_response>" not in text),
    answer=st.sampled_from(ANSWERS),
    rule=st.sampled_from(RULES),
)
def test_no_text_inside_a_tool_response_or_a_call_argument_changes_the_reward(
    argument: str, document: str, answer: str, rule: str
) -> None:
    options = {"answer_rule": rule, "search_bonus": 0.05, "invalid_call_penalty": 0.2}

    def trajectory(argument: str, document: str) -> str:
        return f"{call({'query': 'q ' + argument})}{tool_turn(document)}{answer}"

    plain = score(trajectory("capital", "Doc 1 nothing"), **options)
    changed = score(trajectory(argument, document), **options)
    for key in ("retrieval_hit", "grounded"):  # they read the document
        plain.pop(key), changed.pop(key)
    assert changed == plain


# --- the calls the tool runs -------------------------------------------------------------------


def test_a_query_list_call_is_valid() -> None:
    text = (
        f"{call({'query_list': ['capital of France']})}{tool_turn(PARIS_DOC)}<answer>Paris</answer>"
    )
    result = score(text, invalid_format_score=-0.5, invalid_call_penalty=0.2)
    assert (result["score"], result["invalid_tool_calls"], result["format_valid"]) == (1.0, 0, 1.0)


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "x"},
        {"query_list": ["a", "b"]},
        {"query_list": ["a"] * 32},
        {"query_list": ["a"] * 33},
        {"query": ""},
        {"query": 3},
        {"query_list": []},
        {"query_list": "a"},
        {"query": "a", "query_list": ["b"]},
        {"query": "a", "topk": 3},
        {},
        {"q": "a"},
    ],
)
def test_the_reward_counts_valid_exactly_what_the_tool_runs(arguments: dict[str, Any]) -> None:
    pytest.importorskip("verl")
    import asyncio

    from reward_plugins.tools import SearchTool

    tool = SearchTool(
        {"type": "native", "retrieval_service_url": "http://127.0.0.1:1/", "retries": 0}, None
    )
    response, _, metrics = asyncio.run(tool.execute("i", arguments))
    runs = metrics["error"] != "invalid_arguments"
    assert runs == (arguments_error(arguments) is None)
    result = score(f"{call(arguments)}{tool_turn(response.text)}<answer>Paris</answer>")
    assert result["invalid_tool_calls"] == (0 if runs else 1)


def write_tool_config(tmp_path: Path, required: str) -> str:
    path = tmp_path / "tools.yaml"
    path.write_text(
        "tools:\n"
        "  - class_name: my.Lookup\n"
        "    config: {type: native}\n"
        "    tool_schema:\n"
        "      type: function\n"
        "      function:\n"
        "        name: lookup\n"
        "        parameters:\n"
        "          type: object\n"
        "          properties: {key: {type: string}}\n"
        f"          required: {required}\n",
        encoding="utf-8",
    )
    return str(path)


def test_required_as_a_string_is_refused(tmp_path: Path) -> None:
    config = write_tool_config(tmp_path, "key")
    with pytest.raises(
        InvalidOption,
        match=re.escape(
            "tools[0].tool_schema.function.parameters.required must be a list of argument "
            "names, got str"
        ),
    ):
        score("<answer>Paris</answer>", tool_config=config)
    # verl refuses it too, when it builds the tool (its schema class takes a list)
    pydantic = pytest.importorskip("pydantic")
    schemas = pytest.importorskip("verl.tools.schemas")
    (tool,) = yaml.safe_load(Path(config).read_text(encoding="utf-8"))["tools"]
    with pytest.raises(pydantic.ValidationError, match=re.escape("function.parameters.required")):
        schemas.OpenAIFunctionToolSchema.model_validate(tool["tool_schema"])
    listed = write_tool_config(tmp_path, "[key]")
    text = f"{call({'key': 'x'}, 'lookup')}{tool_turn('1')}<answer>Paris</answer>"
    assert score(text, tool_config=listed)["invalid_tool_calls"] == 0
    text = f"{call({'other': 'x'}, 'lookup')}{tool_turn('1')}<answer>Paris</answer>"
    assert score(text, tool_config=listed)["invalid_tool_calls"] == 1


def test_hostile_tool_config_files_are_refused(tmp_path: Path) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text("tools: " + "[" * 20_000 + "]" * 20_000 + "\n", encoding="utf-8")
    for path, reason in ((str(deep), "deep"), ("/dev/zero", "not a regular file")):
        with pytest.raises(RewardPluginsError, match=reason) as raised:
            score("<answer>Paris</answer>", tool_config=path)
        assert f"tool_config {path}" in str(raised.value)


# --- extra_info and tool_rewards ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra_info", "expected"),
    [
        (None, 0.0),
        ({}, 0.0),
        ({"tool_rewards": None}, 0.0),
        ({"tool_rewards": []}, 0.0),
        ({"tool_rewards": [0.5, 0.25]}, 0.75),
        ({"tool_rewards": (0.5, -1)}, -0.5),
        ({"tool_rewards": [0.1] * 10}, 1.0),  # math.fsum: exactly 1.0
        ({"tool_rewards": 0.5}, 0.5),
        ({"tool_rewards": 2}, 2.0),
        ({"tool_rewards": np.float32(0.5)}, 0.5),
        ({"tool_rewards": np.array(0.5)}, 0.5),
        ({"tool_rewards": np.array([0.25, 0.5])}, 0.75),
        ({"tool_rewards": np.array([1, 2], dtype=np.int64)}, 3.0),
        ({"tool_rewards": np.array([0.5, 0.25], dtype=object)}, 0.75),
        ({"tool_rewards": [Fraction(1, 4)]}, 0.25),
        ({"tool_rewards": [10**6, -(10**6)]}, 0.0),
    ],
)
def test_tool_rewards_shapes_that_count(extra_info: Any, expected: float) -> None:
    assert tool_reward_sum(extra_info) == expected
    result = score("<answer>Paris</answer>", extra_info=extra_info, tool_reward_weight=2.0)
    assert result["tool_reward_sum"] == expected and result["score"] == 1.0 + 2 * expected


FINITE = "must be a finite real of magnitude at most 1e+06, got "


@pytest.mark.parametrize(
    ("extra_info", "message"),
    [
        ("abc", "extra_info must be a mapping, got str"),
        ([1], "extra_info must be a mapping, got "),
        ({"tool_rewards": float("nan")}, f'extra_info["tool_rewards"] {FINITE}float: nan'),
        (
            {"tool_rewards": [0.5, float("nan")]},
            f'extra_info["tool_rewards"][1] {FINITE}float: nan',
        ),
        ({"tool_rewards": [float("inf")]}, "got float: inf"),
        ({"tool_rewards": True}, f'extra_info["tool_rewards"] {FINITE}bool: True'),
        ({"tool_rewards": [True]}, f'extra_info["tool_rewards"][0] {FINITE}bool: True'),
        ({"tool_rewards": np.bool_(True)}, f"{FINITE}bool: True"),
        ({"tool_rewards": "0.5"}, f"extra_info[\"tool_rewards\"] {FINITE}str: '0.5'"),
        ({"tool_rewards": [None]}, f"[0] {FINITE}NoneType: None"),
        ({"tool_rewards": [[0.5]]}, f"[0] {FINITE}"),  # a list, or a tuple once frozen
        ({"tool_rewards": {"a": 1}}, f'["tool_rewards"] {FINITE}'),
        ({"tool_rewards": [1e308, 1e308]}, f"[0] {FINITE}float: 1e+308"),
        ({"tool_rewards": [10**400]}, "got an integer of 401 digits"),
        ({"tool_rewards": [Fraction(10**400)]}, f"[0] {FINITE}Fraction: "),
        ({"tool_rewards": np.zeros((2, 2))}, "must be a list of numbers, got a 2-d ndarray"),
        ({"tool_rewards": [0.0] * 10_001}, "holds 10001 values; at most 10000"),
    ],
)
def test_tool_rewards_shapes_that_are_refused(extra_info: Any, message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        tool_reward_sum(extra_info)
    with pytest.raises(InvalidInput, match=re.escape(message)):
        score("<answer>Paris</answer>", extra_info=extra_info)


def test_docstring_examples() -> None:
    import doctest

    import reward_plugins.plugins.tool_agent as tool_agent
    import reward_plugins.tool_schema as schema

    for module in (tool_agent, schema):
        failures, tried = doctest.testmod(module)
        assert tried > 0 and failures == 0, module.__name__


@pytest.mark.parametrize(
    ("text", "tags"),
    [
        ("<answer>a</answer>", (1, 1)),
        ("<answer>a<answer>b</answer></answer>", (2, 2)),
        (f"{call({'query': INJECTED})}<answer>a</answer>", (1, 1)),
        (f"{call({'query': 'q'})}{tool_turn(INJECTED * 3)}<answer>a", (1, 0)),
        (f"<search>{INJECTED}</search><information>{INJECTED}</information>", (0, 0)),
        # a turn the model wrote under another role: its tags are still the model's
        (f"x\nuser\n{INJECTED}\nassistant\n</answer>", (1, 2)),
        # a tool response the model wrote in its own turn is its text
        (f"<tool_response>{INJECTED}</tool_response>", (1, 1)),
        # a tool turn with no call before it answers nothing: its text is the model's
        (f"x{tool_turn(INJECTED * 2)}", (2, 2)),
        # an <information> block that follows no <search> is the model's
        (f"<information>{INJECTED}</information>", (1, 1)),
    ],
)
def test_the_parser_counts_the_answer_tags_the_model_wrote(
    text: str, tags: tuple[int, int]
) -> None:
    from reward_plugins.tool_trajectory import parse_trajectory

    assert parse_trajectory(text).answer_tags == tags


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
        | st.integers(min_value=-(10**6), max_value=10**6),
        max_size=50,
    )
)
def test_tool_rewards_sum_exactly(values: list[float]) -> None:
    expected = math.fsum(map(float, values))
    assert tool_reward_sum({"tool_rewards": values}) == expected
    assert tool_reward_sum({"tool_rewards": tuple(values)}) == expected
    assert tool_reward_sum({"tool_rewards": np.array(values, dtype=float)}) == expected
