"""reward_plugins: rule-based rewards for RL fine-tuning of language models.

Point verl at the routers with ``reward.custom_reward_function.path: pkg://reward_plugins`` and
``name: compute_score`` (or ``compute_score_subem``, ``compute_score_f1``,
``compute_score_format``, ``compute_score_batch``).
"""

from __future__ import annotations

from reward_plugins.errors import InvalidGroundTruth, UnknownDataSource
from reward_plugins.registry import load_plugins, register, registered
from reward_plugins.router import (
    compute_score,
    compute_score_batch,
    compute_score_f1,
    compute_score_format,
    compute_score_subem,
)

__version__ = "0.1.0"

__all__ = [
    "InvalidGroundTruth",
    "UnknownDataSource",
    "__version__",
    "compute_score",
    "compute_score_batch",
    "compute_score_f1",
    "compute_score_format",
    "compute_score_subem",
    "load_plugins",
    "register",
    "registered",
]
