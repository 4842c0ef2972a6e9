"""The verl version matrix's record (``matrix/results.json``) and the docs generated from it.

    python matrix/record.py write   # after `nox -- --record`: runs -> results.json -> docs
    python matrix/record.py check   # after `nox`: every recorded version ran, with its outcomes

``results.json`` holds, per verl version, the outcome of every row of
``matrix/test_verl_version.py`` (``ok`` or verl's exact error), the packages the environment
resolved and the install and test times of the recorded run. ``docs/verl-versions.md`` (between
its ``matrix`` markers) and the README's one-line summary are rendered from it;
``tests/test_verl_versions_doc.py`` fails when they disagree.
"""

from __future__ import annotations

import datetime
import json
import re
import sys
from pathlib import Path
from typing import Any

from reward_plugins.verl_config import parse_verl_version

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "matrix" / "results.json"
RUNS = ROOT / "matrix" / "runs"
PAGE = ROOT / "docs" / "verl-versions.md"
README = ROOT / "README.md"
PAGE_MARKERS = ("<!-- matrix -->\n", "<!-- /matrix -->")
README_MARKERS = ("<!-- verl-matrix -->", "<!-- /verl-matrix -->")
KINDS = {
    "trainer": "trainer managers",
    "loop": "reward-loop managers",
    "legacy-class": "legacy classes (direct use)",
}
"""The scoring rows, as the page names them."""


def load() -> dict[str, Any]:
    return json.loads(RESULTS.read_text())


def config_for(version: str) -> str:
    """The config the docs tell users of ``version`` to start from."""
    if parse_verl_version(version) >= (0, 7, 1):
        return "`configs/search_r1_grpo.yaml` (`pkg://reward_plugins`)"
    return "`configs/search_r1_grpo_legacy.yaml` (the entry file)"


def proven(rows: dict[str, str], kind: str) -> str:
    names = sorted(row.partition(":")[2] for row, outcome in rows.items() if row.startswith(kind))
    return ", ".join(
        f"`{name}`" for name in names if rows[f"{kind}:{name}"] == "ok" and "+" not in name
    )


def render_page(results: dict[str, Any]) -> str:
    """The generated part of ``docs/verl-versions.md``."""
    versions = results["versions"]
    lines = [
        f"Run on {results['date']}, each version in its own environment "
        "(`nox`, see [development.md](development.md)).",
        "",
        "| verl | start from | " + " | ".join(KINDS.values()) + " | rows ok |",
        "|---|---|" + "---|" * len(KINDS) + "---|",
    ]
    for version, run in versions.items():
        rows = run["rows"]
        cells = [proven(rows, kind) or "(none)" for kind in KINDS]
        ok = sum(outcome == "ok" for outcome in rows.values())
        lines.append(
            f"| {version} | {config_for(version)} | {' | '.join(cells)} | {ok} / {len(rows)} |"
        )
    lines += [
        "",
        "What does not work, with verl's own error (each is a tested row; the "
        "[workarounds](#what-to-do-instead) follow):",
        "",
        "| verl | row | outcome |",
        "|---|---|---|",
    ]
    for version, run in versions.items():
        for row, outcome in run["rows"].items():
            if outcome != "ok":
                escaped = outcome.replace("|", "\\|")
                lines.append(f"| {version} | `{row}` | {escaped} |")
    lines += [
        "",
        "The environments (a fully pinned set each: `matrix/constraints/verl-VERSION.txt`):",
        "",
        "| verl | torch | numpy | tensordict | transformers | install (s) | tests (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for version, run in versions.items():
        p = run["packages"]
        lines.append(
            f"| {version} | {p['torch']} | {p['numpy']} | {p['tensordict']} | "
            f"{p['transformers']} | {run['install_s']} | {run['test_s']} |"
        )
    return "\n".join(lines) + "\n"


def render_summary(results: dict[str, Any]) -> str:
    """The README's line on verl versions."""
    versions = ", ".join(results["versions"])
    return (
        f"Tested with verl {versions} ({results['date']}; "
        "[the matrix](docs/verl-versions.md) shows what each version runs and what it cannot)."
    )


def replace_between(text: str, markers: tuple[str, str], body: str, where: Path) -> str:
    start, end = markers
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{where}: no {start.strip()} ... {end} block")
    return pattern.sub(lambda _: start + body + end, text, count=1)


def write_docs(results: dict[str, Any]) -> None:
    PAGE.write_text(replace_between(PAGE.read_text(), PAGE_MARKERS, render_page(results), PAGE))
    README.write_text(
        replace_between(README.read_text(), README_MARKERS, render_summary(results), README)
    )


def read_runs() -> dict[str, dict[str, Any]]:
    return {
        path.stem.removeprefix("verl-"): json.loads(path.read_text())
        for path in sorted(RUNS.glob("verl-*.json"), key=lambda p: parse_verl_version(p.stem[5:]))
    }


def write() -> int:
    runs = read_runs()
    if not runs:
        print(f"record: no runs in {RUNS.relative_to(ROOT)}; run `nox -- --record` first")
        return 1
    results = {"date": datetime.date.today().isoformat(), "versions": runs}
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    write_docs(results)
    print(f"record: {len(runs)} versions -> {RESULTS.relative_to(ROOT)}, {PAGE.relative_to(ROOT)}")
    return 0


def check() -> int:
    """Every recorded version ran in this matrix run, with the recorded outcomes."""
    recorded, runs = load()["versions"], read_runs()
    failures = []
    for version, claim in recorded.items():
        run = runs.get(version)
        if run is None:
            failures.append(f"verl {version}: did not run")
        elif run["rows"] != claim["rows"]:
            changed = sorted(set(run["rows"].items()) ^ set(claim["rows"].items()))
            failures.append(f"verl {version}: outcomes differ from the record: {changed}")
        else:
            print(f"verl {version}: {len(run['rows'])} rows as recorded; "
                  f"install {run['install_s']} s, tests {run['test_s']} s")  # fmt: skip
    for failure in failures:
        print(f"matrix: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    commands = {"write": write, "check": check}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        raise SystemExit(f"usage: python matrix/record.py {'|'.join(commands)}")
    raise SystemExit(commands[sys.argv[1]]())
