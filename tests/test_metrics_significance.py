"""Paired significance tests: sacrebleu's paired bootstrap and approximate randomization.

Oracles: sacrebleu 2.6.0's ``PairedTest`` (``sacrebleu/significance.py``) run on generated
systems for BLEU and chrF (same seed, same p-values), and an exact integer re-computation of
the test on per-row values that are multiples of 1/20, with the same random draws.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from reward_plugins.errors import InvalidInput, InvalidOption
from reward_plugins.metrics import (
    PairedResult,
    get_metric,
    paired_test,
    paired_test_values,
    score,
    significance,
)
from reward_plugins.metrics.chrf import Chrf

VOCABULARY = [
    *("the", "a", "cat", "dog", "sat", "on", "mat", "ran", "fast", "big", "red"),
    *(",", ".", "!", "Ünïcödé", "東京", "café"),
]


# --- generated systems ------------------------------------------------------------------------
def _sentence(rng: random.Random, longest: int) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(0, longest)))


def _noisy(rng: random.Random, text: str, keep: float) -> str:
    words = [w if rng.random() < keep else rng.choice(VOCABULARY) for w in text.split()]
    if rng.random() < 0.2:
        words.append(rng.choice(VOCABULARY))
    return " ".join(words)


def _systems(
    seed: int, rows: int, references: int = 1
) -> tuple[list[str], list[str], list[list[str]]]:
    """Two noisy systems (B a little better) and ``references`` references per row."""
    rng = random.Random(seed)
    targets = [[_sentence(rng, 14) for _ in range(references)] for _ in range(rows)]
    system_a = [_noisy(rng, row[0], 0.6) for row in targets]
    system_b = [_noisy(rng, row[0], 0.7) for row in targets]
    return system_a, system_b, targets


def _sacrebleu(
    metric: object,
    system_a: list[str],
    system_b: list[str],
    targets: list[list[str]],
    test_type: str,
    samples: int = 0,
) -> tuple[object, object]:
    """sacrebleu's results (baseline, system) with A as the baseline."""
    streams = [[row[k] for row in targets] for k in range(len(targets[0]))]
    tested = PairedTest(
        [("a", system_a), ("b", system_b)],
        {"m": metric},  # type: ignore[dict-item]
        streams,
        test_type=test_type,
        n_samples=samples,
    )
    _, scores = tested()
    baseline, system = scores[next(key for key in scores if key != "System")]
    return baseline, system


def _check_against_sacrebleu(
    result: PairedResult, baseline: object, system: object, method: str
) -> None:
    assert result.p_value == system.p_value  # type: ignore[attr-defined]
    # Our scores stop at 1.0, where a perfect sacrebleu score is 100.00000000000004.
    assert result.score_a == min(1.0, baseline.score / 100)  # type: ignore[attr-defined]
    assert result.score_b == min(1.0, system.score / 100)  # type: ignore[attr-defined]
    assert result.difference == result.score_b - result.score_a
    assert result.method == method
    if method == "ar":
        assert result.mean_a is result.ci_a is result.mean_b is result.ci_b is None
        return
    # Under NumPy 2, sacrebleu's float32 statistics make its resampled scores float32
    # computations; ours are computed from the same (whole) counts in float64: the p-values
    # are equal, the means and interval half-widths close.
    for ours, theirs in (
        (result.mean_a, baseline.mean),  # type: ignore[attr-defined]
        (result.ci_a, baseline.ci),  # type: ignore[attr-defined]
        (result.mean_b, system.mean),  # type: ignore[attr-defined]
        (result.ci_b, system.ci),  # type: ignore[attr-defined]
    ):
        assert ours == pytest.approx(theirs / 100, rel=1e-5, abs=1e-7)


