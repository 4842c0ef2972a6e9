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
the results of several queries of one call are separated by a ``---`` line.

Config keys (all optional; an unknown key or a bad value raises
:class:`~reward_plugins.errors.InvalidOption` when verl builds the tool):

- ``retrieval_service_url`` (``http://127.0.0.1:8000/retrieve``): the server's endpoint.
- ``topk`` (3): documents asked for per query.
- ``timeout`` (30): seconds one attempt may take, connecting and reading included.
- ``retries`` (2): further attempts after a timeout, a connection error or an HTTP 429/5xx
  answer, after ``backoff * 2**n`` seconds (n = 0, 1, ...); other failures are not retried.
- ``backoff`` (0.5): seconds before the first retry.
- ``max_concurrency`` (16): requests in flight at once *per process*. verl builds one tool per
  agent-loop worker process (``verl/experimental/agent_loop/agent_loop.py``), so a cluster sends
  at most ``actor_rollout_ref.rollout.agent.num_workers x max_concurrency`` requests at once
  (verl's default of 8 workers: 128); size the retrieval server for that.

A failed search never raises into the agent loop: the model gets a one-line text that starts
with ``Search failed:`` (the reward is 0), and the metrics and ``agent_data.extra_fields`` record
the error, so a retriever hiccup does not stop training.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from reward_plugins.errors import InvalidOption

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

TOOL_NAME = "search"
QUERY_SEPARATOR = "\n---\n"
NO_DOCUMENTS = "No documents found."
EXTRA_FIELDS = ("search_queries", "search_documents", "search_latency_s", "search_errors")
"""The ``agent_data.extra_fields`` keys :meth:`SearchTool.execute` appends to (lists)."""


@dataclass(frozen=True)
class SearchSettings:
    """The validated config of a :class:`SearchTool` (see the module docstring for the keys)."""

    retrieval_service_url: str = "http://127.0.0.1:8000/retrieve"
    topk: int = 3
    timeout: float = 30.0
    retries: int = 2
    backoff: float = 0.5
    max_concurrency: int = 16

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> SearchSettings:
        """The settings of a verl tool ``config`` mapping (``type`` is verl's and ignored).

        Example:
            >>> SearchSettings.from_config({"type": "native", "topk": 5}).topk
            5
        """
        config = dict(config or {})
        config.pop("type", None)
        valid = sorted(cls.__dataclass_fields__)
        unknown = sorted(set(config) - set(valid))
        if unknown:
            raise InvalidOption(
                f"SearchTool: unknown config key(s) {', '.join(unknown)}; valid: {', '.join(valid)}"
            )
        settings = cls(**config)
        settings._check()
        return settings

    def _check(self) -> None:
        url = self.retrieval_service_url
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidOption(
                f"SearchTool: retrieval_service_url must be an http(s) URL, got {url!r}"
            )
        for name, least in (("topk", 1), ("retries", 0), ("max_concurrency", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InvalidOption(
                    f"SearchTool: {name} must be an int of at least {least}, got {value!r} "
                    f"({type(value).__name__})"
                )
        for name in ("timeout", "backoff"):
            value = getattr(self, name)
            positive = name == "timeout"
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or value < 0
                or (positive and value == 0)
            ):
                bound = "above 0" if positive else "at least 0"
                raise InvalidOption(
                    f"SearchTool: {name} must be a number of seconds {bound}, got {value!r} "
                    f"({type(value).__name__})"
                )


DEFAULT_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Searches an encyclopedia and returns the passages most relevant to the "
        "query, each with its title.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to search for."},
            },
            "required": ["query"],
        },
    },
}
"""The tool schema used when the YAML gives none (the shipped YAML gives the same)."""


class SearchFailed(Exception):
    """One failed search: ``kind`` names the failure, ``retry`` says whether to try again."""

    def __init__(self, kind: str, message: str, retry: bool) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry = retry
        self.attempts = 1


def parse_parameters(parameters: Any) -> list[str]:
    """The queries of a tool call: ``{"query": str}`` or ``{"query_list": [str, ...]}``.

    Raises ``ValueError`` with a message meant for the model.

    Example:
        >>> parse_parameters({"query": "who wrote hamlet"})
        ['who wrote hamlet']
    """
    if not isinstance(parameters, Mapping):
        raise ValueError(f"the arguments must be a JSON object, got {type(parameters).__name__}")
    keys = set(parameters)
    if keys not in ({"query"}, {"query_list"}):
        given = ", ".join(sorted(map(str, keys))) or "none"
        raise ValueError(f'give "query" (a string) or "query_list" (strings); got keys: {given}')
    if "query" in parameters:
        queries = [parameters["query"]]
        if not isinstance(queries[0], str):
            raise ValueError(f'"query" must be a string, got {type(queries[0]).__name__}')
    else:
        queries = parameters["query_list"]
        if not isinstance(queries, list) or not queries:
            raise ValueError('"query_list" must be a non-empty list of strings')
        if not all(isinstance(query, str) for query in queries):
            raise ValueError('"query_list" must hold strings only')
    if any(not query.strip() for query in queries):
        raise ValueError("a query must not be empty")
    return [query.strip() for query in queries]


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
        self._limits: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}

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
        """Forget the instance (no error for an unknown one)."""
        self._instances.pop(instance_id, None)

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
            logger.warning("search tool: %s: %s", self.settings.retrieval_service_url, failure)
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
        return ToolResponse(text=text), 0.0, metrics

    def _limit(self) -> asyncio.Semaphore:
        """This event loop's semaphore (created in the running loop, one per loop)."""
        loop = asyncio.get_running_loop()
        for other in [known for known in self._limits if known.is_closed()]:
            del self._limits[other]
        if loop not in self._limits:
            self._limits[loop] = asyncio.Semaphore(self.settings.max_concurrency)
        return self._limits[loop]

    async def _search(self, queries: list[str]) -> tuple[list[list[Mapping[str, Any]]], int]:
        """The documents per query and the attempts it took, or :class:`SearchFailed`."""
        settings = self.settings
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self._limit():
                    payload = await self._post(queries)
                return documents_of(payload, len(queries)), attempt
            except SearchFailed as failure:
                if not failure.retry or attempt > settings.retries:
                    failure.attempts = attempt
                    if attempt > 1:
                        failure.args = (f"{failure.args[0]}, {attempt} attempts",)
                    raise
            await asyncio.sleep(settings.backoff * 2 ** (attempt - 1))

    async def _post(self, queries: list[str]) -> Any:
        """One POST to the server: its decoded JSON body, or :class:`SearchFailed`."""
        settings = self.settings
        request = {"queries": queries, "topk": settings.topk, "return_scores": True}
        timeout = aiohttp.ClientTimeout(total=settings.timeout)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(settings.retrieval_service_url, json=request) as response,
            ):
                body = await response.read()
                status = response.status
        except asyncio.TimeoutError:
            raise SearchFailed(
                "timeout", f"no answer within {settings.timeout:g} s", True
            ) from None
        except aiohttp.ClientError as error:
            name = type(error).__name__
            raise SearchFailed(
                "connection", f"cannot reach the search service ({name})", True
            ) from None
        if status != 200:
            retry = status == 429 or status >= 500
            raise SearchFailed("http_status", f"the search service answered HTTP {status}", retry)
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise SearchFailed(
                "bad_response", "the search service answered non-JSON", False
            ) from None
