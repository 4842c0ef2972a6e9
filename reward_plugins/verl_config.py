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

Each file is read by :mod:`reward_plugins.config_reader` (its limits: size, depth, aliases) and,
where omegaconf is installed (it comes with verl), with OmegaConf's YAML dialect as Hydra reads
it (``1e-3`` is a float, no timestamps); the reward's keys are then resolved as OmegaConf resolves
them when verl reads them (``${fs}``, ``${oc.env:X}``). A key that only resolves at run time (an
environment variable not set here, a key of verl's own config) is listed as not judged.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reward_plugins.config_reader import (
    ConfigFileError,
    check_config_text,
    describe_source,
    file_source,
    parse_config_text,
    read_config_text,
)
from reward_plugins.errors import InvalidOption, RewardPluginsError
from reward_plugins.options import describe_value

VERL_REWARD_KEYS = ("reward.custom_reward_function", "custom_reward_function")
"""Where a verl config names its reward function: verl >= 0.7.1, then the legacy keys."""
LEGACY_ENTRY_FILE = "verl_legacy_reward.py"
"""The file name of the entry file that verl 0.4 - 0.7.0 load by path."""
VERL_ENTRIES = ("main_ppo", "main_ppo_sync")
"""verl's trainer entry points (``python -m verl.trainer.ENTRY``) that ``check`` knows."""
MAX_DEFAULTS_DEPTH = 16
"""How many files deep a chain of defaults lists may go."""
OUR_PATHS = ("pkg://reward_plugins", "???")
"""The ``path`` values that load this package (``???``: given on the command line), besides a
path ending in :data:`LEGACY_ENTRY_FILE`."""

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


@dataclass(frozen=True)
class VerlReward:
    """The reward function a verl config names, as verl would resolve it."""

    where: str
    """The key that names it (one of :data:`VERL_REWARD_KEYS`)."""
    scorer: str | None
    """The scorer's name; ``None`` when the name resolves only at run time."""
    options: dict[str, Any]
    """Its ``reward_kwargs``, resolved, less ``return_dict`` and the keys of ``not_judged``."""
    not_judged: tuple[str, ...] = ()
    """Dotted keys whose values resolve only at run time (``${oc.env:X}`` with ``X`` unset, a
    key of verl's own config): left out of ``options`` and not checked."""


def verl_reward(config: Path, verl: str | None = None, entry: str = "main_ppo") -> VerlReward:
    """The reward function a verl config file names: where, the scorer, its options.

    The file is merged with the files of its directory that its ``defaults`` list names (in
    Hydra's order, ``_self_`` last unless listed); verl's own configs are not read. ``where`` is
    the first of the keys that verl ``verl`` run as ``verl.trainer.ENTRY`` reads
    (:func:`reward_keys_read`) whose ``path`` is set; with ``verl=None`` (version unknown) either
    key set is accepted, ``reward.custom_reward_function`` first.

    Raises:
        ValueError: ``verl`` or ``entry`` is refused by :func:`reward_keys_read`.
        RewardNotRead: the reward is named only under keys that this verl does not read (verl
            would silently train on its built-in scorer).
        ConfigFileError: a file cannot be read (see :mod:`reward_plugins.config_reader`), or
            it is not a verl config this package can check: a file is not a YAML mapping, has
            a malformed defaults list (not a list, an entry neither a name nor a mapping, a
            cycle however the names are spelled, more than :data:`MAX_DEFAULTS_DEPTH` files
            deep), names no reward function, or a reward function that is not this package's.
        InvalidOption: ``name`` is not a string, ``reward_kwargs`` is not a mapping.
    """
    read = VERL_REWARD_KEYS if verl is None else reward_keys_read(verl, entry)
    merged = _verl_yaml(config, ())
    nodes = {where: _reward_node(merged, where) for where in VERL_REWARD_KEYS}
    shown = describe_source(str(config))
    for where in read:
        node = nodes[where]
        if node is None:
            continue
        values, not_judged = _resolved(merged, where)
        location = values.get("path")
        if node["path"] != "???" and "path" in values:
            _check_location(location, f"{shown}: {where}.path")
        name = values.get("name", "compute_score") or "compute_score"
        if f"{where}.name" in not_judged:
            name = None
        elif not isinstance(name, str):
            raise InvalidOption(f"{where}.name must be a scorer's name, got {describe_value(name)}")
        options = values.get("reward_kwargs", {}) or {}
        if not isinstance(options, dict):
            raise InvalidOption(
                f"{where}.reward_kwargs must be a mapping of options, got {describe_value(options)}"
            )
        options = {key: value for key, value in options.items() if key != "return_dict"}
        return VerlReward(where, name, options, tuple(not_judged))
    for where in VERL_REWARD_KEYS:
        if nodes[where] is not None:
            label = f"the top-level {where}" if where == _LEGACY else where
            consequence, fix = _FIX[where]
            raise RewardNotRead(
                f"{shown}: verl {verl} verl.trainer.{entry} does not read {label} "
                f"({consequence}); {fix}"
            )
    raise ConfigFileError(
        f"{shown}: names no reward function ({' or '.join(k + '.path' for k in read)} is unset)"
    )


