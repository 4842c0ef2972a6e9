"""End-to-end speed and memory of ``reward-plugins score`` on a whole verl training run.

Generates a run directory as verl writes it with ``trainer.rollout_data_dir`` (one
``{step}.jsonl`` per step, each line ``json.dumps({"input", "output", "gts", "score", "step",
...reward extra keys}, ensure_ascii=False, default=str)``), then runs, each as its own process
started from this (small) one:

1. the naive loop (:data:`NAIVE_LOOP`, run with ``python -c``): per file, per line,
   ``json.loads``, verl's ``search_r1_like_qa_em.compute_score`` (its 1-in-64 prints go to
   /dev/null), the score into the row, ``json.dumps`` the row to one output file per step;
2. ``python -m reward_plugins score RUN -o OUT --data-source searchR1_nq --workers 1 -q
   --summary-json S.json``;
3. the same with ``--workers 2``.

Before any figure is printed, every row's score is checked equal across the three (file by file,
row by row; without the naive loop, against verl's function called here). Per command: wall
seconds (process start to exit, imports included), rows/s, the ratio to the naive loop, CPU
seconds of the process and its reaped children (``wait4``), and the peak RSS summed over the
process tree (psutil polled every 50 ms; the largest single process beside it); the CLI's own
per-phase seconds (its summary's ``"seconds"``) follow. Best wall of ``--repeats`` runs per
command (commands interleaved); the peak RSS is the highest over the repeats.

Corpus (not tuned to any scorer): GRPO groups of 5 to 8 rows sharing one ``input``; 1 to 20
golds (60% 1-3, 25% 4-8, 15% 9-20), 12% of questions with a degenerate gold (``""``, a gold
that normalizes to ``""``, an int, a float, a 300-3,000 character gold), names with apostrophes
and non-ASCII letters; responses short (15%: one think and the answer), multi-turn
think/search/information traces (70%: 1-3 rounds) and long traces (15%: 4-8 rounds), answers
right (with case and punctuation variants), wrong, missing, truncated, revised, or spammed with
11-30 answer tags. ``gts`` as verl dumps a Search-R1 dataset (``{"target": numpy array}`` that
``default=str`` turns into ``{"target": "['a' 'b']"}``; numbers there are digit strings, as
parquet cannot mix them with strings) in the first 40% of the steps, and as a JSON list or
``{"target": list}`` (numbers as JSON numbers) in the others.

    python benchmarks/bench_cli.py [--rows 200000] [--steps 50] [--repeats 1] [--keep DIR]
        [--skip-naive] [--workers 1 2]

``--keep DIR`` keeps the run and the outputs (about four times the run's size) in DIR and reuses
the run there when rows, steps and seed match.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
DATA_SOURCE = "searchR1_nq"
POLL_SECONDS = 0.05
GENERATOR_VERSION = 2
STRINGIFIED_SHARE = 0.4
"""The first steps (this share of them) hold verl's stringified numpy ``gts``."""
RATIO_TARGETS = {1: 3.0, 2: 4.0}
RSS_TARGET_MB, RSS_TARGET_ROWS = 600, 1_000_000

# ------------------------------------------------------------------------------- the naive loop

