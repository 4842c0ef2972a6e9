"""``reward-plugins score`` on whole runs: directories, globs, --merge, .jsonl.gz, parquet schema
unions, chunked execution, --resume and its manifest, stringified ground truths, the summary.

Inputs are generated in ``tmp_path`` the way verl 0.9.1 writes ``trainer.rollout_data_dir``
(``{step}.jsonl``, lines of ``json.dumps(entry, ensure_ascii=False, default=str)``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_cli_helpers import (
    REWARD_KEYS,
    dump_rows,
    read_jsonl,
    reward_values,
    run_cli_here,
    run_docs_block,
    temporaries,
    verl_dump_line,
    write_jsonl,
    write_verl_run,
)

import reward_plugins
from reward_plugins.plugins.search_r1 import QA_RESULT_KEYS
from reward_plugins.rescore import ScoreJob, run
from reward_plugins.rescore.files import MANIFEST_NAME
from reward_plugins.rescore.formats import FORMATS
from reward_plugins.rescore.formats import jsonl as jsonl_format
from reward_plugins.rescore.formats import parquet as parquet_format

SOURCE = "searchR1_nq"
NQ = ("--data-source", SOURCE)
SUMMARY_KEYS = QA_RESULT_KEYS  # the summary holds every key, in the schema's order


def expected_rewards(row: dict[str, Any], source: str = SOURCE) -> dict[str, Any]:
    """What the package's router, called in this process, gives a verl dump row."""
    return dict(reward_plugins.compute_score(source, row["output"], row["gts"]))


def assert_scored(records: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    """Each output row is its input row unchanged (same keys, same order) plus the rewards."""
    assert len(records) == len(rows)
    for row, record in zip(rows, records, strict=True):
        assert list(record) == [*row, *(f"reward_{key}" for key in REWARD_KEYS)]
        assert {key: record[key] for key in row} == row
        assert reward_values(record) == expected_rewards(row)


def summary_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------ runs


def test_a_run_directory_is_scored_file_by_file_in_step_order(tmp_path: Path) -> None:
    """A directory of verl's ``{step}.jsonl`` files (plus another data file, a non-data file and
    a sub-directory, which is not entered) goes to a directory of the same names; files are
    handled by step number (2 before 10), others by name after, which the failures file shows."""
    run_dir = tmp_path / "run"
    steps = write_verl_run(run_dir, {10: 4, 2: 3, 1: 5})
    notes = [{**row, "step": 7} for row in dump_rows(2, seed=9)]
    write_jsonl(run_dir / "notes.jsonl", notes)
    (run_dir / "README.txt").write_text("not data\n")
    write_verl_run(run_dir / "nested", {3: 2})
    bad = '{"output": "no ground truth"}'  # one bad row per file: the order of the failures
    for name in ("10.jsonl", "2.jsonl", "1.jsonl", "notes.jsonl"):
        with (run_dir / name).open("a", encoding="utf-8") as stream:
            stream.write(bad + "\n")
    out = tmp_path / "out"
    result = run_cli_here(
        "score", run_dir, "-o", out, *NQ, "--on-error", "skip", "--summary-json", tmp_path / "s"
    )
    assert result.returncode == 0, result.stderr
    assert f"\nwrote {out}\n" in result.stdout
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [MANIFEST_NAME, "1.jsonl", "2.jsonl", "10.jsonl", "notes.jsonl"]
    )
    for step, rows in steps.items():
        assert_scored(read_jsonl(out / f"{step}.jsonl"), rows)
    assert_scored(read_jsonl(out / "notes.jsonl"), notes)

    failures = read_jsonl(tmp_path / "out.failures.jsonl")
    assert [(f["file"], f["line"]) for f in failures] == [
        (str(run_dir / "1.jsonl"), 6),
        (str(run_dir / "2.jsonl"), 4),
        (str(run_dir / "10.jsonl"), 5),
        (str(run_dir / "notes.jsonl"), 3),
    ]
    summary = summary_of(tmp_path / "s")
    assert (summary["files"], summary["rows"], summary["scored"]) == (4, 18, 14)
    assert summary["input"] == str(run_dir) and summary["output"] == str(out)
    assert summary["failures_file"] == str(tmp_path / "out.failures.jsonl")
    assert [(s["step"], s["rows"]) for s in summary["steps"]] == [(1, 5), (2, 3), (7, 2), (10, 4)]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_merge_writes_every_row_in_run_order(tmp_path: Path, suffix: str) -> None:
    run_dir = tmp_path / "run"
    steps = write_verl_run(run_dir, {10: 3, 2: 4, 1: 2}, seed=3)
    extra = [{**row, "step": 11} for row in dump_rows(2, seed=4)]
    write_jsonl(run_dir / "a-extra.jsonl", extra)
    merged = tmp_path / f"merged{suffix}"
    result = run_cli_here("score", run_dir, "-o", merged, "--merge", *NQ)
    assert result.returncode == 0, result.stderr
    records = read_jsonl(merged) if suffix == ".jsonl" else pq.read_table(merged).to_pylist()
    assert_scored(records, [*steps[1], *steps[2], *steps[10], *extra])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["run", merged.name])


