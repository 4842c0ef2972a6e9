"""The example plugin ``examples/gsm8k_reward``, installed as a distribution of its own.

The example is built and installed with ``pip install --target`` into a temporary directory,
never into the shared environment, and is reached only through its entry point, in fresh
interpreters whose ``PYTHONPATH`` holds that directory: this process never imports it. Each
check runs the real consumer: verl's own loader and reward-loop manager, the TRL reward
function, OpenRLHF's own executor loading the reward file, and the ``reward-plugins`` command.
Two more distributions made here, one that fails to import and one that claims the example's
scorer again, show what a broken plugin does (and does not) break. The snippets of
docs/plugins.md that need the example installed run here too.

Expected rewards come from verl's ``verl.utils.reward_score.gsm8k.compute_score`` on a generated
set, or are worked out by hand (right 1.0, wrong ``format_score``, no answer 0.0).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[1]
TESTS_DIR = Path(__file__).resolve().parent
EXAMPLE = REPO_ROOT / "examples" / "gsm8k_reward"
GSM8K = "openai/gsm8k"
RESULT_KEYS = {"score", "acc", "answer_found"}
TIMEOUT_S = 300

ORIGIN = "entry point 'gsm8k' of distribution 'reward-plugins-gsm8k'"
BROKEN = (
    "entry point 'broken' (broken_reward) of distribution 'reward-plugins-broken' failed to "
    "load: No module named 'no_such_dependency_of_reward_plugins'"
)
CLASH = (
    "entry point 'clash' (clash_reward) of distribution 'reward-plugins-clash' failed to load: "
    "scorer 'gsm8k_numeric' for data source 'openai/gsm8k' is claimed twice: by "
    f"gsm8k_reward.gsm8k_numeric (from {ORIGIN}) and by clash_reward.gsm8k_numeric (from entry "
    "point 'clash' of distribution 'reward-plugins-clash')"
)


# ----------------------------------------------------------------------------- installation


def pip_install(target: Path, *sources: Path) -> None:
    """``pip install --target``: no dependencies, no build isolation, no index, no cache."""
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--target",
            str(target),
            *map(str, sources),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]


def write_distribution(root: Path, name: str, module: str, entry_point: str, code: str) -> Path:
    """A one-module distribution registering ``module`` under ``entry_point``."""
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [build-system]
            requires = ["setuptools>=68"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{name}"
            version = "0.0.1"
            dependencies = ["reward-plugins"]

            [project.entry-points.reward_plugins]
            {entry_point} = "{module}"

            [tool.setuptools]
            py-modules = ["{module}"]
            """
        ),
        encoding="utf-8",
    )
    (root / f"{module}.py").write_text(textwrap.dedent(code), encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def plugin_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example installed into a directory of its own (built from a copy: setuptools writes
    ``build/`` and ``*.egg-info`` next to the sources)."""
    work = tmp_path_factory.mktemp("gsm8k_plugin")
    source = work / "source"
    shutil.copytree(
        EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    target = work / "target"
    pip_install(target, source)
    assert (target / "gsm8k_reward" / "__init__.py").is_file()
    return target


@pytest.fixture(scope="session")
def bad_plugins_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two more distributions: ``broken`` registers a scorer, then fails to import a missing
    dependency; ``clash`` registers the example's own ``(openai/gsm8k, gsm8k_numeric)``."""
    work = tmp_path_factory.mktemp("bad_plugins")
    broken = write_distribution(
        work / "broken",
        "reward-plugins-broken",
        "broken_reward",
        "broken",
        """\
        from reward_plugins import scorer


        @scorer("broken_scorer", "broken/source")
        def broken_scorer(response, golds):
            return 1.0


        import no_such_dependency_of_reward_plugins  # noqa: E402, F401
        """,
    )
    clash = write_distribution(
        work / "clash",
        "reward-plugins-clash",
        "clash_reward",
        "clash",
        """\
        from reward_plugins import scorer


        @scorer("gsm8k_numeric", "openai/gsm8k")
        def gsm8k_numeric(response, golds):
            return 0.0
        """,
    )
    target = work / "target"
    pip_install(target, broken, clash)
    return target


# ------------------------------------------------------------------------------- subprocesses


def run_fresh(
    arguments: list[str],
    *paths: Path,
    cwd: Path,
    environment: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python ARGUMENTS`` in a fresh interpreter: ``paths`` first on ``PYTHONPATH``, then the
    working tree and ``tests/`` (for ``verl_helpers``); no ``REWARD_PLUGINS_*`` from outside."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REWARD_PLUGINS_")}
    env["PYTHONPATH"] = os.pathsep.join(map(str, [*paths, REPO_ROOT, TESTS_DIR]))
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "0"})
    env.update(environment or {})
    return subprocess.run(
        [sys.executable, *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def run_script(
    script: str,
    *paths: Path,
    tmp_path: Path,
    data: Any = None,
    environment: dict[str, str] | None = None,
) -> Any:
    """Run ``script`` with ``sys.argv[1]`` a JSON file holding ``data`` and ``sys.argv[2]`` the
    file it writes its JSON result to (stdout is left to the libraries' chatter)."""
    source = tmp_path / "check.py"
    source.write_text(textwrap.dedent(script), encoding="utf-8")
    data_file, result_file = tmp_path / "data.json", tmp_path / "result.json"
    data_file.write_text(json.dumps(data), encoding="utf-8")
    completed = run_fresh(
        [str(source), str(data_file), str(result_file)],
        *paths,
        cwd=tmp_path,
        environment=environment,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads(result_file.read_text(encoding="utf-8"))


def installed_from(module_file: str, target: Path) -> bool:
    return Path(module_file).resolve().is_relative_to(target.resolve())


# ------------------------------------------------------------------------------------ verl

VERL_SCRIPT = """\
import json
import sys

import numpy as np
from omegaconf import OmegaConf
from verl.trainer.ppo.reward import get_custom_reward_fn, load_reward_manager
from verl.utils.reward_score import gsm8k as verl_gsm8k
from verl_helpers import Sample, build_batch, build_tokenizer, run_reward_loop


def config(**reward_kwargs):
    return OmegaConf.create({"reward": {
        "custom_reward_function": {
            "path": "pkg://reward_plugins", "name": "gsm8k_numeric", "reward_kwargs": reward_kwargs,
        },
        "reward_manager": {"name": "naive", "source": "register"},
    }})


data = json.load(open(sys.argv[1]))
samples, loop_rows = data["samples"], data["loop_rows"]
default_fn = get_custom_reward_fn(config())
option_fn = get_custom_reward_fn(config(score=2.0, format_score=0.1))
result = {
    "routed": [
        default_fn(data_source="openai/gsm8k", solution_str=r, ground_truth=g, extra_info={"i": i})
        for i, (r, g) in enumerate(samples)
    ],
    "verl": [verl_gsm8k.compute_score(r, g) for r, g in samples],
    "verl_answer": [verl_gsm8k.extract_solution(r) for r, _ in samples],
    "routed_options": [option_fn("openai/gsm8k", r, g)["score"] for r, g in samples],
    "verl_options": [
        verl_gsm8k.compute_score(r, g, score=2.0, format_score=0.1) for r, g in samples
    ],
}

tokenizer = build_tokenizer()
batch = build_batch(
    tokenizer, [Sample("openai/gsm8k", "How many?", r, g, "") for r, g in loop_rows]
)
reward_model = np.empty(len(loop_rows), dtype=object)
reward_model[:] = [{"style": "rule", "ground_truth": g} for _, g in loop_rows]
batch.non_tensor_batch["reward_model"] = reward_model  # verl's gsm8k rows: a bare "72"
outputs = run_reward_loop(
    lambda: load_reward_manager(config(format_score=0.1), tokenizer), batch
)
result["loop"] = [[o["reward_score"], o["reward_extra_info"]] for o in outputs]
result["module"] = sys.modules["gsm8k_reward"].__file__
json.dump(result, open(sys.argv[2], "w"))
"""

FILLER = (
    "Let's think step by step.",
    "She has 3 apples and buys 4 more, so she has 7.",
    "Half of 18 is 9.",
    "The total is 12 + 30 = 42 dollars.",
    "Each box holds 6, and 5 boxes hold 30.",
)
FORMS = (
    "{r} #### {a}",
    "{r}\n#### {a}",
    "{r} #### {a} dollars.",
    "{r} ####{a}",  # no space after the marker: strict finds nothing
    "{r} The answer is {a}.",  # no marker
    "{r} #### {w}\nLet me check again. #### {a}",  # the last marker counts
    "#### {a}\n{r}",  # the marker first: clipped away when the reasoning is long
    "{r} #### ${a}",
)


def generated_samples(count: int = 1500, seed: int = 8) -> list[list[str]]:
    """``[response, gold]`` pairs: right, wrong, thousands separators, numerically equal but
    written differently, missing markers, clipped answers; golds as verl's preprocessing writes
    them (a bare integer string)."""
    rng = random.Random(seed)
    samples = []
    for _ in range(count):
        value = rng.choice((rng.randint(0, 99), rng.randint(100, 999_999), -rng.randint(1, 500)))
        gold = str(value)
        wrong = str(value + rng.choice((-10, -1, 1, 2, 100)))
        answer = rng.choice(
            (gold, gold, gold, wrong, f"{value:,}", f"{gold}.0", f"{gold}.", f"{gold}.5", ".")
            + ((f"0{gold}",) if value >= 0 else ())
        )
        reasoning = " ".join(rng.choices(FILLER, k=rng.randint(0, 12)))
        response = rng.choice(FORMS).format(r=reasoning, a=answer, w=wrong)
        samples.append([response, gold])
    return samples


def numerically_equal(answer: str, gold: str) -> bool:
    try:
        return Fraction(answer) == Fraction(gold)
    except (ValueError, ZeroDivisionError):
        return False


LOOP_ROWS = [
    ["4 * 18 = 72\n#### 72", "72"],
    ["#### 71", "72"],
    ["I think it is 72", "72"],
    ["#### 1,000", "1000"],
    ["#### 72.0", "72"],
    ["#### 72", 72],  # a number as the gold: read as "72"
]


def test_verl_loads_the_plugin_and_matches_verl_gsm8k(plugin_target: Path, tmp_path: Path) -> None:
    samples = generated_samples()
    result = run_script(
        VERL_SCRIPT,
        plugin_target,
        tmp_path=tmp_path,
        data={"samples": samples, "loop_rows": LOOP_ROWS},
    )
    assert installed_from(result["module"], plugin_target)

    kinds = {"right": 0, "wrong": 0, "none": 0, "numeric only": 0}
    rows = zip(
        samples,
        result["routed"],
        result["verl"],
        result["verl_answer"],
        result["routed_options"],
        result["verl_options"],
        strict=True,
    )
    for (response, gold), routed, verl, answer, routed_options, verl_options in rows:
        assert set(routed) == RESULT_KEYS, response
        if answer is not None and answer != gold and numerically_equal(answer, gold):
            # the one difference: "#### 72.0" is right here, format_score in verl
            kinds["numeric only"] += 1
            assert (verl, verl_options) == (0.0, 0.1), response
            assert routed == {"score": 1.0, "acc": 1.0, "answer_found": 1.0}, response
            assert routed_options == 2.0, response
            continue
        kind = "none" if answer is None else "right" if answer == gold else "wrong"
        kinds[kind] += 1
        assert routed["score"] == verl, response
        assert routed_options == verl_options, response
        assert routed["acc"] == float(kind == "right"), response
        assert routed["answer_found"] == float(kind != "none"), response
    assert min(kinds.values()) >= 50, kinds

    # verl's NaiveRewardManager, loaded by load_reward_manager with reward_kwargs format_score=0.1
    rewards = [reward for reward, _ in result["loop"]]
    assert rewards == [1.0, 0.1, 0.0, 1.0, 1.0, 1.0]
    assert [info for _, info in result["loop"]] == [
        {"score": 1.0, "acc": 1.0, "answer_found": 1.0},
        {"score": 0.1, "acc": 0.0, "answer_found": 1.0},
        {"score": 0.0, "acc": 0.0, "answer_found": 0.0},
        {"score": 1.0, "acc": 1.0, "answer_found": 1.0},
        {"score": 1.0, "acc": 1.0, "answer_found": 1.0},
        {"score": 1.0, "acc": 1.0, "answer_found": 1.0},
    ]


# ------------------------------------------------------------------------------------- TRL

TRL_SCRIPT = """\
import json
import sys

from reward_plugins import InvalidOption
from reward_plugins.adapters.trl import make_reward_func

rows = json.load(open(sys.argv[1]))
columns = {
    "data_source": [row["data_source"] for row in rows],
    "reward_model": [{"style": "rule", "ground_truth": row["gold"]} for row in rows],
}
completions = [
    [{"role": "assistant", "content": row["completion"]}] if i % 2 else row["completion"]
    for i, row in enumerate(rows)
]
logged = {}
reward = make_reward_func(scorer="gsm8k_numeric")
result = {
    "name": reward.__name__,
    "default": reward(
        prompts=["q"] * len(rows), completions=completions, trainer_state=None,
        log_metric=logged.__setitem__, **columns,
    ),
    "logged": logged,
}
flexible = make_reward_func(scorer="gsm8k_numeric", method="flexible", format_score=0.5)
result["flexible"] = flexible(prompts=["q"] * len(rows), completions=completions, **columns)
try:
    make_reward_func(scorer="gsm8k_numeric", method="loose")
except InvalidOption as error:
    result["invalid"] = str(error)
result["module"] = sys.modules["gsm8k_reward"].__file__
json.dump(result, open(sys.argv[2], "w"))
"""


def test_trl_reward_function_reaches_the_plugin(plugin_target: Path, tmp_path: Path) -> None:
    rows = [
        {"data_source": GSM8K, "completion": "6 * 12 = 72.\n#### 72", "gold": "72"},
        {"data_source": GSM8K, "completion": "#### 70", "gold": "72"},
        {"data_source": GSM8K, "completion": "The answer is 72.", "gold": "72"},
        {"data_source": GSM8K, "completion": "It costs $1,250 in total.", "gold": 1250},
    ]
    result = run_script(TRL_SCRIPT, plugin_target, tmp_path=tmp_path, data=rows)
    assert installed_from(result["module"], plugin_target)
    assert result["name"] == "reward_plugins_gsm8k_numeric"
    assert result["default"] == [1.0, 0.0, 0.0, 0.0]
    assert result["logged"] == {
        "rewards/reward_plugins_gsm8k_numeric/acc": 0.25,
        "rewards/reward_plugins_gsm8k_numeric/answer_found": 0.5,
    }
    # flexible: the last number anywhere, commas dropped; the wrong "70" pays format_score
    assert result["flexible"] == [1.0, 0.5, 1.0, 1.0]
    assert "option 'method' must be one of 'strict', 'flexible'" in result["invalid"]


# -------------------------------------------------------------------------------- OpenRLHF

OPENRLHF_SCRIPT = """\
import asyncio
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import reward_plugins.adapters
from openrlhf.utils.agent import SingleTurnAgentExecutor
from verl_helpers import build_tokenizer

REWARD_FILE = Path(reward_plugins.adapters.__file__).with_name("openrlhf_reward.py")
PROMPT = (
    "<|im_start|>user\\nJanet has 9 ducks and buys 63 more. How many? Let's think step by step "
    'and output the final answer after "####".<|im_end|>\\n<|im_start|>assistant\\n'
)


class ScriptedEngine:
    # Stands in for vLLM: "generates" the tokens of a given response, then end-of-turn.
    def __init__(self, tokenizer, response):
        ids = tokenizer(text=response, add_special_tokens=False)["input_ids"]
        self.token_ids = [*ids, tokenizer.eos_token_id]

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        output = SimpleNamespace(token_ids=self.token_ids, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


executor = SingleTurnAgentExecutor(str(REWARD_FILE))  # OpenRLHF's own loader
tokenizer = build_tokenizer()
params = SimpleNamespace(max_tokens=None, logprobs=None)
outputs = []
for response, label in json.load(open(sys.argv[1])):
    engine = ScriptedEngine(tokenizer, response)
    output = asyncio.run(executor.execute(PROMPT, label, params, 4096, tokenizer, engine))
    outputs.append({
        "reward": None if output["reward"] is None else output["reward"].tolist(),
        "extra_logs": {k: v.tolist() for k, v in output["extra_logs"].items()},
    })
result = {"outputs": outputs, "module": sys.modules["gsm8k_reward"].__file__}
json.dump(result, open(sys.argv[2], "w"))
"""


def test_openrlhf_reward_file_reaches_the_plugin(plugin_target: Path, tmp_path: Path) -> None:
    cases = [
        ["9 + 63 = 72\n#### 72", "72"],  # a plain gold string
        ["9 + 63 = 71\n#### 71", '{"target": "72"}'],  # a JSON label
        ["About seventy.", '{"target": ["72"], "data_source": "openai/gsm8k"}'],
        ["#### 72.0", "72"],
        ["#### 72", '{"target": 72.0}'],  # a JSON number as the gold: read as "72"
    ]
    result = run_script(
        OPENRLHF_SCRIPT,
        plugin_target,
        tmp_path=tmp_path,
        data=cases,
        environment={
            "REWARD_PLUGINS_SCORER": "gsm8k_numeric",
            "REWARD_PLUGINS_DATA_SOURCE": GSM8K,
            "REWARD_PLUGINS_OPTIONS": '{"format_score": 0.25}',
        },
    )
    assert installed_from(result["module"], plugin_target)
    outputs = result["outputs"]
    assert [o["reward"] for o in outputs] == [[1.0], [0.25], [0.0], [1.0], [1.0]]
    assert [o["extra_logs"] for o in outputs] == [
        {"acc": [1.0], "answer_found": [1.0]},
        {"acc": [0.0], "answer_found": [1.0]},
        {"acc": [0.0], "answer_found": [0.0]},
        {"acc": [1.0], "answer_found": [1.0]},
        {"acc": [1.0], "answer_found": [1.0]},
    ]


# ------------------------------------------------------------------------------------- CLI


def test_cli_scores_with_the_plugin_and_lists_it(plugin_target: Path, tmp_path: Path) -> None:
    rows = [
        ("Janet sells 16 - 3 - 4 = 9 eggs for 2 dollars each.\n#### 18", "18"),
        ("#### 17", "18"),
        ("She makes 18 dollars.", "18"),
        ("#### 3,000", 3000),  # numbers as golds
        ("#### 2.5", 2.5),
    ]
    source, output = tmp_path / "rollouts.jsonl", tmp_path / "scored.jsonl"
    source.write_text(
        "".join(
            json.dumps(
                {
                    "data_source": GSM8K,
                    "response": response,
                    "reward_model": {"style": "rule", "ground_truth": gold},
                }
            )
            + "\n"
            for response, gold in rows
        ),
        encoding="utf-8",
    )
    arguments = ["-m", "reward_plugins", "score", str(source), "-o", str(output), "-q"]
    completed = run_fresh(
        [*arguments, "--scorer", "gsm8k_numeric", "--set", "format_score=0.5"],
        plugin_target,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr
    assert "scored 5 of 5 rows" in completed.stdout
    scored = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [(r["reward_score"], r["reward_acc"], r["reward_answer_found"]) for r in scored] == [
        (1.0, 1.0, 1.0),
        (0.5, 0.0, 1.0),
        (0.0, 0.0, 0.0),
        (1.0, 1.0, 1.0),
        (1.0, 1.0, 1.0),
    ]

    refused = run_fresh(
        [*arguments, "--scorer", "gsm8k_numeric", "--set", "method=loose"],
        plugin_target,
        cwd=tmp_path,
    )
    assert refused.returncode == 2
    assert "option 'method' must be one of 'strict', 'flexible'" in refused.stderr

    listing = run_fresh(["-m", "reward_plugins", "list"], plugin_target, cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    entry = lines[lines.index("gsm8k_numeric") : lines.index("gsm8k_numeric") + 5]
    assert entry == [
        "gsm8k_numeric",
        "  data sources: openai/gsm8k",
        "  options: method='strict', score=1.0, format_score=0.0",
        "  ground truth: tuple of gold strings",
        f"  from: {ORIGIN} (gsm8k_reward.gsm8k_numeric)",
    ]
    assert "broken plugin" not in listing.stdout


# ---------------------------------------------------------------------------- broken plugins

BROKEN_SCRIPT = """\
import json
import sys

import reward_plugins
from reward_plugins import UnknownDataSource, UnknownScorer

result = {
    "search_r1": reward_plugins.compute_score(
        "searchR1_nq", "<answer>Paris</answer>", {"target": ["Paris"]}
    )["score"],
    "gsm8k": reward_plugins.gsm8k_numeric("openai/gsm8k", "#### 72", "72"),
    "broken": [broken.describe() for broken in reward_plugins.broken_plugins()],
    "scorers": sorted({r.name for r in reward_plugins.registrations()}),
}
try:
    reward_plugins.compute_score("broken/source", "<answer>x</answer>", "x")
except UnknownDataSource as error:
    result["unknown_source"] = str(error)
try:
    reward_plugins.compute_score_batch(["broken/source"], ["x"], ["x"], scorer="broken_scorer")
except UnknownScorer as error:
    result["unknown_scorer"] = str(error)
json.dump(result, open(sys.argv[2], "w"))
"""


def test_a_broken_plugin_breaks_only_its_own_data_sources(
    plugin_target: Path, bad_plugins_target: Path, tmp_path: Path
) -> None:
    paths = (plugin_target, bad_plugins_target)  # the example first: it wins the clash

    listing = run_fresh(["-m", "reward_plugins", "list"], *paths, cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert f"broken plugin: {BROKEN}" in listing.stdout.splitlines()
    assert f"broken plugin: {CLASH}" in listing.stdout.splitlines()
    assert f"  from: {ORIGIN} (gsm8k_reward.gsm8k_numeric)" in listing.stdout
    assert "broken_scorer" not in listing.stdout  # what the failed import registered is undone
    assert listing.stderr.count(BROKEN) == 1  # logged once
    assert listing.stderr.count(CLASH) == 1

    demo = run_fresh(["-m", "reward_plugins", "score", "--demo", "-q"], *paths, cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert "scored" in demo.stdout and "(shipped sample)" in demo.stdout

    result = run_script(BROKEN_SCRIPT, *paths, tmp_path=tmp_path)
    assert result["search_r1"] == 1.0
    assert result["gsm8k"] == {"score": 1.0, "acc": 1.0, "answer_found": 1.0}
    assert sorted(result["broken"]) == [BROKEN, CLASH]  # one directory: no fixed order
    assert "broken_scorer" not in result["scorers"]
    assert "no scorer is registered for data_source='broken/source'" in result["unknown_source"]
    assert BROKEN in result["unknown_source"]
    assert "no scorer is registered as 'broken_scorer'" in result["unknown_scorer"]
    assert BROKEN in result["unknown_scorer"]


# ------------------------------------------------------------------------------------ docs


def test_guide_snippets_that_need_the_example_run_with_it(
    plugin_target: Path, tmp_path: Path
) -> None:
    """The ``python`` blocks of docs/plugins.md that tests/test_docs_snippets.py skips because
    they need the example installed print what their ``# ->`` comments say, with it installed."""
    from test_docs_snippets import code_blocks, expected_output

    blocks = [
        block
        for block in code_blocks(REPO_ROOT / "docs" / "plugins.md")
        if block.language == "python" and "example plugin installed" in (block.no_run or "")
    ]
    assert len(blocks) >= 2
    for block in blocks:
        script = tmp_path / "snippet.py"
        script.write_text(block.source, encoding="utf-8")
        completed = run_fresh([str(script)], plugin_target, cwd=tmp_path)
        assert completed.returncode == 0, f"{block.name}:\n{completed.stderr[-3000:]}"
        printed = [line.rstrip() for line in completed.stdout.splitlines()]
        assert printed == expected_output(block.source), block.name
