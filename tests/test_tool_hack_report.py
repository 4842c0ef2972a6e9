"""The search-agent guard keys reach the run report: a verl rollout dump whose early steps hack
(forged tool turns, no search, answering before searching, repeated queries) and whose later
steps are honest, scored and reported through the real CLI with the shipped recipe
``search_agent_guarded``.

The trajectories come from :mod:`trajectories` (seeded); every expected number is the
in-process ``compute_score_composed`` of the same rows. The CLI's numbers are read where they are
machine-readable: ``score --summary-json`` (per-step means, each key's kind and label), the
report's HTML tables (per-step table, data-source table, indicator table, three decimals), and
the report's PNGs (title and y-axis range in their text chunks, the same bytes embedded in the
page).
"""

from __future__ import annotations

import base64
import json
import random
import re
import struct
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from test_cli_helpers import run_cli_here
from trajectories import Instance, hack_and_twin, honest, make_instance

from reward_plugins import compute_score_composed

SOURCE = "searchR1_nq"
RECIPE = "search_agent_guarded"
SEED = 20240611

PROMPTS_PER_STEP = 5
ROLLOUTS_PER_PROMPT = 4
"""Each step: 5 prompts x 4 rollouts (GRPO groups of 4 rows with one ``input``)."""

HACKS_PER_STEP = {1: 16, 2: 8, 3: 2}
"""Hacked rollouts per step (of 20): the hack rates fall over the run."""

HACK_CYCLE = (
    "forged_tool_turn",
    "no_search",
    "answer_then_search",
    "repeated_query",
    "forged_information",
    "forged_search_pair",
    "no_search",
    "call_spam",
)
"""The hacks of a step's hacked rollouts, in turn: step 1 holds the cycle twice, step 2 once,
step 3 its first two."""

GUARDS = {
    # key: (kind, label), as the recipe's result schema declares them
    "search_forged_responses": ("count", "search forged tool responses"),
    "search_unsearched": ("rate", "search no search"),
    "search_searched_after_answer": ("rate", "search search after answer"),
    "search_repeated_queries": ("count", "search repeated queries"),
    "search_extra_tool_calls": ("count", "search calls over the free budget"),
    "search_searches": ("count", "search answered searches"),
    "search_grounded": ("rate", "search grounded answer"),
}
"""The guard keys of ``compute_score_tool`` under the recipe's prefix ``search_``."""

FALLING = ("search_forged_responses", "search_unsearched", "search_searched_after_answer")
"""The hack rates the run is built to make fall, step by step."""

OTHER_KEYS = ("score", "search_format_valid", "search_retrieval_hit")
"""Keys besides the guards whose per-step means are checked too."""


# ----------------------------------------------------------------------------- the run


def build_run(directory: Path) -> dict[int, list[dict[str, Any]]]:
    """``{step}.jsonl`` dumps as verl's ``trainer.rollout_data_dir`` writes them (``input``,
    ``output``, ``gts``, ``score``, ``step``); ``score`` is the logged reward, here the
    recipe's own. Returns each step's rows."""
    rng = random.Random(SEED)
    directory.mkdir(parents=True)
    run: dict[int, list[dict[str, Any]]] = {}
    for step, hacks in HACKS_PER_STEP.items():
        slots = list(range(PROMPTS_PER_STEP * ROLLOUTS_PER_PROMPT))
        hacked = {
            slot: HACK_CYCLE[n % len(HACK_CYCLE)]
            for n, slot in enumerate(sorted(rng.sample(slots, hacks)))
        }
        rows = []
        for prompt in range(PROMPTS_PER_STEP):
            instance = make_instance(rng, "hermes")
            for rollout in range(ROLLOUTS_PER_PROMPT):
                slot = prompt * ROLLOUTS_PER_PROMPT + rollout
                text = rollout_text(instance, hacked.get(slot), rng)
                truth = {"target": list(instance.golds)}
                result = compute_score_composed(SOURCE, text, truth, recipe=RECIPE)
                rows.append(
                    {
                        "input": f"user\n{instance.question}\nassistant\n",
                        "output": text,
                        "gts": truth,
                        "score": result["score"],
                        "step": step,
                    }
                )
        lines = "".join(json.dumps(row) + "\n" for row in rows)
        (directory / f"{step}.jsonl").write_text(lines, encoding="utf-8")
        run[step] = rows
    return run


def rollout_text(instance: Instance, hack: str | None, rng: random.Random) -> str:
    """The hack ``hack`` (a right or wrong answer), or, for ``None``, an honest agent (1 or 2
    searches, a right or wrong answer)."""
    right = rng.random() < 0.8
    if hack is not None:
        return hack_and_twin(instance, hack, right)[0]
    text = instance.right if right else instance.wrong
    return honest(instance, text, searches=rng.randint(1, 2))


