"""``parse_trajectory`` on tool-agent trajectories rendered, tokenized and decoded as verl does.

Three oracles:

* a generator's own record of what it wrote, on 10,000 seeded trajectories: Hermes/Qwen
  conversations rendered by a real ``transformers`` chat template (written below in the shape of
  Qwen2.5's: calls as ``<tool_call>\\n{json}\\n</tool_call>`` in the assistant turn, tool results
  as ``<tool_response>`` blocks inside a ``user`` turn), tokenized by a byte-level tokenizer built
  here in which ``<|im_start|>``/``<|im_end|>`` are special and the tool tags are added but not
  special (as in Qwen2.5's ``tokenizer_config.json``), and decoded with
  ``skip_special_tokens=True``; and Search-R1 trajectories (``<search>``/``<information>``);
* verl's own ``HermesToolParser`` (``verl/experimental/agent_loop/tool_parser.py``, verl 0.9.1)
  on every generated assistant turn: its calls equal ours, apart from the one documented
  difference (arguments that are not a JSON object);
* the reference regex ``<tool_call>(.*?)</tool_call>`` on generated tag soup.

Plus hand-worked cases for every rule, and a doubling test for linear time on adversarial input.
"""

from __future__ import annotations

import asyncio
import doctest
import importlib.util
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from timing import best_time
from verl_helpers import build_tokenizer

import reward_plugins.tool_trajectory as tool_trajectory
from reward_plugins.errors import InvalidInput, InvalidOption
from reward_plugins.tool_trajectory import (
    ERROR_ARGUMENTS_TYPE,
    ERROR_INVALID_JSON,
    ERROR_MISSING_ARGUMENTS,
    ERROR_MISSING_NAME,
    ERROR_NAME_TYPE,
    ERROR_NOT_OBJECT,
    ERROR_TOO_DEEP,
    ERROR_UNCLOSED,
    ToolCall,
    ToolResponse,
    Trajectory,
    parse_trajectory,
)

# --- the chat template ---------------------------------------------------------------------------
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message.role == 'system' or message.role == 'user' %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for call in message.tool_calls | default([]) %}"
    "{%- set function = call.function %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' + function.name + \'", "arguments": \' }}'
    "{{- function.arguments | tojson }}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}"
    "{{- '<|im_start|>user' }}"
    "{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""Written from the format of Qwen2.5's template (the Hugging Face ``Qwen/Qwen2.5-*-Instruct``
