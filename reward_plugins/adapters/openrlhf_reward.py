"""OpenRLHF reward file: pass this file's path as ``--reward.remote_url`` (``--remote_rm_url``).

OpenRLHF (0.11) loads the file by path and calls ``reward_func(queries, prompts, labels)`` from a
worker thread, one rollout per call: ``queries`` are the decoded prompt plus response with the
special tokens kept, ``prompts`` the prompts as rendered, ``labels`` the ``--data.label_key``
column. Only the response is scored, as verl scores it: the prompt is cut off the front of the
query (when the prompt was truncated, everything up to the last assistant marker of a common
chat template is), and trailing end-of-turn tokens are dropped. The prompt's own example answer
(Search-R1's ``<answer> Beijing </answer>``) is therefore never graded.

A label is a JSON string (``{"target": [...]}``, optionally with a ``"data_source"`` key;
``{"data_source": ..., "ground_truth": ...}``; or a JSON list of golds), a plain gold string, or
an already decoded list or mapping (:func:`reward_plugins.serve.protocols.parse_label`, the rule
the reward server's ``/get_reward`` uses too).

Configuration, read and checked when OpenRLHF loads the file (a mistake fails the launch rather
than every rollout, since OpenRLHF swallows errors raised while scoring):

- ``REWARD_PLUGINS_SCORER``: registered scorer name, default ``compute_score``;
- ``REWARD_PLUGINS_DATA_SOURCE``: data source of labels that name none, default the first data
  source the scorer is registered for (:func:`default_data_source`: ``searchR1_nq`` for
  ``compute_score``, whose Search-R1 sources share one scorer);
- ``REWARD_PLUGINS_OPTIONS``: the scorer's options as a JSON object, default ``{}``.

OpenRLHF loads the file outside any package, so every import here is absolute.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from reward_plugins.config_reader import (
    ConfigFileError,
    NotJSONError,
    describe_source,
    parse_json_text,
)
from reward_plugins.options import is_finite_number
from reward_plugins.router import check_options, route
from reward_plugins.runtime.openrlhf_text import (  # shared with the reward server's /get_reward
    ASSISTANT_MARKERS,  # noqa: F401  (public names of this file)
    END_TOKENS,  # noqa: F401
    default_data_source,
    parse_label,
    response_text,
)

# OpenRLHF imports this file under the module name "reward_func", so name the logger explicitly.
logger = logging.getLogger("reward_plugins.adapters.openrlhf_reward")

SCORER_VARIABLE = "REWARD_PLUGINS_SCORER"
DATA_SOURCE_VARIABLE = "REWARD_PLUGINS_DATA_SOURCE"
OPTIONS_VARIABLE = "REWARD_PLUGINS_OPTIONS"
DEFAULT_SCORER = "compute_score"


class RewardConfig(NamedTuple):
    """What ``reward_func`` scores with: the scorer, the default data source, the options.

    (Not a dataclass: dataclasses need their module in ``sys.modules``, and OpenRLHF loads this
    file without registering it there.)
    """

    scorer: str
    data_source: str
    options: Mapping[str, Any]


def load_config(environ: Mapping[str, str] = os.environ) -> RewardConfig:
    """Read and check the ``REWARD_PLUGINS_*`` variables.

    Raises:
        ValueError: ``REWARD_PLUGINS_OPTIONS`` is not a JSON object (a ``ConfigFileError``
            when it is not JSON or is over a limit of the package's reader: 1 MiB, 64 levels).
        InvalidOption: an option the scorer does not accept (the message lists the valid ones),
            or a value it refuses (checked from the options' declared types; nothing is scored).
        UnknownDataSource, UnknownScorer: the data source or the scorer is not registered.
    """
    scorer = environ.get(SCORER_VARIABLE) or DEFAULT_SCORER
    data_source = environ.get(DATA_SOURCE_VARIABLE) or None
    raw_options = environ.get(OPTIONS_VARIABLE) or "{}"
    shown = describe_source(raw_options)
    try:  # bounded: size, depth, string lengths (numbers are checked with the options)
        options = parse_json_text(raw_options, source=OPTIONS_VARIABLE)
    except NotJSONError as error:
        where = str(error).removeprefix(f"{OPTIONS_VARIABLE}: ")
        raise ConfigFileError(
            f"{OPTIONS_VARIABLE} is not valid JSON ({where}): '{shown}'"
        ) from None
    if not isinstance(options, dict):
        raise ValueError(
            f"{OPTIONS_VARIABLE} must be a JSON object of scorer options, "
            f"got a JSON {type(options).__name__}: '{shown}'"
        )
    try:
        if data_source is None:
            data_source = default_data_source(scorer)
        check_options(scorer, data_source, options)
    except LookupError as error:
        source = "unset" if data_source is None else repr(data_source)
        raise type(error)(
            f"{SCORER_VARIABLE}={scorer!r}, {DATA_SOURCE_VARIABLE}={source}: {error}"
        ) from error
    except (TypeError, ValueError) as error:
        raise type(error)(f"{OPTIONS_VARIABLE}={shown}: {error}") from error
    return RewardConfig(scorer, data_source, options)


CONFIG = load_config()


def reward_func(
    queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any
) -> dict[str, Any]:
    """Score each response with the configured scorer.

    Args:
        queries: decoded prompt plus response, special tokens included.
        prompts: the prompts, as rendered before tokenization.
        labels: one label per query (see :func:`parse_label`).
        **kwargs: accepted and ignored, for later OpenRLHF versions.

    Returns:
        ``{"rewards": tensor, "scores": tensor, "extra_logs": {key: tensor}}``: float32 tensors
        of shape ``(len(queries),)``; ``scores`` equals ``rewards``; ``extra_logs`` holds every
        other numeric key of the scorer's result (``em``, ``subem``, ``f1``, ``answer_found``,
        ``answer_tags``, ``spam_penalized``, ...).

    Raises:
        ValueError: the three lists differ in length, or a response cannot be located.
        InvalidGroundTruth, UnknownDataSource, TypeError: from the router. Every error is also
            logged, since OpenRLHF only logs it at INFO level.
    """
    import torch

    if not len(queries) == len(prompts) == len(labels):
        raise ValueError(
            f"reward_func: got {len(queries)} queries, {len(prompts)} prompts and "
            f"{len(labels)} labels"
        )
    results: list[dict[str, Any]] = []
    for row, (query, prompt, label) in enumerate(zip(queries, prompts, labels, strict=True)):
        try:
            ground_truth, data_source = parse_label(label)
            response = response_text(query, prompt)
            results.append(
                route(
                    CONFIG.scorer,
                    data_source or CONFIG.data_source,
                    response,
                    ground_truth,
                    CONFIG.options,
                )
            )
        except Exception:
            logger.exception("reward_plugins could not score row %d (label %.200r)", row, label)
            raise
    rewards = torch.tensor([float(result["score"]) for result in results], dtype=torch.float32)
    extra_logs = {
        key: torch.tensor([float(result[key]) for result in results], dtype=torch.float32)
        for key in _numeric_keys(results)
    }
    return {"rewards": rewards, "scores": rewards, "extra_logs": extra_logs}


def _numeric_keys(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """Keys besides ``score`` whose value is a finite number (not a bool) in every result."""
    if not results:
        return []
    return [
        key
        for key in results[0]
        if key != "score" and all(is_finite_number(result.get(key)) for result in results)
    ]
