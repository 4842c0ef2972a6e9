"""The bounded cache helper, and the package's memos bounded by the limits of
:mod:`reward_plugins.cache`."""

from __future__ import annotations

from pathlib import Path

from reward_plugins import cache
from reward_plugins.cache import BoundedCache
from reward_plugins.plugins import composed, qa_core
from reward_plugins.registry import registrations_named


def test_empties_itself_when_a_new_key_would_pass_the_limit() -> None:
    memo = BoundedCache[int, str](3)
    for key in range(3):
        memo[key] = str(key)
    assert dict(memo) == {0: "0", 1: "1", 2: "2"}
    memo[1] = "one"  # a key it holds: replaced, nothing forgotten
    assert dict(memo) == {0: "0", 1: "one", 2: "2"}
    memo[3] = "3"
    assert dict(memo) == {3: "3"} and memo.limit == 3
    assert memo.get(0) is None and 3 in memo


def test_a_long_run_of_new_keys_stays_within_the_limit() -> None:
    memo = BoundedCache[int, int](10)
    sizes = set()
    for key in range(1000):
        memo[key] = key
        sizes.add(len(memo))
    assert sizes == set(range(1, 11))
    assert dict(memo) == {key: key for key in range(990, 1000)}


def test_the_option_sets_of_a_scorer_are_bounded() -> None:
    (registration,) = registrations_named("compute_score")
    assert registration._bound.limit == cache.BOUND_OPTION_SETS
    for score in range(cache.BOUND_OPTION_SETS + 5):
        registration.bind({"score": 1 + score / 10_000})
    assert 1 <= len(registration._bound) <= cache.BOUND_OPTION_SETS


def test_recipes_and_metrics_are_bounded() -> None:
    assert composed._recipes.limit == composed._by_identity.limit == cache.RECIPES
    assert qa_core._metrics.limit == cache.BUILT_METRICS
    # a fresh, equal components list on every call: the identity memo no longer grows without
    # end (it was emptied only with the recipes, which an equal list never adds to)
    components = [{"scorer": "compute_score", "as": "em", "weight": 1.0}]
    for _ in range(cache.RECIPES + 10):
        composed.recipe_of(components=[dict(c) for c in components])
    assert len(composed._by_identity) <= cache.RECIPES


def test_the_shared_ground_truths_of_a_dump_are_bounded() -> None:
    from reward_plugins.runtime import rows

    assert rows._shared.limit == cache.SHARED_GROUND_TRUTHS
    assert rows._numpy_strings.cache_info().maxsize == cache.SHARED_GROUND_TRUTHS
    first = rows.ground_truth({"target": "['a' 'b']"})
    assert first == ({"target": ["a", "b"]}, True)
    assert rows.ground_truth({"target": "['a' 'b']"}) is first  # one object per distinct value
    for number in range(cache.SHARED_GROUND_TRUTHS + 5):
        rows.ground_truth(f"gold {number}")
    assert 1 <= len(rows._shared) <= cache.SHARED_GROUND_TRUTHS


def test_the_declared_tools_are_bounded(tmp_path: Path) -> None:
    from reward_plugins.plugins.tool_agent import declared_tools

    assert declared_tools.cache_info().maxsize == cache.TOOL_CONFIGS
    for number in range(cache.TOOL_CONFIGS + 3):
        config = tmp_path / f"tools_{number}.yaml"
        config.write_text(
            "tools:\n  - class_name: x.Tool\n    config: {}\n    tool_schema:\n"
            "      type: function\n      function:\n"
            f"        name: tool_{number}\n        description: d\n"
            "        parameters: {type: object, properties: {q: {type: string}}, required: [q]}\n"
        )
        assert set(declared_tools(str(config))) == {f"tool_{number}"}
    assert declared_tools.cache_info().currsize == cache.TOOL_CONFIGS


def test_the_trajectory_grammars_are_bounded() -> None:
    from reward_plugins.plugins import trajectory

    assert trajectory._grammars.limit == cache.TRAJECTORY_GRAMMARS
    for number in range(cache.TRAJECTORY_GRAMMARS + 5):
        tags = trajectory.TrajectoryTags(think=f"think{number}")
        text = f"<think{number}>a</think{number}><answer>b</answer>"
        assert trajectory.format_error(text, tags) is None
    assert 1 <= len(trajectory._grammars) <= cache.TRAJECTORY_GRAMMARS


def test_the_tag_and_role_patterns_are_bounded() -> None:
    from reward_plugins import extract, tool_trajectory

    assert extract._tag_patterns.limit == cache.TAG_PATTERNS
    for number in range(cache.TAG_PATTERNS + 5):
        tag = f"tag{number}"
        assert extract.scan_tags_python(f"<{tag}> x </{tag}>", tag, False) == ("x", 1, 1)
    assert 1 <= len(extract._tag_patterns) <= cache.TAG_PATTERNS

    assert tool_trajectory._patterns.limit == cache.ROLE_PATTERNS
    for number in range(cache.ROLE_PATTERNS + 5):
        role = f"role{number}"
        parsed = tool_trajectory.parse_trajectory(
            f"hi\n{role}\n<answer>x</answer>", assistant_roles=(role,)
        )
        assert parsed.answer == "x"
    assert 1 <= len(tool_trajectory._patterns) <= cache.ROLE_PATTERNS