NAIVE_LOOP = r'''
import ast, contextlib, json, os, re, sys, time

_started = time.perf_counter()
from verl.utils.reward_score.search_r1_like_qa_em import compute_score

IMPORT_SECONDS = time.perf_counter() - _started
_LITERAL = re.compile(r"""'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*"|[^\s'"]+""")


def _literal(token):
    if token[0] in "'\"" and "\\" not in token:
        return token[1:-1]
    return ast.literal_eval(token)


def verl_ground_truth(gts):
    """verl's {"target": [golds]} from a dumped gts: a list, {"target": list}, or the str() of a
    numpy array ("['a' 'b' 72]") that json.dumps(default=str) left; numbers become digits."""
    target = gts["target"] if isinstance(gts, dict) else gts
    if isinstance(target, str) and target.startswith("[") and target.endswith("]"):
        target = [_literal(token) for token in _LITERAL.findall(target[1:-1])]
    elif isinstance(target, str):
        target = [target]
    return {"target": [str(gold) for gold in target]}


def main(run_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    names = [name for name in os.listdir(run_dir) if name.endswith(".jsonl")]
    names.sort(key=lambda name: int(name[: -len(".jsonl")]))
    rows = 0
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        for name in names:
            with open(os.path.join(run_dir, name), encoding="utf-8") as lines, open(
                os.path.join(out_dir, name), "w", encoding="utf-8"
            ) as out:
                for line in lines:
                    row = json.loads(line)
                    row["reward_score"] = compute_score(
                        solution_str=row["output"], ground_truth=verl_ground_truth(row["gts"])
                    )
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
                    rows += 1
    print(json.dumps({"rows": rows, "import_seconds": IMPORT_SECONDS}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
'''

# ---------------------------------------------------------------------------------- the corpus

_SYLLABLES = "bra ko nu del fi ar ost me lun va pe dro si gal tem ur bo ise ca wen".split()
_SMALL_WORDS = (
    "the a of and to in was is on for with by as at from that it his her which an were "
    "be are this its had not or one after also"
).split()
_FOREIGN_WORDS = ("Zürich", "café", "naïve", "São", "Kraków", "東京", "Москва", "Ἀθῆναι", "😀")
_PROMPT = (
    "system\nYou are a helpful assistant.\nuser\nAnswer the question below. Reason inside "
    "<think> and </think> every time you learn something new. If some knowledge is missing, "
    "query the search engine with <search> your query </search>; its results are returned "
    "between <information> and </information>. Search as many times as you need. When you "
    "know the answer, write it inside <answer> and </answer> with no explanation, e.g. "
    "<answer> Ottawa </answer>. Question: {question}?\nassistant\n"
)
_KINDS = ("right", "wrong", "missing", "spam", "revised", "truncated")
_KIND_WEIGHTS = (38, 38, 9, 5, 6, 4)


class _Text:
    """About 2 MB of word salad built once; prose is cut from it at random offsets (cheap)."""

    def __init__(self, rng: random.Random) -> None:
        made = {"".join(rng.choices(_SYLLABLES, k=rng.randint(1, 4))) for _ in range(8000)}
        vocabulary = sorted(made)
        words = [*_SMALL_WORDS, *vocabulary, *_FOREIGN_WORDS]
        weights = [60 / len(_SMALL_WORDS)] * len(_SMALL_WORDS)
        weights += [39 / len(vocabulary)] * len(vocabulary) + [1 / len(_FOREIGN_WORDS)] * len(
            _FOREIGN_WORDS
        )
        self.vocabulary = vocabulary
        self.stream = " ".join(rng.choices(words, weights, k=400_000))

    def prose(self, rng: random.Random, chars: int) -> str:
        start = rng.randrange(len(self.stream) - chars - 1)
        return self.stream[start : start + chars].strip()

    def name(self, rng: random.Random) -> str:
        words = [rng.choice(self.vocabulary).capitalize() for _ in range(rng.randint(1, 3))]
        roll = rng.random()
        if roll < 0.05:
            words[0] += "'s"
        elif roll < 0.08:
            words.append(rng.choice(_FOREIGN_WORDS))
        return " ".join(words)


def _golds(rng: random.Random, text: _Text) -> list[Any]:
    roll = rng.random()
    if roll < 0.6:
        count = rng.randint(1, 3)
    elif roll < 0.85:
        count = rng.randint(4, 8)
    else:
        count = rng.randint(9, 20)
    golds: list[Any] = [text.name(rng) for _ in range(count)]
    odd, where = rng.random(), rng.randrange(count)
    if odd < 0.03:
        golds[where] = ""
    elif odd < 0.05:
        golds[where] = rng.choice(("the", "!!!", " ", "An"))
    elif odd < 0.09:
        golds[where] = rng.randint(0, 2025)
    elif odd < 0.10:
        golds[where] = rng.choice((2.5, 0.75, -1.5))
    elif odd < 0.12:
        golds[where] = text.prose(rng, rng.randint(300, 3000))
    return golds


