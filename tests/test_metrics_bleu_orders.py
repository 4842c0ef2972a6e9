"""BLEU of n-gram orders 1..6 with sacrebleu's tokenizers, and the corpus-statistics protocol.

Oracles: the installed sacrebleu 2.6.0 (``BLEU(max_ngram_order=..., tokenize=...)``, its
tokenizer classes) on generated texts, and the published vectors of sacrebleu's own test suite
(github.com/mjpost/sacrebleu, ``test/test_bleu.py`` and ``test/test_sentence_bleu.py``).
Anchors that sacrebleu's suite does not publish (its repository has no tests for the ``intl``,
``char`` and ``zh`` tokenizers) were computed with the installed sacrebleu 2.6.0 and are labelled
so.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_char import TokenizerChar
from sacrebleu.tokenizers.tokenizer_intl import TokenizerV14International
from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

from reward_plugins.errors import InvalidInput, InvalidOption
from reward_plugins.metrics import (
    Bleu,
    Bleu4,
    bleu_4,
    corpus_bleu,
    get_metric,
    metric_options,
    score,
    signature,
)
from reward_plugins.metrics.bleu import bleu, statistics_vector
from reward_plugins.text import get_tokenizer
from reward_plugins.text import tokenize as tokenize_module
from reward_plugins.text.tokenize import tokenize_each_char, tokenize_intl, tokenize_zh

TOKENIZE = ("13a", "none", "intl", "char", "zh")
SMOOTHING = ("exp", "none", "floor", "add-k")


pytestmark = pytest.mark.usefixtures("quiet_sacrebleu")


# --- generated texts -------------------------------------------------------------------------
# Pieces that hit the tokenizers' rules: 13a/zh periods, commas and hyphens next to digits;
# intl's Unicode punctuation (P*) and symbols (S*); zh's CJK ranges, including the accidental
# U+2001..U+2A6D (dashes, curly quotes, ellipsis, euro, arrows) and the supplementary ideographs
# it does not split (U+20000); case pairs for lowercase; whitespace of several kinds.
_PIECES = [
    "the", "The", "cat", "sat", "a", "mat", "İstanbul", "ß", "3.5", "1,000", "1999.", "U.S.",
    "x-y", "5-", "-", ".", ",", "..", "!", "?", "(", ")", "&amp;", "<skipped>", "$", "€", "+",
    "«", "»", "\u2013", "\u201c", "\u201d", "\u2026", "→", "北京", "大学", "的", "我", "。",
    "\uff0c", "\U00020000", "\u3000", "\uff48\uff49", "\uff11\uff12", "ア", "한국", "\u00a0",
    "\t", "\n", "-\n", " ", "",
]  # fmt: skip
texts = st.lists(st.sampled_from(_PIECES), max_size=14).map(
    lambda pieces: "".join(
        piece if index % 3 else f" {piece}" for index, piece in enumerate(pieces)
    )
)
reference_lists = st.lists(texts, min_size=1, max_size=3)
corpora = st.lists(st.tuples(texts, reference_lists), min_size=1, max_size=5)


def _streams(references: list[list[str]]) -> list[list[str | None]]:
    """sacrebleu's reference streams: stream k holds the k-th reference of every sentence."""
    count = max(map(len, references))
    return [[row[k] if k < len(row) else None for row in references] for k in range(count)]


@pytest.mark.parametrize("smooth", SMOOTHING)
@pytest.mark.parametrize("tokenize", TOKENIZE)
@settings(max_examples=40, deadline=None)
@given(
    corpus=corpora,
    order=st.integers(1, 6),
    effective_order=st.booleans(),
    lowercase=st.booleans(),
)
def test_sentence_and_corpus_match_sacrebleu(
    tokenize: str,
    smooth: str,
    corpus: list[tuple[str, list[str]]],
    order: int,
    effective_order: bool,
    lowercase: bool,
) -> None:
    options = {"smooth_method": smooth, "lowercase": lowercase, "tokenize": tokenize}
    reference = BLEU(max_ngram_order=order, effective_order=effective_order, **options)
    ours = Bleu(
        compat="sacrebleu",
        tokenize=tokenize,
        max_ngram_order=order,
        smooth=smooth,
        effective_order=effective_order,
        lowercase=lowercase,
    )
    for prediction, targets in corpus:
        expected = reference.sentence_score(prediction, targets).score / 100
        assert ours(prediction, targets) == min(1.0, expected)
        vector = ours.sentence_statistics(prediction, targets)
        assert ours.score_from_statistics(vector) == min(1.0, expected)
    predictions = [prediction for prediction, _ in corpus]
    references = [targets for _, targets in corpus]
    expected = min(1.0, reference.corpus_score(predictions, _streams(references)).score / 100)
    assert ours.corpus_score(predictions, references) == expected
    total = sum(ours.sentence_statistics(p, t) for p, t in corpus)
    assert ours.score_from_statistics(total) == expected
    # sacrebleu's own per-sentence vectors are the same numbers.
    theirs = reference._extract_corpus_statistics(predictions, _streams(references))
    assert [ours.sentence_statistics(p, t).tolist() for p, t in corpus] == theirs


