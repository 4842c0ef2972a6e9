"""The on-disk BM25 index (``reward_plugins.search``): corpus checks, the build, the cache, exact
top-k against a brute-force BM25, hostile queries, and ``reward-plugins retriever index``.

Everything is real: tantivy indexes written to temporary directories and reopened, in this
process and in fresh ones. BM25 as tantivy computes it: ``src/query/bm25.rs`` of
github.com/quickwit-oss/tantivy (``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, weight
``idf * (1 + k1)``, ``tf / (tf + k1 * (1 - b + b * dl / avgdl))``, ``k1 = 1.2``, ``b = 0.75``).
"""

from __future__ import annotations

import doctest
import gzip
import json
import logging
import math
import os
import random
import re
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reward_plugins.search.corpus as corpus_module
import reward_plugins.search.index as index_module
from reward_plugins.errors import InvalidInput, RewardPluginsError
from reward_plugins.search.corpus import (
    ID_BATCH,
    CorpusError,
    CorpusStats,
    read_corpus,
    sample_corpus_path,
)
from reward_plugins.search.index import (
    MANIFEST_NAME,
    InvalidIndex,
    SearchIndex,
    analyzer,
    build_index,
    rescore_depth,
)

REPO = Path(__file__).resolve().parents[1]
SMALL = {"heap_mb": 20, "threads": 1}
"""Build options for the small corpora of these tests."""


def write_corpus(path: Path, rows: list[Any], *, raw: list[bytes] | None = None) -> Path:
    """A JSONL corpus of ``rows`` (JSON-encoded), then ``raw`` lines as they are."""
    data = b"".join(json.dumps(row).encode() + b"\n" for row in rows)
    data += b"".join(line + b"\n" for line in raw or [])
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def titles(hits: list[tuple[dict[str, Any], float]]) -> list[str]:
    return [document["contents"].split("\n")[0] for document, _ in hits]


@pytest.fixture(scope="module")
def sample_index(tmp_path_factory: pytest.TempPathFactory) -> SearchIndex:
    return SearchIndex.for_corpus(sample_corpus_path(), cache_dir=tmp_path_factory.mktemp("cache"))


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """A child interpreter importing this checkout, with its own index cache."""
    return {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path / "cache")}


# --- the corpus --------------------------------------------------------------------------------


def test_sample_corpus_is_shipped_and_well_formed() -> None:
    passages = list(read_corpus(sample_corpus_path()))
    assert 150 <= len(passages) <= 300
    assert len({p.id for p in passages}) == len(passages)
    for passage in passages:
        title, newline, text = passage.contents.partition("\n")
        assert title and newline and text and "\n" not in text
        assert json.loads(passage.raw) == {"id": passage.id, "contents": passage.contents}


BAD_LINES = [
    (b"not json", "line 2: not JSON (invalid literal"),
    (b'["1", "A\\nb"]', "line 2: a document is a JSON object, got array"),
    (b'{"contents": "A\\nb"}', "line 2: the document has no 'id' field"),
    (b'{"id": 1, "contents": "A\\nb"}', "line 2: the 'id' field must be a string, got number"),
    (b'{"id": "x"}', "line 2: the document has no 'contents' field"),
    (b'{"id": "x", "contents": null}', "line 2: the 'contents' field must be a string, got null"),
    (b'{"id": "x", "contents": "\\ud800 lone"}', "line 2: a lone surrogate escape, not text"),
    (b'{"id": "x", "contents": "caf\xe9"}', "line 2: not UTF-8 (byte 0xe9 at byte 29)"),
    (b'{"id": "x", "contents": NaN}', "line 2: not JSON"),
    (b'{"id": "0", "contents": "B\\nagain"}', "line 2: id '0' repeats line 1"),
    (b'{"id": "x", "contents": "' + b"a" * (1 << 20) + b'"}', "line 2: longer than 1048576 bytes"),
]


