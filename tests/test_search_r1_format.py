"""Search-R1's format-aware reward (``compute_score_format``): decision table, differential tests.

Provenance of the expected values:

- The decision-table rows follow the branches of ``compute_score_em`` in Search-R1's
  ``verl/utils/reward_score/qa_em_format.py`` (github.com/PeterGriffinJin/Search-R1); their
  rewards were reproduced by running that file's functions (``is_valid_sequence``,
  ``extract_solution``, ``is_retrieval_correct``, ``compute_score_em``) on the prompt-included
  rows, under each setting of ``EXPECTED``.
- The generated trajectories are checked against ``_oracle_reward``, an implementation of
  Search-R1's ``is_valid_sequence`` + ``compute_score_em`` written here from that file (the
  ``is_valid_sequence`` state table, balanced tag counts, ``extract_solution``'s
  ``re.finditer`` extraction with its >= 2-match rule, ``is_retrieval_correct``'s
  information-block check) and SQuAD v1.1's ``normalize_answer`` (``evaluate-v1.1.py``). It
  shares no code with ``reward_plugins``.

How the two modes map onto that oracle:

- ``prompt_included=True`` on ``prompt + response``: the oracle unchanged (``min_matches=2``);
  values, result types and the flags must be identical.
- The default, response-only mode on ``response``: the oracle applied to
  ``"<|im_start|>assistant\\n" + response`` with every trailing run of whitespace and end-of-turn
  markers removed, and with ``min_matches=1`` (verl's extraction rule). The removed tail holds no
  tag, so extraction and retrieval see the same tags as on the response itself.

Where the modes legitimately differ (a trailing end marker, a single answer with no prompt
example) the difference is asserted on its own.
"""

from __future__ import annotations

import random
import re
import string
from collections import Counter
from typing import Any

import pytest

import reward_plugins
from reward_plugins.plugins import search_r1

FORMAT_KEYS = [
    "score",
    "acc",
    "em",
    "subem",
    "f1",
    "answer_found",
    "answer_tags",
    "spam_penalized",
    "format_valid",
    "retrieval_hit",
]
"""The keys every QA scorer returns (``QA_RESULT_KEYS``), then ``format_valid`` and
``retrieval_hit``."""

ASSISTANT = "<|im_start|>assistant\n"
END_MARKERS = ("<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>")
"""The plugin's default end-of-turn markers (``trajectory.DEFAULT_END_MARKERS``)."""

# Prompts in Qwen's chat template. The real Search-R1 instruction names the answer tags once
# ("inside <answer> and </answer>") and gives one example, so its prompt alone holds two answer
# matches; the others hold one and none.
SEARCH_R1_INSTRUCTION = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first "
    "every time you get new information. After reasoning, if you find you lack some knowledge, "
    "you can call a search engine by <search> query </search> and it will return the top "
    "searched results between <information> and </information>. You can search as many times "
    "as your want. If you find no further external knowledge needed, you can directly provide "
    "the answer inside <answer> and </answer>, without detailed illustrations. For example, "
    "<answer> Beijing </answer>. Question: what is the capital of France?\n"
)
PROMPT_REAL = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    f"<|im_start|>user\n{SEARCH_R1_INSTRUCTION}<|im_end|>\n{ASSISTANT}"
)
PROMPT_EXAMPLE = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "Reason, search, then answer. For example, <answer> Beijing </answer>. "
    f"Question: what is the capital of France?<|im_end|>\n{ASSISTANT}"
)
PROMPT_NO_EXAMPLE = f"<|im_start|>user\nWhat is the capital of France?<|im_end|>\n{ASSISTANT}"
PROMPTS = (PROMPT_REAL, PROMPT_EXAMPLE, PROMPT_NO_EXAMPLE)

PARIS_FULLWIDTH = "\uff30\uff41\uff52\uff49\uff53"  # FULLWIDTH LATIN "Paris"

V03 = {"structure_format_score": 0.2, "final_format_score": 0.1, "retrieval_score": 0}
V03_R = {"structure_format_score": 0.2, "final_format_score": 0.1, "retrieval_score": 0.1}


# ------------------------------------------------------------------------------ the oracle

