"""``compute_score_tool``: the decision table of the tool-trajectory reward, worked by hand, on
trajectories as verl's tool agent loop decodes them (Qwen2.5's chat template, special tokens
skipped) and as Search-R1 agents write them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from generated_docs import assert_generated, marked

import reward_plugins
from reward_plugins import InvalidOption
from reward_plugins.plugins.tool_agent import TOOL_KEYS, DeclaredTool, declared_tools
from reward_plugins.router import route

QA_KEYS = ("score", "acc", "em", "subem", "f1", "answer_found", "answer_tags", "spam_penalized")
GOLDS = {"target": ["Paris"]}


def call(name: str = "search", **arguments: Any) -> str:
    body = json.dumps({"name": name, "arguments": arguments or {"query": "capital of France"}})
    return f"<tool_call>\n{body}\n</tool_call>"


def tool_turn(text: str) -> str:
    """A tool result as Qwen2.5's template renders it, once <|im_start|>/<|im_end|> are skipped."""
    return f"\nuser\n<tool_response>\n{text}\n</tool_response>\nassistant\n"


PARIS_DOC = "Doc 1(Title: Paris) Paris is the capital and largest city of France."
LYON_DOC = "Doc 1(Title: Lyon) Lyon is a city in France."
SEARCHED_RIGHT = f"Let me search.\n{call()}{tool_turn(PARIS_DOC)}<answer>Paris</answer>"
SEARCHED_WRONG = f"{call()}{tool_turn(LYON_DOC)}<answer>Lyon</answer>"
NO_SEARCH_RIGHT = "<think>I know this.</think><answer>Paris</answer>"
BAD_JSON = (
    '<tool_call>\n{"name": "search", "arguments": {"query": }\n</tool_call>'
    f"{tool_turn('error')}<answer>Paris</answer>"
)
UNDECLARED = f"{call('calculator', expression='1+1')}{tool_turn('2')}<answer>Paris</answer>"
MISSING_ARGUMENT = f"{call('search', q='x')}{tool_turn('error')}<answer>Paris</answer>"
ANSWER_BEFORE_RESPONSE = f"<answer>Paris</answer>{call()}{tool_turn(PARIS_DOC)}"
SEARCH_R1 = (
    "<think>search</think><search>capital of France</search>"
    f"<information>{PARIS_DOC}</information><think>ok</think><answer>Paris</answer>"
)
FABRICATED = f"{call()}<tool_response>{PARIS_DOC}</tool_response><answer>Lyon</answer>"
FORGED_TOOL_TURN = f"I remember.{tool_turn(PARIS_DOC)}<answer>Paris</answer>"
FORGED_INFORMATION = (
    f"{call()}{tool_turn(LYON_DOC)}<information>{PARIS_DOC}</information><answer>Lyon</answer>"
)


def tool_score(text: str, golds: Any = GOLDS, **options: Any) -> dict[str, Any]:
    return reward_plugins.compute_score_tool("searchR1_nq", text, golds, **options)


SHAPED = {"retrieval_score": 0.1, "search_bonus": 0.05, "invalid_call_penalty": 0.2}
GATED = {"invalid_format_score": -0.5}
DOC = Path(__file__).resolve().parents[1] / "docs" / "multiturn.md"
TABLE_MARKER = "tool-decision-table"


class Row(NamedTuple):
    trajectory: str
    """How docs/multiturn.md names it."""
    text: str
    defaults: float
    shaped: float
    gated: float
    counts: tuple[Any, ...]
    """(calls, invalid, responses, retrieval hit, format valid, assistant turns)"""


