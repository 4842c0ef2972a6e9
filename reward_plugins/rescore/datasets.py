"""Each dump row's data source, recovered from the verl datasets of the run (``--dataset``).

verl's rollout dumps (``_log_rollout_data`` and ``_validate`` in
``verl/trainer/ppo/ray_trainer.py``, written by ``_write_generations``) carry no
``data_source``: each row holds ``input``, the prompt's token ids decoded with
``tokenizer.batch_decode(..., skip_special_tokens=True)``, ``output``, ``gts``, ``score``,
``step``. Those ids are the row's ``prompt`` messages of the dataset
(``verl/utils/dataset/rl_dataset.py``, ``raw_prompt``) rendered by the agent loop with the chat
template (``build_initial_tokens`` in ``verl/utils/tokenizer/continuous_token.py``:
``add_generation_prompt=True``), left-truncated to ``rollout.prompt_length``
(``_cap_text_prompt_length`` in ``verl/experimental/agent_loop/agent_loop.py``). So a dump's
``input`` is the template's text, every message's content, and the generation prompt's header,
less the template's special tokens. A dataset file is read in any input format of the engine
(verl reads ``data.train_files`` as parquet or JSON lines).

**The join rule.** A row's key is its ``input`` with every whitespace character removed; a
dataset row's key is the content of its prompt's *last* message, whitespace removed too. A dump
row joins the dataset rows whose key ends within the last :data:`SUFFIX_CHARS` characters of its
own key (the generation prompt a template writes after the last message, e.g. Qwen's
``assistant``); of several such keys, the longest wins. Removing whitespace makes the join
indifferent to what templates and tokenizers do to spaces (``| trim``, ``clean_up_tokenization_
spaces``, newlines between turns). A dataset key is found through a dictionary of its last
:data:`TAIL_CHARS` characters and checked by an 8-byte BLAKE2 digest, so a row costs at most
``SUFFIX_CHARS + 1`` look-ups: linear time, whatever the dataset's size.

A dump row is then scored under the data source of the rows it joined; it is a bad row
(:class:`~reward_plugins.runtime.rows.RowFailure`, named by file and line, counted in the
summary's skipped rows and written to the failures file) when

- its ``input`` is missing or not a string (``missing prompt``),
- it joins no dataset row (``prompt not in dataset``),
- it joins rows of several data sources (``ambiguous prompt``): two datasets holding one question
  under two sources, or prompts that differ only in whitespace or in messages before the last,
- its ground truth differs from that of every row it joined (``ground truth differs from
  dataset``): ground truths are compared as JSON with keys sorted and null fields left out, after
  the dump's numpy-stringified lists are read back (:func:`~reward_plugins.runtime.rows.
  ground_truth`). A dataset without ``reward_model.ground_truth`` is not checked.

**Limits.** The join fails (the row is named, never relabelled) when the prompt's last message
was cut (``data.truncation: right`` or ``middle``, or a last message longer than
``rollout.prompt_length``: left truncation keeps the end), when the template writes more than
:data:`SUFFIX_CHARS` non-space characters after the last message, when the tokenizer's decoding
changes characters other than spaces (Unicode normalization, byte-fallback replacement
characters), and for multimodal prompts whose placeholders the processor replaced.

The datasets are read once in the parent, only the ``data_source``, ``prompt`` and
``reward_model.ground_truth`` columns, a batch at a time; the resulting :class:`PromptIndex`
(digests and tails, not the prompts' text) is what the workers receive.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from reward_plugins.errors import RewardPluginsError
from reward_plugins.rescore import files
from reward_plugins.rescore.errors import RescoreError
from reward_plugins.rescore.formats import SUFFIXES, format_named, rows_of
from reward_plugins.rescore.formats.parquet import parquet_module
from reward_plugins.runtime import rows

PROMPT_COLUMN = "input"
"""The dump's column of decoded prompts (verl's ``_write_generations``)."""

SUFFIX_CHARS = 64
"""Non-space characters a chat template may write after the last message (its generation
prompt: ``assistant`` for Qwen's ChatML, ``assistant`` for Llama 3, ``<think>`` blocks)."""

TAIL_CHARS = 32
"""A dataset key is looked up by its last this many characters."""

MAX_DATASET_BYTES = 2 << 30
"""A dataset file larger than this (2 GiB) is refused."""

MAX_DATASET_ROWS = 2_000_000
"""Datasets holding more rows than this in all are refused (the index holds one entry per
distinct prompt: about 700 bytes in memory, 80 pickled for the workers)."""

_BATCH_ROWS = 4096
_COLUMNS = ("data_source", "prompt", "reward_model.ground_truth")


class DatasetError(RewardPluginsError, ValueError):
    """A ``--dataset`` file that cannot be read or joined on: names the path, row and field."""


class Prompt(NamedTuple):
    """The dataset rows of one distinct key: its length, digest, data sources with the first
    row of each, ``(source, file, row)`` (indices into :attr:`PromptIndex.sources` and
    :attr:`PromptIndex.files`), and their ground truths' digests."""

    length: int
    digest: bytes
    sources: tuple[tuple[int, int, int], ...]
    truths: frozenset[bytes] | None  # None: no ground truth in the dataset


@dataclass(frozen=True)
class PromptIndex:
    """The datasets as the workers need them: ``tails`` maps the last :data:`TAIL_CHARS`
    characters of a key (the whole key when shorter) to its prompts; ``widths`` are the tail
    lengths present, longest first; ``total_rows`` the rows read."""

    files: tuple[str, ...]
    sources: tuple[str, ...]
    tails: Mapping[str, tuple[Prompt, ...]]
    widths: tuple[int, ...]
    total_rows: int

    def data_source(self, record: Mapping[str, Any], truth: Any) -> str | rows.RowFailure:
        """The data source of the dump row ``record``, whose ground truth (as read back by
        :func:`rows.ground_truth`) is ``truth``; or why it has none (see the module)."""
        text = record.get(PROMPT_COLUMN)
        if not isinstance(text, str):
            what = "missing" if text is None else f"a {type(text).__name__}, not a string"
            return rows.RowFailure(
                "missing prompt",
                f"prompt (column {PROMPT_COLUMN!r}) is {what}: --dataset joins on it",
            )
        matched = self._matches(key_of(text))
        if not matched:
            return rows.RowFailure(
                "prompt not in dataset",
                f"prompt (column {PROMPT_COLUMN!r}) matches no prompt of --dataset: {_shown(text)}",
            )
        firsts: dict[int, tuple[int, int]] = {}  # data source -> its first row
        for prompt in matched:
            for source, file, number in prompt.sources:
                firsts.setdefault(source, (file, number))
        if len(firsts) > 1:
            names = ", ".join(
                f"{self.sources[source]} ({self._where(*firsts[source])})"
                for source in sorted(firsts)
            )
            return rows.RowFailure(
                "ambiguous prompt",
                f"prompt (column {PROMPT_COLUMN!r}) matches --dataset rows of several data "
                f"sources: {names}: {_shown(text)}",
            )
        (source, where), *_ = firsts.items()
        checked = [prompt.truths for prompt in matched if prompt.truths is not None]
        if checked and truth_digest(truth) not in frozenset().union(*checked):
            return rows.RowFailure(
                "ground truth differs from dataset",
                f"ground truth {_shown(truth)} differs from that of its prompt in --dataset "
                f"({self._where(*where)}, data source {self.sources[source]})",
            )
        return self.sources[source]

    def _matches(self, key: str) -> list[Prompt]:
        """The longest dataset prompts whose key ends within the last :data:`SUFFIX_CHARS`
        characters of ``key``."""
        best: list[Prompt] = []
        longest = 0
        size = len(key)
        tails, widths = self.tails, self.widths
        for end in range(size, max(size - SUFFIX_CHARS, 0) - 1, -1):
            for width in widths:
                if width > end:
                    continue
                for prompt in tails.get(key[end - width : end], ()):
                    if prompt.length > end or prompt.length < longest:
                        continue
                    if _digest(key[end - prompt.length : end]) != prompt.digest:
                        continue
                    if prompt.length > longest:
                        longest, best = prompt.length, [prompt]
                    elif prompt not in best:
                        best.append(prompt)
        return best

    def _where(self, file: int, number: int) -> str:
        path = Path(self.files[file])
        return f"{path} {files.file_format(path).unit} {number}"


def key_of(text: str) -> str:
    """``text`` without whitespace: the form both sides of the join are compared in."""
    return "".join(text.split())


def _digest(key: str) -> bytes:
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def truth_digest(value: Any) -> bytes:
    """A digest of a ground truth, equal for equal JSON values (keys in any order, tuples as
    lists, null mapping fields left out: parquet gives every row every field of a struct)."""
    plain = _canonical(value)
    try:
        canonical = orjson.dumps(plain, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # a lone surrogate, an integer beyond 64 bits, another type
        canonical = json.dumps(plain, sort_keys=True, default=repr).encode()
    return hashlib.blake2b(canonical, digest_size=8).digest()


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    if hasattr(value, "tolist"):  # a numpy array or number
        return _canonical(value.tolist())
    return value


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text[:80] + "...") if len(text) > 80 else repr(text)


# -------------------------------------------------------------------------------- reading


class _Builder:
    def __init__(self) -> None:
        self.sources: dict[str, int] = {}
        self.prompts: dict[bytes, tuple[int, dict[int, tuple[int, int]], set[bytes] | None]] = {}
        self.tails: dict[bytes, str] = {}
        self.rows = 0

    def add(self, where: str, first: tuple[int, int], row: Mapping[str, Any]) -> None:
        source = row.get("data_source")
        if not isinstance(source, str) or not source:
            raise DatasetError(
                f"{where}: data_source must be a non-empty string, got {type(source).__name__}"
            )
        key = key_of(_last_content(where, row.get("prompt")))
        if not key:
            raise DatasetError(f"{where}: prompt: the last message's content is blank")
        digest = _digest(key)
        truth = row.get("reward_model")
        truth = truth.get("ground_truth") if isinstance(truth, Mapping) else None
        index = self.sources.setdefault(source, len(self.sources))
        entry = self.prompts.get(digest)
        if entry is None:
            truths = None if truth is None else {truth_digest(truth)}
            self.prompts[digest] = (len(key), {index: first}, truths)
            self.tails[digest] = key[-TAIL_CHARS:]
        else:
            entry[1].setdefault(index, first)
            if truth is not None and entry[2] is not None:
                entry[2].add(truth_digest(truth))

    def index(self, names: Sequence[str]) -> PromptIndex:
        tails: dict[str, list[Prompt]] = {}
        for digest, (length, sources, truths) in self.prompts.items():
            frozen = None if truths is None else frozenset(truths)
            firsts = tuple((source, *first) for source, first in sorted(sources.items()))
            prompt = Prompt(length, digest, firsts, frozen)
            tails.setdefault(self.tails[digest], []).append(prompt)
        widths = sorted({len(tail) for tail in tails}, reverse=True)
        return PromptIndex(
            tuple(names),
            tuple(self.sources),
            {tail: tuple(prompts) for tail, prompts in tails.items()},
            tuple(widths),
            self.rows,
        )


def _last_content(where: str, prompt: Any) -> str:
    if not isinstance(prompt, list) or not prompt:
        what = "an empty list" if prompt == [] else type(prompt).__name__
        raise DatasetError(f"{where}: prompt must be a list of chat messages, got {what}")
    message = prompt[-1]
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, str):
        raise DatasetError(
            f"{where}: prompt: the last message's content must be a string, got "
            f"{type(content).__name__}"
        )
    return content


