"""The run report: row description, the schema-driven page, aggregation, titles and writes.

Rows are built by hand as :class:`ScoredRow` values, their results from the real router: the
Search-R1 scorer (``compute_score`` on ``searchR1_nq``) where only ``score`` matters, and a
third-party plugin registered here (:data:`PROBE_PLUGIN`, declaring a component, a rate, a
count, a length and a diagnostic) where the kinds matter; the same plugin drives the real CLI.
"""

from __future__ import annotations

import ast
import doctest
import functools
import importlib
import json
import math
import os
import pickle
import pkgutil
import random
import re
import statistics
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli_helpers import run_cli_with_script

from reward_plugins import compute_score
from reward_plugins.errors import RewardPluginsError
from reward_plugins.rescore import files
from reward_plugins.rescore import report as report_module
from reward_plugins.rescore.files import PathError
from reward_plugins.rescore.records import ScoredRow
from reward_plugins.rescore.report import (
    AGREEMENT,
    ENGINE_SERIES,
    EXCERPT_CHARS,
    UNIFORM_REWARD,
    ReportError,
    RowStats,
    RunReport,
    describe_row,
    group_key,
    run_name,
    value_axis,
)
from reward_plugins.results import ResultKey
from reward_plugins.router import result_schema, route

REPO_ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SOURCE = "searchR1_nq"

PROBE_PLUGIN = '''
from reward_plugins import scorer
from reward_plugins.results import ResultKey

PROBE_SCHEMA = (
    ResultKey("score", "reward", "reward", gdpo=True),
    ResultKey("hit", "component", "hit", gdpo=True),
    ResultKey("cited", "rate", "cited rate"),
    ResultKey("calls", "count", "tool calls"),
    ResultKey("chars", "length", "response characters"),
    ResultKey("note", "diagnostic", "a note"),
)


@scorer("report_probe", "report_test/probe", results=PROBE_SCHEMA)
def report_probe(response, golds):
    """A gold in the response pays 1, each <call> costs 0.1; "[1]" is a citation."""
    hit = float(any(gold in response for gold in golds))
    calls = response.count("<call>")
    return {
        "score": hit - 0.1 * calls,
        "hit": hit,
        "cited": float("[1]" in response),
        "calls": calls,
        "chars": len(response),
        "note": 7.0,
        "extra": 2.0,  # declared nowhere: a diagnostic
    }
'''
"""A third-party plugin: its keys reach the report through its declared schema alone."""

exec(compile(PROBE_PLUGIN, "report_probe_plugin", "exec"), {})
PROBE = "report_probe"
PROBE_SOURCE = "report_test/probe"
probe_schema_of = functools.partial(result_schema, PROBE, options={})


def schema_of(source: str) -> tuple[ResultKey, ...]:
    """The schema the CLI would read: the probe's on its data source, else Search-R1's."""
    scorer = PROBE if source == PROBE_SOURCE else "compute_score"
    return result_schema(scorer, source, {})


def scored(
    response: str,
    *,
    golds: Any = ("Paris",),
    step: int | None = 1,
    prompt: Any = "q",
    logged: Any = None,
    source: str = SOURCE,
    file: str = "run/1.jsonl",
    number: int = 1,
    result: dict[str, Any] | None = None,
    record: dict[str, Any] | None = None,
) -> ScoredRow:
    """A scored row; the result is the real scorer's (the probe's on its data source) unless
    given."""
    record = {"output": response, **(record or {})}
    if prompt is not None:
        record["input"] = prompt
    if logged is not None:
        record["score"] = logged
    if result is None:
        scorer = PROBE if source == PROBE_SOURCE else "compute_score"
        result = route(scorer, source, response, list(golds), {}, return_dict=True)
    return ScoredRow(file, number, record, step, source, response, result)


def describe(response: str, **kwargs: Any) -> RowStats:
    return describe_row(scored(response, **kwargs))


def probe(response: str, **kwargs: Any) -> RowStats:
    return describe(response, source=PROBE_SOURCE, **kwargs)


def build(rows: list[RowStats], **kwargs: Any) -> RunReport:
    kwargs.setdefault("schema_of", schema_of)
    report = RunReport(title=kwargs.pop("title", "run"), **kwargs)
    for row in rows:
        report.add(row)
    return report


# ------------------------------------------------------------------------- describe_row


def test_describe_row_keeps_the_results_numbers_and_the_responses_end() -> None:
    response = "<think>t</think><search>capital of France</search><answer> The Paris </answer>"
    stats = describe(response, logged=1.0, file="val/3.jsonl", number=7, step=3)
    assert (stats.file, stats.number, stats.step, stats.data_source) == (
        "val/3.jsonl",
        7,
        3,
        SOURCE,
    )
    result = compute_score(SOURCE, response, ["Paris"], return_dict=True)
    assert dict(stats.values) == {key: float(value) for key, value in result.items()}
    assert [key for key, _ in stats.values] == list(result)  # the result's order
    assert (stats.score, stats.value("em"), stats.value("nope")) == (1.0, 1.0, None)
    assert (stats.logged, stats.excerpt, stats.experiment) == (1.0, response, None)
    assert stats.group == group_key("q")


