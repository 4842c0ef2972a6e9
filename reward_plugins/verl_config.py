"""The reward a verl trainer config names, read without verl (``reward-plugins check``).

Which keys verl reads depends on its version and on the entry point (github.com/verl-project/verl,
``verl/trainer/config/ppo_trainer.yaml``, ``verl/trainer/ppo/reward.py``,
``verl/experimental/reward_loop/reward_loop.py``):

* verl 0.4 - 0.7.0, ``verl.trainer.main_ppo``: only the top-level
  ``custom_reward_function.{path,name,reward_kwargs}`` (their config has no ``reward`` node);
* verl 0.7.1 - 0.8.x, ``main_ppo``: ``reward.custom_reward_function``, and
  ``migrate_legacy_reward_impl`` copies the top-level keys over it, so both are read;
* verl 0.8.x, ``main_ppo_sync`` (only in 0.8.x): only ``reward.custom_reward_function``;
* verl >= 0.9.0, ``main_ppo``: only ``reward.custom_reward_function``; the top-level keys
  still compose but nothing reads them (https://github.com/verl-project/verl/pull/6710).

A key that is not read leaves verl on its built-in scorer (``default_compute_score``), silently.
A config composes other files through Hydra's defaults list; the files of its own directory are
merged here in Hydra's order, and verl's own files, which leave the reward function unset, are
not read.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from reward_plugins.errors import RewardPluginsError
from reward_plugins.rescore.files import PathError

VERL_REWARD_KEYS = ("reward.custom_reward_function", "custom_reward_function")
"""Where a verl config names its reward function: verl >= 0.7.1, then the legacy keys."""
LEGACY_ENTRY_FILE = "verl_legacy_reward.py"
"""The file name of the entry file that verl 0.4 - 0.7.0 load by path."""
VERL_ENTRIES = ("main_ppo", "main_ppo_sync")
"""verl's trainer entry points (``python -m verl.trainer.ENTRY``) that ``check`` knows."""

_REWARD, _LEGACY = VERL_REWARD_KEYS
_READ_RULES: tuple[tuple[tuple[int, int, int], dict[str, tuple[str, ...]]], ...] = (
    ((0, 0, 0), {"main_ppo": (_LEGACY,)}),
    # migrate_legacy_reward_impl overwrites reward.custom_reward_function with the top-level
    # node when that is set, so the legacy keys come first.
    ((0, 7, 1), {"main_ppo": (_LEGACY, _REWARD)}),
    ((0, 8, 0), {"main_ppo": (_LEGACY, _REWARD), "main_ppo_sync": (_REWARD,)}),
    ((0, 9, 0), {"main_ppo": (_REWARD,)}),
)
"""``(first verl version, {entry: keys read, in verl's precedence})``, oldest first; a version
uses the last rule it reaches, so a future version uses the newest."""
_FIX = {
    _REWARD: (
        "it has no reward node: no custom reward function would be loaded",
        f"set the top-level {_LEGACY} (configs/search_r1_grpo_legacy.yaml)",
    ),
    _LEGACY: (
        "it would train on verl's built-in scorer",
        f"set {_REWARD} (configs/search_r1_grpo.yaml)",
    ),
}
"""For a key set a version does not read: what would happen, and what to set instead."""


class RewardNotRead(RewardPluginsError, ValueError):
    """A config names its reward function only under keys that its verl version does not read.

    The message names the config, the keys, the verl version and entry point, what verl would do
    instead and the keys to set.
    """


