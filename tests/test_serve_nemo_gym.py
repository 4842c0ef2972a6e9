"""The shipped NeMo-Gym resources server, started as NeMo-Gym starts it, scored over HTTP.

NeMo-Gym (https://github.com/NVIDIA-NeMo/Gym, nemo-gym 0.7.0) needs Python 3.13, so it cannot run
here; these tests do what its launcher does (``nemo_gym/cli/env.py``, ``RunHelper._start``):
the server's YAML is loaded and merged with what NeMo-Gym adds (the ``host`` and ``port`` it
picks, filled into the server's block by ``GlobalConfigDictParser.validate_and_populate_defaults``
in ``nemo_gym/global_config.py``, and its own top-level keys), the merged dict is passed as YAML
in ``NEMO_GYM_CONFIG_DICT`` with the server's id in ``NEMO_GYM_CONFIG_PATH``, and ``python
app.py`` runs in the server's directory with that directory on ``PYTHONPATH``
(``nemo_gym/cli/setup_command.py``, ``run_command``). The requests are shaped as NeMo-Gym's
``BaseVerifyRequest`` (``nemo_gym/base_resources_server.py``) with a Responses API ``response``
as its ``simple_agent`` sends it; expected values are in-process ``route``'s.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_probe import alive, children_of, still_alive
from test_cli_helpers import run_cli

from reward_plugins.router import result_schema, route

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "reward_plugins" / "data" / "nemo_gym"
SERVER_DIR = ROOT / "resources_servers" / "reward_plugins"
CONFIG = SERVER_DIR / "configs" / "reward_plugins.yaml"
SERVER_ID = "reward_plugins"
WORKERS = 1

DOMAINS = {
    "math", "coding", "agent", "knowledge", "instruction_following", "long_context",
    "safety", "games", "translation", "e2e", "rlhf", "other",
}  # fmt: skip
"""``Domain`` of ``nemo_gym/config_types.py`` (nemo-gym 0.7.0)."""

# (response text, gold field, gold, data source or None)
ROLLOUTS: list[tuple[str, str, Any, str | None]] = [
    ("<think>France.</think>\n<answer> Paris </answer>", "ground_truth",
     {"target": ["Paris", "City of Light"]}, "searchR1_nq"),
    ("<answer>Milan</answer>", "expected_answer", ["Rome"], None),
    ("I do not know.", "expected_answer", "Beijing", "searchR1_triviaqa"),
    ("<answer>new york</answer>", "ground_truth", ["New York"], "searchR1_popqa"),
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def merged_config(port: int, **settings: Any) -> dict[str, Any]:
    """The global config dict NeMo-Gym would build from the shipped YAML (plus ``settings``
    overriding the server's block, as a ``++reward_plugins.resources_servers...=`` does)."""
    config = yaml.safe_load(CONFIG.read_text())
    block = config[SERVER_ID]["resources_servers"]["reward_plugins"]
    block.update({"host": "127.0.0.1", "port": port, "workers": WORKERS, **settings})
    config.update(
        {
            "config_paths": ["resources_servers/reward_plugins/configs/reward_plugins.yaml"],
            "head_server": {"host": "127.0.0.1", "port": 11000},
            "port_range_low": 10001,
            "port_range_high": 20000,
            "disallowed_ports": [11000, port],
            "python_version": "3.13.14",
        }
    )
    return config


def launch(config: dict[str, Any], stderr: Any) -> subprocess.Popen[bytes]:
    """``python app.py`` as NeMo-Gym's ``run_command`` starts it."""
    env = {
        **os.environ,
        "NEMO_GYM_CONFIG_DICT": yaml.safe_dump(config),
        "NEMO_GYM_CONFIG_PATH": SERVER_ID,
        "PYTHONPATH": os.pathsep.join([str(SERVER_DIR), str(REPO)]),
    }
    return subprocess.Popen(
        [sys.executable, "app.py"], cwd=SERVER_DIR, env=env, stdout=stderr, stderr=stderr
    )


def call(url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_until_up(process: subprocess.Popen[bytes], url: str) -> None:
    """Poll ``url`` as NeMo-Gym's ``poll_for_status`` polls a server (the cap is a safety net)."""
    for _ in range(600):
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}")
        try:
            call(url)
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    raise AssertionError("the server did not answer")


def verify_request(response: str, field: str, gold: Any, source: str | None) -> dict[str, Any]:
    """A ``BaseVerifyRequest`` as NeMo-Gym's ``simple_agent`` posts it: the dataset row
    (``responses_create_params``, the gold, other columns) plus the model's ``response``."""
    request: dict[str, Any] = {
        "responses_create_params": {
            "input": [{"role": "user", "type": "message", "content": "Answer the question."}],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        },
        "response": {
            "id": "resp_1",
            "created_at": 0.0,
            "model": "policy_model",
            "object": "response",
            "output": [
                {
                    "id": "rs_1",
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": "<answer>wrong</answer>"}],
                },
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": response, "annotations": []}],
                },
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        },
        field: gold,
        "agent_ref": {"type": "responses_api_agents", "name": "reward_plugins_simple_agent"},
    }
    if source is not None:
        request["data_source"] = source
    return request


@pytest.fixture
def server() -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """The shipped server, started as NeMo-Gym starts it; SIGTERM-ed after the test if alive."""
    port = free_port()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"nemo-gym-server-{port}.log"
    with log.open("wb") as stderr:
        process = launch(merged_config(port), stderr)
    try:
        wait_until_up(process, f"http://127.0.0.1:{port}/health")
        yield process, f"http://127.0.0.1:{port}", log
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
        log.unlink(missing_ok=True)


def test_verify_answers_the_routers_values_and_stops_on_sigterm(
    server: tuple[subprocess.Popen[bytes], str, Path],
) -> None:
    process, url, _ = server
    answers = []
    for response, field, gold, source in ROLLOUTS:
        request = verify_request(response, field, gold, source)
        status, answer = call(url + "/verify", request)
        assert status == 200, answer
        assert {key: answer[key] for key in request} == request  # echoed
        wanted = route("compute_score", source or "searchR1_nq", response, gold, {})
        assert answer["reward_components"] == wanted
        assert answer["reward"] == wanted["score"]
        assert "mask_sample" not in answer and "failure_kind" not in answer
        answers.append(answer)
    assert [a["reward"] for a in answers] == [1.0, 0.0, 0.0, 1.0]

    failed = verify_request("<answer>x</answer>", "ground_truth", ["x"], "no_such_source")
    status, answer = call(url + "/verify", failed)
    assert status == 200
    assert answer["mask_sample"] is True
    assert answer["failure_kind"] == "reward_plugins:unknown_data_source"
    # an environment's own kind: '<server>:<kind>' (nemo_gym/failure_kinds.py, _NAMESPACED_PATTERN)
    assert re.fullmatch(r"[a-z][a-z0-9_]*:[a-z][a-z0-9_]*", answer["failure_kind"])
    assert "no_such_source" in answer["failure_reason"]
    keys = [item.key for item in result_schema("compute_score", "searchR1_nq", {})]
    assert answer["reward_components"] == dict.fromkeys(keys, 0.0)
    assert answer["reward"] == 0.0

    # what NeMo-Gym's simple_agent asks before a rollout, and its collector after
    assert call(url + "/seed_session", failed) == (200, {})
    assert call(url + "/seed_session", {"resources_session_id": "s1"}) == (
        200,
        {"resources_session_id": "s1"},
    )
    status, metrics = call(url + "/aggregate_metrics", {"verify_responses": [*answers, answer]})
    assert status == 200
    expected = {
        "mean/reward": 0.5,
        "coverage/measured_rollouts": 4,
        "coverage/masked_rollouts": 1,
    }
    assert metrics == {"agent_metrics": expected, "key_metrics": expected}

    children = children_of(process.pid)
    workers = children_of(process.pid, b"spawn_main")
    assert len(workers) == WORKERS
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    assert not any(alive(pid) for pid in workers)  # stopped before the server exited
    assert still_alive(children) == []  # the resource tracker ends a moment after the server


def test_a_refused_verify_is_one_json_line(
    server: tuple[subprocess.Popen[bytes], str, Path],
) -> None:
    _, url, _ = server
    request = verify_request("<answer>x</answer>", "ground_truth", ["x"], None)
    del request["ground_truth"]
    status, answer = call(url + "/verify", request)
    assert status == 400
    assert answer == {
        "error": "no ground truth: give 'ground_truth' (any JSON) or 'expected_answer'"
    }
    assert call(url + "/aggregate_metrics", {"verify_responses": 3})[0] == 400


def test_a_wrong_config_exits_with_one_line(tmp_path: Path) -> None:
    config = merged_config(free_port(), scorer="no_such_scorer_anywhere")
    log = tmp_path / "server.log"
    with log.open("wb") as stderr:
        process = launch(config, stderr)
    assert process.wait(timeout=120) == 1
    lines = log.read_text().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("reward_plugins (NeMo-Gym resources server): ")
    assert "no_such_scorer_anywhere" in lines[0]


def test_the_shipped_config_is_what_nemo_gym_starts() -> None:
    """What NeMo-Gym 0.7.0 requires of a resources server's config and directory."""
    config = yaml.safe_load(CONFIG.read_text())
    # one server instance: ResourcesServerTypeConfig (nemo_gym/config_types.py) holds exactly one
    # implementation under `resources_servers`
    assert list(config) == [SERVER_ID]
    assert list(config[SERVER_ID]) == ["resources_servers"]
    (name, block), *_ = config[SERVER_ID]["resources_servers"].items()
    assert len(config[SERVER_ID]["resources_servers"]) == 1
    # RunHelper._start (nemo_gym/cli/env.py) resolves the directory resources_servers/<name>
    # under NEMO_GYM_EXTRA_ROOTS and runs the entrypoint, a relative path, in it
    assert ROOT / "resources_servers" / name == SERVER_DIR
    assert not Path(block["entrypoint"]).is_absolute()
    assert (SERVER_DIR / block["entrypoint"]).is_file()
    # BaseServerInstanceConfig.validate_domain_for_resources_server: a Domain is required
    assert block["domain"] in DOMAINS
    # no host or port: NeMo-Gym fills them in (validate_and_populate_defaults)
    assert "host" not in block and "port" not in block
    # setup_env_command (nemo_gym/cli/setup_command.py): requirements.txt or pyproject.toml,
    # not both; the server's venv installs it next to nemo-gym
    assert (SERVER_DIR / "requirements.txt").read_text().split() == ["reward-plugins"]
    assert not (SERVER_DIR / "pyproject.toml").exists()
    # the server's own settings, as app.py reads them
    assert (block["scorer"], block["options"], block["data_source"]) == ("compute_score", {}, None)


def test_reward_plugins_path_nemo_gym_is_the_extra_root() -> None:
    result = run_cli("path", "nemo-gym")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{ROOT}\n"
    # the config path a user passes resolves under that root (nemo_gym/__init__.py,
    # component_search_roots: NEMO_GYM_EXTRA_ROOTS first)
    assert Path(result.stdout.strip(), "resources_servers/reward_plugins/configs").is_dir()