def test_only_finite_numbers_are_kept() -> None:
    result = {"score": 0.5, "em": "yes", "f1": math.nan, "subem": math.inf, "ok": True, 3: 1.0}
    stats = describe("<answer>x</answer>", result=result, logged="1.0")
    assert stats.values == (("score", 0.5), ("ok", 1.0))
    assert stats.logged is None
    assert describe("<answer>x</answer>", prompt=None).group is None


def test_the_excerpt_is_the_end_of_the_response() -> None:
    long = "x" * 500 + " the end"
    stats = describe(long, result={"score": 0.0})
    assert len(stats.excerpt) == EXCERPT_CHARS and stats.excerpt.endswith("the end")
    assert stats.excerpt.startswith("…")
    assert describe("short", result={}).excerpt == "short"


def test_the_row_values_are_the_scorers_not_the_reports() -> None:
    """The report reads no tags: a response full of them adds nothing the result lacks."""
    response = "<search>a</search><tool_call>{}</tool_call><answer>Paris, Lyon or Nice</answer>"
    stats = describe(response, result={"score": 0.25})
    assert stats.values == (("score", 0.25),)
    imported: list[str | None] = []
    modules = sorted(Path(report_module.__file__).parent.glob("*.py"))
    assert len(modules) > 5  # the package's modules, not only its __init__
    for module in modules:
        tree = ast.parse(module.read_text(encoding="utf-8"))
        imported += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import)]
        imported += [alias.name for node in imports for alias in node.names]
    package = {
        name
        for name in imported
        if name
        and name.startswith("reward_plugins")
        and not f"{name}.".startswith(f"{report_module.__name__}.")  # the package's own
    }
    assert package == {
        "reward_plugins.errors",
        "reward_plugins.metrics.aggregate",
        "reward_plugins.options",
        "reward_plugins.rescore.errors",
        "reward_plugins.rescore.files",
        "reward_plugins.rescore.formats",
        "reward_plugins.rescore.messages",
        "reward_plugins.rescore.records",
        "reward_plugins.results",
    }


@pytest.mark.parametrize(
    ("record", "experiment"),
    [
        ({"experiment_name": "grpo_nq"}, "grpo_nq"),
        ({"extra_info": {"experiment_name": "grpo_hotpot", "index": 1}}, "grpo_hotpot"),
        ({"experiment_name": 3, "extra_info": {"experiment_name": "x"}}, "x"),
        ({"experiment_name": ""}, None),
        ({"extra_info": "grpo"}, None),
        ({}, None),
    ],
)
def test_the_experiment_name_comes_from_the_record(
    record: dict[str, Any], experiment: str | None
) -> None:
    assert describe("r", result={}, record=record).experiment == experiment


# -------------------------------------------------------------------- schema-driven page


def probe_run() -> list[RowStats]:
    """Three steps of the probe plugin: hits grow, calls and citations vary."""
    rows = []
    for step in (1, 2, 3):
        for number in range(1, 13):
            calls = (number + step) % 4
            answer = "Paris" if number <= 4 * step else "Lyon"
            cite = " [1]" if number % 6 == 0 else ""
            response = "<call>x</call>" * calls + f"It is {answer}.{cite}" + " w" * number
            rows.append(probe(response, step=step, number=number, prompt=f"q{number // 3}"))
    return rows


def test_a_third_party_plugins_keys_are_charted_by_kind() -> None:
    report = build(probe_run())
    schema = report.schema()
    assert [(item.key, item.kind) for item in schema] == [
        ("score", "reward"),
        ("hit", "component"),
        ("cited", "rate"),
        ("calls", "count"),
        ("chars", "length"),
        ("note", "diagnostic"),
        ("extra", "diagnostic"),  # undeclared: a diagnostic named by its key
    ]
    page = page_of(report)
    alts = [attrs.get("alt") for tag, attrs in tags_of(page) if tag == "img"]
    assert alts == [
        "reward",
        "hit",
        "cited rate",
        "tool calls",
        "tool calls",  # its distribution
        "response characters",
        "response characters",
        "GRPO groups with one reward",  # no logged score in these rows: no agreement chart
    ]
    assert "a note" not in alts and "extra" not in alts
    assert "Diagnostics (tabulated, not charted): <code>note</code>, <code>extra</code>." in page
    assert "<tr><td>a note</td><td>diagnostic</td><td>36</td><td>7.000</td>" in page
    for label in ("cited rate", "tool calls", "response characters"):
        assert f">{label}</a></td>" in page  # in the indicator table
    names = [path.name for path in report.write_pngs(Path(tempfile.mkdtemp()) / "png")]
    assert names == [
        "score.png",
        "hit.png",
        "cited.png",
        "calls.png",
        "calls_distribution.png",
        "chars.png",
        "chars_distribution.png",
        "uniform_reward.png",
    ]


