"""The example plugin's keys everywhere: scored, summarized, reported and compared by the CLI.

The plugin under ``examples/gsm8k_reward`` is found the way an installed plugin is: by its entry
point in the group ``reward_plugins``. Instead of installing it, the test writes the entry point
(read from the example's ``pyproject.toml``) into a ``.dist-info`` directory, the metadata an
installer writes, and puts that directory and the example's sources on ``PYTHONPATH``; the
``reward-plugins`` command then runs in fresh interpreters (``python -m reward_plugins``) on a
JSONL file of GSM8K-style rows built here, as verl's validation dumps write them (``input``,
``output``, ``gts``, ``score``, ``step``; no data source, so ``--data-source`` names it).

The engine knows nothing of the plugin: every key below reaches the summary, ``--summary-json``,
the report's charts and tables and ``compare`` through the plugin's declared result schema.
Expected values are counted from the rows' kinds (the plugin's rule, worked by hand: ``#### N``
is the strict answer, the last number the flexible one).
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pytest itself depends on tomli before Python 3.11
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "gsm8k_reward"
SCORER = "gsm8k_numeric"
DATA_SOURCE = "openai/gsm8k"
SCHEMA = [
    ("score", "reward", "score"),
    ("acc", "component", "accuracy"),
    ("answer_found", "rate", "answer rate"),
]
"""The example's declared keys: (key, kind, label)."""
LABELS = {key: label for key, _, label in SCHEMA}

STEPS = {
    1: ["right", "wrong", "plain", "none", "right", "wrong", "plain", "none"],
    2: ["right", "right", "right", "plain", "right", "wrong", "right", "none"],
}
"""Each step's rows, by kind: ``right`` and ``wrong`` give ``#### N``; ``plain`` writes the
right number without the marker (found only by ``method=flexible``); ``none`` gives no number."""


def _response(kind: str, index: int, gold: int) -> str:
    reasoning = f"{index} + {gold - index} = {gold}"
    return {
        "right": f"{reasoning}\n#### {gold}",
        "wrong": f"{index} + {gold - index} = {gold + 1}\n#### {gold + 1}",
        "plain": f"{reasoning}, so the total is {gold}.",
        "none": "I cannot tell.",
    }[kind]


def _rows() -> list[dict[str, Any]]:
    return [
        {
            "input": f"Question {index}: what is {index} + {10 + index}?",
            "output": _response(kind, index, 10 + 2 * index),
            "gts": str(10 + 2 * index),
            "score": 0.0,
            "step": step,
        }
        for step, kinds in STEPS.items()
        for index, kind in enumerate(kinds)
    ]


def _expected(method: str, kinds: list[str]) -> dict[str, float]:
    """The mean of each key over rows of ``kinds`` (``format_score`` is 0: score = acc)."""
    right = {"right"} | ({"plain"} if method == "flexible" else set())
    found = right | {"wrong"}
    acc = sum(kind in right for kind in kinds) / len(kinds)
    return {"score": acc, "acc": acc, "answer_found": sum(k in found for k in kinds) / len(kinds)}


ALL_KINDS = [kind for kinds in STEPS.values() for kind in kinds]


# --------------------------------------------------------------------------------- the set-up


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``PYTHONPATH`` that finds the checkout, the example's sources and its entry point."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    entry_points = project["entry-points"]["reward_plugins"]
    site = tmp_path_factory.mktemp("site")
    name = project["name"].replace("-", "_")
    dist_info = site / f"{name}-{project['version']}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n",
        encoding="utf-8",
    )
    lines = [f"{entry} = {module}" for entry, module in entry_points.items()]
    (dist_info / "entry_points.txt").write_text(
        "[reward_plugins]\n" + "\n".join(lines) + "\n", encoding="utf-8"
    )
    return os.pathsep.join(map(str, (REPO, EXAMPLE, site)))


