"""The summary of a run (:mod:`reward_plugins.rescore.summary`) and the comparison of two outputs
(:mod:`reward_plugins.rescore.compare`) as text for people: pure functions that return what
``reward-plugins score``, ``report`` and ``compare`` print (nothing here prints).

A lone surrogate in a data source, a column or a path is shown as its escape, so that the text
can always be printed as UTF-8.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from reward_plugins.rescore.messages import plural, printable


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as printed: the job, skipped rows, then each metric per data source (a lone
    surrogate in a data source or a path shown as its escape)."""
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


def _interval(metric: dict[str, float]) -> str:
    """A metric's mean and its 95% interval (none shown when the interval is undefined)."""
    low, high = metric["low"], metric["high"]
    bounds = "" if math.isnan(low) else f"[{low:.3f}, {high:.3f}]"
    return f"{metric['mean']:7.3f}  {bounds}"


def format_comparison(report: Mapping[str, Any]) -> str:
    """The report of ``compare`` as printed: the setting, then one aligned line per column (with
    its label when a scorer's schema named the columns)."""
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
