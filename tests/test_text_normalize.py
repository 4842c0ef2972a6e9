"""Named normalizers: reference vectors, verl parity of ``squad``, idempotence properties."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reward_plugins.text import NORMALIZERS, get_normalizer, normalize_squad
from reward_plugins.text.normalize import normalize_squad_spaced, normalize_unicode

# Escapes below: U+FF30.. FULLWIDTH "Paris", U+2019/U+2018 curly single quotes, U+2013 EN DASH,
# U+FF01 FULLWIDTH EXCLAMATION MARK (written escaped so the source has no confusable characters).
PARIS_FULLWIDTH = "\uff30\uff41\uff52\uff49\uff53"

# Text drawn from every Unicode category, plus characters chosen to stress the rules:
# full-width forms, CJK punctuation, typographic quotes, combining marks, odd whitespace.
_TRICKY = (
    PARIS_FULLWIDTH
    + "İKΣς。、「」\u2019\u2018“”\u2013—\u0301\u0300\u3000\u00a0\u2009\u200b\x1c\t\n.,-'!the a an"
)
texts = st.text(alphabet=st.one_of(st.characters(), st.sampled_from(_TRICKY)), max_size=40)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # normalize_answer of SQuAD v1.1's official evaluate-v1.1.py (Rajpurkar et al. 2016),
        # worked by hand; verl's search_r1_like_qa_em.normalize_answer gives the same.
        ("The Cat!", "cat"),
        ("U.S.", "us"),
        ("1,000", "1000"),
        ("the-end", "theend"),  # punctuation is deleted before articles are removed
        ("a.b", "ab"),
        ("théâtre \u2013 “x”", "théâtre \u2013 “x”"),  # Unicode punctuation survives
        ("theé", "theé"),  # \b is Unicode-aware
        ("", ""),
        ("the", ""),
        ("x\u200by", "x\u200by"),  # ZERO WIDTH SPACE is not whitespace for str.split
    ],
)
def test_squad_vectors(text: str, expected: str) -> None:
    assert normalize_squad(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The  Eiffel-Tower!", "eiffel tower"),
        ("U.S.", "u s"),
        ("the-end", "end"),  # the hyphen becomes a space, so "the" is a whole word again
        ("a.b", "b"),
        ("", ""),
    ],
)
def test_squad_spaced_vectors(text: str, expected: str) -> None:
    assert normalize_squad_spaced(text) == expected


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (PARIS_FULLWIDTH, "paris"),  # full-width Latin folds through NFKC
        ("北京。", "北京"),  # IDEOGRAPHIC FULL STOP is category Po
        ("O\u2019Neil", "O'Neil"),  # RIGHT SINGLE QUOTATION MARK (Pf) and APOSTROPHE (Po)
        ("Straße", "STRASSE"),  # case folding, not lower()
        ("«Paris»", '"paris"'),
        ("東京、大阪", "東京大阪"),
        ("New\u3000York", "new york"),  # IDEOGRAPHIC SPACE
        ("New\u00a0 \tYork ", "new york"),
        ("ﬁne", "fine"),  # NFKC expands the ligature
        ("e\u0301", "é"),  # NFKC composes
        ("Nineteen\u2013Eighty", "NineteenEighty"),  # EN DASH is Pd
    ],
)
def test_unicode_equates(left: str, right: str) -> None:
    assert normalize_unicode(left) == normalize_unicode(right)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PARIS_FULLWIDTH, "paris"),
        ("北京。", "北京"),
        ("O\u2019Neil", "oneil"),
        ("  “The” Cat ", "the cat"),  # articles are kept: the rule is language-neutral
        ("$5 + 3", "$5 + 3"),  # symbols (S*) are not punctuation
        ("e.\u0301", "é"),  # deleting "." lets the combining accent compose with "e"
        ("", ""),
        ("。、\uff01", ""),
    ],
)
def test_unicode_vectors(text: str, expected: str) -> None:
    assert normalize_unicode(text) == expected


def test_unicode_deletes_every_punctuation_character() -> None:
    # Characters that NFKC rewrites (U+2017 DOUBLE LOW LINE -> space + combining mark) are
    # judged after NFKC, so only NFKC-stable ones are checked here.
    for code in range(0x3100):
        char = chr(code)
        if unicodedata.normalize("NFKC", char) != char:
            continue
        if unicodedata.category(char).startswith("P"):
            assert normalize_unicode(f"x{char}y") == "xy", hex(code)
        elif char.isalnum():
            folded = unicodedata.normalize("NFKC", char.casefold())
            assert normalize_unicode(f"x{char}y") == f"x{folded}y", hex(code)


def test_unicode_is_different_from_squad_on_cjk() -> None:
    assert normalize_squad("北京。") == "北京。"
    assert get_normalizer("unicode")("北京。") == "北京"


def test_registry_names_and_error() -> None:
    assert set(NORMALIZERS) == {"none", "squad", "squad_spaced", "unicode"}
    assert get_normalizer("squad") is normalize_squad
    with pytest.raises(ValueError, match="none, squad, squad_spaced, unicode"):
        get_normalizer("SQuAD")
    with pytest.raises(ValueError, match="unknown normalizer"):
        get_normalizer(None)  # type: ignore[arg-type]


def test_squad_matches_verl() -> None:
    from verl.utils.reward_score.search_r1_like_qa_em import normalize_answer

    samples = ["The Cat!", "théâtre \u2013 “x”", "İstanbul", "a  b\u3000c", "the-end", "KΣς", ""]
    for text in samples:
        assert normalize_squad(text) == normalize_answer(text)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_squad_matches_verl_property(text: str) -> None:
    from verl.utils.reward_score.search_r1_like_qa_em import normalize_answer

    assert normalize_squad(text) == normalize_answer(text)


@settings(max_examples=400, deadline=None)
@given(texts, st.sampled_from(sorted(NORMALIZERS)))
def test_normalizers_are_idempotent(text: str, name: str) -> None:
    normalize = get_normalizer(name)
    once = normalize(text)
    assert normalize(once) == once
