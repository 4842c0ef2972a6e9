"""The composed scorer: weighted components equal to the components computed one by one, the
fixed key set, the primary's acc, recipe files and every way a recipe can be wrong."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reward_plugins
from reward_plugins import InvalidOption, PluginError, scorer
from reward_plugins.plugins.composed import load_recipe, recipe_of, shipped_recipes
from reward_plugins.router import route

SOURCE = "searchR1_nq"
COMPONENT_SCORERS = (
    "compute_score",
    "compute_score_subem",
    "compute_score_f1",
    "compute_score_format",
)
RESPONSES = st.sampled_from(
    [
        "<answer>Paris</answer>",
        "<think>x</think><search>q</search><information>Paris is big</information>"
        "<answer>the city of Paris</answer>",
        "<answer>Lyon</answer>",
        "<answer>Paris</answer>" * 12,
        "no answer at all",
        "<think>a</think><answer>Paris, Lyon</answer>",
    ]
)
GOLDS = st.sampled_from([["Paris"], ["City of Paris", "Paris"], ["Lyon"], ["Nice"]])
WEIGHTS = st.sampled_from([0.0, 1.0, 0.5, -0.25, 2.0])


def composed(response: str, golds: Any, **options: Any) -> dict[str, Any]:
    return reward_plugins.compute_score_composed(
        data_source=SOURCE, solution_str=response, ground_truth={"target": golds}, **options
    )


def alone(name: str, response: str, golds: Any, **options: Any) -> dict[str, Any]:
    return route(name, SOURCE, response, {"target": golds}, options)


@settings(max_examples=150, deadline=None)
@given(
    response=RESPONSES,
    golds=GOLDS,
    picks=st.lists(st.tuples(st.sampled_from(COMPONENT_SCORERS), WEIGHTS), min_size=1, max_size=4),
    combine=st.sampled_from(["sum", "product", "min"]),
    scale=st.sampled_from([1.0, 0.5, 3.0]),
)
def test_composed_equals_components_one_by_one(
    response: str, golds: list[str], picks: list[tuple[str, float]], combine: str, scale: float
) -> None:
    if all(weight == 0 for _, weight in picks):
        picks = [*picks, ("compute_score", 1.0)]
    components = [
        {"scorer": name, "weight": weight, "as": f"c{i}", "format_score": 0.1}
        if name != "compute_score_format"
        else {"scorer": name, "weight": weight, "as": f"c{i}", "structure_format_score": 0.2}
        for i, (name, weight) in enumerate(picks)
    ]
    result = composed(response, golds, components=components, combine=combine, scale=scale)

    singles = [
        alone(
            c["scorer"],
            response,
            golds,
            **{k: v for k, v in c.items() if k not in ("scorer", "weight", "as")},
        )
        for c in components
    ]
    paid = [
        (c["weight"], s["score"]) for c, s in zip(components, singles, strict=True) if c["weight"]
    ]
    if combine == "sum":
        expected = 0.0
        for weight, value in paid:
            expected += weight * value
    elif combine == "product":
        expected = math.prod(value for _, value in paid)
    else:
        expected = min(value for _, value in paid)
    assert result["score"] == (expected if scale == 1.0 else scale * expected)
    assert result["acc"] == singles[0]["acc"]
    for component, single in zip(components, singles, strict=True):
        for key, value in single.items():
            assert result[f"{component['as']}_{key}"] == value
    assert list(result) == ["score", "acc"] + [
        f"{c['as']}_{key}" for c, single in zip(components, singles, strict=True) for key in single
    ]


def test_hand_worked_sum_with_a_logged_component() -> None:
    # "the city of Paris" against "Paris": EM 0 (weight 1); F1 of [city, of, paris] against
    # [paris] = 2 * (1/3 * 1) / (1/3 + 1) = 0.5 (weight 0.5); SubEM 1, logged only (weight 0).
    # Reward: 1 * 0 + 0.5 * 0.5 = 0.25.
    result = composed(
        "<answer>the city of Paris</answer>",
        ["Paris"],
        components=[
            {"scorer": "compute_score", "weight": 1, "as": "em"},
            {"scorer": "compute_score_f1", "weight": 0.5, "as": "f1"},
            {"scorer": "compute_score_subem", "weight": 0, "as": "sub"},
        ],
    )
    assert (result["score"], result["em_score"], result["sub_score"]) == (0.25, 0.0, 1.0)
    assert result["f1_score"] == 0.5


def test_zero_weight_is_never_paid_in_product_and_min(registry_state_for_plugins: None) -> None:
    components = [
        {"scorer": "compute_score", "weight": 1, "as": "em"},
        {"scorer": "half_test_scorer", "weight": 0, "as": "never"},  # always 0.5
    ]
    for combine in ("product", "min"):
        result = composed(
            "<answer>Paris</answer>", ["Paris"], components=components, combine=combine, scale=2.0
        )
        assert result["never_score"] == 0.5
        assert result["score"] == 2.0  # only EM (1.0) is paid, times scale; 0.5 plays no part
        result = composed(
            "<answer>Lyon</answer>", ["Paris"], components=components, combine=combine
        )
        assert result["score"] == 0.0


def test_primary_gives_acc_and_keys_are_fixed() -> None:
    components = [
        {"scorer": "compute_score_f1", "weight": 1, "as": "f1"},
        {"scorer": "compute_score", "weight": 0, "as": "em", "primary": True},
    ]
    partial = composed("<answer>city of Paris</answer>", ["Paris"], components=components)
    assert (partial["acc"], partial["em_acc"], partial["f1_acc"]) == (0.0, 0.0, 0.0)
    assert partial["f1_score"] == pytest.approx(0.5)
    missing = composed("nothing here", ["Paris"], components=components)
    assert list(missing) == list(partial)


def test_primary_without_acc_gives_its_score(registry_state_for_plugins: None) -> None:
    result = composed(
        "<answer>Paris</answer>",
        ["Paris"],
        components=[{"scorer": "half_test_scorer", "weight": 2, "as": "half"}],
    )
    assert result == {"score": 1.0, "acc": 0.5, "half_score": 0.5, "half_other": 1.0}


@pytest.fixture
def registry_state_for_plugins(restored_registry: Any) -> Any:
    """Test-only scorers registered for the test's duration."""

    @scorer("half_test_scorer", SOURCE)
    def half(response: str, golds: tuple[str, ...]) -> dict[str, float]:
        return {"score": 0.5, "other": 1.0}

    @scorer("collide_test_scorer", SOURCE)
    def collide(response: str, golds: tuple[str, ...]) -> dict[str, float]:
        return {"score": 0.0, "b_c": 1.0}

    @scorer("collide_b_test_scorer", SOURCE)
    def collide_b(response: str, golds: tuple[str, ...]) -> dict[str, float]:
        return {"score": 0.0, "c": 1.0}

    yield


