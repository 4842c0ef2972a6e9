"""Compatibility presets against the reference libraries: anchors and differential tests.

The reference libraries (sacrebleu 2.6.0, rouge-score 0.1.2, nltk, verl) are test oracles only;
the official SQuAD v1.1 logic is restated below from its definition. Generated cases come from a
seeded generator, a few thousand per test, so the suite stays deterministic and fast.
"""

from __future__ import annotations

import collections
import math
import random
import re
import string
from collections.abc import Callable, Iterator

import pytest
import sacrebleu
from nltk.translate.bleu_score import SmoothingFunction
from nltk.translate.bleu_score import sentence_bleu as nltk_sentence_bleu
from rouge_score.rouge_scorer import RougeScorer
from sacrebleu.metrics import BLEU
from verl.utils.reward_score.search_r1_like_qa_em import em_check, subem_check

from reward_plugins.errors import InvalidOption
from reward_plugins.metrics import (
    Bleu4,
    RougeL,
    bleu_4,
    corpus_bleu,
    exact_match,
    f1,
    get_metric,
    rouge_l,
    subem,
)
from reward_plugins.text import tokenize_words

TOLERANCE = 1e-9


pytestmark = pytest.mark.usefixtures("quiet_sacrebleu")


# Tokens chosen to hit 13a rules, rouge-score's filter and stemmer, case, repeats and near misses.
_VOCABULARY = [
    "the", "The", "cat", "cats", "sat", "on", "a", "mat", "dog", "running", "runs", "quickly",
    "lies", "skies", "3.5", "1,000", "U.S.", "don't", "x-y", "5-", ".", ",", "!", "(", ")",
    "&amp;", "café", "İstanbul", "東京", "-", "'",
]  # fmt: skip


def _sentence(rng: random.Random, max_tokens: int = 12) -> str:
    return " ".join(rng.choices(_VOCABULARY, k=rng.randint(0, max_tokens)))


def _cases(seed: int, count: int, max_targets: int = 3) -> Iterator[tuple[str, list[str]]]:
    rng = random.Random(seed)
    for _ in range(count):
        prediction = _sentence(rng)
        targets = [_sentence(rng) for _ in range(rng.randint(1, max_targets))]
        if rng.random() < 0.2:  # near copies make high scores and exact matches common
            targets[0] = " ".join(prediction.split()[: rng.randint(0, 12)])
        yield prediction, targets


# --- sacrebleu -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("prediction", "references", "options", "expected"),
    [
        # sacrebleu 2.6.0 outputs, 0-100: sentence_bleu(prediction, references).score with the
        # options as smooth_method, use_effective_order and lowercase (sacrebleu/compat.py,
        # computed by sacrebleu/metrics/bleu.py).
        ("the cat sat on a mat", ["the cat sat on the mat"], {}, 53.7284965912),
        ("the cat sat on a mat", ["the cat sat on the mat"], {"smooth": "none"}, 53.7284965912),
        ("the cat sat on a mat", ["the cat sat on the mat"], {"smooth": "floor"}, 53.7284965912),
        ("the cat sat on a mat", ["the cat sat on the mat"], {"smooth": "add-k"}, 63.8943104246),
        ("hello world", ["hello world"], {}, 100.0),
        ("hello world", ["hello world"], {"effective_order": False}, 0.0),
        ("hello world", ["hello world"], {"effective_order": False, "smooth": "add-k"}, 100.0),
        ("yes", ["no"], {}, 0.0),
        ("", ["the cat"], {}, 0.0),
        ("the cat", [""], {}, 0.0),
        ("a b", ["a c"], {}, 49.99999999999999),
        ("a b", ["a c"], {"smooth": "none"}, 0.0),
        ("a b", ["a c"], {"smooth": "floor"}, 22.360679774997894),
        ("a b", ["a c"], {"smooth": "add-k"}, 70.71067811865471),
        ("the cat is here", ["a cat was there today"], {}, 12.44023474812678),
        ("the cat is here", ["a cat was there today"], {"smooth": "floor"}, 6.257106818159156),
        ("the cat is here", ["a cat was there today"], {"smooth": "add-k"}, 24.880469496253564),
        ("The Cat", ["the cat"], {"lowercase": True}, 100.0),
        ("The Cat", ["the cat"], {}, 0.0),
    ],
)
def test_sacrebleu_anchors(
    prediction: str, references: list[str], options: dict[str, object], expected: float
) -> None:
    value = bleu_4(prediction, references, compat="sacrebleu", **options)  # type: ignore[arg-type]
    assert value == pytest.approx(min(1.0, expected / 100), abs=1e-12)