``tokenizer_config.json``): ChatML turns, Hermes calls after the assistant text, consecutive tool
messages grouped in one ``user`` turn of ``<tool_response>`` blocks."""

SPECIAL_TOKENS = ["<|im_start|>", "<|im_end|>"]
PLAIN_ADDED_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
"""In Qwen2.5 the tool tags are added tokens with ``special: false``: they survive
``skip_special_tokens=True``, while ``<|im_start|>`` and ``<|im_end|>`` are dropped."""


@pytest.fixture(scope="module")
def chat_tokenizer() -> Any:
    from tokenizers import AddedToken

    tok = build_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS})
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in PLAIN_ADDED_TOKENS])
    return tok


def _hermes_parser_class() -> Any:
    """verl's ``HermesToolParser``, loaded from its file (importing the ``agent_loop`` package
    would pull in the rollout servers and their dependencies)."""
    import verl

    path = Path(verl.__path__[0]) / "experimental" / "agent_loop" / "tool_parser.py"
    spec = importlib.util.spec_from_file_location("verl_tool_parser_for_tests", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.HermesToolParser


# --- the generator -----------------------------------------------------------------------------
ROLE_LINE = re.compile(r"^(?:assistant|user|system|tool)$", re.MULTILINE)
WORDS = [
    "Paris", "the", "capital", "naïve", "日本語", "😀", "user", "assistant", "a < b", "x>y", "tool",
    "<tool_call", "tool_call>", "{", "}", "\"", "\\", "Ω", "\u200b", "<think>", "</think>", "",
]  # fmt: skip
TAG_STRINGS = [
    "<tool_call>", "<answer>", "</answer>", "<search>", "</search>", "<tool_response>",
    "</tool_response>", "<information>", "\nuser\n", "[[{",
]  # fmt: skip
RESULT_TAGS = [tag for tag in TAG_STRINGS if tag != "</tool_response>"]
NAMES = ["search", "get_weather", "wiki.lookup", "天气", "calc", ""]


@dataclass
class Record:
    """What the generator wrote, in text order."""

    items: list[tuple[str, Any]] = field(default_factory=list)
    roles: list[str] = field(default_factory=lambda: ["assistant"])
    segments: list[str] = field(default_factory=list)
    """Each assistant turn as the model generated it, ``<|im_end|>`` included (Hermes input)."""


def _text(rng: random.Random, max_words: int = 8) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(0, max_words))]
    return "".join(word + rng.choice([" ", " ", "\n", ""]) for word in words)


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 2 else 5)
    if kind == 0:
        return rng.choice(TAG_STRINGS) + _text(rng, 3)
    if kind == 1:
        return _text(rng, 3)
    if kind == 2:
        return rng.randint(-(10**12), 10**12)
    if kind == 3:
        return rng.choice([True, False, None, 0.5, -1e-7])
    if kind == 4:
        return ""
    if kind == 5:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return _arguments(rng, depth + 1)


def _arguments(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    keys = ["query", "city", "q", "n", "ключ", "<answer>"]
    return {rng.choice(keys): _value(rng, depth) for _ in range(rng.randint(0, 3))}


def _dumps(rng: random.Random, value: Any) -> str:
    return json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 2]))


def _call_piece(rng: random.Random, record: Record, in_answer: bool) -> str:
    """One closed ``<tool_call>`` block, valid or malformed; its expectation goes in ``record``."""
    name = rng.choice(NAMES)
    arguments = _arguments(rng)
    kind = rng.randrange(12)
    expected: tuple[str | None, Any, str | None]
    if kind <= 3:
        payload = {"name": name, "arguments": arguments}
        if rng.random() < 0.3:
            payload = {"id": "call_1", "arguments": arguments, "name": name}
        body, expected = _dumps(rng, payload), (name, arguments, None)
    elif kind == 4:
        body, expected = _dumps(rng, {"name": name, "arguments": {}}), (name, {}, None)
    elif kind == 5:
        body = _dumps(rng, {"name": name, "arguments": arguments})[: -rng.randint(1, 3)]
        expected = (None, None, ERROR_INVALID_JSON)
    elif kind == 6:
        body, expected = _dumps(rng, {"arguments": arguments}), (None, None, ERROR_MISSING_NAME)
    elif kind == 7:
        body = _dumps(rng, {"name": rng.choice([3, None, ["a"]]), "arguments": arguments})
        expected = (None, None, ERROR_NAME_TYPE)
    elif kind == 8:
        value = rng.choice(["query text", [1, 2], None, 7])
        body, expected = (
            _dumps(rng, {"name": name, "arguments": value}),
            (name, None, ERROR_ARGUMENTS_TYPE),
        )
    elif kind == 9:
        body, expected = _dumps(rng, {"name": name}), (name, None, ERROR_MISSING_ARGUMENTS)
    elif kind == 10:
        body, expected = _dumps(rng, [name, arguments]), (None, None, ERROR_NOT_OBJECT)
    else:  # the closer inside a JSON string ends the block early, as the lazy regex does
        prefix = f'{{"name": "{name}", "arguments": {{"q": "'
        record.items.append(
            ("call", ("tool_call", None, None, ERROR_INVALID_JSON, prefix, in_answer))
        )
        return f'<tool_call>{prefix}</tool_call>"}}}}</tool_call>'
    raw = rng.choice(["\n", "", " "]) + body + rng.choice(["\n", "", "  "])
    record.items.append(("call", ("tool_call", *expected, raw, in_answer)))
    return f"<tool_call>{raw}</tool_call>"


def _assistant_content(rng: random.Random, record: Record, last: bool, may_leave_open: bool) -> str:
    """The free text of one assistant turn: prose, calls, searches, answers, maybe a fake result;
    ``may_leave_open``: an unclosed call or answer may end it (nothing follows it in the turn)."""
    parts: list[str] = []
    for _ in range(rng.randint(0, 4)):
        kind = rng.randrange(10)
        parts.append(_text(rng))
        if kind <= 4:
            parts.append(_call_piece(rng, record, in_answer=False))
        elif kind == 5:
            query = _text(rng, 3)
            record.items.append(
                ("call", ("search", "search", {"query": query.strip()}, None, query, False))
            )
            parts.append(f"<search>{query}</search>")
        elif kind <= 7 and (last or rng.random() < 0.3):
            before, after = _text(rng, 3), _text(rng, 3)
            inner = ""
            if rng.random() < 0.3:  # a call inside the answer: verl would run it
                inner = _call_piece(rng, record, in_answer=True)
            record.items.append(("answer", (before + inner + after).strip()))
            parts.append(f"<answer>{before}{inner}{after}</answer>")
        elif kind == 8 and rng.random() < 0.3:  # a tool result the model made up
            fake = _text(rng, 4)
            record.items.append(("env", ("tool_response", fake, "assistant")))
            parts.append(f"<tool_response>{fake}</tool_response>")
    if may_leave_open and rng.random() < 0.25:
        rest = _text(rng, 3)
        if rng.random() < 0.6:
            rest = '{"name": "' + rng.choice(NAMES) + '", "arguments": {' + rest
            record.items.append(("open_call", rest))
            parts.append("<tool_call>" + rest)
        else:
            parts.append("<answer>" + rest)  # an answer never closed is no answer
    return "".join(parts)


def _conversation(rng: random.Random) -> tuple[list[dict[str, Any]], Record]:
    record = Record()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Question: " + _text(rng)},
    ]
    rounds = rng.randint(0, 4)
    for index in range(rounds + 1):
        last = index == rounds
        while True:  # the model writes no line that is only a role name
            trial = Record(list(record.items))
            calls = [] if rng.random() < 0.3 else [
                (rng.choice(NAMES[:-1]), _arguments(rng)) for _ in range(rng.randint(1, 3))
            ]  # fmt: skip
            content = _assistant_content(rng, trial, last, may_leave_open=not calls)
            if not content and not calls:  # the template would drop the newline after the role
                content = "Done."
            if not ROLE_LINE.search(content):
                break
        record.items = trial.items
        for name, arguments in calls:
            raw = (
                '\n{"name": "'
                + name
                + '", "arguments": '
                + json.dumps(arguments, ensure_ascii=False)
                + "}\n"
            )
            record.items.append(("call", ("tool_call", name, arguments, None, raw, False)))
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [
                {"type": "function", "function": {"name": name, "arguments": arguments}}
                for name, arguments in calls
            ]
        messages.append(message)
        rendered_calls = "".join(
            '\n<tool_call>\n{"name": "' + name + '", "arguments": '
            + json.dumps(arguments, ensure_ascii=False) + "}\n</tool_call>"
            for name, arguments in calls
        )  # fmt: skip
        record.segments.append(content + rendered_calls + "<|im_end|>")
        if record.items and record.items[-1][0] == "open_call" and not last:
            record.items[-1] = ("open_call", record.items[-1][1] + "\n")
        if last:
            break
        record.roles += ["user", "assistant"]
        for _ in range(rng.randint(1, 3)):
            tag = rng.choice(["", *RESULT_TAGS, "\nassistant\n"])
            result = _text(rng, 6) + tag + _text(rng, 3)
            record.items.append(("env", ("tool_response", "\n" + result + "\n", "user")))
            messages.append({"role": "tool", "content": result})
    return messages, record


def _search_r1(rng: random.Random) -> tuple[str, Record]:
    """A Search-R1 trajectory: think, search, information rounds, then an answer (or not)."""
    record = Record()
    parts = [f"<think>{_text(rng)}</think>"]
    for _ in range(rng.randint(0, 3)):
        query = _text(rng, 4)
        record.items.append(
            ("call", ("search", "search", {"query": query.strip()}, None, query, False))
        )
        docs = _text(rng, 10) + rng.choice(["", *TAG_STRINGS]) + _text(rng, 3)
        record.items.append(("env", ("information", docs, "assistant")))
        parts.append(f"<search>{query}</search>\n\n<information>{docs}</information>\n\n")
        parts.append(f"<think>{_text(rng)}</think>")
    ending = rng.randrange(4)
    if ending <= 1:
        answer = _text(rng, 3)
        record.items.append(("answer", answer.strip()))
        parts.append(f"<answer>{answer}</answer>")
    elif ending == 2:
        rest = _text(rng, 3)
        record.items.append(("open_call", rest))
        parts.append("<search>" + rest)
    return "".join(parts), record


# --- checking a parse against the record ---------------------------------------------------------
def _expected(record: Record) -> dict[str, Any]:
    calls, responses, answer, answer_before_call, answers = [], [], None, False, 0
    for kind, value in record.items:
        if kind in ("call", "open_call"):
            if answers:
                answer_before_call = True
            if kind == "open_call":
                value = (None, None, None, ERROR_UNCLOSED, value, False)
            calls.append(value)
        elif kind == "env":
            responses.append(value)
            answer = None
        else:
            answers += 1
            answer = value
    return {
        "calls": calls,
        "responses": responses,
        "answer": answer,
        "answer_before_call": answer_before_call,
        "answers": answers,
        "roles": tuple(record.roles),
    }


def _observed(trajectory: Trajectory) -> dict[str, Any]:
    calls = []
    for call in trajectory.calls:
        kind = None if call.error == ERROR_UNCLOSED else call.kind
        calls.append((kind, call.name, call.arguments, call.error, call.raw, call.in_answer))
    return {
        "calls": calls,
        "responses": [(r.kind, r.text, r.role) for r in trajectory.responses],
        "answer": trajectory.answer,
        "answer_before_call": trajectory.answer_before_call,
        "answers": len(trajectory.answers),
        "roles": trajectory.turn_roles,
    }


def _check_invariants(text: str, trajectory: Trajectory) -> None:
    position = 0
    for event in trajectory.events:
        start, end = event.span
        assert position <= start <= end <= len(text)
        position = end
        if isinstance(event, ToolCall) and event.error != ERROR_UNCLOSED:
            assert text[start:end] == f"<{event.kind}>{event.raw}</{event.kind}>"
        if isinstance(event, ToolResponse) and event.closed:
            assert text[start:end] == f"<{event.kind}>{event.text}</{event.kind}>"
    if trajectory.answer_span is not None:
        start, end = trajectory.answer_span
        assert text[start:end].strip() == trajectory.answer
        assert text[start - len("<answer>") : start] == "<answer>"
    assert trajectory.assistant_turns == trajectory.turn_roles.count("assistant")


def _decode_response(tokenizer: Any, messages: list[dict[str, Any]]) -> tuple[str, str]:
    """``(solution_str as verl decodes it, the rendered response with special tokens)``."""
    prompt = tokenizer.apply_chat_template(
        messages[:2], chat_template=CHAT_TEMPLATE, tokenize=False, add_generation_prompt=True
    )
    full = tokenizer.apply_chat_template(messages, chat_template=CHAT_TEMPLATE, tokenize=False)
    assert full.startswith(prompt)
    response = full[len(prompt) :]
    assert response.endswith("<|im_end|>\n")
    response = response[:-1]  # verl's response ends with the end-of-turn token
    ids = tokenizer.encode(response, add_special_tokens=False)
    return tokenizer.decode(ids, skip_special_tokens=True), response


TEMPLATED = 6_000
SEARCH_R1 = 4_000


@pytest.mark.slow  # a sweep of 10,000 generated trajectories through the tokenizer and verl
def test_generated_trajectories_match_the_record_and_verl_hermes_parser(
    chat_tokenizer: Any,
) -> None:
    """6,000 templated conversations and 4,000 Search-R1 trajectories: every call, argument,
    result, turn and answer is what the generator wrote; verl's parser finds the same calls."""
    tokenizer = chat_tokenizer
    hermes = _hermes_parser_class()(tokenizer)
    rng = random.Random(20260101)
    hermes_checks: list[tuple[list[int], list[tuple[str, str]]]] = []
    counts = {"calls": 0, "errors": 0, "unclosed": 0, "in_answer": 0, "answers": 0, "fake": 0}
    for _ in range(TEMPLATED):
        messages, record = _conversation(rng)
        solution, response = _decode_response(tokenizer, messages)
        assert solution == response.replace("<|im_start|>", "").replace("<|im_end|>", "")
        trajectory = parse_trajectory(solution)
        _check_invariants(solution, trajectory)
        assert _observed(trajectory) == _expected(record)
        assert trajectory.assistant_turns == len(record.segments)
        assistant_turns = [i for i, role in enumerate(trajectory.turn_roles) if role == "assistant"]
        for turn, segment in zip(assistant_turns, record.segments, strict=True):
            ours = [_hermes_view(call) for call in trajectory.calls if call.turn == turn]
            hermes_checks.append((tokenizer.encode(segment), [c for c in ours if c is not None]))
        counts["calls"] += len(trajectory.calls)
        counts["errors"] += sum(not call.valid for call in trajectory.calls)
        counts["unclosed"] += sum(call.error == ERROR_UNCLOSED for call in trajectory.calls)
        counts["in_answer"] += trajectory.calls_in_answer
        counts["answers"] += trajectory.answer is not None
        counts["fake"] += sum(r.role == "assistant" for r in trajectory.responses)
    for _ in range(SEARCH_R1):
        text, record = _search_r1(rng)
        while ROLE_LINE.search(text):  # no turn changes in a Search-R1 trajectory
            text, record = _search_r1(rng)
        solution = tokenizer.decode(tokenizer.encode(text), skip_special_tokens=True)
        assert solution == text
        trajectory = parse_trajectory(solution)
        _check_invariants(solution, trajectory)
        assert _observed(trajectory) == _expected(record)
    assert all(count > 100 for count in counts.values()), counts  # every case was generated
    _compare_with_hermes(hermes, hermes_checks)


