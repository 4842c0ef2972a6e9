"""ROUGE-1, ROUGE-2, ROUGE-N, ROUGE-L and ROUGE-Lsum with precision, recall and F-measure.

Four kinds of evidence:

- rouge-score's own published test vectors (google-research/google-research,
  ``rouge/rouge_scorer_test.py``, shipped in rouge-score 0.1.2 as
  ``rouge_score/rouge_scorer_test.py``), with the inputs of its ROUGE-1.5.5 comparisons
  reproduced from ``rouge/testdata/target.txt``, ``rouge/testdata/prediction.txt`` and
  ``rouge/testdata/pyrouge_files/{target,prediction}_multi.0.txt`` of the same repository;
- differential tests against the installed rouge-score 0.1.2 (``RougeScorer.score_multi``) on
  hypothesis-generated texts: Unicode, empty strings, numbers, newlines, repeated words, several
  targets including ties, stemmer on and off, every type and every measure, bit for bit;
- hand-worked tables for the default contract (``words`` tokens, both empty 1.0);
- every option error.
"""

from __future__ import annotations

import functools
import pickle
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score.rouge_scorer import RougeScorer

import reward_plugins
from reward_plugins.metrics import (
    METRICS,
    Rouge1,
    Rouge2,
    RougeL,
    RougeLsum,
    RougeN,
    RougeScores,
    get_metric,
    metric_options,
    rouge_1,
    rouge_2,
    rouge_l,
    rouge_lsum,
    rouge_n,
    score,
    signature,
)
from reward_plugins.metrics.rouge import RougeMetric, lcs_indices, position_masks
from reward_plugins.text import get_tokenizer

MEASURES = ("p", "r", "f")  # in the order of rouge-score's Score fields
ROUGE = "rouge_score"


def _metric(rouge_type: str, measure: str, use_stemmer: bool) -> RougeMetric:
    """Our compat metric for a rouge-score type (``rouge1`` ... ``rouge9``, ``rougeL``, ...)."""
    options = {"measure": measure, "compat": ROUGE, "use_stemmer": use_stemmer}
    if rouge_type == "rougeL":
        return RougeL(**options)  # type: ignore[arg-type]
    if rouge_type == "rougeLsum":
        return RougeLsum(**options)  # type: ignore[arg-type]
    return RougeN(n=int(rouge_type[5:]), **options)  # type: ignore[arg-type]


@functools.cache
def _pair(rouge_type: str, use_stemmer: bool) -> tuple[RougeScorer, tuple[RougeMetric, ...]]:
    """rouge-score's scorer and our three metrics (P, R, F) for one type, built once."""
    scorer = RougeScorer([rouge_type], use_stemmer=use_stemmer)
    return scorer, tuple(_metric(rouge_type, m, use_stemmer) for m in MEASURES)


def _ours(rouge_type: str, use_stemmer: bool, prediction: str, targets: list[str]) -> list[float]:
    return [metric(prediction, targets) for metric in _pair(rouge_type, use_stemmer)[1]]


def _theirs(rouge_type: str, use_stemmer: bool, prediction: str, targets: list[str]) -> list[float]:
    scorer = _pair(rouge_type, use_stemmer)[0]
    return list(scorer.score_multi(targets, prediction)[rouge_type])


