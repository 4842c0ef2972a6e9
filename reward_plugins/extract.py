"""Tag extraction and counting in time linear in the response length.

verl and Search-R1 extract answers with ``re.finditer(r"<answer>(.*?)</answer>", text, re.DOTALL)``:
left-to-right, non-overlapping, lazy matches, of which the last (or first) is used. On a response
with many unclosed ``<answer>`` tags that regex rescans to the end of the text from every opener,
which is quadratic.

Here one regex pass finds every opening and closing tag (they cannot overlap), and the reference's
matching is replayed on that sequence of tags: an opener, while none is pending, becomes pending;
a closer ends the pending opener's span; other tags are skipped, as the lazy regex skips them. The
same pass yields the tag counts that the anti-spam rule needs. Where the package was built with a
C compiler, ``reward_plugins._speedups.scan_tags`` does the same in one ``memchr``-driven pass;
:func:`scan_tags_python` is its reference, and tests hold the two to the same results.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from reward_plugins.cache import TAG_PATTERNS, BoundedCache

try:  # the C twin of scan_tags_python, built at install time where a compiler is available
    from reward_plugins._speedups import scan_tags as _compiled_scan
except ImportError:
    _compiled_scan = None

ExtractMode = Literal["last", "first"]
EXTRACT_MODES: tuple[str, ...] = ("last", "first")


TagScan = tuple[str | None, int, int]
"""``(content, opening, closing)``: the stripped content of the chosen ``<tag>...</tag>`` match
(``None`` if there is none) and the counts of ``<tag>`` and ``</tag>`` in the text."""

_ONE_PAIR = ["", "/"]
_tag_patterns = BoundedCache[str, tuple[re.Pattern[str], str, str]](TAG_PATTERNS)


def _tag_pattern(tag: str) -> tuple[re.Pattern[str], str, str]:
    """``(pattern matching both tags, opener, closer)``; a dict lookup after the first call."""
    entry = _tag_patterns.get(tag)
    if entry is None:
        entry = _tag_patterns[tag] = (
            re.compile(f"<(/?){re.escape(tag)}>"),
            f"<{tag}>",
            f"</{tag}>",
        )
    return entry


def scan_tags(text: str, tag: str = "answer", mode: ExtractMode = "last") -> TagScan:
    """Count ``<tag>`` and ``</tag>`` and extract the last (or first) match of the reference regex.

    Example:
        >>> scan_tags("<answer>a<answer>b</answer> <answer>c</answer></answer>")
        ('c', 3, 3)
        >>> scan_tags("<answer>a<answer>b</answer> <answer>c</answer>", mode="first")
        ('a<answer>b', 3, 2)
    """
    return _scan_tags(text, tag, mode == "first")


def scan_tags_python(text: str, tag: str, first: bool) -> TagScan:
    """:func:`scan_tags` with ``first`` for ``mode == "first"``: the reference for
    ``_speedups.scan_tags``, its C twin.

    One C-level regex pass lists the kinds of all tags in order; the reference's matching is
    replayed on that list, then the chosen span is located by stepping from the nearer end of the
    text over the tags in between, each a ``str.rfind``/``str.find`` that stops at that tag.
    """
    pattern, opener, closer = _tag_pattern(tag)
    kinds = pattern.findall(text)  # "" for an opener, "/" for a closer
    if kinds == _ONE_PAIR:  # the usual response: one well-formed answer
        end = text.rfind(closer)
        return text[text.rfind(opener, 0, end) + len(opener) : end].strip(), 1, 1
    closing = kinds.count("/")
    opening = len(kinds) - closing
    span = _matched_pair(kinds, first)
    if span is None:
        return None, opening, closing
    if first:
        start, end = _locate_first(text, kinds, span, opener, closer)
    else:
        start, end = _locate_last(text, kinds, span, opener, closer)
    return text[start:end].strip(), opening, closing


def _matched_pair(kinds: list[str], first: bool) -> tuple[int, int] | None:
    """The indexes in ``kinds`` of the first (or last) opener matched by the closer after it,
    as the reference matches them (a later opener replaces an unclosed one only once closed)."""
    span = None
    pending = -1
    for index, kind in enumerate(kinds):
        if kind:
            if pending >= 0:
                span = (pending, index)
                pending = -1
                if first:
                    break
        elif pending < 0:
            pending = index
    return span


def _locate_first(
    text: str, kinds: list[str], span: tuple[int, int], opener: str, closer: str
) -> tuple[int, int]:
    """The content's ``(start, end)`` in ``text``, stepping over the tags from the start."""
    open_index, close_index = span
    position = start = 0
    for index in range(close_index + 1):
        tag_text = closer if kinds[index] else opener
        position = text.find(tag_text, position) + len(tag_text)
        if index == open_index:
            start = position
    return start, position - len(closer)


def _locate_last(
    text: str, kinds: list[str], span: tuple[int, int], opener: str, closer: str
) -> tuple[int, int]:
    """The content's ``(start, end)`` in ``text``, stepping over the tags from the end."""
    open_index, close_index = span
    position = end = len(text)
    for index in range(len(kinds) - 1, open_index - 1, -1):
        position = text.rfind(closer if kinds[index] else opener, 0, position)
        if index == close_index:
            end = position
    return position + len(opener), end


_scan_tags = scan_tags_python if _compiled_scan is None else _compiled_scan


def extract_tag(text: str, tag: str = "answer", mode: ExtractMode = "last") -> str | None:
    """The stripped content of the last (or first) ``<tag>...</tag>`` match, or ``None``.

    Example:
        >>> extract_tag("<answer> Paris </answer> then <answer>Lyon</answer>")
        'Lyon'
        >>> extract_tag("<answer> Paris </answer> then <answer>Lyon</answer>", mode="first")
        'Paris'
        >>> extract_tag("no answer here") is None
        True
    """
    return scan_tags(text, tag, mode)[0]


def find_tag_spans(text: str, tag: str = "answer") -> list[str]:
    """The unstripped content of every ``<tag>...</tag>`` match, in the reference's order.

    Linear: the reference regex runs only up to the end of the last closer, so no attempt from an
    opener without a closer after it can scan to the end of the text.
    """
    closer = _tag_pattern(tag)[2]
    last_closer = text.rfind(closer)
    if last_closer < 0:
        return []
    return _span_pattern(tag).findall(text, 0, last_closer + len(closer))


@lru_cache(maxsize=TAG_PATTERNS)
def _span_pattern(tag: str) -> re.Pattern[str]:
    return re.compile(f"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", re.DOTALL)
