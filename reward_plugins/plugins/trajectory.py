"""Format validity of a Search-R1 trajectory, as Search-R1's ``qa_em_format.is_valid_sequence``.

A valid trajectory is ``<think>...</think>``, then any number of rounds
``<search>...</search> <information>...</information> <think>...</think>``, then exactly one
``<answer>...</answer>``; every tag's opening and closing counts are equal; only whitespace
stands between tags; nothing follows the answer. The tag names are parameters.

Upstream checks the text after the first ``<|im_start|>assistant`` of the decoded prompt and
response (so only Qwen's chat template passes) and rejects any end-of-turn token after the answer.
Here ``prompt_included=False`` (the default) checks verl's response-only ``solution_str`` as it is
and accepts trailing whitespace and end-of-turn markers; ``prompt_included=True`` is upstream.

One regex split and a single pass over its parts, and a walk back over the trailing end markers:
linear in the text length.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from reward_plugins import cache
from reward_plugins.cache import BoundedCache

ASSISTANT_MARKER = re.compile(r"<\|im_start\|>assistant\s*")
"""Upstream's start-of-response marker (Qwen/ChatML), used only with ``prompt_included=True``."""

DEFAULT_END_MARKERS: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>")


class TrajectoryTags(NamedTuple):
    """The four tag names of a trajectory."""

    think: str = "think"
    search: str = "search"
    information: str = "information"
    answer: str = "answer"


class _Grammar(NamedTuple):
    split: re.Pattern[str]
    transitions: dict[tuple[str, str], str]
    tags: tuple[str, ...]


_CONTENT_STATES = frozenset({"in_think", "in_search", "in_information", "in_answer"})
_grammars = BoundedCache[TrajectoryTags, _Grammar](cache.TRAJECTORY_GRAMMARS)


def _grammar(tags: TrajectoryTags) -> _Grammar:
    grammar = _grammars.get(tags)
    if grammar is None:
        names = "|".join(re.escape(name) for name in tags)
        think, search, information, answer = tags
        transitions = {
            ("start", f"<{think}>"): "in_think",
            ("information", f"<{think}>"): "in_think",
            ("in_think", f"</{think}>"): "after_think",
            ("after_think", f"<{search}>"): "in_search",
            ("in_search", f"</{search}>"): "after_search",
            ("after_search", f"<{information}>"): "in_information",
            ("in_information", f"</{information}>"): "information",
            ("after_think", f"<{answer}>"): "in_answer",
            ("in_answer", f"</{answer}>"): "end",
        }
        grammar = _grammars[tags] = _Grammar(re.compile(f"(</?(?:{names})>)"), transitions, tags)
    return grammar


SEARCH_R1_TAGS = TrajectoryTags()


def format_error(
    text: str,
    tags: TrajectoryTags = SEARCH_R1_TAGS,
    *,
    prompt_included: bool = False,
    end_markers: tuple[str, ...] = DEFAULT_END_MARKERS,
) -> str | None:
    """Why ``text`` is not a valid trajectory, or ``None`` when it is.

    Example:
        >>> format_error("<think>a</think><answer>Paris</answer><|im_end|>") is None
        True
        >>> format_error("<think>a</think><answer>Paris</answer>", prompt_included=True)
        'missing assistant marker'
    """
    if prompt_included:
        marker = ASSISTANT_MARKER.search(text)
        if marker is None:
            return "missing assistant marker"
        text = text[marker.end() :]
        end_markers = ()
    grammar = _grammar(tags)
    return _tag_count_error(text, grammar) or _sequence_error(text, grammar, end_markers)


def _tag_count_error(text: str, grammar: _Grammar) -> str | None:
    """The first tag of ``grammar`` opened and closed a different number of times, if any."""
    for name in grammar.tags:
        opening, closing = text.count(f"<{name}>"), text.count(f"</{name}>")
        if opening != closing:
            return f"mismatch in {name} tags: {opening} opening vs {closing} closing"
    return None


def _sequence_error(text: str, grammar: _Grammar, end_markers: tuple[str, ...]) -> str | None:
    """Why the tags and text between them do not walk ``grammar`` from ``start`` to ``end``
    (after ``end``, only whitespace and ``end_markers``), or ``None``."""
    state = "start"
    for index, part in enumerate(grammar.split.split(text)):
        if index % 2:  # a tag (re.split puts the captured separators at odd indices)
            next_state = grammar.transitions.get((state, part))
            if next_state is None:
                return f"unexpected tag {part} in state {state}"
            state = next_state
        elif state not in _CONTENT_STATES and part.strip():
            if state != "end":
                return f"unexpected content between tags in state {state}"
            if not _only_end_markers(part, end_markers):
                return "unexpected content after the answer"
    return None if state == "end" else f"incomplete sequence, ended in state {state}"


def _only_end_markers(text: str, end_markers: tuple[str, ...] | list[str]) -> bool:
    """Whether ``text`` is whitespace and whole end markers only, peeled off from its end.

    Trailing whitespace (what ``str.rstrip()`` strips) is skipped, then the first non-empty marker
    of ``end_markers``, in their order, that ends the rest is removed; repeat until nothing is
    left (``True``) or no marker ends the rest (``False``). An index walks back from the end, so
    nothing is copied and the time is linear in the length of ``text``.
    """
    markers = [marker for marker in end_markers if marker]
    end = _skip_whitespace(text, len(text))
    while end:
        for marker in markers:
            if text.endswith(marker, 0, end):
                end = _skip_whitespace(text, end - len(marker))
                break
        else:
            return False
    return True


def _skip_whitespace(text: str, end: int) -> int:
    """The length of ``text[:end].rstrip()``, without the copy."""
    while end and text[end - 1].isspace():
        end -= 1
    return end
