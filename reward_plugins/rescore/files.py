"""Files: which inputs a job reads, where each output goes, and writing them safely.

Every path check runs before any row is scored: inputs exist and have a known format, no output
is an input, output locations are directories that can be written, the summary path can be
written. Outputs are written to a temporary file beside the target and renamed into place when
complete (keeping an existing file's mode); temporary files are removed on errors, ``SIGINT``
and ``SIGTERM``, and a later run removes those that a killed run left behind.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import stat
import tempfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reward_plugins.errors import RewardPluginsError
from reward_plugins.rescore.formats import SUFFIXES, Format, format_named
from reward_plugins.rescore.formats.base import file_digest as file_digest
from reward_plugins.rescore.messages import plural

MANIFEST_NAME = ".reward-plugins-manifest.json"
"""The manifest of complete outputs, in an output directory (see :class:`Manifest`)."""

_TEMP_SUFFIX = ".reward-plugins.tmp"
_STEP_NAME = re.compile(rf"(\d+)({'|'.join(map(re.escape, SUFFIXES))})$")


class PathError(RewardPluginsError, ValueError):
    """A path that cannot be used as asked; the message names the user's path and the reason."""


def file_format(path: Path, role: str = "input") -> Format:
    """The format of ``path``, from its name (see :data:`formats.FORMATS`).

    Raises:
        PathError: another extension (the message names the ``role``, input or output).
    """
    found = format_named(path.name)
    if found is None:
        raise PathError(
            f"{role} {path}: unsupported format {''.join(path.suffixes) or '(no extension)'!r}; "
            f"use {', '.join(SUFFIXES)}"
        )
    return found


def _run_order(path: Path) -> tuple[int, int, str]:
    """verl's ``{step}.jsonl`` files by step number, then any other file by name."""
    match = _STEP_NAME.fullmatch(path.name)
    return (0, int(match.group(1)), path.name) if match else (1, 0, path.name)


def _data_files(directory: Path) -> list[Path]:
    return sorted(
        (p for p in directory.iterdir() if p.is_file() and p.name.endswith(SUFFIXES)),
        key=_run_order,
    )


def resolve_inputs(specs: Sequence[str | Path]) -> tuple[list[Path], bool]:
    """The input files of ``specs`` (files, directories, glob patterns), in order, and whether
    they form a run (a directory, a pattern or several files) rather than one file.

    A directory contributes its ``.jsonl``, ``.jsonl.gz`` and ``.parquet`` files, verl's
    ``{step}.jsonl`` by step number first, then the others by name; a pattern its matches in the
    same order.

    Raises:
        PathError: a spec that names nothing, a file of another format, or no input at all.
    """
    files: list[Path] = []
    run = len(specs) > 1
    for spec in specs:
        path = Path(spec)
        if path.is_dir():
            found = _data_files(path)
            if not found:
                raise PathError(f"input {path}: the directory has no {', '.join(SUFFIXES)} files")
            files += found
            run = True
        elif path.is_file():
            file_format(path)
            files.append(path)
        elif glob.has_magic(str(spec)):
            matches = [Path(m) for m in glob.glob(str(spec)) if Path(m).is_file()]
            found = sorted((m for m in matches if m.name.endswith(SUFFIXES)), key=_run_order)
            if not found:
                raise PathError(f"input {spec}: the pattern matches no {', '.join(SUFFIXES)} file")
            files += found
            run = True
        else:
            raise PathError(f"input {path}: no such file or directory")
    unique = list(dict.fromkeys(files))
    if not unique:
        raise PathError("no input given")
    return unique, run


def plan_outputs(
    inputs: Sequence[Path],
    run: bool,
    output: Path | None,
    merge: bool,
    others: Sequence[Path] = (),
) -> list[Path | None]:
    """The output file of each input (the same file for all with ``merge``), or ``None``.

    One input file goes to the file ``output``; a run goes to the directory ``output``, one
    file per input under the input's name (a new directory may not be named like a data file,
    ``rescored.jsonl``), or with ``merge`` to the one file ``output``.
    ``others`` are further files the caller writes (a summary): none may be an input or an
    output.

    Raises:
        PathError: an output that is an input, two inputs with the same name, a file where a
            directory is needed or the reverse.
    """
    if output is None:
        return [None] * len(inputs)
    targets: list[Path] = []
    if run and not merge:
        targets = _directory_targets(inputs, output)
    else:
        if output.is_dir():
            raise PathError(f"output {output}: is a directory, not a file")
        file_format(output, "output")
        targets = [output] * len(inputs)
    for target in targets:
        if target.is_dir():
            raise PathError(f"output {target}: is a directory, not a file")
    _check_distinct(inputs, targets, others)
    return [*targets]