def test_sacrebleu_closest_reference_length_ties_to_shorter() -> None:
    # Anchor: "a b c d e" vs refs of 4 and 6 tokens -> ref_len 4, so no brevity penalty.
    metric = Bleu4(compat="sacrebleu")
    (stats,) = metric.statistics("a b c d e", ["a b c d", "a b c d e f"])
    assert stats.reference_length == 4
    assert stats.correct == (5, 4, 3, 2)


@pytest.mark.parametrize("smooth", ["exp", "none", "floor", "add-k"])
@pytest.mark.parametrize("effective_order", [True, False])
def test_sentence_bleu_matches_sacrebleu(smooth: str, effective_order: bool) -> None:
    reference = BLEU(smooth_method=smooth, effective_order=effective_order)
    ours = Bleu4(compat="sacrebleu", smooth=smooth, effective_order=effective_order)
    for prediction, targets in _cases(seed=1, count=600):
        expected = reference.sentence_score(prediction, targets).score / 100
        # Bit for bit (stronger than the 1e-9 promised): both sides run the same float steps.
        assert ours(prediction, targets) == min(1.0, expected)


def test_sentence_bleu_options_match_sacrebleu() -> None:
    rng = random.Random(2)
    for prediction, targets in _cases(seed=3, count=600):
        smooth = rng.choice(["floor", "add-k"])
        value = rng.choice([0.0, 0.01, 0.5, 1, 2])
        lowercase = rng.random() < 0.5
        expected = sacrebleu.sentence_bleu(
            prediction, targets, smooth_method=smooth, smooth_value=value, lowercase=lowercase
        )
        ours = bleu_4(
            prediction,
            targets,
            compat="sacrebleu",
            smooth=smooth,
            smooth_value=value,
            lowercase=lowercase,
        )
        assert ours == pytest.approx(min(1.0, expected.score / 100), abs=TOLERANCE)


@pytest.mark.parametrize(
    ("value", "shown"),
    [(math.nan, "float: nan"), (math.inf, "float: inf"), (10**400, "an integer of 401 digits")],
)
@pytest.mark.parametrize("smooth", ["floor", "add-k"])
def test_non_finite_smooth_value_is_refused(smooth: str, value: float, shown: str) -> None:
    # sacrebleu takes these values and scores NaN or inf (or overflows on the huge integer);
    # the metrics refuse them when built, naming the metric and the option.
    prediction, target = "the cat sat on a hat", "the cat sits on the mat"
    reference = BLEU(smooth_method=smooth, smooth_value=value)
    try:
        score = reference.sentence_score(prediction, [target]).score
    except OverflowError:
        score = math.nan
    assert not math.isfinite(score)
    for metric in ("bleu", "bleu_4"):
        message = rf"^{metric}: smooth_value must be a finite number >= 0, got {shown}$"
        for compat in (None, "sacrebleu"):
            with pytest.raises(InvalidOption, match=message):
                get_metric(metric, compat=compat, smooth=smooth, smooth_value=value)


@pytest.mark.parametrize("smooth", ["exp", "none", "floor", "add-k"])
def test_corpus_bleu_matches_sacrebleu(smooth: str) -> None:
    rng = random.Random(4)
    for _ in range(15):
        rows = list(_cases(seed=rng.randint(0, 10**6), count=rng.randint(1, 40)))
        predictions = [prediction for prediction, _ in rows]
        references = [targets for _, targets in rows]
        # sacrebleu takes streams: streams[k][i] is the k-th reference of prediction i.
        width = max(map(len, references))
        streams = [[row[k] if k < len(row) else None for row in references] for k in range(width)]
        expected = sacrebleu.corpus_bleu(predictions, streams, smooth_method=smooth).score / 100
        ours = corpus_bleu(predictions, references, compat="sacrebleu", smooth=smooth)
        assert ours == min(1.0, expected)  # bit for bit, like the sentence level


