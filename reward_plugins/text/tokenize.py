"""Tokenizers (``str -> list[str]``), each registered under a name.

A token metric is only comparable with another made under the same tokenizer, so each metric
reports the tokenizer's name in its signature.

- ``words``: lower-case, then every maximal run of word characters (``re`` ``\\w``). The default
  tokenizer of every metric in :mod:`reward_plugins.metrics`.
- ``split``: Python ``str.split()`` (what the SQuAD scripts do after normalization).
- ``chars``: like ``words``, except that every Han ideograph, Hiragana and Katakana character is a
  token of its own (Chinese and Japanese do not separate words by spaces; Hangul keeps its
  space-separated words). The usual choice for Chinese token F1.
- ``13a``: sacrebleu's default tokenizer (mteval-v13a.pl), reproduced exactly.
- ``intl``: sacrebleu's ``intl`` tokenizer (mteval-v14.pl's international tokenization: Unicode
  punctuation and symbols split off), reproduced exactly; needs the ``regex`` package
  (imported on the first call) for its ``\\p{...}`` classes.
- ``each_char``: sacrebleu's ``char`` tokenizer: every character that is not whitespace is a
  token, case and punctuation kept. Not ``chars``, which keeps words whole and splits only CJK
  text (the name differs by more than one letter so that a typo cannot swap the two).
- ``zh``: sacrebleu's ``zh`` tokenizer: each character of its fixed list of CJK ranges is a
  token, the rest is tokenized like ``13a`` (without 13a's line-level steps and padding).
- ``rouge_score`` / ``rouge_score_porter``: Google rouge-score's default tokenizer, without and
  with its Porter stemmer (nltk, imported only when asked for).

References:
    sacrebleu 2.6.0 (github.com/mjpost/sacrebleu) ``sacrebleu/tokenizers/tokenizer_13a.py``
    (``13a``), ``sacrebleu/tokenizers/tokenizer_re.py`` (``13a`` and ``zh``),
    ``sacrebleu/tokenizers/tokenizer_intl.py`` (``intl``; mteval-v14.pl in
    github.com/moses-smt/mosesdecoder ``scripts/generic/mteval-v14.pl``),
    ``sacrebleu/tokenizers/tokenizer_char.py`` (``each_char``) and
    ``sacrebleu/tokenizers/tokenizer_zh.py`` (``zh``); rouge-score 0.1.2
    (github.com/google-research/google-research) ``rouge/tokenize.py`` and
    ``rouge/tokenizers.py``; nltk ``nltk/stem/porter.py`` (``PorterStemmer``, NLTK_EXTENSIONS
    mode).
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType

from reward_plugins.cache import TOKENS
from reward_plugins.errors import InvalidOption

Tokenizer = Callable[[str], list[str]]

_WORD = re.compile(r"\w+")

# Han (URO, extension A, compatibility, extensions B and later), Hiragana and Katakana.
_CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
# A CJK character is a token only if it is a word character (unassigned code points are not).
_CJK_OR_WORD = re.compile(f"(?=\\w)[{_CJK_RANGES}]|[^\\W{_CJK_RANGES}]+")

_ROUGE_TOKEN = re.compile(r"[a-z0-9]+")
_ROUGE_VALID = re.compile(r"[a-z0-9]+")
# Every byte but [a-z0-9] -> b" ": on ASCII text, bytes.translate + split finds the runs of
# [a-z0-9] in a few C passes, three times faster than the regular expression.
_ROUGE_NON_TOKEN_BYTES = bytes(
    byte if 0x61 <= byte <= 0x7A or 0x30 <= byte <= 0x39 else 0x20 for byte in range(256)
)
_ROUGE_MIN_STEM_LENGTH = 4  # rouge-score stems only tokens longer than 3 characters


def tokenize_words(text: str) -> list[str]:
    """Lower-case ``text`` and return its runs of word characters (the default contract).

    Example:
        >>> tokenize_words("It's 3.5 K-9s!")
        ['it', 's', '3', '5', 'k', '9s']
    """
    return _WORD.findall(text.lower())


def tokenize_split(text: str) -> list[str]:
    """Split ``text`` on Python whitespace, unchanged otherwise.

    Example:
        >>> tokenize_split(" The  cat\\u3000sat ")
        ['The', 'cat', 'sat']
    """
    return text.split()


def tokenize_chars(text: str) -> list[str]:
    """Lower-case ``text``; each Han, Hiragana or Katakana character is a token, so is a word run.

    Punctuation and whitespace separate tokens and are dropped.

    Example:
        >>> tokenize_chars("北京大学 is in Beijing。")
        ['北', '京', '大', '学', 'is', 'in', 'beijing']
    """
    return _CJK_OR_WORD.findall(text.lower())


# --- sacrebleu 13a -------------------------------------------------------------------------------
# Pass (a): the ASCII symbols that get a space on both sides; apostrophe, comma, period, hyphen,
# digits and letters are not among them. It looks at no neighbour, so a translation table does
# it in one C call. (Space is in sacrebleu's set too; a word has none.)
_13A_SPACED_SYMBOLS = str.maketrans(
    {symbol: f" {symbol} " for symbol in '!"#$%&()*+/:;<=>?@[\\]^_`{|}~'}
)
# Passes (b)-(d), applied one after another, each a left-to-right non-overlapping substitution
# whose matches consume the neighbour they test: "..1" gives ". .1", which no per-character rule
# reproduces, so these stay regular expressions (run only when the word has the character).
_13A_PERIOD_COMMA_AFTER_NON_DIGIT = re.compile(r"([^0-9])([.,])")
_13A_PERIOD_COMMA_BEFORE_NON_DIGIT = re.compile(r"([.,])([^0-9])")
_13A_HYPHEN_AFTER_DIGIT = re.compile(r"([0-9])(-)")
_13A_CONTEXT_CHARACTER = re.compile(r"[.,-]")
_13A_ENTITIES = (("&quot;", '"'), ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">"))


@functools.lru_cache(maxsize=TOKENS)
def _tokenize_13a_word(word: str) -> str:
    """Apply the four 13a substitution passes to one whitespace-free word; tokens joined by " ".

    The passes only ever look one character beyond a period, comma or hyphen, and the character
    beyond a word's end is whitespace both in the padded word and in the whole line, so
    tokenizing word by word gives the line's tokens; caching per word makes it cheap.
    """
    context = _13A_CONTEXT_CHARACTER.search(word)
    if context is None:  # no period, comma or hyphen: pass (a) is all there is to do
        return " ".join(word.translate(_13A_SPACED_SYMBOLS).split())
    if context.start() == len(word) - 1 and word[-1] != "-" and len(word) > 1:
        # One trailing period or comma: split off whatever precedes it (passes b or c).
        return " ".join(word[:-1].translate(_13A_SPACED_SYMBOLS).split()) + " " + word[-1]
    padded = f" {word} ".translate(_13A_SPACED_SYMBOLS)
    if "." in word or "," in word:
        padded = _13A_PERIOD_COMMA_AFTER_NON_DIGIT.sub(r"\1 \2 ", padded)
        padded = _13A_PERIOD_COMMA_BEFORE_NON_DIGIT.sub(r" \1 \2", padded)
    if "-" in word:
        padded = _13A_HYPHEN_AFTER_DIGIT.sub(r"\1 \2 ", padded)
    return " ".join(padded.split())


def tokenize_13a(text: str) -> list[str]:
    """sacrebleu's ``13a`` tokenizer (the tokens of ``Tokenizer13a()(text).split()``).

    Line-level steps first: remove ``<skipped>``, join hyphen + newline, turn newlines into
    spaces, and unescape ``&quot;``, ``&amp;``, ``&lt;``, ``&gt;`` in that order, one pass each;
    then the four substitution passes on every word. sacrebleu's BLEU strips trailing whitespace
    before calling the tokenizer; that is the metric's job, not this function's.

    Example:
        >>> tokenize_13a("Hello, world! It's 3.5 dollars.")
        ['Hello', ',', 'world', '!', "It's", '3.5', 'dollars', '.']
        >>> tokenize_13a("1--2 ..1 U.S.")
        ['1', '-', '-2', '.', '.1', 'U', '.', 'S', '.']
    """
    text = text.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in text:
        for entity, char in _13A_ENTITIES:
            text = text.replace(entity, char)
    return " ".join(map(_tokenize_13a_word, text.split())).split()


# --- sacrebleu intl, char, zh --------------------------------------------------------------------
@functools.cache
def _intl_passes() -> tuple[Callable[[str], str], ...]:
    """mteval-v14's three substitution passes, compiled once (``regex`` has ``\\p{...}``).

    In order: a punctuation character after a non-number gets a space on both sides (the pair
    is consumed); a punctuation character before a non-number gets a space on both sides; every
    symbol gets a space on both sides. No padding of the line: a line's first or last character
    has no neighbour there.
    """
    try:  # imported by name: the package is optional and ships no type stubs
        regex = importlib.import_module("regex")
    except ImportError as error:
        raise ImportError(
            "the 'intl' tokenizer needs the regex package (\\p{...} classes): pip install regex"
        ) from error
    punctuation_after_non_number = regex.compile(r"(\P{N})(\p{P})")
    punctuation_before_non_number = regex.compile(r"(\p{P})(\P{N})")
    symbol = regex.compile(r"(\p{S})")
    return (
        functools.partial(punctuation_after_non_number.sub, r"\1 \2 "),
        functools.partial(punctuation_before_non_number.sub, r" \1 \2"),
        functools.partial(symbol.sub, r" \1 "),
    )


def tokenize_intl(text: str) -> list[str]:
    """sacrebleu's ``intl`` tokenizer (the tokens of ``TokenizerV14International()(text)``).

    Unicode punctuation (``\\p{P}``) is split off unless a number is on both sides (``3.5``,
    ``1,000`` stay whole) and every symbol (``\\p{S}``: ``$``, ``+``, ``€``) is a token. As in
    mteval-v14.pl, the line is not padded, so a number followed by a final period keeps it
    (``"1999."``). The Unicode tables are those of the installed ``regex`` package, as in
    sacrebleu.

    Example:
        >>> tokenize_intl("«Hello», 3.5 €, in 1999.")
        ['«', 'Hello', '»', ',', '3.5', '€', ',', 'in', '1999.']

    Raises:
        ImportError: the ``regex`` package is not installed.
    """
    for substitute in _intl_passes():
        text = substitute(text)
    return text.split()


def tokenize_each_char(text: str) -> list[str]:
    """sacrebleu's ``char`` tokenizer (``each_char`` here): every non-whitespace character.

    Nothing is lower-cased or dropped: letters, digits, punctuation and CJK characters alike
    are single-character tokens. Contrast ``chars``, which lower-cases, keeps runs of word
    characters whole and makes single tokens only of Han and kana characters.

    Example:
        >>> tokenize_each_char("Hi, 北京!")
        ['H', 'i', ',', '北', '京', '!']
    """
    return list("".join(text.split()))


# sacrebleu's fixed list of "Chinese" character ranges, with its entries as Python evaluates them:
# the two entries written with five hex digits after \u are two-character strings (four digits
# and a literal), so they compare as U+2001..U+2A6D and U+2F81..U+2FA1 (not the supplementary
# CJK extension B and compatibility supplement, which are therefore not split).
_ZH_RANGES = (
    "\u3400-\u4db5\u4e00-\u9fa5\u9fa6-\u9fbb\uf900-\ufa2d\ufa30-\ufa6a\ufa70-\ufad9"
    "\u2001-\u2a6d\u2f81-\u2fa1\uff00-\uffef\u2e80-\u2eff\u3000-\u303f\u31c0-\u31ef"
    "\u2f00-\u2fdf\u2ff0-\u2fff\u3100-\u312f\u31a0-\u31bf\ufe10-\ufe1f\ufe30-\ufe4f"
    "\u2600-\u26ff\u2700-\u27bf\u3200-\u32ff\u3300-\u33ff"
)
_ZH_CHARACTER = re.compile(f"[{_ZH_RANGES}]")


def tokenize_zh(text: str) -> list[str]:
    """sacrebleu's ``zh`` tokenizer (the tokens of ``TokenizerZh()(text)``).

    Strip the text; put a space on both sides of every character in sacrebleu's CJK ranges
    (ideographs, CJK punctuation, full-width forms, and, through a quirk of its table, every
    character from U+2001 to U+2A6D: general punctuation such as dashes, curly quotes and
    ellipsis, currency signs, arrows, mathematical symbols); then the four 13a substitution
    passes on the whole line, which, unlike ``13a``, is not padded with spaces first (a final
    ``"1999."`` stays one token) and gets none of 13a's line-level steps.

    Example:
        >>> tokenize_zh("我爱北京“天安门”! In 1999.")
        ['我', '爱', '北', '京', '“', '天', '安', '门', '”', '!', 'In', '1999.']
    """
    text = _ZH_CHARACTER.sub(r" \g<0> ", text.strip()).translate(_13A_SPACED_SYMBOLS)
    if "." in text or "," in text:
        text = _13A_PERIOD_COMMA_AFTER_NON_DIGIT.sub(r"\1 \2 ", text)
        text = _13A_PERIOD_COMMA_BEFORE_NON_DIGIT.sub(r" \1 \2", text)
    if "-" in text:
        text = _13A_HYPHEN_AFTER_DIGIT.sub(r"\1 \2 ", text)
    return text.split()


# --- Google rouge-score ---------------------------------------------------------------------------
def _rouge_score_runs(text: str) -> list[str]:
    """The runs of ``[a-z0-9]`` in ``text.lower()`` (translate + split when that is ASCII)."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered.encode().translate(_ROUGE_NON_TOKEN_BYTES).decode().split()
    return _ROUGE_TOKEN.findall(lowered)


