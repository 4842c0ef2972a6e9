"""Parse a multi-turn tool-agent trajectory, as verl's reward function receives it, in linear time.

verl's tool agent loop (``verl/experimental/agent_loop/tool_agent_loop.py`` in the verl
repository) hands the reward function the whole response decoded with
``skip_special_tokens=True``: the assistant's own text with Hermes/Qwen tool calls
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, the tool turns rendered by the chat
template (Qwen2.5 puts ``<tool_response>...</tool_response>`` blocks in a ``user`` turn), and,
once ``<|im_start|>``/``<|im_end|>`` are skipped, the role names left as bare lines
(``\\nuser\\n<tool_response>...``). Search-R1 agents (github.com/PeterGriffinJin/Search-R1) write
``<search>query</search>`` instead and get ``<information>...</information>`` back; both write the
final answer as ``<answer>...</answer>``.

:func:`parse_trajectory` reads all of that in one left-to-right pass over the tags and role lines
(one ``re.finditer``; each tag or role line costs constant work, and each JSON block is parsed
once with the stdlib :mod:`json`, as verl does), so time and memory are linear in the text length
whatever the input: unclosed openers, nested tags, JSON nested thousands deep.

The rules, in the order they apply:

* **Turns.** A line that is exactly a role name (``assistant``, or ``system``/``user``/``tool``)
  ends the current turn and starts one of that role; the text before the first role line is the
  first assistant turn (verl's response starts right after the ``assistant`` generation prompt).
  A model that writes such a line itself is read as a turn change: the decoded text cannot tell.
* **Environment blocks** (``<tool_response>``, ``<information>``) are read in every turn. Their
  content is opaque: tags and role lines inside are text, up to the first matching closer; one
  without a closer runs to the end of the text and is marked ``closed=False``. A block the model
  wrote in its own turn (a fabricated tool result) is kept, with ``role == "assistant"``.
* **Which blocks answer a call** (``ToolResponse.call``; the others the model wrote itself, and
  count as its text). A real tool result always follows a call, so the parser pairs them.
  Search-R1's loop cuts the model's text at ``</search>`` and appends ``<information>``: an
  ``<information>`` block answers the ``<search>`` that ends right before it (only whitespace
  between), and no other. verl's tool agent loop executes the ``<tool_call>`` blocks of a
  turn (those its ``HermesToolParser`` decodes, at most ``max_parallel_calls``) and appends one
  ``<tool_response>`` each, in a tool turn: so a round is the executed calls, then the
  ``<tool_response>`` blocks in non-assistant turns until the next call, paired one for one in
  order. A round with more responses than executed calls holds responses the model wrote (the
  decoded text cannot tell which), and none of its responses count; a ``<tool_response>`` in
  an assistant turn never does.
* **Calls** (``<tool_call>`` and ``<search>``) are read in assistant turns only (verl's parser
  sees only what the model generated). Like verl's ``HermesToolParser`` regex
  ``<tool_call>(.*?)</tool_call>``, an opener runs to the first matching closer, and every tag in
  between (``<tool_call>`` or ``</answer>`` inside a JSON string) is content. A call still open
  at a role line or at the end of the text is a call with ``error == "unclosed block"``. A
  ``<tool_call>`` opener ends a pending ``<search>`` (unclosed) so that the Hermes calls are read
  exactly as verl reads them; ``<search>`` inside a ``<tool_call>`` is JSON content.
* **Answers** (``<answer>...</answer>``) are read in assistant turns, outside calls. Calls inside
  an answer are calls (verl would have executed them) and carry ``in_answer=True``. An answer
  still open at a role line, an environment block or the end of the text is dropped.
* **The final answer** is the last closed answer that starts after the end of the last
  environment block; ``None`` if there is none. So no text inside a tool response, inside a
  call's arguments or in a non-assistant turn is ever the final answer, nor is an answer the
  model gave before its last tool result. ``answer_before_call`` flags a closed answer followed
  by a call block (valid or not) in the text.
* **Answer tags the model wrote** (``answer_tags``): the ``<answer>`` and ``</answer>`` tags
  outside calls and environment blocks, in any turn (a real tool turn holds nothing else than
  its responses), and those inside blocks that answer no call: the counts that the anti-spam
  rule of the QA rewards reads.
* **Formats** (``tool_format``): which calls the trainer's loop executes. ``"any"`` reads both
  ``<tool_call>`` and ``<search>``; ``"hermes"`` (verl's tool agent loop) only ``<tool_call>``,
  ``"search_r1"`` (Search-R1's loop) only ``<search>``, the other call tag being plain text.
  Both response tags are read under every format, so a block of the other format answers no
  call. Under ``"any"``, a model trained in verl's loop can write a ``<search>`` and an
  ``<information>`` itself, which then pair: name the format the trainer runs.
* Stray closers and text between blocks are ignored.

Tool-call JSON (verl's ``HermesToolParser``, adapted from vLLM's
``vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py``): the block content must be a JSON
object with a string ``name`` and an ``arguments`` key. verl also accepts ``arguments`` that are
not an object (a string, a list, ``null``); here those calls carry the error
``"arguments not an object"``: this is the one deliberate difference in which calls count as
valid.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from reward_plugins.cache import ROLE_PATTERNS, BoundedCache
from reward_plugins.errors import InvalidInput, InvalidOption
from reward_plugins.options import describe_value

CallKind = Literal["tool_call", "search"]
ResponseKind = Literal["tool_response", "information"]
ToolFormat = Literal["any", "hermes", "search_r1"]
Span = tuple[int, int]

ASSISTANT_ROLES: tuple[str, ...] = ("assistant",)
OTHER_ROLES: tuple[str, ...] = ("system", "user", "tool")

ERROR_UNCLOSED = "unclosed block"
ERROR_INVALID_JSON = "invalid JSON"
ERROR_TOO_DEEP = "JSON nested too deeply"
ERROR_NOT_OBJECT = "not a JSON object"
ERROR_MISSING_NAME = "missing name"
ERROR_NAME_TYPE = "name not a string"
ERROR_MISSING_ARGUMENTS = "missing arguments"
ERROR_ARGUMENTS_TYPE = "arguments not an object"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call block the model wrote: a ``<tool_call>`` (Hermes JSON) or a ``<search>``.

    ``name`` and ``arguments`` are what the JSON held (``arguments`` only when it is an object;
    a search is the tool ``search`` with ``{"query": <stripped content>}``); ``error`` is
    ``None`` for a valid call, else one of the ``ERROR_*`` reasons of this module. ``raw`` is the
    text between the tags (to the end of the turn for an unclosed block) and ``span`` the
    ``(start, end)`` of the whole block in the text, tags included. ``turn`` is the index of the
    turn it is in (0 for the first), ``in_answer`` whether it sits inside an ``<answer>``.
    """

    kind: CallKind
    name: str | None
    arguments: Mapping[str, Any] | None
    error: str | None
    raw: str
    span: Span
    turn: int
    in_answer: bool = False

    @property
    def valid(self) -> bool:
        """Whether the call parsed into a name and an arguments object."""
        return self.error is None


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """One environment block: ``<tool_response>`` or ``<information>``.

    ``text`` is its content unchanged (Qwen's template pads it with newlines); ``span`` covers the
    block with its tags; ``closed`` is ``False`` for a block that runs to the end of the text.
    ``role`` is the role of the turn it is in: ``"assistant"`` for Search-R1's injected
    documents, and for a result the model fabricated in its own turn under a chat template.
    ``call`` is the index (in :attr:`Trajectory.calls`) of the call it answers, by the pairing
    rule of the module docstring, or ``None`` for a block the model wrote itself.
    """

    kind: ResponseKind
    text: str
    span: Span
    turn: int
    role: str
    closed: bool = True
    call: int | None = None


