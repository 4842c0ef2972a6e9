"""Trailing end-of-turn markers are peeled off in time linear in their number.

``_only_end_markers`` decides whether the text after ``</answer>`` is whitespace and whole end
markers only. Its results are held to those of the original implementation (kept below as the
oracle) on generated inputs, and its work is held linear: the old version re-sliced the rest of
the text for every marker it peeled off, which is quadratic (80,000 markers took seconds).
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from timing import best_time

from reward_plugins.plugins.trajectory import DEFAULT_END_MARKERS, _only_end_markers, format_error

VALID = "<think>a</think><answer>Paris</answer>"


def _oracle(text: str, end_markers: tuple[str, ...] | list[str]) -> bool:
    """The original implementation, unchanged: the reference for the results."""
    text = text.rstrip()
    while text:
        marker = next((m for m in end_markers if m and text.endswith(m)), None)
        if marker is None:
            return False
        text = text[: -len(marker)].rstrip()
    return True


WHITESPACE = [" ", "\n", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2009", "\u3000"]
"""What ``str.rstrip()`` strips, including the Unicode spaces and separators it also strips."""

MARKER_PIECES = ["<|im_end|>", "</s>", "s>", "<", ">", "|", "end", "a", "ba", "\U0001f600", "x y"]
"""Markers and fragments of them, overlapping ones (``s>`` ends ``</s>``; ``a`` ends ``ba``) and
ones holding whitespace, so that the order of the markers and the rstrip points matter."""

markers = st.lists(st.sampled_from([*MARKER_PIECES, ""]) | st.text(max_size=3), max_size=5)
texts = st.lists(
    st.sampled_from(MARKER_PIECES + WHITESPACE + list(DEFAULT_END_MARKERS)) | st.text(max_size=2),
    max_size=30,
).map("".join)


@pytest.mark.slow  # a sweep of 2,000 examples against the oracle
@settings(max_examples=2000, deadline=None)
@given(texts, markers)
def test_same_result_as_the_original(text: str, end_markers: list[str]) -> None:
    expected = _oracle(text, end_markers)
    assert _only_end_markers(text, end_markers) is expected
    assert _only_end_markers(text, tuple(end_markers)) is expected


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from([*DEFAULT_END_MARKERS, *WHITESPACE, "x"]), max_size=40))
def test_same_result_as_the_original_on_default_markers(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert _only_end_markers(text, DEFAULT_END_MARKERS) is _oracle(text, DEFAULT_END_MARKERS)


def test_examples() -> None:
    assert _only_end_markers("", DEFAULT_END_MARKERS) is True
    assert _only_end_markers(" \n\u3000", ()) is True
    assert _only_end_markers("<|im_end|>\n<|endoftext|> ", DEFAULT_END_MARKERS) is True
    assert _only_end_markers("x<|im_end|>", DEFAULT_END_MARKERS) is False
    assert _only_end_markers("<|im_end|>", ()) is False
    assert _only_end_markers("ba", ["a", "ba"]) is False  # the first marker that ends it is used
    assert _only_end_markers("ba", ["ba", "a"]) is True
    assert _only_end_markers("x y", ["y", "x y"]) is False
    assert _only_end_markers("x y", ["x y"]) is True


def test_work_is_linear_in_the_number_of_markers() -> None:
    """Eight times the markers take about eight times as long, not sixty-four (the quadratic
    version's ratio). The bound of 20 leaves room for timer noise at either size."""
    small = "\n".join(["<|im_end|>", "</s>"] * 5_000)  # 10,000 markers
    large = "\n".join(["<|im_end|>", "</s>"] * 40_000)  # 80,000 markers
    assert _only_end_markers(small, DEFAULT_END_MARKERS) is True
    assert _only_end_markers(large + " x", DEFAULT_END_MARKERS) is False
    small_time = best_time(lambda: _only_end_markers(small, DEFAULT_END_MARKERS))
    large_time = best_time(lambda: _only_end_markers(large, DEFAULT_END_MARKERS))
    ratio = large_time / max(small_time, 1e-9)
    assert ratio < 20, (
        f"{small_time:.4f} s for 10k markers, {large_time:.4f} s for 80k: x{ratio:.1f}"
    )


def test_format_error_on_200k_end_markers() -> None:
    """A valid trajectory followed by 200,000 end markers is valid, and is checked in well under
    two seconds (the quadratic version took many seconds)."""
    text = VALID + "<|im_end|>" * 100_000 + "\n<|endoftext|>" * 100_000
    start = time.perf_counter()
    assert format_error(text) is None
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, f"{elapsed:.2f} s"
    assert format_error(text + "x") == "unexpected content after the answer"
