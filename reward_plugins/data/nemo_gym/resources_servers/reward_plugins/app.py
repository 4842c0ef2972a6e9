"""NeMo-Gym resources server ``reward_plugins``: a reward-plugins scorer behind ``POST /verify``.

NeMo-Gym (https://github.com/NVIDIA-NeMo/Gym) starts it as it starts any resources server
(``nemo_gym/cli/env.py``, ``RunHelper``): ``python app.py`` in this directory, in a virtual
environment holding ``requirements.txt``, with the merged configuration as YAML in
``NEMO_GYM_CONFIG_DICT`` and this server's id (its top-level key) in ``NEMO_GYM_CONFIG_PATH``.
Its block (``<id>.resources_servers.reward_plugins``, see ``configs/reward_plugins.yaml``) holds
the ``host`` and ``port`` NeMo-Gym chose and the scorer's settings: ``scorer``, ``options``,
``data_source``, ``workers``, ``row_timeout``, ``fallback_reward`` and ``limits``.

The server is reward-plugins' own (:class:`reward_plugins.serve.service.RewardServer`): its
``/verify`` is documented in :mod:`reward_plugins.serve.protocols`. NeMo-Gym's agents also call
a resources server's ``/seed_session`` before a rollout and ``/aggregate_metrics`` after a
collection (``responses_api_agents/simple_agent/app.py``); this file answers those, and
``/close_session``, as a stateless server does (``nemo_gym/base_resources_server.py``:
``SimpleResourcesServer``), and hands every other path to the reward server. It stops on
SIGTERM (how NeMo-Gym stops its servers), its scorer processes with it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import orjson
import yaml

from reward_plugins.errors import InvalidInput, RewardPluginsError
from reward_plugins.serve.http import Handler, HttpServer, Refusal, Request, serve_until_signal
from reward_plugins.serve.protocols import load_body
from reward_plugins.serve.service import RewardServer, ServiceConfig, ServiceLimits

CONFIG_DICT_VARIABLE = "NEMO_GYM_CONFIG_DICT"
CONFIG_PATH_VARIABLE = "NEMO_GYM_CONFIG_PATH"
SERVER_TYPE = "resources_servers"
SETTINGS = ("scorer", "options", "data_source", "workers", "row_timeout", "fallback_reward")

logger = logging.getLogger("reward_plugins.nemo_gym")


def server_block(environ: Mapping[str, str]) -> dict[str, Any]:
    """This server's block of the configuration NeMo-Gym passed in ``environ``.

    Raises:
        InvalidInput: a variable is missing, the configuration is not YAML, or it has no
            ``<id>.resources_servers.<name>`` mapping.
    """
    text, server_id = environ.get(CONFIG_DICT_VARIABLE), environ.get(CONFIG_PATH_VARIABLE)
    if not text or not server_id:
        raise InvalidInput(
            f"{CONFIG_DICT_VARIABLE} and {CONFIG_PATH_VARIABLE} must be set: NeMo-Gym starts this "
            "server (ng_run), not a shell"
        )
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise InvalidInput(f"{CONFIG_DICT_VARIABLE}: not YAML: {error}") from None
    servers = config.get(server_id) if isinstance(config, dict) else None
    servers = servers.get(SERVER_TYPE) if isinstance(servers, dict) else None
    block = next(iter(servers.values()), None) if isinstance(servers, dict) else None
    if not isinstance(block, dict):
        raise InvalidInput(
            f"{CONFIG_DICT_VARIABLE}: no mapping at {server_id}.{SERVER_TYPE}.<name>, got "
            f"{type(block).__name__}"
        )
    return block


def reward_server(block: Mapping[str, Any]) -> RewardServer:
    """The reward server a block configures, answering NeMo-Gym's session and metrics paths.

    Raises:
        InvalidInput, UnknownScorer, UnknownDataSource, InvalidOption, PoolError: a setting is
            wrong (named).
    """
    settings = {name: block.get(name) for name in SETTINGS}
    for name, expected in (("options", dict), ("limits", dict)):
        if not isinstance(block.get(name) or {}, expected):
            raise InvalidInput(f"{name}: expected a mapping, got {type(block.get(name)).__name__}")
    try:
        limits = ServiceLimits(**(block.get("limits") or {}))
    except TypeError as error:
        raise InvalidInput(f"limits: {error}") from None
    config = ServiceConfig(
        scorer=settings["scorer"] or "compute_score",
        options=dict(settings["options"] or {}),
        data_source=settings["data_source"],
        fallback_reward=_setting(settings, "fallback_reward", 0.0),
        limits=limits,
    )
    server = RewardServer(
        config,
        workers=int(_setting(settings, "workers", 2)),
        row_timeout=_setting(settings, "row_timeout", 10.0),
    )
    server.http = HttpServer(NemoGymPaths(server.service.handle).handle, limits, logger)
    return server


def _setting(settings: Mapping[str, Any], name: str, default: float) -> float:
    value = settings[name]
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{name}: expected a number, got {value!r} ({type(value).__name__})")
    return value


class NemoGymPaths:
    """NeMo-Gym's resources-server paths that are not scoring: ``/seed_session`` and
    ``/close_session`` (no per-rollout state: the session id is echoed) and
    ``/aggregate_metrics`` (``mean/reward`` over the unmasked verify responses, and the
    ``coverage/*`` counts when some are masked, as ``nemo_gym/reward_profile.py`` names them);
    every other request goes to ``handle``."""

    def __init__(self, handle: Handler) -> None:
        self.service_handle = handle

    async def handle(self, request: Request) -> bytes:
        """Answer one request (a :data:`~reward_plugins.serve.http.Handler`)."""
        if request.path not in ("/seed_session", "/close_session", "/aggregate_metrics"):
            return await self.service_handle(request)
        if request.method != "POST":
            raise Refusal(
                HTTPStatus.METHOD_NOT_ALLOWED, f"{request.path}: use POST", [("Allow", "POST")]
            )
        body = load_body(request.body)
        if request.path != "/aggregate_metrics":
            session = body.get("resources_session_id")
            return orjson.dumps({} if session is None else {"resources_session_id": session})
        return orjson.dumps(aggregate_metrics(body.get("verify_responses")))


def aggregate_metrics(responses: Any) -> dict[str, Any]:
    """NeMo-Gym's ``AggregateMetrics`` of verify responses (see :class:`NemoGymPaths`).

    Raises:
        Refusal: 400, ``verify_responses`` is not a list of objects with a numeric reward.
    """
    if not isinstance(responses, list) or not all(isinstance(r, dict) for r in responses):
        raise Refusal(HTTPStatus.BAD_REQUEST, "'verify_responses' must be a list of objects")
    scored = [r.get("reward") for r in responses if not r.get("mask_sample")]
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in scored):
        raise Refusal(HTTPStatus.BAD_REQUEST, "'verify_responses': a 'reward' is not a number")
    metrics: dict[str, Any] = {}
    if scored:
        metrics["mean/reward"] = sum(scored) / len(scored)
    if len(scored) < len(responses):
        metrics["coverage/measured_rollouts"] = len(scored)
        metrics["coverage/masked_rollouts"] = len(responses) - len(scored)
    return {"agent_metrics": metrics, "key_metrics": dict(metrics)}


def main() -> None:
    """Serve until SIGTERM on NeMo-Gym's host and port; a wrong configuration exits with one
    line."""
    logging.basicConfig(level=logging.INFO, format="(reward_plugins) %(asctime)s %(message)s")
    try:
        block = server_block(os.environ)
        server = reward_server(block)
        host, port = str(block.get("host") or "127.0.0.1"), int(block.get("port") or 0)
        serve_until_signal(
            server, host, port, lambda s: logger.info("serving /verify at %s", s.base_url)
        )
    except (RewardPluginsError, OSError, ValueError) as error:
        sys.exit(f"reward_plugins (NeMo-Gym resources server): {error}")


if __name__ == "__main__":
    main()
