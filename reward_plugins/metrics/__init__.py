"""Classic metrics and corpus aggregation."""

from __future__ import annotations

from reward_plugins.metrics.aggregate import MeanCI, bootstrap_mean

__all__ = ["MeanCI", "bootstrap_mean"]
