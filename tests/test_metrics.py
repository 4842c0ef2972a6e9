"""The default metric contract: hand-worked vectors, edge cases, the dispatcher, properties."""

from __future__ import annotations

import doctest
import importlib
import math
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reward_plugins
from reward_plugins.metrics import (
    METRICS,
    Bleu4,
    RougeL,
    TokenF1,
    accuracy,
    bleu_4,
    corpus_bleu,
    exact_match,
    f1,
    get_metric,
    metric_options,
    rouge_l,
    score,
    signature,
    subem,
)

ALL_METRICS = (
    "accuracy",
    "bleu",
    "bleu_4",
    "chrf",
    "exact_match",
    "f1",
    "rouge_1",
    "rouge_2",
    "rouge_l",
    "rouge_lsum",
    "rouge_n",
    "subem",
)
REQUIRED_OPTIONS = {"rouge_n": {"n": 3}}
"""Options a metric cannot be built without."""


# --- hand-worked vectors ---------------------------------------------------------------------
# Each expected value is worked out by hand from the definitions in the issue (default contract:
# tokens = re.findall(r"\w+", text.lower())); the comment shows the arithmetic.
@pytest.mark.parametrize(
    ("metric", "prediction", "targets", "expected"),
    [
        # F1: shared {cat, sat} = 2; P = 2/3, R = 2/4; F = 2PR/(P+R) = 4/7
        ("f1", "the cat sat", "a cat sat down", 4 / 7),
        # repeated token clipped: shared = min(2, 1) + 0 = 1 ("the"); P = 1/3, R = 1/2; F = 0.4
        ("f1", "the the cat", "the dog", 0.4),
        # best over targets: "paris" vs "Paris France": P = 1, R = 1/2 -> 2/3; vs "london": 0
        ("f1", "Paris", ["London", "Paris France"], 2 / 3),
        # punctuation and case are outside the tokens: identical token lists
        ("f1", "The Cat!", "the cat", 1.0),
        # Chinese per character: 北 京 shared; P = 2/4, R = 2/2 -> 2/3
        ("f1", "北京大学", "北京", 2 / 3),
        # ROUGE-L: LCS(a b c d, a c b d) = 3 (a b d); P = R = 3/4
        ("rouge_l", "a b c d", "a c b d", 0.75),
        # the example of rouge-score's README: LCS = 5 (the quick brown jumps the); P = 5/8,
        # R = 5/9 -> 2 * (25/72) / (85/72) = 50/85
        (
            "rouge_l",
            "The quick brown dog jumps on the log.",
            "The quick brown fox jumps over the lazy dog",
            10 / 17,
        ),
        # repeated phrase: LCS = 1; P = 1/3, R = 1/2 -> 0.4
        ("rouge_l", "the the the", "the cat", 0.4),
        # BLEU+1: p1 = 5/6, p2 = (3+1)/(5+1), p3 = (2+1)/(4+1), p4 = (1+1)/(3+1); c = r = 6
        # -> (5/6 * 4/6 * 3/5 * 2/4) ** (1/4) = (1/6) ** (1/4)
        ("bleu_4", "the cat sat on a mat", "the cat sat on the mat", (1 / 6) ** 0.25),
        # clipping: p1 = 1/4 (one "the" in the target), p2 = (0+1)/(3+1), p3 = 1/3, p4 = 1/2
        # -> (1/96) ** (1/4); c = 4 > r = 2 so no brevity penalty
        ("bleu_4", "the the the the", "the cat", (1 / 96) ** 0.25),
        # brevity: every precision is 1 (2/2, then (1+1)/(1+1), (0+1)/(0+1), (0+1)/(0+1)),
        # BP = exp(1 - 6/2)
        ("bleu_4", "the cat", "the cat sat on the mat", math.exp(-2)),
        # one-token prediction: p1 = 1/1, higher orders (0+1)/(0+1); BP = exp(1 - 2/1)
        ("bleu_4", "cat", "the cat", math.exp(-1)),
        ("exact_match", "  Paris ", ["London", "Paris"], 1.0),
        ("exact_match", "paris", "Paris", 0.0),  # case counts without a normalizer
        ("subem", "The answer is Paris, France.", ["Lyon", "paris"], 1.0),
        ("subem", "Paris", "Paris France", 0.0),
        ("accuracy", " POSITIVE\n", ["negative", "positive"], 1.0),
        ("accuracy", "Straße", "STRASSE", 1.0),  # casefold, not lower
        ("accuracy", "positive.", "positive", 0.0),
    ],
)
def test_reference_vectors(metric: str, prediction: str, targets: object, expected: float) -> None:
    tokenizer = {"tokenizer": "chars"} if "北" in prediction else {}
    assert score(metric, prediction, targets, **tokenizer) == pytest.approx(expected, rel=1e-12)


