"""ROUGE-L: the F-measure (beta = 1) of the longest common subsequence of two token lists.

Default contract: ``words`` tokens, best over targets, both token lists empty give 1.0 and
exactly one empty gives 0.0.

``compat="rouge_score"`` reproduces Google rouge-score 0.1.2:
``RougeScorer(["rougeL"], use_stemmer=...).score_multi(targets, prediction)["rougeL"].fmeasure``:
its tokenizer (optionally with nltk's Porter stemmer), 0 when either token list is empty, and
the target with the highest F-measure.

The LCS length comes from rapidfuzz's bit-parallel ``LCSseq`` (Hyyro's algorithm: about
n_long / 64 machine-word operations per token of the shorter list) instead of rouge-score's
quadratic table; tokens are first mapped to dense integers, so the LCS is exact (no hash
collisions).

References:
    Lin 2004, "ROUGE: A Package for Automatic Evaluation of Summaries"; rouge-score 0.1.2
    (github.com/google-research/google-research) ``rouge/rouge_scorer.py`` and
    ``rouge/tokenize.py``; Hyyro 2004,
    "Bit-parallel LCS-length computation revisited".
"""

from __future__ import annotations

from rapidfuzz.distance import LCSseq

from reward_plugins.metrics.base import (
    Targets,
    TokenPairMetric,
    check_choice,
    check_flag,
    f_measure,
    reject_with_compat,
    reject_without_compat,
)

ROUGE_SCORE = "rouge_score"


def lcs_length(first: list[str], second: list[str]) -> int:
    """Length of the longest common subsequence of two token lists.

    Example:
        >>> lcs_length("a b c d".split(), "b x d a".split())
        2
    """
    ids: dict[str, int] = {}
    first_ids = [ids.setdefault(token, len(ids)) for token in first]
    second_ids = [ids.setdefault(token, len(ids)) for token in second]
    return int(LCSseq.similarity(first_ids, second_ids))


def lcs_f_measure(prediction_tokens: list[str], target_tokens: list[str]) -> float:
    """LCS precision/recall F-measure of two non-empty token lists.

    Example:
        >>> lcs_f_measure("the cat sat".split(), "the cat was sitting".split())
        0.5714285714285715
    """
    lcs = lcs_length(prediction_tokens, target_tokens)
    if lcs == 0:
        return 0.0
    return f_measure(lcs / len(prediction_tokens), lcs / len(target_tokens))


class RougeL(TokenPairMetric):
    """ROUGE-L F-measure, the best over targets.

    Args:
        normalizer: normalizer name applied before tokenizing, ``none`` by default.
        tokenizer: tokenizer name, ``words`` by default.
        compat: ``"rouge_score"`` to reproduce Google rouge-score (fixes normalizer and tokenizer).
        use_stemmer: with ``compat="rouge_score"`` only: rouge-score's ``use_stemmer`` (needs nltk).

    Example:
        >>> RougeL()("The quick brown dog jumps on the log.",
        ...          "The quick brown fox jumps over the lazy dog")
        0.5882352941176471
        >>> RougeL(compat="rouge_score", use_stemmer=True).signature
        'rouge_l|compat:rouge_score|norm:none|tok:rouge_score_porter'

    Raises:
        ValueError: unknown normalizer, tokenizer or compat; normalizer or tokenizer given with
            ``compat``; ``use_stemmer`` given without it.
        TypeError: ``use_stemmer`` is not a bool.
        ImportError: ``use_stemmer=True`` and nltk is not installed (raised when scoring).
    """

    name = "rouge_l"

    def __init__(
        self,
        *,
        normalizer: str | None = None,
        tokenizer: str | None = None,
        compat: str | None = None,
        use_stemmer: bool | None = None,
    ) -> None:
        if compat is not None:
            self.compat: str | None = check_choice(compat, (ROUGE_SCORE,), "compat", self.name)
            reject_with_compat(self.name, compat, normalizer=normalizer, tokenizer=tokenizer)
            if use_stemmer is not None:
                check_flag(use_stemmer, "use_stemmer", self.name)
            tokenizer = "rouge_score_porter" if use_stemmer else "rouge_score"
        else:
            reject_without_compat(self.name, use_stemmer=use_stemmer)
            self.compat = None
        self._set_tokenization(normalizer, tokenizer)

    @staticmethod
    def pair_score(predicted: list[str], gold: list[str]) -> float:
        return lcs_f_measure(predicted, gold)


def rouge_l(
    prediction: str,
    targets: Targets,
    *,
    normalizer: str | None = None,
    tokenizer: str | None = None,
    compat: str | None = None,
    use_stemmer: bool | None = None,
) -> float:
    """ROUGE-L F-measure, the best over targets. See :class:`RougeL` for the options.

    Example:
        >>> rouge_l("a b c", ["c b a", "a x c"])
        0.6666666666666666
    """
    metric = RougeL(
        normalizer=normalizer, tokenizer=tokenizer, compat=compat, use_stemmer=use_stemmer
    )
    return metric(prediction, targets)
