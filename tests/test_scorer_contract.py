"""The scorer contract: options from the signature, checked values, result shaping, context
keywords, raw ground truth, ``"*"`` data sources, async scorers, routers made on demand, the
error family, and the registration race.

Scorers registered here use data sources named ``contract_*`` and are removed after each test.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import os
import pickle
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest

import reward_plugins
from reward_plugins import (
    Factor,
    InvalidGroundTruth,
    InvalidInput,
    InvalidOption,
    PluginError,
    PositiveInt,
    RewardPluginsError,
    Score,
    UnknownDataSource,
    UnknownScorer,
    registry,
    scorer,
)
from reward_plugins.router import route

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def restore_registry(restored_registry: registry.Registry) -> Iterator[None]:
    """Every test's scorers are removed afterwards."""
    yield


# ----------------------------------------------------------------------------- the errors


def test_error_family() -> None:
    assert issubclass(InvalidOption, RewardPluginsError)
    assert issubclass(InvalidOption, TypeError) and issubclass(InvalidOption, ValueError)
    assert issubclass(InvalidGroundTruth, ValueError)
    assert issubclass(InvalidInput, TypeError) and issubclass(InvalidInput, ValueError)
    for error in (UnknownDataSource, UnknownScorer):
        assert issubclass(error, LookupError) and issubclass(error, RewardPluginsError)
    for error in (InvalidGroundTruth, UnknownDataSource, UnknownScorer, InvalidInput, PluginError):
        assert issubclass(error, RewardPluginsError)


def test_metrics_and_text_layers_raise_the_family() -> None:
    from reward_plugins.metrics import score

    with pytest.raises(InvalidOption, match="unknown metric 'f2'"):
        score("f2", "a", "a")
    with pytest.raises(InvalidOption, match="unknown option"):
        score("f1", "a", "a", stemmer=True)
    with pytest.raises(InvalidInput, match="prediction must be a str"):
        score("f1", 1, "a")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="targets is empty"):
        score("f1", "a", [])


# ------------------------------------------------------------------------------ options


def _register_options_scorer() -> None:
    @scorer("contract_options", "contract_source")
    def options_scorer(
        response: str,
        golds: tuple[str, ...],
        *,
        weight: Score = 1.0,
        factor: Factor = 0.5,
        tags: PositiveInt = 3,
        mode: Literal["a", "b"] = "a",
        flag: bool = False,
        limit: int | None = None,
        untyped=2.5,
    ) -> float:
        return weight * factor * len(golds)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("weight", math.nan, "'weight' must be a finite number in [-1e+06, 1e+06], got float: nan"),
        ("weight", math.inf, "got float: inf"),
        ("weight", 1e7, "got float: 10000000.0"),
        ("weight", "0.1", "'weight' must be a finite number in [-1e+06, 1e+06], got str: '0.1'"),
        ("weight", True, "got bool: True"),
        ("factor", -0.1, "'factor' must be a finite number in [0, 1], got float: -0.1"),
        ("factor", 1.5, "got float: 1.5"),
        ("tags", 0, "'tags' must be an int >= 1, got int: 0"),
        ("tags", 2.0, "got float: 2.0"),
        ("mode", "c", "'mode' must be one of 'a', 'b', got str: 'c'"),
        ("flag", "false", "'flag' must be a bool, got str: 'false'"),
        ("flag", 1, "got int: 1"),
        ("limit", -1.5, "'limit' must be an int or None, got float: -1.5"),
        ("untyped", "x", "'untyped' must be a finite number, got str: 'x'"),
    ],
)
def test_option_values_are_checked_by_their_declared_types(
    option: str, value: Any, message: str
) -> None:
    _register_options_scorer()
    with pytest.raises(InvalidOption) as caught:
        reward_plugins.contract_options("contract_source", "r", "g", **{option: value})
    assert str(caught.value).startswith("contract_options: option ")
    assert message in str(caught.value)


def test_valid_options_are_used_and_defaults_come_from_the_signature() -> None:
    _register_options_scorer()
    spec = registry.lookup("contract_source", "contract_options").options
    assert {name: s.default for name, s in spec.items()} == {
        "weight": 1.0,
        "factor": 0.5,
        "tags": 3,
        "mode": "a",
        "flag": False,
        "limit": None,
        "untyped": 2.5,
    }
    result = reward_plugins.contract_options(
        "contract_source", "r", ["g", "h"], weight=-3, factor=1, limit=7, untyped=1
    )
    assert result == {"score": -6.0}


