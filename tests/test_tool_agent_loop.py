"""Whole multi-turn rollouts through verl 0.9.1's own ``ToolAgentLoop``, scored by its reward loop.

What runs is verl's: ``AgentLoopWorker`` (``verl/experimental/agent_loop/agent_loop.py``), built
in-process from the composed ``search_r1_multiturn_grpo`` config, loads the tools from
``multi_turn.tool_config_path`` with ``load_all_tools``, instantiates the registered
``tool_agent`` loop (``tool_agent_loop.py``), runs it, pads its output and streams it to the
reward as verl does (``_compute_score``: a ``DataProto`` with ``tool_extra_fields`` and
``__num_turns__``) into verl's ``RewardLoopWorker``
(``verl/experimental/reward_loop/reward_loop.py``), which builds the ``naive`` or ``gdpo``
manager with ``load_reward_manager`` and calls ``reward_plugins.compute_score_tool``. The tool is
ours (``reward_plugins.tools.SearchTool``, from a copy of the shipped tool YAML), and so is the
retriever (the BM25 server of ``reward_plugins.search`` over the sample corpus, on a free
loopback port in a thread).

Only two things stand in for the cluster: the LLM server is :class:`ScriptedLLM` (it returns,
call by call, the token ids of scripted assistant turns, each ending in ``<|im_end|>``), and the
Ray actor handle of the reward worker is :class:`InProcessHandle` (``handle.compute_score.remote``
awaits the worker's own ``compute_score`` in this process instead of over Ray). Two recorders
call straight through: one keeps the ``DataProto`` the worker receives, one the keyword
arguments the manager passes to the reward function.

The model directory verl reads (``actor_rollout_ref.model.path``) is written by the test: a
byte-level tokenizer with a Qwen2.5-style chat template and a ``config.json`` of model type
``qwen2`` (so verl picks its Qwen continuous-token builder); nothing is downloaded.

Facts pinned here: the reward's ``solution_str`` is the whole response (assistant turns and tool
turns) decoded with ``skip_special_tokens=True``, so the ChatML headers survive as bare ``user``
and ``assistant`` lines around each ``<tool_response>`` block; a turn whose only call is
malformed ends the rollout (verl's parser drops the call, and no call means ``TERMINATED``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from verl_helpers import build_tokenizer, compose, save_model_stub

import reward_plugins
from reward_plugins.search.corpus import sample_corpus_path
from reward_plugins.search.index import SearchIndex
from reward_plugins.search.server import running_server
from reward_plugins.tools import SearchTool

# --- the tokenizer and the model directory ------------------------------------------------------
CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content }}"
    "{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}"
    '{{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.'
    "\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n"
    '<tools>" }}'
    '{%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}'
    '{{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and '
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call>'
    '<|im_end|>\\n" }}'
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first)"
    " or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for call in message.tool_calls %}"
    "{%- if call.function is defined %}{%- set call = call.function %}{%- endif %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' + call.name + \'", "arguments": \' }}'
    "{{- call.arguments | tojson }}{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""Written from the format of Qwen2.5's template (Hugging Face ``Qwen/Qwen2.5-*-Instruct``,
``tokenizer_config.json``): the tools in a ``# Tools`` system block, ChatML turns, Hermes calls
after the assistant text, tool results as ``<tool_response>`` blocks in one ``user`` turn."""

SPECIAL_TOKENS = ["<|im_start|>", "<|im_end|>"]
PLAIN_ADDED_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
"""As in Qwen2.5: the tool tags are added tokens that survive ``skip_special_tokens=True``."""

QUESTION = "What is the capital of France?"
GOLDS = ["Paris"]
DATA_SOURCE = "searchR1_nq"
PARIS_PASSAGE = (
    "Doc 1(Title: Paris) Paris is the capital of France and the largest city of the country."
)
"""The start of the tool's text for the query below: the sample corpus's Paris document first."""

