"""``compute_score_remote`` against real HTTP servers.

Faults (a 503 then an answer, a hang, a dead port, malformed and huge answers, failed rows) come
from a small scripted aiohttp server on 127.0.0.1 that records every request; its ``ok`` answer
scores a row as the length of its ``solution_str``, so each caller can check it got its own
row back. Correctness (equal dicts to in-process scoring) is checked against the package's own
reward server, ``reward_plugins.serve.service.running_reward_server``.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import inspect
import json
import logging
import pickle
import socket
import subprocess
import sys
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import numpy as np
import pytest
from aiohttp import web

import reward_plugins
from reward_plugins.serve import client
from reward_plugins.serve.client import RemoteRowFailed, RemoteScoringError, compute_score_remote

Behaviour = str | Callable[[dict[str, Any]], Awaitable[web.StreamResponse]]


class ScriptedServer:
    """An aiohttp server answering ``POST /score`` by a script: one behaviour per request
    (the last one repeats). Behaviours: ``ok``, ``503``, ``500``, ``400``, ``hang``,
    ``not_json``, ``nan``, ``short``, ``keys``, ``huge``, ``fail_second``."""

    def __init__(self, *script: Behaviour) -> None:
        self.script = list(script) or ["ok"]
        self.requests: list[dict[str, Any]] = []
        self.peers: list[Any] = []
        self.runner: web.AppRunner | None = None
        self.base_url = ""
        self.release = asyncio.Event()

    async def __aenter__(self) -> ScriptedServer:
        app = web.Application()
        app.router.add_post("/score", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base_url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        self.release.set()  # a hanging handler returns, so the shutdown does not wait for it
        await self.runner.cleanup()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.peers.append(
            request.transport.get_extra_info("peername") if request.transport else None
        )
        step = self.script[min(len(self.requests) - 1, len(self.script) - 1)]
        rows = body["rows"]
        results = [{"score": float(len(r["solution_str"])), "answer_tags": 1} for r in rows]
        answer: dict[str, Any] = {
            "keys": ["score", "answer_tags"],
            "results": results,
            "failures": [None] * len(rows),
        }
        if callable(step):
            return await step(body)
        if step == "ok":
            return web.json_response(answer)
        if step in ("503", "500"):
            return web.json_response(
                {"error": "busy"}, status=int(step), headers={"Retry-After": "0"}
            )
        if step == "400":
            return web.json_response({"error": "rows[0].solution_str: over the cap"}, status=400)
        if step == "hang":
            await self.release.wait()
            return web.json_response(answer)
        if step == "not_json":
            return web.Response(text="<html>proxy error</html>")
        if step == "nan":
            return web.Response(text=json.dumps(answer).replace("1.0", "NaN", 1))
        if step == "short":
            answer["results"] = results[:-1]
            return web.json_response(answer)
        if step == "keys":
            results[0].pop("answer_tags")
            return web.json_response(answer)
        if step == "huge":
            answer["padding"] = "x" * 200_000
            return web.json_response(answer)
        if step == "fail_second":
            answer["results"][1] = {"score": 0.0, "answer_tags": 0}
            answer["failures"][1] = {"kind": "timeout", "message": "ran past 10 s"}
            return web.json_response(answer)
        raise AssertionError(step)


def dead_url() -> str:
    """A local port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def run(coroutine: Awaitable[Any]) -> Any:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


async def score(text: str, url: Any, **options: Any) -> dict[str, Any]:
    return await compute_score_remote("nq", text, ["x"], None, url=url, **options)


@pytest.fixture(autouse=True)
def no_server_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(client.URL_ENV, raising=False)


# --- batching, options, sessions --------------------------------------------------------------


def test_concurrent_calls_are_batched_and_each_gets_its_row() -> None:
    texts = [f"answer {'y' * i}" for i in range(10)]

    async def main() -> tuple[list[dict[str, Any]], ScriptedServer]:
        async with ScriptedServer() as server:
            results = await asyncio.gather(
                *(
                    score(t, server.base_url, remote_batch_size=4, remote_batch_wait=0.2)
                    for t in texts
                )
            )
        return list(results), server

    results, server = run(main())
    assert [r["score"] for r in results] == [float(len(t)) for t in texts]
    assert [len(body["rows"]) for body in server.requests] == [4, 4, 2]
    sent = [row["solution_str"] for body in server.requests for row in body["rows"]]
    assert sent == texts


