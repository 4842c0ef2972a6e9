"""What a call of the ``search`` tool may say: the one rule the tool runs and the reward counts.

This module needs neither verl nor aiohttp, so the reward (``compute_score_tool``) reads the
same rule as :class:`~reward_plugins.tools.search.SearchTool` wherever it runs.

A call's arguments are ``{"query": str}`` or ``{"query_list": [str, ...]}`` (the second is the
form of the search tool verl used to ship, ``verl/tools/search_tool.py`` before verl 0.9), with
at most :data:`MAX_QUERIES` queries, none empty. The schema shown to the model
(:data:`DEFAULT_SCHEMA`, the same as the shipped YAML's) names ``query`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOOL_NAME = "search"
MAX_QUERIES = 32
"""The most queries one call may hold (``query_list``)."""

SEARCH_TOOL_CLASSES: frozenset[str] = frozenset(
    {"reward_plugins.tools.SearchTool", "reward_plugins.tools.search.SearchTool"}
)
"""The ``class_name`` spellings of the search tool in a verl tool YAML."""

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


def parse_parameters(parameters: Any) -> list[str]:
    """The stripped queries of a call: ``{"query": str}`` or ``{"query_list": [str, ...]}``.

    Raises ``ValueError`` with a message meant for the model.

    Example:
        >>> parse_parameters({"query": " who wrote hamlet "})
        ['who wrote hamlet']
        >>> parse_parameters({"query_list": ["a", "b"]})
        ['a', 'b']
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
        if len(queries) > MAX_QUERIES:
            raise ValueError(f'"query_list" holds {len(queries)} queries; at most {MAX_QUERIES}')
        if not all(isinstance(query, str) for query in queries):
            raise ValueError('"query_list" must hold strings only')
    if any(not query.strip() for query in queries):
        raise ValueError("a query must not be empty")
    return [query.strip() for query in queries]


def arguments_error(parameters: Any) -> str | None:
    """Why the search tool would refuse ``parameters`` (the :func:`parse_parameters` message),
    or ``None`` when it would run them.

    Example:
        >>> arguments_error({"query_list": ["capital of France"]}) is None
        True
        >>> arguments_error({"q": "x"})
        'give "query" (a string) or "query_list" (strings); got keys: q'
    """
    try:
        parse_parameters(parameters)
    except ValueError as error:
        return str(error)
    return None
