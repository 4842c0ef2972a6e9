"""Test helpers for scorer plugins: register test scorers without leaving them behind.

A test that registers a scorer (or loads entry points) changes the process-wide registry; the
next test would see that scorer in its lookups and error messages. :func:`registry_restored`
snapshots the registry (:meth:`reward_plugins.registry.Registry.snapshot`) and the routers made
on demand, and puts both back afterwards. The pytest fixture :func:`restored_registry` does the
same around one test; make it available with ``from reward_plugins.testing import
restored_registry`` in a ``conftest.py`` (or ``pytest_plugins = ["reward_plugins.testing"]``).

Lives in the package, not in this repository's tests, because third-party plugin authors need
it too: their tests register scorers in the same registry. pytest is imported only by the
fixture's module-level decorator, so import this module from tests alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from reward_plugins import router
from reward_plugins.registry import REGISTRY, Registry


@contextlib.contextmanager
def registry_restored(registry: Registry = REGISTRY) -> Iterator[Registry]:
    """Within the block, register freely: the registry (built-in plugins loaded, entry-point
    state and broken plugins included) and the routers are restored afterwards."""
    routers = router.made_routers()
    with registry.preserved():
        try:
            yield registry
        finally:
            router.restore_routers(routers)


@pytest.fixture
def restored_registry() -> Iterator[Registry]:
    """The default registry, restored after the test (:func:`registry_restored`)."""
    with registry_restored() as registry:
        yield registry
