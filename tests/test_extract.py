"""Linear-time tag extraction: same results as the reference regex, on any input.

The oracle is verl's own rule, ``re.finditer(r"<answer>(.*?)</answer>", text, re.DOTALL)``: the
last (or first) match, stripped, or ``None``; tag counts are ``str.count``. The oracle is only run
on small inputs (it is super-linear on unclosed tags); the 1 MiB inputs are checked against
results known by construction. No test here measures time: the benchmarks do.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import reward_plugins
from reward_plugins.extract import extract_tag, find_tag_spans, scan_tags
from reward_plugins.plugins import search_r1
from reward_plugins.plugins.search_r1 import QA_RESULT_KEYS

MIB = 1 << 20


def oracle_spans(text: str, tag: str = "answer") -> list[str]:
    """Unstripped contents of all reference-regex matches, left to right."""
    pattern = f"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>"
    return [match.group(1) for match in re.finditer(pattern, text, re.DOTALL)]


def oracle_scan(text: str, tag: str, mode: str) -> tuple[str | None, int, int]:
    spans = oracle_spans(text, tag)
    chosen = (spans[-1] if mode == "last" else spans[0]).strip() if spans else None
    return chosen, text.count(f"<{tag}>"), text.count(f"</{tag}>")


# ------------------------------------------------------------------ adversarial constructions


@dataclass(frozen=True)
class Adversary:
    """A response family built from ``n`` repetitions, with its results known by construction."""

    build: Callable[[int], str]
    spans: Callable[[int], list[str]]
    counts: Callable[[int], tuple[int, int]]
    unit: int
    """Characters per repetition, to size a 1 MiB instance."""


FILLER = "x" * 44

ADVERSARIES: dict[str, Adversary] = {
    # one real answer, then n unclosed openers each followed by text: the regex's worst case
    "answer-then-unclosed": Adversary(
        build=lambda n: "<answer>Paris</answer>" + ("<answer>" + FILLER) * n,
        spans=lambda n: ["Paris"],
        counts=lambda n: (n + 1, 1),
        unit=8 + len(FILLER),
    ),
    # n unclosed openers and no answer at all
    "only-unclosed": Adversary(
        build=lambda n: ("<answer>" + FILLER) * n,
        spans=lambda n: [],
        counts=lambda n: (n, 0),
        unit=8 + len(FILLER),
    ),
    # n complete pairs, the last one holding the gold
    "alternating-pairs": Adversary(
        build=lambda n: "<answer>x</answer>" * (n - 1) + "<answer>Paris</answer>",
        spans=lambda n: ["x"] * (n - 1) + ["Paris"],
        counts=lambda n: (n, n),
        unit=18,
    ),
    # n openers then one closer: one span swallowing n - 1 openers
    "openers-then-closer": Adversary(
        build=lambda n: "<answer>" * n + "Paris</answer>",
        spans=lambda n: ["<answer>" * (n - 1) + "Paris"],
        counts=lambda n: (n, 1),
        unit=8,
    ),
    # n closers then n openers: no span
    "closers-then-openers": Adversary(
        build=lambda n: "</answer>" * n + "<answer>" * n,
        spans=lambda n: [],
        counts=lambda n: (n, n),
        unit=17,
    ),
    # open-open-close repeated: every span is "<answer>x"
    "double-open": Adversary(
        build=lambda n: "<answer><answer>x</answer>" * n,
        spans=lambda n: ["<answer>x"] * n,
        counts=lambda n: (2 * n, n),
        unit=26,
    ),
    # near-miss tags only: no tag at all
    "near-misses": Adversary(
        build=lambda n: ("<answer" + "answer>" + "</answer" + "< answer>") * n,
        spans=lambda n: [],
        counts=lambda n: (0, 0),
        unit=31,
    ),
    # unclosed openers, then a closer far away, then more unclosed openers
    "far-closer": Adversary(
        build=lambda n: ("<answer>" + FILLER) * n + "</answer>" + ("<answer>" + FILLER) * n,
        spans=lambda n: [FILLER + ("<answer>" + FILLER) * (n - 1)],
        counts=lambda n: (2 * n, 1),
        unit=2 * (8 + len(FILLER)),
    ),
}


@pytest.mark.parametrize("name", ADVERSARIES)
@pytest.mark.parametrize("n", [1, 2, 3, 11, 50])
def test_small_adversary_matches_regex_oracle(name: str, n: int) -> None:
    """On small instances the construction's expectations and the regex agree."""
    adversary = ADVERSARIES[name]
    text = adversary.build(n)
    assert oracle_spans(text) == adversary.spans(n)
    assert (text.count("<answer>"), text.count("</answer>")) == adversary.counts(n)
    assert find_tag_spans(text) == oracle_spans(text)
    for mode in ("last", "first"):
        assert scan_tags(text, "answer", mode) == oracle_scan(text, "answer", mode)
    truth = {"target": ["Paris"]}
    assert reward_plugins.compute_score("searchR1_nq", text, truth)["score"] == float(
        search_r1.compute_score(text, truth)
    )


