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

SCORER_NAMES = (
    "compute_score",
    "compute_score_subem",
    "compute_score_f1",
    "compute_score_format",
    "compute_score_metric",
)
ROUTER_NAMES = (*SCORER_NAMES, "compute_score_batch")
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
def test_legacy_file_resolves_names_to_the_package_routers(path: str, name: str) -> None:
    """Any name verl asks the legacy file for is ``reward_plugins.<name>``, through the file's
    module ``__getattr__``, and pickles by reference."""
    loaded = load_extern_object(path, name)
    assert loaded is getattr(reward_plugins, name)
    if name == "compute_score_batch":
        assert loaded.__module__ == "reward_plugins.router"
    else:
        assert loaded.__module__ == "reward_plugins"
        assert loaded.__qualname__ == name
    assert pickle.loads(pickle.dumps(loaded)) is loaded


@pytest.mark.parametrize("path", LEGACY_PATH_FORMS)
def test_legacy_file_refuses_unknown_names(path: str) -> None:
    module = load_module(path)
    with pytest.raises(AttributeError, match=r"has no attribute 'compute_scor': no scorer"):
        module.compute_scor  # noqa: B018
    with pytest.raises(AttributeError, match=r"has no attribute '_private'"):
        module._private  # noqa: B018
    with pytest.raises(AttributeError, match="Object not found in module: object_name='nope'"):
        load_extern_object(path, "nope")


def test_verl_runs_the_legacy_file_outside_sys_modules() -> None:
    """Why the file defines nothing but ``__getattr__``: verl's module for it is synthetic and
    not importable, so a function defined there could not be pickled by reference."""
    module = load_module(str(LEGACY_ENTRY_FILE))
    assert module.__name__.startswith("custom_module_")
    assert module.__name__ not in sys.modules
    defined = {name for name in vars(module) if not name.startswith("__")}
    assert defined == {"Any", "reward_plugins"}  # its imports only
    assert callable(vars(module)["__getattr__"])
    for name in ROUTER_NAMES:
        assert name not in vars(module)
        assert getattr(module, name) is getattr(reward_plugins, name)


def test_legacy_file_uses_absolute_imports_and_defines_nothing() -> None:
    tree = ast.parse(LEGACY_ENTRY_FILE.read_text(encoding="utf-8"))
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    assert imports and all(getattr(node, "level", 0) == 0 for node in imports)
    assert not [
        node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level != 0
    ]
    functions = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda)
    ]
    assert [(type(node), node.name) for node in functions] == [(ast.FunctionDef, "__getattr__")]
    assert functions[0] in tree.body  # at module level (PEP 562)
    assert not [node for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign)]


def test_legacy_file_loads_in_a_fresh_process_like_verl_04(tmp_path) -> None:
    """verl 0.3/0.4 executed the file as ``custom_module`` from the trainer's working directory."""
    code = (
        "import importlib.util, pickle, sys\n"
        f"path = {str(LEGACY_ENTRY_FILE)!r}\n"
        "spec = importlib.util.spec_from_file_location('custom_module', path)\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "sys.modules['custom_module'] = module\n"
        "spec.loader.exec_module(module)\n"
        "fn = module.compute_score\n"
        "result = fn('searchR1_nq', '<answer>Paris</answer>', {'target': ['Paris']}, None)\n"
        "same = pickle.loads(pickle.dumps(fn)) is fn\n"
        "print(fn.__module__, fn.__qualname__, result['score'], same)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout.split() == ["reward_plugins", "compute_score", "1.0", "True"]


PLUGIN_MODULE = """
from reward_plugins import scorer

@scorer("rp_legacy_length", "rp_legacy_source")
def length(response, golds, *, scale: float = 1.0):
    return scale * len(response)
"""


def test_legacy_file_reaches_a_plugin_scorer_in_a_fresh_process(tmp_path) -> None:
    """A scorer of an installed plugin (an entry point, never imported by hand) is reachable
    through the legacy file by its name, and pickles by reference as ``reward_plugins.<name>``."""
    info = tmp_path / "rp_legacy_plugin-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: rp-legacy-plugin\nVersion: 0.0.1\n"
    )
    (info / "entry_points.txt").write_text("[reward_plugins]\nlength = rp_legacy_plugin\n")
    (tmp_path / "rp_legacy_plugin.py").write_text(PLUGIN_MODULE)
    code = (
        "import pickle, sys\n"
        "from verl.utils.import_utils import load_extern_object\n"
        f"fn = load_extern_object({str(LEGACY_ENTRY_FILE)!r}, 'rp_legacy_length')\n"
        "print('rp_legacy_plugin' in sys.modules)\n"
        "print(fn.__module__, fn.__qualname__, pickle.loads(pickle.dumps(fn)) is fn)\n"
        "print(fn('rp_legacy_source', 'abcd', 'g', None, scale=2.0))\n"
        "print(fn('rp_legacy_source', 'abc', 'g', return_dict=False))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)])},
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout.splitlines() == [
        "True",
        "reward_plugins rp_legacy_length True",
        "{'score': 8.0}",
        "3.0",
    ]


def test_bare_module_name_is_taken_as_a_missing_file(tmp_path, monkeypatch) -> None:
    """README pitfall: ``path: reward_plugins`` without ``pkg://`` is a file path to verl."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="Custom module file not found"):
        load_extern_object("reward_plugins", "compute_score")
