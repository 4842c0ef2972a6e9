"""OpenRLHF's request fields as the reward server and the OpenRLHF adapter read them: the
response part of a query (prompt plus response), and the ground truth of a label.

OpenRLHF 0.11 sends the prompt and the whole query (``SingleTurnAgentExecutor`` in
``openrlhf/utils/agent.py``): :func:`response_text` removes the prompt, or everything up to the
last assistant marker of :data:`ASSISTANT_MARKERS` when the prompt is not in the query, and drops
trailing :data:`END_TOKENS`. :func:`parse_label` decodes a label; :func:`default_data_source`
names the data source of a label that names none. No I/O; the reward server
(:mod:`reward_plugins.serve.protocols`) and the OpenRLHF adapter
(:mod:`reward_plugins.adapters.openrlhf_reward`) share them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reward_plugins.config_reader import ConfigFileError, NotJSONError, parse_json_text
from reward_plugins.errors import InvalidGroundTruth
from reward_plugins.registry import registrations_named

ASSISTANT_MARKERS: tuple[str, ...] = (
    "<|im_start|>assistant",  # ChatML: Qwen, Yi, OpenHermes
    "<|start_header_id|>assistant<|end_header_id|>",  # Llama 3
    "<|assistant|>",  # Phi-3, Zephyr, GLM-4
    "<start_of_turn>model",  # Gemma
    "<\uff5cAssistant\uff5c>",  # DeepSeek-V3 / R1 (full-width bars)
    "[/INST]",  # Llama 2, Mistral
    "Assistant:",  # plain templates (DeepSeek-R1-Zero style, OpenRLHF input_template)
)
"""Where a response starts when the prompt is not a prefix of the query; the first marker of
this list found in the query wins (its last occurrence), so ``Assistant:`` is the last resort."""

END_TOKENS: tuple[str, ...] = (
    "<|im_end|>",
    "<|endoftext|>",
    "</s>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<end_of_turn>",
    "<eos>",
    "<\uff5cend\u2581of\u2581sentence\uff5c>",
)
"""End-of-turn and end-of-text tokens dropped from the end of a response."""


def response_text(query: str, prompt: str) -> str:
    """The response part of ``query`` (prompt plus response), without trailing end tokens.

    Raises:
        ValueError: the prompt is not in the query and no assistant marker is either.
    """
    start = query.find(prompt) if prompt else -1
    response = query[start + len(prompt) :] if start >= 0 else _after_assistant_marker(query)
    return _strip_end_tokens(response)


def _after_assistant_marker(query: str) -> str:
    for marker in ASSISTANT_MARKERS:
        position = query.rfind(marker)
        if position >= 0:
            return query[position + len(marker) :]
    raise ValueError(
        "cannot find the response in the query: the prompt is not part of it and it has none of "
        f"the assistant markers {', '.join(ASSISTANT_MARKERS)}"
    )


def _strip_end_tokens(response: str) -> str:
    while True:
        trimmed = response.rstrip()
        for token in END_TOKENS:
            if trimmed.endswith(token):
                response = trimmed[: -len(token)]
                break
        else:
            return response


def parse_label(label: Any) -> tuple[Any, str | None]:
    """``(ground truth, data source or None)`` from one OpenRLHF label.

    The rule: a string starting with ``{`` or ``[`` that parses as JSON (the package's bounded
    reader: 1 MiB, 64 levels) is decoded; any other string is a single gold answer. A JSON list
    is a list of golds. A mapping may name its ``data_source``; a mapping with a
    ``ground_truth`` key has that value as its ground truth (verl's ``reward_model`` column
    shape), any other mapping (``{"target": [...]}``) is the ground truth itself.

    Raises:
        InvalidGroundTruth: the label is empty (no ``--data.label_key`` given?), is JSON over
            the reader's limits, or names a data source that is not a string.
    """
    if isinstance(label, str):
        text = label.strip()
        if not text:
            raise InvalidGroundTruth(
                "the label is empty: pass --data.label_key naming the column of gold answers"
            )
        if not text.startswith(("{", "[")):
            return label, None
        try:
            label = parse_json_text(text, source="label")
        except NotJSONError:
            return label, None
        except ConfigFileError as error:
            raise InvalidGroundTruth(str(error)) from None
    if isinstance(label, Mapping):
        source = label.get("data_source")
        if source is not None and not isinstance(source, str):
            raise InvalidGroundTruth(
                f"the label's data_source must be a str, got {type(source).__name__}"
            )
        return label.get("ground_truth", label), source
    return label, None


def default_data_source(scorer: str) -> str:
    """The data source of labels that name none: the first data source ``scorer`` is registered
    for, as the registry lists it (``*`` for a scorer of every data source, which the router
    then serves).

    Raises:
        UnknownScorer: no scorer of that name is registered.
    """
    return registrations_named(scorer)[0].data_sources[0]