def test_glob_patterns_and_several_files(tmp_path: Path) -> None:
    """A pattern's matches go in run order (step number, then name; non-data files left out);
    files named one by one go in the order given."""
    run_dir = tmp_path / "run"
    steps = write_verl_run(run_dir, {10: 2, 9: 3, 100: 2})
    (run_dir / "99.txt").write_text("not data\n")
    pattern = tmp_path / "run" / "*"
    globbed = run_cli_here("score", pattern, "-o", tmp_path / "g.jsonl", "--merge", *NQ)
    assert globbed.returncode == 0, globbed.stderr
    assert_scored(read_jsonl(tmp_path / "g.jsonl"), [*steps[9], *steps[10], *steps[100]])

    named = [run_dir / "100.jsonl", run_dir / "9.jsonl"]
    several = run_cli_here("score", *named, "-o", tmp_path / "s.jsonl", "--merge", *NQ)
    assert several.returncode == 0, several.stderr
    assert_scored(read_jsonl(tmp_path / "s.jsonl"), [*steps[100], *steps[9]])

    mirrored = run_cli_here("score", *named, "-o", tmp_path / "dir", *NQ)
    assert mirrored.returncode == 0, mirrored.stderr
    assert sorted(p.name for p in (tmp_path / "dir").iterdir()) == sorted(
        [MANIFEST_NAME, "100.jsonl", "9.jsonl"]
    )
    assert_scored(read_jsonl(tmp_path / "dir" / "9.jsonl"), steps[9])


def test_data_source_column(tmp_path: Path) -> None:
    """``--data-source-column`` names where each row's data source is (verl dumps have none)."""
    sources = ["searchR1_nq", "searchR1_hotpotqa", "searchR1_popqa"]
    rows = [{**row, "ds": sources[i % 3]} for i, row in enumerate(dump_rows(9, seed=5))]
    source = write_jsonl(tmp_path / "3.jsonl", rows)
    args = ("score", source, "-o", tmp_path / "o.jsonl", "--summary-json", tmp_path / "s")
    result = run_cli_here(*args, "--data-source-column", "ds")
    assert result.returncode == 0, result.stderr
    for row, record in zip(rows, read_jsonl(tmp_path / "o.jsonl"), strict=True):
        assert reward_values(record) == expected_rewards(row, source=row["ds"])
    summary = summary_of(tmp_path / "s")
    assert {name: group["rows"] for name, group in summary["sources"].items()} == {
        "searchR1_hotpotqa": 3,
        "searchR1_nq": 3,
        "searchR1_popqa": 3,
    }
    assert summary["columns"]["data_source"] == "ds" and summary["data_source_option"] is None


# --------------------------------------------------------------------------- output bytes


ODD_LINE = (
    '{"a" :  1.50, "big": 123456789012345678901234567890, "s": "\\ud800", "e": "\\u00e9\\/",'
    ' "raw": "é", "output" : "<answer> Paris </answer>" , "gts":{"target":"paris"}  }  \t'
)
"""Spacing, a number format, an integer beyond 64 bits, a lone surrogate escape, escapes that
re-encoding would change, raw UTF-8 and trailing whitespace: all kept as written."""


def test_jsonl_lines_keep_their_own_bytes(tmp_path: Path) -> None:
    """Each output line is the input line up to its closing brace, then the reward columns:
    nothing of the input is re-encoded, and it parses back to the input's values."""
    lines = [ODD_LINE, '{"output":"<answer>x</answer>","gts":"x","n":{"k":[1,{}]}}']
    source = write_jsonl(tmp_path / "odd.jsonl", lines)
    result = run_cli_here("score", source, "-o", tmp_path / "out.jsonl", *NQ)
    assert result.returncode == 0, result.stderr
    written = (tmp_path / "out.jsonl").read_bytes().decode("utf-8").split("\n")
    assert written[-1] == "" and len(written) == 3
    for line, out_line in zip(lines, written, strict=False):
        row = json.loads(line)
        rewards = {f"reward_{k}": v for k, v in expected_rewards(row).items()}
        added = json.dumps(rewards, separators=(",", ":"))[1:]
        assert out_line == line.rstrip()[:-1] + "," + added
        assert json.loads(out_line) == {**row, **rewards}
    assert json.loads(written[0])["big"] == 123456789012345678901234567890
    assert json.loads(written[0])["s"] == "\ud800"


def test_gzip_in_and_out(tmp_path: Path) -> None:
    """``.jsonl.gz`` is read and written: each gzip output is a valid gzip stream whose content
    is the plain run's output, whichever side is compressed."""
    rows = [{**row, "step": 4} for row in dump_rows(40, seed=6)]
    plain = write_jsonl(tmp_path / "4.jsonl", rows)
    packed = tmp_path / "4z.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    reference = run_cli_here("score", plain, "-o", tmp_path / "ref.jsonl", *NQ)
    assert reference.returncode == 0, reference.stderr
    expected = (tmp_path / "ref.jsonl").read_bytes()
    assert_scored(read_jsonl(tmp_path / "ref.jsonl"), rows)
    for source, target in [
        (packed, tmp_path / "zz.jsonl.gz"),
        (plain, tmp_path / "pz.jsonl.gz"),
        (packed, tmp_path / "zp.jsonl"),
    ]:
        result = run_cli_here("score", source, "-o", target, *NQ)
        assert result.returncode == 0, result.stderr
        data = target.read_bytes()
        if target.name.endswith(".gz"):
            assert data[:2] == b"\x1f\x8b"
            data = gzip.decompress(data)
            if shutil.which("gzip"):
                tested = subprocess.run(["gzip", "-t", str(target)], capture_output=True)
                assert tested.returncode == 0, tested.stderr
        assert data == expected, target


