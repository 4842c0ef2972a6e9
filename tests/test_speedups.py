"""The C twins in ``reward_plugins._speedups`` return exactly what their Python references return.

The package uses the compiled tag scan and SQuAD normalizer where they were built, and the
Python references otherwise; the rest of the suite tests whichever is active against verl and
the regex oracles. Here the two are compared with each other directly, on generated text that
stresses what C code can get wrong: every string width (1, 2 and 4 bytes per character), texts
longer than the C stack buffer, tag and article fragments at word boundaries, odd whitespace.
"""

from __future__ import annotations

import importlib.util
import os
import string
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reward_plugins.extract import scan_tags_python
from reward_plugins.text.normalize import normalize_squad_python

if importlib.util.find_spec("reward_plugins._speedups") is None:
    # CI builds the package with a compiler, so there a missing extension is a failure.
    if os.environ.get("CI") == "true":
        raise AssertionError("reward_plugins._speedups was not built (CI=true needs it)")
    pytest.skip("the C extension is not built here", allow_module_level=True)

from reward_plugins import _speedups
from reward_plugins.extract import _scan_tags
from reward_plugins.text.normalize import _normalize_squad

WIDE = ["é", "\u4e2d", "\U0001f600", "\u2019", "\u3000", "\x85", "\u0130", "_"]
"""Latin-1, 2-byte, 4-byte characters; a typographic quote, Unicode spaces, a character that
lower-cases into two, and the word character that is ASCII punctuation."""

TAG_FRAGMENTS = ["<answer>", "</answer>", "<answer", "</answer", "answer>", "<", ">", "/", "a"]
TAGS = ["answer", "think", "/x", "", "a<b", "é", "\u4e2d\U0001f600"]

ARTICLE_FRAGMENTS = ["a", "an", "the", "The", "A", "AN", "x", "1", " ", "  ", "\t", "\n"]
PUNCTUATION = [*string.punctuation, "\x7f", "\x1c", "\x00"]


def soup(fragments: list[str]) -> st.SearchStrategy[str]:
    pieces = st.sampled_from(fragments) | st.text(max_size=3)
    return st.lists(pieces, max_size=40).map("".join)


def test_the_package_uses_the_twins() -> None:
    assert _scan_tags is _speedups.scan_tags
    assert _normalize_squad is _speedups.normalize_squad


@settings(max_examples=3000, deadline=None)
@given(
    soup(TAG_FRAGMENTS + WIDE + [f"<{tag}>" for tag in TAGS] + [f"</{tag}>" for tag in TAGS]),
    st.sampled_from(TAGS),
    st.booleans(),
)
def test_scan_tags_matches_python(text: str, tag: str, first: bool) -> None:
    assert _speedups.scan_tags(text, tag, first) == scan_tags_python(text, tag, first)


@pytest.mark.parametrize("wide", ["", "é", "\u4e2d", "\U0001f600"])
@pytest.mark.parametrize("first", [False, True])
def test_scan_tags_on_long_texts(wide: str, first: bool) -> None:
    text = (f"<answer>{wide}x" * 500 + "</answer>" * 3 + wide) * 20
    assert _speedups.scan_tags(text, "answer", first) == scan_tags_python(text, "answer", first)


@settings(max_examples=3000, deadline=None)
@given(soup(ARTICLE_FRAGMENTS + PUNCTUATION + WIDE), st.booleans())
def test_normalize_squad_matches_python(text: str, spaced: bool) -> None:
    assert _speedups.normalize_squad(text, spaced) == normalize_squad_python(text, spaced)


@settings(max_examples=1000, deadline=None)
@given(st.text(), st.booleans())
def test_normalize_squad_matches_python_on_any_text(text: str, spaced: bool) -> None:
    assert _speedups.normalize_squad(text, spaced) == normalize_squad_python(text, spaced)


@pytest.mark.parametrize("wide", ["", "é", "\u4e2d", "\U0001f600"])
def test_normalize_squad_beyond_the_stack_buffer(wide: str) -> None:
    for length in (255, 256, 257, 10_000):
        text = ("The a-n " + wide + "an, THE_x ")[:9] * (length // 9 + 1)
        text = text[:length]
        for spaced in (False, True):
            assert _speedups.normalize_squad(text, spaced) == normalize_squad_python(text, spaced)


def test_type_errors_name_the_argument() -> None:
    with pytest.raises(TypeError, match="scan_tags"):
        _speedups.scan_tags(b"<answer>x</answer>", "answer", False)
    with pytest.raises(TypeError, match="normalize_squad"):
        _speedups.normalize_squad(None, False)


def test_no_memory_is_leaked() -> None:
    """Heap buffers (long texts) and result objects are released: repeated calls keep the
    traced memory flat."""
    long_text = "The answer is <answer> Paris </answer>. " * 50

    def calls() -> None:
        for _ in range(2000):
            _speedups.normalize_squad(long_text, False)
            _speedups.scan_tags(long_text, "answer", False)

    calls()
    tracemalloc.start()
    try:
        calls()
        before = tracemalloc.get_traced_memory()[0]
        calls()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 10_000