def test_long_sentence_bleu_matches_sacrebleu() -> None:
    # Predictions of 200 tokens or more take the numpy counting path; several references,
    # repeats (a small vocabulary) and every smoothing method.
    rng = random.Random(11)
    words = ["the", "cat", "sat", ".", ",", "on", "mat", "3.5", "don't", "(", ")"]
    for index in range(60):
        smooth = ("exp", "none", "floor", "add-k")[index % 4]
        reference = BLEU(smooth_method=smooth, effective_order=True)
        prediction = " ".join(rng.choices(words, k=rng.randint(150, 400)))
        targets = [
            " ".join(rng.choices(words, k=rng.randint(0, 400))) for _ in range(rng.randint(1, 3))
        ]
        expected = reference.sentence_score(prediction, targets).score / 100
        assert bleu_4(prediction, targets, compat="sacrebleu", smooth=smooth) == min(1.0, expected)


def test_corpus_bleu_anchors() -> None:
    # sacrebleu 2.6.0's corpus_bleu(hypotheses, [references]).score (sacrebleu/metrics/bleu.py):
    # 86.6877899750182 and 100.00000000000004.
    value = corpus_bleu(
        ["the cat sat on the mat", "hello"],
        [["the cat sat on the mat"], ["hello there"]],
        compat="sacrebleu",
    )
    assert value == pytest.approx(0.866877899750182, abs=1e-12)
    assert corpus_bleu(["a b c d e", "x"], [["a b c d e"], ["x"]], compat="sacrebleu") == 1.0


def test_default_bleu_is_sacrebleu_add_k_on_word_tokens() -> None:
    # The default contract equals sacrebleu's add-k BLEU with effective order on pre-tokenized
    # text, one target at a time (the default takes the best target, sacrebleu merges them).
    reference = BLEU(tokenize="none", smooth_method="add-k", effective_order=True)
    for prediction, targets in _cases(seed=5, count=1500, max_targets=1):
        tokens = " ".join(tokenize_words(prediction))
        gold = " ".join(tokenize_words(targets[0]))
        expected = reference.sentence_score(tokens, [gold]).score / 100
        assert bleu_4(prediction, targets) == pytest.approx(min(1.0, expected), abs=1e-12)


def test_default_bleu_is_nltk_method2_from_four_tokens() -> None:
    # NLTK >= 3.6 method2 is BLEU+1 (Lin and Och); with fewer than 4 prediction tokens NLTK's
    # max(1, total) denominators make it differ, so only longer predictions are compared.
    method2 = SmoothingFunction().method2
    compared = 0
    for prediction, targets in _cases(seed=6, count=1500, max_targets=1):
        tokens, gold = tokenize_words(prediction), tokenize_words(targets[0])
        if len(tokens) < 4 or not gold:
            continue
        expected = nltk_sentence_bleu([gold], tokens, smoothing_function=method2)
        assert bleu_4(prediction, targets) == pytest.approx(float(expected), abs=1e-12)
        compared += 1
    assert compared > 500


# --- rouge-score ---------------------------------------------------------------------------------
def test_rouge_score_anchor() -> None:
    # The sample in RougeScorer's docstring (rouge/rouge_scorer.py, rouge-score 0.1.2):
    # RougeScorer(["rougeL"]).score(target, prediction)["rougeL"].fmeasure = 0.5882352941176471.
    value = rouge_l(
        "The quick brown dog jumps on the log.",
        "The quick brown fox jumps over the lazy dog",
        compat="rouge_score",
    )
    assert value == 0.5882352941176471


