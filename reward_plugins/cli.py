"""The ``reward-plugins`` command: ``score``, ``list`` and ``path``.

Exit status: 0 on success; 1 when rows cannot be scored, or ``path`` finds no entry file; 2 for a
usage error (bad option, unknown scorer, missing or unreadable input, missing optional package).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from importlib import resources
from pathlib import Path
from typing import Any

from reward_plugins import rescore
from reward_plugins.options import OptionSpec
from reward_plugins.registry import scorer_names

ADAPTER_FILES = {
    "verl": "adapters/verl_legacy_reward.py",
    "openrlhf": "adapters/openrlhf_reward.py",
}
"""Entry files that ``reward-plugins path TARGET`` locates, relative to the package directory."""

DEMO_SAMPLE = "sample_rollouts.jsonl"


def parse_option(text: str) -> tuple[str, Any]:
    """``key=value`` from ``--set``: the value is read as JSON when it parses, else kept a string.

    Example:
        >>> parse_option("format_score=0.1"), parse_option("extract=first")
        (('format_score', 0.1), ('extract', 'first'))
    """
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return key.strip(), parsed


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reward-plugins", description="Rule-based rewards for RL fine-tuning of LLMs."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    score = commands.add_parser(
        "score",
        help="re-score a rollout dump or dataset (.jsonl or .parquet)",
        description="Score every row of INPUT and write it to OUTPUT with reward_<key> columns.",
    )
    score.add_argument("input", nargs="?", type=Path, metavar="INPUT", help=".jsonl or .parquet")
    score.add_argument("-o", "--output", type=Path, metavar="OUTPUT", help=".jsonl or .parquet")
    score.add_argument("--demo", action="store_true", help="score the sample in the package")
    score.add_argument(
        "--scorer",
        default="compute_score",
        choices=scorer_names(),
        metavar="NAME",
        help="a registered scorer (compute_score; `reward-plugins list` shows them all)",
    )
    score.add_argument(
        "--set",
        dest="options",
        action="append",
        type=parse_option,
        default=[],
        metavar="KEY=VALUE",
        help="scorer option, as in verl's reward_kwargs (repeatable; values parsed as JSON)",
    )
    score.add_argument("--data-source", help="of every row (default: the data_source column)")
    score.add_argument("--response-column", help="default: output/response/responses/solution_str")
    score.add_argument(
        "--ground-truth-column", help="default: gts, ground_truth, reward_model.ground_truth"
    )
    score.add_argument(
        "--on-error", choices=("fail", "skip"), default="fail", help="on a bad row (fail)"
    )
    score.add_argument("--workers", type=int, help="processes (local) or CPUs (local Ray)")
    score.add_argument("--backend", choices=("local", "ray"), default="local")
    score.add_argument("--ray-address", help="a Ray cluster (default: RAY_ADDRESS, else local)")
    score.add_argument("--summary-json", type=Path, metavar="PATH", help="write the summary")
    score.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    score.set_defaults(handler=_score)

    listing = commands.add_parser(
        "list", help="registered scorers: data sources, options, origin; broken plugins"
    )
    listing.set_defaults(handler=_list)

    path = commands.add_parser("path", help="installed path of an integration entry file")
    path.add_argument("target", choices=sorted(ADAPTER_FILES))
    path.set_defaults(handler=_path)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (the console script exits with it)."""
    parser = _parser()
    args = parser.parse_args(argv)
    code: int = args.handler(args, parser)
    return code


def _error(message: str, code: int) -> int:
    print(f"reward-plugins: error: {message}", file=sys.stderr)
    return code