def _reward_node(merged: dict[str, Any], where: str) -> dict[str, Any] | None:
    """The mapping at the dotted key ``where`` when its ``path`` is set, else ``None``."""
    node: Any = merged
    for key in where.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict) or node.get("path") is None:
        return None
    return node


def _check_location(location: Any, where: str) -> None:
    """Refuse a ``path`` that does not load this package; suggest the one meant."""
    if isinstance(location, str) and (
        location in OUR_PATHS or location.endswith(LEGACY_ENTRY_FILE)
    ):
        return
    shown = describe_source(location) if isinstance(location, str) else describe_value(location)
    hint = ""
    if isinstance(location, str) and location.replace("-", "_").rstrip("/").endswith(
        "reward_plugins"
    ):
        hint = " (verl imports a module named as pkg://MODULE: write pkg://reward_plugins)"
    raise ConfigFileError(f"{where}={shown} does not load reward_plugins{hint}")


def _resolved(merged: dict[str, Any], where: str) -> tuple[dict[str, Any], list[str]]:
    """The ``path``, ``name`` and ``reward_kwargs`` of the node at ``where``, interpolations
    resolved as OmegaConf resolves them for verl, and the dotted keys that resolve only at run
    time (left out of the values). Without omegaconf, any value holding ``${`` is such a key."""
    try:
        from omegaconf import DictConfig, OmegaConf
        from omegaconf.errors import OmegaConfBaseException
    except ImportError:
        return _unresolved_left_out(_reward_node(merged, where) or {}, where)
    try:
        node = OmegaConf.select(OmegaConf.create(merged), where)
    except OmegaConfBaseException as error:  # each file was read by OmegaConf: not expected
        raise ConfigFileError(f"{where}: OmegaConf cannot compose the config: {error}") from None
    values: dict[str, Any] = {}
    not_judged: list[str] = []

    def resolve(container: Any, key: Any, label: str, iterate: bool = False) -> Any:
        """``container[key]`` resolved, containers made plain (a mapping kept a DictConfig
        when ``iterate``); :data:`_LEFT_OUT`, and ``label`` listed, when it cannot resolve."""
        try:
            value = container[key]
            if OmegaConf.is_config(value) and not (iterate and isinstance(value, DictConfig)):
                value = OmegaConf.to_container(value, resolve=True)
            return value
        except OmegaConfBaseException:
            not_judged.append(label)
            return _LEFT_OUT

    for key in ("path", "name", "reward_kwargs"):
        if key not in node:
            continue
        value = resolve(node, key, f"{where}.{key}", iterate=key == "reward_kwargs")
        if isinstance(value, DictConfig):
            resolved = {
                option: resolve(value, option, f"{where}.{key}.{_key_name(option)}")
                for option in value
            }
            value = {option: item for option, item in resolved.items() if item is not _LEFT_OUT}
        if value is not _LEFT_OUT:
            values[key] = value
    return values, not_judged


