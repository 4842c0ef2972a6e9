"""Side-by-side speed of verl's ``search_r1_like_qa_em`` and this package, on fresh rows.

Every timed pass scores rows that no earlier pass in this process has seen (a new seed per
pass), so no cache warmed by repeated rows is measured; rows of one GRPO group share their
ground-truth object, as in training. verl's 1-in-64 prints go to /dev/null. A full garbage
collection runs before each pass, so that none triggered by building the rows lands inside
one. Times are CPU seconds of this process (``time.process_time``), so that other jobs on the
machine do not count; the best pass of each case is kept. Scores are checked identical (type
and value) to verl's before any time is reported; verl cannot read a bare-string ground truth
(it indexes ``ground_truth["target"]``), so verl's functions get those rows as
``{"target": string}`` (converted before the clock starts).

``--corpus wide`` (default) or ``classic``: see ``rollouts.py``. ``--twins`` chooses which C
twins are in use: ``all`` (as built), ``none`` (the pure-Python references, what an install
without a C compiler gets; ``--pure-python`` is the same), ``scan`` (only the C tag scan) or
``normalize`` (only the C SQuAD normalizer). ``--twin-gains`` times the plugin function and the
router with each twin swapped for its Python reference in turn, interleaved, and prints the share
of end-to-end time each twin saves. ``--profile`` prints the top functions (cProfile, by
tottime) of the plugin function and the router.

    python benchmarks/bench_search_r1.py [--corpus wide|classic] [--groups 250] [--repeats 7]
        [--twins all|none|scan|normalize] [--twin-gains] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import os
import platform
import pstats
import random
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rollouts import CORPORA, make_rollouts
from verl.utils.reward_score import default_compute_score
from verl.utils.reward_score import search_r1_like_qa_em as reference

import reward_plugins
from reward_plugins import extract
from reward_plugins.groundtruth import coerce_golds
from reward_plugins.plugins import search_r1
from reward_plugins.text import normalize

Row = tuple[str, str, Any]
ScoreRow = Callable[[Row], Any]

# The two C twins and their pure-Python references, swapped through the module globals that
# extract.scan_tags and normalize.normalize_squad call.
TWIN_SLOTS = {
    "scan": (extract, "_scan_tags", extract.scan_tags_python),
    "normalize": (normalize, "_normalize_squad", normalize.normalize_squad_python),
}
BUILT = {name: getattr(module, attribute) for name, (module, attribute, _) in TWIN_SLOTS.items()}
COMPILED = {name: BUILT[name] is not python for name, (_, _, python) in TWIN_SLOTS.items()}
TWIN_CHOICES: dict[str, tuple[str, ...]] = {
    "all": ("scan", "normalize"),
    "none": (),
    "scan": ("scan",),
    "normalize": ("normalize",),
}
"""``--twins`` choices: the C twins each puts in use."""


def use_twins(names: tuple[str, ...]) -> None:
    """Put the C twins named in ``names`` in use and the Python references of the others."""
    for name, (module, attribute, python) in TWIN_SLOTS.items():
        setattr(module, attribute, BUILT[name] if name in names else python)


def twins_label() -> str:
    used = [n for n, (m, a, python) in TWIN_SLOTS.items() if getattr(m, a) is not python]
    return ", ".join(f"C {name}" for name in used) or "none (pure Python)"


def for_verl(rows: list[Row]) -> list[Row]:
    """The rows as verl can read them: a bare-string ground truth becomes ``{"target": s}``,
    one object per group (rows of a group keep sharing it)."""
    converted: dict[int, Any] = {}
    out = []
    for source, text, truth in rows:
        if isinstance(truth, str):
            truth = converted.setdefault(id(truth), {"target": truth})
        out.append((source, text, truth))
    return out


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        yield


CLOCK = time.process_time
"""CPU seconds of this process: on a machine shared with other jobs, time spent preempted would
inflate the longer passes (verl's) more than the shorter ones."""


def time_pass(score_row: ScoreRow, rows: list[Row]) -> float:
    """CPU seconds of one pass over ``rows``."""
    gc.collect()
    with quiet():
        start = CLOCK()
        for row in rows:
            score_row(row)
        return CLOCK() - start


def peak_memory(score_row: ScoreRow, rows: list[Row]) -> int:
    """Peak bytes (tracemalloc) allocated during one pass over ``rows``, above what was live."""
    gc.collect()
    tracemalloc.start()
    try:
        with quiet():
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            for row in rows:
                score_row(row)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


VERL_FUNCTION = "verl compute_score"
VERL_ROUTER = "verl default_compute_score (router)"
PLUGIN = "search_r1.compute_score (plugin)"
ROUTER = "reward_plugins.compute_score (router)"
CASES: list[tuple[str, ScoreRow, bool]] = [  # (name, score one row, takes verl's rows)
    (VERL_FUNCTION, lambda r: reference.compute_score(r[1], r[2]), True),
    (VERL_ROUTER, lambda r: default_compute_score(*r), True),
    (PLUGIN, lambda r: search_r1.compute_score(r[1], r[2]), False),
    (ROUTER, lambda r: reward_plugins.compute_score(*r), False),
    ("verl compute_score_subem", lambda r: reference.compute_score_subem(r[1], r[2]), True),
    ("search_r1.compute_score_subem", lambda r: search_r1.compute_score_subem(r[1], r[2]), False),
    ("reward_plugins.compute_score_subem", lambda r: reward_plugins.compute_score_subem(*r), False),
]
SUBEM_BASE = "verl compute_score_subem"


def check_scores(check: list[Row], verl_check: list[Row]) -> None:
    """Every function and router of the package gives verl's scores, type and value."""
    with quiet():
        expected = [reference.compute_score(s, gt) for _, s, gt in verl_check]
        expected_subem = [reference.compute_score_subem(s, gt) for _, s, gt in verl_check]
        verl_routed = [default_compute_score(*row) for row in verl_check]

    def typed(values: Iterable[Any]) -> list[tuple[type, Any]]:
        return [(type(value), value) for value in values]

    assert typed(search_r1.compute_score(s, gt) for _, s, gt in check) == typed(expected)
    subem = [search_r1.compute_score_subem(s, gt) for _, s, gt in check]
    assert typed(subem) == typed(expected_subem)
    routed = [reward_plugins.compute_score(*row)["score"] for row in check]
    assert typed(routed) == typed(float(x) for x in expected) == typed(verl_routed)
    routed_subem = [reward_plugins.compute_score_subem(*row)["score"] for row in check]
    assert typed(routed_subem) == typed(float(x) for x in expected_subem)


def plugin_phases(rows: list[Row]) -> dict[str, float]:
    """Seconds per row of the plugin's phases, each timed alone on its precomputed inputs; the
    ground truth first, while the rows are fresh (the first row of a group reads it, the seven
    others find it memoized, as in the plugin)."""
    texts = [text for _, text, _ in rows]
    truths = [truth for _, _, truth in rows]
    coerce = _seconds(lambda: [coerce_golds(truth) for truth in truths])
    golds = [coerce_golds(truth) for truth in {id(truth): truth for truth in truths}.values()]
    answers = [answer for answer, _, _ in map(extract.scan_tags, texts) if answer is not None]
    answer_of = search_r1.normalize_answer
    phases = {
        "scan tags (extract + count)": lambda: [extract.scan_tags(text) for text in texts],
        "normalize answer": lambda: [answer_of(answer) for answer in answers],
        "normalize golds (once a group)": lambda: [[answer_of(g) for g in gs] for gs in golds],
    }
    seconds = {"coerce ground truth": coerce}
    seconds.update((name, _seconds(run)) for name, run in phases.items())
    return {name: value / len(rows) for name, value in seconds.items()}


def verl_phases(rows: list[Row]) -> dict[str, float]:
    texts = [text for _, text, _ in rows]
    answers = [(reference.extract_solution(t), gt["target"]) for _, t, gt in rows]
    answers = [(answer, target) for answer, target in answers if answer is not None]
    phases = {
        "extract_solution (regex)": lambda: [reference.extract_solution(t) for t in texts],
        "count_answer_tags": lambda: [reference.count_answer_tags(t) for t in texts],
        "random.randint (print draw)": lambda: [random.randint(1, 64) for _ in texts],
        "em_check (answer + golds)": lambda: [reference.em_check(a, g) for a, g in answers],
    }
    return {name: _seconds(run) / len(rows) for name, run in phases.items()}


def _seconds(run: Callable[[], Any]) -> float:
    gc.collect()
    start = CLOCK()
    run()
    return CLOCK() - start


def profile_top(score_row: ScoreRow, row_sets: list[list[Row]], top: int) -> str:
    """The ``top`` functions by tottime per row, each function's least over the passes (a
    preemption of this process on a busy machine lands on one function of one pass)."""
    least: dict[tuple[str, int, str], tuple[float, float]] = {}  # (calls/row, tottime/row)
    totals = []
    for rows in row_sets:
        profiler = cProfile.Profile()
        gc.collect()
        with quiet():
            profiler.enable()
            for row in rows:
                score_row(row)
            profiler.disable()
        stats = pstats.Stats(profiler)
        totals.append(stats.total_tt / len(rows))  # type: ignore[attr-defined]
        for key, (_, calls, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
            if key[0] == __file__ or "_lsprof" in key[2]:
                continue  # this script's lambdas and the profiler's own calls
            per_row = (calls / len(rows), tottime / len(rows))
            least[key] = min(least.get(key, per_row), per_row, key=lambda pair: pair[1])
    total = sum(tottime for _, tottime in least.values())
    lines = [f"  {'calls/row':>9} {'tottime us/row':>14} {'share':>6}  function"]
    ranked = sorted(least.items(), key=lambda item: item[1][1], reverse=True)
    for (filename, line, function), (calls, tottime) in ranked[:top]:
        where = function if filename == "~" else f"{_short(filename)}:{line}({function})"
        lines.append(f"  {calls:9.2f} {tottime * 1e6:14.3f} {tottime / total:6.1%}  {where}")
    lines.append(
        f"  sum of the least tottimes {total * 1e6:.2f} us/row; least profiled pass "
        f"{min(totals) * 1e6:.2f} us/row (both with cProfile's overhead)"
    )
    return "\n".join(lines)


def _short(filename: str) -> str:
    for marker in ("reward_plugins/", "verl/", "lib/python"):
        if marker in filename:
            return filename[filename.index(marker) :]
    return filename


def main() -> None:
    wall_start = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=CORPORA, default="wide", help="see rollouts.py")
    parser.add_argument("--groups", type=int, default=250, help="GRPO groups of 8 per pass")
    parser.add_argument("--repeats", type=int, default=7, help="timed passes (best is kept)")
    parser.add_argument("--twins", choices=TWIN_CHOICES, default="all", help="C twins in use")
    parser.add_argument("--pure-python", action="store_true", help="same as --twins none")
    parser.add_argument("--twin-gains", action="store_true", help="time each twin's gain")
    parser.add_argument("--profile", action="store_true", help="cProfile top functions")
    parser.add_argument("--top", type=int, default=10, help="functions listed by --profile")
    args = parser.parse_args()
    chosen = TWIN_CHOICES["none" if args.pure_python else args.twins]
    phases: dict[str, float] = {}
    seeds = iter(range(1, 10**6))

    def make_rows(seed: int | None = None) -> list[Row]:
        start = time.perf_counter()
        seed = next(seeds) if seed is None else seed
        rows = make_rollouts(args.groups, seed, corpus=args.corpus)
        phases["build rows"] = phases.get("build rows", 0.0) + time.perf_counter() - start
        return rows

    def rows_for(takes_verl_rows: bool) -> list[Row]:
        rows = make_rows()
        return for_verl(rows) if takes_verl_rows else rows

    @contextlib.contextmanager
    def phase(name: str) -> Iterator[None]:
        """Record the wall time of a phase of this script, less the rows built in it."""
        start, built = time.perf_counter(), phases.get("build rows", 0.0)
        yield
        elapsed = time.perf_counter() - start - (phases.get("build rows", 0.0) - built)
        phases[name] = phases.get(name, 0.0) + elapsed

    load = os.getloadavg()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} cores, load average {load[0]:.1f} "
        f"{load[1]:.1f} {load[2]:.1f}; reward_plugins from "
        f"{os.path.dirname(reward_plugins.__file__)}"
    )
    with phase("check scores"):
        check = make_rows(10_000)
        verl_check = for_verl(check)
        for names in sorted({chosen, *(TWIN_CHOICES.values() if args.twin_gains else ())}):
            use_twins(names)
            check_scores(check, verl_check)
        use_twins(chosen)
    sizes = sorted(len(text.encode()) for _, text, _ in check)
    print(
        f"corpus {args.corpus}: {len(check)} rows per pass in groups of 8; response bytes min "
        f"{sizes[0]}, median {statistics.median(sizes):.0f}, max {sizes[-1]}; "
        f"{args.repeats} passes per case, best kept"
    )
    print(
        f"scores identical to verl's (type and value) on {len(check)} rows; C twins built: "
        f"{', '.join(n for n in COMPILED if COMPILED[n]) or 'none'}; in use: {twins_label()}"
    )

    # Cases are interleaved within each pass, so a change of machine load hits all of them; each
    # case scores its own fresh rows (its own seed) and keeps its best pass.
    passes: dict[str, list[float]] = {name: [] for name, _, _ in CASES}
    with phase("timed passes"):
        for _ in range(args.repeats):
            for name, score_row, takes_verl_rows in CASES:
                rows = rows_for(takes_verl_rows)
                passes[name].append(time_pass(score_row, rows) / len(rows))
    best = {name: min(times) for name, times in passes.items()}
    with phase("memory passes"):
        memory = {name: peak_memory(score_row, rows_for(takes_verl_rows))
                  for name, score_row, takes_verl_rows in CASES[:4]}  # fmt: skip

    print(
        f"\n{'function':38} {'CPU us/row':>11} {'median':>8} {'pass s':>7} {'peak KiB':>9}"
        f" {'verl function / this':>21}"
    )
    for name, _, _ in CASES:
        base = best[SUBEM_BASE if "subem" in name else VERL_FUNCTION]
        peak = f"{memory[name] / 1024:9.1f}" if name in memory else f"{'':9}"
        print(
            f"{name:38} {best[name] * 1e6:11.2f} {statistics.median(passes[name]) * 1e6:8.2f} "
            f"{best[name] * len(check):7.3f} {peak} {base / best[name]:20.2f}x"
        )
    print(f"\nplugin against verl's function:  {best[VERL_FUNCTION] / best[PLUGIN]:.2f}x")
    print(f"router against verl's router:    {best[VERL_ROUTER] / best[ROUTER]:.2f}x")
    print(f"router against verl's function:  {best[VERL_FUNCTION] / best[ROUTER]:.2f}x")
    print("(CPU us/row: best pass; median: of the passes; pass s: CPU seconds of the best pass;")
    print(" peak KiB: tracemalloc peak of the allocations made during one more pass)")

    ours: dict[str, float] = {}
    theirs: dict[str, float] = {}
    end_to_end = dict.fromkeys((PLUGIN, VERL_FUNCTION), float("inf"))
    with phase("phase timings"):
        for _ in range(min(args.repeats, 3)):  # best of up to 3 fresh passes, phase by phase
            rows = make_rows()
            end_to_end[PLUGIN] = min(end_to_end[PLUGIN], time_pass(CASES[2][1], rows) / len(rows))
            for name, value in plugin_phases(make_rows()).items():
                ours[name] = min(ours.get(name, value), value)
            rows = for_verl(make_rows())
            verl_time = time_pass(CASES[0][1], rows) / len(rows)
            end_to_end[VERL_FUNCTION] = min(end_to_end[VERL_FUNCTION], verl_time)
            for name, value in verl_phases(for_verl(make_rows())).items():
                theirs[name] = min(theirs.get(name, value), value)
    for name, parts in ((VERL_FUNCTION, theirs), (PLUGIN, ours)):
        print(f"\nphases of {name}, us/row, each timed alone, best of fresh passes:")
        for part, seconds in parts.items():
            print(f"  {part:36} {seconds * 1e6:8.2f}")
        rest = end_to_end[name] - sum(parts.values())
        print(f"  {'rest (calls, decision, result)':36} {rest * 1e6:8.2f}")
        print(f"  {'end to end (best fresh pass)':36} {end_to_end[name] * 1e6:8.2f}")

    if args.twin_gains:
        with phase("twin gains"):
            print_twin_gains(args, rows_for)
            use_twins(chosen)

    if args.profile:
        for name, score_row, _ in (CASES[2], CASES[3]):
            row_sets = [make_rows() for _ in range(3)]
            with phase("profiles"):
                print(f"\ncProfile of {name}, top {args.top} by tottime, 3 fresh passes:")
                print(profile_top(score_row, row_sets, args.top))

    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    phases["total"] = time.perf_counter() - wall_start
    print(f"\nprocess max RSS {maxrss:.0f} MiB (verl's and torch's imports included)")
    print("wall seconds: " + ", ".join(f"{name} {s:.1f}" for name, s in phases.items()))