def _hermes_view(call: ToolCall) -> tuple[str, str] | None:
    """The call as verl's parser reports it (name, arguments re-serialized), or ``None`` if it
    rejects it. The one deliberate difference: verl accepts arguments that are not an object."""
    if call.kind != "tool_call":
        return None
    if call.error == ERROR_ARGUMENTS_TYPE:
        arguments = json.loads(call.raw)["arguments"]
        return call.name or "", json.dumps(arguments, ensure_ascii=False)
    if call.error is not None:
        return None
    return call.name or "", json.dumps(call.arguments, ensure_ascii=False)


def _compare_with_hermes(
    hermes: Any, checks: list[tuple[list[int], list[tuple[str, str]]]]
) -> None:
    async def run_all() -> list[list[tuple[str, str]]]:
        found = []
        for ids, _ in checks:
            _, calls = await hermes.extract_tool_calls(ids)
            found.append([(call.name, call.arguments) for call in calls])
        return found

    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        found = loop.run_until_complete(run_all())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    assert len(found) == len(checks) > 10_000
    assert sum(map(len, found)) > 10_000
    for (_, ours), theirs in zip(checks, found, strict=True):
        assert ours == theirs


def test_hermes_parser_hand_cases(chat_tokenizer: Any) -> None:
    """verl's parser and ours on hand-made turns: deep JSON is rejected by both, and the one
    deliberate difference, arguments that are not an object, is accepted by verl only."""
    hermes = _hermes_parser_class()(chat_tokenizer)
    cases = {
        CALL + "<|im_end|>": [("f", '{"x": 1}')],
        "<tool_call>" + "[" * 5_000 + "</tool_call>" + CALL: [("f", '{"x": 1}')],
        '<tool_call>{"name": "f", "arguments": "s"}</tool_call>': [("f", '"s"')],
        '<tool_call>{"name": "f", "arguments": null}</tool_call>': [("f", "null")],
        '<tool_call>{"name": "f"}</tool_call><tool_call>{"name": "g"': [],
    }
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        for text, expected in cases.items():
            ids = chat_tokenizer.encode(text)
            _, calls = loop.run_until_complete(hermes.extract_tool_calls(ids))
            assert [(call.name, call.arguments) for call in calls] == expected
            ours = [_hermes_view(call) for call in parse_trajectory(text).calls]
            assert [view for view in ours if view is not None] == expected
            strict = parse_trajectory(text).valid_calls
            assert len(strict) == sum(args.startswith("{") for _, args in expected)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


