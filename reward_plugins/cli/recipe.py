"""``reward-plugins recipe``: the shipped composed-reward recipes (``list``), and a recipe's
result keys with the verl overrides that give GDPO its paid scores and weights (``keys``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from reward_plugins.cli.common import OneLineParser, error

HELP = "composed-reward recipes: list, GDPO keys"
DESCRIPTION = None


def add_arguments(command: OneLineParser) -> None:
    """The actions ``list`` and ``keys NAME|PATH``."""
    actions = command.add_subparsers(dest="recipe_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the shipped recipes")
    listing.set_defaults(command_parser=listing)
    keys = actions.add_parser(
        "keys",
        help="a recipe's result keys (kind, GDPO, label), then the verl overrides that give "
        "GDPO its paid scores and weights",
    )
    keys.add_argument("recipe", metavar="NAME|PATH")
    keys.set_defaults(command_parser=keys)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Run the chosen action."""
    return _ACTIONS[args.recipe_command](args)


def _list(args: argparse.Namespace) -> int:
    """Each shipped recipe and its description."""
    from reward_plugins.plugins.composed import load_recipe, shipped_recipes

    for name in shipped_recipes():
        print(f"{name}: {load_recipe(name).description}")
    return 0


def _keys(args: argparse.Namespace) -> int:
    """The recipe's result schema, then its GDPO overrides (exit 1 for a recipe that does not
    load)."""
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.plugins.composed import load_recipe

    try:
        recipe = load_recipe(args.recipe)
        results = recipe.results()
    except RewardPluginsError as failure:
        return error(f"recipe keys: {failure}", 1)
    print(format_results(results))
    print("\n".join(recipe.gdpo_overrides()))
    return 0


_ACTIONS: dict[str, Callable[[argparse.Namespace], int]] = {"list": _list, "keys": _keys}
"""Each action of ``recipe`` by its name."""


def format_results(results: Sequence[Any]) -> str:
    """A result schema as printed: one aligned line per key (key, kind, GDPO, label)."""
    from reward_plugins.rescore.messages import printable

    width = max(len("key"), *(len(item.key) for item in results))
    lines = [f"{'key':{width}}  {'kind':10}  {'gdpo':4}  label"]
    for item in results:
        gdpo = "yes" if item.gdpo else "no"
        lines.append(f"{item.key:{width}}  {item.kind:10}  {gdpo:4}  {item.label}")
    return printable("\n".join(lines))
