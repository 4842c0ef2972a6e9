"""Result schemas: what each scorer declares it returns, and what the engine derives from it.

- ``check_schema`` refuses a broken schema with a :class:`PluginError` naming the scorer, at
  registration (a fixed schema) or when an option set is bound (a schema function).
- Every built-in registration declares exactly the keys its result has (each scorer is called).
- Composed recipes derive their schema from their components, with the keys the result has.
- A third-party scorer's keys reach ``score``'s summary, ``--summary-json`` and ``compare``, run
  as the real command in a subprocess on real files; so do the example plugin's and a recipe's.
- The GDPO table of docs/composition.md is generated from the registrations:
  ``python tests/test_result_schema.py`` prints it, and
  ``test_gdpo_table_is_generated_from_the_registrations`` fails when the docs differ.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from generated_docs import assert_generated, marked
from test_cli_helpers import REPO, read_jsonl, run_cli_with_script, write_jsonl

import reward_plugins
from reward_plugins import registry
from reward_plugins.cli import main
from reward_plugins.errors import PluginError
from reward_plugins.plugins.composed import NAME as COMPOSED
from reward_plugins.plugins.composed import load_recipe, shipped_recipes
from reward_plugins.registry import BUILTIN_PLUGINS, Registration, scorer
from reward_plugins.results import SCORE_ONLY, ResultKey, check_schema, complete, union
from reward_plugins.router import check_options, result_schema, route, scorer_result_schema

COMPOSITION_DOC = REPO / "docs" / "composition.md"
TABLE_MARKER = "gdpo-table"
EXAMPLE = REPO / "examples" / "gsm8k_reward"

SCORE = ResultKey("score", "reward", "score", gdpo=True)


@pytest.fixture
def registry_state(restored_registry: Any) -> Iterator[None]:
    """The registry as it was before the test (a test scorer is not left behind)."""
    yield


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (42, "results must be ResultKey items, got int"),
        ((SCORE, ("acc", "component", "acc")), "results must be ResultKey items, got tuple"),
        ((SCORE, ResultKey("", "component", "x")), "a result key must be a non-empty str"),
        ((SCORE, ResultKey("acc", "rate", "a"), ResultKey("acc", "rate", "b")), "declared twice"),
        ((SCORE, ResultKey("acc", "ratio", "a")), "has kind 'ratio'; kinds are reward, "),  # type: ignore[arg-type]
        ((ResultKey("score", "component", "score"),), "'score', and only 'score', is of kind"),
        ((SCORE, ResultKey("bonus", "reward", "bonus")), "'score', and only 'score', is of kind"),
        ((ResultKey("acc", "component", "acc"),), "results must declare 'score'"),
        ((), "results must declare 'score'"),
    ],
)
def test_a_broken_schema_is_refused_at_registration(
    schema: Any, message: str, registry_state: None
) -> None:
    with pytest.raises(PluginError, match="scorer 'rp_broken_schema'") as caught:

        @scorer("rp_broken_schema", "rp_schema_source", results=schema)
        def broken(solution_str: str, golds: Any) -> float:
            return 0.0

    assert message in str(caught.value)
    with pytest.raises(reward_plugins.UnknownScorer):
        registry.registrations_named("rp_broken_schema")  # nothing was registered


def test_a_schema_function_is_checked_when_options_are_bound(registry_state: None) -> None:
    def schema(options: Any) -> tuple[ResultKey, ...]:
        return (SCORE, ResultKey(options["name"], "rate", "the rate"))

    @scorer("rp_schema_function", "rp_schema_source", results=schema)
    def scored(solution_str: str, golds: Any, *, name: str = "hit") -> dict[str, float]:
        return {"score": 1.0, name: 1.0}

    assert result_schema("rp_schema_function", "rp_schema_source", {}) == (
        SCORE,
        ResultKey("hit", "rate", "the rate"),
    )
    assert [k.key for k in result_schema("rp_schema_function", "rp_schema_source", {"name": "x"})]
    with pytest.raises(PluginError, match=r"scorer 'rp_schema_function': result key 'score' is "):
        result_schema("rp_schema_function", "rp_schema_source", {"name": "score"})
    # check_options (what score, check and the adapters call first) derives it too.
    with pytest.raises(PluginError, match="declared twice"):
        check_options("rp_schema_function", None, {"name": "score"})


def test_check_schema_complete_and_union() -> None:
    rate = ResultKey("hit", "rate", "hit rate")
    assert check_schema("x", iter([SCORE, rate])) == (SCORE, rate)
    assert complete((SCORE, rate), ["extra", "score"]) == (
        SCORE,
        ResultKey("extra", "diagnostic", "extra"),
    )
    other = ResultKey("hit", "count", "hits")
    assert union([(SCORE, rate), (SCORE, other, ResultKey("n", "count", "n"))]) == (
        SCORE,
        rate,
        ResultKey("n", "count", "n"),
    )


# ------------------------------------------------------------------- built-in declarations


BUILT_IN = [r for r in reward_plugins.registrations() if r.origin in BUILTIN_PLUGINS]
OPTIONS: dict[str, dict[str, Any]] = {
    "compute_score_metric": {"metric": "f1"},
    "length_penalty": {"max_length": 8, "buffer": 4},
    COMPOSED: {"recipe": "search_r1_shaped"},
}
RESPONSES = [
    "<answer>Paris</answer>",
    "I think <answer>London</answer>",
    "no answer at all",
    "<answer>Paris</answer>" * 12,
    "<search>capital of France</search><information>Paris is the capital.</information>"
    "<answer>Paris, Lyon and Nice</answer>",
    '<tool_call>\n{"name": "search", "arguments": {"query": "France"}}\n</tool_call>\n'
    "user\n<tool_response>\nParis\n</tool_response>\nassistant\n<answer>Paris</answer>",
    "Пари <answer>Париж</answer>",
]


def _source(registration: Registration) -> str:
    sources = [s for s in registration.data_sources if s != "*"]
    return sources[0] if sources else "searchR1_nq"


@pytest.mark.parametrize("registration", BUILT_IN, ids=lambda r: r.name)
def test_every_built_in_declares_the_keys_it_returns(registration: Registration) -> None:
    assert registration.results is not SCORE_ONLY, f"{registration.name} declares no schema"
    options = OPTIONS.get(registration.name, {})
    schema = result_schema(registration.name, _source(registration), options)
    keys = [item.key for item in schema]
    for response in RESPONSES:
        result = route(registration.name, _source(registration), response, ["Paris"], options)
        assert list(result) == keys, response


@pytest.mark.parametrize("recipe", shipped_recipes())
def test_a_recipe_derives_its_schema_from_its_components(recipe: str) -> None:
    options = {"recipe": recipe}
    schema = result_schema(COMPOSED, "searchR1_nq", options)
    for response in RESPONSES:
        result = route(COMPOSED, "searchR1_nq", response, ["Paris"], options)
        assert list(result) == [item.key for item in schema]
    plan = load_recipe(recipe)
    by_key = {item.key: item for item in schema}
    assert by_key["score"] == ResultKey("score", "reward", "score")  # GDPO weighs the parts
    for component in plan.components:
        declared = result_schema(component.scorer, "searchR1_nq", component.options)
        for item in declared:
            mine = by_key[f"{component.prefix}_{item.key}"]
            assert mine.label == f"{component.prefix} {item.label}"
            assert mine.kind == ("component" if item.key == "score" else item.kind)
            assert mine.gdpo == (item.key == "score" and component.paid)
    gdpo = [item.key for item in schema if item.gdpo]
    assert gdpo == [f"{c.prefix}_score" for c in plan.components if c.paid]
    assert plan.gdpo_overrides()[0] == f"+algorithm.gdpo_reward_keys=[{','.join(gdpo)}]"


def test_inline_components_and_an_unpaid_one() -> None:
    components = [
        {"scorer": "compute_score_subem", "weight": 1.0, "as": "sub"},
        {"scorer": "gsm8k_free_term", "weight": 0.0, "as": "log"},
    ]
    with pytest.raises(reward_plugins.InvalidOption):  # an unknown scorer: no schema either
        result_schema(COMPOSED, "searchR1_nq", {"components": components})
    components[1] = {"scorer": "repetition_penalty", "weight": 0.0, "as": "rep"}
    schema = result_schema(COMPOSED, "searchR1_nq", {"components": components})
    assert [item.key for item in schema if item.gdpo] == ["sub_score"]  # rep is not paid
    assert schema[1] == ResultKey("acc", "component", "acc")  # the primary's acc
    assert ResultKey("rep_repetition", "component", "rep repetition share") in schema


def test_colliding_recipe_keys_are_found_before_any_sample() -> None:
    """Prefixed keys that collide (``a`` + ``b_score``, ``a_b`` + ``score``) are refused when
    the options are checked, from the derived schema, not on the first sample."""
    inner = [{"scorer": "compute_score", "weight": 1.0, "as": "b"}]
    components = [
        {"scorer": COMPOSED, "weight": 1.0, "as": "a", "components": inner},
        {"scorer": "compute_score", "weight": 1.0, "as": "a_b"},
    ]
    with pytest.raises(PluginError) as caught:
        check_options(COMPOSED, None, {"components": components})
    assert str(caught.value) == (
        "compute_score_composed (components): result key 'a_b_score' is declared twice"
    )


def test_scorer_result_schema_unions_the_registrations(registry_state: None) -> None:
    @scorer("rp_two_sources", "rp_source_a", results=(SCORE, ResultKey("a", "rate", "a rate")))
    def first(solution_str: str, golds: Any) -> dict[str, float]:
        return {"score": 0.0, "a": 0.0}

    @scorer("rp_two_sources", "rp_source_b", results=(SCORE, ResultKey("b", "count", "bs")))
    def second(solution_str: str, golds: Any) -> dict[str, float]:
        return {"score": 0.0, "b": 0}

    assert [k.key for k in scorer_result_schema("rp_two_sources", {})] == ["score", "a", "b"]


# ------------------------------------------------------------ a third-party plugin, end to end


SHORT_ANSWER_EM = """
import sys
from reward_plugins import ResultKey, scorer
from reward_plugins.cli import main