# --- rouge-score's published test vectors --------------------------------------------------
# google-research/google-research rouge/rouge_scorer_test.py; RougeScorer.score(target,
# prediction) there, (prediction, target) here. Expected values as written in that file.
@pytest.mark.parametrize(
    ("rouge_type", "target", "prediction", "expected"),
    [
        ("rouge1", "testing one two", "testing", (1, 1 / 3, 1 / 2)),  # testRouge1
        ("rouge2", "testing one two", "testing one", (1, 1 / 2, 2 / 3)),  # testRouge2
        ("rougeL", "testing one two", "testing one", (1, 2 / 3, 4 / 5)),  # testRougeLConsecutive
        ("rougeL", "testing one two", "testing two", (1, 2 / 3, 4 / 5)),  # ...NonConsecutive
        ("rouge1", "testing one two", "testing one", (1, 2 / 3, 4 / 5)),  # testMultipleRougeTypes
        # testRougeEmpty
        ("rouge1", "testing one two", "", (0, 0, 0)),
        ("rouge2", "testing one two", "", (0, 0, 0)),
        ("rougeL", "testing one two", "", (0, 0, 0)),
        ("rougeLsum", "testing one two", "", (0, 0, 0)),
        # testRougeLsum, and testSummaryLevelLcs's example as text: union LCS 4 of 5 target
        # tokens, of 10 prediction tokens
        ("rougeLsum", "w1 w2 w3 w4 w5", "w1 w2 w6 w7 w8\nw1 w3 w8 w9 w5", (0.4, 0.8, 0.5333)),
        ("rougeLsum", "w1 w2 w3 w4 w5", "", (0, 0, 0)),
        ("rougeLsum", "", "w1", (0, 0, 0)),
        ("rougeLsum", "w1 w2 w3 w4 w5", "/", (0, 0, 0)),  # all non-word characters
    ],
)
def test_published_vectors(
    rouge_type: str, target: str, prediction: str, expected: tuple[float, float, float]
) -> None:
    places = 3 if expected[2] == 0.5333 else 7  # assertAlmostEqual(..., places=3) there
    ours = _ours(rouge_type, False, prediction, [target])
    assert ours == pytest.approx(list(expected), abs=0.5 * 10**-places)


def test_published_multi_target_vectors() -> None:
    # testRouge1Multi and testRougeAllMulti (rouge-score 0.1.2's rouge_scorer_test.py).
    assert _ours("rouge1", False, "testing", ["testing one two"]) == pytest.approx(
        [1, 1 / 3, 1 / 2]
    )
    targets = ["first text", "first something"]
    assert rouge_1("text first", targets, compat=ROUGE) == 1.0
    assert rouge_2("text first", targets, compat=ROUGE) == 0.0
    assert rouge_l("text first", targets, compat=ROUGE) == 0.5


# The inputs of testRouge{1,2,L}AgainstRouge155*: lines 0 and 1 of rouge/testdata/target.txt
# and rouge/testdata/prediction.txt (read with readlines(), so each keeps its "\n").
TESTDATA_TARGETS = (
    "ZfbCUIUuePaiLVUlCaUXxkpu XPeWing tUHfPMuZ',-Xd Y BrUgVJing M-HV.-DgdDaY.rFDJCRing Ht-LM "
    "EKBDXkME,yz'RBr q'wtion wIojNbN wL,b .a-'XdQggyFl jB-RPP'iyOIcUxer tKM L\n",
    "KsJdPByEtAor fE-Qg Dpdbring cw-WeFyu vC MoBL Xdn g wkvcEiGvKtion BDFhrpMtion psing sbKao Q "
    "m qiing LMmer HqqLFXe,XPY,J XsurkMer ,ed nB'wH'bWVHjWFEing tQ.saefZwJtKrTlixYpMMsJing "
    "UCAPwNHeYVjDing c T BUySKtion gMPfJpwGw p'NvxAoping eu pBwMBKV'I DNxqelhu,PHPxDEq,mtion "
    "SN\n",
)
TESTDATA_PREDICTIONS = (
    "rFDJCRtion Ht-LM EKtDXkME,yz'RBr q'wer wrojNbN wL,b .a-'XdQggyFl jB-RPP'iyOIcUxi\n",
    "n cw-WeFyu vC MoBL Xdn g wkvcEiGvKtion BDFhrpMer pstion sbKao Q m qier LMmed "
    "HqqLFXe,XPY,J XsurkMeo ,ed nB'wH'bWVHjWFEer tQ.saefZwJtKrTlixYpMMNJtion UCAPwNHeYVjD\n",
)


@pytest.mark.parametrize(
    ("rouge_type", "use_stemmer", "line", "expected"),
    [
        # (precision, recall, fmeasure) as asserted there, to 5 places: ROUGE-1.5.5's outputs.
        ("rouge1", False, 0, (0.68750, 0.40741, 0.51163)),
        ("rouge1", False, 1, (0.65385, 0.40476, 0.50000)),
        ("rouge1", True, 0, (0.68750, 0.40741, 0.51163)),
        ("rouge1", True, 1, (0.69231, 0.42857, 0.52941)),
        ("rouge2", False, 0, (0.53333, 0.30769, 0.39024)),
        ("rouge2", False, 1, (0.48000, 0.29268, 0.36364)),
        ("rouge2", True, 0, (0.53333, 0.30769, 0.39024)),
        ("rouge2", True, 1, (0.48000, 0.29268, 0.36364)),
        ("rougeL", False, 0, (0.68750, 0.40741, 0.51163)),
        ("rougeL", False, 1, (0.65385, 0.40476, 0.50000)),
    ],
)
def test_published_rouge155_vectors(
    rouge_type: str, use_stemmer: bool, line: int, expected: tuple[float, float, float]
) -> None:
    prediction, target = TESTDATA_PREDICTIONS[line], TESTDATA_TARGETS[line]
    ours = _ours(rouge_type, use_stemmer, prediction, [target])
    assert ours == pytest.approx(list(expected), abs=5e-6)
    assert ours == _theirs(rouge_type, use_stemmer, prediction, [target])