# --- BLEU and chrF against sacrebleu ----------------------------------------------------------
@pytest.mark.parametrize(("method", "test_type"), [("bootstrap", "bs"), ("ar", "ar")])
@pytest.mark.parametrize(("seed", "rows", "references"), [(0, 40, 1), (1, 13, 2), (2, 70, 3)])
def test_bleu_matches_sacrebleu(
    method: str, test_type: str, seed: int, rows: int, references: int
) -> None:
    system_a, system_b, targets = _systems(seed, rows, references)
    baseline, system = _sacrebleu(BLEU(), system_a, system_b, targets, test_type)
    result = paired_test(
        "bleu_4",
        system_a,
        system_b,
        targets,
        method=method,
        compat="sacrebleu",
        effective_order=False,
    )
    assert result.samples == {"bootstrap": 1000, "ar": 10000}[method]
    assert result.seed == 12345
    _check_against_sacrebleu(result, baseline, system, method)


@pytest.mark.parametrize(("method", "test_type"), [("bootstrap", "bs"), ("ar", "ar")])
def test_bleu_other_seed_and_samples(
    method: str, test_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SACREBLEU_SEED", "7")
    system_a, system_b, targets = _systems(3, 30)
    metric = get_metric("bleu_4", compat="sacrebleu", effective_order=False)
    baseline, system = _sacrebleu(BLEU(), system_a, system_b, targets, test_type, samples=333)
    result = paired_test(metric, system_a, system_b, targets, method=method, samples=333, seed=7)
    assert result.samples == 333
    _check_against_sacrebleu(result, baseline, system, method)


@pytest.mark.parametrize(("method", "test_type"), [("bootstrap", "bs"), ("ar", "ar")])
def test_bleu_identical_systems(method: str, test_type: str) -> None:
    # A zero difference is never exceeded: sacrebleu gives p = 1 / (samples + 1).
    system_a, _, targets = _systems(4, 20)
    baseline, system = _sacrebleu(BLEU(), system_a, system_a, targets, test_type)
    metric = get_metric("bleu_4", compat="sacrebleu", effective_order=False)
    result = paired_test(metric, system_a, system_a, targets, method=method)
    _check_against_sacrebleu(result, baseline, system, method)
    assert result.p_value == 1 / (result.samples + 1)
    assert result.difference == 0.0


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(st.sampled_from("ab c.東é "), max_size=10),
            st.text(st.sampled_from("ab c.東é "), max_size=10),
            st.text(st.sampled_from("ab c.東é "), max_size=10),
        ),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([("bootstrap", "bs"), ("ar", "ar")]),
)
def test_bleu_matches_sacrebleu_on_generated_text(
    rows: list[tuple[str, str, str]], methods: tuple[str, str]
) -> None:
    system_a = [row[0] for row in rows]
    system_b = [row[1] for row in rows]
    targets = [[row[2]] for row in rows]
    baseline, system = _sacrebleu(BLEU(), system_a, system_b, targets, methods[1], samples=200)
    metric = get_metric("bleu_4", compat="sacrebleu", effective_order=False)
    result = paired_test(metric, system_a, system_b, targets, method=methods[0], samples=200)
    _check_against_sacrebleu(result, baseline, system, methods[0])


@pytest.mark.parametrize(("method", "test_type"), [("bootstrap", "bs"), ("ar", "ar")])
@pytest.mark.parametrize("word_order", [0, 2])
def test_chrf_matches_sacrebleu(method: str, test_type: str, word_order: int) -> None:
    system_a, system_b, targets = _systems(5 + word_order, 35, 2)
    baseline, system = _sacrebleu(
        CHRF(word_order=word_order), system_a, system_b, targets, test_type
    )
    metric = Chrf(word_order=word_order)
    result = paired_test(metric, system_a, system_b, targets, method=method)
    _check_against_sacrebleu(result, baseline, system, method)