# --- edge cases --------------------------------------------------------------------------------
TOKEN_METRICS = ("f1", "rouge_l", "bleu_4")


@pytest.mark.parametrize("metric", TOKEN_METRICS)
def test_empty_prediction_scores_zero(metric: str) -> None:
    assert score(metric, "", "the cat") == 0.0
    assert score(metric, " !? ", "the cat") == 0.0  # no tokens either


@pytest.mark.parametrize("metric", TOKEN_METRICS)
def test_empty_target_scores_zero(metric: str) -> None:
    assert score(metric, "the cat", "") == 0.0
    assert score(metric, "the cat", ["", "..."]) == 0.0


@pytest.mark.parametrize(("metric", "expected"), [("f1", 1.0), ("rouge_l", 1.0), ("bleu_4", 0.0)])
def test_both_empty(metric: str, expected: float) -> None:
    # F1 and ROUGE-L: two empty token lists agree (1.0); BLEU: an empty prediction scores 0.0.
    assert score(metric, "", "") == expected
    assert score(metric, "?", "!") == expected


@pytest.mark.parametrize("metric", TOKEN_METRICS)
def test_no_shared_token_scores_zero(metric: str) -> None:
    assert score(metric, "red green blue", "cat dog") == 0.0


@pytest.mark.parametrize("metric", ALL_METRICS)
def test_exact_match_scores_one(metric: str) -> None:
    options = REQUIRED_OPTIONS.get(metric, {})
    assert score(metric, "the cat sat on the mat", "the cat sat on the mat", **options) == 1.0


def test_exact_match_edge_cases() -> None:
    assert exact_match("", "") == 1.0
    assert exact_match(" \n", "") == 1.0
    assert exact_match("The Cat!", "cat") == 0.0
    assert exact_match("The Cat!", "cat", normalizer="squad") == 1.0
    assert exact_match("\uff30aris", "paris", normalizer="unicode") == 1.0


def test_subem_edge_cases() -> None:
    assert subem("anything", "") == 1.0  # an empty gold always matches (verl's behaviour)
    assert subem("anything", "The") == 1.0  # ... also after normalization
    assert subem("", "paris") == 0.0
    assert subem("北京。", "北京", normalizer="unicode") == 1.0


def test_repeated_phrase_is_clipped() -> None:
    # "the" appears once in the target: repeating it cannot raise any score above one "the".
    once = {m: score(m, "the", "the cat") for m in TOKEN_METRICS}
    many = {m: score(m, "the the the the the", "the cat") for m in TOKEN_METRICS}
    assert all(many[m] < once[m] for m in ("f1", "rouge_l"))
    assert many["bleu_4"] < score("bleu_4", "the cat", "the cat")


def test_defaults_are_the_issue_contract() -> None:
    # tokens = re.findall(r"\w+", text.lower()): underscores and digits are word characters
    assert f1("snake_case 42", "SNAKE_CASE 42") == 1.0
    assert f1("snake case", "snake_case") == 0.0


# --- dispatcher --------------------------------------------------------------------------------
def test_metric_table() -> None:
    assert tuple(sorted(METRICS)) == ALL_METRICS


def test_unknown_metric_lists_every_name() -> None:
    with pytest.raises(ValueError, match="unknown metric 'bleu_5'") as error:
        score("bleu_5", "a", "a")
    for name in ALL_METRICS:
        assert name in str(error.value)


def test_unknown_option_lists_valid_ones() -> None:
    with pytest.raises(TypeError, match=r"f1: unknown option\(s\) tokeniser; valid options: "):
        score("f1", "a", "a", tokeniser="words")
    with pytest.raises(TypeError, match=r"valid options: \(none\)"):
        score("accuracy", "a", "a", normalizer="squad")
    assert metric_options("bleu_4") == (
        "normalizer",
        "tokenizer",
        "smooth",
        "smooth_value",
        "effective_order",
        "lowercase",
        "compat",
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tokenizer": "wrods"}, r"f1: unknown tokenizer 'wrods'; valid names: 13a, chars"),
        ({"normalizer": "SQuAD"}, r"f1: unknown normalizer 'SQuAD'; valid names: none, squad"),
        ({"compat": "sacrebleu"}, r"f1: unknown compat 'sacrebleu'; valid values: squad"),
        ({"compat": "squad", "tokenizer": "words"}, r"compat='squad' fixes tokenizer"),
    ],
)
def test_invalid_option_values(options: dict[str, object], message: str) -> None:
    with pytest.raises(reward_plugins.InvalidOption, match=message):
        score("f1", "a", "a", **options)