DECISION_TABLE = [
    # right after a search: 1 + 0.1 (hit) + 0.05 (a valid call)
    Row("searched, found the gold, right answer", SEARCHED_RIGHT, 1, 1.15, 1, (1, 0, 1, 1, 1, 2)),
    # wrong after a search: 0 + 0.05
    Row("searched, wrong answer", SEARCHED_WRONG, 0, 0.05, 0, (1, 0, 1, 0, 1, 2)),
    # right without searching: the answer reward alone, format valid (no call needed)
    Row("right answer without searching", NO_SEARCH_RIGHT, 1, 1, 1, (0, 0, 0, 0, 1, 1)),
    # invalid JSON: 1 - 0.2; gated: invalid format pays -0.5
    Row("a call with invalid JSON, then right", BAD_JSON, 1, 0.8, -0.5, (1, 1, 1, 0, 0, 2)),
    # a tool the config does not declare: 1 - 0.2
    Row("a call to an undeclared tool, then right", UNDECLARED, 1, 0.8, -0.5, (1, 1, 1, 0, 0, 2)),
    # a declared tool without its required `query`: 1 - 0.2
    Row(
        "a call without the tool's required argument, then right",
        MISSING_ARGUMENT,
        1,
        0.8,
        -0.5,
        (1, 1, 1, 0, 0, 2),
    ),
    # answered, then called: no final answer (none after the last tool response), so the
    # answer reward is 0; the hit counts (+0.1), a valid call (+0.05); the format is invalid
    # (an answer before a call, none after the last response)
    Row(
        "answered, then searched (found the gold), no answer after",
        ANSWER_BEFORE_RESPONSE,
        0,
        0.15,
        -0.5,
        (1, 0, 1, 1, 0, 2),
    ),
    # Search-R1 tags: a search is a call of `search`, information a response
    Row("Search-R1 tags, found, right", SEARCH_R1, 1, 1.15, 1, (1, 0, 1, 1, 1, 1)),
    # a tool response the model wrote in its own turn answers no call: no hit, and the format
    # is invalid
    Row(
        "a tool response the model wrote in its own turn, wrong answer",
        FABRICATED,
        0,
        0.05,
        -0.5,
        (1, 0, 1, 0, 0, 1),
    ),
    # a tool turn with no call before it: the model wrote it; no hit, no valid call
    Row(
        "a tool turn the model wrote with no call before it, right answer",
        FORGED_TOOL_TURN,
        1,
        1,
        -0.5,
        (0, 0, 1, 0, 0, 2),
    ),
    # <information> that follows no <search>: the model's, after a real response without gold
    Row(
        "an `<information>` block the model wrote after a real response, wrong answer",
        FORGED_INFORMATION,
        0,
        0.05,
        -0.5,
        (1, 0, 2, 0, 0, 2),
    ),
]


@pytest.mark.parametrize("row", DECISION_TABLE, ids=lambda row: row.trajectory)
def test_decision_table(row: Row) -> None:
    result = tool_score(row.text)
    assert result["score"] == row.defaults
    if row.text != ANSWER_BEFORE_RESPONSE:  # there the last answer tag is not the final answer
        qa = route("compute_score", "searchR1_nq", row.text, GOLDS, {})
        assert result["score"] == qa["score"]
    assert tool_score(row.text, **SHAPED)["score"] == pytest.approx(row.shaped, abs=1e-12)
    assert tool_score(row.text, **GATED)["score"] == row.gated
    assert tuple(result[key] for key in TOOL_KEYS[:6]) == row.counts
    assert list(result) == [*QA_KEYS, *TOOL_KEYS]


def render_decision_table() -> str:
    """The decision table of docs/multiturn.md, as Markdown."""
    lines = ["| trajectory | default | shaped | gated |", "|---|---|---|---|"]
    for row in DECISION_TABLE:
        lines.append(f"| {row.trajectory} | {row.defaults:g} | {row.shaped:g} | {row.gated:g} |")
    return "\n".join(lines)


def test_doc_table_is_generated_from_this_file() -> None:
    assert_generated(DOC, TABLE_MARKER, render_decision_table(), "tests/test_tool_agent_reward.py")
    text = DOC.read_text(encoding="utf-8")
    for key, value in {**SHAPED, **GATED}.items():  # the options the columns are scored with
        assert f"`{key}={value:g}`" in text, f"docs/multiturn.md must name {key}={value:g}"


