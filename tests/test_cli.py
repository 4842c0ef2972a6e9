"""``reward-plugins`` end to end, in subprocesses, on generated verl-format files."""

from __future__ import annotations

import argparse
import json
import os
import pty
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from test_cli_helpers import (
    REPO,
    dump_rows,
    read_jsonl,
    router_result,
    run_cli,
    run_cli_here,
    training_rows,
    verl_score,
    write_jsonl,
    write_parquet,
)

import reward_plugins
from reward_plugins.cli import parse_option
from reward_plugins.metrics.aggregate import bootstrap_mean
from reward_plugins.plugins.search_r1 import QA_RESULT_KEYS, SEARCH_R1_DATA_SOURCES

REWARD_COLUMNS = [f"reward_{key}" for key in QA_RESULT_KEYS]


def rewards_of(record: dict[str, Any]) -> dict[str, Any]:
    return {
        key.removeprefix("reward_"): value for key, value in record.items() if key in REWARD_COLUMNS
    }


def leftover_files(directory: Path, expected: set[str]) -> set[str]:
    return {path.name for path in directory.iterdir()} - expected


# ------------------------------------------------------------------------ formats and columns


def test_jsonl_training_rows(tmp_path: Path) -> None:
    rows = training_rows(60)
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    result = run_cli_here(
        "score", source, "-o", tmp_path / "out.jsonl", "--summary-json", tmp_path / "s.json"
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no progress bar when stderr is not a terminal

    out = read_jsonl(tmp_path / "out.jsonl")
    assert len(out) == len(rows)
    for row, record in zip(rows, out, strict=True):
        assert list(record) == [*row, *REWARD_COLUMNS]
        assert {k: record[k] for k in row} == row
        assert rewards_of(record) == router_result(row)
        assert record["reward_score"] == verl_score(
            row["response"], row["reward_model"]["ground_truth"]
        )

    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["rows"] == summary["scored"] == 60
    assert summary["skipped"] == {"rows": 0, "reasons": {}, "examples": []}
    assert summary["columns"] == {
        "response": "response",
        "ground_truth": "reward_model.ground_truth",
        "data_source": "data_source",
    }
    assert sum(group["rows"] for group in summary["sources"].values()) == 60
    for name, group in [*summary["sources"].items(), ("overall", summary["overall"])]:
        selected = [r for r in out if name in ("overall", r["data_source"])]
        assert group["rows"] == len(selected)
        assert list(group["metrics"]) == list(QA_RESULT_KEYS)  # every key, the schema's order
        for key, metric in group["metrics"].items():
            expected = bootstrap_mean(sorted(r[f"reward_{key}"] for r in selected))
            assert metric == {"mean": expected.mean, "low": expected.low, "high": expected.high}
    # The printed summary carries the same numbers.
    overall = summary["overall"]["metrics"]["score"]
    assert f"{overall['mean']:7.3f}  [{overall['low']:.3f}, {overall['high']:.3f}]" in result.stdout
    for name in summary["sources"]:
        assert name in result.stdout


def test_parquet_with_numpy_ground_truths(tmp_path: Path) -> None:
    import numpy as np
    import pandas as pd

    rows = training_rows(50, seed=1)
    source = write_parquet(tmp_path / "rows.parquet", rows)
    read_back = pd.read_parquet(source)["reward_model"][0]["ground_truth"]["target"]
    assert isinstance(read_back, np.ndarray)  # the shape verl's pandas readers produce

    result = run_cli_here("score", source, "-o", tmp_path / "out.parquet")
    assert result.returncode == 0, result.stderr
    before, after = pq.read_table(source), pq.read_table(tmp_path / "out.parquet")
    assert after.column_names == [*before.column_names, *REWARD_COLUMNS]
    assert after.select(before.column_names).equals(before)
    for row, record in zip(rows, after.to_pylist(), strict=True):
        assert rewards_of(record) == router_result(row)


def test_verl_dump_needs_a_data_source_and_keeps_its_score(tmp_path: Path) -> None:
    rows = dump_rows(30, seed=2)
    source = write_jsonl(tmp_path / "3.jsonl", rows)
    missing = run_cli_here("score", source, "-o", tmp_path / "out.jsonl")
    assert missing.returncode == 2
    assert "no data source column 'data_source'" in missing.stderr
    assert "--data-source" in missing.stderr
    assert not (tmp_path / "out.jsonl").exists()

    result = run_cli_here(
        "score", source, "-o", tmp_path / "out.jsonl", "--data-source", "searchR1_nq"
    )
    assert result.returncode == 0, result.stderr
    assert (
        "response: output, ground truth: gts, data source: --data-source searchR1_nq"
        in result.stdout
    )
    for row, record in zip(rows, read_jsonl(tmp_path / "out.jsonl"), strict=True):
        assert record["score"] == 0.5 and record["acc"] == 0.0  # the dump's own columns stay
        assert record["reward_score"] == verl_score(row["output"], row["gts"])
        assert rewards_of(record) == dict(
            reward_plugins.compute_score("searchR1_nq", row["output"], row["gts"])
        )


def test_named_columns(tmp_path: Path) -> None:
    rows = [
        {"completion": row["response"], "answers": row["reward_model"]["ground_truth"]["target"]}
        for row in training_rows(12, seed=3)
    ]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    common = ("score", source, "-o", tmp_path / "out.jsonl", "--data-source", "searchR1_popqa")
    unnamed = run_cli_here(*common)
    assert unnamed.returncode == 2
    assert "'output' / 'response' / 'responses' / 'solution_str'" in unnamed.stderr
    assert "columns: completion, answers" in unnamed.stderr
    result = run_cli_here(
        *common, "--response-column", "completion", "--ground-truth-column", "answers"
    )
    assert result.returncode == 0, result.stderr
    for row, record in zip(rows, read_jsonl(tmp_path / "out.jsonl"), strict=True):
        expected = reward_plugins.compute_score("searchR1_popqa", row["completion"], row["answers"])
        assert rewards_of(record) == expected


@pytest.mark.parametrize(("first", "second"), [(".jsonl", ".parquet"), (".parquet", ".jsonl")])
def test_cross_format(tmp_path: Path, first: str, second: str) -> None:
    rows = training_rows(20, seed=4)
    writer = write_jsonl if first == ".jsonl" else write_parquet
    source = writer(tmp_path / f"rows{first}", rows)
    result = run_cli_here("score", source, "-o", tmp_path / f"out{second}")
    assert result.returncode == 0, result.stderr
    if second == ".jsonl":
        out = read_jsonl(tmp_path / "out.jsonl")
    else:
        out = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert [r["response"] for r in out] == [r["response"] for r in rows]
    assert [rewards_of(r) for r in out] == [router_result(r) for r in rows]


def test_rescoring_an_output_replaces_its_reward_columns(tmp_path: Path) -> None:
    rows = training_rows(18, seed=5)
    first = run_cli_here(
        "score", write_jsonl(tmp_path / "rows.jsonl", rows), "-o", tmp_path / "em.jsonl"
    )
    assert first.returncode == 0, first.stderr
    result = run_cli_here(
        "score", tmp_path / "em.jsonl", "-o", tmp_path / "f1.jsonl", "--scorer", "compute_score_f1"
    )
    assert result.returncode == 0, result.stderr
    assert "replaced input columns: " + ", ".join(sorted(REWARD_COLUMNS)) in result.stdout
    for row, record in zip(rows, read_jsonl(tmp_path / "f1.jsonl"), strict=True):
        assert list(record) == [*row, *REWARD_COLUMNS]
        assert rewards_of(record) == router_result(row, "compute_score_f1")


# ------------------------------------------------------------------------ scorers and options


def test_parse_option() -> None:
    assert parse_option("format_score=0.1") == ("format_score", 0.1)
    assert parse_option("max_answer_tags=3") == ("max_answer_tags", 3)
    assert parse_option("penalize_subem=true") == ("penalize_subem", True)
    assert parse_option("extract=first") == ("extract", "first")
    assert parse_option('extract="last"') == ("extract", "last")
    assert parse_option("note=a=b") == ("note", "a=b")
    for bad in ("format_score", "=1"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected key=value"):
            parse_option(bad)


@pytest.mark.parametrize(
    ("scorer", "options"),
    [
        ("compute_score_f1", {"format_score": 0.1, "max_answer_tags": 2}),
        ("compute_score_subem", {"penalize_subem": True, "spam_factor": 0.5}),
        ("compute_score", {"score": 2.0, "extract": "first"}),
    ],
)
def test_scorer_and_options(tmp_path: Path, scorer: str, options: dict[str, Any]) -> None:
    rows = training_rows(24, seed=6)
    settings = [
        arg for key, value in options.items() for arg in ("--set", f"{key}={json.dumps(value)}")
    ]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    result = run_cli_here(
        "score", source, "-o", tmp_path / "out.jsonl", "--scorer", scorer, *settings
    )
    assert result.returncode == 0, result.stderr
    for row, record in zip(rows, read_jsonl(tmp_path / "out.jsonl"), strict=True):
        assert rewards_of(record) == router_result(row, scorer, **options)


def test_unknown_option_fails_before_reading(tmp_path: Path) -> None:
    # The first line does not even parse: an error about it would mean the file was read.
    source = write_jsonl(tmp_path / "rows.jsonl", ["{broken", *training_rows(3)])
    result = run_cli_here("score", source, "-o", tmp_path / "out.jsonl", "--set", "formatscore=0.1")
    assert result.returncode == 2
    assert "--set: compute_score: unknown option(s) 'formatscore'" in result.stderr
    assert "format_score" in result.stderr
    assert "line 1" not in result.stderr
    assert leftover_files(tmp_path, {"rows.jsonl"}) == set()


def test_bad_option_value_fails_before_scoring(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", training_rows(3))
    result = run_cli_here("score", source, "-o", tmp_path / "out.jsonl", "--set", "extract=middle")
    assert result.returncode == 2
    assert "--set:" in result.stderr and "extract" in result.stderr and "middle" in result.stderr
    assert leftover_files(tmp_path, {"rows.jsonl"}) == set()


def test_unknown_scorer(tmp_path: Path) -> None:
    """``--scorer`` is checked after parsing, against the registry: a one-line usage error that
    lists the registered scorers and the closest name."""
    registered = subprocess.run(  # a fresh process: this one also holds the tests' scorers
        [sys.executable, "-c", "import reward_plugins.registry as r; print(*r.scorer_names())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert {"compute_score", "compute_score_format", "compute_score_metric"} <= set(registered)
    source = write_jsonl(tmp_path / "rows.jsonl", training_rows(3))
    result = run_cli("score", source, "-o", tmp_path / "out.jsonl", "--scorer", "compute_scor")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "reward-plugins: error: score: argument --scorer: no scorer is registered as "
        "'compute_scor'; did you mean 'compute_score'? Registered scorers: "
        f"{', '.join(registered)} (see reward-plugins score --help)\n"
    )
    assert leftover_files(tmp_path, {"rows.jsonl"}) == set()


def test_usage_errors(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", training_rows(3))
    cases = [
        (
            ("score", tmp_path / "nope.jsonl", "-o", tmp_path / "o.jsonl"),
            "nope.jsonl: no such file",
        ),
        (("score", source, "-o", tmp_path / "o.csv"), "unsupported format '.csv'"),
        (("score", source), "-o/--output is required"),
        (("score", source, "--demo"), "give INPUT, or --demo"),
        (("score", source, "-o", tmp_path / "o.jsonl", "--set", "x"), "expected key=value"),
        (
            ("score", source, "-o", tmp_path / "o.jsonl", "--ray-address", "h:1"),
            "needs --backend ray",
        ),
        (
            ("score", source, "-o", tmp_path / "o.jsonl", "--workers", "0"),
            "--workers must be at least 1",
        ),
    ]
    for args, message in cases:
        result = run_cli_here(*args)
        assert result.returncode == 2, args
        assert message in result.stderr, (args, result.stderr)
    assert leftover_files(tmp_path, {"rows.jsonl"}) == set()


# -------------------------------------------------------------------------------- bad rows

GOOD = training_rows(6, seed=7)


def _invalid_truth(row: dict[str, Any]) -> dict[str, Any]:
    # A bool is no gold (numbers are: {"target": 5} reads as the gold "5").
    return {**row, "reward_model": {"style": "rule", "ground_truth": {"target": True}}}


def _null_target(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "reward_model": {"style": "rule", "ground_truth": {"target": None}}}


def _no_response(row: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in row.items() if key != "response"}


JSONL_BAD_ROWS = [
    # (lines written, 1-based line of the bad row, reason in the message)
    ([GOOD[0], GOOD[1], _invalid_truth(GOOD[2]), GOOD[3]], 3, "invalid ground truth: "),
    ([GOOD[0], "", GOOD[1], '{"data_source": "searchR1_nq", ', GOOD[2]], 4, "unparsable JSON: "),
    ([GOOD[0], "[1, 2]", GOOD[1]], 2, "a row must be a JSON object, got list"),
    ([GOOD[0], _no_response(GOOD[1])], 2, "missing response (column 'response')"),
    (
        [GOOD[0], {**GOOD[1], "response": 7}],
        2,
        "response (column 'response') must be a string, got int",
    ),
    ([{**GOOD[0], "data_source": "searchR1_nqq"}], 1, "did you mean 'searchR1_nq'?"),
    ([GOOD[0], {**GOOD[1], "data_source": None}], 2, "data_source must be a non-empty string"),
]


@pytest.mark.parametrize(("lines", "number", "reason"), JSONL_BAD_ROWS)
def test_jsonl_bad_row_stops_the_run(
    tmp_path: Path, lines: list[Any], number: int, reason: str
) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", lines)
    result = run_cli_here("score", source, "-o", tmp_path / "out.jsonl")
    assert result.returncode == 1
    assert result.stderr.startswith(f"reward-plugins: error: {source}: line {number}: ")
    assert reason in result.stderr
    assert result.stdout == ""
    assert leftover_files(tmp_path, {"rows.jsonl"}) == set()  # no output, no temporary file


@pytest.mark.parametrize(
    ("bad_row", "reason"),
    [
        (_null_target(GOOD[3]), "invalid ground truth: data_source="),
        ({**GOOD[3], "response": None}, "missing response (column 'response')"),
        (
            {**GOOD[3], "reward_model": {"style": "rule", "ground_truth": None}},
            "column 'reward_model.ground_truth' is missing",
        ),
    ],
)
def test_parquet_bad_row_stops_the_run(
    tmp_path: Path, bad_row: dict[str, Any], reason: str
) -> None:
    source = write_parquet(tmp_path / "rows.parquet", [*GOOD[:3], bad_row, GOOD[4]])
    result = run_cli_here("score", source, "-o", tmp_path / "out.parquet")
    assert result.returncode == 1
    assert result.stderr.startswith(f"reward-plugins: error: {source}: row 4: ")
    assert reason in result.stderr
    assert leftover_files(tmp_path, {"rows.parquet"}) == set()


def test_a_line_that_is_not_utf8(tmp_path: Path) -> None:
    source = tmp_path / "rows.jsonl"
    good = json.dumps(GOOD[0]).encode()
    source.write_bytes(good + b"\n" + b'{"response": "\xff\xfe"}\n' + good + b"\n")
    result = run_cli_here("score", source, "-o", tmp_path / "out.jsonl")
    assert result.returncode == 1
    assert f"{source}: line 2: unparsable JSON: " in result.stderr
    assert "utf-8" in result.stderr


def test_the_first_bad_row_stops_the_run_and_points_to_skip(tmp_path: Path) -> None:
    lines = [GOOD[0], _no_response(GOOD[1]), "{", _invalid_truth(GOOD[2])]
    result = run_cli_here(
        "score", write_jsonl(tmp_path / "rows.jsonl", lines), "-o", tmp_path / "o.jsonl"
    )
    assert result.returncode == 1
    assert ": line 2: missing response" in result.stderr
    assert "(--on-error skip goes on, listing bad rows in OUTPUT.failures.jsonl)" in result.stderr
    assert leftover_files(tmp_path, {"rows.jsonl"}) == set()


def test_on_error_skip(tmp_path: Path) -> None:
    lines = [
        GOOD[0],
        _invalid_truth(GOOD[1]),
        GOOD[2],
        "not json",
        _no_response(GOOD[3]),
        GOOD[4],
        _invalid_truth(GOOD[5]),
    ]
    source = write_jsonl(tmp_path / "rows.jsonl", lines)
    result = run_cli_here(
        "score",
        source,
        "-o",
        tmp_path / "out.jsonl",
        "--on-error",
        "skip",
        "--summary-json",
        tmp_path / "s.json",
    )
    assert result.returncode == 0, result.stderr
    out = read_jsonl(tmp_path / "out.jsonl")
    assert [r["response"] for r in out] == [GOOD[i]["response"] for i in (0, 2, 4)]
    assert [rewards_of(r) for r in out] == [router_result(GOOD[i]) for i in (0, 2, 4)]

    skipped = json.loads((tmp_path / "s.json").read_text())["skipped"]
    assert skipped["rows"] == 4
    assert skipped["reasons"] == {
        "invalid ground truth": 2,
        "unparsable JSON": 1,
        "missing response": 1,
    }
    assert [example["line"] for example in skipped["examples"]] == [2, 4, 5, 7]
    assert (
        "skipped 4 rows: 2 invalid ground truth, 1 unparsable JSON, 1 missing response"
        in result.stdout
    )
    assert f"  {source}: line 5: missing response (column 'response')" in result.stdout


# --------------------------------------------------------------------------------- workers


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_two_workers_equal_one(tmp_path: Path, suffix: str) -> None:
    rows: list[Any] = training_rows(3000, seed=8)
    rows[17] = _null_target(rows[17])
    rows[2500] = {**rows[2500], "response": None}
    source = (write_jsonl if suffix == ".jsonl" else write_parquet)(
        tmp_path / f"rows{suffix}", rows
    )
    outputs = []
    for workers in ("1", "2"):
        output = tmp_path / f"out{workers}{suffix}"
        result = run_cli_here(
            "score", source, "-o", output, "--workers", workers, "--on-error", "skip"
        )
        assert result.returncode == 0, result.stderr
        assert "skipped 2 rows" in result.stdout
        outputs.append(output.read_bytes())
    assert outputs[0] == outputs[1]
    out = (
        read_jsonl(tmp_path / "out1.jsonl")
        if suffix == ".jsonl"
        else pq.read_table(tmp_path / "out1.parquet").to_pylist()
    )
    kept = [row for index, row in enumerate(rows) if index not in (17, 2500)]
    assert [rewards_of(r) for r in out] == [router_result(row) for row in kept]


# ----------------------------------------------------------------------------- progress bar


def _stderr_on_a_terminal(*args: str | Path) -> str:
    controller, terminal = pty.openpty()
    termios.tcsetwinsize(terminal, (24, 100))  # a fresh pty is 0 columns wide
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "reward_plugins", *map(str, args)]
    process = subprocess.run(command, stdout=subprocess.PIPE, stderr=terminal, env=env, timeout=120)
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO once the terminal side is closed and drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    assert process.returncode == 0
    return b"".join(chunks).decode()


def test_progress_bar_only_on_a_terminal_and_not_with_quiet(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", training_rows(30, seed=9))
    shown = _stderr_on_a_terminal("score", source, "-o", tmp_path / "a.jsonl")
    assert "scoring" in shown and "rows" in shown
    assert _stderr_on_a_terminal("score", source, "-o", tmp_path / "b.jsonl", "--quiet") == ""


# ------------------------------------------------------------------------- demo, list, path


def test_demo() -> None:
    result = run_cli_here("score", "--demo")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "scored 120 of 120 rows of sample_rollouts.jsonl (shipped sample)"
    )
    for source in (
        "searchR1_nq",
        "searchR1_triviaqa",
        "searchR1_popqa",
        "searchR1_hotpotqa",
        "searchR1_bamboogle",
    ):
        assert f"\n{source} " in result.stdout
    assert "\noverall " in result.stdout


def test_demo_writes_the_sample_scored(tmp_path: Path) -> None:
    result = run_cli_here("score", "--demo", "-o", tmp_path / "demo.jsonl")
    assert result.returncode == 0, result.stderr
    sample = read_jsonl(REPO / "reward_plugins" / "data" / "sample_rollouts.jsonl")
    out = read_jsonl(tmp_path / "demo.jsonl")
    assert [{k: r[k] for k in row} for row, r in zip(sample, out, strict=True)] == sample
    assert [rewards_of(r) for r in out] == [router_result(row) for row in sample]
    # The sample mixes every outcome the summary reports on.
    assert {r["reward_em"] for r in out} == {0.0, 1.0}
    assert {r["reward_answer_found"] for r in out} == {0.0, 1.0}
    assert {r["reward_spam_penalized"] for r in out} == {0.0, 1.0}
    assert any(r["reward_subem"] > r["reward_em"] for r in out)


# ``reward-plugins list`` as the registry of a fresh process describes it, written out here
# independently of the CLI: each scorer, then its indented facts, then any broken plugin.
EXPECTED_LISTING = """
import reward_plugins
from reward_plugins.registry import registrations
for reg in registrations():
    print(reg.name)
    print("  data sources: " + ", ".join(reg.data_sources))
    options = [
        f"{name} (required, {spec.expected})" if spec.required else f"{name}={spec.default!r}"
        for name, spec in reg.options.items()
    ]
    print("  options: " + (", ".join(options) or "(none)"))
    truth = {"golds": "tuple of gold strings", "raw": "raw"}[reg.ground_truth]
    print("  ground truth: " + truth + (" (async)" if reg.is_async else ""))
    print(f"  from: {reg.origin} ({reg.function.__module__}.{reg.function.__qualname__})")
from reward_plugins.metrics import METRICS, metric_options
print("metrics:")
for name in sorted(METRICS):
    options = ", ".join(metric_options(name)) or "none"
    print(f"  {name:{max(map(len, METRICS))}}  (options: {options})")
for broken in reward_plugins.broken_plugins():
    print("broken plugin: " + broken.describe())
"""

BUILTIN_LISTING = {
    "compute_score": (
        "options: format_score=0.0, score=1.0, max_answer_tags=10, spam_factor=0.25, "
        "extract='last', ",
        "reward_plugins.plugins.search_r1.score_em",
    ),
    "compute_score_subem": (
        "options: format_score=0.0, score=1.0, max_answer_tags=10, spam_factor=0.25, "
        "extract='last', ",
        "reward_plugins.plugins.search_r1.score_subem",
    ),
    "compute_score_f1": (
        "options: format_score=0.0, score=1.0, max_answer_tags=10, spam_factor=0.25, "
        "extract='last', ",
        "reward_plugins.plugins.search_r1.score_f1",
    ),
    "compute_score_format": (
        "options: structure_format_score=0, final_format_score=0, retrieval_score=0, score=1.0, ",
        "reward_plugins.plugins.search_r1.score_format",
    ),
    "compute_score_metric": ("options: ", "reward_plugins.plugins.search_r1.score_metric"),
}


def _listing_blocks(stdout: str) -> dict[str, list[str]]:
    """Each scorer's indented lines, by scorer name (``broken plugin:`` lines excluded)."""
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in stdout.splitlines():
        if line == "metrics:":  # the metrics block follows the scorers
            current = []
        elif line.startswith("  "):
            current.append(line.strip())
        elif not line.startswith("broken plugin: "):
            assert line not in blocks, line
            current = blocks[line] = []
    return blocks


def test_list() -> None:
    result = run_cli("list")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    fresh = subprocess.run(
        [sys.executable, "-c", EXPECTED_LISTING], capture_output=True, text=True, env=env
    )
    assert fresh.returncode == 0, fresh.stderr
    assert result.stdout == fresh.stdout

    blocks = _listing_blocks(result.stdout)
    assert set(BUILTIN_LISTING) <= set(blocks)
    assert list(blocks) == sorted(blocks)
    sources = ", ".join(SEARCH_R1_DATA_SOURCES)
    for name, (options, function) in BUILTIN_LISTING.items():
        data_sources, listed_options, truth, origin = blocks[name]
        assert data_sources == f"data sources: {sources}"
        assert listed_options.startswith(options), listed_options
        assert truth == "ground truth: tuple of gold strings"
        assert origin == f"from: reward_plugins.plugins.search_r1 ({function})"
    assert ", metric (required, a str), " in blocks["compute_score_metric"][1]
    assert "penalize_subem=False" in blocks["compute_score_subem"][1].split(", ")
    assert "penalize_subem=False" not in blocks["compute_score"][1]


def test_list_names_a_broken_plugin_and_still_lists_the_rest(tmp_path: Path) -> None:
    """An entry point that fails to import is listed as broken; the listing still succeeds."""
    module = "rp_cli_broken_plugin"
    info = tmp_path / "rp_cli_broken-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rp-cli-broken\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text(f"[reward_plugins]\nexploding = {module}\n")
    (tmp_path / f"{module}.py").write_text("raise RuntimeError('plugin exploded')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    command = [sys.executable, "-m", "reward_plugins", "list"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    described = (
        f"entry point 'exploding' ({module}) of distribution 'rp-cli-broken' failed to load: "
        "plugin exploded"
    )
    assert result.stdout.splitlines()[-1] == f"broken plugin: {described}"
    assert result.stdout.count("broken plugin: ") == 1
    assert result.stderr.count(described) == 1  # the WARNING, logged once
    assert set(BUILTIN_LISTING) <= set(_listing_blocks(result.stdout))


@pytest.mark.parametrize(
    ("target", "relative"),
    [("verl", "adapters/verl_legacy_reward.py"), ("openrlhf", "adapters/openrlhf_reward.py")],
)
def test_path(target: str, relative: str) -> None:
    expected = REPO / "reward_plugins" / relative
    result = run_cli_here("path", target)
    if expected.is_file():
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"{expected}\n"
    else:
        assert result.returncode == 1
        assert result.stdout == ""
        assert f"{expected} does not exist" in result.stderr


def test_path_rejects_other_targets() -> None:
    result = run_cli_here("path", "trl")
    assert result.returncode == 2
    assert "invalid choice: 'trl'" in result.stderr


# ------------------------------------------------------------------------ optional packages


def _run_without(module: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    code = (
        f"import sys; sys.modules[{module!r}] = None; "
        f"from reward_plugins.cli import main; sys.exit(main({[str(a) for a in args]!r}))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def test_ray_backend_without_ray_says_how_to_install(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", training_rows(3))
    result = _run_without("ray", "score", source, "-o", tmp_path / "o.jsonl", "--backend", "ray")
    assert result.returncode == 2
    assert 'needs Ray: pip install "reward-plugins[ray]"' in result.stderr
    assert leftover_files(tmp_path, {"rows.jsonl"}) == set()


def test_parquet_without_pyarrow_says_how_to_install(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", training_rows(3))
    result = _run_without("pyarrow", "score", source, "-o", tmp_path / "o.parquet")
    assert result.returncode == 2
    assert 'needs pyarrow: pip install "reward-plugins[parquet]"' in result.stderr
    jsonl_only = _run_without("pyarrow", "score", source, "-o", tmp_path / "o.jsonl")
    assert jsonl_only.returncode == 0, jsonl_only.stderr


def test_demo_accepts_a_guard_that_rejects_empty_golds() -> None:
    """The up-front option check reads the declared types and scores nothing, so
    reject_empty_gold=true passes it (the shipped sample has no empty gold) and the run scores
    every row."""
    result = run_cli_here("score", "--demo", "--quiet", "--set", "reject_empty_gold=true")
    assert result.returncode == 0, result.stderr
    assert "scored 120 of 120 rows" in result.stdout