def test_jsonl_to_parquet_schema_is_the_union_of_every_row(tmp_path: Path) -> None:
    """Columns come from every row of every input, not from the first rows: a key first seen at
    row 1,101 of the first file (past the 1,000 rows that choose the columns) or only in the
    second file is a column, null in the other rows."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    first = [{"output": "<answer> x </answer>", "gts": {"target": ["x"]}, "step": 1}] * 1200
    first = [dict(row) for row in first]
    first[1100]["late"] = {"k": [1, 2]}
    second = [{"output": "<answer> y </answer>", "gts": {"target": ["x"]}, "step": 2, "judge": 0.5}]
    second = second * 3
    write_jsonl(run_dir / "1.jsonl", first)
    write_jsonl(run_dir / "2.jsonl", second)
    merged = tmp_path / "merged.parquet"
    result = run_cli_here("score", run_dir, "-o", merged, "--merge", *NQ)
    assert result.returncode == 0, result.stderr
    table = pq.read_table(merged)
    assert table.column_names == [
        "output",
        "gts",
        "step",
        "late",
        "judge",
        *(f"reward_{key}" for key in REWARD_KEYS),
    ]
    late = table.column("late").to_pylist()
    assert late[1100] == {"k": [1, 2]} and late.count(None) == 1202
    assert table.column("judge").to_pylist() == [None] * 1200 + [0.5] * 3
    assert str(table.schema.field("gts").type) == "struct<target: list<element: string>>"
    assert table.column("reward_em").to_pylist() == [1.0] * 1200 + [0.0] * 3


# ------------------------------------------------------------------------ chunked execution


BAD_LINES = {7001: "gts null", 9001: "not json", 12001: "no output"}
"""1-based lines of the big input's bad rows, all after its first 2 MiB."""


