"""Moved to :mod:`reward_plugins.runtime.ray_session`.

This path keeps working, with a warning, for one release."""

from reward_plugins.deprecation import forward_to

__getattr__ = forward_to("reward_plugins.rescore.ray_backend", "reward_plugins.runtime.ray_session")
