"""Rewards for multi-turn tool-agent trajectories (verl's tool agent loop, Search-R1 agents).

``compute_score_tool`` scores the decoded response that verl's tool agent loop hands the reward
function (assistant turns with Hermes ``<tool_call>`` blocks, tool turns with
``<tool_response>`` blocks, or Search-R1's ``<search>``/``<information>`` tags), read by
:func:`reward_plugins.tool_trajectory.parse_trajectory`. The reward is computed from the text
alone, so a rollout gets the same reward under every verl manager, whichever fields it passes:

    score = answer reward of the final answer (the QA decision table of ``compute_score``,
            ``compute_score_subem``, ``compute_score_f1`` or ``compute_score_metric``, chosen
            by ``answer_rule``; ``format_score`` with ``require_grounding`` when no real tool
            response holds a gold or the answer), replaced by ``invalid_format_score`` when
            that is set and the format is invalid,
          + retrieval_score          if a gold occurs in a real tool response (SubEM's rule)
          + search_bonus             if the trajectory holds at least one valid call
          - invalid_call_penalty     x the number of invalid calls
          - missing_search_penalty   x max(0, min_searches - answered searches)
          - repeated_query_penalty   x queries sent before in the trajectory
          - extra_call_penalty       x max(0, calls - free_tool_calls)
          - forged_response_penalty  x tool responses the model wrote itself
          + tool_reward_weight       x the sum of ``extra_info["tool_rewards"]`` (0 if absent)

A tool response is real when it answers a call (the pairing rule of
:mod:`reward_plugins.tool_trajectory`); the others the model wrote, and they count nowhere but
in ``forged_responses``. ``tool_format`` names the calls the trainer's loop executes.

The final answer is the parser's: the last closed ``<answer>`` in an assistant turn after the
last tool response (with ``extract="first"``, the first of those), never a span inside a tool
response, a call's arguments or a non-assistant turn; the anti-spam rule counts the answer tags
the model wrote (``Trajectory.answer_tags``), in any turn. A call is valid when it is valid
JSON naming a tool that ``tool_config`` declares with arguments that tool runs: for the search
tool (``reward_plugins.tools.SearchTool``) the rule of :mod:`reward_plugins.tool_schema`,
which the tool itself applies (``query`` or ``query_list``); for any other tool, the schema's
``required`` arguments. The format is valid when every call is valid, at most
``max_tool_calls`` calls were made, no tool response is the model's own, an answer follows the
last tool response, and no call follows an answer. Every term but the answer reward is 0 by
default, so by default the reward is the QA reward of the final answer: a correct answer
without any search is paid, as in the Search-R1 papers.

``extra_info["tool_rewards"]`` (what verl's tool agent loop collects from the tools'
``execute``) counts by :func:`tool_reward_sum`'s rule. The answer reward, the QA options and the
QA keys are those of the QA core (:mod:`reward_plugins.plugins.qa_core`), which the Search-R1
scorers share.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, NamedTuple

from reward_plugins import cache
from reward_plugins.config_reader import ConfigFileError, read_config_file
from reward_plugins.errors import InvalidInput, InvalidOption
from reward_plugins.groundtruth import Golds
from reward_plugins.options import (
    NonNegativeInt,
    Penalty,
    PositiveInt,
    Score,
    declared_options,
    describe_value,
    is_finite_number,
)
from reward_plugins.plugins.qa_core import (
    QAOptions,
    cached_metric,
    check_normalizer,
    qa_outcome,
    qa_result,
    retrieval_hit,
)
from reward_plugins.plugins.search_r1 import QA_RESULTS
from reward_plugins.registry import WILDCARD, scorer
from reward_plugins.results import ResultKey, Schema, keys_of
from reward_plugins.text import get_normalizer
from reward_plugins.tool_schema import SEARCH_TOOL_CLASSES, arguments_error, parse_parameters
from reward_plugins.tool_trajectory import ToolCall, ToolFormat, Trajectory, parse_trajectory

SHIPPED_TOOL_CONFIG = Path(__file__).resolve().parent.parent / "data" / "tools" / "search.yaml"
"""The tool YAML that ships with the package (the ``search`` tool); the default ``tool_config``."""

TOOL_RESULTS: Schema = (
    ResultKey("tool_calls", "count", "tool calls"),
    ResultKey("invalid_tool_calls", "count", "invalid tool calls"),
    ResultKey("tool_responses", "count", "tool responses"),
    ResultKey("retrieval_hit", "component", "retrieval hit", gdpo=True),
    ResultKey("format_valid", "component", "valid format", gdpo=True),
    ResultKey("assistant_turns", "count", "assistant turns"),
    ResultKey("tool_reward_sum", "component", "tool reward sum"),
    ResultKey("searches", "count", "answered searches"),
    ResultKey("unsearched", "rate", "no search"),
    ResultKey("repeated_queries", "count", "repeated queries"),
    ResultKey("extra_tool_calls", "count", "calls over the free budget"),
    ResultKey("forged_responses", "count", "forged tool responses"),
    ResultKey("searched_after_answer", "rate", "search after answer"),
    ResultKey("grounded", "rate", "grounded answer"),
)
"""The schema of the keys added to the QA keys (a count listed for GDPO would pay for longer
trajectories; ``tool_reward_sum`` is unbounded). The keys from ``searches`` on are what the
guards read, one per hack they guard against."""

TOOL_KEYS: tuple[str, ...] = keys_of(TOOL_RESULTS)
"""The keys added to the QA keys, in this order."""

MAX_TOOL_REWARDS = 10_000
"""The most values ``extra_info["tool_rewards"]`` may hold."""
MAX_TOOL_REWARD = 1e6
"""The largest magnitude of one tool reward (so the sum is finite and exact enough)."""
TOOL_REWARDS_FIELD = 'extra_info["tool_rewards"]'

AnswerRule = Literal["em", "subem", "f1", "metric"]
DEFAULT_FREE_TOOL_CALLS = 2
"""Calls that ``extra_call_penalty`` leaves free: a single-hop question takes one search, a
two-hop one two."""


@dataclass(frozen=True)
class DeclaredTool:
    """One tool of a verl tool YAML: its ``required`` arguments, and whether it is the search
    tool (whose own argument rule then decides, see the module docstring)."""

    required: frozenset[str]
    search: bool = False

    def error(self, arguments: Mapping[str, Any]) -> str | None:
        """Why the tool would not run ``arguments``, or ``None``."""
        if self.search:
            return arguments_error(arguments)
        missing = sorted(self.required - set(arguments))
        return f"missing argument(s) {', '.join(missing)}" if missing else None


@lru_cache(maxsize=cache.TOOL_CONFIGS)
def declared_tools(tool_config: str | None) -> Mapping[str, DeclaredTool]:
    """Tool name -> :class:`DeclaredTool`, from a verl tool YAML (``tools:`` entries with an
    OpenAI function ``tool_schema``) read with the package's bounded reader; ``None`` reads the
    shipped one.

    Example:
        >>> dict(declared_tools(None))
        {'search': DeclaredTool(required=frozenset({'query'}), search=True)}

    Raises:
        InvalidOption: the file cannot be read (missing, not a regular file, over a limit of the
            reader, not YAML: the reader's message), it is not a verl tool config, or a tool's
            ``required`` is not a list of strings (verl's ``OpenAIFunctionParametersSchema``
            takes a list).
    """
    path = SHIPPED_TOOL_CONFIG if tool_config is None else Path(tool_config).expanduser()
    try:
        data = read_config_file(path, what="tool_config")
    except ConfigFileError as error:
        raise InvalidOption(str(error)) from None
    where = f"tool_config {str(path)!r}"
    tools = data.get("tools") if isinstance(data, Mapping) else None
    if not isinstance(tools, list) or not tools:
        raise InvalidOption(f"{where}: no 'tools' list (a verl tool config)")
    declared: dict[str, DeclaredTool] = {}
    for index, tool in enumerate(tools):
        schema = tool.get("tool_schema") if isinstance(tool, Mapping) else None
        function = schema.get("function") if isinstance(schema, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise InvalidOption(f"{where}: tools[{index}] has no tool_schema.function.name")
        parameters = function.get("parameters")
        required = parameters.get("required") if isinstance(parameters, Mapping) else None
        if required is None:
            required = []
        if not isinstance(required, list) or not all(isinstance(n, str) for n in required):
            raise InvalidOption(
                f"{where}: tools[{index}].tool_schema.function.parameters.required must be a "
                f"list of argument names, got {type(required).__name__}"
            )
        search = isinstance(tool, Mapping) and tool.get("class_name") in SEARCH_TOOL_CLASSES
        declared[function["name"]] = DeclaredTool(frozenset(required), search)
    return declared


def call_error(call: ToolCall, tools: Mapping[str, DeclaredTool]) -> str | None:
    """Why ``call`` is invalid under the declared ``tools``, or ``None``: the parser's error,
    an undeclared tool, or arguments the tool would not run."""
    if call.error is not None:
        return call.error
    tool = tools.get(call.name or "")
    if tool is None:
        return f"undeclared tool {call.name!r}"
    return tool.error(call.arguments or {})


def _real(value: Any, field: str) -> float:
    """``value`` as a float when it is a finite real (not a bool) of magnitude at most
    :data:`MAX_TOOL_REWARD` (a huge int is compared, never converted), else
    :class:`InvalidInput`."""
    if is_finite_number(value) and -MAX_TOOL_REWARD <= value <= MAX_TOOL_REWARD:
        return float(value)
    raise InvalidInput(
        f"compute_score_tool: {field} must be a finite real of magnitude at most "
        f"{MAX_TOOL_REWARD:g}, got {describe_value(value)}"
    )


def tool_reward_sum(extra_info: Any) -> float:
    """The sum of ``extra_info["tool_rewards"]``, by one rule.

    ``extra_info`` ``None`` or without the key (or the key ``None``): 0. A list, tuple or
    1-d array of reals: their ``math.fsum``; a single real (or a 0-d array): itself. Every value
    must be a finite real (not a bool) of magnitude at most :data:`MAX_TOOL_REWARD`, and there
    may be at most :data:`MAX_TOOL_REWARDS` of them.

    Example:
        >>> tool_reward_sum({"tool_rewards": [0.1, 0.2, 0.3]})
        0.6
        >>> tool_reward_sum({"num_turns": 3}), tool_reward_sum({"tool_rewards": 2})
        (0.0, 2.0)

    Raises:
        InvalidInput: ``extra_info`` is not a mapping; the field holds NaN, an infinity, a
            bool, a string, an int too large, another type, an array of more than one
            dimension, or too many values (the message names the field and the type).
    """
    if extra_info is None:
        return 0.0
    if not isinstance(extra_info, Mapping):
        raise InvalidInput(
            f"compute_score_tool: extra_info must be a mapping, got {type(extra_info).__name__}"
        )
    rewards = extra_info.get("tool_rewards")
    dimensions = getattr(rewards, "ndim", None)  # numpy arrays and scalars
    if dimensions == 0:
        rewards = rewards.item()  # type: ignore[union-attr]
    elif dimensions == 1:
        rewards = rewards.tolist()  # type: ignore[union-attr]
    elif dimensions is not None:
        raise InvalidInput(
            f"compute_score_tool: {TOOL_REWARDS_FIELD} must be a list of numbers, got a "
            f"{dimensions}-d {type(rewards).__name__}"
        )
    if rewards is None:
        return 0.0
    if not isinstance(rewards, list | tuple):
        return _real(rewards, TOOL_REWARDS_FIELD)
    if len(rewards) > MAX_TOOL_REWARDS:
        raise InvalidInput(
            f"compute_score_tool: {TOOL_REWARDS_FIELD} holds {len(rewards)} values; at most "
            f"{MAX_TOOL_REWARDS}"
        )
    return math.fsum(
        _real(value, f"{TOOL_REWARDS_FIELD}[{index}]") for index, value in enumerate(rewards)
    )


def final_answer(trajectory: Trajectory, text: str, extract: str) -> str | None:
    """The stripped final answer: the parser's (``extract="last"``), or the first closed answer
    after the last tool response (``"first"``); ``None`` when there is none."""
    if extract == "last":
        return trajectory.answer
    last_response = max((response.span[1] for response in trajectory.responses), default=-1)
    after = [span for span in trajectory.answers if span[0] >= last_response]
    return text[after[0][0] : after[0][1]].strip() if after else None


class ToolUse(NamedTuple):
    """What the tool options read from a trajectory, beside its parse: the calls' validity, the
    searches, the queries and what the real tool responses hold."""

    invalid: int
    """Calls that are invalid (:func:`call_error`)."""
    searches: int
    """Valid calls that a real tool response answers."""
    repeated_queries: int
    """Queries (arguments, for a tool other than search) sent before in the trajectory."""
    hit: bool
    """A gold occurs in a real tool response."""
    grounded: bool
    """A gold or the final answer occurs in a real tool response."""


def call_queries(call: ToolCall, tool: DeclaredTool) -> list[str]:
    """What a valid call asks: the search tool's queries, or another tool's arguments as
    canonical JSON."""
    arguments = call.arguments or {}
    if tool.search:
        return parse_parameters(arguments)
    return [json.dumps(arguments, sort_keys=True, default=repr)]


def read_tool_use(
    trajectory: Trajectory,
    tools: Mapping[str, DeclaredTool],
    golds: Golds,
    answer: str | None,
    qa_options: Mapping[str, Any],
) -> ToolUse:
    """The :class:`ToolUse` of a parsed trajectory, under the QA options' normalizer and SubEM
    guards (the same reading as the answer's)."""
    normalizer = qa_options.get("normalizer", "squad")
    normalize = get_normalizer(normalizer)
    word_boundary = qa_options.get("subem_word_boundary", False)
    calls = trajectory.calls
    real = trajectory.real_responses
    answered = {response.call for response in real}
    invalid = searches = repeated = 0
    seen: set[str] = set()
    for index, call in enumerate(calls):
        if call_error(call, tools) is not None:
            invalid += 1
            continue
        searches += index in answered
        for query in call_queries(call, tools[call.name or ""]):
            key = normalize(query)
            repeated += key in seen
            seen.add(key)
    texts = [response.text for response in real]
    reject_empty = qa_options.get("reject_empty_gold", False)
    hit = retrieval_hit(texts, golds, normalizer, word_boundary, reject_empty)
    grounded = hit or bool(
        answer is not None
        and normalize(answer)
        and retrieval_hit(texts, (answer,), normalizer, word_boundary, False)
    )
    return ToolUse(invalid, searches, repeated, hit, grounded)


def _check(options: Mapping[str, Any]) -> None:
    check_normalizer(options)
    declared_tools(options["tool_config"])
    if options["invalid_call_penalty"] < 0:
        raise InvalidOption(
            "option 'invalid_call_penalty' is subtracted per invalid call; give it >= 0, got "
            f"{options['invalid_call_penalty']!r}"
        )
    if (options["answer_rule"] == "metric") != (options["metric"] is not None):
        raise InvalidOption("give 'metric' (a metric name) exactly when answer_rule='metric'")
    if options["metric"] is not None:
        cached_metric(options["metric"], options["metric_options"])


@dataclass(frozen=True, kw_only=True)
class ToolOptions(QAOptions):
    """The options of ``compute_score_tool``: the QA options, the answer rule and the tool
    options of the module docstring."""

    answer_rule: Annotated[AnswerRule, "how the final answer is matched"] = "em"
    metric: Annotated[str | None, "the metric of answer_rule='metric'"] = None
    metric_options: Annotated[Mapping[str, Any] | None, "the metric's own options"] = None
    invalid_format_score: Annotated[Score | None, "replaces the reward of a bad format"] = None
    retrieval_score: Annotated[Score, "added when a gold is in a tool response"] = 0.0
    search_bonus: Annotated[Score, "added when a valid tool call was made"] = 0.0
    invalid_call_penalty: Annotated[Score, "subtracted per invalid tool call"] = 0.0
    max_tool_calls: Annotated[PositiveInt, "more calls make the format invalid"] = 10
    tool_reward_weight: Annotated[Score, "weight of extra_info's tool rewards"] = 0.0
    tool_config: Annotated[str | None, "verl's tool YAML (None: the shipped one)"] = None
    tool_format: Annotated[ToolFormat, "the tool-call syntax"] = "any"
    min_searches: Annotated[NonNegativeInt, "searches expected before answering"] = 0
    missing_search_penalty: Annotated[Penalty, "per search short of min_searches"] = 0.0
    repeated_query_penalty: Annotated[Penalty, "per repeated query"] = 0.0
    free_tool_calls: Annotated[NonNegativeInt, "calls that extra_call_penalty leaves free"] = (
        DEFAULT_FREE_TOOL_CALLS
    )
    extra_call_penalty: Annotated[Penalty, "per call over free_tool_calls"] = 0.0
    forged_response_penalty: Annotated[Penalty, "per forged tool response"] = 0.0
    require_grounding: Annotated[bool, "a match pays only if a tool response holds it"] = False


TOOL_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        name: spec.default
        for name, spec in declared_options(ToolOptions).items()
        if name not in declared_options(QAOptions)
        and name not in ("answer_rule", "metric", "metric_options")
    }
)
"""The tool options (every option but the QA ones and the answer rule) and their defaults."""


