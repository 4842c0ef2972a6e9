"""Helpers (no tests): generated verl-format inputs and runners of the CLI (in a child process, or
in this one) for the CLI tests."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("searchR1_nq", "searchR1_triviaqa", "searchR1_hotpotqa", "searchR1_bamboogle")
KINDS = ("correct", "variant", "superset", "wrong", "missing", "spam")


def run_cli(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m reward_plugins ARGS`` with this checkout first on the path (and ``env``
    added to the environment)."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "reward_plugins", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def run_cli_here(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``reward_plugins.cli.main(ARGS)`` in this interpreter, as :func:`run_cli` reports it: the
    exit status (``SystemExit`` included, as argparse raises it), and what the command wrote to
    stdout and stderr. For commands whose output is the point; a test of the process itself
    (signals, environment, imports, exit on a broken pipe) uses :func:`run_cli`. The registry
    and the routers are restored afterwards (the command may load plugins)."""
    from reward_plugins.cli import main
    from reward_plugins.testing import registry_restored

    stdout, stderr = io.StringIO(), io.StringIO()
    argv = [str(arg) for arg in args]
    with contextlib.ExitStack() as stack:
        stack.enter_context(registry_restored())
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(stdout))
        stack.enter_context(contextlib.redirect_stderr(stderr))
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return subprocess.CompletedProcess(argv, code, stdout.getvalue(), stderr.getvalue())


def response_text(golds: list[str], kind: str, rng: random.Random) -> str:
    """A Search-R1 style response whose answer is right, wrong, absent or spammed."""
    gold = rng.choice(golds)
    trace = (
        f"<think>Let me look this up.</think>\n<search> {gold} facts </search>\n"
        f"<information>Doc 1(Title: {gold}) {gold} is discussed here.</information>\n"
    )
    answers = {
        "correct": f"<answer> {gold} </answer>",
        "variant": f"<answer>The {gold.upper()}!</answer>",
        "superset": f"<answer> it is {gold} for sure </answer>",
        "wrong": "<answer> Somebody Else </answer>",
        "missing": "<think>I could not decide.</think>",
        "spam": f"<answer>{gold}</answer>" * 12,
    }
    return trace + answers[kind]


