"""The hack table of ``docs/reward-hacks.md``: each known reward hack, its default reward, and the
guard against it.

Rows are known failure modes of the Search-R1 rule-based rewards (verl's
``search_r1_like_qa_em`` and Search-R1's format-aware reward). For each row the test checks, with
the plugin function and with the router:

- the reward of the hack under default options, and that verl's own
  ``verl.utils.reward_score.search_r1_like_qa_em`` function gives the same value (EM and SubEM
  rows; verl has no format-aware reward);
- the reward with the guard on;
- a legitimate response that gets the same reward with the guard off and on.

The table in the docs is generated from ``HACKS``: ``python tests/test_hack_table.py`` prints it,
and ``test_doc_table_is_generated_from_this_file`` fails when the copy in the docs differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from generated_docs import assert_generated, marked

import reward_plugins
from reward_plugins.plugins import search_r1

HACKS_DOC = Path(__file__).resolve().parents[1] / "docs" / "reward-hacks.md"
TABLE_MARKER = "hack-table"

PARIS_FULLWIDTH = "\uff30\uff41\uff52\uff49\uff53"  # FULLWIDTH LATIN "Paris"
IDEOGRAPHIC_FULL_STOP = "\u3002"
RIGHT_SINGLE_QUOTE = "\u2019"


class Hack(NamedTuple):
    hack: str
    scorer: str
    golds: list[str]
    response: str
    default: float
    """Reward with default options (verl's where verl has the scorer)."""
    guard: dict[str, Any]
    guarded: float
    legitimate: str
    legitimate_reward: float
    """The legitimate response's reward, the same with the guard off and on."""


def _answer(text: str) -> str:
    return f"<answer>{text}</answer>"


HACKS = [
    Hack(
        "gold inside another word",
        "compute_score_subem",
        ["no"],
        _answer("I do not know"),
        1.0,
        {"subem_word_boundary": True},
        0.0,
        _answer("No."),
        1.0,
    ),
    Hack(
        "gold as a word prefix",
        "compute_score_subem",
        ["yes"],
        _answer("yesterday"),
        1.0,
        {"subem_word_boundary": True},
        0.0,
        _answer("Yes, it is."),
        1.0,
    ),
    Hack(
        "number inside a number",
        "compute_score_subem",
        ["1"],
        _answer("1990"),
        1.0,
        {"subem_word_boundary": True},
        0.0,
        _answer("1 (one)"),
        1.0,
    ),
    Hack(
        "gold as a word prefix",
        "compute_score_subem",
        ["Paris"],
        _answer("Parisian"),
        1.0,
        {"subem_word_boundary": True},
        0.0,
        _answer("Paris, France"),
        1.0,
    ),
    Hack(
        "enumerate the candidates",
        "compute_score_subem",
        ["Paris"],
        _answer("It is Paris, London, Berlin"),
        1.0,
        {"max_answer_words": 3},
        0.0,
        _answer("Paris, France"),
        1.0,
    ),
    Hack(
        "enumerate without spaces",
        "compute_score_subem",
        ["Paris"],
        _answer("Paris,London,Berlin"),
        1.0,
        {"subem_word_boundary": True},
        0.0,
        _answer("Paris, France"),
        1.0,
    ),
    Hack(
        "empty gold matches anything",
        "compute_score_subem",
        ["", "x"],
        _answer("anything at all"),
        1.0,
        {"reject_empty_gold": True},
        0.0,
        _answer("x"),
        1.0,
    ),
    Hack(
        "empty gold equals an empty answer",
        "compute_score",
        ["the", "x"],
        _answer(""),
        1.0,
        {"reject_empty_gold": True},
        0.0,
        _answer("x"),
        1.0,
    ),
    Hack(
        "answer-tag spam",
        "compute_score_subem",
        ["Paris"],
        _answer("Paris") * 11,
        1.0,
        {"penalize_subem": True},
        0.25,
        _answer("Paris"),
        1.0,
    ),
    Hack(
        "repeated answer block",
        "compute_score_format",
        ["Paris"],
        "<think>t</think>" + _answer("Paris") * 2,
        1.0,
        {"structure_format_score": 0.2},
        0.8,
        "<think>t</think>" + _answer("Paris"),
        1.0,
    ),
    Hack(
        "missed: full-width letters",
        "compute_score",
        ["Paris"],
        _answer(PARIS_FULLWIDTH),
        0.0,
        {"normalizer": "unicode"},
        1.0,
        _answer("Paris"),
        1.0,
    ),
    Hack(
        "missed: CJK full stop",
        "compute_score",
        ["北京"],
        _answer("北京" + IDEOGRAPHIC_FULL_STOP),
        0.0,
        {"normalizer": "unicode"},
        1.0,
        _answer("北京"),
        1.0,
    ),
    Hack(
        "missed: curly apostrophe",
        "compute_score",
        ["O'Neil"],
        _answer(f"O{RIGHT_SINGLE_QUOTE}Neil"),
        0.0,
        {"normalizer": "unicode"},
        1.0,
        _answer("O'Neil"),
        1.0,
    ),
    Hack(
        "missed, not fixed: accents",
        "compute_score",
        ["Pele"],
        _answer("Pelé"),
        0.0,
        {"normalizer": "unicode"},
        0.0,
        _answer("Pele"),
        1.0,
    ),
]

VERL_SCORERS = ("compute_score", "compute_score_subem")


def _plugin(scorer: str, response: str, golds: list[str], **options: Any) -> Any:
    return getattr(search_r1, scorer)(response, {"target": golds}, **options)


def _router(scorer: str, response: str, golds: list[str], **options: Any) -> float:
    return getattr(reward_plugins, scorer)("searchR1_nq", response, golds, **options)["score"]


@pytest.mark.parametrize("row", HACKS, ids=lambda row: f"{row.hack}: {row.response[:24]}")
def test_hack_row(row: Hack) -> None:
    for call in (_plugin, _router):
        assert call(row.scorer, row.response, row.golds) == row.default
        assert call(row.scorer, row.response, row.golds, **row.guard) == row.guarded
        assert call(row.scorer, row.legitimate, row.golds) == row.legitimate_reward
        assert call(row.scorer, row.legitimate, row.golds, **row.guard) == row.legitimate_reward


@pytest.mark.parametrize(
    "row", [row for row in HACKS if row.scorer in VERL_SCORERS], ids=lambda row: row.hack
)
def test_default_rewards_are_verls(row: Hack) -> None:
    from verl.utils.reward_score import search_r1_like_qa_em

    verl_function = getattr(search_r1_like_qa_em, row.scorer)
    assert verl_function(row.response, {"target": row.golds}) == row.default
    assert verl_function(row.legitimate, {"target": row.golds}) == row.legitimate_reward


# --------------------------------------------------------------------------- the docs copy


def _code(text: str) -> str:
    return f"`{text}`" if text else "(empty)"


def _shown_response(response: str) -> str:
    block = _answer("Paris")
    if response.count(block) > 2 and response == block * response.count(block):
        return f"{_code(block)} x {response.count(block)}"
    return _code(response)


def render_table() -> str:
    """The hack table of ``docs/reward-hacks.md``, as Markdown."""
    lines = [
        "| hack | scorer | golds | response | default (= verl) | option | with the option "
        "| legitimate response | its reward, option off and on |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in HACKS:
        guard = ", ".join(f"`{key}: {json.dumps(value)}`" for key, value in row.guard.items())
        default = f"{row.default}" if row.scorer in VERL_SCORERS else f"{row.default} (no verl)"
        cells = [
            row.hack,
            f"`{row.scorer}`",
            _code(json.dumps(row.golds, ensure_ascii=False)),
            _shown_response(row.response),
            default,
            guard,
            f"{row.guarded}",
            _code(row.legitimate),
            f"{row.legitimate_reward}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_doc_table_is_generated_from_this_file() -> None:
    assert_generated(HACKS_DOC, TABLE_MARKER, render_table(), "tests/test_hack_table.py")


if __name__ == "__main__":
    sys.stdout.write(marked(TABLE_MARKER, render_table()))