@pytest.mark.parametrize(("line", "message"), BAD_LINES)
def test_bad_lines_are_refused_with_their_line_number(
    tmp_path: Path, line: bytes, message: str
) -> None:
    corpus = write_corpus(
        tmp_path / "corpus.jsonl",
        [{"id": "0", "contents": "A\nfirst"}],
        raw=[line, b'{"id": "9", "contents": "C\\nlast"}'],
    )
    with pytest.raises(CorpusError, match=re.escape(f"{corpus} {message}")) as raised:
        list(read_corpus(corpus))
    assert isinstance(raised.value, RewardPluginsError) and "\n" not in str(raised.value)
    output = tmp_path / "index"
    with pytest.raises(CorpusError, match=re.escape(message)):
        build_index(corpus, output, **SMALL)
    # an interrupted build leaves nothing behind: no index, no temporary directory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl"]


def test_bad_lines_skipped_are_counted_and_later_queries_work(tmp_path: Path) -> None:
    rows = [{"id": str(i), "contents": f"T{i}\nword{i} shared"} for i in range(3)]
    lines = [json.dumps(rows[0]).encode(), *(line for line, _ in BAD_LINES)]
    lines += [json.dumps(row).encode() for row in rows[1:]]
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(b"\n".join(lines) + b"\n")
    stats = CorpusStats()
    passages = list(read_corpus(corpus, "skip", stats))
    assert [p.id for p in passages] == ["0", "1", "2"]
    assert stats.skipped == len(BAD_LINES) and stats.documents == 3
    assert stats.lines == 1 + len(BAD_LINES) + 2
    assert len(stats.skipped_lines) == corpus_module.SHOWN_BAD_LINES
    assert "line 2: not JSON (invalid literal" in stats.skipped_lines[0]
    manifest = build_index(corpus, tmp_path / "index", bad_lines="skip", **SMALL)
    assert manifest["skipped"] == len(BAD_LINES) and manifest["documents"] == 3
    index = SearchIndex(tmp_path / "index")
    # the lone surrogate and the non-UTF-8 lines are not in the index: every query answers
    for query in ["lone", "café", "caf", "again", "shared word1"]:
        [hits] = index.search([query], 5)
        assert all(document["id"] in {"0", "1", "2"} for document, _ in hits)
    [best, *_] = index.search(["word1 shared"], 5)[0]
    assert best[0]["id"] == "1"


def test_repeated_ids_across_batches_and_gzip(tmp_path: Path) -> None:
    rows = [{"id": f"doc-{i}", "contents": f"T\nw{i}"} for i in range(ID_BATCH + 10)]
    rows.append({"id": "doc-3", "contents": "T\nagain"})
    corpus = write_corpus(tmp_path / "c.jsonl.gz", rows)
    with pytest.raises(CorpusError, match=rf"line {ID_BATCH + 11}: id 'doc-3' repeats line 4$"):
        list(read_corpus(corpus))
    stats = CorpusStats()
    assert sum(1 for _ in read_corpus(corpus, "skip", stats)) == ID_BATCH + 10
    assert stats.skipped == 1 and stats.crc32 != 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "the corpus has no documents"),
        (b"\n  \n", "the corpus has no documents"),
        (b"\x1f\x8b\x08\x00garbage", "not a readable gzip file"),
        (gzip.compress(b'{"id": "1", "contents": "A"}\n' * 100)[:-30], "not a readable gzip"),
    ],
)
def test_empty_and_corrupt_files(tmp_path: Path, data: bytes, message: str) -> None:
    corpus = tmp_path / "c.jsonl.gz"
    corpus.write_bytes(data if data.startswith(b"\x1f") else gzip.compress(data))
    with pytest.raises(CorpusError, match=message):
        list(read_corpus(corpus))


def test_read_corpus_checks_its_policy(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="bad_lines: expected one of"):
        list(read_corpus(sample_corpus_path(), "ignore"))


