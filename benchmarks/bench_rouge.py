"""Side-by-side speed of ROUGE-N and ROUGE-Lsum (``compat="rouge_score"``) and rouge-score.

Each row times ``RougeScorer([type]).score_multi(targets, prediction)[type]`` (rouge-score
0.1.2, with its ``fmeasure`` read) against our metric object built once with
``compat="rouge_score"`` (``Rouge1``, ``Rouge2``, ``RougeN(n=3)``, ``RougeLsum``), for texts of
several lengths (``--tokens``, default 20, 100 and 500 words) and target counts (``--targets``,
default 1 and 4), without the stemmer and, for ROUGE-1, with it.

Texts are synthetic English-like prose (Zipf-distributed words, capitals, commas, periods,
numbers); each target is the prediction with about a third of its words substituted, dropped or
inserted, drawn independently per target. For ROUGE-Lsum every period ends a line, so texts have
one sentence per line (about 15 words each). Every timed pass scores cases that no earlier pass
has seen (a new seed per pass); word-level caches (the stemmer's) are warm, as they are after
the first steps of a training run. Before any time is printed, precision, recall and F-measure
are checked equal, bit for bit, on other cases of the same shape.

Printed per row: CPU time per case (``time.process_time``, the best of ``--repeats`` passes) of
rouge-score and ours, and the ratio; the goal (ROUGE-N at least 5x faster, ROUGE-Lsum at least
as fast) is marked met or MISSED on each row.

    PYTHONPATH=. python benchmarks/bench_rouge.py [--tokens 20 100 500] [--targets 1 4]
        [--cases 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import functools
import random
import time
from collections.abc import Callable, Sequence

from rouge_score.rouge_scorer import RougeScorer

from reward_plugins.metrics import Rouge1, Rouge2, RougeLsum, RougeN
from reward_plugins.metrics.rouge import RougeMetric

Case = tuple[str, list[str]]
_SYLLABLES = ("ka", "lo", "mi", "ter", "son", "ra", "vin", "de", "al", "po", "us", "ne", "tri")
_GOALS = {"rougeLsum": 1.0}
_N_GOAL = 5.0


def _vocabulary(size: int) -> list[str]:
    rng = random.Random(0)
    words = {"".join(rng.choices(_SYLLABLES, k=rng.randint(1, 4))) for _ in range(size * 2)}
    return sorted(words)[:size]


_VOCABULARY = _vocabulary(5000)
_WEIGHTS = [1.0 / (rank + 1) for rank in range(len(_VOCABULARY))]


def _prose(words: list[str], rng: random.Random, line_per_sentence: bool) -> str:
    """Words as prose: capitals after a period, some numbers, commas and periods."""
    pieces: list[str] = []
    for word in words:
        if not pieces or pieces[-1].endswith("."):
            word = word.capitalize()
        if rng.random() < 0.04:
            word = str(rng.randint(1, 2000))
        if rng.random() < 0.08:
            word += ","
        elif rng.random() < 0.06:
            word += "."
        pieces.append(word)
    text = " ".join(pieces) + "."
    return text.replace(". ", ".\n") if line_per_sentence else text


def _edited(words: list[str], rng: random.Random) -> list[str]:
    """``words`` with about a third substituted, dropped or followed by an inserted word."""
    edited: list[str] = []
    for word in words:
        roll = rng.random()
        if roll < 0.12:
            edited.append(rng.choices(_VOCABULARY, _WEIGHTS)[0])
        elif roll < 0.22:
            continue
        elif roll < 0.32:
            edited += [word, rng.choices(_VOCABULARY, _WEIGHTS)[0]]
        else:
            edited.append(word)
    return edited


def make_cases(count: int, tokens: int, targets: int, seed: int, lines: bool) -> list[Case]:
    """``count`` cases: a prediction of ``tokens`` words and ``targets`` edited copies of it."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        words = rng.choices(_VOCABULARY, _WEIGHTS, k=tokens)
        golds = [_prose(_edited(words, rng), rng, lines) for _ in range(targets)]
        cases.append((_prose(words, rng, lines), golds))
    return cases


