"""The shaping terms: ``length_penalty``, ``repetition_penalty``, ``answer_list_penalty`` and
``language_mix_penalty``, as plain scorers for every data source.

- ``length_penalty`` against verl 0.9.1's own ``dapo`` reward managers (the legacy
  ``verl/workers/reward_manager/dapo.py`` and the reward loop's
  ``verl/experimental/reward_loop/reward_manager/dapo.py``), run on batches of responses of
  chosen token lengths with an always-0 ``compute_score``: their reward is the overlong
  penalty alone, and equals our score on a text of the same length in our unit;
- ``repetition_penalty`` against open-r1's published test vectors and hand-worked tables;
- ``answer_list_penalty`` and ``language_mix_penalty`` against hand-worked tables and
  independent oracles written here;
- properties (hypothesis), option errors, the fixed key set on every branch, the routers as
  verl calls them, and linear time on a 1 MiB adversarial answer.
"""

from __future__ import annotations

import doctest
import itertools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from timing import best_time

import reward_plugins
from reward_plugins import InvalidOption
from reward_plugins.plugins import shaping
from reward_plugins.plugins.shaping import (
    ANSWER_LIST_KEYS,
    LANGUAGE_MIX_KEYS,
    LENGTH_KEYS,
    REPETITION_KEYS,
    SCRIPTS,
    count_distinct_ngrams,
    count_foreign_letters,
    measure_length,
    overlong_penalty,
    strip_markup,
)
from reward_plugins.registry import lookup
from reward_plugins.text import answers
from reward_plugins.text.answers import MIN_CANDIDATES, count_candidates

TERMS: dict[str, tuple[str, ...]] = {
    "length_penalty": LENGTH_KEYS,
    "repetition_penalty": REPETITION_KEYS,
    "answer_list_penalty": ANSWER_LIST_KEYS,
    "language_mix_penalty": LANGUAGE_MIX_KEYS,
}
LENGTH_OPTIONS = {"max_length": 10, "buffer": 4}
"""length_penalty's required options, for the tests that are not about them."""


def call(name: str, response: str, ground_truth: Any = None, **options: Any) -> dict[str, Any]:
    """The router ``reward_plugins.<name>`` called as verl's reward managers call it."""
    router = getattr(reward_plugins, name)
    result: dict[str, Any] = router(
        data_source="any/source",
        solution_str=response,
        ground_truth=ground_truth,
        extra_info=None,
        **options,
    )
    return result


def words(count: int, word: str = "w") -> str:
    return " ".join([word] * count)


# --------------------------------------------------------------------------- length_penalty


@pytest.mark.parametrize(
    ("length", "max_length", "buffer", "penalty", "expected"),
    [
        # expected = max_length - buffer; exceed = length - expected;
        # score = max(min(-exceed / buffer * penalty, 0), -penalty)
        (0, 10, 4, 1.0, 0.0),  # exceed = 0 - 6 = -6: min(1.5, 0) = 0
        (6, 10, 4, 1.0, 0.0),  # exceed = 0: min(-0.0, 0) = 0
        (7, 10, 4, 1.0, -0.25),  # exceed = 1: -1/4
        (8, 10, 4, 1.0, -0.5),  # exceed = 2: -2/4
        (10, 10, 4, 1.0, -1.0),  # exceed = 4 = buffer: -penalty
        (12, 10, 4, 1.0, -1.0),  # exceed = 6: -6/4 = -1.5, held at -penalty past max_length
        (9, 10, 4, 0.5, -0.375),  # exceed = 3: -3/4 * 0.5
        (9, 10, 4, 0.0, 0.0),  # penalty 0: -0.0, made 0.0
        (1, 5, 5, 1.0, -0.2),  # buffer = max_length: expected 0, exceed 1: -1/5
        (0, 5, 5, 1.0, 0.0),
        (20480, 20480, 4096, 1.0, -1.0),  # DAPO's recipe: 20480 tokens, a 4096 buffer
        (18432, 20480, 4096, 1.0, -0.5),  # exceed = 18432 - 16384 = 2048: -2048/4096
    ],
)
def test_overlong_penalty_table(
    length: int, max_length: int, buffer: int, penalty: float, expected: float
) -> None:
    value = overlong_penalty(length, max_length, buffer, penalty)
    assert value == expected and str(value) == str(expected)  # never -0.0
    result = call(
        "length_penalty",
        "a" * length,
        max_length=max_length,
        buffer=buffer,
        penalty=penalty,
        unit="characters",
    )
    assert result == {"score": expected, "length": length, "overlong": float(expected < 0)}