Event = ToolCall | ToolResponse


@dataclass(frozen=True, slots=True)
class Trajectory:
    """What :func:`parse_trajectory` found, in text order.

    ``events`` holds the calls and environment blocks in the order they appear (their spans do
    not overlap). ``turn_roles`` is the role of every turn, the first being ``"assistant"``.
    ``answers`` are the content spans of every closed ``<answer>`` block; ``answer`` is the
    stripped content of the final answer (see the module rules) and ``answer_span`` its
    unstripped content span, both ``None`` when there is none. ``answer_before_call`` is set when
    a closed answer is followed by a call block. ``answer_tags`` counts the ``<answer>`` and the
    ``</answer>`` tags the model wrote (in assistant turns, outside calls and environment
    blocks).
    """

    events: tuple[Event, ...]
    turn_roles: tuple[str, ...]
    answers: tuple[Span, ...]
    answer: str | None
    answer_span: Span | None
    answer_before_call: bool
    answer_tags: tuple[int, int] = (0, 0)
    assistant_roles: tuple[str, ...] = field(default=ASSISTANT_ROLES, repr=False)

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """Every call block, valid or not, in text order."""
        return tuple(event for event in self.events if isinstance(event, ToolCall))

    @property
    def valid_calls(self) -> tuple[ToolCall, ...]:
        """The calls without an error."""
        return tuple(call for call in self.calls if call.error is None)

    @property
    def responses(self) -> tuple[ToolResponse, ...]:
        """Every environment block, in text order."""
        return tuple(event for event in self.events if isinstance(event, ToolResponse))

    @property
    def assistant_turns(self) -> int:
        """How many turns are assistant turns (the first always is)."""
        return sum(role in self.assistant_roles for role in self.turn_roles)

    @property
    def calls_in_answer(self) -> int:
        """How many call blocks sit inside an ``<answer>`` block."""
        return sum(call.in_answer for call in self.calls)

    @property
    def real_responses(self) -> tuple[ToolResponse, ...]:
        """The environment blocks that answer a call (the pairing rule of the module)."""
        return tuple(response for response in self.responses if response.call is not None)

    @property
    def forged_responses(self) -> int:
        """How many environment blocks answer no call: the model wrote them (or they share a
        round with ones it wrote; see the module rules)."""
        return sum(response.call is None for response in self.responses)


