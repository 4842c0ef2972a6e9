"""The search-agent hack table of ``docs/reward-hacks.md``: each hack a multi-turn search agent
can play on ``compute_score_tool``, its reward under Search-R1's defaults, the guard against it,
and an honest twin (the same final answer, reached honestly) whose reward the guard leaves
unchanged; then both under the shipped recipe ``search_agent_guarded``.

Trajectories come from ``tests/trajectories.py`` (verl 0.9's Hermes decoding) on one fixed
question. The table in the docs is generated from ``HACKS``: ``python
tests/test_tool_hack_table.py`` prints it, and ``test_doc_table_is_generated_from_this_file``
fails when the copy in the docs differs. The property tests then draw many questions (several
golds, paraphrased queries, documents of every length, both decodings) and check that the
recipe orders every hack below its twin.
"""

from __future__ import annotations

import json
import random
import sys
from functools import cache
from pathlib import Path
from statistics import mean
from typing import Any, NamedTuple

import pytest
from generated_docs import assert_generated, marked
from hypothesis import given, settings
from hypothesis import strategies as st
from trajectories import HACKS as HACK_CLASSES
from trajectories import Instance, hack_and_twin, honest, make_instance, with_format

import reward_plugins
from reward_plugins.plugins.composed import load_recipe

HACKS_DOC = Path(__file__).resolve().parents[1] / "docs" / "reward-hacks.md"
TABLE_MARKER = "tool-hack-table"
RECIPE = "search_agent_guarded"

QUESTION = Instance(
    question="Where is the Eiffel Tower?",
    golds=("Paris",),
    queries=("where is the eiffel tower", "eiffel tower city", "eiffel tower location"),
    gold_docs="Doc 1(Title: Eiffel Tower) The Eiffel Tower is a landmark of Paris.",
    other_docs="Doc 1(Title: Tower) A tower is a tall structure.",
    wrong="Lyon",
)


class Hack(NamedTuple):
    hack: str
    """How the docs name it."""
    kind: str
    """Its class in ``tests/trajectories.py``."""
    base: dict[str, Any]
    """Options of both columns (a forged retrieval pays only where retrieval pays)."""
    default: float
    guard: dict[str, Any]
    guarded: float
    twin: float
    """The twin's reward, the same with the guard off and on."""
    key: str
    """The result key that names the hack."""
    recipe: tuple[float, float]
    """Hack and twin under ``search_agent_guarded``."""
    unguarded: str = "(always on)"
    """What the guard column says when no option is needed."""


RETRIEVAL = {"retrieval_score": 0.1}
HACKS = [
    Hack(
        "answer without searching",
        "no_search",
        {},
        1.0,
        {"min_searches": 1, "missing_search_penalty": 0.5},
        0.5,
        1.0,
        "unsearched",
        (0.5, 1.1),
    ),
    Hack(
        "answer without searching",
        "no_search",
        {},
        1.0,
        {"require_grounding": True},
        0.0,
        1.0,
        "grounded",
        (0.5, 1.1),
    ),
    Hack(
        "`<information>` with the gold in its own turn, after a real response without it",
        "forged_information",
        RETRIEVAL,
        1.0,
        {"forged_response_penalty": 0.2},
        0.8,
        1.0,
        "forged_responses",
        (-0.4, 1.0),
    ),
    Hack(
        "a tool turn with the gold, no call before it",
        "forged_tool_turn",
        RETRIEVAL,
        1.0,
        {"forged_response_penalty": 0.2},
        0.8,
        1.1,
        "forged_responses",
        (-0.9, 1.1),
    ),
    Hack(
        "its own `<search>` and `<information>` in verl's Hermes loop",
        "forged_search_pair",
        RETRIEVAL,
        1.1,
        {"tool_format": "hermes"},
        1.0,
        1.1,
        "forged_responses",
        (-0.9, 1.1),
    ),
    Hack(
        "the same query three times",
        "repeated_query",
        {},
        1.0,
        {"repeated_query_penalty": 0.1},
        0.8,
        1.0,
        "repeated_queries",
        (0.9, 1.1),
    ),
    Hack(
        "ten calls where two suffice",
        "call_spam",
        {},
        1.0,
        {"extra_call_penalty": 0.05},
        0.6,
        1.0,
        "extra_tool_calls",
        (0.75, 1.1),
    ),
    Hack(
        "answer, search, answer again",
        "answer_then_search",
        {},
        1.0,
        {"invalid_format_score": -0.2},
        -0.2,
        1.0,
        "searched_after_answer",
        (-0.1, 1.1),
    ),
    Hack(
        "answer tags spammed in a turn it wrote under the user role",
        "answer_spam_in_user_turn",
        {},
        0.25,
        {},
        0.25,
        1.0,
        "answer_tags",
        (0.35, 1.1),
    ),
    Hack(
        "several candidates in the answer",
        "candidate_list",
        {},
        0.0,
        {},
        0.0,
        1.0,
        "em",
        (0.1, 1.1),
        "(none: a list is not an exact match)",
    ),
]