@pytest.mark.parametrize(
    ("response", "unit", "extract", "length"),
    [
        ("one two  three\nfour\tfive", "response_words", "last", 5),
        ("", "response_words", "last", 0),
        ("   \n ", "response_words", "last", 0),
        ("a\u3000b\u00a0c", "response_words", "last", 3),  # str.split() splits Unicode spaces
        ("<answer>Paris</answer>", "response_words", "last", 1),  # tags are part of a word
        ("think a lot <answer> the city of Paris </answer>", "answer_words", "last", 4),
        ("<answer>a b</answer> <answer>c</answer>", "answer_words", "last", 1),
        ("<answer>a b</answer> <answer>c</answer>", "answer_words", "first", 2),
        ("no answer at all, many words here", "answer_words", "last", 0),
        ("<answer>unclosed answer here", "answer_words", "last", 0),
        ("<answer>   </answer>", "answer_words", "last", 0),
        ("naïve", "characters", "last", 5),
        ("東京\U0001f600", "characters", "last", 3),  # code points, not bytes or UTF-16 units
        ("<answer>x</answer>", "characters", "last", 18),
    ],
)
def test_measure_length_table(response: str, unit: Any, extract: Any, length: int) -> None:
    assert measure_length(response, unit, extract) == length
    result = call("length_penalty", response, unit=unit, extract=extract, max_length=2, buffer=1)
    assert result["length"] == length
    assert result["score"] == max(min(-(length - 1) / 1 * 1.0, 0.0), -1.0) + 0.0


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 400),
    st.integers(1, 200),
    st.integers(1, 200),
    # no subnormal penalty: -exceed / buffer * 5e-324 underflows to 0
    st.floats(0, 100, allow_nan=False, allow_subnormal=False) | st.sampled_from([0.0, 1.0]),
)
def test_overlong_penalty_properties(
    length: int, max_length: int, buffer: int, penalty: float
) -> None:
    assume(buffer <= max_length)
    value = overlong_penalty(length, max_length, buffer, penalty)
    expected_length = max_length - buffer
    assert value <= 0
    if length <= expected_length or penalty == 0:
        assert value == 0.0
    else:
        assert value < 0
    assert value >= -penalty  # held at -penalty past max_length
    if length == max_length:
        assert value == pytest.approx(-penalty)
    assert overlong_penalty(length + 1, max_length, buffer, penalty) <= value  # monotone


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60), st.sampled_from(["response_words", "answer_words", "characters"]))
def test_length_penalty_uses_the_measured_length(text: str, unit: str) -> None:
    for response in (text, f"{text}<answer>{text}</answer>"):
        result = call("length_penalty", response, unit=unit, max_length=8, buffer=3, penalty=2.0)
        length = measure_length(response, unit)  # type: ignore[arg-type]
        assert result == {
            "score": overlong_penalty(length, 8, 3, 2.0),
            "length": length,
            "overlong": 1.0 if length > 5 else 0.0,
        }


# ------------------------------------------- length_penalty against verl's own DAPO managers

DAPO_SETTINGS = [
    # (max_resp_len, overlong_buffer_cfg.len, overlong_buffer_cfg.penalty_factor)
    (20, 8, 1.0),
    (16, 16, 0.5),  # the buffer is the whole length
    (12, 1, 2.0),
    (30, 7, 0.3),
]