_ORACLE_TAG_NAMES = ("think", "search", "information", "answer")
_ORACLE_TRANSITIONS = {
    ("start", "<think>"): "in_think",
    ("information", "<think>"): "in_think",
    ("in_think", "</think>"): "after_think",
    ("after_think", "<search>"): "in_search",
    ("after_think", "<answer>"): "in_answer",
    ("in_search", "</search>"): "after_search",
    ("after_search", "<information>"): "in_information",
    ("in_information", "</information>"): "information",
    ("in_answer", "</answer>"): "end",
}
_ORACLE_OPEN_STATES = {"in_think", "in_search", "in_information", "in_answer"}
_ORACLE_SPLIT = re.compile(r"(</?(?:think|search|information|answer)>)")
_ORACLE_TAG = re.compile(r"</?(?:think|search|information|answer)>")


def _squad(text: str) -> str:
    """SQuAD v1.1 normalization: lower, drop ASCII punctuation, drop articles, squash spaces."""
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def _oracle_valid(text: str) -> bool:
    """Search-R1's ``is_valid_sequence`` (``qa_em_format.py``), restated as a transition table."""
    marker = re.search(r"<\|im_start\|>assistant\s*", text)
    if marker is None:
        return False
    body = text[marker.end() :]
    for name in _ORACLE_TAG_NAMES:
        if len(re.findall(f"<{name}>", body)) != len(re.findall(f"</{name}>", body)):
            return False
    state = "start"
    for part in _ORACLE_SPLIT.split(body):
        if not part.strip():
            continue
        if _ORACLE_TAG.fullmatch(part):
            state = _ORACLE_TRANSITIONS.get((state, part), "")
            if not state:
                return False
        elif state not in _ORACLE_OPEN_STATES:
            return False
    return state == "end"


def _oracle_reward(
    text: str,
    golds: list[str],
    structure_format_score: Any = 0,
    final_format_score: Any = 0,
    retrieval_score: Any = 0,
    score: Any = 1.0,
    *,
    min_matches: int,
) -> tuple[Any, bool, bool, str | None]:
    """Search-R1's ``qa_em_format.compute_score_em`` -> (reward, valid, retrieval hit, answer)."""
    valid = _oracle_valid(text)
    normalized_golds = [_squad(gold) for gold in golds]
    hit = valid and any(
        gold in _squad(block.strip())
        for block in re.findall(r"<information>(.*?)</information>", text, re.DOTALL)
        for gold in normalized_golds
    )
    matches = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)
    answer = matches[-1].strip() if matches and len(matches) >= min_matches else None
    if answer is not None and _squad(answer) in normalized_golds:
        reward = score if valid else score - structure_format_score
    elif valid:
        reward = structure_format_score + retrieval_score if hit else structure_format_score
    else:
        reward = 0 if answer is None else final_format_score
    return reward, valid, hit, answer


def _strip_end(response: str) -> str:
    """Remove the trailing run of whitespace and whole end-of-turn markers."""
    while True:
        stripped = response.rstrip()
        for marker in END_MARKERS:
            if stripped.endswith(marker):
                stripped = stripped[: -len(marker)]
        if stripped == response:
            return response
        response = stripped


def _oracle_response_only(response: str, golds: list[str], **params: Any) -> tuple:
    return _oracle_reward(ASSISTANT + _strip_end(response), golds, **params, min_matches=1)


def _row(outcome: tuple, golds: list[str]) -> str:
    """The row of ``compute_score_em``'s decision table that an oracle outcome falls in."""
    _, valid, hit, answer = outcome
    if answer is None:
        return f"no answer, valid={valid}, hit={hit}"
    if _squad(answer) in map(_squad, golds):
        return f"correct, valid={valid}"
    return f"wrong, valid={valid}, hit={hit}"


# ---------------------------------------------------------------------------- the generator

_GOLD_SETS = (["Paris"], ["Paris", "paris city"], ["Lyon"], ["Beijing"], ["capital"])
_THOUGHTS = ("I should search.", "", "Paris?", "a < b and c > d", "<thin", "x\n<|im_end|>\ny")
_QUERIES = ("capital of France", "", "Beijing")
_DOCS = ("Paris is the capital of France.", "Lyon is a city.", "Doc 1: nothing here", "PARIS!")
_ANSWERS = ("Paris", "the paris", "Lyon", "", "Paris, France", "Beijing", "paris city", "Capital")
_STRAY = ("Let me think.", "oops", "Answer:", "\n\nDone")
_SPACES = ("", "", " ", "\n", "\n\n", " \t ")
_ALL_TAGS = tuple(f"<{slash}{name}>" for name in _ORACLE_TAG_NAMES for slash in ("", "/"))


def _block(rng: random.Random, name: str, choices: tuple[str, ...]) -> list[str]:
    return [f"<{name}>", rng.choice(choices), f"</{name}>"]


