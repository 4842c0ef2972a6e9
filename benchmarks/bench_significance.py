"""Side-by-side speed of the paired significance tests and sacrebleu's ``PairedTest``.

BLEU (sacrebleu's corpus BLEU, ``effective_order=False``) and chrF: sacrebleu 2.6.0's
``PairedTest`` with ``paired_bs`` (1000 resamples) and ``paired_ar`` (10000 trials), seed 12345,
against ``reward_plugins.metrics.paired_test`` with the same settings, on two synthetic systems
(English-like sentences of 5 to 40 words; system B is system A with about a quarter of its words
changed; one reference per sentence, A with a third of its words changed). The p-values are
checked equal before any time is printed. Then ``paired_test_values`` on per-row 0/1 rewards,
the path of ``reward-plugins compare``, which has no sacrebleu counterpart.

Wall time (``time.perf_counter``) of one call each, as a user waits for it.

    PYTHONPATH=. python benchmarks/bench_significance.py [--rows 200 1000]
        [--reward-rows 10000 100000]
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from reward_plugins.metrics import get_metric, paired_test, paired_test_values

WORDS = [f"w{index}" for index in range(2000)]


def _edit(sentence: list[str], share: float, rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) if rng.random() < share else word for word in sentence)


def make_systems(rows: int, seed: int = 0) -> tuple[list[str], list[str], list[str]]:
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    system_a, system_b, references = [], [], []
    for _ in range(rows):
        sentence = rng.choices(WORDS, weights, k=rng.randint(5, 40))
        system_a.append(" ".join(sentence))
        system_b.append(_edit(sentence, 0.25, rng))
        references.append(_edit(sentence, 0.33, rng))
    return system_a, system_b, references


def timed(call: Callable[..., Any], *args: Any, **options: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call(*args, **options)
    return time.perf_counter() - start, result


def sacrebleu_p_value(metric: Any, a: list[str], b: list[str], refs: list[str], test: str) -> float:
    """sacrebleu's p-value of B against the baseline A (its seed from ``SACREBLEU_SEED``)."""
    os.environ["SACREBLEU_SEED"] = "12345"
    paired = PairedTest([("a", a), ("b", b)], {"m": metric}, [refs], test_type=test)
    _, scores = paired()
    _, system = scores[next(key for key in scores if key != "System")]
    return float(system.p_value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--reward-rows", type=int, nargs="+", default=[10_000, 100_000])
    args = parser.parse_args()

    print(f"{'test':36} {'sacrebleu':>10} {'ours':>9} {'ratio':>7}")
    for rows in args.rows:
        a, b, refs = make_systems(rows)
        targets = [[reference] for reference in refs]
        cases = (
            ("BLEU", BLEU(), get_metric("bleu_4", compat="sacrebleu", effective_order=False)),
            ("chrF", CHRF(), get_metric("chrf")),
        )
        for label, theirs, ours in cases:
            for method, test in (("bootstrap", "bs"), ("ar", "ar")):
                their_s, their_p = timed(sacrebleu_p_value, theirs, a, b, refs, test)
                our_s, result = timed(paired_test, ours, a, b, targets, method=method)
                if result.p_value != their_p:
                    raise SystemExit(f"{label} {method}: p {result.p_value} != {their_p}")
                name = f"{label} {method}, {rows} rows"
                print(f"{name:36} {their_s:9.2f}s {our_s:8.2f}s {their_s / our_s:6.1f}x")
    rng = np.random.default_rng(0)
    for rows in args.reward_rows:
        values_a = rng.integers(0, 2, rows).astype(float)
        values_b = rng.integers(0, 2, rows).astype(float)
        for method in ("bootstrap", "ar"):
            our_s, _ = timed(paired_test_values, values_a, values_b, method=method)
            name = f"0/1 rewards {method}, {rows} rows"
            print(f"{name:36} {'-':>10} {our_s:8.2f}s")


if __name__ == "__main__":
    main()
