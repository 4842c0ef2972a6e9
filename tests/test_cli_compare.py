"""``reward-plugins compare`` (paired tests of two scored outputs) and the metrics of ``list``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_cli_helpers import run_cli, training_rows, write_jsonl

from reward_plugins.cli import COMPARE_METHODS, main
from reward_plugins.metrics import METRICS, metric_options, paired_test_values
from reward_plugins.metrics.significance import METHODS


def _rows(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """Inputs with two result columns: a 0/0.1/1 score and a 0/1 accuracy."""
    rows = []
    for index, row in enumerate(training_rows(count, seed)):
        rows.append(
            {
                **row,
                "reward_score": [0.0, 0.1, 1.0][(index * 7 + seed) % 3],
                "reward_acc": float((index + seed) % 4 == 0),
            }
        )
    return rows


def _compare(*args: str | Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["compare", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _column(path: Path, name: str) -> list[float]:
    if path.name.endswith(".parquet"):
        return [float(v) for v in pq.read_table(path).column(name).to_pylist()]
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as stream:
        return [float(json.loads(line)[name]) for line in stream if line.strip()]


# --- values -----------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["bootstrap", "ar"])
def test_values_are_those_of_paired_test_values(
    tmp_path: Path, method: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", _rows(80, seed=0))
    rows_b = _rows(80, seed=0)
    for index, row in enumerate(rows_b):
        row["reward_score"] = [0.0, 0.1, 1.0][(index * 5) % 3]
        row["reward_acc"] = float(index % 3 == 0)
    second = write_jsonl(tmp_path / "b.jsonl", rows_b)
    code, out, err = _compare(
        first, second, "--method", method, "--samples", "400", "--seed", "9", "--json",
        capsys=capsys,
    )  # fmt: skip
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["rows"] == 80
    assert (report["method"], report["samples"], report["seed"]) == (method, 400, 9)
    assert list(report["columns"]) == ["reward_score", "reward_acc"]
    assert report["not_compared"] == {}
    for name, column in report["columns"].items():
        expected = paired_test_values(
            _column(first, name), _column(second, name), method=method, samples=400, seed=9
        )
        assert column == {
            "mean_a": expected.score_a,
            "mean_b": expected.score_b,
            "difference": expected.difference,
            "p_value": expected.p_value,
            "ci_a": expected.ci_a,
            "ci_b": expected.ci_b,
        }


def test_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", _rows(40, seed=0))
    rows_b = _rows(40, seed=0)
    for row in rows_b[::2]:
        row["reward_score"] = 1.0
    second = write_jsonl(tmp_path / "b.jsonl", rows_b)
    code, out, _ = _compare(first, second, capsys=capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[:4] == [
        f"A: {first}",
        f"B: {second}",
        "40 paired rows; paired bootstrap resampling, 1000 resamples, seed 12345",
        "",
    ]
    assert lines[4].split() == ["column", "mean", "A", "mean", "B", "B", "-", "A", "p-value"]
    expected = paired_test_values(_column(first, "reward_score"), _column(second, "reward_score"))
    assert lines[5].split() == [
        "reward_score",
        f"{expected.score_a:.4f}",
        f"{expected.score_b:.4f}",
        f"{expected.difference:+.4f}",
        f"{expected.p_value:.4f}",
    ]
    assert lines[6].split() == ["reward_acc", "0.2500", "0.2500", "+0.0000", "1.0000"]
    assert len(lines) == 7
    assert len({len(line) for line in lines[4:7]}) == 1  # aligned
    assert lines[5].index("0.") > lines[4].index("column") + len("reward_score")


@pytest.mark.parametrize("method", ["bootstrap", "ar"])
def test_identical_columns_have_p_value_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", _rows(10))
    code, out, _ = _compare(first, first, "--json", "--method", method, capsys=capsys)
    assert code == 0
    for column in json.loads(out)["columns"].values():
        assert (column["p_value"], column["difference"]) == (1.0, 0.0)


def test_real_outputs_across_formats(tmp_path: Path) -> None:
    """Two `score` outputs of the same rows (JSONL and parquet, different scorers)."""
    rows = training_rows(60)
    for row in rows[::3]:
        row["note"] = "only some rows have it"  # absent in JSONL rows, null in parquet
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.parquet"
    assert run_cli("score", source, "-o", first).returncode == 0
    scored = run_cli(
        "score", source, "-o", second, "--scorer", "compute_score_subem", "--set",
        "format_score=0.1",
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    result = run_cli("compare", first, second, "--json", "--method", "ar", "--samples", "640")
    assert (result.returncode, result.stderr) == (0, "")
    report = json.loads(result.stdout)
    assert report["rows"] == 60
    assert "reward_model" not in report["columns"]  # verl's input column, compared as input
    assert report["not_compared"] == {}
    score = report["columns"]["reward_score"]
    expected = paired_test_values(
        _column(first, "reward_score"),
        _column(second, "reward_score"),
        method="ar",
        samples=640,
    )
    assert (score["mean_a"], score["mean_b"], score["p_value"]) == (
        expected.score_a,
        expected.score_b,
        expected.p_value,
    )
    assert report["columns"]["reward_em"]["p_value"] == 1.0  # EM equal in every row


def test_nan_inputs_are_equal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [f'{{"x": NaN, "y": [1, NaN], "reward_score": {v}}}' for v in ("0.5", "1", "0")]
    first = write_jsonl(tmp_path / "a.jsonl", lines)
    second = write_jsonl(tmp_path / "b.jsonl", [line.replace("0.5", "1") for line in lines])
    code, out, _ = _compare(first, second, "--json", capsys=capsys)
    assert code == 0
    assert json.loads(out)["columns"]["reward_score"]["mean_b"] == pytest.approx(2 / 3)


def test_a_column_that_stops_holding_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(6)
    first = write_jsonl(tmp_path / "a.jsonl", rows)
    rows_b = _rows(6)
    rows_b[3]["reward_acc"] = "n/a"
    rows_b[0]["reward_extra"] = 1.0
    second = write_jsonl(tmp_path / "b.jsonl", rows_b)
    code, out, _ = _compare(first, second, capsys=capsys)
    assert code == 0
    assert f'not compared: reward_acc: row 4 of {second} holds "n/a", not a finite number' in out
    assert f"not compared: reward_extra: only in {second}" in out
    assert "reward_score" in out


# --- refusals ---------------------------------------------------------------------------------
def _refused(capsys: pytest.CaptureFixture[str], *args: str | Path, code: int = 1) -> str:
    returned, out, err = _compare(*args, capsys=capsys)
    assert returned == code
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("reward-plugins: error: ")
    return err.strip()


def test_row_counts_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", _rows(12))
    second = write_jsonl(tmp_path / "b.jsonl", _rows(12)[:9])
    message = _refused(capsys, first, second)
    assert f"{first} has 12 rows but {second} has 9" in message
    message = _refused(capsys, second, first)
    assert f"{second} has 9 rows but {first} has 12" in message


def test_inputs_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _rows(10)
    first = write_jsonl(tmp_path / "a.jsonl", rows)
    changed = _rows(10)
    changed[6]["response"] += " (edited)"
    changed[8]["prompt"] = "other"
    second = write_jsonl(tmp_path / "b.jsonl", changed)
    message = _refused(capsys, first, second)
    assert f"row 7: the input column 'response' differs between {first} and {second}" in message
    reordered = write_jsonl(tmp_path / "c.jsonl", rows[1:] + rows[:1])
    assert "row 1: the input column" in _refused(capsys, first, reordered)
    verl_input = _rows(10)
    verl_input[2]["reward_model"]["ground_truth"]["target"] = ["other"]
    third = write_jsonl(tmp_path / "d.jsonl", verl_input)
    assert "row 3: the input column 'reward_model' differs" in _refused(capsys, first, third)
    extra = _rows(10)
    extra[4]["tag"] = "x"
    fourth = write_jsonl(tmp_path / "e.jsonl", extra)
    assert f"row 5: the input column 'tag' is only in {fourth}" in _refused(capsys, first, fourth)


def test_counts_are_reported_before_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(10)
    first = write_jsonl(tmp_path / "a.jsonl", rows)
    second = write_jsonl(tmp_path / "b.jsonl", rows[:3] + rows[4:])  # a row dropped
    assert f"{first} has 10 rows but {second} has 9" in _refused(capsys, first, second)


def test_unusable_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", _rows(3))
    missing = tmp_path / "missing.jsonl"
    assert f"compare: {missing}: no such file" in _refused(capsys, first, missing, code=2)
    text = tmp_path / "a.txt"
    text.write_text("x")
    assert "unsupported format" in _refused(capsys, text, first, code=2)
    broken = write_jsonl(tmp_path / "broken.jsonl", [*_rows(2), "{not json"])
    assert f"{broken}: line 3: unparsable JSON" in _refused(capsys, first, broken)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert f"{empty} and {empty} have no rows" in _refused(capsys, empty, empty)
    unscored = write_jsonl(tmp_path / "unscored.jsonl", training_rows(3))
    message = _refused(capsys, first, unscored)
    assert f"no reward_* column holds numbers in both {first} and {unscored}" in message
    assert f"only in {first}: reward_score, reward_acc" in message
    not_gzip = tmp_path / "bad.jsonl.gz"
    not_gzip.write_text("plain")
    assert f"{not_gzip}: cannot read" in _refused(capsys, first, not_gzip, code=2)


def test_parquet_of_other_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", [{"q": "x", "reward_score": 1.0}])
    second = tmp_path / "b.parquet"
    pq.write_table(pa.Table.from_pylist([{"q": "y", "reward_score": 0.0}]), second)
    assert "row 1: the input column 'q' differs" in _refused(capsys, first, second)


def test_usage_errors_exit_2() -> None:
    result = run_cli("compare", "a.jsonl", "b.jsonl", "--samples", "0")
    assert result.returncode == 2
    assert result.stderr == (
        "reward-plugins: error: compare: --samples must be at least 1, got 0 "
        "(see reward-plugins compare --help)\n"
    )
    result = run_cli("compare", "a.jsonl", "b.jsonl", "--method", "bs")
    assert result.returncode == 2 and "invalid choice: 'bs'" in result.stderr
    assert result.stderr.count("\n") == 1


def test_methods_are_those_of_the_tests() -> None:
    assert COMPARE_METHODS == METHODS


def test_subprocess_refusal_is_one_line(tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", _rows(4))
    second = write_jsonl(tmp_path / "b.jsonl", _rows(5))
    result = run_cli("compare", first, second)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"reward-plugins: error: compare: {first} has 4 rows but {second} has 5; compare two "
        "outputs of the same inputs\n"
    )


# --- list -------------------------------------------------------------------------------------
def test_list_shows_the_metrics() -> None:
    result = run_cli("list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("metrics:")
    block = lines[start + 1 : start + 1 + len(METRICS)]
    width = max(map(len, METRICS))
    assert block == [
        f"  {name:{width}}  (options: {', '.join(metric_options(name)) or 'none'})"
        for name in sorted(METRICS)
    ]
    assert all(not line.startswith("  ") for line in lines[start + 1 + len(METRICS) :])
    assert "  f1" + " " * (width - 2) + "  (options: normalizer, tokenizer, compat)" in block
    assert any(
        line.startswith("  accuracy ") and line.endswith("(options: none)") for line in block
    )
    assert lines.index("compute_score") < start  # scorers first


def test_compare_is_documented() -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    assert "reward-plugins compare A B" in docs
