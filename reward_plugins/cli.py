"""The ``reward-plugins`` command: ``score``, ``report``, ``compare``, ``check``, ``recipe``,
``list``, ``path``, ``retriever`` and ``serve-rewards``.

Exit status: 0 on success; 1 when rows cannot be scored, ``compare`` refuses two outputs,
``check`` or ``recipe`` finds an invalid reward, or ``path`` finds no entry file; 2 for a usage
error (bad option, unknown scorer, missing or unreadable input, missing optional package).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack, suppress
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from reward_plugins.search.index import DEFAULT_HEAP_MB
from reward_plugins.search.server import Limits

if TYPE_CHECKING:
    from reward_plugins import rescore
    from reward_plugins.options import OptionSpec
    from reward_plugins.verl_config import VerlReward

# The engine, the plugins and numpy are imported where a command needs them, so that `path` and
# `--help` stay cheap: the arguments whose help or choices come from the library are added when
# their command is chosen (_OneLineParser.later), and --scorer is checked after parsing.

ADAPTER_FILES = {
    "verl": "adapters/verl_legacy_reward.py",
    "openrlhf": "adapters/openrlhf_reward.py",
    "tool-config": "data/tools/search.yaml",
    "nemo-gym": "data/nemo_gym",  # NEMO_GYM_EXTRA_ROOTS: holds resources_servers/reward_plugins
}
"""Entry files (or, for NeMo-Gym, a component root) that ``reward-plugins path TARGET`` locates,
relative to the package directory."""

DEMO_SAMPLE = "sample_rollouts.jsonl"


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


class _OneLineParser(argparse.ArgumentParser):
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


class _Commands(argparse._SubParsersAction):
    """The subcommands: the chosen one gets its :attr:`_OneLineParser.later` arguments."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        chosen = self._name_parser_map.get(values[0])
        while isinstance(chosen, _OneLineParser) and chosen.later:
            chosen.later.pop(0)(chosen)
        super().__call__(parser, namespace, values, option_string)


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="reward-plugins", description="Rule-based rewards for RL fine-tuning of LLMs."
    )
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", action=_Commands
    )

    score = commands.add_parser(
        "score",
        help="re-score rollout dumps, whole verl runs or datasets (.jsonl, .jsonl.gz, .parquet)",
        description="Score every row of INPUT and write it to OUTPUT with reward_<key> columns.",
    )
    score.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="files, run directories (verl's {step}.jsonl files) or glob patterns",
    )
    score.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUTPUT",
        help="a file for one input file; a directory for a run (one file per input)",
    )
    score.add_argument("--demo", action="store_true", help="score the sample in the package")
    score.add_argument("--merge", action="store_true", help="write a run to the one file OUTPUT")
    score.add_argument(
        "--resume", action="store_true", help="skip the outputs of a run that are complete"
    )
    score.later.append(_add_job_arguments)
    score.add_argument("--summary-json", type=Path, metavar="PATH", help="write the summary")
    score.set_defaults(handler=_score, command_parser=score)

    report = commands.add_parser(
        "report",
        help="an HTML report of a training run (needs reward-plugins[report])",
        description="Re-score RUN and write a self-contained HTML page, with PNGs of its charts.",
    )
    report.add_argument("inputs", nargs="+", metavar="RUN", help="as INPUT of `score`")
    report.add_argument("-o", "--output", type=Path, required=True, metavar="HTML")
    report.add_argument(
        "--png-dir", type=Path, metavar="DIR", help="where the PNGs go (default: HTML_pngs/)"
    )
    report.later += [_add_report_arguments, _add_job_arguments]
    report.set_defaults(handler=_report, command_parser=report)
    compare = commands.add_parser(
        "compare",
        help="paired significance test of two scored outputs of the same prompts",
        description=(
            "Compare the reward_* columns of A and B, two outputs of `score` of the same prompts "
            "(two scorers, option sets or checkpoints; rows paired by prompt, in order within a "
            "prompt): both means, the difference and the p-value of a paired test (sacrebleu's "
            "paired bootstrap resampling or approximate randomization)."
        ),
    )
    compare.add_argument(
        "first", type=Path, metavar="A", help="the baseline (.jsonl, .jsonl.gz, .parquet)"
    )
    compare.add_argument(
        "second", type=Path, metavar="B", help="the other output, rows in any order"
    )
    compare.later.append(_add_compare_arguments)
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    compare.set_defaults(handler=_compare, command_parser=compare)

    check = commands.add_parser(
        "check",
        help="check the reward of a verl config (scorer, options, recipe) before a run",
        description="Read the reward keys of a verl config file (and the files of this "
        "directory its defaults list names), check that the verl version and entry point read "
        "those keys (else verl would silently train on its built-in scorer), then check the "
        "scorer and its reward_kwargs.",
    )
    check.add_argument("config", type=Path, metavar="CONFIG.yaml")
    check.add_argument(
        "--verl",
        metavar="VERSION",
        help="the verl version to check for (default: the installed verl's; which reward keys "
        "verl reads depends on it)",
    )
    check.add_argument(
        "--entry",
        choices=("main_ppo", "main_ppo_sync"),
        default="main_ppo",
        help="the trainer run as python -m verl.trainer.ENTRY (default: main_ppo; "
        "main_ppo_sync exists only in verl 0.8.x)",
    )
    check.set_defaults(handler=_check, command_parser=check)

    recipe = commands.add_parser("recipe", help="composed-reward recipes: list, GDPO keys")
    recipe_commands = recipe.add_subparsers(dest="recipe_command", required=True, metavar="ACTION")
    recipe_list = recipe_commands.add_parser("list", help="the shipped recipes")
    recipe_list.set_defaults(handler=_recipe_list, command_parser=recipe_list)
    recipe_keys = recipe_commands.add_parser(
        "keys",
        help="a recipe's result keys (kind, GDPO, label), then the verl overrides that give "
        "GDPO its paid scores and weights",
    )
    recipe_keys.add_argument("recipe", metavar="NAME|PATH")
    recipe_keys.set_defaults(handler=_recipe_keys, command_parser=recipe_keys)

    listing = commands.add_parser(
        "list", help="registered scorers: data sources, options, origin; broken plugins; metrics"
    )
    listing.set_defaults(handler=_list, command_parser=listing)

    path = commands.add_parser("path", help="installed path of an integration entry file")
    path.add_argument("target", choices=sorted(ADAPTER_FILES))
    path.set_defaults(handler=_path, command_parser=path)

    serve_rewards = commands.add_parser(
        "serve-rewards",
        help="serve a scorer over HTTP (OpenRLHF, NeMo-Gym, native batch) until interrupted",
        description="Answer POST /score, /get_reward (OpenRLHF) and /verify (NeMo-Gym) with a "
        "scorer run in a pool of worker processes.",
    )
    serve_rewards.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (127.0.0.1)"
    )
    serve_rewards.add_argument(
        "--port", type=int, default=8000, help="the port; 0: a free port (8000)"
    )
    serve_rewards.later.append(_add_serve_rewards_arguments)
    serve_rewards.set_defaults(handler=_serve_rewards, command_parser=serve_rewards)

    retriever = commands.add_parser(
        "retriever", help="a BM25 retriever in Search-R1's protocol: index, serve (needs [search])"
    )
    retriever_commands = retriever.add_subparsers(
        dest="retriever_command", required=True, metavar="ACTION"
    )
    index = retriever_commands.add_parser(
        "index",
        help="build an on-disk BM25 index of a JSON Lines corpus (once)",
        description="Stream CORPUS (Search-R1's format, plain or .gz) into a BM25 index in "
        "INDEX_DIR, for `retriever serve --index INDEX_DIR`.",
    )
    index.add_argument("corpus", type=Path, metavar="CORPUS.jsonl[.gz]")
    index.add_argument(
        "-o", "--output", type=Path, required=True, metavar="INDEX_DIR", help="must not exist"
    )
    _add_bad_lines_argument(index)
    index.add_argument(
        "--heap-mb",
        type=int,
        default=DEFAULT_HEAP_MB,
        metavar="MB",
        help=f"the indexing memory budget, shared by the threads ({DEFAULT_HEAP_MB})",
    )
    index.add_argument(
        "--threads", type=int, metavar="N", help="indexing threads (the usable CPUs, at most 8)"
    )
    index.add_argument("--force", action="store_true", help="replace an existing INDEX_DIR")
    index.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar (shown on a terminal)"
    )
    index.set_defaults(handler=_retriever_index, command_parser=index)

    serve = retriever_commands.add_parser(
        "serve",
        help="answer POST /retrieve from an index (or a small corpus) until interrupted",
        description="Answer Search-R1's POST /retrieve requests from a BM25 index.",
    )
    source = serve.add_mutually_exclusive_group()
    source.add_argument(
        "--index", type=Path, metavar="INDEX_DIR", help="an index of `retriever index`"
    )
    source.add_argument(
        "--corpus",
        type=Path,
        metavar="CORPUS.jsonl",
        help='{"id": str, "contents": "Title\\ntext"} per line, indexed into the cache '
        "once (default: the shipped sample)",
    )
    _add_bad_lines_argument(serve)
    serve.add_argument("--host", default="127.0.0.1", help="(127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="(8000; 0: a free port)")
    serve.add_argument(
        "--topk", type=int, default=3, metavar="K", help="documents when a request says none (3)"
    )
    serve.add_argument(
        "--common-df",
        type=float,
        metavar="SHARE",
        help="terms found in more than this share of the passages only re-score the best "
        "passages of the other terms (faster on large corpora; off: exact BM25)",
    )
    for limit in dataclasses.fields(Limits):
        default = "the usable CPUs" if limit.name == "search_threads" else limit.default
        serve.add_argument(
            "--" + limit.name.replace("_", "-"),
            type=float if limit.type == "float" else int,
            default=None if limit.name == "search_threads" else limit.default,
            metavar="N",
            help=f"{limit.metadata['help']} ({default})",
        )
    serve.set_defaults(handler=_retriever_serve, command_parser=serve)
    return parser


def _add_serve_rewards_arguments(command: argparse.ArgumentParser) -> None:
    """The options of ``serve-rewards``: the scorer (as ``score`` takes it), the pool, the
    limits (one per :class:`~reward_plugins.serve.service.ServiceLimits` field), Ray Serve."""
    from reward_plugins.plugins.composed import NAME as COMPOSED_SCORER
    from reward_plugins.serve.service import ServiceLimits

    command.add_argument("--scorer", metavar="NAME", help="a registered scorer (compute_score)")
    command.add_argument(
        "--recipe",
        metavar="NAME|PATH",
        help=f"pay a composed recipe, shipped or a YAML file (scorer {COMPOSED_SCORER})",
    )
    _add_set_argument(command, "scorer option, as in verl's reward_kwargs (repeatable)")
    command.add_argument(
        "--data-source", help="of rows that name none (default: the scorer's first)"
    )
    command.add_argument(
        "--workers",
        type=int,
        default=2,
        metavar="N",
        help="scorer processes; 0: score in the server's process, no isolation (2)",
    )
    command.add_argument(
        "--row-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds one row may take; beyond, it fails as 'timeout' and its worker is "
        "replaced (10)",
    )
    command.add_argument(
        "--max-worker-rss-mb",
        type=float,
        default=2048.0,
        metavar="MB",
        help="a worker over this resident memory is replaced after its rows (2048)",
    )
    command.add_argument(
        "--fallback-reward",
        type=float,
        default=0.0,
        metavar="R",
        help="the reward of a row that failed (timeout, crash, bad input) (0.0)",
    )
    command.add_argument(
        "--scores-key",
        metavar="KEY",
        help="the result key of OpenRLHF's scores (default: acc when the scorer has it, else "
        "the reward clipped to [0, 1])",
    )
    for limit in dataclasses.fields(ServiceLimits):
        command.add_argument(
            "--" + limit.name.replace("_", "-"),
            type=float if limit.type == "float" else int,
            default=limit.default,
            metavar="N",
            help=f"{limit.metadata['help']} ({limit.default})",
        )
    command.add_argument(
        "--ray", action="store_true", help="run as a Ray Serve deployment (needs ray[serve])"
    )
    command.add_argument(
        "--replicas", type=int, default=1, metavar="N", help="Ray Serve replicas, with --ray (1)"
    )
    command.add_argument(
        "--ray-address", help="a Ray cluster for --ray (default: RAY_ADDRESS, else local)"
    )


def _add_bad_lines_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--bad-lines",
        choices=("refuse", "skip"),
        default="refuse",
        help="a corpus line that is not a document: stop with its line number, or skip and "
        "count it (refuse)",
    )