def _answer(rng: random.Random, text: _Text, golds: list[Any], kind: str) -> str:
    gold = str(rng.choice(golds))
    if kind == "right":
        shown = rng.choice((gold, gold.lower(), gold.upper(), f"the {gold}.", f" {gold}!"))
        return f"<answer> {shown} </answer>"
    if kind == "wrong":
        return f"<answer> {text.name(rng)} </answer>"
    if kind == "spam":
        return f"<answer>{rng.choice((gold, text.name(rng)))}</answer>" * rng.randint(11, 30)
    if kind == "revised":
        think = text.prose(rng, rng.randint(40, 200))
        return (
            f"<answer> {text.name(rng)} </answer>\n<think>{think}</think>\n<answer>{gold}</answer>"
        )
    if kind == "truncated":
        return f"<answer> {gold[: rng.randint(0, len(gold))]}"
    return text.prose(rng, rng.randint(0, 120))  # missing


def _response(rng: random.Random, text: _Text, golds: list[Any], kind: str) -> str:
    shape = rng.random()
    if shape < 0.15:
        return f"<think>{text.prose(rng, rng.randint(20, 250))}</think>\n" + _answer(
            rng, text, golds, kind
        )
    parts = []
    for _ in range(rng.randint(1, 3) if shape < 0.85 else rng.randint(4, 8)):
        think = text.prose(rng, rng.randint(50, 300))
        query = text.prose(rng, rng.randint(15, 60))
        docs = []
        for number in range(1, rng.randint(1, 5) + 1):
            body = text.prose(rng, rng.randint(80, 320))
            if rng.random() < 0.3:
                body = f"{body} {str(rng.choice(golds))[:200]} {text.prose(rng, 60)}"
            docs.append(f'Doc {number}(Title: "{text.name(rng)}") {body}')
        joined = "\n".join(docs)
        parts.append(
            f"<think>{think}</think>\n<search> {query} </search>\n\n"
            f"<information>{joined}</information>\n\n"
        )
    parts.append(f"<think>{text.prose(rng, rng.randint(20, 200))}</think>\n")
    parts.append(_answer(rng, text, golds, kind))
    return "".join(parts)


def _numpy_str(golds: list[Any]) -> str:
    """What ``json.dumps(default=str)`` writes for verl's ``numpy.array(golds, dtype=object)``."""
    import numpy

    return str(numpy.array(golds, dtype=object))


def write_run(run_dir: Path, rows: int, steps: int, seed: int) -> dict[str, int]:
    """Write ``rows`` rows over ``steps`` files ``1.jsonl``... in ``run_dir``, streaming."""
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    text = _Text(random.Random(seed + 1))
    stringified_steps = round(steps * STRINGIFIED_SHARE)
    stats = {"rows": 0, "bytes": 0, "stringified_rows": 0}
    for step in range(1, steps + 1):
        count = rows // steps + (step <= rows % steps)
        stringified = step <= stringified_steps
        with open(run_dir / f"{step}.jsonl", "w", encoding="utf-8") as out:
            written = 0
            while written < count:
                golds = _golds(rng, text)
                gts: Any
                if stringified:
                    # Arrow (parquet) holds no list mixing strings and numbers, and verl's scorer
                    # raises on a number gold: a Search-R1 target array holds strings only.
                    golds = [gold if isinstance(gold, str) else str(gold) for gold in golds]
                    gts = {"target": _numpy_str(golds)}
                elif rng.random() < 0.5:
                    gts = list(golds)
                else:
                    gts = {"target": list(golds)}
                prompt = _PROMPT.format(question=text.prose(rng, rng.randint(40, 160)))
                for _ in range(min(rng.randint(5, 8), count - written)):
                    kind = rng.choices(_KINDS, _KIND_WEIGHTS)[0]
                    row: dict[str, Any] = {
                        "input": prompt,
                        "output": _response(rng, text, golds, kind),
                        "gts": gts,
                        "score": {"right": 1.0, "spam": 0.25}.get(kind, 0.0),
                        "step": step,
                    }
                    if step % 2 == 0:
                        row["request_id"] = f"{rng.getrandbits(64):016x}"
                    if step % 3 == 0:
                        row["acc"] = float(kind == "right")
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
                    written += 1
            stats["bytes"] += out.tell()
        stats["rows"] += count
        stats["stringified_rows"] += count if stringified else 0
    return stats