@pytest.fixture(scope="module")
def big_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 5 MB of verl dump rows over 13 steps (several 2 MiB chunks), a blank line at 3000
    and bad rows at :data:`BAD_LINES`."""
    rows = dump_rows(13_000, seed=11)
    lines = []
    for index, row in enumerate(rows):
        number = index + 1
        entry = {**row, "step": index // 1000}
        if number == 3000:
            lines.append("")
        elif BAD_LINES.get(number) == "gts null":
            lines.append(verl_dump_line({**entry, "gts": None}))
        elif BAD_LINES.get(number) == "not json":
            lines.append("{not json")
        elif BAD_LINES.get(number) == "no output":
            lines.append(verl_dump_line({k: v for k, v in entry.items() if k != "output"}))
        else:
            lines.append(verl_dump_line(entry))
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert path.stat().st_size > 2 * jsonl_format.JSONL_CHUNK_BYTES
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode()) + 1)
    assert offsets[min(BAD_LINES) - 1] > jsonl_format.JSONL_CHUNK_BYTES
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".parquet"])
def test_workers_write_byte_identical_outputs(tmp_path: Path, big_input: Path, suffix: str) -> None:
    """One worker and two write the same bytes (output, failures file) and the same summary,
    rows in input order, on an input of several chunks."""
    written = []
    for workers in ("1", "2"):
        target = tmp_path / f"w{workers}{suffix}"
        summary = tmp_path / f"w{workers}.json"
        args = ("-o", target, "--workers", workers, "--on-error", "skip", "--summary-json")
        result = run_cli_here("score", big_input, *args, summary, *NQ)
        assert result.returncode == 0, result.stderr
        failures = Path(f"{target}.failures.jsonl").read_bytes()
        facts = summary_of(summary)
        for key in ("seconds", "workers", "output", "failures_file"):
            facts.pop(key)
        written.append((target.read_bytes(), failures, facts))
    assert written[0] == written[1]
    out = tmp_path / f"w1{suffix}"
    if suffix == ".parquet":
        records = pq.read_table(out).to_pylist()
        assert pq.ParquetFile(out).metadata.num_row_groups >= 3
    else:
        data = out.read_bytes()
        text = gzip.decompress(data) if suffix == ".jsonl.gz" else data
        records = [json.loads(line) for line in text.splitlines()]
    kept = [n for n in range(1, 13_001) if n not in BAD_LINES and n != 3000]
    assert [record["input"] for record in records] == [f"Question {n - 1}?" for n in kept]
    failures_lines = [json.loads(line)["line"] for line in written[0][1].splitlines()]
    assert failures_lines == sorted(BAD_LINES)
    assert written[0][2]["rows"] == 12_999 and written[0][2]["scored"] == 12_996


def test_a_bad_row_past_the_first_chunk_is_named_by_its_line(
    tmp_path: Path, big_input: Path
) -> None:
    result = run_cli_here("score", big_input, "-o", tmp_path / "o.jsonl", *NQ, "--workers", "2")
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"reward-plugins: error: {big_input}: line 7001: invalid ground truth: "
    )
    assert result.stderr.count("\n") == 1
    assert sorted(os.listdir(tmp_path)) == []


SMALL_LINES: list[Any] = [
    *({"output": f"<answer> a{i} </answer>", "gts": f"a{i % 3}", "step": i % 4} for i in range(6)),
    "",
    "{broken",
    {"output": "<answer> b </answer>", "gts": None},
    "   ",
    *({"output": f"<answer> c{i} </answer>", "gts": [f"c{i}"], "step": 9} for i in range(5)),
    [1, 2],
    {"output": "<answer> é </answer>", "gts": "é"},
]
SMALL_BAD_LINES = [8, 9, 16]


@pytest.mark.parametrize("chunk_bytes", [1, 40, 333])
def test_chunk_size_changes_neither_bytes_nor_line_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_bytes: int
) -> None:
    """In process, with chunks of a few bytes: the same output bytes, failures and summary as
    with the default chunk size, and bad rows named by their 1-based line (blank lines count)."""
    source = write_jsonl(tmp_path / "in.jsonl", SMALL_LINES)

    def score(name: str) -> tuple[bytes, list[Any], dict[str, Any]]:
        job = ScoreJob(
            inputs=(source,), output=tmp_path / name, data_source=SOURCE, on_error="skip"
        )
        summary = run(job)
        failures = read_jsonl(tmp_path / f"{name}.failures.jsonl")
        for key in ("seconds", "output", "failures_file"):
            summary.pop(key)
        return (tmp_path / name).read_bytes(), failures, summary

    reference = score("default.jsonl")
    monkeypatch.setattr(jsonl_format, "JSONL_CHUNK_BYTES", chunk_bytes)
    assert score("small.jsonl") == reference
    data, failures, summary = reference
    assert [f["line"] for f in failures] == SMALL_BAD_LINES
    assert [f["row"] for f in failures] == ["{broken", json.dumps(SMALL_LINES[8]), "[1, 2]"]
    assert summary["rows"] == 15 and summary["scored"] == 12
    good = [line for i, line in enumerate(SMALL_LINES, 1) if line and i not in SMALL_BAD_LINES]
    good = [line for line in good if isinstance(line, dict)]
    assert [json.loads(line)["output"] for line in data.splitlines()] == [
        line["output"] for line in good
    ]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_more_chunks_in_flight_than_workers_keep_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """In process, with tiny chunks: two workers hold up to six chunks in flight; results are
    still written in input order, the same bytes as one worker."""
    rows = [{**row, "step": i % 5} for i, row in enumerate(dump_rows(80, seed=28))]
    if suffix == ".jsonl":
        source = write_jsonl(tmp_path / "in.jsonl", rows)
        monkeypatch.setattr(jsonl_format, "JSONL_CHUNK_BYTES", 300)
    else:
        import pyarrow as pa

        source = tmp_path / "in.parquet"
        pq.write_table(pa.Table.from_pylist(rows), source)
        monkeypatch.setattr(parquet_format, "PARQUET_CHUNK_ROWS", 3)
    written = []
    for workers in (1, 2):
        target = tmp_path / f"w{workers}{suffix}"
        run(ScoreJob(inputs=(source,), output=target, data_source=SOURCE, workers=workers))
        written.append(target.read_bytes())
    assert written[0] == written[1]
    out = tmp_path / f"w2{suffix}"
    records = read_jsonl(out) if suffix == ".jsonl" else pq.read_table(out).to_pylist()
    assert_scored(records, rows)


# ------------------------------------------------------------------------ bad rows: --on-error


def test_on_error_skip_lists_the_bad_rows_and_a_clean_run_removes_the_list(
    tmp_path: Path,
) -> None:
    good = [{**row, "step": 1} for row in dump_rows(3, seed=12)]
    bad_truth = json.dumps({**good[0], "gts": {"target": True}})
    source = write_jsonl(tmp_path / "1.jsonl", [good[0], bad_truth, "", "not json", good[1]])
    target = tmp_path / "out.jsonl"
    failures_path = tmp_path / "out.jsonl.failures.jsonl"
    result = run_cli_here(
        "score", source, "-o", target, *NQ, "--on-error", "skip", "--summary-json", tmp_path / "s"
    )
    assert result.returncode == 0, result.stderr
    assert_scored(read_jsonl(target), good[:2])
    failures = read_jsonl(failures_path)
    assert [{k: f[k] for k in ("file", "line", "reason", "row")} for f in failures] == [
        {"file": str(source), "line": 2, "reason": "invalid ground truth", "row": bad_truth},
        {"file": str(source), "line": 4, "reason": "unparsable JSON", "row": "not json"},
    ]
    assert failures[0]["detail"].startswith("invalid ground truth: ")
    assert failures[1]["detail"].startswith("unparsable JSON: ")
    summary = summary_of(tmp_path / "s")
    assert summary["skipped"]["rows"] == 2
    assert summary["skipped"]["reasons"] == {"invalid ground truth": 1, "unparsable JSON": 1}
    assert summary["failures_file"] == str(failures_path)
    assert (
        f"skipped 2 rows: 1 invalid ground truth, 1 unparsable JSON; all in {failures_path}"
        in result.stdout
    )

    write_jsonl(source, good)
    clean = run_cli_here(
        "score", source, "-o", target, *NQ, "--on-error", "skip", "--summary-json", tmp_path / "s"
    )
    assert clean.returncode == 0, clean.stderr
    assert not failures_path.exists()
    assert summary_of(tmp_path / "s")["failures_file"] is None
    assert_scored(read_jsonl(target), good)


def test_a_clean_default_run_removes_a_stale_failures_file(tmp_path: Path) -> None:
    good = dump_rows(2, seed=13)
    source = write_jsonl(tmp_path / "1.jsonl", [good[0], "not json"])
    target = tmp_path / "out.jsonl"
    assert run_cli_here("score", source, "-o", target, *NQ, "--on-error", "skip").returncode == 0
    assert Path(f"{target}.failures.jsonl").exists()
    write_jsonl(source, good)
    assert run_cli_here("score", source, "-o", target, *NQ).returncode == 0
    assert not Path(f"{target}.failures.jsonl").exists()


def test_the_first_bad_row_of_a_run_keeps_the_files_completed_before(tmp_path: Path) -> None:
    """With ``--on-error fail`` the run stops at 2.jsonl line 3: 1.jsonl is complete and in the
    manifest, 2.jsonl and 3.jsonl are not written; ``--resume`` after the fix keeps 1.jsonl."""
    run_dir = tmp_path / "run"
    steps = write_verl_run(run_dir, {1: 3, 2: 4, 3: 2}, seed=14)
    broken = (run_dir / "2.jsonl").read_text().splitlines()
    broken[2] = "{oops"
    (run_dir / "2.jsonl").write_text("\n".join(broken) + "\n")
    out = tmp_path / "out"
    result = run_cli_here("score", run_dir, "-o", out, *NQ)
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"reward-plugins: error: {run_dir / '2.jsonl'}: line 3: unparsable JSON: "
    )
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert sorted(os.listdir(out)) == [MANIFEST_NAME, "1.jsonl"]
    assert list(json.loads((out / MANIFEST_NAME).read_text())["files"]) == ["1.jsonl"]
    assert_scored(read_jsonl(out / "1.jsonl"), steps[1])
    first = (out / "1.jsonl").stat()

    write_verl_run(run_dir, {2: 4}, seed=15)
    resumed = run_cli_here(
        "score", run_dir, "-o", out, *NQ, "--resume", "--summary-json", tmp_path / "s"
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed: kept 1 complete output as written" in resumed.stdout
    assert (out / "1.jsonl").stat().st_ino == first.st_ino
    assert summary_of(tmp_path / "s")["resumed_files"] == [str(run_dir / "1.jsonl")]
    assert_scored(read_jsonl(out / "3.jsonl"), steps[3])
    assert sorted(os.listdir(out)) == [MANIFEST_NAME, "1.jsonl", "2.jsonl", "3.jsonl"]


# ---------------------------------------------------------------------------------- resume


def _one_chunk_hash(path: Path) -> str:
    """The manifest's hash of a JSONL input of one chunk: the sha256 of its chunk's CRC-32."""
    return hashlib.sha256(zlib.crc32(path.read_bytes()).to_bytes(4, "big")).hexdigest()


def _identity(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_ino, status.st_mtime_ns


def test_resume_skips_complete_outputs_and_redoes_the_rest(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    steps = write_verl_run(run_dir, {1: 3, 2: 2, 3: 4}, seed=16)
    out = tmp_path / "out"
    first = run_cli_here("score", run_dir, "-o", out, *NQ)
    assert first.returncode == 0, first.stderr
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["settings"] == {
        "scorer": "compute_score",
        "options": {},
        "data_source": SOURCE,
        "data_source_column": None,
        "response_column": None,
        "ground_truth_column": None,
        "on_error": "fail",
    }
    assert manifest["files"] == {
        f"{step}.jsonl": {
            "input": str((run_dir / f"{step}.jsonl").resolve()),
            "size": (run_dir / f"{step}.jsonl").stat().st_size,
            "sha256": _one_chunk_hash(run_dir / f"{step}.jsonl"),
            "rows": len(rows),
            "scored": len(rows),
            "output_size": (out / f"{step}.jsonl").stat().st_size,
            "output_crc32": f"{zlib.crc32((out / f'{step}.jsonl').read_bytes()):08x}",
        }
        for step, rows in steps.items()
    }
    assert manifest["files"]["1.jsonl"]["sha256"] == FORMATS[".jsonl"].fingerprint(
        run_dir / "1.jsonl"
    )

    names = ("1.jsonl", "2.jsonl", "3.jsonl")
    summary = tmp_path / "s.json"

    def identities() -> dict[str, tuple[int, int]]:
        return {name: _identity(out / name) for name in names}

    def resume(*options: str) -> list[str]:
        """Run with --resume; the inputs it kept the outputs of."""
        args = ("-o", out, *NQ, *options, "--resume", "--summary-json", summary)
        result = run_cli_here("score", run_dir, *args)
        assert result.returncode == 0, result.stderr
        resumed: list[str] = summary_of(summary)["resumed_files"]
        if len(resumed) == len(names):
            assert result.stdout == f"resumed: all 3 outputs of {out} complete; nothing to score\n"
        elif resumed:
            noun = "output" if len(resumed) == 1 else "outputs"
            assert f"resumed: kept {len(resumed)} complete {noun} as written" in result.stdout
        return resumed

    before = identities()  # everything complete: nothing rewritten
    assert resume() == [str(run_dir / name) for name in names]
    assert identities() == before

    # An appended line (size changes) and an edit of the same size (hash changes): re-scored.
    extra = {**dump_rows(1, seed=17)[0], "step": 2}
    with (run_dir / "2.jsonl").open("a", encoding="utf-8") as stream:
        stream.write(verl_dump_line(extra) + "\n")
    text = (run_dir / "3.jsonl").read_text()
    (run_dir / "3.jsonl").write_text(text.replace("Question 0?", "Question 9?", 1))
    assert resume() == [str(run_dir / "1.jsonl")]
    after = identities()
    assert after["1.jsonl"] == before["1.jsonl"]
    assert after["2.jsonl"] != before["2.jsonl"] and after["3.jsonl"] != before["3.jsonl"]
    assert_scored(read_jsonl(out / "2.jsonl"), [*steps[2], extra])
    assert read_jsonl(out / "3.jsonl")[0]["input"] == "Question 9?"
    files = json.loads((out / MANIFEST_NAME).read_text())["files"]
    assert files["2.jsonl"]["rows"] == 3
    assert files["2.jsonl"]["size"] == (run_dir / "2.jsonl").stat().st_size
    assert files["3.jsonl"]["sha256"] == _one_chunk_hash(run_dir / "3.jsonl")

    # An output truncated, or edited without changing its size, after it was written: redone.
    complete = {name: (out / name).read_bytes() for name in names}
    (out / "1.jsonl").write_bytes(complete["1.jsonl"][:-40])
    edited = complete["2.jsonl"].replace(b'"reward_em":1.0', b'"reward_em":0.0', 1)
    assert edited != complete["2.jsonl"]
    (out / "2.jsonl").write_bytes(edited)
    result = run_cli_here("score", run_dir, "-o", out, *NQ, "--resume", "--summary-json", summary)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:3] == [
        "resumed: kept 1 complete output as written",
        f"resumed: 2 outputs differ in size or CRC-32 from when written (truncated or edited "
        f"since), scored again: {out / '1.jsonl'}, {out / '2.jsonl'}",
    ]
    assert summary_of(summary)["changed_outputs"] == [str(out / "1.jsonl"), str(out / "2.jsonl")]
    assert {name: (out / name).read_bytes() for name in names} == complete
    assert resume() == [str(run_dir / name) for name in names]

    # Entries without the output's fingerprint (an older manifest): scored, not called changed.
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    for entry in manifest["files"].values():
        del entry["output_size"], entry["output_crc32"]
    (out / MANIFEST_NAME).write_text(json.dumps(manifest))
    assert resume() == []
    assert summary_of(summary)["changed_outputs"] == []
    assert {name: (out / name).read_bytes() for name in names} == complete

    # A deleted output is written again.
    (out / "1.jsonl").unlink()
    assert resume() == [str(run_dir / "2.jsonl"), str(run_dir / "3.jsonl")]
    assert_scored(read_jsonl(out / "1.jsonl"), steps[1])

    # Other scorer options: the manifest no longer applies, everything is re-scored.
    before = identities()
    assert resume("--set", "format_score=0.1") == []
    assert all(identity != before[name] for name, identity in identities().items())
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["settings"]["options"] == {"format_score": 0.1}
    assert sorted(manifest["files"]) == sorted(names)
    assert temporaries(tmp_path) == []


# ------------------------------------------------------------------------------ extra_info


TOOL_CALL_RESPONSE = (
    '<tool_call>{"name": "search", "arguments": {"query": "capital"}}</tool_call>'
    "<tool_response>Paris is the capital.</tool_response><answer> Paris </answer>"
)


def test_tool_rewards_of_a_dump_are_re_scored(tmp_path: Path) -> None:
    """A multi-turn dump's ``tool_rewards`` column reaches ``compute_score_tool`` as
    ``extra_info["tool_rewards"]``, as verl's reward manager hands it over."""
    rows = [
        {"input": "q", "output": TOOL_CALL_RESPONSE, "gts": ["Paris"], "tool_rewards": rewards}
        for rewards in ([0.25, 0.5], [], None)
    ]
    rows.append({**rows[0], "num_turns": 3})
    del rows[2]["tool_rewards"]
    source = write_jsonl(tmp_path / "1.jsonl", rows)
    scores = {}
    for weight in (0, 1):
        out = tmp_path / f"weight{weight}.jsonl"
        args = ("--scorer", "compute_score_tool", "--set", f"tool_reward_weight={weight}")
        result = run_cli_here("score", source, "-o", out, *NQ, *args)
        assert result.returncode == 0, result.stderr
        scores[weight] = [row["reward_score"] for row in read_jsonl(out)]
        assert [row["reward_tool_reward_sum"] for row in read_jsonl(out)] == [0.75, 0, 0, 0.75]
    assert scores[0] == [1.0] * 4
    assert scores[1] == [1.75, 1.0, 1.0, 1.75]
    expected = reward_plugins.compute_score_tool(
        SOURCE, TOOL_CALL_RESPONSE, ["Paris"], {"tool_rewards": [0.25, 0.5]},
        tool_reward_weight=1,
    )  # fmt: skip
    assert reward_values(read_jsonl(tmp_path / "weight1.jsonl")[0]) == dict(expected)


