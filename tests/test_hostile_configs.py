"""Hostile recipes, ``--set`` values and verl configs: each is refused with one typed error (one
CLI line), in milliseconds, never with a traceback, an OverflowError or a RecursionError."""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_cli_helpers import one_line_error, run_cli_here
from test_config_reader import alias_bomb

from reward_plugins import InvalidOption, compute_score
from reward_plugins.cli import main
from reward_plugins.options import describe_value, finite_number, is_finite_number
from reward_plugins.plugins.composed import recipe_of

HUGE = int("9" * 400)


def indented(text: str, spaces: int) -> str:
    return text.replace("\n", "\n" + " " * spaces)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- one number check -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "finite"),
    [
        (1, True),
        (-2.5, True),
        (10**308, True),
        (HUGE, False),  # beyond the largest float, about 1.8e308
        (-(10**309), False),
        (math.nan, False),
        (math.inf, False),
        (True, False),
        ("1", False),
        (None, False),
    ],
)
def test_is_finite_number_never_overflows(value: object, finite: bool) -> None:
    assert is_finite_number(value) is finite


def test_finite_number_names_a_huge_integer_by_its_digits() -> None:
    assert finite_number(10**300, "weight") == 10**300
    with pytest.raises(InvalidOption) as raised:
        finite_number(10**5000, "weight")
    message = str(raised.value)
    assert message == "weight must be a finite number, got an integer of 5001 digits"
    assert describe_value(-HUGE) == "a negative integer of 400 digits"
    assert describe_value([10**5000]) == "list: (too large to show)"
    assert describe_value("x" * 500) == "str: '" + "x" * 79


NUMBERS = (
    st.integers(min_value=-(10**400), max_value=10**400)
    | st.integers().map(lambda n: n * 10**300)
    | st.floats()
)


@given(NUMBERS)
def test_a_finite_number_converts_to_a_finite_float(value: float) -> None:
    if is_finite_number(value):
        assert math.isfinite(float(value))
    else:
        assert isinstance(value, int) or not math.isfinite(value)


@given(NUMBERS)
def test_describe_value_is_short_and_counts_digits(value: float) -> None:
    shown = describe_value(value)
    assert len(shown) <= 90
    if isinstance(value, int) and abs(value) >= 10**20:
        sign = "a negative" if value < 0 else "an"
        assert shown == f"{sign} integer of {len(str(abs(value)))} digits"


def test_huge_score_option_is_an_invalid_option() -> None:
    with pytest.raises(InvalidOption) as raised:
        compute_score("searchR1_nq", "<answer>x</answer>", ["x"], format_score=HUGE)
    assert str(raised.value) == (
        "compute_score: option 'format_score' must be a finite number in [-1e+06, 1e+06], "
        "got an integer of 400 digits"
    )


def test_huge_metric_option_and_scorer_result() -> None:
    from reward_plugins.errors import PluginError
    from reward_plugins.metrics.squad_v2 import squad_v2_scores
    from reward_plugins.registry import Bound, registrations_named

    with pytest.raises(InvalidOption, match="na_threshold must be a finite number, got an integer"):
        squad_v2_scores(["a"], [["a"]], na_threshold=HUGE)
    bound = Bound(registrations_named("compute_score")[0], {})  # no first result yet
    with pytest.raises(PluginError, match="non-finite score an integer of 400 digits"):
        bound.shape({"score": HUGE})
    flagged = Bound(registrations_named("compute_score")[0], {})
    assert flagged.shape({"score": 1, "too_long": False}) == {"score": 1, "too_long": False}


# --- recipes --------------------------------------------------------------------------------