@pytest.mark.parametrize(
    ("metric", "options", "error", "message"),
    [
        ("bleu_4", {"smooth": "add-one"}, ValueError, "valid values: add-k, exp, floor, none"),
        ("bleu_4", {"smooth": "exp", "smooth_value": 0.5}, ValueError, "takes no smooth_value"),
        ("bleu_4", {"smooth": "floor", "smooth_value": -1}, ValueError, "number >= 0, got int"),
        ("bleu_4", {"smooth": "floor", "smooth_value": "1"}, TypeError, "must be a finite number"),
        ("bleu_4", {"effective_order": 1}, TypeError, "option 'effective_order' must be a bool"),
        ("bleu_4", {"lowercase": True}, ValueError, "'lowercase' needs a compat preset"),
        ("rouge_l", {"use_stemmer": True}, ValueError, "'use_stemmer' needs a compat preset"),
        ("rouge_l", {"compat": "rouge_score", "normalizer": "squad"}, ValueError, "fixes"),
        ("exact_match", {"compat": "squad", "normalizer": "squad"}, ValueError, "fixes"),
        ("rouge_l", {"compat": "rouge_score", "use_stemmer": 1}, TypeError, "must be a bool"),
        ("bleu_4", {"compat": "sacrebleu", "lowercase": "yes"}, TypeError, "must be a bool"),
    ],
)
def test_invalid_metric_options(
    metric: str, options: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as caught:
        get_metric(metric, **options)
    assert type(caught.value) is reward_plugins.InvalidOption


@pytest.mark.parametrize(
    ("prediction", "targets", "error", "message"),
    [
        (None, "a", TypeError, "f1: prediction must be a str, got NoneType"),
        (b"a", "a", TypeError, "prediction must be a str, got bytes"),
        ("a", None, TypeError, "f1: targets must be a str or a list of str, got NoneType"),
        ("a", b"a", TypeError, "got bytes"),
        ("a", {"target": "a"}, TypeError, "got dict"),
        ("a", [], ValueError, "f1: targets is empty"),
        ("a", ["a", 3], TypeError, r"f1: targets\[1\] must be a str, got int"),
    ],
)
def test_bad_inputs(prediction: object, targets: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        score("f1", prediction, targets)  # type: ignore[arg-type]


def test_targets_may_be_any_iterable_of_str() -> None:
    numpy = pytest.importorskip("numpy")
    assert f1("a b", numpy.array(["a", "a b"])) == 1.0
    assert f1("a b", ("b",)) == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("metric", "options", "expected"),
    [
        ("exact_match", {}, "exact_match|norm:none"),
        ("exact_match", {"compat": "squad"}, "exact_match|compat:squad|norm:squad"),
        ("subem", {}, "subem|norm:squad"),
        ("subem", {"normalizer": "unicode"}, "subem|norm:unicode"),
        ("f1", {}, "f1|norm:none|tok:words"),
        ("f1", {"tokenizer": "chars", "normalizer": "unicode"}, "f1|norm:unicode|tok:chars"),
        ("f1", {"compat": "squad"}, "f1|compat:squad|norm:squad|tok:split"),
        ("rouge_l", {}, "rouge_l|norm:none|tok:words"),
        (
            "rouge_l",
            {"compat": "rouge_score"},
            "rouge_l|compat:rouge_score|norm:none|tok:rouge_score",
        ),
        ("bleu_4", {}, "bleu_4|norm:none|tok:words|smooth:add-k:1|eff:yes"),
        ("bleu_4", {"smooth": "floor"}, "bleu_4|norm:none|tok:words|smooth:floor:0.1|eff:yes"),
        (
            "bleu_4",
            {"compat": "sacrebleu", "lowercase": True, "effective_order": False},
            "bleu_4|compat:sacrebleu|case:lc|norm:none|tok:13a|smooth:exp|eff:no",
        ),
        ("accuracy", {}, "accuracy|norm:strip+casefold"),
    ],
)
def test_signatures(metric: str, options: dict[str, object], expected: str) -> None:
    assert signature(metric, **options) == expected
    assert repr(get_metric(metric, **options)).endswith(f" {expected}>")


def test_free_functions_equal_the_dispatcher() -> None:
    prediction, targets = "The cat sat on the mat.", ["a cat sat on a mat", "the dog"]
    assert f1(prediction, targets) == score("f1", prediction, targets)
    assert rouge_l(prediction, targets) == score("rouge_l", prediction, targets)
    assert bleu_4(prediction, targets) == score("bleu_4", prediction, targets)
    assert accuracy(prediction, targets) == score("accuracy", prediction, targets)


def test_metrics_pickle() -> None:
    for metric in (TokenF1(tokenizer="chars"), RougeL(compat="rouge_score"), Bleu4(smooth="exp")):
        clone = pickle.loads(pickle.dumps(metric))
        assert clone.signature == metric.signature
        assert clone("the cat sat", "the cat") == metric("the cat sat", "the cat")


def test_corpus_bleu_default_contract() -> None:
    # One sentence: corpus BLEU is that sentence's BLEU+1.
    one = corpus_bleu(["the cat sat on a mat"], [["the cat sat on the mat"]])
    assert one == bleu_4("the cat sat on a mat", "the cat sat on the mat")
    # Summed statistics, worked by hand: lengths 4 and 4; unigrams 2 + 1 of 4; bigrams 1 + 0
    # of 2; no trigram or 4-gram. BLEU+1: p1 = 3/4, p2 = (1+1)/(2+1), p3 = p4 = (0+1)/(0+1).
    two = corpus_bleu(["the cat", "a dog"], [["the cat"], "a cat"])
    assert two == pytest.approx((3 / 4 * 2 / 3) ** 0.25, rel=1e-12)
    with pytest.raises(ValueError, match="2 predictions but 1 reference rows"):
        corpus_bleu(["a", "b"], [["a"]])
    with pytest.raises(TypeError, match=r"row 1: bleu_4: targets\[0\] must be a str"):
        corpus_bleu(["a", "b"], [["a"], [None]])
    with pytest.raises(ValueError, match="row 0: bleu_4: targets is empty"):
        corpus_bleu(["a"], [[]])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from("abcde"), max_size=300),
    st.lists(st.lists(st.sampled_from("abcdef"), max_size=300), min_size=1, max_size=3),
)
def test_numpy_and_counter_ngram_counts_agree(
    prediction: list[str], references: list[list[str]]
) -> None:
    from reward_plugins.metrics import bleu

    coded = bleu._clipped_matches_coded(prediction, references)
    assert coded == bleu._clipped_matches_hashed(prediction, references)


