"""``reward-plugins serve-rewards``: serve a scorer over HTTP (OpenRLHF's ``/get_reward``,
NeMo-Gym's ``/verify``, the native ``/score``), in a pool of worker processes or as a Ray Serve
deployment, until interrupted."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from reward_plugins.cli.common import (
    OneLineParser,
    Terminated,
    add_set_argument,
    check_port,
    error,
    log_server_to_stderr,
    scorer_and_options,
)

if TYPE_CHECKING:
    from reward_plugins.serve.service import ServiceConfig

HELP = "serve a scorer over HTTP (OpenRLHF, NeMo-Gym, native batch) until interrupted"
DESCRIPTION = (
    "Answer POST /score, /get_reward (OpenRLHF) and /verify (NeMo-Gym) with a "
    "scorer run in a pool of worker processes."
)

SERVE_SETTINGS = ("fallback_reward", "scores_key", "row_timeout", "max_worker_rss_mb")
"""The ``serve-rewards`` settings checked by the server and its pool, whose errors name them."""


def add_arguments(command: OneLineParser) -> None:
    """The address; the scorer, the pool, the limits and Ray Serve's options are added when the
    command is chosen."""
    command.add_argument("--host", default="127.0.0.1", help="the address to listen on (127.0.0.1)")
    command.add_argument("--port", type=int, default=8000, help="the port; 0: a free port (8000)")
    command.later.append(_add_serve_rewards_arguments)


def _add_serve_rewards_arguments(command: argparse.ArgumentParser) -> None:
    """The options of ``serve-rewards``: the scorer (as ``score`` takes it), the pool, the
    limits (one per :class:`~reward_plugins.serve.service.ServiceLimits` field), Ray Serve."""
    from reward_plugins.plugins.composed import NAME as COMPOSED_SCORER
    from reward_plugins.serve.service import ServiceLimits

    command.add_argument("--scorer", metavar="NAME", help="a registered scorer (compute_score)")
    command.add_argument(
        "--recipe",
        metavar="NAME|PATH",
        help=f"pay a composed recipe, shipped or a YAML file (scorer {COMPOSED_SCORER})",
    )
    add_set_argument(command, "scorer option, as in verl's reward_kwargs (repeatable)")
    command.add_argument(
        "--data-source", help="of rows that name none (default: the scorer's first)"
    )
    _add_pool_arguments(command)
    command.add_argument(
        "--scores-key",
        metavar="KEY",
        help="the result key of OpenRLHF's scores (default: acc when the scorer has it, else "
        "the reward clipped to [0, 1])",
    )
    for limit in dataclasses.fields(ServiceLimits):
        command.add_argument(
            "--" + limit.name.replace("_", "-"),
            type=float if limit.type == "float" else int,
            default=limit.default,
            metavar="N",
            help=f"{limit.metadata['help']} ({limit.default})",
        )
    command.add_argument(
        "--ray", action="store_true", help="run as a Ray Serve deployment (needs ray[serve])"
    )
    command.add_argument(
        "--replicas", type=int, default=1, metavar="N", help="Ray Serve replicas, with --ray (1)"
    )
    command.add_argument(
        "--ray-address", help="a Ray cluster for --ray (default: RAY_ADDRESS, else local)"
    )


def _add_pool_arguments(command: argparse.ArgumentParser) -> None:
    """The worker pool's options and the reward of a row that failed."""
    command.add_argument(
        "--workers",
        type=int,
        default=2,
        metavar="N",
        help="scorer processes; 0: score in the server's process, no isolation (2)",
    )
    command.add_argument(
        "--row-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds one row may take; beyond, it fails as 'timeout' and its worker is "
        "replaced (10)",
    )
    command.add_argument(
        "--max-worker-rss-mb",
        type=float,
        default=2048.0,
        metavar="MB",
        help="a worker over this resident memory is replaced after its rows (2048)",
    )
    command.add_argument(
        "--fallback-reward",
        type=float,
        default=0.0,
        metavar="R",
        help="the reward of a row that failed (timeout, crash, bad input) (0.0)",
    )


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Serve the scorer until interrupted or terminated (exit 2 when it cannot start)."""
    from reward_plugins.errors import RewardPluginsError

    config = _service_config(args, parser)
    pool = {
        "workers": args.workers,
        "row_timeout": args.row_timeout,
        "max_worker_rss_mb": args.max_worker_rss_mb,
    }
    log_server_to_stderr("reward_plugins.serve")
    try:
        with suppress(KeyboardInterrupt, Terminated):  # how a server stops: no error
            if args.ray:
                from reward_plugins.serve.ray_serve import run_on_ray_serve

                run_on_ray_serve(
                    config,
                    replicas=args.replicas,
                    host=args.host,
                    port=args.port,
                    address=args.ray_address,
                    ready=_announce(
                        config.scorer, pool, f"{args.replicas} Ray Serve replica(s) of "
                    ),
                    **pool,
                )
            else:
                from reward_plugins.runtime.http import serve_until_signal
                from reward_plugins.serve.service import RewardServer

                server = RewardServer(config, **pool)
                serve_until_signal(server, args.host, args.port, _announce(config.scorer, pool))
    except (ImportError, RewardPluginsError) as failure:
        return error(f"serve-rewards: {_as_option(str(failure), SERVE_SETTINGS)}", 2)
    except OSError as failure:
        return error(f"serve-rewards: {args.host}:{args.port}: {failure.strerror or failure}", 2)
    return 0


def _service_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> ServiceConfig:
    """The service from the options (a usage error, naming the option, for a wrong value)."""
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.serve.service import ServiceConfig, ServiceLimits

    check_port(args.port, parser)
    for name in ("workers", "replicas"):
        if getattr(args, name) < (0 if name == "workers" else 1):
            parser.error(f"--{name} must be at least {0 if name == 'workers' else 1}")
    if (args.replicas != 1 or args.ray_address) and not args.ray:
        parser.error("--replicas and --ray-address need --ray")
    scorer, options = scorer_and_options(args, parser)
    given = {spec.name: getattr(args, spec.name) for spec in dataclasses.fields(ServiceLimits)}
    try:
        limits = ServiceLimits(**given)
    except RewardPluginsError as failure:
        name, _, reason = str(failure).partition(": ")
        parser.error(f"--{name.replace('_', '-')}: {reason}")
    return ServiceConfig(
        scorer, options, args.data_source, args.fallback_reward, limits, args.scores_key
    )


def _as_option(message: str, settings: Sequence[str]) -> str:
    """``message`` with the settings it names (``row_timeout must ...``, ``over
    max_worker_rss_mb=1``) spelt as the options that set them (``--row-timeout``,
    ``--max-worker-rss-mb``)."""
    for name in settings:
        option = "--" + name.replace("_", "-")
        if message.startswith(name) and message[len(name) : len(name) + 1] in (":", " "):
            message = option + message[len(name) :]
        message = message.replace(f" {name}=", f" {option}=")
    return message


def _announce(scorer: str, pool: Mapping[str, Any], prefix: str = "") -> Callable[[Any], None]:
    """The line a server prints once it answers: what it serves, and where."""
    workers = pool["workers"]
    isolation = f"{workers} worker(s)" if workers else "in-process, no isolation"

    def ready(server: Any) -> None:
        print(f"serving {scorer} ({prefix}{isolation}) at {server.base_url}", flush=True)

    return ready
