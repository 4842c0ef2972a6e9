"""chrF and chrF++ against sacrebleu 2.6.0: differential tests, published vectors, the protocol.

Oracles: the installed sacrebleu 2.6.0 (``CHRF(...).sentence_score`` / ``corpus_score``, which
``sentence_chrf`` / ``corpus_chrf`` call) on generated texts, and the published vectors of
sacrebleu's own suite (github.com/mjpost/sacrebleu, ``test/test_chrf.py``). Other anchors were
computed with the installed sacrebleu 2.6.0 and are labelled so.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import CHRF

from reward_plugins.errors import InvalidInput, InvalidOption
from reward_plugins.metrics import Chrf, chrf, corpus_chrf, get_metric, metric_options, score
from reward_plugins.metrics import chrf as chrf_function
from reward_plugins.metrics.chrf import _matches_coded, _matches_hashed, _symbols, chrf_words

# Pieces for generated texts: ASCII punctuation at word edges (chrF++ splits it off), case pairs
# (lowercase), repeated characters (clipped counts), CJK and other scripts, whitespace kinds.
_PIECES = [
    "the", "The", "cat", "sat", "a", "aa", "aaa", "mat", "(hi)", "hi,", ",hi", "don't", "x-y",
    "3.5", "!", ".", "...", "«", "»", "€", "İstanbul", "ß", "ﬁ", "北京", "大学", "的", "。",
    "\U00020000", "한국", "\u0435", "e", "\u3000", "\t", "\n", " ", "",
]  # fmt: skip
texts = st.lists(st.sampled_from(_PIECES), max_size=16).map(
    lambda pieces: "".join(
        piece if index % 3 else f" {piece}" for index, piece in enumerate(pieces)
    )
)
any_texts = st.one_of(texts, st.text(max_size=30))
reference_lists = st.lists(any_texts, min_size=1, max_size=4)
corpora = st.lists(st.tuples(any_texts, reference_lists), min_size=1, max_size=5)
options = st.fixed_dictionaries(
    {
        "char_order": st.integers(0, 10),
        "word_order": st.integers(0, 6),
        "beta": st.integers(1, 10),
        "lowercase": st.booleans(),
        "whitespace": st.booleans(),
        "eps_smoothing": st.booleans(),
    }
).filter(lambda chosen: chosen["char_order"] + chosen["word_order"] > 0)


def _streams(references: list[list[str]]) -> list[list[str | None]]:
    """sacrebleu's reference streams: stream k holds the k-th reference of every sentence."""
    count = max(map(len, references))
    return [[row[k] if k < len(row) else None for row in references] for k in range(count)]


# --- differential -----------------------------------------------------------------------------
@pytest.mark.parametrize("word_order", [0, 2])
@settings(max_examples=150, deadline=None)
@given(prediction=any_texts, targets=reference_lists)
def test_chrf_and_chrf_plus_plus_match_sacrebleu(
    word_order: int, prediction: str, targets: list[str]
) -> None:
    expected = sacrebleu.sentence_chrf(prediction, targets, word_order=word_order).score / 100
    assert chrf(prediction, targets, word_order=word_order) == min(1.0, expected)


@settings(max_examples=150, deadline=None)
@given(chosen=options, corpus=corpora)
def test_every_option_matches_sacrebleu(chosen: dict[str, object], corpus: list) -> None:
    reference = CHRF(**chosen)  # type: ignore[arg-type]
    ours = Chrf(**chosen)  # type: ignore[arg-type]
    for prediction, targets in corpus:
        expected = min(1.0, reference.sentence_score(prediction, targets).score / 100)
        assert ours(prediction, targets) == expected
        # sacrebleu's choice of reference, tie rule included: the same statistics.
        (theirs,) = reference._extract_corpus_statistics([prediction], [[t] for t in targets])
        assert ours.sentence_statistics(prediction, targets).tolist() == theirs
    predictions = [prediction for prediction, _ in corpus]
    references = [targets for _, targets in corpus]
    expected = min(1.0, reference.corpus_score(predictions, _streams(references)).score / 100)
    assert ours.corpus_score(predictions, references) == expected
    total = sum(ours.sentence_statistics(p, t) for p, t in corpus)
    assert ours.score_from_statistics(total) == expected