def test_alias_bomb_in_a_component_option_fails_fast(tmp_path: Path) -> None:
    bomb = write(
        tmp_path / "bomb.yaml",
        f"bombs:\n  {indented(alias_bomb(), 2)}\n"
        "components:\n  - {scorer: compute_score, weight: 1, format_score: *i}\n",
    )
    started = time.perf_counter()
    with pytest.raises(InvalidOption, match=r"nodes once aliases are expanded"):
        recipe_of(recipe=str(bomb))
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize(
    "recipe",
    [
        "components: [{scorer: compute_score, weight: 1}]\ndescription: *i\n",
        "components: [{scorer: compute_score, weight: *i}]\n",
    ],
    ids=["description", "weight"],
)
def test_alias_bomb_as_description_or_weight(tmp_path: Path, recipe: str) -> None:
    text = f"x:\n  {indented(alias_bomb(), 2)}\n{recipe}"
    with pytest.raises(InvalidOption, match=r"more than the limit of 100000 nodes"):
        recipe_of(recipe=str(write(tmp_path / "r.yaml", text)))


def test_recursive_anchor_recipe(tmp_path: Path) -> None:
    path = write(
        tmp_path / "loop.yaml",
        "components: &c [{scorer: compute_score_composed, weight: 1, components: *c}]\n",
    )
    with pytest.raises(InvalidOption, match=r"line 1, column \d+: the alias \*c .*recursive"):
        recipe_of(recipe=str(path))


@pytest.mark.parametrize(
    "text",
    ["components: " + "[" * 5000 + "]" * 5000, "components:\n" + "- " * 3000 + "x"],
    ids=["flow", "block"],
)
def test_deep_recipes(tmp_path: Path, text: str) -> None:
    with pytest.raises(InvalidOption, match=r"nested deeper than the limit of 64 levels"):
        recipe_of(recipe=str(write(tmp_path / "deep.yaml", text)))


@pytest.mark.parametrize("key", ["weight", "scale"])
def test_huge_weight_or_scale(tmp_path: Path, key: str) -> None:
    weight, scale = (HUGE, 1) if key == "weight" else (1, HUGE)
    path = write(
        tmp_path / "big.yaml",
        f"scale: {scale}\ncomponents:\n  - {{scorer: compute_score, weight: {weight}}}\n",
    )
    with pytest.raises(InvalidOption) as raised:
        recipe_of(recipe=str(path))
    assert f"{key}' must be" in str(raised.value) or f"{key} must be" in str(raised.value)
    assert str(raised.value).endswith(
        "must be a finite number in [-1e+06, 1e+06], got an integer of 400 digits"
    )


def test_weight_and_scale_range_edges() -> None:
    component = {"scorer": "compute_score", "weight": 1e6}
    assert recipe_of(components=[component], scale=-1e6).scale == -1e6
    with pytest.raises(InvalidOption, match=r"'weight' must be a finite number in \[-1e\+06"):
        recipe_of(components=[{"scorer": "compute_score", "weight": 1e6 + 1}])
    with pytest.raises(InvalidOption, match=r"scale.* must be a finite number in"):
        recipe_of(components=[component], scale=math.inf)


def test_a_directory_as_recipe(tmp_path: Path) -> None:
    directory = tmp_path / "recipes.yaml"
    directory.mkdir()
    with pytest.raises(InvalidOption, match=r"recipes\.yaml: is a directory, not a regular file"):
        recipe_of(recipe=str(directory))


def test_a_100_kb_recipe_name_is_one_short_line() -> None:
    for name in ("r" * 100_000, "r" * 100_000 + ".yaml"):
        with pytest.raises(InvalidOption) as raised:
            recipe_of(recipe=name)
        message = str(raised.value)
        assert "(100000 characters)" in message or "(100005 characters)" in message
        assert len(message) < 600
        assert "\n" not in message


def test_a_relative_recipe_path_names_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidOption) as raised:
        recipe_of(recipe="mine.yaml")
    assert str(raised.value) == (
        "recipe mine.yaml: no such file; a relative recipe path is read from the current "
        f"directory, {tmp_path}"
    )


