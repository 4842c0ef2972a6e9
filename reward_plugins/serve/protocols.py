"""The reward server's three request shapes: parsing each body into rows, shaping each answer.

Pure functions, no I/O. Every body is read with :mod:`orjson` (strict JSON: ``NaN``,
``Infinity``, an integer over 64 bits, a lone surrogate or nesting past 1024 levels are "not
JSON"), then walked once: values nested deeper than :data:`MAX_DEPTH` levels and strings
longer than ``max_string_chars`` (keys included) are refused, naming the row and the field.
(``config_reader.parse_json_text`` reads configuration texts the same way; a request body is
up to ``--max-body-mb`` and read on every request, so its character-by-character depth scan is
left to the C parser here.) Refusals are :class:`~reward_plugins.runtime.http.Refusal`: 400 for
a malformed body, 413 for one over a cap (rows, string length, response size), each naming the
cap's CLI option. A problem of one row that does not make the body malformed (an empty
OpenRLHF label, a response that cannot be located in its query) is that row's failure
(:data:`INVALID_INPUT`), the other rows are scored.

Native, ``POST /score`` (what :func:`reward_plugins.serve.client.compute_score_remote`
speaks)::

    {"rows": [{"data_source": str, "solution_str": str, "ground_truth": JSON,
               "extra_info": object | null}, ...],
     "options": {...}}
    -> {"keys": [result keys, in schema order],
        "results": [{key: value, ...} per row],
        "failures": [null | {"kind": str, "message": str} per row]}

``data_source`` may be left out when the server has a ``--data-source``; ``extra_info`` may be
left out; ``options`` may be left out (the server's options hold) and is laid over the
server's. Any other key of a row or of the body is refused (a misspelt field is not silently
ignored).

OpenRLHF, ``POST /get_reward`` (OpenRLHF 0.11's ``--reward.remote_url``; the client is
``SingleTurnAgentExecutor._fetch_rewards_via_http`` in ``openrlhf/utils/agent.py``, the
reference server ``openrlhf/cli/serve_rm.py``)::

    {"query": [prompt + response, ...], "prompts": [prompt, ...], "labels": [label, ...]}
    -> {"rewards": [score per row], "scores": [per row, in [0, 1]],
        "extra_logs": {key: [value per row] for every result key but score, "failed": [...]}}

The response is recovered from its query by :func:`response_text` (the prompt removed, or
everything up to the last assistant marker when the prompt is not in the query; trailing end
tokens dropped), the ground truth from its label by :func:`parse_label`. ``scores`` is the
result key named by the server's ``scores_key``, by default the scorer's ``acc`` key when its
result schema declares one, else the reward clipped to [0, 1] (OpenRLHF filters groups by it).
``extra_logs["failed"]`` is 1.0 on a failed row and 0.0 otherwise, so failures show in wandb;
a failed row's reward is the fallback reward, its other values 0.0. Other keys of the body are
ignored (for later OpenRLHF versions).

NeMo-Gym, ``POST /verify`` (``nemo_gym/base_resources_server.py`` of NVIDIA-NeMo/Gym:
``BaseVerifyRequest`` / ``BaseVerifyResponse``), one rollout per request::

    {"responses_create_params": {...}, "response": {"output": [...], ...},
     "ground_truth": JSON  (or "expected_answer": JSON, as NeMo-Gym's QA servers name it),
     "data_source": str (optional), "extra_info": object (optional), ...}
    -> the request, echoed, plus "reward", "reward_components": {every result key: value},
       and on a failed row "mask_sample": true, "failure_kind", "failure_reason"

The response text is every ``output_text`` part of every ``message`` item of
``response.output``, joined (as NeMo-Gym's ``hotpotqa_qa`` and ``equivalence_rule`` servers
read it). ``ground_truth`` wins over ``expected_answer``. A scorer error's failure kind is
NeMo-Gym's ``verifier_error``; the others are namespaced ``reward_plugins:<kind>``
(``reward_plugins:timeout``, ``reward_plugins:crash``, ...), as its ``failure_kinds`` module
asks of a kind outside its shared vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Protocol

import orjson

from reward_plugins.errors import InvalidGroundTruth
from reward_plugins.runtime.http import Refusal
from reward_plugins.runtime.openrlhf_text import (  # importable from here, as before the split
    ASSISTANT_MARKERS,  # noqa: F401
    END_TOKENS,  # noqa: F401
    parse_label,
    response_text,
)
from reward_plugins.runtime.rows import RowFailure
from reward_plugins.runtime.scoring import Outcome, Row

MAX_DEPTH = 64
"""Collections nested in collections within one field (the package's configuration limit)."""

INVALID_INPUT = "invalid input"
"""The failure kind of a row whose request fields cannot be scored (no response found)."""

FAILED_LOG = "failed"
"""The ``extra_logs`` key of OpenRLHF answers: 1.0 on a failed row, 0.0 otherwise."""

SCORES_KEY = "acc"
"""The result key OpenRLHF's ``scores`` take by default, when the scorer declares it."""

NEMO_VERIFIER_ERROR = "verifier_error"
"""NeMo-Gym's failure kind of a verifier that raised (``nemo_gym/failure_kinds.py``)."""

NEMO_KIND_PREFIX = "reward_plugins:"
"""Prefix of the NeMo-Gym failure kinds outside its shared vocabulary."""

MiB = 1024 * 1024

# ------------------------------------------------------------------------ OpenRLHF labels


# ------------------------------------------------------------------------- parsed requests


class BodyLimits(Protocol):
    """What the parsers read of the server's limits (:class:`service.ServiceLimits`)."""

    @property
    def max_rows(self) -> int: ...
    @property
    def max_string_chars(self) -> int: ...
    @property
    def max_response_mb(self) -> float: ...


@dataclass(frozen=True)
class Batch:
    """A parsed request: per row, the :class:`Row` to score or why it cannot be (a failure
    decided before scoring); the request's own options (native only)."""

    rows: list[Row | RowFailure]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scored:
    """What the answer is shaped from: the result keys (schema order), each row's outcome, the
    fallback reward of failed rows."""

    keys: tuple[str, ...]
    outcomes: Sequence[Outcome]
    fallback_reward: float

    def result(self, position: int) -> dict[str, Any]:
        """Row ``position``'s result dict: the scorer's own, or the fallback dict (``score`` =
        the fallback reward, every other key 0.0)."""
        outcome = self.outcomes[position]
        if isinstance(outcome, RowFailure):
            return {key: self.fallback_reward if key == "score" else 0.0 for key in self.keys}
        return outcome


def _refuse(status: int, message: str) -> Refusal:
    return Refusal(status, message)


def load_body(body: bytes) -> dict[str, Any]:
    """The body's JSON object.

    Raises:
        Refusal: 400, not JSON (the message has orjson's reason and position) or not an
            object.
    """
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise _refuse(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {error}") from None
    if not isinstance(payload, dict):
        raise _refuse(
            HTTPStatus.BAD_REQUEST,
            f"the body must be a JSON object, got a JSON {_json_type(payload)}",
        )
    return payload


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int | float):
        return "number"
    return "array" if isinstance(value, list) else "object"


def check_value(value: Any, where: str, limits: BodyLimits) -> None:
    """Refuse ``value`` (a parsed field, named ``where``) when it nests deeper than
    :data:`MAX_DEPTH` (400) or holds a string, or key, over ``max_string_chars`` (413)."""
    if isinstance(value, str):  # the common case: a text field
        if len(value) > limits.max_string_chars:
            raise _too_long(where, len(value), limits)
        return
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            if len(item) > limits.max_string_chars:
                raise _too_long(where, len(item), limits)
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise _refuse(
                    HTTPStatus.BAD_REQUEST,
                    f"{where}: nested deeper than the limit of {MAX_DEPTH} levels",
                )
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)


