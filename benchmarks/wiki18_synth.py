"""A synthetic corpus shaped like wiki-18 (Search-R1's retrieval corpus), and queries against it.

wiki-18 is the DPR Wikipedia dump of 20 Dec 2018 cut into disjoint 100-word blocks
(Karpukhin et al. 2020, "Dense Passage Retrieval", https://arxiv.org/abs/2004.04906; the file
Search-R1 serves, https://github.com/PeterGriffinJin/Search-R1 ``scripts/download.py``):
21,015,324 JSONL rows ``{"id": "0", "contents": "\\"Title\\"\\ntext"}``. This module writes rows
of the same form, deterministic from a seed, streaming (a block of ``BLOCK`` passages at a time,
so memory stays bounded whatever the size), with numpy:

- **articles**: ``1 + Geometric`` chunks each, mean ``CHUNKS_PER_ARTICLE`` (21.0M passages over
  about 6M articles); every chunk but the last has ``WORDS_PER_CHUNK`` words, the last one
  10-100 (uniform). All the chunks of an article carry its title (1-4 capitalized words drawn
  from the non-stopword vocabulary), and its first chunk starts with the title words, as a
  Wikipedia lead sentence does.
- **words**: ranks drawn from a two-regime Zipf law (Ferrer i Cancho and Sole 2001, "Two regimes
  in the frequency of words and the origin of complex lexicons", J. Quant. Linguistics 8(3)):
  frequency ``~ 1/r`` up to rank ``HEAD_RANKS``, then ``~ r^-tail`` with an unbounded support.
  The tail exponent is the one free parameter: :func:`calibrate_tail_exponent` solves (by
  bisection on the expected number of distinct ranks in that many tokens) for
  ``WIKI18_TYPES`` = 5.35M word types at ``WIKI18_PASSAGES`` passages (1.688 with the
  constants here; ``calibration`` prints it and the expected types at 1M, 4M and 21M passages:
  0.88M, 2.0M, 5.35M; at 100k passages 228,786 were counted, 225,121 expected). The most frequent
  ranks are real English function words (``STOPWORDS``, in rough Wikipedia frequency order),
  the others pseudo-words of consonant-vowel syllables, shorter for the frequent ranks.
  Text is lowercase with no punctuation (tokenizers lowercase and split on it anyway).
- **prefixes**: passage ``i`` of any corpus is passage ``i`` of every larger one with the same
  seed (block ``b`` is drawn from ``numpy.random.default_rng([seed, b])``), so a smaller corpus
  is a prefix of the 21M one, and is cut from it when that one is in the cache.

Queries (:func:`make_queries`) are questions with a known target passage: a wh-phrase
("what is", "who was", ...), then the title's words (half the time) and words drawn at random
from the target's text (so stopwords and frequent words come at their natural rate), 3-12 words
in all, and in three of ten a word from outside the target. The GRPO stream
(:func:`make_grpo_stream`) is one training step's searches: per prompt and turn one question,
sent by each of the 5 samples of the prompt either identically (60 %) or as a variant (a word
dropped, added or two swapped), in the order a step sends them (turn by turn, the samples of a
prompt together).

Files go to ``~/.cache/reward-plugins-bench/`` (``--cache-dir``), never into the repository, and
are reused when present (written to ``.tmp`` and renamed when complete).

    python benchmarks/wiki18_synth.py corpus --passages 1000000 [--seed 0]
    python benchmarks/wiki18_synth.py queries --passages 1000000 [--count 2000] [--prompts 512]
    python benchmarks/wiki18_synth.py stats --passages 1000000
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

WIKI18_PASSAGES = 21_015_324
WIKI18_TYPES = 5_350_000
WORDS_PER_CHUNK = 100
LAST_CHUNK_MIN_WORDS = 10
CHUNKS_PER_ARTICLE = 3.5
TITLE_WORD_PROBABILITIES = (0.35, 0.35, 0.2, 0.1)  # 1, 2, 3, 4 words
HEAD_RANKS = 5_000
BLOCK = 16_384
GENERATOR_VERSION = 1
DEFAULT_CACHE = Path.home() / ".cache" / "reward-plugins-bench"

# Function words first, most frequent first (roughly as in English Wikipedia).
STOPWORDS = (
    "the of and in a to was is for on as by with he at from that his it an were are which this "
    "also be or has had first one their its new after but who not they have her she two been "
    "other when there all during into may years only over where up such used can about out "
    "then these than while under between would both most three being known through however "
    "against until any each since what him them could well many another because our we"
).split()
_CONSONANTS = np.frombuffer(b"bdfgklmnprstvz", dtype=np.uint8)
_VOWELS = np.frombuffer(b"aeiou", dtype=np.uint8)
_SYLLABLE_COUNT = len(_CONSONANTS) * len(_VOWELS)
_PSEUDO_WORD = re.compile(r"^(?:[bdfgklmnprstvz][aeiou]){2,}$")
assert not [w for w in STOPWORDS if _PSEUDO_WORD.match(w)], "a stopword looks like a pseudo-word"
assert len(set(STOPWORDS)) == len(STOPWORDS)

WH_PHRASES = (
    "what is",
    "what was",
    "who was",
    "who is",
    "who wrote",
    "when did",
    "when was",
    "where is",
    "where was",
    "which",
    "what",
    "how many",
    "in which year did",
    "what is the name of the",
)

logger = logging.getLogger("wiki18_synth")


# --------------------------------------------------------------------------- word law


class ZipfLaw:
    """Word ranks (1 = most frequent) drawn from ``~1/r`` up to ``head`` and ``~r^-tail`` on."""

    def __init__(self, tail: float, head: int = HEAD_RANKS) -> None:
        if not tail > 1.0:
            raise ValueError(f"the tail exponent must exceed 1, got {tail!r}")
        self.tail, self.head = tail, head
        head_weights = 1.0 / np.arange(1, head + 1, dtype=np.float64)
        # The tail continues the head's density at rank ``head``: (1/head) (x/head)^-tail on
        # [head, inf), whose mass is 1/(tail - 1).
        total = head_weights.sum() + 1.0 / (tail - 1.0)
        self.head_probabilities = head_weights / total
        self.head_cdf = np.cumsum(self.head_probabilities)
        self.tail_mass = 1.0 - self.head_cdf[-1]

    def sample(self, rng: np.random.Generator, count: int, minimum_rank: int = 1) -> np.ndarray:
        """``count`` ranks (int64), conditioned on ``rank >= minimum_rank`` (<= ``head``)."""
        floor = self.head_cdf[minimum_rank - 2] if minimum_rank > 1 else 0.0
        u = floor + rng.random(count) * (1.0 - floor)
        ranks = np.searchsorted(self.head_cdf, u, side="right").astype(np.int64) + 1
        in_tail = ranks > self.head
        # Inverse CDF of the Pareto tail: x = head * v^(-1/(tail-1)), v uniform in (0, 1].
        v = (1.0 - u[in_tail]) / self.tail_mass
        x = self.head * np.power(np.clip(v, 1e-300, 1.0), -1.0 / (self.tail - 1.0))
        ranks[in_tail] = np.minimum(np.floor(x), 2**62).astype(np.int64) + 1
        return ranks

    def expected_types(self, tokens: float) -> float:
        """Expected distinct ranks among ``tokens`` draws (Poisson approximation)."""
        head = -np.expm1(-tokens * self.head_probabilities).sum()
        # Tail: rank r > head has probability ~ tail_mass (tail-1)/head (r/head)^-tail; integrate
        # 1 - exp(-tokens p(r)) over r on a log grid out to where the integrand is negligible.
        log_r = np.linspace(math.log(self.head), math.log(self.head) + 80.0, 400_001)
        r = np.exp(log_r)
        density = self.tail_mass * (self.tail - 1.0) / self.head * (r / self.head) ** -self.tail
        integrand = -np.expm1(-tokens * density) * r
        tail = float(np.sum((integrand[1:] + integrand[:-1]) / 2 * np.diff(log_r)))
        return float(head) + tail


def mean_tokens_per_passage() -> float:
    """Expected word tokens of a passage's contents: its text plus its share of a title."""
    last_chunk = (LAST_CHUNK_MIN_WORDS + WORDS_PER_CHUNK) / 2
    text = ((CHUNKS_PER_ARTICLE - 1) * WORDS_PER_CHUNK + last_chunk) / CHUNKS_PER_ARTICLE
    title = sum((k + 1) * p for k, p in enumerate(TITLE_WORD_PROBABILITIES))
    return text + title / CHUNKS_PER_ARTICLE  # a title's words are new tokens once per article