def test_a_recipe_cycle_spelled_two_ways(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = write(
        tmp_path / "cyc.yaml",
        "components:\n  - {scorer: compute_score_composed, weight: 1, "
        f"recipe: {tmp_path}/sub/../cyc.yaml}}\n",
    )
    with pytest.raises(InvalidOption, match=r"includes itself: .*cyc\.yaml -> .*cyc\.yaml"):
        recipe_of(recipe=str(path))


def test_a_non_string_description(tmp_path: Path) -> None:
    path = write(
        tmp_path / "d.yaml", "description: [1]\ncomponents: [{scorer: compute_score, weight: 1}]\n"
    )
    with pytest.raises(InvalidOption, match=r"description must be a string, got list"):
        recipe_of(recipe=str(path))


# --- the command line -----------------------------------------------------------------------


def test_cli_huge_set_value_is_one_line() -> None:
    result = run_cli_here("score", "--demo", "--set", f"format_score={'9' * 400}", "-q")
    assert result.returncode == 2
    assert one_line_error(result) == (
        "--set: compute_score: option 'format_score' must be a finite number in "
        "[-1e+06, 1e+06], got an integer of 400 digits"
    )


def test_cli_deep_set_value_is_one_line() -> None:
    result = run_cli_here("score", "--demo", "--set", "format_score=" + "[" * 5000, "-q")
    assert result.returncode == 2
    assert (
        "argument --set: format_score: line 1, column 65: nested deeper than the limit of 64 levels"
        in (one_line_error(result))
    )


def test_cli_recipe_errors_say_recipe(tmp_path: Path) -> None:
    directory = tmp_path / "dir.yaml"
    directory.mkdir()
    result = run_cli_here("score", "--demo", "--recipe", directory, "-q")
    assert result.returncode == 2
    message = one_line_error(result)
    assert message.startswith("score: --recipe: ")
    assert "--set" not in message
    assert "dir.yaml: is a directory" in message
    result = run_cli_here("score", "--demo", "--recipe", "r" * 100_000, "-q")
    assert result.returncode == 2
    assert "(100000 characters)" in one_line_error(result)
    loop = write(
        tmp_path / "loop.yaml",
        "components: &c [{scorer: compute_score_composed, weight: 1, components: *c}]\n",
    )
    result = run_cli_here("score", "--demo", "--recipe", loop, "-q")
    assert result.returncode == 2
    assert one_line_error(result) == (
        f"score: --recipe: recipe {loop}: line 1, column 73: the alias *c refers to a collection "
        "that contains it (a recursive anchor)"
    )


# --- reward-plugins check -------------------------------------------------------------------


def reward_config(kwargs: str, name: str = "compute_score", extra: str = "") -> str:
    """A verl config naming this package's reward; ``kwargs`` is the YAML of reward_kwargs."""
    return (
        f"{extra}reward:\n  custom_reward_function:\n    path: pkg://reward_plugins\n"
        f"    name: {name}\n    reward_kwargs: {kwargs}\n"
    )


def check(
    config: Path | str, capsys: pytest.CaptureFixture[str], code: int
) -> tuple[list[str], str]:
    """``reward-plugins check CONFIG --verl 0.9.1`` in this process: (stdout lines, the one
    error line without its prefix, or "")."""
    assert main(["check", str(config), "--verl", "0.9.1"]) == code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.err.count("\n") == (0 if code == 0 else 1), captured.err
    return captured.out.splitlines(), captured.err.removeprefix("reward-plugins: error: ").strip()


def test_check_alias_bomb_in_reward_kwargs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(
        tmp_path / "c.yaml",
        f"bombs:\n  {indented(alias_bomb(), 2)}\n" + reward_config("{extra: *i}"),
    )
    started = time.perf_counter()
    _, error = check(config, capsys, 2)
    assert time.perf_counter() - started < 5
    assert error.startswith(f"check: verl config {config}: line ")
    assert error.endswith("more than the limit of 100000 nodes once aliases are expanded")


def test_check_a_device(capsys: pytest.CaptureFixture[str]) -> None:
    _, error = check("/dev/zero", capsys, 2)
    assert error == "check: verl config /dev/zero: is a device, not a regular file"


def test_check_a_directory_a_fifo_and_a_long_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, error = check(tmp_path, capsys, 2)
    assert error == f"check: verl config {tmp_path}: is a directory, not a regular file"
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    _, error = check(fifo, capsys, 2)
    assert error == f"check: verl config {fifo}: is a FIFO (named pipe), not a regular file"
    long = tmp_path / ("c" * 100_000 + ".yaml")
    _, error = check(long, capsys, 2)
    assert error.endswith(
        f".yaml ({len(str(long))} characters): the file name is too long for the file system"
    )
    assert len(error) < 300


OK_KWARGS = "{score: 1.0}"
MALFORMED = [
    pytest.param(
        "defaults: 5\n" + reward_config(OK_KWARGS),
        2,
        "defaults must be a list of config names, got int: 5",
        id="defaults-int",
    ),
    pytest.param(
        "defaults: [5]\n" + reward_config(OK_KWARGS),
        2,
        "defaults[0] must be a config name or a mapping, got int: 5",
        id="defaults-entry-int",
    ),
    pytest.param(
        reward_config("[1, 2]"),
        1,
        "reward.custom_reward_function.reward_kwargs must be a mapping of options, got list: "
        "[1, 2]",
        id="kwargs-list",
    ),
    pytest.param(
        reward_config("fast"),
        1,
        "reward_kwargs must be a mapping of options, got str: 'fast'",
        id="kwargs-str",
    ),
    pytest.param(
        reward_config("3"),
        1,
        "reward_kwargs must be a mapping of options, got int: 3",
        id="kwargs-int",
    ),
    pytest.param(
        reward_config(OK_KWARGS, name="7"),
        1,
        "reward.custom_reward_function.name must be a scorer's name, got int: 7",
        id="name-int",
    ),
    pytest.param(
        reward_config("{score: " + "9" * 400 + "}"),
        1,
        "reward.custom_reward_function: compute_score: option 'score' must be a finite number in "
        "[-1e+06, 1e+06], got an integer of 400 digits",
        id="huge-score",
    ),
    pytest.param(
        "components: &c [{a: *c}]\n" + reward_config(OK_KWARGS),
        2,
        "line 1, column 21: the alias *c refers to a collection that contains it (a recursive "
        "anchor)",
        id="recursive-anchor",
    ),
    pytest.param(
        "deep: " + "[" * 5000 + "]" * 5000 + "\n" + reward_config(OK_KWARGS),
        2,
        "nested deeper than the limit of 64 levels",
        id="deep-flow",
    ),
    pytest.param(
        "deep:\n" + "- " * 3000 + "x\n" + reward_config(OK_KWARGS),
        2,
        "nested deeper than the limit of 64 levels",
        id="deep-block",
    ),
]


@pytest.mark.parametrize(("text", "code", "message"), MALFORMED)
def test_check_malformed_configs_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, code: int, message: str
) -> None:
    config = write(tmp_path / "c.yaml", text)
    _, error = check(config, capsys, code)
    assert error.startswith("check: ")
    assert str(config) in error
    assert error.endswith(message), error


