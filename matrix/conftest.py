"""The verl version matrix runs its one module with the suite's builders (``tests/verl_helpers``)
importable, and writes what it found to ``$MATRIX_OUT`` (a JSON file) when that is set."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("MATRIX_OUT")
    module = sys.modules.get("test_verl_version")
    if out and module is not None:
        Path(out).write_text(json.dumps(module.run_record(), indent=1, sort_keys=True) + "\n")
