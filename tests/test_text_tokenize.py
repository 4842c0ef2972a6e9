"""Named tokenizers: reference vectors and differential tests against sacrebleu and rouge-score."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score.tokenizers import DefaultTokenizer
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from reward_plugins.text import (
    TOKENIZERS,
    get_tokenizer,
    tokenize_13a,
    tokenize_chars,
    tokenize_rouge_score,
    tokenize_rouge_score_porter,
    tokenize_split,
    tokenize_words,
)

REPO_ROOT = Path(__file__).resolve().parents[1]

# Pieces that exercise every 13a rule (symbols, period/comma next to digits, digit-hyphen,
# entities, <skipped>, hyphen-newline) and rouge-score's ASCII filter and stemmer.
_PIECES = [
    "a", "B", "1", "2", "3.5", ".", ",", "-", "'", "&", "&amp;", "&quot;", "&lt;", "&gt;",
    "<skipped>", "-\n", "\n", " ", "  ", "\t", "\xa0", "\u2009", "\x1c", "$", "(", ")", "/",
    "{", "~", "[", "\\", "`", "@", "café", "İ", "\u212a", "東京", "running", "quickly", "dying",
    "skies", "generously", "runners", "U.S.A.", "don't", "1,000", "K-9",
]  # fmt: skip
texts = st.lists(st.sampled_from(_PIECES), max_size=20).map("".join) | st.text(max_size=30)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Outputs of sacrebleu 2.6.0's Tokenizer13a (sacrebleu/tokenizers/tokenizer_13a.py).
        ("Hello, world! It's 3.5 dollars.", "Hello , world ! It's 3.5 dollars ."),
        ("a.1", "a . 1"),
        ("1.a", "1 . a"),
        ("1.5.", "1.5 ."),
        ("..1", ". .1"),
        ("1..2", "1 . . 2"),
        ("-5", "-5"),
        ("5-", "5 -"),
        ("1--2", "1 - -2"),
        ("a-b", "a-b"),
        ("3.14,15", "3.14,15"),
        ("2024.", "2024 ."),
        ("don't", "don't"),
        ("U.S.A. $5,000.00 (approx.)", "U . S . A . $ 5,000.00 ( approx . )"),
        ("&amp;amp;", "& amp ;"),
        ("-\nfoo", "foo"),
        ("x\xa0y\u2009z", "x y z"),
        ("a<skipped>b", "ab"),
        # One trailing period or comma (a fast path of ours), checked against sacrebleu 2.6.0.
        ("(a), $5. 1234. Word, .5 ,a 5,", "( a ) , $ 5 . 1234 . Word , . 5 , a 5 ,"),
        ("", ""),
    ],
)
def test_13a_vectors(text: str, expected: str) -> None:
    assert tokenize_13a(text) == expected.split()


@settings(max_examples=1500, deadline=None)
@given(texts)
def test_13a_matches_sacrebleu(text: str) -> None:
    assert tokenize_13a(text) == Tokenizer13a()(text).split()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Outputs of rouge-score 0.1.2's tokenizer (rouge/tokenize.py, google-research).
        (
            "Hello, World! It's 3.5 K-9 İstanbul \u212a café",
            "hello world it s 3 5 k 9 i stanbul k caf",
        ),
        ("café naïve 東京", "caf na ve"),
        ("東京", ""),
        ("", ""),
    ],
)
def test_rouge_score_vectors(text: str, expected: str) -> None:
    assert tokenize_rouge_score(text) == expected.split()


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        # nltk PorterStemmer, NLTK_EXTENSIONS mode (nltk/stem/porter.py), as rouge-score applies it.
        ("runners", "runner"),
        ("running", "run"),
        ("quickly", "quickli"),
        ("generously", "gener"),
        ("dying", "die"),
        ("lies", "lie"),
        ("skies", "sky"),
        ("was", "was"),  # 3 characters: never stemmed
    ],
)
def test_rouge_score_porter_vectors(word: str, stem: str) -> None:
    assert tokenize_rouge_score_porter(word.upper()) == [stem]


@settings(max_examples=800, deadline=None)
@given(texts)
def test_rouge_score_matches_rouge_score(text: str) -> None:
    assert tokenize_rouge_score(text) == DefaultTokenizer(use_stemmer=False).tokenize(text)
    assert tokenize_rouge_score_porter(text) == DefaultTokenizer(use_stemmer=True).tokenize(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It's 3.5 K-9s!", ["it", "s", "3", "5", "k", "9s"]),
        ("snake_case word", ["snake_case", "word"]),  # "_" is a word character
        ("Café ÉCOLE", ["café", "école"]),
        ("  ", []),
    ],
)
def test_words_vectors(text: str, expected: list[str]) -> None:
    assert tokenize_words(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("北京大学 is in Beijing。", ["北", "京", "大", "学", "is", "in", "beijing"]),
        ("東京タワーへ行く", ["東", "京", "タ", "ワ", "ー", "へ", "行", "く"]),
        ("서울 특별시", ["서울", "특별시"]),  # Hangul keeps its space-separated words
        ("第3章abc", ["第", "3", "章", "abc"]),
        ("\U00020000x", ["\U00020000", "x"]),  # CJK extension B
        ("\uff0c\u3002", []),  # FULLWIDTH COMMA, IDEOGRAPHIC FULL STOP
    ],
)
def test_chars_vectors(text: str, expected: list[str]) -> None:
    assert tokenize_chars(text) == expected


@settings(max_examples=300, deadline=None)
@given(texts)
def test_chars_agrees_with_words_outside_cjk(text: str) -> None:
    cjk = any("\u3040" <= c <= "\u30ff" or "\u3400" <= c <= "\u9fff" or c >= "\uf900" for c in text)
    if not cjk:
        assert tokenize_chars(text) == tokenize_words(text)
    assert "".join(tokenize_chars(text)) == "".join(tokenize_words(text))


def test_split_is_str_split() -> None:
    assert tokenize_split(" a\u3000b\x1cc\u200bd ") == ["a", "b", "c\u200bd"]


def test_registry_names_and_error() -> None:
    assert set(TOKENIZERS) == {
        "13a",
        "chars",
        "each_char",
        "intl",
        "rouge_score",
        "rouge_score_porter",
        "split",
        "words",
        "zh",
    }
    assert get_tokenizer("13a") is tokenize_13a
    with pytest.raises(ValueError, match=r"'wrods'.*13a, chars, each_char, intl, rouge_score"):
        get_tokenizer("wrods")


def _run(code: str, *, hide_nltk: bool = False) -> subprocess.CompletedProcess[str]:
    prelude = "import sys; sys.modules['nltk'] = None\n" if hide_nltk else ""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, env=env
    )


def test_nltk_is_imported_only_for_the_stemmer() -> None:
    code = (
        "import sys\n"
        "from reward_plugins.metrics import score\n"
        "score('rouge_l', 'running fast', 'runs fast', compat='rouge_score')\n"
        "print('nltk' in sys.modules)\n"
        "score('rouge_l', 'running fast', 'runs fast', compat='rouge_score', use_stemmer=True)\n"
        "print('nltk' in sys.modules)\n"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]


def test_missing_nltk_gives_an_install_hint() -> None:
    code = "from reward_plugins.text import tokenize_rouge_score_porter as t\nt('running')\n"
    result = _run(code, hide_nltk=True)
    assert result.returncode != 0
    assert "ImportError: the Porter stemmer needs nltk" in result.stderr
    assert "reward-plugins[stem]" in result.stderr
