"""A verl tool that searches a Search-R1 retrieval server: ``reward_plugins.tools.SearchTool``.

verl dropped its own Search-R1 search tool and asks users to provide one; this is one for verl's
tool agent loop (``verl/experimental/agent_loop/tool_agent_loop.py``), declared in a tool config
YAML (``reward-plugins path tool-config`` prints the shipped one)::

    tools:
      - class_name: reward_plugins.tools.SearchTool
        config: {type: native, retrieval_service_url: "http://127.0.0.1:8000/retrieve", topk: 3}
        tool_schema: {type: function, function: {name: search, ...}}

The server is any that speaks Search-R1's protocol (github.com/PeterGriffinJin/Search-R1,
``search_r1/search/retrieval_server.py``), such as ``reward-plugins retriever serve``. The tool
formats the documents as Search-R1's rollout does (``search_r1/llm_agent/generation.py``,
``_passages2string``): one line ``Doc {i}(Title: {title}) {text}`` per document, ``i`` from 1;
the results of several queries of one call are separated by a ``---`` line. A
``</tool_response>`` or ``</information>`` in the text is written ``</tool_response >``
(:func:`defuse`), so a document cannot close the tool turn and pose as the model's answer.
The arguments it runs are those of :mod:`reward_plugins.tool_schema`.

Config keys (all optional; verl builds the tool at start, and an unknown key, a key that is not
a string or a value out of range raises :class:`~reward_plugins.errors.InvalidOption` then):

- ``retrieval_service_url`` (``http://127.0.0.1:8000/retrieve``): the server's endpoint, or a
  list of up to :data:`MAX_URLS` endpoints. Calls start at the next URL in turn (round robin),
  and a connection error, a timeout or an HTTP 429/5xx answer moves the call on to the next URL
  at once. The environment variable :data:`URL_VARIABLE` (one URL, or several separated by
  commas or spaces), when set and not empty, replaces this key: it is read when the tool is
  built, in the process that builds it.
- ``topk`` (3, 1..100): documents asked for per query.
- ``timeout`` (30, seconds in (0, 3600]): the deadline of one request: waiting for a free
  request slot (``max_concurrency``), connecting and reading the whole answer.
- ``retries`` (2, 0..10): further rounds over the URLs after a round in which every URL failed
  with a connection error, a timeout or an HTTP 429/5xx answer, after ``backoff * 2**n``
  seconds (n = 0, 1, ...); other failures are not retried. A call thus sends at most
  ``(retries + 1) x URLs`` requests.
- ``backoff`` (0.5, seconds in [0, 60]): seconds before the first retry round.
- ``max_concurrency`` (16, 1..1024): requests in flight at once *per process*. verl builds one
  tool per agent-loop worker process (``verl/experimental/agent_loop/agent_loop.py``), so a
  cluster sends at most ``actor_rollout_ref.rollout.agent.num_workers x max_concurrency``
  requests at once (verl's default of 8 workers: 128); size the retrieval server for that.
- ``max_response_bytes`` (4 MiB, 1 KiB..256 MiB): the most bytes an answer may take on the
  wire, and again once inflated (gzip or deflate). A larger answer, a decompression bomb or an
  endless stream is cut there and fails the call with ``too_large`` (not retried: the server
  would send the same).

A failed search never raises into the agent loop: the model gets a one-line text that starts
with ``Search failed:`` (the reward is 0), and the metrics and ``agent_data.extra_fields`` record
the error, so a retriever hiccup does not stop training.

The tool keeps one aiohttp session per event loop (connections are reused by every call that
overlaps another); it is closed when the last open instance is released (verl creates and
releases an instance around every call) or by :meth:`SearchTool.close`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import numbers
import os
import re
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit
from uuid import uuid4

from reward_plugins.errors import InvalidOption, RewardPluginsError
from reward_plugins.options import is_finite_number
from reward_plugins.tool_schema import DEFAULT_SCHEMA, parse_parameters

try:
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
    from verl.utils.rollout_trace import rollout_trace_op
except ImportError as error:  # pragma: no cover - exercised only without verl
    raise ImportError(
        f"reward_plugins.tools needs verl (pip install 'reward-plugins[verl]'): {error}"
    ) from None
try:
    import aiohttp
except ImportError:  # pragma: no cover - exercised only without aiohttp
    raise ImportError(
        "reward_plugins.tools needs aiohttp: pip install 'reward-plugins[search]'"
    ) from None

logger = logging.getLogger(__name__)

QUERY_SEPARATOR = "\n---\n"
NO_DOCUMENTS = "No documents found."
EXTRA_FIELDS = ("search_queries", "search_documents", "search_latency_s", "search_errors")
"""The ``agent_data.extra_fields`` keys :meth:`SearchTool.execute` appends to (lists)."""
URL_VARIABLE = "REWARD_PLUGINS_RETRIEVAL_URL"
"""The environment variable that, when set and not empty, replaces ``retrieval_service_url``."""
MAX_URLS = 64
MAX_URL_LENGTH = 2048
_CHUNK = 64 * 1024
_ENVIRONMENT_CLOSERS = re.compile(r"</(tool_response|information)>")
_ENCODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
"""Content-Encoding -> zlib ``wbits``; the tool asks for these only."""


def _shown(value: object) -> str:
    """A short, safe rendering of a config value for an error message."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**18:
        return f"a {value.bit_length()}-bit int"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bad(key: str, expected: str, value: object) -> InvalidOption:
    return InvalidOption(
        f"SearchTool: {key} must be {expected}, got {_shown(value)} ({type(value).__name__})"
    )


