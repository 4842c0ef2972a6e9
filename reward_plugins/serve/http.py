"""Moved to :mod:`reward_plugins.runtime.http`.

This path keeps working, with a warning, for one release."""

from reward_plugins.deprecation import forward_to

__getattr__ = forward_to("reward_plugins.serve.http", "reward_plugins.runtime.http")