# --- the reference regex on tag soup -------------------------------------------------------------
SOUP = ["<tool_call>", "</tool_call>", "<answer>", "</answer>", "{", "}", '"', "a", " ", "\n", "é"]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(SOUP) | st.text(max_size=3), max_size=40).map("".join))
def test_tool_calls_are_the_lazy_regex_matches(text: str) -> None:
    """Without role lines or environment tags, the closed calls are exactly the reference regex's
    matches, and an opener left pending is one unclosed call."""
    text = ROLE_LINE.sub("", text)
    trajectory = parse_trajectory(text)
    _check_invariants(text, trajectory)
    closed = [call.raw for call in trajectory.calls if call.error != ERROR_UNCLOSED]
    matches = re.findall(r"<tool_call>(.*?)</tool_call>", text, re.DOTALL)
    assert closed == matches
    last_close = text.rfind("</tool_call>")
    pending = "<tool_call>" in text[last_close + 1 if last_close >= 0 else 0 :]
    assert [call.error for call in trajectory.calls].count(ERROR_UNCLOSED) == int(pending)


# --- hand-worked cases ---------------------------------------------------------------------------
def _calls(text: str) -> list[tuple[str | None, Any, str | None, bool]]:
    return [(c.name, c.arguments, c.error, c.in_answer) for c in parse_trajectory(text).calls]