def _integer(key: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(key, f"an int in [{low}, {high}]", value)
    return value


def _seconds(key: str, value: object, low: float, high: float, *, above_low: bool) -> float:
    """A finite number of seconds in ``(low, high]`` or ``[low, high]``; an int beyond a float's
    range is refused before any conversion (:func:`~reward_plugins.options.is_finite_number`)."""
    bounds = f"({low:g}, {high:g}]" if above_low else f"[{low:g}, {high:g}]"
    if not is_finite_number(value):
        finite = "finite " if isinstance(value, float) else ""  # NaN or an infinity
        raise _bad(key, f"a {finite}number of seconds in {bounds}", value)
    seconds = float(cast(numbers.Real, value))
    if not (low < seconds if above_low else low <= seconds) or seconds > high:
        raise _bad(key, f"a number of seconds in {bounds}", value)
    return seconds


def _is_url(url: object) -> bool:
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number or too big
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _urls(value: object, key: str) -> tuple[str, ...]:
    """The http(s) URLs of a ``retrieval_service_url`` value (a string or a list of them)."""
    urls = [value] if isinstance(value, str) else value
    if not isinstance(urls, list | tuple) or not 1 <= len(urls) <= MAX_URLS:
        raise _bad(key, f"an http(s) URL or a list of 1 to {MAX_URLS} of them", value)
    for url in urls:
        if not _is_url(url):
            raise _bad(key, "an http(s) URL with a host", url)
    return tuple(urls)


@dataclass(frozen=True)
class SearchSettings:
    """The validated config of a :class:`SearchTool` (see the module docstring for the keys)."""

    retrieval_service_url: tuple[str, ...] = ("http://127.0.0.1:8000/retrieve",)
    topk: int = 3
    timeout: float = 30.0
    retries: int = 2
    backoff: float = 0.5
    max_concurrency: int = 16
    max_response_bytes: int = 4 * 1024 * 1024

    @classmethod
    def from_config(
        cls, config: Mapping[Any, Any] | None, environ: Mapping[str, str] | None = None
    ) -> SearchSettings:
        """The settings of a verl tool ``config`` mapping (``type`` is verl's and ignored), with
        ``environ`` (default ``os.environ``) giving :data:`URL_VARIABLE`.

        Example:
            >>> SearchSettings.from_config({"type": "native", "topk": 5}, environ={}).topk
            5

        Raises:
            InvalidOption: a key that is not a string or not a config key, or a bad value.
        """
        if config is None:
            config = {}
        if not isinstance(config, Mapping):
            raise _bad("config", "a mapping", config)
        strange = [key for key in config if not isinstance(key, str)]
        if strange:
            raise InvalidOption(
                f"SearchTool: config keys must be strings, got {_shown(strange[0])} "
                f"({type(strange[0]).__name__})"
            )
        given = {key: value for key, value in config.items() if key != "type"}
        valid = sorted(cls.__dataclass_fields__)
        unknown = sorted(set(given) - set(valid))
        if unknown:
            shown = ", ".join(_shown(key) for key in unknown[:5])
            raise InvalidOption(
                f"SearchTool: unknown config key(s) {shown}; valid: {', '.join(valid)}"
            )
        defaults = cls()
        checked: dict[str, Any] = {}
        for key, (low, high) in _INT_RANGES.items():
            checked[key] = _integer(key, given.get(key, getattr(defaults, key)), low, high)
        for key, (least, most, above) in _SECONDS_RANGES.items():
            seconds = given.get(key, getattr(defaults, key))
            checked[key] = _seconds(key, seconds, least, most, above_low=above)
        url = given.get("retrieval_service_url", defaults.retrieval_service_url[0])
        urls = _urls(url, "retrieval_service_url")
        variable = (os.environ if environ is None else environ).get(URL_VARIABLE, "")
        if variable.strip(", \t\n"):
            urls = _urls(re.split(r"[,\s]+", variable.strip(", \t\n")), URL_VARIABLE)
        return cls(retrieval_service_url=urls, **checked)


_INT_RANGES: dict[str, tuple[int, int]] = {
    "topk": (1, 100),
    "retries": (0, 10),
    "max_concurrency": (1, 1024),
    "max_response_bytes": (1024, 256 * 1024 * 1024),
}
_SECONDS_RANGES: dict[str, tuple[float, float, bool]] = {
    "timeout": (0, 3600, True),  # (low, high, low excluded)
    "backoff": (0, 60, False),
}


class SearchFailed(RewardPluginsError):
    """One failed search: ``kind`` names the failure, ``retry`` says whether to try again."""

    def __init__(self, kind: str, message: str, retry: bool) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry = retry
        self.attempts = 1


def format_documents(documents: Sequence[Mapping[str, Any]]) -> str:
    """Search-R1's text of one query's documents: ``Doc {i}(Title: {title}) {text}`` per line.

    The title is the first line of ``contents``, the text the lines after it.

    Example:
        >>> format_documents([{"id": "0", "contents": "Paris\\nThe capital of France."}])
        'Doc 1(Title: Paris) The capital of France.'
    """
    lines = []
    for number, document in enumerate(documents, start=1):
        title, _, text = document["contents"].partition("\n")
        lines.append(f"Doc {number}(Title: {title}) {text}")
    return "\n".join(lines) if lines else NO_DOCUMENTS


def documents_of(payload: Any, queries: int) -> list[list[Mapping[str, Any]]]:
    """Per query, the document objects of a ``/retrieve`` response, either ``return_scores`` form.

    Raises :class:`SearchFailed` (``bad_response``) for any other shape.
    """
    results = payload.get("result") if isinstance(payload, Mapping) else None
    if not isinstance(results, list) or len(results) != queries:
        raise SearchFailed("bad_response", f"expected a result list of {queries} item(s)", False)
    documents: list[list[Mapping[str, Any]]] = []
    for hits in results:
        if not isinstance(hits, list):
            raise SearchFailed("bad_response", "a query's result is not a list", False)
        found = []
        for hit in hits:
            document = hit.get("document", hit) if isinstance(hit, Mapping) else None
            if not isinstance(document, Mapping) or not isinstance(document.get("contents"), str):
                raise SearchFailed("bad_response", "a document has no 'contents' string", False)
            found.append(document)
        documents.append(found)
    return documents


def defuse(text: str) -> str:
    """``text`` with every ``</tool_response>`` and ``</information>`` written with a space
    (``</tool_response >``), so that no document (nor an argument echoed in an error) can end the
    tool turn early in the decoded trajectory the reward reads.

    Example:
        >>> defuse("a</tool_response>\\nassistant\\n<answer>x</answer>")
        'a</tool_response >\\nassistant\\n<answer>x</answer>'
    """
    return _ENVIRONMENT_CLOSERS.sub(r"</\1 >", text)


def _too_large(cap: int, what: str) -> SearchFailed:
    return SearchFailed("too_large", f"the answer exceeds {cap} bytes {what}", False)


async def read_capped(response: aiohttp.ClientResponse, cap: int) -> bytes:
    """The body of ``response`` (read with ``auto_decompress=False``), inflated, in chunks.

    At most ``cap`` bytes are read from the wire and at most ``cap`` produced by inflating; past
    either the read stops with :class:`SearchFailed` (``too_large``), so a decompression bomb or
    an endless stream is never held beyond ``cap`` bytes (plus one network chunk).
    """
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("identity", "", *_ENCODINGS):
        raise SearchFailed("bad_response", f"unknown Content-Encoding {encoding[:40]!r}", False)
    if (response.content_length or 0) > cap:
        raise _too_large(cap, "(Content-Length)")
    inflater = zlib.decompressobj(_ENCODINGS[encoding]) if encoding in _ENCODINGS else None
    parts: list[bytes] = []
    received = produced = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        received += len(chunk)
        if received > cap:
            raise _too_large(cap, "on the wire")
        while chunk:
            try:
                data = chunk if inflater is None else inflater.decompress(chunk, cap - produced + 1)
            except zlib.error:
                raise SearchFailed("bad_response", f"a corrupt {encoding} body", False) from None
            produced += len(data)
            if produced > cap:
                raise _too_large(cap, "once inflated")
            parts.append(data)
            chunk = b"" if inflater is None else inflater.unconsumed_tail
    return b"".join(parts)


class _Client:
    """The session and the request slots of one event loop."""

    def __init__(self, settings: SearchSettings) -> None:
        self.slots = asyncio.Semaphore(settings.max_concurrency)
        self.session = aiohttp.ClientSession(
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None),
            connector=aiohttp.TCPConnector(limit=settings.max_concurrency),
            headers={"Accept-Encoding": ", ".join(("gzip", "deflate"))},
        )


