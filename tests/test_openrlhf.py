"""The OpenRLHF reward file, loaded and called by OpenRLHF's own ``SingleTurnAgentExecutor``.

The executor is OpenRLHF 0.11.2's real code: it loads the file from its path, tokenizes the
prompt, stitches prompt and response tokens, decodes them with special tokens kept and calls
``reward_func``. Only vLLM is replaced, by an engine that returns a given response's token ids
(vLLM needs a GPU). Expected rewards come from verl's reference scorer on the response, decoded
as verl decodes it (``skip_special_tokens=True``), or are worked out by hand.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import re
import shutil
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

import reward_plugins.adapters
from reward_plugins import InvalidGroundTruth, InvalidOption, UnknownDataSource, UnknownScorer

verl_qa = pytest.importorskip("verl.utils.reward_score.search_r1_like_qa_em")
agent = pytest.importorskip("openrlhf.utils.agent")

REWARD_FILE = Path(reward_plugins.adapters.__file__).with_name("openrlhf_reward.py")
VARIABLES = ("REWARD_PLUGINS_SCORER", "REWARD_PLUGINS_DATA_SOURCE", "REWARD_PLUGINS_OPTIONS")

CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# A Search-R1-style instruction: it shows an example answer block, which must never be graded.
INSTRUCTION = (
    "Answer the question. Think inside <think> and </think>. To look something up, write "
    "<search> query </search> and read the results between <information> and </information>. "
    "Put the final answer inside <answer> and </answer>, for example <answer> Beijing </answer>. "
    "Question: {question}\n"
)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """A byte-level BPE tokenizer with ChatML special tokens, trained here on a few lines."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator([INSTRUCTION.format(question="What is the capital?")] * 4, trainer)
    hf_tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    hf_tokenizer.chat_template = CHATML_TEMPLATE
    return hf_tokenizer


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No REWARD_PLUGINS_* variable set, whatever the calling shell has."""
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def load_reward_file(path: Path = REWARD_FILE) -> ModuleType:
    """Load the file by path under the module name OpenRLHF uses."""
    spec = importlib.util.spec_from_file_location("reward_func", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ScriptedEngine:
    """Stands in for vLLM's async engine: 'generates' the token ids of a given response.

    Like vLLM it appends the end-of-turn token, honours ``max_tokens`` and reports
    ``finish_reason``.
    """

    def __init__(self, tokenizer: Any, response: str) -> None:
        self.token_ids = [
            *tokenizer(text=response, add_special_tokens=False)["input_ids"],
            tokenizer.eos_token_id,
        ]

    async def generate(
        self, prompt_token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None
    ) -> SimpleNamespace:
        limit = sampling_params.max_tokens
        token_ids = self.token_ids[:limit]
        finish_reason = "length" if len(token_ids) < len(self.token_ids) else "stop"
        output = SimpleNamespace(token_ids=token_ids, finish_reason=finish_reason, logprobs=None)
        return SimpleNamespace(outputs=[output])


def chat_prompt(tokenizer: Any, question: str) -> str:
    """The prompt as OpenRLHF renders it with ``--data.apply_chat_template``."""
    messages = [{"role": "user", "content": INSTRUCTION.format(question=question)}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def execute(
    executor: Any,
    tokenizer: Any,
    prompt: str,
    label: Any,
    response: str,
    max_length: int = 1024,
    max_tokens: int | None = None,
) -> tuple[dict[str, Any], str]:
    """Run OpenRLHF's executor; return its output and the response as verl would decode it."""
    params = SimpleNamespace(max_tokens=max_tokens, logprobs=None)
    engine = ScriptedEngine(tokenizer, response)
    output = asyncio.run(executor.execute(prompt, label, params, max_length, tokenizer, engine))
    ((start, end),) = output["action_ranges"]
    response_ids = output["observation_tokens"][start:end]
    return output, tokenizer.decode(response_ids, skip_special_tokens=True)


GOLDS = ["Paris", "City of Light"]

