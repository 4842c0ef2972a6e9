"""The shipped multi-turn config with verl 0.9.1: it composes with verl's Hydra config and passes
its validation, its tool loads through verl's own ``initialize_tools_from_config``, and its reward
loads through verl's loader and pays ``compute_score_tool`` under the ``naive`` and ``gdpo``
managers, whether or not the manager passes the tool loop's fields."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf
from verl.trainer.ppo.reward import load_reward_manager
from verl_helpers import Sample, build_batch, compose, run_reward_loop, save_model_stub

import reward_plugins
from reward_plugins.plugins.tool_agent import SHIPPED_TOOL_CONFIG

CONFIG = "search_r1_multiturn_grpo"


def tool_call(query: str) -> str:
    body = json.dumps({"name": "search", "arguments": {"query": query}})
    return f"<tool_call>\n{body}\n</tool_call>"


SAMPLES = (
    Sample(
        "searchR1_nq",
        "What is the capital of France?",
        f"Let me search.\n{tool_call('capital of France')}\nuser\n<tool_response>\n"
        "Doc 1(Title: Paris) Paris is the capital of France.\n</tool_response>\nassistant\n"
        "<answer>Paris</answer>",
        ["Paris"],
        "right",
    ),
    Sample(
        "searchR1_hotpotqa",
        "Which river flows through Vienna?",
        '<tool_call>\n{"name": "search", "arguments": }\n</tool_call>\nuser\n<tool_response>\n'
        "error\n</tool_response>\nassistant\n<answer>Rhine</answer>",
        ["Danube"],
        "wrong",
    ),
    Sample(
        "searchR1_popqa",
        "Who wrote Hamlet?",
        "<answer>Shakespeare</answer>",
        ["Shakespeare"],
        "right",
    ),
)


def composed(*overrides: str) -> Any:
    return compose(
        CONFIG,
        [
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={SHIPPED_TOOL_CONFIG}",
            *overrides,
        ],
    )


def test_config_sets_what_the_tool_loop_needs() -> None:
    config = composed()
    rollout = config.actor_rollout_ref.rollout
    assert rollout.agent.default_agent_loop == "tool_agent"
    assert (rollout.multi_turn.enable, rollout.multi_turn.format) == (True, "hermes")
    assert rollout.multi_turn.max_tool_response_length >= 2048  # retrieved documents stay whole
    assert rollout.multi_turn.tool_config_path == str(SHIPPED_TOOL_CONFIG)
    assert config.reward.custom_reward_function.name == "compute_score_tool"
    assert config.reward.custom_reward_function.path == "pkg://reward_plugins"
    assert config.data.return_raw_chat is True
    # Unset (no override, no REWARD_PLUGINS_TOOL_CONFIG), resolving the config fails, as
    # main_ppo does first: training never starts without the tool.
    with pytest.raises(Exception, match="REWARD_PLUGINS_TOOL_CONFIG"):
        OmegaConf.resolve(compose(CONFIG))


def test_config_passes_verl_validation(tmp_path: Path, tokenizer: Any) -> None:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    save_model_stub(tmp_path, tokenizer)
    config = composed(f"actor_rollout_ref.model.path={tmp_path}")
    validate_config(config, need_reference_policy(config), need_critic(config))


def test_the_tool_loads_through_verls_registry() -> None:
    """In a fresh process, as a rollout worker loads it: verl's own loader on the path that
    ``reward-plugins path tool-config`` prints."""
    path = subprocess.run(
        [sys.executable, "-m", "reward_plugins", "path", "tool-config"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(path) == SHIPPED_TOOL_CONFIG
    script = (
        "from verl.tools.tool_registry import initialize_tools_from_config\n"
        f"(tool,) = initialize_tools_from_config({path!r})\n"
        "schema = tool.get_openai_tool_schema()\n"
        "print(type(tool).__module__, type(tool).__name__, schema.function.name,"
        " schema.function.parameters.required)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    # verl's loader prints the schema first; the last line is ours.
    assert result.stdout.splitlines()[-1].split() == [
        "reward_plugins.tools.search",
        "SearchTool",
        "search",
        "['query']",
    ]


def _with_tool_fields(batch: Any) -> Any:
    """The fields verl's agent loop adds to the batch (agent_loop.py): each sample's tool extra
    fields and its number of turns."""
    rows = len(batch)
    fields = np.empty(rows, dtype=object)
    fields[:] = [{"tool_rewards": [0.5], "search_queries": ["q"]} for _ in range(rows)]
    batch.non_tensor_batch["tool_extra_fields"] = fields
    batch.non_tensor_batch["__num_turns__"] = np.array([4] * rows, dtype=np.int32)
    return batch


@pytest.mark.parametrize("manager", ["naive", "gdpo"])
@pytest.mark.parametrize("tool_fields", [True, False])
def test_reward_is_the_same_under_every_manager(
    tokenizer: Any, manager: str, tool_fields: bool
) -> None:
    config = composed(f"reward.reward_manager.name={manager}")
    batch = build_batch(tokenizer, SAMPLES)
    if tool_fields:
        batch = _with_tool_fields(batch)
    outputs = run_reward_loop(lambda: load_reward_manager(config, tokenizer), batch)
    expected = [
        reward_plugins.compute_score_tool(s.data_source, s.response, {"target": s.golds})
        for s in SAMPLES
    ]
    assert [o["reward_score"] for o in outputs] == [e["score"] for e in expected] == [1.0, 0.0, 1.0]
    for output, result in zip(outputs, expected, strict=True):
        extra = output["reward_extra_info"]
        for key in ("tool_calls", "invalid_tool_calls", "retrieval_hit", "format_valid"):
            assert extra[key] == result[key]
    assert [o["reward_extra_info"]["invalid_tool_calls"] for o in outputs] == [0, 1, 0]
    # Only naive passes the loop's fields: they reach tool_reward_sum, never the reward.
    passed = tool_fields and manager == "naive"
    assert [o["reward_extra_info"]["tool_reward_sum"] for o in outputs] == [
        0.5 if passed else 0.0
    ] * 3


GUARDED = "recipe_search_agent_guarded"


@pytest.mark.parametrize("manager", ["naive", "dapo", "gdpo"])
def test_guarded_recipe_through_verls_managers(tokenizer: Any, manager: str) -> None:
    config = compose(
        GUARDED,
        [
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={SHIPPED_TOOL_CONFIG}",
            f"reward.reward_manager.name={manager}",
        ],
    )
    outputs = run_reward_loop(
        lambda: load_reward_manager(config, tokenizer), build_batch(tokenizer, SAMPLES)
    )
    expected = [
        reward_plugins.compute_score_composed(
            s.data_source, s.response, {"target": s.golds}, recipe="search_agent_guarded"
        )
        for s in SAMPLES
    ]
    # searched and right: 1 + 0.1 (retrieval). An undecodable call, which verl drops, then a
    # response: no call was run, so the model wrote it: the format gate (-0.2), one forged
    # response (-0.2), no answered search (-0.5). Right without searching: 1 - 0.5.
    assert [o["reward_score"] for o in outputs] == [e["score"] for e in expected]
    assert [e["score"] for e in expected] == pytest.approx([1.1, -0.9, 0.5])
    for output, result in zip(outputs, expected, strict=True):
        extra = output["reward_extra_info"]
        for key in ("search_unsearched", "search_forged_responses", "search_format_valid"):
            assert extra[key] == result[key]
