"""Shared builders for the tests that run this package inside verl's own code (CPU only).

Everything here is built in-process: a byte-level Hugging Face tokenizer made from a 256-symbol
vocabulary (exact round trip for any text, nothing downloaded), ``DataProto`` batches laid out as
verl's rollout produces them, and a mixed Search-R1 batch whose expected rewards are worked out by
hand in :func:`hand_reward` and, independently, by verl's reference scorer in
:func:`verl_reference_reward`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO_ROOT / "configs"
LEGACY_ENTRY_FILE = REPO_ROOT / "reward_plugins" / "adapters" / "verl_legacy_reward.py"
SHIPPED_CONFIGS = (
    "search_r1_grpo",
    "search_r1_ppo",
    "search_r1_grpo_legacy",
    "recipe_search_r1_em",
    "recipe_search_r1_shaped",
    "recipe_qa_f1_shaped",
)
LEGACY_CONFIG = "search_r1_grpo_legacy"

PAD_TOKEN = "<pad>"
EOS_TOKEN = "<|im_end|>"

SEARCH_R1_PROMPT = (
    "Answer the given question. You can search as many times as you want. When you have the "
    "answer, give it inside <answer> and </answer>, for example <answer> Beijing </answer>. "
    "Question: {question}\n"
)
"""The shape of Search-R1's instruction: its example answer tag must never reach the reward."""