def _token_length_batch(tokenizer: Any, lengths: Sequence[int]) -> Any:
    """A ``DataProto`` whose row ``i`` has a response of exactly ``lengths[i]`` valid tokens
    (the byte-level token of ``a``, no EOS), after a 3-token prompt, right-padded."""
    import torch
    from verl import DataProto

    token = tokenizer.encode("a", add_special_tokens=False)
    assert len(token) == 1
    prompt = tokenizer.encode("Q: ", add_special_tokens=False)
    width = max(max(lengths), 1)
    rows = len(lengths)
    responses = torch.full((rows, width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((rows, len(prompt) + width), dtype=torch.long)
    mask[:, : len(prompt)] = 1
    for row, length in enumerate(lengths):
        responses[row, :length] = token[0]
        mask[row, len(prompt) : len(prompt) + length] = 1
    prompts = torch.tensor([prompt] * rows, dtype=torch.long)

    def objects(values: list[Any]) -> np.ndarray:
        array = np.empty(rows, dtype=object)
        array[:] = values
        return array

    return DataProto.from_single_dict(
        {
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": mask,
            "data_source": objects(["any/source"] * rows),
            "reward_model": objects([{"ground_truth": "x"} for _ in range(rows)]),
        }
    )


def _zero_score(**_: Any) -> float:
    return 0.0


def _texts_of_length(length: int) -> dict[str, str]:
    """A response ``length`` long in each unit of ``length_penalty``."""
    return {
        "response_words": words(length),
        "answer_words": f"thinking out loud <answer>{words(length, 'x')}</answer> done",
        "characters": "a" * length,
    }


def _assert_ours_equal_verls(
    lengths: Sequence[int],
    rewards: Sequence[float],
    overlong: Sequence[bool],
    max_length: int,
    buffer: int,
    penalty: float,
) -> None:
    options = {"max_length": max_length, "buffer": buffer, "penalty": penalty}
    assert any(flag for flag in overlong) and not all(flag for flag in overlong)
    for length, reward, flag in zip(lengths, rewards, overlong, strict=True):
        for unit, text in _texts_of_length(length).items():
            ours = call("length_penalty", text, unit=unit, **options)
            assert ours["length"] == length, unit
            # verl computes in float32 tensors: equal to within float32 rounding
            assert ours["score"] == pytest.approx(reward, rel=1e-6, abs=1e-7), (unit, length)
            assert ours["overlong"] == (1.0 if flag else 0.0), (unit, length)


@pytest.mark.slow
@pytest.mark.parametrize(("max_length", "buffer", "penalty"), DAPO_SETTINGS)
def test_equals_verls_legacy_dapo_manager(
    tokenizer: Any, max_length: int, buffer: int, penalty: float
) -> None:
    from omegaconf import OmegaConf
    from verl.workers.reward_manager.dapo import DAPORewardManager

    lengths = list(range(max_length + 1))  # verl's responses stop at max_resp_len
    config = OmegaConf.create(
        {"enable": True, "len": buffer, "penalty_factor": penalty, "log": True}
    )
    manager = DAPORewardManager(
        tokenizer,
        num_examine=0,
        compute_score=_zero_score,
        max_resp_len=max_length,
        overlong_buffer_cfg=config,
    )
    output = manager(_token_length_batch(tokenizer, lengths), return_dict=True)
    rewards = output["reward_tensor"].sum(dim=-1).tolist()
    info = output["reward_extra_info"]
    assert [float(value) for value in info["overlong_reward"]] == pytest.approx(rewards)
    overlong = [bool(flag) for flag in info["overlong"]]
    _assert_ours_equal_verls(lengths, rewards, overlong, max_length, buffer, penalty)


@pytest.mark.slow
@pytest.mark.parametrize(("max_length", "buffer", "penalty"), DAPO_SETTINGS)
def test_equals_verls_reward_loop_dapo_manager(
    tokenizer: Any, max_length: int, buffer: int, penalty: float
) -> None:
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_manager.dapo import DAPORewardManager
    from verl_helpers import run_reward_loop

    lengths = list(range(max_length + 1))  # verl's responses stop at max_resp_len
    config = OmegaConf.create(
        {
            "reward": {
                "reward_kwargs": {
                    "max_resp_len": max_length,
                    "overlong_buffer_cfg": {
                        "enable": True,
                        "len": buffer,
                        "penalty_factor": penalty,
                        "log": True,
                    },
                }
            }
        }
    )
    outputs = run_reward_loop(
        lambda: DAPORewardManager(config, tokenizer, _zero_score),
        _token_length_batch(tokenizer, lengths),
    )
    rewards = [float(output["reward_score"]) for output in outputs]
    overlong = [bool(output["reward_extra_info"]["overlong"]) for output in outputs]
    _assert_ours_equal_verls(lengths, rewards, overlong, max_length, buffer, penalty)


# ----------------------------------------------------------------------- repetition_penalty
# open-r1's rule (huggingface/open-r1, src/open_r1/rewards.py, get_repetition_penalty_reward):
#   words = text.lower().split(); n-grams = runs of ngram_size consecutive words;
#   an empty text, or one with fewer than ngram_size words, scores 0; otherwise
#   scaling = 1 - len(set(n-grams)) / len(n-grams) and reward = scaling * max_penalty.
# Defaults in src/open_r1/configs.py: repetition_n_grams = 3, repetition_max_penalty = -1.0.

OPEN_R1_VECTORS = [
    # huggingface/open-r1, tests/test_rewards.py, class TestRepetitionPenaltyReward:
    # (completion, ngram_size, max_penalty, expected reward)
    ("this is a test sentence", 2, -1.0, 0.0),  # test_no_repetition
    ("this this this this this", 2, -1.0, -0.75),  # test_full_repetition
    ("this is a this is a test", 2, -1.0, -1 / 3),  # test_partial_repetition
    ("this is a test", 3, -0.5, 0.0),  # test_multiple_completions, first
    ("test test test test", 3, -0.5, -0.25),  # test_multiple_completions, second
    ("", 2, -1.0, 0.0),  # test_empty_completion
    ("this is a this is a test", 3, -2.0, -0.4),  # test_different_ngram_size
    ("word", 3, -1.0, 0.0),  # test_one_word_completion
    ("two words", 3, -1.0, 0.0),  # test_two_word_completion
    ("three different words", 3, -1.0, 0.0),  # test_three_word_completion
    ("word word word word", 3, -1.0, -0.5),  # test_three_word_repetition_completion
    ("one two one two", 3, -1.0, 0.0),  # test_four_word_completion_with_repetition
    ("A B C A B", 3, -0.5, 0.0),  # test_five_word_completion_with_repetition
    ("A B C A B C", 3, -1.0, -0.25),  # test_six_word_completion_with_repetition
    ("A B C A B C E F G A B C A B C", 3, -1.0, -5 / 13),  # test_long_..._with_repetition
    ("A B C D E F G H I J K L", 3, -1.0, 0.0),  # test_long_completion_without_repetition
]


@pytest.mark.parametrize(("text", "ngram_size", "max_penalty", "expected"), OPEN_R1_VECTORS)
def test_open_r1_published_vectors(
    text: str, ngram_size: int, max_penalty: float, expected: float
) -> None:
    result = call("repetition_penalty", text, ngram_size=ngram_size, max_penalty=max_penalty)
    assert result["score"] == pytest.approx(expected, abs=1e-15)


def test_open_r1_mixed_case_vector() -> None:
    """open-r1's test_mixed_case: the text is lower-cased, so both score the same."""
    first = call("repetition_penalty", "This is A Test", ngram_size=2)
    assert first == call("repetition_penalty", "this IS a test", ngram_size=2)


@pytest.mark.parametrize(
    ("text", "ngram_size", "max_penalty", "ngrams", "distinct", "score"),
    [
        # "a b c a b c": bigrams (a b)(b c)(c a)(a b)(b c) = 5, distinct 3: 1 - 3/5 = 0.4
        ("a b c a b c", 2, -1.0, 5, 3, -0.4),
        # unigrams of "to be or not to be": 6 words, distinct {to, be, or, not} = 4:
        # 1 - 4/6 = 1/3, times -3 = -1
        ("to be or not to be", 1, -3.0, 6, 4, -(1 - 4 / 6) * 3.0),
        # "Go go GO go" lower-cased: 3 bigrams, all (go go): 1 - 1/3 = 2/3
        ("Go go GO go", 2, -1.0, 3, 1, -(1 - 1 / 3)),
        # whitespace of any kind separates: "x\ty\nx y" -> x y x y: trigrams (x y x)(y x y): 0
        ("x\ty\nx\u3000y", 3, -1.0, 2, 2, 0.0),
        # punctuation stays in a word: "yes, yes yes" -> (yes,)(yes)(yes): 3 unigrams, 2 distinct
        ("yes, yes yes", 1, -1.0, 3, 2, -(1 - 2 / 3)),
        # exactly ngram_size words: one n-gram, distinct: 0
        ("one two three", 3, -1.0, 1, 1, 0.0),
        # 12 words, 9-grams (the id-doubling path): 4 n-grams of "a b c" * 4, distinct 3
        # (starting at offsets 0, 1, 2 of the period): 1 - 3/4 = 0.25
        ("a b c " * 4, 9, -1.0, 4, 3, -0.25),
        # 20 identical words, 17-grams: 4 n-grams, 1 distinct: 1 - 1/4 = 0.75
        ("z " * 20, 17, -2.0, 4, 1, -1.5),
    ],
)
def test_repetition_table(
    text: str, ngram_size: int, max_penalty: float, ngrams: int, distinct: int, score: float
) -> None:
    result = call("repetition_penalty", text, ngram_size=ngram_size, max_penalty=max_penalty)
    assert result["ngrams"] == ngrams and result["distinct_ngrams"] == distinct
    assert result["score"] == pytest.approx(score, abs=1e-15)
    assert result["repetition"] == pytest.approx(1 - distinct / ngrams, abs=1e-15)


def test_repetition_defaults_are_open_r1s() -> None:
    options = lookup("any/source", "repetition_penalty").options
    assert options["ngram_size"].default == 3
    assert options["max_penalty"].default == -1.0
    # "A B C A B C": trigrams ABC BCA CAB ABC, 3 distinct of 4: (1 - 3/4) * -1 = -0.25
    assert call("repetition_penalty", "A B C A B C")["score"] == -0.25


def _naive_distinct(items: Sequence[str], size: int) -> int:
    return len({tuple(items[i : i + size]) for i in range(len(items) - size + 1)})


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "c", "é", "\U0001f600"]), max_size=60), st.integers(1, 40)
)
def test_distinct_ngrams_match_a_naive_count(items: list[str], size: int) -> None:
    """Both the tuple path (sizes up to 8) and the id-doubling path (larger sizes)."""
    assert count_distinct_ngrams(items, size) == _naive_distinct(items, size)