# (response the policy produces, label as the dataset holds it)
EXECUTOR_CASES = [
    pytest.param(
        "<think>France's capital.</think>\n<answer> Paris </answer>",
        '{"target": ["Paris", "City of Light"]}',
        id="right-json-dict",
    ),
    pytest.param(
        "<answer>the city of light</answer>", '["Paris", "City of Light"]', id="json-list"
    ),
    pytest.param("<answer>Lyon</answer>", "Paris", id="wrong-plain-string"),
    # No answer of its own: the prompt's example "<answer> Beijing </answer>" must not count, so
    # this is 0 even though the gold is Beijing.
    pytest.param("I do not know.", "Beijing", id="no-answer-prompt-example"),
    pytest.param("<answer>Paris</answer>" * 11, ["Paris"], id="spam-python-list"),
    pytest.param(
        "<search>capital of France</search>\n<information>Paris is the capital</information>\n"
        "<answer>Paris</answer>",
        {"target": ["Paris"]},
        id="python-dict",
    ),
]


def float32(values: list[float]) -> list[float]:
    """The values as OpenRLHF's float32 reward tensors hold them."""
    import torch

    return torch.tensor(values, dtype=torch.float32).tolist()


def golds_of(label: Any) -> list[str]:
    """The golds of a test label, worked out by hand from the table above."""
    if label in ("Paris", "Beijing"):
        return [label]
    if label == ["Paris"] or label == {"target": ["Paris"]}:
        return ["Paris"]
    return GOLDS


@pytest.mark.parametrize(("response", "label"), EXECUTOR_CASES)
def test_executor_scores_the_response_like_verl(environment, tokenizer, response, label) -> None:
    executor = agent.SingleTurnAgentExecutor(str(REWARD_FILE))
    prompt = chat_prompt(tokenizer, "What is the capital of France?")
    output, verl_response = execute(executor, tokenizer, prompt, label, response)

    reference = {"target": golds_of(label)}
    expected = float(verl_qa.compute_score(verl_response, reference))
    assert output["reward"] is not None, "the executor swallowed an error"
    assert output["reward"].tolist() == [expected]
    assert output["scores"].tolist() == [expected]
    answer = verl_qa.extract_solution(verl_response)
    extra = {key: value.tolist() for key, value in output["extra_logs"].items()}
    assert extra["answer_found"] == [float(answer is not None)]
    assert extra["em"] == [
        float(answer is not None and verl_qa.em_check(answer, reference["target"]))
    ]
    assert extra["subem"] == [
        float(answer is not None and verl_qa.subem_check(answer, reference["target"]))
    ]


def test_executor_expected_values_by_hand(environment, tokenizer) -> None:
    """The same table, worked out by hand: right, normalized, wrong, none, spam, right."""
    executor = agent.SingleTurnAgentExecutor(str(REWARD_FILE))
    prompt = chat_prompt(tokenizer, "What is the capital of France?")
    rewards = []
    for case in EXECUTOR_CASES:
        response, label = case.values
        output, _ = execute(executor, tokenizer, prompt, label, response)
        rewards.append(output["reward"].item())
    assert rewards == [1.0, 1.0, 0.0, 0.0, 0.25, 1.0]


@pytest.mark.parametrize(
    ("variables", "reference"),
    [
        (
            {
                "REWARD_PLUGINS_SCORER": "compute_score_subem",
                "REWARD_PLUGINS_OPTIONS": '{"format_score": 0.1}',
            },
            lambda text, gt: verl_qa.compute_score_subem(text, gt, format_score=0.1),
        ),
        (
            {
                "REWARD_PLUGINS_DATA_SOURCE": "searchR1_hotpotqa",
                "REWARD_PLUGINS_OPTIONS": '{"score": 2.0, "format_score": 0.5}',
            },
            lambda text, gt: verl_qa.compute_score(text, gt, score=2.0, format_score=0.5),
        ),
    ],
)
@pytest.mark.parametrize(
    "response",
    [
        "<answer>Paris, Lyon</answer>",
        "<answer>Lyon</answer>",
        "<answer>Paris</answer>",
        "<answer>Paris</answer>" * 11,
        "nothing",
    ],
)
def test_environment_configures_the_scorer(
    environment, tokenizer, variables, reference, response
) -> None:
    for name, value in variables.items():
        environment.setenv(name, value)
    executor = agent.SingleTurnAgentExecutor(str(REWARD_FILE))
    prompt = chat_prompt(tokenizer, "What is the capital of France?")
    output, verl_response = execute(executor, tokenizer, prompt, '["Paris"]', response)
    expected = float(reference(verl_response, {"target": ["Paris"]}))
    assert output["reward"].tolist() == float32([expected])


