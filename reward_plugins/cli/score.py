"""``reward-plugins score``: re-score files, runs or datasets and print the summary."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack
from importlib import resources
from pathlib import Path

from reward_plugins.cli.common import OneLineParser, error
from reward_plugins.cli.job import add_job_arguments, job, run_with_progress

HELP = "re-score rollout dumps, whole verl runs or datasets (.jsonl, .jsonl.gz, .parquet)"
DESCRIPTION = "Score every row of INPUT and write it to OUTPUT with reward_<key> columns."

DEMO_SAMPLE = "sample_rollouts.jsonl"
"""The sample in the package's ``data`` directory that ``score --demo`` scores."""


def add_arguments(command: OneLineParser) -> None:
    """The inputs and output; the job's options are added when the command is chosen."""
    command.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="files, run directories (verl's {step}.jsonl files) or glob patterns",
    )
    command.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUTPUT",
        help="a file for one input file; a directory for a run (one file per input)",
    )
    command.add_argument("--demo", action="store_true", help="score the sample in the package")
    command.add_argument("--merge", action="store_true", help="write a run to the one file OUTPUT")
    command.add_argument(
        "--resume", action="store_true", help="skip the outputs of a run that are complete"
    )
    command.later.append(add_job_arguments)
    command.add_argument("--summary-json", type=Path, metavar="PATH", help="write the summary")


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Score the inputs (or the shipped sample), write the summary JSON, print the summary."""
    from reward_plugins import rescore
    from reward_plugins.rescore.files import PathError, atomic_output, check_summary_path
    from reward_plugins.rescore.text import format_summary

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
        score_job = job(args, parser, inputs)
        try:
            if args.summary_json is not None:
                check_summary_path(args.summary_json)
            summary = run_with_progress(score_job, show=not args.quiet and sys.stderr.isatty())
            if args.demo:
                summary["input"] = f"{DEMO_SAMPLE} (shipped sample)"
            if args.summary_json is not None:
                with atomic_output(args.summary_json) as temporary:
                    temporary.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        except rescore.BadRowError as failure:
            return error(str(failure), 1)
        except (rescore.RescoreError, PathError) as failure:
            return error(str(failure), 2)
    print(format_summary(summary))
    return 0
