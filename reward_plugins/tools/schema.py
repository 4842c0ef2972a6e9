"""Moved to :mod:`reward_plugins.tool_schema`.

This path keeps working, with a warning, for one release."""

from reward_plugins.deprecation import forward_to

__getattr__ = forward_to("reward_plugins.tools.schema", "reward_plugins.tool_schema")
