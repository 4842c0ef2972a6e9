"""The README's test install is pinned: ``constraints/test.txt`` (written by ``nox -s lock``, see
``noxfile.py``) pins every requirement of the package and of its ``test`` extra, agrees with the
verl matrix's environment of the same verl release (``matrix/constraints/verl-0.9.1.txt``) on
every package both pin, and the README's test command installs under it, after the CPU build of
torch that the file leaves out. The pins are resolved for Python 3.11, as the matrix's are."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

tomllib = pytest.importorskip("tomllib", reason="the pins are for Python 3.11")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import noxfile  # noqa: E402

PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)$")


def pins(path: Path) -> dict[str, str]:
    """``{canonical name: version}`` of a constraints file; every line is a comment or one
    exact pin, and no package is pinned twice."""
    found: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        match = PIN.match(line)
        assert match, f"{path.name}:{number}: not an exact pin: {line!r}"
        name = canonicalize_name(match["name"])
        assert name not in found, f"{path.name}:{number}: {name} pinned twice"
        found[name] = match["version"]
    return found


@pytest.fixture(scope="module")
def test_pins() -> dict[str, str]:
    return pins(noxfile.TEST_CONSTRAINTS)


@pytest.fixture(scope="module")
def matrix_pins() -> dict[str, str]:
    return pins(noxfile.CONSTRAINTS / f"verl-{noxfile.TEST_VERL}.txt")


def requirements() -> list[Requirement]:
    """The package's own requirements and those of its ``test`` extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    return [Requirement(line) for line in lines]


def test_the_lock_session_writes_the_file() -> None:
    assert noxfile.TEST_CONSTRAINTS == ROOT / "constraints" / "test.txt"
    first_lines = noxfile.TEST_CONSTRAINTS.read_text(encoding="utf-8").splitlines()[:2]
    assert first_lines[1] == "#    nox -s lock"


def test_every_requirement_is_pinned_within_its_range(test_pins: dict[str, str]) -> None:
    checked = 0
    for requirement in requirements():
        name = canonicalize_name(requirement.name)
        assert name in test_pins, f"{requirement} is not pinned"
        pinned = Version(test_pins[name])
        assert requirement.specifier.contains(pinned, prereleases=True), (requirement, pinned)
        checked += 1
    assert checked > 25  # the six dependencies and the test extra


def test_the_test_extra_names_the_matrix_verl(test_pins: dict[str, str]) -> None:
    verl = [r for r in requirements() if canonicalize_name(r.name) == "verl"]
    assert [str(r.specifier) for r in verl] == [f"=={noxfile.TEST_VERL}"]
    assert test_pins["verl"] == noxfile.TEST_VERL


def test_pins_agree_with_the_matrix_environment(
    test_pins: dict[str, str], matrix_pins: dict[str, str]
) -> None:
    shared = sorted(set(test_pins) & set(matrix_pins))
    differ = {name: (test_pins[name], matrix_pins[name]) for name in shared}
    differ = {name: versions for name, versions in differ.items() if len(set(versions)) > 1}
    assert differ == {}
    assert {"verl", "numpy", "transformers", "tensordict", "ray", "pandas"} <= set(shared)


def test_no_gpu_build_and_no_torch(test_pins: dict[str, str]) -> None:
    """torch comes from the README's first install (the CPU build); nothing pulls CUDA in."""
    assert "torch" not in test_pins
    assert [name for name in test_pins if name.startswith("nvidia")] == []


def test_the_readme_test_command_installs_under_the_pins(
    test_pins: dict[str, str], matrix_pins: dict[str, str]
) -> None:
    """pip installs the matrix's torch (pip's find-links hold its CPU build) and the pinned uv,
    then uv the package with its test extra under the pins."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- test-command -->\n(.*?)<!-- /test-command -->", readme, re.S)
    assert match, "no test command in README.md"
    steps = [step.strip() for step in match[1].split("```")[1].split("&&")]
    torch = Version(matrix_pins["torch"]).public  # 2.13.0+cpu: the CPU build of 2.13.0
    first = steps.index(f"pip install torch=={torch} uv=={test_pins['uv']}")
    then = steps.index('uv pip install -e ".[test]" -c constraints/test.txt')
    assert first < then
