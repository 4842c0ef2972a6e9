"""GSM8K reward as a reward_plugins plugin: the final number of a response against the gold.

Importing this module registers one scorer, ``gsm8k_numeric``, for the data source
``openai/gsm8k`` (the ``data_source`` that verl's ``examples/data_preprocess/gsm8k.py`` writes,
with the gold answer as a bare string such as ``"72"``). The distribution's entry point in the
group ``reward_plugins`` names this module, so installing the distribution is all it takes.

The rule follows verl's ``verl/utils/reward_score/gsm8k.py``
(https://github.com/verl-project/verl/blob/main/verl/utils/reward_score/gsm8k.py), itself from
ReFT (Trung et al., ACL 2024); the task and its ``#### <answer>`` format come from GSM8K
(Cobbe et al., "Training Verifiers to Solve Math Word Problems", arXiv:2110.14168):

- only the last 300 characters of the response are searched, as in verl;
- ``method="strict"`` takes the last ``#### <number>``; ``"flexible"`` the last number anywhere;
- no answer found: ``0.0``; an answer equal to a gold: ``score``; any other answer:
  ``format_score``.

One difference, on purpose: an answer equals a gold when the strings are equal (verl's test) *or*
when both read as the same decimal number, so ``#### 72.0``, ``#### 72.`` and ``#### 072`` are
right for the gold ``"72"`` (verl pays ``format_score`` for them). With the default options the
reward is verl's ``compute_score`` everywhere else. In flexible mode, thousands separators are
dropped (``1,000`` reads as ``1000``) and a match without a digit (``.``, ``,``) is skipped,
where verl keeps both.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Literal

from reward_plugins import ResultKey, Score, scorer

__all__ = [
    "DATA_SOURCE",
    "RESULTS",
    "RESULT_KEYS",
    "extract_answer",
    "gsm8k_numeric",
    "same_number",
]

DATA_SOURCE = "openai/gsm8k"
"""The data source verl's GSM8K preprocessing writes into every row."""

RESULTS = (
    ResultKey("score", "reward", "score", gdpo=True),
    ResultKey("acc", "component", "accuracy", gdpo=True),
    ResultKey("answer_found", "rate", "answer rate"),
)
"""What every result holds, declared: the summary, the report, ``compare`` and ``recipe keys``
read it. ``acc`` is a quality score GDPO may weigh; ``answer_found`` is an indicator (0 or 1),
shown as a rate and never weighed."""

RESULT_KEYS = tuple(item.key for item in RESULTS)
"""The keys of every result: verl logs each one as a metric, so they never change."""

TAIL_CHARS = 300
"""Only the end of a response is searched (verl's ``_SOLUTION_CLIP_CHARS``)."""

Method = Literal["strict", "flexible"]

_STRICT_ANSWER = re.compile(r"#### (\-?[0-9\.\,]+)")
_NUMBER = re.compile(r"\-?[0-9\.\,]+")


def extract_answer(response: str, method: Method = "strict") -> str | None:
    """The final answer of ``response``, or ``None`` when it gives none.

    Args:
        response: the model's response.
        method: ``"strict"``: the last ``#### <number>``, commas removed (verl's rule, which
            also checks the format the prompt asks for); ``"flexible"``: the last run of digits,
            signs, points and commas that holds a digit, commas removed.

    Example:
        >>> extract_answer("3 + 4 = 7, so 7 * 2 = 14. #### 14")
        '14'
        >>> extract_answer("so the answer is 1,000.", method="flexible")
        '1000.'
    """
    tail = response[-TAIL_CHARS:]
    if method == "strict":
        found = _STRICT_ANSWER.findall(tail)
        return found[-1].replace(",", "") if found else None
    for candidate in reversed(_NUMBER.findall(tail)):
        if any(character.isdigit() for character in candidate):
            return candidate.replace(",", "")
    return None


def _as_number(text: str) -> Decimal | None:
    try:
        value = Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def same_number(answer: str, gold: str) -> bool:
    """Whether ``answer`` is ``gold``: equal strings, or the same decimal number.

    Example:
        >>> same_number("72.0", "72"), same_number("1000", "1,000"), same_number("7.2", "72")
        (True, True, False)
    """
    if answer == gold:
        return True
    value = _as_number(answer)
    return value is not None and value == _as_number(gold)


@scorer("gsm8k_numeric", DATA_SOURCE, results=RESULTS)
def gsm8k_numeric(
    response: str,
    golds: tuple[str, ...],
    *,
    method: Method = "strict",
    score: Score = 1.0,
    format_score: Score = 0.0,
) -> dict[str, float]:
    """GSM8K reward: ``score`` for the right final number, ``format_score`` for a wrong one.

    Args:
        response: the model's response.
        golds: the gold answers (``ground_truth="golds"``: verl's bare ``"72"`` arrives as
            ``("72",)``); any of them counts.
        method: how the final answer is found (:func:`extract_answer`).
        score: paid for a right answer (verl's default ``1.0``).
        format_score: paid for a wrong answer that was found (verl's default ``0.0``).

    Returns:
        ``score`` (the reward), ``acc`` (1.0 if right) and ``answer_found`` (1.0 if an answer
        was extracted): the keys :data:`RESULT_KEYS`, on every call.
    """
    answer = extract_answer(response, method)
    if answer is None:
        return {"score": 0.0, "acc": 0.0, "answer_found": 0.0}
    right = any(same_number(answer, gold) for gold in golds)
    return {
        "score": float(score if right else format_score),
        "acc": float(right),
        "answer_found": 1.0,
    }