def tokenize_rouge_score(text: str) -> list[str]:
    """rouge-score's default tokenizer without stemming: ``str.lower()``, then runs of ``[a-z0-9]``.

    Every other character separates tokens, so accented letters split words and CJK text gives
    no tokens at all.

    Example:
        >>> tokenize_rouge_score("Hello, World! It's 3.5 café 東京")
        ['hello', 'world', 'it', 's', '3', '5', 'caf']
    """
    return _rouge_score_runs(text)


@functools.cache
def _rouge_score_stemmer() -> Callable[[str], str]:
    """rouge-score's per-token stemming step, cached per token.

    nltk's ``PorterStemmer()`` (``NLTK_EXTENSIONS`` mode, as rouge-score uses) for tokens longer
    than 3 characters; a stem that is not a run of ``[a-z0-9]`` becomes "" (rouge-score drops it).
    """
    try:
        from nltk.stem.porter import PorterStemmer
    except ImportError as error:
        raise ImportError(
            "the Porter stemmer needs nltk: pip install 'reward-plugins[stem]'"
        ) from error
    stemmer = PorterStemmer()

    @functools.lru_cache(maxsize=TOKENS)
    def stem(token: str) -> str:
        stemmed = stemmer.stem(token) if len(token) >= _ROUGE_MIN_STEM_LENGTH else token
        return stemmed if _ROUGE_VALID.fullmatch(stemmed) else ""

    return stem