def check(paths: Sequence[Path]) -> None:
    """Check, before any work, that each ``--dataset`` file exists, is of a dataset format and
    holds at most :data:`MAX_DATASET_BYTES`.

    Raises:
        DatasetError: naming the first path that is not.
    """
    for path in paths:
        if format_named(path.name) is None:
            raise DatasetError(f"--dataset {path}: not a verl dataset ({', '.join(SUFFIXES)})")
        try:
            size = path.stat().st_size
            if not path.is_file():
                raise DatasetError(f"--dataset {path}: not a file")
        except OSError as error:
            raise DatasetError(f"--dataset {path}: cannot read: {error.strerror}") from None
        if size > MAX_DATASET_BYTES:
            raise DatasetError(
                f"--dataset {path}: {size:,} bytes, over the {MAX_DATASET_BYTES:,}-byte cap"
            )


def load(paths: Sequence[Path]) -> PromptIndex:
    """Read the ``--dataset`` files into a :class:`PromptIndex`.

    Raises:
        DatasetError: a file that is missing, of another format, over :data:`MAX_DATASET_BYTES`,
            unreadable, without a ``data_source`` or ``prompt`` column, with a bad row; or
            datasets over :data:`MAX_DATASET_ROWS` rows in all.
    """
    check(paths)
    builder = _Builder()
    for number, path in enumerate(paths):
        fmt = files.file_format(path)
        reader = _jsonl_rows if fmt.lines else _parquet_rows
        for row_number, row in reader(path, builder.rows):
            builder.rows += 1
            if builder.rows > MAX_DATASET_ROWS:
                raise DatasetError(
                    f"--dataset {path}: the datasets hold over {MAX_DATASET_ROWS:,} rows, the cap"
                )
            where = f"--dataset {path}: {fmt.unit} {row_number}"
            builder.add(where, (number, row_number), row)
    return builder.index([str(path) for path in paths])


