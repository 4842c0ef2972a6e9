"""NeMo-Gym resources server ``reward_plugins``: a reward-plugins scorer behind ``POST /verify``.

NeMo-Gym (https://github.com/NVIDIA-NeMo/Gym) starts it as it starts any resources server
(``nemo_gym/cli/env.py``, ``RunHelper``): ``python app.py`` in this directory, in a virtual
environment holding ``requirements.txt``, with the merged configuration as YAML in
``NEMO_GYM_CONFIG_DICT`` and this server's id (its top-level key) in ``NEMO_GYM_CONFIG_PATH``.
Its block (``<id>.resources_servers.reward_plugins``, see ``configs/reward_plugins.yaml``) holds
the ``host`` and ``port`` NeMo-Gym chose and the scorer's settings: ``scorer``, ``options``,
``data_source``, ``workers``, ``row_timeout``, ``fallback_reward`` and ``limits``.

The server is reward-plugins' own (:class:`reward_plugins.serve.service.RewardServer`, as
``reward-plugins serve-rewards`` runs it): its ``/verify``, and the ``/seed_session``,
``/close_session`` and ``/aggregate_metrics`` that NeMo-Gym's agents also call, are documented
in :mod:`reward_plugins.serve.protocols`. It stops on SIGTERM (how NeMo-Gym stops its
servers), its scorer processes with it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

import yaml

from reward_plugins.errors import InvalidInput, RewardPluginsError
from reward_plugins.runtime.http import serve_until_signal
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
    """The reward server a block configures.

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
    return RewardServer(
        config,
        workers=int(_setting(settings, "workers", 2)),
        row_timeout=_setting(settings, "row_timeout", 10.0),
    )


def _setting(settings: Mapping[str, Any], name: str, default: float) -> float:
    value = settings[name]
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{name}: expected a number, got {value!r} ({type(value).__name__})")
    return value


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