_BLOCK_CONTENTS = {"think": _THOUGHTS, "search": _QUERIES, "information": _DOCS, "answer": _ANSWERS}


def _valid_blocks(rng: random.Random) -> list[list[str]]:
    """think, then 0-3 rounds of search, information, think, then answer; one list per block."""
    names = ["think"]
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
        names += ["search", "information", "think"]
    names.append("answer")
    return [_block(rng, name, _BLOCK_CONTENTS[name]) for name in names]


def _mutate_blocks(rng: random.Random, blocks: list[list[str]]) -> list[list[str]]:
    """Delete, repeat, swap or insert whole blocks: misordered but balanced trajectories."""
    blocks = list(blocks)
    index = rng.randrange(len(blocks))
    kind = rng.randrange(4)
    if kind == 0 and len(blocks) > 1:
        del blocks[index]
    elif kind == 1:
        blocks.insert(index, blocks[index])
    elif kind == 2 and len(blocks) > 1:
        other = rng.randrange(len(blocks))
        blocks[index], blocks[other] = blocks[other], blocks[index]
    else:
        name = rng.choice(_ORACLE_TAG_NAMES)
        blocks.insert(rng.randrange(len(blocks) + 1), _block(rng, name, _BLOCK_CONTENTS[name]))
    return blocks


def _mutate(rng: random.Random, segments: list[str]) -> list[str]:
    segments = list(segments)
    where = rng.randrange(len(segments) + 1)
    kind = rng.randrange(9)
    if kind == 0 and segments:
        del segments[min(where, len(segments) - 1)]
    elif kind == 1 and segments:
        index = min(where, len(segments) - 1)
        segments.insert(index, segments[index])
    elif kind == 2 and len(segments) > 1:
        i, j = rng.sample(range(len(segments)), 2)
        segments[i], segments[j] = segments[j], segments[i]
    elif kind == 3:
        segments.insert(where, rng.choice(_STRAY))
    elif kind == 4:
        segments.insert(where, rng.choice(_ALL_TAGS))
    elif kind == 5:
        segments += _block(rng, "answer", _ANSWERS)
    elif kind == 6:
        segments.insert(where, rng.choice(END_MARKERS))
    elif kind == 7:
        segments = _block(rng, "answer", _ANSWERS)
    else:
        segments.append(rng.choice(_STRAY))
    return segments


def _tail(rng: random.Random) -> str:
    """Trailing text after the response: often nothing, often end markers and whitespace."""
    kind = rng.randrange(4)
    if kind == 0:
        return ""
    if kind == 1:
        return rng.choice(_SPACES)
    if kind == 2:
        return "".join(
            rng.choice(END_MARKERS) + rng.choice(_SPACES) for _ in range(rng.randint(1, 3))
        )
    return rng.choice(END_MARKERS) + rng.choice(_STRAY)


