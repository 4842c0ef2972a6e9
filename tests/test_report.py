"""The run report: row description, indicator rules, aggregation, and the written page and PNGs.

Rows are built by hand as :class:`ScoredRow` values, their results from the real router
(``compute_score(..., return_dict=True)`` on ``searchR1_nq``) unless a test needs a result the
scorer cannot give.
"""

from __future__ import annotations

import doctest
import json
import math
import pickle
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reward_plugins import compute_score
from reward_plugins.rescore import report as report_module
from reward_plugins.rescore.records import ScoredRow
from reward_plugins.rescore.report import (
    EXCERPT_CHARS,
    INDICATORS,
    REFUSAL_PHRASES,
    SERIES,
    ReportError,
    RowStats,
    RunReport,
    count_candidates,
    describe_row,
    group_key,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SOURCE = "searchR1_nq"


def scored(
    response: str,
    *,
    golds: Any = ("Paris",),
    step: int | None = 1,
    prompt: Any = "q",
    logged: Any = None,
    source: str = SOURCE,
    file: str = "run/1.jsonl",
    number: int = 1,
    result: dict[str, Any] | None = None,
) -> ScoredRow:
    """A scored row; the result is the real scorer's unless given."""
    record: dict[str, Any] = {"output": response}
    if prompt is not None:
        record["input"] = prompt
    if logged is not None:
        record["score"] = logged
    if result is None:
        result = compute_score(source, response, list(golds), return_dict=True)
    return ScoredRow(file, number, record, step, source, response, result)


def describe(response: str, **kwargs: Any) -> RowStats:
    max_answer_words = kwargs.pop("max_answer_words", 30)
    return describe_row(scored(response, **kwargs), max_answer_words=max_answer_words)


def build(rows: list[RowStats], **kwargs: Any) -> RunReport:
    report = RunReport(title=kwargs.pop("title", "run"), **kwargs)
    for row in rows:
        report.add(row)
    return report


# ------------------------------------------------------------------------- describe_row


def test_describe_row_keeps_the_metrics_counts_and_answer() -> None:
    response = "<think>t</think><search>capital of France</search><answer> The Paris </answer>"
    stats = describe(response, logged=1.0, file="val/3.jsonl", number=7, step=3)
    assert (stats.file, stats.number, stats.step, stats.data_source) == (
        "val/3.jsonl",
        7,
        3,
        SOURCE,
    )
    assert (stats.score, stats.em, stats.subem, stats.f1) == (1.0, 1.0, 1.0, 1.0)
    assert (stats.answer_found, stats.spam_penalized, stats.logged) == (1.0, 0.0, 1.0)
    assert stats.words == len(response.split()) == 6
    assert stats.search_calls == 1
    assert (stats.answer, stats.excerpt, stats.answer_words, stats.answer_tags) == (
        "paris",
        "The Paris",
        2,
        1,
    )
    assert stats.subem_gap is False
    assert not (stats.over_long or stats.refusal or stats.many_candidates)
    assert stats.group == group_key("q")


def test_missing_or_non_numeric_values_are_absent_not_zero() -> None:
    result = {"score": 0.5, "em": "yes", "f1": math.nan, "subem": math.inf}
    stats = describe("<answer>x</answer>", result=result, logged="1.0")
    assert stats.score == 0.5
    assert stats.em is stats.subem is stats.f1 is stats.answer_found is None
    assert stats.spam_penalized is None and stats.logged is None
    assert stats.subem_gap is None  # neither 0 nor 1: the row is out of the gap's share
    assert describe("<answer>x</answer>", prompt=None).group is None


def test_without_an_answer_the_excerpt_is_the_end_of_the_response() -> None:
    long = "x" * 500 + " the end"
    stats = describe(long)
    assert stats.answer is None and stats.answer_words == 0 and stats.candidates == 0
    assert len(stats.excerpt) == EXCERPT_CHARS and stats.excerpt.endswith("the end")
    assert stats.excerpt.startswith("…")
    assert describe("short").excerpt == "short"


def test_answer_and_excerpt_are_cut_to_200_characters() -> None:
    stats = describe(f"<answer>{'word ' * 100}</answer>")
    assert len(stats.excerpt) == EXCERPT_CHARS and stats.excerpt.endswith("…")
    assert len(stats.answer or "") == EXCERPT_CHARS
    assert stats.answer_words == 100


@pytest.mark.parametrize(
    ("response", "calls"),
    [
        ("<search>a</search><information>i</information><search>b</search>", 2),
        ('<tool_call>{"name": "search"}</tool_call><tool_call>{"name": "s"}</tool_call>', 2),
        ("<search>a</search> <tool_call>{}</tool_call>", 2),
        ("<search>a <search>b</search>", 1),  # the lazy block from the first opener
        ("<search>never closed", 0),
        ("</search><search>", 0),
        ("<information><search>quoted</search></information>", 1),
        ("no tools", 0),
    ],
)
def test_search_calls_count_search_and_tool_call_blocks(response: str, calls: int) -> None:
    assert describe(response + "<answer>Paris</answer>").search_calls == calls


# ------------------------------------------------------------------------------ indicators


def test_subem_em_gap() -> None:
    gap = describe("<answer>It is Paris</answer>")
    assert (gap.em, gap.subem, gap.subem_gap) == (0.0, 1.0, True)
    assert describe("<answer>Paris</answer>").subem_gap is False
    assert describe("<answer>London</answer>").subem_gap is False


def test_spam_flag_comes_from_the_scorer() -> None:
    spam = describe("<answer>Paris</answer>" * 11)
    assert (spam.spam_penalized, spam.score, spam.answer_tags) == (1.0, 0.25, 11)
    assert describe("<answer>Paris</answer>" * 10).spam_penalized == 0.0


def test_over_long_answers() -> None:
    assert describe(f"<answer>{'w ' * 31}</answer>").over_long
    assert not describe(f"<answer>{'w ' * 30}</answer>").over_long
    assert describe("<answer>a b c d e f</answer>", max_answer_words=5).over_long
    assert not describe("no answer " * 40).over_long


@pytest.mark.parametrize(
    ("answer", "refusal"),
    [
        ("I don't know", True),
        ("I DO NOT KNOW.", True),
        ("N/A", True),
        ("Unknown", True),
        ("", True),
        ("The", True),  # normalizes to the empty string
        ("?!", True),
        ("I don't know, maybe Paris", False),
        ("Paris", False),
        ("None of the above", False),
    ],
)
def test_refusal_answers(answer: str, refusal: bool) -> None:
    assert describe(f"<answer>{answer}</answer>").refusal is refusal


def test_a_response_without_an_answer_is_no_refusal() -> None:
    assert not describe("I don't know").refusal


@pytest.mark.parametrize(
    ("answer", "items"),
    [
        ("Paris, London, Berlin", 3),
        ("Paris,London,Berlin", 3),
        ("Paris; Lyon / Nice", 3),
        ("Paris or London or Rome", 3),
        ("Tom and Jerry and Spike", 3),
        ("AC|DC|Queen", 3),
        ("1990, 1991, 2000", 3),
        ("Paris, France", 2),
        ("Tom and Jerry", 2),
        ("1,000,000", 1),
        ("Portland, Oregon", 2),
        ("Paris or", 1),  # "or" needs whitespace on both sides
        (", , ,", 0),
        ("Salt Lake City", 1),
    ],
)
def test_many_candidates(answer: str, items: int) -> None:
    assert count_candidates(answer) == items
    stats = describe(f"<answer>{answer}</answer>")
    assert stats.candidates == items
    assert stats.many_candidates is (items >= 3)


def test_same_answer_across_a_grpo_group() -> None:
    rows = [
        # step 1: A all "Paris" (1); B differs (0); C one row (not counted); D no answers (0);
        # E equal after normalization (1)
        *(describe("<answer>Paris</answer>", prompt="A") for _ in range(3)),
        describe("<answer>Paris</answer>", prompt="B"),
        describe("<answer>London</answer>", prompt="B"),
        describe("<answer>Paris</answer>", prompt="C"),
        describe("nothing", prompt="D"),
        describe("nothing", prompt="D"),
        describe("<answer>The Paris</answer>", prompt="E", number=9),
        describe("<answer>paris.</answer>", prompt="E"),
        # step 2: the same prompts are new groups; one group of two equal empty answers (0)
        describe("<answer>Paris</answer>", prompt="A", step=2),
        describe("<answer>Paris</answer>", prompt="A", step=2),
        describe("<answer></answer>", prompt="B", step=2),
        describe("<answer></answer>", prompt="B", step=2),
    ]
    report = build(rows)
    bands = report.per_step("repeated_answer")
    assert (bands[1].mean, bands[1].n) == (0.5, 4)
    assert (bands[2].mean, bands[2].n) == (0.5, 2)
    worst = report.worst("repeated_answer")
    assert [(row.step, row.group) for row in worst] == [
        (1, group_key("A")),  # the largest group first, then the earliest
        (1, group_key("E")),
        (2, group_key("A")),
    ]
    assert worst[1].number == 9  # a group's example is its first row


def test_a_step_that_comes_back_forms_new_groups_but_keeps_its_means() -> None:
    rows = [
        describe("<answer>Paris</answer>", prompt="A", step=1),
        describe("<answer>Paris</answer>", prompt="A", step=1),
        describe("<answer>Paris</answer>", prompt="A", step=2),
        describe("<answer>London</answer>", prompt="A", step=1),  # step 1 comes back
        describe("<answer>London</answer>", prompt="A", step=1),
    ]
    report = build(rows)
    assert report.per_step("em")[1].mean == 0.5 and report.per_step("em")[1].n == 4
    # Two groups of two in step 1, each with one shared answer (a single group would be 0).
    assert report.per_step("repeated_answer")[1].mean == 1.0
    assert report.per_step("repeated_answer")[1].n == 2
    assert "Steps that came back after rows of other steps: 1;" in page_of(report)


def test_worst_examples_are_ranked_by_the_indicator_value() -> None:
    rows = [
        describe(f"<answer>It is Paris {'x ' * words}</answer>", number=words)
        for words in (5, 40, 1, 40, 12)
    ]
    report = build(rows, examples=3)
    assert [row.number for row in report.worst("subem_gap")] == [40, 40, 12]
    assert [row.answer_words for row in report.worst("over_long")] == [43, 43]
    with pytest.raises(ReportError, match="unknown indicator"):
        report.worst("nope")


def test_indicator_series_are_shares_over_their_rows() -> None:
    rows = [
        describe("<answer>Paris, London, Berlin</answer>"),  # gap, many candidates
        describe("<answer>I don't know</answer>"),  # refusal
        describe("<answer>Paris</answer>" * 11),  # spam
        describe("no answer"),
        describe("<answer>x</answer>", result={"score": 0.0}),  # no em/subem/spam keys
    ]
    report = build(rows)
    expected = {
        "subem_gap": (0.25, 4),
        "spam_penalized": (0.25, 4),
        "refusal": (0.2, 5),
        "many_candidates": (0.2, 5),
        "over_long": (0.0, 5),
        "score": (0.25 / 5, 5),
    }
    for key, (mean, n) in expected.items():
        band = report.per_step(key)[1]
        assert (band.mean, band.n) == pytest.approx((mean, n)), key


# ----------------------------------------------------------------------------- aggregation


def test_per_step_means_and_bands_equal_hand_computed_ones() -> None:
    rng = random.Random(7)
    answers = ["Paris", "It is Paris", "London", "I don't know", "<think>t</think>"]
    rows, by_step = [], {}
    for step in (3, 1, 2):  # files need not come in step order
        for number in range(1, 61):
            answer = rng.choice(answers)
            stats = describe(f"{'w ' * rng.randrange(9)}<answer>{answer}</answer>", step=step)
            rows.append(stats._replace(number=number))
            by_step.setdefault(step, []).append(stats)
    report = build(rows)
    for key in ("score", "f1", "words", "search_calls", "subem_gap"):
        bands = report.per_step(key)
        assert sorted(bands) == [1, 2, 3]
        for step, stats in by_step.items():
            values = [float(getattr(row, key)) for row in stats]
            mean = statistics.fmean(values)
            spread = 1.96 * statistics.stdev(values) / math.sqrt(len(values))
            band = bands[step]
            assert band.n == len(values)
            assert band.mean == pytest.approx(mean)
            assert band.low == pytest.approx(max(mean - spread, min(values)))
            assert band.high == pytest.approx(min(mean + spread, max(values)))
    with pytest.raises(ReportError, match="unknown series"):
        report.per_step("nope")


def test_a_band_never_leaves_the_range_of_the_values() -> None:
    report = build([describe("<answer>Paris</answer>", number=n) for n in range(50)])
    band = report.per_step("em")[1]
    assert (band.mean, band.low, band.high, band.n) == (1.0, 1.0, 1.0, 50)
    single = build([describe("<answer>London</answer>")]).per_step("f1")[1]
    assert (single.mean, single.low, single.high, single.n) == (0.0, 0.0, 0.0, 1)


def test_rows_without_a_step_form_one_pseudo_step(tmp_path: Path) -> None:
    report = build([describe("<answer>Paris</answer>", step=None, number=n) for n in range(4)])
    assert report.per_step("em") == {None: (1.0, 1.0, 1.0, 4)}
    page = page_of(report)
    assert "no step column" in page
    assert "Fewer than two steps" in page
    assert "class='chart'" not in page
    assert "<td>(none)</td><td>4</td>" in page
    assert report.write_pngs(tmp_path / "pngs") == []


def test_memory_stays_bounded_for_many_rows() -> None:
    flagged = describe("<answer>Paris, London, Berlin, " + "w " * 40 + "</answer>")
    flagged = flagged._replace(spam_penalized=1.0, refusal=True)  # every indicator at once
    assert flagged.subem_gap and flagged.many_candidates and flagged.over_long
    report = RunReport(title="big", examples=4)
    for step in range(100):
        for number in range(500):
            report.add(flagged._replace(step=step, number=number, group=str(number // 5)))
        assert len(report._groups) <= 100  # only the current step's groups are kept
        assert len(report._block) < 4096
    assert report.rows == 50_000
    for indicator in INDICATORS:
        assert len(report.worst(indicator.key)) == 4
    assert len(report._steps) == 100
    assert all(len(values) <= 2 for values in report._sources[SOURCE].values)


def test_distinct_groups_per_step_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_module, "MAX_OPEN_GROUPS", 3)
    rows = [describe("<answer>Paris</answer>", prompt=f"p{n % 5}") for n in range(10)]
    report = build(rows)
    assert report.per_step("repeated_answer")[1].n == 3
    assert "4 rows were left out of the GRPO groups" in page_of(report)


# ------------------------------------------------------------------------------ agreement


def agreement_rows() -> list[RowStats]:
    return [
        describe("<answer>Paris</answer>", logged=1.0, number=1),
        describe("<answer>Paris</answer>" * 11, logged=1.0, number=2),  # re-scored 0.25
        describe("<answer>London</answer>", logged=0, number=3),
        describe("<answer>London</answer>", logged=1, number=4),
        describe(
            "<answer>Paris</answer>",
            number=5,
            result={"score": 2 / 3},
            logged=0.6666666865348816,  # float32(2/3): equal within the tolerance
        ),
        describe("<answer>Paris</answer>", number=6),  # no logged score
        describe("<answer>Paris</answer>", number=7, logged="high"),  # not a number
    ]


def test_agreement_counts_table_and_disagreeing_rows() -> None:
    report = build(agreement_rows())
    page = page_of(report)
    assert "<strong>60.0%</strong> (3 of 5 rows" in page
    table = page[page.index("<table class='confusion'>") :]
    table = table[: table.index("</table>")]
    assert "exact values" in table
    cells = re.findall(r"<tr><th>([^<]*)</th>((?:<td>[^<]*</td>)*)</tr>", table)
    parsed = {row: re.findall(r"<td>([^<]*)</td>", tds) for row, tds in cells}
    # columns: re-scored 0, 0.25, 0.666667, 1
    assert parsed == {
        "0": ["1", "0", "0", "0"],
        "0.666667": ["0", "0", "1", "0"],
        "1": ["1", "1", "0", "1"],
    }
    disagreeing = report.worst("disagreement")
    assert [row.number for row in disagreeing] == [4, 2]  # |1 - 0| before |1 - 0.25|
    assert "run/1.jsonl:4" in page
    bands = report.per_step("agreement")
    assert (bands[1].mean, bands[1].n) == (0.6, 5)


def test_many_distinct_scores_are_bucketed_by_sign() -> None:
    rows = [
        describe("<answer>x</answer>", result={"score": value / 10}, logged=value / 10)
        for value in range(-5, 6)
    ]
    page = page_of(build(rows))
    assert "bucketed by sign" in page
    assert "<tr><th>negative</th><td>5</td><td>0</td><td>0</td></tr>" in page
    assert "<tr><th>zero</th><td>0</td><td>1</td><td>0</td></tr>" in page
    assert "<strong>100.0%</strong>" in page


def test_without_logged_scores_the_section_says_so() -> None:
    page = page_of(build([describe("<answer>Paris</answer>")]))
    assert "No row has both a numeric logged" in page


# ---------------------------------------------------------------------------------- page


def page_of(report: RunReport) -> str:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "report.html"
        report.write_html(path)
        return path.read_text(encoding="utf-8")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags_of(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


def mixed_run() -> list[RowStats]:
    rng = random.Random(1)
    answers = [
        "Paris",
        "It is Paris",
        "London",
        "I don't know",
        "Paris, London, Berlin",
        "<script>alert('x')</script> http://evil.example/x.png",
    ]
    rows = []
    for step in range(1, 5):
        for number in range(1, 41):
            answer = rng.choice(answers)
            response = f"<search>q</search><answer>{answer}</answer>"
            rows.append(
                describe(
                    response,
                    step=step,
                    number=number,
                    prompt=f"q{number // 4}",
                    logged=rng.choice([0.0, 1.0]),
                    source=rng.choice([SOURCE, "searchR1_hotpotqa"]),
                    file=f'run/{step} "dump".jsonl',
                )
            )
    return rows


def test_page_escapes_user_text_and_fetches_nothing() -> None:
    report = build(mixed_run(), title="<b>run</b> & co", scorer="<i>compute_score</i>")
    page = page_of(report)
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "&lt;b&gt;run&lt;/b&gt; &amp; co" in page
    assert "&lt;i&gt;compute_score&lt;/i&gt;" in page
    assert "run/1 &quot;dump&quot;.jsonl:" in page
    tags = tags_of(page)
    assert {tag for tag, _ in tags} <= {
        "html", "head", "meta", "link", "title", "style", "body", "header", "h1", "h2", "h3",
        "p", "section", "div", "figure", "img", "details", "summary", "table", "caption", "tr",
        "th", "td", "span", "code", "strong",
    }  # fmt: skip
    for _, attrs in tags:
        for name in ("src", "href"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith("data:"), (name, value[:80])
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page)
    assert "url(" not in page and "@import" not in page


def test_every_series_has_a_chart_and_the_page_names_the_interval() -> None:
    report = build(mixed_run(), scorer="compute_score")
    page = page_of(report)
    images = [attrs for tag, attrs in tags_of(page) if tag == "img"]
    assert images and all(attrs.get("class") == "chart" for attrs in images)
    assert all((attrs.get("src") or "").startswith("data:image/png;base64,") for attrs in images)
    # 8 metrics, the agreement chart, 6 indicators (spam shown twice)
    assert len(images) == 15
    assert "95% normal approximation" in page and "95% percentile bootstrap" in page
    assert "scorer <code>compute_score</code>" in page
    assert "160 rows · 4 steps · 2 data sources · 4 files" in page
    for source in (SOURCE, "searchR1_hotpotqa", "all data sources"):
        assert f"<h3>{source}</h3>" in page
    for indicator in INDICATORS:
        assert f"<h3 id='{indicator.key}'>" in page


def test_source_tables_hold_bootstrap_means() -> None:
    rows = [describe("<answer>Paris</answer>", source=SOURCE) for _ in range(3)]
    rows.append(describe("<answer>London</answer>", source=SOURCE))
    rows.append(describe("<answer>Paris</answer>", source="searchR1_hotpotqa"))
    page = page_of(build(rows))
    section = page[page.index(f"<h3>{SOURCE}</h3>") :]
    assert section.startswith(f"<h3>{SOURCE}</h3>\n<p>4 rows</p>")
    assert "<tr><td>EM</td><td>4</td><td>0.750</td>" in section
    overall = page[page.index("<h3>all data sources</h3>") :]
    assert "<tr><td>EM</td><td>5</td><td>0.800</td>" in overall


def test_write_pngs_writes_one_valid_png_per_chart(tmp_path: Path) -> None:
    report = build(mixed_run())
    paths = report.write_pngs(tmp_path / "charts")
    assert [path.name for path in paths] == [f"{key}.png" for key in SERIES]
    for path in paths:
        assert path.read_bytes().startswith(PNG_MAGIC)
        assert path.stat().st_size > 5_000
    assert sorted(p.name for p in (tmp_path / "charts").iterdir()) == sorted(p.name for p in paths)


def test_writes_are_atomic_and_leave_no_temporary_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = build(mixed_run())
    target = tmp_path / "report.html"
    report.write_html(target)
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]

    def fail(*args: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(report_module.os, "replace", fail)
    before = target.read_bytes()
    with pytest.raises(OSError, match="disk full"):
        report.write_html(target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_missing_matplotlib_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, module, None)
    report = build([describe("<answer>Paris</answer>")])
    with pytest.raises(ReportError, match=re.escape('pip install "reward-plugins[report]"')):
        report.write_html(tmp_path / "report.html")
    with pytest.raises(ReportError, match="matplotlib"):
        report.write_pngs(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_describing_rows_does_not_import_matplotlib(subprocess_env: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "from reward_plugins.rescore.records import ScoredRow\n"
        "from reward_plugins.rescore.report import describe_row, RunReport\n"
        "r = RunReport(title='t')\n"
        "r.add(describe_row(ScoredRow('f', 1, {}, 1, 's', '<answer>a</answer>', {})))\n"
        "print('matplotlib' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=subprocess_env, capture_output=True, text=True
    )
    assert out.stdout.strip() == "False", out.stderr


def test_bad_options_are_report_errors() -> None:
    with pytest.raises(ReportError, match="max_answer_words"):
        RunReport(title="t", max_answer_words=-1)
    with pytest.raises(ReportError, match="examples"):
        RunReport(title="t", examples=-1)
    report = build([describe("<answer>It is Paris</answer>")], examples=0)
    assert report.worst("subem_gap") == []


# ----------------------------------------------------------------------- costs and contracts


@pytest.mark.parametrize(
    "response",
    [
        "<answer>" * 100_000,
        "<answer>" * 100_000 + "</answer>",
        "</answer><answer>" * 50_000,
        "<search>" * 100_000 + "<answer>a</answer>",
        "<tool_call>" * 100_000 + "</tool_call>",
        "<search></search>" * 50_000,
        "<answer>" + "," * 200_000 + "</answer>",
        "<answer>" + " or " * 100_000 + "</answer>",
        "<answer>" + "1," * 100_000 + "</answer>",
        "<answer>" + " " * 200_000 + "x</answer>",
    ],
    ids=lambda response: f"{response[:12]!r}x{len(response)}",
)
def test_describe_row_is_linear_on_adversarial_responses(response: str) -> None:
    result = {"score": 0.0, "em": 0.0, "subem": 0.0, "f1": 0.0}
    started = time.perf_counter()
    stats = describe_row(scored(response, result=result))
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0  # a quadratic scan of these ~1 MB texts takes minutes
    assert len(stats.excerpt) <= EXCERPT_CHARS


@settings(max_examples=200, deadline=None)
@given(
    response=st.lists(st.sampled_from(["<answer>", "</answer>", "<search>", "</search>",
                                       "<tool_call>", "</tool_call>", ",", " or ", " ", "a",
                                       "The", "é", "\ud800", "\n"])).map("".join) | st.text(),
    prompt=st.none() | st.text() | st.lists(st.dictionaries(st.text(), st.integers())),
    step=st.none() | st.integers(),
)  # fmt: skip
def test_describe_row_never_raises_and_keeps_its_bounds(
    response: str, prompt: Any, step: int | None
) -> None:
    stats = describe_row(scored(response, prompt=prompt, step=step, result={"score": 0.0}))
    assert len(stats.excerpt) <= EXCERPT_CHARS
    assert stats.answer is None or len(stats.answer) <= EXCERPT_CHARS
    assert stats.search_calls >= 0 and stats.words == len(response.split())
    assert pickle.loads(pickle.dumps(stats)) == stats
    report = RunReport(title="t")
    report.add(stats)
    assert report.per_step("score")[step].n == 1


def test_group_keys_are_stable_across_processes(subprocess_env: dict[str, str]) -> None:
    values: list[Any] = ["question?", {"b": [1, 2], "a": "x"}, ["chat", {"role": "user"}], 3]
    code = (
        "import json, sys\n"
        "from reward_plugins.rescore.report import group_key\n"
        "print(json.dumps([group_key(v) for v in json.loads(sys.argv[1])]))\n"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code, json.dumps(values)],
            env={**subprocess_env, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(out.stdout) == [group_key(value) for value in values]
    assert group_key({"a": "x", "b": [1, 2]}) == group_key({"b": [1, 2], "a": "x"})
    assert group_key("q") != group_key("q ") and len(group_key("q") or "") == 16
    assert group_key(None) is None


def test_row_values_follow_the_series_order() -> None:
    fields = RowStats._fields[report_module._ROW_VALUES]
    assert (*fields, "agreement", "repeated_answer") == SERIES


def test_docstring_examples() -> None:
    failed, attempted = doctest.testmod(report_module)
    assert attempted > 0 and failed == 0


def test_the_docs_page_states_every_rule_and_refusal_phrase() -> None:
    docs = (REPO_ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    flat = " ".join(docs.split())
    for indicator in INDICATORS:
        assert indicator.rule in flat, indicator.key
        assert indicator.label in flat, indicator.key
    for phrase in REFUSAL_PHRASES:
        assert f"`{phrase}`" in flat, phrase
    assert 'pip install "reward-plugins[report]"' in docs