def test_the_documented_tool_rewards_run(tmp_path: Path) -> None:
    result, _ = run_docs_block("## What the scorer receives", tmp_path)
    assert result.returncode == 0, result.stderr
    (row,) = read_jsonl(tmp_path / "turns.scored.jsonl")
    assert (row["reward_score"], row["reward_tool_reward_sum"]) == (1.75, 0.75)


def test_the_extra_info_column_of_a_dataset(tmp_path: Path) -> None:
    """A verl dataset's ``extra_info`` mapping (a parquet struct), with a row's agent-loop
    columns laid over it; an ``extra_info`` that is not a mapping is a bad row."""
    rows = [
        {"prompt": "q", "response": TOOL_CALL_RESPONSE, "reward_model": {"ground_truth": ["Paris"]},
         "extra_info": {"index": index, "tool_rewards": [0.5] * index}, "tool_rewards": None}
        for index in range(3)
    ]  # fmt: skip
    rows[2]["tool_rewards"] = [2.0]  # laid over extra_info's, where it is not null
    source = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows), source)
    out = tmp_path / "out.parquet"
    args = ("--scorer", "compute_score_tool", "--set", "tool_reward_weight=1")
    result = run_cli_here("score", source, "-o", out, *NQ, *args)
    assert result.returncode == 0, result.stderr
    assert pq.read_table(out).column("reward_tool_reward_sum").to_pylist() == [0.0, 0.5, 2.0]
    bad = write_jsonl(tmp_path / "bad.jsonl", [{**rows[0], "extra_info": "index=0"}])
    result = run_cli_here("score", bad, "-o", tmp_path / "bad.out.jsonl", *NQ, *args)
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"reward-plugins: error: {bad}: line 1: extra_info (column 'extra_info') must be an "
        "object, got str"
    )