@settings(max_examples=60, deadline=None)
@given(corpus=corpora, word_order=st.sampled_from([0, 2]), beta=st.integers(1, 3))
def test_corpus_function_matches_sacrebleu(corpus: list, word_order: int, beta: int) -> None:
    predictions = [prediction for prediction, _ in corpus]
    references = [targets for _, targets in corpus]
    expected = sacrebleu.corpus_chrf(
        predictions, _streams(references), word_order=word_order, beta=beta
    )
    ours = corpus_chrf(predictions, references, word_order=word_order, beta=beta)
    assert ours == min(1.0, expected.score / 100)


def test_long_texts_and_many_references_match_sacrebleu() -> None:
    rng = random.Random(5)
    words = ["kalo", "mite", "sonra", "de", "vin", "Tri", "3.5", "(po)", "ne,", "東京", "ß"]
    for word_order in (0, 2):
        reference = CHRF(word_order=word_order)
        metric = Chrf(word_order=word_order)
        for _ in range(20):
            prediction = " ".join(rng.choices(words, k=rng.randint(150, 400)))
            targets = [
                " ".join(rng.choices(words, k=rng.randint(0, 400)))
                for _ in range(rng.randint(1, 5))
            ]
            expected = reference.sentence_score(prediction, targets).score / 100
            assert metric(prediction, targets) == min(1.0, expected)


@pytest.mark.parametrize("seed", range(3))
def test_large_alphabets_are_renumbered_or_counted_by_counter(seed: int) -> None:
    # Distinct ideographs: code points overflow int64 codes, so characters are renumbered; past
    # about 1,100 distinct ones (three texts, order 6) the Counter path counts.
    rng = random.Random(seed)
    size = (200, 1000, 3000)[seed]
    alphabet = [chr(0x4E00 + index) for index in range(size)]
    prediction = "".join(rng.choices(alphabet, k=size))
    targets = ["".join(rng.choices(alphabet, k=size)) for _ in range(2)]
    for word_order in (0, 2):
        expected = sacrebleu.sentence_chrf(prediction, targets, word_order=word_order).score / 100
        assert chrf(prediction, targets, word_order=word_order) == min(1.0, expected)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(any_texts, min_size=2, max_size=5), order=st.integers(1, 10))
def test_numpy_and_counter_counts_agree(texts: list[str], order: int) -> None:
    values = _symbols(texts)
    coded = _matches_coded(values, [len(text) for text in texts], int(values.max()), order)
    if coded is not None:
        assert coded == _matches_hashed(texts, order)
    words = [chrf_words(text) for text in texts]
    values = _symbols(words)
    coded = _matches_coded(values, [len(w) for w in words], int(values.max()), order)
    if coded is not None:
        assert coded == _matches_hashed(words, order)


def test_overflowing_codes_are_refused() -> None:
    values = _symbols(["\U0010ffff", "a"])
    assert _matches_coded(values, [1, 1], int(values.max()), 6) is None
    assert _matches_coded(values, [1, 1], 1, 6) == [[0] * 6]


@settings(max_examples=300, deadline=None)
@given(any_texts)
def test_words_match_sacrebleu(text: str) -> None:
    assert chrf_words(text) == CHRF(word_order=2)._remove_punctuation(text)


def test_lone_surrogates() -> None:
    for prediction, targets in [("a\ud800b", ["a\ud800c"]), ("\udfff", ["\udfff x"])]:
        expected = sacrebleu.sentence_chrf(prediction, targets, word_order=2).score / 100
        assert chrf(prediction, targets, word_order=2) == expected


