"""``reward-plugins score --backend ray`` against the local backend, row for row.

One local Ray instance with 2 CPUs is started for the module; each command connects to it
with ``--ray-address`` and ships this checkout's package to the workers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import ray
from test_cli_helpers import (
    read_jsonl,
    router_result,
    run_cli,
    training_rows,
    write_jsonl,
    write_parquet,
)


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def _rows_with_bad_ones(count: int, seed: int) -> list[dict[str, Any]]:
    rows = training_rows(count, seed)
    rows[5] = {**rows[5], "reward_model": {"style": "rule", "ground_truth": {"target": None}}}
    rows[count - 3] = {**rows[count - 3], "response": None}
    return rows


def _score_both(
    source: Path, output_name: str, address: str, *args: str
) -> tuple[Path, Path, dict, dict]:
    directory = source.parent
    runs = {}
    for backend in ("local", "ray"):
        output = directory / f"{backend}-{output_name}"
        summary = directory / f"{backend}-summary.json"
        extra = ("--backend", "ray", "--ray-address", address) if backend == "ray" else ()
        result = run_cli(
            "score", source, "-o", output, "--summary-json", summary, "-q", *extra, *args
        )
        assert result.returncode == 0, result.stderr
        runs[backend] = (output, json.loads(summary.read_text()))
    (local, local_summary), (remote, ray_summary) = runs["local"], runs["ray"]
    return local, remote, local_summary, ray_summary


def _same_summary(local: dict, remote: dict) -> None:
    for key in ("backend", "seconds", "workers", "output", "failures_file"):
        local.pop(key), remote.pop(key)
    assert local == remote


def test_parquet_rows_identical_to_local(tmp_path: Path, ray_address: str) -> None:
    rows = _rows_with_bad_ones(600, seed=11)
    source = write_parquet(tmp_path / "rows.parquet", rows)
    local, remote, local_summary, ray_summary = _score_both(
        source, "out.parquet", ray_address, "--on-error", "skip", "--scorer", "compute_score_f1"
    )
    local_table, ray_table = pq.read_table(local), pq.read_table(remote)
    assert ray_table.num_rows == 598
    assert ray_table.equals(local_table)
    kept = [row for index, row in enumerate(rows) if index not in (5, 597)]
    assert ray_table.column("response").to_pylist() == [row["response"] for row in kept]
    expected = [router_result(row, "compute_score_f1")["score"] for row in kept]
    assert ray_table.column("reward_score").to_pylist() == expected
    assert ray_summary["backend"] == "ray"
    assert ray_summary["skipped"]["reasons"] == {"invalid ground truth": 1, "missing response": 1}
    _same_summary(local_summary, ray_summary)


def test_jsonl_bytes_identical_to_local(tmp_path: Path, ray_address: str) -> None:
    rows = training_rows(300, seed=12)
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    local, remote, local_summary, ray_summary = _score_both(
        source, "out.jsonl", ray_address, "--set", "format_score=0.1"
    )
    assert remote.read_bytes() == local.read_bytes()
    out = read_jsonl(remote)
    assert [r["reward_score"] for r in out] == [
        router_result(row, format_score=0.1)["score"] for row in rows
    ]
    _same_summary(local_summary, ray_summary)


def test_bad_row_fails_as_on_the_local_backend(tmp_path: Path, ray_address: str) -> None:
    rows = _rows_with_bad_ones(40, seed=13)
    source = write_parquet(tmp_path / "rows.parquet", rows)
    messages = []
    for extra in ((), ("--backend", "ray", "--ray-address", ray_address)):
        result = run_cli("score", source, "-o", tmp_path / "out.parquet", "-q", *extra)
        assert result.returncode == 1
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        messages.append(result.stderr.strip())
    assert (
        messages[0]
        == messages[1]
        == (
            f"reward-plugins: error: {source}: row 6: invalid ground truth: "
            f"data_source={rows[5]['data_source']!r}: ground_truth['target'] must be a string, a "
            "number, or a list, tuple or 1-D array of strings and numbers, got NoneType: None "
            "(--on-error skip goes on, listing bad rows in OUTPUT.failures.jsonl)"
        )
    )
    assert not (tmp_path / "out.parquet").exists()