def test_numpy_counting_falls_back_before_int64_overflows() -> None:
    from reward_plugins.metrics import bleu

    # 55,109 distinct tokens: 55109**4 >= 2**63, so n-gram codes would overflow int64.
    tokens = [f"t{index}" for index in range(55_109)]
    assert bleu._clipped_matches_coded(tokens, [tokens[:10]]) is None
    assert bleu._clipped_matches_coded(tokens[:-1], [tokens[:10]]) == [10, 9, 8, 7]
    # BLEU+1 by hand: p1 = 10/55109, p2 = (9+1)/(55108+1), p3 = (8+1)/(55107+1),
    # p4 = (7+1)/(55106+1); the prediction is longer than the target, so no brevity penalty.
    expected = (10 / 55_109 * 10 / 55_109 * 9 / 55_108 * 8 / 55_107) ** 0.25
    assert bleu_4(" ".join(tokens), " ".join(tokens[:10])) == pytest.approx(expected, rel=1e-12)


# --- properties ----------------------------------------------------------------------------------
_WORDS = ["the", "cat", "sat", "on", "mat", "Cat", "a", "an", "1", "北", "京", ".", ",", "!", " "]
phrases = st.lists(st.sampled_from(_WORDS), max_size=12).map(" ".join) | st.text(max_size=20)
target_lists = st.lists(phrases, min_size=1, max_size=3)
option_sets = st.sampled_from(
    [
        ("exact_match", {}),
        ("exact_match", {"compat": "squad"}),
        ("subem", {}),
        ("f1", {}),
        ("f1", {"tokenizer": "chars", "normalizer": "unicode"}),
        ("f1", {"compat": "squad"}),
        ("rouge_l", {}),
        ("rouge_l", {"compat": "rouge_score"}),
        ("bleu_4", {}),
        ("bleu_4", {"smooth": "exp"}),
        ("bleu_4", {"smooth": "floor", "effective_order": False}),
        ("bleu_4", {"compat": "sacrebleu"}),
        ("bleu_4", {"compat": "sacrebleu", "smooth": "add-k"}),
        ("accuracy", {}),
    ]
)


