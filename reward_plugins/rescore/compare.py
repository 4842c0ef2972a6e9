"""Pairing two ``score`` outputs of the same prompts, row by row, for ``reward-plugins compare``.

Rows are paired by their prompt: the first row of A with a given prompt with the first row of B
with that prompt, the second with the second (GRPO's n samples of one prompt), whatever the
order of the files. Paired rows must have the same ground truth; every other column may differ
(the responses of two checkpoints do). The result columns are the ``reward_*`` columns holding
a number in the first row of either output; a scorer's result schema, when given, names and
orders them (:func:`labelled`).
"""

from __future__ import annotations

import array
import dataclasses
import hashlib
import itertools
import json
import math
import numbers
import sys
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, cast

from reward_plugins.options import is_finite_number
from reward_plugins.rescore.errors import RescoreError
from reward_plugins.rescore.files import PathError, file_format
from reward_plugins.rescore.formats import rows_of
from reward_plugins.results import ResultKey, Schema, complete
from reward_plugins.runtime import rows
from reward_plugins.runtime.rows import GROUND_TRUTH_COLUMNS, RESULT_PREFIX

PROMPT_COLUMNS: tuple[str, ...] = ("input", "prompt")
"""Prompt columns looked for, in this order: verl's dumps call it ``input``, its datasets
``prompt``."""

_ENDED: Any = object()
"""Fills the rows of the shorter output while the longer one is read."""


class CompareRefused(RescoreError):
    """Two outputs that cannot be paired; the message names the paths and the first row."""


@dataclasses.dataclass
class Column:
    """The paired values of one ``reward_*`` column in A and B, or why it is not compared."""

    values_a: array.array[float] = dataclasses.field(default_factory=lambda: array.array("d"))
    values_b: array.array[float] = dataclasses.field(default_factory=lambda: array.array("d"))
    problem: str | None = None
    largest: float = 0.0  # the value of largest magnitude, and where it is
    largest_at: str = ""


@dataclasses.dataclass
class Pairing:
    """What :func:`paired_columns` found: the number of paired rows, the columns compared,
    those not compared (name -> reason), and the columns the rows were paired by."""

    rows: int
    columns: dict[str, Column]
    not_compared: dict[str, str]
    prompt_column: str
    ground_truth_column: str | None


class _Row(NamedTuple):
    """A row waiting for its partner: its 1-based row number, its ground truth's digest and its
    result values (NaN where the column cannot be compared)."""

    number: int
    truth: bytes
    values: tuple[float, ...]


def paired_columns(
    first: Path,
    second: Path,
    prompt_column: str | None = None,
    ground_truth_column: str | None = None,
) -> Pairing:
    """Read A and B, pair their rows by prompt, and collect the result columns of both, in the
    order of A's rows.

    The prompt column is ``prompt_column``, else the first of :data:`PROMPT_COLUMNS` in A's
    first row; the ground-truth column is ``ground_truth_column``, else the first of
    :data:`rows.GROUND_TRUTH_COLUMNS` in A's first row (none: rows pair by prompt alone).
    Values are compared as JSON: a missing mapping key equals ``null``, ``1`` equals ``1.0``,
    NaN equals NaN, and a ground truth that numpy stringified equals its list.

    Raises:
        PathError, RescoreError: a path that is not a readable output.
        CompareRefused: no row, no prompt column, a row that does not parse or has no prompt, a
            row without a partner (a prompt in one file only, or with more rows in one file), a
            differing ground truth, or no column to compare.
    """
    paths = (first, second)
    streams = (output_rows(first), output_rows(second))
    head_a, head_b = _first_rows(streams, paths)
    prompt = _pairing_column(head_a, head_b, prompt_column, PROMPT_COLUMNS, "prompt", paths)
    truth = _pairing_column(
        head_a, head_b, ground_truth_column, GROUND_TRUTH_COLUMNS, "ground truth", paths
    )
    columns, not_compared = _result_columns(head_a, head_b, first, second)
    pairer = _Pairer(paths, prompt, truth, columns)
    both = itertools.zip_longest(
        itertools.chain([head_a], streams[0]), itertools.chain([head_b], streams[1]),
        fillvalue=_ENDED,
    )  # fmt: skip
    for pair in both:
        for side, record in enumerate(pair):
            if record is not _ENDED:
                pairer.add(side, record)
    if pairer.waiting[0] or pairer.waiting[1]:
        raise CompareRefused(_unpaired(pairer.waiting, pairer.seen, pairer.counts, paths, prompt))
    _finish_columns(columns, not_compared, pairer.order)
    if not columns:
        raise CompareRefused(_nothing_to_compare(not_compared, first, second))
    return Pairing(len(pairer.order), columns, not_compared, prompt, truth)


