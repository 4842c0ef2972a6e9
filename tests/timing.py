"""The one timer of the tests that bound how work grows (linear-time guards)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_time(function: Callable[[], object], repeats: int = 5) -> float:
    """The fastest of ``repeats`` wall-clock timings of ``function()``, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best