def cli(plugin_path: str, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m reward_plugins ARGS`` in a fresh interpreter; fails the test on an error."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REWARD_PLUGINS_")}
    env["PYTHONPATH"] = plugin_path
    command = [sys.executable, "-m", "reward_plugins", *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def run(plugin_path: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding ``rows.jsonl``: the dump of a two-step run."""
    work = tmp_path_factory.mktemp("run")
    lines = (json.dumps(row) + "\n" for row in _rows())
    (work / "rows.jsonl").write_text("".join(lines), encoding="utf-8")
    return work


def score(plugin_path: str, run: Path, name: str, *options: str) -> dict[str, Any]:
    """``reward-plugins score`` of the run into ``NAME.jsonl``: its summary JSON, and what it
    printed under ``"printed"``."""
    result = cli(
        plugin_path,
        "score", "rows.jsonl", "-o", f"{name}.jsonl", "--summary-json", f"{name}.json",
        "--scorer", SCORER, "--data-source", DATA_SOURCE, *options,
        cwd=run,
    )  # fmt: skip
    summary: dict[str, Any] = json.loads((run / f"{name}.json").read_text(encoding="utf-8"))
    summary["printed"] = result.stdout
    return summary


# ---------------------------------------------------------------------------------- the tests


def test_the_plugin_is_found_by_its_entry_point(plugin_path: str, run: Path) -> None:
    listed = cli(plugin_path, "list", cwd=run).stdout
    lines = listed.splitlines()
    start = lines.index(SCORER) + 1
    block = lines[start : next(i for i in range(start, len(lines)) if lines[i][:1] != " ")]
    assert block[0] == f"  data sources: {DATA_SOURCE}"
    assert (
        "  from: entry point 'gsm8k' of distribution 'reward-plugins-gsm8k' "
        "(gsm8k_reward.gsm8k_numeric)"
    ) in block


def test_score_summarizes_every_declared_key(plugin_path: str, run: Path) -> None:
    summary = score(plugin_path, run, "strict")
    assert [(r["key"], r["kind"], r["label"]) for r in summary["results"]] == SCHEMA
    expected = _expected("strict", ALL_KINDS)
    assert expected == {"score": 0.4375, "acc": 0.4375, "answer_found": 0.625}  # 7, 7, 10 of 16
    for part in (summary["overall"], summary["sources"][DATA_SOURCE]):
        assert part["rows"] == len(ALL_KINDS)
        assert {key: metric["mean"] for key, metric in part["metrics"].items()} == expected
    # the printed table: one line per key, labelled, with its mean
    printed = [line.split() for line in summary["printed"].splitlines()]
    overall = printed.index(next(line for line in printed if line[:1] == ["overall"]))
    assert printed[overall][:4] == ["overall", "16", "score", "0.438"]
    assert printed[overall + 1][:2] == ["accuracy", "0.438"]
    assert printed[overall + 2][:3] == ["answer", "rate", "0.625"]
    # every row of the output holds each key as a reward_<key> column
    out = [json.loads(line) for line in (run / "strict.jsonl").read_text().splitlines()]
    assert [row["reward_acc"] for row in out] == [float(k == "right") for k in ALL_KINDS]
    assert [row["reward_answer_found"] for row in out] == [
        float(k in ("right", "wrong")) for k in ALL_KINDS
    ]


def test_the_report_charts_and_tables_every_declared_key(plugin_path: str, run: Path) -> None:
    result = cli(
        plugin_path,
        "report", "rows.jsonl", "-o", "run.html", "--scorer", SCORER,
        "--data-source", DATA_SOURCE,
        cwd=run,
    )  # fmt: skip
    page = (run / "run.html").read_text(encoding="utf-8")
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    for key, kind, label in SCHEMA:
        # a chart per key, in the page and as a PNG named by the key
        assert re.search(rf"<img[^>]* alt=['\"]{label}['\"]", page), label
        assert (run / "run_pngs" / f"{key}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        # the data-source table: label, kind, rows, mean
        mean = _expected("strict", ALL_KINDS)[key]
        assert f"{label} {kind} 16 {mean:.3f}" in text, label
    # the per-step table: each step's means, in the schema's order
    for step, kinds in STEPS.items():
        means = _expected("strict", kinds)
        interval = r" \([^)]*\) "
        row = rf" {step} 8 {means['score']:.3f}{interval}{means['acc']:.3f}{interval}"
        row += f"{means['answer_found']:.3f}"
        assert re.search(row, text), (step, means)
    # the indicators: the scorer's rate, by label and key, and the rows where it is rarer (0)
    assert "answer rate answer_found rate 16 0.625" in text
    assert "rows where answer rate = 0" in text
    assert "wrote run.html and" in result.stdout


def test_compare_labels_and_compares_every_declared_key(plugin_path: str, run: Path) -> None:
    score(plugin_path, run, "a")
    flexible = score(plugin_path, run, "b", "--set", "method=flexible")
    expected_a, expected_b = _expected("strict", ALL_KINDS), _expected("flexible", ALL_KINDS)
    means = {key: metric["mean"] for key, metric in flexible["overall"]["metrics"].items()}
    assert means == expected_b == {"score": 0.625, "acc": 0.625, "answer_found": 0.8125}

    args = ("compare", "a.jsonl", "b.jsonl", "--scorer", SCORER)
    report = json.loads(cli(plugin_path, *args, "--json", cwd=run).stdout)
    assert report["rows"] == len(ALL_KINDS) and report["not_compared"] == {}
    columns = [f"reward_{key}" for key, _, _ in SCHEMA]
    assert list(report["columns"]) == columns
    for key, kind, label in SCHEMA:
        column = report["columns"][f"reward_{key}"]
        assert (column["mean_a"], column["mean_b"]) == (expected_a[key], expected_b[key])
        assert column["difference"] == pytest.approx(expected_b[key] - expected_a[key])
        declared = {"key": key, "kind": kind, "label": label, "gdpo": kind != "rate"}
        assert report["results"][f"reward_{key}"] == declared
    # the table: one line per key, its column and label, both means and the difference
    table = cli(plugin_path, *args, cwd=run).stdout
    for key, _, label in SCHEMA:
        a, b = expected_a[key], expected_b[key]
        line = f"reward_{key} +{label} +{a:.4f} +{b:.4f} +\\+{b - a:.4f} "
        assert re.search(line, table), (line, table)