def test_per_step_values_follow_the_result_keys() -> None:
    rows = probe_run()
    report = build(rows)
    for key in ("score", "hit", "cited", "calls", "chars", "note"):
        bands = report.per_step(key)
        assert sorted(bands) == [1, 2, 3]
        for step in (1, 2, 3):
            values = [row.value(key) for row in rows if row.step == step]
            assert bands[step].mean == pytest.approx(statistics.fmean(values))
    assert report.per_step("hit")[1].mean == pytest.approx(4 / 12)
    assert report.per_step("hit")[3].mean == 1.0
    assert report.overall("cited").mean == pytest.approx(6 / 36)
    with pytest.raises(ReportError, match="unknown series 'nope'"):
        report.per_step("nope")


def test_count_and_length_examples_are_the_largest_values_with_their_reward() -> None:
    report = build(probe_run(), examples=3)
    worst = report.worst("calls")
    assert [row.value("calls") for row in worst] == [3.0, 3.0, 3.0]
    assert [(row.step, row.number) for row in worst] == [(1, 2), (1, 6), (1, 10)]  # earliest
    longest = report.worst("chars")
    assert [row.value("chars") for row in longest] == sorted(
        (row.value("chars") for row in probe_run()), reverse=True
    )[:3]
    page = page_of(report)
    section = page[page.index("<h3 id='indicator-calls'>") :]
    section = section[: section.index("</table>")]
    assert "largest tool calls first" in section
    # the row, its count (3) and its reward (hit 1 - 3 calls x 0.1)
    assert "<td>run/1.jsonl:2</td><td>1</td><td>report_test/probe</td><td>3</td><td>0.7</td>" in (
        section
    )


def test_rate_examples_show_the_rarer_value_with_the_reward() -> None:
    report = build(probe_run(), examples=2)
    cited = report.rate_examples("cited")
    assert (cited.value, cited.share) == (1.0, pytest.approx(6 / 36))
    assert all(row.value("cited") == 1.0 for row in cited.rows)
    # cited: rows 6 and 12 of each step; rewards -0.3, -0.1 | 1.0, -0.2 | 0.9, 0.7
    assert [row.score for row in cited.rows] == [1.0, 0.9]  # the highest reward first
    # A rate that fires on most rows shows the rows where it did not.
    rows = [probe("Paris [1]", number=n) for n in range(5)] + [probe("Lyon", number=9)]
    mostly = build(rows).rate_examples("cited")
    assert (mostly.value, [row.number for row in mostly.rows]) == (0.0, [9])
    page = page_of(build(rows))
    assert "rows where cited rate = 0 (the rarer value: 16.7% of the rows with the key)" in page
    assert "<td>run/1.jsonl:9</td><td>1</td><td>report_test/probe</td><td>0</td><td>0</td>" in page
    # A rate that never fires says so; no row shows a 0 as what it found.
    never = page_of(build([probe("Paris", number=n) for n in range(3)]))
    assert "<p>No row has cited rate = 1.</p>" in never
    with pytest.raises(ReportError, match="unknown rate 'calls'"):
        build(rows).rate_examples("calls")


def test_a_flat_zero_rate_is_drawn_on_a_zero_to_one_axis(tmp_path: Path) -> None:
    image = pytest.importorskip("PIL.Image")
    rows = [probe("Paris", step=step, number=n) for step in (1, 2, 3) for n in range(4)]
    report = build(rows)
    assert {band.mean for band in report.per_step("cited").values()} == {0.0}
    paths = {path.stem: path for path in report.write_pngs(tmp_path)}

    def y_range(name: str) -> str:
        with image.open(paths[name]) as png:
            return str(png.text["Description"])

    assert y_range("cited") == "y from 0 to 1"
    assert y_range("uniform_reward") == "y from 0 to 1"
    assert y_range("hit") == "y from 0 to 1"  # a component within [0, 1]
    assert y_range("calls") == "y from 0 to 1"  # a count starts at 0
    assert y_range("chars") == "y from 0 to 5.25"


def test_value_axes() -> None:
    assert value_axis("rate", 0.0, 0.0) == (0.0, 1.0)
    assert value_axis("rate", 0.3, 0.4) == (0.0, 1.0)
    assert value_axis("count", 0.0, 0.0) == (0.0, 1.0)
    assert value_axis("length", 10.0, 200.0) == (0.0, 210.0)
    assert value_axis("component", 0.0, 0.0) == (0.0, 1.0)
    assert value_axis("reward", -0.5, 1.0) is None  # a penalty below 0: matplotlib's range
    assert value_axis("reward", 0.0, 2.0) is None