def _too_long(where: str, length: int, limits: BodyLimits) -> Refusal:
    return _refuse(
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        f"{where}: a string of {length} characters, over {limits.max_string_chars} "
        "(--max-string-chars)",
    )


def _check_rows(count: int, limits: BodyLimits) -> None:
    if count > limits.max_rows:
        raise _refuse(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            f"{count} rows, over {limits.max_rows} per request (--max-rows)",
        )


def _wrong_type(where: str, expected: str, value: Any) -> Refusal:
    return _refuse(
        HTTPStatus.BAD_REQUEST, f"{where} must be {expected}, got a JSON {_json_type(value)}"
    )


# ------------------------------------------------------------------------------- native

ROW_FIELDS = ("data_source", "solution_str", "ground_truth", "extra_info")
"""The fields of a native row."""

_ROW_FIELD_SET = frozenset(ROW_FIELDS)

BODY_FIELDS = ("rows", "options")
"""The fields of a native request."""


def parse_native(body: bytes, limits: BodyLimits, default_source: str | None) -> Batch:
    """The rows and options of a ``POST /score`` body; a row without ``data_source`` gets
    ``default_source`` (the server's ``--data-source``).

    Raises:
        Refusal: 400 for a malformed body or row (naming the row, the field and the JSON type
            found), 413 for too many rows or too long a string.
    """
    payload = load_body(body)
    unknown = sorted(set(payload) - set(BODY_FIELDS))
    if unknown:
        raise _refuse(
            HTTPStatus.BAD_REQUEST,
            f"unknown field {unknown[0]!r:.80} in the body; the fields are "
            f"{', '.join(BODY_FIELDS)}",
        )
    raw_rows = payload.get("rows")
    if not isinstance(raw_rows, list):
        raise _wrong_type("'rows'", "a list of row objects", raw_rows)
    _check_rows(len(raw_rows), limits)
    options = payload.get("options")
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise _wrong_type("'options'", "an object", options)
    check_value(options, "'options'", limits)
    return Batch(
        [_native_row(i, raw, limits, default_source) for i, raw in enumerate(raw_rows)], options
    )