@settings(max_examples=500, deadline=None)
@given(option_sets, phrases, target_lists)
def test_every_score_is_in_unit_interval(
    metric: tuple[str, dict[str, object]], prediction: str, targets: list[str]
) -> None:
    name, options = metric
    assert 0.0 <= score(name, prediction, targets, **options) <= 1.0


@settings(max_examples=300, deadline=None)
@given(phrases, target_lists)
def test_exact_match_implies_full_token_scores(prediction: str, targets: list[str]) -> None:
    if exact_match(prediction, targets) == 1.0:
        assert f1(prediction, targets) == 1.0
        assert rouge_l(prediction, targets) == 1.0
        if prediction.strip() and any(c.isalnum() for c in prediction):
            assert bleu_4(prediction, targets) == 1.0


@settings(max_examples=300, deadline=None)
@given(phrases)
def test_a_text_matches_itself(text: str) -> None:
    assert exact_match(text, text) == 1.0
    assert f1(text, [text]) == 1.0
    assert rouge_l(text, [text]) == 1.0


@settings(max_examples=300, deadline=None)
@given(phrases, target_lists)
def test_subem_is_at_least_squad_exact_match(prediction: str, targets: list[str]) -> None:
    assert subem(prediction, targets) >= exact_match(prediction, targets, compat="squad")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["f1", "rouge_l", "bleu_4", "exact_match"]), phrases, target_lists)
def test_default_score_is_the_best_over_targets(
    metric: str, prediction: str, targets: list[str]
) -> None:
    best = max(score(metric, prediction, target) for target in targets)
    assert score(metric, prediction, targets) == best


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["f1", "rouge_l"]), phrases, phrases)
def test_f_measures_are_symmetric(metric: str, first: str, second: str) -> None:
    assert score(metric, first, second) == pytest.approx(score(metric, second, first), abs=1e-15)


# --- documentation ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "module",
    [
        "reward_plugins.metrics.aggregate",
        "reward_plugins.metrics.base",
        "reward_plugins.metrics.bleu",
        "reward_plugins.metrics.chrf",
        "reward_plugins.metrics.dispatch",
        "reward_plugins.metrics.ngrams",
        "reward_plugins.metrics.qa",
        "reward_plugins.metrics.rouge",
        "reward_plugins.metrics.significance",
        "reward_plugins.text.answers",
        "reward_plugins.text.normalize",
        "reward_plugins.text.tokenize",
    ],
)
def test_docstring_examples(module: str) -> None:
    imported = importlib.import_module(module)
    failed, attempted = doctest.testmod(imported, optionflags=doctest.ELLIPSIS)
    assert attempted > 0
    assert failed == 0


@pytest.mark.parametrize("package", ["reward_plugins.metrics", "reward_plugins.text"])
def test_public_names(package: str) -> None:
    imported = importlib.import_module(package)
    assert all(isinstance(name, str) for name in imported.__all__)
    for name in imported.__all__:
        assert hasattr(imported, name), name


def test_docs_table_lists_every_metric_and_option() -> None:
    """docs/metrics.md has a row per metric naming each of its options, so the page cannot
    fall behind the metric table."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "metrics.md").read_text("utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    for name in METRICS:
        (row,) = [line for line in rows if f"`{name}`" in line.split("|")[1]]
        options = row.split("|")[2]
        for option in metric_options(name):
            assert f"`{option}`" in options, (name, option)


@pytest.mark.parametrize("name", ALL_METRICS)
def test_every_metric_is_a_reward(name: str) -> None:
    """``compute_score_metric`` pays any metric of the table on the answer span."""
    options = REQUIRED_OPTIONS.get(name, {})
    answer, golds = "the cat sat on a mat", ["the cat sat on the mat", "a dog"]
    expected = score(name, answer, golds, **options)
    assert (expected > 0.0) == (name not in ("exact_match", "accuracy"))
    result = reward_plugins.compute_score_metric(
        "searchR1_nq",
        f"<think>x</think><answer>{answer}</answer>",
        {"target": golds},
        metric=name,
        metric_options=options or None,
        normalizer="none",
    )
    assert result["score"] == expected