def test_rows_and_options_are_sent_as_the_native_protocol() -> None:
    async def main() -> ScriptedServer:
        async with ScriptedServer() as server:
            await asyncio.gather(
                compute_score_remote(
                    "searchR1_nq",
                    "<answer>Paris</answer>",
                    {"target": np.array(["Paris", "City of Paris"], dtype=object)},
                    {"index": np.int64(3), "num_turns": None, "scores": np.array([0.5, 1.0])},
                    url=server.base_url,
                    format_score=0.1,
                    reward_router_address=None,  # verl's reward-model keywords: not options
                    remote_retries=1,
                ),
                compute_score_remote(
                    "searchR1_nq", "<answer>Lyon</answer>", ["Paris"], url=server.base_url,
                    score=2.0,
                ),
            )  # fmt: skip
        return server

    server = run(main())
    bodies = sorted(server.requests, key=lambda b: json.dumps(b["options"]))
    assert bodies == [
        {
            "rows": [
                {
                    "data_source": "searchR1_nq",
                    "solution_str": "<answer>Paris</answer>",
                    "ground_truth": {"target": ["Paris", "City of Paris"]},
                    "extra_info": {"index": 3, "num_turns": None, "scores": [0.5, 1.0]},
                }
            ],
            "options": {"format_score": 0.1},
        },
        {
            "rows": [
                {
                    "data_source": "searchR1_nq",
                    "solution_str": "<answer>Lyon</answer>",
                    "ground_truth": ["Paris"],
                    "extra_info": None,
                }
            ],
            "options": {"score": 2.0},
        },
    ]


def test_one_connection_is_reused_and_the_session_closed_at_loop_exit() -> None:
    async def main() -> ScriptedServer:
        async with ScriptedServer() as server:
            for i in range(4):
                await score("a" * i, server.base_url)
        return server

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        server = run(main())
        gc.collect()
    assert len(server.requests) == 4
    assert len(set(server.peers)) == 1  # the same client socket every time
    assert not [w for w in caught if "nclosed" in str(w.message)]
    assert not client._states


def test_aclose_closes_the_running_loops_session() -> None:
    async def main() -> tuple[bool, dict[str, Any]]:
        async with ScriptedServer() as server:
            await score("a", server.base_url)
            (state,) = client._states.values()
            (servers,) = state.servers.values()
            await client.aclose()
            closed = servers.session.closed
            again = await score("bb", server.base_url)  # a new session
        return closed, again

    closed, again = run(main())
    assert closed and again["score"] == 2.0


# --- retries, failover, deadline ---------------------------------------------------------------


def test_503_is_retried_with_retry_after() -> None:
    async def main() -> tuple[dict[str, Any], ScriptedServer]:
        async with ScriptedServer("503", "500", "ok") as server:
            result = await score("abc", server.base_url)
        return result, server

    result, server = run(main())
    assert result == {"score": 3.0, "answer_tags": 1}
    assert len(server.requests) == 3


def test_retries_are_bounded() -> None:
    async def main() -> ScriptedServer:
        async with ScriptedServer("503") as server:
            with pytest.raises(RemoteScoringError, match=r"failed 3 times.*HTTP 503: busy"):
                await score("abc", server.base_url, remote_retries=2)
        return server

    assert len(run(main()).requests) == 3


def test_failover_skips_a_dead_url() -> None:
    dead = dead_url()

    async def main() -> tuple[list[float], ScriptedServer]:
        async with ScriptedServer() as server:
            scores = [(await score("a" * i, [dead, server.base_url]))["score"] for i in range(4)]
        return scores, server

    scores, server = run(main())
    assert scores == [0.0, 1.0, 2.0, 3.0]
    assert len(server.requests) == 4


def test_round_robin_across_urls() -> None:
    async def main() -> tuple[ScriptedServer, ScriptedServer]:
        async with ScriptedServer() as first, ScriptedServer() as second:
            urls = f"{first.base_url}, {second.base_url}/"
            for i in range(6):
                await score("a" * i, urls)
        return first, second

    first, second = run(main())
    assert len(first.requests) == len(second.requests) == 3


def test_dead_urls_only_is_a_clear_error() -> None:
    dead = dead_url()
    with pytest.raises(RemoteScoringError, match=rf"failed 2 times.*{dead}/score"):
        run(score("a", dead, remote_retries=1))


def test_a_hanging_server_hits_the_deadline() -> None:
    async def main() -> None:
        async with ScriptedServer("hang") as server:
            with pytest.raises(RemoteScoringError, match=rf"{server.base_url}: no answer within"):
                await score("a", server.base_url, remote_timeout=0.3)

    run(main())