def _native_row(index: int, raw: Any, limits: BodyLimits, default_source: str | None) -> Row:
    if not isinstance(raw, dict):
        raise _wrong_type(f"row {index}", "an object", raw)
    if not raw.keys() <= _ROW_FIELD_SET:
        unknown = sorted(set(raw) - _ROW_FIELD_SET)
        raise _refuse(
            HTTPStatus.BAD_REQUEST,
            f"row {index}: unknown field {unknown[0]!r:.80}; the fields are "
            f"{', '.join(ROW_FIELDS)}",
        )
    source = raw.get("data_source")
    if source is None:
        if default_source is None:
            raise _refuse(
                HTTPStatus.BAD_REQUEST,
                f"row {index}: 'data_source' is missing and the server has no --data-source",
            )
        source = default_source
    elif not isinstance(source, str):
        raise _wrong_type(f"row {index}: 'data_source'", "a string", source)
    response = raw.get("solution_str")
    if not isinstance(response, str):
        raise _wrong_type(f"row {index}: 'solution_str'", "a string", response)
    if "ground_truth" not in raw:
        raise _refuse(HTTPStatus.BAD_REQUEST, f"row {index}: 'ground_truth' is missing")
    extra_info = raw.get("extra_info")
    if extra_info is not None and not isinstance(extra_info, dict):
        raise _wrong_type(f"row {index}: 'extra_info'", "an object or null", extra_info)
    longest = limits.max_string_chars
    for name in ROW_FIELDS:
        value = raw.get(name)
        if value is not None and (type(value) is not str or len(value) > longest):
            check_value(value, f"row {index}: {name!r}", limits)
    return Row(source, response, raw["ground_truth"], extra_info)


def native_answer(scored: Scored, limits: BodyLimits) -> bytes:
    """The ``POST /score`` answer.

    Raises:
        Refusal: 413 when it would be over ``max_response_mb``.
    """
    failures = [
        {"kind": o.reason, "message": o.detail} if isinstance(o, RowFailure) else None
        for o in scored.outcomes
    ]
    results = [scored.result(i) for i in range(len(scored.outcomes))]
    return _capped({"keys": list(scored.keys), "results": results, "failures": failures}, limits)


def _capped(answer: Mapping[str, Any], limits: BodyLimits) -> bytes:
    body = orjson.dumps(answer)
    limit = int(limits.max_response_mb * MiB)
    if len(body) > limit:
        raise _refuse(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            f"the answer would be {len(body)} bytes, over {limit} (--max-response-mb); send "
            "fewer rows",
        )
    return body


# ----------------------------------------------------------------------------- OpenRLHF

OPENRLHF_FIELDS = ("query", "prompts", "labels")
"""The lists of an OpenRLHF request, one item per row."""