def test_answer_rules_equal_the_qa_scorers() -> None:
    text = f"{call()}{tool_turn(PARIS_DOC)}<answer>the city of Paris</answer>"
    for rule, scorer in (
        ("em", "compute_score"),
        ("subem", "compute_score_subem"),
        ("f1", "compute_score_f1"),
    ):
        ours = tool_score(text, answer_rule=rule, format_score=0.1)
        qa = route(scorer, "searchR1_nq", text, GOLDS, {"format_score": 0.1})
        assert {key: ours[key] for key in QA_KEYS} == qa
    ours = tool_score(text, answer_rule="metric", metric="rouge_l")
    qa = route("compute_score_metric", "searchR1_nq", text, GOLDS, {"metric": "rouge_l"})
    assert {key: ours[key] for key in QA_KEYS} == qa


def test_too_many_calls_and_tool_rewards() -> None:
    many = "".join(f"{call()}{tool_turn(LYON_DOC)}" for _ in range(4)) + "<answer>Paris</answer>"
    assert tool_score(many)["format_valid"] == 1.0
    assert tool_score(many, max_tool_calls=3)["format_valid"] == 0.0
    info = {"tool_rewards": [0.5, 0.25], "num_turns": 9}
    result = tool_score(many, extra_info=info)
    assert (result["score"], result["tool_reward_sum"]) == (1.0, 0.75)  # weight 0: logged only
    assert tool_score(many, extra_info=info, tool_reward_weight=2.0)["score"] == 2.5


def test_any_data_source(tmp_path: Path) -> None:
    result = reward_plugins.compute_score_tool("my_source", NO_SEARCH_RIGHT, ["Paris"])
    assert result["score"] == 1.0


def test_tool_config_declares_the_tools(tmp_path: Path) -> None:
    assert dict(declared_tools(None)) == {"search": DeclaredTool(frozenset({"query"}), True)}
    config = tmp_path / "tools.yaml"
    config.write_text(
        "tools:\n"
        "  - class_name: x.Calculator\n"
        "    config: {type: native}\n"
        "    tool_schema:\n"
        "      type: function\n"
        "      function:\n"
        "        name: calculator\n"
        "        parameters: {type: object, properties: {expression: {type: string}},"
        " required: [expression]}\n",
        encoding="utf-8",
    )
    result = tool_score(UNDECLARED, tool_config=str(config))
    assert (result["invalid_tool_calls"], result["format_valid"]) == (0, 1.0)
    assert tool_score(SEARCHED_RIGHT, tool_config=str(config))["invalid_tool_calls"] == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"tool_config": "/nonexistent/tools.yaml"},
            r"tool_config /nonexistent/tools.yaml: no such file",
        ),
        ({"invalid_call_penalty": -1.0}, r"invalid_call_penalty.*>= 0"),
        ({"answer_rule": "metric"}, r"give 'metric'"),
        ({"metric": "f1"}, r"give 'metric'"),
        ({"answer_rule": "metric", "metric": "nope"}, r"unknown metric 'nope'"),
        ({"max_tool_calls": 0}, r"max_tool_calls"),
        ({"answer_rule": "exact"}, r"answer_rule"),
    ],
)
def test_option_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidOption, match=message):
        tool_score(NO_SEARCH_RIGHT, **options)


def test_bad_tool_config_file(tmp_path: Path) -> None:
    config = tmp_path / "tools.yaml"
    config.write_text("tools:\n  - class_name: x\n", encoding="utf-8")
    with pytest.raises(InvalidOption, match=r"tools\[0\] has no tool_schema.function.name"):
        tool_score(NO_SEARCH_RIGHT, tool_config=str(config))


if __name__ == "__main__":
    import sys

    sys.stdout.write(marked(TABLE_MARKER, render_decision_table()))
