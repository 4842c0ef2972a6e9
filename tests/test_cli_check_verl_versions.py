"""``reward-plugins check --verl VERSION --entry ENTRY``: the reward keys each verl reads.

The table is verl's own (github.com/verl-project/verl): 0.4 - 0.7.0 read the top-level
``custom_reward_function`` only; 0.7.1 - 0.8.x ``main_ppo`` reads ``reward.custom_reward_function``
and migrates the top-level keys onto it (``migrate_legacy_reward_impl``); ``main_ppo_sync`` (only in
0.8.x) and 0.9's ``main_ppo`` read ``reward.custom_reward_function`` only
(https://github.com/verl-project/verl/pull/6710). A key that is not read trains on verl's
built-in scorer, silently, so ``check`` refuses it.
"""

from __future__ import annotations

import itertools
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from test_cli_helpers import run_cli_here

from reward_plugins import verl_config
from reward_plugins.cli import main

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
NEW_CONFIG = CONFIGS / "search_r1_grpo.yaml"  # reward.custom_reward_function, pkg://reward_plugins
LEGACY_CONFIG = CONFIGS / "search_r1_grpo_legacy.yaml"  # top-level custom_reward_function
NEW, LEGACY = "reward.custom_reward_function", "custom_reward_function"

READ: dict[str, dict[str, set[str] | None]] = {
    "0.4.1": {"main_ppo": {LEGACY}, "main_ppo_sync": None},
    "0.5.0": {"main_ppo": {LEGACY}, "main_ppo_sync": None},
    "0.6.1": {"main_ppo": {LEGACY}, "main_ppo_sync": None},
    "0.7.0": {"main_ppo": {LEGACY}, "main_ppo_sync": None},
    "0.7.1": {"main_ppo": {NEW, LEGACY}, "main_ppo_sync": None},
    "0.8.0": {"main_ppo": {NEW, LEGACY}, "main_ppo_sync": {NEW}},
    "0.9.0": {"main_ppo": {NEW}, "main_ppo_sync": None},
    "0.9.1": {"main_ppo": {NEW}, "main_ppo_sync": None},
}
"""verl version -> entry point -> the keys it reads (``None``: no such entry point)."""

REFUSALS = {
    NEW: "does not read reward.custom_reward_function (it has no reward node: no custom reward "
    "function would be loaded); set the top-level custom_reward_function "
    "(configs/search_r1_grpo_legacy.yaml)",
    LEGACY: "does not read the top-level custom_reward_function (it would train on verl's "
    "built-in scorer); set reward.custom_reward_function (configs/search_r1_grpo.yaml)",
}


def ok_line(config: Path, where: str, checked: str) -> str:
    return f"{config}: ok: {where}.name=compute_score, reward_kwargs {{'score': 1.0}}; {checked}\n"


@pytest.mark.parametrize(
    ("verl", "entry", "where"),
    list(itertools.product(READ, ("main_ppo", "main_ppo_sync"), (NEW, LEGACY))),
)
def test_check_each_verl_version_and_entry(verl: str, entry: str, where: str) -> None:
    config = NEW_CONFIG if where == NEW else LEGACY_CONFIG
    result = run_cli_here("check", config, "--verl", verl, "--entry", entry)
    read = READ[verl][entry]
    if read is None:
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == (
            f"reward-plugins: error: check: --entry main_ppo_sync: verl {verl} has no "
            "verl.trainer.main_ppo_sync "
            "(see reward-plugins check --help)\n"
        )
    elif where in read:
        assert (result.returncode, result.stderr) == (0, "")
        assert result.stdout == ok_line(config, where, f"read by verl {verl} verl.trainer.{entry}")
    else:
        assert (result.returncode, result.stdout) == (1, "")
        assert result.stderr == (
            f"reward-plugins: error: check: {config}: verl {verl} verl.trainer.{entry} "
            f"{REFUSALS[where]}\n"
        )


