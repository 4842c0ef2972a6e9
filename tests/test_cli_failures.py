"""``reward-plugins score`` failure modes: each a one-line ``reward-plugins: error:`` on stderr
naming the user's path (never a temporary file), exit 2 for usage and paths (checked before any
row is scored), 1 for data; nothing half-written left behind.

Tests run as root here and in CI, so an unwritable location is found on a read-only or
pseudo filesystem, and file sizes are limited with ``ulimit -f`` in the CLI's own process.
"""

from __future__ import annotations

import contextlib
import decimal
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_cli_helpers import (
    REPO,
    TEMP_SUFFIX,
    dump_rows,
    one_line_error,
    read_jsonl,
    reward_values,
    run_cli,
    run_cli_here,
    run_cli_in_shell,
    run_cli_with_script,
    temporaries,
    write_jsonl,
    write_verl_run,
)

import reward_plugins
from reward_plugins.cli import main
from reward_plugins.rescore import files
from reward_plugins.rescore.files import MANIFEST_NAME
from reward_plugins.rescore.formats.jsonl import JSONL_CHUNK_BYTES

SOURCE = "searchR1_nq"
NQ = ("--data-source", SOURCE)
SKIP_HINT = " (--on-error skip goes on, listing bad rows in OUTPUT.failures.jsonl)"

TEST_SCORERS = """
import os, sys, time
import numpy as np
from reward_plugins import register
from reward_plugins.cli import main


@register("gated_reward", ["test_cli_failures"])
def gated_reward(solution_str, golds):
    # A row answering "wait" is scored once the file $RP_TEST_GATE exists (60 s at most).
    deadline = time.monotonic() + 60
    while solution_str == "wait" and time.monotonic() < deadline:
        if os.path.exists(os.environ["RP_TEST_GATE"]):
            break
        time.sleep(0.01)
    return {"score": 1.0}


@register("number_reward", ["test_cli_failures"])
def number_reward(solution_str, golds):
    return {"score": float(solution_str)}


@register("numpy_reward", ["test_cli_failures"])
def numpy_reward(solution_str, golds):
    return {"score": np.float64(len(solution_str) % 2), "length": np.int64(len(solution_str))}


sys.exit(main(sys.argv[1:]))
"""
"""Scorers registered in the CLI's own process (as a plugin would be), then the CLI."""

TEST_SOURCE = ("--data-source", "test_cli_failures")


