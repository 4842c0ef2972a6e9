"""``reward-plugins compare`` (paired tests of two scored outputs) and the metrics of ``list``."""

from __future__ import annotations

import gzip
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli_helpers import (
    REPO,
    dump_rows,
    run_cli,
    run_cli_here,
    run_docs_block,
    training_rows,
    write_jsonl,
)

from reward_plugins.cli import main
from reward_plugins.metrics import METRICS, metric_options, paired_test_values
from reward_plugins.rescore.compare import paired_columns


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
        "40 rows paired by prompt 'prompt' and ground truth 'reward_model.ground_truth'; "
        "paired bootstrap resampling, 1000 resamples, seed 12345",
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
    assert run_cli_here("score", source, "-o", first).returncode == 0
    scored = run_cli_here(
        "score", source, "-o", second, "--scorer", "compute_score_subem", "--set",
        "format_score=0.1",
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    result = run_cli_here("compare", first, second, "--json", "--method", "ar", "--samples", "640")
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


def test_pairing_values_compare_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """NaN equals NaN, a missing key equals null, 1 equals 1.0, and a ground truth that numpy
    stringified equals its list; the other columns may differ."""
    lines = [
        f'{{"input": [1, NaN], "gts": {{"target": ["a", "b"], "n": 1}}, "reward_score": {v}}}'
        for v in ("0.5", "1", "0")
    ]
    first = write_jsonl(tmp_path / "a.jsonl", lines)
    changed = [
        line.replace("0.5", "1")
        .replace('["a", "b"]', "\"['a' 'b']\"")
        .replace('"n": 1', '"n": 1.0, "m": null')
        .replace("}}", '}, "score": NaN, "output": "other"}')
        for line in lines
    ]
    second = write_jsonl(tmp_path / "b.jsonl", changed)
    code, out, _ = _compare(first, second, "--json", capsys=capsys)
    assert code == 0, out
    report = json.loads(out)
    assert report["paired_by"] == {"prompt": "input", "ground_truth": "gts"}
    assert report["columns"]["reward_score"]["mean_b"] == pytest.approx(2 / 3)


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
    assert f'not compared: reward_acc: row 4 of {second} holds "n/a", not a number' in out
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


def test_responses_and_other_columns_may_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(10)
    first = write_jsonl(tmp_path / "a.jsonl", rows)
    changed = _rows(10)
    changed[6]["response"] += " (edited)"
    changed[8]["ability"] = "other"
    changed[4]["tag"] = "x"
    second = write_jsonl(tmp_path / "b.jsonl", changed)
    code, out, err = _compare(first, second, "--json", capsys=capsys)
    assert (code, err) == (0, "")
    assert json.loads(out)["rows"] == 10


def test_ground_truths_must_be_equal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", _rows(10))
    verl_input = _rows(10)
    verl_input[2]["reward_model"]["ground_truth"]["target"] = ["other"]
    second = write_jsonl(tmp_path / "b.jsonl", verl_input)
    assert _refused(capsys, first, second) == (
        f"reward-plugins: error: compare: row 3 of {first} and row 3 of {second} have the same "
        "prompt but different ground truths (column 'reward_model.ground_truth'); compare two "
        "outputs of the same prompts"
    )


def test_prompts_that_cannot_be_paired(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _rows(10)
    first = write_jsonl(tmp_path / "a.jsonl", rows)
    changed = _rows(10)
    changed[8]["prompt"] = "other"
    second = write_jsonl(tmp_path / "b.jsonl", changed)
    message = _refused(capsys, first, second)
    assert message.endswith(
        f'row 9 of {first}: its prompt [{{"role": "user", "content": "Questio... is '
        f"not in {second}; compare two outputs of the same prompts (column 'prompt')"
    )
    doubled = write_jsonl(tmp_path / "c.jsonl", [*rows[:4], rows[3], *rows[5:]])  # 5th is 4th
    message = _refused(capsys, first, doubled)
    assert f"row 5 of {first}: its prompt" in message and f"is not in {doubled}" in message
    message = _refused(capsys, doubled, first)
    assert f"row 5 of {doubled}: its prompt" in message
    assert f"has 2 rows in {doubled} but 1 in {first}" in message
    assert _refused(capsys, first, first, "--prompt-column", "missing") == (
        f"reward-plugins: error: compare: row 1 of {first}: no prompt column 'missing'; columns: "
        f"{', '.join(rows[0])}; name it with --prompt-column"
    )
    dump = write_jsonl(tmp_path / "dump.jsonl", dump_rows(3))
    message = _refused(capsys, dump, first)
    assert message.endswith(
        f"row 1 of {first}: no prompt column 'input' (it is in {dump}); name it with "
        "--prompt-column"
    )
    no_prompt = _rows(3)
    del no_prompt[1]["prompt"]
    third = write_jsonl(tmp_path / "d.jsonl", no_prompt)
    assert _refused(capsys, third, third).endswith(
        f"row 2 of {third}: no prompt (column 'prompt'); rows are paired by prompt"
    )


def test_rows_pair_by_prompt_in_any_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GRPO's n samples of a prompt pair in their order of occurrence; the values are paired
    in A's order, so that shuffling B changes nothing."""
    rows_a = [row for row in _rows(12) for _ in range(3)]  # 3 samples per prompt
    rows_b = []
    for index, row in enumerate(rows_a):
        rows_b.append({**row, "reward_score": float(index % 5 == 0), "response": f"r{index}"})
    first = write_jsonl(tmp_path / "a.jsonl", rows_a)
    in_order = write_jsonl(tmp_path / "b.jsonl", rows_b)
    groups = [rows_b[start : start + 3] for start in range(0, len(rows_b), 3)]
    shuffled = [row for group in groups[::-2] + groups[::2] for row in group]
    interleaved = [group[k] for k in range(3) for group in groups[::-1]]
    reports = []
    for index, rows in enumerate((shuffled, interleaved)):
        path = write_jsonl(tmp_path / f"shuffled{index}.jsonl", rows)
        code, out, _ = _compare(first, path, "--json", capsys=capsys)
        assert code == 0
        reports.append(json.loads(out))
    code, out, _ = _compare(first, in_order, "--json", capsys=capsys)
    expected = json.loads(out)
    assert expected["rows"] == 36
    score = paired_test_values(
        [row["reward_score"] for row in rows_a], [row["reward_score"] for row in rows_b]
    )
    assert expected["columns"]["reward_score"]["p_value"] == score.p_value
    for report in reports:
        assert report["columns"] == expected["columns"]


def test_two_checkpoints(tmp_path: Path) -> None:
    """Dumps of two checkpoints: the same prompts, other responses, logged scores and steps."""
    checkpoint_10, checkpoint_20 = dump_rows(30, seed=1), dump_rows(30, seed=1)
    others = dump_rows(30, seed=2)
    for row, other in zip(checkpoint_20, others, strict=True):
        row.update(output=other["output"], score=1.0, step=20)
    runs = tmp_path / "runs"
    (runs / "10").mkdir(parents=True)
    (runs / "20").mkdir()
    write_jsonl(runs / "10" / "10.jsonl", checkpoint_10)
    write_jsonl(runs / "20" / "20.jsonl", checkpoint_20[::-1])
    for step in ("10", "20"):
        scored = run_cli_here(
            "score", runs / step, "-o", tmp_path / "rescored" / step, "--data-source",
            "searchR1_nq",
        )  # fmt: skip
        assert scored.returncode == 0, scored.stderr
    first = tmp_path / "rescored" / "10" / "10.jsonl"
    second = tmp_path / "rescored" / "20" / "20.jsonl"
    result = run_cli_here("compare", first, second)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines()[2].startswith(
        "30 rows paired by prompt 'input' and ground truth 'gts'; "
    )
    expected = paired_test_values(
        _column(first, "reward_score"), _column(second, "reward_score")[::-1]
    )
    line = next(line for line in result.stdout.splitlines() if line.startswith("reward_score"))
    assert line.split()[1:] == [
        f"{expected.score_a:.4f}",
        f"{expected.score_b:.4f}",
        f"{expected.difference:+.4f}",
        f"{expected.p_value:.4f}",
    ]


def test_numbers_that_are_not_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A result column holding a bool, NaN, infinity, an integer beyond a float, a float whose
    sums overflow, or a string is listed as not compared, with its first such row; the others
    are compared."""
    odd = {  # column: (its value in A, its JSON in row 3 of B)
        "reward_big": (1, str(10**400)),
        "reward_huge": (1.0, "1e308"),
        "reward_flag": (1.0, "true"),
        "reward_nan": (0.0, "NaN"),
        "reward_inf": (1.0, "-Infinity"),
        "reward_text": (0.5, '"high"'),
    }
    rows = [{**row, **{name: value for name, (value, _) in odd.items()}} for row in _rows(4)]
    first = write_jsonl(tmp_path / "a.jsonl", rows)
    lines = [json.dumps(row) for row in rows]
    plain = json.dumps({k: v for k, v in rows[2].items() if k not in odd})
    lines[2] = plain[:-1] + "".join(f', "{name}": {text}' for name, (_, text) in odd.items()) + "}"
    second = write_jsonl(tmp_path / "b.jsonl", lines)
    code, out, err = _compare(first, second, "--json", capsys=capsys)
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert list(report["columns"]) == ["reward_score", "reward_acc"]
    row = f"row 3 of {second}"
    assert report["not_compared"] == {
        "reward_big": f"{row} holds an integer of about 401 digits, beyond the range of a float",
        "reward_huge": f"{row} holds 1e+308, too large: a sum over the 4 rows would leave the "
        "range of a float",
        "reward_flag": f"{row} holds true, not a number",
        "reward_nan": f"{row} holds nan, not a finite number",
        "reward_inf": f"{row} holds -inf, not a finite number",
        "reward_text": f'{row} holds "high", not a number',
    }


def test_surrogates_are_printed_as_escapes(tmp_path: Path) -> None:
    """Lone surrogates in a prompt and in a column name: paired, and printed as escapes."""
    lines = [
        f'{{"input": "q{i} \\udc80", "gts": ["\\ud800"], "reward_\\udcff": {i % 2}}}'
        for i in range(4)
    ]
    first = write_jsonl(tmp_path / "a.jsonl", lines)
    second = write_jsonl(tmp_path / "b.jsonl", lines[::-1])
    env = {"PYTHONIOENCODING": "utf-8"}  # strict: a lone surrogate cannot be printed
    result = run_cli("compare", first, second, env=env)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines()[-1].split() == [
        "reward_\\udcff", "0.5000", "0.5000", "+0.0000", "1.0000"
    ]  # fmt: skip
    header, row = result.stdout.splitlines()[-2:]
    assert len(header) == len(row)  # aligned on the escape
    result = run_cli("compare", first, second, "--json", env=env)
    assert json.loads(result.stdout)["columns"]["reward_\udcff"]["p_value"] == 1.0


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
    first = write_jsonl(tmp_path / "a.jsonl", [{"input": "x", "reward_score": 1.0}])
    second = tmp_path / "b.parquet"
    pq.write_table(pa.Table.from_pylist([{"input": "y", "reward_score": 0.0}]), second)
    message = _refused(capsys, first, second)
    assert f"{first} and {second}" not in message
    assert f'row 1 of {first}: its prompt "x" is not in {second}' in message


def test_usage_errors_exit_2() -> None:
    result = run_cli_here("compare", "a.jsonl", "b.jsonl", "--samples", "0")
    assert result.returncode == 2
    assert result.stderr == (
        "reward-plugins: error: compare: --samples must be at least 1, got 0 "
        "(see reward-plugins compare --help)\n"
    )
    result = run_cli_here("compare", "a.jsonl", "b.jsonl", "--method", "bs")
    assert result.returncode == 2 and "invalid choice: 'bs'" in result.stderr
    assert result.stderr.count("\n") == 1


def test_subprocess_refusal_is_one_line(tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", _rows(4))
    second = write_jsonl(tmp_path / "b.jsonl", _rows(5))
    result = run_cli_here("compare", first, second)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"reward-plugins: error: compare: {first} has 4 rows but {second} has 5; row 5 of "
        f'{second}: its prompt [{{"role": "user", "content": "Questio... is not in {first}; '
        "compare two outputs of the same prompts (column 'prompt')\n"
    )


# --- list -------------------------------------------------------------------------------------
def test_list_shows_the_metrics() -> None:
    result = run_cli_here("list")
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
    docs = (REPO / "docs" / "cli.md").read_text()
    assert "reward-plugins compare A B" in docs


def test_the_documented_comparison_runs_as_shown(tmp_path: Path) -> None:
    """The bash block of docs/cli.md's comparison section runs as written and prints its text
    block."""
    result, shown = run_docs_block("## Comparing two outputs", tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == shown + "\n"
    assert json.loads((tmp_path / "comparison.json").read_text())["paired_by"] == {
        "prompt": "input",
        "ground_truth": "gts",
    }


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.sampled_from([0.0, 0.5, 1.0])), min_size=1,
             max_size=20),
    st.randoms(use_true_random=False),
)  # fmt: skip
def test_pairing_follows_the_prompts_whatever_the_order(
    rows_a: list[tuple[int, float]], rng: random.Random
) -> None:
    """B's rows in any order that keeps each prompt's rows in order pair with A's rows as B in
    A's order does: the k-th row of a prompt with the k-th, the values in A's order."""
    values_b = [rng.choice([0.0, 1.0]) for _ in rows_a]
    order = list(range(len(rows_a)))
    rng.shuffle(order)
    positions: dict[int, list[int]] = {}
    for index, (prompt, _) in enumerate(rows_a):
        positions.setdefault(prompt, []).append(index)
    shuffled = [positions[rows_a[index][0]].pop(0) for index in order]  # in-prompt order kept
    with tempfile.TemporaryDirectory() as directory:
        first, second = Path(directory, "a.jsonl"), Path(directory, "b.jsonl")
        write_jsonl(first, [{"input": f"q{p}", "reward_score": v} for p, v in rows_a])
        write_jsonl(
            second,
            [{"input": f"q{rows_a[i][0]}", "reward_score": values_b[i]} for i in shuffled],
        )
        pairing = paired_columns(first, second)
    column = pairing.columns["reward_score"]
    assert (pairing.rows, pairing.prompt_column, pairing.ground_truth_column) == (
        len(rows_a),
        "input",
        None,
    )
    assert list(column.values_a) == [value for _, value in rows_a]
    assert list(column.values_b) == values_b