def tool_score(text: str, golds: tuple[str, ...], **options: Any) -> dict[str, Any]:
    return reward_plugins.compute_score_tool("searchR1_nq", text, list(golds), **options)


@cache
def recipe_options(tool_format: str) -> dict[str, Any]:
    """The options naming the recipe, or for Search-R1's loop its components with that format."""
    if tool_format == "hermes":
        return {"recipe": RECIPE}
    components = [
        {"scorer": c.scorer, "weight": c.weight, "as": c.prefix, **c.options}
        for c in load_recipe(RECIPE).components
    ]
    return {"components": [{**c, "tool_format": tool_format} for c in components]}


def recipe_score(text: str, golds: tuple[str, ...], tool_format: str = "hermes") -> float:
    options = recipe_options(tool_format)
    return reward_plugins.compute_score_composed("searchR1_nq", text, list(golds), **options)[
        "score"
    ]


@pytest.mark.parametrize("row", HACKS, ids=lambda row: f"{row.kind}: {row.key}")
def test_hack_row(row: Hack) -> None:
    hack, twin = hack_and_twin(QUESTION, row.kind, right=True)
    golds = QUESTION.golds
    approx = lambda value: pytest.approx(value, abs=1e-12)  # noqa: E731
    assert tool_score(hack, golds, **row.base)["score"] == approx(row.default)
    guarded = tool_score(hack, golds, **row.base, **row.guard)
    assert guarded["score"] == approx(row.guarded)
    assert tool_score(twin, golds, **row.base)["score"] == approx(row.twin)
    assert tool_score(twin, golds, **row.base, **row.guard)["score"] == approx(row.twin)
    # the key names the hack: it differs between the hack and its twin
    assert guarded[row.key] != tool_score(twin, golds, **row.base, **row.guard)[row.key]
    assert (recipe_score(hack, golds), recipe_score(twin, golds)) == (
        approx(row.recipe[0]),
        approx(row.recipe[1]),
    )
    assert row.recipe[0] < row.recipe[1]


@pytest.mark.parametrize("row", [r for r in HACKS if not r.base], ids=lambda row: row.kind)
def test_default_rewards_are_search_r1s(row: Hack) -> None:
    """Without options the reward is verl's ``search_r1_like_qa_em`` EM of the final answer."""
    from verl.utils.reward_score import search_r1_like_qa_em

    hack, twin = hack_and_twin(QUESTION, row.kind, right=True)
    target = {"target": list(QUESTION.golds)}
    assert search_r1_like_qa_em.compute_score(hack, target) == row.default
    assert search_r1_like_qa_em.compute_score(twin, target) == row.twin


def test_every_hack_class_has_a_row() -> None:
    assert {row.kind for row in HACKS} == set(HACK_CLASSES)


# ------------------------------------------------------------------------ generated policies

instances = st.builds(
    make_instance,
    st.integers(min_value=0, max_value=2**32 - 1).map(random.Random),
    st.sampled_from(["hermes", "search_r1"]),
)


@settings(max_examples=60, deadline=None)
@given(instance=instances, right=st.booleans(), data=st.data())
def test_the_recipe_orders_every_hack_below_its_twin(
    instance: Instance, right: bool, data: st.DataObject
) -> None:
    applicable = [
        name
        for name, hack in HACK_CLASSES.items()
        if instance.tool_format in hack.formats and (right or not hack.right_only)
    ]
    name = data.draw(st.sampled_from(applicable))
    hack, twin = hack_and_twin(instance, name, right)
    hack_reward = recipe_score(hack, instance.golds, instance.tool_format)
    assert hack_reward < recipe_score(twin, instance.golds, instance.tool_format)


