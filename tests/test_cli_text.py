"""Hostile text end to end: lone surrogates (JSON ``\\udcxx`` escapes) in every column.

Python reads such an escape as a lone surrogate, which UTF-8 cannot encode: the outputs keep it
as the escape it came in, printed text and the report show the escape, ``--summary-json``
writes it escaped, and parquet, whose strings are UTF-8, refuses the row, naming the column.
The command runs with strict UTF-8 output (``PYTHONIOENCODING=utf-8``), where printing a lone
surrogate raises.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st
from test_cli_helpers import read_jsonl, run_cli, run_cli_with_script

from reward_plugins.rescore.messages import printable

STRICT = {"PYTHONIOENCODING": "utf-8"}
SOURCE = "searchR1_nq\\udc80"  # as written in the JSON line
LINES = [
    '{"input": "q\\ud800", "output": "<answer>Paris</answer>\\udcff", '
    f'"gts": ["Paris", "x\\udc00"], "src": "{SOURCE}", "note\\udcff": ["x\\ud800"]}}',
    '{"input": "q", "output": "<answer>Rome</answer>", "gts": ["Paris"], "src": "searchR1_nq"}',
    '{"input": "q", "output": "<answer>Paris</answer>", "gts": ["Paris"], "src": "searchR1_nq", '
    '"note": "an emoji as a surrogate pair: \\ud83d\\ude00"}',
]
SCORE = ("--data-source-column", "src", "--scorer", "compute_score_tool")


def _input(tmp_path: Path) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(line + "\n" for line in LINES), encoding="ascii")
    return path


def test_score_keeps_the_escapes_and_prints_them(tmp_path: Path) -> None:
    source, out, summary = _input(tmp_path), tmp_path / "out.jsonl", tmp_path / "summary.json"
    result = run_cli("score", source, "-o", out, *SCORE, "--summary-json", summary, env=STRICT)
    assert (result.returncode, result.stderr) == (0, "")
    written = out.read_text(encoding="ascii").splitlines()
    for line, original in zip(written, LINES, strict=True):
        assert line.startswith(original[:-1] + ',"reward_score":')  # the input's own bytes
    assert read_jsonl(out)[0]["reward_score"] == 1.0
    table = result.stdout.splitlines()
    rows = [line.split()[:2] for line in table if line.startswith("searchR1_nq")]
    assert rows == [["searchR1_nq", "2"], [SOURCE, "1"]]
    assert len({line.index("score") for line in table if "  score  " in line}) == 1  # aligned
    text = summary.read_text(encoding="ascii")
    assert f'"{SOURCE}": {{' in text
    assert json.loads(text)["sources"]["searchR1_nq\udc80"]["rows"] == 1

    again = tmp_path / "again.jsonl"  # its reward_* columns replaced: the row re-serialized
    result = run_cli("score", out, "-o", again, *SCORE, env=STRICT)
    assert (result.returncode, result.stderr) == (0, "")
    assert read_jsonl(again) == read_jsonl(out)
    assert "\\udcff" in again.read_text(encoding="utf-8")


def test_the_report_shows_the_escapes(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    result = run_cli("report", _input(tmp_path), "-o", page, *SCORE, env=STRICT)
    assert (result.returncode, result.stderr) == (0, "")
    html = page.read_text(encoding="utf-8")
    assert f"<h3>{SOURCE}</h3>" in html
    assert "\udc80" not in html


def test_parquet_names_the_rows_it_cannot_hold(tmp_path: Path) -> None:
    source, out = _input(tmp_path), tmp_path / "out.parquet"
    result = run_cli("score", source, "-o", out, *SCORE, env=STRICT)
    assert result.returncode == 1
    assert result.stderr == (
        f"reward-plugins: error: {source}: line 1: column 'input' holds a lone surrogate (a "
        "\\udcxx escape), which the UTF-8 strings of parquet cannot hold: write .jsonl, which "
        "keeps it (--on-error skip goes on, listing bad rows in OUTPUT.failures.jsonl)\n"
    )
    assert not out.exists()

    result = run_cli("score", source, "-o", out, *SCORE, "--on-error", "skip", env=STRICT)
    assert (result.returncode, result.stderr) == (0, "")
    assert "skipped 1 row: 1 text parquet cannot hold" in result.stdout
    table = pq.read_table(out)
    assert table.column("note").to_pylist() == [None, "an emoji as a surrogate pair: \U0001f600"]
    assert "note\udcff" not in table.column_names
    (failure,) = read_jsonl(Path(f"{out}.failures.jsonl"))
    assert (failure["line"], failure["reason"], failure["row"]) == (
        1,
        "text parquet cannot hold",
        LINES[0],
    )


ECHOING_SCORER = """
import sys
from reward_plugins import register
from reward_plugins.cli import main


@register("echoing_reward", ["test_cli_text"])
def echoing_reward(solution_str, golds):
    raise ValueError(solution_str)  # the response, lone surrogate and all, in the message


sys.exit(main(sys.argv[1:]))
"""


def test_a_failure_detail_holding_a_surrogate_is_listed(tmp_path: Path) -> None:
    source, out = _input(tmp_path), tmp_path / "out.jsonl"
    result = run_cli_with_script(
        ECHOING_SCORER, "score", source, "-o", out, "--scorer", "echoing_reward",
        "--data-source", "test_cli_text", "--on-error", "skip",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "scorer error: ValueError: <answer>Paris</answer>\\udcff" in result.stdout
    failures = read_jsonl(Path(f"{out}.failures.jsonl"))
    assert [failure["line"] for failure in failures] == [1, 2, 3]
    assert failures[0]["detail"] == "scorer error: ValueError: <answer>Paris</answer>\udcff"


SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)  # st.characters() leaves them out


@given(st.text(alphabet=st.one_of(st.characters(), SURROGATES)))
def test_printable_text_encodes_and_keeps_all_but_surrogates(text: str) -> None:
    shown = printable(text)
    shown.encode("utf-8")  # never raises
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        assert shown == text
    else:
        assert shown.count("\\u") == text.count("\\u") + sum(
            0xD800 <= ord(c) <= 0xDFFF for c in text
        )