def test_colliding_prefixed_keys_are_refused(registry_state_for_plugins: None) -> None:
    components = [
        {"scorer": "collide_test_scorer", "weight": 1, "as": "a"},
        {"scorer": "collide_b_test_scorer", "weight": 1, "as": "a_b"},
    ]
    with pytest.raises(PluginError, match=r"key 'a_b_c' of component 2 \(collide_b_test_scorer"):
        composed("x", ["y"], components=components)


def test_omegaconf_containers_are_accepted() -> None:
    from omegaconf import OmegaConf

    config = OmegaConf.create(
        {"components": [{"scorer": "compute_score", "weight": 1, "as": "em", "format_score": 0.1}]}
    )
    result = composed("<answer>Lyon</answer>", ["Paris"], components=config.components)
    assert (result["score"], result["em_score"]) == (0.1, 0.1)


# --- recipes ----------------------------------------------------------------------------------


def test_shipped_recipes_load() -> None:
    assert set(shipped_recipes()) >= {"search_r1_em", "search_r1_shaped", "qa_f1_shaped"}
    for name in shipped_recipes():
        recipe = load_recipe(name)
        assert recipe.components


@pytest.mark.parametrize(
    ("response", "golds"),
    [
        ("<answer>Paris</answer>", ["Paris"]),
        ("<answer>Lyon</answer>", ["Paris"]),
        ("<answer>Paris</answer>" * 11, ["Paris"]),
        ("nothing", ["Paris"]),
    ],
)
def test_search_r1_em_recipe_is_todays_reward(response: str, golds: list[str]) -> None:
    result = composed(response, golds, recipe="search_r1_em")
    expected = alone("compute_score", response, golds)
    assert result["score"] == expected["score"]
    assert result["acc"] == expected["acc"]
    assert {k.removeprefix("em_"): v for k, v in result.items() if k.startswith("em_")} == expected