@pytest.mark.parametrize("use_stemmer", [False, True])
def test_rouge_l_matches_rouge_score(use_stemmer: bool) -> None:
    scorer = RougeScorer(["rougeL"], use_stemmer=use_stemmer)
    ours = RougeL(compat="rouge_score", use_stemmer=use_stemmer)
    for prediction, targets in _cases(seed=7, count=1500):
        expected = scorer.score_multi(targets, prediction)["rougeL"].fmeasure
        assert ours(prediction, targets) == expected  # bit for bit


def test_rouge_l_long_texts_match_rouge_score() -> None:
    # More than 64 tokens per side takes rapidfuzz's multi-word bit-parallel path.
    scorer = RougeScorer(["rougeL"])
    rng = random.Random(8)
    words = ["alpha", "beta", "gamma", "delta", "eps"]
    for _ in range(20):
        prediction = " ".join(rng.choices(words, k=rng.randint(60, 300)))
        target = " ".join(rng.choices(words, k=rng.randint(60, 300)))
        expected = scorer.score(target, prediction)["rougeL"].fmeasure
        assert rouge_l(prediction, target, compat="rouge_score") == expected


def test_rouge_score_empty_rules() -> None:
    # rouge-score: either token list empty -> 0, including both; the default contract says 1.0.
    assert rouge_l("", "", compat="rouge_score") == 0.0
    assert rouge_l("東京", "東京", compat="rouge_score") == 0.0  # no ASCII token at all
    assert rouge_l("", "") == 1.0


# --- SQuAD v1.1 ----------------------------------------------------------------------------------
# The official evaluate-v1.1.py logic (SQuAD v1.1, Rajpurkar et al. 2016,
# rajpurkar.github.io/SQuAD-explorer), restated from its definition: lower, delete ASCII
# punctuation, articles -> space, whitespace fix; F1 = 0 when no token is shared; P and R
# computed first, F = (2 * P * R) / (P + R); max over ground truths.
def _squad_normalize(text: str) -> str:
    text = text.lower()
    text = "".join(char for char in text if char not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _squad_f1(prediction: str, truth: str) -> float:
    predicted, gold = _squad_normalize(prediction).split(), _squad_normalize(truth).split()
    common = collections.Counter(predicted) & collections.Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0
    precision = 1.0 * same / len(predicted)
    recall = 1.0 * same / len(gold)
    return (2 * precision * recall) / (precision + recall)


def _squad_em(prediction: str, truth: str) -> bool:
    return _squad_normalize(prediction) == _squad_normalize(truth)


def _squad_max(metric: Callable[[str, str], float], prediction: str, truths: list[str]) -> float:
    return max(metric(prediction, truth) for truth in truths)


@pytest.mark.parametrize(
    ("prediction", "gold", "em", "f1_value"),
    [
        # What evaluate-v1.1.py's exact_match_score and f1_score give (its logic restated above).
        ("", "", 1.0, 0.0),
        ("the", "", 1.0, 0.0),
        ("The Cat!", "cat", 1.0, 1.0),
        ("the the cat", "cat cat", 0.0, 0.6666666666666666),
        ("théâtre \u2013 \u201cx\u201d", "théâtre x", 0.0, 0.4),
        ("U.S.", "us", 1.0, 1.0),
        ("1,000", "1000", 1.0, 1.0),
        ("theater", "the ater", 0.0, 0.0),
    ],
)
def test_squad_anchors(prediction: str, gold: str, em: float, f1_value: float) -> None:
    assert exact_match(prediction, gold, compat="squad") == em
    assert f1(prediction, gold, compat="squad") == f1_value


def test_squad_matches_official_logic() -> None:
    for prediction, targets in _cases(seed=9, count=2000):
        assert f1(prediction, targets, compat="squad") == _squad_max(_squad_f1, prediction, targets)
        expected_em = float(_squad_max(_squad_em, prediction, targets))
        assert exact_match(prediction, targets, compat="squad") == expected_em


def test_search_r1_checks_match_verl() -> None:
    for prediction, targets in _cases(seed=10, count=2000):
        assert subem(prediction, targets) == float(subem_check(prediction, targets))
        assert exact_match(prediction, targets, compat="squad") == float(
            em_check(prediction, targets)
        )