def _add_compare_arguments(command: argparse.ArgumentParser) -> None:
    """The options of ``compare``: the pairing columns and the test."""
    from reward_plugins.metrics.significance import DEFAULT_SAMPLES, DEFAULT_SEED, METHODS
    from reward_plugins.rescore.compare import PROMPT_COLUMNS
    from reward_plugins.rescore.rows import GROUND_TRUTH_COLUMNS

    command.add_argument(
        "--prompt-column",
        help=f"the column rows are paired by (default: {', else '.join(PROMPT_COLUMNS)})",
    )
    command.add_argument(
        "--ground-truth-column",
        help=f"must be equal in paired rows (default: {', '.join(GROUND_TRUTH_COLUMNS)})",
    )
    command.add_argument(
        "--method",
        choices=METHODS,
        default=METHODS[0],
        help="paired bootstrap resampling (default) or approximate randomization (ar)",
    )
    samples = ", ".join(f"{count} {method}" for method, count in DEFAULT_SAMPLES.items())
    command.add_argument(
        "--samples", type=int, metavar="N", help=f"resamples or trials ({samples})"
    )
    command.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, metavar="S", help=f"({DEFAULT_SEED}, sacrebleu's)"
    )
    command.add_argument(
        "--scorer",
        help="the scorer of both outputs: its result schema labels and orders the columns",
    )
    _add_set_argument(command, "an option of --scorer, as given to score (repeatable)")


