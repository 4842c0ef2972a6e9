"""The shipped configs and the documented command lines (``docs/verl.md`` and the README),
composed with verl 0.9.1's own trainer config and turned into verl's reward managers.

Composition uses Hydra's compose API on ``configs/`` (the config ``--cfg job`` prints); the
documented commands run through verl's real ``main_ppo`` entry point with ``--cfg job`` in a
subprocess.
Expected rewards come from verl's reference scorer ``search_r1_like_qa_em`` and the hand-worked
table in ``verl_helpers``.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omegaconf import DictConfig, OmegaConf
from verl.experimental.reward_loop.reward_loop import migrate_legacy_reward_impl
from verl.trainer.ppo.reward import get_custom_reward_fn, load_reward_manager
from verl.utils.reward_score import search_r1_like_qa_em
from verl_helpers import (
    CONFIG_DIR,
    LEGACY_CONFIG,
    LEGACY_ENTRY_FILE,
    MIXED_SAMPLES,
    REPO_ROOT,
    SHIPPED_CONFIGS,
    Sample,
    build_batch,
    compose,
    hand_reward,
    run_reward_loop,
    save_model_stub,
    stock_verl_config,
    verl_reference_reward,
)

import reward_plugins

NEW_STYLE_CONFIGS = ("search_r1_grpo", "search_r1_ppo")
LEGACY_PATH_OVERRIDE = f"custom_reward_function.path={LEGACY_ENTRY_FILE}"
VERL_DEFAULT_OPTIONS = {"max_answer_tags": 10, "spam_factor": 0.25, "extract": "last"}
"""Options verl's reference scorer has built in: a command may change only format_score and
score and still be checked against it."""


def rewards_from_reward_loop(tokenizer: Any, config: DictConfig) -> list[float]:
    batch = build_batch(tokenizer, MIXED_SAMPLES)
    outputs = run_reward_loop(lambda: load_reward_manager(config, tokenizer), batch)
    return [output["reward_score"] for output in outputs]


# --- the files themselves -------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED_CONFIGS)
def test_config_header_states_versions_and_launch(name: str) -> None:
    text = (CONFIG_DIR / f"{name}.yaml").read_text(encoding="utf-8")
    header = text.split("\n\n", 1)[0]
    versions = "verl 0.4.0 - 0.7.0" if name == LEGACY_CONFIG else "verl >= 0.7.1"
    assert versions in header
    assert "python -m verl.trainer.main_ppo" in header
    assert f"--config-name={name} " in header


def _leaf_paths(node: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaf_paths(value, f"{prefix}{key}.")
    else:
        yield prefix.rstrip(".")


@pytest.mark.parametrize("name", SHIPPED_CONFIGS)
def test_every_key_exists_in_verl_trainer_config(name: str) -> None:
    """A config file may add keys silently, so a misspelled key would be ignored: check each
    against verl's stock config (the function options are ours and are checked by scoring)."""
    raw = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / f"{name}.yaml"))
    stock = stock_verl_config()
    missing = object()
    paths = [
        path
        for path in _leaf_paths(raw)
        if not path.startswith(("hydra.", "defaults")) and ".reward_kwargs." not in f".{path}"
    ]
    assert len(paths) > 15
    unknown = [p for p in paths if OmegaConf.select(stock, p, default=missing) is missing]
    assert unknown == []