@scorer(
    "short_answer_em",
    "test_short_answers",
    results=(
        ResultKey("score", "reward", "score", gdpo=True),
        ResultKey("acc", "component", "accuracy", gdpo=True),
        ResultKey("too_long", "rate", "too-long rate"),
    ),
)
def short_answer_em(solution_str, golds, *, max_words=3):
    too_long = len(solution_str.split()) > max_words
    right = not too_long and solution_str.strip().lower() in {g.lower() for g in golds}
    return {"score": float(right), "acc": float(right), "too_long": float(too_long)}


sys.exit(main(sys.argv[1:]))
"""

SHORT_ROWS = [
    {"prompt": "Capital of France?", "response": "Paris", "ground_truth": "Paris"},
    {"prompt": "Capital of Italy?", "response": "it is Rome indeed", "ground_truth": "Rome"},
    {"prompt": "Capital of Spain?", "response": "London", "ground_truth": "Madrid"},
    {"prompt": "Largest US city?", "response": "New York City", "ground_truth": "New York City"},
]


def _score(tmp_path: Path, name: str, *options: str) -> dict[str, Any]:
    rows = write_jsonl(tmp_path / "rows.jsonl", SHORT_ROWS)
    summary_path = tmp_path / f"{name}.summary.json"
    result = run_cli_with_script(
        SHORT_ANSWER_EM,
        "score", rows, "-o", tmp_path / f"{name}.jsonl", "--summary-json", summary_path,
        "--scorer", "short_answer_em", "--data-source", "test_short_answers", *options,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    summary: dict[str, Any] = json.loads(summary_path.read_text())
    summary["stdout"] = result.stdout
    return summary


def test_a_plugins_keys_are_summarized_and_compared(tmp_path: Path) -> None:
    first = _score(tmp_path, "a")
    second = _score(tmp_path, "b", "--set", "max_words=1")
    assert first["results"] == [
        {"key": "score", "kind": "reward", "label": "score", "gdpo": True},
        {"key": "acc", "kind": "component", "label": "accuracy", "gdpo": True},
        {"key": "too_long", "kind": "rate", "label": "too-long rate", "gdpo": False},
    ]
    means = {key: metric["mean"] for key, metric in first["overall"]["metrics"].items()}
    assert means == {"score": 0.5, "acc": 0.5, "too_long": 0.25}
    means = {key: metric["mean"] for key, metric in second["overall"]["metrics"].items()}
    assert means == {"score": 0.25, "acc": 0.25, "too_long": 0.5}
    printed = [line.split() for line in first["stdout"].splitlines()]
    assert printed[-2][:2] == ["accuracy", "0.500"]  # the overall rows, labelled by the schema
    assert printed[-1][:3] == ["too-long", "rate", "0.250"]
    assert printed[-6][:4] == ["test_short_answers", "4", "score", "0.500"]
    out = read_jsonl(tmp_path / "a.jsonl")
    assert [(r["reward_acc"], r["reward_too_long"]) for r in out] == [
        (1.0, 0.0),
        (0.0, 1.0),
        (0.0, 0.0),
        (1.0, 0.0),
    ]

    args = ["compare", tmp_path / "a.jsonl", tmp_path / "b.jsonl", "--scorer", "short_answer_em"]
    result = run_cli_with_script(SHORT_ANSWER_EM, *args, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert list(report["columns"]) == ["reward_score", "reward_acc", "reward_too_long"]
    assert report["results"]["reward_too_long"] == {
        "key": "too_long",
        "kind": "rate",
        "label": "too-long rate",
        "gdpo": False,
    }
    assert report["columns"]["reward_too_long"]["mean_a"] == 0.25
    assert report["columns"]["reward_too_long"]["mean_b"] == 0.5
    table = run_cli_with_script(SHORT_ANSWER_EM, *args).stdout.splitlines()
    assert table[4].split()[:2] == ["column", "label"]
    assert table[6].split()[:3] == ["reward_acc", "accuracy", "0.5000"]
    assert table[7].split()[:4] == ["reward_too_long", "too-long", "rate", "0.2500"]
    # Without --scorer the same columns are compared, named by their keys alone.
    plain = run_cli_with_script(SHORT_ANSWER_EM, *args[:3], "--json")
    assert json.loads(plain.stdout)["results"]["reward_acc"]["kind"] == "diagnostic"
    assert json.loads(plain.stdout)["columns"] == report["columns"]


def test_compare_refuses_an_unknown_scorer_in_one_line(tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", [{"prompt": "q", "reward_score": 1.0}])
    result = run_cli_with_script(
        SHORT_ANSWER_EM, "compare", first, first, "--scorer", "no_such_scorer"
    )
    assert result.returncode == 2
    assert result.stderr.startswith(
        "reward-plugins: error: compare: argument --scorer: no scorer is registered as "
        "'no_such_scorer'"
    )
    assert len(result.stderr.splitlines()) == 1
    with pytest.raises(SystemExit) as exited:  # --set without --scorer: a usage error
        main(["compare", str(first), str(first), "--set", "max_words=1"])
    assert exited.value.code == 2


def test_the_example_plugins_keys_reach_the_summary(tmp_path: Path) -> None:
    """The plugin under examples/, imported from its source directory (not installed)."""
    rows = [
        {"response": "3 * 24 = 72\n#### 72", "ground_truth": "72"},
        {"response": "#### 71", "ground_truth": "72"},
        {"response": "no number", "ground_truth": "72"},
        {"response": "#### 72.0", "ground_truth": "72"},
    ]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    script = "import sys, gsm8k_reward\nfrom reward_plugins.cli import main\n"
    script += "sys.exit(main(sys.argv[1:]))\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(EXAMPLE)])}
    command = [sys.executable, "-c", script, "score", str(source), "-o", str(tmp_path / "o.jsonl")]
    command += ["--summary-json"]
    command += [str(tmp_path / "s.json"), "--scorer", "gsm8k_numeric"]
    command += ["--data-source", "openai/gsm8k"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert [(r["key"], r["kind"], r["label"]) for r in summary["results"]] == [
        ("score", "reward", "score"),
        ("acc", "component", "accuracy"),
        ("answer_found", "rate", "answer rate"),
    ]
    means = {key: metric["mean"] for key, metric in summary["overall"]["metrics"].items()}
    assert means == {"score": 0.5, "acc": 0.5, "answer_found": 0.75}
    assert "answer rate" in result.stdout and "accuracy" in result.stdout


def test_a_recipes_component_keys_reach_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {"response": "<answer>Paris</answer>", "ground_truth": ["Paris"]},
        {"response": "<answer>Paris, Lyon, Nice</answer>", "ground_truth": ["Paris"]},
        {"response": "no answer", "ground_truth": ["Paris"]},
    ]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    args = ["score", str(source), "-o", str(tmp_path / "out.jsonl"), "--data-source"]
    args += ["searchR1_nq", "--recipe", "search_r1_shaped"]
    args += ["--summary-json", str(tmp_path / "s.json")]
    assert main(args) == 0
    printed = capsys.readouterr().out
    summary = json.loads((tmp_path / "s.json").read_text())
    schema = result_schema(COMPOSED, "searchR1_nq", {"recipe": "search_r1_shaped"})
    assert [r["key"] for r in summary["results"]] == [item.key for item in schema]
    assert list(summary["overall"]["metrics"]) == [item.key for item in schema]
    out = read_jsonl(tmp_path / "out.jsonl")
    for key, metric in summary["overall"]["metrics"].items():
        values = [record[f"reward_{key}"] for record in out]
        assert metric["mean"] == pytest.approx(sum(values) / len(values))
    assert summary["overall"]["metrics"]["answer_list_candidates"]["mean"] == pytest.approx(4 / 3)
    assert "answer_list answer candidates" in printed and "em EM" in printed


# ---------------------------------------------------------------------- the docs' GDPO table


def render_gdpo_table() -> str:
    """The docs' table of the keys GDPO may weigh, per built-in scorer, from the schemas."""
    lines = [
        "| scorer | keys GDPO may weigh | keys not to weigh (kind) |",
        "| --- | --- | --- |",
    ]
    for registration in BUILT_IN:
        if registration.name == COMPOSED:
            continue  # its schema depends on the recipe: `reward-plugins recipe keys`
        schema = result_schema(
            registration.name, _source(registration), OPTIONS.get(registration.name, {})
        )
        weigh = ", ".join(f"`{item.key}`" for item in schema if item.gdpo)
        other = ", ".join(f"`{item.key}` ({item.kind})" for item in schema if not item.gdpo)
        lines.append(f"| `{registration.name}` | {weigh} | {other} |")
    return "\n".join(lines)


def test_gdpo_table_is_generated_from_the_registrations() -> None:
    assert_generated(
        COMPOSITION_DOC, TABLE_MARKER, render_gdpo_table(), "tests/test_result_schema.py"
    )


if __name__ == "__main__":
    sys.stdout.write(marked(TABLE_MARKER, render_gdpo_table()))
