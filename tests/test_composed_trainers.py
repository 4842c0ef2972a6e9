"""Composed rewards in the trainers: the shipped recipe configs through verl 0.9.1's Hydra config
and reward-loop managers (every component key logged), a recipe file through verl's loader, and
parity with TRL's own weighted sum of reward functions in a real GRPOTrainer step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from test_trl import build_dataset, completion_text, gold_of, run_grpo_step
from verl.experimental.reward_loop.reward_manager.limited import RateLimitedRewardManager
from verl.trainer.ppo.reward import load_reward_manager
from verl_helpers import MIXED_SAMPLES, build_batch, compose, run_reward_loop, verl_reference_reward

from reward_plugins import InvalidOption
from reward_plugins.adapters.trl import make_reward_func
from reward_plugins.router import route

RECIPE_CONFIGS = ("recipe_search_r1_em", "recipe_search_r1_shaped", "recipe_qa_f1_shaped")
BASE_CONFIGS = {
    **dict.fromkeys(RECIPE_CONFIGS, "search_r1_grpo"),
    "recipe_search_agent_guarded": "search_r1_multiturn_grpo",
}
"""Each recipe config and the config it copies but for the reward."""
MANAGERS = ("naive", "dapo", "rate_limited", "gdpo")


@pytest.fixture(autouse=True)
def fresh_rate_limiter(monkeypatch: pytest.MonkeyPatch) -> None:
    """``rate_limited`` keeps class-global limiters bound to the first event loop."""
    monkeypatch.setattr(RateLimitedRewardManager, "_class_initialized", False)


def score_batch(tokenizer: Any, config: Any) -> list[dict[str, Any]]:
    batch = build_batch(tokenizer, MIXED_SAMPLES)
    return run_reward_loop(lambda: load_reward_manager(config, tokenizer), batch)


def expected_results(options: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        route("compute_score_composed", s.data_source, s.response, {"target": s.golds}, options)
        for s in MIXED_SAMPLES
    ]


@pytest.mark.parametrize("name", BASE_CONFIGS)
def test_recipe_configs_differ_from_their_base_only_in_the_reward(name: str) -> None:
    ours = OmegaConf.to_container(compose(name))
    base = OmegaConf.to_container(compose(BASE_CONFIGS[name]))
    assert ours["reward"].pop("custom_reward_function") == {
        **base["reward"].pop("custom_reward_function"),
        "name": "compute_score_composed",
        "reward_kwargs": {"recipe": name.removeprefix("recipe_")},
    }
    assert ours["trainer"].pop("experiment_name") == f"grpo_{name.removeprefix('recipe_')}"
    base["trainer"].pop("experiment_name")
    assert ours == base


@pytest.mark.parametrize("name", RECIPE_CONFIGS)
@pytest.mark.parametrize("manager", MANAGERS)
def test_managers_log_every_component_key(tokenizer: Any, name: str, manager: str) -> None:
    config = compose(name, [f"reward.reward_manager.name={manager}"])
    recipe = name.removeprefix("recipe_")
    assert config.reward.custom_reward_function.reward_kwargs.recipe == recipe
    outputs = score_batch(tokenizer, config)
    expected = expected_results({"recipe": recipe})
    assert [o["reward_score"] for o in outputs] == [e["score"] for e in expected]
    for output, result in zip(outputs, expected, strict=True):
        extra = output["reward_extra_info"]
        assert {key: extra[key] for key in result if key != "score"} == {
            key: value for key, value in result.items() if key != "score"
        }
        assert {key.split("_")[0] for key in result if key not in ("score", "acc")} == (
            recipe_prefixes(recipe)
        )


def recipe_prefixes(recipe: str) -> set[str]:
    from reward_plugins.plugins.composed import load_recipe

    return {c.prefix.split("_")[0] for c in load_recipe(recipe).components}


def test_search_r1_em_recipe_pays_verls_own_reward(tokenizer: Any) -> None:
    outputs = score_batch(tokenizer, compose("recipe_search_r1_em"))
    assert [o["reward_score"] for o in outputs] == [verl_reference_reward(s) for s in MIXED_SAMPLES]
    assert [o["reward_extra_info"]["em_score"] for o in outputs] == [
        verl_reference_reward(s) for s in MIXED_SAMPLES
    ]


def test_recipe_file_through_verls_loader(tokenizer: Any, tmp_path: Path) -> None:
    recipe = tmp_path / "mine.yaml"
    recipe.write_text(
        "components:\n"
        "  - {scorer: compute_score, weight: 1.0, as: em, format_score: 0.1}\n"
        "  - {scorer: compute_score_f1, weight: 0.5, as: f1}\n",
        encoding="utf-8",
    )
    config = compose(
        "recipe_search_r1_em", [f"reward.custom_reward_function.reward_kwargs.recipe={recipe}"]
    )
    outputs = score_batch(tokenizer, config)
    expected = expected_results({"recipe": str(recipe)})
    assert [o["reward_score"] for o in outputs] == [e["score"] for e in expected]
    assert [o["reward_extra_info"]["f1_f1"] for o in outputs] == [e["f1_f1"] for e in expected]


def test_inline_components_from_a_hydra_override(tokenizer: Any) -> None:
    config = compose(
        "recipe_search_r1_em",
        [
            "~reward.custom_reward_function.reward_kwargs.recipe",
            "+reward.custom_reward_function.reward_kwargs.components="
            "[{scorer:compute_score,weight:1,as:em},{scorer:compute_score_subem,weight:-0.5,as:sub}]",
            "+reward.custom_reward_function.reward_kwargs.combine=sum",
        ],
    )
    outputs = score_batch(tokenizer, config)
    components = [
        {"scorer": "compute_score", "weight": 1, "as": "em"},
        {"scorer": "compute_score_subem", "weight": -0.5, "as": "sub"},
    ]
    expected = expected_results({"components": components, "combine": "sum"})
    assert [o["reward_score"] for o in outputs] == [e["score"] for e in expected]


def test_invalid_recipe_fails_on_the_first_call_before_scoring(tokenizer: Any) -> None:
    config = compose(
        "recipe_search_r1_em",
        [
            "~reward.custom_reward_function.reward_kwargs.recipe",
            "+reward.custom_reward_function.reward_kwargs.components=[{scorer:compute_score}]",
        ],
    )
    with pytest.raises(InvalidOption, match=r"component 1 \(compute_score\): 'weight' is missing"):
        score_batch(tokenizer, config)


# --- TRL ----------------------------------------------------------------------------------------


COMPONENTS = [
    {"scorer": "compute_score", "weight": 1.0, "as": "em"},
    {"scorer": "compute_score_f1", "weight": 0.5, "as": "f1", "format_score": 0.1},
    {"scorer": "compute_score_subem", "weight": -0.25, "as": "sub"},
]


def options_of(component: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in component.items() if k not in ("scorer", "weight", "as")}


def test_trl_parity_with_reward_funcs_and_weights(tmp_path: Path) -> None:
    """Two real GRPOTrainer steps from the same seed: one with the composed reward alone, one
    with its components as TRL reward functions weighted by TRL's ``reward_weights``. Same
    completions, same mean reward; per completion, composed = TRL's weighted sum."""
    composed = make_reward_func("compute_score_composed", "searchR1_nq", components=COMPONENTS)
    singles = [
        make_reward_func(
            c["scorer"],
            "searchR1_nq",
            **{k: v for k, v in c.items() if k not in ("scorer", "weight", "as")},
        )
        for c in COMPONENTS
    ]
    dataset = build_dataset(False, "ground_truth")
    ours, (_, completions, columns) = run_grpo_step(tmp_path / "ours", [composed], [1.0], dataset)
    weights = [c["weight"] for c in COMPONENTS]
    trl, (_, trl_completions, _) = run_grpo_step(tmp_path / "trl", singles, weights, dataset)
    assert trl_completions == completions
    assert ours["reward"] == pytest.approx(trl["reward"], abs=1e-6)
    assert ours["reward_std"] == pytest.approx(trl["reward_std"], abs=1e-6)

    texts = [completion_text(c) for c in completions]
    per_function = [f(prompts=[""] * len(texts), completions=texts, **columns) for f in singles]
    weighted = [
        sum(c["weight"] * values[i] for c, values in zip(COMPONENTS, per_function, strict=True))
        for i in range(len(texts))
    ]
    assert composed(prompts=[""] * len(texts), completions=texts, **columns) == pytest.approx(
        weighted, abs=1e-12
    )
    assert len(set(weighted)) > 1  # the rollouts are not all scored alike
    assert gold_of(columns, 0)


def test_trl_adapter_refuses_an_invalid_recipe_when_built() -> None:
    with pytest.raises(
        InvalidOption,
        match=r"make_reward_func: scorer 'compute_score_composed'.*'weight' is missing",
    ):
        make_reward_func("compute_score_composed", components=[{"scorer": "compute_score"}])
    with pytest.raises(InvalidOption, match=r"recipe 'no_such_recipe'"):
        make_reward_func("compute_score_composed", recipe="no_such_recipe")
