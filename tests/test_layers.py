"""The package's layers (``.importlinter``): the contracts hold, every module of the package is
placed in them, and the stubs left at moved paths forward with a warning."""

from __future__ import annotations

import configparser
import importlib
import pkgutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import reward_plugins

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / ".importlinter"
NOT_CODE = {"data", "_speedups", "__main__"}
"""Children of the package that no contract needs: shipped data, the C twins, ``python -m``."""


def _contracts() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(CONFIG)
    return parser


def _listed(value: str) -> set[str]:
    return {line.strip() for line in value.splitlines() if line.strip()}


def test_import_contracts_hold() -> None:
    """``lint-imports`` on this checkout: every contract is kept (its report on failure)."""
    code = (
        "from importlinter.cli import lint_imports\n"
        "raise SystemExit(lint_imports(config_filename='.importlinter', no_cache=True, "
        "no_logo=True))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(" KEPT") == len(
        [name for name in _contracts().sections() if name.startswith("importlinter:contract:")]
    ), result.stdout


def test_every_module_is_placed_in_a_layer() -> None:
    parser = _contracts()
    sources = parser["importlinter:contract:core"]["source_modules"]
    core = {name.removeprefix("reward_plugins.") for name in _listed(sources)}
    tooling = {
        name.strip()
        for line in _listed(parser["importlinter:contract:tooling"]["layers"])
        for name in line.split("|")
    }
    children = {info.name for info in pkgutil.iter_modules(reward_plugins.__path__)}
    assert children - NOT_CODE == core | tooling, (
        "place each module of the package in .importlinter: in the core contract's "
        "source_modules or in a tooling layer"
    )
    assert not core & tooling


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("reward_plugins.rescore.rows", "reward_plugins.runtime.rows", "RowFailure"),
        ("reward_plugins.rescore.ray_backend", "reward_plugins.runtime.ray_session", "ray_session"),
        ("reward_plugins.serve.rows", "reward_plugins.runtime.scoring", "Row"),
        ("reward_plugins.serve.pool", "reward_plugins.runtime.pool", "ScorerPool"),
        ("reward_plugins.tools.schema", "reward_plugins.tool_schema", "arguments_error"),
        ("reward_plugins.serve.http", "reward_plugins.runtime.http", "Refusal"),
    ],
)
def test_a_moved_module_forwards_its_names_with_a_warning(old: str, new: str, name: str) -> None:
    stub = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new}; import {name}"):
        value = getattr(stub, name)
    assert value is getattr(importlib.import_module(new), name)
    with warnings.catch_warnings(), pytest.raises(AttributeError, match="no attribute 'nothing'"):
        warnings.simplefilter("error")
        stub.nothing  # noqa: B018
    assert sys.modules[old] is stub


def test_a_module_that_lost_one_name_forwards_just_that_name() -> None:
    from reward_plugins.metrics import qa, squad_v2

    with pytest.warns(DeprecationWarning, match=r"qa\.squad_v2_scores moved to"):
        assert qa.squad_v2_scores is squad_v2.squad_v2_scores
    with pytest.raises(AttributeError, match="no attribute 'Rouge1'"):
        qa.Rouge1  # noqa: B018  (a name of another module is not forwarded)