def test_published_rouge155_lsum_vector() -> None:
    # testRougeLSumAgainstRouge155WithStemming: rouge/testdata/pyrouge_files/target_multi.0.txt
    # and prediction_multi.0.txt (four lines each), use_stemmer=True.
    target = (
        TESTDATA_TARGETS[0]
        + TESTDATA_TARGETS[1]
        + "NhETebUbBk'er WOvoHMTjSRizKgH'vHiing Xu,hWxfs VkNE QhgKiLHE -HidivzoM.dO anhtion "
        "jbLQiSGDTCsuhREebUaKM dv J dVN tmbOT\n"
        "vMR HDm,xOAetion D,tion HJtodT.mHl UIv-p VjWH'BdyWjnfGU-OjT aEMdFICyLWfQMtion "
        "wEMfdOKing AwkeKbO 'DxqNOHBH qKtVvm OYJl mM\n"
    )
    prediction = (
        TESTDATA_PREDICTIONS[0]
        + TESTDATA_PREDICTIONS[1]
        + "xfs VkJE QhgKiLHE -HidivzoM.dO anhing jbLQiSGDTCsuhREebUaKM dv J\n"
        "VjWH'BdyWjnfGU-OjTNaEMdFICyLWfQMing wEMfdOKijg AwkeKbO 'DxqNO\n"
    )
    assert (len(target), len(prediction)) == (669, 370)  # the two files' sizes
    ours = _ours("rougeLsum", True, prediction, [target])
    assert ours == pytest.approx([0.66667, 0.36538, 0.47205], abs=5e-6)
    assert ours == _theirs("rougeLsum", True, prediction, [target])


def test_published_sentence_splitting_vectors() -> None:
    # testRougeLSumSentenceSplitting: newlines are sentence boundaries (1.0); without them the
    # summaries are single sentences (0.5). Its split_summaries=True case needs nltk's punkt
    # model, which is refused here (see test_split_summaries_true_is_refused).
    target, prediction = "First sentence.\nSecond Sentence.", "Second sentence.\nFirst Sentence."
    stemmed = {"compat": ROUGE, "use_stemmer": True}
    assert rouge_lsum(prediction, target, **stemmed) == pytest.approx(1.0, abs=5e-6)
    flat = rouge_lsum(prediction.replace("\n", " "), target.replace("\n", " "), **stemmed)
    assert flat == pytest.approx(0.5, abs=5e-6)
    assert rouge_lsum(prediction, target, split_summaries=False, **stemmed) == 1.0


def test_published_lcs_table_and_union_vectors() -> None:
    # testLcsTable: the LCS rouge-score's traceback reads out, as indices into ref.
    ref = list("12345")
    assert lcs_indices(ref, list("2534"), position_masks(list("2534"))) == [1, 2, 3]
    assert lcs_indices(ref, list("89"), position_masks(list("89"))) == []
    # testUnionLcs: ref 1..5, candidates [1, 2, 6, 7, 8] and [1, 3, 8, 9, 5] -> tokens 1, 2, 3, 5.
    union: set[int] = set()
    for candidate in (list("12678"), list("13895")):
        union.update(lcs_indices(ref, candidate, position_masks(candidate)))
    assert [ref[i] for i in sorted(union)] == list("1235")


@pytest.mark.parametrize("n", [0, 10])
def test_published_invalid_types(n: int) -> None:
    # testInvalidRougeTypes: rouge0 and rouge10 are not rouge-score types.
    with pytest.raises(reward_plugins.InvalidOption):
        RougeN(n=n, compat=ROUGE)