def prepare_run(directory: Path, rows: int, steps: int, seed: int) -> dict[str, int]:
    """The run under ``directory / "run"``: reused when its manifest matches, else written."""
    manifest_path = directory / "manifest.json"
    wanted = {"rows": rows, "steps": steps, "seed": seed, "generator": GENERATOR_VERSION}
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("wanted") == wanted:
            print(f"reusing the run in {directory / 'run'}", flush=True)
            return dict(manifest["stats"])
    shutil.rmtree(directory / "run", ignore_errors=True)
    started = time.perf_counter()
    stats = write_run(directory / "run", rows, steps, seed)
    print(f"generated {rows:,} rows in {time.perf_counter() - started:.0f} s", flush=True)
    manifest_path.write_text(json.dumps({"wanted": wanted, "stats": stats}))
    return stats


def step_files(run_dir: Path) -> list[str]:
    return sorted((path.name for path in run_dir.glob("*.jsonl")), key=lambda n: int(n[:-6]))


# ------------------------------------------------------------------------------- measurement


@dataclass
class Run:
    wall: float
    cpu: float
    peak_tree: int
    peak_single: int
    processes: int
    others: float
    """Cores that other processes kept busy during the run, on average."""
    cpu_by_process: list[float]
    """CPU seconds of the command's process, then of each child, at the last sample."""
    stdout: str
    summary: dict[str, Any] = field(default_factory=dict)


def measure(command: list[str], scratch: Path) -> Run:
    """Run ``command`` (from the repository root) and sample its process tree's RSS until it
    exits; wall time and CPU time come from a thread blocked in ``wait4``."""
    os.sync()  # earlier runs' dirty pages are not written back during this one
    stdout_path, stderr_path = scratch / "stdout.txt", scratch / "stderr.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    busy_before, own_before = _busy_seconds(), time.process_time()
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        started = time.perf_counter()
        popen = subprocess.Popen(command, cwd=REPO, env=env, stdout=stdout, stderr=stderr)
    ended: dict[str, Any] = {}
    done = threading.Event()

    def reap() -> None:
        _, status, usage = os.wait4(popen.pid, 0)
        ended.update(at=time.perf_counter(), status=status, usage=usage)
        done.set()

    threading.Thread(target=reap, daemon=True).start()
    root = psutil.Process(popen.pid)
    peak_tree = peak_single = 0
    cpu_seen: dict[int, float] = {}
    while not done.wait(POLL_SECONDS):
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = [root]
        total = 0
        for process in tree:
            try:
                rss = process.memory_info().rss
                times = process.cpu_times()
            except psutil.Error:
                continue
            cpu_seen[process.pid] = times.user + times.system
            total += rss
            peak_single = max(peak_single, rss)
        peak_tree = max(peak_tree, total)
    popen.returncode = os.waitstatus_to_exitcode(ended["status"])
    if popen.returncode != 0:
        tail = stderr_path.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{' '.join(command)}\nexited with {popen.returncode}:\n{tail}")
    usage = ended["usage"]
    wall, cpu = ended["at"] - started, usage.ru_utime + usage.ru_stime
    own = time.process_time() - own_before
    others = max(_busy_seconds() - busy_before - cpu - own, 0.0) / wall
    return Run(
        wall=wall,
        cpu=cpu,
        others=others,
        peak_tree=peak_tree,
        peak_single=peak_single,
        processes=len(cpu_seen),
        cpu_by_process=[cpu_seen.get(popen.pid, 0.0)]
        + [seconds for pid, seconds in cpu_seen.items() if pid != popen.pid],
        stdout=stdout_path.read_text(errors="replace"),
    )


