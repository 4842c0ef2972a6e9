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
from collections.abc import Callable, Sequence

from rouge_score.rouge_scorer import RougeScorer
from texts import VOCABULARY, WEIGHTS, edited, prose, report, seconds_per_case

from reward_plugins.metrics import Rouge1, Rouge2, RougeLsum, RougeN
from reward_plugins.metrics.rouge import RougeMetric

Case = tuple[str, list[str]]
_GOALS = {"rougeLsum": 1.0}
_N_GOAL = 5.0


def make_cases(count: int, tokens: int, targets: int, seed: int, lines: bool) -> list[Case]:
    """``count`` cases: a prediction of ``tokens`` words and ``targets`` edited copies of it."""
    rng = random.Random(seed)

    def draw() -> str:
        return rng.choices(VOCABULARY, WEIGHTS)[0]

    cases = []
    for _ in range(count):
        words = rng.choices(VOCABULARY, WEIGHTS, k=tokens)
        golds = [prose(edited(words, draw, rng), rng, lines) for _ in range(targets)]
        cases.append((prose(words, rng, lines), golds))
    return cases


def check_equal(rouge_type: str, scorer: RougeScorer, metrics: Sequence[RougeMetric]) -> None:
    """Assert bit-for-bit equal precision, recall and F-measure on ``metrics``' cases."""
    lines = rouge_type == "rougeLsum"
    for tokens, targets in ((20, 1), (100, 3), (300, 2)):
        for prediction, golds in make_cases(5, tokens, targets, seed=7, lines=lines):
            expected = scorer.score_multi(golds, prediction)[rouge_type]
            ours = [metric(prediction, golds) for metric in metrics]
            assert ours == list(expected), (rouge_type, prediction, golds, ours, expected)


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
                report(label, reference_s, ours_s, _GOALS.get(rouge_type, _N_GOAL), width=44)


if __name__ == "__main__":
    main()
