"""Old import paths that keep working for one release after a module moved.

A module that moved leaves a stub at its old path whose ``__getattr__`` is
:func:`forward_to`'s: the first use of any name warns once (a :class:`DeprecationWarning`
naming the new path) and returns the new module's attribute.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def forward_to(old: str, new: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the stub ``old`` that reads every name from ``new``."""

    def __getattr__(name: str) -> Any:
        target = importlib.import_module(new)
        if not hasattr(target, name):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(
            f"{old} moved to {new}; import {name} from there ({old} goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(target, name)

    return __getattr__
