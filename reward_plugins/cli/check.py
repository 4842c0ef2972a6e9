"""``reward-plugins check``: check the reward of a verl config (the keys verl reads, the scorer,
its options, a recipe) before a run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from reward_plugins.cli.common import OneLineParser, error

if TYPE_CHECKING:
    from reward_plugins.verl_config import VerlReward

HELP = "check the reward of a verl config (scorer, options, recipe) before a run"
DESCRIPTION = (
    "Read the reward keys of a verl config file (and the files of this "
    "directory its defaults list names), check that the verl version and entry point read "
    "those keys (else verl would silently train on its built-in scorer), then check the "
    "scorer and its reward_kwargs."
)


def add_arguments(command: OneLineParser) -> None:
    """The config, the verl version and the trainer's entry point."""
    command.add_argument("config", type=Path, metavar="CONFIG.yaml")
    command.add_argument(
        "--verl",
        metavar="VERSION",
        help="the verl version to check for (default: the installed verl's; which reward keys "
        "verl reads depends on it)",
    )
    command.add_argument(
        "--entry",
        choices=("main_ppo", "main_ppo_sync"),
        default="main_ppo",
        help="the trainer run as python -m verl.trainer.ENTRY (default: main_ppo; "
        "main_ppo_sync exists only in verl 0.8.x)",
    )


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Check the config's reward; print what was checked (exit 1 for a reward verl would not
    read or that is invalid)."""
    from reward_plugins.config_reader import ConfigFileError, describe_source
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.rescore.files import PathError
    from reward_plugins.router import check_options
    from reward_plugins.verl_config import RewardNotRead, verl_reward

    verl = _checked_verl_version(args, parser)
    config = describe_source(str(args.config))
    try:
        reward = verl_reward(args.config, verl, args.entry)
    except RewardNotRead as failure:
        return error(f"check: {failure}", 1)
    except (PathError, ConfigFileError) as failure:  # not a config verl could run
        return error(f"check: {failure}", 2)
    except RewardPluginsError as failure:  # a malformed reward node
        return error(f"check: {config}: {failure}", 1)
    if reward.scorer is not None:
        try:
            check_options(reward.scorer, None, reward.options)
        except RewardPluginsError as failure:
            return error(f"check: {config}: {reward.where}: {failure}", 1)
    _print_check(config, reward, verl, args.entry)
    return 0


def _checked_verl_version(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str | None:
    """``--verl``, else the installed verl's version (``None`` without verl), checked with
    ``--entry`` (a usage error when either is wrong)."""
    from reward_plugins.verl_config import (
        installed_verl_version,
        parse_verl_version,
        reward_keys_read,
    )

    verl = args.verl if args.verl is not None else installed_verl_version()
    if verl is not None:
        try:
            parse_verl_version(verl)
        except ValueError as failure:
            given = "--verl" if args.verl is not None else "the installed verl"
            parser.error(f"{given}: {failure}")
        try:
            reward_keys_read(verl, args.entry)
        except ValueError as failure:
            parser.error(f"--entry {args.entry}: {failure}")
    elif args.entry != "main_ppo":
        parser.error(f"--entry {args.entry}: verl is not installed; give --verl VERSION too")
    return verl


def _print_check(config: str, reward: VerlReward, verl: str | None, entry: str) -> None:
    """What ``check`` prints of a config whose reward passed: the scorer and options, the keys
    left to run time, a recipe's components."""
    from reward_plugins.plugins.composed import NAME as COMPOSED_SCORER
    from reward_plugins.plugins.composed import recipe_of

    if verl is None:
        checked = "verl version unknown (verl is not installed; --verl VERSION checks its keys)"
    else:
        checked = f"read by verl {verl} verl.trainer.{entry}"
    try:
        shown = repr(reward.options)
    except ValueError:  # an integer too long to print, in an option that takes anything
        shown = "(too large to show)"
    name = reward.scorer if reward.scorer is not None else "(resolved at run time)"
    print(f"{config}: ok: {reward.where}.name={name}, reward_kwargs {shown}; {checked}")
    for key in reward.not_judged:
        print(f"{config}: {key}: resolved at run time; not judged")
    if reward.scorer == COMPOSED_SCORER and not reward.not_judged:
        recipe = recipe_of(**reward.options)
        prefixes = ", ".join(f"{c.prefix} x {c.weight:g}" for c in recipe.components)
        print(f"recipe {recipe.origin}: combine {recipe.combine}; components: {prefixes}")
