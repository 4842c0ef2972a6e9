"""``reward-plugins report``: re-score a run and write it as an HTML page with PNGs of its
charts."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from pathlib import Path

from reward_plugins.cli.common import OneLineParser, error
from reward_plugins.cli.job import add_job_arguments, job, run_with_progress

HELP = "an HTML report of a training run (needs reward-plugins[report])"
DESCRIPTION = "Re-score RUN and write a self-contained HTML page, with PNGs of its charts."


def add_arguments(command: OneLineParser) -> None:
    """The run, the page and its PNGs; the job's options and ``--examples`` are added when the
    command is chosen."""
    command.add_argument("inputs", nargs="+", metavar="RUN", help="as INPUT of `score`")
    command.add_argument("-o", "--output", type=Path, required=True, metavar="HTML")
    command.add_argument(
        "--png-dir", type=Path, metavar="DIR", help="where the PNGs go (default: HTML_pngs/)"
    )
    command.later += [_add_report_arguments, add_job_arguments]


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


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Score the run, write the page and the PNGs, print the summary and where they went."""
    from reward_plugins import rescore
    from reward_plugins.rescore import report
    from reward_plugins.rescore.files import PathError, check_writable_directory
    from reward_plugins.rescore.messages import printable
    from reward_plugins.rescore.text import format_summary
    from reward_plugins.router import result_schema

    if not args.output.name.endswith((".html", ".htm")):
        parser.error(f"-o {args.output}: the report is an .html file")
    if args.examples < 0:
        parser.error("--examples must be at least 0")
    png_dir = args.png_dir or args.output.with_name(args.output.stem + "_pngs")
    html_output, args.output = args.output, None
    args.writes = [html_output]
    score_job = dataclasses.replace(job(args, parser, args.inputs), describe=report.describe_row)
    run_report = report.RunReport(
        title=report.run_name(args.inputs),
        examples=args.examples,
        scorer=score_job.scorer,
        schema_of=functools.partial(result_schema, score_job.scorer, options=score_job.options),
    )
    try:
        report.require_plotting()
        check_writable_directory(html_output.parent, f"-o {html_output}")
        check_writable_directory(png_dir, f"--png-dir {png_dir}")
        summary = run_with_progress(
            score_job, show=not args.quiet and sys.stderr.isatty(), on_described=run_report.add
        )
        run_report.write_html(html_output)
        pngs = run_report.write_pngs(png_dir)
    except rescore.BadRowError as failure:
        return error(str(failure), 1)
    except (rescore.RescoreError, PathError, report.ReportError) as failure:
        return error(str(failure), 2)
    print(format_summary(summary))
    print(printable(f"wrote {html_output} and {len(pngs)} PNGs in {png_dir}"))
    return 0