def parse_openrlhf(body: bytes, limits: BodyLimits, default_source: str) -> Batch:
    """The rows of a ``POST /get_reward`` body; a label naming no data source gets
    ``default_source``. A row whose label is unreadable or whose response cannot be located is
    a failure (:data:`INVALID_INPUT` or ``invalid ground truth``), not a refusal.

    Raises:
        Refusal: 400 when a list is missing, is not a list of the right items, or the lists
            differ in length; 413 for too many rows or too long a string.
    """
    payload = load_body(body)
    lists: list[list[Any]] = []
    for name in OPENRLHF_FIELDS:
        items = payload.get(name)
        if not isinstance(items, list):
            raise _wrong_type(f"{name!r}", "a list", items)
        _check_rows(len(items), limits)
        lists.append(items)
    queries, prompts, labels = lists
    if not len(queries) == len(prompts) == len(labels):
        raise _refuse(
            HTTPStatus.BAD_REQUEST,
            f"'query', 'prompts' and 'labels' differ in length: {len(queries)}, "
            f"{len(prompts)}, {len(labels)}",
        )
    rows: list[Row | RowFailure] = []
    for index, (query, prompt, label) in enumerate(zip(queries, prompts, labels, strict=True)):
        for name, value in (("query", query), ("prompts", prompt)):
            if not isinstance(value, str):
                raise _wrong_type(f"row {index}: {name!r}", "a string", value)
            check_value(value, f"row {index}: {name!r}", limits)
        check_value(label, f"row {index}: 'labels'", limits)
        rows.append(_openrlhf_row(query, prompt, label, default_source))
    return Batch(rows)


def _openrlhf_row(query: str, prompt: str, label: Any, default_source: str) -> Row | RowFailure:
    try:
        truth, source = parse_label(label)
    except InvalidGroundTruth as error:
        return RowFailure("invalid ground truth", f"invalid ground truth: {error}")
    try:
        response = response_text(query, prompt)
    except ValueError as error:
        return RowFailure(INVALID_INPUT, f"{INVALID_INPUT}: {error}")
    return Row(source or default_source, response, truth)


def openrlhf_scores_key(keys: Sequence[str], scores_key: str | None) -> str | None:
    """The result key OpenRLHF's ``scores`` are read from: ``scores_key`` when given, else
    :data:`SCORES_KEY` when among ``keys``, else ``None`` (the reward clipped to [0, 1])."""
    if scores_key is not None:
        return scores_key
    return SCORES_KEY if SCORES_KEY in keys else None


def openrlhf_answer(scored: Scored, limits: BodyLimits, scores_key: str | None) -> bytes:
    """The ``POST /get_reward`` answer (see the module docstring).

    Raises:
        Refusal: 413 when it would be over ``max_response_mb``.
    """
    results = [scored.result(i) for i in range(len(scored.outcomes))]
    rewards = [result["score"] for result in results]
    key = openrlhf_scores_key(scored.keys, scores_key)
    if key is None:
        scores = [_clip(reward) for reward in rewards]
    else:
        scores = [float(result.get(key, 0.0)) for result in results]
    extra_logs: dict[str, list[Any]] = {
        name: [result.get(name, 0.0) for result in results]
        for name in scored.keys
        if name != "score"
    }
    extra_logs[FAILED_LOG] = [float(isinstance(o, RowFailure)) for o in scored.outcomes]
    return _capped({"rewards": rewards, "scores": scores, "extra_logs": extra_logs}, limits)


def _clip(reward: Any) -> float:
    value = float(reward)
    return 0.0 if math.isnan(value) else min(1.0, max(0.0, value))


# ------------------------------------------------------------------------------ NeMo-Gym

NEMO_TRUTH_FIELDS = ("ground_truth", "expected_answer")
"""Where a ``/verify`` request holds its ground truth, in order of precedence."""


@dataclass(frozen=True)
class Verify:
    """A parsed ``POST /verify`` request: the request (echoed in the answer) and its row."""

    request: dict[str, Any]
    row: Row


def parse_nemo(body: bytes, limits: BodyLimits, default_source: str) -> Verify:
    """The row of a ``POST /verify`` body (see the module docstring).

    Raises:
        Refusal: 400 when ``response.output`` is not NeMo-Gym's shape, when no ground truth or
            a data source of the wrong type is given; 413 for too long a string.
    """
    payload = load_body(body)
    for name, value in payload.items():
        check_value(value, repr(name), limits)
        if len(name) > limits.max_string_chars:
            raise _too_long("a key of the body", len(name), limits)
    response = payload.get("response")
    if not isinstance(response, dict):
        raise _wrong_type("'response'", "a Responses API object", response)
    text = nemo_output_text(response)
    truth_field = next((n for n in NEMO_TRUTH_FIELDS if n in payload), None)
    if truth_field is None:
        raise _refuse(
            HTTPStatus.BAD_REQUEST,
            "no ground truth: give 'ground_truth' (any JSON) or 'expected_answer'",
        )
    source = payload.get("data_source")
    if source is None:
        source = default_source
    elif not isinstance(source, str):
        raise _wrong_type("'data_source'", "a string", source)
    extra_info = payload.get("extra_info")
    if extra_info is not None and not isinstance(extra_info, dict):
        raise _wrong_type("'extra_info'", "an object or null", extra_info)
    return Verify(payload, Row(source, text, payload[truth_field], extra_info))


