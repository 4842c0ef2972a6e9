"""Output: the workers' results written in input order, counted, and their bad rows listed.

Each output file is written through its format's :class:`~reward_plugins.rescore.formats.OutputFile`
to a temporary file (:func:`files.atomic_output`), renamed into place with its input's last chunk
(with ``--merge``, after the last input) and then listed in the manifest of a directory output.
The skipped rows go to ``OUTPUT.failures.jsonl``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Literal

import orjson

from reward_plugins.rescore import files, summary
from reward_plugins.rescore.errors import BadRowError
from reward_plugins.rescore.formats import Format, OutputFile
from reward_plugins.rescore.plan import Plan
from reward_plugins.rescore.workers import ChunkResult, FailedRow

Progress = Callable[[int], None]
"""Called with the number of rows just handled."""


class Stats:
    """Row counts and skipped rows of the whole job, for the summary."""

    def __init__(self) -> None:
        self.rows = 0
        self.scored = 0
        self.stringified = 0
        self.replaced: set[str] = set()
        self.reasons: Counter[str] = Counter()
        self.examples: list[dict[str, Any]] = []
        self.counts: summary.Counts = Counter()
        self.seconds = {"workers": 0.0, "write": 0.0}

    def add(self, result: ChunkResult) -> None:
        """Count a chunk's rows (its failures are counted as they are listed)."""
        self.rows += result.rows
        self.scored += result.rows - len(result.failed)
        self.stringified += result.stringified
        self.replaced |= result.replaced
        summary.merge(self.counts, result.counts)
        self.seconds["workers"] += result.seconds


class Failures:
    """The skipped rows and their reasons, as JSON lines in ``OUTPUT.failures.jsonl``; written
    through a temporary file when the first one arrives; a stale file removed when none does."""

    def __init__(self, path: Path | None, stack: contextlib.ExitStack) -> None:
        self.path, self.stack = path, stack
        self.stream: IO[bytes] | None = None

    def add(self, name: str, unit: str, failed: FailedRow) -> None:
        if self.path is None:
            return
        if self.stream is None:
            temporary = self.stack.enter_context(files.atomic_output(self.path))
            self.stream = self.stack.enter_context(temporary.open("wb"))
        entry = {
            "file": name,
            unit: failed.number,
            "reason": failed.failure.reason,
            "detail": failed.failure.detail,
            "row": failed.row,
        }
        try:
            line = orjson.dumps(entry, default=repr, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # a lone surrogate in a detail: the standard library escapes it
            line = json.dumps(entry, default=repr).encode()
        self.stream.write(line + b"\n")

    def finish(self) -> None:
        if self.path is not None and self.stream is None:
            self.path.unlink(missing_ok=True)


class Output:
    """One output file being written in its format, to a temporary file."""

    def __init__(self, target: Path, fmt: Format, stack: contextlib.ExitStack) -> None:
        self.target = target
        temporary = stack.enter_context(files.atomic_output(target))
        self.file: OutputFile = fmt.open_output(temporary, target)
        stack.callback(self.file.abandon)
        self.rows = self.scored = 0
        self.digests = hashlib.sha256()  # of the input's chunks, for the manifest

    def write(self, result: ChunkResult, where: str) -> None:
        self.rows += result.rows
        self.scored += result.rows - len(result.failed)
        self.digests.update(result.digest)
        self.file.write(result.output, where)


class Writer:
    """Writes the results of a job, in order, to their outputs, and counts them."""

    def __init__(
        self,
        the_plan: Plan,
        on_error: Literal["fail", "skip"],
        merge: bool,
        stats: Stats,
        failures: Failures,
    ) -> None:
        self.plan, self.on_error, self.merge = the_plan, on_error, merge
        self.stats, self.failures = stats, failures

    def failed(self, result: ChunkResult) -> None:
        """List the chunk's bad rows; stop at the first with ``on_error="fail"``.

        Raises:
            BadRowError: naming the row, with ``on_error="fail"``.
        """
        name = str(self.plan.inputs[result.file_index])
        unit = self.plan.formats[result.file_index].unit
        for failed in result.failed:
            if self.on_error == "fail":
                raise BadRowError(
                    f"{name}: {unit} {failed.number}: {failed.failure.detail} (--on-error "
                    "skip goes on, listing bad rows in OUTPUT.failures.jsonl)"
                )
            self.stats.reasons[failed.failure.reason] += 1
            if len(self.stats.examples) < 10:
                example = {"file": name, unit: failed.number, "reason": failed.failure.detail}
                self.stats.examples.append(example)
            self.failures.add(name, unit, failed)

    def write_all(
        self,
        results: Iterator[ChunkResult],
        progress: Progress | None,
        on_described: Callable[[Any], None] | None,
    ) -> None:
        """Write the results, in order, to their outputs, each output completed with its
        input's last chunk (with ``merge``, after the last input); count them; stop at the
        first bad row with ``on_error="fail"``."""
        output: Output | None = None
        with contextlib.ExitStack() as file_stack:
            for result in results:
                index = result.file_index
                target = self.plan.targets[index]
                if output is None and target is not None:
                    output_format = self.plan.output_formats[index]
                    assert output_format is not None
                    output = Output(target, output_format, file_stack)
                self.failed(result)
                self.stats.add(result)
                if output is not None:
                    written = time.perf_counter()
                    output.write(result, str(self.plan.inputs[index]))
                    if result.last and not self.merge:
                        self.finish(index, output, file_stack)
                        output = None
                    self.stats.seconds["write"] += time.perf_counter() - written
                if on_described is not None:
                    for item in result.described:
                        on_described(item)
                if progress is not None:
                    progress(result.rows)
            if output is not None:
                self.finish(None, output, file_stack)

    def finish(self, index: int | None, output: Output, stack: contextlib.ExitStack) -> None:
        """Close ``output``, rename it into place, and list it in the manifest as made from
        input ``index`` (none for a merged output)."""
        output.file.close()
        stack.close()
        if self.plan.manifest is not None and index is not None:
            source = self.plan.inputs[index]
            digest = self.plan.formats[index].fingerprint_read(source, output.digests)
            entry = {"sha256": digest, "rows": output.rows, "scored": output.scored}
            self.plan.manifest.add(source, output.target, entry)