# --- reference choice and empty texts -----------------------------------------------------------
def test_tied_references_take_the_first() -> None:
    # Computed with the installed sacrebleu 2.6.0: with char_order=1, "dacb" scores 62.5 against
    # "c" (statistics [4, 1, 1]) and against "aca" ([4, 3, 2]); the first listed wins, so the
    # corpus score depends on the order: 83.33333333333334 vs 76.92307692307692.
    metric = Chrf(char_order=1)
    assert metric("dacb", ["c", "aca"]) == metric("dacb", ["aca", "c"]) == 0.625
    assert metric.sentence_statistics("dacb", ["c", "aca"]).tolist() == [4, 1, 1]
    assert metric.sentence_statistics("dacb", ["aca", "c"]).tolist() == [4, 3, 2]
    first = metric.corpus_score(["dacb", "dd"], [["c", "aca"], ["dd"]])
    second = metric.corpus_score(["dacb", "dd"], [["aca", "c"], ["dd"]])
    assert first == pytest.approx(0.8333333333333334, abs=1e-15)
    assert second == pytest.approx(0.7692307692307692, abs=1e-15)


def test_a_later_better_reference_is_chosen() -> None:
    metric = Chrf()
    assert metric("the cat", ["dog", "the cat"]) == 1.0
    assert metric.sentence_statistics("the cat", ["dog", "the cat"]).tolist() == (
        metric.sentence_statistics("the cat", ["the cat"]).tolist()
    )


@pytest.mark.parametrize(
    ("prediction", "targets", "eps_smoothing", "word_order", "expected"),
    [
        # Computed with the installed sacrebleu 2.6.0: CHRF(...).sentence_score(...).score.
        ("", ["abc"], False, 0, 0.0),
        ("", ["abc"], True, 0, 5e-15),
        ("abc", [""], True, 0, 1.0000000000000002e-14),
        ("", [""], False, 2, 0.0),
        ("", [""], True, 2, 1.0000000000000002e-14),
        ("   ", ["a"], True, 0, 8.333333333333334e-15),
        ("   ", ["a"], True, 2, 7.500000000000001e-15),
        ("a", ["   "], False, 2, 0.0),
    ],
)
def test_empty_prediction_and_references(
    prediction: str, targets: list[str], eps_smoothing: bool, word_order: int, expected: float
) -> None:
    metric = Chrf(eps_smoothing=eps_smoothing, word_order=word_order)
    assert metric(prediction, targets) == expected / 100


def test_empty_reference_counts_no_prediction_ngrams() -> None:
    # sacrebleu: a prediction n-gram count is 0 for an order the reference has no n-gram of.
    assert Chrf(char_order=3).sentence_statistics("abcd", ["xy"]).tolist() == [
        4, 2, 0, 3, 1, 0, 0, 0, 0,
    ]  # fmt: skip
    assert Chrf(char_order=1, word_order=1).sentence_statistics("a b", [""]).tolist() == [
        0, 0, 0, 0, 0, 0,
    ]  # fmt: skip