def test_published_valid_type_rouge9() -> None:
    # testValidRougeTypes: rouge9 is valid (no 9-gram in "testing": 0).
    assert rouge_n("testing", "testing one two", n=9, compat=ROUGE) == 0.0


# --- differential tests against rouge-score ------------------------------------------------
# Pieces that hit rouge-score's ASCII filter (café, İ, the Kelvin sign that lowers to "k", CJK),
# the stemmer (runs, running), numbers, case, repeats and line structure for ROUGE-Lsum.
_PIECES = [
    "the", "The", "cat", "cats", "sat", "a", "mat", "runs", "running", "ran", "3", "3.5",
    "1,000", "café", "İstanbul", "\u212a", "東京", "don't", "x-y", ",", ".", "!",
    " ", " ", " ", "\n", "\n", "\n\n", " \n", "\r\n", "\t",
]  # fmt: skip
_words = st.lists(st.sampled_from(_PIECES), max_size=16).map(" ".join)
texts = _words | _words.map(lambda text: text.replace(" ", "")) | st.text(max_size=24)


@st.composite
def targets_with_ties(draw: st.DrawFn) -> list[str]:
    """One to four targets; often a shuffled or repeated copy of one (ties in F)."""
    golds = draw(st.lists(texts, min_size=1, max_size=3))
    tie = draw(st.sampled_from(["none", "repeat", "shuffle", "swap"]))
    if tie == "repeat":
        golds.append(draw(st.sampled_from(golds)))
    elif tie == "shuffle":
        words = draw(st.sampled_from(golds)).split(" ")
        golds.append(" ".join(draw(st.permutations(words))))
    elif tie == "swap":
        golds.reverse()
    return golds


@pytest.mark.parametrize("rouge_type", ["rouge1", "rouge2", "rougeL", "rougeLsum"])
@settings(max_examples=200, deadline=None)
@given(use_stemmer=st.booleans(), prediction=texts, targets=targets_with_ties())
def test_matches_rouge_score(
    rouge_type: str, use_stemmer: bool, prediction: str, targets: list[str]
) -> None:
    theirs = _theirs(rouge_type, use_stemmer, prediction, targets)
    assert _ours(rouge_type, use_stemmer, prediction, targets) == theirs  # bit for bit


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 9), st.booleans(), texts, targets_with_ties())
def test_rouge_n_matches_rouge_score(
    n: int, use_stemmer: bool, prediction: str, targets: list[str]
) -> None:
    rouge_type = f"rouge{n}"
    theirs = _theirs(rouge_type, use_stemmer, prediction, targets)
    assert _ours(rouge_type, use_stemmer, prediction, targets) == theirs
    options = {"compat": ROUGE, "use_stemmer": use_stemmer}
    assert score("rouge_n", prediction, targets, n=n, measure="r", **options) == theirs[1]


# Tie cases worked out: "a b" against "a" (P 1/2, R 1, F 2/3) and "a b c d" (P 1, R 1/2, F 2/3);
# both F are the same float, so the first target wins (numpy.argmax) and gives P and R.
@pytest.mark.parametrize("targets", [["a", "a b c d"], ["a b c d", "a"], ["x", "a b c d", "a"]])
@pytest.mark.parametrize("rouge_type", ["rouge1", "rougeL", "rougeLsum"])
def test_ties_take_the_first_target(rouge_type: str, targets: list[str]) -> None:
    ours = _ours(rouge_type, False, "a b", targets)
    assert ours == _theirs(rouge_type, False, "a b", targets)
    first_best = next(t for t in targets if t != "x")
    assert ours[0] == (0.5 if first_best == "a" else 1.0)