@settings(max_examples=60, deadline=None)
@given(corpus=corpora, order=st.integers(1, 6), smooth_value=st.sampled_from([0, 0.01, 0.5, 2]))
def test_smooth_values_and_corpus_function(
    corpus: list[tuple[str, list[str]]], order: int, smooth_value: float
) -> None:
    predictions = [prediction for prediction, _ in corpus]
    references = [targets for _, targets in corpus]
    for smooth in ("floor", "add-k"):
        reference = BLEU(max_ngram_order=order, smooth_method=smooth, smooth_value=smooth_value)
        expected = reference.corpus_score(predictions, _streams(references)).score / 100
        ours = corpus_bleu(
            predictions,
            references,
            compat="sacrebleu",
            max_ngram_order=order,
            smooth=smooth,
            smooth_value=smooth_value,
        )
        assert ours == min(1.0, expected)


# --- tokenizers -----------------------------------------------------------------------------
unicode_texts = st.one_of(texts, st.text(max_size=40))


@settings(max_examples=400, deadline=None)
@given(unicode_texts)
def test_tokenizers_match_sacrebleu(text: str) -> None:
    assert tokenize_intl(text) == TokenizerV14International()(text).split()
    assert tokenize_each_char(text) == TokenizerChar()(text).split()
    assert tokenize_zh(text) == TokenizerZh()(text).split()


def test_zh_splits_exactly_sacrebleus_characters() -> None:
    # Every BMP character and a few supplementary ones, between two letters: split off or not
    # exactly as sacrebleu's TokenizerZh (its range table, read as Python compares it).
    tokenizer = TokenizerZh()
    characters = [*map(chr, range(0x10000)), "\U00020000", "\U0002a6d6", "\U0002f800"]
    for character in characters:
        text = f"a{character}b"
        assert tokenize_zh(text) == tokenizer(text).split(), hex(ord(character))


def test_tokenizers_on_lone_surrogates_and_controls() -> None:
    for text in ("a\ud800b", "\x1c1.\x1d", "x\u2028y.", "\u3000北京\u3000"):
        assert tokenize_each_char(text) == TokenizerChar()(text).split()
        assert tokenize_zh(text) == TokenizerZh()(text).split()
        assert tokenize_intl(text) == TokenizerV14International()(text).split()


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        # Computed with the installed sacrebleu 2.6.0: TokenizerZh()(text).split().
        ("我爱北京天安门", ["我", "爱", "北", "京", "天", "安", "门"]),
        ("Hello, 世界!", ["Hello", ",", "世", "界", "!"]),
        # Not padded: a final number keeps its period (13a splits it off); a leading ".5" stays.
        ("in 1999.", ["in", "1999."]),
        (".5 x", [".5", "x"]),
        # U+2001..U+2A6D: en dash, curly quotes, ellipsis, euro sign, arrow are split off...
        ("a\u2013b \u201cq\u201d c\u2026 5€ x→y", ["a", "\u2013", "b", "\u201c", "q", "\u201d",
                                                  "c", "\u2026", "5", "€", "x", "→", "y"]),
        # ...but U+2000 and U+2A6E are not, nor is a supplementary (extension B) ideograph.
        ("a\u2a6db", ["a", "\u2a6d", "b"]),
        ("a\u2a6eb", ["a\u2a6eb"]),
        ("x\U00020000y", ["x\U00020000y"]),
        # Full-width forms and CJK punctuation are split; Hangul syllables are not.
        ("\uff48\uff49\uff01한국。", ["\uff48", "\uff49", "\uff01", "한국", "。"]),
    ],
)  # fmt: skip
def test_zh_tokenizer_ranges(text: str, tokens: list[str]) -> None:
    assert tokenize_zh(text) == tokens
    assert TokenizerZh()(text).split() == tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        # Computed with the installed sacrebleu 2.6.0: TokenizerV14International()(text).split().
        ("Hello, world!", ["Hello", ",", "world", "!"]),
        ("3.5 1,000 in 1999.", ["3.5", "1,000", "in", "1999."]),
        ("«Guillemets» $5 a+b", ["«", "Guillemets", "»", "$", "5", "a", "+", "b"]),
        ("don't", ["don", "'", "t"]),
    ],
)
def test_intl_tokenizer_vectors(text: str, tokens: list[str]) -> None:
    assert tokenize_intl(text) == tokens