def _first_rows(
    streams: tuple[Iterator[dict[str, Any]], Iterator[dict[str, Any]]], paths: tuple[Path, Path]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first row of each stream.

    Raises:
        CompareRefused: a file without rows (both named when both are empty).
    """
    head_a, head_b = (next(stream, None) for stream in streams)
    if head_a is None or head_b is None:
        empty = " and ".join(
            str(path) for path, head in zip(paths, (head_a, head_b), strict=True) if head is None
        )
        raise CompareRefused(f"{empty} {'have' if ' and ' in empty else 'has'} no rows")
    return head_a, head_b


class _Pairer:
    """Pairs the rows of A (side 0) and B (side 1) by prompt as they are read.

    A row waits, under its prompt's digest, until a row of the other side with the same prompt
    comes; each pair's result values go to ``columns`` (while a column has no problem) and A's
    row number to ``order``. What is left in ``waiting`` at the end has no partner; ``seen`` and
    ``counts`` (each prompt's rows, each side's rows) explain why.
    """

    def __init__(
        self, paths: tuple[Path, Path], prompt: str, truth: str | None, columns: dict[str, Column]
    ) -> None:
        self.paths, self.prompt, self.truth, self.columns = paths, prompt, truth, columns
        self.names = tuple(columns)
        self.waiting: tuple[dict[bytes, deque[_Row]], dict[bytes, deque[_Row]]] = ({}, {})
        self.seen: tuple[Counter[bytes], Counter[bytes]] = (Counter(), Counter())
        self.counts = [0, 0]
        self.order = array.array("q")  # the row number in A of each pair, in pairing order

    def add(self, side: int, record: Mapping[str, Any]) -> None:
        """Read the next row of ``side``: pair it with a waiting partner, or let it wait.

        Raises:
            CompareRefused: the row has no prompt, or its partner another ground truth.
        """
        self.counts[side] += 1
        key, row = self._row(side, record)
        partners = self.waiting[1 - side].get(key)
        if not partners:
            self.waiting[side].setdefault(key, deque()).append(row)
            return
        partner = partners.popleft()
        if not partners:
            del self.waiting[1 - side][key]
        self._pair(*((partner, row) if side else (row, partner)))

    def _row(self, side: int, record: Mapping[str, Any]) -> tuple[bytes, _Row]:
        """The digest of the row's prompt, and the row."""
        number, path = self.counts[side], self.paths[side]
        key = _digest(_prompt_of(record, self.prompt, number, path), "prompt", number, path)
        self.seen[side][key] += 1
        truth_value = None if self.truth is None else _truth_of(record, self.truth)
        row = _Row(
            number,
            _digest(truth_value, "ground truth", number, path),
            tuple(_value(record, name, self.columns[name], number, path) for name in self.names),
        )
        return key, row

    def _pair(self, row_a: _Row, row_b: _Row) -> None:
        if row_a.truth != row_b.truth:
            raise CompareRefused(
                f"row {row_a.number} of {self.paths[0]} and row {row_b.number} of "
                f"{self.paths[1]} have the same prompt but different ground truths (column "
                f"{self.truth!r}); compare two outputs of the same prompts"
            )
        self.order.append(row_a.number)
        for name, value_a, value_b in zip(self.names, row_a.values, row_b.values, strict=True):
            column = self.columns[name]
            if column.problem is None:
                column.values_a.append(value_a)
                column.values_b.append(value_b)


def _finish_columns(
    columns: dict[str, Column], not_compared: dict[str, str], order: Sequence[int]
) -> None:
    """Move the columns that cannot be compared (a value that is not a finite number, or so
    large that a sum over the rows overflows) to ``not_compared``, and put the others' pairs in
    A's row ``order``."""
    rows = len(order)
    limit = sys.float_info.max / (2 * max(1, rows))  # any sum of differences stays finite
    reordered = any(later < earlier for earlier, later in itertools.pairwise(order))
    in_a_order = sorted(range(rows), key=order.__getitem__) if reordered else []
    for name, column in list(columns.items()):
        if column.problem is None and abs(column.largest) > limit:
            column.problem = (
                f"{column.largest_at} holds {column.largest!r}, too large: a sum over the "
                f"{rows} rows would leave the range of a float"
            )
        if column.problem is not None:
            not_compared[name] = column.problem
            del columns[name]
        elif reordered:
            column.values_a = array.array("d", map(column.values_a.__getitem__, in_a_order))
            column.values_b = array.array("d", map(column.values_b.__getitem__, in_a_order))


def _nothing_to_compare(not_compared: Mapping[str, str], first: Path, second: Path) -> str:
    """The refusal when no column is left: the columns only in one file, grouped by file, and
    each other column with its reason."""
    only_in: dict[str, list[str]] = {}
    reasons = []
    for name, why in not_compared.items():
        if why.startswith("only in "):
            only_in.setdefault(why, []).append(name)
        else:
            reasons.append(f"{name}: {why}")
    reasons = [f"{why}: {', '.join(names)}" for why, names in only_in.items()] + reasons
    listed = f" ({'; '.join(reasons)})" if reasons else ""
    return f"no {RESULT_PREFIX}* column holds numbers in both {first} and {second}{listed}"


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
        for number, record in rows_of(path, fmt):
            if isinstance(record, rows.RowFailure):
                raise CompareRefused(f"{path}: {fmt.unit} {number}: {record.detail}")
            yield record

    return generate()


def _pairing_column(
    head_a: Mapping[str, Any],
    head_b: Mapping[str, Any],
    given: str | None,
    candidates: Sequence[str],
    role: str,
    paths: tuple[Path, Path],
) -> Any:
    """The column the rows pair by, found in A's first row and required in B's: ``given`` or
    the first of ``candidates``; ``None`` for an absent ground truth that was not asked for.

    Raises:
        CompareRefused: the prompt column (or a given column) is absent from a first row.
    """
    option = "--prompt-column" if role == "prompt" else "--ground-truth-column"
    try:
        name = rows.find_column([head_a], given, candidates, role, option, f"row 1 of {paths[0]}")
    except ValueError as error:
        if role == "prompt" or given is not None:
            raise CompareRefused(str(error)) from None
        return None
    if rows.column_value(head_b, name) is None and name not in head_b:
        raise CompareRefused(
            f"row 1 of {paths[1]}: no {role} column {name!r} (it is in {paths[0]}); name it "
            f"with {option}"
        )
    return name


def _prompt_of(record: Mapping[str, Any], column: str, number: int, path: Path) -> Any:
    value = rows.column_value(record, column)
    if value is None:
        raise CompareRefused(
            f"row {number} of {path}: no prompt (column {column!r}); rows are paired by prompt"
        )
    return value


def _truth_of(record: Mapping[str, Any], column: str) -> Any:
    value = rows.column_value(record, column)
    try:
        return rows.unstringify(value)[0]
    except ValueError:  # a numpy array shortened with "...": compared as written
        return value


def _digest(value: Any, role: str, number: int, path: Path) -> bytes:
    """A 16-byte digest of ``value`` as JSON, the same for values :func:`paired_columns` calls
    equal.

    Raises:
        CompareRefused: the value is nested deeper than the interpreter's recursion limit.
    """
    try:
        text = json.dumps(_canonical(value), sort_keys=True, default=repr)
    except RecursionError:
        raise CompareRefused(f"row {number} of {path}: the {role} is nested too deeply") from None
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _canonical(value: Any) -> Any:
    """``value`` with mapping keys as strings and ``null`` entries dropped, tuples as lists,
    integral floats as integers and integers beyond 64 bits in hex."""
    if isinstance(value, Mapping):
        return {str(key): _canonical(item) for key, item in value.items() if item is not None}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is int and value.bit_length() > 64:
        return f"int:{value:x}"  # JSON would write it in decimal, which Python limits
    return value


def _unpaired(
    waiting: tuple[dict[bytes, deque[_Row]], dict[bytes, deque[_Row]]],
    seen: tuple[Counter[bytes], Counter[bytes]],
    counts: Sequence[int],
    paths: tuple[Path, Path],
    prompt: str,
) -> str:
    """The refusal for rows left without a partner: the row counts if they differ, then the
    first such row (of A if any) and why."""
    side = 0 if waiting[0] else 1
    key, row = min(
        ((key, queue[0]) for key, queue in waiting[side].items()), key=lambda item: item[1].number
    )
    path, other = paths[side], paths[1 - side]
    shown = _shown(_prompt_at(path, row.number, prompt))
    if seen[1 - side][key]:
        why = (
            f"its prompt {shown} has {seen[side][key]} rows in {path} but "
            f"{seen[1 - side][key]} in {other}"
        )
    else:
        why = f"its prompt {shown} is not in {other}"
    totals = ""
    if counts[0] != counts[1]:
        totals = f"{paths[0]} has {counts[0]} rows but {paths[1]} has {counts[1]}; "
    return (
        f"{totals}row {row.number} of {path}: {why}; compare two outputs of the same prompts "
        f"(column {prompt!r})"
    )


def _prompt_at(path: Path, number: int, column: str) -> Any:
    """The prompt of row ``number`` of ``path`` (read again, for a message)."""
    record = next(itertools.islice(output_rows(path), number - 1, None))
    return rows.column_value(record, column)


def labelled(columns: Sequence[str], schema: Schema = ()) -> dict[str, ResultKey]:
    """The compared ``reward_<key>`` columns, each with its key's :class:`ResultKey` under
    ``schema`` (the scorer's): declared keys in the schema's order, then the others in
    ``columns`` order as ``diagnostic`` keys labelled by their names."""
    keys = [column[len(RESULT_PREFIX) :] for column in columns]
    return {RESULT_PREFIX + item.key: item for item in complete(schema, keys)}


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


def _value(record: Mapping[str, Any], name: str, column: Column, number: int, path: Path) -> float:
    """The value of result column ``name`` as a float (the column's largest magnitude kept);
    NaN, and the column's problem recorded (the first only), when it is not a finite number
    within a float's range."""
    value = record.get(name)
    if is_finite_number(value):
        number_value = float(cast(numbers.Real, value))
        if abs(number_value) > abs(column.largest):
            column.largest, column.largest_at = number_value, f"row {number} of {path}"
        return number_value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        problem = f"holds {_shown(value)}, not a number"
    elif isinstance(value, numbers.Integral):
        digits = math.floor(math.log10(abs(value))) + 1  # log10 takes any integer
        problem = f"holds an integer of about {digits} digits, beyond the range of a float"
    else:
        problem = f"holds {_shown(value)}, not a finite number"
    if column.problem is None:
        column.problem = f"row {number} of {path} {problem}"
    return math.nan


def _shown(value: Any) -> str:
    """``value`` as JSON (surrogates as escapes), at most 40 characters."""
    try:
        text = repr(value) if isinstance(value, float) else json.dumps(value, default=repr)
    except (ValueError, RecursionError):  # an integer too long for Python's decimal, deep nesting
        text = f"a {type(value).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."
