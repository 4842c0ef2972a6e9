"""The reward a verl trainer config names, read without verl (``reward-plugins check``).

verl >= 0.7.1 reads ``reward.custom_reward_function.{path,name,reward_kwargs}``, verl 0.4 -
0.7.0 the same keys at the top level (github.com/verl-project/verl,
``verl/trainer/config/ppo_trainer.yaml`` and ``verl/trainer/ppo/reward.py``). A config composes
other files through Hydra's defaults list; the files of its own directory are merged here in
Hydra's order, and verl's own files, which leave the reward function unset, are not read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reward_plugins.rescore.files import PathError

VERL_REWARD_KEYS = ("reward.custom_reward_function", "custom_reward_function")
"""Where a verl config names its reward function: verl >= 0.7.1, then the legacy keys."""
LEGACY_ENTRY_FILE = "verl_legacy_reward.py"
"""The file name of the entry file that verl 0.4 - 0.7.0 load by path."""


def verl_reward(config: Path) -> tuple[str, str, dict[str, Any]]:
    """``(where, scorer, reward_kwargs)`` of the reward function a verl config file names.

    The file is merged with the files of its directory that its ``defaults`` list names (in
    Hydra's order, ``_self_`` last unless listed); verl's own configs are not read. The reward is
    ``reward.custom_reward_function`` (verl >= 0.7.1), else the legacy top-level
    ``custom_reward_function``, the one whose ``path`` is set.

    Raises:
        PathError: the file cannot be read, is not a YAML mapping, names no reward function,
            or a reward function that is not this package's.
    """
    merged = _verl_yaml(config, ())
    for where in VERL_REWARD_KEYS:
        node: Any = merged
        for key in where.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict) or node.get("path") is None:
            continue
        location = str(node["path"])
        if location not in ("pkg://reward_plugins", "???") and not location.endswith(
            LEGACY_ENTRY_FILE
        ):
            raise PathError(f"{config}: {where}.path={location} does not load reward_plugins")
        options = dict(node.get("reward_kwargs") or {})
        options.pop("return_dict", None)
        return where, str(node.get("name") or "compute_score"), options
    raise PathError(
        f"{config}: names no reward function ({' or '.join(k + '.path' for k in VERL_REWARD_KEYS)}"
        " is unset)"
    )


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
