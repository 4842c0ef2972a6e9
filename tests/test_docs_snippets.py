"""The documentation runs: every ``python`` and shell block of ``README.md`` and ``docs/*.md``,
every link.

- Each ``python`` code block runs on CPU in a fresh interpreter (so in a fresh namespace, with
  the working tree's package first on ``sys.path``), in an empty temporary directory. What it
  prints must equal its ``# -> TEXT`` comments, in order, one printed line per comment (a
  comment at the end of a line or on its own line). Snippets show results this way, never with
  ``assert``.
- Each ``bash`` (``sh``, ``shell``, ``console``: its ``$ `` lines) block runs under
  ``bash -euo pipefail`` in a fresh copy of the doc workspace below, with the interpreter's
  ``bin`` directory (``python``, ``reward-plugins``) first on ``PATH`` and the working tree first
  on ``PYTHONPATH``. It must exit 0, or with the status N of an ``<!-- exit-status: N -->`` line
  just before its fence, and then print exactly one ``reward-plugins: error: ...`` line on
  stderr. Its whole-line ``# -> TEXT`` comments, when it has any, must equal what it prints.
- A block may be skipped only when the line just before its opening fence holds
  ``<!-- no-run: REASON -->``, the reason naming what else the block needs (a GPU, a server,
  network access, a verl cluster, an installed plugin).
- Every relative link (``[text](path)``, ``[text](path#anchor)``, reference definitions,
  ``href``/``src`` attributes) points to a file inside the repository, and an anchor to a heading
  of the target. ``docs/plugins.md`` and ``docs/benchmarks.md`` are written separately: a link to
  one of them is tolerated while the file does not exist yet.

The doc workspace: the files the documented commands name, made from the sample of rollouts
shipped in the package (``reward_plugins/data/sample_rollouts.jsonl``, 120 Search-R1 rows),
written as verl 0.9.1 writes its dumps (``_write_generations`` in
``verl/trainer/ppo/ray_trainer.py``: ``input``, ``output``, ``gts``, ``score``, ``step``, the
golds a numpy array dumped through ``str``, ``score`` verl's own ``search_r1_like_qa_em``):

- ``ckpt/rollouts/1.jsonl``, ``ckpt/rollouts/2.jsonl``: a ``trainer.rollout_data_dir``, the
  sample's first and last 60 rows as steps 1 and 2;
- ``ckpt/val/120.jsonl``: a ``trainer.validation_data_dir`` dump, all 120 rows at step 120;
- ``configs/``: a copy of the repository's verl configs;
- ``my_recipe.yaml``: a copy of the shipped recipe ``search_r1_shaped``;
- ``data/val.parquet``: the run's verl dataset (``data.val_files``): each distinct prompt of the
  sample once, with its ``data_source``, ``prompt``, ``reward_model`` and ``extra_info``.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from test_cli_helpers import verl_dump_line, verl_score

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCS_DIR = REPO_ROOT / "docs"
DOC_FILES = [REPO_ROOT / "README.md", *sorted(DOCS_DIR.glob("*.md"))]

PENDING_DOCS = frozenset({DOCS_DIR / "plugins.md", DOCS_DIR / "benchmarks.md"})
"""Pages other work adds; links to them are tolerated until they exist."""

PYTHON_LANGUAGES = frozenset({"python", "py", "python3"})
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})
RUNNABLE_LANGUAGES = PYTHON_LANGUAGES | SHELL_LANGUAGES
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")
MARKER = re.compile(r"<!--\s*(?P<kind>no-run|exit-status):(?P<value>.*?)-->")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1)[^\n]|\n(?!\n))+?\1")
"""An inline code span, which may wrap lines but not cross a blank one."""
EXPECTED_PREFIX = "# -> "
SNIPPET_TIMEOUT_S = 300
SHELL_TIMEOUT_S = 300
SLOW_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:trl|verl|ray|openrlhf)\b", re.MULTILINE)
"""A python block that imports a trainer or Ray is ``slow`` (tests/conftest.py)."""

SAMPLE = REPO_ROOT / "reward_plugins" / "data" / "sample_rollouts.jsonl"
RECIPES = REPO_ROOT / "reward_plugins" / "data" / "recipes"
WORKSPACE_FILES = (
    "ckpt/rollouts/1.jsonl",
    "ckpt/rollouts/2.jsonl",
    "ckpt/val/120.jsonl",
    "configs",
    "my_recipe.yaml",
    "data/val.parquet",
)
"""What the doc workspace holds (the module docstring says what each is)."""


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
    exit_status: int = 0
    """The status of an ``<!-- exit-status: N -->`` marker on the line before the fence."""

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
        marker = MARKER.search(lines[start - 1]) if start else None
        kind, value = (marker["kind"], marker["value"].strip()) if marker else (None, "")
        blocks.append(
            Block(
                path,
                start + 1,
                end,
                opening["info"].lower(),
                textwrap.dedent("\n".join(body)) + "\n",
                value if kind == "no-run" else None,
                int(value) if kind == "exit-status" else 0,
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


ALL_BLOCKS = [block for path in DOC_FILES for block in code_blocks(path)]
PYTHON_BLOCKS = [block for block in ALL_BLOCKS if block.language in PYTHON_LANGUAGES]
SHELL_BLOCKS = [block for block in ALL_BLOCKS if block.language in SHELL_LANGUAGES]
RUNNABLE_BLOCKS = PYTHON_BLOCKS + SHELL_BLOCKS


def python_param(block: Block) -> object:
    """A pytest parameter for a python block, ``slow`` when it imports a trainer or Ray."""
    marks = [pytest.mark.slow] if SLOW_IMPORT.search(block.source) else []
    return pytest.param(block, id=block.name, marks=marks)


def expected_output(source: str) -> list[str]:
    """The ``# -> TEXT`` comments of a snippet, in order."""
    comments = [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    return [c[len(EXPECTED_PREFIX) :].rstrip() for c in comments if c.startswith(EXPECTED_PREFIX)]


def shell_script(block: Block) -> str:
    """What a shell block runs: its text, or for ``console`` its ``$ `` lines and their
    backslash continuations (the other lines are output)."""
    if block.language != "console":
        return block.source
    commands = []
    continued = False
    for line in block.source.splitlines():
        if continued or line.startswith("$ "):
            commands.append(line if continued else line[2:])
            continued = line.endswith("\\")
    return "\n".join(commands) + "\n"


def shell_expected_output(script: str) -> list[str]:
    """The whole-line ``# -> TEXT`` comments of a shell script, in order."""
    lines = (line.strip() for line in script.splitlines())
    return [line[len(EXPECTED_PREFIX) :].rstrip() for line in lines if line.startswith("# -> ")]


def test_there_are_snippets_to_run() -> None:
    assert DOCS_DIR.is_dir()
    for blocks in (PYTHON_BLOCKS, SHELL_BLOCKS):
        runnable = [block for block in blocks if block.no_run is None]
        assert any(block.path.name == "README.md" for block in runnable)
        assert len(runnable) >= 5


def test_console_blocks_run_their_prompt_lines() -> None:
    source = "$ reward-plugins list \\\n    --quiet\ncompute_score\n$ echo done\ndone\n"
    block = Block(REPO_ROOT / "README.md", 1, 7, "console", source, None)
    assert shell_script(block) == "reward-plugins list \\\n    --quiet\necho done\n"
    assert shell_script(block._replace(language="bash")) == source


def test_shell_expected_output_reads_whole_line_comments() -> None:
    script = "echo a  # -> not this\n# -> a\n  # -> b c  \n#-> no\n"
    assert shell_expected_output(script) == ["a", "b c"]


def doc_environment() -> dict[str, str]:
    """This interpreter's ``bin`` directory first on ``PATH``, the working tree on
    ``PYTHONPATH``."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), env["PATH"]]))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


@pytest.mark.parametrize("block", [python_param(block) for block in PYTHON_BLOCKS])
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    if block.no_run is not None:
        pytest.skip(f"no-run: {block.no_run}")
    script = tmp_path / "snippet.py"
    script.write_text(block.source, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=doc_environment(),
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


# ------------------------------------------------------------------------ shell blocks


def write_dump(path: Path, rows: list[dict[str, Any]], step: int) -> None:
    """``rows`` (training rows of the shipped sample) as verl's dump of ``step``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for row in rows:
        truth = row["reward_model"]["ground_truth"]
        entry = {
            "input": row["prompt"][-1]["content"],
            "output": row["response"],
            "gts": {**truth, "target": np.array(truth["target"])},
            "score": verl_score(row["response"], truth),
            "step": step,
        }
        lines.append(verl_dump_line(entry) + "\n")
    path.write_text("".join(lines), encoding="utf-8")


def write_dataset(path: Path, rows: list[dict[str, Any]]) -> None:
    """The verl dataset ``rows`` came from: each prompt once, without the response."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    prompts = {json.dumps(row["prompt"]): row for row in reversed(rows)}
    table = [{k: v for k, v in row.items() if k != "response"} for row in prompts.values()]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(table[::-1]), path)


@pytest.fixture(scope="module")
def doc_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the documented commands name (see the module docstring)."""
    root = tmp_path_factory.mktemp("doc-workspace")
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    half = len(rows) // 2
    write_dump(root / "ckpt" / "rollouts" / "1.jsonl", rows[:half], step=1)
    write_dump(root / "ckpt" / "rollouts" / "2.jsonl", rows[half:], step=2)
    write_dump(root / "ckpt" / "val" / "120.jsonl", rows, step=120)
    shutil.copytree(REPO_ROOT / "configs", root / "configs")
    shutil.copyfile(RECIPES / "search_r1_shaped.yaml", root / "my_recipe.yaml")
    write_dataset(root / "data" / "val.parquet", rows)
    return root


@pytest.mark.slow
def test_doc_workspace_holds_the_sample_as_verl_dumps(doc_workspace: Path) -> None:
    assert sorted(path.name for path in doc_workspace.iterdir()) == sorted(
        {name.split("/")[0] for name in WORKSPACE_FILES}
    )
    for name in WORKSPACE_FILES:
        assert (doc_workspace / name).exists(), name
    val_dump = (doc_workspace / "ckpt" / "val" / "120.jsonl").read_text(encoding="utf-8")
    val = [json.loads(line) for line in val_dump.splitlines()]
    assert len(val) == 120 and {row["step"] for row in val} == {120}
    assert val[0]["gts"] == {"target": "['George Orwell' 'Eric Arthur Blair']"}
    assert val[0]["score"] == 0.0  # verl takes the last of its two answers, a wrong one
    steps = sorted(doc_workspace.glob("ckpt/rollouts/*.jsonl"))
    assert [len(path.read_text().splitlines()) for path in steps] == [60, 60]


@pytest.mark.slow
@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda block: block.name)
def test_shell_block_runs(block: Block, doc_workspace: Path, tmp_path: Path) -> None:
    if block.no_run is not None:
        pytest.skip(f"no-run: {block.no_run}")
    workspace = tmp_path / "workspace"
    shutil.copytree(doc_workspace, workspace)
    script = shell_script(block)
    completed = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=workspace,
        env=doc_environment(),
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT_S,
    )
    assert completed.returncode == block.exit_status, (
        f"{block.name} exited {completed.returncode}, not {block.exit_status}:\n"
        f"{completed.stderr[-3000:]}"
    )
    if block.exit_status:
        errors = completed.stderr.splitlines()
        assert len(errors) == 1 and errors[0].startswith("reward-plugins: error: "), errors
    expected = shell_expected_output(script)
    if expected:
        printed = [line.rstrip() for line in completed.stdout.splitlines()]
        assert printed == expected, f"{block.name}: printed output differs from its '# ->' lines"