def test_default_version_is_the_installed_verl() -> None:
    try:
        installed = version("verl")
    except PackageNotFoundError:
        pytest.skip("verl is not installed")
    assert verl_config.installed_verl_version() == installed
    result = run_cli_here("check", NEW_CONFIG)
    assert (result.returncode, result.stderr) == (0, "")
    checked = f"read by verl {installed} verl.trainer.main_ppo"
    assert result.stdout == ok_line(NEW_CONFIG, NEW, checked)
    # The installed verl (0.9.1 in the test environment) reads only reward.custom_reward_function.
    result = run_cli_here("check", LEGACY_CONFIG)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"reward-plugins: error: check: {LEGACY_CONFIG}: verl {installed} verl.trainer.main_ppo "
        f"{REFUSALS[LEGACY]}\n"
    )


def test_unknown_version_accepts_either_key_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(verl_config, "installed_verl_version", lambda: None)
    unknown = "verl version unknown (verl is not installed; --verl VERSION checks its keys)"
    for config, where in ((NEW_CONFIG, NEW), (LEGACY_CONFIG, LEGACY)):
        assert main(["check", str(config)]) == 0
        assert capsys.readouterr().out == ok_line(config, where, unknown)
    with pytest.raises(SystemExit) as exited:
        main(["check", str(NEW_CONFIG), "--entry", "main_ppo_sync"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "reward-plugins: error: check: --entry main_ppo_sync: verl is not installed; give "
        "--verl VERSION too (see reward-plugins check --help)\n"
    )


def test_both_key_sets_follow_verls_precedence(tmp_path: Path) -> None:
    config = tmp_path / "both.yaml"
    config.write_text(
        "reward:\n  custom_reward_function:\n    path: pkg://reward_plugins\n"
        "    name: compute_score_f1\n"
        "custom_reward_function:\n    path: ???\n    name: compute_score_subem\n",
        encoding="utf-8",
    )
    expected = {  # 0.7.1 - 0.8.x main_ppo copy the top-level node over reward.*
        ("0.7.0", "main_ppo"): "custom_reward_function.name=compute_score_subem",
        ("0.8.0", "main_ppo"): "custom_reward_function.name=compute_score_subem",
        ("0.8.0", "main_ppo_sync"): "reward.custom_reward_function.name=compute_score_f1",
        ("0.9.1", "main_ppo"): "reward.custom_reward_function.name=compute_score_f1",
    }
    for (verl, entry), named in expected.items():
        result = run_cli_here("check", config, "--verl", verl, "--entry", entry)
        assert (result.returncode, result.stderr) == (0, "")
        assert result.stdout.startswith(f"{config}: ok: {named}, reward_kwargs {{}}; ")


def test_bad_version_is_a_usage_error() -> None:
    result = run_cli_here("check", NEW_CONFIG, "--verl", "latest")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "reward-plugins: error: check: --verl: 'latest' is not a verl version (X.Y.Z) "
        "(see reward-plugins check --help)\n"
    )


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("0.9.1", (0, 9, 1)),
        ("0.8.0rc1", (0, 8, 0)),
        ("0.8.0.dev0", (0, 8, 0)),
        ("v0.7.1", (0, 7, 1)),
        ("0.10", (0, 10, 0)),
        ("1", (1, 0, 0)),
    ],
)
def test_parse_verl_version(text: str, parsed: tuple[int, int, int]) -> None:
    assert verl_config.parse_verl_version(text) == parsed


def test_future_versions_read_like_the_newest_rule() -> None:
    for future in ("0.10.0", "1.2.3"):
        assert verl_config.reward_keys_read(future) == (NEW,)
        with pytest.raises(ValueError, match=f"verl {future} has no verl.trainer.main_ppo_sync"):
            verl_config.reward_keys_read(future, "main_ppo_sync")
    # verl's precedence where both are read: the top-level node, when set, wins.
    assert verl_config.reward_keys_read("0.7.1") == (LEGACY, NEW)
    with pytest.raises(ValueError, match="unknown verl entry point 'main_grpo'"):
        verl_config.reward_keys_read("0.9.1", "main_grpo")