# --- the index ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is the capital of France?", ["Paris", "France", "Tour de France"]),
        ("Who wrote Hamlet?", ["Hamlet", "William Shakespeare", "Ernest Hemingway"]),
        ("Which river flows through Vienna?", ["Vienna", "Danube", "Prague"]),
        ("Who painted the Mona Lisa?", ["Mona Lisa", "Leonardo da Vinci", "Louvre"]),
        ("Which band recorded Abbey Road?", ["Abbey Road", "The Beatles", "Pink Floyd"]),
        ("What is the largest planet?", ["Jupiter", "Saturn", "Mercury (planet)"]),
    ],
)
def test_sample_questions_find_their_passage_first(
    sample_index: SearchIndex, question: str, expected: list[str]
) -> None:
    (hits,) = sample_index.search([question], 3)
    assert titles(hits) == expected
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0


def test_bm25_score_by_hand(tmp_path: Path) -> None:
    # analyzed: [pari, pari, capit, franc] (4 tokens), [vienna, danub, flow, through, vienna] (5)
    rows = [
        {"id": "p", "contents": "Paris\nParis is the capital of France."},
        {"id": "v", "contents": "Vienna\nThe Danube flows through Vienna.", "url": "kept"},
    ]
    build_index(write_corpus(tmp_path / "c.jsonl", rows), tmp_path / "index", **SMALL)
    index = SearchIndex(tmp_path / "index")
    assert len(index) == 2
    idf = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    avgdl = 4.5
    capital = idf * 2.2 * 1 / (1 + 1.2 * (0.25 + 0.75 * 4 / avgdl))
    vienna = idf * 2.2 * 2 / (2 + 1.2 * (0.25 + 0.75 * 5 / avgdl))
    [[(document, score)]] = index.search(["the capitals?"], 5)
    assert document == rows[0] and score == pytest.approx(capital, rel=1e-6)
    [[(document, score)]] = index.search(["VIENNA"], 1)
    assert document == rows[1] and score == pytest.approx(vienna, rel=1e-6)  # extra field kept
    # a term said twice counts twice, as in pyserini's bag-of-words query
    [[(_, twice)]] = index.search(["vienna Vienna"], 1)
    assert twice == pytest.approx(2 * vienna, rel=1e-6)
    # topk above the corpus size is clipped; only documents sharing a term are returned
    both = index.search(["paris vienna", "the of a", "", "zzz", "Paris ünïcödé"], 10)
    assert [[d["id"] for d, _ in hits] for hits in both] == [["p", "v"], [], [], [], ["p"]]
    assert index.search([], 3) == []


def brute_force(documents: list[list[str]], query: list[str], topk: int) -> list[tuple[float, int]]:
    """BM25 of every document for ``query``, exhaustively, best ``topk`` (score, position)."""
    n = len(documents)
    avgdl = sum(map(len, documents)) / n
    frequencies = [Counter(document) for document in documents]
    df = Counter(term for counts in frequencies for term in counts)
    scores = []
    for position, (document, counts) in enumerate(zip(documents, frequencies, strict=True)):
        score = 0.0
        for term, said in Counter(query).items():
            tf = counts.get(term, 0)
            if tf:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                norm = tf / (tf + 1.2 * (1 - 0.75 + 0.75 * len(document) / avgdl))
                score += said * idf * 2.2 * norm
        if score > 0:
            scores.append((score, position))
    return sorted(scores, key=lambda pair: -pair[0])[:topk]


VOCABULARY = [
    "apple",
    "river",
    "stone",
    "cloud",
    "ember",
    "frost",
    "grove",
    "harbor",
    "island",
    "jungle",
    "kettle",
]