def test_recipe_file_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "combine: min\nscale: 2\ncomponents:\n"
        "  - {scorer: compute_score, weight: 1, as: em}\n"
        "  - {scorer: compute_score_subem, weight: 1, as: sub}\n",
        encoding="utf-8",
    )
    result = composed("<answer>Paris</answer>", ["Paris"], recipe=str(path))
    assert result["score"] == 2.0
    recipe = load_recipe(str(path))
    assert recipe.gdpo_overrides() == [
        "+algorithm.gdpo_reward_keys=[em_score,sub_score]",
        "+algorithm.gdpo_reward_weights=[1.0,1.0]",
    ]


def test_gdpo_overrides_list_only_paid_components() -> None:
    recipe = recipe_of(
        components=[
            {"scorer": "compute_score", "weight": 1, "as": "em"},
            {"scorer": "compute_score_f1", "weight": 0, "as": "f1"},
            {"scorer": "compute_score_format", "weight": -0.5, "as": "fmt"},
        ]
    )
    assert recipe.gdpo_overrides() == [
        "+algorithm.gdpo_reward_keys=[em_score,fmt_score]",
        "+algorithm.gdpo_reward_weights=[1.0,-0.5]",
    ]


BAD_COMPONENTS = [
    pytest.param(
        [{"scorer": "compute_scor", "weight": 1}],
        r"component 1 \(compute_scor\): no scorer is registered as 'compute_scor'; did you mean "
        r"'compute_score'",
        id="unknown-scorer",
    ),
    pytest.param(
        [
            {"scorer": "compute_score", "weight": 1},
            {"scorer": "compute_score_f1", "weight": 1, "sparkle": 2},
        ],
        r"component 2 \(compute_score_f1\): compute_score_f1: unknown option\(s\) 'sparkle'",
        id="unknown-option",
    ),
    pytest.param(
        [{"scorer": "compute_score", "weight": 1, "format_score": "0.1"}],
        r"component 1 \(compute_score\): compute_score: option 'format_score' must be",
        id="bad-option-value",
    ),
    pytest.param(
        [{"scorer": "compute_score"}],
        r"component 1 \(compute_score\): 'weight' is missing",
        id="missing-weight",
    ),
    pytest.param(
        [{"scorer": "compute_score", "weight": True}],
        r"'weight' must be a finite number",
        id="bool-weight",
    ),
    pytest.param(
        [{"scorer": "compute_score", "weight": float("nan")}],
        r"'weight' must be a finite number",
        id="nan-weight",
    ),
    pytest.param(
        [{"scorer": "compute_score", "weight": 1}, {"scorer": "compute_score", "weight": 1}],
        r"component 2 \(compute_score\) has the prefix 'compute_score' of component 1",
        id="same-prefix",
    ),
    pytest.param(
        [{"scorer": "compute_score", "weight": 1, "as": "em-1"}],
        r"'as' must be an identifier",
        id="bad-prefix",
    ),
    pytest.param(
        [
            {"scorer": "compute_score", "weight": 1, "primary": True},
            {"scorer": "compute_score_f1", "weight": 1, "primary": True},
        ],
        r"components 1, 2 are all marked primary",
        id="two-primaries",
    ),
    pytest.param(
        [{"scorer": "compute_score", "weight": 0}], r"every weight is 0", id="nothing-paid"
    ),
    pytest.param([], r"components is empty", id="empty"),
    pytest.param(
        ["compute_score"],
        r"component 1 \(\?\): must be a mapping|'components' must be a list of mapping",
        id="not-a-mapping",
    ),
    pytest.param(
        "compute_score",
        r"components must be a list of mappings|'components' must be a list of mapping",
        id="a-string",
    ),
]


@pytest.mark.parametrize(("components", "message"), BAD_COMPONENTS)
def test_invalid_components_fail_before_scoring(components: Any, message: str) -> None:
    with pytest.raises(InvalidOption, match=message):
        recipe_of(components=components)
    with pytest.raises(InvalidOption, match=message):  # the router binds before it scores
        composed("<answer>Paris</answer>", ["Paris"], components=components)


