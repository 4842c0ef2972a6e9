"""Reading an extracted answer: how many candidates it names.

An answer such as ``"Paris, Lyon or Nice"`` names several candidates, which games substring
match (SubEM pays if any gold is inside the answer). The rule is defined once here and used by
the ``answer_list_penalty`` scorer (:mod:`reward_plugins.plugins.shaping`), whose ``candidates``
key (a count) is what the run report charts as an indicator when a run's scorer returns it.

The rule: split the answer at ``,`` (except between two digits, so ``1,000,000`` is one item),
``;``, ``/``, ``|``, and the word ``or`` or ``and`` with one whitespace character on each side
(any case), then count the items that are not blank. The separator pattern has no quantifier,
so one ``re.split`` pass is linear in the answer's length on any input.
"""

from __future__ import annotations

import re

MIN_CANDIDATES = 3
"""An answer that splits into this many items or more names many candidates."""

CANDIDATE_SEPARATORS = re.compile(r"(?<!\d),|,(?!\d)|[;/|]|\s(?:or|and)\s", re.IGNORECASE)
"""Item separators of the many-candidates rule; no quantifier, so one pass is linear."""


def count_candidates(answer: str) -> int:
    """Non-blank items of ``answer`` split at :data:`CANDIDATE_SEPARATORS`.

    Example:
        >>> count_candidates("Paris; Lyon / Nice"), count_candidates("1,000,000")
        (3, 1)
        >>> count_candidates("Paris, Lyon or Nice"), count_candidates(", ,"), count_candidates("")
        (3, 0, 0)
    """
    return sum(1 for item in CANDIDATE_SEPARATORS.split(answer) if item.strip())
