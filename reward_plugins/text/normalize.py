"""Answer normalizers (``str -> str``), each registered under a name.

``squad`` is the normalization of the official SQuAD v1.1 evaluation script, which Search-R1,
verl's ``search_r1_like_qa_em`` and FlashRAG all copy: lower-case, delete the 32 ASCII
punctuation characters, replace the whole words ``a``/``an``/``the`` by a space, collapse
whitespace. The order matters ("the-end" becomes "theend" and keeps its article).

``squad_spaced`` is the same with each ASCII punctuation character replaced by a space, so that
"Eiffel-Tower" and "Eiffel Tower" agree.

``unicode`` is for full-width, CJK and typographic text, where the ASCII-only rules of ``squad``
leave ideographic full stops, curly quotes and full-width letters in place: NFKC, case folding,
deletion of every character of a Unicode punctuation category (``P*``), and a collapse of
Unicode whitespace.

``none`` returns the text unchanged.
"""

from __future__ import annotations

import functools
import re
import string
import sys
import unicodedata
from collections.abc import Callable, Mapping
from types import MappingProxyType

from reward_plugins.errors import InvalidOption

Normalizer = Callable[[str], str]

_ASCII_PUNCTUATION = re.compile(f"[{re.escape(string.punctuation)}]")  # faster than str.translate
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def normalize_squad_python(text: str, spaced: bool = False) -> str:
    """``squad`` (``spaced``: ``squad_spaced``) with two regular expressions: the reference for
    ``_speedups.normalize_squad``, its C twin, which the named normalizers use where built."""
    text = _ASCII_PUNCTUATION.sub(" " if spaced else "", text.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


try:  # the C twin, built at install time where a compiler is available
    from reward_plugins._speedups import normalize_squad as _normalize_squad
except ImportError:
    _normalize_squad = normalize_squad_python


def normalize_squad(text: str) -> str:
    """SQuAD v1.1 answer normalization (identical to Search-R1's ``normalize_answer``).

    Example:
        >>> normalize_squad("The  Eiffel-Tower!")
        'eiffeltower'
    """
    return _normalize_squad(text, False)


def normalize_squad_spaced(text: str) -> str:
    """SQuAD normalization with ASCII punctuation replaced by a space instead of deleted.

    Example:
        >>> normalize_squad_spaced("The  Eiffel-Tower!")
        'eiffel tower'
    """
    return _normalize_squad(text, True)


@functools.cache
def _unicode_punctuation_table() -> dict[int, None]:
    """``str.translate`` table deleting every code point of a ``P*`` category (built once)."""
    return {
        code: None
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)).startswith("P")
    }


def normalize_unicode(text: str) -> str:
    """NFKC, case folding, deletion of Unicode punctuation, and a collapse of Unicode whitespace.

    Full-width forms fold to ASCII (full-width "Paris" -> "paris"), CJK punctuation disappears
    ("北京" followed by U+3002 IDEOGRAPHIC FULL STOP -> "北京"), typographic quotes and dashes are
    deleted like ASCII ones ("O'Neil" with U+2019 or with an apostrophe gives "oneil"). Symbols
    (``S*`` categories such as "$" or "+") are kept.
    Articles are not removed: the rule is language-neutral. NFKC runs again after the
    deletions, because deleting a punctuation mark can bring a base letter next to a combining
    mark that then composes; this makes the normalizer idempotent.

    Example:
        >>> normalize_unicode("\uff30\uff41\uff52\uff49\uff53,\u3000\u201cO\u2019Neil\u201d\u3002")
        'paris oneil'
        >>> normalize_unicode("北京\u3002")
        '北京'
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    stripped = folded.translate(_unicode_punctuation_table())
    return " ".join(unicodedata.normalize("NFKC", stripped).split())


def normalize_none(text: str) -> str:
    """Return ``text`` unchanged (the identity normalizer, named ``none`` in signatures).

    Example:
        >>> normalize_none(" A b ")
        ' A b '
    """
    return text


_NORMALIZERS: dict[str, Normalizer] = {
    "none": normalize_none,
    "squad": normalize_squad,
    "squad_spaced": normalize_squad_spaced,
    "unicode": normalize_unicode,
}
NORMALIZERS: Mapping[str, Normalizer] = MappingProxyType(_NORMALIZERS)
"""Read-only view of the named normalizers."""


def get_normalizer(name: str) -> Normalizer:
    """Return the normalizer registered as ``name``.

    Example:
        >>> get_normalizer("unicode")("\uff30\uff41\uff52\uff49\uff53")
        'paris'

    Raises:
        InvalidOption: ``name`` is not a known normalizer; the message lists the known ones.
    """
    try:
        return _NORMALIZERS[name]
    except (KeyError, TypeError):
        raise InvalidOption(
            f"unknown normalizer {name!r}; valid names: {', '.join(sorted(_NORMALIZERS))}"
        ) from None