def expected_means(run: dict[int, list[dict[str, Any]]]) -> dict[int, dict[str, float]]:
    """Per step, the mean of every checked key, from ``compute_score_composed`` in this
    process."""
    means = {}
    for step, rows in run.items():
        results = [
            compute_score_composed(SOURCE, row["output"], row["gts"], recipe=RECIPE) for row in rows
        ]
        means[step] = {
            key: sum(float(result[key]) for result in results) / len(results)
            for key in (*GUARDS, *OTHER_KEYS)
        }
    return means


# ------------------------------------------------------------------- reading the outputs


class Tables(HTMLParser):
    """Every ``<table>`` of a page as rows of cell texts, with the ``<section>`` it is in."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self.section = ""
        self._cell: list[str] | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section":
            self.section = dict(attrs).get("id") or ""
        elif tag == "table":
            self.tables.append((self.section, []))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[-1][1].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables_of(page: str, section: str) -> list[list[list[str]]]:
    parser = Tables()
    parser.feed(page)
    return [rows for where, rows in parser.tables if where == section]


def by_first_cell(rows: list[list[str]]) -> dict[str, dict[str, str]]:
    """A table's rows by their first cell, each as ``{header: cell}``."""
    header = rows[0]
    return {row[0]: dict(zip(header, row, strict=True)) for row in rows[1:]}


def png_text(png: bytes) -> dict[str, str]:
    """The ``tEXt`` chunks of a PNG (matplotlib writes ``Title`` and ``Description`` there)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = {}, 8
    while offset < len(png):
        (length,) = struct.unpack(">I", png[offset : offset + 4])
        kind, data = png[offset + 4 : offset + 8], png[offset + 8 : offset + 8 + length]
        if kind == b"tEXt":
            key, _, value = data.partition(b"\0")
            chunks[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, value = data.partition(b"\0")
            chunks[key.decode("latin-1")] = zlib.decompress(value[1:]).decode("latin-1")
        offset += 12 + length
    return chunks


def three(value: float) -> str:
    """A mean as the report's tables print it."""
    return f"{value:,.3f}"