def parse_verl_version(version: str) -> tuple[int, int, int]:
    """``(major, minor, micro)`` of a verl version ``X[.Y[.Z]][suffix]``; the suffix is ignored.

    ``0.8.0rc1`` and ``0.8.0.dev0`` read as ``0.8.0``, ``0.10`` as ``0.10.0``.

    Raises:
        ValueError: the text does not start with a version number.

    Example:
        >>> parse_verl_version("0.9.1"), parse_verl_version("v0.8.0rc1")
        ((0, 9, 1), (0, 8, 0))
    """
    match = re.match(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", version.strip())
    if match is None:
        raise ValueError(f"{version!r} is not a verl version (X.Y.Z)")
    major, minor, micro = (int(part or 0) for part in match.groups())
    return major, minor, micro


def reward_keys_read(version: str, entry: str = "main_ppo") -> tuple[str, ...]:
    """The keys of :data:`VERL_REWARD_KEYS` that verl ``version`` run as ``verl.trainer.ENTRY``
    reads, in verl's precedence (the first one set names the reward).

    A version newer than every rule (0.9.0) reads what the newest rule says.

    Raises:
        ValueError: ``version`` is not a version number (see :func:`parse_verl_version`),
            ``entry`` is not in :data:`VERL_ENTRIES`, or that version has no such entry point
            (``main_ppo_sync`` outside 0.8.x).

    Example:
        >>> reward_keys_read("0.7.0"), reward_keys_read("0.8.0", "main_ppo_sync")
        (('custom_reward_function',), ('reward.custom_reward_function',))
    """
    if entry not in VERL_ENTRIES:
        raise ValueError(f"unknown verl entry point {entry!r} (one of {', '.join(VERL_ENTRIES)})")
    parsed = parse_verl_version(version)
    rules = [entries for since, entries in _READ_RULES if since <= parsed]
    if entry not in rules[-1]:
        raise ValueError(f"verl {version} has no verl.trainer.{entry}")
    return rules[-1][entry]


def installed_verl_version() -> str | None:
    """The version of the installed ``verl`` distribution, read from its metadata without
    importing verl; ``None`` when verl is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("verl")
    except PackageNotFoundError:
        return None


def verl_reward(
    config: Path, verl: str | None = None, entry: str = "main_ppo"
) -> tuple[str, str, dict[str, Any]]:
    """``(where, scorer, reward_kwargs)`` of the reward function a verl config file names.

    The file is merged with the files of its directory that its ``defaults`` list names (in
    Hydra's order, ``_self_`` last unless listed); verl's own configs are not read. ``where`` is
    the first of the keys that verl ``verl`` run as ``verl.trainer.ENTRY`` reads
    (:func:`reward_keys_read`) whose ``path`` is set; with ``verl=None`` (version unknown) either
    key set is accepted, ``reward.custom_reward_function`` first.

    Raises:
        ValueError: ``verl`` or ``entry`` is refused by :func:`reward_keys_read`.
        RewardNotRead: the reward is named only under keys that this verl does not read (verl
            would silently train on its built-in scorer).
        PathError: the file cannot be read, is not a YAML mapping, names no reward function,
            or a reward function that is not this package's.
    """
    read = VERL_REWARD_KEYS if verl is None else reward_keys_read(verl, entry)
    merged = _verl_yaml(config, ())
    nodes = {where: _reward_node(merged, where) for where in VERL_REWARD_KEYS}
    for where in read:
        node = nodes[where]
        if node is None:
            continue
        location = str(node["path"])
        if location not in ("pkg://reward_plugins", "???") and not location.endswith(
            LEGACY_ENTRY_FILE
        ):
            raise PathError(f"{config}: {where}.path={location} does not load reward_plugins")
        options = dict(node.get("reward_kwargs") or {})
        options.pop("return_dict", None)
        return where, str(node.get("name") or "compute_score"), options
    for where in VERL_REWARD_KEYS:
        if nodes[where] is not None:
            label = f"the top-level {where}" if where == _LEGACY else where
            consequence, fix = _FIX[where]
            raise RewardNotRead(
                f"{config}: verl {verl} verl.trainer.{entry} does not read {label} "
                f"({consequence}); {fix}"
            )
    raise PathError(
        f"{config}: names no reward function ({' or '.join(k + '.path' for k in read)} is unset)"
    )


def _reward_node(merged: dict[str, Any], where: str) -> dict[str, Any] | None:
    """The mapping at the dotted key ``where`` when its ``path`` is set, else ``None``."""
    node: Any = merged
    for key in where.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict) or node.get("path") is None:
        return None
    return node


def _verl_yaml(config: Path, including: tuple[Path, ...]) -> dict[str, Any]:
    import yaml

    if config in including:
        raise PathError(f"{config}: its defaults list includes itself")
    try:
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise PathError(f"{config}: cannot be read: {' '.join(str(error).split())}") from None
    if not isinstance(data, dict):
        raise PathError(f"{config}: not a YAML mapping (a verl config)")
    defaults = data.get("defaults") or []
    if "_self_" not in defaults:
        defaults = [*defaults, "_self_"]
    merged: dict[str, Any] = {}
    for entry in defaults:
        if entry == "_self_":
            own = {k: v for k, v in data.items() if k not in ("defaults", "hydra")}
            merged = _deep_merge(merged, own)
        elif isinstance(entry, str) and (config.parent / f"{entry}.yaml").is_file():
            parent = _verl_yaml(config.parent / f"{entry}.yaml", (*including, config))
            merged = _deep_merge(merged, parent)
    return merged


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
