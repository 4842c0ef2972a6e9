"""``reward-plugins path TARGET``: the installed path of an integration's entry file."""

from __future__ import annotations

import argparse
from pathlib import Path

from reward_plugins.cli.common import OneLineParser, error

HELP = "installed path of an integration entry file"
DESCRIPTION = None

ADAPTER_FILES = {
    "verl": "adapters/verl_legacy_reward.py",
    "openrlhf": "adapters/openrlhf_reward.py",
    "tool-config": "data/tools/search.yaml",
    "nemo-gym": "data/nemo_gym",  # NEMO_GYM_EXTRA_ROOTS: holds resources_servers/reward_plugins
}
"""Entry files (or, for NeMo-Gym, a component root) that ``reward-plugins path TARGET`` locates,
relative to the package directory."""


def add_arguments(command: OneLineParser) -> None:
    """The integration, one of :data:`ADAPTER_FILES`."""
    command.add_argument("target", choices=sorted(ADAPTER_FILES))


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Print the entry file's path (exit 1 when this installation lacks it)."""
    import reward_plugins

    location = Path(reward_plugins.__file__).resolve().parent / ADAPTER_FILES[args.target]
    if not location.exists():
        return error(
            f"the {args.target} entry file is not part of this installation: {location} "
            "does not exist",
            1,
        )
    print(location)
    return 0