def test_unknown_and_missing_options() -> None:
    @scorer("contract_required", "contract_source")
    def required(response: str, golds: tuple[str, ...], *, level: int) -> float:
        return float(level)

    with pytest.raises(InvalidOption, match=r"missing required option\(s\) 'level'"):
        reward_plugins.contract_required("contract_source", "r", "g")
    with pytest.raises(InvalidOption, match=r"unknown option\(s\) 'levle'; valid options: level"):
        reward_plugins.contract_required("contract_source", "r", "g", levle=1)
    assert reward_plugins.contract_required("contract_source", "r", "g", level=4) == {"score": 4.0}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"spam_factor": math.nan}, "'spam_factor' must be a finite number in [0, 1]"),
        ({"spam_factor": -0.5}, "'spam_factor' must be a finite number in [0, 1]"),
        ({"score": math.inf}, "'score' must be a finite number in [-1e+06, 1e+06]"),
        ({"format_score": -math.inf}, "'format_score' must be a finite number"),
        ({"max_answer_tags": 0}, "'max_answer_tags' must be an int >= 1"),
        ({"max_answer_tags": -3}, "'max_answer_tags' must be an int >= 1"),
        (
            {"format_score": "0.1"},
            "'format_score' must be a finite number in [-1e+06, 1e+06], got str",
        ),
        ({"return_dict": "false"}, "'return_dict' must be a bool, got str: 'false'"),
        ({"normalizer": "squadd"}, "option 'normalizer' must be one of"),
    ],
)
@pytest.mark.parametrize("router", ["compute_score", "compute_score_subem", "compute_score_f1"])
def test_search_r1_option_nonsense_is_refused(
    router: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidOption, match=f"^{router}: .*{_escape(message)}"):
        getattr(reward_plugins, router)("searchR1_nq", "<answer>x</answer>", "x", **options)


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_structure_scores_of_the_format_scorer_are_bounded() -> None:
    with pytest.raises(InvalidOption, match="'retrieval_score' must be a finite number"):
        reward_plugins.compute_score_format("searchR1_nq", "x", "x", retrieval_score=math.nan)


def test_option_checks_never_call_the_scorer() -> None:
    calls: list[Any] = []

    @scorer("contract_raw_strict", "contract_source", ground_truth="raw")
    def strict(response: str, truth: Any, *, scale: float = 1.0) -> float:
        calls.append(truth)
        if not isinstance(truth, Mapping) or "solution" not in truth:
            raise ValueError("needs a solution")
        return scale

    from reward_plugins.adapters.trl import make_reward_func
    from reward_plugins.router import check_options

    make_reward_func("contract_raw_strict", scale=2.0)
    check_options("contract_raw_strict", "contract_source", {"scale": 0.5})
    assert calls == []


# ----------------------------------------------------------------------------- the result


def test_a_float_return_becomes_a_score_dict() -> None:
    @scorer("contract_float", "contract_source")
    def as_float(response: str, golds: tuple[str, ...]) -> float:
        return 0.25

    assert reward_plugins.contract_float("contract_source", "r", "g") == {"score": 0.25}
    assert reward_plugins.contract_float("contract_source", "r", "g", return_dict=False) == 0.25


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ("0.5", "must return a number or a mapping with 'score', got str"),
        ({"acc": 1.0}, "returned a mapping without 'score'"),
        (
            {"score": 1.0, "label": "yes"},
            "returned label='yes' (str); result values must be numbers",
        ),
        ({"score": math.nan}, "returned a non-finite score nan"),
        (None, "got NoneType"),
    ],
)
def test_results_that_break_the_contract(returned: Any, message: str) -> None:
    @scorer("contract_bad_result", "contract_source")
    def bad(response: str, golds: tuple[str, ...]) -> Any:
        return returned

    with pytest.raises(PluginError, match=_escape(message)):
        reward_plugins.contract_bad_result("contract_source", "r", "g")


def test_a_changing_key_set_is_an_error_naming_both() -> None:
    @scorer("contract_keys", "contract_source")
    def keys(response: str, golds: tuple[str, ...], *, bonus: float = 0.0) -> dict[str, float]:
        if response == "extra":
            return {"score": 1.0, "extra": 1.0}
        return {"score": 1.0, "acc": 1.0}

    assert reward_plugins.contract_keys("contract_source", "r", "g") == {"score": 1.0, "acc": 1.0}
    with pytest.raises(PluginError) as caught:
        reward_plugins.contract_keys("contract_source", "extra", "g")
    assert "returned keys ['extra', 'score']" in str(caught.value)
    assert "had keys ['acc', 'score']" in str(caught.value)
    # the key set is fixed per option set: another option set starts its own
    result = reward_plugins.contract_keys("contract_source", "extra", "g", bonus=1.0)
    assert result == {"score": 1.0, "extra": 1.0}


