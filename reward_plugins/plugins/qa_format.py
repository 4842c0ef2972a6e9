"""Search-R1's format-aware decision table (``qa_em_format.compute_score_em`` of
PeterGriffinJin/Search-R1, ``verl/utils/reward_score/qa_em_format.py``): the outcome of one
response under the format options, shared by the ``compute_score_format`` scorer and its verl
call shape (:mod:`reward_plugins.plugins.verl_compat`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from reward_plugins.extract import find_tag_spans, scan_tags
from reward_plugins.groundtruth import Golds
from reward_plugins.metrics.qa import compare
from reward_plugins.options import Score
from reward_plugins.plugins.qa_core import (
    MaxAnswerWords,
    NormalizerName,
    QAOutcome,
    RejectEmptyGold,
    WordBoundary,
    retrieval_hit,
)
from reward_plugins.plugins.trajectory import DEFAULT_END_MARKERS, TrajectoryTags, format_error


@dataclass(frozen=True, kw_only=True)
class FormatOptions:
    """The options of ``compute_score_format``: Search-R1's format scores, the format's tags
    and the QA guards. The scores' defaults are upstream's."""

    structure_format_score: Annotated[Score, "paid for a valid format without a match"] = 0
    final_format_score: Annotated[Score, "paid for an answer in an invalid format"] = 0
    retrieval_score: Annotated[Score, "added when a gold is in a retrieved block"] = 0
    score: Annotated[Score, "paid for a match in a valid format"] = 1.0
    prompt_included: Annotated[bool, "the text starts with the prompt (upstream's input)"] = False
    end_markers: Annotated[tuple[str, ...], "texts that may end a response"] = DEFAULT_END_MARKERS
    think_tag: Annotated[str, "the reasoning tag"] = "think"
    search_tag: Annotated[str, "the search-query tag"] = "search"
    information_tag: Annotated[str, "the retrieved-information tag"] = "information"
    answer_tag: Annotated[str, "the answer tag"] = "answer"
    normalizer: NormalizerName = "squad"
    subem_word_boundary: WordBoundary = False
    max_answer_words: MaxAnswerWords = None
    reject_empty_gold: RejectEmptyGold = False


_FORMAT = FormatOptions()


def format_outcome(
    solution_str: str,
    golds: Golds,
    *,
    structure_format_score: Any = _FORMAT.structure_format_score,
    final_format_score: Any = _FORMAT.final_format_score,
    retrieval_score: Any = _FORMAT.retrieval_score,
    score: Any = _FORMAT.score,
    prompt_included: bool = _FORMAT.prompt_included,
    end_markers: tuple[str, ...] = _FORMAT.end_markers,
    think_tag: str = _FORMAT.think_tag,
    search_tag: str = _FORMAT.search_tag,
    information_tag: str = _FORMAT.information_tag,
    answer_tag: str = _FORMAT.answer_tag,
    normalizer: str = _FORMAT.normalizer,
    subem_word_boundary: bool = _FORMAT.subem_word_boundary,
    max_answer_words: int | None = _FORMAT.max_answer_words,
    reject_empty_gold: bool = _FORMAT.reject_empty_gold,
) -> tuple[QAOutcome, bool, bool]:
    """Search-R1's ``qa_em_format.compute_score_em`` decision table under the options of
    :class:`FormatOptions` (whose defaults these are, checked by the registry).

    With s, f, r, S the structure, final-format and retrieval scores and ``score``: a valid
    format pays S for a correct answer and s for a wrong or absent one (s + r when a normalized
    gold is a substring of a normalized information block); an invalid one pays S - s for a
    correct answer, f for a wrong one and 0 without an answer.

    Returns:
        ``(outcome, format_valid, retrieval_hit)``.
    """
    tags = TrajectoryTags(think_tag, search_tag, information_tag, answer_tag)
    valid = (
        format_error(
            solution_str, tags, prompt_included=prompt_included, end_markers=tuple(end_markers)
        )
        is None
    )
    if prompt_included:  # upstream: the prompt's example answer is the first match
        spans = find_tag_spans(solution_str, answer_tag)
        answer = spans[-1].strip() if len(spans) >= 2 else None
        tag_counts = (solution_str.count(f"<{answer_tag}>"), solution_str.count(f"</{answer_tag}>"))
    else:
        answer, opening, closing = scan_tags(solution_str, answer_tag, "last")
        tag_counts = (opening, closing)
    comparison = compare(
        answer,
        golds,
        normalizer=normalizer,
        subem_word_boundary=subem_word_boundary,
        max_answer_words=max_answer_words,
        reject_empty_gold=reject_empty_gold,
    )
    hit = valid and retrieval_hit(
        find_tag_spans(solution_str, information_tag),
        golds,
        normalizer,
        subem_word_boundary,
        reject_empty_gold,
    )
    correct = answer is not None and comparison.em and not comparison.too_long
    if correct:
        reward = score if valid else score - structure_format_score
    elif valid and hit:
        reward = structure_format_score + retrieval_score
    elif valid:
        reward = structure_format_score
    else:
        reward = 0 if answer is None else final_format_score
    outcome = QAOutcome(reward, answer, max(tag_counts), comparison, correct, False)
    return outcome, valid, hit
