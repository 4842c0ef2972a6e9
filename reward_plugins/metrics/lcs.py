"""Longest common subsequences of token lists, for ROUGE-L and ROUGE-Lsum
(:mod:`reward_plugins.metrics.rouge`): the LCS length, the LCS positions that rouge-score's
traceback reads out, and the summary-level union-LCS hits.

References:
    rouge-score 0.1.2 (github.com/google-research/google-research) ``rouge/rouge_scorer.py``;
    Hyyro 2004, "Bit-parallel LCS-length computation revisited"; Crochemore et al. 2001, "A
    fast and practical bit-vector algorithm for the longest common subsequence problem".
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from rapidfuzz.distance import LCSseq


def lcs_length(first: list[str], second: list[str]) -> int:
    """Length of the longest common subsequence of two token lists.

    Example:
        >>> lcs_length("a b c d".split(), "b x d a".split())
        2
    """
    ids: dict[str, int] = {}
    first_ids = [ids.setdefault(token, len(ids)) for token in first]
    second_ids = [ids.setdefault(token, len(ids)) for token in second]
    return int(LCSseq.similarity(first_ids, second_ids))


def position_masks(tokens: list[str]) -> dict[str, int]:
    """Token -> bit mask of its positions in ``tokens`` (bit j set for position j).

    Example:
        >>> position_masks(["a", "b", "a"])
        {'a': 5, 'b': 2}
    """
    masks: dict[str, int] = {}
    for position, token in enumerate(tokens):
        masks[token] = masks.get(token, 0) | (1 << position)
    return masks


def lcs_indices(reference: list[str], candidate: list[str], masks: dict[str, int]) -> list[int]:
    """Positions in ``reference`` of the LCS that rouge-score's traceback reads out.

    ``masks`` is :func:`position_masks` of ``candidate``. Row i of the LCS table (the first i
    reference tokens against every candidate prefix) is a bit vector with a 0 wherever the
    table grows by one along the candidate, so ``table[i][j]`` is j minus the number of 1 bits
    below bit j. The traceback starts at the last cell: a token match steps diagonally,
    otherwise it moves left only if the cell on the left is strictly larger than the cell
    above, as ``_backtrack_norec`` in rouge-score's ``rouge/rouge_scorer.py`` does; a different
    choice would give another LCS of the same length, and another ROUGE-Lsum union.

    Example:
        >>> lcs_indices(list("12345"), list("2534"), position_masks(list("2534")))
        [1, 2, 3]
    """
    width = len(candidate)
    full = (1 << width) - 1
    rows = [full]
    row = full
    for token in reference:
        matches = row & masks.get(token, 0)
        row = ((row + matches) | (row - matches)) & full
        rows.append(row)
    if row == full:  # no common token
        return []
    found: list[int] = []
    i, j = len(reference), width
    while i and j:
        if reference[i - 1] == candidate[j - 1]:
            i -= 1
            j -= 1
            found.append(i)
            continue
        below = (1 << (j - 1)) - 1  # bits 0 .. j - 2
        left = j - 1 - (rows[i] & below).bit_count()
        above = j - (rows[i - 1] & (below << 1 | 1)).bit_count()
        if left > above:
            j -= 1
        else:
            i -= 1
    found.reverse()
    return found


class Summary(NamedTuple):
    """A text as sentences of tokens, with what summary-level LCS needs of it."""

    sentences: list[list[str]]
    masks: list[dict[str, int]]
    counts: Counter[str]
    total: int


def split_sentences(text: str) -> list[str]:
    """The non-empty lines of ``text`` (split at ``"\\n"`` only), rouge-score's sentence rule.

    Example:
        >>> split_sentences("First one.\\n\\nSecond one.\\r\\n")
        ['First one.', 'Second one.\\r']
    """
    return [line for line in text.split("\n") if line]


def summary_level_hits(targets: Summary, prediction: Summary) -> int:
    """Union-LCS hits of a target summary against a prediction summary.

    Each target sentence takes the union of its LCS positions against every prediction
    sentence; a token at a union position counts while both summaries still have an unused
    occurrence of it (ROUGE-1.5.5's guard against double counting, kept by rouge-score).
    """
    left_in_prediction = prediction.counts.copy()
    left_in_target = targets.counts.copy()
    hits = 0
    pairs = list(zip(prediction.sentences, prediction.masks, strict=True))
    for sentence in targets.sentences:
        union: set[int] = set()
        for candidate, masks in pairs:
            union.update(lcs_indices(sentence, candidate, masks))
        for token, count in Counter(sentence[index] for index in union).items():
            used = min(count, left_in_prediction[token], left_in_target[token])
            if used > 0:
                hits += used
                left_in_prediction[token] -= used
                left_in_target[token] -= used
    return hits