def _responses(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    responses = []
    for _ in range(count):
        blocks = _valid_blocks(rng)
        for _ in range(rng.choice((0, 0, 0, 1, 1, 2))):
            blocks = _mutate_blocks(rng, blocks)
        segments = [segment for block in blocks for segment in block]
        for _ in range(rng.choice((0, 0, 0, 1, 1, 2, 3))):
            segments = _mutate(rng, segments)
        response = rng.choice(("", "", "\n")) + "".join(
            segment + rng.choice(_SPACES) for segment in segments
        )
        responses.append(response + _tail(rng))
    return responses


_PARAM_SETS = (
    {},
    V03,
    V03_R,
    {
        "structure_format_score": 0.3,
        "final_format_score": 0.05,
        "retrieval_score": 0.15,
        "score": 2.0,
    },
)

_RESPONSES = _responses(3000, seed=6)


def _cases(seed: int) -> list[tuple[str, list[str], dict[str, Any]]]:
    rng = random.Random(seed)
    return [(r, rng.choice(_GOLD_SETS), rng.choice(_PARAM_SETS)) for r in _RESPONSES]


def _typed(value: Any) -> tuple[type, Any]:
    return type(value), value


# ------------------------------------------------------------------ differential: both modes


def test_prompt_included_matches_upstream_on_generated_trajectories() -> None:
    rng = random.Random(1)
    rows: Counter[str] = Counter()
    for index, (response, golds, params) in enumerate(_cases(seed=2)):
        text = rng.choice(PROMPTS) + response
        expected = _oracle_reward(text, golds, **params, min_matches=2)
        got = search_r1.compute_score_format(
            text, {"target": golds}, prompt_included=True, **params
        )
        assert _typed(got) == _typed(expected[0]), (text, golds, params)
        if index % 3 == 0:  # the router too, on a third of the cases
            result = reward_plugins.compute_score_format(
                "searchR1_nq", text, {"target": golds}, prompt_included=True, **params
            )
            assert list(result) == FORMAT_KEYS
            assert result["score"] == float(expected[0])
            assert (result["format_valid"], result["retrieval_hit"], result["answer_found"]) == (
                float(expected[1]),
                float(expected[2]),
                float(expected[3] is not None),
            ), (text, golds)
        rows[_row(expected, golds)] += 1
    # Every row of the decision table is reached.
    assert len(rows) == 8, rows
    assert min(rows.values()) >= 10, rows
    valid = sum(n for row, n in rows.items() if "valid=True" in row)
    assert 300 < valid < 2700, rows  # a useful mix of valid and invalid trajectories


def test_response_only_matches_upstream_mapping_on_generated_trajectories() -> None:
    rows: Counter[str] = Counter()
    for index, (response, golds, params) in enumerate(_cases(seed=3)):
        expected = _oracle_response_only(response, golds, **params)
        got = search_r1.compute_score_format(response, {"target": golds}, **params)
        assert _typed(got) == _typed(expected[0]), (response, golds, params)
        if index % 3 == 0:
            result = reward_plugins.compute_score_format(
                "searchR1_hotpotqa", response, golds, **params
            )
            assert list(result) == FORMAT_KEYS
            assert result["score"] == float(expected[0])
            assert (result["format_valid"], result["retrieval_hit"], result["answer_found"]) == (
                float(expected[1]),
                float(expected[2]),
                float(expected[3] is not None),
            ), (response, golds)
        rows[_row(expected, golds)] += 1
    # A valid response-only trajectory always ends with its answer, so the two rows
    # "no answer, valid" are unreachable here; the other six are all reached.
    assert not [row for row in rows if row.startswith("no answer, valid=True")]
    assert len(rows) == 6, rows
    assert min(rows.values()) >= 10, rows


def test_generated_trajectories_with_end_markers_differ_between_modes_as_documented() -> None:
    """A response whose only fault upstream is its trailing end marker is valid by default."""
    compared = 0
    for response in _RESPONSES:
        stripped = _strip_end(response)
        if stripped == response.rstrip() or not _oracle_valid(ASSISTANT + stripped):
            continue
        compared += 1
        assert not _oracle_valid(ASSISTANT + response)
        assert search_r1.compute_score_format(response, "Paris", **V03) in (1.0, 0.2)
        assert search_r1.compute_score_format(
            PROMPT_EXAMPLE + response, "Paris", prompt_included=True, **V03
        ) in (0.8, 0.1)
    assert compared >= 50


# --------------------------------------------------------------- the decision table, by row

_HIT = "<search>capital</search><information>Paris is the capital of France.</information>"
_MISS = "<search>capital</search><information>Lyon is a city.</information>"
_VALID_HIT_PARIS = f"<think>t</think>{_HIT}<think>t</think><answer>Paris</answer>"
_VALID_MISS_PARIS = f"<think>t</think>{_MISS}<think>t</think><answer>Paris</answer>"

# (row name, mode, solution_str, expected flags (answer_found, acc, format_valid, retrieval_hit))
# "prompt" solutions are passed as they are with prompt_included=True; "response" ones by
# default. Rows 1 and 2 (no answer extracted, valid format) need the prompt-included mode: a
# single answer, here a correct one, and no example in the prompt (the >= 2-match rule).
DECISION_ROWS = [
    ("1 no answer, valid, hit", "prompt", ASSISTANT + _VALID_HIT_PARIS, (0, 0, 1, 1)),
    ("2 no answer, valid, no hit", "prompt", ASSISTANT + _VALID_MISS_PARIS, (0, 0, 1, 0)),
    ("3 no answer, invalid", "response", "<think>t</think>I give up.", (0, 0, 0, 0)),
    ("3 no answer, invalid", "prompt", PROMPT_NO_EXAMPLE + "<think>t</think>Hmm.", (0, 0, 0, 0)),
    ("4 correct, valid", "response", _VALID_MISS_PARIS, (1, 1, 1, 0)),
    ("4 correct, valid", "prompt", PROMPT_EXAMPLE + _VALID_HIT_PARIS, (1, 1, 1, 1)),
    ("5 correct, invalid", "response", f"{_HIT}<answer>Paris</answer>", (1, 1, 0, 0)),
    ("5 correct, invalid", "prompt", PROMPT_REAL + _VALID_HIT_PARIS + "<|im_end|>", (1, 1, 0, 0)),
    (
        "6 wrong, valid, hit",
        "response",
        f"<think>t</think>{_HIT}<think>t</think><answer>Lyon</answer>",
        (1, 0, 1, 1),
    ),
    (
        "6 wrong, valid, hit",
        "prompt",
        PROMPT_EXAMPLE + f"<think>t</think>{_HIT}<think>t</think><answer>Lyon</answer>",
        (1, 0, 1, 1),
    ),
    ("7 wrong, valid, no hit", "response", "<think>t</think><answer>Lyon</answer>", (1, 0, 1, 0)),
    (
        "7 wrong, valid, no hit",
        "prompt",
        PROMPT_REAL + "<think>t</think><answer>Lyon</answer>",
        (1, 0, 1, 0),
    ),
    ("8 wrong, invalid", "response", "<think>t</think><answer>Lyon</answer> Done.", (1, 0, 0, 0)),
    (
        "8 wrong, invalid",
        "prompt",
        PROMPT_EXAMPLE + f"<think>t</think>{_MISS}<answer>Lyon</answer>",
        (1, 0, 0, 0),
    ),
]

# The reward per row number, as Search-R1's qa_em_format.py ``compute_score_em`` returns it
# on the prompt-included rows above: v0.3 (s=0.2, f=0.1, r=0), the same with r=0.1, and the
# defaults (s = f = r = 0: pure EM).
EXPECTED = {
    "v0.3": (V03, {1: 0.2, 2: 0.2, 3: 0, 4: 1.0, 5: 0.8, 6: 0.2, 7: 0.2, 8: 0.1}),
    "v0.3 r=0.1": (V03_R, {1: 0.3, 2: 0.2, 3: 0, 4: 1.0, 5: 0.8, 6: 0.3, 7: 0.2, 8: 0.1}),
    "defaults": ({}, {1: 0, 2: 0, 3: 0, 4: 1.0, 5: 1.0, 6: 0, 7: 0, 8: 0}),
}


@pytest.mark.parametrize("setting", list(EXPECTED))
@pytest.mark.parametrize(("row", "mode", "solution", "flags"), DECISION_ROWS)
def test_decision_table_row(setting: str, row: str, mode: str, solution: str, flags: tuple) -> None:
    params, rewards = EXPECTED[setting]
    expected = rewards[int(row[0])]
    options = dict(params, prompt_included=mode == "prompt")
    got = search_r1.compute_score_format(solution, {"target": ["Paris"]}, **options)
    assert got == pytest.approx(expected, abs=1e-12)
    result = reward_plugins.compute_score_format("searchR1_nq", solution, ["Paris"], **options)
    assert result["score"] == pytest.approx(expected, abs=1e-12)
    answer_found, acc, valid, hit = flags
    assert (result["answer_found"], result["acc"], result["format_valid"]) == (
        answer_found,
        acc,
        valid,
    )
    assert result["retrieval_hit"] == hit
    as_float = reward_plugins.compute_score_format(
        "searchR1_nq", solution, ["Paris"], return_dict=False, **options
    )
    assert type(as_float) is float and as_float == pytest.approx(expected, abs=1e-12)


def test_no_answer_rows_keep_upstreams_int_zero() -> None:
    """Upstream returns the int 0 when no answer is extracted from an invalid trajectory."""
    got = search_r1.compute_score_format("<think>t</think>", "Paris", **V03)
    assert got == 0 and type(got) is int


def test_retrieval_is_not_checked_on_an_invalid_trajectory() -> None:
    solution = f"<think>t</think>{_HIT}<answer>Lyon</answer>"  # no think after information
    result = reward_plugins.compute_score_format("searchR1_nq", solution, "Paris", **V03_R)
    assert (result["score"], result["format_valid"], result["retrieval_hit"]) == (0.1, 0.0, 0.0)


def test_format_score_is_not_an_option() -> None:
    """Upstream's unused ``format_score`` is an unknown option, like any other."""
    with pytest.raises(TypeError, match="format_score"):
        search_r1.compute_score_format("<answer>Paris</answer>", "Paris", format_score=0.5)
    with pytest.raises(TypeError, match="format_score"):
        reward_plugins.compute_score_format(
            "searchR1_nq", "<answer>Paris</answer>", "Paris", format_score=0.5
        )


# ----------------------------------------------------- the modes: where they differ, and why


def test_trailing_end_markers_are_accepted_by_default_and_rejected_upstream() -> None:
    trajectory = "<think>t</think><answer>Paris</answer>"
    for tail in (
        "<|im_end|>",
        "<|endoftext|>",
        "</s>",
        "<|eot_id|>",
        "\n<|im_end|>\n<|endoftext|>",
    ):
        assert search_r1.compute_score_format(trajectory + tail, "Paris", **V03) == 1.0
        assert search_r1.compute_score_format(
            PROMPT_EXAMPLE + trajectory + tail, "Paris", prompt_included=True, **V03
        ) == pytest.approx(0.8)
    # Text after the marker still invalidates the format in both modes.
    assert search_r1.compute_score_format(trajectory + "<|im_end|>Bye", "Paris", **V03) == 0.8


def test_end_marker_tail_must_be_whole_markers() -> None:
    """Fragments that only spell a marker once another marker is deleted are not end markers.

    ``"</" + "<|im_end|>" + "s>"`` is not a sequence of end-of-turn markers; the default mode
    must treat it like any other trailing text (format invalid: S - s).
    """
    trajectory = "<think>t</think><answer>Paris</answer>"
    for tail in ("</<|im_end|>s>", "<|im_<|eot_id|>end|>"):
        result = reward_plugins.compute_score_format(
            "searchR1_nq", trajectory + tail, "Paris", **V03
        )
        assert (result["format_valid"], result["score"]) == (0.0, pytest.approx(0.8)), tail


def test_single_answer_modes() -> None:
    """Response-only: one answer is extracted. Prompt included: the prompt's example is needed."""
    single = "<think>t</think><answer>Paris</answer>"
    assert search_r1.compute_score_format(single, "Paris") == 1.0
    # Upstream's strings without the assistant marker are invalid and have no answer.
    assert search_r1.compute_score_format(single, "Paris", prompt_included=True, **V03) == 0
    # Upstream's functions on a completion alone behind the assistant marker (no prompt, so no
    # example answer): a valid trajectory whose only answer is not extracted (the >= 2-match
    # rule) gets s; with the answer twice it is extracted but invalid: S - s.
    completion = ASSISTANT.rstrip("\n") + single
    assert search_r1.compute_score_format(completion, "Paris", prompt_included=True) == 0
    assert search_r1.compute_score_format(
        completion, "Paris", prompt_included=True, **V03
    ) == pytest.approx(0.2)
    assert (
        search_r1.compute_score_format(
            completion + "<answer>Paris</answer>", "Paris", prompt_included=True
        )
        == 1.0
    )
    # The real instruction holds two matches, so a response without an answer is graded on
    # the prompt's example "Beijing" (upstream's behaviour, kept in this mode).
    no_answer = PROMPT_REAL + "<think>t</think>"
    assert search_r1.compute_score_format(no_answer, "Beijing", prompt_included=True) == 1.0
    assert search_r1.compute_score_format(no_answer, "Paris", prompt_included=True, **V03) == 0.1


def test_second_answer_invalidates_the_format() -> None:
    twice = "<think>t</think><answer>Lyon</answer><answer>Paris</answer>"
    result = reward_plugins.compute_score_format("searchR1_nq", twice, "Paris", **V03)
    assert (result["score"], result["format_valid"], result["acc"]) == (
        pytest.approx(0.8),
        0.0,
        1.0,
    )


@pytest.mark.parametrize(
    ("response", "valid"),
    [
        ("<think>a</think><answer>b</answer>", True),
        ("\n  <think>a</think>\n\n<answer>b</answer>\n", True),
        ("<think></think><answer></answer>", True),
        ("<think>a</think><search>q</search><information>d</information><answer>b</answer>", False),
        ("<think>a</think><search>q</search><answer>b</answer>", False),
        ("<answer>b</answer>", False),
        ("<think>a</think>x<answer>b</answer>", False),
        ("Sure. <think>a</think><answer>b</answer>", False),
        ("<think>a<think>b</think></think><answer>c</answer>", False),
        ("<think>a</think><answer>b</answer><think>c</think>", False),
        ("<think>a</think><answer>b", False),
        ("<think>a</think><answer>b</answer></answer>", False),
        ("<think>a <search> b</think><answer>c</answer>", False),  # unbalanced search tags
        ("<think>a <b>c</b> &lt;</think><answer>d</answer>", True),  # other tags are content
        (
            "<think>a</think><search>q</search><information>d</information><think>e</think>"
            "<search>r</search><information>f</information><think>g</think><answer>h</answer>",
            True,
        ),
    ],
)
def test_state_machine_vectors(response: str, valid: bool) -> None:
    assert _oracle_valid(ASSISTANT + response) is valid  # the vector agrees with the oracle
    result = reward_plugins.compute_score_format("searchR1_nq", response, "zzz")
    assert result["format_valid"] == float(valid)
    prompt_result = reward_plugins.compute_score_format(
        "searchR1_nq", PROMPT_EXAMPLE + response, "zzz", prompt_included=True
    )
    assert prompt_result["format_valid"] == float(valid)


# ------------------------------------------------------------- tag names and end markers


def _rename(text: str, names: dict[str, str]) -> str:
    for old, new in names.items():
        text = text.replace(f"<{old}>", f"<{new}>").replace(f"</{old}>", f"</{new}>")
    return text


TOOL_TAGS = {"search": "tool_call", "information": "tool_response"}
TOOL_OPTIONS = {"search_tag": "tool_call", "information_tag": "tool_response"}


def test_tool_tags_match_the_oracle_on_renamed_trajectories() -> None:
    for response, golds, params in _cases(seed=4)[:1000]:
        expected = _oracle_response_only(response, golds, **params)
        renamed = _rename(response, TOOL_TAGS)
        got = search_r1.compute_score_format(renamed, golds, **params, **TOOL_OPTIONS)
        assert _typed(got) == _typed(expected[0]), (renamed, golds, params)


def test_all_four_tag_names_configurable() -> None:
    names = {
        "think": "reasoning",
        "search": "tool_call",
        "information": "tool_response",
        "answer": "final",
    }
    options = {f"{old}_tag": new for old, new in names.items()}
    trajectory = _rename(f"<think>t</think>{_HIT}<think>t</think><answer>Lyon</answer>", names)
    result = reward_plugins.compute_score_format(
        "searchR1_nq", trajectory, "Paris", **options, **V03_R
    )
    assert (result["score"], result["format_valid"], result["retrieval_hit"]) == (
        pytest.approx(0.3),
        1.0,
        1.0,
    )
    assert result["answer_found"] == 1.0
    # The same trajectory under the default names: tool blocks are stray text, no answer tag.
    default = reward_plugins.compute_score_format("searchR1_nq", trajectory, "Paris", **V03_R)
    assert (default["score"], default["format_valid"], default["answer_found"]) == (0, 0.0, 0.0)
    # And the default tags are plain text under the custom names: a <search> block between
    # tags is stray content.
    stray = "<reasoning>t</reasoning><search>q</search><final>Paris</final>"
    assert search_r1.compute_score_format(stray, "Paris", **options, **V03) == pytest.approx(0.8)


def test_tag_names_are_literal_not_patterns() -> None:
    trajectory = "<think>t</think><toolxcall>q</toolxcall><answer>Paris</answer>"
    assert search_r1.compute_score_format(trajectory, "Paris", search_tag="tool.call", **V03) == (
        pytest.approx(0.8)
    )


def test_end_markers_configurable() -> None:
    trajectory = "<think>t</think><answer>Paris</answer>"
    custom = {"end_markers": ["<|end|>"], **V03}
    assert search_r1.compute_score_format(trajectory + "<|end|>\n", "Paris", **custom) == 1.0
    assert search_r1.compute_score_format(trajectory + "<|im_end|>", "Paris", **custom) == (
        pytest.approx(0.8)
    )
    none = {"end_markers": (), **V03}
    assert search_r1.compute_score_format(trajectory + " \n", "Paris", **none) == 1.0
    assert search_r1.compute_score_format(trajectory + "</s>", "Paris", **none) == (
        pytest.approx(0.8)
    )
    # The prompt-included mode is upstream's: no end marker is tolerated, whatever is passed.
    assert search_r1.compute_score_format(
        PROMPT_EXAMPLE + trajectory + "<|end|>", "Paris", prompt_included=True, **custom
    ) == pytest.approx(0.8)
    with pytest.raises(TypeError, match="end_markers"):
        search_r1.compute_score_format(trajectory, "Paris", end_markers="<|end|>")


# -------------------------------------------------------------- 1 MiB adversarial inputs
# Correctness only; the point is that each finishes (a quadratic scan would take minutes).

MIB = 1 << 20


def test_mebibyte_of_unclosed_answer_tags() -> None:
    response = "<think>t</think>" + "<answer>" * (MIB // 8)
    result = reward_plugins.compute_score_format("searchR1_nq", response, "Paris", **V03)
    assert (result["score"], result["format_valid"], result["answer_found"]) == (0, 0.0, 0.0)
    assert result["answer_tags"] == MIB // 8
    # Upstream's string: the prompt's example is the only match, no answer extracted.
    prompted = reward_plugins.compute_score_format(
        "searchR1_nq", PROMPT_EXAMPLE + response, "Paris", prompt_included=True, **V03
    )
    assert (prompted["score"], prompted["answer_found"]) == (0, 0.0)


def test_mebibyte_of_openers_before_one_closer() -> None:
    response = "<think>t</think>" + "<answer>x" * (MIB // 9) + "</answer>"
    result = reward_plugins.compute_score_format("searchR1_nq", response, "x", **V03)
    # The lazy regex pairs the first opener with the only closer: a long wrong answer.
    assert (result["score"], result["format_valid"], result["answer_found"]) == (0.1, 0.0, 1.0)


def test_mebibyte_valid_trajectories() -> None:
    thought = "<thin <answe </think <" * (MIB // 22)
    long_think = f"<think>{thought}</think><answer>Paris</answer>\n<|im_end|>"
    assert search_r1.compute_score_format(long_think, "Paris", **V03) == 1.0
    rounds = f"<search>q</search><information>{'Lyon. ' * 6}</information><think>t</think>"
    many = "<think>t</think>" + rounds * (MIB // len(rounds)) + "<answer>Lyon</answer>"
    hit_last = many.replace(
        "</information><think>t</think><answer>", " Paris</information><think>t</think><answer>"
    )
    assert search_r1.compute_score_format(many, "Paris", **V03_R) == pytest.approx(0.2)
    assert search_r1.compute_score_format(hit_last, "Paris", **V03_R) == pytest.approx(0.3)
    assert search_r1.compute_score_format(
        PROMPT_EXAMPLE + hit_last, "Paris", prompt_included=True, **V03_R
    ) == pytest.approx(0.3)
    markers = "<think>t</think><answer>Paris</answer>" + "<|im_end|>\n" * (MIB // 11)
    assert search_r1.compute_score_format(markers, "Paris", **V03) == 1.0


# ------------------------------------------------------------------- one key set everywhere


def _every_branch() -> list[tuple[str, dict[str, Any]]]:
    calls = [
        (solution, {"prompt_included": mode == "prompt", **V03_R})
        for _, mode, solution, _ in DECISION_ROWS
    ]
    calls += [
        ("<answer>Paris is the capital</answer>", {"max_answer_words": 2}),
        (f"<think>t</think><answer>{PARIS_FULLWIDTH}</answer>", {"normalizer": "unicode"}),
        ("<think>t</think><answer>Parisian</answer>", {"subem_word_boundary": True}),
        ("<tool_call>q</tool_call>", TOOL_OPTIONS),
        ("", {}),
        ("no marker at all", {"prompt_included": True}),
        ("<answer>Paris</answer>" * 11, {}),
    ]
    return calls


def test_key_set_is_the_same_on_every_branch() -> None:
    scores = set()
    for solution, options in _every_branch():
        result = reward_plugins.compute_score_format("searchR1_nq", solution, "Paris", **options)
        assert list(result) == FORMAT_KEYS, (solution, options)
        assert type(result["answer_tags"]) is int
        assert all(type(result[key]) is float for key in FORMAT_KEYS if key != "answer_tags")
        assert result["spam_penalized"] == 0.0  # repetition invalidates the format instead
        scores.add(result["score"])
    assert len(scores) >= 5  # the branches above really are different branches


def test_end_markers_from_a_hydra_list() -> None:
    """verl passes ``reward_kwargs`` from Hydra: a list arrives as an OmegaConf ``ListConfig``."""
    from omegaconf import OmegaConf

    kwargs = OmegaConf.create({"reward_kwargs": {"end_markers": ["<|end|>"]}}).reward_kwargs
    options = dict(kwargs)
    trajectory = "<think>t</think><answer>Paris</answer>"
    assert (
        reward_plugins.compute_score_format(
            "searchR1_nq", trajectory + "<|end|>", "Paris", structure_format_score=0.2, **options
        )["score"]
        == 1.0
    )
    assert reward_plugins.compute_score_format(
        "searchR1_nq", trajectory + "</s>", "Paris", structure_format_score=0.2, **options
    )["score"] == pytest.approx(0.8)
