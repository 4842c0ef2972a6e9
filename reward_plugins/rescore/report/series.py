"""What the report shows where: the schema kinds it charts, the two series every run has, and
the report's limits."""

from __future__ import annotations

DEFAULT_EXAMPLES = 5
"""Example rows shown per indicator by default."""

MAX_OPEN_GROUPS = 50_000
"""GRPO groups tracked per step; rows of further ``input`` values are left out of the
one-reward-groups indicator (the page says how many)."""

AGREEMENT_REL_TOL = 1e-6
"""Relative tolerance of logged vs re-scored equality: verl logs the sum of float32 token-level
scores, so 2/3 comes back as 0.6666666865."""

MAX_EXPERIMENTS = 3
"""Distinct experiment names the title shows; the page counts the others."""

AGREEMENT = "agreement"
"""The series of rows whose logged ``score`` equals the re-scored one (1) or not (0)."""

UNIFORM_REWARD = "uniform_reward"
"""The series of GRPO groups of 2 rows or more whose rows all got one reward (1) or not (0)."""

ENGINE_SERIES: tuple[str, ...] = (AGREEMENT, UNIFORM_REWARD)
"""The series every run has, whatever the scorer; a result key of the same name is reachable
in the tables but not through :meth:`RunReport.per_step`."""

ENGINE_LABELS = {
    AGREEMENT: "logged = re-scored",
    UNIFORM_REWARD: "GRPO groups with one reward",
}
"""The label of each of :data:`ENGINE_SERIES` on the page."""

ENGINE_COLUMNS = {AGREEMENT: 0, UNIFORM_REWARD: 1}
"""The aggregates' column of each of :data:`ENGINE_SERIES` (result keys take the next ones)."""

CURVE_KINDS: tuple[str, ...] = ("reward", "component")
"""Kinds charted as per-step curves in the page's "Per step" section."""

INDICATOR_KINDS: tuple[str, ...] = ("rate", "count", "length")
"""Kinds shown as indicators: a curve, a run-level value and example rows."""