def test_option_combinations_are_refused() -> None:
    with pytest.raises(InvalidOption, match="give either 'components'"):
        composed("x", ["y"])
    with pytest.raises(InvalidOption, match="not both"):
        composed(
            "x", ["y"], recipe="search_r1_em", components=[{"scorer": "compute_score", "weight": 1}]
        )
    with pytest.raises(InvalidOption, match="combine given beside recipe 'search_r1_em'"):
        composed("x", ["y"], recipe="search_r1_em", combine="min")
    with pytest.raises(InvalidOption, match="option 'combine' must be one of 'sum', 'product'"):
        composed("x", ["y"], components=[{"scorer": "compute_score", "weight": 1}], combine="max")


def test_recipe_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidOption, match=r"recipe 'nope': no shipped recipe .*search_r1_em"):
        recipe_of(recipe="nope")
    with pytest.raises(InvalidOption, match=r"no such file"):
        recipe_of(recipe=str(tmp_path / "absent.yaml"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("components: [\n", encoding="utf-8")
    with pytest.raises(InvalidOption, match=r"broken\.yaml: line 2, column 1: not valid YAML"):
        recipe_of(recipe=str(broken))
    extra = tmp_path / "extra.yaml"
    extra.write_text("components: []\nweights: [1]\n", encoding="utf-8")
    with pytest.raises(InvalidOption, match=r"unknown key\(s\) weights; valid keys: components"):
        recipe_of(recipe=str(extra))
    listed = tmp_path / "listed.yaml"
    listed.write_text("- scorer: compute_score\n", encoding="utf-8")
    with pytest.raises(InvalidOption, match=r"must be a mapping with 'components', got list"):
        recipe_of(recipe=str(listed))


def test_recipe_cycles_are_refused(tmp_path: Path) -> None:
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text(
        f"components:\n  - {{scorer: compute_score_composed, weight: 1, recipe: {second}}}\n",
        encoding="utf-8",
    )
    second.write_text(
        f"components:\n  - {{scorer: compute_score_composed, weight: 1, recipe: {first}}}\n",
        encoding="utf-8",
    )
    with pytest.raises(
        InvalidOption, match=r"includes itself: .*first.yaml -> .*second.yaml -> .*first.yaml"
    ):
        recipe_of(recipe=str(first))


def test_nested_composition() -> None:
    inner = {
        "scorer": "compute_score_composed",
        "weight": 0.5,
        "as": "inner",
        "components": [{"scorer": "compute_score", "weight": 1, "as": "em"}],
    }
    result = composed("<answer>Paris</answer>", ["Paris"], components=[inner])
    assert (result["score"], result["inner_score"], result["inner_em_score"]) == (0.5, 1.0, 1.0)


def test_component_that_does_not_serve_the_data_source() -> None:
    with pytest.raises(
        InvalidOption,
        match=r"component 1 \(compute_score\): no scorer is registered for "
        r"data_source='openai/gsm8k'",
    ):
        reward_plugins.compute_score_composed(
            data_source="openai/gsm8k",
            solution_str="x",
            ground_truth="1",
            components=[{"scorer": "compute_score", "weight": 1}],
        )


def test_openrlhf_loader_reads_and_checks_a_recipe() -> None:
    from reward_plugins.adapters.openrlhf_reward import load_config

    environ = {
        "REWARD_PLUGINS_SCORER": "compute_score_composed",
        "REWARD_PLUGINS_OPTIONS": '{"recipe": "search_r1_shaped"}',
    }
    config = load_config(environ)
    assert (config.scorer, dict(config.options)) == (
        "compute_score_composed",
        {"recipe": "search_r1_shaped"},
    )
    environ["REWARD_PLUGINS_OPTIONS"] = '{"components": [{"scorer": "compute_score", "as": "em"}]}'
    with pytest.raises(InvalidOption, match=r"REWARD_PLUGINS_OPTIONS=.*'weight' is missing"):
        load_config(environ)


def test_docs_table_lists_every_shipped_recipe_as_shipped() -> None:
    """Each shipped recipe has a row in docs/composition.md naming each component's scorer, its
    prefix and every option value, so the page cannot drift from the files."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "composition.md").read_text("utf-8")
    rows = {
        line.split("|")[1].strip(): line for line in page.splitlines() if line.startswith("| `")
    }
    for name in shipped_recipes():
        row = rows[f"`{name}`"]
        for component in load_recipe(name).components:
            assert f"`{component.scorer}` (`{component.prefix}`" in row
            assert ("primary" in row.split(f"`{component.scorer}`")[1].split(")")[0]) == (
                component.primary
            )
            for option, value in component.options.items():
                assert f"`{option}` {value}" in row