def nemo_output_text(response: Mapping[str, Any]) -> str:
    """Every ``output_text`` part of every ``message`` item of ``response["output"]``, joined.

    Raises:
        Refusal: 400, naming the item, when the output is not a list of objects or a message's
            content is not a list of objects with string ``text``.
    """
    output = response.get("output")
    if not isinstance(output, list):
        raise _wrong_type("'response.output'", "a list", output)
    parts: list[str] = []
    for i, item in enumerate(output):
        if not isinstance(item, dict):
            raise _wrong_type(f"'response.output[{i}]'", "an object", item)
        if item.get("type") != "message":
            continue
        content = item.get("content")
        if not isinstance(content, list):
            raise _wrong_type(f"'response.output[{i}].content'", "a list", content)
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                raise _wrong_type(f"'response.output[{i}].content[{j}]'", "an object", part)
            if part.get("type") == "output_text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise _wrong_type(f"'response.output[{i}].content[{j}].text'", "a string", text)
                parts.append(text)
    return "".join(parts)


def nemo_failure_kind(reason: str) -> str:
    """NeMo-Gym's failure kind for one of ours: ``verifier_error`` for a scorer error, else
    ``reward_plugins:<kind>`` (spaces as underscores)."""
    if reason == "scorer error":
        return NEMO_VERIFIER_ERROR
    return NEMO_KIND_PREFIX + reason.replace(" ", "_")


def nemo_answer(verify: Verify, scored: Scored, limits: BodyLimits) -> bytes:
    """The ``POST /verify`` answer: the request echoed, plus ``reward``,
    ``reward_components``, each result key but ``score`` at the top level as well (where the
    request has no field of that name: NeMo-Gym's metrics read top-level numbers, not
    ``reward_components``) and, on a failed row, ``mask_sample``, ``failure_kind`` and
    ``failure_reason``.

    Raises:
        Refusal: 413 when it would be over ``max_response_mb``.
    """
    result = scored.result(0)
    answer = dict(verify.request)
    answer["reward"] = result["score"]
    answer["reward_components"] = result
    for key, value in result.items():  # NeMo-Gym's metrics read numbers at the top level
        if key != "score" and key not in answer:
            answer[key] = value
    (outcome,) = scored.outcomes
    if isinstance(outcome, RowFailure):
        answer["mask_sample"] = True
        answer["failure_kind"] = nemo_failure_kind(outcome.reason)
        answer["failure_reason"] = outcome.detail
    return _capped(answer, limits)


def nemo_session(body: bytes) -> bytes:
    """``POST /seed_session`` and ``/close_session``: a scorer keeps no state per rollout, so
    the ``resources_session_id`` (if any) is echoed, as NeMo-Gym's stateless servers do
    (``SimpleResourcesServer`` in ``nemo_gym/base_resources_server.py``); its
    ``simple_agent`` calls ``/seed_session`` before every rollout and fails on a 404."""
    session = load_body(body).get("resources_session_id")
    return orjson.dumps({} if session is None else {"resources_session_id": session})


def nemo_aggregate_metrics(body: bytes) -> bytes:
    """``POST /aggregate_metrics`` (NeMo-Gym's rollout collector, after a collection):
    ``mean/reward`` over the verify responses not masked, and, when some are,
    ``coverage/measured_rollouts`` and ``coverage/masked_rollouts`` (the names of
    ``nemo_gym/reward_profile.py``), as ``agent_metrics`` and ``key_metrics``.

    Raises:
        Refusal: 400, ``verify_responses`` is not a list of objects with a numeric reward.
    """
    responses = load_body(body).get("verify_responses")
    if not isinstance(responses, list) or not all(isinstance(r, dict) for r in responses):
        raise _refuse(HTTPStatus.BAD_REQUEST, "'verify_responses' must be a list of objects")
    scored = [r.get("reward") for r in responses if not r.get("mask_sample")]
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in scored):
        raise _refuse(HTTPStatus.BAD_REQUEST, "'verify_responses': a 'reward' is not a number")
    metrics: dict[str, Any] = {}
    if scored:
        metrics["mean/reward"] = math.fsum(scored) / len(scored)
    if len(scored) < len(responses):
        metrics["coverage/measured_rollouts"] = len(scored)
        metrics["coverage/masked_rollouts"] = len(responses) - len(scored)
    return orjson.dumps({"agent_metrics": metrics, "key_metrics": metrics})
