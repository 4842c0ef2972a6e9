"""Side-by-side speed of chrF / chrF++ and of BLEU with sacrebleu's tokenizers, against sacrebleu.

chrF rows time sacrebleu 2.6.0's ``CHRF(word_order=w).sentence_score(prediction, targets)`` on
an object built once against our ``Chrf(word_order=w)`` built once, for predictions of several
lengths (``--tokens``, default 5, 20, 100 and 500 words) and target counts (``--targets``,
default 1 and 4), then on a mix (lengths drawn from 1 to 300 words, 1 to 4 targets), and corpus
chrF (``CHRF().corpus_score`` against ``Chrf().corpus_score`` on the mixed sentences). BLEU rows
time ``BLEU(tokenize=t, max_ngram_order=n, effective_order=True).sentence_score`` against
``Bleu(compat="sacrebleu", tokenize=t, max_ngram_order=n)``, for each of sacrebleu's tokenizers
``13a``, ``none``, ``intl``, ``char`` and ``zh`` (Chinese text for ``zh`` and ``char``).

Texts are synthetic prose (Zipf-distributed words, capitals, commas, periods, numbers; for the
Chinese rows, Zipf-distributed ideographs with full-width punctuation and some Latin words);
each target is the prediction with about a third of its words substituted, dropped or inserted,
drawn independently per target. Every timed pass scores cases that no earlier pass has seen (a
new seed per pass), so sacrebleu's per-line tokenizer caches and our per-word 13a cache only
help as they would on new data. Before any time is printed, every score is checked equal, bit
for bit (ours == sacrebleu's score / 100, capped at 1.0), on other cases of the same shape.

Printed per row: CPU time per case (``time.process_time``, the best of ``--repeats`` passes) of
sacrebleu and ours, and the ratio; the goals (chrF at least 5x faster, BLEU at least as fast) are
marked met or MISSED on each row.

    PYTHONPATH=. python benchmarks/bench_chrf.py [--tokens 5 20 100 500] [--targets 1 4]
        [--cases 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import functools
import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from sacrebleu.metrics import BLEU, CHRF
from texts import VOCABULARY, WEIGHTS, edited, prose, report, seconds_per_case

from reward_plugins.metrics import Bleu, Chrf

Case = tuple[str, list[str]]
_CHRF_GOAL = 5.0
_BLEU_GOAL = 1.0


# Chinese-like text: 3,000 ideographs from the CJK block, Zipf-distributed.
_IDEOGRAPHS = [chr(0x4E00 + 7 * index) for index in range(3000)]
_IDEOGRAPH_WEIGHTS = [1.0 / (rank + 1) for rank in range(len(_IDEOGRAPHS))]


def _chinese(words: list[str], rng: random.Random) -> str:
    """Ideographs run together, full-width commas and periods, a few spaced Latin words."""
    pieces: list[str] = []
    for word in words:
        pieces.append(f" {word} " if word.isascii() else word)
        roll = rng.random()
        if roll < 0.06:
            pieces.append("\uff0c")
        elif roll < 0.1:
            pieces.append("\u3002")
    return "".join(pieces).strip() + "\u3002"


def make_cases(
    count: int, tokens: int | tuple[int, int], targets: int | tuple[int, int], seed: int, *,
    chinese: bool = False,
) -> list[Case]:  # fmt: skip
    """``count`` cases: a prediction of ``tokens`` words and ``targets`` edited copies of it.

    A ``(low, high)`` pair draws the number per case, uniformly.
    """
    rng = random.Random(seed)

    def draw() -> str:
        if chinese and rng.random() < 0.95:
            return rng.choices(_IDEOGRAPHS, _IDEOGRAPH_WEIGHTS)[0]
        return rng.choices(VOCABULARY, WEIGHTS)[0]

    render = _chinese if chinese else prose
    cases = []
    for _ in range(count):
        size = tokens if isinstance(tokens, int) else rng.randint(*tokens)
        golds = targets if isinstance(targets, int) else rng.randint(*targets)
        words = [draw() for _ in range(size)]
        cases.append(
            (render(words, rng), [render(edited(words, draw, rng), rng) for _ in range(golds)])
        )
    return cases


def check_equal(
    ours: Callable[[Case], float], theirs: Callable[[Case], float], cases: Sequence[Case]
) -> None:
    """Assert that ours equals sacrebleu's score / 100 (capped at 1.0), bit for bit."""
    for case in cases:
        mine, reference = ours(case), min(1.0, theirs(case))
        assert mine == reference, (case, mine, reference)


def _streams(references: Sequence[list[str]]) -> list[list[Any]]:
    """sacrebleu's reference streams: stream k holds the k-th reference of every sentence.

    ``None`` where a sentence has fewer references (sacrebleu accepts it; its hints do not).
    """
    count = max(map(len, references))
    return [[row[k] if k < len(row) else None for row in references] for k in range(count)]


