"""Tests that register scorers or load plugins leave the registry as they found it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from reward_plugins import registry
from reward_plugins import router as router_module


@contextlib.contextmanager
def registry_restored() -> Iterator[None]:
    """Snapshot the registry (the built-in plugins included, the entry-point state, the broken
    plugins and the routers made on demand) and restore it after the block: a plugin left
    behind would show up in every later test's scorers and error messages."""
    registry.registered()  # the built-in plugins are part of the snapshot
    scorers = {source: dict(by_name) for source, by_name in registry._scorers.items()}
    loaded = set(registry._loaded_modules)
    entry_points_loaded = registry._entry_points_loaded
    broken = dict(registry._broken)
    routers = dict(router_module._routers)
    try:
        yield
    finally:
        registry._scorers.clear()
        registry._scorers.update(scorers)
        registry._loaded_modules.clear()
        registry._loaded_modules.update(loaded)
        registry._entry_points_loaded = entry_points_loaded
        registry._broken.clear()
        registry._broken.update(broken)
        router_module._routers.clear()
        router_module._routers.update(routers)