def _open_r1_formula(text: str, ngram_size: int, max_penalty: float) -> float:
    """The rule written out above, directly (an oracle, not the package's code path)."""
    items = text.lower().split()
    if len(items) < ngram_size:
        return 0.0
    total = len(items) - ngram_size + 1
    return (1 - _naive_distinct(items, ngram_size) / total) * max_penalty


word_lists = st.lists(
    st.sampled_from(["the", "The", "THE", "cat", "sat", "ß", "İ", "東京", "a.", "\U0001f600"]),
    max_size=40,
)
separators = st.sampled_from([" ", "\n", "\t", "  ", "\u3000", "\u00a0"])


@settings(max_examples=300, deadline=None)
@given(word_lists, separators, st.integers(1, 12), st.floats(-5, 0, allow_nan=False))
def test_repetition_follows_the_rule(
    items: list[str], separator: str, ngram_size: int, max_penalty: float
) -> None:
    text = separator.join(items)
    result = call("repetition_penalty", text, ngram_size=ngram_size, max_penalty=max_penalty)
    assert result["score"] == _open_r1_formula(text, ngram_size, max_penalty)
    assert max_penalty <= result["score"] <= 0  # bounded by max_penalty
    assert 0 <= result["repetition"] < 1


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 30), st.integers(1, 10), st.floats(-5, -0.01, allow_nan=False))
def test_all_distinct_ngrams_score_zero(count: int, ngram_size: int, max_penalty: float) -> None:
    text = " ".join(f"w{index}" for index in range(count))
    result = call("repetition_penalty", text, ngram_size=ngram_size, max_penalty=max_penalty)
    assert result["score"] == 0.0 and result["repetition"] == 0.0
    assert str(result["score"]) == "0.0"
    assert result["distinct_ngrams"] == result["ngrams"] == max(count - ngram_size + 1, 0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=10),
    st.integers(1, 12),
)
def test_repeating_a_block_never_raises_the_score(block: list[str], ngram_size: int) -> None:
    """From two copies on, one more copy of the block never raises the score; the first copy
    may (a block that repeats itself, followed by new n-grams across the seam)."""
    scores = [
        call("repetition_penalty", " ".join(block * copies), ngram_size=ngram_size)["score"]
        for copies in range(2, 10)
    ]
    assert all(later <= earlier for earlier, later in itertools.pairwise(scores))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 10), st.integers(1, 12))