def test_truncated_prompt_falls_back_to_the_assistant_marker(environment, tokenizer) -> None:
    """OpenRLHF cuts an over-long prompt from the left; the query then lacks the full prompt."""
    executor = agent.SingleTurnAgentExecutor(str(REWARD_FILE))
    prompt = chat_prompt(tokenizer, "What is the capital of France?")
    response = "<answer>Paris</answer>"
    output, verl_response = execute(
        executor, tokenizer, prompt, "Paris", response, max_length=40, max_tokens=24
    )
    query = tokenizer.decode(output["observation_tokens"], skip_special_tokens=False)
    assert prompt not in query and query.endswith(
        "<|im_start|>assistant\n" + response + "<|im_end|>"
    )
    assert output["reward"].tolist() == [
        float(verl_qa.compute_score(verl_response, {"target": ["Paris"]}))
    ]
    assert output["reward"].tolist() == [1.0]


def test_file_loads_from_anywhere(environment, tmp_path, tokenizer) -> None:
    """Only absolute imports: a copy outside the package loads and scores the same."""
    copy = tmp_path / "my_reward.py"
    shutil.copy(REWARD_FILE, copy)
    executor = agent.SingleTurnAgentExecutor(str(copy))
    prompt = chat_prompt(tokenizer, "What is the capital of France?")
    output, _ = execute(executor, tokenizer, prompt, "Paris", "<answer>Paris</answer>")
    assert output["reward"].tolist() == [1.0]


# ------------------------------------------------------------------ configuration errors

CONFIG_ERRORS = [
    (
        {"REWARD_PLUGINS_OPTIONS": "{format_score: 0.1}"},
        ValueError,
        r"REWARD_PLUGINS_OPTIONS is not valid JSON",
    ),
    ({"REWARD_PLUGINS_OPTIONS": "[0.1]"}, ValueError, r"must be a JSON object .* got a JSON list"),
    (
        {"REWARD_PLUGINS_OPTIONS": '{"formt_score": 0.1}'},
        InvalidOption,
        re.escape(
            'REWARD_PLUGINS_OPTIONS={"formt_score": 0.1}: compute_score: unknown option(s) '
            "'formt_score'; valid options: extract, format_score, max_answer_tags, "
        ),
    ),
    (
        {"REWARD_PLUGINS_OPTIONS": '{"extract": "middle"}'},
        InvalidOption,
        re.escape(
            "compute_score: option 'extract' must be one of 'last', 'first', got str: 'middle'"
        ),
    ),
    (
        {"REWARD_PLUGINS_OPTIONS": '{"max_answer_tags": "10"}'},
        InvalidOption,
        re.escape("compute_score: option 'max_answer_tags' must be an int >= 1, got str: '10'"),
    ),
    (
        {"REWARD_PLUGINS_SCORER": "compute_scor"},
        UnknownScorer,
        re.escape(
            "REWARD_PLUGINS_SCORER='compute_scor', REWARD_PLUGINS_DATA_SOURCE=unset: "
            "no scorer is registered as 'compute_scor'; did you mean 'compute_score'?"
        ),
    ),
    (
        {"REWARD_PLUGINS_DATA_SOURCE": "nq"},
        UnknownDataSource,
        r"REWARD_PLUGINS_DATA_SOURCE='nq'.*Registered data sources",
    ),
    (
        {
            "REWARD_PLUGINS_SCORER": "compute_score",
            "REWARD_PLUGINS_OPTIONS": '{"penalize_subem": true}',
        },
        InvalidOption,
        re.escape("compute_score: unknown option(s) 'penalize_subem'; valid options: "),
    ),
]