@pytest.mark.parametrize("rouge_type", ["rouge1", "rouge2", "rouge4", "rougeL", "rougeLsum"])
def test_long_texts_match_rouge_score(rouge_type: str) -> None:
    # Sentences of more than 64 tokens take the multi-word path of the bit-parallel LCS.
    rng = random.Random(11)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]
    for _ in range(4):
        lines = [" ".join(rng.choices(words, k=rng.randint(1, 120))) for _ in range(3)]
        prediction = "\n".join(lines)
        targets = [
            "\n".join(" ".join(rng.choices(words, k=rng.randint(40, 130))) for _ in range(2)),
            prediction.replace("gamma", "delta"),
        ]
        assert _ours(rouge_type, False, prediction, targets) == _theirs(
            rouge_type, False, prediction, targets
        )


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["rouge1", "rouge3", "rougeL", "rougeLsum"]), texts, targets_with_ties())
def test_default_contract_with_rouge_score_tokens(
    rouge_type: str, prediction: str, targets: list[str]
) -> None:
    # Under tokenizer="rouge_score" the default contract differs from rouge-score only when
    # the prediction has no token: then 1.0 if a target has none either, else 0.0.
    metric_name = {"rouge1": "rouge_1", "rouge3": "rouge_n", "rougeL": "rouge_l"}.get(
        rouge_type, "rouge_lsum"
    )
    options: dict[str, object] = {"n": 3} if rouge_type == "rouge3" else {}
    ours = [
        score(metric_name, prediction, targets, measure=m, tokenizer="rouge_score", **options)
        for m in MEASURES
    ]
    tokenize = get_tokenizer("rouge_score")
    if tokenize(prediction):
        assert ours == _theirs(rouge_type, False, prediction, targets)
    else:
        both_empty = any(not tokenize(target) for target in targets)
        assert ours == [1.0 if both_empty else 0.0] * 3


# --- the default contract, worked by hand -------------------------------------------------
@pytest.mark.parametrize(
    ("metric", "options", "prediction", "targets", "expected"),
    [
        # 3 of 3 predicted words in the 6 target words: P = 1, R = 1/2, F = 2PR/(P+R) = 2/3
        ("rouge_1", {}, "The cat sat.", "the cat sat on the mat", (1.0, 0.5, 2 / 3)),
        # bigrams (the cat) (cat sat) both among the target's 5: P = 1, R = 2/5, F = 4/7
        ("rouge_2", {}, "the cat sat", "the cat sat on the mat", (1.0, 0.4, 4 / 7)),
        # clipping: "the" 3 times predicted, once in the target: P = 1/3, R = 1/2, F = 0.4
        ("rouge_1", {}, "the the the", "the cat", (1 / 3, 0.5, 0.4)),
        # trigrams (a b c) (b c d) vs (a b c) (b c e): one shared, P = R = F = 1/2
        ("rouge_n", {"n": 3}, "a b c d", "a b c e", (0.5, 0.5, 0.5)),
        # words tokens keep Unicode letters: café shared, 東京 not: P = 1/2, R = 1, F = 2/3
        ("rouge_1", {}, "Café 東京", "café", (0.5, 1.0, 2 / 3)),
        # ... where rouge-score's ASCII tokenizer sees "caf" on both sides
        ("rouge_1", {"compat": ROUGE}, "Café 東京", "café", (1.0, 1.0, 1.0)),
        # tokens but no bigram on either side: 0 (only two empty token lists score 1)
        ("rouge_2", {}, "a", "a", (0.0, 0.0, 0.0)),
        ("rouge_2", {}, "a b", "a", (0.0, 0.0, 0.0)),
        # LCS (a c e) = 3 of 5 predicted, 3 of 3 target words: P = 3/5, R = 1, F = 3/4
        ("rouge_l", {}, "a b c d e", "a c e", (0.6, 1.0, 0.75)),
        # summary level: target lines (a b) (a b), prediction (a b); the first target line
        # uses both predicted tokens, the second finds none left: hits 2, P = 2/2, R = 2/4
        ("rouge_lsum", {}, "a b", "a b\na b", (1.0, 0.5, 2 / 3)),
        # lines are sentences; empty lines and "\r" are nothing: same as "b a" vs "a\nb"
        ("rouge_lsum", {}, "b a", "a\r\n\n\nb", (1.0, 1.0, 1.0)),
        # one line, one sentence: ROUGE-L of "b a" vs "a b": LCS 1, P = R = F = 1/2
        ("rouge_lsum", {}, "b a", "a b", (0.5, 0.5, 0.5)),
        # the target is chosen by F, not by the measure asked for: "a" has P 1/3, R 1, F 1/2;
        # "a b c d e f" has P 1, R 1/2, F 2/3, so R is 1/2 although the other target has 1
        ("rouge_1", {}, "a b c", ["a", "a b c d e f"], (1.0, 0.5, 2 / 3)),
    ],
)
def test_default_contract_by_hand(
    metric: str,
    options: dict[str, object],
    prediction: str,
    targets: str | list[str],
    expected: tuple[float, float, float],
) -> None:
    ours = [score(metric, prediction, targets, measure=m, **options) for m in MEASURES]
    assert ours == pytest.approx(list(expected), rel=1e-15)