def test_without_a_schema_every_key_but_the_score_is_a_diagnostic() -> None:
    report = build([probe("Paris <call>")], schema_of=None)
    assert {item.key: item.kind for item in report.schema()} == {
        "score": "reward",
        **dict.fromkeys(["hit", "cited", "calls", "chars", "note", "extra"], "diagnostic"),
    }
    with pytest.raises(ReportError, match="unknown indicator 'calls'"):
        report.worst("calls")


def test_mixed_sources_read_each_schema_once() -> None:
    asked: list[str] = []

    def schema_of(source: str) -> tuple[ResultKey, ...]:
        asked.append(source)
        return (
            probe_schema_of(source)
            if source == PROBE_SOURCE
            else result_schema("compute_score", source, {})
        )

    rows = [probe("Paris", number=n) for n in range(3)] + [describe("<answer>Paris</answer>")]
    report = build(rows * 2, schema_of=schema_of)
    assert asked == [PROBE_SOURCE, SOURCE]
    kinds = {item.key: item.kind for item in report.schema()}
    assert kinds["calls"] == "count" and kinds["score"] == "reward"
    assert "em" in kinds  # Search-R1's keys, as its schema declares them


def test_a_schema_that_cannot_be_read_is_a_report_error() -> None:
    report = RunReport(
        title="t", schema_of=functools.partial(result_schema, PROBE, options={"nope": 1})
    )
    with pytest.raises(ReportError, match="no result schema for data source 'report_test/probe'"):
        report.add(probe("Paris"))


def test_chart_file_names_are_safe_and_unique(tmp_path: Path) -> None:
    schema = (
        ResultKey("score", "reward", "score"),
        ResultKey("a/b", "rate", "slash"),
        ResultKey("a_b", "rate", "underscore"),
        ResultKey("../up", "count", "up"),
    )
    rows = [
        describe("r", step=step, result={"score": 1.0, "a/b": 0.0, "a_b": 1.0, "../up": 2})
        for step in (1, 2)
    ]
    report = build(rows, schema_of=lambda source: schema)
    names = [path.name for path in report.write_pngs(tmp_path)]
    assert names == [
        "score.png",
        "a_b.png",
        "a_b_2.png",
        "_up.png",
        "_up_distribution.png",
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(names)


# -------------------------------------------------------------------------------- titles


@pytest.mark.parametrize(
    ("inputs", "name"),
    [
        (["checkpoints/search_r1/grpo_nq/rollouts"], "grpo_nq"),  # verl's layout
        (["checkpoints/search_r1/grpo_nq/rollouts/"], "grpo_nq"),
        (["runs/grpo_nq/val/120.jsonl"], "grpo_nq"),  # a step file
        (["runs/grpo_nq/rollout_data/7.jsonl.gz"], "grpo_nq"),
        (["ckpt/run_a/rollouts", "ckpt/run_b/val"], "run_a, run_b"),
        (["ckpt/run_a/rollouts", "ckpt/run_a/val/3.parquet"], "run_a"),
        (["dumps/eval_hotpot.jsonl"], "eval_hotpot"),
    ],
)
def test_the_run_name_skips_what_names_no_run(inputs: list[str], name: str) -> None:
    assert run_name(inputs) == name


def test_the_run_name_looks_up_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "my_experiment" / "rollouts"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert run_name(["."]) == "my_experiment"
    assert run_name(["1.jsonl"]) == "my_experiment"


def test_the_title_adds_the_experiment_name() -> None:
    rows = [
        describe("r", result={"score": 1.0}, record={"experiment_name": "grpo_qwen3"}),
        describe("r", result={"score": 1.0}, record={"experiment_name": "grpo_qwen3"}),
    ]
    report = build(rows, title="rollouts_a")
    assert report.full_title == "rollouts_a · experiment grpo_qwen3"
    page = page_of(report)
    assert "<title>rollouts_a · experiment grpo_qwen3</title>" in page
    assert "<h1>rollouts_a · experiment grpo_qwen3</h1>" in page
    assert build(rows, title="grpo_qwen3").full_title == "grpo_qwen3"  # not said twice
    assert build([describe("r", result={})], title="a").full_title == "a"
    many = [describe("r", result={}, record={"experiment_name": f"e{index}"}) for index in range(5)]
    assert build(many, title="t").full_title == "t · experiment e0, e1, e2, …"


# ------------------------------------------------------------------------ GRPO groups


def rewarded(score: float, prompt: str, **kwargs: Any) -> RowStats:
    return describe("r", result={"score": score}, prompt=prompt, **kwargs)


def test_groups_with_one_reward() -> None:
    rows = [
        # step 1: A all 1 (uniform); B differs; C one row (not counted); D no scores (not
        # uniform); E all 0 (uniform)
        *(rewarded(1.0, "A") for _ in range(3)),
        rewarded(1.0, "B"),
        rewarded(0.0, "B"),
        rewarded(1.0, "C"),
        describe("r", result={}, prompt="D"),
        describe("r", result={}, prompt="D"),
        rewarded(0.0, "E", number=9),
        rewarded(0.0, "E"),
        # step 2: the same prompts are new groups
        rewarded(0.5, "A", step=2),
        rewarded(0.5, "A", step=2),
        rewarded(0.5, "B", step=2),
        rewarded(0.25, "B", step=2),
    ]
    report = build(rows)
    bands = report.per_step(UNIFORM_REWARD)
    assert (bands[1].mean, bands[1].n) == (0.5, 4)
    assert (bands[2].mean, bands[2].n) == (0.5, 2)
    worst = report.worst(UNIFORM_REWARD)
    assert [(row.step, row.group, row.score) for row in worst] == [
        (1, group_key("A"), 1.0),  # the largest group first, then the earliest
        (1, group_key("E"), 0.0),
        (2, group_key("A"), 0.5),
    ]
    assert worst[1].number == 9  # a group's example is its first row
    page = page_of(report)
    section = page[page.index(f"<h3 id='indicator-{UNIFORM_REWARD}'>") :]
    assert "largest group first" in section
    assert "<td>run/1.jsonl:9</td><td>1</td><td>searchR1_nq</td><td>2</td><td>0</td>" in section


def test_a_step_that_comes_back_forms_new_groups_but_keeps_its_means() -> None:
    rows = [
        rewarded(1.0, "A", step=1),
        rewarded(1.0, "A", step=1),
        rewarded(1.0, "A", step=2),
        rewarded(0.0, "A", step=1),  # step 1 comes back
        rewarded(0.0, "A", step=1),
    ]
    report = build(rows)
    assert report.per_step("score")[1].mean == 0.5 and report.per_step("score")[1].n == 4
    # Two groups of two in step 1, each with one reward (a single group would be 0).
    assert report.per_step(UNIFORM_REWARD)[1].mean == 1.0
    assert report.per_step(UNIFORM_REWARD)[1].n == 2
    assert "Steps that came back after rows of other steps: 1;" in page_of(report)


def test_distinct_groups_per_step_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_module.series, "MAX_OPEN_GROUPS", 3)
    rows = [rewarded(1.0, f"p{n % 5}") for n in range(10)]
    report = build(rows)
    assert report.per_step(UNIFORM_REWARD)[1].n == 3
    assert "4 rows were left out of the GRPO groups" in page_of(report)