@pytest.mark.parametrize(("variables", "error", "match"), CONFIG_ERRORS)
def test_bad_configuration_fails_when_openrlhf_loads_the_file(
    environment, variables, error, match
) -> None:
    for name, value in variables.items():
        environment.setenv(name, value)
    with pytest.raises(error, match=match):
        agent.SingleTurnAgentExecutor(str(REWARD_FILE))


def test_empty_variables_mean_defaults(environment) -> None:
    for variable in VARIABLES:
        environment.setenv(variable, "")
    module = load_reward_file()
    assert tuple(module.CONFIG) == ("compute_score", "searchR1_nq", {})


@pytest.mark.parametrize(
    ("scorer", "data_source"),
    [("compute_score_f1", "searchR1_nq"), ("compute_score_tool", "*")],
)
def test_default_data_source_is_the_scorers_first_registered_one(
    environment, scorer: str, data_source: str
) -> None:
    """The adapter knows no plugin: the default comes from the scorer's registration."""
    environment.setenv("REWARD_PLUGINS_SCORER", scorer)
    module = load_reward_file()
    assert tuple(module.CONFIG) == (scorer, data_source, {})
    prompt = "Q: "
    rewards = module.reward_func([prompt + "<answer>x</answer>"], [prompt], ['["x"]'])["rewards"]
    assert rewards.tolist() == [1.0]


# ------------------------------------------------------------------ reward_func, called directly

LLAMA3 = (
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nShow <answer> Beijing </answer>"
    "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
)

# (query, the response as a human cuts it out: prompt and end tokens removed)
TEMPLATE_QUERIES = [
    (LLAMA3 + "<answer>Beijing</answer><|eot_id|>", "\n\n<answer>Beijing</answer>"),
    (LLAMA3 + "nothing<|eot_id|><|end_of_text|>", "\n\nnothing"),
    (
        "<s>[INST] Show <answer> Beijing </answer> [/INST] <answer>Rome</answer></s>",
        " <answer>Rome</answer>",
    ),
    (
        "<start_of_turn>user\nShow <answer> Beijing </answer><end_of_turn>\n<start_of_turn>model\n"
        "<answer> Beijing </answer><end_of_turn>\n",
        "\n<answer> Beijing </answer>",
    ),
    ("User: show <answer> Beijing </answer>\nAssistant: no idea", " no idea"),
    (
        "<|im_start|>user\nShow <answer> Beijing </answer><|im_end|>\n<|im_start|>assistant\n"
        "Assistant: <answer>Beijing</answer>\n<|im_end|>\n<|endoftext|>",
        "\nAssistant: <answer>Beijing</answer>\n",
    ),
]


@pytest.mark.parametrize(("query", "response"), TEMPLATE_QUERIES)
def test_assistant_markers_when_the_prompt_is_not_in_the_query(
    environment, query, response
) -> None:
    module = load_reward_file()
    assert module.response_text(query, "a prompt that was truncated") == response
    result = module.reward_func([query], ["a prompt that was truncated"], ["Beijing"])
    assert result["rewards"].tolist() == [
        float(verl_qa.compute_score(response, {"target": ["Beijing"]}))
    ]


def test_prompt_prefix_is_cut_even_after_a_bos_token(environment) -> None:
    module = load_reward_file()
    prompt = "Question: show <answer> Beijing </answer>.\nAnswer: "
    assert module.response_text("<s>" + prompt + "I think so</s>", prompt) == "I think so"
    result = module.reward_func(["<s>" + prompt + "I think so</s>"], [prompt], ["Beijing"])
    assert result["rewards"].tolist() == [0.0]


def test_no_prompt_and_no_marker_is_an_error_and_is_logged(environment, caplog) -> None:
    module = load_reward_file()
    with caplog.at_level(logging.ERROR), pytest.raises(ValueError, match="assistant markers"):
        module.reward_func(["<answer> Beijing </answer>"], ["something else"], ["Beijing"])
    assert "could not score row 0" in caplog.text


