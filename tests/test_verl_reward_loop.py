"""verl 0.9.1's reward-loop managers (``naive``, ``dapo``, ``rate_limited``) running the routers.

Each manager is built by verl's ``load_reward_manager`` from the shipped GRPO config (so the
function is loaded from ``pkg://reward_plugins`` and wrapped with the config's ``reward_kwargs``
by verl) inside a running event loop, and scores rows with its async ``run_single``, all rows
concurrently, as verl's reward workers do. Expected rewards come from verl's reference scorer
``search_r1_like_qa_em.compute_score`` and from the hand-worked table in ``verl_helpers``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from verl.experimental.reward_loop.reward_manager import RateLimitedRewardManager
from verl.trainer.ppo.reward import load_reward_manager
from verl_helpers import (
    MIXED_SAMPLES,
    Sample,
    build_batch,
    compose,
    hand_reward,
    run_reward_loop,
    verl_reference_reward,
)

REWARD_LOOP_MANAGERS = ("naive", "dapo", "rate_limited")
LOGGED_KEYS = ("score", "acc", "em", "subem", "f1", "answer_found", "answer_tags", "spam_penalized")
"""The keys the README promises, written out here independently of the package."""


@pytest.fixture(autouse=True)
def fresh_rate_limiter(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``rate_limited`` keeps class-global limiters bound to the first event loop; each test
    runs its own loop, so let the class initialise again."""
    monkeypatch.setattr(RateLimitedRewardManager, "_class_initialized", False)
    yield


def grpo_config(manager: str, *overrides: str) -> Any:
    return compose("search_r1_grpo", [f"reward.reward_manager.name={manager}", *overrides])


def score_mixed_batch(tokenizer: Any, config: Any, samples=MIXED_SAMPLES) -> list[dict[str, Any]]:
    batch = build_batch(tokenizer, samples)
    return run_reward_loop(lambda: load_reward_manager(config, tokenizer), batch)


@pytest.mark.parametrize("manager", REWARD_LOOP_MANAGERS)
def test_shipped_options_give_verl_reference_rewards(tokenizer: Any, manager: str) -> None:
    outputs = score_mixed_batch(tokenizer, grpo_config(manager))
    rewards = [output["reward_score"] for output in outputs]
    assert rewards == [verl_reference_reward(s) for s in MIXED_SAMPLES]
    assert rewards == [hand_reward(s) for s in MIXED_SAMPLES]


@pytest.mark.parametrize("manager", REWARD_LOOP_MANAGERS)
def test_config_reward_kwargs_reach_the_function(tokenizer: Any, manager: str) -> None:
    config = grpo_config(
        manager,
        "+reward.custom_reward_function.reward_kwargs.format_score=0.1",
        "reward.custom_reward_function.reward_kwargs.score=2.0",
    )
    rewards = [o["reward_score"] for o in score_mixed_batch(tokenizer, config)]
    options = {"format_score": 0.1, "score": 2.0}
    assert rewards == [verl_reference_reward(s, **options) for s in MIXED_SAMPLES]
    assert rewards == [hand_reward(s, **options) for s in MIXED_SAMPLES]
    assert 0.1 in rewards and 0.5 in rewards  # a wrong answer, and a penalized spammed one


