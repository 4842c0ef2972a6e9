"""The run report in a real browser: headless Chromium loads the page without a console error and
draws every chart.

Needs Debian's ``chromium`` and ``chromium-driver`` (``/usr/bin/chromium``,
``/usr/bin/chromedriver``) and selenium; skipped, with the reason, where they are missing.
"""

from __future__ import annotations

import io
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reward_plugins import compute_score
from reward_plugins.rescore.records import ScoredRow
from reward_plugins.rescore.report import RowStats, RunReport, describe_row
from reward_plugins.results import ResultKey

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    if os.environ.get("CI") == "true":  # .ci/run installs them: a missing browser is a failure
        raise RuntimeError(f"CI needs {CHROMIUM} and {CHROMEDRIVER}")
    pytest.skip(
        f"headless Chromium needs {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium "
        "chromium-driver)",
        allow_module_level=True,
    )
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
matplotlib_image = pytest.importorskip("matplotlib.image", reason="matplotlib is not installed")

ANSWERS = (
    "Paris",
    "It is Paris",
    "London",
    "I don't know",
    "Paris, London, Berlin",
    "<script>document.title = 'pwned'</script>",
    "word " * 40,
)


SCHEMA = (
    ResultKey("score", "reward", "mean reward", gdpo=True),
    ResultKey("em", "component", "EM", gdpo=True),
    ResultKey("subem", "component", "SubEM", gdpo=True),
    ResultKey("f1", "component", "F1", gdpo=True),
    ResultKey("answer_found", "rate", "answer rate"),
    ResultKey("spam_penalized", "rate", "spam-penalized rate"),
    ResultKey("answer_tags", "count", "answer tags"),
)
"""The schema the page follows, declared here so that the chart count is this test's."""


def generated_run(rows: int = 2_000, steps: int = 10) -> Iterator[RowStats]:
    """``rows`` rows over ``steps`` steps in groups of 5, scored by the real router; the policy
    improves with the step, so the curves move."""
    rng = random.Random(0)
    per_step = rows // steps
    for step in range(1, steps + 1):
        for number in range(1, per_step + 1):
            good = rng.random() < 0.2 + 0.05 * step
            answer = "Paris" if good else rng.choice(ANSWERS)
            searches = "<search>capital of France</search>" * rng.randrange(4)
            response = f"<think>t</think>{searches}<answer>{answer}</answer>"
            if rng.random() < 0.05:
                response *= 11  # answer-tag spam
            result = compute_score("searchR1_nq", response, ["Paris"], return_dict=True)
            logged: Any = result["score"] if rng.random() < 0.9 else 1.0
            record = {"input": f"question {(number - 1) // 5}", "score": logged, "step": step}
            source = "searchR1_nq" if number % 3 else "searchR1_hotpotqa"
            row = ScoredRow(f"val/{step}.jsonl", number, record, step, source, response, result)
            yield describe_row(row)


@pytest.fixture(scope="module")
def report_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    report = RunReport(
        title="browser <check>", scorer="compute_score", schema_of=lambda source: SCHEMA
    )
    for stats in generated_run():
        report.add(stats)
    path = tmp_path_factory.mktemp("report") / "report.html"
    report.write_html(path)
    return path


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER))
    browser = webdriver.Chrome(service=service, options=options)
    try:
        yield browser
    finally:
        browser.quit()


def test_page_loads_without_console_errors_and_runs_no_script(
    driver: Any, report_path: Path
) -> None:
    driver.get(report_path.as_uri())
    severe = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert severe == []
    assert driver.title == "browser <check>"  # the escaped <script> in an answer did not run
    assert driver.execute_script("return document.scripts.length") == 0
    text = driver.find_element("tag name", "body").text
    assert "<script>document.title = 'pwned'</script>" in text  # shown as text


def test_every_chart_is_drawn(driver: Any, report_path: Path) -> None:
    driver.get(report_path.as_uri())
    charts = driver.find_elements("css selector", ".chart")
    # 4 curves (reward, components), 2 rates, a count's curve and distribution, agreement and
    # the GRPO groups with one reward
    assert len(charts) == 10
    for chart in charts:
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", chart)
        loaded = driver.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth", chart
        )
        assert loaded == 640, chart.get_attribute("alt")  # decoded, not a broken image
        assert chart.rect["width"] > 300 and chart.rect["height"] > 150
        pixels = matplotlib_image.imread(io.BytesIO(chart.screenshot_as_png), format="png")
        rgb = np.round(pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
        background = (rgb >= 250).all(axis=1)
        colours = {tuple(colour) for colour in rgb[~background][::7].tolist()}
        name = chart.get_attribute("alt")
        assert 0.02 < 1 - background.mean() < 0.6, name  # axes, ticks, a line and a band
        assert len(colours) >= 8, name  # anti-aliased strokes: many shades, not a flat icon
        tinted = rgb.max(axis=1).astype(int) - rgb.min(axis=1) > 25  # not white, grey or black
        assert tinted.mean() > 0.003, name  # the series' blue or red line and band are there