def test_check_a_defaults_cycle_however_spelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "sub").mkdir()
    config = write(tmp_path / "cyc.yaml", "defaults: [sub/../cyc]\n" + reward_config(OK_KWARGS))
    _, error = check(config, capsys, 2)
    assert error == (
        f"check: {tmp_path}/sub/../cyc.yaml: its defaults list includes itself: {config} -> "
        f"{config}"
    )


def test_check_resolves_interpolations_as_verl_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``${fs}`` and ``${which}`` resolve as OmegaConf resolves them; ``1e-1`` is a float in
    OmegaConf's YAML (a string in PyYAML's)."""
    block = "\n      format_score: ${fs}\n      score: 1e-1"
    config = write(
        tmp_path / "c.yaml",
        reward_config(block, name="${which}", extra="fs: 0.25\n") + "which: compute_score_f1\n",
    )
    lines, _ = check(config, capsys, 0)
    assert lines == [
        f"{config}: ok: reward.custom_reward_function.name=compute_score_f1, reward_kwargs "
        "{'format_score': 0.25, 'score': 0.1}; read by verl 0.9.1 verl.trainer.main_ppo"
    ]
    write(config, reward_config(block, extra="fs: " + "9" * 400 + "\n"))
    _, error = check(config, capsys, 1)
    assert error.endswith(
        "option 'format_score' must be a finite number in [-1e+06, 1e+06], got an integer of "
        "400 digits"
    )


def test_check_leaves_run_time_values_unjudged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REWARD_PLUGINS_UNSET", raising=False)
    block = "\n      format_score: ${oc.env:REWARD_PLUGINS_UNSET}\n      score: ${data.score}"
    config = write(tmp_path / "c.yaml", reward_config(block))
    lines, _ = check(config, capsys, 0)
    key = "reward.custom_reward_function.reward_kwargs"
    assert lines[1:] == [
        f"{config}: {key}.format_score: resolved at run time; not judged",
        f"{config}: {key}.score: resolved at run time; not judged",
    ]
    assert "reward_kwargs {}" in lines[0]
    write(config, reward_config(OK_KWARGS, name="${oc.env:REWARD_PLUGINS_UNSET}"))
    lines, _ = check(config, capsys, 0)
    assert "name=(resolved at run time)" in lines[0]
    assert lines[1] == (
        f"{config}: reward.custom_reward_function.name: resolved at run time; not judged"
    )


def test_check_reads_yaml_as_omegaconf_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An impossible date is a string for OmegaConf (no timestamps), as verl reads it."""
    config = write(tmp_path / "c.yaml", "started: 2021-02-30\n" + reward_config(OK_KWARGS))
    lines, _ = check(config, capsys, 0)
    assert lines[0].startswith(f"{config}: ok: ")