SEARCH_CALL = (
    '<tool_call>\n{"name": "search", "arguments": {"query": "capital of France"}}\n</tool_call>'
)
MALFORMED_CALL = (
    '<tool_call>\n{"name": "search", "arguments": {"query": "capital of France"}\n</tool_call>'
)
"""One closing brace short: verl's Hermes parser logs it and drops it."""
ANSWER = "<think>The first document says Paris.</think>\n<answer>Paris</answer>"
FIRST_TURN = "<think>I should look this up.</think>\n" + SEARCH_CALL
MIXED_TURN = "<think>Two searches.</think>\n" + MALFORMED_CALL + "\n" + SEARCH_CALL


def chat_tokenizer() -> Any:
    from tokenizers import AddedToken

    tok = build_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS})
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in PLAIN_ADDED_TOKENS])
    tok.chat_template = CHAT_TEMPLATE
    return tok


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What verl reads from ``actor_rollout_ref.model.path``, for the chat tokenizer."""
    return save_model_stub(tmp_path_factory.mktemp("model"), chat_tokenizer())


# --- the retriever and the tool config ----------------------------------------------------------
@pytest.fixture(scope="module")
def retriever_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The package's BM25 retriever over the shipped sample corpus, on a free loopback port."""
    index = SearchIndex.for_corpus(sample_corpus_path(), cache_dir=tmp_path_factory.mktemp("idx"))
    with running_server(index) as server:
        yield server.url


SHIPPED_TOOL_YAML = Path(reward_plugins.__file__).parent / "data" / "tools" / "search.yaml"


@pytest.fixture(scope="module")
def tool_config(retriever_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped tool YAML whose only change is the retriever's URL."""
    data = yaml.safe_load(SHIPPED_TOOL_YAML.read_text(encoding="utf-8"))
    (tool,) = data["tools"]
    assert tool["tool_schema"]["function"]["name"] == "search"
    tool["config"]["retrieval_service_url"] = retriever_url
    path = tmp_path_factory.mktemp("tools") / "search.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def loop_config(
    model_dir: Path, tool_config: Path, manager: str, overrides: Sequence[str] = ()
) -> Any:
    return compose(
        "search_r1_multiturn_grpo",
        [
            f"actor_rollout_ref.model.path={model_dir}",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tool_config}",
            f"reward.reward_manager.name={manager}",
            f"+reward.custom_reward_function.reward_kwargs.tool_config={tool_config}",
            "actor_rollout_ref.rollout.name=vllm",
            "data.max_prompt_length=2048",
            "data.max_response_length=2048",
            *overrides,
        ],
    )