def _parquet_rows(path: Path, before: int) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        pyarrow = parquet_module()
    except RescoreError as error:
        raise DatasetError(f"--dataset {path}: {error}") from None
    try:
        reader = pyarrow.parquet.ParquetFile(path)
        total = reader.metadata.num_rows
        if before + total > MAX_DATASET_ROWS:
            raise DatasetError(
                f"--dataset {path}: {total:,} rows; the datasets hold over {MAX_DATASET_ROWS:,} "
                "rows, the cap"
            )
        columns = _parquet_columns(path, reader.schema_arrow, pyarrow)
        number = 1
        for batch in reader.iter_batches(batch_size=_BATCH_ROWS, columns=columns):
            for row in batch.to_pylist():
                yield number, row
                number += 1
    except pyarrow.ArrowException as error:
        raise DatasetError(f"--dataset {path}: not a readable parquet file: {error}") from None
    except OSError as error:
        raise DatasetError(f"--dataset {path}: cannot read: {error}") from None


def _parquet_columns(path: Path, schema: Any, pyarrow: Any) -> list[str]:
    """The columns read: :data:`_COLUMNS`, less the ground truth when ``reward_model`` is not a
    struct holding one.

    Raises:
        DatasetError: no ``data_source`` or ``prompt`` column.
    """
    names = schema.names
    for needed in ("data_source", "prompt"):
        if needed not in names:
            raise DatasetError(
                f"--dataset {path}: no {needed!r} column (verl's datasets have data_source, "
                f"prompt, reward_model); columns: {', '.join(names)}"
            )
    columns = list(_COLUMNS)
    model = schema.field("reward_model").type if "reward_model" in names else None
    if model is None or not pyarrow.types.is_struct(model):
        columns.pop()  # no ground truth to check
    elif model.get_field_index("ground_truth") < 0:
        columns.pop()
    return columns


def _jsonl_rows(path: Path, before: int) -> Iterator[tuple[int, dict[str, Any]]]:
    del before  # counted as read
    try:
        for number, row in rows_of(path, files.file_format(path)):
            if isinstance(row, rows.RowFailure):
                raise DatasetError(f"--dataset {path}: line {number}: {row.detail}")
            yield number, row
    except RescoreError as error:
        raise DatasetError(f"--dataset {path}: cannot read: {error}") from None