# ----------------------------------------------------------------------------- aggregation


def test_per_step_means_and_bands_equal_hand_computed_ones() -> None:
    rng = random.Random(7)
    answers = ["Paris", "It is Paris", "London", "I don't know", "<think>t</think>"]
    rows, by_step = [], {}
    for step in (3, 1, 2):  # files need not come in step order
        for number in range(1, 61):
            answer = rng.choice(answers)
            stats = describe(f"{'w ' * rng.randrange(9)}<answer>{answer}</answer>", step=step)
            rows.append(stats._replace(number=number))
            by_step.setdefault(step, []).append(stats)
    report = build(rows)
    for key in ("score", "f1", "em"):
        bands = report.per_step(key)
        assert sorted(bands) == [1, 2, 3]
        for step, stats in by_step.items():
            values = [row.value(key) for row in stats]
            mean = statistics.fmean(values)
            spread = 1.96 * statistics.stdev(values) / math.sqrt(len(values))
            band = bands[step]
            assert band.n == len(values)
            assert band.mean == pytest.approx(mean)
            assert band.low == pytest.approx(max(mean - spread, min(values)))
            assert band.high == pytest.approx(min(mean + spread, max(values)))


def test_a_band_never_leaves_the_range_of_the_values() -> None:
    report = build([describe("<answer>Paris</answer>", number=n) for n in range(50)])
    band = report.per_step("em")[1]
    assert (band.mean, band.low, band.high, band.n) == (1.0, 1.0, 1.0, 50)
    single = build([describe("<answer>London</answer>")]).per_step("f1")[1]
    assert (single.mean, single.low, single.high, single.n) == (0.0, 0.0, 0.0, 1)


def test_rows_without_a_step_form_one_pseudo_step(tmp_path: Path) -> None:
    report = build([probe("Paris <call>", step=None, number=n) for n in range(4)])
    assert report.per_step("hit") == {None: (1.0, 1.0, 1.0, 4)}
    page = page_of(report)
    assert "no step column" in page
    assert "Fewer than two steps" in page
    assert "<td>(none)</td><td>4</td>" in page
    # Only the distributions, which need no steps, are drawn.
    names = [path.name for path in report.write_pngs(tmp_path / "pngs")]
    assert names == ["calls_distribution.png", "chars_distribution.png"]