def test_registry_holds_the_new_tokenizers() -> None:
    assert get_tokenizer("intl") is tokenize_intl
    assert get_tokenizer("each_char") is tokenize_each_char
    assert get_tokenizer("zh") is tokenize_zh
    # each_char is not chars: case, punctuation and every character kept.
    assert get_tokenizer("each_char")("Ab, c") == ["A", "b", ",", "c"]
    assert get_tokenizer("chars")("Ab, c") == ["ab", "c"]
    with pytest.raises(InvalidOption, match="unknown tokenizer 'char'"):
        get_tokenizer("char")


def test_intl_without_regex_raises_import_error(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenize_module._intl_passes.cache_clear()
    monkeypatch.setitem(sys.modules, "regex", None)
    try:
        with pytest.raises(ImportError, match="'intl' tokenizer needs the regex package"):
            tokenize_intl("a")
        with pytest.raises(ImportError, match="regex"):
            Bleu(compat="sacrebleu", tokenize="intl")
    finally:
        tokenize_module._intl_passes.cache_clear()


# --- sacrebleu's published vectors ----------------------------------------------------------
# github.com/mjpost/sacrebleu test/test_sentence_bleu.py (its example from
# https://github.com/mjpost/sacrebleu/issues/98):
# BLEU(tokenize=tok, smooth_method=..., lowercase=..., effective_order=True).sentence_score,
# 0-100, checked there to 1e-3.
_REF = "producţia de zahăr brut se exprimă în zahăr alb;"
_SYS = "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;"


@pytest.mark.parametrize(
    ("smooth", "tokenize", "lowercase", "expected"),
    [
        ("exp", "none", False, 7.347),
        ("exp", "intl", False, 8.493),
        ("exp", "char", False, 40.8759),
        ("exp", "char", True, 42.0267),
        ("exp", "13a", False, 8.493),
        ("add-k", "13a", False, 14.882),
    ],
)
def test_sacrebleu_sentence_vectors(
    smooth: str, tokenize: str, lowercase: bool, expected: float
) -> None:
    value = bleu(
        _SYS, [_REF], compat="sacrebleu", tokenize=tokenize, smooth=smooth, lowercase=lowercase
    )
    assert value * 100 == pytest.approx(expected, abs=1e-3)


# github.com/mjpost/sacrebleu test/test_bleu.py: corpus_bleu(hyps, refs, **kwargs).score, 0-100,
# checked there to 1e-8 (refs are two streams: references[i] = [stream 0[i], stream 1[i]]).
_HYPS = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]
_REFS = [
    ["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
    ["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."],
]


@pytest.mark.parametrize(
    ("tokenize", "expected"), [("none", 49.1919566), ("13a", 48.530827), ("intl", 43.91623493)]
)
def test_sacrebleu_corpus_vectors(tokenize: str, expected: float) -> None:
    references = [list(row) for row in zip(*_REFS, strict=True)]
    value = corpus_bleu(_HYPS, references, compat="sacrebleu", tokenize=tokenize)
    assert value * 100 == pytest.approx(expected, abs=1e-8)
    metric = Bleu(compat="sacrebleu", tokenize=tokenize, effective_order=False)
    total = sum(metric.sentence_statistics(p, t) for p, t in zip(_HYPS, references, strict=True))
    assert metric.score_from_statistics(total) == value


def test_sacrebleu_statistics_vector() -> None:
    # github.com/mjpost/sacrebleu test/test_bleu.py test_case_statistics: matches [4, 2, 1, 0]
    # of totals [6, 5, 4, 3] ("raw" BLEU: whitespace tokens).
    metric = Bleu(compat="sacrebleu", tokenize="none")
    vector = metric.sentence_statistics(
        "am I am a character sequence", "I am a symbol string sequence a a"
    )
    assert vector.tolist() == [6, 8, 4, 2, 1, 0, 6, 5, 4, 3]


def test_sacrebleu_scoring_vector() -> None:
    # github.com/mjpost/sacrebleu test/test_bleu.py test_case_scoring: compute_bleu(correct
    # [9, 7, 5, 3], total [10, 8, 6, 4], sys_len 11, ref_len 11) = 0.8375922397 (smooth none).
    metric = Bleu(compat="sacrebleu", smooth="none", effective_order=False)
    value = metric.score_from_statistics(np.array([11, 11, 9, 7, 5, 3, 10, 8, 6, 4]))
    assert value == pytest.approx(0.8375922397, abs=1e-8)


# --- orders, by hand --------------------------------------------------------------------------
def test_orders_by_hand() -> None:
    # "the cat sat on a mat" vs "the cat sat on the mat", default contract (words, BLEU+1):
    # p1 = 5/6, p2 = (3+1)/(5+1), p3 = (2+1)/(4+1), p4 = (1+1)/(3+1), p5 = (0+1)/(2+1),
    # p6 = (0+1)/(1+1); equal lengths, no brevity penalty; the geometric mean of the first N.
    precisions = [5 / 6, 4 / 6, 3 / 5, 2 / 4, 1 / 3, 1 / 2]
    for order in range(1, 7):
        expected = float(np.prod(precisions[:order]) ** (1 / order))
        value = score(
            "bleu", "the cat sat on a mat", "the cat sat on the mat", max_ngram_order=order
        )
        assert value == pytest.approx(expected, rel=1e-12)
    # Order 1 is unigram precision with the brevity penalty: 2 of 2 tokens, reference of 3.
    assert score("bleu", "a b", "a b c", max_ngram_order=1) == pytest.approx(np.exp(1 - 3 / 2))


def test_bleu_4_is_bleu_of_order_4() -> None:
    for compat in (None, "sacrebleu"):
        four = Bleu4(compat=compat, smooth="floor")
        general = Bleu(compat=compat, smooth="floor", max_ngram_order=4)
        for prediction, targets in [("the cat sat", ["the cat", "a cat sat down"]), ("", ["x"])]:
            assert four(prediction, targets) == general(prediction, targets)
    assert bleu_4("a b c d e", "a b c d") == bleu("a b c d e", "a b c d")


def test_signatures_and_options() -> None:
    # bleu_4 keeps its signature and options; bleu adds max_ngram_order and tokenize.
    assert signature("bleu_4", compat="sacrebleu") == (
        "bleu_4|compat:sacrebleu|case:mixed|norm:none|tok:13a|smooth:exp|eff:yes"
    )
    assert signature("bleu", compat="sacrebleu", tokenize="none", max_ngram_order=2) == (
        "bleu|compat:sacrebleu|case:mixed|norm:none|tok:none|smooth:exp|eff:yes|order:2"
    )
    assert signature("bleu") == "bleu|norm:none|tok:words|smooth:add-k:1|eff:yes|order:4"
    assert metric_options("bleu_4") == (
        "normalizer", "tokenizer", "smooth", "smooth_value", "effective_order", "lowercase",
        "compat",
    )  # fmt: skip
    assert metric_options("bleu") == (
        "normalizer", "tokenizer", "smooth", "smooth_value", "effective_order", "lowercase",
        "max_ngram_order", "tokenize", "compat",
    )  # fmt: skip
    assert score("bleu", "a b", ["a c"], compat="sacrebleu") == bleu_4(
        "a b", ["a c"], compat="sacrebleu"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_ngram_order": 0}, r"bleu: option 'max_ngram_order' must be in 1\.\.6, got 0"),
        ({"max_ngram_order": 7}, r"must be in 1\.\.6, got 7"),
        ({"max_ngram_order": True}, r"'max_ngram_order' must be an int, got bool"),
        ({"max_ngram_order": 4.0}, r"must be an int, got float"),
        ({"max_ngram_order": "4"}, r"must be an int, got str"),
        ({"tokenize": "13a"}, r"bleu: option 'tokenize' needs a compat preset"),
        ({"compat": "sacrebleu", "tokenize": "ja-mecab"}, r"unknown tokenize 'ja-mecab'; valid "
         r"values: 13a, char, intl, none, zh"),
        ({"compat": "sacrebleu", "tokenize": None, "tokenizer": "zh"}, r"fixes tokenizer"),
        ({"tokenizer": "char"}, r"unknown tokenizer 'char'"),
    ],
)  # fmt: skip
def test_option_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidOption, match=message):
        get_metric("bleu", **options)