def random_index(
    directory: Path, generator: random.Random, most: int, common_df: float | None = None
) -> tuple[SearchIndex, list[list[str]]]:
    """An index of 5 to ``most`` Zipfian texts of ``VOCABULARY``, and their analyzed tokens (up
    to 40 per text: tantivy stores those lengths exactly, one byte per norm)."""
    weights = [1 / (rank + 1) for rank in range(len(VOCABULARY))]
    texts = [
        " ".join(generator.choices(VOCABULARY, weights, k=generator.randint(1, 40)))
        for _ in range(generator.randint(5, most))
    ]
    rows = [{"id": str(i), "contents": text} for i, text in enumerate(texts)]
    build_index(write_corpus(directory / "c.jsonl", rows), directory / "index", **SMALL)
    index = SearchIndex(directory / "index", common_df=common_df)
    return index, [analyzer().analyze(text) for text in texts]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), topk=st.integers(1, 12))
def test_exact_topk_equals_brute_force_bm25(
    tmp_path_factory: pytest.TempPathFactory, seed: int, topk: int
) -> None:
    generator = random.Random(seed)
    index, tokens = random_index(tmp_path_factory.mktemp("differential"), generator, 120)
    for _ in range(5):
        query = " ".join(generator.choices(VOCABULARY, k=generator.randint(1, 6)))
        expected = brute_force(tokens, analyzer().analyze(query), topk)
        [hits] = index.search([query], topk)
        assert [score for _, score in hits] == pytest.approx([s for s, _ in expected], rel=1e-5)
        for document, score in hits:  # ties may be ordered either way: each score is its own
            [own] = [s for s, p in brute_force(tokens, analyzer().analyze(query), 10**6)
                     if str(p) == document["id"]]  # fmt: skip
            assert score == pytest.approx(own, rel=1e-5)


def common_df_rule(
    documents: list[list[str]], query: list[str], topk: int, common_df: float
) -> tuple[list[tuple[float, int]], bool]:
    """What ``common_df`` promises, by brute force: the exact top ``topk`` when every term is
    rare or every term common; else the passages with a rare term, by full BM25, and whether
    they number at most the rescore depth (then the top ``topk`` of them are exact)."""
    n = len(documents)
    df = Counter(term for document in documents for term in set(document))
    rare = {term for term in query if df[term] <= common_df * n}
    if not rare or rare == set(query):
        return brute_force(documents, query, topk), True
    with_rare = {p for p, document in enumerate(documents) if rare & set(document)}
    full = [(s, p) for s, p in brute_force(documents, query, n) if p in with_rare]
    return full[:topk], len(with_rare) <= rescore_depth(topk)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), topk=st.integers(1, 5), common_df=st.floats(0.05, 1.0))
def test_common_df_rescores_the_passages_of_the_rare_terms(
    tmp_path_factory: pytest.TempPathFactory, seed: int, topk: int, common_df: float
) -> None:
    generator = random.Random(seed)
    directory = tmp_path_factory.mktemp("common")
    index, tokens = random_index(directory, generator, 60, common_df)
    for _ in range(5):
        words = " ".join(generator.choices(VOCABULARY, k=generator.randint(1, 6)))
        query = analyzer().analyze(words)
        expected, exact = common_df_rule(tokens, query, topk, common_df)
        [hits] = index.search([words], topk)
        own = {str(p): s for s, p in brute_force(tokens, query, len(tokens))}
        for document, score in hits:  # every score is the passage's full BM25
            assert score == pytest.approx(own[document["id"]], rel=1e-5)
        assert [score for _, score in hits] == sorted((s for _, s in hits), reverse=True)
        if exact:
            assert [s for _, s in hits] == pytest.approx([s for s, _ in expected], rel=1e-5)


