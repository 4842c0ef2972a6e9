"""Named text normalizers and tokenizers: the contract behind every comparison a score makes.

A score is only comparable with another made under the same normalizer and tokenizer, so each
one has a name, and metrics report the names they used.

Normalizers map ``str -> str`` (``none``, ``squad``, ``squad_spaced``, ``unicode``); tokenizers
map ``str -> list[str]`` (``words``, ``split``, ``chars``, ``13a``, ``intl``, ``zh``,
``each_char``, ``rouge_score``, ``rouge_score_porter``). :mod:`reward_plugins.text.answers`
holds the many-candidates rule for extracted answers (:func:`count_candidates`).
"""

from __future__ import annotations

from reward_plugins.text.answers import CANDIDATE_SEPARATORS, MIN_CANDIDATES, count_candidates
from reward_plugins.text.normalize import (
    NORMALIZERS,
    Normalizer,
    get_normalizer,
    normalize_none,
    normalize_squad,
    normalize_squad_spaced,
    normalize_unicode,
)
from reward_plugins.text.tokenize import (
    TOKENIZERS,
    Tokenizer,
    get_tokenizer,
    tokenize_13a,
    tokenize_chars,
    tokenize_rouge_score,
    tokenize_rouge_score_porter,
    tokenize_split,
    tokenize_words,
)

__all__ = [
    "CANDIDATE_SEPARATORS",
    "MIN_CANDIDATES",
    "NORMALIZERS",
    "TOKENIZERS",
    "Normalizer",
    "Tokenizer",
    "count_candidates",
    "get_normalizer",
    "get_tokenizer",
    "normalize_none",
    "normalize_squad",
    "normalize_squad_spaced",
    "normalize_unicode",
    "tokenize_13a",
    "tokenize_chars",
    "tokenize_rouge_score",
    "tokenize_rouge_score_porter",
    "tokenize_split",
    "tokenize_words",
]
