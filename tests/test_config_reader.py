"""The bounded YAML/JSON reader: every limit, every kind of file that is not a regular one, alias
bombs, recursive anchors, deep nesting, huge numbers; and that what it accepts reads as PyYAML's
``safe_load`` and :func:`json.loads` read it."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import socket
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from reward_plugins.config_reader import (
    DEFAULT_LIMITS,
    ConfigFileError,
    ReadLimits,
    parse_config_text,
    parse_json_text,
    read_config_file,
)
from reward_plugins.errors import RewardPluginsError


def alias_bomb(levels: int = 9, width: int = 10) -> str:
    """``levels`` anchors, each a list of ``width`` aliases of the one before: width**levels
    scalars once expanded, in a few hundred bytes."""
    names = [chr(ord("a") + level) for level in range(levels)]
    lines = [f"{names[0]}: &{names[0]} [{','.join(['x'] * width)}]"]
    for previous, name in itertools.pairwise(names):
        lines.append(f"{name}: &{name} [{','.join([f'*{previous}'] * width)}]")
    return "\n".join(lines) + "\n"


def test_the_error_is_a_package_error_and_a_value_error():
    assert issubclass(ConfigFileError, RewardPluginsError)
    assert issubclass(ConfigFileError, ValueError)


def test_default_limits():
    expected = ReadLimits(max_bytes=1024 * 1024, max_nodes=100_000, max_depth=64, max_string=65536)
    assert expected == DEFAULT_LIMITS


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: [1, 2.5, x, true, null]\nc: {d: e}\n",
        '{"a": [1, 2, {"b": "c"}], "d": null}',
        "base: &base {x: 1}\nmore:\n  <<: *base\n  y: 2\n",
        "anchored: &s text\nagain: *s\n",
        "",
    ],
)
def test_reads_what_safe_load_reads(text):
    assert parse_config_text(text, source="t") == yaml.safe_load(text)


def test_alias_bomb_fails_fast_naming_the_node_limit():
    bomb = alias_bomb()
    assert len(bomb) < 400
    started = time.perf_counter()
    with pytest.raises(ConfigFileError) as raised:
        parse_config_text(bomb, source="recipe bomb.yaml")
    elapsed = time.perf_counter() - started
    message = str(raised.value)
    assert message.startswith("recipe bomb.yaml: line ")
    assert "more than the limit of 100000 nodes once aliases are expanded" in message
    assert elapsed < 5  # it used to take minutes and gigabytes; the scan takes milliseconds


def test_alias_bomb_in_a_file(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(f"bombs:\n  {alias_bomb().replace(chr(10), chr(10) + '  ')}\ndescription: *i\n")
    with pytest.raises(ConfigFileError, match=r"bomb\.yaml: line \d+, column \d+: more than"):
        read_config_file(path, what="recipe")


def test_aliases_that_stay_under_the_limit_are_read():
    text = alias_bomb(levels=3, width=10)  # 1,110 nodes
    assert parse_config_text(text, source="t")["c"] == [[["x"] * 10] * 10] * 10


def test_the_node_limit_counts_nodes_not_bytes():
    text = "[" + ", ".join(["1"] * 200) + "]"
    assert len(parse_config_text(text, source="t", limits=ReadLimits(max_nodes=201))) == 200
    with pytest.raises(ConfigFileError, match="more than the limit of 200 nodes"):
        parse_config_text(text, source="t", limits=ReadLimits(max_nodes=200))


@pytest.mark.parametrize(
    "text",
    [
        "components: &c [{scorer: compute_score_composed, components: *c}]",
        "&m {self: *m}",
        "a: &a\n  - b: *a\n",
    ],
)
def test_recursive_anchors_are_refused(text):
    with pytest.raises(ConfigFileError, match=r"line 1|line 2") as raised:
        parse_config_text(text, source="t")
    assert "recursive anchor" in str(raised.value)


def test_an_undefined_alias_is_refused():
    with pytest.raises(ConfigFileError, match=r"t: line 1, column 4: the alias \*nowhere"):
        parse_config_text("a: *nowhere", source="t")


@pytest.mark.parametrize(
    "text",
    [
        "[" * 5000 + "]" * 5000,  # flow nesting
        "{a: " * 400 + "1" + "}" * 400,  # inline mappings
        "- " * 3000 + "x",  # block sequences
        "".join(" " * level + f"k{level}:\n" for level in range(300)) + " " * 300 + "v",
    ],
    ids=["flow-5000", "inline-400", "block-3000", "block-mappings-300"],
)
def test_deep_nesting_is_refused(text):
    with pytest.raises(ConfigFileError, match="nested deeper than the limit of 64 levels"):
        parse_config_text(text, source="t")


def test_nesting_at_the_limit_is_read():
    assert parse_config_text("[" * 64 + "]" * 64, source="t") is not None
    with pytest.raises(ConfigFileError, match="line 1, column 65: nested deeper"):
        parse_config_text("[" * 65 + "]" * 65, source="t")


def test_aliases_count_in_the_depth():
    """An alias of a deep collection placed deep down is as deep as its expansion."""
    deep = "[" * 40 + "]" * 40
    text = f"a: &a {deep}\nb: {'[' * 30}*a{']' * 30}\n"
    with pytest.raises(ConfigFileError, match="deeper than the limit of 64 levels once aliases"):
        parse_config_text(text, source="t")
    assert parse_config_text(text, source="t", limits=ReadLimits(max_depth=72))


def test_long_strings_are_refused():
    text = "a: " + "x" * 200
    assert parse_config_text(text, source="t", limits=ReadLimits(max_string=200)) == {
        "a": "x" * 200
    }
    with pytest.raises(ConfigFileError, match="line 1, column 4: a string of 200 characters"):
        parse_config_text(text, source="t", limits=ReadLimits(max_string=199))
    with pytest.raises(ConfigFileError, match="a string of 201 characters, over the limit of 200"):
        parse_json_text(json.dumps(["x" * 201]), source="j", limits=ReadLimits(max_string=200))


def test_over_size_text_is_refused():
    with pytest.raises(ConfigFileError, match="larger than the limit of 10 bytes"):
        parse_config_text("a: 12345678", source="t", limits=ReadLimits(max_bytes=10))
    with pytest.raises(ConfigFileError, match="larger than the limit of 10 bytes"):
        parse_json_text('"é12345678"', source="t", limits=ReadLimits(max_bytes=10))  # 11 bytes


def test_huge_integers_and_non_finite_numbers_come_back_as_values():
    digits = "9" * 5000  # over Python's 4300-digit conversion limit
    value = parse_config_text(f"a: {digits}\nb: -{'1' * 400}\nc: .nan\nd: -.inf", source="t")
    assert value["a"] == 10**5000 - 1
    assert value["b"] == -int("1" * 400)
    assert math.isnan(value["c"])
    assert value["d"] == -math.inf
    parsed = parse_json_text(f"[{digits}, -{digits}, NaN, Infinity, 1e400]", source="j")
    assert parsed[:2] == [10**5000 - 1, -(10**5000 - 1)]
    assert math.isnan(parsed[2])
    assert parsed[3:] == [math.inf, math.inf]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [1, 2", "line 2, column 1: not valid YAML: while parsing a flow sequence"),
        ("a: 1\n--- \nb: 2", "expected a single document"),
        ("a: !!python/object/apply:os.system [ls]", "could not determine a constructor"),
        ("when: 2021-02-30", "cannot be read: day is out of range for month"),
        ("? [1]\n: 2", "found unhashable key"),
        ("a: \x00", r"not valid YAML: unacceptable character #x0000: .* position 3$"),
        ("a: !!float x", "cannot be read: could not convert string to float"),
    ],
)
def test_invalid_yaml_is_one_config_file_error(text, message):
    with pytest.raises(ConfigFileError, match=message) as raised:
        parse_config_text(text, source="t")
    assert "\n" not in str(raised.value)


def test_not_a_str_is_refused():
    with pytest.raises(ConfigFileError, match="expected the text as a str, got bytes"):
        parse_config_text(b"a: 1", source="t")  # type: ignore[arg-type]


def test_json_text_is_strict_json():
    assert parse_json_text('{"a": [1, 0.5, "x", true, null]}', source="j") == {
        "a": [1, 0.5, "x", True, None]
    }
    with pytest.raises(ConfigFileError, match=r"j: line 1, column 2: not JSON"):
        parse_json_text("{a: 1}", source="j")


def test_json_nesting_is_refused_before_parsing():
    with pytest.raises(ConfigFileError, match="nested deeper than the limit of 64 levels"):
        parse_json_text("[" * 100_000, source="j")
    assert parse_json_text('["[[[[", "\\"[[["]', source="j") == ["[[[[", '"[[[']
    assert parse_json_text("[" * 64 + "]" * 64, source="j")


def test_json_node_limit():
    with pytest.raises(ConfigFileError, match="more than the limit of 10 nodes"):
        parse_json_text(json.dumps(list(range(10))), source="j", limits=ReadLimits(max_nodes=10))


# Files


def test_reads_a_file(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text("\ufeffcombine: sum\n", encoding="utf-8")  # a BOM is allowed
    assert read_config_file(path, what="recipe") == {"combine": "sum"}
    assert read_config_file(str(path), what="recipe") == {"combine": "sum"}


def test_missing_file(tmp_path):
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigFileError, match=f"^recipe {path}: no such file$"):
        read_config_file(path, what="recipe")


def test_a_directory(tmp_path):
    with pytest.raises(ConfigFileError, match=r"is a directory, not a regular file"):
        read_config_file(tmp_path, what="recipe")


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigFileError, match=r"pipe\.yaml: is a FIFO \(named pipe\)"):
        read_config_file(fifo, what="tool_config")


def test_a_device_is_refused():
    with pytest.raises(ConfigFileError, match=r"^verl config /dev/zero: is a device, not a"):
        read_config_file("/dev/zero", what="verl config")


def test_a_socket_is_refused(tmp_path):
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(ConfigFileError, match="is a socket, not a regular file"):
            read_config_file(path, what="recipe")


def test_over_size_file(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("a: " + "1" * 100)
    with pytest.raises(ConfigFileError, match=r"big\.yaml: larger than the limit of 50 bytes"):
        read_config_file(path, what="recipe", limits=ReadLimits(max_bytes=50))


def test_a_file_larger_than_its_stat_size_is_cut_at_the_limit():
    """/proc files have st_size 0: the limit holds while reading, too."""
    with pytest.raises(ConfigFileError, match=r"status: larger than the limit of 50 bytes$"):
        read_config_file("/proc/self/status", what="recipe", limits=ReadLimits(max_bytes=50))


def test_not_utf8(tmp_path):
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"a: 1\nb: caf\xe9\n")
    with pytest.raises(ConfigFileError, match=r"line 2: not UTF-8 \(byte 0xe9 at offset 11\)"):
        read_config_file(path, what="recipe")


def test_over_long_names_are_one_short_line(tmp_path):
    name = "r" * 100_000 + ".yaml"
    with pytest.raises(ConfigFileError) as raised:
        read_config_file(tmp_path / name, what="recipe")
    message = str(raised.value)
    assert "the file name is too long" in message
    assert f"({len(str(tmp_path / name))} characters)" in message
    assert len(message) < 300
    assert "\n" not in message


def test_names_are_shown_on_one_line(tmp_path):
    with pytest.raises(ConfigFileError) as raised:
        read_config_file(tmp_path / "a\nb.yaml", what="recipe")
    assert "a\\nb.yaml: no such file" in str(raised.value)


def test_an_embedded_nul_byte():
    with pytest.raises(ConfigFileError, match="not a usable path"):
        read_config_file("a\0b.yaml", what="recipe")


def test_unreadable_file(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = tmp_path / "secret.yaml"
    path.write_text("a: 1")
    path.chmod(0)
    with pytest.raises(ConfigFileError, match="Permission denied"):
        read_config_file(path, what="recipe")


def test_a_file_bomb_is_refused(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    with pytest.raises(ConfigFileError, match="nodes once aliases are expanded"):
        read_config_file(path, what="recipe")


# Properties

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)


@given(json_values)
def test_json_reads_as_json_loads(value):
    text = json.dumps(value)
    assert parse_json_text(text, source="j") == json.loads(text)


@given(st.text(max_size=60) | st.text(alphabet="[]{}&*:-,? \n\t'\"!|>#%@ab019._", max_size=80))
def test_any_text_is_a_value_or_a_config_file_error(text):
    with contextlib.suppress(ConfigFileError):
        parse_config_text(text, source="t")
    with contextlib.suppress(ConfigFileError):
        parse_json_text(text, source="t")


@given(json_values)
def test_yaml_of_json_values_reads_as_safe_load(value):
    text = yaml.safe_dump(value)
    assert parse_config_text(text, source="t") == yaml.safe_load(text)


def test_paths_are_accepted_as_str_and_pathlike(tmp_path):
    path = Path(tmp_path, "x.json")
    path.write_text('{"a": 1}')
    assert read_config_file(os.fspath(path), what="x") == {"a": 1}


PURE_PYTHON_SCRIPT = """
import yaml
del yaml.CSafeLoader  # as on a PyYAML built without libyaml
from reward_plugins.config_reader import ConfigFileError, _SafeLoader, parse_config_text
assert _SafeLoader is yaml.SafeLoader
texts = {
    "bomb": BOMB,
    "recursive": "components: &c [{scorer: s, components: *c}]",
    "flow": "[" * 5000 + "]" * 5000,
    "block": "- " * 3000 + "x",
}
for name, text in texts.items():
    try:
        parse_config_text(text, source=name)
    except ConfigFileError as error:
        print(error)
print(parse_config_text("a: " + "9" * 5000, source="int")["a"] == 10**5000 - 1)
"""


def test_the_pure_python_parser_keeps_the_limits(tmp_path):
    """PyYAML built without libyaml: the same refusals from its Python parser."""
    import subprocess
    import sys

    script = PURE_PYTHON_SCRIPT.replace("BOMB", repr(alias_bomb()))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("bomb: line ") and lines[0].endswith("aliases are expanded")
    assert "recursive anchor" in lines[1]
    assert lines[2] == "flow: line 1, column 65: nested deeper than the limit of 64 levels"
    assert lines[3].startswith("block: line 1, column ") and "nested deeper" in lines[3]
    assert lines[4] == "True"