@pytest.mark.parametrize(("method", "test_type"), [("bootstrap", "bs"), ("ar", "ar")])
@pytest.mark.parametrize(
    "options",
    [
        {"char_order": 4, "word_order": 1, "beta": 1, "lowercase": True, "whitespace": True},
        {"eps_smoothing": True},
    ],
)
def test_chrf_options_match_sacrebleu(
    method: str, test_type: str, options: dict[str, object]
) -> None:
    system_a, system_b, targets = _systems(12, 25, 1)
    baseline, system = _sacrebleu(
        CHRF(**options), system_a, system_b, targets, test_type, samples=500
    )
    metric = Chrf(**options)  # type: ignore[arg-type]
    result = paired_test(metric, system_a, system_b, targets, method=method, samples=500)
    _check_against_sacrebleu(result, baseline, system, method)


# --- the random draws -------------------------------------------------------------------------
@pytest.mark.parametrize("rows", [1, 3, 7, 33, 100])
def test_blocks_draw_what_one_call_draws(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(significance, "_CHUNK_CELLS", 1000)  # many small blocks
    whole = np.random.default_rng(3).choice(rows, size=(1001, rows), replace=True)
    blocks = significance._bootstrap_blocks(np.random.default_rng(3), rows, 1001)
    assert np.array_equal(np.concatenate(list(blocks)), whole)
    whole = np.random.default_rng(3).integers(2, size=(10001, rows), dtype=bool)
    blocks = significance._ar_blocks(np.random.default_rng(3), rows, 10001)
    assert np.array_equal(np.concatenate(list(blocks)), whole)


# --- means: an exact re-computation -----------------------------------------------------------
def _exact_p_value(
    integers_a: np.ndarray, integers_b: np.ndarray, method: str, samples: int, seed: int
) -> float:
    """The p-value in integer arithmetic (values scaled to integers, sums instead of means),
    from one call of sacrebleu's draws, counting differences at least as large as observed."""
    rng = np.random.default_rng(seed)
    rows = len(integers_a)
    observed = abs(int(integers_b.sum()) - int(integers_a.sum()))
    if method == "bootstrap":
        indices = rng.choice(rows, size=(samples, rows), replace=True)
        differences = np.abs(integers_b[indices].sum(axis=1) - integers_a[indices].sum(axis=1))
        total = int(differences.sum())
        # difference - mean(differences) >= observed, times `samples`:
        above = sum(1 for d in differences.tolist() if samples * d - total >= samples * observed)
    else:
        keep = rng.integers(2, size=(samples, rows), dtype=bool)
        shuffled_a = np.where(keep, integers_a, integers_b).sum(axis=1)
        shuffled_b = np.where(keep, integers_b, integers_a).sum(axis=1)
        above = int(np.count_nonzero(np.abs(shuffled_a - shuffled_b) >= observed))
    return (above + 1) / (samples + 1)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=60),
    st.sampled_from(["bootstrap", "ar"]),
    st.integers(0, 2**32),
)
def test_means_match_exact_arithmetic(pairs: list[tuple[int, int]], method: str, seed: int) -> None:
    # Multiples of 1/20 (0.05, 0.1, 0.15...) are not exact in binary: ties must still tie.
    integers_a = np.array([pair[0] for pair in pairs], dtype=np.int64)
    integers_b = np.array([pair[1] for pair in pairs], dtype=np.int64)
    values_a = [value / 20 for value in integers_a.tolist()]
    values_b = [value / 20 for value in integers_b.tolist()]
    result = paired_test_values(values_a, values_b, method=method, samples=500, seed=seed)
    assert result.p_value == _exact_p_value(integers_a, integers_b, method, 500, seed)
    assert result.score_a == np.mean(values_a) and result.score_b == np.mean(values_b)


def test_rewards_with_a_format_score() -> None:
    # 0 / 0.1 / 1 rewards (a format score of 0.1) over many rows: AR ties are common.
    rng = random.Random(11)
    integers_a = np.array([rng.choice([0, 2, 20]) for _ in range(400)])
    integers_b = np.array([rng.choice([0, 2, 20, 20]) for _ in range(400)])
    for method in ("bootstrap", "ar"):
        result = paired_test_values(integers_a / 20, integers_b / 20, method=method)
        assert result.p_value == _exact_p_value(
            integers_a, integers_b, method, result.samples, 12345
        )