def _directory_targets(inputs: Sequence[Path], output: Path) -> list[Path]:
    """The outputs of a run written to the directory ``output``: one per input, same name.

    Raises:
        PathError: ``output`` is a file or named like one, or two inputs have the same name.
    """
    files = plural(len(inputs), "file")
    if output.exists() and not output.is_dir():
        raise PathError(
            f"output {output}: not a directory (a run of {files} is written to "
            "a directory, one file per input; --merge writes one file)"
        )
    if not output.exists() and output.name.endswith(SUFFIXES):
        raise PathError(
            f"output {output}: names a file, but a run of {files} is written to "
            f"a directory, one file per input: give --merge to write them all to {output}, "
            "or a directory name"
        )
    names = [path.name for path in inputs]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise PathError(
            f"output {output}: two inputs are named {twice!r}; a directory output mirrors "
            "the input names (use --merge)"
        )
    return [output / name for name in names]


def _check_distinct(
    inputs: Sequence[Path], targets: Sequence[Path], others: Sequence[Path]
) -> None:
    """Refuse a file written twice (an output that is also another file the job writes) or an
    input that is written.

    Raises:
        PathError: naming both roles of the file.
    """
    written = {t.resolve(): f"output {t}" for t in targets}
    for other in others:
        if other.resolve() in written:
            raise PathError(f"{other}: is also the {written[other.resolve()]}")
        written[other.resolve()] = str(other)
    for source in inputs:
        if source.resolve() in written:
            raise PathError(
                f"{written[source.resolve()]}: is the input {source}; write it elsewhere"
            )


def check_writable_directory(directory: Path, role: str) -> None:
    """Create ``directory`` if needed and prove a file can be created in it.

    Raises:
        PathError: a parent is a file, or the directory cannot be created or written.
    """
    for parent in (directory, *directory.parents):
        if parent.exists():
            if not parent.is_dir():
                raise PathError(f"{role}: {parent} is a file, not a directory")
            break
    pattern = (directory, _temporary_prefix(_PROBE_NAME))
    _writing.add(pattern)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        descriptor, probe = tempfile.mkstemp(prefix=pattern[1], suffix=_TEMP_SUFFIX, dir=directory)
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        raise PathError(f"{role}: cannot write in {directory}: {error.strerror or error}") from None
    except BaseException:  # interrupted: leave no probe behind
        _remove_matching(*pattern)
        raise
    finally:
        _writing.discard(pattern)


def check_summary_path(path: Path) -> None:
    """The summary file's directory must exist; the path must not be a directory.

    Raises:
        PathError: otherwise.
    """
    if path.is_dir():
        raise PathError(f"--summary-json {path}: is a directory")
    if not path.parent.is_dir():
        raise PathError(f"--summary-json {path}: no such directory {path.parent}")
    check_writable_directory(path.parent, f"--summary-json {path}")


# ------------------------------------------------------------------------- atomic writing


_writing: set[tuple[Path, str]] = set()
"""``(directory, name prefix)`` of the temporary files being written, registered before each
is created, so that a signal arriving at any moment leaves none behind."""


_PROBE_NAME = "reward-plugins-probe"
"""The name whose temporary files prove a directory writable (:func:`check_writable_directory`)."""


def _temporary_prefix(name: str) -> str:
    """The start of the names of this process's temporary files for the file ``name``: every
    temporary file is ``.{name}.{pid}.{random}`` + :data:`_TEMP_SUFFIX`."""
    return f".{name}.{os.getpid()}."


