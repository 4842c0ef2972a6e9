"""``reward-plugins serve-rewards``, the real command in a subprocess: every path answers the
values in-process :func:`reward_plugins.router.route` gives; the scorer, recipe, ``--set``,
``--data-source``, ``--fallback-reward``, ``--scores-key`` and ``--workers`` options reach the
server; usage errors are one line (exit 2); SIGTERM and SIGINT stop it cleanly.

The command prints ``serving SCORER (...) at URL`` once it answers; the tests read the URL there.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_probe import PROBE, alive, children_of, still_alive, write_probe_site

from reward_plugins.router import route, scorer_result_schema
from reward_plugins.serve.protocols import response_text

REPO = Path(__file__).resolve().parents[1]
NQ = "searchR1_nq"
GOLD = {"target": ["Paris"]}
RESPONSES = [
    "<think>x</think><answer>Paris</answer>",
    "<think>x</think><answer>Lyon</answer>",
    "<answer>paris!</answer>",
    "no tags at all",
]


def request(url: str, body: Any = None, timeout: float = 60) -> tuple[int, Any]:
    """``(status, decoded JSON)`` of a GET (``body`` None) or a POST of ``body`` as JSON."""
    data = None if body is None else json.dumps(body).encode()
    call = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    call.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(call, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


class Served:
    """A running ``serve-rewards`` process: its first stdout line and base URL."""

    def __init__(self, process: subprocess.Popen[str], line: str, url: str) -> None:
        self.process, self.line, self.url = process, line, url

    def stop(self, how: int = signal.SIGTERM, group: bool = False) -> tuple[int, str]:
        """Send ``how`` to the server, or to its process group (as a terminal's Ctrl-C does:
        the workers get it too); the exit status and stderr (killed, and the test failed, when
        it does not stop)."""
        if group:
            os.killpg(self.process.pid, how)
        else:
            self.process.send_signal(how)
        try:
            _, stderr = self.process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate(timeout=30)
            raise
        return self.process.returncode, stderr


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def command(arguments: list[str]) -> list[str]:
    return [sys.executable, "-m", "reward_plugins", "serve-rewards", *arguments]


def start(arguments: list[str], env: dict[str, str]) -> Served:
    """``serve-rewards --port 0 ARGUMENTS``, once it printed its ``serving`` line."""
    process = subprocess.Popen(
        command(["--port", "0", *arguments]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env, cwd=REPO, start_new_session=True,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r" at (http://127\.0\.0\.1:\d+)\n$", line)
    if not match:
        process.kill()
        _, stderr = process.communicate(timeout=30)
        raise AssertionError((line, stderr))
    return Served(process, line, match[1])


@pytest.fixture(scope="module")
def served(env: dict[str, str]) -> Iterator[Served]:
    """The default scorer, one worker."""
    server = start(["--workers", "1"], env)
    yield server
    if server.process.poll() is None:
        server.stop()


def native_rows(responses: list[str], source: str | None = NQ) -> list[dict[str, Any]]:
    rows = [{"solution_str": r, "ground_truth": GOLD, "extra_info": {"i": i}}
            for i, r in enumerate(responses)]  # fmt: skip
    if source is not None:
        for row in rows:
            row["data_source"] = source
    return rows


def routed(responses: list[str], options: dict[str, Any] | None = None,
           scorer: str = "compute_score", source: str = NQ) -> list[dict[str, Any]]:  # fmt: skip
    return [route(scorer, source, r, GOLD, options or {}, extra_info={"i": i})
            for i, r in enumerate(responses)]  # fmt: skip


def probe(response: str) -> dict[str, Any]:
    return {"data_source": PROBE, "solution_str": response, "ground_truth": ["paris"]}


def post_raw(url: str, rows: list[dict[str, Any]]) -> int | str:
    """The status of a ``/score`` request, or the name of the error that ended it."""
    try:
        return request(url, {"rows": rows})[0]
    except (OSError, http.client.HTTPException) as error:
        return type(error).__name__


def health_busy(url: str) -> bool:
    """Whether the server's pool has a row pending (the waiting client's)."""
    return bool(request(url + "/health")[1]["pool"]["rows_pending"])


# --- every path, the default server --------------------------------------------------------


def test_the_serving_line_names_scorer_and_isolation(served: Served) -> None:
    assert served.line == f"serving compute_score (1 worker(s)) at {served.url}\n"


def test_score_gives_the_routers_dicts(served: Served) -> None:
    status, body = request(served.url + "/score", {"rows": native_rows(RESPONSES)})
    assert status == 200
    keys = [item.key for item in scorer_result_schema("compute_score", {})]
    assert body["keys"] == keys
    assert body["results"] == routed(RESPONSES)
    assert [r["score"] for r in body["results"]] == [1.0, 0.0, 1.0, 0.0]
    assert body["failures"] == [None] * 4
    # options of the request are laid over the server's
    status, body = request(
        served.url + "/score", {"rows": native_rows(RESPONSES), "options": {"format_score": 0.2}}
    )
    assert status == 200 and body["results"] == routed(RESPONSES, {"format_score": 0.2})
    assert [r["score"] for r in body["results"]] == [1.0, 0.2, 1.0, 0.0]


def test_get_reward_speaks_openrlhf(served: Served) -> None:
    prompts = [f"<|im_start|>user\nQuestion {i}?<|im_end|>\n<|im_start|>assistant\n"
               for i in range(4)]  # fmt: skip
    queries = [p + r + "<|im_end|>" for p, r in zip(prompts, RESPONSES, strict=True)]
    labels = [json.dumps({"data_source": NQ, "ground_truth": GOLD})] * 3 + ["Paris"]
    status, body = request(
        served.url + "/get_reward", {"query": queries, "prompts": prompts, "labels": labels}
    )
    assert status == 200
    texts = [response_text(q, p) for q, p in zip(queries, prompts, strict=True)]
    assert texts == RESPONSES
    want = [route("compute_score", NQ, t, GOLD if i < 3 else "Paris", {})
            for i, t in enumerate(texts)]  # fmt: skip
    assert body["rewards"] == [w["score"] for w in want] == [1.0, 0.0, 1.0, 0.0]
    assert body["scores"] == [w["acc"] for w in want]
    logs = body["extra_logs"]
    assert logs["failed"] == [0.0] * 4
    for key in want[0]:
        if key != "score":
            assert logs[key] == [w[key] for w in want], key


def test_verify_speaks_nemo_gym(served: Served) -> None:
    verify = {
        "responses_create_params": {"input": [{"role": "user", "content": "Capital?"}]},
        "response": {"output": [{"type": "message", "role": "assistant",
                                 "content": [{"type": "output_text", "text": RESPONSES[0]}]}]},
        "ground_truth": GOLD,
    }  # fmt: skip
    status, body = request(served.url + "/verify", verify)
    want = route("compute_score", NQ, RESPONSES[0], GOLD, {})
    assert status == 200
    top_level = {key: value for key, value in want.items() if key != "score"}
    assert body == {**verify, **top_level, "reward": want["score"], "reward_components": want}
    assert body["reward"] == 1.0 and "mask_sample" not in body


def test_health_and_scorers(served: Served) -> None:
    status, scorers = request(served.url + "/scorers")
    assert status == 200
    assert scorers["scorer"] == "compute_score" and scorers["data_source"] == NQ
    assert scorers["options"] == {} and scorers["fallback_reward"] == 0.0
    schema = scorer_result_schema("compute_score", {})
    assert scorers["results"] == [{"key": i.key, "kind": i.kind, "label": i.label} for i in schema]
    assert "compute_score" in scorers["scorers"] and "compute_score_composed" in scorers["scorers"]
    status, health = request(served.url + "/health")
    assert status == 200 and health["status"] == "ok" and health["scorer"] == "compute_score"
    pool = health["pool"]
    assert pool["workers"] == 1 and pool["workers_alive"] == 1 and pool["replaced"] == {}
    assert health["limits"]["max_rows"] == 16384 and health["refused"] == {}


@pytest.mark.parametrize(
    ("how", "group"),
    [
        (signal.SIGTERM, False),
        pytest.param(signal.SIGINT, False, marks=pytest.mark.slow),  # a server with 2 workers each
        pytest.param(signal.SIGINT, True, marks=pytest.mark.slow),
    ],
)
def test_a_signal_stops_it_cleanly_mid_request(
    env: dict[str, str], tmp_path: Path, how: int, group: bool
) -> None:
    """Stopped while a worker is stuck on a row (the probe's ``HANG``) and a client waits."""
    probe_env = {**env, "PYTHONPATH": write_probe_site(tmp_path)}
    server = start(["--workers", "2", "--scorer", PROBE, "--row-timeout", "60"], probe_env)
    waiting: list[Any] = []
    try:
        assert request(server.url + "/score", {"rows": [probe("paris")]})[0] == 200
        workers = children_of(server.process.pid, b"spawn_main")
        assert len(workers) == 2 and all(alive(pid) for pid in workers)
        children = children_of(server.process.pid)  # the workers, and any helper process
        client = threading.Thread(
            target=lambda: waiting.append(post_raw(server.url + "/score", [probe("HANG")]))
        )
        client.start()
        until = time.monotonic() + 30
        while not health_busy(server.url) and time.monotonic() < until:
            time.sleep(0.05)
    finally:
        code, stderr = server.stop(how, group)
    client.join(timeout=30)
    assert waiting and waiting[0] != 200  # the waiting client is let go, not answered 200
    assert code == 0 and "Traceback" not in stderr and stderr == "", stderr
    assert not any(alive(pid) for pid in workers)  # stopped before the server exited
    assert still_alive(children) == []  # the resource tracker ends a moment after the server


def test_a_signal_stops_an_in_process_server_stuck_on_a_row(
    env: dict[str, str], tmp_path: Path
) -> None:
    """``--workers 0``: the hung row holds a thread of the server, which still stops."""
    probe_env = {**env, "PYTHONPATH": write_probe_site(tmp_path)}
    server = start(["--workers", "0", "--scorer", PROBE, "--request-timeout", "600"], probe_env)
    waiting: list[Any] = []
    try:
        client = threading.Thread(
            target=lambda: waiting.append(post_raw(server.url + "/score", [probe("HANG")]))
        )
        client.start()
        until = time.monotonic() + 30
        while request(server.url + "/health")[1]["requests"].get("/score") != 1:
            assert time.monotonic() < until
            time.sleep(0.05)
        time.sleep(0.2)  # the row is in the scorer's sleep
    finally:
        code, stderr = server.stop(signal.SIGTERM)
    client.join(timeout=30)
    assert code == 0 and stderr == "", stderr
    assert waiting and waiting[0] != 200


# --- the options reach the scorer ----------------------------------------------------------


def test_options_data_source_fallback_scores_key_in_process(env: dict[str, str]) -> None:
    arguments = ["--workers", "0", "--set", "format_score=0.2", "--data-source", NQ,
                 "--fallback-reward", "-0.5", "--scores-key", "f1"]  # fmt: skip
    server = start(arguments, env)
    try:
        assert server.line == f"serving compute_score (in-process, no isolation) at {server.url}\n"
        assert children_of(server.process.pid) == []  # --workers 0: no worker process
        rows = native_rows(RESPONSES, source=None)  # --data-source fills them in
        rows.append({"data_source": "nowhere", "solution_str": "x", "ground_truth": GOLD})
        status, body = request(server.url + "/score", {"rows": rows})
        assert status == 200
        assert body["results"][:4] == routed(RESPONSES, {"format_score": 0.2})
        assert [r["score"] for r in body["results"][:4]] == [1.0, 0.2, 1.0, 0.0]
        failed = body["results"][4]
        assert failed["score"] == -0.5 and {v for k, v in failed.items() if k != "score"} == {0.0}
        assert body["failures"][4]["kind"] == "unknown data source"
        prompts = ["Q: capital?\nA: "] * 2
        status, body = request(server.url + "/get_reward", {
            "query": [p + r for p, r in zip(prompts, ["<answer>Paris is it</answer>", "<answer>x"],
                                            strict=True)],
            "prompts": prompts, "labels": ["Paris", ""],
        })  # fmt: skip
        want = route("compute_score", NQ, "<answer>Paris is it</answer>", "Paris",
                     {"format_score": 0.2})  # fmt: skip
        assert status == 200
        assert body["rewards"] == [want["score"], -0.5]
        assert body["scores"] == [want["f1"], 0.0] and 0 < want["f1"] < 1  # --scores-key f1
        assert body["extra_logs"]["failed"] == [0.0, 1.0]
        assert request(server.url + "/scorers")[1]["fallback_reward"] == -0.5
    finally:
        code, stderr = server.stop(signal.SIGINT)
    assert code == 0 and "Traceback" not in stderr


def test_a_recipe_shipped_or_a_file(env: dict[str, str], tmp_path: Path) -> None:
    from reward_plugins.plugins.composed import recipe_path

    shipped = recipe_path("search_r1_shaped").read_text(encoding="utf-8")
    assert "structure_format_score: 0.2" in shipped
    mine = tmp_path / "mine.yaml"
    mine.write_text(shipped.replace("structure_format_score: 0.2", "structure_format_score: 0.3"))
    for recipe, wrong_but_well_formed in (("search_r1_shaped", 0.2), (str(mine), 0.3)):
        server = start(["--recipe", recipe, "--workers", "1"], env)
        try:
            assert server.line.startswith("serving compute_score_composed (1 worker(s)) at ")
            status, body = request(server.url + "/score", {"rows": native_rows(RESPONSES)})
            want = routed(RESPONSES, {"recipe": recipe}, scorer="compute_score_composed")
            assert status == 200 and body["results"] == want
            # format-aware: a well-formed wrong answer earns the structure format score, a
            # malformed right one loses it
            pattern = [1.0, wrong_but_well_formed, 1.0 - wrong_but_well_formed, 0.0]
            assert [w["score"] for w in want] == pytest.approx(pattern)
            assert request(server.url + "/scorers")[1]["options"] == {"recipe": recipe}
        finally:
            code, stderr = server.stop(signal.SIGINT)
        assert code == 0 and "Traceback" not in stderr


# --- usage errors: one line, exit 2 ----------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--port", "-1"], "--port must be between 0 and 65535, got -1"),
        (["--port", "x"], "argument --port: invalid int value: 'x'"),
        (["--workers", "-1"], "--workers must be at least 0"),
        (["--replicas", "2"], "--replicas and --ray-address need --ray"),
        (["--scorer", "no_such_scorer"], "argument --scorer: no scorer is registered as "
                                          "'no_such_scorer'"),
        (["--set", "format_score=abc"], "compute_score: option 'format_score' must be a finite"),
        (["--set", "nosuch=1"], "compute_score: unknown option(s) 'nosuch'"),
        (["--max-rows", "0"], "--max-rows: expected an int of at least 1, got 0"),
        (["--request-timeout", "nan"], "--request-timeout: expected a number of at least"),
        (["--recipe", "missing"], "--recipe: recipe 'missing': no shipped recipe of that name"),
        (["--recipe", "search_r1_em", "--scorer", "compute_score"], "--recipe pays "
                                                                    "compute_score_composed"),
        (["--data-source", "nowhere"], "no scorer is registered for data_source='nowhere'"),
        (["--scores-key", "zzz"], "--scores-key: 'zzz' is not a result key of compute_score"),
        (["--fallback-reward", "nan"], "--fallback-reward: expected a finite number, got nan"),
        (["--row-timeout", "0"], "--row-timeout must be a number > 0"),
        (["--max-worker-rss-mb", "1", "--workers", "1"], "a fresh worker already uses"),
    ],
)  # fmt: skip
def test_usage_errors_are_one_line(
    tmp_path: Path, env: dict[str, str], arguments: list[str], message: str
) -> None:
    result = subprocess.run(
        command(["--port", "0", *arguments]), capture_output=True, text=True, cwd=tmp_path,
        timeout=60, env=env,
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"reward-plugins: error: serve-rewards: {message}"), lines
    for setting in ("_timeout", "_reward", "_key", "_rss_mb"):  # options, not field names
        assert setting not in lines[0], lines


def test_a_port_in_use_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [*command(["--port", str(port), "--workers", "1"])], capture_output=True, text=True,
            cwd=tmp_path, timeout=60, env=env,
        )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"reward-plugins: error: serve-rewards: 127.0.0.1:{port}: "), lines
    assert "in use" in lines[0]