@pytest.mark.parametrize("metric", ["rouge_1", "rouge_2", "rouge_n", "rouge_l", "rouge_lsum"])
@pytest.mark.parametrize("measure", MEASURES)
def test_empty_token_lists(metric: str, measure: str) -> None:
    options: dict[str, object] = {"measure": measure, **({"n": 4} if metric == "rouge_n" else {})}
    assert score(metric, "", "", **options) == 1.0
    assert score(metric, "?!", ["...", "the cat"], **options) == 1.0  # both empty beats 0
    assert score(metric, "", "the cat", **options) == 0.0
    assert score(metric, "the cat", ["", " \n "], **options) == 0.0
    # rouge-score scores every empty side 0, both empty included
    assert score(metric, "", "", compat=ROUGE, **options) == 0.0
    assert score(metric, "東京", "東京", compat=ROUGE, **options) == 0.0  # no ASCII token


def test_target_scores_and_rouge_l_measures() -> None:
    assert Rouge1().target_scores("a b", ["a", "a b c d"]) == RougeScores(0.5, 1.0, 2 / 3)
    assert RougeL(measure="r")("a b c d", "a c b d") == 0.75
    assert rouge_l("a b c d e", "a c e", measure="p") == 0.6
    assert rouge_l("a b c d e", "a c e") == RougeL()("a b c d e", "a c e") == pytest.approx(0.75)


# --- options -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("metric", "options", "message"),
    [
        ("rouge_1", {"measure": "F"}, r"rouge_1: unknown measure 'F'; valid values: f, p, r"),
        ("rouge_l", {"measure": "precision"}, r"unknown measure 'precision'; valid values: f, p"),
        ("rouge_lsum", {"measure": None}, r"unknown measure None"),
        ("rouge_n", {}, r"rouge_n: option 'n' is required"),
        ("rouge_n", {"n": 0}, r"rouge_n: option 'n' must be >= 1, got 0"),
        ("rouge_n", {"n": -2}, r"must be >= 1, got -2"),
        ("rouge_n", {"n": "2"}, r"option 'n' must be an int >= 1, got str: '2'"),
        ("rouge_n", {"n": True}, r"option 'n' must be an int >= 1, got bool: True"),
        ("rouge_n", {"n": 2.0}, r"must be an int >= 1, got float: 2.0"),
        ("rouge_n", {"n": 10, "compat": ROUGE}, r"supports n from 1 to 9 .*got 10"),
        ("rouge_1", {"n": 1}, r"rouge_1: unknown option\(s\) n; valid options: measure"),
        ("rouge_2", {"use_stemmer": True}, r"rouge_2: option 'use_stemmer' needs a compat"),
        ("rouge_n", {"n": 2, "use_stemmer": False}, r"'use_stemmer' needs a compat preset"),
        ("rouge_lsum", {"use_stemmer": True}, r"'use_stemmer' needs a compat preset"),
        ("rouge_lsum", {"split_summaries": False}, r"'split_summaries' needs a compat preset"),
        ("rouge_lsum", {"compat": ROUGE, "split_summaries": "no"}, r"must be a bool, got str"),
        ("rouge_lsum", {"compat": ROUGE, "use_stemmer": 1}, r"'use_stemmer' must be a bool"),
        ("rouge_l", {"split_summaries": False}, r"rouge_l: unknown option\(s\) split_summaries"),
        ("rouge_2", {"compat": "rouge"}, r"unknown compat 'rouge'; valid values: rouge_score"),
        ("rouge_2", {"compat": ROUGE, "tokenizer": "words"}, r"compat='rouge_score' fixes"),
        ("rouge_lsum", {"tokenizer": "wrods"}, r"rouge_lsum: unknown tokenizer 'wrods'"),
    ],
)
def test_invalid_options(metric: str, options: dict[str, object], message: str) -> None:
    with pytest.raises(reward_plugins.InvalidOption, match=message):
        get_metric(metric, **options)