@pytest.mark.filterwarnings("ignore:Disabled critic:UserWarning")
@pytest.mark.parametrize("name", SHIPPED_CONFIGS)
def test_configs_pass_verl_validation(name: str, tmp_path: Path, tokenizer: Any) -> None:
    """verl's own ``validate_config``, the first thing ``main_ppo`` does; the model is a local
    two-layer stand-in because validation reads the model's config."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    save_model_stub(tmp_path, tokenizer)
    overrides = [f"actor_rollout_ref.model.path={tmp_path}"]
    if name == LEGACY_CONFIG:
        overrides.append(LEGACY_PATH_OVERRIDE)
    config = compose(name, overrides)
    validate_config(config, need_reference_policy(config), need_critic(config))
    assert need_critic(config) == (name == "search_r1_ppo")


@pytest.mark.parametrize("name", NEW_STYLE_CONFIGS)
def test_composed_reward_keys(name: str) -> None:
    config = compose(name)
    function = config.reward.custom_reward_function
    assert function.path == "pkg://reward_plugins"
    assert function.name == "compute_score"
    assert dict(function.reward_kwargs) == {"score": 1.0}
    assert config.reward.reward_manager.name == "naive"
    assert config.data.reward_fn_key == "data_source"
    assert (
        config.algorithm.adv_estimator == {"search_r1_grpo": "grpo", "search_r1_ppo": "gae"}[name]
    )
    assert config.custom_reward_function.path is None  # the legacy keys stay unset


# --- each shipped config, built into a reward manager -----------------------------------------


@pytest.mark.parametrize("name", NEW_STYLE_CONFIGS)
@pytest.mark.parametrize("format_score", [0.0, 0.25])
def test_shipped_config_scores_like_verl(tokenizer: Any, name: str, format_score: float) -> None:
    overrides = [f"+reward.custom_reward_function.reward_kwargs.format_score={format_score}"]
    rewards = rewards_from_reward_loop(tokenizer, compose(name, overrides))
    assert rewards == [verl_reference_reward(s, format_score=format_score) for s in MIXED_SAMPLES]
    assert rewards == [hand_reward(s, format_score=format_score) for s in MIXED_SAMPLES]


def test_legacy_config_after_verl_08_migration(tokenizer: Any) -> None:
    """verl 0.7.1 - 0.8.x copy the top-level keys over at start-up, then load as usual."""
    config = compose(
        LEGACY_CONFIG,
        [LEGACY_PATH_OVERRIDE, "+custom_reward_function.reward_kwargs.format_score=0.1"],
    )
    config = migrate_legacy_reward_impl(config)
    rewards = rewards_from_reward_loop(tokenizer, config)
    assert rewards == [verl_reference_reward(s, format_score=0.1) for s in MIXED_SAMPLES]


def test_verl_09_ignores_the_legacy_keys(tokenizer: Any) -> None:
    """Pitfall of docs/verl.md: the legacy file composes on verl 0.9, but verl's built-in scorer
    runs and ``format_score=0.1`` from the config is lost (wrong answers get 0, not 0.1)."""
    config = compose(
        LEGACY_CONFIG,
        [LEGACY_PATH_OVERRIDE, "+custom_reward_function.reward_kwargs.format_score=0.1"],
    )
    assert get_custom_reward_fn(config) is None
    rewards = rewards_from_reward_loop(tokenizer, config)
    assert rewards == [verl_reference_reward(s, format_score=0.0) for s in MIXED_SAMPLES]
    assert rewards != [verl_reference_reward(s, format_score=0.1) for s in MIXED_SAMPLES]


# --- Hydra override prefixes, as docs/verl.md states them -------------------------------------


def test_listed_options_take_no_prefix() -> None:
    config = compose("search_r1_grpo", ["reward.custom_reward_function.reward_kwargs.score=2.0"])
    assert config.reward.custom_reward_function.reward_kwargs.score == 2.0
    with pytest.raises(Exception, match="Could not append to config"):
        compose("search_r1_grpo", ["+reward.custom_reward_function.reward_kwargs.score=2.0"])


def test_unlisted_options_need_plus() -> None:
    key = "reward.custom_reward_function.reward_kwargs.penalize_subem"
    with pytest.raises(Exception, match="Could not override"):
        compose("search_r1_ppo", [f"{key}=true"])
    assert OmegaConf.select(compose("search_r1_ppo", [f"+{key}=true"]), key) is True


def test_stock_verl_config_needs_plus_and_double_plus_always_works() -> None:
    key = "reward.custom_reward_function.reward_kwargs.format_score"
    with pytest.raises(Exception, match="Could not override"):
        stock_verl_config([f"{key}=0.1"])
    assert OmegaConf.select(stock_verl_config([f"+{key}=0.1"]), key) == 0.1
    assert OmegaConf.select(stock_verl_config([f"++{key}=0.1"]), key) == 0.1
    assert OmegaConf.select(compose("search_r1_grpo", [f"++{key}=0.1"]), key) == 0.1


def test_misspelled_option_fails_on_the_first_reward(tokenizer: Any) -> None:
    config = compose(
        "search_r1_grpo", ["+reward.custom_reward_function.reward_kwargs.fromat_score=1"]
    )
    with pytest.raises(reward_plugins.InvalidOption, match="fromat_score"):
        rewards_from_reward_loop(tokenizer, config)


# --- any shipped scorer under any shipped config -----------------------------------------------

SWITCHABLE_SCORERS = tuple(
    name
    for name in reward_plugins.registry.scorer_names()
    if all(
        "score" in registration.options
        and not any(spec.required for spec in registration.options.values())
        for registration in reward_plugins.registry.registrations_named(name)
    )
)
"""Every shipped QA scorer: it takes ``score`` (the one option the QA configs list) and has no
required option (``compute_score_metric`` needs ``metric``)."""
SWITCHABLE_CONFIGS = tuple(name for name in SHIPPED_CONFIGS if not name.startswith("recipe_"))
"""The configs that list ``score``; the recipe configs list the composed scorer's ``recipe``."""