CALL = '<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        (CALL, [("f", {"x": 1}, None, False)]),
        ('<tool_call>{"name": "f", "arguments": {}}</tool_call>', [("f", {}, None, False)]),
        ('<tool_call>{"name": "f", "arguments": {"q": "<tool_call>"}}</tool_call>',
         [("f", {"q": "<tool_call>"}, None, False)]),
        ('<tool_call><tool_call>{"name": "f", "arguments": {}}</tool_call>',
         [(None, None, ERROR_INVALID_JSON, False)]),
        ('<tool_call>{"name": "f"}', [(None, None, ERROR_UNCLOSED, False)]),
        (f'{CALL}<tool_call>{{"name": "f"}}',
         [("f", {"x": 1}, None, False), (None, None, ERROR_UNCLOSED, False)]),
        ("<tool_call>[1]</tool_call>", [(None, None, ERROR_NOT_OBJECT, False)]),
        ('<tool_call>{"arguments": {}}</tool_call>', [(None, None, ERROR_MISSING_NAME, False)]),
        ('<tool_call>{"name": 1, "arguments": {}}</tool_call>',
         [(None, None, ERROR_NAME_TYPE, False)]),
        ('<tool_call>{"name": "f"}</tool_call>', [("f", None, ERROR_MISSING_ARGUMENTS, False)]),
        ('<tool_call>{"name": "f", "arguments": "{}"}</tool_call>',
         [("f", None, ERROR_ARGUMENTS_TYPE, False)]),
        ("<tool_call>" + "[" * 100_000 + "</tool_call>", [(None, None, ERROR_TOO_DEEP, False)]),
        ("<tool_call>" + '{"a": ' * 50_000 + "</tool_call>", [(None, None, ERROR_TOO_DEEP, False)]),
        ('<tool_call>{"a": ' * 50_000 + "</tool_call>", [(None, None, ERROR_INVALID_JSON, False)]),
        ("</tool_call>" + CALL + "</tool_call>", [("f", {"x": 1}, None, False)]),
        (f"<answer>x {CALL} y</answer>", [("f", {"x": 1}, None, True)]),
        ("<search> capital of France </search>",
         [("search", {"query": "capital of France"}, None, False)]),
        ("<search>q" + CALL, [(None, None, ERROR_UNCLOSED, False), ("f", {"x": 1}, None, False)]),
        ('<tool_call>{"name": "f", "arguments": {"q": "<search>x</search>"}}</tool_call>',
         [("f", {"q": "<search>x</search>"}, None, False)]),
        (f"{CALL}\nuser\n{CALL}\nassistant\n{CALL}",
         [("f", {"x": 1}, None, False), ("f", {"x": 1}, None, False)]),  # none read in a user turn
        (f"<tool_response>{CALL}</tool_response>", []),  # results are opaque
        ('<tool_call>{"name": "f",\nuser\n"arguments": {}}</tool_call>' + CALL,
         [(None, None, ERROR_UNCLOSED, False)]),  # the role line ends the turn and the call
    ],
)  # fmt: skip
def test_call_cases(text: str, expected: list[tuple[str | None, Any, str | None, bool]]) -> None:
    assert _calls(text) == expected