def test_split_summaries_true_is_refused() -> None:
    # rouge-score's split_summaries=True calls nltk.sent_tokenize (the punkt model, a data
    # download): not reproduced, refused with the reason.
    with pytest.raises(reward_plugins.InvalidOption, match=r"split_summaries=True .*punkt"):
        RougeLsum(compat=ROUGE, split_summaries=True)
    with pytest.raises(reward_plugins.InvalidOption, match=r"punkt"):
        rouge_lsum("a", "a", compat=ROUGE, split_summaries=True)


def test_metric_table_and_options() -> None:
    for name in ("rouge_1", "rouge_2", "rouge_n", "rouge_l", "rouge_lsum"):
        assert name in METRICS
    assert metric_options("rouge_n") == (
        "n", "measure", "normalizer", "tokenizer", "compat", "use_stemmer",
    )  # fmt: skip
    assert metric_options("rouge_1") == (
        "measure", "normalizer", "tokenizer", "compat", "use_stemmer",
    )  # fmt: skip
    assert metric_options("rouge_lsum")[-1] == "split_summaries"


@pytest.mark.parametrize(
    ("metric", "options", "expected"),
    [
        ("rouge_1", {}, "rouge_1|n:1|measure:f|norm:none|tok:words"),
        ("rouge_2", {"measure": "p"}, "rouge_2|n:2|measure:p|norm:none|tok:words"),
        (
            "rouge_n",
            {"n": 4, "measure": "r", "compat": ROUGE, "use_stemmer": True},
            "rouge_n|n:4|measure:r|compat:rouge_score|norm:none|tok:rouge_score_porter",
        ),
        ("rouge_n", {"n": 12, "tokenizer": "chars"}, "rouge_n|n:12|measure:f|norm:none|tok:chars"),
        # rouge_l names the measure only when it is not the F-measure (signatures it had before)
        ("rouge_l", {}, "rouge_l|norm:none|tok:words"),
        ("rouge_l", {"measure": "p"}, "rouge_l|measure:p|norm:none|tok:words"),
        (
            "rouge_lsum",
            {"compat": ROUGE, "split_summaries": False},
            "rouge_lsum|measure:f|compat:rouge_score|norm:none|tok:rouge_score|split:newline",
        ),
        (
            "rouge_lsum",
            {"normalizer": "squad"},
            "rouge_lsum|measure:f|norm:squad|tok:words|split:newline",
        ),
    ],
)
def test_signatures(metric: str, options: dict[str, object], expected: str) -> None:
    assert signature(metric, **options) == expected


def test_normalizer_applies_line_by_line() -> None:
    # The squad normalizer joins whitespace; applied per line, the lines stay sentences.
    assert rouge_lsum("Y.\nX!", "x\ny", normalizer="squad") == 1.0
    assert rouge_l("Y.\nX!", "x\ny", normalizer="squad") == 0.5


def test_free_functions_pickling_and_dispatch_agree() -> None:
    prediction, targets = "The cat sat on the mat.\nIt was 3 pm.", ["a cat sat", "the mat\nat 3"]
    recall = {"measure": "r"}
    pairs = [
        (rouge_1(prediction, targets, **recall), score("rouge_1", prediction, targets, **recall)),
        (rouge_2(prediction, targets), score("rouge_2", prediction, targets)),
        (rouge_n(prediction, targets, n=2), score("rouge_2", prediction, targets)),
        (rouge_n(prediction, targets, n=1, measure="p"), rouge_1(prediction, targets, measure="p")),
        (rouge_lsum(prediction, targets), score("rouge_lsum", prediction, targets)),
    ]  # fmt: skip
    for ours, dispatched in pairs:
        assert ours == dispatched
    metrics = (Rouge1(), Rouge2(compat=ROUGE), RougeN(n=3), RougeLsum(compat=ROUGE), RougeL())
    for metric in metrics:
        clone = pickle.loads(pickle.dumps(metric))
        assert clone.signature == metric.signature
        assert clone(prediction, targets) == metric(prediction, targets)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(reward_plugins.InvalidInput, match="rouge_2: prediction must be a str"):
        rouge_2(None, "a")  # type: ignore[arg-type]
    with pytest.raises(reward_plugins.InvalidInput, match=r"rouge_lsum: targets\[1\] must be"):
        RougeLsum().target_scores("a", ["a", 1])  # type: ignore[list-item]
    with pytest.raises(reward_plugins.InvalidInput, match="rouge_1: targets is empty"):
        rouge_1("a", [])
