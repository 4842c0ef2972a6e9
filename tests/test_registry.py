"""The registry: lookups, did-you-mean errors, registration rules and entry-point plugins.

Entry-point tests install a real distribution into a temporary ``sys.path`` entry (a
``*.dist-info`` folder with ``METADATA`` and ``entry_points.txt`` plus the module it names), so
``importlib.metadata`` finds it exactly as it finds an installed package.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import reward_plugins
from reward_plugins import (
    PluginError,
    UnknownDataSource,
    UnknownScorer,
    broken_plugins,
    load_plugins,
    register,
    registered,
    registry,
)
from reward_plugins.plugins.search_r1 import SEARCH_R1_DATA_SOURCES, score_em
from reward_plugins.router import route
from reward_plugins.testing import registry_restored

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
QA_SCORERS = ("compute_score", "compute_score_f1", "compute_score_subem")


@pytest.fixture
def registry_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry restored after the test (:func:`registry_restored`), and the test's
    ``rp_test_*`` plugin modules unloaded."""
    modules = set(sys.modules)
    with registry_restored():
        yield
    for name in set(sys.modules) - modules:
        if name.startswith("rp_test_"):
            del sys.modules[name]


def test_builtin_search_r1_registrations() -> None:
    sources = registered()
    for source in SEARCH_R1_DATA_SOURCES:
        assert set(QA_SCORERS) <= set(sources[source])  # later QA scorers may join them
    assert SEARCH_R1_DATA_SOURCES == (
        "searchR1_nq",
        "searchR1_triviaqa",
        "searchR1_popqa",
        "searchR1_hotpotqa",
        "searchR1_2wikimultihopqa",
        "searchR1_musique",
        "searchR1_bamboogle",
    )
    with pytest.raises(TypeError):
        registered()["x"] = ()  # type: ignore[index]


def test_option_names_are_the_keyword_only_parameters() -> None:
    """The issue's options are accepted (more may be); penalize_subem only by SubEM."""
    common = {"format_score", "score", "max_answer_tags", "spam_factor", "extract"}
    em = set(registry.lookup("searchR1_nq", "compute_score").options)
    f1 = set(registry.lookup("searchR1_nq", "compute_score_f1").options)
    subem = set(registry.lookup("searchR1_musique", "compute_score_subem").options)
    assert common <= em and common <= f1
    assert subem == em | {"penalize_subem"}
    assert "penalize_subem" not in em | f1
    assert registry.lookup("searchR1_nq", "compute_score").function is score_em


@pytest.mark.parametrize(
    ("data_source", "suggestion"),
    [
        ("searchR1_nqq", "searchR1_nq"),
        ("searchr1_hotpotqa", "searchR1_hotpotqa"),
        ("searchR1_musiqe", "searchR1_musique"),
        ("nq", None),  # Search-R1's unprefixed name: too short for a suggestion
    ],
)
def test_unknown_data_source(data_source: str, suggestion: str | None) -> None:
    for call in (
        lambda: registry.lookup(data_source, "compute_score"),
        lambda: reward_plugins.compute_score(data_source, "<answer>x</answer>", ["x"]),
        lambda: reward_plugins.compute_score_subem(data_source, "<answer>x</answer>", ["x"]),
    ):
        with pytest.raises(UnknownDataSource) as caught:
            call()
        assert isinstance(caught.value, LookupError)
        message = str(caught.value)
        assert repr(data_source) in message
        for source in SEARCH_R1_DATA_SOURCES:
            assert source in message
        if suggestion is None:
            assert "did you mean" not in message
        else:
            assert f"did you mean {suggestion!r}" in message


@pytest.mark.parametrize(
    ("data_source", "shown"),
    [(None, "NoneType: None"), (["searchR1_nq"], "list: ['searchR1_nq']"), (7, "int: 7")],
)
def test_non_string_data_source(data_source: Any, shown: str) -> None:
    """Not a str (also unhashable: no TypeError from the table lookup) is UnknownDataSource."""
    for call in (
        lambda: registry.lookup(data_source, "compute_score"),
        lambda: reward_plugins.compute_score(data_source, "<answer>x</answer>", ["x"]),
    ):
        with pytest.raises(UnknownDataSource) as caught:
            call()
        assert str(caught.value) == f"data_source must be a str, got {shown}"


