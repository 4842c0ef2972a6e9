"""Pairing two ``score`` outputs of the same inputs, row by row, for ``reward-plugins compare``.

The result columns are the ``reward_*`` columns holding a number in the first row of either
output; every other column (verl's ``reward_model`` mapping included) is an input and must be
equal in both, row for row.
"""

from __future__ import annotations

import array
import dataclasses
import itertools
import json
import math
import numbers
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from reward_plugins.rescore import rows
from reward_plugins.rescore.execute import RescoreError, read_chunks
from reward_plugins.rescore.files import PathError, file_format
from reward_plugins.rescore.rows import RESULT_PREFIX

_ENDED: Any = object()
"""Fills the rows of the shorter output while the longer one is counted."""


class CompareRefused(RescoreError):
    """Two outputs that cannot be paired; the message names the paths."""


@dataclasses.dataclass
class Column:
    """The values of one ``reward_*`` column in A and B, or why it is not compared."""

    values_a: array.array[float] = dataclasses.field(default_factory=lambda: array.array("d"))
    values_b: array.array[float] = dataclasses.field(default_factory=lambda: array.array("d"))
    problem: str | None = None


def paired_columns(first: Path, second: Path) -> tuple[int, dict[str, Column], dict[str, str]]:
    """Read A and B in step: the number of rows, the result columns of both, and why the other
    result columns are not compared.

    Result columns are the ``reward_*`` columns holding a number in the first row of A or B;
    every other column (verl's ``reward_model`` mapping included) is an input, equal in A and B.

    Raises:
        PathError, RescoreError: a path that is not a readable output.
        CompareRefused: the row counts differ, an input column differs, a row does not parse, no
            row, or no column to compare.
    """
    rows_a, rows_b = output_rows(first), output_rows(second)
    columns: dict[str, Column] = {}
    skipped: dict[str, str] = {}
    results: frozenset[str] = frozenset()
    mismatch: str | None = None
    count = count_a = count_b = 0
    for record_a, record_b in itertools.zip_longest(rows_a, rows_b, fillvalue=_ENDED):
        count_a += record_a is not _ENDED
        count_b += record_b is not _ENDED
        if record_a is _ENDED or record_b is _ENDED:
            continue  # counting the rows of the longer output
        count += 1
        if count == 1:
            columns, skipped = _result_columns(record_a, record_b, first, second)
            results = frozenset([*columns, *skipped])
        if mismatch is None:
            mismatch = _input_difference(record_a, record_b, results, count, (first, second))
        if mismatch is None:
            for name, column in columns.items():
                _add_values(column, record_a.get(name), record_b.get(name), count, first, second)
    if count_a != count_b:
        raise CompareRefused(
            f"{first} has {count_a} rows but {second} has {count_b}; compare two outputs of "
            "the same inputs"
        )
    if mismatch is not None:
        raise CompareRefused(
            f"{mismatch}; compare two outputs of the same inputs, in the same order"
        )
    if count == 0:
        raise CompareRefused(f"{first} and {second} have no rows")
    for name, column in list(columns.items()):
        if column.problem is not None:
            skipped[name] = column.problem
            del columns[name]
    if not columns:
        grouped: dict[str, list[str]] = {}
        for name, why in skipped.items():
            grouped.setdefault(why if why.startswith("only in ") else "not numbers", []).append(
                name
            )
        reasons = "; ".join(f"{why}: {', '.join(names)}" for why, names in grouped.items())
        raise CompareRefused(
            f"no {RESULT_PREFIX}* column holds numbers in both {first} and {second}"
            + (f" ({reasons})" if reasons else "")
        )
    return count, columns, skipped


def output_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a ``score`` output, parsed, in order (checks the path on creation).

    Raises:
        PathError: no such file or an unsupported format (before the first row).
        RescoreError: the file cannot be read.
        CompareRefused: a line that is not a JSON object.
    """
    if not path.is_file():
        raise PathError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    fmt = file_format(path)

    def generate() -> Iterator[dict[str, Any]]:
        for chunk in read_chunks(path, 0, fmt):
            if fmt == ".parquet":
                yield from chunk.payload.to_pylist()
                continue
            for number, line in rows.jsonl_lines(chunk.payload, chunk.first_number):
                record = rows.parse_line(line)
                if isinstance(record, rows.RowFailure):
                    raise CompareRefused(f"{path}: line {number}: {record.detail}")
                yield record

    return generate()


def _result_columns(
    record_a: Mapping[str, Any], record_b: Mapping[str, Any], first: Path, second: Path
) -> tuple[dict[str, Column], dict[str, str]]:
    """The result columns of the first rows (``reward_*`` holding a number): those of both, and
    those of one only, with the reason."""

    def results(record: Mapping[str, Any]) -> list[str]:
        return [
            name
            for name, value in record.items()
            if name.startswith(RESULT_PREFIX) and isinstance(value, numbers.Real)
        ]

    names_a, names_b = results(record_a), results(record_b)
    both = [name for name in names_a if name in names_b]
    skipped = {name: f"only in {first}" for name in names_a if name not in both}
    skipped.update({name: f"only in {second}" for name in names_b if name not in both})
    return {name: Column() for name in both}, skipped


def _input_difference(
    record_a: Mapping[str, Any],
    record_b: Mapping[str, Any],
    results: frozenset[str],
    row: int,
    paths: tuple[Path, Path],
) -> str | None:
    """Where the input columns (all but the ``results``) of two rows differ, or ``None``.

    A column absent from a row equals ``null`` (a parquet output holds every column in
    every row); NaN equals NaN.
    """
    first, second = paths
    for name in dict.fromkeys([*record_a, *record_b]):
        if name in results:
            continue
        if not _same_value(record_a.get(name), record_b.get(name)):
            where = f"row {row}"
            if name not in record_a or name not in record_b:
                holder = first if name in record_a else second
                return f"{where}: the input column {name!r} is only in {holder}"
            return f"{where}: the input column {name!r} differs between {first} and {second}"
    return None


def _same_value(first: Any, second: Any) -> bool:
    """Equal JSON values, NaN equal to NaN and a missing mapping key equal to ``null``."""
    if first == second:
        return True
    if isinstance(first, float) and isinstance(second, float):
        return math.isnan(first) and math.isnan(second)
    if isinstance(first, Mapping) and isinstance(second, Mapping):
        keys = dict.fromkeys([*first, *second])
        return all(_same_value(first.get(key), second.get(key)) for key in keys)
    if isinstance(first, list) and isinstance(second, list) and len(first) == len(second):
        return all(_same_value(x, y) for x, y in zip(first, second, strict=True))
    return False


def _add_values(
    column: Column, value_a: Any, value_b: Any, row: int, first: Path, second: Path
) -> None:
    """Append a row's values, or record why the column cannot be compared."""
    if column.problem is not None:
        return
    for value, path in ((value_a, first), (value_b, second)):
        if not isinstance(value, numbers.Real) or not math.isfinite(value):
            column.problem = f"row {row} of {path} holds {_shown(value)}, not a finite number"
            return
    column.values_a.append(float(value_a))
    column.values_b.append(float(value_b))


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
