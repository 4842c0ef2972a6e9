"""An embedded BM25 retriever that answers Search-R1's retrieval protocol over HTTP.

Search-R1 (github.com/PeterGriffinJin/Search-R1, ``search_r1/search/retrieval_server.py``) trains
agents against a retrieval server that answers ``POST /retrieve``::

    request:  {"queries": [str, ...], "topk": int, "return_scores": bool}
    response: {"result": [per query: [{"document": {"id": ..., "contents": ...}, "score": float},
                                      ...]]}

and, with ``"return_scores": false`` (the default), each query's list holds the document objects
alone. A document's ``contents`` is its title on the first line and the passage after it. This
module serves a small corpus that way with BM25 (the ``bm25s`` package), so that a search agent
can be trained or tested without the multi-gigabyte Wikipedia index and dense encoder of the
original setup: :class:`BM25Index` holds the corpus, :func:`make_server` binds a server and
:func:`serve` runs one (``reward-plugins retriever serve`` on the command line).

Tokenization (documents and queries alike) is ``bm25s.tokenize`` with its defaults apart from the
stopwords: lower-cased, words of two or more word characters (the regex ``(?u)\\b\\w\\w+\\b`` of
scikit-learn's ``CountVectorizer``), English stopwords removed, no stemming. Scoring is bm25s's
default BM25 variant (Lucene's, k1=1.5, b=0.75). Like Search-R1's own BM25 retriever (pyserini),
a query gets only the documents that share at least one term with it, so it may get fewer than
``topk`` documents (none for a query made of stopwords only).

``bm25s`` is imported when an index is built, so this module imports without it; install it with
``pip install 'reward-plugins[search]'``.
"""

from __future__ import annotations

import importlib
import json
import socket
import threading
from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from reward_plugins.errors import InvalidInput

DEFAULT_TOPK = 3
"""Documents per query when a request gives no ``topk`` (Search-R1's training default)."""

RETRIEVE_PATH = "/retrieve"
MAX_REQUEST_BYTES = 16 * 1024 * 1024
"""Larger request bodies are refused with 413."""

SEARCH_EXTRA = "pip install 'reward-plugins[search]'"

Document = dict[str, Any]
"""A corpus row as read: at least ``id`` (str) and ``contents`` (str, title on the first line)."""


def sample_corpus_path() -> Path:
    """The installed path of the shipped sample corpus (228 short encyclopedia passages).

    Example:
        >>> sample_corpus_path().name
        'sample_corpus.jsonl'
    """
    return Path(str(resources.files("reward_plugins") / "data" / "corpus" / "sample_corpus.jsonl"))


def _bm25s() -> Any:
    try:
        return importlib.import_module("bm25s")
    except ImportError:
        raise ImportError(f"the BM25 retriever needs the bm25s package: {SEARCH_EXTRA}") from None


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """The tokens BM25 indexes and matches: bm25s's tokenizer, English stopwords, no stemming.

    Example:
        >>> tokenize(["What is the capital of France?"])
        [['what', 'capital', 'france']]
    """
    tokens: list[list[str]] = _bm25s().tokenize(
        list(texts), stopwords="en", return_ids=False, show_progress=False
    )
    return tokens


def check_document(row: Any, where: str) -> Document:
    """``row`` if it is a corpus document (a mapping with str ``id`` and str ``contents``).

    Raises :class:`InvalidInput` naming ``where`` (e.g. ``corpus.jsonl line 3``) and the field.

    Example:
        >>> check_document({"id": "7", "contents": "Paris\\nThe capital."}, "row 1")["id"]
        '7'
    """
    if not isinstance(row, Mapping):
        raise InvalidInput(f"{where}: a document is a JSON object, got {type(row).__name__}")
    for field in ("id", "contents"):
        if field not in row:
            raise InvalidInput(f"{where}: the document has no {field!r} field")
        if not isinstance(row[field], str):
            raise InvalidInput(
                f"{where}: the {field!r} field must be a str, got {type(row[field]).__name__}"
            )
    return dict(row)