def _add_set_argument(command: argparse.ArgumentParser, help: str) -> None:
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


def _add_report_arguments(command: argparse.ArgumentParser) -> None:
    """The options of ``report`` beside the job's: what its tables show."""
    from reward_plugins.rescore.report import DEFAULT_EXAMPLES

    command.add_argument(
        "--examples",
        type=int,
        default=DEFAULT_EXAMPLES,
        metavar="K",
        help=f"example rows shown per indicator ({DEFAULT_EXAMPLES})",
    )


def _add_job_arguments(command: argparse.ArgumentParser) -> None:
    """The options ``score`` and ``report`` share: the scorer, the columns, the execution.

    ``--scorer`` is checked after parsing (:func:`_check_scorer`): a list of choices would load
    every plugin for every command."""
    from reward_plugins.plugins.composed import NAME as COMPOSED_SCORER
    from reward_plugins.rescore.rows import (
        DATA_SOURCE_COLUMN,
        GROUND_TRUTH_COLUMNS,
        RESPONSE_COLUMNS,
    )

    command.add_argument(
        "--scorer",
        metavar="NAME",
        help="a registered scorer (compute_score; `reward-plugins list` shows them all)",
    )
    command.add_argument(
        "--recipe",
        metavar="NAME|PATH",
        help=f"pay a composed recipe, shipped or a YAML file (scorer {COMPOSED_SCORER})",
    )
    _add_set_argument(
        command, "scorer option, as in verl's reward_kwargs (repeatable; values parsed as JSON)"
    )
    command.add_argument("--data-source", help="of every row (verl dumps have no such column)")
    command.add_argument("--data-source-column", help=f"default: {DATA_SOURCE_COLUMN}")
    command.add_argument("--response-column", help=f"default: {'/'.join(RESPONSE_COLUMNS)}")
    command.add_argument(
        "--ground-truth-column", help=f"default: {', '.join(GROUND_TRUTH_COLUMNS)}"
    )
    command.add_argument(
        "--dataset",
        dest="datasets",
        action="append",
        type=Path,
        default=[],
        metavar="PATH",
        help="verl's train/val file (.parquet, .jsonl, .jsonl.gz) of the run: each row's data "
        "source joined on its prompt (repeatable; instead of --data-source)",
    )
    command.add_argument(
        "--on-error",
        choices=("fail", "skip"),
        default="fail",
        help="on a bad row: stop (fail), or go on and list it in OUTPUT.failures.jsonl (skip)",
    )
    command.add_argument("--workers", type=int, help="processes (local) or CPUs (local Ray)")
    command.add_argument("--backend", choices=("local", "ray"), default="local")
    command.add_argument("--ray-address", help="a Ray cluster (default: RAY_ADDRESS, else local)")
    command.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no Ray logs")


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that temporary files are removed on the way out."""


def _terminate(signum: int, frame: Any) -> None:
    raise _Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (the console script exits with it)."""
    parser = _parser()
    args = parser.parse_args(argv)
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
        code: int = args.handler(args, args.command_parser)
    except KeyboardInterrupt:
        _remove_temporaries()
        return _error("interrupted; no output was left half-written", 130)
    except _Terminated:
        _remove_temporaries()
        return _error("terminated; no output was left half-written", 143)
    except BrokenPipeError:  # stdout closed early (`| head`): not an error of the job
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return code


