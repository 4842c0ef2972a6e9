"""The routers in verl's Ray processes: the ``remote`` reward manager's workers and the full
``RewardLoopManager`` the trainer starts (its workers build the tokenizer and the manager from
the config themselves). One local Ray instance serves the module; its workers import this
checkout through ``PYTHONPATH``. Expected rewards come from verl's reference scorer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from verl.experimental.reward_loop.reward_loop import RewardLoopManager
from verl.trainer.ppo.reward import extract_reward, load_reward_manager
from verl.utils.import_utils import load_extern_object
from verl_helpers import (
    LEGACY_ENTRY_FILE,
    MIXED_SAMPLES,
    REPO_ROOT,
    build_batch,
    compose,
    hand_reward,
    run_reward_loop,
    start_local_ray,
    verl_reference_reward,
)

LOGGED_KEYS = ["score", "acc", "em", "subem", "f1", "answer_found", "answer_tags", "spam_penalized"]


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    start_local_ray()
    yield
    ray.shutdown()


@ray.remote
def _package_file() -> str:
    import reward_plugins

    return reward_plugins.__file__


def test_ray_workers_import_this_checkout() -> None:
    assert Path(ray.get(_package_file.remote())).is_relative_to(REPO_ROOT)


def test_legacy_file_function_travels_by_reference() -> None:
    """Ray's cloudpickle carries the re-exported router by name, not by value."""
    function = load_extern_object(str(LEGACY_ENTRY_FILE), "compute_score")
    payload = ray.cloudpickle.dumps(function)
    assert b"reward_plugins" in payload and b"compute_score" in payload and len(payload) < 200
    assert ray.cloudpickle.loads(payload) is function


def test_remote_manager_scores_in_ray_workers(tokenizer: Any) -> None:
    config = compose(
        "search_r1_grpo",
        [
            "reward.reward_manager.name=remote",
            "reward.num_workers=2",
            "+reward.custom_reward_function.reward_kwargs.format_score=0.1",
        ],
    )
    managers: list[Any] = []

    def make_manager() -> Any:
        managers.append(load_reward_manager(config, tokenizer))
        return managers[-1]

    try:
        outputs = run_reward_loop(make_manager, build_batch(tokenizer, MIXED_SAMPLES))
    finally:
        for manager in managers:
            for worker in manager.reward_worker:
                ray.kill(worker)

    assert len(managers[0].reward_worker) == 2
    rewards = [o["reward_score"] for o in outputs]
    assert rewards == [verl_reference_reward(s, format_score=0.1) for s in MIXED_SAMPLES]
    assert {tuple(o["reward_extra_info"]) for o in outputs} == {tuple(LOGGED_KEYS)}


def test_reward_loop_manager_end_to_end(tokenizer: Any, tmp_path: Path) -> None:
    """What the trainer runs: reward-loop worker actors load the tokenizer from the model path and
    the function from ``pkg://reward_plugins``, score chunks of the batch, and verl assembles
    ``rm_scores`` and the extra-info columns."""
    tokenizer.save_pretrained(tmp_path)
    config = compose(
        "search_r1_grpo",
        [
            f"actor_rollout_ref.model.path={tmp_path}",
            "reward.num_workers=2",
            "+reward.custom_reward_function.reward_kwargs.format_score=0.1",
        ],
    )
    manager = RewardLoopManager(config)
    try:
        batch = build_batch(tokenizer, MIXED_SAMPLES)
        scored = manager.compute_rm_score(batch)
    finally:
        for worker in manager.reward_loop_workers:
            ray.kill(worker)

    reward_tensor, columns = extract_reward(scored)
    expected = [verl_reference_reward(s, format_score=0.1) for s in MIXED_SAMPLES]
    assert reward_tensor.sum(dim=-1).tolist() == pytest.approx(expected)
    response_lengths = batch.batch["attention_mask"][:, batch.batch["prompts"].shape[1] :].sum(-1)
    for row, length in enumerate(response_lengths.tolist()):
        assert reward_tensor[row, length - 1] == pytest.approx(expected[row])

    assert scored.meta_info["reward_extra_keys"] == LOGGED_KEYS
    assert columns["score"].tolist() == pytest.approx(
        [hand_reward(s, format_score=0.1) for s in MIXED_SAMPLES]
    )
    assert columns["answer_tags"].tolist() == [1, 1, 0, 11, 12, 1, 1, 10]
    assert columns["spam_penalized"].tolist() == [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
