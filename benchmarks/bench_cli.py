"""Speed of ``reward-plugins score`` on a generated verl-format parquet file (200,000 rows).

Runs the command with ``--workers 1`` and ``--workers 2`` (each in a fresh process, as a user
would) and reports rows per second of the scoring phase, the ratio, and the serial phases
(read, write, summary) apart; then compares the end-to-end time with a plain loop that reads the
same file with pandas, scores each row with verl's reference
``search_r1_like_qa_em.compute_score`` (its 1-in-64 prints go to /dev/null) and writes the
scores with pandas. Each is run ``--repeats`` times and the fastest run is kept. Scores are
checked identical across the three before any time is reported.

    python benchmarks/bench_cli.py [--rows 200000] [--data /tmp/rollouts.parquet]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from rollouts import make_rollouts

REPO = Path(__file__).resolve().parents[1]


def write_dataset(path: Path, rows: int) -> None:
    """verl training rows (``data_source``, ``prompt``, ``reward_model``...) plus ``response``;
    ``ground_truth["target"]`` is a numpy array, as pandas writes it."""
    rollouts = make_rollouts(rows // 8, seed=7)
    rows = len(rollouts)
    frame = pd.DataFrame(
        {
            "data_source": [source for source, _, _ in rollouts],
            "prompt": [[{"role": "user", "content": f"question {i}"}] for i in range(rows)],
            "ability": "fact-reasoning",
            "reward_model": [{"style": "rule", "ground_truth": gt} for _, _, gt in rollouts],
            "extra_info": [{"index": i, "split": "test"} for i in range(len(rollouts))],
            "response": [response for _, response, _ in rollouts],
        }
    )
    frame.to_parquet(path)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cli(source: Path, output: Path, workers: int) -> tuple[float, float, dict]:
    """Wall seconds, CPU seconds (the command and its workers) and the summary of one run."""
    summary_path = output.with_suffix(".summary.json")
    command = [sys.executable, "-m", "reward_plugins", "score", str(source), "-o", str(output)]
    command += ["--workers", str(workers), "--quiet", "--summary-json", str(summary_path)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cpu, start = _children_cpu(), time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    return wall, cpu, json.loads(summary_path.read_text())


def verl_loop(source: Path, output: Path) -> float:
    """The plain way: read with pandas, score each row with verl, write the scores. Runs in a
    fresh process, like the command; its seconds exclude importing verl (several seconds)."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from bench_cli import _verl_loop; "
        "from pathlib import Path; print(_verl_loop(Path(sys.argv[2]), Path(sys.argv[3])))"
    )
    command = [sys.executable, "-c", code, str(Path(__file__).parent), str(source), str(output)]
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    return float(result.stdout.split()[-1])


def _verl_loop(source: Path, output: Path) -> float:
    from verl.utils.reward_score import search_r1_like_qa_em

    start = time.perf_counter()
    frame = pd.read_parquet(source)
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        frame["reward_score"] = [
            float(search_r1_like_qa_em.compute_score(response, reward_model["ground_truth"]))
            for response, reward_model in zip(frame["response"], frame["reward_model"], strict=True)
        ]
    frame.to_parquet(output)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--data", type=Path, help="reuse (or create) the generated file here")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each (best is kept)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        source = args.data or directory / "rollouts.parquet"
        if not source.exists():
            write_dataset(source, args.rows)
        size = source.stat().st_size / 2**20
        load = os.getloadavg()[0]
        # Best of --repeats, alternating the configurations: the first run of a process on
        # memory the machine has not touched yet pays for it, whichever configuration it is.
        runs: dict[int, tuple[float, float, dict]] = {}
        verl_seconds = float("inf")
        for _ in range(args.repeats):
            for workers in (1, 2):
                run = run_cli(source, directory / f"out{workers}.parquet", workers)
                if workers not in runs or run[0] < runs[workers][0]:
                    runs[workers] = run
            verl_seconds = min(verl_seconds, verl_loop(source, directory / "verl.parquet"))
        outputs = {w: directory / f"out{w}.parquet" for w in runs}
        assert outputs[1].read_bytes() == outputs[2].read_bytes(), "--workers 2 differs from 1"
        scores = [
            pd.read_parquet(path, columns=["reward_score"])["reward_score"].tolist()
            for path in (outputs[1], directory / "verl.parquet")
        ]
        assert scores[0] == scores[1], "scores differ from verl's"

    rows = len(scores[0])
    print(f"{rows} rows, {size:.0f} MiB parquet, {os.cpu_count()} CPUs, load average {load:.1f}")
    print(
        f"{'':12} {'read s':>7} {'score s':>8} {'score rows/s':>13} {'write s':>8} "
        f"{'summary s':>10} {'total s':>8} {'CPU s':>6}"
    )
    for workers, (wall, cpu, summary) in runs.items():
        seconds = summary["seconds"]
        print(
            f"{f'--workers {workers}':12} {seconds['read']:7.2f} {seconds['score']:8.2f} "
            f"{rows / seconds['score']:13,.0f} {seconds['write']:8.2f} "
            f"{seconds['summary']:10.2f} {wall:8.2f} {cpu:6.2f}"
        )
    ratio = runs[1][2]["seconds"]["score"] / runs[2][2]["seconds"]["score"]
    print(f"scoring phase, --workers 2 vs 1: {ratio:.2f}x")
    print(f"verl reference loop (pandas read, score, write; own process): {verl_seconds:.2f} s")
    for workers, (wall, _, _) in runs.items():
        print(f"end to end, --workers {workers}: {verl_seconds / wall:.2f}x the verl loop's speed")


if __name__ == "__main__":
    main()
