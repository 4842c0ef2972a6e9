"""The routers loaded the way verl loads a reward function: ``pkg://`` and the legacy file path.

Expected rewards come from verl's own ``search_r1_like_qa_em`` and the hand-worked table in
``verl_helpers.hand_reward``.
"""

from __future__ import annotations

import ast
import os
import pickle
import subprocess
import sys

import pytest
from verl.utils.import_utils import load_extern_object, load_module
from verl.utils.reward_score import search_r1_like_qa_em
from verl_helpers import (
    LEGACY_ENTRY_FILE,
    MIXED_SAMPLES,
    REPO_ROOT,
    hand_reward,
    verl_reference_reward,
)

import reward_plugins
import reward_plugins.router

ROUTER_NAMES = ("compute_score", "compute_score_subem", "compute_score_f1", "compute_score_batch")
LEGACY_PATH_FORMS = (str(LEGACY_ENTRY_FILE), f"file://{LEGACY_ENTRY_FILE}")


@pytest.mark.parametrize("name", ROUTER_NAMES)
@pytest.mark.parametrize("path", ["pkg://reward_plugins", "pkg://reward_plugins/router"])
def test_pkg_path_gives_the_package_routers(path: str, name: str) -> None:
    assert load_extern_object(path, name) is getattr(reward_plugins, name)


def test_pkg_loaded_compute_score_matches_verl_reference() -> None:
    loaded = load_extern_object("pkg://reward_plugins", "compute_score")
    for sample in MIXED_SAMPLES:
        ground_truth = {"target": sample.golds}
        result = loaded(sample.data_source, sample.response, ground_truth, {})
        assert result["score"] == verl_reference_reward(sample) == hand_reward(sample), sample


def test_pkg_loaded_compute_score_subem_matches_verl_reference() -> None:
    loaded = load_extern_object("pkg://reward_plugins", "compute_score_subem")
    for sample in MIXED_SAMPLES:
        ground_truth = {"target": sample.golds}
        expected = search_r1_like_qa_em.compute_score_subem(
            sample.response, ground_truth, format_score=0.2
        )
        result = loaded(sample.data_source, sample.response, ground_truth, format_score=0.2)
        assert result["score"] == float(expected), sample


@pytest.mark.parametrize("path", LEGACY_PATH_FORMS)
@pytest.mark.parametrize("name", ROUTER_NAMES)
def test_legacy_file_reexports_picklable_routers(path: str, name: str) -> None:
    loaded = load_extern_object(path, name)
    assert loaded is getattr(reward_plugins.router, name)
    assert loaded.__module__ == "reward_plugins.router"
    assert pickle.loads(pickle.dumps(loaded)) is loaded


def test_verl_runs_the_legacy_file_outside_sys_modules() -> None:
    """Why the file only re-exports: verl's module for it is synthetic and not importable, so a
    function defined there could not be pickled by reference."""
    module = load_module(str(LEGACY_ENTRY_FILE))
    assert module.__name__.startswith("custom_module_")
    assert module.__name__ not in sys.modules
    assert sorted(module.__all__) == sorted(ROUTER_NAMES)


def test_legacy_file_uses_absolute_imports_and_defines_nothing() -> None:
    tree = ast.parse(LEGACY_ENTRY_FILE.read_text(encoding="utf-8"))
    imports = [node for node in tree.body if isinstance(node, ast.ImportFrom)]
    assert imports and all(node.level == 0 for node in imports)
    assert not [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda)
    ]


def test_legacy_file_loads_in_a_fresh_process_like_verl_04(tmp_path) -> None:
    """verl 0.3/0.4 executed the file as ``custom_module`` from the trainer's working directory."""
    code = (
        "import importlib.util, sys\n"
        f"path = {str(LEGACY_ENTRY_FILE)!r}\n"
        "spec = importlib.util.spec_from_file_location('custom_module', path)\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "sys.modules['custom_module'] = module\n"
        "spec.loader.exec_module(module)\n"
        "fn = module.compute_score\n"
        "result = fn('searchR1_nq', '<answer>Paris</answer>', {'target': ['Paris']}, None)\n"
        "print(fn.__module__, result['score'])\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout.split() == ["reward_plugins.router", "1.0"]


def test_bare_module_name_is_taken_as_a_missing_file(tmp_path, monkeypatch) -> None:
    """README pitfall: ``path: reward_plugins`` without ``pkg://`` is a file path to verl."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="Custom module file not found"):
        load_extern_object("reward_plugins", "compute_score")
