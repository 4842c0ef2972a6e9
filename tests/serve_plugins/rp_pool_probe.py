"""A misbehaving scorer for the worker pool's tests, registered by an entry point the tests write.

``pool_probe`` (data source ``pool_probe``) scores a response by exact match against the golds
(``reward_plugins.metrics.score("em", ...)``), unless the response starts with a trigger:

- ``HANG``: sleeps an hour (a scorer stuck on a degenerate output);
- ``SEGV``: the process receives ``SIGSEGV`` (a crash in a C extension);
- ``EXIT3``: ``os._exit(3)`` (a library that exits the process);
- ``LEAK``: keeps 8 MiB more in a module-level list, then scores (a leaking cache);
- ``NAP``: sleeps 2 ms, then scores (a slow scorer);
- ``RAISE``: raises ``ValueError`` (an ordinary scorer bug, the engine's ``scorer error``).
"""

from __future__ import annotations

import os
import signal
import time

from reward_plugins import ResultKey, scorer
from reward_plugins.metrics import score

DATA_SOURCE = "pool_probe"
LEAK_BYTES = 8 << 20
_kept: list[bytes] = []


@scorer(
    "pool_probe",
    DATA_SOURCE,
    results=(ResultKey("score", "reward", "score"), ResultKey("length", "component", "length")),
)
def pool_probe(response: str, golds: tuple[str, ...], *, scale: float = 1.0) -> dict[str, float]:
    """``scale`` x exact match, and the response's length over 1000; see the module's triggers."""
    if response.startswith("HANG"):
        time.sleep(3600)
    elif response.startswith("SEGV"):
        os.kill(os.getpid(), signal.SIGSEGV)
    elif response.startswith("EXIT3"):
        os._exit(3)
    elif response.startswith("LEAK"):
        _kept.append(b"\1" * LEAK_BYTES)  # written, so resident
    elif response.startswith("NAP"):
        time.sleep(0.002)
    elif response.startswith("RAISE"):
        raise ValueError("the probe was asked to raise")
    return {"score": scale * score("exact_match", response, golds), "length": len(response) / 1000}