# --- sacrebleu's published vectors ----------------------------------------------------------
# github.com/mjpost/sacrebleu test/test_chrf.py: corpus_chrf(hypotheses, [references],
# char_order=6, word_order=0, beta=3, ...).score on 0-100, checked there to 1e-4.
@pytest.mark.parametrize(
    ("hypotheses", "references", "eps_smoothing", "whitespace", "expected"),
    [
        (["abcdefg"], ["hijklmnop"], True, False, 0.0),
        (["a"], ["b"], True, False, 0.0),
        ([""], ["b"], True, False, 0.0),
        ([""], ["reference"], True, False, 0.0),
        (["aa"], ["ab"], True, False, 8.3333),
        (["a", "b"], ["a", "c"], True, False, 8.3333),
        (["a"], ["a"], True, False, 16.6667),
        (["a b c"], ["a b c"], True, False, 50.0),
        (["a b c"], ["abc"], True, False, 50.0),
        ([" risk assessment must be made of those who are qualified and expertise in the sector "
          "- these are the scientists ."],
         ["risk assessment has to be undertaken by those who are qualified and expert in that "
          "area - that is the scientists ."], True, False, 63.361730),
        ([" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. "],
         ["Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."],
         True, False, 64.1302698),
        (["Niemand hat die Absicht, eine Mauer zu errichten"],
         ["Niemand hat die Absicht, eine Mauer zu errichten"], True, False, 100.0),
        (["a"], ["a"], False, False, 100.0),
        ([""], ["reference"], False, False, 0.0),
        (["a b c"], ["a b c"], False, False, 100.0),
        (["a b c"], ["abc"], False, False, 100.0),
        ([""], ["c"], False, False, 0.0),
        (["a", "b"], ["a", "c"], False, False, 50.0),
        (["aa"], ["ab"], False, False, 25.0),
        (["Die Beziehung zwischen Obama und Netanjahu ist nicht gerade freundlich."],
         ["Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."],
         False, True, 67.3481606),
        (["risk assessment must be made of those who are qualified and expertise in the sector - "
          "these are the scientists ."],
         ["risk assessment has to be undertaken by those who are qualified and expert in that "
          "area - that is the scientists ."], False, True, 65.2414427),
    ],
)  # fmt: skip
def test_sacrebleu_corpus_vectors(
    hypotheses: list[str],
    references: list[str],
    eps_smoothing: bool,
    whitespace: bool,
    expected: float,
) -> None:
    value = corpus_chrf(
        hypotheses,
        [[reference] for reference in references],
        beta=3,
        eps_smoothing=eps_smoothing,
        whitespace=whitespace,
    )
    assert value * 100 == pytest.approx(expected, abs=1e-4)


# github.com/mjpost/sacrebleu test/test_chrf.py test_sentence_level_chrf: sentence_chrf(hyp, refs,
# eps_smoothing=True).score, checked there to 1e-4.
@pytest.mark.parametrize(
    ("hypothesis", "references", "expected"),
    [
        ("Co nás nejvíc trápí, protože lékaři si vybírají, kdo bude žít a kdo zemře.",
         ["Nejvíce smutní jsme z toho, že musíme rozhodovat o tom, kdo bude žít a kdo zemře."],
         39.14078509),
        ("Nebo prostě nemají vybavení, které by jim pomohlo, uvedli lékaři.",
         ["A někdy nemáme ani potřebný materiál, abychom jim pomohli, popsali lékaři."],
         31.22557079),
        ("Lapali po dechu, jejich životy skončily dřív, než skutečně začaly.",
         ["Lapali po dechu a pak jejich život skončil - dřív, než skutečně mohl začít, "
          "připomněli."], 57.15704367),
    ],
)  # fmt: skip
def test_sacrebleu_sentence_vectors(
    hypothesis: str, references: list[str], expected: float
) -> None:
    assert chrf(hypothesis, references, eps_smoothing=True) * 100 == pytest.approx(
        expected, abs=1e-4
    )


# --- by hand ----------------------------------------------------------------------------------
def test_hand_worked_chrf() -> None:
    # "ab" vs "abc", char_order=2, beta=1: unigrams 2 of 2 predicted, 2 of 3 referenced;
    # bigrams 1 of 1, 1 of 2. P = (1 + 1) / 2 = 1, R = (2/3 + 1/2) / 2 = 7/12,
    # F1 = 2 * P * R / (P + R) = (7/6) / (19/12) = 14/19.
    assert chrf("ab", "abc", char_order=2, beta=1) == pytest.approx(14 / 19, rel=1e-15)
    # Whitespace is removed before counting characters unless whitespace=True.
    assert chrf("a b", "ab", char_order=2) == 1.0
    assert chrf("a b", "ab", char_order=2, whitespace=True) < 1.0
    # Case matters unless lowercase=True.
    assert chrf("ABC", "abc") == 0.0
    assert chrf("ABC", "abc", lowercase=True) == 1.0


