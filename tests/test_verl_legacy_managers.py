"""verl's legacy reward managers (``naive``, ``batch``, ``prime``) with the legacy config and file.

The shipped legacy config is composed with verl's own trainer config, moved to the new keys by
verl's ``migrate_legacy_reward_impl`` (what verl 0.7.1 - 0.8.x do at start-up), and the function
is loaded from the legacy entry file by verl's ``get_custom_reward_fn``, which wraps it with the
config's ``reward_kwargs`` as verl >= 0.5 does. Each manager is then built as verl 0.4 - 0.7.0's
trainer builds it, ``cls(tokenizer=, num_examine=, compute_score=, reward_fn_key=, **manager
options)``, and called on a batch: keyword calls (naive), plural lists (batch) and positional
calls in a process pool (prime). Expected rewards come from verl's reference scorer.
"""

from __future__ import annotations

from typing import Any

import pytest
from verl.experimental.reward_loop.reward_loop import migrate_legacy_reward_impl
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.workers.reward_manager import get_reward_manager_cls
from verl_helpers import (
    LEGACY_CONFIG,
    LEGACY_ENTRY_FILE,
    MIXED_SAMPLES,
    build_batch,
    compose,
    stock_verl_config,
    verl_reference_reward,
)

import reward_plugins.router

LOGGED_KEYS = {"score", "acc", "em", "subem", "f1", "answer_found", "answer_tags", "spam_penalized"}


def legacy_config(*overrides: str) -> Any:
    config = compose(
        LEGACY_CONFIG, [f"custom_reward_function.path={LEGACY_ENTRY_FILE}", *overrides]
    )
    return migrate_legacy_reward_impl(config)


def legacy_manager(tokenizer: Any, config: Any, **manager_options: Any) -> Any:
    manager_cls = get_reward_manager_cls(config.reward.reward_manager.name)
    return manager_cls(
        tokenizer=tokenizer,
        num_examine=0,
        compute_score=get_custom_reward_fn(config),
        reward_fn_key=config.data.reward_fn_key,
        **manager_options,
    )


def test_entry_file_function_is_the_package_router() -> None:
    config = legacy_config()
    wrapped = get_custom_reward_fn(config)
    assert wrapped.args[0] is reward_plugins.router.compute_score


@pytest.mark.parametrize("format_score", [0.0, 0.1])
def test_naive_keyword_calls(tokenizer: Any, format_score: float) -> None:
    config = legacy_config(f"+custom_reward_function.reward_kwargs.format_score={format_score}")
    batch = build_batch(tokenizer, MIXED_SAMPLES)
    result = legacy_manager(tokenizer, config)(batch, return_dict=True)

    rewards = result["reward_tensor"].sum(dim=-1).tolist()
    expected = [verl_reference_reward(s, format_score=format_score) for s in MIXED_SAMPLES]
    assert rewards == pytest.approx(expected)
    info = result["reward_extra_info"]
    assert set(info) == LOGGED_KEYS
    assert all(len(values) == len(MIXED_SAMPLES) for values in info.values())
    assert info["score"] == expected


def test_naive_places_the_reward_on_the_last_response_token(tokenizer: Any) -> None:
    batch = build_batch(tokenizer, MIXED_SAMPLES)
    reward_tensor = legacy_manager(tokenizer, legacy_config())(batch)
    response_lengths = batch.batch["attention_mask"][:, batch.batch["prompts"].shape[1] :].sum(-1)
    for row, length in enumerate(response_lengths.tolist()):
        assert reward_tensor[row, length - 1] == verl_reference_reward(MIXED_SAMPLES[row])
        assert reward_tensor[row].count_nonzero() <= 1


@pytest.mark.parametrize("with_extra_info", [True, False])
def test_batch_plural_lists(tokenizer: Any, with_extra_info: bool) -> None:
    config = legacy_config(
        "reward_model.reward_manager=batch",
        "custom_reward_function.name=compute_score_batch",
        "+custom_reward_function.reward_kwargs.format_score=0.1",
    )
    assert config.reward.reward_manager.name == "batch"
    batch = build_batch(tokenizer, MIXED_SAMPLES, with_extra_info=with_extra_info)
    result = legacy_manager(tokenizer, config)(batch, return_dict=True)

    expected = [verl_reference_reward(s, format_score=0.1) for s in MIXED_SAMPLES]
    assert result["reward_tensor"].sum(dim=-1).tolist() == pytest.approx(expected)
    assert batch.batch["acc"].tolist() == pytest.approx(expected)
    assert set(result["reward_extra_info"]) == LOGGED_KEYS
    assert all(len(v) == len(MIXED_SAMPLES) for v in result["reward_extra_info"].values())


def test_batch_manager_forwards_its_own_options(tokenizer: Any) -> None:
    """The legacy ``batch`` manager passes its own options (verl's ``reward_model.reward_kwargs``)
    to the function too; verl's stock config, which sets no function options, lets them through."""
    config = migrate_legacy_reward_impl(
        stock_verl_config(
            [
                f"custom_reward_function.path={LEGACY_ENTRY_FILE}",
                "custom_reward_function.name=compute_score_batch",
                "reward_model.reward_manager=batch",
            ]
        )
    )
    batch = build_batch(tokenizer, MIXED_SAMPLES)
    rewards = legacy_manager(tokenizer, config, format_score=0.3)(batch).sum(dim=-1).tolist()
    expected = [verl_reference_reward(s, format_score=0.3) for s in MIXED_SAMPLES]
    assert rewards == pytest.approx(expected)


def test_function_options_win_over_batch_manager_options(tokenizer: Any) -> None:
    """Pitfall of docs/verl.md: verl merges ``custom_reward_function.reward_kwargs`` last, so a
    ``format_score`` there (0.0) beats the batch manager's (0.3)."""
    config = legacy_config(
        "reward_model.reward_manager=batch",
        "custom_reward_function.name=compute_score_batch",
        "+custom_reward_function.reward_kwargs.format_score=0.0",
    )
    batch = build_batch(tokenizer, MIXED_SAMPLES)
    rewards = legacy_manager(tokenizer, config, format_score=0.3)(batch).sum(dim=-1).tolist()
    expected = [verl_reference_reward(s, format_score=0.0) for s in MIXED_SAMPLES]
    assert rewards == pytest.approx(expected)


def test_prime_positional_calls_with_return_dict_false(tokenizer: Any) -> None:
    config = legacy_config(
        "reward_model.reward_manager=prime",
        "custom_reward_function.reward_kwargs.return_dict=false",
        "+custom_reward_function.reward_kwargs.format_score=0.1",
    )
    batch = build_batch(tokenizer, MIXED_SAMPLES)
    rewards = legacy_manager(tokenizer, config)(batch).sum(dim=-1).tolist()
    assert rewards == pytest.approx(
        [verl_reference_reward(s, format_score=0.1) for s in MIXED_SAMPLES]
    )


def test_prime_zeroes_the_whole_batch_on_dict_results(tokenizer: Any) -> None:
    """README pitfall: why prime needs ``return_dict=false``."""
    config = legacy_config("reward_model.reward_manager=prime")
    batch = build_batch(tokenizer, MIXED_SAMPLES)
    rewards = legacy_manager(tokenizer, config)(batch).sum(dim=-1).tolist()
    assert any(verl_reference_reward(s) > 0 for s in MIXED_SAMPLES)
    assert rewards == [0.0] * len(MIXED_SAMPLES)
