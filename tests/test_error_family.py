"""Every exception class the package defines is a :class:`reward_plugins.RewardPluginsError`.

The test imports every module of the package (the ones imported lazily too, such as the Ray
backend, the report and the verl tool), so a new exception class anywhere is checked the day
it is written.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import reward_plugins
from reward_plugins.errors import RewardPluginsError

NOT_IMPORTED = {"reward_plugins.__main__"}
"""Modules that act when imported (``python -m reward_plugins`` runs the command)."""


def _modules() -> list[ModuleType]:
    names = [
        info.name
        for info in pkgutil.walk_packages(reward_plugins.__path__, "reward_plugins.")
        if info.name not in NOT_IMPORTED
    ]
    return [importlib.import_module(name) for name in sorted(names)]


def _exception_classes(module: ModuleType) -> list[type[BaseException]]:
    """The exception classes defined in ``module`` (not those it imports), nested ones too."""
    found: list[type[BaseException]] = []
    pending = [value for value in vars(module).values() if inspect.isclass(value)]
    while pending:
        cls = pending.pop()
        if cls.__module__ != module.__name__:
            continue
        if issubclass(cls, BaseException):
            found.append(cls)
        pending.extend(value for value in vars(cls).values() if inspect.isclass(value))
    return found


def test_every_module_is_walked() -> None:
    names = {module.__name__ for module in _modules()}
    # a sample from each subpackage, so that a walk that stops early fails here
    assert {
        "reward_plugins.errors",
        "reward_plugins.rescore.execute",
        "reward_plugins.runtime.ray_session",
        "reward_plugins.rescore.report",
        "reward_plugins.search.server",
        "reward_plugins.tools.search",
        "reward_plugins.adapters.trl",
        "reward_plugins.plugins.search_r1",
        "reward_plugins.metrics.significance",
    } <= names


def test_every_exception_class_is_a_reward_plugins_error() -> None:
    outside = sorted(
        f"{cls.__module__}.{cls.__qualname__}"
        for module in _modules()
        for cls in _exception_classes(module)
        if issubclass(cls, Exception) and not issubclass(cls, RewardPluginsError)
    )
    assert outside == []


def test_exception_classes_are_found() -> None:
    """The walk sees the classes it checks (a walk that finds none would pass the test above)."""
    found = {
        f"{cls.__module__}.{cls.__qualname__}"
        for module in _modules()
        for cls in _exception_classes(module)
    }
    assert {
        "reward_plugins.rescore.errors.RescoreError",
        "reward_plugins.rescore.errors.BadRowError",
        "reward_plugins.rescore.files.PathError",
        "reward_plugins.runtime.ray_session.RayUnavailable",
        "reward_plugins.rescore.errors.ReportError",
        "reward_plugins.tools.search.SearchFailed",
        "reward_plugins.runtime.http.Refusal",
        "reward_plugins.errors.InvalidOption",
    } <= found


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("reward_plugins.rescore.files.PathError", ValueError),
        ("reward_plugins.runtime.ray_session.RayUnavailable", RuntimeError),
        ("reward_plugins.rescore.execute.DataError", ValueError),
    ],
)
def test_the_builtin_a_caller_expects(name: str, builtin: type[Exception]) -> None:
    module, _, attribute = name.rpartition(".")
    cls = getattr(importlib.import_module(module), attribute)
    assert issubclass(cls, RewardPluginsError) and issubclass(cls, builtin)


def test_a_refused_path_is_caught_as_the_family() -> None:
    from reward_plugins.rescore.files import file_format

    with pytest.raises(RewardPluginsError, match=r"no-such\.csv"):
        file_format(Path("no-such.csv"))