def remove_stale_temporaries(target: Path) -> None:
    """Remove the temporary files that a killed run (``SIGKILL``) left beside ``target``: those
    of ``target`` and those that proved its directory writable."""
    for name in (target.name, _PROBE_NAME):
        for leftover in target.parent.glob(f".{glob.escape(name)}.*{_TEMP_SUFFIX}"):
            pid = leftover.name[len(name) + 2 :].split(".", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                leftover.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def atomic_output(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target``, renamed onto it when the block completes.

    The file gets ``target``'s mode if ``target`` exists, else the mode the umask gives a new
    file. On any exception (``KeyboardInterrupt`` included) the temporary file is removed and
    ``target`` is left as it was; :func:`remove_temporaries` removes it from a signal handler.

    Raises:
        PathError: the file cannot be written or renamed (disk full, file too large, ...).
    """
    pattern = (target.parent, _temporary_prefix(target.name))
    _writing.add(pattern)
    temporary = None
    try:
        descriptor, name = tempfile.mkstemp(
            prefix=pattern[1], suffix=_TEMP_SUFFIX, dir=target.parent
        )
        os.close(descriptor)
        temporary = Path(name)
        yield temporary
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as error:
        raise PathError(f"output {target}: cannot write: {error.strerror or error}") from None
    finally:
        if temporary is None:  # interrupted between creating the file and learning its name
            _remove_matching(*pattern)
        else:
            temporary.unlink(missing_ok=True)
        _writing.discard(pattern)


def remove_temporaries() -> None:
    """Remove every temporary file this process is writing (for a signal handler)."""
    for directory, prefix in list(_writing):
        _remove_matching(directory, prefix)


def _remove_matching(directory: Path, prefix: str) -> None:
    for leftover in directory.glob(f"{glob.escape(prefix)}*{_TEMP_SUFFIX}"):
        leftover.unlink(missing_ok=True)


# ------------------------------------------------------------------------------ manifest


def file_crc32(path: Path) -> str:
    """The CRC-32 of a file's bytes, 8 hex digits."""
    crc = 0
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"


@dataclass
class Manifest:
    """The complete outputs of a directory output: for each output name, the input it came from
    and that input's fingerprint (size and hash), the output's own size and CRC-32 when it was
    renamed into place, under the job ``settings`` that produced them.

    ``--resume`` skips an output that is listed, still has its listed size and CRC-32, and whose
    input still has the listed fingerprint, when the settings are the same.
    """

    directory: Path
    settings: dict[str, Any]
    files: dict[str, dict[str, Any]]

    @classmethod
    def load(cls, directory: Path, settings: Mapping[str, Any]) -> Manifest:
        """The manifest in ``directory`` if it was written under the same settings, else an
        empty one."""
        try:
            data = json.loads((directory / MANIFEST_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        files = data.get("files") if data.get("settings") == dict(settings) else None
        return cls(directory, dict(settings), files if isinstance(files, dict) else {})

    def listed(self, source: Path, target: Path) -> dict[str, Any] | None:
        """The entry of ``target`` if it exists and is listed as made from ``source`` with the
        size ``source`` has now (the caller compares the hash)."""
        entry = self.files.get(target.name)
        if entry is None or not target.is_file() or entry.get("input") != str(source.resolve()):
            return None
        return entry if entry.get("size") == source.stat().st_size else None

    @staticmethod
    def intact(target: Path, entry: Mapping[str, Any]) -> bool:
        """Whether ``target`` still has the size and CRC-32 its ``entry`` lists."""
        return entry.get("output_size") == target.stat().st_size and entry.get(
            "output_crc32"
        ) == file_crc32(target)

    def add(self, source: Path, target: Path, entry: Mapping[str, Any]) -> None:
        """List ``target`` (renamed into place) as complete with ``entry`` (its input's
        fingerprint and counts) and its own size and CRC-32, and write the manifest
        (atomically)."""
        self.files[target.name] = {
            "input": str(source.resolve()),
            "size": source.stat().st_size,
            **entry,
            "output_size": target.stat().st_size,
            "output_crc32": file_crc32(target),
        }
        text = json.dumps({"settings": self.settings, "files": self.files}, indent=1)
        with atomic_output(self.directory / MANIFEST_NAME) as temporary:
            temporary.write_text(text + "\n", encoding="utf-8")