def _busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (not idle, not waiting on I/O)."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def naive_command(run_dir: Path, out_dir: Path) -> list[str]:
    return [sys.executable, "-c", NAIVE_LOOP, str(run_dir), str(out_dir)]


def cli_command(run_dir: Path, out_dir: Path, workers: int, summary: Path) -> list[str]:
    command = [sys.executable, "-m", "reward_plugins", "score", str(run_dir), "-o", str(out_dir)]
    command += ["--data-source", DATA_SOURCE, "--workers", str(workers), "-q"]
    return [*command, "--summary-json", str(summary)]


# ---------------------------------------------------------------------------------- agreement


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


def _verl_oracle() -> Callable[[dict[str, Any]], float]:
    """verl's score of an input row, as the naive loop computes it (its code, run here)."""
    import contextlib

    namespace: dict[str, Any] = {"__name__": "naive_loop"}
    exec(NAIVE_LOOP, namespace)
    compute_score, ground_truth = namespace["compute_score"], namespace["verl_ground_truth"]
    devnull = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the oracle

    def oracle(row: dict[str, Any]) -> float:
        with contextlib.redirect_stdout(devnull):
            return float(
                compute_score(solution_str=row["output"], ground_truth=ground_truth(row["gts"]))
            )

    return oracle


def check_agreement(run_dir: Path, outputs: dict[str, Path], reference: Path | None) -> Counter:
    """Every output holds every row, in order, with the same ``reward_score``: the one in the
    ``reference`` output (the naive loop's), else verl's computed here from the input. Returns
    the scores' counts; exits listing the first mismatches otherwise."""
    oracle = None if reference else _verl_oracle()
    scores: Counter = Counter()
    mismatches: list[str] = []
    mismatch_count = 0
    for name in step_files(run_dir):
        missing = [label for label, out in outputs.items() if not (out / name).exists()]
        if missing:
            raise SystemExit(f"no {name} in the output of {', '.join(missing)}")
        readers = {label: _json_lines(out / name) for label, out in outputs.items()}
        source = _json_lines(reference / name if reference else run_dir / name)
        for number, row in enumerate(source, 1):
            expected = float(row["reward_score"]) if oracle is None else oracle(row)
            scores[expected] += 1
            for label, reader in readers.items():
                other = next(reader, None)
                if other is None:
                    raise SystemExit(f"{label}: {name} ends at row {number - 1}")
                got = other.get("reward_score")
                if other.get("output") != row["output"]:
                    raise SystemExit(f"{label}: {name} row {number} is another row")
                if got is None or float(got) != expected:
                    mismatch_count += 1
                    if len(mismatches) < 10:
                        gts = json.dumps(row["gts"], ensure_ascii=False)[:160]
                        mismatches.append(
                            f"{label} {name}:{number}: {got!r}, verl {expected!r}; gts {gts}; "
                            f"answer ...{row['output'][-120:]!r}"
                        )
        for label, reader in readers.items():
            if next(reader, None) is not None:
                raise SystemExit(f"{label}: {name} has more rows than the input")
    if mismatch_count:
        listed = "\n".join(mismatches)
        raise SystemExit(f"{mismatch_count} scores differ; no times reported. First:\n{listed}")
    return scores


# ------------------------------------------------------------------------------------ report