@pytest.mark.parametrize(
    ("label", "parsed"),
    [
        ('{"target": ["a", "b"]}', ({"target": ["a", "b"]}, None)),
        (
            '{"target": "a", "data_source": "searchR1_popqa"}',
            ({"target": "a", "data_source": "searchR1_popqa"}, "searchR1_popqa"),
        ),
        (' ["a", "b"] ', (["a", "b"], None)),
        ("Paris", ("Paris", None)),
        ("[not json", ("[not json", None)),  # a gold that merely starts with a bracket
        ('"quoted"', ('"quoted"', None)),  # only objects and lists are decoded
        (["a"], (["a"], None)),
        ({"target": ["a"]}, ({"target": ["a"]}, None)),
    ],
)
def test_parse_label(environment, label, parsed) -> None:
    assert load_reward_file().parse_label(label) == parsed


def test_label_names_its_data_source(environment) -> None:
    module = load_reward_file()
    prompt = "Q: "
    label = '{"target": ["x"], "data_source": "nq"}'
    with pytest.raises(UnknownDataSource, match="'nq'"):
        module.reward_func([prompt + "<answer>x</answer>"], [prompt], [label])
    label = '{"target": ["x"], "data_source": "searchR1_bamboogle"}'
    assert module.reward_func([prompt + "<answer>x</answer>"], [prompt], [label])[
        "rewards"
    ].tolist() == [1.0]


def test_empty_label_says_to_set_the_label_key(environment, caplog) -> None:
    module = load_reward_file()
    with pytest.raises(InvalidGroundTruth, match=r"--data\.label_key"):
        module.reward_func(["Q: <answer>x</answer>"], ["Q: "], [""])


def test_batch_shapes_and_extra_logs(environment) -> None:
    import torch

    module = load_reward_file()
    prompts = ["Q1: ", "Q2: ", "Q3: "]
    responses = ["<answer>Paris</answer>", "<answer>Lyon</answer>", "no answer"]
    result = module.reward_func(
        [p + r for p, r in zip(prompts, responses, strict=True)], prompts, ["Paris"] * 3
    )
    assert set(result) == {"rewards", "scores", "extra_logs"}
    assert result["rewards"].dtype == torch.float32 and result["rewards"].shape == (3,)
    assert result["rewards"].tolist() == [1.0, 0.0, 0.0]
    assert result["scores"] is result["rewards"]
    extra = {key: value.tolist() for key, value in result["extra_logs"].items()}
    # hand-worked: EM once; two answers found; one tag pair each; no spam
    assert extra == {
        "acc": [1.0, 0.0, 0.0],
        "em": [1.0, 0.0, 0.0],
        "subem": [1.0, 0.0, 0.0],
        "f1": [1.0, 0.0, 0.0],
        "answer_found": [1.0, 1.0, 0.0],
        "answer_tags": [1.0, 1.0, 0.0],
        "spam_penalized": [0.0, 0.0, 0.0],
    }


def test_list_lengths_must_agree(environment) -> None:
    with pytest.raises(ValueError, match="2 queries, 1 prompts and 2 labels"):
        load_reward_file().reward_func(["a", "b"], ["a"], ["x", "y"])


def test_numpy_components_are_logged_and_flags_are_not(environment) -> None:
    # extra_logs takes a key when every row holds a finite number (numpy's too); a bool is not.
    import numpy as np

    from reward_plugins import scorer

    @scorer("openrlhf_numpy_components", "openrlhf_numpy_source")
    def numpy_components(response: str, golds: tuple[str, ...]) -> dict[str, Any]:
        hits = np.int64(response.count("x"))
        return {"score": np.float64(hits), "hits": hits, "found": bool(hits)}

    environment.setenv("REWARD_PLUGINS_SCORER", "openrlhf_numpy_components")
    environment.setenv("REWARD_PLUGINS_DATA_SOURCE", "openrlhf_numpy_source")
    module = load_reward_file()
    prompts = ["Q1: ", "Q2: ", "Q3: "]
    responses = ["x", "xxx", "y"]
    result = module.reward_func(
        [p + r for p, r in zip(prompts, responses, strict=True)], prompts, ["g"] * 3
    )
    assert result["rewards"].tolist() == [1.0, 3.0, 0.0]
    assert {key: value.tolist() for key, value in result["extra_logs"].items()} == {
        "hits": [1.0, 3.0, 0.0]
    }