def test_repeating_a_block_of_distinct_words(size: int, ngram_size: int) -> None:
    block = [f"w{index}" for index in range(size)]
    scores = [
        call("repetition_penalty", " ".join(block * copies), ngram_size=ngram_size)["score"]
        for copies in range(1, 10)
    ]
    assert scores[0] == 0.0
    assert all(later <= earlier for earlier, later in itertools.pairwise(scores))
    assert scores[-1] < 0 or 9 * size < ngram_size + size  # saturates once it repeats


def test_block_repetition_worked_example() -> None:
    """Hand-worked: "a b c" repeated k times, trigrams: 3k - 2 of them, 3 distinct once k >= 2
    (abc, bca, cab): k=1: 0; k=2: 1 - 3/4; k=3: 1 - 3/7; k=10: 1 - 3/28."""
    scores = [call("repetition_penalty", "a b c " * k)["score"] for k in (1, 2, 3, 10)]
    assert scores == [0.0, -(1 - 3 / 4), -(1 - 3 / 7), -(1 - 3 / 28)]


# ---------------------------------------------------------------------- answer_list_penalty


def test_the_term_uses_the_one_rule() -> None:
    """The rule lives in ``reward_plugins.text.answers``; the report parses no answer (it shows
    the term's ``candidates`` key)."""
    from reward_plugins.plugins import shaping
    from reward_plugins.rescore import report

    assert shaping.count_candidates is answers.count_candidates is count_candidates
    assert shaping.MIN_CANDIDATES == answers.MIN_CANDIDATES == MIN_CANDIDATES == 3
    assert not hasattr(report, "count_candidates")


@pytest.mark.parametrize(
    ("answer", "items"),
    [
        ("Paris, Lyon or Nice", 3),  # "," then " or ": Paris | Lyon | Nice
        ("Paris, Lyon, Nice, Lille", 4),
        ("Paris and Lyon", 2),
        ("PARIS OR LYON OR NICE", 3),  # the words in any case
        ("Paris\tor\nLyon", 2),  # one whitespace character on each side, of any kind
        ("Paris  or  Lyon", 2),  # "  or  " still holds " or "
        ("Portland/Oregon|USA;Earth", 4),
        ("1,000,000", 1),  # a comma between two digits does not split
        ("1, 2, 3", 3),  # "1," splits: the next character is not a digit
        ("a,1", 2),  # "a,": the comma follows no digit
        ("Oregon", 1),  # "or" inside a word is no separator
        ("or and or", 2),  # one separator, " and "; the outer "or"s lack whitespace on a side
        (", ; / |", 0),
        ("", 0),
        ("Salt Lake City", 1),
    ],
)
def test_count_candidates_table(answer: str, items: int) -> None:
    assert count_candidates(answer) == items


@pytest.mark.parametrize(
    ("response", "options", "candidates", "score", "found"),
    [
        ("<answer>Paris, Lyon or Nice</answer>", {}, 3, -1.0, 1.0),
        ("<answer>Paris, Lyon or Nice</answer>", {"penalty": 0.5}, 3, -0.5, 1.0),
        ("<answer>Paris, Lyon or Nice</answer>", {"min_candidates": 4}, 3, 0.0, 1.0),
        ("<answer>Paris or Lyon</answer>", {}, 2, 0.0, 1.0),
        ("<answer>Paris or Lyon</answer>", {"min_candidates": 2}, 2, -1.0, 1.0),
        ("<answer>Paris</answer>", {"min_candidates": 2}, 1, 0.0, 1.0),
        ("<answer></answer>", {}, 0, 0.0, 1.0),
        ("Paris, Lyon or Nice", {}, 0, 0.0, 0.0),  # no answer span: never penalized
        ("<answer>Paris, Lyon, Nice", {}, 0, 0.0, 0.0),  # unclosed
        ("<answer>a, b, c</answer> <answer>Paris</answer>", {}, 1, 0.0, 1.0),  # the last
        ("<answer>a, b, c</answer> <answer>Paris</answer>", {"extract": "first"}, 3, -1.0, 1.0),
        ("<answer>a, b, c</answer>", {"penalty": 0.0}, 3, 0.0, 1.0),
    ],
)
def test_answer_list_penalty_table(
    response: str, options: dict[str, Any], candidates: int, score: float, found: float
) -> None:
    result = call("answer_list_penalty", response, **options)
    assert result == {"score": score, "candidates": candidates, "answer_found": found}
    assert str(result["score"]) == str(score)  # never -0.0


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["Paris", "1", "0", " ", ",", ", ", " or ", " AND ", "/", "|", ";", "\n"]),
        max_size=20,
    ).map("".join),
    st.integers(2, 6),
    st.floats(0, 10, allow_nan=False),
)
def test_answer_list_penalty_follows_the_rule(answer: str, threshold: int, penalty: float) -> None:
    result = call(
        "answer_list_penalty",
        f"<answer>{answer}</answer>",
        min_candidates=threshold,
        penalty=penalty,
    )
    expected_items = count_candidates(answer.strip())
    assert result["candidates"] == expected_items
    assert result["score"] == (-penalty if expected_items >= threshold else 0.0)
    assert -penalty <= result["score"] <= 0


