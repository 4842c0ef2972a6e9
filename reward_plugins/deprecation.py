"""Old import paths that keep working for one release after a module moved.

A module that moved leaves a stub at its old path whose ``__getattr__`` is :func:`forward_to`'s
(a module that lost a few names to another forwards just those): each use of a name warns (a
:class:`DeprecationWarning` naming the new path) and returns the new module's attribute.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def forward_to(old: str, new: str, names: frozenset[str] | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the module ``old`` that reads every name (or only
    ``names``, the ones that moved) from ``new``. ``new`` is imported on first use, so it may
    import ``old``."""

    def __getattr__(name: str) -> Any:
        if names is not None and name not in names:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        target = importlib.import_module(new)
        if not hasattr(target, name):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        moved = (
            f"{old} moved to {new}; import {name} from there ({old} goes in the next release)"
            if names is None
            else f"{old}.{name} moved to {new}; import it from there (the old name goes in the "
            "next release)"
        )
        warnings.warn(moved, DeprecationWarning, stacklevel=2)
        return getattr(target, name)

    return __getattr__