def test_unclosed_call_spans_to_the_role_line() -> None:
    text = '<tool_call>{"name": "f"\nuser\n<tool_response>r</tool_response>'
    trajectory = parse_trajectory(text)
    (call, response) = trajectory.events
    assert isinstance(call, ToolCall) and call.span == (0, text.index("\nuser") + 1)
    assert call.raw == '{"name": "f"\n' and call.turn == 0
    assert isinstance(response, ToolResponse) and response.text == "r" and response.role == "user"
    assert response.turn == 1 and response.closed


@pytest.mark.parametrize(
    ("text", "answer", "before_call", "answers"),
    [
        ("<answer> Paris </answer>", "Paris", False, 1),
        ("<answer>a</answer><answer>b</answer>", "b", False, 2),
        ("<answer>a<answer>b</answer>", "a<answer>b", False, 1),  # as the lazy regex
        (f"<answer>a</answer>{CALL}", "a", True, 1),
        ("<answer>a</answer><tool_response>r</tool_response>", None, False, 1),
        ("<tool_response>r</tool_response><answer>a</answer>", "a", False, 1),
        (f"<answer>a</answer>{CALL}\nuser\n<tool_response>r</tool_response>\nassistant\n"
         "<answer>b</answer>", "b", True, 2),
        ("<answer>a\nuser\n</answer>", None, False, 0),  # a turn change drops the open answer
        ("<answer>a<tool_response>r</tool_response></answer>", None, False, 0),
        ('<tool_call>{"q": "<answer>x</answer>"}</tool_call>', None, False, 0),
        ("x\nuser\n<answer>a</answer>", None, False, 0),  # not the model's words
        ("<answer>a", None, False, 0),
        ("<information>a <answer>b</answer>", None, False, 0),
    ],
)  # fmt: skip
def test_answer_cases(text: str, answer: str | None, before_call: bool, answers: int) -> None:
    trajectory = parse_trajectory(text)
    _check_invariants(text, trajectory)
    assert trajectory.answer == answer
    assert trajectory.answer_before_call is before_call
    assert len(trajectory.answers) == answers