_ENV_TAGS: dict[str, ResponseKind] = {
    "tool_response": "tool_response",
    "information": "information",
}
_CALL_TAGS: dict[str, CallKind] = {"tool_call": "tool_call", "search": "search"}
FORMAT_TAGS: dict[str, tuple[str, ...]] = {
    "any": ("tool_call", "tool_response", "search", "information", "answer"),
    "hermes": ("tool_call", "tool_response", "information", "answer"),
    "search_r1": ("search", "tool_response", "information", "answer"),
}
"""The tags each ``tool_format`` reads: the calls its loop executes, and every response tag (a
block of the other format answers no call, so it is one the model wrote)."""
_patterns = BoundedCache[tuple[tuple[str, ...], str], re.Pattern[str]](ROLE_PATTERNS)


def _pattern(roles: tuple[str, ...], tool_format: str) -> re.Pattern[str]:
    """One pattern for every tag of ``tool_format`` (groups 1-2: slash, name) and every role
    line (group 3)."""
    pattern = _patterns.get((roles, tool_format))
    if pattern is None:
        names = "|".join(FORMAT_TAGS[tool_format])
        role_names = "|".join(re.escape(role) for role in sorted(roles, key=len, reverse=True))
        pattern = re.compile(f"<(/?)({names})>|^({role_names})$", re.MULTILINE)
        _patterns[(roles, tool_format)] = pattern
    return pattern


EXECUTED_CALL_ERRORS = (None, ERROR_ARGUMENTS_TYPE)
"""The errors of a ``<tool_call>`` that verl's ``HermesToolParser`` still executes (a JSON
object with a ``name`` and any ``arguments``); the others it drops, and no response follows."""