def test_unknown_scorer_on_a_known_source() -> None:
    """A name no scorer has is UnknownScorer (not UnknownDataSource), listing the scorers."""
    for call in (
        lambda: route("compute_score_bleu", "searchR1_nq", "<answer>x</answer>", ["x"], {}),
        lambda: reward_plugins.compute_score_batch(
            ["searchR1_nq"], ["<answer>x</answer>"], [["x"]], scorer="compute_score_bleu"
        ),
    ):
        with pytest.raises(UnknownScorer) as caught:
            call()
        assert not isinstance(caught.value, UnknownDataSource)
        assert isinstance(caught.value, LookupError)
        message = str(caught.value)
        assert message.startswith(
            "no scorer is registered as 'compute_score_bleu'; did you mean 'compute_score'? "
            "Registered scorers: answer_list_penalty, compute_score, "
        )
        for name in (
            *QA_SCORERS,
            "compute_score_format",
            "compute_score_metric",
            "compute_score_composed",
            "length_penalty",
        ):
            assert name in message


@pytest.mark.usefixtures("registry_state")
def test_a_scorer_of_another_source_on_a_known_source() -> None:
    """A scorer that exists, but not for this data source: the message names the source and
    lists the scorers it has."""

    @register("rp_elsewhere", "rp_other_source")
    def elsewhere(solution_str: str, golds: tuple[str, ...]) -> float:
        return 0.0

    with pytest.raises(UnknownScorer) as caught:
        route("rp_elsewhere", "searchR1_nq", "<answer>x</answer>", ["x"], {})
    message = str(caught.value)
    assert message.startswith(
        "data source 'searchR1_nq' has no scorer 'rp_elsewhere'; its scorers: compute_score, "
    )
    for name in QA_SCORERS:
        assert name in message


@pytest.mark.usefixtures("registry_state")
def test_register_same_function_twice_is_a_no_op() -> None:
    def scorer(solution_str: str, golds: tuple[str, ...], *, bonus: float = 0.0) -> dict:
        return {"score": float(solution_str in golds) + bonus}

    register("exact", ["rp_src_a", "rp_src_b"])(scorer)
    assert register("exact", ["rp_src_a"])(scorer) is scorer
    assert registered()["rp_src_a"] == ("exact",)
    assert set(registry.lookup("rp_src_b", "exact").options) == {"bonus"}
    assert registry.lookup("rp_src_b", "exact").options["bonus"].default == 0.0
    assert reward_plugins.compute_score_batch(
        ["rp_src_a", "rp_src_b"], ["x", "y"], ["x", "x"], scorer="exact", bonus=0.5
    ) == [{"score": 1.5}, {"score": 0.5}]


@pytest.mark.usefixtures("registry_state")
def test_register_a_single_source_string() -> None:
    @register("length", "rp_single_source")
    def length(solution_str: str, golds: tuple[str, ...]) -> dict:
        return {"score": float(len(solution_str))}

    assert registered()["rp_single_source"] == ("length",)
    assert "r" not in registered()  # the string is one source, not its characters


@pytest.mark.usefixtures("registry_state")
def test_another_function_under_a_taken_name() -> None:
    def impostor(solution_str: str, golds: tuple[str, ...]) -> dict:
        return {"score": 1.0}

    with pytest.raises(PluginError) as caught:
        register("compute_score", ["rp_new_source", "searchR1_nq"])(impostor)
    assert str(caught.value) == (
        "scorer 'compute_score' for data source 'searchR1_nq' is claimed twice: by "
        "reward_plugins.plugins.search_r1.score_em (from reward_plugins.plugins.search_r1) and by "
        f"{__name__}.test_another_function_under_a_taken_name.<locals>.impostor (from {__name__})"
    )
    # all-or-nothing: the free source was not registered either
    assert "rp_new_source" not in registered()
    assert registry.lookup("searchR1_nq", "compute_score").function is score_em


# ------------------------------------------------------------------------------- entry points


def _install_distribution(root: Path, entry_points: dict[str, str], modules: dict[str, str]) -> str:
    """Write a minimal installed distribution (dist-info + modules) under ``root``; its name."""
    name = f"rp-test-{uuid.uuid4().hex[:8]}"
    info = root / f"{name.replace('-', '_')}-0.0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[reward_plugins]\n{lines}")
    for module, source in modules.items():
        (root / f"{module}.py").write_text(source)
    return name


