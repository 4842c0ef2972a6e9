"""The command imports what a command needs: ``path`` and ``--help`` load no plugin, no engine
and no numpy; the settings its help shows are the library's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from test_cli_helpers import REPO, run_cli

from reward_plugins.metrics.significance import DEFAULT_SAMPLES, DEFAULT_SEED, METHODS
from reward_plugins.plugins.composed import NAME as COMPOSED_SCORER
from reward_plugins.rescore.compare import PROMPT_COLUMNS
from reward_plugins.rescore.report import DEFAULT_EXAMPLES
from reward_plugins.runtime.rows import DATA_SOURCE_COLUMN, GROUND_TRUTH_COLUMNS, RESPONSE_COLUMNS

HEAVY = ("numpy", "pyarrow", "yaml", "reward_plugins.plugins", "reward_plugins.rescore")
"""Modules (and their submodules) that only scoring, reporting or checking needs."""

_LOADED = """
import contextlib, io, json, sys
from reward_plugins.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main(sys.argv[1:])
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(*args: str) -> list[str]:
    """The modules a fresh interpreter holds after running the command with ``args``."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", _LOADED, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    modules: list[str] = json.loads(result.stdout)
    return modules


@pytest.mark.parametrize(
    "args",
    [("path", "tool-config"), ("path", "verl"), ("--help",), ("retriever", "--help")],
    ids=" ".join,
)
def test_commands_that_do_not_score_import_nothing_heavy(args: tuple[str, ...]) -> None:
    loaded = _loaded(*args)
    heavy = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == []
    assert "reward_plugins.cli" in loaded  # the command did run in that interpreter


def test_a_scoring_command_does_import_the_row_columns() -> None:
    """The measure above sees imports: ``score --help`` adds the job's arguments, whose help
    names the row columns of :mod:`reward_plugins.runtime.rows` (which needs no numpy)."""
    loaded = _loaded("score", "--help")
    assert "reward_plugins.runtime.rows" in loaded and "reward_plugins.cli.job" in loaded


def test_path_runs_as_the_console_script() -> None:
    result = run_cli("path", "tool-config")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.strip().endswith(os.path.join("data", "tools", "search.yaml"))


def test_unknown_scorer_of_report_is_one_line_with_the_closest_name() -> None:
    result = run_cli("report", "run", "-o", "r.html", "--scorer", "compute_score_fi")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(
        "reward-plugins: error: report: argument --scorer: no scorer is registered as "
        "'compute_score_fi'; did you mean 'compute_score_f1'? Registered scorers: "
    )
    assert result.stderr.endswith(" (see reward-plugins report --help)\n")
    assert result.stderr.count("\n") == 1


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_help_shows_the_library_settings() -> None:
    """The help of ``score``, ``report`` and ``compare`` states the library's columns, limits
    and tests, imported, not copied."""
    score = _flat(run_cli("score", "--help").stdout)
    assert f"(scorer {COMPOSED_SCORER})" in score
    assert f"default: {DATA_SOURCE_COLUMN}" in score
    assert f"default: {'/'.join(RESPONSE_COLUMNS)}" in score
    assert f"default: {', '.join(GROUND_TRUTH_COLUMNS)}" in score
    report = _flat(run_cli("report", "--help").stdout)
    assert f"example rows shown per indicator ({DEFAULT_EXAMPLES})" in report
    compare = _flat(run_cli("compare", "--help").stdout)
    assert f"--method {{{','.join(METHODS)}}}" in compare
    assert f"(default: {', else '.join(PROMPT_COLUMNS)})" in compare
    samples = ", ".join(f"{count} {method}" for method, count in DEFAULT_SAMPLES.items())
    assert f"resamples or trials ({samples})" in compare
    assert f"({DEFAULT_SEED}, sacrebleu's)" in compare