def pair_responses(events: list[Event], text: str, assistant_roles: tuple[str, ...]) -> list[Event]:
    """``events`` with each environment block's ``call`` set to the call it answers, or
    ``None`` (the pairing rules of the module docstring), in one pass.

    An ``<information>`` block answers the ``<search>`` that ends right before it (whitespace
    between). ``<tool_response>`` blocks answer by rounds: the ``<tool_call>`` blocks verl
    executes, then the responses in non-assistant turns up to the next call, one response per
    call in order; a round holding more responses than executed calls answers none.
    """
    paired: list[Event] = list(events)
    calls = 0  # calls seen so far
    round_calls: list[int] = []  # the executed calls of the round, by their index among calls
    round_responses: list[tuple[int, ToolResponse]] = []  # its responses in tool turns

    def close_round() -> None:
        if len(round_responses) <= len(round_calls):
            for (index, response), call in zip(round_responses, round_calls, strict=False):
                paired[index] = replace(response, call=call)
        round_calls.clear()
        round_responses.clear()

    for index, event in enumerate(events):
        if isinstance(event, ToolCall):
            if round_responses:
                close_round()
            if event.kind == "tool_call" and event.error in EXECUTED_CALL_ERRORS:
                round_calls.append(calls)
            calls += 1
        elif event.kind == "tool_response":
            if event.role not in assistant_roles:
                round_responses.append((index, event))
        elif index and _answers_search(events[index - 1], event, text):
            paired[index] = replace(event, call=calls - 1)
    close_round()
    return paired


def _answers_search(previous: Event, block: ToolResponse, text: str) -> bool:
    """Whether an ``<information>`` block answers the event before it: a closed ``<search>``
    with nothing but whitespace between them (Search-R1 cuts the model's text at
    ``</search>`` and appends the documents)."""
    return (
        isinstance(previous, ToolCall)
        and previous.kind == "search"
        and previous.error is None
        and (previous.span[1] == block.span[0] or text[previous.span[1] : block.span[0]].isspace())
    )


def parse_tool_call_json(raw: str) -> tuple[str | None, Mapping[str, Any] | None, str | None]:
    """``(name, arguments, error)`` of one ``<tool_call>`` block's content.

    A valid call is a JSON object with a string ``name`` and an object ``arguments``; otherwise
    ``error`` says why, and ``name`` is still given when it is a string. JSON nested deeper than
    the interpreter's recursion limit is an error, never a ``RecursionError``.

    Example:
        >>> parse_tool_call_json(' {"name": "search", "arguments": {"q": "x"}} ')
        ('search', {'q': 'x'}, None)
        >>> parse_tool_call_json('{"name": "search", "arguments": "x"}')
        ('search', None, 'arguments not an object')
        >>> parse_tool_call_json('{"name": "search", "arguments": {')
        (None, None, 'invalid JSON')
    """
    try:
        value = json.loads(raw)
    except RecursionError:
        return None, None, ERROR_TOO_DEEP
    except ValueError:
        return None, None, ERROR_INVALID_JSON
    if not isinstance(value, dict):
        return None, None, ERROR_NOT_OBJECT
    if "name" not in value:
        return None, None, ERROR_MISSING_NAME
    name = value["name"]
    if not isinstance(name, str):
        return None, None, ERROR_NAME_TYPE
    if "arguments" not in value:
        return name, None, ERROR_MISSING_ARGUMENTS
    arguments = value["arguments"]
    if not isinstance(arguments, dict):
        return name, None, ERROR_ARGUMENTS_TYPE
    return name, arguments, None