def build_tokenizer() -> Any:
    """A real ``transformers`` fast tokenizer: byte-level BPE over 256 symbols, no merges.

    ``decode(encode(text)) == text`` for every string; ``<pad>`` and ``<|im_end|>`` are special
    tokens, so ``decode(..., skip_special_tokens=True)`` drops them as a real chat tokenizer does.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={s: i for i, s in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token=PAD_TOKEN, eos_token=EOS_TOKEN
    )


@dataclass(frozen=True)
class Sample:
    """One rollout: its data source, question, response text, gold answers and outcome kind."""

    data_source: str
    question: str
    response: str
    golds: Any
    kind: str
    """``right``, ``wrong``, ``missing``, ``spam_right`` (penalized), ``spam_wrong``."""


MIXED_SAMPLES: tuple[Sample, ...] = (
    Sample(
        "searchR1_nq",
        "What is the capital of France?",
        "<think>I need to search.</think><search>capital of France</search>"
        "<information>Paris is the capital.</information><answer> Paris </answer>",
        ["Paris", "City of Paris"],
        "right",
    ),
    Sample(
        "searchR1_triviaqa",
        "Who wrote Hamlet?",
        "<think>Easy.</think><answer>Christopher Marlowe</answer>",
        ["William Shakespeare", "Shakespeare"],
        "wrong",
    ),
    Sample(
        "searchR1_hotpotqa",
        "Which river flows through Vienna?",
        "<think>It is the Danube, I am sure.</think> The Danube.",
        ["Danube"],
        "missing",
    ),
    Sample(
        "searchR1_popqa",
        "What is the capital of Japan?",
        "<answer>Tokyo</answer>" * 11,
        np.array(["Tokyo"], dtype=object),
        "spam_right",
    ),
    Sample(
        "searchR1_musique",
        "Who painted the Mona Lisa?",
        "<answer>Raphael</answer>" * 12,
        ["Leonardo da Vinci"],
        "spam_wrong",
    ),
    Sample(
        "searchR1_2wikimultihopqa",
        "Which band recorded Abbey Road?",
        "<think>Search first.</think><answer>the Beatles!</answer>",
        np.array(["The Beatles", "Beatles"], dtype=object),
        "right",
    ),
    Sample(
        "searchR1_bamboogle",
        "Who was the first person on the Moon?",
        "<answer></answer>",
        ["Neil Armstrong"],
        "wrong",
    ),
    Sample(
        "searchR1_nq",
        "What is the largest planet?",
        "<answer>Jupiter</answer>" * 10,
        ["Jupiter"],
        "right",
    ),
)
"""Several ``searchR1_*`` sources; right, wrong (including an empty answer), missing and spammed
answers; golds as lists and as numpy arrays (what pandas gives for parquet lists)."""


def hand_reward(sample: Sample, format_score: float = 0.0, score: float = 1.0) -> float:
    """The reward worked out by hand from the Search-R1 EM rule (verl's defaults otherwise):
    no answer tags -> 0, wrong -> ``format_score``, right -> ``score``, right but more than ten
    ``<answer>`` tags -> ``score / 4``."""
    return {
        "right": score,
        "spam_right": score / 4,
        "wrong": format_score,
        "spam_wrong": format_score,
        "missing": 0.0,
    }[sample.kind]


def verl_reference_reward(sample: Sample, **options: Any) -> float:
    """verl's own scorer, ``search_r1_like_qa_em.compute_score``, on the same response."""
    from verl.utils.reward_score import search_r1_like_qa_em

    return float(
        search_r1_like_qa_em.compute_score(sample.response, {"target": sample.golds}, **options)
    )


def build_batch(tokenizer: Any, samples: Sequence[Sample], *, with_extra_info: bool = True) -> Any:
    """A ``DataProto`` as verl's rollout leaves it: left-padded ``prompts``, right-padded
    ``responses`` ending in EOS, ``attention_mask`` over both, and Search-R1's non-tensor columns
    (``data_source``, ``reward_model`` with ``ground_truth.target``, ``extra_info``)."""
    import torch
    from verl import DataProto

    pad = tokenizer.pad_token_id
    prompts = [
        tokenizer.encode(SEARCH_R1_PROMPT.format(question=s.question), add_special_tokens=False)
        for s in samples
    ]
    responses = [
        [*tokenizer.encode(s.response, add_special_tokens=False), tokenizer.eos_token_id]
        for s in samples
    ]
    prompt_width = max(map(len, prompts))
    response_width = max(map(len, responses))

    prompt_ids = torch.full((len(samples), prompt_width), pad, dtype=torch.long)
    response_ids = torch.full((len(samples), response_width), pad, dtype=torch.long)
    attention_mask = torch.zeros((len(samples), prompt_width + response_width), dtype=torch.long)
    for row, (prompt, response) in enumerate(zip(prompts, responses, strict=True)):
        prompt_ids[row, prompt_width - len(prompt) :] = torch.tensor(prompt)
        response_ids[row, : len(response)] = torch.tensor(response)
        attention_mask[row, prompt_width - len(prompt) : prompt_width + len(response)] = 1

    columns: dict[str, Any] = {
        "prompts": prompt_ids,
        "responses": response_ids,
        "input_ids": torch.cat([prompt_ids, response_ids], dim=1),
        "attention_mask": attention_mask,
        "data_source": _objects([s.data_source for s in samples]),
        "reward_model": _objects(
            [{"style": "rule", "ground_truth": {"target": s.golds}} for s in samples]
        ),
    }
    if with_extra_info:
        columns["extra_info"] = _objects(
            [{"index": i, "split": "test", "question": s.question} for i, s in enumerate(samples)]
        )
    return DataProto.from_single_dict(columns)


def _objects(values: Sequence[Any]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array


def run_reward_loop(make_manager: Callable[[], Any], batch: Any) -> list[dict[str, Any]]:
    """Score every row with a reward-loop manager's ``run_single``, concurrently, as verl's
    reward worker does. The manager is built inside the running event loop (it captures it)."""

    async def score_all() -> list[dict[str, Any]]:
        manager = make_manager()
        return list(
            await asyncio.gather(*(manager.run_single(batch[i : i + 1]) for i in range(len(batch))))
        )

    return asyncio.run(score_all())


def start_local_ray() -> None:
    """A local Ray of 2 CPUs whose workers import this checkout (``PYTHONPATH``); one left
    running by another module is shut down first, since its workers may not see it."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}},
    )


def save_model_stub(path: Path, tokenizer: Any) -> Path:
    """Write what verl reads from ``actor_rollout_ref.model.path`` to ``path``: the tokenizer and
    a one-layer ``qwen2`` ``config.json`` (no weights: nothing here runs the model)."""
    from transformers import Qwen2Config

    Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        architectures=["Qwen2ForCausalLM"],
    ).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def compose(config_name: str, overrides: Sequence[str] = ()) -> Any:
    """The job config Hydra builds for ``main_ppo --config-path=configs --config-name=NAME``
    (what ``--cfg job`` prints), composed with verl's own trainer config."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return hydra_compose(config_name=config_name, overrides=list(overrides))


def stock_verl_config(overrides: Sequence[str] = ()) -> Any:
    """verl's own ``ppo_trainer`` config, untouched but for ``overrides``."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=list(overrides))


def agent_data() -> Any:
    """verl's own per-trajectory state object (``AgentData``), as ToolAgentLoop builds it for a
    text prompt."""
    from verl.experimental.agent_loop.tool_agent_loop import AgentData

    return AgentData(
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        image_data=[],
        video_data=[],
        audio_data=None,
        mm_processor_kwargs=None,
        metrics={},
        request_id="request-0",
        tools_kwargs={},
    )