def test_bootstrap_interval_of_means() -> None:
    values_a = [0.0, 1.0, 1.0, 0.5, 0.25]
    values_b = [1.0, 1.0, 0.0, 0.75, 1.0]
    result = paired_test_values(values_a, values_b, samples=400, seed=3)
    indices = np.random.default_rng(3).choice(5, size=(400, 5), replace=True)
    for values, mean, half_width in (
        (values_a, result.mean_a, result.ci_a),
        (values_b, result.mean_b, result.ci_b),
    ):
        means = np.sort(np.asarray(values)[indices].mean(axis=1))
        assert mean == pytest.approx(means.mean(), abs=1e-15)
        # 400 // 40 = 10 from each end: sorted[10] and sorted[389]
        assert half_width == pytest.approx(0.5 * (means[389] - means[10]), abs=1e-15)


def test_hand_worked_ar_ties() -> None:
    # A = [1, 1, 0], B = [0, 0, 0]: observed |2/3 - 0|. Swapping row 0 or row 1 alone gives
    # |1/3 - 1/3| = 0; both or neither gives 2/3 again, a tie, which counts as reaching the
    # observed difference; row 2 changes nothing. So p = (trials where rows 0 and 1 are kept
    # alike + 1) / (99 + 1), with the trials drawn as sacrebleu draws them (seed 12345).
    keep = np.random.default_rng(12345).integers(2, size=(99, 3), dtype=bool)
    alike = int(np.count_nonzero(keep[:, 0] == keep[:, 1]))
    result = paired_test_values([1, 1, 0], [0, 0, 0], method="ar", samples=99)
    assert result.p_value == (alike + 1) / 100
    assert 30 < alike < 70
    assert result.score_a == 2 / 3 and result.score_b == 0.0
    assert result.difference == -2 / 3


@pytest.mark.parametrize("method", ["bootstrap", "ar"])
def test_identical_values(method: str) -> None:
    # Every trial reaches the observed difference of 0: p = (50 + 1) / (50 + 1).
    result = paired_test_values([0.2, 0.7, 1.0], [0.2, 0.7, 1.0], method=method, samples=50)
    assert result.p_value == 1.0
    assert result.difference == 0.0


@pytest.mark.parametrize("method", ["bootstrap", "ar"])
def test_swapping_the_systems(method: str) -> None:
    rng = random.Random(8)
    values_a = [rng.random() for _ in range(50)]
    values_b = [rng.random() + 0.1 for _ in range(50)]
    forward = paired_test_values(values_a, values_b, method=method, samples=300)
    backward = paired_test_values(values_b, values_a, method=method, samples=300)
    assert forward.p_value == backward.p_value
    assert forward.difference == -backward.difference
    assert (forward.mean_a, forward.ci_a) == (backward.mean_b, backward.ci_b)


def test_a_clear_difference_is_significant_and_noise_is_not() -> None:
    rng = np.random.default_rng(0)
    base = rng.random(300)
    better = paired_test_values(base, base + 0.2, samples=500)
    assert better.p_value == 1 / 501
    noise = paired_test_values(base, base + rng.normal(0, 0.05, 300), samples=500)
    assert noise.p_value > 0.05


# --- sentence-level metrics -------------------------------------------------------------------
@pytest.mark.parametrize("method", ["bootstrap", "ar"])
@pytest.mark.parametrize(
    ("metric", "options"),
    [("f1", {}), ("exact_match", {"compat": "squad_v2"}), ("rouge_l", {})],
)
def test_sentence_metrics_use_the_mean(
    metric: str, options: dict[str, object], method: str
) -> None:
    system_a, system_b, targets = _systems(9, 40, 2)
    result = paired_test(metric, system_a, system_b, targets, method=method, samples=300, **options)
    values_a = [score(metric, p, t, **options) for p, t in zip(system_a, targets, strict=True)]
    values_b = [score(metric, p, t, **options) for p, t in zip(system_b, targets, strict=True)]
    expected = paired_test_values(values_a, values_b, method=method, samples=300)
    assert result == expected._replace(metric=get_metric(metric, **options).signature)


