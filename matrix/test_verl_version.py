"""What the installed verl version proves, run with that version's own code (one nox env each).

Every row below is run, and its outcome (``ok``, or the exact error) must equal the one recorded
for this version in ``matrix/results.json``: a row that stops working, or starts working, fails
the matrix until the record (and the docs generated from it) says so. ``MATRIX_RECORD=1`` writes
the outcomes instead of comparing them (``nox -s matrix -- --record``).

Rows, per version (github.com/verl-project/verl, the tag of the installed version):

- ``config:NAME``: the config documented for this version composes with this version's Hydra
  config, goes through what ``main_ppo`` (or ``main_ppo_sync``) does to it before loading, and
  this version's ``get_custom_reward_fn`` loads this package's scorer with the config's options.
- ``trainer:MANAGER`` (verl < 0.7.1): the trainer's path, ``load_reward_manager`` then
  ``compute_reward``, for every manager of ``verl/workers/reward_manager``.
- ``loop:MANAGER``: every reward-loop manager (``verl/experimental/reward/reward_loop`` in 0.6.1,
  ``verl/experimental/reward_loop/reward_manager`` later), loaded as this version's reward worker
  loads it, scoring one sample per call.
- ``legacy-class:MANAGER`` (verl >= 0.7.1): the legacy manager classes, which the trainer no
  longer uses, built directly with the function verl's loader returns.
- ``import:MODULE``: the trainer entry point imports in this environment, and without the
  packages it imports but does not declare.
- ``check:...``: ``reward-plugins check`` refuses a config this version would silently ignore.

Each scoring row checks the values twice: with the config's defaults, against this version's own
``search_r1_like_qa_em``; with ``format_score=0.1`` in ``reward_kwargs``, against the values worked
out by hand. The results then go through this version's ``process_validation_metrics`` and the
trainer's ``non_tensor_batch`` update.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import verl
from omegaconf import OmegaConf
from verl_helpers import (
    LEGACY_CONFIG,
    MIXED_SAMPLES,
    SHIPPED_CONFIGS,
    build_batch,
    build_tokenizer,
    compose,
    hand_reward,
    verl_reference_reward,
)

from reward_plugins.verl_config import parse_verl_version

MATRIX_DIR = Path(__file__).resolve().parent
RESULTS_FILE = MATRIX_DIR / "results.json"
VERSION = verl.__version__
RELEASE = parse_verl_version(VERSION)
RECORDING = os.environ.get("MATRIX_RECORD") == "1"
OUTCOMES: dict[str, str] = {}
KWARGS_FORMAT_SCORE = 0.1
CLI = str(Path(sys.executable).with_name("reward-plugins"))
"""The command the docs run, from this environment."""

NEW_KEYS = RELEASE >= (0, 7, 1)
"""verl >= 0.7.1 reads ``reward.*`` (https://github.com/verl-project/verl/pull/5289)."""
MIGRATES_LEGACY = (0, 7, 1) <= RELEASE < (0, 9, 0)
"""``main_ppo`` copies the legacy top-level keys over (until
https://github.com/verl-project/verl/pull/6710)."""
DOCUMENTED_CONFIGS = (
    (*(name for name in SHIPPED_CONFIGS if name != LEGACY_CONFIG), "search_r1_multiturn_grpo")
    if NEW_KEYS
    else (LEGACY_CONFIG,)
)
HAS_MAIN_PPO_SYNC = (0, 8, 0) <= RELEASE < (0, 9, 0)
"""0.8.x's new trainer entry point; it does not migrate the legacy keys."""
UNDECLARED_IMPORTS = ("cachetools", "fastapi", "uvicorn")
"""Imported by verl's agent-loop server; verl 0.8.0's trainer entry points import them at start
without declaring them (the import rows show which versions need them)."""


class SilentFallback(AssertionError):
    """verl loaded no custom reward function: it would train on its built-in scorer."""


# --- building configs and loading the reward the way this version does ---------------------------


def entry_file() -> str:
    """The entry file verl < 0.7.0 loads by path, as the documented command prints it."""
    return subprocess.run(
        [CLI, "path", "verl"], check=True, capture_output=True, text=True
    ).stdout.strip()


def documented_config(name: str, overrides: tuple[str, ...] = ()) -> Any:
    """``name`` composed with this version's Hydra config, as ``main_ppo`` receives it."""
    base = [f"custom_reward_function.path={entry_file()}"] if name == LEGACY_CONFIG else []
    return compose(name, (*base, *overrides))


def prepared(config: Any, entry: str = "main_ppo") -> Any:
    """What the entry point does to the config before it loads the reward."""
    if MIGRATES_LEGACY and entry == "main_ppo":
        from verl.experimental.reward_loop import migrate_legacy_reward_impl

        return migrate_legacy_reward_impl(config)
    return config


def reward_node(config: Any) -> Any:
    """The node holding ``custom_reward_function`` that this version's loader reads."""
    return config.reward if NEW_KEYS else config


def custom_reward_fn(config: Any) -> Callable[..., Any]:
    """This version's ``get_custom_reward_fn``; refuses a silent fallback to verl's scorer."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    function = get_custom_reward_fn(config)
    if function is None:
        raise SilentFallback(
            "verl loaded no custom reward function: it trains on its built-in scorer"
        )
    return function


def config_overrides(manager: str, loop: bool, kwargs: bool) -> tuple[str, ...]:
    """The documented config's overrides that select ``manager`` (and the kwargs variant)."""
    root = "reward." if NEW_KEYS else ""
    overrides: list[str] = []
    if NEW_KEYS:
        overrides.append(f"reward.reward_manager.name={manager}")
    elif RELEASE >= (0, 7, 0) and not loop:
        overrides += [f"reward_manager.name={manager}", "reward_model.use_reward_loop=false"]
    else:
        overrides.append(f"reward_model.reward_manager={manager}")
    if manager == "batch":
        overrides.append(f"{root}custom_reward_function.name=compute_score_batch")
    if manager == "prime":
        overrides.append(f"++{root}custom_reward_function.reward_kwargs.return_dict=false")
    if manager == "remote":  # one Ray actor: this machine has 2 CPUs
        overrides.append(f"{'reward' if NEW_KEYS else 'reward_model'}.num_workers=1")
    if kwargs:
        overrides.append(
            f"++{root}custom_reward_function.reward_kwargs.format_score={KWARGS_FORMAT_SCORE}"
        )
    return tuple(overrides)


def overlong_buffer_off(loop: bool) -> tuple[str, ...]:
    """The DAPO manager options that keep its overlong penalty off (``enable: false``)."""
    node = "reward.reward_kwargs" if NEW_KEYS and loop else "reward_model.reward_kwargs"
    return (
        f"++{node}.overlong_buffer_cfg.enable=false",
        f"++{node}.overlong_buffer_cfg.len=0",
        f"++{node}.overlong_buffer_cfg.penalty_factor=0",
        f"++{node}.overlong_buffer_cfg.log=false",
        f"++{node}.max_resp_len=4096",
    )


# --- scoring ----------------------------------------------------------------------------------


def score_trainer(tokenizer: Any, batch: Any, config: Any) -> tuple[list[float], dict[str, list]]:
    """verl < 0.7.1's trainer: ``load_reward_manager`` then ``compute_reward``."""
    from verl.trainer.ppo.reward import compute_reward, load_reward_manager

    manager = load_reward_manager(
        config, tokenizer, num_examine=0, **config.reward_model.get("reward_kwargs", {})
    )
    custom_reward_fn(config)  # the manager falls back to verl's scorer without a word
    reward_tensor, extra = compute_reward(batch, manager)
    return reward_tensor.sum(-1).tolist(), dict(extra)


def legacy_manager_classes() -> dict[str, type]:
    from verl.workers.reward_manager.registry import REWARD_MANAGER_REGISTRY

    return dict(REWARD_MANAGER_REGISTRY)


def score_legacy_class(
    tokenizer: Any, batch: Any, config: Any, manager: str, manager_kwargs: dict[str, Any]
) -> tuple[list[float], dict[str, list]]:
    """A legacy manager class (verl >= 0.7.1), built as the older trainer built it; one that is
    a reward-loop manager (``rate_limited``) is built and run as verl's loader does."""
    cls = legacy_manager_classes()[manager]
    if hasattr(cls, "run_single"):
        return score_loop(
            tokenizer,
            batch,
            lambda: cls(config=config, tokenizer=tokenizer, compute_score=custom_reward_fn(config)),
        )
    instance = cls(
        tokenizer=tokenizer,
        num_examine=0,
        compute_score=custom_reward_fn(config),
        reward_fn_key="data_source",
        **manager_kwargs,
    )
    result = instance(batch, return_dict=True)
    return result["reward_tensor"].sum(-1).tolist(), dict(result.get("reward_extra_info", {}))


def loop_manager_classes() -> dict[str, type]:
    if RELEASE < (0, 7, 0):
        from verl.experimental.reward.reward_loop import registry
    else:
        from verl.experimental.reward_loop.reward_manager import registry
    table = next(v for k, v in vars(registry).items() if k.isupper() and isinstance(v, dict))
    return dict(table)


def make_loop_manager(tokenizer: Any, config: Any) -> Any:
    """The reward-loop manager, loaded as this version's reward worker loads it."""
    if NEW_KEYS:
        from verl.trainer.ppo.reward import load_reward_manager

        custom_reward_fn(config)
        return load_reward_manager(config, tokenizer)
    cls = loop_manager_classes()[config.reward_model.reward_manager]
    return cls(config, tokenizer, custom_reward_fn(config), None, None)


def score_loop(
    tokenizer: Any, batch: Any, make_manager: Callable[[], Any]
) -> tuple[list[float], dict[str, list]]:
    """One ``run_single`` per sample, concurrently, in the loop the manager was built in."""
    for cls in loop_manager_classes().values():
        if "_class_initialized" in vars(cls):
            cls._class_initialized = False

    async def score_all() -> list[dict[str, Any]]:
        manager = make_manager()
        return list(
            await asyncio.gather(*(manager.run_single(batch[i : i + 1]) for i in range(len(batch))))
        )

    outputs = asyncio.run(score_all())
    extra: dict[str, list] = {}
    for output in outputs:
        for key, value in output["reward_extra_info"].items():
            extra.setdefault(key, []).append(value)
    return [float(output["reward_score"]) for output in outputs], extra


def check_values(scores: list[float], extra: dict[str, list], expected: list[float]) -> None:
    """The values, then the trainer's handling of the extra info and the validation metrics."""
    from verl.trainer.ppo.metric_utils import process_validation_metrics

    # The legacy managers hand the score over in a float32 tensor.
    assert scores == pytest.approx(expected, abs=1e-7), f"scores {scores} != {expected}"
    for key, values in extra.items():
        assert len(values) == len(scores), f"reward_extra_info[{key!r}] has {len(values)} values"
    batch = build_batch(build_tokenizer(), MIXED_SAMPLES)  # what the trainer does with them:
    batch.non_tensor_batch.update({key: np.array(values) for key, values in extra.items()})
    sources = [sample.data_source for sample in MIXED_SAMPLES]
    uids = [f"uid{i}" for i in range(len(MIXED_SAMPLES))]
    metrics = process_validation_metrics(sources, uids, {"reward": scores, **extra})
    for source in set(sources):
        mine = [e for s, e in zip(sources, expected, strict=True) if s == source]
        assert metrics[source]["reward"]["mean@1"] == pytest.approx(np.mean(mine))


def expected_values(kwargs: bool) -> list[float]:
    if kwargs:
        return [hand_reward(s, format_score=KWARGS_FORMAT_SCORE) for s in MIXED_SAMPLES]
    return [verl_reference_reward(s) for s in MIXED_SAMPLES]


# --- the rows ---------------------------------------------------------------------------------


def rows() -> Iterator[str]:
    yield from (f"config:{name}" for name in DOCUMENTED_CONFIGS)
    if NEW_KEYS:
        yield f"config:{LEGACY_CONFIG}"
        yield from (f"legacy-class:{name}" for name in sorted(legacy_manager_classes()))
        yield "legacy-class:dapo+overlong_buffer_cfg"
    else:
        yield from (f"trainer:{name}" for name in sorted(legacy_manager_classes()))
        yield "trainer:dapo+overlong_buffer_cfg"
    if RELEASE >= (0, 6, 1):
        yield from (f"loop:{name}" for name in sorted(loop_manager_classes()))
        yield "loop:dapo+overlong_buffer_cfg"
    entries = ("main_ppo", "main_ppo_sync") if HAS_MAIN_PPO_SYNC else ("main_ppo",)
    for entry in entries:
        yield f"import:verl.trainer.{entry}"
        yield f"import:verl.trainer.{entry} without {','.join(UNDECLARED_IMPORTS)}"
    if RELEASE == (0, 6, 1):
        yield "import:verl.experimental.reward without openai"
    if HAS_MAIN_PPO_SYNC:
        yield f"config:{LEGACY_CONFIG}@main_ppo_sync"
    # The config this version would ignore, and the entry point that ignores it.
    if not NEW_KEYS:
        yield "check:search_r1_grpo@main_ppo refused"
    elif HAS_MAIN_PPO_SYNC:
        yield f"check:{LEGACY_CONFIG}@main_ppo_sync refused"
    elif not MIGRATES_LEGACY:
        yield f"check:{LEGACY_CONFIG}@main_ppo refused"


def run_config_row(name: str, entry: str) -> None:
    """The config composes, goes through the entry point, and loads this package's scorer with
    the config's options; the loaded function scores every sample as the router does."""
    import reward_plugins

    config = prepared(documented_config(name), entry)
    function = custom_reward_fn(config)
    node = reward_node(config).custom_reward_function
    options = dict(node.get("reward_kwargs") or {})
    if hasattr(function, "args"):  # verl >= 0.5: partial(_call_with_kwargs, raw_fn, kwargs)
        raw, bound = function.args
        assert raw.__module__.startswith("reward_plugins"), raw
        assert dict(bound) == options, bound
    for sample in MIXED_SAMPLES:
        ground_truth = {"target": sample.golds}
        assert function(sample.data_source, sample.response, ground_truth, {}) == getattr(
            reward_plugins, "compute_score_composed" if "recipe" in node else node.name
        )(sample.data_source, sample.response, ground_truth, {}, **options)


def run_scoring_row(kind: str, manager: str) -> None:
    """Score with ``manager``; a wrong value names the error verl printed, if it printed one
    (legacy ``prime`` catches its own failures, prints them and scores the batch 0)."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            score_with_manager(kind, manager)
    except AssertionError as error:
        # verl's own message, without the response it echoes after it.
        errors = [
            line.partition(", completion:")[0]
            for line in printed.getvalue().splitlines()
            if "rror" in line
        ]
        first = str(error).partition("\n")[0]
        raise AssertionError(f"{errors[-1]} ({first})" if errors else first) from None


def score_with_manager(kind: str, manager: str) -> None:
    workaround = manager.endswith("+overlong_buffer_cfg")
    manager = manager.removesuffix("+overlong_buffer_cfg")
    loop = kind == "loop"
    tokenizer = build_tokenizer()
    batch = build_batch(tokenizer, MIXED_SAMPLES)
    name = "search_r1_grpo" if NEW_KEYS else LEGACY_CONFIG
    for kwargs in (False, True):
        overrides = config_overrides(manager, loop, kwargs)
        if workaround:
            overrides += overlong_buffer_off(loop)
        config = prepared(documented_config(name, overrides))
        if kind == "trainer":
            scores, extra = score_trainer(tokenizer, batch, config)
        elif kind == "loop":
            scores, extra = score_loop(
                tokenizer, batch, lambda config=config: make_loop_manager(tokenizer, config)
            )
        else:
            off = {"enable": False, "len": 0, "penalty_factor": 0, "log": False}
            manager_kwargs = (
                {"overlong_buffer_cfg": OmegaConf.create(off), "max_resp_len": 4096}
                if workaround
                else {}
            )
            scores, extra = score_legacy_class(tokenizer, batch, config, manager, manager_kwargs)
        check_values(scores, extra, expected_values(kwargs))


def run_import_row(module: str, blocked: tuple[str, ...]) -> None:
    """Import ``module`` in a fresh interpreter, with the packages ``blocked`` not installed."""
    # Every finder is wrapped to find nothing of ``blocked``: ``import`` then fails as for a
    # package that is not installed, and ``importlib.util.find_spec`` probes return None.
    code = (
        "import sys\n"
        "class NotInstalled:\n"
        "    def __init__(self, finder):\n"
        "        self.finder = finder\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.partition('.')[0] in {blocked!r}:\n"
        "            return None\n"
        "        return self.finder.find_spec(name, path, target)\n"
        "    def __getattr__(self, attribute):\n"
        "        return getattr(self.finder, attribute)\n"
        "sys.meta_path[:] = [NotInstalled(finder) for finder in sys.meta_path]\n"
        f"import {module}\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if result.returncode != 0:
        raise ImportError(result.stderr.strip().splitlines()[-1])


def run_check_row(name: str, entry: str) -> None:
    """``reward-plugins check`` (for the installed verl) refuses a config ``entry`` ignores."""
    config = Path(__file__).resolve().parents[1] / "configs" / f"{name}.yaml"
    result = subprocess.run(
        [CLI, "check", str(config), "--entry", entry],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"verl {VERSION} verl.trainer.{entry} does not read" in result.stderr, result.stderr


def run_row(row: str) -> None:
    kind, _, what = row.partition(":")
    if kind == "config":
        name, _, entry = what.partition("@")
        if name == "search_r1_multiturn_grpo":
            os.environ.setdefault("REWARD_PLUGINS_TOOL_CONFIG", "/dev/null")
        run_config_row(name, entry or "main_ppo")
    elif kind in ("trainer", "loop", "legacy-class"):
        run_scoring_row(kind, what)
    elif kind == "import":
        module, _, blocked = what.partition(" without ")
        run_import_row(module, tuple(filter(None, blocked.split(","))))
    elif kind == "check":
        name, _, entry = what.removesuffix(" refused").partition("@")
        run_check_row(name, entry)
    else:  # pragma: no cover - rows() names only the kinds above
        raise ValueError(row)


def outcome_of(row: str) -> str:
    asyncio.set_event_loop(asyncio.new_event_loop())  # as in a fresh process
    try:
        run_row(row)
    except Exception as error:  # the outcome is the error, compared with the record
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"{type(error).__name__}: {message}"[:500]
    return "ok"


def recorded() -> dict[str, str]:
    if not RESULTS_FILE.exists():
        return {}
    return json.loads(RESULTS_FILE.read_text())["versions"].get(VERSION, {}).get("rows", {})


@pytest.mark.parametrize("row", list(rows()))
def test_row(row: str) -> None:
    OUTCOMES[row] = outcome_of(row)
    if not RECORDING:
        claims = recorded()
        assert row in claims, f"verl {VERSION}: row {row!r} is not in {RESULTS_FILE.name}"
        assert OUTCOMES[row] == claims[row]


def test_no_recorded_row_is_left_out() -> None:
    """Every row the record holds for this version is still run."""
    if not RECORDING:
        assert set(recorded()) <= set(rows())


def run_record() -> dict[str, Any]:
    """This run's outcomes and working set (``matrix/conftest.py`` writes them out)."""
    from importlib.metadata import version

    packages = ("verl", "torch", "numpy", "tensordict", "transformers", "hydra-core", "ray")
    return {"rows": OUTCOMES, "packages": {name: version(name) for name in packages}}
