"""reward_plugins: rule-based rewards for RL fine-tuning of language models.

Point verl at the package with ``reward.custom_reward_function.path: pkg://reward_plugins`` and
``name:`` any registered scorer (``compute_score``, ``compute_score_subem``,
``compute_score_f1``, ``compute_score_format``, ``compute_score_metric``, a plugin's own) or
``compute_score_batch``. Every scorer name is an attribute of this module, made on demand.
``compute_score_remote`` (the same call, scored by a ``reward-plugins serve-rewards`` server;
:mod:`reward_plugins.serve.client`) is imported on first use, with aiohttp.
"""

from __future__ import annotations

from typing import Any

from reward_plugins.errors import (
    ConfigFileError,
    InvalidGroundTruth,
    InvalidInput,
    InvalidOption,
    PluginError,
    RewardPluginsError,
    UnknownDataSource,
    UnknownScorer,
)
from reward_plugins.options import Factor, NonNegativeInt, PositiveInt, Range, Score
from reward_plugins.registry import (
    broken_plugins,
    load_plugins,
    register,
    registered,
    registrations,
    scorer,
)
from reward_plugins.results import ResultKey
from reward_plugins.router import (
    compute_score,
    compute_score_batch,
    compute_score_f1,
    compute_score_format,
    compute_score_metric,
    compute_score_subem,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigFileError",
    "Factor",
    "InvalidGroundTruth",
    "InvalidInput",
    "InvalidOption",
    "NonNegativeInt",
    "PluginError",
    "PositiveInt",
    "Range",
    "ResultKey",
    "RewardPluginsError",
    "Score",
    "UnknownDataSource",
    "UnknownScorer",
    "__version__",
    "broken_plugins",
    "compute_score",
    "compute_score_batch",
    "compute_score_f1",
    "compute_score_format",
    "compute_score_metric",
    "compute_score_subem",
    "load_plugins",
    "register",
    "registered",
    "registrations",
    "scorer",
]


def __getattr__(name: str) -> Any:
    """``reward_plugins.<scorer name>``: the verl router of any registered scorer (and
    ``compute_score_remote``, imported here on first use).

    This is how verl's ``custom_reward_function.name`` reaches a plugin's scorer, and how
    ``pickle`` finds a router again in another process.
    """
    if name.startswith("_"):
        raise AttributeError(f"module 'reward_plugins' has no attribute {name!r}")
    if name == "compute_score_remote":
        from reward_plugins.serve.client import compute_score_remote

        return compute_score_remote
    from reward_plugins.router import router_for

    try:
        return router_for(name)
    except UnknownScorer as error:
        raise AttributeError(
            f"module 'reward_plugins' has no attribute {name!r}: {error}"
        ) from None
