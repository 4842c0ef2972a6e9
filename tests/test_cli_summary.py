"""Summaries: scorers registered later, per-source grouping, large-input intervals."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_cli_helpers import REPO, read_jsonl, write_jsonl

from reward_plugins.metrics.aggregate import bootstrap_mean, bootstrap_mean_of_counts
from reward_plugins.rescore.summary import count, finish, merge

LENGTH_SCORER = """
import sys
from reward_plugins import register
from reward_plugins.cli import main


@register("length_reward", ["test_cli_lengths"])
def length_reward(solution_str, golds, *, cap=10):
    return {"score": min(len(solution_str), cap) / cap, "too_long": len(solution_str) > cap}


sys.exit(main(sys.argv[1:]))
"""


def test_a_scorer_registered_later(tmp_path: Path) -> None:
    """A scorer registered outside the package (in a separate process, to keep this one's
    registry as it is) is used without any change to the command."""
    rows = [{"response": "x" * n, "ground_truth": "unused"} for n in (0, 4, 12)]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    args = ["score", source, "-o", tmp_path / "out.jsonl", "--summary-json", tmp_path / "s.json"]
    args += ["--scorer", "length_reward", "--set", "cap=8", "--data-source", "test_cli_lengths"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", LENGTH_SCORER, *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    out = read_jsonl(tmp_path / "out.jsonl")
    assert [(r["reward_score"], r["reward_too_long"]) for r in out] == [
        (0.0, False),
        (0.5, False),
        (1.0, True),
    ]
    summary = json.loads((tmp_path / "s.json").read_text())
    # Every key of the result is summarized; an undeclared one as a diagnostic under its name.
    assert list(summary["overall"]["metrics"]) == ["score", "too_long"]
    assert summary["results"] == [
        {"key": "score", "kind": "reward", "label": "score", "gdpo": True},
        {"key": "too_long", "kind": "diagnostic", "label": "too_long", "gdpo": False},
    ]
    assert summary["overall"]["metrics"]["score"]["mean"] == pytest.approx(0.5)
    assert summary["overall"]["metrics"]["too_long"]["mean"] == pytest.approx(1 / 3)
    assert summary["sources"]["test_cli_lengths"]["rows"] == 3


def test_summary_groups_sorted_overall_and_steps() -> None:
    sources = ["b", "a", "b", "a", "b"]
    steps = [2, 1, 1, None, 2]
    results = [{"score": s, "em": s, "answer_found": 1.0} for s in (1.0, 0.0, 0.0, 1.0, 1.0)]
    rows = list(zip(sources, steps, results, strict=True))
    counts = count(rows[:2])  # counted in two parts, as two workers would
    merge(counts, count(rows[2:]))
    summary = finish(counts)
    assert list(summary["sources"]) == ["a", "b"]
    assert summary["sources"]["a"]["rows"] == 2 and summary["overall"]["rows"] == 5
    assert list(summary["overall"]["metrics"]) == ["score", "em", "answer_found"]
    b_scores = bootstrap_mean([0.0, 1.0, 1.0])  # below 10,000 values: of the sorted values
    assert summary["sources"]["b"]["metrics"]["score"] == {
        "mean": b_scores.mean,
        "low": b_scores.low,
        "high": b_scores.high,
    }
    # Per step: mean +- 1.96 standard errors (sample variance), clipped to the values' range.
    assert [step["step"] for step in summary["steps"]] == [1, 2]
    step1, step2 = summary["steps"]
    assert step1["rows"] == 2 and step1["metrics"]["score"] == {
        "mean": 0.0,
        "low": 0.0,
        "high": 0.0,
    }
    assert step2["metrics"]["score"] == {"mean": 1.0, "low": 1.0, "high": 1.0}


def test_a_metric_missing_in_some_rows_is_left_out() -> None:
    summary = finish(count([("a", 1, {"score": 1.0, "f1": 0.5}), ("a", 1, {"score": 0.0})]))
    assert list(summary["overall"]["metrics"]) == ["score"]
    assert list(summary["steps"][0]["metrics"]) == ["score"]


def test_step_band_is_the_normal_approximation() -> None:
    values = [0.0, 0.5, 1.0, 1.0]
    summary = finish(count(("a", 7, {"score": v}) for v in values))
    mean = sum(values) / 4
    half = 1.96 * math.sqrt(sum((v - mean) ** 2 for v in values) / 3 / 4)
    band = summary["steps"][0]["metrics"]["score"]
    assert band["mean"] == mean
    assert band["low"] == pytest.approx(mean - half) and band["high"] == 1.0  # clipped


def test_counts_resampled_as_a_multinomial_match_the_rows() -> None:
    """From 10,000 values with few distinct ones, the counts are resampled directly: the same
    distribution as resampling the rows (bounds within Monte Carlo noise)."""
    rng = np.random.default_rng(5)
    data = rng.integers(0, 3, 60_000) / 2
    distinct, counts = np.unique(data, return_counts=True)
    by_counts = bootstrap_mean_of_counts(distinct, counts)
    by_rows = bootstrap_mean(data)
    assert by_counts.mean == pytest.approx(by_rows.mean) and by_counts.n == data.size
    width = by_rows.high - by_rows.low
    assert by_counts.low == pytest.approx(by_rows.low, abs=0.15 * width)
    assert by_counts.high == pytest.approx(by_rows.high, abs=0.15 * width)


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(1).random(50_000) < 0.3,  # a 0/1 metric: resampled through counts
        np.random.default_rng(2).integers(0, 5, 40_000) / 4,  # five values: through counts
        np.random.default_rng(3).random(20_000),  # continuous: resampled by index
    ],
)
def test_large_input_intervals_match_the_normal_approximation(values: np.ndarray) -> None:
    data = np.asarray(values, dtype=float)
    interval = bootstrap_mean(data)
    assert interval.mean == data.mean() and interval.n == data.size
    half_width = 1.959964 * data.std() / math.sqrt(data.size)
    # 1000 resamples put about 5% Monte Carlo noise on each bound.
    assert interval.low == pytest.approx(data.mean() - half_width, abs=0.15 * half_width)
    assert interval.high == pytest.approx(data.mean() + half_width, abs=0.15 * half_width)
    assert bootstrap_mean(data) == interval  # seeded