# ------------------------------------------------------------------ ground truth and context


def test_golds_are_a_tuple_of_strings_with_numeric_golds_coerced() -> None:
    seen: list[Any] = []

    @scorer("contract_golds", "contract_source")
    def golds_scorer(response: str, golds: tuple[str, ...]) -> float:
        seen.append(golds)
        return 0.0

    reward_plugins.contract_golds("contract_source", "r", {"target": ["Paris", "paris city"]})
    reward_plugins.contract_golds("contract_source", "r", np.array(["a", "b"], dtype=object))
    reward_plugins.contract_golds("contract_source", "r", "72")
    assert seen == [("Paris", "paris city"), ("a", "b"), ("72",)]
    assert all(type(g) is str for golds in seen for g in golds)


def test_raw_ground_truth_and_extra_info_are_read_only() -> None:
    received: dict[str, Any] = {}

    @scorer("contract_raw", "contract_source", ground_truth="raw")
    def raw(response: str, truth: Any, *, extra_info: Mapping[str, Any], data_source: str) -> float:
        received.update(truth=truth, extra_info=extra_info, data_source=data_source)
        return 1.0

    truth = {"solution": [1, 2], "meta": {"k": "v"}}
    info = {"index": 3, "tools_kwargs": {"search": {"n": 1}}}
    assert reward_plugins.contract_raw("contract_source", "r", truth, info) == {"score": 1.0}
    assert received["data_source"] == "contract_source"
    assert received["truth"]["solution"] == (1, 2)
    assert received["extra_info"]["tools_kwargs"]["search"]["n"] == 1
    with pytest.raises(TypeError):
        received["truth"]["solution"] = []
    with pytest.raises(TypeError):
        received["extra_info"]["tools_kwargs"]["search"]["n"] = 2
    assert truth == {"solution": [1, 2], "meta": {"k": "v"}}
    assert info == {"index": 3, "tools_kwargs": {"search": {"n": 1}}}
    # no extra_info from the caller: an empty read-only mapping
    reward_plugins.contract_raw("contract_source", "r", truth)
    assert dict(received["extra_info"]) == {}


def test_raw_numpy_ground_truth_is_a_read_only_view() -> None:
    received: list[Any] = []

    @scorer("contract_raw_array", "contract_source", ground_truth="raw")
    def raw(response: str, truth: Any) -> float:
        received.append(truth)
        return 0.0

    array = np.array([1.0, 2.0])
    reward_plugins.contract_raw_array("contract_source", "r", array)
    with pytest.raises(ValueError, match="read-only"):
        received[0][0] = 5.0
    assert array[0] == 1.0 and array.flags.writeable


# ------------------------------------------------------------------------- data sources


def test_wildcard_data_sources_come_after_exact_matches() -> None:
    @scorer("contract_any", "*")
    def anywhere(response: str, golds: tuple[str, ...]) -> float:
        return 0.5

    @scorer("contract_any", "contract_special")
    def special(response: str, golds: tuple[str, ...]) -> float:
        return 1.0

    assert reward_plugins.contract_any("contract_special", "r", "g")["score"] == 1.0
    assert reward_plugins.contract_any("any_source_at_all", "r", "g")["score"] == 0.5
    assert reward_plugins.contract_any("searchR1_nq", "r", "g")["score"] == 0.5
    assert "contract_any" in reward_plugins.registered()["*"]
    # the built-in names still resolve exactly
    assert reward_plugins.compute_score("searchR1_nq", "<answer>g</answer>", "g")["score"] == 1.0


def test_unknown_names_and_sources_are_told_apart() -> None:
    with pytest.raises(UnknownScorer, match="no scorer is registered as 'compute_scor'; did you"):
        route("compute_scor", "searchR1_nq", "r", "g", {})
    with pytest.raises(UnknownDataSource, match="did you mean 'searchR1_nq'"):
        route("compute_score", "searchR1_nqq", "r", "g", {})

    @scorer("contract_only_here", "contract_source")
    def only_here(response: str, golds: tuple[str, ...]) -> float:
        return 0.0

    with pytest.raises(UnknownScorer, match="data source 'searchR1_nq' has no scorer"):
        route("contract_only_here", "searchR1_nq", "r", "g", {})