ADVERSARIAL_PIECES = (", ", "1,1", " o", " an", " or", "\t", "/", "a,", ",1")
"""Pieces that start a separator attempt at every position: commas next to digits (the look-
arounds), whitespace followed by half an "or"/"and", and separators proper."""


def _adversarial_answer(size: int) -> str:
    body = "".join(ADVERSARIAL_PIECES)
    return "<answer>" + (body * (size // len(body) + 1))[:size] + "</answer>"


def test_answer_list_penalty_is_linear_on_a_1_mib_adversarial_answer() -> None:
    """Eight times the answer takes about eight times as long, not sixty-four (a quadratic
    scan's ratio); the bound of 20 leaves room for timer noise."""
    small, large = _adversarial_answer(128 * 1024), _adversarial_answer(1024 * 1024)
    result = call("answer_list_penalty", large)
    assert result["candidates"] > 100_000 and result["score"] == -1.0
    small_time = best_time(lambda: call("answer_list_penalty", small), repeats=3)
    large_time = best_time(lambda: call("answer_list_penalty", large), repeats=3)
    ratio = large_time / max(small_time, 1e-9)
    assert ratio < 20, f"{small_time:.4f} s for 128 KiB, {large_time:.4f} s for 1 MiB: x{ratio:.1f}"


# --------------------------------------------------------------------- language_mix_penalty


@pytest.mark.parametrize(
    ("text", "scripts", "letters", "foreign"),
    [
        ("Hello, world!", ("Latin",), 10, 0),  # Hello 5 + world 5
        ("Hello мир", ("Latin",), 8, 3),  # мир: 3 Cyrillic letters
        ("Hello мир", ("Latin", "Cyrillic"), 8, 0),
        ("東京 Tokyo 2024", ("Han",), 7, 5),  # 東京 2 + Tokyo 5; digits are not letters
        ("ひらがなカタカナ漢字", ("Hiragana",), 10, 6),  # 4 + 4 + 2
        ("ひらがなカタカナ漢字ー", ("Hiragana", "Katakana", "Han"), 11, 0),  # ー is a letter
        ("naïve café Việt Nam ﬁn", ("Latin",), 18, 0),  # Latin-1, Extended Additional, ﬁ
        ("\uff34\uff4f\uff4b\uff59\uff4f", ("Latin",), 5, 0),  # fullwidth "Tokyo"
        ("Ελληνικά", ("Latin",), 8, 8),
        ("Ελληνικά", ("Greek",), 8, 0),
        ("e\u0301", ("Latin",), 1, 0),  # a combining accent is not a letter
        ("مرحبا שלום नमस्ते", ("Latin",), 13, 13),  # 5 + 4 + 4 (the virama and sign: not)
        ("한국어 ქართული ไทย", ("Hangul", "Georgian", "Thai"), 13, 0),
        ("አማርኛ", SCRIPTS.keys(), 4, 4),  # Ethiopic: in no listed script
        ("12345 !!! ... ???", ("Latin",), 0, 0),
        ("", ("Latin",), 0, 0),
        ("\U00020000\U0002a6d6", ("Han",), 2, 0),  # supplementary ideographic plane
        ("µ", ("Latin",), 1, 0),  # MICRO SIGN sits in Latin-1 Supplement
    ],
)
def test_foreign_letters_table(
    text: str, scripts: Sequence[str], letters: int, foreign: int
) -> None:
    assert count_foreign_letters(text, tuple(scripts)) == (letters, foreign)
    result = call("language_mix_penalty", text, scripts=list(scripts), penalty=2.0)
    share = foreign / letters if letters else 0.0
    assert result == {
        "score": -2.0 * share + 0.0,
        "letters": letters,
        "foreign_letters": foreign,
        "foreign_share": share,
    }


@pytest.mark.parametrize(
    ("response", "options", "letters", "foreign"),
    [
        # markup is removed: <think>, </think>, <answer>, </answer>, <|im_end|> hold no letters
        ("<think>考える</think><answer>Paris</answer><|im_end|>", {}, 8, 3),
        # the answer only: Париж, 5 Cyrillic letters of 5
        ("Paris <answer>Париж</answer>", {"text": "answer"}, 5, 5),
        ("Paris <answer>Париж</answer>", {}, 10, 5),
        ("<answer>a</answer> <answer>\u0431</answer>", {"text": "answer"}, 1, 1),
        (
            "<answer>a</answer> <answer>\u0431</answer>",
            {"text": "answer", "extract": "first"},
            1,
            0,
        ),
        ("no answer: Привет", {"text": "answer"}, 0, 0),  # an absent answer is empty
        ("a < b and c > d", {}, 7, 0),  # comparisons are not markup: a, b, and, c, d
        ("<br/>x<\uff5cend\u2581of\u2581sentence\uff5c>", {}, 1, 0),  # DeepSeek's end token,
    ],
)
def test_language_mix_penalty_table(
    response: str, options: dict[str, Any], letters: int, foreign: int
) -> None:
    result = call("language_mix_penalty", response, **options)
    share = foreign / letters if letters else 0.0
    assert result == {
        "score": -share + 0.0,
        "letters": letters,
        "foreign_letters": foreign,
        "foreign_share": share,
    }


def _oracle_foreign(text: str, scripts: Sequence[str]) -> tuple[int, int]:
    """Character by character, against the listed ranges (no merging, no ASCII shortcut)."""
    ranges = [r for name in scripts for r in SCRIPTS[name]]
    letters = [char for char in text if char.isalpha()]
    inside = [c for c in letters if any(start <= ord(c) <= end for start, end in ranges)]
    return len(letters), len(letters) - len(inside)


@settings(max_examples=400, deadline=None)
@given(
    st.text(max_size=80) | st.text(st.characters(max_codepoint=0x7F), max_size=80),
    st.lists(st.sampled_from(sorted(SCRIPTS)), min_size=1, max_size=4, unique=True),
    st.floats(0, 10, allow_nan=False),
)
def test_language_mix_matches_a_character_oracle(
    text: str, scripts: list[str], penalty: float
) -> None:
    assert count_foreign_letters(text, scripts) == _oracle_foreign(text, scripts)
    result = call("language_mix_penalty", text, scripts=scripts, penalty=penalty)
    letters, foreign = _oracle_foreign(strip_markup(text), scripts)
    assert (result["letters"], result["foreign_letters"]) == (letters, foreign)
    assert 0 <= result["foreign_share"] <= 1
    assert -penalty <= result["score"] <= 0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(st.sampled_from("0123456789 .,;:!?()\n\t-+=%"), max_size=20))
def test_digits_punctuation_and_whitespace_do_not_count(text: str, noise: str) -> None:
    plain = call("language_mix_penalty", text)
    noisy = call("language_mix_penalty", noise + text + noise)
    assert noisy == plain


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(SCRIPTS)), st.data())
def test_letters_of_a_script_are_inside_it(script: str, data: st.DataObject) -> None:
    start, end = data.draw(st.sampled_from(SCRIPTS[script]))
    code = data.draw(st.integers(start, end))
    char = chr(code)
    assume(char.isalpha())
    assert count_foreign_letters(char * 3, [script]) == (3, 0)
    others = [name for name in SCRIPTS if name != script]
    assert count_foreign_letters(char, others) == (1, 1)  # the blocks do not overlap