def read_corpus(path: str | Path) -> list[Document]:
    """The documents of a JSON Lines corpus, one object per line (blank lines skipped).

    Raises :class:`InvalidInput` for a line that is not JSON or not a document, naming the line
    and the field, for a repeated ``id`` and for a corpus with no documents; ``OSError`` when the
    file cannot be read.
    """
    documents: list[Document] = []
    seen: dict[str, int] = {}
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path} line {number}"
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as error:
                raise InvalidInput(f"{where}: not a JSON object ({error})") from None
            document = check_document(row, where)
            if document["id"] in seen:
                raise InvalidInput(
                    f"{where}: id {document['id']!r} repeats line {seen[document['id']]}"
                )
            seen[document["id"]] = number
            documents.append(document)
    if not documents:
        raise InvalidInput(f"{path}: the corpus has no documents")
    return documents


class BM25Index:
    """A BM25 index over documents of Search-R1's corpus format, safe to search from threads.

    Args:
        documents: mappings with str ``id`` and str ``contents`` (title, newline, passage); the
            whole ``contents`` is indexed. Other fields are kept and returned with the document.

    Example:
        >>> index = BM25Index([
        ...     {"id": "1", "contents": "Paris\\nParis is the capital of France."},
        ...     {"id": "2", "contents": "Vienna\\nThe Danube flows through Vienna."},
        ... ])
        >>> [(doc["id"], round(score, 3)) for doc, score in index.search(["capital"], 3)[0]]
        [('1', 0.292)]
    """

    def __init__(self, documents: Iterable[Mapping[str, Any]]) -> None:
        self.documents: list[Document] = [
            check_document(row, f"document {number}") for number, row in enumerate(documents)
        ]
        if not self.documents:
            raise InvalidInput("documents: the corpus has no documents")
        tokens = tokenize([d["contents"] for d in self.documents])
        if not any(tokens):
            shown = ", ".join(d["contents"] for d in self.documents[:3])
            raise InvalidInput(f"documents: the corpus has no word to index: {shown}")
        self._model = _bm25s().BM25()
        self._model.index(tokens, show_progress=False)
        self._lock = threading.Lock()

    @classmethod
    def from_jsonl(cls, path: str | Path) -> BM25Index:
        """The index of a JSON Lines corpus (see :func:`read_corpus` for the checks)."""
        return cls(read_corpus(path))

    def __len__(self) -> int:
        return len(self.documents)

    def search(self, queries: Sequence[str], topk: int) -> list[list[tuple[Document, float]]]:
        """Per query, up to ``topk`` ``(document, score)`` pairs, best first, scores > 0.

        Raises :class:`InvalidInput` when ``queries`` is not a sequence of str or ``topk`` is not
        an int of at least 1.
        """
        if isinstance(queries, str) or not all(isinstance(q, str) for q in queries):
            raise InvalidInput("queries: expected a list of str")
        if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
            raise InvalidInput(f"topk: expected an int of at least 1, got {topk!r}")
        if not queries:
            return []
        k = min(topk, len(self.documents))
        tokens = tokenize(queries)
        with self._lock:
            rows, scores = self._model.retrieve(tokens, k=k, show_progress=False)
        return [
            [
                (self.documents[int(row)], float(score))
                for row, score in zip(query_rows, query_scores, strict=True)
                if score > 0
            ]
            for query_rows, query_scores in zip(rows, scores, strict=True)
        ]