def _flat(seconds: Any, prefix: str = "") -> dict[str, float]:
    if isinstance(seconds, dict):
        flat: dict[str, float] = {}
        for key, value in seconds.items():
            flat.update(_flat(value, f"{prefix}{key}."))
        return flat
    if isinstance(seconds, (int, float)):
        return {prefix.rstrip("."): float(seconds)}
    return {}


def report(runs: dict[str, Run], rows: int, naive_label: str | None) -> None:
    naive = runs.get(naive_label) if naive_label else None
    mb = 1e6
    head = (
        f"{'command':<22} {'wall s':>8} {'rows/s':>9} {'vs loop':>8} {'target':>13} "
        f"{'CPU s':>7} {'procs':>5} {'peak RSS MB':>12} {'largest MB':>11} {'target':>22} "
        f"{'others':>6}"
    )
    print(head)
    print("-" * len(head))
    for label, run in runs.items():
        ratio = f"{naive.wall / run.wall:.2f}x" if naive else "-"
        workers = int(label.rsplit(" ", 1)[1]) if label.startswith("score") else None
        speed_target = rss_target = ""
        if workers in RATIO_TARGETS:
            goal = RATIO_TARGETS[workers]
            met = "" if naive is None else (" met" if naive.wall / run.wall >= goal else " MISSED")
            speed_target = f">={goal:.0f}x{met}"
            met = " met" if run.peak_tree <= RSS_TARGET_MB * mb else " MISSED"
            at = "" if rows == RSS_TARGET_ROWS else f" (at {RSS_TARGET_ROWS // 10**6}M rows)"
            rss_target = f"<={RSS_TARGET_MB}{met if not at else ''}{at}"
        print(
            f"{label:<22} {run.wall:8.2f} {rows / run.wall:9,.0f} {ratio:>8} {speed_target:>13} "
            f"{run.cpu:7.1f} {run.processes:5d} {run.peak_tree / mb:12.0f} "
            f"{run.peak_single / mb:11.0f} {rss_target:>22} {run.others:6.2f}"
        )
    print(
        "others: cores kept busy by other processes during the run (average); peak RSS: the "
        "most, summed over the process tree"
    )
    if naive is not None:
        imported = json.loads(naive.stdout.strip().splitlines()[-1])["import_seconds"]
        others = {label: run for label, run in runs.items() if run is not naive}
        rest = naive.wall - imported
        ratios = ", ".join(f"{label} {rest / run.wall:.2f}x" for label, run in others.items())
        print(f"naive loop: {imported:.1f} s of its wall importing verl; without it: {ratios}")
        ratios = ", ".join(f"{label} {naive.cpu / run.cpu:.2f}x" for label, run in others.items())
        print(f"CPU seconds, naive loop / command (less sensitive to other load): {ratios}")
    for label, run in runs.items():
        if len(run.cpu_by_process) > 1:
            children = " + ".join(f"{seconds:.1f}" for seconds in run.cpu_by_process[1:])
            print(
                f"{label}: CPU s by process (at the last sample): main "
                f"{run.cpu_by_process[0]:.1f}, children {children}"
            )
    phases: dict[str, dict[str, float]] = {
        label: _flat(run.summary.get("seconds", {})) for label, run in runs.items() if run.summary
    }
    keys = list(dict.fromkeys(key for flat in phases.values() for key in flat))
    if phases:
        print('\nCLI phases (summary JSON "seconds"):')
        print(f"{'':22} " + " ".join(f"{key:>{max(len(key), 8)}}" for key in keys))
        for label, flat in phases.items():
            cells = (
                f"{flat[key]:>{max(len(key), 8)}.2f}"
                if key in flat
                else f"{'-':>{max(len(key), 8)}}"
                for key in keys
            )
            print(f"{label:<22} " + " ".join(cells))
        if not keys:
            print('(no "seconds" in the summaries)')