class _Parser:
    """The state of one left-to-right pass; see the module rules."""

    def __init__(self, text: str, assistant_roles: tuple[str, ...]) -> None:
        self.text = text
        self.assistant_roles = assistant_roles
        self.events: list[Event] = []
        self.turn_roles: list[str] = [assistant_roles[0]]
        self.in_assistant = True
        self.answers: list[Span] = []
        self.env: tuple[ResponseKind, int, int] | None = None  # kind, block start, content start
        self.call: tuple[CallKind, int, int] | None = None
        self.answer_open: int | None = None  # content start of a pending <answer>
        self.last_env_end = -1
        self.answer_before_call = False
        self.answer_openers = 0
        self.answer_closers = 0

    def run(self, pattern: re.Pattern[str]) -> Trajectory:
        for match in pattern.finditer(self.text):
            role = match.group(3)
            if role is not None:
                self._role_line(role, match.start())
            else:
                self._tag(match.group(2), bool(match.group(1)), match.start(), match.end())
        end = len(self.text)
        if self.env is not None:
            self._close_env(end, end, closed=False)
        self._end_turn(end)
        return self._result()

    def _role_line(self, role: str, start: int) -> None:
        if self.env is not None:
            return
        self._end_turn(start)
        self.turn_roles.append(role)
        self.in_assistant = role in self.assistant_roles

    def _end_turn(self, boundary: int) -> None:
        if self.call is not None:
            self._close_call(boundary, boundary, closed=False)
        self.answer_open = None

    def _tag(self, name: str, closing: bool, start: int, end: int) -> None:
        if self.env is not None:
            if closing and name == self.env[0]:
                self._close_env(start, end, closed=True)
        elif self.call is not None:
            self._tag_in_call(name, closing, start, end)
        elif closing:
            self._closer(name, start)
        else:
            self._opener(name, start, end)

    def _tag_in_call(self, name: str, closing: bool, start: int, end: int) -> None:
        """A tag inside an open call: its closer closes it; a ``<tool_call>`` opener inside a
        ``<search>`` closes the search, unclosed, and opens a call."""
        assert self.call is not None
        kind = self.call[0]
        if closing and name == kind:
            self._close_call(start, end, closed=True)
        elif kind == "search" and name == "tool_call" and not closing:
            self._close_call(start, start, closed=False)
            self._open_call("tool_call", start, end)

    def _closer(self, name: str, start: int) -> None:
        """A closer outside calls and responses: ``</answer>`` is counted in any turn (the
        model wrote it) and closes an assistant's answer."""
        if name == "answer":
            self.answer_closers += 1
            if self.answer_open is not None:
                self.answers.append((self.answer_open, start))
                self.answer_open = None

    def _opener(self, name: str, start: int, end: int) -> None:
        """An opener outside calls and responses: a response, an answer tag (counted in any
        turn, opening an answer in an assistant turn), or an assistant's call."""
        if name in _ENV_TAGS:
            self.answer_open = None
            self.env = (_ENV_TAGS[name], start, end)
        elif name == "answer":
            self.answer_openers += 1
            if self.in_assistant and self.answer_open is None:
                self.answer_open = end
        elif self.in_assistant:
            self._open_call(_CALL_TAGS[name], start, end)

    def _open_call(self, kind: CallKind, start: int, end: int) -> None:
        if self.answers and not self.answer_before_call:
            self.answer_before_call = True
        self.call = (kind, start, end)

    def _close_call(self, content_end: int, block_end: int, *, closed: bool) -> None:
        assert self.call is not None
        kind, start, content_start = self.call
        self.call = None
        raw = self.text[content_start:content_end]
        name: str | None
        arguments: Mapping[str, Any] | None
        if not closed:
            name, arguments, error = None, None, ERROR_UNCLOSED
        elif kind == "search":
            name, arguments, error = "search", {"query": raw.strip()}, None
        else:
            name, arguments, error = parse_tool_call_json(raw)
        turn = len(self.turn_roles) - 1
        in_answer = self.answer_open is not None
        self.events.append(
            ToolCall(kind, name, arguments, error, raw, (start, block_end), turn, in_answer)
        )

    def _close_env(self, content_end: int, block_end: int, *, closed: bool) -> None:
        assert self.env is not None
        kind, start, content_start = self.env
        self.env = None
        text = self.text[content_start:content_end]
        turn = len(self.turn_roles) - 1
        role = self.turn_roles[-1]
        self.events.append(ToolResponse(kind, text, (start, block_end), turn, role, closed))
        self.last_env_end = block_end

    def _result(self) -> Trajectory:
        final = None
        if self.answers and self.answers[-1][0] >= self.last_env_end:
            final = self.answers[-1]
        events = pair_responses(self.events, self.text, self.assistant_roles)
        openers, closers = self.answer_openers, self.answer_closers
        for event in events:  # a block the model wrote is its text: its answer tags count
            if isinstance(event, ToolResponse) and event.call is None:
                openers += event.text.count("<answer>")
                closers += event.text.count("</answer>")
        return Trajectory(
            events=tuple(events),
            turn_roles=tuple(self.turn_roles),
            answers=tuple(self.answers),
            answer=None if final is None else self.text[final[0] : final[1]].strip(),
            answer_span=final,
            answer_before_call=self.answer_before_call,
            answer_tags=(openers, closers),
            assistant_roles=self.assistant_roles,
        )


