"""What ``score`` and ``report`` share: the job's options (the scorer, the columns, the
execution), the :class:`~reward_plugins.rescore.ScoreJob` they make, and running it with a
progress bar."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reward_plugins.cli.common import add_set_argument, scorer_and_options

if TYPE_CHECKING:
    from reward_plugins import rescore


def add_job_arguments(command: argparse.ArgumentParser) -> None:
    """The options ``score`` and ``report`` share: the scorer, the columns, the execution.

    ``--scorer`` is checked after parsing (``_check_scorer`` of :mod:`reward_plugins.cli`): a
    list of choices would load every plugin for every command."""
    from reward_plugins.plugins.composed import NAME as COMPOSED_SCORER
    from reward_plugins.runtime.rows import (
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
    add_set_argument(
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


def job(
    args: argparse.Namespace, parser: argparse.ArgumentParser, inputs: Sequence[Any]
) -> rescore.ScoreJob:
    """The job of ``score`` or ``report`` from its options (a usage error for options that
    contradict each other); ``--workers`` above the usable CPUs is capped, with a note."""
    from reward_plugins import rescore

    if args.ray_address and args.backend != "ray":
        parser.error("--ray-address needs --backend ray")
    if args.data_source is not None and args.data_source_column is not None:
        parser.error("give --data-source or --data-source-column, not both")
    if args.datasets and (args.data_source is not None or args.data_source_column is not None):
        parser.error("give --dataset or --data-source/--data-source-column, not both")
    args.scorer, options = scorer_and_options(args, parser)
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


def run_with_progress(
    job: rescore.ScoreJob, show: bool, on_described: Callable[[Any], None] | None = None
) -> dict[str, Any]:
    """Run ``job`` (:func:`reward_plugins.rescore.run`), with a progress bar on stderr when
    ``show``; returns its summary."""
    from reward_plugins import rescore

    if not show:
        return rescore.run(job, on_described=on_described)
    from tqdm import tqdm

    with tqdm(unit="rows", file=sys.stderr, desc="scoring", leave=False) as bar:
        return rescore.run(job, progress=bar.update, on_described=on_described)