def test_bleu_4_refuses_the_new_options() -> None:
    with pytest.raises(InvalidOption, match=r"bleu_4: unknown option\(s\) max_ngram_order"):
        get_metric("bleu_4", max_ngram_order=2)
    with pytest.raises(InvalidOption, match=r"bleu_4: unknown option\(s\) tokenize"):
        get_metric("bleu_4", tokenize="zh", compat="sacrebleu")
    with pytest.raises(TypeError):
        Bleu4(max_ngram_order=2)  # type: ignore[call-arg]


def test_corpus_bleu_names_the_metric_in_errors() -> None:
    with pytest.raises(InvalidInput, match=r"row 1: bleu_4: targets is empty"):
        corpus_bleu(["a", "b"], [["a"], []])
    with pytest.raises(InvalidInput, match=r"row 1: bleu: targets is empty"):
        corpus_bleu(["a", "b"], [["a"], []], max_ngram_order=2)
    with pytest.raises(InvalidOption, match="max_ngram_order"):
        corpus_bleu(["a"], [["a"]], max_ngram_order=True)


# --- the corpus-statistics protocol ---------------------------------------------------------
@settings(max_examples=80, deadline=None)
@given(corpus=corpora, order=st.integers(1, 6), smooth=st.sampled_from(SMOOTHING))
def test_protocol_under_the_default_contract(
    corpus: list[tuple[str, list[str]]], order: int, smooth: str
) -> None:
    metric = Bleu(max_ngram_order=order, smooth=smooth, effective_order=False)
    predictions = [prediction for prediction, _ in corpus]
    references = [targets for _, targets in corpus]
    vectors = [metric.sentence_statistics(p, t) for p, t in corpus]
    assert all(v.dtype == np.int64 and v.shape == (2 + 2 * order,) for v in vectors)
    assert metric.score_from_statistics(sum(vectors)) == metric.corpus_score(
        predictions, references
    )
    # One target: the vector's score is the sentence score.
    for prediction, targets in corpus:
        single = metric.sentence_statistics(prediction, targets[0])
        assert metric.score_from_statistics(single) == metric(prediction, targets[0])