def calibrate_tail_exponent(
    passages: int = WIKI18_PASSAGES, types: int = WIKI18_TYPES, head: int = HEAD_RANKS
) -> float:
    """The tail exponent giving ``types`` expected word types in ``passages`` passages."""
    tokens = passages * mean_tokens_per_passage()
    low, high = 1.01, 4.0  # more types for a flatter tail
    for _ in range(60):
        middle = (low + high) / 2
        if ZipfLaw(middle, head).expected_types(tokens) > types:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def words_of_ranks(ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(table, lengths)``: row ``i`` of the uint8 ``table`` spells rank ``ranks[i]``'s word in
    its first ``lengths[i]`` bytes (the rest is spaces). Ranks 1..len(STOPWORDS) are the
    stopwords; rank ``len(STOPWORDS) + k`` is the bijective base-70 numeral ``k + 71`` written in
    consonant-vowel syllables (so at least two syllables, and no two ranks share a word)."""
    ranks = np.asarray(ranks, dtype=np.int64)
    stop = len(STOPWORDS)
    numbers = np.where(ranks > stop, ranks - stop + _SYLLABLE_COUNT, 0)
    digits: list[np.ndarray] = []  # least significant first; -1 once a numeral has ended
    while (numbers > 0).any():
        alive = numbers > 0
        digit = (numbers - 1) % _SYLLABLE_COUNT
        digits.append(np.where(alive, digit, -1))
        numbers = np.where(alive, (numbers - 1) // _SYLLABLE_COUNT, 0)
    syllables = len(digits)
    width = max(2 * syllables, max(len(w) for w in STOPWORDS))
    table = np.full((len(ranks), width), ord(" "), dtype=np.uint8)
    lengths = np.zeros(len(ranks), dtype=np.int64)
    if syllables:
        stacked = np.stack(digits[::-1], axis=1)  # most significant first, -1 padding at left
        count = (stacked >= 0).sum(axis=1)
        # Shift each row left by its padding so the numeral starts at column 0.
        shift = syllables - count
        columns = np.arange(syllables)[None, :] + shift[:, None]
        valid = columns < syllables
        shifted = np.take_along_axis(stacked, np.minimum(columns, syllables - 1), axis=1)
        shifted = np.where(valid, shifted, -1)
        safe = np.maximum(shifted, 0)
        consonant = np.where(valid, _CONSONANTS[safe // len(_VOWELS)], ord(" "))
        vowel = np.where(valid, _VOWELS[safe % len(_VOWELS)], ord(" "))
        table[:, 0 : 2 * syllables : 2] = consonant
        table[:, 1 : 2 * syllables : 2] = vowel
        lengths = 2 * count
    for index in np.flatnonzero(ranks <= stop):
        word = STOPWORDS[ranks[index] - 1].encode()
        table[index, :] = ord(" ")
        table[index, : len(word)] = np.frombuffer(word, dtype=np.uint8)
        lengths[index] = len(word)
    return table, lengths


def words_as_strings(ranks: np.ndarray) -> list[str]:
    table, lengths = words_of_ranks(ranks)
    return [row[:n].tobytes().decode() for row, n in zip(table, lengths, strict=True)]


# --------------------------------------------------------------------------- corpus


def _block_bytes(law: ZipfLaw, seed: int, block: int, passages: int) -> bytes:
    """The JSONL bytes of ``passages`` (<= BLOCK) passages of block ``block``."""
    rng = np.random.default_rng([seed, GENERATOR_VERSION, block])
    # Articles: chunk counts until the block is full (the last article is cut at its end).
    chunks = 1 + rng.geometric(1.0 / CHUNKS_PER_ARTICLE, size=BLOCK)
    ends = np.cumsum(chunks)
    articles = int(np.searchsorted(ends, BLOCK)) + 1
    chunks, ends = chunks[:articles], ends[:articles]
    article_of = np.repeat(np.arange(articles), chunks)[:BLOCK]
    chunk_of = np.arange(BLOCK) - np.repeat(ends - chunks, chunks)[:BLOCK]
    is_last = chunk_of == chunks[article_of] - 1
    last_lengths = rng.integers(LAST_CHUNK_MIN_WORDS, WORDS_PER_CHUNK + 1, size=BLOCK)
    lengths = np.where(is_last, last_lengths, WORDS_PER_CHUNK)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    ranks = law.sample(rng, int(lengths.sum()))
    title_lengths = 1 + rng.choice(
        len(TITLE_WORD_PROBABILITIES), size=articles, p=TITLE_WORD_PROBABILITIES
    )
    title_ranks = law.sample(rng, int(title_lengths.sum()), minimum_rank=len(STOPWORDS) + 1)
    title_starts = np.concatenate(([0], np.cumsum(title_lengths)[:-1]))
    # The first chunk of an article opens with its title's words.
    firsts = np.flatnonzero(chunk_of == 0)
    for k in range(len(TITLE_WORD_PROBABILITIES)):
        has = firsts[title_lengths[article_of[firsts]] > k]
        ranks[starts[has] + k] = title_ranks[title_starts[article_of[has]] + k]
    # Everything below is deterministic given the draws: cutting to ``passages`` is a prefix.
    lengths, starts = lengths[:passages], starts[:passages]
    ranks = ranks[: int(lengths.sum())]
    vocabulary, inverse = np.unique(ranks, return_inverse=True)
    table, word_lengths = words_of_ranks(vocabulary)
    width = table.shape[1] + 1
    table = np.concatenate((table, np.full((len(table), 1), ord(" "), np.uint8)), axis=1)
    table[np.arange(len(table)), word_lengths] = ord(" ")  # "word " in each row
    # Prefixes: '{"id": "i", "contents": "\"Title\"\n' (JSON escapes), one per passage.
    titles = words_as_strings(title_ranks)
    first_id = block * BLOCK
    prefix_list = []
    for p in range(passages):
        a = article_of[p]
        title = " ".join(
            w.capitalize() for w in titles[title_starts[a] : title_starts[a] + title_lengths[a]]
        )
        prefix_list.append(f'{{"id": "{first_id + p}", "contents": "\\"{title}\\"\\n')
    prefix_bytes = [s.encode() for s in prefix_list]
    prefix_lengths = np.fromiter(map(len, prefix_bytes), dtype=np.int64, count=passages)
    suffix = b'"}\n'
    table_size = table.size
    prefix_offsets = table_size + np.concatenate(([0], np.cumsum(prefix_lengths)[:-1]))
    source = np.concatenate(
        (
            table.ravel(),
            np.frombuffer(b"".join(prefix_bytes), np.uint8),
            np.frombuffer(suffix, np.uint8),
        )
    )
    suffix_offset = table_size + int(prefix_lengths.sum())
    # Pieces in output order: prefix, words ("word " but the last "word"), suffix.
    piece_starts = starts + 2 * np.arange(passages)  # index of each passage's prefix piece
    count = len(ranks) + 2 * passages
    offsets = np.empty(count, dtype=np.int64)
    sizes = np.empty(count, dtype=np.int64)
    token_positions = np.arange(len(ranks)) + np.repeat(2 * np.arange(passages) + 1, lengths)
    offsets[token_positions] = inverse * width
    sizes[token_positions] = word_lengths[inverse] + 1
    last_tokens = piece_starts + lengths  # the last word piece of each passage
    sizes[last_tokens] -= 1
    offsets[piece_starts] = prefix_offsets
    sizes[piece_starts] = prefix_lengths
    offsets[last_tokens + 1] = suffix_offset
    sizes[last_tokens + 1] = len(suffix)
    # Ragged gather: byte j of piece k is source[offsets[k] + j].
    out_starts = np.cumsum(sizes) - sizes
    index = np.repeat(offsets - out_starts, sizes) + np.arange(int(sizes.sum()))
    return source[index].tobytes()


def corpus_name(passages: int, seed: int) -> str:
    return f"wiki18-synth-v{GENERATOR_VERSION}-seed{seed}-{passages}.jsonl"


def _write_atomically(path: Path, chunks: Iterator[bytes]) -> Path:
    partial = path.with_name(path.name + ".tmp")
    with partial.open("wb") as handle:
        for chunk in chunks:
            handle.write(chunk)
    os.replace(partial, path)
    return path


def _generated(passages: int, seed: int) -> Iterator[bytes]:
    law = ZipfLaw(calibrate_tail_exponent())
    blocks = math.ceil(passages / BLOCK)
    start = time.monotonic()
    for block in range(blocks):
        yield _block_bytes(law, seed, block, min(BLOCK, passages - block * BLOCK))
        if block % 64 == 63:
            done = (block + 1) * BLOCK
            rate = done / (time.monotonic() - start)
            logger.info("%d passages, %.0f/s, %.0f s to go", done, rate, (passages - done) / rate)


def _prefix_lines(source: Path, passages: int) -> Iterator[bytes]:
    with source.open("rb") as handle:
        for _, line in zip(range(passages), handle, strict=False):
            yield line


def ensure_corpus(passages: int, seed: int = 0, cache_dir: Path = DEFAULT_CACHE) -> Path:
    """The path of the ``passages``-passage corpus, generated (or cut from a larger cached one
    with the same seed) when absent."""
    if passages < 1:
        raise ValueError(f"passages must be positive, got {passages!r}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / corpus_name(passages, seed)
    if path.exists():
        return path
    pattern = re.compile(rf"wiki18-synth-v{GENERATOR_VERSION}-seed{seed}-(\d+)\.jsonl")
    larger = sorted(
        (int(m[1]), cache_dir / m[0])
        for m in map(pattern.fullmatch, os.listdir(cache_dir))
        if m and int(m[1]) > passages
    )
    if larger:
        logger.info("cutting %s from %s", path.name, larger[0][1].name)
        return _write_atomically(path, _prefix_lines(larger[0][1], passages))
    logger.info("generating %s", path)
    return _write_atomically(path, _generated(passages, seed))


# --------------------------------------------------------------------------- queries


def _passage_words(contents: str) -> tuple[list[str], list[str]]:
    title, _, text = contents.partition("\n")
    return title.strip('"').lower().split(), text.split()


def question(contents: str, rng: random.Random) -> str:
    """A question about the passage with these ``contents``: see the module docstring."""
    title, text = _passage_words(contents)
    length = rng.randint(3, 12)
    phrase = rng.choice([p for p in WH_PHRASES if len(p.split()) < length] or ["what"]).split()
    room = length - len(phrase)
    words = title[:room] if rng.random() < 0.5 else []
    positions = sorted(rng.sample(range(len(text)), min(room - len(words), len(text))))
    words += [text[i] for i in positions]
    if words and rng.random() < 0.3:
        words[rng.randrange(len(words))] = _outside_word(rng)
    return " ".join(phrase + words) + "?"


def _outside_word(rng: random.Random) -> str:
    # A word of the pseudo-word range picked uniformly among the first million ranks: not
    # tied to the target, frequent or rare.
    rank = len(STOPWORDS) + 1 + rng.randrange(1_000_000)
    return words_as_strings(np.array([rank]))[0]


def variant(query: str, contents: str, rng: random.Random) -> str:
    """The query with a word dropped, one from the target added, or two words swapped."""
    words = query.rstrip("?").split()
    move = rng.choice(("drop", "add", "swap")) if len(words) > 3 else "add"
    if move == "drop":
        del words[rng.randrange(1, len(words))]
    elif move == "add":
        _, text = _passage_words(contents)
        words.insert(rng.randrange(1, len(words) + 1), rng.choice(text))
    else:
        i, j = rng.sample(range(1, len(words)), 2)
        words[i], words[j] = words[j], words[i]
    return " ".join(words) + "?"


def _read_passages(corpus: Path, ids: set[int], chunk_bytes: int = 1 << 26) -> dict[int, str]:
    """The contents of the passages on lines ``ids`` (0-based) of ``corpus``, in one pass that
    finds line ends with numpy, a chunk at a time."""
    wanted = np.array(sorted(ids), dtype=np.int64)
    found: dict[int, str] = {}
    first_line, carry = 0, b""
    with corpus.open("rb") as handle:
        while len(found) < len(wanted):
            chunk = handle.read(chunk_bytes)
            if not chunk:
                break
            data = carry + chunk
            ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
            starts = np.concatenate(([0], ends[:-1] + 1))
            lines = np.arange(first_line, first_line + len(ends))
            for line in wanted[np.isin(wanted, lines, assume_unique=True)]:
                k = int(line - first_line)
                row = json.loads(data[starts[k] : ends[k]])
                found[int(row["id"])] = row["contents"]
            first_line += len(ends)
            carry = data[ends[-1] + 1 :] if len(ends) else data
    return found


def make_queries(corpus: Path, passages: int, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` distinct questions ``{"query", "target"}``, targets uniform over the corpus."""
    rng = random.Random(f"queries-{seed}-{passages}")
    targets = rng.sample(range(passages), count)
    contents = _read_passages(corpus, set(targets))
    rows, seen = [], set()
    for target in targets:
        query = question(contents[target], rng)
        if query not in seen:
            seen.add(query)
            rows.append({"query": query, "target": str(target)})
    return rows


def make_grpo_stream(
    corpus: Path,
    passages: int,
    prompts: int,
    seed: int,
    step: int = 0,
    samples: int = 5,
    turns: int = 3,
    identical: float = 0.6,
) -> list[dict[str, Any]]:
    """GRPO step ``step``'s searches: ``prompts * samples * turns`` rows ``{"query", "target",
    "prompt", "sample", "turn"}`` (see the module docstring)."""
    rng = random.Random(f"grpo-{seed}-{passages}-{step}")
    targets = rng.sample(range(passages), prompts)
    contents = _read_passages(corpus, set(targets))
    rows = []
    for turn in range(turns):
        for prompt, target in enumerate(targets):
            base = question(contents[target], rng)
            for sample in range(samples):
                sent = base if rng.random() < identical else variant(base, contents[target], rng)
                rows.append(
                    {
                        "query": sent,
                        "target": str(target),
                        "prompt": prompt,
                        "sample": sample,
                        "turn": turn,
                    }
                )
    return rows


def _cached_rows(path: Path, make: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    if not path.exists():
        lines = b"".join(json.dumps(row).encode() + b"\n" for row in make())
        _write_atomically(path, iter([lines]))
    with path.open("rb") as handle:
        return [json.loads(line) for line in handle]


def distinct_queries(
    passages: int, count: int = 2000, seed: int = 0, cache_dir: Path = DEFAULT_CACHE
) -> list[dict[str, Any]]:
    """:func:`make_queries` of the ``passages``-passage corpus, cached beside it."""
    corpus = ensure_corpus(passages, seed, cache_dir)
    path = cache_dir / f"{corpus.name.removesuffix('.jsonl')}.queries-{count}.jsonl"
    return _cached_rows(path, lambda: make_queries(corpus, passages, count, seed))


def grpo_stream(
    passages: int, prompts: int = 512, step: int = 0, seed: int = 0, cache_dir: Path = DEFAULT_CACHE
) -> list[dict[str, Any]]:
    """:func:`make_grpo_stream` of the ``passages``-passage corpus, cached beside it."""
    corpus = ensure_corpus(passages, seed, cache_dir)
    stem = corpus.name.removesuffix(".jsonl")
    path = cache_dir / f"{stem}.grpo-{prompts}-step{step}.jsonl"
    return _cached_rows(path, lambda: make_grpo_stream(corpus, passages, prompts, seed, step))


# --------------------------------------------------------------------------- statistics


def corpus_statistics(corpus: Path, limit: int | None = None) -> dict[str, Any]:
    """Passages, tokens (whitespace-split contents, title included), distinct types, hapaxes and
    the share of the most frequent word, over the first ``limit`` passages."""
    counts: dict[str, int] = {}
    passages = tokens = 0
    with corpus.open("rb") as handle:
        for line in handle:
            if limit is not None and passages >= limit:
                break
            words = json.loads(line)["contents"].lower().replace('"', " ").split()
            passages += 1
            tokens += len(words)
            for word in words:
                counts[word] = counts.get(word, 0) + 1
    top = max(counts.items(), key=lambda item: item[1])
    return {
        "passages": passages,
        "tokens": tokens,
        "types": len(counts),
        "hapaxes": sum(1 for c in counts.values() if c == 1),
        "top_word": top[0],
        "top_share": top[1] / tokens,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("corpus", "queries", "stats", "calibration"))
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=2000, help="distinct questions (2000)")
    parser.add_argument("--prompts", type=int, default=512, help="GRPO prompts (512)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    if args.what == "calibration":
        tail = calibrate_tail_exponent()
        law = ZipfLaw(tail)
        per_passage = mean_tokens_per_passage()
        print(f"tokens per passage {per_passage:.2f}, tail exponent {tail:.4f}")
        for n in (1_000_000, 4_000_000, WIKI18_PASSAGES):
            print(f"{n:>10} passages: {law.expected_types(n * per_passage):,.0f} expected types")
    elif args.what == "corpus":
        print(ensure_corpus(args.passages, args.seed, args.cache_dir))
    elif args.what == "queries":
        rows = distinct_queries(args.passages, args.count, args.seed, args.cache_dir)
        stream = grpo_stream(args.passages, args.prompts, 0, args.seed, args.cache_dir)
        unique = len({row["query"] for row in stream})
        print(f"{len(rows)} distinct questions; GRPO stream of {len(stream)}, {unique} unique")
    else:
        corpus = ensure_corpus(args.passages, args.seed, args.cache_dir)
        print(json.dumps(corpus_statistics(corpus, args.passages)))


if __name__ == "__main__":
    main()