@pytest.mark.parametrize("data_source", [["searchR1_nq"], {"a": 1}, 7, None, b"searchR1_nq"])
def test_data_source_must_be_a_string(data_source: Any) -> None:
    with pytest.raises(UnknownDataSource, match="data_source must be a str, got"):
        reward_plugins.compute_score(data_source, "<answer>x</answer>", "x")


def test_non_string_response_is_an_input_error() -> None:
    with pytest.raises(InvalidInput, match="solution_str must be a str, got bytes"):
        reward_plugins.compute_score("searchR1_nq", b"<answer>x</answer>", "x")


# ------------------------------------------------------------------------- registration


@pytest.mark.parametrize(
    ("define", "message"),
    [
        ("def f(response, golds, **options): return 0.0", "no **kwargs"),
        ("def f(response): return 0.0", "two positional parameters"),
        ("def f(response, golds, extra, *, a=1): return 0.0", "two positional parameters"),
    ],
)
def test_signatures_that_break_the_contract(define: str, message: str) -> None:
    namespace: dict[str, Any] = {}
    exec(define, namespace)
    with pytest.raises(PluginError, match=_escape(message)):
        scorer("contract_bad_signature", "contract_source")(namespace["f"])


@pytest.mark.parametrize("name", ["not-an-identifier", "_private", "class", "metrics", "scorer"])
def test_names_that_verl_could_not_reach(name: str) -> None:
    with pytest.raises(PluginError):
        scorer(name, "contract_source")


def test_two_functions_claiming_one_name_are_both_named() -> None:
    @scorer("contract_clash", "contract_source")
    def first(response: str, golds: tuple[str, ...]) -> float:
        return 0.0

    def second(response: str, golds: tuple[str, ...]) -> float:
        return 1.0

    with pytest.raises(PluginError) as caught:
        scorer("contract_clash", ["contract_other", "contract_source"])(second)
    message = str(caught.value)
    assert "first" in message and "second" in message
    assert "contract_other" not in reward_plugins.registered()  # nothing half-registered


def test_register_is_the_old_name_of_scorer() -> None:
    assert reward_plugins.register is reward_plugins.scorer


# ---------------------------------------------------------------------- routers by name


def test_any_scorer_is_a_picklable_module_attribute() -> None:
    @scorer("contract_attribute", "contract_source")
    def attribute(response: str, golds: tuple[str, ...]) -> float:
        return 1.0

    router = reward_plugins.contract_attribute
    assert router is reward_plugins.contract_attribute
    assert router.__module__ == "reward_plugins" and router.__qualname__ == "contract_attribute"
    assert pickle.loads(pickle.dumps(router)) is router
    assert list(inspect.signature(router).parameters)[:4] == [
        "data_source",
        "solution_str",
        "ground_truth",
        "extra_info",
    ]
    with pytest.raises(AttributeError, match="no scorer is registered as 'contract_missing'"):
        reward_plugins.contract_missing  # noqa: B018


def test_compute_score_batch_takes_any_scorer_and_extra_infos() -> None:
    @scorer("contract_batch", "contract_source")
    def batch(response: str, golds: tuple[str, ...], *, extra_info: Mapping[str, Any]) -> float:
        return float(extra_info.get("index", -1))

    results = reward_plugins.compute_score_batch(
        ["contract_source"] * 2,
        ["a", "b"],
        ["g", "g"],
        [{"index": 4}, None],
        scorer="contract_batch",
    )
    assert results == [{"score": 4.0}, {"score": -1.0}]


# ---------------------------------------------------------------------------------- async


def _register_async() -> None:
    @scorer("contract_async", "contract_source")
    async def remote_judge(response: str, golds: tuple[str, ...], *, scale: float = 1.0) -> float:
        await asyncio.sleep(0)
        return scale * float(response in golds)


def test_async_scorer_router_is_a_coroutine_function_for_verl() -> None:
    _register_async()
    router = reward_plugins.contract_async
    assert inspect.iscoroutinefunction(router)
    result = asyncio.run(router("contract_source", "g", ["g"], scale=2.0))
    assert result == {"score": 2.0}


def test_async_scorer_from_synchronous_callers() -> None:
    _register_async()
    assert route("contract_async", "contract_source", "g", ["g"], {}) == {"score": 1.0}
    assert reward_plugins.compute_score_batch(
        ["contract_source"], ["x"], ["g"], scorer="contract_async"
    ) == [{"score": 0.0}]

    async def inside_a_running_loop() -> Any:
        return route("contract_async", "contract_source", "g", ["g"], {"scale": 3.0})

    assert asyncio.run(inside_a_running_loop()) == {"score": 3.0}