def test_memory_stays_bounded_for_many_rows() -> None:
    flagged = probe("Paris [1] <call>" * 3)
    report = RunReport(title="big", examples=4, schema_of=probe_schema_of)
    for step in range(100):
        for number in range(500):
            report.add(flagged._replace(step=step, number=number, group=str(number // 5)))
        assert len(report._groups) <= 100  # only the current step's groups are kept
        assert len(report._block) < 4096
    assert report.rows == 50_000
    for key in ("calls", "chars", UNIFORM_REWARD):
        assert len(report.worst(key)) == 4
    cited = report.rate_examples("cited")  # 1 on every row: no row has the rarer value
    assert (cited.value, cited.share, cited.rows) == (0.0, 0.0, [])
    assert [len(kept.best()) for kept in report._rates["cited"]] == [0, 4]
    assert len(report.steps) == 100
    assert all(len(values) <= 2 for values in report.sources[PROBE_SOURCE].values)


# ------------------------------------------------------------------------------ agreement


def agreement_rows() -> list[RowStats]:
    return [
        describe("<answer>Paris</answer>", logged=1.0, number=1),
        describe("<answer>Paris</answer>" * 11, logged=1.0, number=2),  # re-scored 0.25
        describe("<answer>London</answer>", logged=0, number=3),
        describe("<answer>London</answer>", logged=1, number=4),
        describe(
            "<answer>Paris</answer>",
            number=5,
            result={"score": 2 / 3},
            logged=0.6666666865348816,  # float32(2/3): equal within the tolerance
        ),
        describe("<answer>Paris</answer>", number=6),  # no logged score
        describe("<answer>Paris</answer>", number=7, logged="high"),  # not a number
    ]


def test_agreement_counts_table_and_disagreeing_rows() -> None:
    report = build(agreement_rows())
    page = page_of(report)
    assert "<strong>60.0%</strong> (3 of 5 rows" in page
    table = page[page.index("<table class='confusion'>") :]
    table = table[: table.index("</table>")]
    assert "exact values" in table
    cells = re.findall(r"<tr><th>([^<]*)</th>((?:<td>[^<]*</td>)*)</tr>", table)
    parsed = {row: re.findall(r"<td>([^<]*)</td>", tds) for row, tds in cells}
    # columns: re-scored 0, 0.25, 0.666667, 1
    assert parsed == {
        "0": ["1", "0", "0", "0"],
        "0.666667": ["0", "0", "1", "0"],
        "1": ["1", "1", "0", "1"],
    }
    disagreeing = report.worst("disagreement")
    assert [row.number for row in disagreeing] == [4, 2]  # |1 - 0| before |1 - 0.25|
    assert "run/1.jsonl:4" in page
    bands = report.per_step(AGREEMENT)
    assert (bands[1].mean, bands[1].n) == (0.6, 5)


def test_many_distinct_scores_are_bucketed_by_sign() -> None:
    rows = [
        describe("<answer>x</answer>", result={"score": value / 10}, logged=value / 10)
        for value in range(-5, 6)
    ]
    page = page_of(build(rows))
    assert "bucketed by sign" in page
    assert "<tr><th>negative</th><td>5</td><td>0</td><td>0</td></tr>" in page
    assert "<tr><th>zero</th><td>0</td><td>1</td><td>0</td></tr>" in page
    assert "<strong>100.0%</strong>" in page


def test_without_logged_scores_the_section_says_so() -> None:
    page = page_of(build([describe("<answer>Paris</answer>")]))
    assert "No row has both a numeric logged" in page


# ---------------------------------------------------------------------------------- page


def page_of(report: RunReport) -> str:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "report.html"
        report.write_html(path)
        return path.read_text(encoding="utf-8")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags_of(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


def mixed_run() -> list[RowStats]:
    rng = random.Random(1)
    answers = [
        "Paris",
        "It is Paris",
        "London",
        "I don't know",
        "Paris, London, Berlin",
        "<script>alert('x')</script> http://evil.example/x.png",
    ]
    rows = []
    for step in range(1, 5):
        for number in range(1, 41):
            answer = rng.choice(answers)
            source = rng.choice([PROBE_SOURCE, PROBE_SOURCE, SOURCE])
            response = f"<call>q</call><answer>{answer}</answer>"
            rows.append(
                describe(
                    response,
                    step=step,
                    number=number,
                    prompt=f"q{number // 4}",
                    logged=rng.choice([0.0, 1.0]),
                    source=source,
                    file=f'run/{step} "dump".jsonl',
                )
            )
    return rows


def test_page_escapes_user_text_and_fetches_nothing() -> None:
    report = build(mixed_run(), title="<b>run</b> & co", scorer="<i>compute_score</i>")
    page = page_of(report)
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "&lt;b&gt;run&lt;/b&gt; &amp; co" in page
    assert "&lt;i&gt;compute_score&lt;/i&gt;" in page
    assert "run/1 &quot;dump&quot;.jsonl:" in page
    tags = tags_of(page)
    assert {tag for tag, _ in tags} <= {
        "html", "head", "meta", "link", "title", "style", "body", "header", "h1", "h2", "h3",
        "p", "section", "div", "figure", "img", "details", "summary", "table", "caption", "tr",
        "th", "td", "span", "code", "strong", "a",
    }  # fmt: skip
    for _, attrs in tags:
        for name in ("src", "href"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith(("data:", "#")), (name, value[:80])
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page)
    assert "url(" not in page and "@import" not in page


def test_the_page_states_its_run_and_intervals() -> None:
    page = page_of(build(mixed_run(), scorer="report_probe"))
    assert "95% normal approximation" in page and "95% percentile bootstrap" in page
    assert "scorer <code>report_probe</code>" in page
    assert "160 rows · 4 steps · 2 data sources · 4 files" in page
    for source in (PROBE_SOURCE, SOURCE, "all data sources"):
        assert f"<h3>{source}</h3>" in page
    one = page_of(build([probe("Paris")]))
    assert "1 row · 1 step · 1 data source · 1 file" in one


def test_source_tables_hold_bootstrap_means() -> None:
    rows = [probe("Paris") for _ in range(3)]
    rows.append(probe("London"))
    rows.append(describe("<answer>Paris</answer>", source=SOURCE))
    page = page_of(build(rows))
    section = page[page.index(f"<h3>{PROBE_SOURCE}</h3>") :]
    assert section.startswith(f"<h3>{PROBE_SOURCE}</h3>\n<p>4 rows</p>")
    assert "<tr><td>hit</td><td>component</td><td>4</td><td>0.750</td>" in section
    overall = page[page.index("<h3>all data sources</h3>") :]
    assert "<tr><td>reward</td><td>reward</td><td>5</td><td>0.800</td>" in overall


def test_write_pngs_writes_one_valid_png_per_chart(tmp_path: Path) -> None:
    report = build(mixed_run())
    paths = report.write_pngs(tmp_path / "charts")
    assert [path.stem for path in paths] == [  # the union of both sources' schemas
        "score",
        "acc",
        "em",
        "subem",
        "f1",
        "hit",
        "answer_found",
        "answer_tags",
        "answer_tags_distribution",
        "spam_penalized",
        "cited",
        "calls",
        "calls_distribution",
        "chars",
        "chars_distribution",
        *ENGINE_SERIES,
    ]
    for path in paths:
        assert path.read_bytes().startswith(PNG_MAGIC)
        assert path.stat().st_size > 5_000
    assert sorted(p.name for p in (tmp_path / "charts").iterdir()) == sorted(p.name for p in paths)


def test_writes_are_atomic_and_leave_no_temporary_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = build(mixed_run())
    target = tmp_path / "report.html"
    report.write_html(target)
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]

    def fail(*args: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    before = target.read_bytes()
    with pytest.raises(PathError, match="disk full"):
        report.write_html(target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_a_killed_writes_temporary_is_one_the_cleaner_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report writes through the package's one atomic writer: a temporary that a killed
    run (SIGKILL: no cleanup) leaves is found by ``remove_stale_temporaries``."""
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    report = build([probe("Paris")])
    target = tmp_path / "report.html"
    written: list[Path] = []

    def killed(source: str, destination: str) -> None:
        written.append(Path(source))
        raise OSError("killed")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(PathError):
        report.write_html(target)
    monkeypatch.undo()
    (temporary,) = written
    assert temporary.parent == tmp_path
    leftover = temporary.with_name(temporary.name.replace(f".{os.getpid()}.", f".{dead}.", 1))
    assert leftover != temporary
    leftover.write_text("<!DOCTYPE html> half a page", encoding="utf-8")
    files.remove_stale_temporaries(target)
    assert list(tmp_path.iterdir()) == []


def test_missing_matplotlib_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, module, None)
    report = build([describe("<answer>Paris</answer>")])
    with pytest.raises(ReportError, match=re.escape('pip install "reward-plugins[report]"')):
        report.write_html(tmp_path / "report.html")
    with pytest.raises(ReportError, match="matplotlib"):
        report.write_pngs(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_describing_rows_does_not_import_matplotlib(subprocess_env: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "from reward_plugins.rescore.records import ScoredRow\n"
        "from reward_plugins.rescore.report import describe_row, RunReport\n"
        "r = RunReport(title='t')\n"
        "r.add(describe_row(ScoredRow('f', 1, {}, 1, 's', '<answer>a</answer>', {})))\n"
        "print('matplotlib' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=subprocess_env, capture_output=True, text=True
    )
    assert out.stdout.strip() == "False", out.stderr


def test_bad_options_are_report_errors() -> None:
    for bad in (-1, 1.5, True):
        with pytest.raises(ReportError, match="examples must be an int, 0 or more"):
            RunReport(title="t", examples=bad)
    assert issubclass(ReportError, RewardPluginsError)
    report = build([probe("Paris <call>")], examples=0)
    assert report.worst("calls") == []


# ----------------------------------------------------------------------- costs and contracts


@settings(max_examples=200, deadline=None)
@given(
    response=st.text(),
    result=st.dictionaries(
        st.text(max_size=5),
        st.one_of(st.floats(), st.integers(), st.booleans(), st.none(), st.text(max_size=3)),
        max_size=5,
    ),
    prompt=st.none() | st.text() | st.lists(st.dictionaries(st.text(), st.integers())),
    step=st.none() | st.integers(),
)
def test_describe_row_never_raises_and_keeps_its_bounds(
    response: str, result: dict[str, Any], prompt: Any, step: int | None
) -> None:
    stats = describe_row(scored(response, prompt=prompt, step=step, result=result))
    assert len(stats.excerpt) <= EXCERPT_CHARS
    assert all(math.isfinite(value) for _, value in stats.values)
    assert pickle.loads(pickle.dumps(stats)) == stats
    report = RunReport(title="t")
    report.add(stats)
    assert report.rows == 1
    for key, value in stats.values:
        assert report.per_step(key)[step].mean == value or key in ENGINE_SERIES


def test_group_keys_are_stable_across_processes(subprocess_env: dict[str, str]) -> None:
    values: list[Any] = ["question?", {"b": [1, 2], "a": "x"}, ["chat", {"role": "user"}], 3]
    code = (
        "import json, sys\n"
        "from reward_plugins.rescore.report import group_key\n"
        "print(json.dumps([group_key(v) for v in json.loads(sys.argv[1])]))\n"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code, json.dumps(values)],
            env={**subprocess_env, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(out.stdout) == [group_key(value) for value in values]
    assert group_key({"a": "x", "b": [1, 2]}) == group_key({"b": [1, 2], "a": "x"})
    assert group_key("q") != group_key("q ") and len(group_key("q") or "") == 16
    assert group_key(None) is None


def test_docstring_examples() -> None:
    path = [str(Path(report_module.__file__).parent)]
    names = [f"{report_module.__name__}.{info.name}" for info in pkgutil.iter_modules(path)]
    attempted_in = {}
    for name in names:
        failed, attempted = doctest.testmod(importlib.import_module(name))
        assert failed == 0, name
        attempted_in[name.rsplit(".", 1)[1]] = attempted
    assert attempted_in["rows"] > 0 and attempted_in["charts"] > 0


def test_the_docs_page_states_the_kinds_and_the_engine_series() -> None:
    docs = (REPO_ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    flat = " ".join(docs.split())
    for kind in ("`reward`", "`component`", "`rate`", "`count`", "`length`", "`diagnostic`"):
        assert kind in flat, kind
    for series, label in report_module.ENGINE_LABELS.items():
        assert f"`{series}`" in flat and label in flat, series
    assert 'pip install "reward-plugins[report]"' in docs


# ------------------------------------------------------------------------------------ CLI


def test_the_cli_reports_a_third_party_plugins_keys(tmp_path: Path) -> None:
    """``reward-plugins report`` with a plugin the engine has never seen: its rate, count,
    length and diagnostic reach the page and the PNGs through its schema alone."""
    run = tmp_path / "checkpoints" / "probe_project" / "probe_exp" / "rollouts"
    run.mkdir(parents=True)
    for step in (1, 2, 3):
        lines = [
            {
                "input": f"question {number // 2}",
                "output": "<call>x</call>" * (number % 3) + ("Paris [1]" if number < step else "?"),
                "gts": ["Paris"],
                "score": 0.0,
                "step": step,
                "experiment_name": "probe_exp_seed1",
            }
            for number in range(6)
        ]
        (run / f"{step}.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8"
        )
    page = tmp_path / "report.html"
    script = PROBE_PLUGIN + "\nimport sys\nfrom reward_plugins.cli import main\n"
    script += "sys.exit(main(sys.argv[1:]))\n"
    result = run_cli_with_script(
        script, "report", run, "-o", page, "--scorer", PROBE, "--data-source", PROBE_SOURCE,
        "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    html = page.read_text(encoding="utf-8")
    assert "<h1>probe_exp · experiment probe_exp_seed1</h1>" in html
    for label in ("cited rate", "tool calls", "response characters"):
        assert f">{label}</a></td>" in html
    assert "Diagnostics (tabulated, not charted): <code>note</code>, <code>extra</code>." in html
    pngs = sorted(path.name for path in (tmp_path / "report_pngs").iterdir())
    assert pngs == sorted(
        f"{name}.png"
        for name in (
            "score", "hit", "cited", "calls", "calls_distribution", "chars",
            "chars_distribution", "agreement", "uniform_reward",
        )
    )  # fmt: skip
    assert f"wrote {page} and 9 PNGs" in result.stdout
    assert result.stderr == ""