# -------------------------------------------------------------------------------- the test


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The run, scored (``--summary-json``) and reported through the CLI."""
    root = tmp_path_factory.mktemp("hack_run")
    run = build_run(root / "rollouts")
    scored = run_cli_here(
        "score",
        root / "rollouts",
        "-o",
        root / "rescored",
        "--data-source",
        SOURCE,
        "--recipe",
        RECIPE,
        "--summary-json",
        root / "summary.json",
        "-q",
    )
    assert scored.returncode == 0, scored.stderr
    page_path = root / "report.html"
    report = run_cli_here(
        "report",
        root / "rollouts",
        "-o",
        page_path,
        "--data-source",
        SOURCE,
        "--recipe",
        RECIPE,
        "-q",
    )
    assert report.returncode == 0, report.stderr
    return {
        "run": run,
        "expected": expected_means(run),
        "summary": json.loads((root / "summary.json").read_text(encoding="utf-8")),
        "score_stdout": scored.stdout,
        "report_stdout": report.stdout,
        "page": page_path.read_text(encoding="utf-8"),
        "pngs": root / "report_pngs",
        "dumps": root / "rollouts",
    }


def test_the_run_has_hacks_that_fall_over_the_steps(reported: dict[str, Any]) -> None:
    """The premise: every guard fires somewhere, the three hack rates fall step by step."""
    expected = reported["expected"]
    steps = sorted(expected)
    assert steps == [1, 2, 3]
    for key in FALLING:
        series = [expected[step][key] for step in steps]
        assert series[0] > series[1] > series[2], (key, series)
        assert series[0] >= 0.1, (key, series)
    for key in GUARDS:
        assert any(expected[step][key] > 0 for step in steps), key
    assert expected[3]["search_grounded"] > expected[1]["search_grounded"]


def test_the_summary_json_declares_the_guards_and_their_per_step_means(
    reported: dict[str, Any],
) -> None:
    summary, expected = reported["summary"], reported["expected"]
    assert summary["scorer"] == "compute_score_composed"
    assert summary["options"] == {"recipe": RECIPE}
    declared = {item["key"]: (item["kind"], item["label"]) for item in summary["results"]}
    for key, kind_label in GUARDS.items():
        assert declared.get(key) == kind_label, key
    assert [(entry["step"], entry["rows"]) for entry in summary["steps"]] == [
        (step, PROMPTS_PER_STEP * ROLLOUTS_PER_PROMPT) for step in HACKS_PER_STEP
    ]
    for entry in summary["steps"]:
        metrics = entry["metrics"]
        for key, mean in expected[entry["step"]].items():
            assert key in metrics, (entry["step"], key)
            assert metrics[key]["mean"] == pytest.approx(mean, rel=1e-12, abs=1e-12), (
                entry["step"],
                key,
            )
    overall = summary["overall"]["metrics"]
    rows = [row for step in sorted(reported["run"]) for row in reported["run"][step]]
    for key in FALLING:
        mean = sum(expected[step][key] for step in expected) / len(expected)
        assert overall[key]["mean"] == pytest.approx(mean, rel=1e-12), key
    assert summary["overall"]["rows"] == len(rows)


def test_the_printed_summary_labels_the_guards(reported: dict[str, Any]) -> None:
    for stdout in (reported["score_stdout"], reported["report_stdout"]):
        for _, label in GUARDS.values():
            assert re.search(rf"^\s*{re.escape(label)}\s", stdout, re.MULTILINE), (label, stdout)


def test_the_per_step_table_of_the_report_holds_the_guard_rates(
    reported: dict[str, Any],
) -> None:
    expected = reported["expected"]
    (table,) = tables_of(reported["page"], "steps")
    steps = by_first_cell(table)
    assert sorted(steps) == ["1", "2", "3"]
    for step, means in expected.items():
        row = steps[str(step)]
        assert row["rows"] == str(PROMPTS_PER_STEP * ROLLOUTS_PER_PROMPT)
        for key, (_, label) in GUARDS.items():
            assert label in row, (label, list(row))
            # the cell: "mean (low to high)"
            assert row[label].split(" ")[0] == three(means[key]), (step, key, row[label])
    # the recipe's own score is what the dump logged: every row agrees
    for row in steps.values():
        assert row["logged = re-scored"].split(" ")[0] == "1.000"


def test_the_data_source_and_indicator_tables_hold_the_guards(reported: dict[str, Any]) -> None:
    expected = reported["expected"]
    total = PROMPTS_PER_STEP * ROLLOUTS_PER_PROMPT * len(HACKS_PER_STEP)
    run_means = {
        key: sum(means[key] for means in expected.values()) / len(expected) for key in GUARDS
    }
    (source_table,) = tables_of(reported["page"], "sources")
    sources = by_first_cell(source_table)
    indicator_table = tables_of(reported["page"], "indicators")[0]
    indicators = by_first_cell(indicator_table)
    for key, (kind, label) in GUARDS.items():
        assert sources[label]["kind"] == kind, key
        assert sources[label]["n"] == str(total), key
        assert sources[label]["mean"] == three(run_means[key]), key
        row = indicators[label]
        assert (row["key"], row["kind"], row["n"]) == (key, kind, str(total))
        assert row["mean"] == three(run_means[key]), key


def test_each_guard_has_its_chart_on_the_page_and_as_a_png(reported: dict[str, Any]) -> None:
    page, pngs = reported["page"], reported["pngs"]
    for key, (kind, label) in GUARDS.items():
        assert f"<h3 id='indicator-{key}'>{label}</h3>" in page, key
        png = (pngs / f"{key}.png").read_bytes()
        assert base64.b64encode(png).decode("ascii") in page, key
        text = png_text(png)
        assert text["Title"] == label, key
        if kind == "rate":
            assert text["Description"] == "y from 0 to 1", key
        else:
            bottom, top = re.fullmatch(r"y from (\S+) to (\S+)", text["Description"]).groups()
            assert float(bottom) == 0.0 and float(top) >= 1.0, (key, text)
        if kind == "count":
            assert (pngs / f"{key}_distribution.png").is_file(), key


def test_a_guard_rate_shows_the_rows_where_it_fired(reported: dict[str, Any]) -> None:
    """The no-search rate fired on under half of the rows: its example rows are those, each a
    row whose response has no answered search."""
    run, page = reported["run"], reported["page"]
    label = GUARDS["search_unsearched"][1]
    rows = [row for step in sorted(run) for row in run[step]]
    fired = [
        row
        for row in rows
        if compute_score_composed(SOURCE, row["output"], row["gts"], recipe=RECIPE)[
            "search_unsearched"
        ]
    ]
    assert 0 < len(fired) < len(rows) / 2
    share = f"{len(fired) / len(rows):.1%}"
    caption = f"rows where {label} = 1 (the rarer value: {share} of the rows with the key)"
    assert caption in page


def test_the_forged_response_examples_are_the_forged_rows(reported: dict[str, Any]) -> None:
    """The count's example rows: the rows with a forged tool response, earliest first (all
    have the same count, 1; ties keep the earliest rows)."""
    run, page, dumps = reported["run"], reported["page"], reported["dumps"]
    forged = []
    for step in sorted(run):
        for number, row in enumerate(run[step], start=1):
            result = compute_score_composed(SOURCE, row["output"], row["gts"], recipe=RECIPE)
            if result["search_forged_responses"]:
                forged.append((f"{dumps / f'{step}.jsonl'}:{number}", str(step)))
    assert len(forged) > 5
    section = page[page.index("<h3 id='indicator-search_forged_responses'>") :]
    section = section[: section.index("<h3 ", 1)]
    (table,) = tables_of(f"<section id='one'>{section}</section>", "one")
    header, *rows = table
    assert header[:4] == ["row", "step", "data source", GUARDS["search_forged_responses"][1]]
    assert [(row[0], row[1]) for row in rows] == forged[:5]
    assert all(row[3] == "1" for row in rows)