def test_the_switchable_scorers_are_the_shipped_ones() -> None:
    assert set(SWITCHABLE_SCORERS) >= {
        "compute_score",
        "compute_score_subem",
        "compute_score_f1",
        "compute_score_format",
    }
    assert "compute_score_metric" not in SWITCHABLE_SCORERS
    assert "compute_score_composed" not in SWITCHABLE_SCORERS


@pytest.mark.parametrize("scorer", SWITCHABLE_SCORERS)
@pytest.mark.parametrize("name", SWITCHABLE_CONFIGS)
def test_every_config_scores_with_every_scorer(tokenizer: Any, name: str, scorer: str) -> None:
    """``name`` switched in any shipped config: verl's loader builds the manager, and each
    sample's reward is what the scorer's router gives with the config's options."""
    if name == LEGACY_CONFIG:
        config = migrate_legacy_reward_impl(
            compose(name, [LEGACY_PATH_OVERRIDE, f"custom_reward_function.name={scorer}"])
        )
    else:
        config = compose(name, [f"reward.custom_reward_function.name={scorer}"])
    function = config.reward.custom_reward_function
    assert function.name == scorer
    options = dict(function.reward_kwargs)
    options.pop("return_dict", None)
    router = getattr(reward_plugins, scorer)
    expected = [
        router(s.data_source, s.response, {"target": s.golds}, **options)["score"]
        for s in MIXED_SAMPLES
    ]
    assert rewards_from_reward_loop(tokenizer, config) == expected
    if scorer in REFERENCE_SCORERS:
        assert expected == [
            float(REFERENCE_SCORERS[scorer](s.response, {"target": s.golds})) for s in MIXED_SAMPLES
        ]


# --- the documented command lines ------------------------------------------------------------

CFG_JOB_DRIVER = """
import contextlib, io, json, sys
from hydra.core.global_hydra import GlobalHydra
from verl.trainer.main_ppo import main

printed = []
for argv in json.loads(sys.stdin.read()):
    sys.argv = ["main_ppo.py", *argv, "--cfg", "job"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main()
    GlobalHydra.instance().clear()
    printed.append(out.getvalue())
print(json.dumps(printed))
"""
"""Runs verl's real ``main_ppo`` entry point once per command line, in one interpreter (importing
verl once instead of once per command), and returns what ``--cfg job`` prints for each."""


