"""The reward server over real HTTP: OpenRLHF 0.11.2's own reward client against it, the native
and NeMo-Gym protocols through a socket, the worker pool behind it.

OpenRLHF's client is ``SingleTurnAgentExecutor._fetch_rewards_via_http`` (its function, with its
aiohttp session, retries and sharding over a URL list); its queries are a ChatML prompt rendered
by the chat template (jinja2, as ``apply_chat_template`` renders it) plus the response and the
end-of-turn token, as OpenRLHF decodes them with special tokens kept. Expected values are
in-process ``route``'s.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

import orjson
import pytest

from reward_plugins.router import route
from reward_plugins.serve.service import running_reward_server

agent = pytest.importorskip("openrlhf.utils.agent")
jinja2 = pytest.importorskip("jinja2")

SCORER = "compute_score"
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
INSTRUCTION = (
    "Answer the question. Put the final answer inside <answer> and </answer>, for example "
    "<answer> Beijing </answer>. Question: {question}\n"
)

# (question, response, label as a dataset holds it, data source, ground truth it means)
ROLLOUTS: list[tuple[str, str, str, str, Any]] = [
    (
        "Capital of France?",
        "<think>France's capital.</think>\n<answer> Paris </answer>",
        '{"target": ["Paris", "City of Light"]}',
        "searchR1_nq",
        {"target": ["Paris", "City of Light"]},
    ),
    ("Capital of Italy?", "<answer>Milan</answer>", '["Rome"]', "searchR1_nq", ["Rome"]),
    ("Capital of China?", "I do not know.", "Beijing", "searchR1_nq", "Beijing"),
    (
        "Largest city in the US?",
        "<answer>new york</answer>",
        '{"data_source": "searchR1_popqa", "ground_truth": ["New York"]}',
        "searchR1_popqa",
        ["New York"],
    ),
    (
        "Author of Hamlet?",
        "<answer> Shakespeare </answer>",
        '{"data_source": "searchR1_triviaqa", "ground_truth": {"target": ["Shakespeare"]}}',
        "searchR1_triviaqa",
        {"target": ["Shakespeare"]},
    ),
]


def chat_prompt(question: str) -> str:
    """The prompt as OpenRLHF renders it with ``--data.apply_chat_template``."""
    messages = [{"role": "user", "content": INSTRUCTION.format(question=question)}]
    return str(
        jinja2.Template(CHATML_TEMPLATE).render(messages=messages, add_generation_prompt=True)
    )


def expected() -> list[dict[str, Any]]:
    return [
        route(SCORER, source, response, truth, {}) for _, response, _, source, truth in ROLLOUTS
    ]


def post(url: str, body: Any) -> tuple[int, Any]:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    request = urllib.request.Request(url, data=raw, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return json.loads(answer.read())


def fetch_with_openrlhf(urls: list[str]) -> list[dict[str, Any]]:
    """OpenRLHF's own client: one request per URL, the rows sharded over them."""
    executor = agent.SingleTurnAgentExecutor(remote_rm_url=urls)
    prompts = [chat_prompt(question) for question, *_ in ROLLOUTS]
    queries = [p + r[1] + "<|im_end|>" for p, r in zip(prompts, ROLLOUTS, strict=True)]
    labels = [label for _, _, label, _, _ in ROLLOUTS]
    return asyncio.run(executor._fetch_rewards_via_http(queries, prompts, labels))


@pytest.mark.parametrize("workers", [0, 1])
def test_openrlhf_client_gets_the_routers_values(workers: int) -> None:
    with running_reward_server(SCORER, workers=workers) as server:
        url = server.base_url + "/get_reward"
        (answer,) = fetch_with_openrlhf([url])
        shards = fetch_with_openrlhf([url, url])  # a URL list shards the rows
    results = expected()
    assert answer["rewards"] == [r["score"] for r in results]
    assert answer["rewards"] == [1.0, 0.0, 0.0, 1.0, 1.0]
    assert answer["scores"] == [r["acc"] for r in results]
    for key in ("em", "subem", "f1", "answer_found", "answer_tags", "spam_penalized"):
        assert answer["extra_logs"][key] == [r[key] for r in results]
    assert answer["extra_logs"]["failed"] == [0.0] * len(ROLLOUTS)
    assert [len(shard["rewards"]) for shard in shards] == [3, 2]
    assert [r for shard in shards for r in shard["rewards"]] == answer["rewards"]


def test_every_protocol_gives_the_same_bytes_over_http() -> None:
    with running_reward_server(SCORER, workers=1) as server:
        (openrlhf,) = fetch_with_openrlhf([server.base_url + "/get_reward"])
        rows = [
            {"data_source": source, "solution_str": response, "ground_truth": truth}
            for _, response, _, source, truth in ROLLOUTS
        ]
        status, native = post(server.base_url + "/score", {"rows": rows})
        assert status == 200
        nemo = []
        for question, response, _, source, truth in ROLLOUTS:
            request = {
                "responses_create_params": {"input": [{"role": "user", "content": question}]},
                "response": {
                    "id": "resp",
                    "object": "response",
                    "created_at": 0.0,
                    "model": "policy",
                    "output": [
                        {
                            "id": "msg",
                            "type": "message",
                            "role": "assistant",
                            "status": "completed",
                            "content": [
                                {"type": "output_text", "text": response, "annotations": []}
                            ],
                        }
                    ],
                },
                "ground_truth": truth,
                "data_source": source,
            }
            status, answer = post(server.base_url + "/verify", request)
            assert status == 200
            assert {k: answer[k] for k in request} == request
            nemo.append(answer)
        health = get(server.base_url + "/health")
    keys = native["keys"]
    for i, result in enumerate(expected()):
        wanted = orjson.dumps(result)
        rebuilt = {
            k: openrlhf["rewards"][i] if k == "score" else openrlhf["extra_logs"][k][i]
            for k in keys
        }
        assert orjson.dumps(native["results"][i]) == wanted
        assert orjson.dumps(rebuilt) == wanted
        assert orjson.dumps(nemo[i]["reward_components"]) == wanted
        assert nemo[i]["reward"] == result["score"]
    assert health["rows"] == 3 * len(ROLLOUTS)
    assert health["requests"]["/verify"] == len(ROLLOUTS)
    assert health["pool"] is not None


def test_refusals_over_http_are_one_line_json() -> None:
    with running_reward_server(SCORER, workers=0, max_rows=2, max_body_mb=0.01) as server:
        status, answer = post(server.base_url + "/score", b"{oops")
        assert status == 400 and "not JSON" in answer["error"]
        row = {"data_source": "searchR1_nq", "solution_str": "x", "ground_truth": "x"}
        status, answer = post(server.base_url + "/score", {"rows": [row] * 3})
        assert status == 413 and "--max-rows" in answer["error"]
        status, answer = post(
            server.base_url + "/score", {"rows": [{**row, "solution_str": "x" * 20000}]}
        )
        assert status == 413
        status, answer = post(server.base_url + "/nowhere", {})
        assert status == 404 and "/nowhere" in answer["error"]
        scorers = get(server.base_url + "/scorers")
    assert scorers["scorer"] == SCORER and SCORER in scorers["scorers"]