def tokenize_rouge_score_porter(text: str) -> list[str]:
    """rouge-score's default tokenizer with ``use_stemmer=True``.

    Tokens longer than 3 characters go through nltk's Porter stemmer; a stem that is not a run of
    ``[a-z0-9]`` is dropped, as rouge-score does.

    Example:
        >>> tokenize_rouge_score_porter("The runners were running quickly")
        ['the', 'runner', 'were', 'run', 'quickli']

    Raises:
        ImportError: nltk is not installed.
    """
    stems = map(_rouge_score_stemmer(), _rouge_score_runs(text))
    return list(filter(None, stems))


_TOKENIZERS: dict[str, Tokenizer] = {
    "13a": tokenize_13a,
    "chars": tokenize_chars,
    "each_char": tokenize_each_char,
    "intl": tokenize_intl,
    "rouge_score": tokenize_rouge_score,
    "rouge_score_porter": tokenize_rouge_score_porter,
    "split": tokenize_split,
    "words": tokenize_words,
    "zh": tokenize_zh,
}
TOKENIZERS: Mapping[str, Tokenizer] = MappingProxyType(_TOKENIZERS)
"""Read-only view of the named tokenizers."""


def get_tokenizer(name: str) -> Tokenizer:
    """Return the tokenizer registered as ``name``.

    Example:
        >>> get_tokenizer("words")("Hello, World")
        ['hello', 'world']

    Raises:
        InvalidOption: ``name`` is not a known tokenizer; the message lists the known ones.
    """
    try:
        return _TOKENIZERS[name]
    except (KeyError, TypeError):
        raise InvalidOption(
            f"unknown tokenizer {name!r}; valid names: {', '.join(sorted(_TOKENIZERS))}"
        ) from None
