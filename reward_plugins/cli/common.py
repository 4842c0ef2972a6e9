"""What the commands share: the one-line usage errors, the ``--set`` option, the scorer and its
options, the error line, and the log of a server.

Nothing here imports the engine or the plugins at module level: they are imported where a
command needs them, so that ``reward-plugins path`` and ``--help`` stay cheap.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error of the command (``--help`` shows the
    usage).

    ``later``: functions that add a command's arguments when the command is chosen (their
    help and choices import the library), so that another command does not import it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.later: list[Callable[[argparse.ArgumentParser], None]] = []

    def error(self, message: str) -> NoReturn:
        command = self.prog.partition(" ")[2]
        where = f"{command}: " if command else ""
        self.exit(2, f"reward-plugins: error: {where}{message} (see {self.prog} --help)\n")


class CommandsAction(argparse._SubParsersAction):
    """The subcommands: the chosen one gets its :attr:`OneLineParser.later` arguments."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        chosen = self._name_parser_map.get(values[0])
        while isinstance(chosen, OneLineParser) and chosen.later:
            chosen.later.pop(0)(chosen)
        super().__call__(parser, namespace, values, option_string)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that temporary files are removed on the way out."""


def error(message: str, code: int) -> int:
    """Print ``reward-plugins: error: message`` on stderr; returns ``code``, the exit status."""
    print(f"reward-plugins: error: {message}", file=sys.stderr)
    return code


def parse_option(text: str) -> tuple[str, Any]:
    """``key=value`` from ``--set``: the value is read as JSON when it parses, else kept a string.

    The JSON is read by :func:`reward_plugins.config_reader.parse_json_text`, within its limits
    (a value nested deeper than 64 levels, or over 1 MiB, is refused: it cannot be meant as a
    string either).

    Example:
        >>> parse_option("format_score=0.1"), parse_option("extract=first")
        (('format_score', 0.1), ('extract', 'first'))
    """
    from reward_plugins.config_reader import (
        ConfigFileError,
        NotJSONError,
        describe_source,
        parse_json_text,
    )

    key, equals, value = text.partition("=")
    key = key.strip()
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got '{describe_source(text)}'")
    try:
        return key, parse_json_text(value, source=describe_source(key))
    except NotJSONError:
        return key, value
    except ConfigFileError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_set_argument(command: argparse.ArgumentParser, help: str) -> None:
    """``--set KEY=VALUE`` (repeatable), gathered as ``options``."""
    command.add_argument(
        "--set",
        dest="options",
        action="append",
        type=parse_option,
        default=[],
        metavar="KEY=VALUE",
        help=help,
    )


def scorer_and_options(
    args: argparse.Namespace, parser: argparse.ArgumentParser
) -> tuple[str, dict[str, Any]]:
    """The scorer and its options from ``--scorer``, ``--recipe`` and ``--set``: a recipe
    pays the composed scorer (a usage error beside another ``--scorer``)."""
    from reward_plugins.plugins.composed import NAME as COMPOSED_SCORER

    if args.recipe is not None:
        if args.scorer not in (None, COMPOSED_SCORER):
            parser.error(f"--recipe pays {COMPOSED_SCORER}; leave out --scorer {args.scorer}")
        if any(key == "recipe" for key, _ in args.options):
            parser.error("give --recipe or --set recipe=..., not both")
        args.scorer = COMPOSED_SCORER
        args.options.append(("recipe", _checked_recipe(args.recipe, parser)))
    return args.scorer or "compute_score", dict(args.options)


def _checked_recipe(recipe: str, parser: argparse.ArgumentParser) -> str:
    """``recipe`` once it loads; else the command ends with one ``--recipe:`` line (exit 2)."""
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.plugins.composed import recipe_of

    try:
        recipe_of(recipe=recipe)
    except RewardPluginsError as error:
        command = parser.prog.partition(" ")[2]
        parser.exit(2, f"reward-plugins: error: {command}: --recipe: {error}\n")
    return recipe


def check_port(port: int, parser: argparse.ArgumentParser) -> None:
    """A usage error for a ``--port`` outside 0..65535."""
    if not 0 <= port <= 65535:
        parser.error(f"--port must be between 0 and 65535, got {port}")


def log_server_to_stderr(name: str = "reward_plugins.search") -> None:
    """A server's log lines (logger ``name``, INFO) on stderr, unless the logger already has a
    handler."""
    import logging

    log = logging.getLogger(name)
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("reward-plugins: %(asctime)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
