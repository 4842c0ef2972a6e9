"""Messages about a scorer's ``extra_info`` name the types the caller gave, not the read-only
copies the registry hands the scorer (``list``, not ``tuple``; ``dict``, not ``mappingproxy``)."""

from __future__ import annotations

import json
import pickle
import re
from types import MappingProxyType
from typing import Any

import pytest

import reward_plugins
from reward_plugins.errors import InvalidInput
from reward_plugins.options import FrozenList, describe_value
from reward_plugins.registry import read_only

FINITE = "must be a finite real of magnitude at most 1e+06, got "


def tool(extra_info: Any) -> Any:
    return reward_plugins.compute_score_tool(
        "searchR1_nq", "<answer>a</answer>", ["a"], extra_info=extra_info
    )


@pytest.mark.parametrize(
    ("extra_info", "message"),
    [
        ([1, 2], "compute_score_tool: extra_info must be a mapping, got list"),
        ((1, 2), "compute_score_tool: extra_info must be a mapping, got tuple"),
        ("abc", "compute_score_tool: extra_info must be a mapping, got str"),
        (
            {"tool_rewards": {"a": 1}},
            f"compute_score_tool: extra_info[\"tool_rewards\"] {FINITE}dict: {{'a': 1}}",
        ),
        (
            {"tool_rewards": [[1]]},
            f'compute_score_tool: extra_info["tool_rewards"][0] {FINITE}list: [1]',
        ),
        (
            {"tool_rewards": [{"a": [1, {"b": 2}]}]},
            f"[0] {FINITE}dict: {{'a': [1, {{'b': 2}}]}}",
        ),
    ],
)
def test_tool_messages_name_the_callers_types(extra_info: Any, message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        tool(extra_info)


@pytest.mark.parametrize(
    "extra_info", [[1, 2], {"tool_rewards": {"a": 1}}, {"tool_rewards": [[1]]}]
)
def test_tool_messages_never_name_the_frozen_types(extra_info: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        tool(extra_info)
    assert not re.search(r"tuple|mappingproxy|\(1,\)", str(caught.value))


def test_a_non_mapping_extra_info_is_refused_by_every_scorer_that_takes_it() -> None:
    with pytest.raises(
        InvalidInput,
        match=re.escape("compute_score_composed: extra_info must be a mapping, got list"),
    ):
        reward_plugins.compute_score_composed(
            "searchR1_nq", "<answer>a</answer>", ["a"], extra_info=[1], recipe="search_r1_em"
        )


def test_none_and_mappings_are_still_accepted() -> None:
    for extra_info in (None, {}, MappingProxyType({"tool_rewards": [0.5]})):
        result = tool(extra_info)
        assert isinstance(result, dict) and result["score"] >= 1.0


def test_read_only_freezes_lists_to_frozen_lists_and_keeps_tuples() -> None:
    frozen = read_only({"a": [1, (2, [3])], "b": (4,)})
    assert type(frozen) is MappingProxyType
    assert type(frozen["a"]) is FrozenList and type(frozen["b"]) is tuple
    assert type(frozen["a"][1]) is tuple and type(frozen["a"][1][1]) is FrozenList
    assert frozen["a"] == (1, (2, (3,))) and hash(frozen["a"]) == hash((1, (2, (3,))))
    assert type(read_only(FrozenList([1]))) is FrozenList


def test_a_frozen_list_pickles_and_writes_json_as_a_list() -> None:
    frozen = FrozenList([1, "a", FrozenList([2.5])])
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(frozen, protocol=protocol))
        assert type(again) is FrozenList and type(again[2]) is FrozenList
        assert again == frozen == (1, "a", (2.5,))
    assert json.dumps(frozen) == '[1, "a", [2.5]]'
    assert json.loads(json.dumps({"x": frozen})) == {"x": [1, "a", [2.5]]}
    assert repr(frozen) == "(1, 'a', (2.5,))"


def test_describe_value_shows_frozen_values_as_the_caller_gave_them() -> None:
    assert describe_value(MappingProxyType({"a": 1})) == "dict: {'a': 1}"
    assert describe_value(FrozenList([1, 2])) == "list: [1, 2]"
    assert describe_value(read_only({"a": [1, {"b": (2,)}]})) == "dict: {'a': [1, {'b': (2,)}]}"
    assert describe_value((1, FrozenList([2]))) == "tuple: (1, [2])"
    assert describe_value(FrozenList([10**5000])) == "list: (too large to show)"
    assert describe_value([1, 2]) == "list: [1, 2]" and describe_value((1,)) == "tuple: (1,)"
