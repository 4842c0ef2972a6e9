"""The misbehaving probe plugin (``tests/serve_plugins/rp_pool_probe.py``) installed as a third
party's plugin is: by an entry point of the group ``reward_plugins`` in a ``.dist-info``
directory written to a temporary directory, put on ``PYTHONPATH`` (inherited by worker
processes) and on ``sys.path`` (for this process, which computes expected values in-process).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reward_plugins import registry
from reward_plugins.testing import registry_restored

PLUGINS = Path(__file__).resolve().parent / "serve_plugins"
REPO = Path(__file__).resolve().parents[1]
PROBE = "pool_probe"


def write_probe_site(site: Path) -> str:
    """The probe's entry point written to ``site`` (an empty directory); the ``PYTHONPATH``
    under which a process finds this checkout's package and the probe."""
    dist_info = site / "rp_pool_probe-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: rp-pool-probe\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(
        "[reward_plugins]\npool_probe = rp_pool_probe\n", encoding="utf-8"
    )
    return os.pathsep.join(map(str, (REPO, PLUGINS, site)))


@contextlib.contextmanager
def probe_installed(site: Path) -> Iterator[None]:
    """The probe installed from ``site`` (an empty directory) for the block; the registry is
    restored afterwards, so the probe does not show up in other modules' tests."""
    python_path = write_probe_site(site)
    try:
        with registry_restored(), pytest.MonkeyPatch.context() as patch:
            patch.setenv("PYTHONPATH", python_path)
            patch.syspath_prepend(str(site))
            patch.syspath_prepend(str(PLUGINS))
            registry.load_plugins()  # as a process started now would: the probe is found
            yield
    finally:
        sys.modules.pop("rp_pool_probe", None)


def children_of(pid: int, marker: bytes = b"") -> list[int]:
    """The processes whose parent is ``pid`` and whose command line holds ``marker``
    (``spawn_main``: a pool's workers; multiprocessing's resource tracker is another child)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                line = (entry / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid and marker in line:
                found.append(int(entry.name))
    return found


def still_alive(pids: list[int], seconds: float = 30.0) -> list[int]:
    """The processes of ``pids`` still running after waiting up to ``seconds`` for them all to
    end (multiprocessing's resource tracker ends only once it reads its parent's end of a pipe,
    a moment after the parent has exited)."""
    until = time.monotonic() + seconds
    while any(alive(pid) for pid in pids) and time.monotonic() < until:
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