def test_common_df_misses_passages_with_only_common_terms(tmp_path: Path) -> None:
    rows = [{"id": str(i), "contents": f"River {'harbor' if i == 7 else 'stone'}"}
            for i in range(10)]  # fmt: skip
    build_index(write_corpus(tmp_path / "c.jsonl", rows), tmp_path / "index", **SMALL)
    exact = SearchIndex(tmp_path / "index")
    common = SearchIndex(tmp_path / "index", common_df=0.5)  # "river" is in every passage
    [everything] = exact.search(["river harbor"], 3)
    [rare_first] = common.search(["river harbor"], 3)
    assert everything[0][0]["id"] == "7" and len(everything) == 3
    assert rare_first == everything[:1]  # its full score; the "river"-only passages are missed
    assert common.search(["river"], 3) == exact.search(["river"], 3)  # common terms only: exact
    every_term_rare = SearchIndex(tmp_path / "index", common_df=0.95)  # "stone": 9 of 10
    assert every_term_rare.search(["harbor stone"], 3) == exact.search(["harbor stone"], 3)


@pytest.mark.parametrize("common_df", [0, -0.1, 1.5, math.nan, math.inf, True, "0.1"])
def test_common_df_must_be_a_share(sample_index: SearchIndex, common_df: Any) -> None:
    with pytest.raises(InvalidInput, match=r"^common_df: expected a share of the passages"):
        SearchIndex(sample_index.path, common_df=common_df)


@pytest.mark.parametrize(
    "query",
    [
        'AND ( "',
        "title:x",
        "contents:paris",
        "*",
        "paris~2",
        "paris^10 OR NOT france",
        "[a TO z]",
        "\\",
        "\x00\x01\x7f",
        "the of a and",
        "a" * 5000,
        "Zürich 東京 🙂",
        " ".join(["paris"] * 2000),
    ],
)
def test_hostile_queries_are_plain_words(sample_index: SearchIndex, query: str) -> None:
    [hits] = sample_index.search([query], 3)
    words = [t for t in analyzer().analyze(query)]
    if not words:
        assert hits == []
    for document, _ in hits:
        analyzed = set(analyzer().analyze(document["contents"]))
        assert analyzed & set(words)  # a hit shares an analyzed word: no query syntax ran


def test_query_syntax_is_not_parsed(sample_index: SearchIndex) -> None:
    assert sample_index.terms("title:x AND ( paris") == (("pari", 1), ("titl", 1), ("x", 1))
    assert sample_index.terms("paris^10") == (("10", 1), ("pari", 1))
    with pytest.raises(InvalidInput, match="a lone surrogate at character 0"):
        sample_index.search(["\ud800 paris"], 3)


@pytest.mark.parametrize(
    ("queries", "topk", "message"),
    [
        ("paris", 3, "queries: expected a list of str"),
        (["paris", 3], 3, "queries: expected a list of str"),
        (["paris"], 0, "topk: expected an int of at least 1, got 0"),
        (["paris"], True, "topk: expected an int of at least 1, got True"),
        (["paris"], 2.0, "topk: expected an int of at least 1, got 2.0"),
    ],
)
def test_search_rejects_bad_arguments(
    sample_index: SearchIndex, queries: Any, topk: Any, message: str
) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        sample_index.search(queries, topk)


def test_index_reopens_in_a_fresh_process(tmp_path: Path, cli_env: dict[str, str]) -> None:
    build_index(sample_corpus_path(), tmp_path / "index", **SMALL)
    script = (
        "import json, sys\n"
        "from reward_plugins.search.index import SearchIndex\n"
        "index = SearchIndex(sys.argv[1])\n"
        "hits = index.search(['Who wrote Hamlet?'], 2)[0]\n"
        "print(json.dumps([len(index), [[d['id'], s] for d, s in hits]]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "index")],
        capture_output=True, text=True, env=cli_env, timeout=120, check=True,
    )  # fmt: skip
    size, hits = json.loads(result.stdout)
    here = SearchIndex(tmp_path / "index").search(["Who wrote Hamlet?"], 2)[0]
    assert size == 228 and hits == [[d["id"], pytest.approx(s)] for d, s in here]


