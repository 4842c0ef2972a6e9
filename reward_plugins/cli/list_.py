"""``reward-plugins list``: the registered scorers (data sources, options, origin), the metrics
and their options, and the plugins that failed to load."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from reward_plugins.cli.common import OneLineParser

if TYPE_CHECKING:
    from reward_plugins.options import OptionSpec

HELP = "registered scorers: data sources, options, origin; broken plugins; metrics"
DESCRIPTION = None


def add_arguments(command: OneLineParser) -> None:
    """``list`` takes no argument."""


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Print each registered scorer, the metrics, then each broken plugin."""
    from reward_plugins.registry import broken_plugins, registrations

    for registration in registrations():
        print(registration.name)
        print(f"  data sources: {', '.join(registration.data_sources)}")
        print(f"  options: {_describe_options(registration.options) or '(none)'}")
        ground_truth = "tuple of gold strings" if registration.ground_truth == "golds" else "raw"
        print(f"  ground truth: {ground_truth}{' (async)' if registration.is_async else ''}")
        print(f"  from: {registration.origin} ({registration.qualified_name})")
    _list_metrics()
    for broken in broken_plugins():
        print(f"broken plugin: {broken.describe()}")
    return 0


def _list_metrics() -> None:
    """The ``metrics:`` block: each metric of :mod:`reward_plugins.metrics` and its options."""
    from reward_plugins.metrics import METRICS, metric_options

    print("metrics:")
    width = max(map(len, METRICS))
    for name in sorted(METRICS):
        print(f"  {name:{width}}  (options: {', '.join(metric_options(name)) or 'none'})")


def _describe_options(options: Mapping[str, OptionSpec]) -> str:
    """A scorer's options: each required one with its expected type, the others with their
    default."""
    return ", ".join(
        f"{name} (required, {spec.expected})" if spec.required else f"{name}={spec.default!r}"
        for name, spec in options.items()
    )
