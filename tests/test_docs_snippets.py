"""The documentation runs: every ``python`` block of ``README.md`` and ``docs/*.md``, every link.

- Each ``python`` code block runs on CPU in a fresh interpreter (so in a fresh namespace, with
  the working tree's package first on ``sys.path``), in an empty temporary directory. What it
  prints must equal its ``# -> TEXT`` comments, in order, one printed line per comment (a
  comment at the end of a line or on its own line). Snippets show results this way, never with
  ``assert``.
- A block may be skipped only when the line just before its opening fence holds
  ``<!-- no-run: REASON -->``, the reason naming what else the block needs (a GPU, a server,
  network access, a verl cluster).
- Every relative link (``[text](path)``, ``[text](path#anchor)``, reference definitions,
  ``href``/``src`` attributes) points to a file inside the repository, and an anchor to a heading
  of the target. ``docs/plugins.md`` and ``docs/benchmarks.md`` are written separately: a link to
  one of them is tolerated while the file does not exist yet.
"""

from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path
from typing import NamedTuple

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCS_DIR = REPO_ROOT / "docs"
DOC_FILES = [REPO_ROOT / "README.md", *sorted(DOCS_DIR.glob("*.md"))]

PENDING_DOCS = frozenset({DOCS_DIR / "plugins.md", DOCS_DIR / "benchmarks.md"})
"""Pages other work adds; links to them are tolerated until they exist."""

PYTHON_LANGUAGES = frozenset({"python", "py", "python3"})
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")
NO_RUN = re.compile(r"<!--\s*no-run:(?P<reason>.*?)-->")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1)[^\n]|\n(?!\n))+?\1")
"""An inline code span, which may wrap lines but not cross a blank one."""
EXPECTED_PREFIX = "# -> "
SNIPPET_TIMEOUT_S = 120


class Block(NamedTuple):
    path: Path
    line: int
    """1-based line of the opening fence."""
    end: int
    """1-based line of the closing fence (one past the file for an unclosed block)."""
    language: str
    source: str
    no_run: str | None
    """The reason of a ``<!-- no-run: ... -->`` marker on the line before the fence."""

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"


def code_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file (an unclosed fence runs to the end)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence = opening["fence"]
        start = index
        index += 1
        body = []
        while index < len(lines) and not re.match(
            rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[index]
        ):
            body.append(lines[index])
            index += 1
        end = index + 1
        index += 1
        marker = NO_RUN.search(lines[start - 1]) if start else None
        blocks.append(
            Block(
                path,
                start + 1,
                end,
                opening["info"].lower(),
                textwrap.dedent("\n".join(body)) + "\n",
                marker["reason"].strip() if marker else None,
            )
        )
    return blocks


def prose(path: Path) -> str:
    """The file without its fenced code blocks and inline code spans (links there are not links).

    Code blocks become blank lines and code spans lose all but their line breaks, so line
    numbers stay right.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    for block in code_blocks(path):
        for index in range(block.line - 1, min(block.end, len(lines))):
            lines[index] = ""
    return INLINE_CODE.sub(lambda span: "\n" * span[0].count("\n"), "\n".join(lines))


PYTHON_BLOCKS = [
    block for path in DOC_FILES for block in code_blocks(path) if block.language in PYTHON_LANGUAGES
]


def expected_output(source: str) -> list[str]:
    """The ``# -> TEXT`` comments of a snippet, in order."""
    comments = [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    return [c[len(EXPECTED_PREFIX) :].rstrip() for c in comments if c.startswith(EXPECTED_PREFIX)]


def test_there_are_snippets_to_run() -> None:
    assert DOCS_DIR.is_dir()
    runnable = [block for block in PYTHON_BLOCKS if block.no_run is None]
    assert any(block.path.name == "README.md" for block in runnable)
    assert len(runnable) >= 5


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda block: block.name)
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    if block.no_run is not None:
        pytest.skip(f"no-run: {block.no_run}")
    script = tmp_path / "snippet.py"
    script.write_text(block.source, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    completed = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=SNIPPET_TIMEOUT_S,
    )
    assert completed.returncode == 0, f"{block.name} failed:\n{completed.stderr[-3000:]}"
    expected = expected_output(block.source)
    if expected:
        printed = [line.rstrip() for line in completed.stdout.splitlines()]
        assert printed == expected, f"{block.name}: printed output differs from its '# ->' lines"


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda block: block.name)
def test_python_block_shows_results_without_assert(block: Block) -> None:
    tree = ast.parse(block.source, filename=block.name)  # a no-run block must parse too
    asserts = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)]
    assert not asserts, f"{block.name}: use '# -> value' comments, not assert (lines {asserts})"


NO_RUN_BLOCKS = [block for block in PYTHON_BLOCKS if block.no_run is not None]


@pytest.mark.parametrize("block", NO_RUN_BLOCKS, ids=lambda block: block.name)
def test_no_run_reason_says_what_else_is_needed(block: Block) -> None:
    reason = block.no_run or ""
    assert len(reason.split()) >= 3, f"{block.name}: say what else the block needs"


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_no_run_markers_sit_right_above_a_python_fence(path: Path) -> None:
    lines = prose(path).splitlines()  # a marker quoted in inline code is no marker
    marked = {block.line - 1 for block in code_blocks(path) if block.language in PYTHON_LANGUAGES}
    for number, line in enumerate(lines, start=1):
        if NO_RUN.search(line):
            assert number in marked, f"{path.name}:{number}: no python fence on the next line"


# ---------------------------------------------------------------------------------- links

INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?(?P<target>[^)\s>]*)>?[^)]*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(?P<target>[^\s>]+)>?", re.MULTILINE)
HTML_ATTRIBUTE = re.compile(r"""\b(?:href|src)\s*=\s*["'](?P<target>[^"']*)["']""")
HTML_ANCHOR = re.compile(r"""<a\s[^>]*\b(?:id|name)\s*=\s*["'](?P<anchor>[^"']+)["']""")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(?P<text>.*?)\s*#*\s*$", re.MULTILINE)


def links(path: Path) -> list[str]:
    text = prose(path)
    return [
        match["target"]
        for pattern in (INLINE_LINK, REFERENCE_DEFINITION, HTML_ATTRIBUTE)
        for match in pattern.finditer(text)
    ]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in HEADING.finditer(prose(path)):
        base = slug(heading["text"])
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    found.update(match["anchor"] for match in HTML_ANCHOR.finditer(text))
    return found


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    problems = []
    for target in links(path):
        if not target or SCHEME.match(target) or target.startswith("//"):
            continue  # an absolute URL (https:, mailto:) is not checked here
        file_part, _, fragment = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.is_relative_to(REPO_ROOT):
            problems.append(f"{target}: outside the repository")
            continue
        if not resolved.exists():
            if resolved not in PENDING_DOCS:
                problems.append(f"{target}: no such file")
            continue
        if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            problems.append(f"{target}: no heading with anchor #{fragment}")
    assert not problems, f"{path.relative_to(REPO_ROOT)}: " + "; ".join(problems)


def test_link_checker_finds_links() -> None:
    """Guard the checker itself: the README links into docs/, and the slugs look like GitHub's."""
    assert "docs/rewards.md" in links(REPO_ROOT / "README.md")
    assert slug("The `compute_score_format` reward: v0.3") == "the-compute_score_format-reward-v03"
    assert "quick-start" in anchors(REPO_ROOT / "README.md")
