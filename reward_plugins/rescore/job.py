"""The job a re-scoring run is given: what ``score`` and ``report`` ask of the engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reward_plugins.rescore.records import ScoredRow


@dataclass(frozen=True)
class ScoreJob:
    """What ``reward-plugins score`` (or ``report``) was asked to do.

    ``inputs`` are files, directories (verl's ``{step}.jsonl`` run directories) or glob
    patterns. ``output`` is a file for one input file, a directory for a run (one output per
    input, same name), or with ``merge`` one file for all; ``None`` scores and summarizes only.
    ``workers`` is the number of local processes, or the CPUs of a local Ray instance (``None``:
    1 locally, every CPU on Ray). ``quiet`` silences Ray. ``describe`` (a picklable function of
    a :class:`ScoredRow`) runs in the workers on every scored row; :func:`run` hands its results
    to ``on_described`` in input order. ``also_writes`` names the files the caller writes besides
    (a summary): none may be an input or an output. ``datasets`` are verl's dataset files of the
    run: each row's data source is joined from them on its prompt (:mod:`.datasets`).
    """

    inputs: tuple[str | Path, ...]
    output: Path | None = None
    merge: bool = False
    scorer: str = "compute_score"
    options: Mapping[str, Any] = field(default_factory=dict)
    data_source: str | None = None
    data_source_column: str | None = None
    response_column: str | None = None
    ground_truth_column: str | None = None
    on_error: Literal["fail", "skip"] = "fail"
    workers: int | None = None
    backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    quiet: bool = False
    resume: bool = False
    describe: Callable[[ScoredRow], Any] | None = None
    also_writes: tuple[Path, ...] = ()
    datasets: tuple[Path, ...] = ()