# ---------------------------------------------------------------------------- markers

NO_RUN_BLOCKS = [block for block in RUNNABLE_BLOCKS if block.no_run is not None]


@pytest.mark.parametrize("block", NO_RUN_BLOCKS, ids=lambda block: block.name)
def test_no_run_reason_says_what_else_is_needed(block: Block) -> None:
    reason = block.no_run or ""
    assert len(reason.split()) >= 3, f"{block.name}: say what else the block needs"


def test_markers_are_read() -> None:
    blocks = code_blocks(REPO_ROOT / "docs" / "verl-versions.md")
    assert any(block.exit_status == 1 and block.no_run is None for block in blocks)
    assert any(block.no_run and block.exit_status == 0 for block in blocks)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_markers_sit_right_above_a_runnable_fence(path: Path) -> None:
    """``no-run`` above a python or shell fence, ``exit-status`` above a shell fence."""
    lines = prose(path).splitlines()  # a marker quoted in inline code is no marker
    blocks = code_blocks(path)
    fences = {
        "no-run": {block.line - 1 for block in blocks if block.language in RUNNABLE_LANGUAGES},
        "exit-status": {block.line - 1 for block in blocks if block.language in SHELL_LANGUAGES},
    }
    for number, line in enumerate(lines, start=1):
        for marker in MARKER.finditer(line):
            assert number in fences[marker["kind"]], (
                f"{path.name}:{number}: {marker['kind']} needs a runnable fence on the next line"
            )


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
