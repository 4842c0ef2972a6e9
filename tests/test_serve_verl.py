"""verl 0.9.1's reward loop scoring through ``compute_score_remote`` and the package's reward
server equals in-process scoring.

Each manager is built by verl's ``load_reward_manager`` from the shipped GRPO config, moved to
the server by the two documented overrides::

    reward.custom_reward_function.name=compute_score_remote
    +reward.custom_reward_function.reward_kwargs.url=http://HOST:PORT

and scores generated rollouts with its async ``run_single``, all rows concurrently, as verl's
reward workers do; the same config without the overrides scores them in-process
(``pkg://reward_plugins`` ``compute_score``). ``reward_score`` and every ``reward_extra_info``
key must be equal, and verl's column assembly (``RewardLoopManager.compute_rm_score``: the first
row's keys, one value per row) must hold for every row.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from verl_helpers import (
    MIXED_SAMPLES,
    Sample,
    build_batch,
    compose,
    run_reward_loop,
    start_local_ray,
)

pytestmark = pytest.mark.slow

MANAGERS = ("naive", "dapo")
REMOTE = "reward.custom_reward_function.name=compute_score_remote"


def through_server(url: str) -> list[str]:
    """The overrides that score through the server(s) at ``url``."""
    return [REMOTE, f"+reward.custom_reward_function.reward_kwargs.url={url}"]


ANSWERS = ("Paris", "paris!", "Lyon", "the Beatles", "", "Tokyo", "Leonardo da Vinci", "42")


def generated_samples(count: int, seed: int = 0) -> list[Sample]:
    """``count`` rollouts built from the mixed batch's questions and golds: a random answer
    (right, wrong, empty, differently cased), tag spam of 1 to 13 tags, or no tags at all."""
    rng = random.Random(seed)
    samples = []
    for i in range(count):
        base = MIXED_SAMPLES[i % len(MIXED_SAMPLES)]
        golds = list(np.asarray(base.golds, dtype=object).tolist())
        answer = rng.choice([*ANSWERS, golds[0], golds[0].upper()])
        shape = rng.random()
        if shape < 0.15:
            response = f"<think>unsure</think> {answer}"
        elif shape < 0.3:
            response = f"<answer>{answer}</answer>" * rng.randint(2, 13)
        else:
            response = f"<think>step {i}</think><search>q</search><answer>{answer}</answer>"
        golds_value: Any = np.array(golds, dtype=object) if i % 2 else golds
        samples.append(Sample(base.data_source, base.question, response, golds_value, "generated"))
    return samples


@pytest.fixture(scope="module")
def reward_server() -> Iterator[str]:
    from reward_plugins.serve.service import running_reward_server

    with running_reward_server("compute_score", workers=2) as server:
        yield server.base_url


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def score(tokenizer: Any, samples: Sequence[Sample], overrides: Sequence[str]) -> list[dict]:
    from verl.trainer.ppo.reward import load_reward_manager

    config = compose("search_r1_grpo", list(overrides))
    batch = build_batch(tokenizer, samples)
    return run_reward_loop(lambda: load_reward_manager(config, tokenizer), batch)


def verl_columns(outputs: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """verl's ``compute_rm_score`` assembly: the first row's keys, read from every row."""
    infos = [output["reward_extra_info"] for output in outputs]
    return {key: np.array([info[key] for info in infos]).tolist() for key in infos[0]}


def assert_same_scoring(local: list[dict[str, Any]], remote: list[dict[str, Any]]) -> None:
    assert [o["reward_score"] for o in remote] == [o["reward_score"] for o in local]
    assert [o["reward_extra_info"] for o in remote] == [o["reward_extra_info"] for o in local]
    assert [list(o["reward_extra_info"]) for o in remote] == [
        list(o["reward_extra_info"]) for o in local
    ]
    assert verl_columns(remote) == verl_columns(local)


@pytest.mark.parametrize("manager", MANAGERS)
def test_mixed_samples_equal_in_process_scoring(
    tokenizer: Any, reward_server: str, manager: str
) -> None:
    managed = [f"reward.reward_manager.name={manager}"]
    local = score(tokenizer, MIXED_SAMPLES, managed)
    remote = score(
        tokenizer,
        MIXED_SAMPLES,
        [*managed, *through_server(reward_server)],
    )
    assert_same_scoring(local, remote)
    assert [o["reward_score"] for o in remote] == [1.0, 0.0, 0.0, 0.25, 0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("manager", MANAGERS)
def test_generated_rollouts_with_options_equal_in_process_scoring(
    tokenizer: Any, reward_server: str, manager: str
) -> None:
    """300 rollouts (more than two of the client's batches), verl options sent to the server,
    and for ``dapo`` its overlong penalty added by verl on top of the server's score."""
    samples = generated_samples(300)
    options = [
        f"reward.reward_manager.name={manager}",
        "+reward.custom_reward_function.reward_kwargs.format_score=0.1",
        "reward.custom_reward_function.reward_kwargs.score=2.0",
    ]
    if manager == "dapo":
        options += [
            "+reward.reward_kwargs.max_resp_len=120",
            "+reward.reward_kwargs.overlong_buffer_cfg.enable=true",
            "+reward.reward_kwargs.overlong_buffer_cfg.len=40",
            "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
            "+reward.reward_kwargs.overlong_buffer_cfg.log=true",
        ]
    local = score(tokenizer, samples, options)
    remote = score(
        tokenizer,
        samples,
        [*options, *through_server(reward_server)],
    )
    assert_same_scoring(local, remote)
    rewards = {o["reward_extra_info"]["score"] for o in remote}
    assert {2.0, 0.1, 0.5, 0.0} <= rewards  # right, wrong, spammed right, no answer
    if manager == "dapo":
        assert any(o["reward_extra_info"]["overlong"] for o in remote)


def test_url_list_in_the_config_fails_over(tokenizer: Any, reward_server: str) -> None:
    """``url`` as a YAML list (verl passes it as a ``ListConfig``), its first server dead."""
    local = score(tokenizer, MIXED_SAMPLES, [])
    remote = score(
        tokenizer,
        MIXED_SAMPLES,
        through_server(f"[{dead_url()},{reward_server}]"),
    )
    assert_same_scoring(local, remote)


def test_url_from_the_environment(
    tokenizer: Any, reward_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWARD_PLUGINS_SERVER_URL", reward_server)
    local = score(tokenizer, MIXED_SAMPLES, [])
    assert_same_scoring(local, score(tokenizer, MIXED_SAMPLES, [REMOTE]))


BAD_GROUND_TRUTH = Sample("searchR1_nq", "Where?", "<answer>Paris</answer>", None, "right")


@pytest.mark.parametrize("manager", MANAGERS)
def test_a_failed_row_keeps_verls_columns_whole(
    tokenizer: Any, reward_server: str, manager: str
) -> None:
    """In-process, the bad ground truth raises out of the manager; remotely the row is the
    server's fallback dict with every key, and verl's column assembly holds."""
    samples = [*MIXED_SAMPLES[:3], BAD_GROUND_TRUTH, *MIXED_SAMPLES[3:]]
    remote = score(
        tokenizer,
        samples,
        [f"reward.reward_manager.name={manager}", *through_server(reward_server)],
    )
    good = score(tokenizer, MIXED_SAMPLES, [f"reward.reward_manager.name={manager}"])
    assert_same_scoring(good, remote[:3] + remote[4:])
    failed = remote[3]
    assert failed["reward_score"] == 0.0
    assert list(failed["reward_extra_info"]) == list(good[0]["reward_extra_info"])
    assert set(failed["reward_extra_info"].values()) == {0.0}
    columns = verl_columns(remote)
    assert all(len(column) == len(samples) for column in columns.values())


def test_reward_loop_manager_in_ray_workers(
    tokenizer: Any, reward_server: str, tmp_path: Path
) -> None:
    """What the trainer runs: ``RewardLoopManager``'s Ray actors load ``compute_score_remote``
    from ``pkg://reward_plugins``, await it in their own event loops, and verl assembles
    ``rm_scores`` and the extra-info columns, equal to in-process scoring."""
    import ray
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager
    from verl.trainer.ppo.reward import extract_reward

    tokenizer.save_pretrained(tmp_path)
    common = [f"actor_rollout_ref.model.path={tmp_path}", "reward.num_workers=2"]
    remote_config = compose(
        "search_r1_grpo",
        [*common, *through_server(reward_server)],
    )
    batch = build_batch(tokenizer, MIXED_SAMPLES)
    start_local_ray()
    try:
        manager = RewardLoopManager(remote_config)
        try:
            scored = manager.compute_rm_score(batch)
        finally:
            for worker in manager.reward_loop_workers:
                ray.kill(worker)
    finally:
        ray.shutdown()

    local = score(tokenizer, MIXED_SAMPLES, [])
    reward_tensor, columns = extract_reward(scored)
    assert reward_tensor.sum(dim=-1).tolist() == [o["reward_score"] for o in local]
    assert scored.meta_info["reward_extra_keys"] == list(local[0]["reward_extra_info"])
    assert {key: column.tolist() for key, column in columns.items()} == verl_columns(local)