def listing(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` (hidden ones too) with the sha256 of its bytes."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def rows_file(tmp_path: Path) -> Path:
    """A verl dump of 4 rows whose first line does not parse: an error about it would show that
    the file was scored when the run should have stopped before any work."""
    rows = [{**row, "step": 1} for row in dump_rows(4, seed=21)]
    return write_jsonl(tmp_path / "1.jsonl", ["{broken", *rows])


# ---------------------------------------------------------------------- output is the input


@pytest.mark.parametrize(
    ("layout", "extra"),
    [
        ("file", ()),
        ("file", ("--on-error", "skip")),
        ("same file, other spelling", ()),
        ("gzip file", ()),
        ("run directory", ()),
        ("run directory", ("--on-error", "skip", "--resume")),
        ("merge into one of the run's files", ("--merge",)),
    ],
    ids=["file", "file-skip", "other-spelling", "gzip", "run", "run-skip-resume", "merge"],
)
def test_an_output_that_is_an_input_is_refused(
    tmp_path: Path, layout: str, extra: tuple[str, ...]
) -> None:
    """Refused before any work, naming the output and the input it is; every file unchanged,
    byte for byte, and nothing created."""
    run_dir = tmp_path / "run"
    write_verl_run(run_dir, {1: 3, 2: 3})
    (run_dir / "3.jsonl.gz").write_bytes(b"not even gzip: never read")
    one, two, packed = run_dir / "1.jsonl", run_dir / "2.jsonl", run_dir / "3.jsonl.gz"
    other_spelling = tmp_path / "run" / ".." / "run" / "1.jsonl"
    cases: dict[str, tuple[Path, Path, Path, Path]] = {
        # layout: (input, -o, the output named, the input named)
        "file": (one, one, one, one),
        "same file, other spelling": (one, other_spelling, other_spelling, one),
        "gzip file": (packed, packed, packed, packed),
        "run directory": (run_dir, run_dir, one, one),
        "merge into one of the run's files": (run_dir, two, two, two),
    }
    source, output, target_named, source_named = cases[layout]
    before = listing(tmp_path)
    result = run_cli_here("score", source, "-o", output, *NQ, *extra)
    assert result.returncode == 2
    assert one_line_error(result) == (
        f"output {target_named}: is the input {source_named}; write it elsewhere"
    )
    assert listing(tmp_path) == before


# ------------------------------------------------------------------ unwritable locations


def _unwritable_directory() -> Path | None:
    """An existing directory where this process (root included) cannot create a file."""
    for candidate in (Path("/sys"), Path("/sys/kernel"), Path("/proc")):
        if not candidate.is_dir():
            continue
        try:
            descriptor, name = tempfile.mkstemp(dir=candidate)
        except OSError:
            return candidate
        os.close(descriptor)  # writable after all: not a candidate
        os.unlink(name)
    return None


UNWRITABLE = _unwritable_directory()


@pytest.mark.skipif(UNWRITABLE is None, reason="no directory here refuses files to this user")
@pytest.mark.parametrize("kind", ["file output", "directory output", "summary"])
def test_an_unwritable_location_is_refused_before_any_work(
    tmp_path: Path, rows_file: Path, kind: str
) -> None:
    assert UNWRITABLE is not None
    run_dir = tmp_path / "run"
    write_verl_run(run_dir, {1: 2, 2: 2})
    before = listing(tmp_path)
    if kind == "file output":
        target = UNWRITABLE / "rp-out.jsonl"
        result = run_cli_here("score", rows_file, "-o", target, *NQ)
        expected = f"output {target}: cannot write in {UNWRITABLE}: "
    elif kind == "directory output":
        target = UNWRITABLE / "rp-out"
        result = run_cli_here("score", run_dir, "-o", target, *NQ)
        expected = f"output {target}: cannot write in {target}: "
    else:
        target = UNWRITABLE / "rp-summary.json"
        result = run_cli_here(
            "score", rows_file, "-o", tmp_path / "o.jsonl", *NQ, "--summary-json", target
        )
        expected = f"--summary-json {target}: cannot write in {UNWRITABLE}: "
    assert result.returncode == 2
    message = one_line_error(result)
    assert message.startswith(expected) and len(message) > len(expected), message
    assert not target.exists()
    assert listing(tmp_path) == before


# ---------------------------------------------------------------- paths that do not fit


def _path_case(tmp_path: Path, rows_file: Path, case: str) -> tuple[list[Any], str]:
    """The arguments of a case and the message expected."""
    run_dir = tmp_path / "run"
    write_verl_run(run_dir, {1: 2, 2: 2})
    (tmp_path / "file.txt").write_text("a file\n")
    (tmp_path / "dir.jsonl").mkdir()
    other = tmp_path / "other"
    write_verl_run(other, {1: 2})
    cases: dict[str, tuple[list[Any], str]] = {
        "output is a directory": (
            [rows_file, "-o", tmp_path / "dir.jsonl"],
            f"output {tmp_path / 'dir.jsonl'}: is a directory, not a file",
        ),
        "output under a file": (
            [rows_file, "-o", tmp_path / "file.txt" / "out.jsonl"],
            f"output {tmp_path / 'file.txt' / 'out.jsonl'}: {tmp_path / 'file.txt'} is a file, "
            "not a directory",
        ),
        "run output is a file": (
            [run_dir, "-o", tmp_path / "file.txt"],
            f"output {tmp_path / 'file.txt'}: not a directory (a run of 2 files is written to a "
            "directory, one file per input; --merge writes one file)",
        ),
        "run output named like a file": (
            [run_dir, "-o", tmp_path / "one.jsonl"],
            f"output {tmp_path / 'one.jsonl'}: names a file, but a run of 2 files is written to "
            f"a directory, one file per input: give --merge to write them all to "
            f"{tmp_path / 'one.jsonl'}, or a directory name",
        ),
        "merge output is a directory": (
            [run_dir, "--merge", "-o", tmp_path / "dir.jsonl"],
            f"output {tmp_path / 'dir.jsonl'}: is a directory, not a file",
        ),
        "two inputs with one name": (
            [run_dir, other, "-o", tmp_path / "out"],
            f"output {tmp_path / 'out'}: two inputs are named '1.jsonl'; a directory output "
            "mirrors the input names (use --merge)",
        ),
        "unsupported output format": (
            [rows_file, "-o", tmp_path / "out.csv"],
            f"output {tmp_path / 'out.csv'}: unsupported format '.csv'; use .jsonl, .jsonl.gz, "
            ".parquet",
        ),
        "resume with one input": (
            [rows_file, "-o", tmp_path / "o.jsonl", "--resume"],
            "--resume needs a run (a directory of inputs) and a directory OUTPUT",
        ),
        "resume with merge": (
            [run_dir, "-o", tmp_path / "o.jsonl", "--merge", "--resume"],
            "--resume needs a run (a directory of inputs) and a directory OUTPUT",
        ),
        "summary in a missing directory": (
            [rows_file, "-o", tmp_path / "o.jsonl", "--summary-json", tmp_path / "no" / "s.json"],
            f"--summary-json {tmp_path / 'no' / 's.json'}: no such directory {tmp_path / 'no'}",
        ),
        "summary is a directory": (
            [rows_file, "-o", tmp_path / "o.jsonl", "--summary-json", tmp_path / "dir.jsonl"],
            f"--summary-json {tmp_path / 'dir.jsonl'}: is a directory",
        ),
        "workers below one": (
            [rows_file, "-o", tmp_path / "o.jsonl", "--workers", "0"],
            "--workers must be at least 1, got 0",
        ),
    }
    return cases[case]


PATH_CASES = [
    "output is a directory",
    "output under a file",
    "run output is a file",
    "run output named like a file",
    "merge output is a directory",
    "two inputs with one name",
    "unsupported output format",
    "resume with one input",
    "resume with merge",
    "summary in a missing directory",
    "summary is a directory",
    "workers below one",
]


@pytest.mark.parametrize("case", PATH_CASES)
def test_outputs_that_do_not_fit_are_refused_before_any_work(
    tmp_path: Path, rows_file: Path, case: str
) -> None:
    args, expected = _path_case(tmp_path, rows_file, case)
    before = listing(tmp_path)
    result = run_cli_here("score", *args, *NQ)
    assert result.returncode == 2
    assert one_line_error(result) == expected
    assert listing(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["1.jsonl", "run", "other", "file.txt", "dir.jsonl"]
    )


def _input_case(tmp_path: Path, case: str) -> tuple[str | Path, str]:
    good = write_jsonl(tmp_path / "good.jsonl", dump_rows(2))
    if case == "unsupported format":
        path = tmp_path / "rows.csv"
        path.write_text("a,b\n")
        return path, f"input {path}: unsupported format '.csv'; use .jsonl, .jsonl.gz, .parquet"
    if case == "missing file":
        path = tmp_path / "missing.jsonl"
        return path, f"input {path}: no such file or directory"
    if case == "pattern matching nothing":
        pattern = f"{tmp_path}/steps/*.jsonl"
        return pattern, f"input {pattern}: the pattern matches no .jsonl, .jsonl.gz, .parquet file"
    if case == "directory without data files":
        directory = tmp_path / "notes"
        directory.mkdir()
        (directory / "README.md").write_text("no data\n")
        (directory / "sub").mkdir()
        (directory / "sub" / "1.jsonl").write_bytes(good.read_bytes())
        return directory, (
            f"input {directory}: the directory has no .jsonl, .jsonl.gz, .parquet files"
        )
    if case == "not gzip":
        path = tmp_path / "rows.jsonl.gz"
        path.write_bytes(good.read_bytes())
        return path, f"input {path}: cannot read: Not a gzipped file"
    if case == "truncated gzip":
        import gzip

        path = tmp_path / "rows.jsonl.gz"
        path.write_bytes(gzip.compress(good.read_bytes())[:-12])
        return path, f"input {path}: cannot read: Compressed file ended before the end-of-stream"
    assert case == "not parquet"
    path = tmp_path / "rows.parquet"
    path.write_bytes(good.read_bytes())
    return path, f"input {path}: not a readable parquet file: Parquet magic bytes not found"


@pytest.mark.parametrize(
    "case",
    [
        "unsupported format",
        "missing file",
        "pattern matching nothing",
        "directory without data files",
        "not gzip",
        "truncated gzip",
        "not parquet",
    ],
)
def test_inputs_that_cannot_be_read(tmp_path: Path, case: str) -> None:
    """The message as expected, or for what gzip and pyarrow report, starting as expected."""
    spec, expected = _input_case(tmp_path, case)
    before = listing(tmp_path)
    result = run_cli_here("score", spec, "-o", tmp_path / "out.jsonl", *NQ)
    assert result.returncode == 2
    message = one_line_error(result)
    if "cannot read" in expected or "not a readable" in expected:
        assert message.startswith(expected), message
    else:
        assert message == expected
    assert listing(tmp_path) == before


def test_a_data_source_and_its_column_together_are_a_usage_error(
    tmp_path: Path, rows_file: Path
) -> None:
    """A usage error in one line; nothing scored."""
    result = run_cli_here(
        "score", rows_file, "-o", tmp_path / "o.jsonl", *NQ, "--data-source-column", "ds"
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert result.stderr == (
        "reward-plugins: error: score: give --data-source or --data-source-column, not both "
        "(see reward-plugins score --help)\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["1.jsonl"]


def test_a_directory_in_place_of_a_run_output_file(tmp_path: Path) -> None:
    """``OUT/2.jsonl`` is a directory: the run stops naming it, before any work."""
    run_dir = tmp_path / "run"
    write_verl_run(run_dir, {1: 2, 2: 2})
    (tmp_path / "out" / "2.jsonl").mkdir(parents=True)
    result = run_cli_here("score", run_dir, "-o", tmp_path / "out", *NQ)
    assert result.returncode == 2
    assert (
        one_line_error(result)
        == f"output {tmp_path / 'out' / '2.jsonl'}: is a directory, not a file"
    )
    assert (tmp_path / "out" / "2.jsonl").is_dir()
    assert not (tmp_path / "out" / "1.jsonl").exists()
    assert temporaries(tmp_path) == []


# -------------------------------------------------------------------- file size, disk full


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_file_size_limit_fails_the_run_and_keeps_the_old_output(
    tmp_path: Path, workers: str
) -> None:
    """Under ``ulimit -f 64`` (64 KiB) the output cannot be written: one line naming the output
    and the reason, no temporary file, and the output of an earlier run left as it was."""
    source = write_jsonl(tmp_path / "in.jsonl", dump_rows(300, seed=22))
    assert source.stat().st_size > 64 * 1024
    target = tmp_path / "out.jsonl"
    target.write_text("an earlier output\n")
    target.chmod(0o640)
    result = run_cli_in_shell(
        "ulimit -f 64", "score", source, "-o", target, *NQ, "--workers", workers
    )
    assert result.returncode == 2
    assert one_line_error(result) == f"output {target}: cannot write: File too large"
    assert target.read_text() == "an earlier output\n"
    assert target.stat().st_mode & 0o777 == 0o640
    assert temporaries(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl", "out.jsonl"]


# ---------------------------------------------------------------------------- deep nesting


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_deeply_nested_line_is_a_bad_row(tmp_path: Path, suffix: str) -> None:
    rows = [{**row, "step": 1} for row in dump_rows(3, seed=23)]
    deep = '{"output": "x", "gts": {"target": ["x"]}, "deep": ' + DEEP + "}"
    source = write_jsonl(tmp_path / "in.jsonl", [rows[0], rows[1], deep, rows[2]])
    target = tmp_path / f"out{suffix}"
    failed = run_cli_here("score", source, "-o", target, *NQ)
    assert failed.returncode == 1
    assert one_line_error(failed) == (
        f"{source}: line 3: unparsable JSON: nested too deeply{SKIP_HINT}"
    )
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]

    skipped = run_cli_here("score", source, "-o", target, *NQ, "--on-error", "skip")
    assert skipped.returncode == 0, skipped.stderr
    assert "RecursionError" not in skipped.stderr + skipped.stdout
    records = read_jsonl(target) if suffix == ".jsonl" else pq.read_table(target).to_pylist()
    assert [record["input"] for record in records] == [row["input"] for row in rows]
    (failure,) = read_jsonl(Path(f"{target}.failures.jsonl"))
    assert {k: failure[k] for k in ("file", "line", "reason", "detail")} == {
        "file": str(source),
        "line": 3,
        "reason": "unparsable JSON",
        "detail": "unparsable JSON: nested too deeply",
    }
    assert failure["row"] == deep


def test_a_deeply_nested_option_value_is_a_usage_error(
    tmp_path: Path, rows_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """100,000 levels in process (one argument of the command line holds at most 128 KiB on
    Linux), 60,000 through the real command."""
    args = ["score", str(rows_file), "-o", str(tmp_path / "o.jsonl"), *NQ]
    with pytest.raises(SystemExit) as exited:
        main([*args, "--set", f"score={DEEP}"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error and "RecursionError" not in error
    assert error == (
        "reward-plugins: error: score: argument --set: score: line 1, column 65: nested deeper "
        "than the limit of 64 levels (see reward-plugins score --help)\n"
    )
    result = run_cli_here(*args, "--set", "score=" + "[" * 60_000 + "]" * 60_000)
    assert result.returncode == 2
    assert result.stderr == error
    assert "Traceback" not in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["1.jsonl"]


# ---------------------------------------------------------------------------------- signals


QUICK_ROWS = 1100
"""Rows of about 2 KB before the gated rows: more than the first 2 MiB chunk, so the output's
temporary file exists (the first chunk is written) while the gated chunk is being scored."""


def _first_chunk_written(out: Path) -> bool:
    """Whether ``OUT/o.jsonl``'s temporary file holds the first chunk's rows (the run is then
    scoring the gated chunk; a temporary file that just appeared may not be tracked yet: see
    :func:`test_ctrl_c_just_after_a_temporary_file_is_made`)."""
    for name in os.listdir(out):
        if name.startswith(".o.jsonl.") and name.endswith(TEMP_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                return (out / name).stat().st_size >= JSONL_CHUNK_BYTES
    return False


@contextlib.contextmanager
def gated_run(tmp_path: Path, workers: int) -> Iterator[tuple[subprocess.Popen[str], Path, Path]]:
    """The CLI scoring into ``OUT/o.jsonl``, in its own process group, stopped at a row that
    waits for the gate file; yields ``(process, output directory, gate)`` once the first chunk
    is in the output's temporary file. The process group is killed on the way out."""
    source = tmp_path / "in.jsonl"
    pad = "p" * 2000
    quick = [{"response": "quick", "ground_truth": "g", "pad": pad}] * QUICK_ROWS
    write_jsonl(source, [*quick, *[{"response": "wait", "ground_truth": "g"}] * 5])
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "RP_TEST_GATE": str(gate)}
    command = [sys.executable, "-c", TEST_SCORERS, "score", str(source), "-o", str(out / "o.jsonl")]
    command += ["--scorer", "gated_reward", *TEST_SOURCE, "--workers", str(workers)]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _first_chunk_written(out):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the output's temporary file never filled"
            time.sleep(0.005)
        yield process, out, gate
    finally:
        gate.touch()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()


@pytest.mark.parametrize(
    ("signum", "workers", "group", "code", "word"),
    [
        (signal.SIGINT, 2, True, 130, "interrupted"),
        (signal.SIGINT, 1, True, 130, "interrupted"),
        (signal.SIGTERM, 1, False, 143, "terminated"),
    ],
    ids=["ctrl-c-2-workers", "ctrl-c", "sigterm"],
)
def test_interrupted_runs_leave_nothing(
    tmp_path: Path, signum: int, workers: int, group: bool, code: int, word: str
) -> None:
    """Ctrl-C reaches the whole process group (workers ignore it, the parent cleans up);
    SIGTERM the CLI's process. The temporary output is removed; no output appears."""
    with gated_run(tmp_path, workers) as (process, out, gate):
        if group:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        if workers > 1:
            gate.touch()  # the parent waits for the chunks being scored: let them finish
        stdout, stderr = process.communicate(timeout=60)
        assert process.returncode == code
        assert stderr == f"reward-plugins: error: {word}; no output was left half-written\n"
        assert stdout == ""
        assert os.listdir(out) == []
    assert temporaries(tmp_path) == []


def test_a_killed_run_leaves_a_temporary_file_the_next_run_removes(tmp_path: Path) -> None:
    with gated_run(tmp_path, 1) as (process, out, _):
        process.kill()
        process.wait(timeout=60)
        assert process.returncode == -signal.SIGKILL
        (left,) = os.listdir(out)
        assert left.startswith(f".o.jsonl.{process.pid}.") and left.endswith(TEMP_SUFFIX)
    result = run_cli_here("score", tmp_path / "in.jsonl", "-o", out / "o.jsonl", *NQ)
    assert result.returncode == 0, result.stderr
    assert os.listdir(out) == ["o.jsonl"]
    assert len(read_jsonl(out / "o.jsonl")) == QUICK_ROWS + 5


def test_ctrl_c_just_after_a_temporary_file_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In process: ``mkstemp`` of the output's temporary file is followed at once by a
    KeyboardInterrupt, as when Ctrl-C arrives right after the file is created."""
    source = write_jsonl(tmp_path / "in.jsonl", dump_rows(3, seed=29))
    create = tempfile.mkstemp

    def create_then_interrupt(*args: Any, **kwargs: Any) -> tuple[int, str]:
        made = create(*args, **kwargs)
        if str(kwargs.get("prefix", "")).startswith(".o.jsonl."):
            raise KeyboardInterrupt
        return made

    monkeypatch.setattr(files.tempfile, "mkstemp", create_then_interrupt)
    code = main(["score", str(source), "-o", str(tmp_path / "o.jsonl"), *NQ])
    assert code == 130
    assert capsys.readouterr().err.startswith("reward-plugins: error: interrupted; ")
    assert temporaries(tmp_path) == []


# ------------------------------------------------------------------------------ --workers


def test_workers_beyond_the_cpus_are_capped_with_a_note(tmp_path: Path) -> None:
    """999 workers become as many as the CPUs this process may run on, with a note; the output
    is the one worker's, and it takes nowhere near the time of starting 999 processes."""
    affinity = getattr(os, "sched_getaffinity", None)
    cpus = len(affinity(0)) if affinity else os.cpu_count() or 1
    if cpus >= 999:
        pytest.skip("this machine has 999 CPUs")
    source = write_jsonl(tmp_path / "in.jsonl", dump_rows(300, seed=24))
    started = time.monotonic()
    many = run_cli_here("score", source, "-o", tmp_path / "many.jsonl", *NQ, "--workers", "999")
    elapsed = time.monotonic() - started
    assert many.returncode == 0, many.stderr
    assert many.stderr == (
        f"reward-plugins: note: --workers 999 capped at {cpus}, the CPUs this process may use\n"
    )
    assert elapsed < 30
    one = run_cli_here("score", source, "-o", tmp_path / "one.jsonl", *NQ, "--workers", "1")
    assert one.returncode == 0 and one.stderr == ""
    assert (tmp_path / "many.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()


# ---------------------------------------------------------------------------- file modes


@pytest.mark.parametrize(("umask", "mode"), [("022", 0o644), ("077", 0o600)])
def test_new_outputs_get_the_mode_the_umask_gives(tmp_path: Path, umask: str, mode: int) -> None:
    """Temporary files are made 0600; what replaces a new output gets ``0666 & ~umask``, as a
    plain ``open()`` would give: outputs, the summary, the manifest, the failures file."""
    run_dir = tmp_path / "run"
    write_verl_run(run_dir, {1: 2, 2: 2})
    with (run_dir / "2.jsonl").open("a") as stream:
        stream.write("not json\n")
    single = run_cli_in_shell(
        f"umask {umask}",
        "score",
        run_dir / "1.jsonl",
        "-o",
        tmp_path / "one.jsonl",
        *NQ,
        "--summary-json",
        tmp_path / "s.json",
    )
    assert single.returncode == 0, single.stderr
    whole = run_cli_in_shell(
        f"umask {umask}", "score", run_dir, "-o", tmp_path / "out", *NQ, "--on-error", "skip"
    )
    assert whole.returncode == 0, whole.stderr
    made = [
        tmp_path / "one.jsonl",
        tmp_path / "s.json",
        tmp_path / "out" / "1.jsonl",
        tmp_path / "out" / "2.jsonl",
        tmp_path / "out" / MANIFEST_NAME,
        tmp_path / "out.failures.jsonl",
    ]
    assert {path.name: path.stat().st_mode & 0o777 for path in made} == {
        path.name: mode for path in made
    }
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o777 & ~int(umask, 8)


def test_a_replaced_output_keeps_its_mode(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", dump_rows(3, seed=25))
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    target.chmod(0o640)
    result = run_cli_in_shell("umask 022", "score", source, "-o", target, *NQ)
    assert result.returncode == 0, result.stderr
    assert target.stat().st_mode & 0o777 == 0o640
    assert len(read_jsonl(target)) == 3


# ---------------------------------------------------------------------------- parquet types


def _binary_parquet(path: Path) -> pa.Table:
    rows = dump_rows(3, seed=26)
    table = pa.table(
        {
            "output": [row["output"] for row in rows],
            "gts": [row["gts"] for row in rows],
            "blob": pa.array([bytes([i, 0, 255]) for i in range(3)], pa.binary()),
            "meta": [{"raw": b"\x00\x01", "n": i} for i in range(3)],
        }
    )
    pq.write_table(table, path)
    return table


@pytest.mark.parametrize(
    ("column", "described"), [("blob", "binary"), ("meta", "struct<raw: binary, n: int64>")]
)
@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_binary_parquet_columns_cannot_go_to_jsonl(
    tmp_path: Path, column: str, described: str, suffix: str
) -> None:
    """Refused before any row is scored, naming the column (binary at any depth)."""
    source = tmp_path / "in.parquet"
    pq.write_table(_binary_parquet(source).select(["output", "gts", column]), source)
    result = run_cli_here("score", source, "-o", tmp_path / f"out{suffix}", *NQ)
    assert result.returncode == 2
    assert one_line_error(result) == (
        f"input {source}: column {column!r} holds {described} values, which JSONL cannot hold "
        "exactly; write .parquet"
    )
    assert sorted(os.listdir(tmp_path)) == ["in.parquet"]


def test_binary_parquet_columns_are_kept_in_parquet(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    table = _binary_parquet(source)
    result = run_cli_here("score", source, "-o", tmp_path / "out.parquet", *NQ)
    assert result.returncode == 0, result.stderr
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.select(table.column_names).equals(table)
    assert out.column("blob").to_pylist() == [b"\x00\x00\xff", b"\x01\x00\xff", b"\x02\x00\xff"]


@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_a_column_of_two_types_cannot_go_to_parquet(tmp_path: Path, on_error: str) -> None:
    """Rows 4 and 1,451 give ``kind`` a string and a number: named with both rows, exit 1, no
    output and no failures file (it is not a bad row: the file has no one schema)."""
    rows = [{"output": "<answer> x </answer>", "gts": {"target": ["x"]}} for _ in range(1500)]
    rows[3]["kind"] = "text"
    rows[1450]["kind"] = 7
    rows[10]["kind"] = None
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    result = run_cli_here(
        "score", source, "-o", tmp_path / "out.parquet", *NQ, "--on-error", on_error
    )
    assert result.returncode == 1
    assert one_line_error(result) == (
        f"column 'kind' has string values ({source}: line 4) and number values ({source}: line "
        "1451); a parquet column has one type: write .jsonl, or make the column consistent"
    )
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]


# --------------------------------------------------------------------- non-finite numbers


@pytest.mark.parametrize(
    ("text", "shown"),
    [("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf"), ("1e999", "inf")],
)
def test_a_non_finite_option_is_refused_before_any_work(
    tmp_path: Path, rows_file: Path, text: str, shown: str
) -> None:
    result = run_cli_here(
        "score", rows_file, "-o", tmp_path / "o.jsonl", *NQ, "--set", f"score={text}"
    )
    assert result.returncode == 2
    message = one_line_error(result)
    assert message.startswith("--set: compute_score: option 'score' must be a finite number")
    assert message.endswith(f", got float: {shown}")
    assert sorted(os.listdir(tmp_path)) == ["1.jsonl"]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_non_finite_reward_fails_its_row(tmp_path: Path, suffix: str) -> None:
    rows = [
        {"response": text, "ground_truth": "g"} for text in ("0.5", "nan", "inf", "-inf", "0.25")
    ]
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    target = tmp_path / f"out{suffix}"
    args = ("score", source, "-o", target, "--scorer", "number_reward", *TEST_SOURCE)
    failed = run_cli_with_script(TEST_SCORERS, *args)
    assert failed.returncode == 1
    assert one_line_error(failed) == (
        f"{source}: line 2: scorer error: PluginError: scorer 'number_reward' "
        f"(__main__.number_reward) returned a non-finite score nan{SKIP_HINT}"
    )
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]

    skipped = run_cli_with_script(TEST_SCORERS, *args, "--on-error", "skip")
    assert skipped.returncode == 0, skipped.stderr
    if suffix == ".jsonl":
        data = target.read_bytes()
        assert b"NaN" not in data and b"Infinity" not in data
        records = read_jsonl(target)
    else:
        records = pq.read_table(target).to_pylist()
    assert [reward_values(record) for record in records] == [{"score": 0.5}, {"score": 0.25}]
    failures = read_jsonl(Path(f"{target}.failures.jsonl"))
    assert [(f["line"], f["reason"]) for f in failures] == [(n, "scorer error") for n in (2, 3, 4)]
    assert [f["detail"].rsplit(" ", 1)[1] for f in failures] == ["nan", "inf", "-inf"]


# ------------------------------------------------------------- regressions found under stress


def test_numpy_scalar_rewards_are_written_to_jsonl(tmp_path: Path) -> None:
    rows = [{"response": text, "ground_truth": "g"} for text in ("a", "bb")]
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    args = ("score", source, "-o", tmp_path / "o.jsonl", "--scorer", "numpy_reward", *TEST_SOURCE)
    result = run_cli_with_script(TEST_SCORERS, *args)
    assert "Traceback" not in result.stderr
    assert result.returncode == 0, result.stderr
    assert [reward_values(r) for r in read_jsonl(tmp_path / "o.jsonl")] == [
        {"score": 1.0, "length": 1},
        {"score": 0.0, "length": 2},
    ]


def test_a_lone_surrogate_going_to_parquet_is_a_one_line_error(tmp_path: Path) -> None:
    source = write_jsonl(
        tmp_path / "in.jsonl",
        [
            '{"output": "<answer> x </answer>", "gts": "x", "s": "ok"}',
            '{"output": "<answer> x </answer>", "gts": "x", "s": "\\ud800"}',
        ],
    )
    result = run_cli_here("score", source, "-o", tmp_path / "out.parquet", *NQ)
    assert result.returncode == 1
    assert str(source) in one_line_error(result)
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]


@pytest.mark.parametrize(
    "column",
    [
        pa.array([decimal.Decimal("1.10")] * 2, pa.decimal128(5, 2)),
        pa.array([1_000_000, 2_000_000], pa.duration("us")),
    ],
    ids=["decimal", "duration"],
)
def test_parquet_columns_json_cannot_hold_are_refused_or_converted(
    tmp_path: Path, column: pa.Array
) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(
        pa.table({"output": ["<answer> x </answer>"] * 2, "gts": ["x"] * 2, "price": column}),
        source,
    )
    result = run_cli_here("score", source, "-o", tmp_path / "out.jsonl", *NQ)
    assert "Traceback" not in result.stderr
    if result.returncode == 0:  # converted to something JSON holds
        assert len(read_jsonl(tmp_path / "out.jsonl")) == 2
    else:  # or refused before any work, as binary columns are
        assert result.returncode == 2
        assert "'price'" in one_line_error(result)
        assert sorted(os.listdir(tmp_path)) == ["in.parquet"]


@pytest.mark.parametrize("which", ["input", "output"])
def test_a_summary_path_that_is_an_input_or_the_output_is_refused(
    tmp_path: Path, which: str
) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", dump_rows(3, seed=27))
    target = tmp_path / "out.jsonl"
    summary = source if which == "input" else target
    before = listing(tmp_path)
    result = run_cli_here("score", source, "-o", target, *NQ, "--summary-json", summary)
    assert listing(tmp_path) == before  # the input unchanged; no output
    assert result.returncode == 2
    assert str(summary) in one_line_error(result)


def test_stale_temporaries_of_the_manifest_and_summary_are_removed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_verl_run(run_dir, {1: 2})
    out = tmp_path / "out"
    out.mkdir()
    finished = subprocess.Popen(["true"])
    finished.wait()
    pid = finished.pid  # a process that no longer runs, as after SIGKILL
    left = [
        out / f".{MANIFEST_NAME}.{pid}.abcd1234{TEMP_SUFFIX}",
        tmp_path / f".s.json.{pid}.abcd1234{TEMP_SUFFIX}",
    ]
    for path in left:
        path.write_text("half")
    result = run_cli_here("score", run_dir, "-o", out, *NQ, "--summary-json", tmp_path / "s.json")
    assert result.returncode == 0, result.stderr
    assert temporaries(tmp_path) == []


def test_an_unreadable_input_keeps_the_files_completed_before(tmp_path: Path) -> None:
    """1.jsonl holds more rows than the columns are chosen from, so 2.jsonl.gz is first read
    after 1.jsonl is complete."""
    run_dir = tmp_path / "run"
    write_verl_run(run_dir, {1: 1001})
    (run_dir / "2.jsonl.gz").write_bytes((run_dir / "1.jsonl").read_bytes())  # not gzip
    out = tmp_path / "out"
    result = run_cli_here("score", run_dir, "-o", out, *NQ)
    assert result.returncode == 2
    assert one_line_error(result).startswith(f"input {run_dir / '2.jsonl.gz'}: cannot read: ")
    assert temporaries(tmp_path) == []
    assert sorted(os.listdir(out)) == [MANIFEST_NAME, "1.jsonl"]


def test_bad_rows_in_the_next_input_keep_the_files_completed_before(tmp_path: Path) -> None:
    """The counterpart of the bug above, which holds: a bad row stops the run after 1.jsonl."""
    run_dir = tmp_path / "run"
    write_verl_run(run_dir, {1: 2})
    write_jsonl(run_dir / "2.jsonl", ["{not json"])
    result = run_cli_here("score", run_dir, "-o", tmp_path / "out", *NQ)
    assert result.returncode == 1
    assert one_line_error(result).startswith(f"{run_dir / '2.jsonl'}: line 1: unparsable JSON: ")
    assert sorted(os.listdir(tmp_path / "out")) == [MANIFEST_NAME, "1.jsonl"]
    (row,) = read_jsonl(run_dir / "1.jsonl")[:1]
    expected = dict(reward_plugins.compute_score(SOURCE, row["output"], row["gts"]))
    assert reward_values(read_jsonl(tmp_path / "out" / "1.jsonl")[0]) == expected


def test_one_skipped_row_and_an_unknown_data_source_read_as_sentences(tmp_path: Path) -> None:
    rows = [{**row, "data_source": "searchR1_nq"} for row in dump_rows(3)]
    rows[1]["data_source"] = "nq"
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    result = run_cli("score", source, "-o", tmp_path / "o.jsonl", "--on-error", "skip")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"scored 2 of 3 rows of {source} with compute_score ")
    assert lines[2] == (
        f"skipped 1 row: 1 unknown data source; all in {tmp_path / 'o.jsonl.failures.jsonl'}"
    )
    assert lines[3].startswith(
        f"  {source}: line 2: unknown data source: no scorer is registered for "
        "data_source='nq'. Registered data sources: searchR1_2wikimultihopqa, "
    )