# ------------------------------------------------------------------- option errors and keys


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("length_penalty", {}, "missing required option(s) 'max_length', 'buffer'"),
        ("length_penalty", {"max_length": 10}, "missing required option(s) 'buffer'"),
        (
            "length_penalty",
            {"max_length": 10, "buffer": 11},
            "option 'buffer' must be <= max_length (10), got 11; valid range: 1 <= buffer <= "
            "max_length",
        ),
        ("length_penalty", {"max_length": 10, "buffer": 0}, "option 'buffer' must be an int >= 1"),
        ("length_penalty", {"max_length": 0, "buffer": 1}, "option 'max_length' must be an int >="),
        ("length_penalty", {"max_length": True, "buffer": 1}, "got bool: True"),
        ("length_penalty", {"max_length": 10.0, "buffer": 1}, "got float: 10.0"),
        ("length_penalty", {"max_length": 10, "buffer": "4"}, "got str: '4'"),
        (
            "length_penalty",
            {**LENGTH_OPTIONS, "penalty": -1},
            "option 'penalty' must be a finite number in [0, 1e+06], got int: -1",
        ),
        ("length_penalty", {**LENGTH_OPTIONS, "penalty": True}, "got bool: True"),
        ("length_penalty", {**LENGTH_OPTIONS, "penalty": float("nan")}, "got float: nan"),
        (
            "length_penalty",
            {**LENGTH_OPTIONS, "unit": "tokens"},
            "option 'unit' must be one of 'response_words', 'answer_words', 'characters', got "
            "str: 'tokens'",
        ),
        ("length_penalty", {**LENGTH_OPTIONS, "extract": "middle"}, "option 'extract' must be"),
        (
            "length_penalty",
            {**LENGTH_OPTIONS, "max_len": 3},
            "unknown option(s) 'max_len'; valid options: buffer, extract, max_length, penalty, "
            "unit",
        ),
        (
            "repetition_penalty",
            {"ngram_size": 0},
            "option 'ngram_size' must be an int >= 1, got int: 0",
        ),
        ("repetition_penalty", {"ngram_size": True}, "got bool: True"),
        ("repetition_penalty", {"ngram_size": 2.0}, "got float: 2.0"),
        (
            "repetition_penalty",
            {"max_penalty": 0.5},
            "option 'max_penalty' must be a finite number in [-1e+06, 0], got float: 0.5",
        ),
        (
            "answer_list_penalty",
            {"min_candidates": 1},
            "option 'min_candidates' must be an int >= 2, got int: 1",
        ),
        ("answer_list_penalty", {"penalty": -0.1}, "option 'penalty' must be a finite number in"),
        (
            "language_mix_penalty",
            {"scripts": ["Latin", "Klingon"]},
            "option 'scripts' must be a non-empty list of script names, got unknown script(s) "
            "'Klingon'; valid names: Latin, Greek, Cyrillic,",
        ),
        (
            "language_mix_penalty",
            {"scripts": []},
            "option 'scripts' must be a non-empty list of script names, got an empty list",
        ),
        ("language_mix_penalty", {"scripts": "Latin"}, "option 'scripts' must be a list of str"),
        ("language_mix_penalty", {"scripts": ["latin"]}, "unknown script(s) 'latin'"),
        (
            "language_mix_penalty",
            {"text": "prompt"},
            "option 'text' must be one of 'response', 'answer', got str: 'prompt'",
        ),
    ],
)
def test_option_errors(name: str, options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidOption) as caught:
        call(name, "text", **options)
    assert str(caught.value).startswith(f"{name}: ")
    assert message in str(caught.value)