def test_async_router_runs_a_sync_scorer_in_a_thread() -> None:
    from reward_plugins.router import route_async

    result = asyncio.run(route_async("compute_score", "searchR1_nq", "<answer>g</answer>", "g", {}))
    assert result == reward_plugins.compute_score("searchR1_nq", "<answer>g</answer>", "g")


# ------------------------------------------------------------------------ registration race

RACE = textwrap.dedent(
    """
    import sys, threading, time
    from reward_plugins import registry

    add = registry.REGISTRY.add

    def slow_add(registration):  # widen the window between two registrations
        add(registration)
        time.sleep(0.05)

    registry.REGISTRY.add = slow_add
    import reward_plugins

    errors = []

    def import_the_plugin():
        import reward_plugins.plugins.search_r1  # noqa: F401

    def score(name):
        time.sleep(0.06)  # while the plugin is half-way through its registrations
        try:
            reward_plugins.compute_score_batch(
                ["searchR1_nq"], ["<answer>x</answer>"], ["x"], scorer=name
            )
        except Exception as error:
            errors.append(f"{name}: {type(error).__name__}: {error}")

    threads = [threading.Thread(target=import_the_plugin)] + [
        threading.Thread(target=score, args=(name,))
        for name in ("compute_score_format", "compute_score_metric", "compute_score_f1")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(errors)
    """
)


def test_a_lookup_racing_the_plugin_import_waits_for_whole_registrations() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", RACE],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY_ROOT)},
        timeout=120,
        check=True,
    )
    # compute_score_metric needs a metric option: the only error is that one, not a lookup miss
    errors = eval(completed.stdout.strip().splitlines()[-1])
    assert len(errors) == 1 and "missing required option(s) 'metric'" in errors[0], errors


def test_a_bound_option_set_is_not_reached_by_later_edits_of_its_values() -> None:
    response = "<think>a</think><answer>x</answer><|im_end|>"
    markers = ["<|im_end|>"]
    first = reward_plugins.compute_score_format("searchR1_nq", response, "x", end_markers=markers)
    markers.clear()
    second = reward_plugins.compute_score_format("searchR1_nq", response, "x", end_markers=markers)
    markers.append("<|im_end|>")
    third = reward_plugins.compute_score_format("searchR1_nq", response, "x", end_markers=markers)
    assert (first["format_valid"], second["format_valid"], third["format_valid"]) == (1.0, 0.0, 1.0)


@pytest.mark.slow  # 64 ground truths of 256 KiB scored under tracemalloc
def test_gold_indexes_stay_within_their_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Distinct large ground truths (64 of 256 KiB, scored with F1 so every lazily built part
    exists) do not pile up: the gold indexes are bounded by bytes, not only by entries."""
    import tracemalloc

    from reward_plugins import groundtruth
    from reward_plugins.metrics import qa

    budget = 2 * 1024 * 1024
    monkeypatch.setattr(qa, "GOLD_INDEX_BYTE_BUDGET", budget)
    monkeypatch.setattr(groundtruth, "MEMO_BYTE_BUDGET", budget)
    for cache in qa._gold_caches.values():  # what earlier tests left, counted under 64 MiB
        cache.clear()
    monkeypatch.setattr(qa, "_gold_bytes", 0)
    groundtruth._clear_memo()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for seed in range(64):
            gold = " ".join(f"w{seed}x{i}" for i in range(256 * 1024 // 10))
            response = f"<answer>w{seed}x1 w{seed}x2</answer>"
            reward_plugins.compute_score_f1("searchR1_nq", response, {"target": [gold]})
            assert qa._gold_bytes <= budget
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 4 * budget, f"{kept / 2**20:.1f} MiB kept"


def test_unknown_data_sources_scan_the_entry_points_once_per_process(
    monkeypatch: pytest.MonkeyPatch, restored_registry: registry.Registry
) -> None:
    scans: list[str] = []
    real_entry_points = registry.entry_points

    def counting_entry_points(**kwargs: Any) -> Any:
        scans.append(kwargs["group"])
        return real_entry_points(**kwargs)

    monkeypatch.setattr(registry, "entry_points", counting_entry_points)
    fresh = dataclasses.replace(restored_registry.snapshot(), entry_points_loaded=False)
    restored_registry.restore(fresh)  # as in a fresh process
    for row in range(3):
        with pytest.raises(UnknownDataSource):
            reward_plugins.compute_score(f"contract_unknown_{row}", "<answer>x</answer>", "x")
    assert scans == ["reward_plugins"]