def _check_roles(value: object, option: str) -> tuple[str, ...]:
    if (
        not isinstance(value, tuple)
        or not value
        or not all(isinstance(role, str) and role and role.isprintable() for role in value)
    ):
        raise InvalidOption(
            f"parse_trajectory: option {option!r} must be a non-empty tuple of non-empty "
            f"one-line strings, got {type(value).__name__}: {value!r}"
        )
    return value


def parse_trajectory(
    text: str,
    *,
    assistant_roles: tuple[str, ...] = ASSISTANT_ROLES,
    other_roles: tuple[str, ...] = OTHER_ROLES,
    tool_format: ToolFormat = "any",
) -> Trajectory:
    """Read the calls, tool responses, turns and final answer of a decoded trajectory.

    ``assistant_roles`` and ``other_roles`` are the role names that, alone on a line, start a
    turn (the defaults fit ChatML/Qwen templates); ``tool_format`` names the calls the
    trainer's loop executes (:data:`FORMAT_TAGS`: ``"hermes"`` for verl's tool agent loop,
    ``"search_r1"`` for Search-R1's own loop, ``"any"`` for both); the rules are in the module
    docstring. Time and memory are linear in ``len(text)``.

    Raises:
        InvalidInput: ``text`` is not a ``str``.
        InvalidOption: a role option is not a non-empty tuple of strings, or the two share a
            role; an unknown ``tool_format``.

    Example:
        >>> t = parse_trajectory(
        ...     'Let me look.\\n<tool_call>\\n{"name": "search", "arguments": {"q": "Paris"}}\\n'
        ...     '</tool_call>\\nuser\\n<tool_response>\\nParis is in France.\\n</tool_response>\\n'
        ...     'assistant\\n<answer>France</answer>'
        ... )
        >>> [(c.name, c.arguments) for c in t.calls], t.responses[0].text.strip()
        ([('search', {'q': 'Paris'})], 'Paris is in France.')
        >>> t.turn_roles, t.assistant_turns, t.answer
        (('assistant', 'user', 'assistant'), 2, 'France')
        >>> parse_trajectory('<tool_call>{"name": "f"').calls[0].error
        'unclosed block'
    """
    if not isinstance(text, str):
        raise InvalidInput(f"parse_trajectory: text must be a str, got {type(text).__name__}")
    assistant = _check_roles(assistant_roles, "assistant_roles")
    others = _check_roles(other_roles, "other_roles")
    shared = sorted(set(assistant) & set(others))
    if shared:
        raise InvalidOption(
            f"parse_trajectory: roles {shared!r} are in both assistant_roles and other_roles"
        )
    if tool_format not in FORMAT_TAGS:
        raise InvalidOption(
            f"parse_trajectory: option 'tool_format' must be one of "
            f"{', '.join(map(repr, FORMAT_TAGS))}, got {describe_value(tool_format)}"
        )
    return _Parser(text, assistant).run(_pattern(assistant + others, tool_format))