def test_manifest_and_refusals(tmp_path: Path) -> None:
    corpus = sample_corpus_path()
    manifest = build_index(corpus, tmp_path / "index", **SMALL)
    assert json.loads((tmp_path / "index" / MANIFEST_NAME).read_text()) == manifest
    assert manifest["format_version"] == index_module.FORMAT_VERSION
    assert manifest["documents"] == 228 and manifest["skipped"] == 0
    assert manifest["bm25"] == {"k1": 1.2, "b": 0.75}
    assert manifest["analyzer"]["stemmer"] == "english (Snowball Porter2)"
    assert manifest["corpus"]["size"] == corpus.stat().st_size
    assert manifest["corpus"]["crc32"] == index_module.file_fingerprint(corpus)["crc32"]
    with pytest.raises(InvalidIndex, match="already exists"):
        build_index(corpus, tmp_path / "index", **SMALL)
    small = write_corpus(tmp_path / "small.jsonl", [{"id": "a", "contents": "T\nonly"}])
    assert build_index(small, tmp_path / "index", replace=True, **SMALL)["documents"] == 1
    assert len(SearchIndex(tmp_path / "index")) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    # a directory without the manifest (an interrupted build) or of another format is refused
    (tmp_path / "index" / MANIFEST_NAME).unlink()
    with pytest.raises(InvalidIndex, match=r"no reward-plugins-index\.json: not a complete index"):
        SearchIndex(tmp_path / "index")
    (tmp_path / "index" / MANIFEST_NAME).write_text(json.dumps({**manifest, "format_version": 0}))
    with pytest.raises(InvalidIndex, match="index format 0, this version reads 1; rebuild it"):
        SearchIndex(tmp_path / "index")
    with pytest.raises(InvalidIndex, match="not an index directory"):
        SearchIndex(tmp_path / "missing")
    for options, message in [
        ({"heap_mb": 10, "threads": 1}, "heap_mb: 1 indexing thread(s) need between 15 and"),
        ({"threads": 0}, "threads: expected an int of at least 1, got 0"),
        ({"bad_lines": "ignore"}, "bad_lines: expected one of"),
    ]:
        with pytest.raises(InvalidInput, match=re.escape(message)):
            build_index(corpus, tmp_path / "other", **options)


