"""verl tools for search agents: :class:`~reward_plugins.tools.search.SearchTool`.

``SearchTool`` and ``SearchSettings`` need verl and aiohttp
(``pip install 'reward-plugins[verl,search]'``) and are imported on first use, so
:mod:`reward_plugins.tool_schema` (the arguments the tool runs, which the reward reads too)
imports without them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SearchSettings", "SearchTool"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from reward_plugins.tools import search

        return getattr(search, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