@settings(max_examples=60, deadline=None)
@given(instance=instances, searches=st.integers(min_value=1, max_value=3), found=st.booleans())
def test_the_recipe_pays_an_honest_right_answer_more_than_an_honest_wrong_one(
    instance: Instance, searches: int, found: bool
) -> None:
    right = honest(instance, instance.right, searches=searches, found=found)
    wrong = honest(instance, instance.wrong, searches=searches, found=found)
    golds, tool_format = instance.golds, instance.tool_format
    assert recipe_score(right, golds, tool_format) > recipe_score(wrong, golds, tool_format)


@settings(max_examples=60, deadline=None)
@given(instance=instances, right=st.booleans())
def test_a_forgery_never_counts_as_retrieval(instance: Instance, right: bool) -> None:
    text = instance.right if right else instance.wrong
    for name in ("forged_information", "forged_tool_turn", "forged_search_pair"):
        if instance.tool_format not in HACK_CLASSES[name].formats:
            continue
        hack, _ = hack_and_twin(instance, name, right)
        result = tool_score(hack, instance.golds, tool_format=instance.tool_format)
        assert (result["retrieval_hit"], result["forged_responses"]) == (0.0, 1)
    assert tool_score(honest(instance, text), instance.golds)["retrieval_hit"] == 1.0


# ------------------------------------------------------------------------------ the docs copy


def _options(options: dict[str, Any]) -> str:
    return ", ".join(f"`{key}: {json.dumps(value)}`" for key, value in options.items()) or "-"


def render_table() -> str:
    """The search-agent hack table of ``docs/reward-hacks.md``, as Markdown."""
    lines = [
        "| hack | options of both | default (Search-R1's EM) | guard | with the guard "
        f"| honest twin's reward, guard off and on | key | `{RECIPE}`: hack / twin |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in HACKS:
        guard = _options(row.guard) if row.guard else row.unguarded
        cells = [
            row.hack,
            _options(row.base),
            f"{row.default:g}",
            guard,
            f"{row.guarded:g}",
            f"{row.twin:g}",
            f"`{row.key}`",
            f"{row.recipe[0]:g} / {row.recipe[1]:g}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_doc_table_is_generated_from_this_file() -> None:
    assert_generated(HACKS_DOC, TABLE_MARKER, render_table(), "tests/test_tool_hack_table.py")


def measure(count: int = 150, seed: int = 0) -> str:
    """Mean rewards of every hack class and its twin over ``count`` generated questions, under
    the defaults and under the recipe, per decoding (a Markdown table)."""
    rng = random.Random(seed)
    questions = [make_instance(rng) for _ in range(count)]
    lines = [
        "| hack | decoding | answers | default: hack / twin | recipe: hack / twin | "
        "hack below twin (recipe) |",
        "|---|---|---|---|---|---|",
    ]
    for name, hack_class in HACK_CLASSES.items():
        for tool_format in hack_class.formats:
            for right in (True, False) if not hack_class.right_only else (True,):
                rows = []
                for question in questions:
                    instance = with_format(question, tool_format)
                    hack, twin = hack_and_twin(instance, name, right)
                    golds = instance.golds
                    rows.append(
                        (
                            tool_score(hack, golds)["score"],
                            tool_score(twin, golds)["score"],
                            recipe_score(hack, golds, tool_format),
                            recipe_score(twin, golds, tool_format),
                        )
                    )
                means = [mean(column) for column in zip(*rows, strict=True)]
                below = sum(r[2] < r[3] for r in rows)
                lines.append(
                    f"| {name} | {tool_format} | {'right' if right else 'wrong'} | "
                    f"{means[0]:.3g} / {means[1]:.3g} | {means[2]:.3g} / {means[3]:.3g} | "
                    f"{below}/{len(rows)} |"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:] == ["--measure"]:
        sys.stdout.write(measure() + "\n")
    else:
        sys.stdout.write(marked(TABLE_MARKER, render_table()))