def print_twin_gains(args: argparse.Namespace, rows_for: Callable[[bool], list[Row]]) -> None:
    """Each C twin's share of the end-to-end time it saves (the other twin as built): measured end
    to end, and estimated from its phase alone (C against Python on the same inputs)."""
    missing = [name for name, compiled in COMPILED.items() if not compiled]
    if missing:
        print(f"\ntwin gains: not measured, C twins not built: {', '.join(missing)}")
        return
    configs: dict[str, tuple[str, ...]] = {
        "both C twins": ("scan", "normalize"),
        "Python scan": ("normalize",),
        "Python normalize": ("scan",),
        "pure Python": (),
    }
    paths = [CASES[2], CASES[3]]
    best = {(config, name): float("inf") for config in configs for name, _, _ in paths}
    for _ in range(args.repeats):
        for config, names in configs.items():
            for name, score_row, _ in paths:
                rows = rows_for(False)
                use_twins(names)
                best[config, name] = min(best[config, name], time_pass(score_row, rows) / len(rows))
    print("\nC twins: best CPU us/row end to end, and the share of end-to-end time a twin saves,")
    print("(time without it - time with it) / time without it; the other twin as built")
    print(f"{'':18}" + "".join(f"{name:>40}" for name, _, _ in paths))
    for config in configs:
        print(f"{config:18}" + "".join(f"{best[config, n] * 1e6:40.2f}" for n, _, _ in paths))
    both = "both C twins"
    twins = {"scan_tags twin": "Python scan", "normalizer twin": "Python normalize",
             "both twins": "pure Python"}  # fmt: skip
    for twin, without in twins.items():
        gains = []
        for name, _, _ in paths:
            off, on = best[without, name], best[both, name]
            gains.append(f"{(off - on) / off:+7.1%} ({off / on:.2f}x)")
        print(f"gain of {twin:18}" + "".join(f"{gain:>40}" for gain in gains))

    # The same from the phases alone: the twin's own work, timed with C and with Python on the
    # same inputs (these functions keep no cache), best of many runs; the time saved is then
    # set against the end-to-end time with both twins.
    rows = rows_for(False)
    texts = [text for _, text, _ in rows]
    golds = [coerce_golds(truth) for truth in {id(t): t for _, _, t in rows}.values()]
    answers = [answer for answer, _, _ in map(extract.scan_tags, texts) if answer is not None]
    answer_of = search_r1.normalize_answer
    work: dict[str, tuple[Callable[[], Any], tuple[str, ...]]] = {
        "scan_tags twin": (
            lambda: [extract.scan_tags(text) for text in texts], ("normalize",)),
        "normalizer twin": (
            lambda: ([answer_of(a) for a in answers], [[answer_of(g) for g in gs] for gs in golds]),
            ("scan",)),
    }  # fmt: skip
    print("estimated from the phase alone: us/row with C -> with Python, share of end-to-end time")
    for twin, (run, python_twin) in work.items():
        per_row = {}
        for names in (configs[both], python_twin):
            use_twins(names)
            per_row[names] = min(_seconds(run) for _ in range(3 * args.repeats)) / len(rows)
        saved = per_row[python_twin] - per_row[configs[both]]
        timing = f"{per_row[configs[both]] * 1e6:.2f} -> {per_row[python_twin] * 1e6:.2f}"
        shares = [f"{timing}, {saved / (best[both, n] + saved):+7.1%}" for n, _, _ in paths]
        print(f"gain of {twin:18}" + "".join(f"{share:>40}" for share in shares))


if __name__ == "__main__":
    main()