class BadRequest(Exception):
    """A request the server refuses; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = status


def parse_request(payload: Any, default_topk: int) -> tuple[list[str], int, bool]:
    """``(queries, topk, return_scores)`` of a decoded ``/retrieve`` body, or :class:`BadRequest`.

    ``topk`` absent or null takes ``default_topk``; ``return_scores`` absent is false, as in
    Search-R1's ``QueryRequest``.

    Example:
        >>> parse_request({"queries": ["who wrote hamlet"]}, 3)
        (['who wrote hamlet'], 3, False)
    """
    if not isinstance(payload, dict):
        raise BadRequest(f"the body must be a JSON object, got {type(payload).__name__}")
    queries = payload.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        kind = "missing" if "queries" not in payload else f"a {type(queries).__name__}"
        raise BadRequest(f"'queries' must be a list of strings, got {kind}")
    topk = payload.get("topk")
    if topk is None:
        topk = default_topk
    if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
        raise BadRequest(f"'topk' must be an integer of at least 1, got {topk!r}")
    return_scores = payload.get("return_scores", False)
    if not isinstance(return_scores, bool):
        raise BadRequest(f"'return_scores' must be true or false, got {return_scores!r}")
    return queries, topk, return_scores


def answer(index: BM25Index, payload: Any, default_topk: int = DEFAULT_TOPK) -> dict[str, Any]:
    """The ``/retrieve`` response body for a decoded request body, in Search-R1's shape.

    Example:
        >>> index = BM25Index([{"id": "1", "contents": "Hamlet\\nA play by Shakespeare."}])
        >>> answer(index, {"queries": ["hamlet"], "return_scores": False})
        {'result': [[{'id': '1', 'contents': 'Hamlet\\nA play by Shakespeare.'}]]}
    """
    queries, topk, return_scores = parse_request(payload, default_topk)
    hits = index.search(queries, topk)
    if return_scores:
        return {
            "result": [
                [{"document": document, "score": score} for document, score in query_hits]
                for query_hits in hits
            ]
        }
    return {"result": [[document for document, _ in query_hits] for query_hits in hits]}


class RetrievalServer(ThreadingHTTPServer):
    """A threaded HTTP server of one :class:`BM25Index`; ``url`` is its ``/retrieve`` address."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], index: BM25Index, topk: int) -> None:
        self.index = index
        self.topk = topk
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _RetrieveHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = host if isinstance(host, str) else host.decode()
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}{RETRIEVE_PATH}"


class _RetrieveHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: aiohttp clients reuse connections
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed ACK
    server: RetrievalServer

    def do_POST(self) -> None:
        if urlsplit(self.path).path != RETRIEVE_PATH:
            self._refuse(BadRequest(f"no such path: {self.path}", HTTPStatus.NOT_FOUND))
            return
        try:
            payload = json.loads(self._body())
        except BadRequest as error:
            self._refuse(error)
            return
        except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
            self._refuse(BadRequest(f"the body is not JSON: {error}"))
            return
        try:
            body = answer(self.server.index, payload, self.server.topk)
        except BadRequest as error:
            self._refuse(error)
            return
        self._send(HTTPStatus.OK, body)

    def do_GET(self) -> None:
        if urlsplit(self.path).path == RETRIEVE_PATH:
            self._refuse(BadRequest("use POST", HTTPStatus.METHOD_NOT_ALLOWED))
        else:
            self._refuse(BadRequest(f"no such path: {self.path}", HTTPStatus.NOT_FOUND))

    def _body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise BadRequest(
                "the request needs a Content-Length header", HTTPStatus.LENGTH_REQUIRED
            )
        if int(length) > MAX_REQUEST_BYTES:
            raise BadRequest(
                f"the body is over {MAX_REQUEST_BYTES} bytes", HTTPStatus.REQUEST_ENTITY_TOO_LARGE
            )
        return self.rfile.read(int(length))

    def _refuse(self, error: BadRequest) -> None:
        self.close_connection = True  # the body may be unread
        self._send(error.status, {"error": str(error)})

    def _send(self, status: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """No access log (the server runs inside training jobs and tests)."""


def make_server(
    index: BM25Index, host: str = "127.0.0.1", port: int = 8000, topk: int = DEFAULT_TOPK
) -> RetrievalServer:
    """A bound :class:`RetrievalServer` (port 0: a free port, see ``server.url``), not yet serving.

    Run it with ``server.serve_forever()`` (in a thread if need be), stop it with
    ``server.shutdown()`` and ``server.server_close()``.
    """
    if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
        raise InvalidInput(f"topk: expected an int of at least 1, got {topk!r}")
    return RetrievalServer((host, port), index, topk)


def serve(
    index: BM25Index, host: str = "127.0.0.1", port: int = 8000, topk: int = DEFAULT_TOPK
) -> None:
    """Answer ``POST /retrieve`` on ``host:port`` until interrupted (blocks)."""
    with make_server(index, host, port, topk) as server:
        server.serve_forever()
