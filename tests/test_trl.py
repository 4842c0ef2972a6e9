"""The TRL adapter, run inside TRL's own GRPOTrainer and checked against verl's reference scorer.

Expected rewards always come from ``verl.utils.reward_score.search_r1_like_qa_em`` (verl 0.9.1)
or are worked out by hand in the case tables.
"""

from __future__ import annotations

import math
import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reward_plugins import InvalidGroundTruth, InvalidOption, UnknownDataSource, UnknownScorer
from reward_plugins.adapters.trl import RewardFunction, make_reward_func

verl_qa = pytest.importorskip("verl.utils.reward_score.search_r1_like_qa_em")

# ------------------------------------------------------------------ tiny model and tokenizer

WORDS = (
    "<pad>",
    "<eos>",
    "<unk>",
    "user",
    "assistant",
    ":",
    "<answer>",
    "</answer>",
    "Paris",
    "London",
    "the",
    "city",
    "capital",
    "of",
    "France",
    "England",
    "?",
)
INDEX = {word: i for i, word in enumerate(WORDS)}

# Next-word probabilities of the tiny model; every other word is followed by <eos>. Generation
# starts after the prompt's final ":", so rollouts mix right, wrong, article-prefixed, untagged,
# unopened and repeated answers.
BIGRAMS = {
    ":": {"<answer>": 0.6, "Paris": 0.2, "the": 0.2},
    "<answer>": {"Paris": 0.4, "London": 0.3, "the": 0.3},
    "the": {"Paris": 0.3, "city": 0.3, "</answer>": 0.2, "<eos>": 0.2},
    "Paris": {"</answer>": 0.7, "city": 0.1, "<eos>": 0.2},
    "London": {"</answer>": 0.8, "<eos>": 0.2},
    "city": {"</answer>": 0.6, "<eos>": 0.4},
    "</answer>": {"<eos>": 0.6, "<answer>": 0.4},
}

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }} : {{ message['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}assistant : {% endif %}"
)


def build_tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel(INDEX, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_bigram_model() -> Any:
    """A randomly initialised one-layer Qwen2 turned into the bigram table above.

    Attention and MLP outputs are zeroed, embeddings are one-hot, so after the final RMSNorm the
    hidden state of word i is ``sqrt(hidden) * e_i`` and the head's column i holds its
    next-word log-probabilities.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    hidden = 32
    config = Qwen2Config(
        vocab_size=len(WORDS),
        hidden_size=hidden,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        pad_token_id=INDEX["<pad>"],
        eos_token_id=INDEX["<eos>"],
    )
    model = Qwen2ForCausalLM(config)
    log_probs = torch.full((len(WORDS), len(WORDS)), -30.0)
    log_probs[INDEX["<eos>"], :] = 0.0
    for word, following in BIGRAMS.items():
        log_probs[:, INDEX[word]] = -30.0
        for next_word, probability in following.items():
            log_probs[INDEX[next_word], INDEX[word]] = math.log(probability)
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(torch.eye(len(WORDS), hidden))
        model.model.layers[0].self_attn.o_proj.weight.zero_()
        model.model.layers[0].mlp.down_proj.weight.zero_()
        model.lm_head.weight.zero_()
        model.lm_head.weight[:, : len(WORDS)] = log_probs / math.sqrt(hidden)
    return model


QUESTIONS = (("capital of France ?", ["Paris"]), ("capital of England ?", ["London"]))


def build_dataset(conversational: bool, column: str) -> Any:
    from datasets import Dataset

    rows = []
    for question, golds in QUESTIONS:
        prompt = [{"role": "user", "content": question}] if conversational else f"{question} :"
        row = {"prompt": prompt, "data_source": "searchR1_nq"}
        if column == "reward_model":
            row["reward_model"] = {"style": "rule", "ground_truth": {"target": golds}}
        else:
            row["ground_truth"] = golds
            del row["data_source"]  # the factory's data_source serves instead
        rows.append(row)
    return Dataset.from_list(rows)


def completion_text(completion: object) -> str:
    """What verl would be given: the string, or the single assistant message TRL builds."""
    if isinstance(completion, str):
        return completion
    (message,) = completion
    assert message["role"] == "assistant"
    return message["content"]


def gold_of(row_columns: dict, index: int) -> list[str]:
    if "ground_truth" in row_columns:
        return list(row_columns["ground_truth"][index])
    return list(row_columns["reward_model"][index]["ground_truth"]["target"])


# ------------------------------------------------------------------ GRPOTrainer, end to end


def run_grpo_step(
    output_dir: Any, reward_funcs: list[Any], weights: list[float], dataset: Any
) -> tuple[dict[str, Any], tuple[list, list, dict[str, Any]]]:
    """One real GRPOTrainer step on CPU (seed 7, 16 completions of 12 tokens, 8 per prompt).

    A last, zero-weighted reward function records exactly what TRL passed to the reward
    functions. Returns the step's logged history and ``(prompts, completions, columns)``.
    """
    from trl import GRPOConfig, GRPOTrainer

    calls = []

    def record(prompts: list, completions: list, **columns: Any) -> list[float]:
        calls.append((prompts, completions, columns))
        return [0.0] * len(completions)

    args = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=1,
        per_device_train_batch_size=16,
        num_generations=8,
        max_completion_length=12,
        use_cpu=True,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        seed=7,
        reward_weights=[*weights, 0.0],
    )
    trainer = GRPOTrainer(
        model=build_bigram_model(),
        reward_funcs=[*reward_funcs, record],
        args=args,
        train_dataset=dataset,
        processing_class=build_tokenizer(),
    )
    trainer.train()
    (call,) = calls
    return trainer.state.log_history[0], call


TRAINER_CASES = [
    # conversational prompts, verl-style reward_model column, data_source column, EM
    pytest.param(True, "reward_model", "compute_score", None, {}, id="chat-reward_model-em"),
    # plain prompts, ground_truth column, data source from the factory, SubEM with options
    pytest.param(
        False,
        "ground_truth",
        "compute_score_subem",
        "searchR1_nq",
        {"format_score": 0.1},
        id="plain-ground_truth-subem",
    ),
]


@pytest.mark.parametrize(
    ("conversational", "column", "scorer", "data_source", "options"), TRAINER_CASES
)
def test_grpo_training_step_rewards_equal_verl(
    tmp_path, conversational, column, scorer, data_source, options
) -> None:
    """One real GRPOTrainer step on CPU with the adapter as reward function.

    A second, zero-weighted reward function records exactly what TRL passed; the adapter is then
    called again with those arguments, and both its output and the trainer's logged mean reward
    equal verl's reference scorer on the rollouts. The EM/answer metrics logged through TRL's
    ``log_metric`` hook equal verl's ``em_check``/``extract_solution`` on the same rollouts.
    """
    reward = make_reward_func(scorer, data_source, **options)
    history, (prompts, completions, columns) = run_grpo_step(
        tmp_path, [reward], [1.0], build_dataset(conversational, column)
    )
    assert len(completions) == 16
    assert isinstance(completions[0], list) is conversational
    texts = [completion_text(c) for c in completions]
    golds = [gold_of(columns, i) for i in range(len(texts))]
    reference_function = getattr(verl_qa, scorer)
    expected = [
        float(reference_function(text, {"target": gold}, **options))
        for text, gold in zip(texts, golds, strict=True)
    ]
    answers = [verl_qa.extract_solution(text) for text in texts]
    # The rollouts are not trivial: right, wrong and missing answers all occur.
    assert any(verl_qa.em_check(a, g) for a, g in zip(answers, golds, strict=True) if a)
    assert any(
        a is not None and not verl_qa.em_check(a, g) for a, g in zip(answers, golds, strict=True)
    )
    assert None in answers

    logged = []
    again = reward(
        prompts=prompts,
        completions=completions,
        **{**columns, "log_metric": lambda k, v: logged.append((k, v))},
    )
    assert again == expected

    name = f"reward_plugins_{scorer}"
    assert history[f"rewards/{name}/mean"] == pytest.approx(sum(expected) / len(expected), abs=1e-6)
    em = [
        float(a is not None and verl_qa.em_check(a, g) == 1)
        for a, g in zip(answers, golds, strict=True)
    ]
    found = [float(a is not None) for a in answers]
    assert history[f"rewards/{name}/em"] == pytest.approx(sum(em) / len(em))
    assert history[f"rewards/{name}/answer_found"] == pytest.approx(sum(found) / len(found))
    assert dict(logged)[f"rewards/{name}/em"] == pytest.approx(sum(em) / len(em))


def test_trl_names_the_reward_after_the_scorer() -> None:
    from trl.trainer.utils import get_callable_name

    assert get_callable_name(make_reward_func()) == "reward_plugins_compute_score"
    assert (
        get_callable_name(make_reward_func("compute_score_f1")) == "reward_plugins_compute_score_f1"
    )


# ------------------------------------------------------------------ the call, by hand

GOLD = {"target": ["Paris", "City of Light"]}

# (completion as TRL passes it, the text verl scores)
COMPLETIONS = [
    ("<answer>Paris</answer>", "<answer>Paris</answer>"),  # right
    ("<answer> the city of light </answer>", "<answer> the city of light </answer>"),  # normalized
    ("<answer>Lyon</answer>", "<answer>Lyon</answer>"),  # wrong
    ("Paris", "Paris"),  # no tags: 0
    ("<answer>Paris</answer>" * 11, "<answer>Paris</answer>" * 11),  # spam: 0.25
    ([{"role": "assistant", "content": "<answer>Paris</answer>"}], "<answer>Paris</answer>"),
    (  # tool loop: only the last assistant message is scored (the tool text would be spam)
        [
            {"role": "assistant", "content": "<search>capital</search>"},
            {"role": "tool", "content": "<answer>Paris</answer>" * 11},
            {"role": "assistant", "content": "<answer>Paris</answer>"},
        ],
        "<answer>Paris</answer>",
    ),
    (  # content blocks
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "<answer>"},
                    {"type": "text", "text": "Paris</answer>"},
                ],
            }
        ],
        "<answer>Paris</answer>",
    ),
    ([{"role": "assistant", "content": None, "tool_calls": []}], ""),  # bare tool call
]


@pytest.mark.parametrize(("completion", "text"), COMPLETIONS)
@pytest.mark.parametrize("scorer", ["compute_score", "compute_score_subem"])
def test_completion_forms_equal_verl(completion, text, scorer) -> None:
    reward = make_reward_func(scorer, "searchR1_nq")
    expected = float(getattr(verl_qa, scorer)(text, GOLD))
    assert reward(prompts=["Q"], completions=[completion], ground_truth=[GOLD]) == [expected]


def test_hand_worked_values() -> None:
    reward = make_reward_func(data_source="searchR1_nq", format_score=0.1, score=2.0)
    completions = [text for _, text in COMPLETIONS[:5]]
    # right, right after normalization, wrong (format_score), no tags (0), spam (2.0 / 4)
    assert reward(prompts=[""] * 5, completions=completions, ground_truth=[GOLD] * 5) == [
        2.0,
        2.0,
        0.1,
        0.0,
        0.5,
    ]


tag_soup = st.lists(
    st.sampled_from(["<answer>", "</answer>", "Paris", " the ", "paris!", "Lyon", " ", "\n"]),
    max_size=30,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=tag_soup, penalize=st.booleans())
def test_property_equals_verl_on_any_tag_soup(text: str, penalize: bool) -> None:
    reward = make_reward_func("compute_score", "searchR1_triviaqa", format_score=0.5)
    assert reward(prompts=[""], completions=[text], ground_truth=[GOLD]) == [
        float(verl_qa.compute_score(text, GOLD, format_score=0.5))
    ]
    subem = make_reward_func("compute_score_subem", "searchR1_triviaqa")
    assert subem(prompts=[""], completions=[text], ground_truth=[GOLD]) == [
        float(verl_qa.compute_score_subem(text, GOLD))
    ]


@pytest.mark.parametrize(
    "ground_truth",
    [
        {"target": ["Paris"]},
        {"target": np.array(["Paris", "paris city"])},  # pandas reads parquet lists as arrays
        ["Paris"],
        "Paris",
        np.str_("Paris"),
    ],
)
def test_ground_truth_shapes(ground_truth) -> None:
    reward = make_reward_func(data_source="searchR1_nq")
    direct = reward(
        prompts=[""], completions=["<answer>Paris</answer>"], ground_truth=[ground_truth]
    )
    via_reward_model = reward(
        prompts=[""],
        completions=["<answer>Paris</answer>"],
        reward_model=[{"ground_truth": ground_truth, "style": "rule"}],
    )
    assert direct == via_reward_model == [1.0]


def test_ground_truth_column_wins_over_reward_model() -> None:
    reward = make_reward_func(data_source="searchR1_nq")
    scores = reward(
        prompts=[""],
        completions=["<answer>Paris</answer>"],
        ground_truth=["Paris"],
        reward_model=[{"ground_truth": "Lyon"}],
    )
    assert scores == [1.0]


def test_data_source_column_then_factory_default() -> None:
    reward = make_reward_func(data_source="searchR1_nq")
    # an unknown source in the column is used (and rejected); None falls back to the factory's
    with pytest.raises(UnknownDataSource, match=r"row 1: .*'nq'"):
        reward(
            prompts=["", ""],
            completions=["a", "b"],
            ground_truth=["x", "y"],
            data_source=["searchR1_hotpotqa", "nq"],
        )
    assert reward(
        prompts=["", ""],
        completions=["<answer>x</answer>", "<answer>y</answer>"],
        ground_truth=["x", "y"],
        data_source=["searchR1_hotpotqa", None],
    ) == [1.0, 1.0]


def test_no_data_source_anywhere_names_the_row() -> None:
    reward = make_reward_func()
    with pytest.raises(ValueError, match=r"row 0 has no data source.*data_source="):
        reward(prompts=[""], completions=["<answer>x</answer>"], ground_truth=["x"])


def test_trl_keywords_are_accepted_and_metrics_logged() -> None:
    reward = make_reward_func(data_source="searchR1_nq")
    logged: dict[str, float] = {}
    scores = reward(
        prompts=["", ""],
        completions=["<answer>Paris</answer>" * 11, "<answer>Lyon</answer>"],
        completion_ids=[[1], [2]],
        ground_truth=["Paris", "Paris"],
        trainer_state=object(),
        log_extra=lambda column, values: None,
        log_metric=logged.__setitem__,
    )
    assert scores == [0.25, 0.0]
    prefix = "rewards/reward_plugins_compute_score/"
    assert "rewards/reward_plugins_compute_score/score" not in logged
    # hand-worked: both answered, one EM (spammed), 11 and 1 tags
    assert logged == {
        prefix + "acc": 0.5,
        prefix + "em": 0.5,
        prefix + "subem": 0.5,
        prefix + "f1": 0.5,
        prefix + "answer_found": 1.0,
        prefix + "answer_tags": 6.0,
        prefix + "spam_penalized": 0.5,
    }


# ------------------------------------------------------------------ pickling


def test_pickle_round_trip() -> None:
    reward = make_reward_func("compute_score_subem", "searchR1_nq", format_score=0.1)
    restored = pickle.loads(pickle.dumps(reward))
    assert isinstance(restored, RewardFunction)
    assert restored.__name__ == "reward_plugins_compute_score_subem"
    assert repr(restored) == repr(reward)
    completions = ["<answer>Paris city</answer>", "<answer>Lyon</answer>", "none"]
    assert restored(prompts=[""] * 3, completions=completions, ground_truth=["Paris"] * 3) == [
        1.0,
        0.1,
        0.0,
    ]


# ------------------------------------------------------------------ errors


VALID_QA_OPTIONS = (
    "valid options: extract, format_score, max_answer_tags, max_answer_words, normalizer, "
    "reject_empty_gold, score, spam_factor, subem_word_boundary"
)


def test_unknown_option_lists_valid_ones_and_says_which_scorer_checked() -> None:
    """Without data_source the options are checked against every registration of the name."""
    with pytest.raises(InvalidOption) as caught:
        make_reward_func(formt_score=0.1)
    assert isinstance(caught.value, TypeError)
    assert str(caught.value) == (
        "make_reward_func: scorer 'compute_score': compute_score: unknown option(s) "
        f"'formt_score'; {VALID_QA_OPTIONS}"
    )
    assert "checked against" not in str(caught.value)


def test_unknown_option_with_data_source() -> None:
    with pytest.raises(InvalidOption) as caught:
        make_reward_func("compute_score", "searchR1_musique", penalize_subem=True)
    assert str(caught.value) == (
        "make_reward_func: scorer 'compute_score', data_source='searchR1_musique': "
        f"compute_score: unknown option(s) 'penalize_subem'; {VALID_QA_OPTIONS}"
    )
    make_reward_func("compute_score_subem", "searchR1_musique", penalize_subem=True)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"extract": "middle"},
            "option 'extract' must be one of 'last', 'first', got str: 'middle'",
        ),
        ({"max_answer_tags": 2.5}, "option 'max_answer_tags' must be an int >= 1, got float: 2.5"),
        ({"max_answer_tags": 0}, "option 'max_answer_tags' must be an int >= 1, got int: 0"),
        (
            {"spam_factor": "x"},
            "option 'spam_factor' must be a finite number in [0, 1], got str: 'x'",
        ),
        (
            {"spam_factor": math.nan},
            "option 'spam_factor' must be a finite number in [0, 1], got float: nan",
        ),
        (
            {"score": 1e7},
            "option 'score' must be a finite number in [-1e+06, 1e+06], got float: 10000000.0",
        ),
        ({"normalizer": 3}, "option 'normalizer' must be a str, got int: 3"),
    ],
)
def test_bad_option_values_fail_when_made(options: dict[str, Any], message: str) -> None:
    for data_source, where in ((None, ""), ("searchR1_nq", ", data_source='searchR1_nq'")):
        with pytest.raises(InvalidOption) as caught:
            make_reward_func(data_source=data_source, **options)
        assert str(caught.value).startswith(
            f"make_reward_func: scorer 'compute_score'{where}: compute_score: {message}"
        )


def test_unknown_scorer_or_data_source_fail_when_made() -> None:
    with pytest.raises(UnknownScorer) as caught:
        make_reward_func("compute_scor")
    assert str(caught.value).startswith(
        "make_reward_func: scorer 'compute_scor': no scorer is registered as 'compute_scor'; "
        "did you mean 'compute_score'? Registered scorers: answer_list_penalty, compute_score, "
    )
    with pytest.raises(UnknownDataSource) as caught:
        make_reward_func(data_source="searchR1_nqq")
    assert str(caught.value).startswith(
        "make_reward_func: scorer 'compute_score', data_source='searchR1_nqq': no scorer is "
        "registered for data_source='searchR1_nqq'; did you mean 'searchR1_nq'? "
    )


def test_bad_rows_name_the_row() -> None:
    reward = make_reward_func(data_source="searchR1_nq")
    with pytest.raises(InvalidGroundTruth, match=r"row 1: .*ground_truth.*NoneType"):
        reward(prompts=["", ""], completions=["a", "b"], ground_truth=["x", None])
    with pytest.raises(InvalidGroundTruth, match=r"row 0: reward_model must be a mapping.*str"):
        reward(prompts=[""], completions=["a"], reward_model=["Paris"])
    with pytest.raises(TypeError, match=r"row 0: .*got int"):
        reward(prompts=[""], completions=[3], ground_truth=["x"])
    with pytest.raises(ValueError, match=r"row 0: the completion has no assistant message"):
        reward(prompts=[""], completions=[[{"role": "user", "content": "x"}]], ground_truth=["x"])
    with pytest.raises(ValueError, match=r"'ground_truth' has 1 entries for 2 completions"):
        reward(prompts=["", ""], completions=["a", "b"], ground_truth=["x"])
    with pytest.raises(ValueError, match=r"columns received: answer, completion_ids"):
        reward(
            prompts=[""], completions=["a"], completion_ids=[[1]], answer=["x"], log_metric=print
        )


def test_reject_empty_gold_is_accepted_when_the_function_is_made() -> None:
    """Options are checked from their declared types when the function is made (nothing is
    scored), so this guard passes configuration and then rejects a row whose golds are all
    empty."""
    reward = make_reward_func(data_source="searchR1_nq", reject_empty_gold=True)
    assert reward(["q"], ["<answer>Paris</answer>"], ground_truth=["Paris"]) == [1.0]
    with pytest.raises(InvalidGroundTruth, match="row 0"):
        reward(["q"], ["<answer>Paris</answer>"], ground_truth=[["", "?"]])


def test_numpy_components_are_logged_and_flags_are_not() -> None:
    # A component is logged when every row holds a finite number (numpy's too); a bool is not.
    from reward_plugins import scorer

    @scorer("trl_numpy_components", "trl_numpy_source")
    def numpy_components(response: str, golds: tuple[str, ...]) -> dict[str, Any]:
        hits = np.int64(response.count("x"))
        return {"score": np.float64(hits), "hits": hits, "found": bool(hits)}

    reward = make_reward_func("trl_numpy_components", data_source="trl_numpy_source")
    logged: dict[str, float] = {}
    scores = reward(
        prompts=["", "", ""],
        completions=["x", "xxx", "y"],
        ground_truth=["g", "g", "g"],
        log_metric=logged.__setitem__,
    )
    assert scores == [1.0, 3.0, 0.0]
    assert logged == {"rewards/reward_plugins_trl_numpy_components/hits": pytest.approx(4 / 3)}