# -------------------------------------------------------------- stringified ground truths


STRINGIFIED_GOLDS = [
    ["Paris", "paris city"],
    ["x" * 50 + " A", "y" * 50 + " B"],  # numpy wraps the line: "...'\n '..."
    ["it's", 'say "hi"'],
    ["é", "back\\slash"],
]


def test_stringified_ground_truths_are_read_as_lists_of_golds(tmp_path: Path) -> None:
    """Older verl dumps wrote numpy arrays through ``default=str``: ``"['a' 'b']"``, alone or as
    ``target``. Each is scored as its list of golds (the answer is the last gold, so the EM is 1
    only if the list was restored); ``"[1 2]"`` and ``"['a', 'b']"`` stay strings."""
    rows: list[dict[str, Any]] = []
    expected: list[dict[str, Any]] = []
    for golds in STRINGIFIED_GOLDS:
        response = f"<answer> {golds[-1]} </answer>"
        for truth in ({"target": np.array(golds)}, np.array(golds)):
            rows.append({"input": "q", "output": response, "gts": truth, "step": 1})
            real = {"target": golds} if isinstance(truth, dict) else golds
            expected.append(dict(reward_plugins.compute_score(SOURCE, response, real)))
    literal = ["[1 2]", "['a', 'b']", str(np.array([1, 2]))]
    for text in literal:
        rows.append({"input": "q", "output": "<answer> a b </answer>", "gts": text, "step": 1})
        expected.append(dict(reward_plugins.compute_score(SOURCE, "<answer> a b </answer>", text)))
    source = tmp_path / "1.jsonl"
    source.write_text("".join(verl_dump_line(row) + "\n" for row in rows), encoding="utf-8")
    written = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    assert written[0]["gts"] == {"target": "['Paris' 'paris city']"}
    assert "\n" in written[2]["gts"]["target"]

    result = run_cli_here(
        "score", source, "-o", tmp_path / "o.jsonl", *NQ, "--summary-json", tmp_path / "s"
    )
    assert result.returncode == 0, result.stderr
    out = read_jsonl(tmp_path / "o.jsonl")
    assert [reward_values(record) for record in out] == expected
    assert [record["reward_em"] for record in out[:8]] == [1.0] * 8
    assert [record["gts"] for record in out] == [row["gts"] for row in written]  # unchanged
    assert summary_of(tmp_path / "s")["stringified_ground_truths"] == 8
    assert (
        "read 8 ground truths stringified by numpy (\"['a' 'b']\") as lists of golds"
        in result.stdout
    )