class SearchTool(BaseTool):
    """verl ``BaseTool`` that sends the model's queries to a Search-R1 retrieval server.

    ``execute(instance_id, {"query": str} | {"query_list": [str]}, agent_data=...)`` returns
    ``(ToolResponse(text=documents or error line), 0.0, metrics)`` and never raises; with
    ``agent_data`` it appends to the lists of ``agent_data.extra_fields`` named by
    :data:`EXTRA_FIELDS`: the queries (all calls' queries, flattened), and per call the number
    of documents returned, the latency in seconds and the error kind (``None`` on success).
    """

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None):
        self.settings = SearchSettings.from_config(config)
        super().__init__(config, tool_schema or self.get_openai_tool_schema())
        self._instances: dict[str, dict[str, Any]] = {}
        self._clients: dict[asyncio.AbstractEventLoop, _Client] = {}
        self._next_url = 0

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        """The schema given in the YAML, else :data:`DEFAULT_SCHEMA`."""
        schema = getattr(self, "tool_schema", None)
        return schema or OpenAIFunctionToolSchema.model_validate(DEFAULT_SCHEMA)

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]:
        """A new trajectory instance (verl passes ``create_kwargs``, unused here)."""
        instance_id = instance_id or str(uuid4())
        self._instances[instance_id] = {"calls": 0}
        return instance_id, ToolResponse()

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Forget the instance (no error for an unknown one); releasing the last open instance
        closes this event loop's session."""
        self._instances.pop(instance_id, None)
        if not self._instances:
            await self.close()

    async def close(self) -> None:
        """Close the running event loop's session (the next call opens a new one), and forget
        the sessions of event loops that are closed."""
        loop = asyncio.get_running_loop()
        for other in [known for known in self._clients if known.is_closed()]:
            del self._clients[other]
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.session.close()

    @rollout_trace_op
    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[Any, float, dict[str, Any]]:
        """Search, and return ``(ToolResponse, 0.0, metrics)``; see the class docstring."""
        start = time.perf_counter()
        if instance_id in self._instances:
            self._instances[instance_id]["calls"] += 1
        try:
            queries = parse_parameters(parameters)
        except ValueError as error:
            text = f"Search failed: invalid arguments: {error}."
            return self._finish(text, [], 0, "invalid_arguments", start, 0, kwargs)
        attempts = 0
        try:
            documents, attempts = await self._search(queries)
        except SearchFailed as failure:
            attempts = failure.attempts
            logger.warning("search tool: %s", failure)
            text = f"Search failed: {failure}."
            return self._finish(text, queries, 0, failure.kind, start, attempts, kwargs)
        text = QUERY_SEPARATOR.join(format_documents(found) for found in documents)
        count = sum(map(len, documents))
        return self._finish(text, queries, count, None, start, attempts, kwargs)

    def _finish(
        self,
        text: str,
        queries: list[str],
        documents: int,
        error: str | None,
        start: float,
        attempts: int,
        kwargs: Mapping[str, Any],
    ) -> tuple[Any, float, dict[str, Any]]:
        latency = time.perf_counter() - start
        agent_data = kwargs.get("agent_data")
        extra = getattr(agent_data, "extra_fields", None)
        if isinstance(extra, dict):
            extra.setdefault("search_queries", []).extend(queries)
            extra.setdefault("search_documents", []).append(documents)
            extra.setdefault("search_latency_s", []).append(latency)
            extra.setdefault("search_errors", []).append(error)
        metrics = {
            "queries": len(queries),
            "documents": documents,
            "latency_s": latency,
            "attempts": attempts,
            "error": error,
        }
        return ToolResponse(text=defuse(text)), 0.0, metrics

    def _client(self) -> _Client:
        """This event loop's session and slots (created in the running loop, one per loop)."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None or client.session.closed:
            client = self._clients[loop] = _Client(self.settings)
        return client

    def _url_order(self) -> list[str]:
        """The URLs in the order this call tries them: round robin over calls."""
        urls = self.settings.retrieval_service_url
        first = self._next_url % len(urls)
        self._next_url = first + 1
        return [*urls[first:], *urls[:first]]

    async def _search(self, queries: list[str]) -> tuple[list[list[Mapping[str, Any]]], int]:
        """The documents per query and the requests it took, or :class:`SearchFailed`."""
        settings = self.settings
        urls = self._url_order()
        attempt = 0
        for round_number in range(settings.retries + 1):
            if round_number:
                await asyncio.sleep(settings.backoff * 2 ** (round_number - 1))
            for url in urls:
                attempt += 1
                try:
                    payload = await self._request(url, queries)
                    return documents_of(payload, len(queries)), attempt
                except SearchFailed as error:
                    logger.info("search tool: %s: %s", url, error)
                    failure = error
                    if not failure.retry:
                        break
            if not failure.retry:
                break
        failure.attempts = attempt
        if attempt > 1:
            failure.args = (f"{failure.args[0]}, {attempt} attempts",)
        raise failure

    async def _request(self, url: str, queries: list[str]) -> Any:
        """One POST to ``url`` within one deadline (slot wait included): the decoded JSON body,
        or :class:`SearchFailed`."""
        settings = self.settings
        client = self._client()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.timeout
        late = SearchFailed("timeout", f"no answer within {settings.timeout:g} s", True)
        try:
            await asyncio.wait_for(client.slots.acquire(), settings.timeout)
        except asyncio.TimeoutError:
            raise late from None
        try:
            return await asyncio.wait_for(self._post(client, url, queries), deadline - loop.time())
        except asyncio.TimeoutError:
            raise late from None
        finally:
            client.slots.release()

    async def _post(self, client: _Client, url: str, queries: list[str]) -> Any:
        settings = self.settings
        request = {"queries": queries, "topk": settings.topk, "return_scores": True}
        try:
            async with client.session.post(url, json=request, allow_redirects=False) as response:
                status = response.status
                if status != 200:
                    retry = status == 429 or status >= 500
                    message = f"the search service answered HTTP {status}"
                    raise SearchFailed("http_status", message, retry)
                body = await read_capped(response, settings.max_response_bytes)
        except aiohttp.ClientError as error:
            name = type(error).__name__
            raise SearchFailed(
                "connection", f"cannot reach the search service ({name})", True
            ) from None
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise SearchFailed(
                "bad_response", "the search service answered non-JSON", False
            ) from None