# --- the stand-ins for the LLM server and the Ray handle ----------------------------------------
class ScriptedLLM:
    """The inference server's ``generate`` as verl's agent loop calls it: call ``i`` answers the
    token ids of ``turns[i]`` followed by ``<|im_end|>`` (as a server stopping on EOS does).

    A plain class: ``hydra.utils.instantiate``, which builds the agent loop, would turn a
    dataclass argument into a ``DictConfig``."""

    def __init__(self, tokenizer: Any, turns: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.turns = list(turns)
        self.prompts: list[list[int]] = []
        """The ``prompt_ids`` of each call, as the model would have seen them."""

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        assert len(self.prompts) < len(self.turns), "the loop asked for more turns than scripted"
        text = self.turns[len(self.prompts)]
        self.prompts.append(list(prompt_ids))
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return TokenOutput(
            token_ids=[*ids, self.tokenizer.convert_tokens_to_ids("<|im_end|>")],
            stop_reason="completed",
        )


class _Remote:
    def __init__(self, method: Any) -> None:
        self.remote = method


class InProcessHandle:
    """A Ray actor handle's shape (``handle.compute_score.remote(data)``, awaited) over a
    ``RewardLoopWorker`` living in this process."""

    def __init__(self, worker: Any) -> None:
        self.compute_score = _Remote(worker.compute_score)


# --- one rollout --------------------------------------------------------------------------------
@dataclass
class Rollout:
    output: Any
    """The ``DataProto`` of ``AgentLoopWorker.generate_sequences``."""
    llm: ScriptedLLM
    reward_inputs: list[Any]
    """The ``DataProto`` the agent loop sent to the reward worker."""
    tools: list[Any]
    """The tools verl loaded from ``multi_turn.tool_config_path``."""
    reward_calls: list[dict[str, Any]]
    """The keyword arguments the manager called the reward function with."""


def rollout(
    model_dir: Path,
    tool_config: Path,
    manager: str,
    turns: Sequence[str],
    overrides: Sequence[str] = (),
) -> Rollout:
    """One sample through ``AgentLoopWorker.generate_sequences``, with streaming reward."""
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    config = loop_config(model_dir, tool_config, manager, overrides)

    async def run() -> Rollout:
        reward_worker = RewardLoopWorker(config)
        reward_inputs: list[Any] = []
        compute_score = reward_worker.compute_score

        async def recording(data: Any) -> Any:
            reward_inputs.append(data)
            return await compute_score(data)

        reward_worker.compute_score = recording
        reward_calls: list[dict[str, Any]] = []
        score = reward_worker.reward_manager.compute_score

        def recording_score(**kwargs: Any) -> Any:
            reward_calls.append({**kwargs, "extra_info": dict(kwargs["extra_info"])})
            return score(**kwargs)

        reward_worker.reward_manager.compute_score = recording_score
        llm = ScriptedLLM(reward_worker.input_tokenizer, turns)
        worker = AgentLoopWorker(
            config, llm_client=llm, reward_loop_worker_handles=[InProcessHandle(reward_worker)]
        )
        batch = DataProto.from_single_dict(
            {
                "raw_prompt": _objects([[{"role": "user", "content": QUESTION}]]),
                "data_source": _objects([DATA_SOURCE]),
                "reward_model": _objects([{"style": "rule", "ground_truth": {"target": GOLDS}}]),
                "extra_info": _objects([{"index": 0, "split": "test", "question": QUESTION}]),
                "tools_kwargs": _objects([{}]),
                "index": _objects([0]),
            }
        )
        output = await worker.generate_sequences(batch)
        return Rollout(output, llm, reward_inputs, worker.tools, reward_calls)

    return asyncio.run(run())


def _objects(values: Sequence[Any]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array


# --- reading the output back --------------------------------------------------------------------
IM_START, IM_END = SPECIAL_TOKENS
TOOL_TURN = re.compile(
    r"\n<\|im_start\|>user\n<tool_response>\n(.*?)\n</tool_response><\|im_end\|>\n"
    r"<\|im_start\|>assistant\n",
    re.DOTALL,
)
"""One tool turn as the continuous-token builder appends it after an assistant turn: the newline
verl's Qwen builder inserts after the generated ``<|im_end|>``, the ``user`` turn of
``<tool_response>`` blocks, and the next generation prompt."""
DOC_LINE = re.compile(r"Doc (\d+)\(Title: ([^)\n]*)\) (.*)")


def corpus_documents() -> set[str]:
    rows = sample_corpus_path().read_text(encoding="utf-8").splitlines()
    return {json.loads(row)["contents"] for row in rows if row.strip()}


def response_tokens(output: Any) -> tuple[list[int], list[int]]:
    """The valid response ids of row 0 and their response mask (padding cut by the attention
    mask, as verl's reward managers cut it)."""
    responses = output.batch["responses"][0]
    valid = int(output.batch["attention_mask"][0][-responses.shape[0] :].sum())
    mask = output.batch["response_mask"][0][:valid].tolist()
    return responses[:valid].tolist(), mask


def split_by_mask(ids: list[int], mask: list[int]) -> list[tuple[int, list[int]]]:
    """Runs of equal mask value: ``[(mask, ids), ...]``."""
    runs: list[tuple[int, list[int]]] = []
    for token, bit in zip(ids, mask, strict=True):
        if runs and runs[-1][0] == bit:
            runs[-1][1].append(token)
        else:
            runs.append((bit, [token]))
    return runs


def check_tool_text(text: str, corpus: set[str]) -> None:
    """Search-R1's passage format: ``Doc i(Title: t) body`` lines, ``i`` from 1, each a corpus
    document (``t`` its first line), the Paris document first."""
    lines = text.split("\n")
    assert len(lines) == 3  # the tool YAML's topk
    assert lines[0].startswith(PARIS_PASSAGE)
    for number, line in enumerate(lines, start=1):
        match = DOC_LINE.fullmatch(line)
        assert match is not None, line
        assert int(match[1]) == number
        assert f"{match[2]}\n{match[3]}" in corpus


def expected_reward(solution_str: str, tool_config: Path, **options: Any) -> dict[str, Any]:
    result = reward_plugins.compute_score_tool(
        DATA_SOURCE, solution_str, {"target": GOLDS}, tool_config=str(tool_config), **options
    )
    assert isinstance(result, dict)
    return result


def reward_extra_info(output: Any) -> dict[str, Any]:
    """What verl's ``_postprocess`` put in the batch from the reward's extra info (row 0)."""
    keys = output.meta_info["reward_extra_keys"]
    return {key: output.non_tensor_batch[key][0] for key in keys}


# --- the tests ----------------------------------------------------------------------------------
MANAGERS = ("naive", "gdpo")


@pytest.fixture(scope="module")
def search_rollouts(model_dir: Path, tool_config: Path) -> dict[str, Rollout]:
    """The same scripted search-then-answer rollout, scored by each manager."""
    return {m: rollout(model_dir, tool_config, m, [FIRST_TURN, ANSWER]) for m in MANAGERS}


@pytest.mark.parametrize("manager", MANAGERS)
def test_the_loop_calls_the_search_tool(
    search_rollouts: dict[str, Rollout], tool_config: Path, manager: str
) -> None:
    run = search_rollouts[manager]
    (tool,) = run.tools
    assert type(tool) is SearchTool and tool.name == "search"
    tok = run.llm.tokenizer
    assert len(run.llm.prompts) == 2  # search, then answer: the loop stopped on the answer
    ids, mask = response_tokens(run.output)
    text = tok.decode(ids, skip_special_tokens=False)

    # The response is exactly: turn 1, the tool turn, turn 2.
    assert text.startswith(FIRST_TURN + IM_END)
    assert text.endswith(ANSWER + IM_END)
    tool_turn = text[len(FIRST_TURN + IM_END) : -len(ANSWER + IM_END)]
    match = TOOL_TURN.fullmatch(tool_turn)
    assert match is not None, tool_turn
    check_tool_text(match[1], corpus_documents())

    # The mask: 1 on what the model generated, 0 on what the loop inserted.
    runs = split_by_mask(ids, mask)
    assert [bit for bit, _ in runs] == [1, 0, 1]
    assert tok.decode(runs[0][1], skip_special_tokens=False) == FIRST_TURN + IM_END
    assert tok.decode(runs[1][1], skip_special_tokens=False) == tool_turn
    assert tok.decode(runs[2][1], skip_special_tokens=False) == ANSWER + IM_END

    # The second generation saw the first prompt, turn 1 and the tool turn (the trajectory).
    first, second = run.llm.prompts
    prompt_ids = run.output.batch["prompts"][0]
    assert prompt_ids[-len(first) :].tolist() == first
    assert second == first + ids[: len(runs[0][1]) + len(runs[1][1])]
    assert tok.decode(first, skip_special_tokens=False).startswith(IM_START + "system\n")
    assert '"name": "search"' in tok.decode(first)  # the tool schema reached the prompt

    # Turns: the user, two assistant turns, one tool turn.
    assert run.output.non_tensor_batch["__num_turns__"].tolist() == [4]
    fields = run.output.non_tensor_batch
    assert fields["search_queries"][0] == ["capital of France"]
    assert fields["search_documents"][0] == [3]
    assert fields["search_errors"][0] == [None]
    assert len(fields["search_latency_s"][0]) == 1 and fields["search_latency_s"][0][0] > 0
    assert fields["tool_rewards"][0] == [0.0]


@pytest.mark.parametrize("manager", MANAGERS)
def test_the_reward_worker_gets_the_trajectory_as_verl_streams_it(
    search_rollouts: dict[str, Rollout], manager: str
) -> None:
    """``_compute_score``'s ``DataProto``: unpadded ids, ``__num_turns__``, and the loop's
    ``extra_fields`` (the tool's ``search_*`` lists among them) in ``tool_extra_fields``."""
    run = search_rollouts[manager]
    (data,) = run.reward_inputs
    ids, _ = response_tokens(run.output)
    assert data.batch["responses"][0].tolist() == ids
    assert data.non_tensor_batch["__num_turns__"].tolist() == [4]
    (extra,) = data.non_tensor_batch["tool_extra_fields"]
    assert extra["search_queries"] == ["capital of France"]
    assert extra["search_documents"] == [3]
    assert extra["raw_prompt"] == [{"role": "user", "content": QUESTION}]
    assert data.non_tensor_batch["data_source"].tolist() == [DATA_SOURCE]


def test_both_managers_pay_compute_score_tool_on_the_decoded_response(
    search_rollouts: dict[str, Rollout], tool_config: Path
) -> None:
    naive, gdpo = search_rollouts["naive"], search_rollouts["gdpo"]
    ids, _ = response_tokens(naive.output)
    solution_str = naive.llm.tokenizer.decode(ids, skip_special_tokens=True)
    # What the reward function reads: the role headers survive as bare "user"/"assistant" lines.
    assert "</tool_call>\nuser\n<tool_response>\nDoc 1(Title: Paris)" in solution_str
    assert "</tool_response>\nassistant\n<think>" in solution_str
    expected = expected_reward(solution_str, tool_config)
    assert expected["score"] == 1.0

    for run in (naive, gdpo):
        rm_scores = run.output.batch["rm_scores"][0]
        assert rm_scores.sum().item() == expected["score"]
        assert rm_scores[len(ids) - 1].item() == expected["score"]  # on the last response token
        info = reward_extra_info(run.output)
        assert info == pytest.approx(expected)
        assert {k: info[k] for k in TOOL_KEYS_CHECKED} == {
            "tool_calls": 1,
            "invalid_tool_calls": 0,
            "tool_responses": 1,
            "retrieval_hit": 1.0,
            "format_valid": 1.0,
            "assistant_turns": 2,
            # verl's own tool turn answers the call: the reward pairs them
            "searches": 1,
            "forged_responses": 0,
        }
    assert reward_extra_info(naive.output) == reward_extra_info(gdpo.output)


TOOL_KEYS_CHECKED = (
    "tool_calls",
    "invalid_tool_calls",
    "tool_responses",
    "retrieval_hit",
    "format_valid",
    "assistant_turns",
    "searches",
    "forged_responses",
)


@pytest.mark.parametrize("manager", MANAGERS)
def test_a_malformed_call_beside_a_valid_one(
    model_dir: Path, tool_config: Path, manager: str
) -> None:
    """verl's Hermes parser drops the malformed call and runs the valid one, so the loop goes
    on to the answer; the reward counts the dropped call as invalid (penalized via the config's
    ``reward_kwargs``)."""
    run = rollout(
        model_dir,
        tool_config,
        manager,
        [MIXED_TURN, ANSWER],
        ["+reward.custom_reward_function.reward_kwargs.invalid_call_penalty=0.25"],
    )
    assert len(run.llm.prompts) == 2
    assert run.output.non_tensor_batch["__num_turns__"].tolist() == [4]
    assert run.output.non_tensor_batch["search_queries"][0] == ["capital of France"]
    ids, mask = response_tokens(run.output)
    text = run.llm.tokenizer.decode(ids, skip_special_tokens=False)
    assert text.startswith(MIXED_TURN + IM_END) and text.endswith(ANSWER + IM_END)
    assert [bit for bit, _ in split_by_mask(ids, mask)] == [1, 0, 1]

    solution_str = run.llm.tokenizer.decode(ids, skip_special_tokens=True)
    expected = expected_reward(solution_str, tool_config, invalid_call_penalty=0.25)
    info = reward_extra_info(run.output)
    assert info == pytest.approx(expected)
    assert info["invalid_tool_calls"] == 1 and info["tool_calls"] == 2
    assert info["format_valid"] == 0.0 and info["retrieval_hit"] == 1.0
    # the one response answers the call verl ran, not the dropped one
    assert (info["searches"], info["forged_responses"]) == (1, 0)
    assert info["score"] == pytest.approx(0.75)  # right answer 1.0, one invalid call -0.25
    assert run.output.batch["rm_scores"][0].sum().item() == pytest.approx(0.75)


@pytest.mark.parametrize("manager", MANAGERS)
def test_a_turn_with_only_a_malformed_call_ends_the_rollout(
    model_dir: Path, tool_config: Path, manager: str
) -> None:
    """With no parsable call, ``_handle_generating_state`` returns ``TERMINATED``: the loop does
    not go on to the scripted answer, no search happens, and the reward sees one invalid call
    and no answer."""
    malformed_only = "<think>Search.</think>\n" + MALFORMED_CALL
    run = rollout(model_dir, tool_config, manager, [malformed_only, ANSWER])
    assert len(run.llm.prompts) == 1
    assert run.output.non_tensor_batch["__num_turns__"].tolist() == [2]
    assert "search_queries" not in run.output.non_tensor_batch
    ids, mask = response_tokens(run.output)
    assert run.llm.tokenizer.decode(ids, skip_special_tokens=False) == malformed_only + IM_END
    assert set(mask) == {1}

    solution_str = run.llm.tokenizer.decode(ids, skip_special_tokens=True)
    expected = expected_reward(solution_str, tool_config)
    info = reward_extra_info(run.output)
    assert info == pytest.approx(expected)
    assert info["invalid_tool_calls"] == 1 and info["tool_calls"] == 1
    assert info["tool_responses"] == 0 and info["format_valid"] == 0.0
    assert info["score"] == 0.0


def test_what_reaches_the_reward_function(search_rollouts: dict[str, Rollout]) -> None:
    """``naive`` merges the loop's ``extra_fields`` (``tool_extra_fields``) and the turn count
    into ``extra_info``; ``gdpo`` passes the dataset's ``extra_info`` and the experiment name
    only, so ``tool_rewards`` (``tool_reward_weight``) never reach the reward under ``gdpo``."""
    dataset_info = {"index": 0, "split": "test", "question": QUESTION}
    for manager, run in search_rollouts.items():
        (call,) = run.reward_calls
        ids, _ = response_tokens(run.output)
        assert call["solution_str"] == run.llm.tokenizer.decode(ids, skip_special_tokens=True)
        assert call["data_source"] == DATA_SOURCE
        assert call["ground_truth"] == {"target": GOLDS}
        info = call["extra_info"]
        if manager == "gdpo":
            assert info == {**dataset_info, "experiment_name": "grpo_search_r1_multiturn"}
            continue
        latency = info.pop("search_latency_s")
        assert len(latency) == 1
        assert info == {
            **dataset_info,
            "search_queries": ["capital of France"],
            "search_documents": [3],
            "search_errors": [None],
            "turn_scores": [],
            "tool_rewards": [0.0],
            "raw_prompt": [{"role": "user", "content": QUESTION}],
            "num_turns": 4,
            "rollout_reward_scores": {},
        }