def test_spam_options_reach_the_function(tokenizer: Any) -> None:
    """Options verl's scorer does not have; values worked by hand: 11 tags are under a limit of
    11, the 12 wrong-answer tags stay at ``format_score`` whatever the factor."""
    config = grpo_config(
        "naive",
        "+reward.custom_reward_function.reward_kwargs.max_answer_tags=11",
        "+reward.custom_reward_function.reward_kwargs.spam_factor=0.5",
    )
    rewards = [o["reward_score"] for o in score_mixed_batch(tokenizer, config)]
    assert rewards == [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("manager", REWARD_LOOP_MANAGERS)
def test_extra_info_has_the_same_keys_for_every_sample(tokenizer: Any, manager: str) -> None:
    outputs = score_mixed_batch(tokenizer, grpo_config(manager))
    key_sets = {tuple(sorted(o["reward_extra_info"])) for o in outputs}
    assert key_sets == {tuple(sorted(LOGGED_KEYS))}
    for output in outputs:
        assert all(isinstance(v, int | float) for v in output["reward_extra_info"].values())
    # verl's own column assembly: keys of the first sample, then one value per sample.
    infos = [o["reward_extra_info"] for o in outputs]
    columns = {key: np.array([info[key] for info in infos]) for key in infos[0]}
    assert all(column.shape == (len(MIXED_SAMPLES),) for column in columns.values())


def test_extra_info_values(tokenizer: Any) -> None:
    """Worked by hand from the samples: which answers match, were found, and were spammed."""
    infos = [o["reward_extra_info"] for o in score_mixed_batch(tokenizer, grpo_config("naive"))]
    kinds = [s.kind for s in MIXED_SAMPLES]
    assert [i["acc"] for i in infos] == [
        1.0 if k in ("right", "spam_right") else 0.0 for k in kinds
    ]
    assert [i["em"] for i in infos] == [i["acc"] for i in infos]
    assert [i["answer_found"] for i in infos] == [0.0 if k == "missing" else 1.0 for k in kinds]
    assert [i["spam_penalized"] for i in infos] == [
        1.0 if k == "spam_right" else 0.0 for k in kinds
    ]
    assert [i["answer_tags"] for i in infos] == [1, 1, 0, 11, 12, 1, 1, 10]
    assert [i["score"] for i in infos] == [hand_reward(s) for s in MIXED_SAMPLES]


def test_dapo_overlong_penalty_is_added_to_the_reward(tokenizer: Any) -> None:
    """DAPO's manager options live in ``reward.reward_kwargs``; its penalty is added to ours.

    Hand-worked: each response is its UTF-8 bytes plus EOS tokens long; with max_resp_len=60 and
    a buffer of 20, a response of L tokens loses ``max(L - 40, 0) / 20``.
    """
    config = grpo_config(
        "dapo",
        "+reward.reward_kwargs.max_resp_len=60",
        "+reward.reward_kwargs.overlong_buffer_cfg.enable=true",
        "+reward.reward_kwargs.overlong_buffer_cfg.len=20",
        "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
        "+reward.reward_kwargs.overlong_buffer_cfg.log=true",
    )
    outputs = score_mixed_batch(tokenizer, config)
    lengths = [len(s.response.encode("utf-8")) + 1 for s in MIXED_SAMPLES]
    penalties = [-max(length - 40, 0) / 20 for length in lengths]
    assert any(p < 0 for p in penalties) and any(p == 0 for p in penalties)
    for sample, penalty, output in zip(MIXED_SAMPLES, penalties, outputs, strict=True):
        assert output["reward_score"] == pytest.approx(verl_reference_reward(sample) + penalty)
        assert output["reward_extra_info"]["score"] == verl_reference_reward(sample)
    key_sets = {tuple(sorted(o["reward_extra_info"])) for o in outputs}
    assert key_sets == {tuple(sorted((*LOGGED_KEYS, "overlong_reward", "overlong")))}


def test_group_siblings_share_dicts_and_stay_unmodified(tokenizer: Any) -> None:
    """``rollout.n`` repeats each row; the copies share their dicts and are scored concurrently."""
    group_size = 5
    batch = build_batch(tokenizer, MIXED_SAMPLES).repeat(repeat_times=group_size, interleave=True)
    reward_model = batch.non_tensor_batch["reward_model"]
    assert reward_model[0] is reward_model[1]
    assert batch.non_tensor_batch["extra_info"][0] is batch.non_tensor_batch["extra_info"][1]
    before = copy.deepcopy(list(reward_model))

    config = grpo_config("naive")
    outputs = run_reward_loop(lambda: load_reward_manager(config, tokenizer), batch)

    expected = [verl_reference_reward(s) for s in MIXED_SAMPLES for _ in range(group_size)]
    assert [o["reward_score"] for o in outputs] == expected
    for original, now in zip(before, reward_model, strict=True):
        assert _same(original, now)


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, np.ndarray):
        return isinstance(right, np.ndarray) and left.tolist() == right.tolist()
    return left == right


BAD_GROUND_TRUTH = Sample("searchR1_nq", "Where?", "<answer>Paris</answer>", None, "right")


def test_naive_raises_on_bad_ground_truth(tokenizer: Any) -> None:
    import reward_plugins

    with pytest.raises(reward_plugins.InvalidGroundTruth, match="searchR1_nq"):
        score_mixed_batch(tokenizer, grpo_config("naive"), (BAD_GROUND_TRUTH,))


def test_rate_limited_swallows_errors_into_another_key_set(tokenizer: Any) -> None:
    """README pitfall: ``rate_limited`` turns the error into a zero with other keys."""
    outputs = score_mixed_batch(tokenizer, grpo_config("rate_limited"), (BAD_GROUND_TRUTH,))
    (output,) = outputs
    assert output["reward_score"] == 0.0
    assert set(output["reward_extra_info"]) == {"error", "acc"}
    assert "ground_truth" in output["reward_extra_info"]["error"]


@pytest.fixture
def async_scorer(restored_registry: Any) -> Iterator[str]:
    """An ``async def`` scorer registered for the data sources of the mixed batch, removed
    afterwards; it awaits, then pays verl's EM reward."""
    import asyncio
    import inspect

    import reward_plugins
    from reward_plugins.plugins import search_r1

    @reward_plugins.scorer("loop_async_em", sorted({s.data_source for s in MIXED_SAMPLES}))
    async def loop_async_em(response: str, golds: tuple[str, ...], *, score: float = 1.0) -> float:
        await asyncio.sleep(0)
        return float(search_r1.compute_score(response, list(golds), score=score))

    assert inspect.iscoroutinefunction(reward_plugins.loop_async_em)
    yield "loop_async_em"


@pytest.mark.parametrize("manager", REWARD_LOOP_MANAGERS)
def test_an_async_plugin_scorer_is_awaited_by_the_reward_loop(
    tokenizer: Any, manager: str, async_scorer: str
) -> None:
    config = grpo_config(manager, f"reward.custom_reward_function.name={async_scorer}")
    outputs = score_mixed_batch(tokenizer, config)
    assert [o["reward_score"] for o in outputs] == [verl_reference_reward(s) for s in MIXED_SAMPLES]
