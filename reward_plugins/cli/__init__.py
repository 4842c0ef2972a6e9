"""The ``reward-plugins`` command: ``score``, ``report``, ``compare``, ``check``, ``recipe``,
``list``, ``path``, ``retriever`` and ``serve-rewards``.

Exit status: 0 on success; 1 when rows cannot be scored, ``compare`` refuses two outputs,
``check`` or ``recipe`` finds an invalid reward, or ``path`` finds no entry file; 2 for a usage
error (bad option, unknown scorer, missing or unreadable input, missing optional package).

Each command is a module of this package (its ``HELP``, ``DESCRIPTION``, ``add_arguments`` and
``run``); :data:`COMMANDS` dispatches a command's name to it, and :mod:`.common` holds what they
share. The text of a run's summary and of a comparison is the engine's
(:mod:`reward_plugins.rescore.text`); the commands print it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from reward_plugins.cli import (
    check,
    compare,
    list_,
    path,
    recipe,
    report,
    retriever,
    score,
    serve_rewards,
)
from reward_plugins.cli.common import (
    CommandsAction,
    OneLineParser,
    Terminated,
    error,
    parse_option,
)
from reward_plugins.cli.path import ADAPTER_FILES
from reward_plugins.cli.recipe import format_results
from reward_plugins.cli.score import DEMO_SAMPLE
from reward_plugins.cli.serve_rewards import SERVE_SETTINGS

# The engine, the plugins and numpy are imported where a command needs them, so that `path` and
# `--help` stay cheap: the arguments whose help or choices come from the library are added when
# their command is chosen (OneLineParser.later), and --scorer is checked after parsing.

__all__ = [
    "ADAPTER_FILES",
    "COMMANDS",
    "DEMO_SAMPLE",
    "SERVE_SETTINGS",
    "format_comparison",
    "format_results",
    "format_summary",
    "main",
    "parse_option",
]

_ENGINE_TEXT = ("format_summary", "format_comparison")
"""Names this module still answers for, now :mod:`reward_plugins.rescore.text`'s: imported when
first asked for, as the engine is heavy."""


class Command(Protocol):
    """A command's module: its help, its arguments, and what it does.

    ``run(args, parser)`` returns the exit status; ``parser`` is the command's (or its action's)
    parser, whose ``error`` is a one-line usage error."""

    @property
    def HELP(self) -> str: ...  # the line under the command in ``reward-plugins --help``

    @property
    def DESCRIPTION(self) -> str | None: ...  # the paragraph of ``reward-plugins NAME --help``

    def add_arguments(self, command: OneLineParser) -> None: ...

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int: ...


COMMANDS: dict[str, Command] = {
    "score": score,
    "report": report,
    "compare": compare,
    "check": check,
    "recipe": recipe,
    "list": list_,
    "path": path,
    "serve-rewards": serve_rewards,
    "retriever": retriever,
}
"""Each command by its name, in the order ``--help`` lists them."""


def _parser() -> OneLineParser:
    """The parser of every command (the arguments each adds when chosen, not yet)."""
    parser = OneLineParser(
        prog="reward-plugins", description="Rule-based rewards for RL fine-tuning of LLMs."
    )
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", action=CommandsAction
    )
    for name, command in COMMANDS.items():
        chosen = commands.add_parser(name, help=command.HELP, description=command.DESCRIPTION)
        chosen.set_defaults(command_parser=chosen)
        command.add_arguments(chosen)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (the console script exits with it)."""
    args = _parser().parse_args(argv)
    _check_scorer(args)
    # SIGTERM cleans up as Ctrl-C does; over `ulimit -f` a write fails with an OSError to report
    # instead of a core dump. Signal handlers can only be set in the main thread.
    handlers: dict[int, Any] = {signal.SIGTERM: _terminate}
    if hasattr(signal, "SIGXFSZ"):
        handlers[signal.SIGXFSZ] = signal.SIG_IGN
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        previous = {number: signal.signal(number, handler) for number, handler in handlers.items()}
    try:
        code: int = COMMANDS[args.command].run(args, args.command_parser)
    except KeyboardInterrupt:
        _remove_temporaries()
        return error("interrupted; no output was left half-written", 130)
    except Terminated:
        _remove_temporaries()
        return error("terminated; no output was left half-written", 143)
    except BrokenPipeError:  # stdout closed early (`| head`): not an error of the job
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return code


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


def _check_scorer(args: argparse.Namespace) -> None:
    """A usage error (one line, exit 2) for a ``--scorer`` no plugin registers: the message
    lists the registered scorers and the closest name."""
    if getattr(args, "scorer", None) is None:
        return
    from reward_plugins.errors import UnknownScorer
    from reward_plugins.registry import registrations_named

    try:
        registrations_named(args.scorer)
    except UnknownScorer as failure:
        args.command_parser.error(f"argument --scorer: {failure}")


def _remove_temporaries() -> None:
    from reward_plugins.rescore.files import remove_temporaries

    remove_temporaries()


def __getattr__(name: str) -> Any:
    """``format_summary`` and ``format_comparison`` (:data:`_ENGINE_TEXT`), from the engine."""
    if name in _ENGINE_TEXT:
        from reward_plugins.rescore import text

        return getattr(text, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
