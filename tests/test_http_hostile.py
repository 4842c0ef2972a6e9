"""The hostile-client suite of ``benchmarks/http_hostile.py`` holds against the current HTTP layer
(``reward_plugins.runtime.http``), so that the harness the docs' server table comes from is itself
checked. Short timeouts (0.3 s); the suite's verdicts rest on what the server did, with budgets
of seconds, not on how fast. The other servers (aiohttp.web, uvicorn) run only in the benchmark.
"""

from __future__ import annotations

import pytest

from benchmarks.http_hostile import SCENARIOS, Limits, Outcome, main, run_suite, table


def test_every_scenario_holds_against_the_current_layer() -> None:
    limits = Limits(read_timeout=0.3, idle_timeout=0.3)
    outcomes = run_suite("runtime.http", limits)
    assert list(outcomes) == list(SCENARIOS)
    failed = {name: o.observed for name, o in outcomes.items() if not o.held or o.partly}
    assert not failed, failed
    assert outcomes["slow-drip headers (408)"].observed.startswith("408 sent after ")
    assert outcomes["connections over the cap (503)"].observed.startswith(
        "503 sent (with Retry-After); 200"
    )
    assert outcomes["413 by chunked growth"].observed == "413 sent, readable"


def test_the_table_names_each_verdict() -> None:
    results = {"runtime.http": {name: Outcome(True, "x") for name in SCENARIOS}}
    results["runtime.http"]["idle keep-alive"] = Outcome(False, "connection held 3 s (still open)")
    results["runtime.http"]["413 by chunked growth"] = Outcome(True, "closed", partly=True)
    lines = table(results).splitlines()
    assert lines[0].startswith("| scenario | runtime.http (h11 ")
    assert len(lines) == 2 + len(SCENARIOS)
    assert "| idle keep-alive | **not held**: connection held 3 s (still open) |" in lines
    assert "| 413 by chunked growth | partly: closed |" in lines


def test_the_command_line_refuses_an_unknown_server(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--servers", "nginx"])
    assert "nginx" in capsys.readouterr().err