def test_turns_and_results() -> None:
    text = (
        "think\nassistant \n<tool_response>a\nassistant\n</tool_response>\ntool\n"
        "<information>b</information>\nsystem\nx\nassistant\n<tool_response>c"
    )
    trajectory = parse_trajectory(text)
    assert trajectory.turn_roles == ("assistant", "tool", "system", "assistant")
    assert trajectory.assistant_turns == 2
    results = [(r.kind, r.text, r.role, r.turn, r.closed) for r in trajectory.responses]
    assert results == [
        ("tool_response", "a\nassistant\n", "assistant", 0, True),  # the model made it up
        ("information", "b", "tool", 1, True),
        ("tool_response", "c", "assistant", 3, False),
    ]


def test_custom_roles() -> None:
    text = f"{CALL}\nHuman\n{CALL}\nGPT\n{CALL}\nassistant\n{CALL}"
    trajectory = parse_trajectory(text, assistant_roles=("GPT",), other_roles=("Human",))
    assert trajectory.turn_roles == ("GPT", "Human", "GPT")
    assert [call.turn for call in trajectory.calls] == [0, 2, 2]
    assert trajectory.assistant_turns == 2


@pytest.mark.parametrize(
    "options",
    [
        {"assistant_roles": "assistant"},
        {"assistant_roles": ()},
        {"other_roles": ("user", "")},
        {"other_roles": ("a\nb",)},
        {"other_roles": ("assistant",)},
    ],
)
def test_bad_options(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidOption):
        parse_trajectory("x", **options)


def test_bad_input() -> None:
    with pytest.raises(InvalidInput, match="bytes"):
        parse_trajectory(b"<answer>x</answer>")  # type: ignore[arg-type]


def test_docstring_examples() -> None:
    result = doctest.testmod(tool_trajectory)
    assert result.attempted >= 7 and result.failed == 0


# --- linear time ---------------------------------------------------------------------------------
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "unclosed openers": lambda n: "<tool_call>" * (n // 11),
    "openers across turns": lambda n: "<tool_call>{\nassistant\n" * (n // 24),
    "nested JSON": lambda n: "<tool_call>" + '{"a": [' * (n // 7) + "</tool_call>",
    "calls in JSON strings": lambda n: '<tool_call>{"q": "<tool_call></answer><search>' * (n // 42),
    "many role lines": lambda n: "\nuser\n<answer>\nassistant\n<search>x" * (n // 34),
    "closed calls": lambda n: (CALL + "<answer>") * (n // 60),
    "open results": lambda n: "<tool_response>\nuser\n<information>" * (n // 34),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_time_is_linear(name: str) -> None:
    """Eight times the text takes about eight times as long (a quadratic parser would take
    sixty-four times); the bound of 20 leaves room for timer and cache noise at either size."""
    small, large = ADVERSARIAL[name](1 << 17), ADVERSARIAL[name](1 << 20)
    small_time = best_time(lambda: parse_trajectory(small))
    large_time = best_time(lambda: parse_trajectory(large))
    ratio = large_time / max(small_time, 1e-9)
    assert ratio < 20, f"{name}: {small_time:.4f} s, then {large_time:.4f} s: x{ratio:.2f}"