def test_a_shortened_numpy_array_cannot_be_restored(tmp_path: Path) -> None:
    """numpy prints arrays of more than 1,000 items with ``...``: the golds are lost."""
    golds = np.array([f"g{i}" for i in range(1001)])
    good = {"input": "q", "output": "<answer> g1 </answer>", "gts": {"target": ["g1"]}}
    shortened = {**good, "gts": {"target": golds}}
    source = tmp_path / "1.jsonl"
    source.write_text(verl_dump_line(good) + "\n" + verl_dump_line(shortened) + "\n")
    assert "..." in json.loads(source.read_text().splitlines()[1])["gts"]["target"]

    failed = run_cli_here("score", source, "-o", tmp_path / "o.jsonl", *NQ)
    assert failed.returncode == 1
    assert failed.stderr.startswith(
        f"reward-plugins: error: {source}: line 2: invalid ground truth: \"['g0' 'g1' "
    )
    assert "its golds cannot be restored" in failed.stderr
    assert sorted(os.listdir(tmp_path)) == ["1.jsonl"]

    skipped = run_cli_here("score", source, "-o", tmp_path / "o.jsonl", *NQ, "--on-error", "skip")
    assert skipped.returncode == 0, skipped.stderr
    (failure,) = read_jsonl(tmp_path / "o.jsonl.failures.jsonl")
    assert (failure["line"], failure["reason"]) == (2, "invalid ground truth")
    assert "cannot be restored" in failure["detail"]
    assert len(read_jsonl(tmp_path / "o.jsonl")) == 1