def test_a_hanging_server_is_left_for_the_next_url_after_the_attempt_timeout() -> None:
    async def main() -> tuple[dict[str, Any], ScriptedServer]:
        async with ScriptedServer("hang") as hung, ScriptedServer() as good:
            urls = [hung.base_url, good.base_url]
            result = await score("abc", urls, remote_timeout=30, remote_attempt_timeout=0.3)
        return result, good

    result, good = run(main())
    assert result["score"] == 3.0
    assert len(good.requests) == 1


def test_the_attempt_timeout_does_not_cut_a_lone_servers_deadline() -> None:
    async def main() -> None:
        async with ScriptedServer("hang") as server:
            with pytest.raises(RemoteScoringError, match=r"no answer within remote_timeout=0.6"):
                await score("a", server.base_url, remote_timeout=0.6, remote_attempt_timeout=0.1)

    run(main())


def test_a_refusal_is_not_retried() -> None:
    async def main() -> ScriptedServer:
        async with ScriptedServer("400") as server:
            with pytest.raises(
                RemoteScoringError, match=r"refused the request: HTTP 400: rows\[0\].solution_str"
            ):
                await score("a", server.base_url)
        return server

    assert len(run(main()).requests) == 1


# --- bad answers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("not_json", "malformed answer: not JSON"),
        ("nan", "malformed answer: not JSON .*non-finite number NaN"),
        ("short", "malformed answer: 'results' must be a list of 2 rows, got 1"),
        ("keys", r"malformed answer: results\[0\] does not hold exactly the keys"),
        ("huge", "the answer exceeds remote_max_response_mb"),
    ],
)
def test_bad_answers_are_clear_errors_naming_the_url(step: str, message: str) -> None:
    async def main() -> None:
        async with ScriptedServer(step) as server:
            with pytest.raises(RemoteScoringError, match=rf"{server.base_url}/score: {message}"):
                await asyncio.gather(
                    *(score(t, server.base_url, remote_max_response_mb=0.1) for t in ("a", "b"))
                )

    run(main())


def test_failed_rows_return_the_fallback_dict_and_log_once_per_kind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> list[dict[str, Any]]:
        async with ScriptedServer("fail_second") as server:
            return list(await asyncio.gather(*(score(t, server.base_url) for t in "abc")))

    with caplog.at_level(logging.WARNING, logger=client.__name__):
        results = run(main())
    assert results == [
        {"score": 1.0, "answer_tags": 1},
        {"score": 0.0, "answer_tags": 0},
        {"score": 1.0, "answer_tags": 1},
    ]
    (record,) = caplog.records
    assert "1 of 3 rows failed (timeout)" in record.getMessage()
    assert "ran past 10 s" in record.getMessage()


def test_failed_rows_raise_on_request() -> None:
    async def main() -> list[Any]:
        async with ScriptedServer("fail_second") as server:
            return list(
                await asyncio.gather(
                    *(score(t, server.base_url, remote_on_failure="raise") for t in "abc"),
                    return_exceptions=True,
                )
            )

    first, failed, third = run(main())
    assert first["score"] == third["score"] == 1.0
    assert isinstance(failed, RemoteRowFailed)
    assert failed.kind == "timeout" and failed.result == {"score": 0.0, "answer_tags": 0}


# --- configuration -----------------------------------------------------------------------------


def test_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> dict[str, Any]:
        async with ScriptedServer() as server:
            monkeypatch.setenv(client.URL_ENV, server.base_url)
            return await score("abcd", None)

    assert run(main())["score"] == 4.0


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (None, "no server URL.*REWARD_PLUGINS_SERVER_URL"),
        ("localhost:8000", "invalid url 'localhost:8000': expected http://HOST:PORT"),
        ("ftp://host:1", "expected http://HOST:PORT"),
        ("http://host:99999", "invalid url"),
        ("http://host:1/?x=1", "no query"),
        (" , ", "invalid url ''"),
        (8000, "url must be a string or a list of strings, got int"),
        (["http://a:1", 2], "url entries must be strings, got int"),
    ],
)
def test_bad_urls_are_clear_errors(url: Any, message: str) -> None:
    with pytest.raises(reward_plugins.InvalidOption, match=message):
        run(score("a", url))


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            {"remote_tiemout": 1},
            "unknown setting 'remote_tiemout'; known: remote_attempt_timeout, remote_batch_size",
        ),
        ({"remote_timeout": 0}, "remote_timeout must be a positive finite number, got 0 .int."),
        ({"remote_retries": True}, "remote_retries must be an int >= 0, got True .bool."),
        ({"remote_batch_size": 0}, "remote_batch_size must be an int >= 1"),
        ({"remote_batch_wait": 5}, r"remote_batch_wait must be a number of seconds in \[0, 1\]"),
        ({"remote_on_failure": "zero"}, "remote_on_failure must be 'fallback' or 'raise'"),
    ],
)
def test_bad_settings_are_clear_errors(setting: dict[str, Any], message: str) -> None:
    with pytest.raises(reward_plugins.InvalidOption, match=message):
        run(score("a", "http://127.0.0.1:1", **setting))