def test_a_built_metric() -> None:
    metric = get_metric("f1", compat="squad")
    # "x" vs "x y": P = 1, R = 1/2, F1 = 2/3; "w" vs "z": 0; B's mean (2/3 + 0) / 2.
    result = paired_test(metric, ["x y", "z"], ["x", "w"], ["x y", "z"], samples=10)
    assert result.metric == "f1|compat:squad|norm:squad|tok:split"
    assert result.score_a == 1.0 and result.score_b == (2 / 3 + 0.0) / 2


# --- errors -----------------------------------------------------------------------------------
def test_errors() -> None:
    with pytest.raises(InvalidInput, match="2 predictions_a, 1 predictions_b and 2 targets"):
        paired_test("f1", ["a", "b"], ["a"], ["a", "b"])
    with pytest.raises(InvalidInput, match="no rows"):
        paired_test("f1", [], [], [])
    with pytest.raises(InvalidInput, match="predictions_b, row 1: f1: prediction must be a str"):
        paired_test("f1", ["a", "b"], ["a", 2], ["a", "b"])  # type: ignore[list-item]
    with pytest.raises(InvalidOption, match="unknown method 'bs'; valid methods: bootstrap, ar"):
        paired_test("f1", ["a"], ["b"], ["a"], method="bs")
    with pytest.raises(InvalidOption, match="unknown metric 'bleu5'"):
        paired_test("bleu5", ["a"], ["b"], ["a"])
    with pytest.raises(InvalidOption, match="f1: unknown option"):
        paired_test("f1", ["a"], ["b"], ["a"], smooth="exp")
    with pytest.raises(InvalidOption, match="already built"):
        paired_test(get_metric("f1"), ["a"], ["b"], ["a"], compat="squad")
    with pytest.raises(InvalidOption, match="samples must be a positive int, got 0"):
        paired_test_values([1.0], [0.0], samples=0)
    with pytest.raises(InvalidOption, match="samples must be a positive int, got True"):
        paired_test_values([1.0], [0.0], samples=True)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="seed must be a non-negative int or None, got -1"):
        paired_test_values([1.0], [0.0], seed=-1)
    with pytest.raises(InvalidInput, match="3 values_a but 2 values_b"):
        paired_test_values([1.0, 0.0, 1.0], [0.0, 1.0])
    with pytest.raises(InvalidInput, match=r"values_b\[1\] must be a finite number, got nan"):
        paired_test_values([1.0, 0.0], [0.0, float("nan")])
    with pytest.raises(InvalidInput, match=r"values_a\[0\] must be a finite number, got str"):
        paired_test_values(["1"], [0.0])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match=r"values_a must be a flat list .* shape \(2, 2\)"):
        paired_test_values(np.ones((2, 2)), np.ones(4))
    with pytest.raises(InvalidInput, match=r"values_b\[2\] must be a finite number, got inf"):
        paired_test_values(np.zeros(3), np.array([0.0, 1.0, np.inf]))
    with pytest.raises(InvalidInput, match="values_a must be a list of numbers, got str"):
        paired_test_values("10", [0.0, 1.0])  # type: ignore[arg-type]


def test_unseeded_draws_still_give_a_p_value() -> None:
    values: Sequence[float] = [0.0, 1.0, 0.5, 0.25]
    result = paired_test_values(values, [1.0, 1.0, 0.0, 0.5], seed=None, samples=100)
    assert result.seed is None
    assert 1 / 101 <= result.p_value <= 1.0
