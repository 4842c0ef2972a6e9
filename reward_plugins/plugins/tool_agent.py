"""Rewards for multi-turn tool-agent trajectories (verl's tool agent loop, Search-R1 agents).

``compute_score_tool`` scores the decoded response that verl's tool agent loop hands the reward
function (assistant turns with Hermes ``<tool_call>`` blocks, tool turns with
``<tool_response>`` blocks, or Search-R1's ``<search>``/``<information>`` tags), read by
:func:`reward_plugins.tool_trajectory.parse_trajectory`. The reward is computed from the text
alone, so a rollout gets the same reward under every verl manager, whichever fields it passes:

    score = answer reward (the QA decision table of ``compute_score``, ``compute_score_subem``,
            ``compute_score_f1`` or ``compute_score_metric``, chosen by ``answer_rule``),
            replaced by ``invalid_format_score`` when that is set and the format is invalid,
          + retrieval_score       if a gold occurs in a tool response (SubEM's normalization)
          + search_bonus          if the trajectory holds at least one valid call
          - invalid_call_penalty  x the number of invalid calls
          + tool_reward_weight    x the sum of ``extra_info["tool_rewards"]`` (0 if absent)

The format is valid when every call is valid JSON naming a tool that ``tool_config`` declares,
with the tool's required arguments, at most ``max_tool_calls`` calls were made, an answer
follows the last tool response, and no call follows an answer. Every term but the answer
reward is 0 by default, so by default the reward is the QA reward: a correct answer without
any search is paid, as in the Search-R1 papers.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

from reward_plugins.config_reader import ConfigFileError, read_config_file
from reward_plugins.errors import InvalidOption
from reward_plugins.groundtruth import Golds
from reward_plugins.options import PositiveInt, Score
from reward_plugins.plugins.search_r1 import (
    _check_normalizer,
    _keyword,
    _metric,
    _qa_outcome,
    _qa_result,
    _with_options,
    retrieval_hit,
)
from reward_plugins.registry import WILDCARD, scorer
from reward_plugins.tool_trajectory import ToolCall, parse_trajectory

SHIPPED_TOOL_CONFIG = Path(__file__).resolve().parent.parent / "data" / "tools" / "search.yaml"
"""The tool YAML that ships with the package (the ``search`` tool); the default ``tool_config``."""

TOOL_KEYS: tuple[str, ...] = (
    "tool_calls",
    "invalid_tool_calls",
    "tool_responses",
    "retrieval_hit",
    "format_valid",
    "assistant_turns",
    "tool_reward_sum",
)
"""The keys added to the QA keys, in this order."""

AnswerRule = Literal["em", "subem", "f1", "metric"]


@cache
def declared_tools(tool_config: str | None) -> Mapping[str, frozenset[str]]:
    """Tool name -> required argument names, from a verl tool YAML (``tools:`` entries with an
    OpenAI function ``tool_schema``); ``None`` reads the shipped one.

    Example:
        >>> dict(declared_tools(None))
        {'search': frozenset({'query'})}

    Raises:
        InvalidOption: the file cannot be read or is not a verl tool config.
    """
    path = SHIPPED_TOOL_CONFIG if tool_config is None else Path(tool_config).expanduser()
    try:
        data = read_config_file(path, what="tool_config")
    except ConfigFileError as error:
        raise InvalidOption(str(error)) from None
    tools = data.get("tools") if isinstance(data, Mapping) else None
    if not isinstance(tools, list) or not tools:
        raise InvalidOption(f"tool_config {str(path)!r}: no 'tools' list (a verl tool config)")
    declared: dict[str, frozenset[str]] = {}
    for index, tool in enumerate(tools):
        schema = tool.get("tool_schema") if isinstance(tool, Mapping) else None
        function = schema.get("function") if isinstance(schema, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise InvalidOption(
                f"tool_config {str(path)!r}: tools[{index}] has no tool_schema.function.name"
            )
        parameters = function.get("parameters")
        required = parameters.get("required") if isinstance(parameters, Mapping) else None
        declared[function["name"]] = frozenset(map(str, required or ()))
    return declared


def call_error(call: ToolCall, tools: Mapping[str, frozenset[str]]) -> str | None:
    """Why ``call`` is invalid under the declared ``tools``, or ``None``: the parser's error,
    an undeclared tool, or a missing required argument."""
    if call.error is not None:
        return call.error
    required = tools.get(call.name or "")
    if required is None:
        return f"undeclared tool {call.name!r}"
    missing = sorted(required - set(call.arguments or ()))
    return f"missing argument(s) {', '.join(missing)}" if missing else None


def _tool_reward_sum(extra_info: Mapping[str, Any] | None) -> float:
    """The sum of the finite numbers in ``extra_info["tool_rewards"]`` (0 when absent)."""
    rewards = (extra_info or {}).get("tool_rewards")
    if rewards is None or isinstance(rewards, (str, bytes)):
        return 0.0
    values = rewards if isinstance(rewards, Sequence) else list(rewards)
    return math.fsum(
        float(value)
        for value in values
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    )


def _check(options: Mapping[str, Any]) -> None:
    _check_normalizer(options)
    declared_tools(options["tool_config"])
    if options["invalid_call_penalty"] < 0:
        raise InvalidOption(
            "option 'invalid_call_penalty' is subtracted per invalid call; give it >= 0, got "
            f"{options['invalid_call_penalty']!r}"
        )
    if (options["answer_rule"] == "metric") != (options["metric"] is not None):
        raise InvalidOption("give 'metric' (a metric name) exactly when answer_rule='metric'")
    if options["metric"] is not None:
        _metric(options["metric"], options["metric_options"])


_TOOL_PARAMETERS: list[inspect.Parameter] = [
    _keyword("answer_rule", "em", AnswerRule),
    _keyword("metric", None, str | None),
    _keyword("metric_options", None, Mapping[str, Any] | None),
    _keyword("invalid_format_score", None, Score | None),
    _keyword("retrieval_score", 0.0, Score),
    _keyword("search_bonus", 0.0, Score),
    _keyword("invalid_call_penalty", 0.0, Score),
    _keyword("max_tool_calls", 10, PositiveInt),
    _keyword("tool_reward_weight", 0.0, Score),
    _keyword("tool_config", None, str | None),
    _keyword("extra_info", None, Mapping[str, Any] | None),
]


@scorer("compute_score_tool", WILDCARD, validate=_check)
@_with_options(*_TOOL_PARAMETERS)
def score_tool(
    solution_str: str,
    golds: Golds,
    *,
    answer_rule: AnswerRule = "em",
    metric: str | None = None,
    metric_options: Mapping[str, Any] | None = None,
    invalid_format_score: float | None = None,
    retrieval_score: float = 0.0,
    search_bonus: float = 0.0,
    invalid_call_penalty: float = 0.0,
    max_tool_calls: int = 10,
    tool_reward_weight: float = 0.0,
    tool_config: str | None = None,
    extra_info: Mapping[str, Any] | None = None,
    **qa_options: Any,
) -> dict[str, Any]:
    """The tool-trajectory reward of the module docstring; the QA keys, then :data:`TOOL_KEYS`.

    ``acc`` is the answer rule's paid match (EM for ``f1`` and ``metric``), as in the QA
    scorers; ``extra_info`` only feeds ``tool_reward_sum``.
    """
    measure = None if metric is None else _metric(metric, metric_options)
    penalize = answer_rule != "subem"
    outcome = _qa_outcome(
        answer_rule, solution_str, golds, penalize=penalize, metric=measure, **qa_options
    )
    comparison = outcome.comparison
    acc = outcome.paid_match if answer_rule in ("em", "subem") else comparison.em
    result = _qa_result(outcome, acc and not comparison.too_long)

    trajectory = parse_trajectory(solution_str)
    tools = declared_tools(tool_config)
    calls = trajectory.calls
    invalid = sum(call_error(call, tools) is not None for call in calls)
    # Responses verl put there: Search-R1's injected <information> counts, a <tool_response>
    # the model wrote in its own turn does not.
    hit = retrieval_hit(
        (
            response.text
            for response in trajectory.responses
            if response.kind == "information" or response.role != "assistant"
        ),
        golds,
        qa_options.get("normalizer", "squad"),
        qa_options.get("subem_word_boundary", False),
        qa_options.get("reject_empty_gold", False),
    )
    format_valid = (
        not invalid
        and len(calls) <= max_tool_calls
        and trajectory.answer is not None
        and not trajectory.answer_before_call
    )
    tool_rewards = _tool_reward_sum(extra_info)

    score = result["score"]
    if invalid_format_score is not None and not format_valid:
        score = invalid_format_score
    if hit:
        score += retrieval_score
    if len(calls) > invalid:
        score += search_bonus
    score -= invalid_call_penalty * invalid
    score += tool_reward_weight * tool_rewards
    result.update(
        score=float(score),
        tool_calls=len(calls),
        invalid_tool_calls=invalid,
        tool_responses=len(trajectory.responses),
        retrieval_hit=1.0 if hit else 0.0,
        format_valid=1.0 if format_valid else 0.0,
        assistant_turns=trajectory.assistant_turns,
        tool_reward_sum=tool_rewards,
    )
    return result