def _check_scorer(args: argparse.Namespace) -> None:
    """A usage error (one line, exit 2) for a ``--scorer`` no plugin registers: the message
    lists the registered scorers and the closest name."""
    if getattr(args, "scorer", None) is None:
        return
    from reward_plugins.errors import UnknownScorer
    from reward_plugins.registry import registrations_named

    try:
        registrations_named(args.scorer)
    except UnknownScorer as error:
        args.command_parser.error(f"argument --scorer: {error}")


def _remove_temporaries() -> None:
    from reward_plugins.rescore.files import remove_temporaries

    remove_temporaries()


def _error(message: str, code: int) -> int:
    print(f"reward-plugins: error: {message}", file=sys.stderr)
    return code


def _check(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from reward_plugins.config_reader import ConfigFileError, describe_source
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.rescore.files import PathError
    from reward_plugins.router import check_options
    from reward_plugins.verl_config import RewardNotRead, verl_reward

    verl = _checked_verl_version(args, parser)
    config = describe_source(str(args.config))
    try:
        reward = verl_reward(args.config, verl, args.entry)
    except RewardNotRead as error:
        return _error(f"check: {error}", 1)
    except (PathError, ConfigFileError) as error:  # not a config verl could run
        return _error(f"check: {error}", 2)
    except RewardPluginsError as error:  # a malformed reward node
        return _error(f"check: {config}: {error}", 1)
    if reward.scorer is not None:
        try:
            check_options(reward.scorer, None, reward.options)
        except RewardPluginsError as error:
            return _error(f"check: {config}: {reward.where}: {error}", 1)
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
        except ValueError as error:
            given = "--verl" if args.verl is not None else "the installed verl"
            parser.error(f"{given}: {error}")
        try:
            reward_keys_read(verl, args.entry)
        except ValueError as error:
            parser.error(f"--entry {args.entry}: {error}")
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


def _recipe_list(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from reward_plugins.plugins.composed import load_recipe, shipped_recipes

    for name in shipped_recipes():
        print(f"{name}: {load_recipe(name).description}")
    return 0


def _recipe_keys(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.plugins.composed import load_recipe

    try:
        recipe = load_recipe(args.recipe)
        results = recipe.results()
    except RewardPluginsError as error:
        return _error(f"recipe keys: {error}", 1)
    print(format_results(results))
    print("\n".join(recipe.gdpo_overrides()))
    return 0


def format_results(results: Sequence[Any]) -> str:
    """A result schema as printed: one aligned line per key (key, kind, GDPO, label)."""
    from reward_plugins.rescore.messages import printable

    width = max(len("key"), *(len(item.key) for item in results))
    lines = [f"{'key':{width}}  {'kind':10}  {'gdpo':4}  label"]
    for item in results:
        gdpo = "yes" if item.gdpo else "no"
        lines.append(f"{item.key:{width}}  {item.kind:10}  {gdpo:4}  {item.label}")
    return printable("\n".join(lines))


def _list(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
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
    return ", ".join(
        f"{name} (required, {spec.expected})" if spec.required else f"{name}={spec.default!r}"
        for name, spec in options.items()
    )


def _path(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import reward_plugins

    location = Path(reward_plugins.__file__).resolve().parent / ADAPTER_FILES[args.target]
    if not location.exists():
        return _error(
            f"the {args.target} entry file is not part of this installation: {location} "
            "does not exist",
            1,
        )
    print(location)
    return 0


def _retriever_index(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.search.index import build_index

    began = time.perf_counter()
    try:
        manifest = build_index(
            args.corpus,
            args.output,
            bad_lines=args.bad_lines,
            heap_mb=args.heap_mb,
            threads=args.threads,
            progress=not args.quiet and sys.stderr.isatty(),
            replace=args.force,
        )
    except (ImportError, RewardPluginsError) as error:
        return _error(f"retriever index: {error}", 2)
    except OSError as error:
        return _error(f"retriever index: {args.corpus}: {error.strerror or error}", 2)
    skipped = f", skipped {manifest['skipped']} bad line(s)" if manifest["skipped"] else ""
    print(
        f"indexed {manifest['documents']} documents of {args.corpus} into {args.output} in "
        f"{time.perf_counter() - began:.1f} s{skipped}"
    )
    return 0


def _retriever_serve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.search.corpus import sample_corpus_path
    from reward_plugins.search.index import SearchIndex, check_common_df
    from reward_plugins.search.server import serve

    limits = _serve_limits(args, parser)
    try:
        common_df = check_common_df(args.common_df)
    except RewardPluginsError as error:
        parser.error(f"--common-df: {str(error).partition(': ')[2]}")
    source = args.index or args.corpus or sample_corpus_path()
    try:
        if args.index is not None:
            index = SearchIndex(args.index, common_df=common_df)
        else:
            progress = sys.stderr.isatty()
            index = SearchIndex.for_corpus(
                source, bad_lines=args.bad_lines, progress=progress, common_df=common_df
            )
    except (ImportError, RewardPluginsError) as error:
        return _error(f"retriever serve: {error}", 2)
    except OSError as error:
        return _error(f"retriever serve: {source}: {error.strerror or error}", 2)
    _log_server_to_stderr()

    def ready(server: Any) -> None:
        print(f"serving {len(index)} documents of {source} at {server.url}", flush=True)

    try:
        with suppress(KeyboardInterrupt, _Terminated):  # how a server stops: no error
            serve(index, args.host, args.port, args.topk, limits, ready)
    except OSError as error:
        return _error(f"retriever serve: {args.host}:{args.port}: {error.strerror or error}", 2)
    return 0


def _serve_limits(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Limits:
    """The server's limits from their options; ``--topk`` and ``--port`` checked (a usage
    error, naming the option, for a wrong value)."""
    from reward_plugins.errors import RewardPluginsError

    if args.topk < 1:
        parser.error(f"--topk must be at least 1, got {args.topk}")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be between 0 and 65535, got {args.port}")
    given = {spec.name: getattr(args, spec.name) for spec in dataclasses.fields(Limits)}
    try:
        limits = Limits(**{name: value for name, value in given.items() if value is not None})
    except RewardPluginsError as error:
        name, _, reason = str(error).partition(": ")
        parser.error(f"--{name.replace('_', '-')}: {reason}")
    if args.topk > limits.max_topk:
        parser.error(f"--topk {args.topk} is above --max-topk {limits.max_topk}")
    return limits


def _log_server_to_stderr(name: str = "reward_plugins.search") -> None:
    """A server's log lines (logger ``name``, INFO) on stderr, unless the logger already has a
    handler."""
    import logging

    log = logging.getLogger(name)
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("reward-plugins: %(asctime)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def _serve_rewards(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.serve.service import ServiceConfig, ServiceLimits

    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be between 0 and 65535, got {args.port}")
    for name in ("workers", "replicas"):
        if getattr(args, name) < (0 if name == "workers" else 1):
            parser.error(f"--{name} must be at least {0 if name == 'workers' else 1}")
    if (args.replicas != 1 or args.ray_address) and not args.ray:
        parser.error("--replicas and --ray-address need --ray")
    scorer, options = _scorer_and_options(args, parser)
    given = {spec.name: getattr(args, spec.name) for spec in dataclasses.fields(ServiceLimits)}
    try:
        limits = ServiceLimits(**given)
    except RewardPluginsError as error:
        name, _, reason = str(error).partition(": ")
        parser.error(f"--{name.replace('_', '-')}: {reason}")
    config = ServiceConfig(
        scorer, options, args.data_source, args.fallback_reward, limits, args.scores_key
    )
    pool = {
        "workers": args.workers,
        "row_timeout": args.row_timeout,
        "max_worker_rss_mb": args.max_worker_rss_mb,
    }
    _log_server_to_stderr("reward_plugins.serve")
    try:
        with suppress(KeyboardInterrupt, _Terminated):  # how a server stops: no error
            if args.ray:
                from reward_plugins.serve.ray_serve import run_on_ray_serve

                run_on_ray_serve(
                    config,
                    replicas=args.replicas,
                    host=args.host,
                    port=args.port,
                    address=args.ray_address,
                    ready=_announce(scorer, pool, f"{args.replicas} Ray Serve replica(s) of "),
                    **pool,
                )
            else:
                from reward_plugins.serve.http import serve_until_signal
                from reward_plugins.serve.service import RewardServer

                server = RewardServer(config, **pool)
                serve_until_signal(server, args.host, args.port, _announce(scorer, pool))
    except (ImportError, RewardPluginsError) as error:
        return _error(f"serve-rewards: {_as_option(str(error), SERVE_SETTINGS)}", 2)
    except OSError as error:
        return _error(f"serve-rewards: {args.host}:{args.port}: {error.strerror or error}", 2)
    return 0


SERVE_SETTINGS = ("fallback_reward", "scores_key", "row_timeout", "max_worker_rss_mb")
"""The ``serve-rewards`` settings checked by the server and its pool, whose errors name them."""


def _as_option(message: str, settings: Sequence[str]) -> str:
    """``message`` with the settings it names (``row_timeout must ...``, ``over
    max_worker_rss_mb=1``) spelt as the options that set them (``--row-timeout``,
    ``--max-worker-rss-mb``)."""
    for name in settings:
        option = "--" + name.replace("_", "-")
        if message.startswith(name) and message[len(name) : len(name) + 1] in (":", " "):
            message = option + message[len(name) :]
        message = message.replace(f" {name}=", f" {option}=")
    return message


def _announce(scorer: str, pool: Mapping[str, Any], prefix: str = "") -> Callable[[Any], None]:
    """The line a server prints once it answers: what it serves, and where."""
    workers = pool["workers"]
    isolation = f"{workers} worker(s)" if workers else "in-process, no isolation"

    def ready(server: Any) -> None:
        print(f"serving {scorer} ({prefix}{isolation}) at {server.base_url}", flush=True)

    return ready


def _scorer_and_options(
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


def _job(
    args: argparse.Namespace, parser: argparse.ArgumentParser, inputs: Sequence[Any]
) -> rescore.ScoreJob:
    from reward_plugins import rescore

    if args.ray_address and args.backend != "ray":
        parser.error("--ray-address needs --backend ray")
    if args.data_source is not None and args.data_source_column is not None:
        parser.error("give --data-source or --data-source-column, not both")
    if args.datasets and (args.data_source is not None or args.data_source_column is not None):
        parser.error("give --dataset or --data-source/--data-source-column, not both")
    args.scorer, options = _scorer_and_options(args, parser)
    workers = args.workers
    cpus = rescore.usable_cpus()
    if workers is not None and workers > cpus and not args.ray_address:
        print(
            f"reward-plugins: note: --workers {workers} capped at {cpus}, the CPUs this "
            "process may use",
            file=sys.stderr,
        )
        workers = cpus
    return rescore.ScoreJob(
        inputs=tuple(inputs),
        output=args.output,
        merge=getattr(args, "merge", False),
        scorer=args.scorer,
        options=options,
        data_source=args.data_source,
        data_source_column=args.data_source_column,
        response_column=args.response_column,
        ground_truth_column=args.ground_truth_column,
        on_error=args.on_error,
        workers=workers,
        backend=args.backend,
        ray_address=args.ray_address,
        quiet=args.quiet,
        resume=getattr(args, "resume", False),
        also_writes=tuple(args.writes),
        datasets=tuple(args.datasets),
    )


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


def _score(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from reward_plugins import rescore
    from reward_plugins.rescore.files import PathError, atomic_output, check_summary_path

    if args.demo == bool(args.inputs):
        parser.error("give INPUT, or --demo (not both)")
    if args.output is None and not args.demo:
        parser.error("-o/--output is required (except with --demo)")
    with ExitStack() as stack:
        inputs = args.inputs
        if args.demo:
            sample = resources.files("reward_plugins") / "data" / DEMO_SAMPLE
            inputs = [stack.enter_context(resources.as_file(sample))]
        args.writes = [args.summary_json] if args.summary_json else []
        job = _job(args, parser, inputs)
        try:
            if args.summary_json is not None:
                check_summary_path(args.summary_json)
            summary = _run_with_progress(job, show=not args.quiet and sys.stderr.isatty())
            if args.demo:
                summary["input"] = f"{DEMO_SAMPLE} (shipped sample)"
            if args.summary_json is not None:
                with atomic_output(args.summary_json) as temporary:
                    temporary.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        except rescore.BadRowError as error:
            return _error(str(error), 1)
        except (rescore.RescoreError, PathError) as error:
            return _error(str(error), 2)
    print(format_summary(summary))
    return 0


def _report(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from reward_plugins import rescore
    from reward_plugins.rescore import report
    from reward_plugins.rescore.files import PathError, check_writable_directory
    from reward_plugins.rescore.messages import printable
    from reward_plugins.router import result_schema

    if not args.output.name.endswith((".html", ".htm")):
        parser.error(f"-o {args.output}: the report is an .html file")
    if args.examples < 0:
        parser.error("--examples must be at least 0")
    png_dir = args.png_dir or args.output.with_name(args.output.stem + "_pngs")
    html_output, args.output = args.output, None
    args.writes = [html_output]
    job = dataclasses.replace(_job(args, parser, args.inputs), describe=report.describe_row)
    run_report = report.RunReport(
        title=report.run_name(args.inputs),
        examples=args.examples,
        scorer=job.scorer,
        schema_of=functools.partial(result_schema, job.scorer, options=job.options),
    )
    try:
        report.require_plotting()
        check_writable_directory(html_output.parent, f"-o {html_output}")
        check_writable_directory(png_dir, f"--png-dir {png_dir}")
        summary = _run_with_progress(
            job, show=not args.quiet and sys.stderr.isatty(), on_described=run_report.add
        )
        run_report.write_html(html_output)
        pngs = run_report.write_pngs(png_dir)
    except rescore.BadRowError as error:
        return _error(str(error), 1)
    except (rescore.RescoreError, PathError, report.ReportError) as error:
        return _error(str(error), 2)
    print(format_summary(summary))
    print(printable(f"wrote {html_output} and {len(pngs)} PNGs in {png_dir}"))
    return 0


def _run_with_progress(
    job: rescore.ScoreJob, show: bool, on_described: Callable[[Any], None] | None = None
) -> dict[str, Any]:
    from reward_plugins import rescore

    if not show:
        return rescore.run(job, on_described=on_described)
    from tqdm import tqdm

    with tqdm(unit="rows", file=sys.stderr, desc="scoring", leave=False) as bar:
        return rescore.run(job, progress=bar.update, on_described=on_described)


def _interval(metric: dict[str, float]) -> str:
    low, high = metric["low"], metric["high"]
    bounds = "" if math.isnan(low) else f"[{low:.3f}, {high:.3f}]"
    return f"{metric['mean']:7.3f}  {bounds}"


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as printed: the job, skipped rows, then each metric per data source (a lone
    surrogate in a data source or a path shown as its escape)."""
    from reward_plugins.rescore.messages import plural, printable

    resumed = summary["resumed_files"]
    if resumed and len(resumed) == summary["files"]:
        return printable(
            f"resumed: all {plural(len(resumed), 'output')} of {summary['output']} complete; "
            "nothing to score"
        )
    lines = _summary_job(summary) + _summary_skipped(summary)
    if summary["steps"]:
        lines.append(f"{plural(len(summary['steps']), 'step')} (per-step series in --summary-json)")
    lines += _summary_table(summary)
    return printable("\n".join(lines))


def _summary_job(summary: dict[str, Any]) -> list[str]:
    """The lines of the summary on the job: what was scored with what, resumed, written, read."""
    from reward_plugins.rescore.messages import plural

    resumed, changed = summary["resumed_files"], summary["changed_outputs"]
    columns = summary["columns"]
    source = columns["data_source"] or f"--data-source {summary['data_source_option']}"
    if summary.get("datasets"):
        source = f"joined on the prompt from --dataset {', '.join(summary['datasets']['files'])}"
    options = " ".join(f"{k}={json.dumps(v)}" for k, v in summary["options"].items())
    lines = [
        f"scored {summary['scored']} of {plural(summary['rows'], 'row')} of {summary['input']} "
        f"with {summary['scorer']}{' ' + options if options else ''} "
        f"(response: {columns['response']}, ground truth: {columns['ground_truth']}, "
        f"data source: {source})",
    ]
    if resumed:
        lines.append(f"resumed: kept {plural(len(resumed), 'complete output')} as written")
    if changed:
        what = "output differs" if len(changed) == 1 else "outputs differ"
        shown = ", ".join(changed[:3]) + (
            f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        )
        lines.append(
            f"resumed: {len(changed)} {what} in size or CRC-32 from when written (truncated or "
            f"edited since), scored again: {shown}"
        )
    if summary["output"]:
        lines.append(f"wrote {summary['output']}")
    if summary["replaced_columns"]:
        lines.append(f"replaced input columns: {', '.join(summary['replaced_columns'])}")
    if summary["stringified_ground_truths"]:
        lines.append(
            f"read {plural(summary['stringified_ground_truths'], 'ground truth')} stringified "
            "by numpy (\"['a' 'b']\") as lists of golds"
        )
    return lines


def _summary_skipped(summary: dict[str, Any]) -> list[str]:
    """The skipped rows: their count by reason, then a few examples."""
    from reward_plugins.rescore.messages import plural

    skipped = summary["skipped"]
    if not skipped["rows"]:
        return []
    reasons = ", ".join(f"{count} {reason}" for reason, count in skipped["reasons"].items())
    listed = f"; all in {summary['failures_file']}" if summary["failures_file"] else ""
    lines = [f"skipped {plural(skipped['rows'], 'row')}: {reasons}{listed}"]
    for example in skipped["examples"]:
        where = ": ".join(f"{k} {v}" for k, v in example.items() if k not in ("file", "reason"))
        lines.append(f"  {example['file']}: {where}: {example['reason']}")
    return lines


def _summary_table(summary: dict[str, Any]) -> list[str]:
    """A blank line, then the table: each data source's (then the overall) rows and metrics,
    each metric by its label."""
    from reward_plugins.rescore.messages import printable

    labels = {item["key"]: item["label"] for item in summary["results"]}
    groups = {printable(name): group for name, group in summary["sources"].items()}
    groups["overall"] = summary["overall"]
    width = max(len("data source"), *map(len, groups))
    named = max([19, *(len(labels[key]) for group in groups.values() for key in group["metrics"])])
    lines = ["", f"{'data source':{width}}  {'rows':>7}  {'metric':{named}}  {'mean':>7}  95% CI"]
    for name, group in groups.items():
        prefix = f"{name:{width}}  {group['rows']:7d}"
        for key, metric in group["metrics"].items():
            lines.append(f"{prefix}  {labels[key]:{named}}  {_interval(metric)}")
            prefix = " " * len(prefix)
        if not group["metrics"]:
            lines.append(prefix)
    return lines


# ------------------------------------------------------------------------------- compare


def _compare(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.metrics import paired_test_values
    from reward_plugins.metrics.significance import DEFAULT_SAMPLES
    from reward_plugins.rescore import RescoreError
    from reward_plugins.rescore.compare import CompareRefused, labelled, paired_columns
    from reward_plugins.rescore.files import PathError
    from reward_plugins.router import scorer_result_schema

    if args.samples is not None and args.samples < 1:
        parser.error(f"--samples must be at least 1, got {args.samples}")
    if args.seed < 0:
        parser.error(f"--seed must be at least 0, got {args.seed}")
    if args.options and args.scorer is None:
        parser.error("--set names an option of --scorer; give --scorer")
    schema: Any = ()
    if args.scorer is not None:
        try:
            schema = scorer_result_schema(args.scorer, dict(args.options))
        except RewardPluginsError as error:
            return _error(f"compare: --scorer {args.scorer}: {error}", 2)
    try:
        pairing = paired_columns(
            args.first, args.second, args.prompt_column, args.ground_truth_column
        )
    except CompareRefused as error:
        return _error(f"compare: {error}", 1)
    except (RescoreError, PathError) as error:
        return _error(f"compare: {error}", 2)
    results: dict[str, dict[str, Any]] = {}
    samples = args.samples or DEFAULT_SAMPLES[args.method]
    keys = labelled(list(pairing.columns), schema)
    for name in keys:  # the schema's order
        column = pairing.columns[name]
        result = paired_test_values(
            column.values_a,
            column.values_b,
            method=args.method,
            samples=samples,
            seed=args.seed,
        )
        results[name] = {
            "mean_a": result.score_a,
            "mean_b": result.score_b,
            "difference": result.difference,
            "p_value": result.p_value,
            "ci_a": result.ci_a,
            "ci_b": result.ci_b,
        }
    report = {
        "a": str(args.first),
        "b": str(args.second),
        "rows": pairing.rows,
        "paired_by": {
            "prompt": pairing.prompt_column,
            "ground_truth": pairing.ground_truth_column,
        },
        "method": args.method,
        "samples": samples,
        "seed": args.seed,
        "scorer": args.scorer,
        "columns": results,
        "results": {name: dataclasses.asdict(key) for name, key in keys.items()},
        "not_compared": pairing.not_compared,
    }
    print(json.dumps(report, indent=2) if args.json else format_comparison(report))
    return 0


def format_comparison(report: Mapping[str, Any]) -> str:
    """The report of ``compare`` as printed: the setting, then one aligned line per column (with
    its label when a scorer's schema named the columns)."""
    from reward_plugins.rescore.messages import plural, printable

    test = {"bootstrap": "paired bootstrap resampling", "ar": "approximate randomization"}
    unit = {"bootstrap": "resamples", "ar": "trials"}
    by = report["paired_by"]
    truth = f" and ground truth {by['ground_truth']!r}" if by["ground_truth"] else ""
    lines = [
        f"A: {report['a']}",
        f"B: {report['b']}",
        f"{plural(report['rows'], 'row')} paired by prompt {by['prompt']!r}{truth}; "
        f"{test[report['method']]}, {report['samples']} {unit[report['method']]}, "
        f"seed {report['seed']}",
        "",
    ]
    columns = {printable(name): column for name, column in report["columns"].items()}
    labels = {printable(name): printable(item["label"]) for name, item in report["results"].items()}
    width = max(len("column"), *map(len, columns))
    named = max(len("label"), *map(len, labels.values())) if report["scorer"] else 0
    label = f"{'label':{named}}  " if named else ""
    lines.append(
        f"{'column':{width}}  {label}{'mean A':>9}  {'mean B':>9}  {'B - A':>9}  {'p-value':>7}"
    )
    for name, column in columns.items():
        label = f"{labels[name]:{named}}  " if named else ""
        lines.append(
            f"{name:{width}}  {label}{column['mean_a']:9.4f}  {column['mean_b']:9.4f}  "
            f"{column['difference']:+9.4f}  {column['p_value']:7.4f}"
        )
    for name, reason in report["not_compared"].items():
        lines.append(f"not compared: {name}: {reason}")
    return printable("\n".join(lines))
