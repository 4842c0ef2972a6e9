"""Answer normalizers, each registered under a name.

``squad`` is the normalization of the official SQuAD v1.1 evaluation script, which Search-R1,
verl's ``search_r1_like_qa_em`` and FlashRAG all copy: lower-case, delete the 32 ASCII
punctuation characters, replace the whole words ``a``/``an``/``the`` by a space, collapse
whitespace. The order matters ("the-end" becomes "theend" and keeps its article).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping
from types import MappingProxyType

Normalizer = Callable[[str], str]

_ASCII_PUNCTUATION = re.compile(f"[{re.escape(string.punctuation)}]")  # faster than str.translate
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def normalize_squad(text: str) -> str:
    """SQuAD v1.1 answer normalization (identical to Search-R1's ``normalize_answer``).

    Example:
        >>> normalize_squad("The  Eiffel-Tower!")
        'eiffeltower'
    """
    text = _ASCII_PUNCTUATION.sub("", text.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


_NORMALIZERS: dict[str, Normalizer] = {"squad": normalize_squad}
NORMALIZERS: Mapping[str, Normalizer] = MappingProxyType(_NORMALIZERS)
"""Read-only view of the named normalizers."""


def get_normalizer(name: str) -> Normalizer:
    """Return the normalizer registered as ``name``.

    Raises:
        ValueError: ``name`` is not a known normalizer; the message lists the known ones.
    """
    try:
        return _NORMALIZERS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown normalizer {name!r}; valid names: {', '.join(sorted(_NORMALIZERS))}"
        ) from None