@scorer(
    "compute_score_tool",
    WILDCARD,
    validate=_check,
    results=(*QA_RESULTS, *TOOL_RESULTS),
    options=ToolOptions,
)
def score_tool(
    solution_str: str,
    golds: Golds,
    *,
    answer_rule: AnswerRule = "em",
    metric: str | None = None,
    metric_options: Mapping[str, Any] | None = None,
    extra_info: Mapping[str, Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The tool-trajectory reward of the module docstring; the QA keys, then :data:`TOOL_KEYS`.

    ``acc`` is the answer rule's paid match (EM for ``f1`` and ``metric``), as in the QA
    scorers, whether or not the answer is grounded; ``extra_info`` only feeds
    ``tool_reward_sum`` (:func:`tool_reward_sum`).

    Raises:
        InvalidInput: ``extra_info`` or its ``tool_rewards`` break :func:`tool_reward_sum`'s
            rule.
    """
    tool_options = {name: options.pop(name, default) for name, default in TOOL_DEFAULTS.items()}
    qa_options = options  # what is left
    tool_rewards = tool_reward_sum(extra_info)
    trajectory = parse_trajectory(solution_str, tool_format=tool_options["tool_format"])
    answer = final_answer(trajectory, solution_str, qa_options.get("extract", "last"))
    measure = None if metric is None else cached_metric(metric, metric_options)
    outcome = qa_outcome(
        answer_rule,
        solution_str,
        golds,
        penalize=answer_rule != "subem",
        metric=measure,
        scan=(answer, *trajectory.answer_tags),
        **qa_options,
    )
    comparison = outcome.comparison
    acc = outcome.paid_match if answer_rule in ("em", "subem") else comparison.em
    result = qa_result(outcome, acc and not comparison.too_long)
    tools = declared_tools(tool_options["tool_config"])
    use = read_tool_use(trajectory, tools, golds, answer, qa_options)
    if tool_options["require_grounding"] and outcome.paid_match and not use.grounded:
        result["score"] = float(qa_options.get("format_score", 0.0))
    result.update(tool_keys(trajectory, use, tool_options, tool_rewards))
    result["score"] = shaped_score(result["score"], tool_options, result)
    return result


def tool_keys(
    trajectory: Trajectory, use: ToolUse, tool_options: Mapping[str, Any], tool_rewards: float
) -> dict[str, float | int]:
    """The values of :data:`TOOL_KEYS` for one trajectory."""
    calls = len(trajectory.calls)
    forged = trajectory.forged_responses
    format_valid = (
        not use.invalid
        and not forged
        and calls <= tool_options["max_tool_calls"]
        and trajectory.answer is not None
        and not trajectory.answer_before_call
    )
    return {
        "tool_calls": calls,
        "invalid_tool_calls": use.invalid,
        "tool_responses": len(trajectory.responses),
        "retrieval_hit": 1.0 if use.hit else 0.0,
        "format_valid": 1.0 if format_valid else 0.0,
        "assistant_turns": trajectory.assistant_turns,
        "tool_reward_sum": tool_rewards,
        "searches": use.searches,
        "unsearched": 1.0 if use.searches == 0 else 0.0,
        "repeated_queries": use.repeated_queries,
        "extra_tool_calls": max(0, calls - tool_options["free_tool_calls"]),
        "forged_responses": forged,
        "searched_after_answer": 1.0 if trajectory.answer_before_call else 0.0,
        "grounded": 1.0 if use.grounded else 0.0,
    }


def shaped_score(score: float, tool_options: Mapping[str, Any], keys: Mapping[str, Any]) -> float:
    """The answer reward ``score`` with the tool options applied to the trajectory's
    :data:`TOOL_KEYS` values ``keys``, in the order of the module docstring's sum."""
    if tool_options["invalid_format_score"] is not None and not keys["format_valid"]:
        score = tool_options["invalid_format_score"]
    if keys["retrieval_hit"]:
        score += tool_options["retrieval_score"]
    if keys["tool_calls"] > keys["invalid_tool_calls"]:
        score += tool_options["search_bonus"]
    shortfall = max(0, tool_options["min_searches"] - keys["searches"])
    score -= tool_options["invalid_call_penalty"] * keys["invalid_tool_calls"]
    score -= tool_options["missing_search_penalty"] * shortfall
    score -= tool_options["repeated_query_penalty"] * keys["repeated_queries"]
    score -= tool_options["extra_call_penalty"] * keys["extra_tool_calls"]
    score -= tool_options["forged_response_penalty"] * keys["forged_responses"]
    score += tool_options["tool_reward_weight"] * keys["tool_reward_sum"]
    return float(score)