def training_rows(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """verl training rows (``data_source``, ``prompt``, ``reward_model``...) plus ``response``."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        golds = [f"Gold {rng.randint(0, 99)} Answer", f"Alias {index}"][: rng.randint(1, 2)]
        rows.append(
            {
                "data_source": rng.choice(SOURCES),
                "prompt": [{"role": "user", "content": f"Question {index}?"}],
                "ability": "fact-reasoning",
                "reward_model": {"style": "rule", "ground_truth": {"target": golds}},
                "extra_info": {"index": index, "split": "test"},
                "response": response_text(golds, KINDS[index % len(KINDS)], rng),
            }
        )
    return rows


def dump_rows(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """Rows as verl's ``trainer.validation_data_dir`` dump writes them (no data source)."""
    return [
        {
            "input": row["prompt"][0]["content"],
            "output": row["response"],
            "gts": row["reward_model"]["ground_truth"],
            "score": 0.5,
            "step": 3,
            "acc": 0.0,
        }
        for row in training_rows(count, seed)
    ]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    """One JSON document per line; a ``str`` item is written as the raw line."""
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Through pandas, with every ``ground_truth["target"]`` as a numpy array (as verl's
    preprocessing writes Search-R1 data)."""
    import numpy as np
    import pandas as pd

    def with_array(reward_model: Any) -> Any:
        truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else None
        if isinstance(truth, dict) and isinstance(truth.get("target"), list):
            target = np.array(truth["target"], dtype=object)
            return {**reward_model, "ground_truth": {**truth, "target": target}}
        return reward_model

    frame = pd.DataFrame(rows)
    frame["reward_model"] = [with_array(reward_model) for reward_model in frame["reward_model"]]
    frame.to_parquet(path)
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def router_result(
    row: dict[str, Any], scorer: str = "compute_score", **options: Any
) -> dict[str, Any]:
    """What the router returns for a training row, called in this process."""
    import reward_plugins.router

    function = getattr(reward_plugins.router, scorer)
    truth = row["reward_model"]["ground_truth"]
    return dict(function(row["data_source"], row["response"], truth, **options))


def verl_score(response: str, ground_truth: Any) -> float:
    """verl's reference ``search_r1_like_qa_em.compute_score`` (its prints discarded)."""
    from verl.utils.reward_score import search_r1_like_qa_em

    with contextlib.redirect_stdout(io.StringIO()):
        return float(search_r1_like_qa_em.compute_score(response, ground_truth))


# --- runs, temporary files, shells (tests/test_cli_run.py, tests/test_cli_failures.py) -------

REWARD_KEYS = (
    "score",
    "acc",
    "em",
    "subem",
    "f1",
    "answer_found",
    "answer_tags",
    "spam_penalized",
)
"""The result keys of the built-in Search-R1 scorers, in order (``reward_<key>`` columns)."""

TEMP_SUFFIX = ".reward-plugins.tmp"


def temporaries(root: Path) -> list[str]:
    """Every temporary file of the CLI under ``root`` (hidden ones included), relative, sorted."""
    return sorted(str(path.relative_to(root)) for path in root.rglob(f"*{TEMP_SUFFIX}"))


def reward_values(record: dict[str, Any]) -> dict[str, Any]:
    """``{key: value}`` of a row's ``reward_<key>`` columns."""
    return {k.removeprefix("reward_"): v for k, v in record.items() if k.startswith("reward_")}


def verl_dump_line(entry: dict[str, Any]) -> str:
    """One line as verl 0.9.1's ``_write_generations`` writes it (numpy values through ``str``)."""
    return json.dumps(entry, ensure_ascii=False, default=str)


def write_verl_run(directory: Path, steps: dict[int, int], seed: int = 0) -> dict[int, list[Any]]:
    """``{step}.jsonl`` files of ``count`` rows each (``steps``: step -> count), as verl's
    ``trainer.rollout_data_dir`` holds them; returns each step's rows."""
    directory.mkdir(parents=True, exist_ok=True)
    written = {}
    for offset, (step, count) in enumerate(steps.items()):
        rows = [{**row, "step": step} for row in dump_rows(count, seed=seed + offset)]
        lines = "".join(verl_dump_line(row) + "\n" for row in rows)
        (directory / f"{step}.jsonl").write_text(lines, encoding="utf-8")
        written[step] = rows
    return written


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The message of a CLI error: stderr must be exactly one ``reward-plugins: error:`` line
    (no traceback, nothing on stdout); returns the text after the prefix."""
    prefix = "reward-plugins: error: "
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(prefix) and result.stderr.count("\n") == 1, result.stderr
    assert TEMP_SUFFIX not in result.stderr, result.stderr
    assert result.stdout == "", result.stdout
    return result.stderr[len(prefix) : -1]


def run_docs_block(heading: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run the first ``bash`` block under ``heading`` of docs/cli.md in ``cwd``, with this
    checkout's ``reward-plugins`` first; returns the result and the section's first ``text``
    block (what the docs say it prints)."""
    docs = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    section = docs[docs.index(f"\n{heading}\n") :]
    script = section.split("```bash\n", 1)[1].split("\n```", 1)[0]
    shown = section.split("```text\n", 1)[1].split("\n```", 1)[0] if "```text" in section else ""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": path}
    command = ["bash", "-e", "-c", script]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    return result, shown


def run_cli_in_shell(
    setup: str, *args: str | Path, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m reward_plugins ARGS`` exec'd by bash after ``setup`` (``umask 077``,
    ``ulimit -f 64``), so that the setting applies to the CLI's own process."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = ["bash", "-c", f'{setup}; exec "$@"', "bash", sys.executable, "-m", "reward_plugins"]
    return subprocess.run(
        [*command, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


def run_cli_with_script(
    script: str, *args: str | Path, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI run by ``python -c script ARGS``: a script that registers scorers, then calls
    ``sys.exit(main(sys.argv[1:]))``."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", script, *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