def chrf_rows(tokens: Sequence[int], targets: Sequence[int], cases: int, repeats: int) -> None:
    """Sentence chrF and chrF++ by length and target count, then mixed, then corpus chrF."""
    mixed = ((1, 300), (1, 4))
    for word_order in (0, 2):
        reference = CHRF(word_order=word_order)
        metric = Chrf(word_order=word_order)

        def theirs(case: Case, reference: CHRF = reference) -> float:
            return float(reference.sentence_score(case[0], case[1]).score) / 100

        def ours(case: Case, metric: Chrf = metric) -> float:
            return metric(case[0], case[1])

        name = "chrF++" if word_order else "chrF"
        shapes: list[tuple[int | tuple[int, int], int | tuple[int, int]]] = [
            (length, count) for length in tokens for count in targets
        ]
        for length, count in [*shapes, mixed]:
            check_equal(ours, theirs, make_cases(10, length, count, seed=7))
            per_pass = max(4, cases * 20 // max(length if isinstance(length, int) else 150, 20))

            def batch(
                seed: int,
                t: int | tuple[int, int] = length,
                k: int | tuple[int, int] = count,
                n: int = per_pass,
            ) -> list[Case]:
                return make_cases(n, t, k, seed)

            reference_s, ours_s = seconds_per_case([theirs, ours], batch, repeats)
            shape = (
                f"{length} words, {count} target(s)"
                if isinstance(length, int)
                else "1-300 words, 1-4 targets"
            )
            report(f"{name}, {shape}", reference_s, ours_s, _CHRF_GOAL)

    reference, metric = CHRF(), Chrf()

    def corpus_cases(seed: int) -> list[Case]:
        return make_cases(max(20, cases // 2), *mixed, seed)

    check_corpus = corpus_cases(7)
    predictions = [prediction for prediction, _ in check_corpus]
    references = [golds for _, golds in check_corpus]
    expected = reference.corpus_score(predictions, _streams(references)).score / 100
    assert metric.corpus_score(predictions, references) == min(1.0, expected)
    best = [float("inf"), float("inf")]
    for repeat in range(repeats):
        corpus = corpus_cases(2000 + repeat)
        predictions = [prediction for prediction, _ in corpus]
        references = [golds for _, golds in corpus]
        streams = _streams(references)
        runs: list[Callable[[], object]] = [
            functools.partial(reference.corpus_score, predictions, streams),
            functools.partial(metric.corpus_score, predictions, references),
        ]
        for step in range(2):
            index = (step + repeat) % 2
            start = time.process_time()
            runs[index]()
            best[index] = min(best[index], (time.process_time() - start) / len(corpus))
    report("corpus chrF, 1-300 words, 1-4 targets (per row)", best[0], best[1], _CHRF_GOAL)


def bleu_rows(tokens: Sequence[int], cases: int, repeats: int) -> None:
    """Sentence BLEU with each of sacrebleu's tokenizers, orders 4 and 6, one and 4 targets."""
    for tokenize in ("13a", "none", "intl", "char", "zh"):
        chinese = tokenize in ("char", "zh")
        for order in (4, 6):
            reference = BLEU(tokenize=tokenize, max_ngram_order=order, effective_order=True)
            metric = Bleu(compat="sacrebleu", tokenize=tokenize, max_ngram_order=order)

            def theirs(case: Case, reference: BLEU = reference) -> float:
                return float(reference.sentence_score(case[0], case[1]).score) / 100

            def ours(case: Case, metric: Bleu = metric) -> float:
                return metric(case[0], case[1])

            for length in tokens:
                if length < 20 or (order == 6 and length != 100):
                    continue
                for count in (1, 4):
                    check_equal(ours, theirs, make_cases(10, length, count, 7, chinese=chinese))
                    per_pass = max(4, cases * 20 // max(length, 20))

                    def batch(
                        seed: int,
                        t: int = length,
                        k: int = count,
                        c: bool = chinese,
                        n: int = per_pass,
                    ) -> list[Case]:
                        return make_cases(n, t, k, seed, chinese=c)

                    reference_s, ours_s = seconds_per_case([theirs, ours], batch, repeats)
                    label = f"BLEU-{order} tok {tokenize}, {length} words, {count} target(s)"
                    report(label, reference_s, ours_s, _BLEU_GOAL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[5, 20, 100, 500])
    parser.add_argument("--targets", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--cases", type=int, default=200, help="20-word cases per pass")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes (best is kept)")
    parser.add_argument("--skip-bleu", action="store_true", help="chrF rows only")
    args = parser.parse_args()
    logging.getLogger("sacrebleu").setLevel(logging.ERROR)

    print(f"CPU time per case, best of {args.repeats} passes over fresh cases")
    print(f"{'':<46} {'sacrebleu':>13} {'ours':>12} {'ratio':>8}")
    chrf_rows(args.tokens, args.targets, args.cases, args.repeats)
    if not args.skip_bleu:
        bleu_rows(args.tokens, args.cases, args.repeats)


if __name__ == "__main__":
    main()