def check_equal(rouge_type: str, scorer: RougeScorer, metrics: Sequence[RougeMetric]) -> None:
    """Assert bit-for-bit equal precision, recall and F-measure on ``metrics``' cases."""
    lines = rouge_type == "rougeLsum"
    for tokens, targets in ((20, 1), (100, 3), (300, 2)):
        for prediction, golds in make_cases(5, tokens, targets, seed=7, lines=lines):
            expected = scorer.score_multi(golds, prediction)[rouge_type]
            ours = [metric(prediction, golds) for metric in metrics]
            assert ours == list(expected), (rouge_type, prediction, golds, ours, expected)


def seconds_per_case(
    scorers: Sequence[Callable[[Case], float]], cases: Callable[[int], list[Case]], repeats: int
) -> list[float]:
    """Per scorer, its fastest mean CPU time per case over ``repeats`` passes.

    Each pass makes fresh cases (``cases(seed)``) and lets every scorer score all of them in
    turn, the order rotating between passes.
    """
    best = [float("inf")] * len(scorers)
    for repeat in range(repeats):
        batch = cases(1000 + repeat)
        for step in range(len(scorers)):
            index = (step + repeat) % len(scorers)
            start = time.process_time()
            for case in batch:
                scorers[index](case)
            best[index] = min(best[index], (time.process_time() - start) / len(batch))
    return best


def report(label: str, reference_s: float, ours_s: float, goal: float) -> None:
    """Print one side-by-side row with the goal's verdict."""
    ratio = reference_s / ours_s
    verdict = "met" if ratio >= goal else "MISSED"
    print(
        f"{label:<44} {reference_s * 1e3:10.3f} ms {ours_s * 1e3:9.3f} ms {ratio:7.1f}x"
        f"  (goal >= {goal:g}x: {verdict})"
    )


def _metrics(rouge_type: str, use_stemmer: bool) -> list[RougeMetric]:
    """Our metric for ``rouge_type`` with each measure, in rouge-score's Score field order."""
    classes: dict[str, Callable[..., RougeMetric]] = {
        "rouge1": Rouge1,
        "rouge2": Rouge2,
        "rouge3": lambda **options: RougeN(n=3, **options),
        "rougeLsum": RougeLsum,
    }
    make = classes[rouge_type]
    return [make(measure=m, compat="rouge_score", use_stemmer=use_stemmer) for m in "prf"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[20, 100, 500])
    parser.add_argument("--targets", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--cases", type=int, default=200, help="20-word cases per pass")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes (best is kept)")
    args = parser.parse_args()

    print(f"CPU time per case, best of {args.repeats} passes over fresh cases")
    print(f"{'':<44} {'rouge-score':>13} {'ours':>12} {'ratio':>8}")
    rows = [("rouge1", False), ("rouge1", True), ("rouge2", False), ("rouge3", False)]
    rows.append(("rougeLsum", False))
    for rouge_type, use_stemmer in rows:
        scorer = RougeScorer([rouge_type], use_stemmer=use_stemmer)
        metrics = _metrics(rouge_type, use_stemmer)
        check_equal(rouge_type, scorer, metrics)
        metric = metrics[2]  # F-measure
        lines = rouge_type == "rougeLsum"
        for case in make_cases(20, 50, 2, seed=99, lines=lines):  # warm the stemmer cache
            metric(*case)

        def theirs(case: Case, scorer: RougeScorer = scorer, rouge_type: str = rouge_type) -> float:
            return float(scorer.score_multi(case[1], case[0])[rouge_type].fmeasure)

        def ours(case: Case, metric: RougeMetric = metric) -> float:
            return metric(case[0], case[1])

        for tokens in args.tokens:
            count = max(2, args.cases * 100 // max(tokens, 100) // (4 if lines else 1))
            for targets in args.targets:
                cases = functools.partial(make_cases, count, tokens, targets, lines=lines)
                reference_s, ours_s = seconds_per_case([theirs, ours], cases, args.repeats)
                stem = "+stem" if use_stemmer else ""
                label = f"{rouge_type}{stem}, {tokens} words, {targets} target(s)"
                report(label, reference_s, ours_s, _GOALS.get(rouge_type, _N_GOAL))


if __name__ == "__main__":
    main()