def test_cache_reuses_and_rebuilds(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c.jsonl", [{"id": "a", "contents": "T\napple"}])
    cache = tmp_path / "cache"
    first = SearchIndex.for_corpus(corpus, cache_dir=cache)
    built = (first.path / MANIFEST_NAME).stat().st_mtime_ns
    again = SearchIndex.for_corpus(corpus, cache_dir=cache)
    assert again.path == first.path and (again.path / MANIFEST_NAME).stat().st_mtime_ns == built
    write_corpus(corpus, [{"id": "a", "contents": "T\napple"}, {"id": "b", "contents": "U\npear"}])
    changed = SearchIndex.for_corpus(corpus, cache_dir=cache)
    assert changed.path != first.path and len(changed) == 2
    assert sorted(p.name for p in cache.iterdir()) == sorted([first.path.name, changed.path.name])


def test_default_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert index_module.default_cache_dir() == tmp_path / "reward-plugins" / "indexes"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert index_module.default_cache_dir() == Path.home() / ".cache/reward-plugins/indexes"


def test_docstring_examples(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for module in (corpus_module, index_module):
        failures, tried = doctest.testmod(module)
        assert tried > 0 and failures == 0, module.__name__


def test_search_imports_without_tantivy(cli_env: dict[str, str]) -> None:
    script = (
        "import sys; sys.modules['tantivy'] = None\n"
        "from reward_plugins.search.index import SearchIndex\n"
        "try:\n"
        "    SearchIndex('anywhere')\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=cli_env, check=True
    )
    assert result.stdout == (
        "the BM25 retriever needs the tantivy package: pip install 'reward-plugins[search]'\n"
    )


# --- the command line --------------------------------------------------------------------------


def run_cli(arguments: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "reward_plugins", "retriever", *arguments],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=120,
    )  # fmt: skip


def test_cli_index_builds_quietly_or_with_a_progress_bar(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    corpus = tmp_path / "c.jsonl.gz"
    write_corpus(corpus, [{"id": str(i), "contents": f"T{i}\nword {i}"} for i in range(50)])
    result = run_cli(["index", str(corpus), "-o", "index", "-q"], cli_env, tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    assert re.fullmatch(
        rf"indexed 50 documents of {re.escape(str(corpus))} into index in \d+\.\d s\n",
        result.stdout,
    )
    assert len(SearchIndex(tmp_path / "index")) == 50
    assert run_cli(["index", str(corpus), "-o", "index"], cli_env, tmp_path).returncode == 2
    result = run_cli(["index", str(corpus), "-o", "index", "--force"], cli_env, tmp_path)
    assert result.returncode == 0 and result.stderr == ""  # no terminal: no progress bar


def test_progress_bar_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_index(sample_corpus_path(), tmp_path / "index", progress=True, **SMALL)
    shown = capsys.readouterr().err
    assert shown.startswith("\rindexing: ") and "B/s]" in shown  # drawn over the file's bytes
    assert shown.endswith("\r") and shown.rsplit("\r", 2)[1].strip() == ""  # then erased


def test_cli_index_skips_bad_lines_when_asked(tmp_path: Path, cli_env: dict[str, str]) -> None:
    corpus = write_corpus(
        tmp_path / "c.jsonl", [{"id": "a", "contents": "T\nx"}], raw=[b"{oops", b"[]"]
    )
    result = run_cli(["index", str(corpus), "-o", "i", "-q", "--bad-lines", "skip"], cli_env,
                     tmp_path)  # fmt: skip
    assert result.returncode == 0 and result.stdout.endswith(", skipped 2 bad line(s)\n")
    assert "skipped " in result.stderr and "line 2: not JSON" in result.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["missing.jsonl", "-o", "i"], "retriever index: missing.jsonl: No such file or directory"),
        (
            ["bad.jsonl", "-o", "i"],
            "retriever index: bad.jsonl line 2: the 'contents' field must be a string, got number",
        ),
        (["good.jsonl", "-o", "good.jsonl"], "retriever index: good.jsonl already exists"),
        (["good.jsonl", "-o", "i", "--heap-mb", "1"], "retriever index: heap_mb: "),
        (["good.jsonl"], "retriever index: the following arguments are required: -o/--output"),
        (["good.jsonl", "-o", "i", "--bad-lines", "x"], "retriever index: argument --bad-lines"),
    ],
)
def test_cli_index_errors_are_one_line(
    tmp_path: Path, cli_env: dict[str, str], arguments: list[str], message: str
) -> None:
    write_corpus(tmp_path / "good.jsonl", [{"id": "a", "contents": "T\nx"}])
    write_corpus(
        tmp_path / "bad.jsonl", [{"id": "a", "contents": "T\nx"}, {"id": "b", "contents": 5}]
    )
    result = run_cli(["index", *arguments], cli_env, tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"reward-plugins: error: {message}"), lines
    assert not (tmp_path / "i").exists()


def test_concurrent_builds_of_one_cache_entry_agree(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Three openings of one new cache entry at once: it is built once (the others wait for
    the build turn, then open it), and all three open the same index."""
    caplog.set_level(logging.INFO, logger="reward_plugins.search.index")
    corpus = write_corpus(
        tmp_path / "c.jsonl", [{"id": str(i), "contents": f"T\nword{i}"} for i in range(2000)]
    )
    cache = tmp_path / "cache"
    opened: list[SearchIndex] = []
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            opened.append(SearchIndex.for_corpus(corpus, cache_dir=cache))
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=open_it) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len({index.path for index in opened}) == 1
    assert [p.name for p in cache.iterdir()] == [opened[0].path.name]  # no leftovers
    assert all(len(index) == 2000 for index in opened)
    assert [r.getMessage().split()[0] for r in caplog.records].count("indexing") == 1