def test_check_without_omegaconf_leaves_interpolations_unjudged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "omegaconf", None)  # `import omegaconf` fails
    block = "\n      format_score: ${fs}\n      score: 0.5"
    config = write(tmp_path / "c.yaml", reward_config(block, extra="fs: 0.25\n"))
    lines, _ = check(config, capsys, 0)
    assert lines == [
        f"{config}: ok: reward.custom_reward_function.name=compute_score, reward_kwargs "
        "{'score': 0.5}; read by verl 0.9.1 verl.trainer.main_ppo",
        f"{config}: reward.custom_reward_function.reward_kwargs.format_score: resolved at run "
        "time; not judged",
    ]


def test_check_suggests_the_pkg_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(
        tmp_path / "c.yaml",
        reward_config(OK_KWARGS).replace("pkg://reward_plugins", "reward_plugins"),
    )
    _, error = check(config, capsys, 2)
    assert error == (
        f"check: {config}: reward.custom_reward_function.path=reward_plugins does not load "
        "reward_plugins (verl imports a module named as pkg://MODULE: write pkg://reward_plugins)"
    )


def test_check_names_the_directory_of_a_relative_recipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(
        tmp_path / "c.yaml", reward_config("{recipe: mine.yaml}", name="compute_score_composed")
    )
    monkeypatch.chdir(tmp_path)
    _, error = check(config, capsys, 1)
    assert error.endswith(
        "recipe mine.yaml: no such file; a relative recipe path is read from the current "
        f"directory, {tmp_path}"
    )


# --- the other readers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("[" * 5000, r"REWARD_PLUGINS_OPTIONS: line 1, column 65: nested deeper than the limit"),
        ("{a: 1}", r"REWARD_PLUGINS_OPTIONS is not valid JSON \(line 1, column 2: not JSON"),
        (
            '{"format_score": ' + "9" * 5000 + "}",
            r"'format_score' must be a finite number in .*, got an integer of 5000 digits",
        ),
    ],
    ids=["deep", "not-json", "huge-int"],
)
def test_openrlhf_options_are_read_by_the_bounded_reader(options: str, message: str) -> None:
    from reward_plugins.adapters.openrlhf_reward import load_config

    with pytest.raises(ValueError, match=message) as raised:
        load_config({"REWARD_PLUGINS_OPTIONS": options})
    assert len(str(raised.value)) < 600


def test_tool_config_is_read_by_the_bounded_reader(tmp_path: Path) -> None:
    from reward_plugins.plugins.tool_agent import declared_tools

    bomb = write(tmp_path / "tools.yaml", f"x:\n  {indented(alias_bomb(), 2)}\ntools: [*i]\n")
    with pytest.raises(InvalidOption, match=r"^tool_config .*tools\.yaml: line \d+.*100000 nodes"):
        declared_tools(str(bomb))
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(InvalidOption, match=r"dir\.yaml: is a directory, not a regular file"):
        declared_tools(str(tmp_path / "dir.yaml"))
