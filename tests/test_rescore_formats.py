"""The engine's file formats and its temporary files.

Every entry of ``formats.FORMATS`` reads back what it writes, from and to every other format,
through the real ``score`` engine; no module of the engine but the format modules names a suffix;
and every file the engine writes goes through one atomic writer whose temporary files, left by
a killed run, the next run removes.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from test_cli_helpers import (
    TEMP_SUFFIX,
    dump_rows,
    run_cli_here,
    run_cli_with_script,
    temporaries,
    write_jsonl,
    write_verl_run,
)

import reward_plugins
from reward_plugins import compute_score
from reward_plugins.rescore import ScoreJob, run
from reward_plugins.rescore.files import MANIFEST_NAME, file_format
from reward_plugins.rescore.formats import FORMATS, SUFFIXES, rows_of

SOURCE = "searchR1_nq"
PACKAGE = Path(reward_plugins.__file__).parent


def _rows() -> list[dict[str, Any]]:
    """A few dump rows with strings, numbers, lists, a mapping and a null."""
    rows = dump_rows(4, seed=5)
    for index, row in enumerate(rows):
        row["meta"] = {"turns": index, "tags": ["a", "b"][: index % 3], "note": None}
    return rows


def _read(path: Path) -> list[dict[str, Any]]:
    parsed = [record for _, record in rows_of(path, file_format(path))]
    assert all(isinstance(record, dict) for record in parsed)
    return parsed  # type: ignore[return-value]


def test_the_table_is_keyed_by_each_formats_suffix() -> None:
    assert SUFFIXES == (".jsonl", ".jsonl.gz", ".parquet")
    assert all(fmt.suffix == suffix for suffix, fmt in FORMATS.items())
    assert file_format(Path("run/7.jsonl.gz")) is FORMATS[".jsonl.gz"]
    assert file_format(Path("data.parquet")) is FORMATS[".parquet"]
    assert [FORMATS[s].unit for s in SUFFIXES] == ["line", "line", "row"]


@pytest.mark.parametrize("first", SUFFIXES)
@pytest.mark.parametrize("second", SUFFIXES)
def test_every_format_reads_back_what_it_writes(tmp_path: Path, first: str, second: str) -> None:
    """JSONL -> ``first`` -> ``second``: the rows and their reward columns come back equal."""
    rows = _rows()
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    one, two = tmp_path / f"one{first}", tmp_path / f"two{second}"
    summary = run(ScoreJob((source,), one, data_source=SOURCE))
    assert (summary["rows"], summary["scored"]) == (4, 4)
    written = _read(one)
    assert [{k: v for k, v in r.items() if not k.startswith("reward_")} for r in written] == rows
    rewards = [{k: v for k, v in r.items() if k.startswith("reward_")} for r in written]
    expected = [
        {
            f"reward_{key}": value
            for key, value in compute_score(SOURCE, r["output"], r["gts"]).items()
        }
        for r in rows
    ]
    assert rewards == expected

    summary = run(ScoreJob((one,), two, data_source=SOURCE))
    assert summary["replaced_columns"] == sorted(rewards[0])
    assert _read(two) == written


def test_only_the_format_modules_name_a_suffix() -> None:
    """No string literal of the engine (nor of the CLI) outside ``rescore/formats/`` is a format's
    suffix: a branch on a suffix lives in its format's module."""
    engine = PACKAGE / "rescore"
    modules = [
        m for m in sorted(engine.rglob("*.py")) if m.relative_to(engine).parts[0] != "formats"
    ]
    modules += sorted((PACKAGE / "cli").glob("*.py"))
    assert PACKAGE / "rescore" / "report" / "run.py" in modules  # subpackages are scanned
    found = []
    for module in modules:
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in SUFFIXES:
                found.append(f"{module.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
    assert found == []


# ------------------------------------------------------------------ stale temporary files

DIE_AT = """
import os, signal, sys, tempfile
from reward_plugins.cli import main

name, create = sys.argv.pop(1), tempfile.mkstemp


def create_then_die(*args, **kwargs):
    made = create(*args, **kwargs)
    if kwargs.get("prefix") == f".{name}.{os.getpid()}.":
        os.kill(os.getpid(), signal.SIGKILL)  # as a killed run: nothing is cleaned up
    return made


tempfile.mkstemp = create_then_die
sys.exit(main(sys.argv[1:]))
"""


WRITERS = {
    # writer: (the file whose temporary the run is killed at, the command's arguments)
    "jsonl output": ("o.jsonl", ["in.jsonl", "-o", "out/o.jsonl"]),
    "jsonl.gz output": ("o.jsonl.gz", ["in.jsonl", "-o", "out/o.jsonl.gz"]),
    "parquet output": ("o.parquet", ["in.jsonl", "-o", "out/o.parquet"]),
    "failures file": (
        "o.jsonl.failures.jsonl",
        ["bad.jsonl", "-o", "out/o.jsonl", "--on-error", "skip"],
    ),
    "manifest": (MANIFEST_NAME, ["run", "-o", "out"]),
    "summary": ("s.json", ["in.jsonl", "-o", "out/o.jsonl", "--summary-json", "out/s.json"]),
    "writable-directory probe": ("reward-plugins-probe", ["in.jsonl", "-o", "out/o.jsonl"]),
}


@pytest.mark.parametrize("writer", WRITERS)
def test_the_next_run_removes_the_temporaries_of_every_writer(tmp_path: Path, writer: str) -> None:
    """A run killed (SIGKILL) just after a writer made its temporary file leaves it; the next
    run of the same command removes it and completes."""
    name, args = WRITERS[writer]
    rows = dump_rows(6, seed=3)
    write_jsonl(tmp_path / "in.jsonl", rows)
    write_jsonl(tmp_path / "bad.jsonl", ["{broken", *(json.dumps(row) for row in rows)])
    write_verl_run(tmp_path / "run", {1: 3, 2: 3})
    (tmp_path / "out").mkdir()
    command = ["score", *args, "--data-source", SOURCE]

    killed = run_cli_with_script(DIE_AT, name, *command, cwd=tmp_path)
    assert killed.returncode == -9, killed.stderr
    left = temporaries(tmp_path)  # the output's too, when the run dies at its failures file
    assert any(Path(path).name.startswith(f".{name}.") for path in left), left
    assert all(path.endswith(TEMP_SUFFIX) for path in left)

    again = run_cli_here(*command, cwd=tmp_path)
    assert (again.returncode, again.stderr) == (0, "")
    assert temporaries(tmp_path) == []