def _expected_router_result(spans: list[str], counts: tuple[int, int]) -> dict[str, float | int]:
    """The EM router's dict for gold "Paris", derived from the spans and counts."""
    answer = spans[-1].strip() if spans else None
    correct = answer is not None and search_r1.normalize_answer(answer) == "paris"
    tags = max(counts)
    spammed = correct and tags > 10
    score = 0.0 if not correct else (0.25 if spammed else 1.0)
    return {
        "score": score,
        "acc": float(correct),
        "em": float(correct),
        "subem": float(answer is not None and "paris" in search_r1.normalize_answer(answer)),
        "f1": 1.0 if correct else 0.0,
        "answer_found": float(answer is not None),
        "answer_tags": tags,
        "spam_penalized": float(spammed),
    }


@pytest.mark.parametrize("name", ADVERSARIES)
def test_one_mebibyte_adversary(name: str) -> None:
    """A ~1 MiB adversarial response: every result equals the one known by construction."""
    adversary = ADVERSARIES[name]
    n = MIB // adversary.unit
    text = adversary.build(n)
    assert len(text) >= MIB - adversary.unit
    spans, counts = adversary.spans(n), adversary.counts(n)
    last = spans[-1].strip() if spans else None
    first = spans[0].strip() if spans else None
    assert scan_tags(text, "answer", "last") == (last, *counts)
    assert scan_tags(text, "answer", "first") == (first, *counts)
    assert search_r1.extract_solution(text) == last
    assert search_r1.count_answer_tags(text) == counts
    assert find_tag_spans(text) == spans
    result = reward_plugins.compute_score("searchR1_nq", text, {"target": ["Paris"]})
    assert result == _expected_router_result(spans, counts)
    assert tuple(result) == QA_RESULT_KEYS


# ------------------------------------------------------------------- random tag-soup differential

ANSWER_TOKENS = (
    "<answer>",
    "<answer>",
    "</answer>",
    "</answer>",
    "a",
    "b c",
    " ",
    "\n",
    "\u3000",
    "<",
    ">",
    "/",
    "answer",
    "<answer",
    "answer>",
    "</answer",
    "<think>",
    "</think>",
    "<Answer>",
)
THINK_TOKENS = ("<think>", "</think>", "<answer>", "</answer>", "x", " ", "<think", "think>")
DOTTED_TOKENS = ("<a.b>", "</a.b>", "<axb>", "</axb>", "q", " ")

SOUP_COUNT = 100_000


def tag_soups(tokens: tuple[str, ...], count: int, seed: int, max_tokens: int = 14) -> list[str]:
    """Seeded random concatenations of ``tokens`` (all draws made at once with numpy)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, max_tokens + 1, size=count)
    picks = rng.integers(len(tokens), size=int(lengths.sum()))
    words = np.array(tokens, dtype=object)[picks]
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    return ["".join(words[start:end]) for start, end in itertools.pairwise(bounds)]


@pytest.mark.parametrize(
    ("tag", "tokens", "count"),
    [
        ("answer", ANSWER_TOKENS, SOUP_COUNT),
        ("think", THINK_TOKENS, 20_000),
        ("a.b", DOTTED_TOKENS, 20_000),
    ],
    ids=["answer", "think", "regex-metacharacter"],
)
def test_random_tag_soups_match_regex_oracle(tag: str, tokens: tuple[str, ...], count: int) -> None:
    """First and last match, counts and every span equal the regex's on random tag soups."""
    mismatches = []
    soups = tag_soups(tokens, count, seed=len(tag))
    for text in soups:
        spans = oracle_spans(text, tag)
        last = spans[-1].strip() if spans else None
        first = spans[0].strip() if spans else None
        counts = (text.count(f"<{tag}>"), text.count(f"</{tag}>"))
        got = (
            scan_tags(text, tag, "last"),
            scan_tags(text, tag, "first"),
            extract_tag(text, tag),
            extract_tag(text, tag, "first"),
            find_tag_spans(text, tag),
        )
        if got != ((last, *counts), (first, *counts), last, first, spans):
            mismatches.append(text)
    assert mismatches == []
    with_spans = sum(bool(oracle_spans(text, tag)) for text in soups[:2000])
    assert 200 < with_spans < 1900, "the soups must mix matching and non-matching texts"


def test_answer_soups_match_verl_extraction() -> None:
    """The plugin's extract_solution is verl's on the answer soups (verl imported lazily)."""
    from verl.utils.reward_score import search_r1_like_qa_em as verl_qa

    soups = tag_soups(ANSWER_TOKENS, 20_000, seed=7)
    assert [search_r1.extract_solution(t) for t in soups] == [
        verl_qa.extract_solution(t) for t in soups
    ]


@pytest.mark.parametrize(
    ("text", "mode", "expected"),
    [
        ("<answer>a<answer>b</answer> <answer>c</answer></answer>", "last", ("c", 3, 3)),
        ("<answer>a<answer>b</answer> <answer>c</answer>", "first", ("a<answer>b", 3, 2)),
        ("<answer> Paris </answer> then <answer>Lyon</answer>", "first", ("Paris", 2, 2)),
        ("", "last", (None, 0, 0)),
        ("</answer><answer>", "first", (None, 1, 1)),
    ],
)
def test_scan_tags_literals(text: str, mode: str, expected: tuple[str | None, int, int]) -> None:
    assert scan_tags(text, "answer", mode) == expected
    assert oracle_scan(text, "answer", mode) == expected


def test_find_tag_spans_keeps_whitespace() -> None:
    assert find_tag_spans("<answer> a </answer>x<answer>\nb</answer>") == [" a ", "\nb"]
