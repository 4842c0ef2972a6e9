"""Speed of the shaping terms: per call on typical responses, against a direct transcription of
open-r1's repetition rule, and the time ratio when the input doubles (linear time: about 2).

- per call: each term through its router (``reward_plugins.<name>``, as verl calls it) on
  synthetic responses of about ``--words`` words, English-like with an ``<answer>`` span;
- repetition: ``repetition_penalty`` against ``open_r1_style`` below (the rule of
  huggingface/open-r1 ``src/open_r1/rewards.py``, written out with a set of word tuples), at
  ``ngram_size`` 3 and 64, results checked equal first;
- doubling: each term on adversarial 512 KiB and 1 MiB inputs (separator runs for the answer
  list, one repeated word for repetition, mixed scripts and tag-like text for the language
  share), best of ``--repeats``.

    PYTHONPATH=. python benchmarks/bench_shaping.py [--words 300] [--calls 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

import reward_plugins

TERMS: dict[str, dict[str, Any]] = {
    "length_penalty": {"max_length": 400, "buffer": 100},
    "repetition_penalty": {},
    "answer_list_penalty": {},
    "language_mix_penalty": {},
}
_SYLLABLES = ("ka", "lo", "mi", "ter", "son", "ra", "vin", "de", "al", "po", "us", "ne", "tri")


def make_responses(count: int, words: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choices(_SYLLABLES, k=rng.randint(1, 3))) for _ in range(2000)]
    responses = []
    for _ in range(count):
        body = " ".join(rng.choices(vocabulary, k=words))
        answer = ", ".join(rng.choices(vocabulary, k=rng.randint(1, 4)))
        responses.append(f"<think>{body}</think><answer>{answer}</answer>")
    return responses


def open_r1_style(text: str, ngram_size: int = 3, max_penalty: float = -1.0) -> float:
    """open-r1's repetition rule written out directly (set of word tuples)."""
    items = text.lower().split()
    if len(items) < ngram_size:
        return 0.0
    grams = list(zip(*(items[start:] for start in range(ngram_size)), strict=False))
    return (1 - len(set(grams)) / len(grams)) * max_penalty


def best_time(function: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def per_call(responses: list[str], repeats: int) -> None:
    print(f"per call, {len(responses)} responses (router, as verl calls it):")
    for name, options in TERMS.items():
        router = getattr(reward_plugins, name)
        elapsed = best_time(
            lambda router=router, options=options: [
                router("any", response, None, None, **options) for response in responses
            ],
            repeats,
        )
        print(f"  {name:22} {elapsed / len(responses) * 1e6:8.1f} us")


def repetition_side_by_side(responses: list[str], repeats: int) -> None:
    print("repetition_penalty vs open_r1_style (same values checked first):")
    for size in (3, 64):
        ours = [
            reward_plugins.repetition_penalty("any", text, None, ngram_size=size)["score"]
            for text in responses
        ]
        assert ours == [open_r1_style(text, size) for text in responses]
        mine = best_time(
            lambda size=size: [
                reward_plugins.repetition_penalty("any", text, None, ngram_size=size)
                for text in responses
            ],
            repeats,
        )
        theirs = best_time(
            lambda size=size: [open_r1_style(text, size) for text in responses], repeats
        )
        print(
            f"  ngram_size {size:3}: ours {mine / len(responses) * 1e6:8.1f} us, "
            f"open_r1_style {theirs / len(responses) * 1e6:8.1f} us, ratio {mine / theirs:.2f}"
        )


ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "length_penalty": lambda size: ("a " * size)[:size],
    "repetition_penalty": lambda size: ("loop " * size)[:size],
    "answer_list_penalty": lambda size: (
        "<answer>" + ("1,1, o an or\t/a," * size)[:size] + "</answer>"
    ),
    "language_mix_penalty": lambda size: ("<a b Тест 東京 <|x|> " * size)[:size],
}


def time_call(
    router: Callable[..., Any], text: str, options: dict[str, Any], repeats: int
) -> float:
    return best_time(lambda: router("any", text, None, **options), repeats)


def doubling(repeats: int) -> None:
    print("time at 1 MiB / time at 512 KiB (linear: about 2):")
    for name, make in ADVERSARIAL.items():
        router = getattr(reward_plugins, name)
        options = TERMS[name]
        half, full = make(512 * 1024), make(1024 * 1024)
        small, large = (time_call(router, text, options, repeats) for text in (half, full))
        print(f"  {name:22} {small * 1e3:7.1f} ms -> {large * 1e3:7.1f} ms: x{large / small:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    responses = make_responses(args.calls, args.words)
    per_call(responses, args.repeats)
    repetition_side_by_side(responses, args.repeats)
    doubling(args.repeats)


if __name__ == "__main__":
    main()
