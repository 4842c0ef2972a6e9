"""verl tools for search agents: :class:`~reward_plugins.tools.search.SearchTool`.

Importing this package needs verl and aiohttp (``pip install 'reward-plugins[verl,search]'``).
"""

from reward_plugins.tools.search import SearchSettings, SearchTool

__all__ = ["SearchSettings", "SearchTool"]
