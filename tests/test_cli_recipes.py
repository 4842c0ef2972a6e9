"""The command line and composed rewards: ``score --recipe``, ``check`` and ``recipe``."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_helpers import (
    one_line_error,
    read_jsonl,
    run_cli_here,
    training_rows,
    write_jsonl,
)

from reward_plugins.cli import main
from reward_plugins.plugins.composed import load_recipe
from reward_plugins.router import route

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIGS = REPO_ROOT / "configs"


def composed(row: dict, **options: object) -> dict:
    truth = row["reward_model"]["ground_truth"]
    return route("compute_score_composed", row["data_source"], row["response"], truth, options)


@pytest.mark.parametrize("recipe", ["search_r1_shaped", "qa_f1_shaped"])
def test_score_with_a_shipped_recipe(tmp_path: Path, recipe: str) -> None:
    rows = training_rows(30)
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    output = tmp_path / "scored.jsonl"
    result = run_cli_here("score", source, "-o", output, "--recipe", recipe, "-q")
    assert result.returncode == 0, result.stderr
    for row, scored in zip(rows, read_jsonl(output), strict=True):
        expected = composed(row, recipe=recipe)
        assert {k: scored[f"reward_{k}"] for k in expected} == expected


def test_recipe_file_equals_the_same_components_given_with_set(tmp_path: Path) -> None:
    rows = training_rows(20, seed=3)
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    recipe = tmp_path / "mine.yaml"
    recipe.write_text(
        "combine: min\ncomponents:\n"
        "  - {scorer: compute_score_f1, weight: 1, as: f1}\n"
        "  - {scorer: compute_score_subem, weight: 1, as: sub, format_score: 0.2}\n",
        encoding="utf-8",
    )
    by_file, by_set = tmp_path / "file.jsonl", tmp_path / "set.jsonl"
    assert run_cli_here("score", source, "-o", by_file, "--recipe", recipe, "-q").returncode == 0
    components = (
        '[{"scorer": "compute_score_f1", "weight": 1, "as": "f1"}, '
        '{"scorer": "compute_score_subem", "weight": 1, "as": "sub", "format_score": 0.2}]'
    )
    result = run_cli_here(
        "score", source, "-o", by_set, "--scorer", "compute_score_composed",
        "--set", f"components={components}", "--set", "combine=min", "-q",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert by_file.read_bytes() == by_set.read_bytes()
    assert [r["reward_score"] for r in read_jsonl(by_file)] == [
        composed(row, recipe=str(recipe))["score"] for row in rows
    ]


def test_invalid_recipe_fails_before_any_output(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", training_rows(5))
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("components:\n  - {scorer: compute_score, as: em}\n", encoding="utf-8")
    output = tmp_path / "scored.jsonl"
    result = run_cli_here("score", source, "-o", output, "--recipe", recipe)
    assert result.returncode == 2
    message = one_line_error(result)
    assert f"{recipe}: component 1 (compute_score): 'weight' is missing" in message
    assert set(tmp_path.iterdir()) == {source, recipe}  # no output, no temporary


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--scorer", "compute_score"], "--recipe pays compute_score_composed; leave out --scorer"),
        (["--set", "recipe=search_r1_em"], "give --recipe or --set recipe=..., not both"),
    ],
)
def test_recipe_option_conflicts(tmp_path: Path, extra: list[str], message: str) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", training_rows(2))
    result = run_cli_here(
        "score", source, "-o", tmp_path / "o.jsonl", "--recipe", "search_r1_em", *extra
    )
    assert result.returncode == 2
    assert message in one_line_error(result)


# --- check ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "where", "scorer"),
    [
        ("recipe_search_r1_shaped", "reward.custom_reward_function", "compute_score_composed"),
        ("search_r1_grpo", "reward.custom_reward_function", "compute_score"),
        ("search_r1_grpo_legacy", "custom_reward_function", "compute_score"),
    ],
)
def test_check_shipped_configs(
    config: str, where: str, scorer: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = CONFIGS / f"{config}.yaml"
    # The legacy keys are read by verl 0.4 - 0.7.0 only (the installed verl is newer).
    verl = ["--verl", "0.7.0"] if where == "custom_reward_function" else []
    assert main(["check", str(path), *verl]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{path}: ok: {where}.name={scorer}, reward_kwargs ")
    if scorer == "compute_score_composed":
        assert lines[1] == (
            "recipe search_r1_shaped: combine sum; components: em x 1, length x 1, answer_list x 1"
        )


def test_check_follows_the_defaults_list_and_finds_errors(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        "hydra: {searchpath: [pkg://verl.trainer.config]}\n"
        "defaults: [ppo_trainer, _self_]\n"
        "reward:\n  custom_reward_function:\n    path: pkg://reward_plugins\n"
        "    name: compute_score_composed\n    reward_kwargs: {recipe: search_r1_em}\n",
        encoding="utf-8",
    )
    child = tmp_path / "child.yaml"
    child.write_text(
        "defaults: [base, _self_]\n"
        "reward:\n  custom_reward_function:\n    reward_kwargs:\n      recipe: qa_f1_shapd\n",
        encoding="utf-8",
    )
    result = run_cli_here("check", child)
    assert result.returncode == 1
    assert one_line_error(result).startswith(
        f"check: {child}: reward.custom_reward_function: compute_score_composed: recipe "
        "'qa_f1_shapd': no shipped recipe of that name"
    )
    child.write_text(child.read_text(encoding="utf-8").replace("shapd", "shaped"), encoding="utf-8")
    result = run_cli_here("check", child)
    assert (result.returncode, result.stderr) == (0, "")
    assert "recipe qa_f1_shaped: combine sum; components: f1 x 1" in result.stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("trainer: {n: 1}\n", "names no reward function"),
        (
            "reward: {custom_reward_function: {path: my_reward.py, name: f}}\n",
            "reward.custom_reward_function.path=my_reward.py does not load reward_plugins",
        ),
        ("- a\n- b\n", "not a YAML mapping"),
        ("reward: [\n", "config.yaml: line 2, column 1: not valid YAML"),
    ],
)
def test_check_refuses_what_is_not_our_reward(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    result = run_cli_here("check", config)
    assert result.returncode == 2
    assert message in one_line_error(result)


def test_check_missing_file(tmp_path: Path) -> None:
    result = run_cli_here("check", tmp_path / "absent.yaml")
    assert result.returncode == 2
    assert one_line_error(result) == f"check: verl config {tmp_path / 'absent.yaml'}: no such file"


# --- recipe --------------------------------------------------------------------------------------


def test_recipe_keys_and_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipe", "keys", "qa_f1_shaped"]) == 0
    recipe = load_recipe("qa_f1_shaped")
    lines = capsys.readouterr().out.splitlines()
    # The derived schema, one line per key, then the overrides (the last two lines).
    assert lines[0].split() == ["key", "kind", "gdpo", "label"]
    rows = [line.split(maxsplit=3) for line in lines[1 : len(recipe.results()) + 1]]
    assert rows[:3] == [
        ["score", "reward", "no", "score"],
        ["acc", "component", "no", "acc"],
        ["f1_score", "component", "yes", "f1 score"],
    ]
    assert [row[0] for row in rows] == [item.key for item in recipe.results()]
    assert [row[0] for row in rows if row[2] == "yes"] == [
        "f1_score",
        "length_score",
        "repetition_score",
    ]
    assert lines[len(rows) + 1 :] == recipe.gdpo_overrides()
    assert main(["recipe", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].startswith("qa_f1_shaped: Token F1 on the answer")
    assert [line.partition(":")[0] for line in listed] == [
        "qa_f1_shaped",
        "search_agent_guarded",
        "search_r1_em",
        "search_r1_shaped",
    ]


def test_recipe_keys_of_a_missing_recipe() -> None:
    result = run_cli_here("recipe", "keys", "nope")
    assert result.returncode == 1
    assert one_line_error(result).startswith("recipe keys: recipe 'nope': no shipped recipe")
