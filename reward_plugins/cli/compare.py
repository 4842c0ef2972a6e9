"""``reward-plugins compare``: a paired significance test of two scored outputs of the same
prompts, printed as text (:func:`reward_plugins.rescore.text.format_comparison`) or JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reward_plugins.cli.common import OneLineParser, add_set_argument, error

if TYPE_CHECKING:
    from reward_plugins.rescore.compare import Pairing
    from reward_plugins.results import ResultKey

HELP = "paired significance test of two scored outputs of the same prompts"
DESCRIPTION = (
    "Compare the reward_* columns of A and B, two outputs of `score` of the same prompts "
    "(two scorers, option sets or checkpoints; rows paired by prompt, in order within a "
    "prompt): both means, the difference and the p-value of a paired test (sacrebleu's "
    "paired bootstrap resampling or approximate randomization)."
)


def add_arguments(command: OneLineParser) -> None:
    """A and B; the pairing and the test are added when the command is chosen."""
    command.add_argument(
        "first", type=Path, metavar="A", help="the baseline (.jsonl, .jsonl.gz, .parquet)"
    )
    command.add_argument(
        "second", type=Path, metavar="B", help="the other output, rows in any order"
    )
    command.later.append(_add_compare_arguments)
    command.add_argument("--json", action="store_true", help="print the comparison as JSON")


def _add_compare_arguments(command: argparse.ArgumentParser) -> None:
    """The options of ``compare``: the pairing columns and the test."""
    from reward_plugins.metrics.significance import DEFAULT_SAMPLES, DEFAULT_SEED, METHODS
    from reward_plugins.rescore.compare import PROMPT_COLUMNS
    from reward_plugins.runtime.rows import GROUND_TRUTH_COLUMNS

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
    add_set_argument(command, "an option of --scorer, as given to score (repeatable)")


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Pair the rows of A and B, test each result column, print the comparison."""
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.metrics.significance import DEFAULT_SAMPLES
    from reward_plugins.rescore import RescoreError
    from reward_plugins.rescore.compare import CompareRefused, labelled, paired_columns
    from reward_plugins.rescore.files import PathError
    from reward_plugins.rescore.text import format_comparison
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
        except RewardPluginsError as failure:
            return error(f"compare: --scorer {args.scorer}: {failure}", 2)
    try:
        pairing = paired_columns(
            args.first, args.second, args.prompt_column, args.ground_truth_column
        )
    except CompareRefused as failure:
        return error(f"compare: {failure}", 1)
    except (RescoreError, PathError) as failure:
        return error(f"compare: {failure}", 2)
    samples = args.samples or DEFAULT_SAMPLES[args.method]
    report = _comparison(args, pairing, labelled(list(pairing.columns), schema), samples)
    print(json.dumps(report, indent=2) if args.json else format_comparison(report))
    return 0


def _comparison(
    args: argparse.Namespace, pairing: Pairing, keys: dict[str, ResultKey], samples: int
) -> dict[str, Any]:
    """The report of ``compare`` (what ``--json`` prints): the setting, then the test of each
    column of ``keys``, in their order (the schema's)."""
    from reward_plugins.metrics import paired_test_values

    results: dict[str, dict[str, Any]] = {}
    for name in keys:
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
    return {
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
