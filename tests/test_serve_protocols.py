"""The reward server's three protocols and its routing, called as the HTTP layer calls them
(``RewardService.handle`` with a whole request), scoring in this process.

Expected values come from in-process ``route``: every success row's dict must be the router's,
byte for byte (orjson), whichever protocol carried it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import pytest

from reward_plugins import InvalidGroundTruth, InvalidInput, InvalidOption
from reward_plugins.router import route
from reward_plugins.runtime.http import Refusal, Request
from reward_plugins.runtime.pool import Overloaded
from reward_plugins.runtime.rows import RowFailure
from reward_plugins.runtime.scoring import DEADLINE, Outcome, Row
from reward_plugins.serve import protocols
from reward_plugins.serve.service import (
    InProcessRows,
    RewardService,
    ServiceConfig,
    ServiceLimits,
)

SCORER = "compute_score"
KEYS = ["score", "acc", "em", "subem", "f1", "answer_found", "answer_tags", "spam_penalized"]
PROMPT = (
    "<|im_start|>user\nAnswer inside <answer> and </answer>, e.g. <answer> Beijing </answer>. "
    "Question: {question}<|im_end|>\n<|im_start|>assistant\n"
)

# (data source, response, ground truth): right, wrong, partial, no answer, several golds
CASES: list[tuple[str, str, Any]] = [
    ("searchR1_nq", "<think>France.</think><answer> Paris </answer>", {"target": ["Paris"]}),
    ("searchR1_nq", "<answer>Lyon</answer>", {"target": ["Paris"]}),
    ("searchR1_triviaqa", "<answer>the city of light</answer>", ["Paris", "City of Light"]),
    ("searchR1_hotpotqa", "I do not know.", {"target": ["Beijing"]}),
    ("searchR1_popqa", "<answer>New York City</answer>", "New York"),
]


def service(
    scorer: str = SCORER,
    *,
    options: Mapping[str, Any] | None = None,
    data_source: str | None = None,
    fallback: float = 0.0,
    scores_key: str | None = None,
    rows: Any = None,
    **limits: Any,
) -> RewardService:
    config = ServiceConfig(
        scorer, dict(options or {}), data_source, fallback, ServiceLimits(**limits), scores_key
    )
    score_rows = rows if rows is not None else InProcessRows(scorer)
    return RewardService(config, score_rows)


def call(svc: RewardService, path: str, body: Any = b"", method: str = "POST") -> Any:
    """The decoded 200 answer of ``svc`` to one request (``body`` JSON-encoded unless bytes)."""
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return orjson.loads(asyncio.run(svc.handle(Request(method, path, raw))))


def refused(svc: RewardService, path: str, body: Any, method: str = "POST") -> Refusal:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    with pytest.raises(Refusal) as caught:
        asyncio.run(svc.handle(Request(method, path, raw)))
    return caught.value


def native_rows(cases: Sequence[tuple[str, str, Any]] = CASES) -> list[dict[str, Any]]:
    return [{"data_source": s, "solution_str": r, "ground_truth": g} for s, r, g in cases]


def expected(cases: Sequence[tuple[str, str, Any]] = CASES, **options: Any) -> list[bytes]:
    return [orjson.dumps(route(SCORER, s, r, g, options)) for s, r, g in cases]


def nemo_request(response: str, truth: Any, **fields: Any) -> dict[str, Any]:
    """A ``/verify`` body of NeMo-Gym's shape (``BaseVerifyRequest``: the create params, the
    Responses API response; the gold beside them, as its QA servers carry it)."""
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "Question?"}]},
        "response": {
            "id": "resp_0",
            "object": "response",
            "created_at": 0.0,
            "model": "policy",
            "parallel_tool_calls": False,
            "tool_choice": "none",
            "tools": [],
            "output": [
                {"id": "rs_0", "type": "reasoning", "summary": []},
                {
                    "id": "msg_0",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": response, "annotations": []}],
                },
            ],
        },
        "expected_answer": truth,
        **fields,
    }


# ------------------------------------------------------------------------------- values


def test_native_results_are_the_routers_dicts() -> None:
    answer = call(service(), "/score", {"rows": native_rows()})
    assert answer["keys"] == KEYS
    assert [orjson.dumps(r) for r in answer["results"]] == expected()
    assert answer["failures"] == [None] * len(CASES)
    assert [r["score"] for r in answer["results"]] == [1.0, 0.0, 1.0, 0.0, 0.0]


def test_native_options_are_laid_over_the_servers() -> None:
    svc = service(options={"format_score": 0.1})
    rows = native_rows()
    plain = call(svc, "/score", {"rows": rows})["results"]
    assert [orjson.dumps(r) for r in plain] == expected(format_score=0.1)
    answer = call(svc, "/score", {"rows": rows, "options": {"score": 2.0}})
    assert [orjson.dumps(r) for r in answer["results"]] == expected(format_score=0.1, score=2.0)
    assert answer["results"][0]["score"] == 2.0


def test_native_rows_take_the_servers_data_source() -> None:
    svc = service(data_source="searchR1_nq")
    answer = call(
        svc,
        "/score",
        {
            "rows": [
                {
                    "solution_str": "<answer>Paris</answer>",
                    "ground_truth": "Paris",
                    "extra_info": None,
                }
            ]
        },
    )
    assert answer["results"] == [
        route(SCORER, "searchR1_nq", "<answer>Paris</answer>", "Paris", {})
    ]


def test_failed_rows_hold_the_fallback_and_name_their_failure() -> None:
    rows = native_rows()
    rows[1] = {"data_source": "no_such_source", "solution_str": "x", "ground_truth": "Paris"}
    rows[3] = {"data_source": "searchR1_nq", "solution_str": "x", "ground_truth": {}}
    answer = call(service(fallback=-1.0), "/score", {"rows": rows})
    fallback = {key: -1.0 if key == "score" else 0.0 for key in KEYS}
    assert answer["results"][1] == answer["results"][3] == fallback
    assert answer["failures"][1]["kind"] == "unknown data source"
    assert "no_such_source" in answer["failures"][1]["message"]
    assert answer["failures"][3]["kind"] == "invalid ground truth"
    kept = [0, 2, 4]
    assert [orjson.dumps(answer["results"][i]) for i in kept] == [expected()[i] for i in kept]
    assert [answer["failures"][i] for i in kept] == [None, None, None]


def test_keys_are_the_union_over_the_rows_data_sources() -> None:
    # compute_score_tool serves every data source: its keys, whatever the rows' sources
    svc = service("compute_score_tool")
    answer = call(
        svc,
        "/score",
        {"rows": [{"data_source": "any", "solution_str": "x", "ground_truth": "Paris"}]},
    )
    assert answer["keys"][:8] == KEYS and "tool_calls" in answer["keys"]
    assert answer["results"][0] == route("compute_score_tool", "any", "x", "Paris", {})


def openrlhf_body(cases: Sequence[tuple[str, str, Any]] = CASES) -> dict[str, Any]:
    prompts = [PROMPT.format(question=f"q{i}") for i in range(len(cases))]
    labels = [orjson.dumps({"data_source": s, "ground_truth": g}).decode() for s, _, g in cases]
    return {
        "query": [p + r + "<|im_end|>" for p, (_, r, _) in zip(prompts, cases, strict=True)],
        "prompts": prompts,
        "labels": labels,
    }


def test_openrlhf_answer_carries_every_key_and_acc_as_scores() -> None:
    answer = call(service(), "/get_reward", openrlhf_body())
    results = [route(SCORER, s, r, g, {}) for s, r, g in CASES]
    assert answer["rewards"] == [r["score"] for r in results]
    assert answer["scores"] == [r["acc"] for r in results]
    assert sorted(answer["extra_logs"]) == sorted([*KEYS[1:], "failed"])
    for key in KEYS[1:]:
        assert answer["extra_logs"][key] == [r[key] for r in results]
    assert answer["extra_logs"]["failed"] == [0.0] * len(CASES)


def test_openrlhf_scores_clip_the_reward_without_an_acc_key() -> None:
    svc = service("repetition_penalty", options={"ngram_size": 2})
    body = openrlhf_body([("any", "the cat the cat the cat the cat", "x"), ("any", "a b c", "x")])
    answer = call(svc, "/get_reward", body)
    assert answer["rewards"][0] < 0.0  # a penalty
    assert answer["scores"] == [min(1.0, max(0.0, r)) for r in answer["rewards"]]
    assert answer["scores"][0] == 0.0


def test_openrlhf_scores_key_picks_another_key() -> None:
    answer = call(service(scores_key="f1"), "/get_reward", openrlhf_body())
    assert answer["scores"] == [route(SCORER, s, r, g, {})["f1"] for s, r, g in CASES]
    with pytest.raises(InvalidInput, match="no_such_key"):
        service(scores_key="no_such_key")


def test_openrlhf_bad_rows_fail_alone() -> None:
    body = openrlhf_body()
    body["labels"][1] = "  "  # no --data.label_key
    body["query"][2] = "no prompt here and no marker"
    answer = call(service(fallback=0.25), "/get_reward", body)
    assert answer["extra_logs"]["failed"] == [0.0, 1.0, 1.0, 0.0, 0.0]
    assert answer["rewards"][1:3] == [0.25, 0.25]
    assert answer["scores"][1:3] == [0.0, 0.0]
    assert answer["extra_logs"]["em"][1:3] == [0.0, 0.0]
    assert answer["rewards"][0] == 1.0


def test_nemo_verify_echoes_the_request_with_reward_and_components() -> None:
    request = nemo_request("<answer> Paris </answer>", "Paris", data_source="searchR1_nq")
    answer = call(service(), "/verify", request)
    result = route(SCORER, "searchR1_nq", "<answer> Paris </answer>", "Paris", {})
    assert {k: answer[k] for k in request} == request
    assert answer["reward"] == 1.0
    assert orjson.dumps(answer["reward_components"]) == orjson.dumps(result)
    assert "mask_sample" not in answer and "failure_kind" not in answer
    # each key but score also at the top level, where NeMo-Gym's metrics look for numbers
    assert {k: answer[k] for k in result if k != "score"} == {
        k: v for k, v in result.items() if k != "score"
    }
    assert "score" not in answer


def test_nemo_top_level_keys_never_overwrite_the_request() -> None:
    request = {**nemo_request("<answer> Paris </answer>", "Paris"), "em": "the request's"}
    answer = call(service(), "/verify", request)
    assert answer["em"] == "the request's"
    assert answer["reward_components"]["em"] == 1.0


def test_nemo_session_paths_echo_the_session() -> None:
    assert call(service(), "/seed_session", {"resources_session_id": "s1"}) == {
        "resources_session_id": "s1"
    }
    assert call(service(), "/close_session", {}) == {}


def test_nemo_ground_truth_wins_and_failures_mask_the_sample() -> None:
    request = nemo_request("<answer>Paris</answer>", "Lyon", ground_truth={"target": ["Paris"]})
    assert call(service(), "/verify", request)["reward"] == 1.0
    failing = nemo_request("<answer>Paris</answer>", None, data_source="searchR1_nq")
    answer = call(service(fallback=-0.5), "/verify", failing)
    assert answer["reward"] == -0.5
    assert answer["mask_sample"] is True
    assert answer["failure_kind"] == "reward_plugins:invalid_ground_truth"
    assert answer["reward_components"] == {k: -0.5 if k == "score" else 0.0 for k in KEYS}
    assert "invalid ground truth" in answer["failure_reason"]


def test_nemo_failure_kinds() -> None:
    assert protocols.nemo_failure_kind("scorer error") == "verifier_error"
    assert protocols.nemo_failure_kind("timeout") == "reward_plugins:timeout"
    assert protocols.nemo_failure_kind("unknown data source") == (
        "reward_plugins:unknown_data_source"
    )


def test_the_same_rows_give_the_same_bytes_through_every_protocol() -> None:
    svc = service()
    native = call(svc, "/score", {"rows": native_rows()})
    openrlhf = call(svc, "/get_reward", openrlhf_body())
    keys = native["keys"]
    for i, (source, response, truth) in enumerate(CASES):
        rebuilt = {
            k: openrlhf["rewards"][i] if k == "score" else openrlhf["extra_logs"][k][i]
            for k in keys
        }
        nemo = call(svc, "/verify", nemo_request(response, truth, data_source=source))
        assert orjson.dumps(native["results"][i]) == expected()[i]
        assert orjson.dumps(rebuilt) == expected()[i]
        assert orjson.dumps(nemo["reward_components"]) == expected()[i]


# ------------------------------------------------------------------------- the label rule


@pytest.mark.parametrize(
    ("label", "parsed"),
    [
        ("Paris", ("Paris", None)),
        ('["Paris", "Lutetia"]', (["Paris", "Lutetia"], None)),
        ('{"target": ["Paris"]}', ({"target": ["Paris"]}, None)),
        (
            '{"target": ["Paris"], "data_source": "nq"}',
            ({"target": ["Paris"], "data_source": "nq"}, "nq"),
        ),
        ('{"data_source": "nq", "ground_truth": {"target": ["P"]}}', ({"target": ["P"]}, "nq")),
        ('{"data_source": "nq", "ground_truth": "P"}', ("P", "nq")),
        ("[not json", ("[not json", None)),
        (["Paris"], (["Paris"], None)),
    ],
)
def test_parse_label(label: Any, parsed: tuple[Any, str | None]) -> None:
    assert protocols.parse_label(label) == parsed


@pytest.mark.parametrize(
    "label", ["", "   ", '{"data_source": 3, "ground_truth": "x"}', "[" * 100 + "]" * 100]
)
def test_parse_label_refuses(label: str) -> None:
    with pytest.raises(InvalidGroundTruth):
        protocols.parse_label(label)


def test_response_text_rules() -> None:
    prompt = PROMPT.format(question="q")
    assert protocols.response_text(prompt + "<answer>x</answer><|im_end|>\n", prompt) == (
        "<answer>x</answer>"
    )
    # a truncated prompt: everything up to the last assistant marker goes
    assert protocols.response_text("…cut<|im_start|>assistant\nhi<|endoftext|>", "whole") == "\nhi"
    with pytest.raises(ValueError, match="assistant markers"):
        protocols.response_text("nothing", "prompt")


# ------------------------------------------------------------------------------ routing


def test_health_and_scorers() -> None:
    svc = service(options={"format_score": 0.1})
    call(svc, "/score", {"rows": native_rows()})
    health = call(svc, "/health", method="GET")
    assert health["status"] == "ok"
    assert health["rows"] == len(CASES)
    assert health["requests"] == {"/score": 1, "/health": 1}
    assert health["pool"] is None
    assert health["limits"]["max_rows"] == ServiceLimits().max_rows
    scorers = call(svc, "/scorers", method="GET")
    assert scorers["scorer"] == SCORER and scorers["options"] == {"format_score": 0.1}
    assert [item["key"] for item in scorers["results"]] == KEYS
    assert scorers["results"][2] == {"key": "em", "kind": "component", "label": "EM"}
    assert {"compute_score", "compute_score_f1", "repetition_penalty"} <= set(scorers["scorers"])


@pytest.mark.parametrize(
    ("method", "path", "status", "allow"),
    [("GET", "/score", 405, "POST"), ("POST", "/health", 405, "GET"), ("GET", "/nope", 404, None)],
)
def test_wrong_method_or_path(method: str, path: str, status: int, allow: str | None) -> None:
    refusal = refused(service(), path, b"", method)
    assert refusal.status == status
    assert dict(refusal.headers).get("Allow") == allow


def test_a_full_pool_is_503_with_retry_after() -> None:
    async def full(
        rows: Sequence[Row], options: Mapping[str, Any], deadline: float | None
    ) -> list[Outcome]:
        raise Overloaded("100000 rows pending")

    refusal = refused(service(rows=full), "/score", {"rows": native_rows()})
    assert refusal.status == 503
    assert dict(refusal.headers)["Retry-After"] == "1"
    assert "100000 rows pending" in str(refusal)


def test_in_process_rows_past_the_deadline_fail_as_deadline() -> None:
    rows = [Row(s, r, g) for s, r, g in CASES]
    outcomes = asyncio.run(InProcessRows(SCORER)(rows, {}, time.monotonic() - 1.0))
    assert [o.reason for o in outcomes if isinstance(o, RowFailure)] == [DEADLINE] * len(CASES)


def test_bad_config_fails_when_built() -> None:
    with pytest.raises(InvalidOption, match="no_such_option"):
        service(options={"no_such_option": 1})
    with pytest.raises(InvalidInput, match="fallback_reward"):
        service(fallback=float("nan"))
    with pytest.raises(InvalidInput, match="max_rows"):
        ServiceLimits(max_rows=0)


# ---------------------------------------------------------------------------- hostile input

ROW = {"data_source": "searchR1_nq", "solution_str": "<answer>x</answer>", "ground_truth": "x"}


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (b"{not json", 400, ["not JSON"]),
        (b"[1, 2]", 400, ["JSON object", "array"]),
        ({"rows": {"a": 1}}, 400, ["'rows'", "list", "object"]),
        ({"rows": [ROW, "text"]}, 400, ["row 1", "object", "string"]),
        ({"rows": [{**ROW, "solution_str": 7}]}, 400, ["row 0", "'solution_str'", "number"]),
        ({"rows": [ROW, {**ROW, "data_source": ["nq"]}]}, 400, ["row 1", "'data_source'", "array"]),
        ({"rows": [{**ROW, "extra_info": "x"}]}, 400, ["row 0", "'extra_info'", "string"]),
        ({"rows": [{**ROW, "solution": "x"}]}, 400, ["row 0", "'solution'"]),
        ({"rows": [{"solution_str": "x", "data_source": "searchR1_nq"}]}, 400, ["'ground_truth'"]),
        ({"rows": [{"solution_str": "x", "ground_truth": "x"}]}, 400, ["--data-source"]),
        ({"rows": [ROW], "option": {}}, 400, ["'option'"]),
        ({"rows": [ROW], "options": [1]}, 400, ["'options'", "array"]),
        ({"rows": [ROW] * 5}, 413, ["5 rows", "--max-rows"]),
        (
            {"rows": [ROW, {**ROW, "solution_str": "y" * 101}]},
            413,
            ["row 1", "'solution_str'", "--max-string-chars"],
        ),
        (
            {"rows": [{**ROW, "ground_truth": {"target": ["z" * 101]}}]},
            413,
            ["row 0", "'ground_truth'"],
        ),
        ({"rows": [{**ROW, "extra_info": {"k" * 101: 1}}]}, 413, ["row 0", "'extra_info'"]),
        (b'{"rows": [], "options": {"score": 1' + b"0" * 400 + b"}}", 400, ["not JSON"]),
        (b'{"rows": [], "options": {"score": NaN}}', 400, ["not JSON"]),
        (b'{"rows": [], "options": {"score": 1e999}}', 400, ["not JSON"]),
        (b'{"rows": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400, ["not JSON", "depth"]),
        ({"rows": [{**ROW, "ground_truth": [[[[[[[[[[["x"]]]]]]]]]]]}]}, 200, []),
        ({"rows": [{**ROW, "extra_info": {"a": {"b": [[[{"c": None}]]]}}}]}, 200, []),
        ({"rows": [ROW], "options": {"no_such_option": 1}}, 400, ["'options'", "no_such_option"]),
        ({"rows": [ROW], "options": {"score": "high"}}, 400, ["'options'", "score", "str"]),
    ],
)
def test_native_hostile_input(body: Any, status: int, words: list[str]) -> None:
    svc = service(max_rows=4, max_string_chars=100)
    if status == 200:
        assert len(call(svc, "/score", body)["results"]) == 1
        return
    refusal = refused(svc, "/score", body)
    assert refusal.status == status, str(refusal)
    for word in words:
        assert word in str(refusal)
    assert "\n" not in str(refusal)


def test_deep_nesting_under_orjsons_limit_is_refused_by_the_walk() -> None:
    deep = orjson.loads(b"[" * 100 + b"]" * 100)
    refusal = refused(service(), "/score", {"rows": [{**ROW, "ground_truth": deep}]})
    assert refusal.status == 400
    assert "row 0: 'ground_truth': nested deeper than the limit of 64 levels" in str(refusal)


def test_the_response_cap() -> None:
    svc = service(max_response_mb=0.001)  # 1048 bytes: about four rows of compute_score
    assert len(call(svc, "/score", {"rows": [ROW] * 2})["results"]) == 2
    refusal = refused(svc, "/score", {"rows": [ROW] * 20})
    assert refusal.status == 413
    assert "--max-response-mb" in str(refusal)
    refusal = refused(svc, "/get_reward", openrlhf_body(CASES * 10))
    assert refusal.status == 413 and "--max-response-mb" in str(refusal)


@pytest.mark.parametrize(
    ("change", "status", "words"),
    [
        ({"query": "one"}, 400, ["'query'", "list", "string"]),
        ({"labels": None}, 400, ["'labels'", "list", "null"]),
        ({"prompts": ["p"]}, 400, ["differ in length"]),
        ({"query": [1, "a", "b", "c", "d"]}, 400, ["row 0", "'query'", "number"]),
        ({"labels": ["x" * 301] * 5}, 413, ["row 0", "'labels'", "--max-string-chars"]),
    ],
)
def test_openrlhf_hostile_input(change: dict[str, Any], status: int, words: list[str]) -> None:
    svc = service(max_string_chars=300)
    refusal = refused(svc, "/get_reward", {**openrlhf_body(), **change})
    assert refusal.status == status, str(refusal)
    for word in words:
        assert word in str(refusal)


def test_openrlhf_too_many_rows() -> None:
    refusal = refused(service(max_rows=4), "/get_reward", openrlhf_body())
    assert refusal.status == 413 and "5 rows" in str(refusal) and "--max-rows" in str(refusal)


def _nemo_with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    request = nemo_request("<answer>x</answer>", "x")
    target: Any = request
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return request


@pytest.mark.parametrize(
    ("request_body", "words"),
    [
        (_nemo_with(("response",), "text"), ["'response'", "string"]),
        (_nemo_with(("response", "output"), {}), ["'response.output'", "list", "object"]),
        (_nemo_with(("response", "output", 1), 3), ["'response.output[1]'", "number"]),
        (_nemo_with(("response", "output", 1, "content"), None), ["output[1].content'", "null"]),
        (_nemo_with(("response", "output", 1, "content", 0, "text"), 5), ["content[0].text'"]),
        (_nemo_with(("data_source",), 5), ["'data_source'", "number"]),
        (
            {k: v for k, v in nemo_request("x", "x").items() if k != "expected_answer"},
            ["no ground truth"],
        ),
    ],
)
def test_nemo_hostile_input(request_body: dict[str, Any], words: list[str]) -> None:
    refusal = refused(service(), "/verify", request_body)
    assert refusal.status == 400, str(refusal)
    for word in words:
        assert word in str(refusal)