def _revision() -> str:
    """The commit of the package under test, and whether its files differ from it."""

    def git(*arguments: str) -> str:
        result = subprocess.run(["git", *arguments], cwd=REPO, capture_output=True, text=True)
        return result.stdout.strip() if result.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "?"
    dirty = git("status", "--porcelain", "reward_plugins")
    return f"{commit} + uncommitted changes" if dirty else commit


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=1, help="runs of each (best wall kept)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--skip-naive", action="store_true", help="no naive loop (verl checks)")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep (and reuse) the run here")
    args = parser.parse_args()
    if args.rows < args.steps:
        parser.error("--rows must be at least --steps")

    with tempfile.TemporaryDirectory(prefix="bench_cli_") as scratch_name:
        directory = args.keep or Path(scratch_name)
        directory.mkdir(parents=True, exist_ok=True)
        stats = prepare_run(directory, args.rows, args.steps, args.seed)
        run_dir = directory / "run"
        commands: dict[str, tuple[list[str], Path, Path | None]] = {}
        if not args.skip_naive:
            out = directory / "out-naive"
            commands["naive verl loop"] = (naive_command(run_dir, out), out, None)
        for workers in args.workers:
            out, summary = directory / f"out-workers{workers}", directory / f"s{workers}.json"
            commands[f"score --workers {workers}"] = (
                cli_command(run_dir, out, workers, summary),
                out,
                summary,
            )
        load, revision = os.getloadavg()[0], _revision()
        best: dict[str, Run] = {}
        for repeat in range(args.repeats):
            for label, (command, out, summary) in commands.items():
                shutil.rmtree(out, ignore_errors=True)
                run = measure(command, Path(scratch_name))
                if summary is not None:
                    run.summary = json.loads(summary.read_text())
                print(
                    f"run {repeat + 1}/{args.repeats} {label}: {run.wall:.2f} s, "
                    f"peak {run.peak_tree / 1e6:.0f} MB",
                    flush=True,
                )
                previous = best.get(label)
                if previous is None or run.wall < previous.wall:
                    if previous is not None:
                        run.peak_tree = max(run.peak_tree, previous.peak_tree)
                        run.peak_single = max(run.peak_single, previous.peak_single)
                    best[label] = run
                else:
                    previous.peak_tree = max(run.peak_tree, previous.peak_tree)
                    previous.peak_single = max(run.peak_single, previous.peak_single)
        own_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print("checking every row's score...", flush=True)
        naive_label = None if args.skip_naive else "naive verl loop"
        outputs = {label: out for label, (_, out, _) in commands.items() if label != naive_label}
        reference = commands[naive_label][1] if naive_label else None
        scores = check_agreement(run_dir, outputs, reference)

    rows = stats["rows"]
    print(
        f"\n{rows:,} rows in {args.steps} step files, {stats['bytes'] / 1e6:,.0f} MB of JSONL "
        f"({stats['stringified_rows'] / rows:.0%} of rows with stringified numpy gts); "
        f"{os.cpu_count()} CPUs, load average {load:.2f} before the runs; Python "
        f"{platform.python_version()}, verl {_version('verl')}; reward_plugins at {revision}; "
        f"best wall of {args.repeats}"
    )
    for label, (_, _, summary_path) in commands.items():
        summary = best[label].summary
        if summary_path is None or not summary:
            continue
        counted = {key: summary.get(key) for key in ("rows", "stringified_ground_truths")}
        made = {"rows": rows, "stringified_ground_truths": stats["stringified_rows"]}
        odd = {key: value for key, value in counted.items() if value not in (None, made[key])}
        if odd:
            print(f"NOTE {label}: its summary counts {odd}, the corpus {made}")
    shown = ", ".join(f"{score:g}: {count:,}" for score, count in sorted(scores.items()))
    checked = "the naive loop and the CLI" if naive_label else "verl (here) and the CLI"
    print(f"scores agree on every row between {checked} ({shown})\n")
    report(best, rows, naive_label)
    print(f"\nthis launcher's own peak RSS while the commands ran: {own_peak / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