_LEFT_OUT = object()


def _key_name(key: Any) -> str:
    return describe_source(key) if isinstance(key, str) else describe_value(key)


def _unresolved_left_out(node: dict[str, Any], where: str) -> tuple[dict[str, Any], list[str]]:
    values: dict[str, Any] = {}
    not_judged: list[str] = []
    for key in ("path", "name", "reward_kwargs"):
        if key not in node:
            continue
        value = node[key]
        if isinstance(value, dict):
            value = dict(value)
            for option in list(value):
                if _interpolated(value[option]):
                    not_judged.append(f"{where}.{key}.{_key_name(option)}")
                    del value[option]
        if _interpolated(value):
            not_judged.append(f"{where}.{key}")
        else:
            values[key] = value
    return values, not_judged


def _interpolated(value: Any) -> bool:
    """Whether ``value`` holds an OmegaConf interpolation (``${...}``), anywhere inside."""
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, dict):
        return any(_interpolated(item) for item in value.values())
    if isinstance(value, list):
        return any(_interpolated(item) for item in value)
    return False


def _read_verl_file(config: Path) -> Any:
    """The YAML of one verl config file: bounded by the package's reader, then read in
    OmegaConf's dialect (as Hydra reads it) where omegaconf is installed."""
    text = read_config_text(config, what="verl config")
    source = file_source(config, "verl config")
    try:
        import yaml
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException
    except ImportError:
        return parse_config_text(text, source=source)
    check_config_text(text, source=source)  # bounded first; then built as OmegaConf builds it
    try:
        return OmegaConf.to_container(OmegaConf.create(text), resolve=False)
    except (OmegaConfBaseException, yaml.YAMLError, ValueError, TypeError) as error:
        reason = " ".join(str(error).split())[:300]
        raise ConfigFileError(
            f"{source}: OmegaConf cannot read it (nor can verl): {reason}"
        ) from None


def _verl_yaml(config: Path, including: tuple[Path, ...]) -> dict[str, Any]:
    identity = Path(os.path.realpath(config))  # one file however its name is spelled
    shown = describe_source(str(config))
    if identity in including:
        chain = " -> ".join(describe_source(str(path)) for path in (*including, identity))
        raise ConfigFileError(f"{shown}: its defaults list includes itself: {chain}")
    if len(including) >= MAX_DEFAULTS_DEPTH:
        raise ConfigFileError(
            f"{shown}: defaults lists nest more than {MAX_DEFAULTS_DEPTH} files deep"
        )
    data = _read_verl_file(config)
    if not isinstance(data, dict):
        raise ConfigFileError(f"{shown}: not a YAML mapping (a verl config)")
    merged: dict[str, Any] = {}
    for entry in _defaults(data, shown):
        if entry == "_self_":
            own = {k: v for k, v in data.items() if k not in ("defaults", "hydra")}
            merged = _deep_merge(merged, own)
        elif isinstance(entry, str):
            included = Path(os.path.realpath(config.parent)) / f"{entry}.yaml"
            if os.path.isfile(included):  # else one of verl's own configs (or Hydra's error)
                parent = _verl_yaml(included, (*including, identity))
                merged = _deep_merge(merged, parent)
    return merged


def _defaults(data: dict[str, Any], shown: str) -> list[Any]:
    """The config's defaults list, checked, with ``_self_`` last unless it names it.

    Raises:
        ConfigFileError: ``defaults`` is not a list of config names and mappings.
    """
    defaults = data.get("defaults")
    if defaults is None:
        defaults = []
    if not isinstance(defaults, list):
        raise ConfigFileError(
            f"{shown}: defaults must be a list of config names, got {describe_value(defaults)}"
        )
    for index, entry in enumerate(defaults):
        if not isinstance(entry, (str, dict)):
            raise ConfigFileError(
                f"{shown}: defaults[{index}] must be a config name or a mapping, got "
                f"{describe_value(entry)}"
            )
    return defaults if "_self_" in defaults else [*defaults, "_self_"]


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