# ---------------------------------------------------------------------------------- summary


def test_summary_json_has_a_series_per_step(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_verl_run(run_dir, {10: 7, 2: 5, 1: 6}, seed=18)
    out = tmp_path / "out"
    result = run_cli_here("score", run_dir, "-o", out, *NQ, "--summary-json", tmp_path / "s.json")
    assert result.returncode == 0, result.stderr
    assert "\n3 steps (per-step series in --summary-json)\n" in result.stdout
    summary = summary_of(tmp_path / "s.json")
    assert set(summary) == {
        "input",
        "files",
        "resumed_files",
        "changed_outputs",
        "output",
        "failures_file",
        "scorer",
        "options",
        "backend",
        "workers",
        "columns",
        "data_source_option",
        "datasets",
        "rows",
        "scored",
        "stringified_ground_truths",
        "replaced_columns",
        "skipped",
        "results",
        "sources",
        "overall",
        "steps",
        "seconds",
    }
    assert set(summary["seconds"]) == {"total", "workers", "write", "summary"}
    assert all(isinstance(v, float) and v >= 0 for v in summary["seconds"].values())
    assert [(s["step"], s["rows"]) for s in summary["steps"]] == [(1, 6), (2, 5), (10, 7)]
    for entry in summary["steps"]:
        assert set(entry) == {"step", "rows", "metrics"}
        records = read_jsonl(out / f"{entry['step']}.jsonl")
        assert list(entry["metrics"]) == list(SUMMARY_KEYS)
        for key, metric in entry["metrics"].items():
            values = [record[f"reward_{key}"] for record in records]
            assert metric["mean"] == pytest.approx(sum(values) / len(values), rel=1e-12)
            assert min(values) <= metric["low"] <= metric["mean"] <= metric["high"] <= max(values)
    assert summary["overall"]["rows"] == summary["sources"][SOURCE]["rows"] == 18


# ------------------------------------------------------------- regressions found under stress


PARQUET_FIRST = {"output": "<answer> x </answer>", "gts": "x", "only1": 1, "k": 1}


@pytest.mark.parametrize(
    "second",
    [
        {"output": "<answer> y </answer>", "gts": "x", "only2": "a", "k": 2},
        {"output": "<answer> y </answer>", "gts": "x", "only1": 1, "k": "b"},
    ],
    ids=["other-columns", "other-type"],
)
def test_a_directory_run_of_parquet_files_keeps_each_files_columns(
    tmp_path: Path, second: dict[str, Any]
) -> None:
    import pyarrow as pa

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    rows = {"1.parquet": [PARQUET_FIRST], "2.parquet": [second]}
    for name, table_rows in rows.items():
        pq.write_table(pa.Table.from_pylist(table_rows), run_dir / name)
    result = run_cli_here("score", run_dir, "-o", tmp_path / "out", *NQ)
    assert result.returncode == 0, result.stderr
    for name, table_rows in rows.items():
        table = pq.read_table(tmp_path / "out" / name)
        assert table.column_names == [*table_rows[0], *(f"reward_{k}" for k in REWARD_KEYS)]
        assert table.select(list(table_rows[0])).to_pylist() == table_rows


@pytest.mark.parametrize("layout", ["one empty file", "run with an empty first step"])
def test_an_empty_input_gives_an_empty_output(tmp_path: Path, layout: str) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "1.jsonl").write_bytes(b"")
    if layout == "one empty file":
        result = run_cli_here("score", run_dir / "1.jsonl", "-o", tmp_path / "o.jsonl", *NQ)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "o.jsonl").read_bytes() == b""
        return
    steps = write_verl_run(run_dir, {2: 3}, seed=19)
    result = run_cli_here("score", run_dir, "-o", tmp_path / "out", *NQ)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "1.jsonl").read_bytes() == b""
    assert_scored(read_jsonl(tmp_path / "out" / "2.jsonl"), steps[2])


def test_an_empty_later_file_of_a_run_gives_an_empty_output(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    steps = write_verl_run(run_dir, {1: 3}, seed=20)
    (run_dir / "2.jsonl").write_bytes(b"")
    result = run_cli_here("score", run_dir, "-o", tmp_path / "out", *NQ)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "2.jsonl").read_bytes() == b""
    assert_scored(read_jsonl(tmp_path / "out" / "1.jsonl"), steps[1])
    files = json.loads((tmp_path / "out" / MANIFEST_NAME).read_text())["files"]
    assert (files["2.jsonl"]["rows"], files["2.jsonl"]["scored"]) == (0, 0)