def _list(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from reward_plugins.registry import broken_plugins, registrations

    for registration in registrations():
        print(registration.name)
        print(f"  data sources: {', '.join(registration.data_sources)}")
        print(f"  options: {_describe_options(registration.options) or '(none)'}")
        ground_truth = "tuple of gold strings" if registration.ground_truth == "golds" else "raw"
        print(f"  ground truth: {ground_truth}{' (async)' if registration.is_async else ''}")
        print(f"  from: {registration.origin} ({registration.qualified_name})")
    for broken in broken_plugins():
        print(f"broken plugin: {broken.describe()}")
    return 0


def _describe_options(options: Mapping[str, OptionSpec]) -> str:
    return ", ".join(
        f"{name} (required, {spec.expected})" if spec.required else f"{name}={spec.default!r}"
        for name, spec in options.items()
    )


def _path(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import reward_plugins

    location = Path(reward_plugins.__file__).resolve().parent / ADAPTER_FILES[args.target]
    if not location.is_file():
        return _error(
            f"the {args.target} entry file is not part of this installation: {location} "
            "does not exist",
            1,
        )
    print(location)
    return 0


def _score(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.demo == (args.input is not None):
        parser.error("score: give INPUT, or --demo (not both)")
    if args.output is None and not args.demo:
        parser.error("score: -o/--output is required (except with --demo)")
    if args.ray_address and args.backend != "ray":
        parser.error("score: --ray-address needs --backend ray")
    with ExitStack() as stack:
        source = args.input
        if args.demo:
            sample = resources.files("reward_plugins") / "data" / DEMO_SAMPLE
            source = stack.enter_context(resources.as_file(sample))
        job = rescore.ScoreJob(
            input=source,
            output=args.output,
            scorer=args.scorer,
            options=dict(args.options),
            data_source=args.data_source,
            response_column=args.response_column,
            ground_truth_column=args.ground_truth_column,
            on_error=args.on_error,
            workers=args.workers,
            backend=args.backend,
            ray_address=args.ray_address,
            ray_logs=not args.quiet,
        )
        show_progress = not args.quiet and sys.stderr.isatty()
        try:
            summary = _run_with_progress(job, show_progress)
        except rescore.BadRowError as error:
            return _error(str(error), 1)
        except rescore.RescoreError as error:
            return _error(str(error), 2)
    if args.demo:
        summary["input"] = f"{DEMO_SAMPLE} (shipped sample)"
    if args.summary_json is not None:
        args.summary_json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(format_summary(summary))
    return 0


def _run_with_progress(job: rescore.ScoreJob, show: bool) -> dict[str, Any]:
    if not show:
        return rescore.run(job)
    from tqdm import tqdm

    total = None
    if job.input.suffix == ".jsonl" and job.input.is_file():
        with job.input.open("rb") as lines:
            total = sum(1 for line in lines if line.strip())
    with tqdm(total=total, unit="rows", file=sys.stderr, desc="scoring", leave=False) as bar:
        return rescore.run(job, progress=bar.update)


def _interval(metric: dict[str, float]) -> str:
    low, high = metric["low"], metric["high"]
    bounds = "" if math.isnan(low) else f"[{low:.3f}, {high:.3f}]"
    return f"{metric['mean']:7.3f}  {bounds}"


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as printed: the job, skipped rows, then each metric per data source."""
    columns = summary["columns"]
    source = columns["data_source"] or f"--data-source {summary['data_source_option']}"
    options = " ".join(f"{k}={json.dumps(v)}" for k, v in summary["options"].items())
    lines = [
        f"scored {summary['scored']} of {summary['rows']} rows of {summary['input']} with "
        f"{summary['scorer']}{' ' + options if options else ''} "
        f"(response: {columns['response']}, ground truth: {columns['ground_truth']}, "
        f"data source: {source})",
    ]
    if summary["output"]:
        lines.append(f"wrote {summary['output']}")
    if summary["replaced_columns"]:
        lines.append(f"replaced input columns: {', '.join(summary['replaced_columns'])}")
    skipped = summary["skipped"]
    if skipped["rows"]:
        reasons = ", ".join(f"{count} {reason}" for reason, count in skipped["reasons"].items())
        lines.append(f"skipped {skipped['rows']} rows: {reasons}")
        for example in skipped["examples"]:
            where = ", ".join(f"{k} {v}" for k, v in example.items() if k != "reason")
            lines.append(f"  {where}: {example['reason']}")
    labels = dict(rescore.SUMMARY_METRICS)
    groups = {**summary["sources"], "overall": summary["overall"]}
    width = max(len("data source"), *map(len, groups))
    lines += ["", f"{'data source':{width}}  {'rows':>7}  {'metric':19}  {'mean':>7}  95% CI"]
    for name, group in groups.items():
        prefix = f"{name:{width}}  {group['rows']:7d}"
        for key, metric in group["metrics"].items():
            lines.append(f"{prefix}  {labels[key]:19}  {_interval(metric)}")
            prefix = " " * len(prefix)
        if not group["metrics"]:
            lines.append(prefix)
    return "\n".join(lines)
