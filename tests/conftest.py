"""Suite-wide configuration: the ``slow`` marker for whole modules, and shared fixtures.

``slow`` marks tests that start verl's reward managers, loaders or trainer config composition,
Ray, TRL or OpenRLHF, or that install packages; and the long sweeps (the C twins against their
references, thousands of generated trajectories), memory-budget stress tests and the server
tests that start a process pool of their own to wait out a timeout or a respawn. A test or
module may carry the marker itself (``@pytest.mark.slow``, ``pytestmark = pytest.mark.slow``);
the modules in :data:`SLOW_MODULES` get it here, on every test they hold. ``pytest -m "not
slow"`` then runs the package's own tests (extraction, normalization, metrics, routing, the CLI,
parity with verl's reference scorer).

Under ``-m "not slow"`` the modules of :data:`SLOW_MODULES` are not even imported: their
module-level imports of verl's trainer, Ray, TRL and OpenRLHF cost more than the package's tests
take. Their tests are then absent from the "deselected" count.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reward_plugins.testing import restored_registry  # noqa: F401  (a fixture)

REPO_ROOT = Path(__file__).resolve().parents[1]

SLOW_MODULES = frozenset(
    {
        "test_cli_ray.py",  # a local Ray cluster, the CLI's Ray backend
        "test_composed_trainers.py",  # verl's reward-loop managers and TRL's GRPOTrainer
        "test_ray_connect.py",  # local Ray instances, unreachable Ray addresses
        "test_report_browser.py",  # a headless Chromium
        "test_multiturn_config.py",  # verl's Hydra config, tool registry and reward managers
        "test_openrlhf.py",  # imports OpenRLHF (about 7 s), its reward executor
        "test_plugin_example.py",  # pip-installs the example plugin, then verl, TRL, OpenRLHF
        "test_serve_ray.py",  # a local Ray instance, Ray Serve replicas and their scorer pools
        "test_search_tool.py",  # verl's tool registry, local retrieval servers
        "test_search_tool_limits.py",  # verl's tool registry, hostile local HTTP servers
        "test_retriever_index.py",  # tantivy index builds, fresh processes
        "test_retriever_server.py",  # local retrieval servers under hostile clients
        "test_trl.py",  # TRL's GRPOTrainer on a tiny model
        "test_verl_configs.py",  # Hydra composition of verl's trainer config, main_ppo runs
        "test_verl_legacy_managers.py",  # verl's legacy reward managers
        "test_verl_loading.py",  # verl's loaders, in fresh processes too
        "test_verl_ray.py",  # a local Ray cluster, verl's reward-loop workers
        "test_verl_reward_loop.py",  # verl's reward-loop managers
        "test_tool_agent_loop.py",  # verl's ToolAgentLoop, a local retriever
        "test_serve_verl.py",  # verl's reward loop scoring through a local reward server
        "test_speedups.py",  # the C twins against their references: sweeps, child processes
    }
)
"""Test modules whose every test is ``slow``."""


def _cache_bytecode() -> None:
    """Let the interpreters the tests start (the command line, scorer workers, doc snippets: a
    few hundred) reuse compiled bytecode instead of compiling the package and numpy anew each
    time. Where writing bytecode is turned off (``PYTHONDONTWRITEBYTECODE``, often set to keep
    checkouts clean), it is kept out of the tree, under ``PYTHONPYCACHEPREFIX`` (default
    ``~/.cache/reward_plugins/pycache``, or under ``$XDG_CACHE_HOME``), for this process and
    its children."""
    if not os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        return
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    prefix = os.environ.setdefault("PYTHONPYCACHEPREFIX", str(cache / "reward_plugins" / "pycache"))
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_cache_bytecode()


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook, which applies ``-m``
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`SLOW_MODULES` ``slow``."""
    for item in items:
        if item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m "not slow"``, do not even import the modules of :data:`SLOW_MODULES`."""
    if collection_path.name in SLOW_MODULES and config.option.markexpr.strip() == "not slow":
        return True
    return None  # no opinion: pytest's other rules decide


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout's root: the directory holding ``pyproject.toml`` and ``reward_plugins``."""
    return REPO_ROOT


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    """The environment for a child interpreter that must import this checkout's package."""
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


@pytest.fixture
def quiet_sacrebleu() -> Iterator[None]:
    """sacrebleu warns on every sentence score without effective order; keep the log readable."""
    logger = logging.getLogger("sacrebleu")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """The byte-level Hugging Face tokenizer of ``verl_helpers`` (exact round trip, offline)."""
    from verl_helpers import build_tokenizer

    return build_tokenizer()