PLUGIN_SOURCE = """
from reward_plugins import register

@register("compute_score", ["{source}"])
def length_score(solution_str, golds, *, scale=1.0):
    return {{"score": scale * len(solution_str), "golds": len(golds)}}
"""


def _forget_entry_points() -> None:
    """The default registry as it is, but with its entry points not loaded yet."""
    snapshot = registry.REGISTRY.snapshot()
    registry.REGISTRY.restore(dataclasses.replace(snapshot, entry_points_loaded=False))


def _module_name() -> str:
    return f"rp_test_{uuid.uuid4().hex[:8]}"


@pytest.mark.usefixtures("registry_state")
def test_lookup_miss_loads_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = _module_name()
    source = f"{module}_source"
    _install_distribution(
        tmp_path, {"length": module}, {module: PLUGIN_SOURCE.format(source=source)}
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    _forget_entry_points()  # as in a fresh process
    assert module not in sys.modules
    result = reward_plugins.compute_score(source, "abcd", {"target": ["g", "h"]}, scale=2.0)
    assert result == {"score": 8.0, "golds": 2}
    assert module in sys.modules
    assert reward_plugins.compute_score(source, "abc", "g", return_dict=False) == 3.0
    with pytest.raises(TypeError, match=r"'scael'.*valid options: scale"):
        reward_plugins.compute_score(source, "abc", "g", scael=2.0)
    assert load_plugins() == 0


@pytest.mark.usefixtures("registry_state")
def test_load_plugins_counts_imported_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _module_name(), _module_name()
    _install_distribution(
        tmp_path,
        {"first": first, "second": second},
        {
            first: PLUGIN_SOURCE.format(source=f"{first}_source"),
            second: PLUGIN_SOURCE.format(source=f"{second}_source"),
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_plugins() == 2
    assert load_plugins() == 0
    assert f"{first}_source" in registered() and f"{second}_source" in registered()


def test_load_plugins_in_a_fresh_process() -> None:
    """A fresh process imports each built-in plugin and entry-point module once.

    The Search-R1 plugin is both built in and declared as an entry point: counted once.
    """
    code = (
        "import sys\n"
        "from importlib.metadata import entry_points\n"
        "import reward_plugins\n"
        "from reward_plugins.registry import BUILTIN_PLUGINS, ENTRY_POINT_GROUP\n"
        "modules = {e.value for e in entry_points(group=ENTRY_POINT_GROUP)}\n"
        "expected = len(modules | set(BUILTIN_PLUGINS))\n"
        "print(reward_plugins.load_plugins() == expected, reward_plugins.load_plugins(),\n"
        "      'reward_plugins.plugins.search_r1' in sys.modules)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY_ROOT)},
        cwd=REPOSITORY_ROOT,
        timeout=120,
        check=True,
    )
    assert completed.stdout.split() == ["True", "0", "True"]


REGISTERS_THEN_RAISES = """
from reward_plugins import register

@register("rp_half", ["{module}_source", "searchR1_nq"])
def half(solution_str, golds):
    return 1.0

raise RuntimeError("half-registered")
"""

CLAIMS_A_TAKEN_NAME = """
from reward_plugins import register

@register("rp_clash", ["{module}_source"])
def first(solution_str, golds):
    return 1.0

@register("compute_score", ["{module}_source", "searchR1_nq"])
def impostor(solution_str, golds):
    return 1.0
"""

# (entry point name, module source or None for a missing module, the error it records)
BROKEN: list[tuple[str, str | None, str]] = [
    ("raises-at-import", "raise RuntimeError('plugin exploded')", "plugin exploded"),
    ("missing-module", None, "No module named '{module}'"),
    ("registers-then-raises", REGISTERS_THEN_RAISES, "half-registered"),
    (
        "claims-a-taken-name",
        CLAIMS_A_TAKEN_NAME,
        "scorer 'compute_score' for data source 'searchR1_nq' is claimed twice: by "
        "reward_plugins.plugins.search_r1.score_em (from reward_plugins.plugins.search_r1) and "
        "by {module}.impostor (from entry point 'claims-a-taken-name' of distribution "
        "'{distribution}')",
    ),
]


@pytest.mark.usefixtures("registry_state")
@pytest.mark.parametrize(
    ("entry_name", "module_source", "error"), BROKEN, ids=[b[0] for b in BROKEN]
)
def test_broken_entry_point_is_logged_once_recorded_and_named(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    entry_name: str,
    module_source: str | None,
    error: str,
) -> None:
    """load_plugins() does not raise: the entry point is logged once (WARNING) and recorded,
    whatever it registered is withdrawn, a lookup of an unknown data source names it (and its
    distribution), and known data sources keep working."""
    module = _module_name()
    modules = {} if module_source is None else {module: module_source.format(module=module)}
    distribution = _install_distribution(tmp_path, {entry_name: module}, modules)
    monkeypatch.syspath_prepend(str(tmp_path))
    caplog.set_level(logging.WARNING, logger="reward_plugins.registry")
    before = dict(registered())

    assert load_plugins() == 0  # nothing imported successfully; no exception
    described = (
        f"entry point {entry_name!r} ({module}) of distribution {distribution!r} failed to load: "
        + error.format(module=module, distribution=distribution)
    )
    assert [(b.entry_point, b.module, b.distribution) for b in broken_plugins()] == [
        (entry_name, module, distribution)
    ]
    assert broken_plugins()[0].describe() == described
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == registry.logger.name]
    assert logged == [(logging.WARNING, f"reward_plugins: {described}")]

    # rolled back: no data source, scorer or router of the module survives
    assert dict(registered()) == before
    assert f"{module}_source" not in registered()
    for name in ("rp_half", "rp_clash"):
        assert not hasattr(reward_plugins, name)
    assert registry.lookup("searchR1_nq", "compute_score").function is score_em

    _forget_entry_points()  # as in a fresh lookup miss: entry points load again
    with pytest.raises(UnknownDataSource) as caught:  # a lookup miss loads entry points too
        reward_plugins.compute_score("rp_nowhere", "<answer>x</answer>", ["x"])
    message = str(caught.value)
    assert message.startswith("no scorer is registered for data_source='rp_nowhere'")
    assert message.endswith(f". Not loaded, so their data sources are unknown: {described}")
    assert repr(distribution) in message
    assert load_plugins() == 0
    logged = [r for r in caplog.records if r.name == registry.logger.name]
    assert len(logged) == 1  # logged once, not on every load
    assert len(broken_plugins()) == 1
    # known data sources keep working
    assert reward_plugins.compute_score("searchR1_nq", "<answer>x</answer>", ["x"])["score"] == 1.0


# ------------------------------------------------------------------------ the registry object


def test_a_registry_object_snapshots_and_restores() -> None:
    own = registry.Registry(builtin_plugins=(), entry_point_group="rp_test_no_plugins")
    before = own.snapshot()
    assert own.registered() == {} and before.entry_points_loaded

    @own.scorer("rp_snapshot_scorer", "rp_snapshot_source")
    def snapshot_scorer(response: str, golds: tuple[str, ...], *, scale: float = 1.0) -> float:
        return scale

    assert own.lookup("rp_snapshot_source", "rp_snapshot_scorer").function is snapshot_scorer
    with pytest.raises(UnknownScorer, match="did you mean 'rp_snapshot_scorer'"):
        own.lookup("rp_snapshot_source", "rp_snapshot_scorr")
    own.restore(before)
    assert own.registered() == {}
    with own.preserved():
        own.scorer("rp_snapshot_scorer", "rp_other_source")(snapshot_scorer)
        assert own.scorer_names() == ("rp_snapshot_scorer",)
    assert own.scorer_names() == ()
    # the default registry never saw them
    assert "rp_snapshot_scorer" not in registry.scorer_names()


def test_the_fixture_restores_the_default_registry(restored_registry: registry.Registry) -> None:
    assert restored_registry is registry.REGISTRY

    @register("rp_fixture_scorer", "rp_fixture_source")
    def fixture_scorer(response: str, golds: tuple[str, ...]) -> float:
        return 1.0

    assert reward_plugins.rp_fixture_scorer("rp_fixture_source", "x", "g") == {"score": 1.0}


def test_the_fixture_left_nothing_behind() -> None:
    assert "rp_fixture_scorer" not in registry.scorer_names()
    assert not hasattr(reward_plugins, "rp_fixture_scorer")
