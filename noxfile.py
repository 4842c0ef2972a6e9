"""The verl version matrix: one uv-built environment per verl release, each running
``matrix/test_verl_version.py`` with that release's own code (see docs/verl-versions.md).

    nox                            # every version; outcomes must equal matrix/results.json
    nox -s "matrix(0.4.1)"        # one version
    nox -- --record                # write the outcomes instead, then: python matrix/record.py write
    nox -s lock                    # re-pin matrix/constraints/verl-*.txt and constraints/test.txt

Each environment installs verl, this checkout (``.[verl]``) and pytest under the fully pinned
``matrix/constraints/verl-VERSION.txt``, with the CPU build of torch 2.13.0. uv takes that wheel
from the ``find-links`` directory pip is configured with (``PIP_FIND_LINKS`` or ``pip config``);
set ``UV_FIND_LINKS`` or ``UV_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu`` elsewhere.
An environment that holds any ``nvidia-*`` package fails.

``nox -s lock`` also pins the README's test install, ``constraints/test.txt``: the ``test`` extra
resolved under the verl 0.9.1 environment's pins, so the two agree on every package they share.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nox

VERSIONS = ("0.4.1", "0.5.0", "0.6.1", "0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1")
"""Every verl release from 0.4.1 on that the docs claim; each has
``verl/utils/reward_score/search_r1_like_qa_em.py``."""

COMMON = ("torch==2.13.0+cpu", "pyarrow<26", "setuptools<81")
WORKING_SETS = {
    "0.4.1": (*COMMON, "tensordict==0.6.2", "transformers==4.53.3", "numpy<2"),
    "0.5.0": (*COMMON, "numpy<2", "transformers==4.57.6"),
    "0.6.1": (*COMMON, "numpy<2", "transformers==4.57.6"),
    "0.7.0": (*COMMON, "numpy<2", "transformers==4.57.6"),  # it imports AutoModelForVision2Seq
    "0.7.1": (*COMMON, "numpy<2", "transformers==5.24.0"),
    "0.8.0": (*COMMON, "numpy<2", "transformers==5.24.0"),
    "0.9.0": COMMON,  # verl 0.9 needs numpy >= 2
    "0.9.1": COMMON,
}
"""What each environment is resolved under before it is pinned: the CPU torch, then the pins
verl's own requirements or its imports on this torch need."""

ROOT = Path(__file__).resolve().parent
CONSTRAINTS = ROOT / "matrix" / "constraints"
RUNS = ROOT / "matrix" / "runs"
TEST_CONSTRAINTS = ROOT / "constraints" / "test.txt"
TEST_VERL = "0.9.1"
"""The verl release of the ``test`` extra, whose matrix pins ``constraints/test.txt`` follows.
torch is left out of that file: the README's test command installs it first."""
TEST_REQUIREMENTS = ("pytest>=8",)
UNDECLARED = {"0.6.1": ("openai",)}
"""Imported by that verl version (its experimental reward loop) but not declared by it."""

nox.options.sessions = ["matrix"]
nox.options.default_venv_backend = "uv"


def uv_env() -> dict[str, str]:
    """Point uv at the wheels pip finds here (the CPU torch lies in pip's find-links)."""
    env = {}
    links = os.environ.get("UV_FIND_LINKS") or os.environ.get("PIP_FIND_LINKS")
    if not links:
        found = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.find-links"],
            capture_output=True,
            text=True,
        )
        links = found.stdout.strip() if found.returncode == 0 else ""
    if links:
        env["UV_FIND_LINKS"] = links
    return env


@nox.session(python="3.11")
@nox.parametrize("verl", VERSIONS, ids=list(VERSIONS))
def matrix(session: nox.Session, verl: str) -> None:
    """Build the environment for ``verl`` and run the matrix module in it."""
    constraints = CONSTRAINTS / f"verl-{verl}.txt"
    if not constraints.exists():
        session.error(f"{constraints.relative_to(ROOT)} is missing: run `nox -s lock`")
    started = time.monotonic()
    session.install(
        "-c",
        str(constraints),
        f"verl=={verl}",
        ".[verl]",
        *UNDECLARED.get(verl, ()),
        *TEST_REQUIREMENTS,
        env=uv_env(),
    )
    install_s = time.monotonic() - started
    list_names = (
        "import importlib.metadata as m; print(*(d.metadata['Name'] for d in m.distributions()))"
    )
    names = session.run("python", "-c", list_names, silent=True)
    nvidia = [name for name in str(names).split() if name.lower().startswith("nvidia")]
    if nvidia:
        session.error(f"verl {verl}: a GPU build came in: {', '.join(nvidia)}")
    RUNS.mkdir(parents=True, exist_ok=True)
    out = RUNS / f"verl-{verl}.json"
    out.unlink(missing_ok=True)
    env = {"MATRIX_OUT": str(out), "MATRIX_RECORD": "1" if "--record" in session.posargs else "0"}
    started = time.monotonic()
    session.run("python", "-m", "pytest", "matrix", "-p", "no:cacheprovider", "-q", env=env)
    record = json.loads(out.read_text())
    record.update(install_s=round(install_s, 1), test_s=round(time.monotonic() - started, 1))
    out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def compile_pins(session: nox.Session, output: Path, *inputs: str) -> None:
    """``uv pip compile INPUTS`` for Python 3.11 into ``output``, every package pinned."""
    session.run(
        "uv", "pip", "compile", "--quiet", "--python-version", "3.11",
        "--custom-compile-command", "nox -s lock", "--no-annotate",
        *inputs, "-o", str(output), env=uv_env(),
    )  # fmt: skip


@nox.session(python="3.11", venv_backend="none")
def lock(session: nox.Session) -> None:
    """Resolve each version's working set with this checkout and pin every package, then the
    ``test`` extra under the pins of verl ``TEST_VERL``."""
    CONSTRAINTS.mkdir(parents=True, exist_ok=True)
    for verl in VERSIONS:
        requirements = CONSTRAINTS / f".verl-{verl}.in"
        working_set = CONSTRAINTS / f".verl-{verl}.working-set"
        pins = (f"verl=={verl}", *UNDECLARED.get(verl, ()), *TEST_REQUIREMENTS)
        requirements.write_text("\n".join(pins) + "\n")
        working_set.write_text("\n".join(WORKING_SETS[verl]) + "\n")
        compile_pins(
            session, CONSTRAINTS / f"verl-{verl}.txt",
            "--extra", "verl", "pyproject.toml", str(requirements), "-c", str(working_set),
        )  # fmt: skip
        requirements.unlink()
        working_set.unlink()
    compile_pins(
        session, TEST_CONSTRAINTS,
        "--extra", "test", "pyproject.toml", "-c", str(CONSTRAINTS / f"verl-{TEST_VERL}.txt"),
        "--no-emit-package", "torch",
    )  # fmt: skip