def test_rows_that_are_not_json_are_clear_errors() -> None:
    with pytest.raises(reward_plugins.InvalidInput, match=r"extra_info .* \(dict\).*object"):
        run(compute_score_remote("nq", "a", ["x"], {"bad": object()}, url="http://h:1"))
    with pytest.raises(
        reward_plugins.InvalidInput, match=r"extra_info .*\(dict\).*Out of range float"
    ):
        run(compute_score_remote("nq", "a", ["x"], {"bad": float("nan")}, url="http://h:1"))
    with pytest.raises(reward_plugins.InvalidInput, match="solution_str must be a str, got bytes"):
        run(compute_score_remote("nq", b"a", ["x"], url="http://h:1"))  # type: ignore[arg-type]


@pytest.mark.slow  # imports verl
def test_loadable_and_picklable_as_verl_loads_it() -> None:
    from verl.trainer.ppo.reward import _call_with_kwargs_async
    from verl.utils.import_utils import load_extern_object

    loaded = load_extern_object("pkg://reward_plugins", "compute_score_remote")
    assert loaded is compute_score_remote is reward_plugins.compute_score_remote
    assert inspect.iscoroutinefunction(loaded)
    wrapped = functools.partial(_call_with_kwargs_async, loaded, {"url": "http://127.0.0.1:1"})
    assert inspect.iscoroutinefunction(wrapped)
    again = pickle.loads(pickle.dumps(wrapped))
    assert again.args == (compute_score_remote, {"url": "http://127.0.0.1:1"})


def test_import_reward_plugins_does_not_import_aiohttp() -> None:
    code = "import sys, reward_plugins; print('aiohttp' in sys.modules)"
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "False"


# --- the package's own reward server: equal to in-process scoring ------------------------------


@pytest.fixture(scope="module")
def reward_server() -> Iterator[str]:
    from reward_plugins.serve.service import running_reward_server

    with running_reward_server("compute_score", workers=1) as server:
        yield server.base_url


SAMPLES = [
    ("searchR1_nq", "<think>x</think><answer> Paris </answer>", {"target": ["Paris"]}),
    ("searchR1_triviaqa", "<answer>Marlowe</answer>", {"target": ["Shakespeare"]}),
    ("searchR1_nq", "no tags at all", {"target": np.array(["Danube"], dtype=object)}),
    ("searchR1_popqa", "<answer>Tokyo</answer>" * 11, {"target": ["Tokyo"]}),
]


@pytest.mark.parametrize("options", [{}, {"format_score": 0.1, "score": 2.0}])
def test_real_server_equals_in_process_scoring(reward_server: str, options: dict[str, Any]) -> None:
    async def main() -> list[dict[str, Any]]:
        return list(
            await asyncio.gather(
                *(
                    compute_score_remote(s, r, g, {"index": i}, url=reward_server, **options)
                    for i, (s, r, g) in enumerate(SAMPLES)
                )
            )
        )

    remote = run(main())
    local = [
        reward_plugins.compute_score(s, r, g, {"index": i}, **options)
        for i, (s, r, g) in enumerate(SAMPLES)
    ]
    assert remote == local
    assert [list(d) for d in remote] == [list(d) for d in local]
    assert {r["score"] for r in remote} == (
        {1.0, 0.0, 0.25} if not options else {2.0, 0.1, 0.0, 0.5}
    )


def test_real_server_behind_a_dead_url(reward_server: str) -> None:
    sample = SAMPLES[0]
    remote = run(compute_score_remote(*sample, url=[dead_url(), reward_server]))
    assert remote == reward_plugins.compute_score(*sample)


def test_real_server_failed_row_keeps_the_keys(
    reward_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A ground truth the scorer refuses is a failed row: its fallback dict has every key."""

    async def main() -> list[dict[str, Any]]:
        good = compute_score_remote(*SAMPLES[0], url=reward_server)
        bad = compute_score_remote("searchR1_nq", "<answer>Paris</answer>", None, url=reward_server)
        return list(await asyncio.gather(good, bad))

    with caplog.at_level(logging.WARNING, logger=client.__name__):
        good, bad = run(main())
    assert list(bad) == list(good)
    assert bad == dict.fromkeys(good, 0.0) | {"score": 0.0}
    assert "invalid ground truth" in caplog.text