# --- API ------------------------------------------------------------------------------------
def test_compat_is_the_same_metric() -> None:
    plain, compat = Chrf(word_order=2), Chrf(word_order=2, compat="sacrebleu")
    assert (
        plain.signature == compat.signature == ("chrf|nc:6|nw:2|beta:2|case:mixed|eff:yes|space:no")
    )
    assert plain("the cat sat", ["a cat sat"]) == compat("the cat sat", ["a cat sat"])
    assert Chrf(lowercase=True, whitespace=True, eps_smoothing=True, beta=1).signature == (
        "chrf|nc:6|nw:0|beta:1|case:lc|eff:no|space:yes"
    )


def test_dispatcher_and_free_functions() -> None:
    assert metric_options("chrf") == (
        "char_order", "word_order", "beta", "lowercase", "whitespace", "eps_smoothing", "compat",
    )  # fmt: skip
    prediction, targets = "the cat sat on the mat", ["a cat sat on a mat", "the dog"]
    assert score("chrf", prediction, targets, word_order=2) == chrf_function(
        prediction, targets, word_order=2
    )
    assert score("chrf", prediction, "a cat sat on a mat") == chrf(prediction, [targets[0]])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"char_order": 11}, r"chrf: option 'char_order' must be in 0\.\.10, got 11"),
        ({"char_order": -1}, r"must be in 0\.\.10, got -1"),
        ({"char_order": True}, r"'char_order' must be an int, got bool"),
        ({"char_order": 6.0}, r"'char_order' must be an int, got float"),
        ({"word_order": 7}, r"'word_order' must be in 0\.\.6, got 7"),
        ({"word_order": "2"}, r"'word_order' must be an int, got str"),
        ({"beta": 0}, r"'beta' must be in 1\.\.10, got 0"),
        ({"beta": 2.0}, r"'beta' must be an int, got float"),
        ({"char_order": 0, "word_order": 0}, r"char_order and word_order are both 0"),
        ({"lowercase": "false"}, r"'lowercase' must be a bool, got str"),
        ({"whitespace": 1}, r"'whitespace' must be a bool, got int"),
        ({"eps_smoothing": None}, r"'eps_smoothing' must be a bool, got NoneType"),
        ({"compat": "nltk"}, r"unknown compat 'nltk'; valid values: sacrebleu"),
        ({"tokenizer": "words"}, r"chrf: unknown option\(s\) tokenizer"),
    ],
)
def test_option_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidOption, match=message):
        get_metric("chrf", **options)


def test_input_errors() -> None:
    metric = Chrf()
    with pytest.raises(InvalidInput, match=r"chrf: targets is empty"):
        metric("a", [])
    with pytest.raises(InvalidInput, match=r"chrf: prediction must be a str, got int"):
        metric.sentence_statistics(3, ["a"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"2 predictions but 1 reference rows"):
        metric.corpus_score(["a", "b"], [["a"]])
    with pytest.raises(InvalidInput, match=r"row 1: chrf: targets\[0\] must be a str"):
        metric.corpus_score(["a", "b"], [["a"], [None]])
    with pytest.raises(InvalidInput, match=r"row 0: chrf: prediction must be a str"):
        metric.corpus_score([None], [["a"]])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match=r"1-D vector of 18 counts"):
        metric.score_from_statistics(np.zeros(17, dtype=np.int64))
    with pytest.raises(InvalidInput, match="whole non-negative counts"):
        metric.score_from_statistics(np.full(18, 0.5))


def test_protocol_vectors() -> None:
    metric = Chrf(word_order=2)
    rows = [("the cat sat", ["a cat sat", "the cat"]), ("", ["x"]), ("hello there", ["hello"])]
    vectors = [metric.sentence_statistics(p, t) for p, t in rows]
    assert all(v.dtype == np.int64 and v.shape == (24,) for v in vectors)
    corpus = metric.corpus_score([p for p, _ in rows], [t for _, t in rows])
    assert metric.score_from_statistics(np.sum(vectors, axis=0)) == corpus
    assert metric.score_from_statistics(np.sum(vectors, axis=0).astype(np.float64)) == corpus
    for (prediction, targets), vector in zip(rows, vectors, strict=True):
        assert metric.score_from_statistics(vector) == metric(prediction, targets)
