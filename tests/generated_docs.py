"""Tables in docs/ that tests generate: one check that a doc's copy is what the test renders."""

from __future__ import annotations

from pathlib import Path


def assert_generated(doc: Path, marker: str, rendered: str, generator: str) -> None:
    """``doc`` holds exactly one block between ``<!-- marker -->`` and ``<!-- /marker -->``,
    and it is ``rendered``; else the assertion names the command that prints it."""
    start, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    text = doc.read_text(encoding="utf-8")
    assert text.count(start) == 1 and text.count(end) == 1, f"{doc.name}: one {start} block"
    block = text.split(start, 1)[1].split(end, 1)[0]
    assert block.strip() == rendered, f"{doc.name} differs; run: python {generator}"


def marked(marker: str, rendered: str) -> str:
    """``rendered`` between its markers, as the docs hold it (what ``python tests/...`` prints)."""
    return f"<!-- {marker} -->\n{rendered}\n<!-- /{marker} -->\n"
