"""The verl-versions page and the README's summary line are the matrix's record, rendered
(``matrix/record.py``); the record covers exactly the versions the nox file runs."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "matrix"))
sys.path.insert(0, str(ROOT))

import record  # noqa: E402

import noxfile  # noqa: E402


def block(text: str, markers: tuple[str, str]) -> str:
    start, end = markers
    match = re.search(re.escape(start) + "(.*?)" + re.escape(end), text, re.S)
    assert match, f"no {start.strip()} block"
    return match.group(1)


def test_page_is_the_rendered_record() -> None:
    page = record.PAGE.read_text()
    assert block(page, record.PAGE_MARKERS) == record.render_page(record.load())


def test_readme_summary_is_the_rendered_record() -> None:
    readme = record.README.read_text()
    assert block(readme, record.README_MARKERS) == record.render_summary(record.load())


def test_record_covers_every_version_the_matrix_runs() -> None:
    results = record.load()
    assert list(results["versions"]) == list(noxfile.VERSIONS)
    for version, run in results["versions"].items():
        assert run["packages"]["verl"] == version
        assert not run["packages"]["torch"].endswith("cu") and "+cpu" in run["packages"]["torch"]
        constraints = (noxfile.CONSTRAINTS / f"verl-{version}.txt").read_text().splitlines()
        assert not [line for line in constraints if line.lower().startswith("nvidia")], version
        for name, pinned in run["packages"].items():
            assert f"{name}=={pinned}" in constraints, (version, name)


@pytest.mark.parametrize("version", noxfile.VERSIONS)
def test_every_failure_the_record_holds_is_explained(version: str) -> None:
    """A row that does not work names a cause the page's "What to do instead" covers."""
    page = record.PAGE.read_text().split("## What to do instead")[1]
    causes = {
        "'NoneType' object has no attribute 'enable'": "overlong_buffer_cfg",
        "Can't pickle local object": "`prime` scores every sample 0 on verl 0.4.1",
        "SilentFallback": "does not read the legacy top-level keys",
        "No module named 'cachetools'": "imports `cachetools`, `uvicorn` and `fastapi`",
        "No module named 'uvicorn'": "imports `cachetools`, `uvicorn` and `fastapi`",
        "No module named 'fastapi'": "imports `cachetools`, `uvicorn` and `fastapi`",
        "No module named 'openai'": "imports `openai`",
    }
    for row, outcome in record.load()["versions"][version]["rows"].items():
        if outcome != "ok":
            explained = [why for error, why in causes.items() if error in outcome]
            assert explained and all(why in page for why in explained), (row, outcome)