def test_options_are_checked_once_per_option_set() -> None:
    registration = lookup("any/source", "language_mix_penalty")
    first = registration.bind({"scripts": ["Latin", "Greek"]})
    assert registration.bind({"scripts": ["Latin", "Greek"]}) is first


BRANCHES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "length_penalty": [
        (response, {**LENGTH_OPTIONS, "unit": unit})
        for response in ("", "short", words(8), words(30), "<answer>a b c</answer>")
        for unit in ("response_words", "answer_words", "characters")
    ],
    "repetition_penalty": [
        (response, {"ngram_size": size})
        for response in ("", "one", "a b c", "a a a a", "x y z " * 5)
        for size in (1, 3, 12)
    ],
    "answer_list_penalty": [
        (response, {})
        for response in ("", "a, b, c", "<answer>a</answer>", "<answer>a, b, c</answer>")
    ],
    "language_mix_penalty": [
        (response, {"text": text})
        for response in ("", "123", "abc", "абв", "<answer>abc абв</answer>", "東京")
        for text in ("response", "answer")
    ],
}


@pytest.mark.parametrize("name", list(TERMS))
def test_fixed_keys_on_every_branch(name: str) -> None:
    scores = set()
    for response, options in BRANCHES[name]:
        result = call(name, response, **options)
        assert tuple(result) == TERMS[name], (response, options)
        assert all(isinstance(value, (int, float)) for value in result.values())
        assert isinstance(result["score"], float) and result["score"] <= 0
        scores.add(result["score"] < 0)
    assert scores == {True, False}  # the branches do reach both a penalty and none


# ------------------------------------------------------------------------------ the routers


@pytest.mark.parametrize("name", list(TERMS))
def test_routers_as_verl_calls_them(name: str) -> None:
    options = LENGTH_OPTIONS if name == "length_penalty" else {}
    response = "<answer>Paris, Lyon or Nice</answer> " + "the same words " * 5 + "и"
    expected = call(name, response, **options)
    assert expected["score"] < 0
    router = getattr(reward_plugins, name)
    truths: list[Any] = [None, "Paris", ["Paris", 3], {"target": np.array(["Paris"])}, {"x": [{}]}]
    for source in ("searchR1_nq", "my_org/anything", ""):
        for truth in truths:
            by_keyword = router(
                data_source=source,
                solution_str=response,
                ground_truth=truth,
                extra_info={"split": "train"},
                **options,
            )
            assert by_keyword == expected
            assert router(source, response, truth, None, **options) == expected
    assert router("s", response, None, return_dict=False, **options) == expected["score"]
    verl_keywords = {"reward_router_address": "http://127.0.0.1:1", "reward_model_tokenizer": None}
    assert router("s", response, None, {}, **options, **verl_keywords) == expected


def test_batch_router() -> None:
    results = reward_plugins.compute_score_batch(
        ["a", "b"],
        ["w w w w w w w w w w w w", "w"],
        [None, None],
        scorer="length_penalty",
        max_length=10,
        buffer=4,
    )
    # 12 words: exceed = 12 - 6 = 6: -6/4, held at -1 past max_length; 1 word: 0
    assert [result["score"] for result in results if isinstance(result, dict)] == [-1.0, 0.0]


def test_registered_for_every_data_source() -> None:
    for name in TERMS:
        registration = lookup("never/seen/before", name)
        assert registration.data_sources == ("*",)
        assert registration.ground_truth == "raw"
        assert registration.function.__module__ == "reward_plugins.plugins.shaping"


# ---------------------------------------------------------------------------- documentation


def test_docstring_examples() -> None:
    failed, attempted = doctest.testmod(shaping)
    assert attempted > 0 and failed == 0


def test_the_docs_page_names_every_term_option_and_key(repo_root: Any) -> None:
    page = (repo_root / "docs" / "shaping.md").read_text(encoding="utf-8")
    for name, keys in TERMS.items():
        assert f"`{name}`" in page
        for key in keys:
            assert f"`{key}`" in page, (name, key)
        for option, spec in lookup("any/source", name).options.items():
            assert f"`{option}`" in page, (name, option)
            if not spec.required:  # shown as Python writes it, or with double quotes
                shown = repr(spec.default)
                quoted = shown.replace("'", '"')
                assert f"`{shown}`" in page or f"`{quoted}`" in page, (name, option)
    for script in SCRIPTS:
        assert script in page
    assert re.search(r"dapo.*already", page, re.IGNORECASE | re.DOTALL)