def test_protocol_on_bleu_4_and_summed_as_floats() -> None:
    metric = Bleu4(compat="sacrebleu", effective_order=False)
    rows = [("the cat sat on a mat", ["the cat sat on the mat"]), ("hello", ["hello there"])]
    vectors = [metric.sentence_statistics(p, t) for p, t in rows]
    corpus = metric.corpus_score([p for p, _ in rows], [t for _, t in rows])
    assert metric.score_from_statistics(np.sum(vectors, axis=0)) == corpus
    assert metric.score_from_statistics(np.sum(vectors, axis=0).astype(float)) == corpus
    assert metric.score_from_statistics(list(np.sum(vectors, axis=0))) == corpus


@pytest.mark.parametrize(
    ("statistics", "message"),
    [
        (np.zeros(9, dtype=np.int64), r"1-D vector of 10 counts, got ndarray of shape \(9,\)"),
        (np.zeros((2, 10), dtype=np.int64), r"shape \(2, 10\)"),
        (np.array(["1"] * 10), r"dtype <U1"),
        (np.full(10, 0.5), "whole non-negative counts"),
        (np.full(10, -1), "whole non-negative counts"),
    ],
)
def test_score_from_statistics_checks_the_vector(statistics: np.ndarray, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        Bleu(compat="sacrebleu").score_from_statistics(statistics)


def test_statistics_vector_accepts_integral_floats() -> None:
    assert statistics_vector(np.array([1.0, 2.0]), 2, "bleu") == [1, 2]
    assert statistics_vector((3, 4), 2, "bleu") == [3, 4]