VERL_DOC = REPO_ROOT / "docs" / "verl.md"
"""Where the verl command lines live; the README's own verl command is checked with them."""


def bash_verl_commands(path: Path) -> list[str]:
    """Every ``bash`` block of ``path`` that is a ``python -m verl.trainer.main_ppo`` command."""
    blocks = re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return [
        block.replace("\\\n", " ").strip()
        for block in blocks
        if block.startswith("python -m verl.trainer.main_ppo")
    ]


def documented_verl_commands() -> list[str]:
    return bash_verl_commands(VERL_DOC) + bash_verl_commands(REPO_ROOT / "README.md")


def command_arguments(command: str) -> list[str]:
    """The arguments after ``python -m verl.trainer.main_ppo``, with the shell expansions done."""
    expanded = (
        command.replace('"$(reward-plugins path verl)"', str(LEGACY_ENTRY_FILE))
        .replace("$PWD", str(REPO_ROOT))
        .replace("$HOME", os.path.expanduser("~"))
    )
    assert "$" not in expanded, expanded
    return shlex.split(expanded)[3:]


@pytest.fixture(scope="module")
def documented_job_configs() -> list[tuple[str, DictConfig]]:
    commands = documented_verl_commands()
    completed = subprocess.run(
        [sys.executable, "-c", CFG_JOB_DRIVER],
        input=json.dumps([command_arguments(c) for c in commands]),
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    printed = json.loads(completed.stdout.strip().splitlines()[-1])
    return [(c, OmegaConf.create(text)) for c, text in zip(commands, printed, strict=True)]


def test_docs_have_the_commands() -> None:
    commands = bash_verl_commands(VERL_DOC)
    assert len(commands) >= 8
    assert bash_verl_commands(REPO_ROOT / "README.md"), "the README's verl command"
    assert any("+reward.custom_reward_function.reward_kwargs." in c for c in commands)
    assert any("+custom_reward_function.reward_kwargs." in c for c in commands)
    assert any('"$(reward-plugins path verl)"' in c for c in commands)


REFERENCE_SCORERS = {
    "compute_score": search_r1_like_qa_em.compute_score,
    "compute_score_batch": search_r1_like_qa_em.compute_score,
    "compute_score_subem": search_r1_like_qa_em.compute_score_subem,
}


def expected_rewards(function_config: DictConfig) -> list[float]:
    """verl's reference scorer with the options of the composed config."""
    options = {"format_score": 0.0, "score": 1.0, **VERL_DEFAULT_OPTIONS}
    options.update(function_config.get("reward_kwargs") or {})
    options.pop("return_dict", None)
    reference_options = {"format_score": options.pop("format_score"), "score": options.pop("score")}
    assert options == VERL_DEFAULT_OPTIONS, "this command changes an option verl's scorer lacks"
    scorer = REFERENCE_SCORERS[function_config.name]
    return [
        float(scorer(s.response, {"target": s.golds}, **reference_options)) for s in MIXED_SAMPLES
    ]


def score_as_legacy_verl(tokenizer: Any, config: DictConfig) -> tuple[list[float], dict]:
    """verl 0.4 - 0.7.0: a legacy manager, built as their trainer built it, from the moved keys."""
    from verl.workers.reward_manager import get_reward_manager_cls

    config = migrate_legacy_reward_impl(copy.deepcopy(config))  # it edits the config in place
    manager_cls = get_reward_manager_cls(config.reward.reward_manager.name)
    manager = manager_cls(
        tokenizer=tokenizer,
        num_examine=0,
        compute_score=get_custom_reward_fn(config),
        reward_fn_key=config.data.reward_fn_key,
        **config.reward.get("reward_kwargs", {}),
    )
    result = manager(build_batch(tokenizer, MIXED_SAMPLES), return_dict=True)
    return result["reward_tensor"].sum(dim=-1).tolist(), result.get("reward_extra_info", {})


def test_documented_commands_build_managers_that_score_like_verl(
    tokenizer: Any, documented_job_configs: list[tuple[str, DictConfig]]
) -> None:
    for command, config in documented_job_configs:
        if config.custom_reward_function.path is not None:
            assert config.custom_reward_function.path == str(LEGACY_ENTRY_FILE), command
            expected = expected_rewards(config.custom_reward_function)
            rewards, extra_info = score_as_legacy_verl(tokenizer, config)
            assert rewards == pytest.approx(expected), command
            assert all(len(v) == len(MIXED_SAMPLES) for v in extra_info.values()), command
        else:
            assert config.reward.custom_reward_function.path == "pkg://reward_plugins", command
            expected = expected_rewards(config.reward.custom_reward_function)
            batch = build_batch(tokenizer, MIXED_SAMPLES)
            outputs = run_reward_loop(lambda c=config: load_reward_manager(c, tokenizer), batch)
            assert [o["reward_score"] for o in outputs] == pytest.approx(expected), command
            assert len({tuple(o["reward_extra_info"]) for o in outputs}) == 1, command
        assert config.data.reward_fn_key == "data_source", command


def test_documented_commands_reward_kwargs_take_effect(
    documented_job_configs: list[tuple[str, DictConfig]],
) -> None:
    """Where a command sets format_score=0.1 the wrong answers of the mixed batch earn 0.1."""
    changed = 0
    for command, config in documented_job_configs:
        if "format_score=0.1" in command:
            function = config.reward.custom_reward_function
            if config.custom_reward_function.path is not None:
                function = config.custom_reward_function
            wrong = [i for i, s in enumerate(MIXED_SAMPLES) if s.kind == "wrong"]
            assert [expected_rewards(function)[i] for i in wrong] == [0.1] * len(wrong)
            changed += 1
    assert changed >= 3


# --- what verl logs ---------------------------------------------------------------------------


def test_logged_keys_become_validation_metrics_per_data_source(tokenizer: Any) -> None:
    """verl's ``process_validation_metrics`` on the extra info a manager returned, with verl's own
    ``reward`` column added as its validation does; means worked by hand from the samples."""
    from verl.trainer.ppo.metric_utils import process_validation_metrics

    batch = build_batch(tokenizer, MIXED_SAMPLES)
    config = compose("search_r1_grpo")
    outputs = run_reward_loop(lambda: load_reward_manager(config, tokenizer), batch)
    columns: dict[str, list[Any]] = {"reward": [o["reward_score"] for o in outputs]}
    for output in outputs:
        for key, value in output["reward_extra_info"].items():
            columns.setdefault(key, []).append(value)

    metrics = process_validation_metrics(
        np.array([s.data_source for s in MIXED_SAMPLES]),
        [f"prompt-{i}" for i in range(len(MIXED_SAMPLES))],
        columns,
    )
    assert set(metrics) == {s.data_source for s in MIXED_SAMPLES}
    for per_variable in metrics.values():
        assert set(per_variable) == {"reward", *outputs[0]["reward_extra_info"]}
        assert all("mean@1" in values for values in per_variable.values())
    assert metrics["searchR1_nq"]["acc"]["mean@1"] == 1.0
    assert metrics["searchR1_triviaqa"]["acc"]["mean@1"] == 0.0
    assert metrics["searchR1_popqa"]["spam_penalized"]["mean@1"] == 1.0
    assert metrics["searchR1_popqa"]["reward"]["mean@1"] == 0.25
    assert metrics["searchR1_hotpotqa"]["answer_found"]["mean@1"] == 0.0


def test_reward_key_is_never_returned() -> None:
    for sample in (*MIXED_SAMPLES, Sample("searchR1_nq", "q", "", ["x"], "missing")):
        result = reward_plugins.compute_score(
            sample.data_source, sample.response, {"target": sample.golds}
        )
        assert "reward" not in result
