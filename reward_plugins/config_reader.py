"""The one reader of the YAML and JSON the package is given: recipes, tool configs, the verl
configs of ``reward-plugins check`` and ``--set`` values.

Every input is bounded before it is built into Python values (:class:`ReadLimits`):

- a file must be a regular file (not a directory, FIFO, socket or device) of at most
  ``max_bytes`` bytes (checked on ``stat`` and again while reading, since a file can grow), in
  UTF-8;
- YAML is first scanned as PyYAML's event stream (``yaml.parse``: iterative, no recursion): a
  collection nested deeper than ``max_depth``, a string longer than ``max_string`` characters or
  more than ``max_nodes`` nodes once every alias is expanded (an "alias bomb": a few hundred
  bytes of anchors that expand to billions of nodes), or an alias to a collection that contains
  it (a recursive anchor), is refused there, in milliseconds and without building anything;
- only then is the text built with PyYAML's ``SafeLoader`` (no Python objects from tags).

Numbers come back as they are written: an integer of thousands of digits stays an ``int`` (above
Python's 4300-digit string conversion limit it is read in chunks), ``.nan`` and ``.inf`` stay
floats; the option checks of :mod:`reward_plugins.options` judge them. Every failure raises
:class:`ConfigFileError`, naming the source, the limit and the line and column when known.

YAML 1.1 as PyYAML reads it (pyyaml.org/wiki/PyYAMLDocumentation); the event scan follows the
event classes of PyYAML's ``yaml/events.py`` (github.com/yaml/pyyaml).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass
from typing import Any

import yaml

from reward_plugins.errors import ConfigFileError

__all__ = [
    "DEFAULT_LIMITS",
    "ConfigFileError",
    "NotJSONError",
    "ReadLimits",
    "check_config_text",
    "describe_source",
    "file_source",
    "parse_config_text",
    "parse_json_text",
    "read_config_file",
    "read_config_text",
]

MiB = 1024 * 1024
KiB = 1024


class NotJSONError(ConfigFileError):
    """A text :func:`parse_json_text` refuses because it is not JSON at all (rather than over a
    limit): ``--set`` then keeps it as a string."""


@dataclass(frozen=True)
class ReadLimits:
    """The bounds of one read.

    ``max_bytes``: the size of a file or text, in bytes of UTF-8 (1 MiB: a recipe or verl config
    is a few kilobytes). ``max_nodes``: scalars and collections once every alias is expanded
    (100,000). ``max_depth``: collections nested in collections, aliases expanded (64).
    ``max_string``: characters of one scalar, keys included (64 KiB).
    """

    max_bytes: int = MiB
    max_nodes: int = 100_000
    max_depth: int = 64
    max_string: int = 64 * KiB


DEFAULT_LIMITS = ReadLimits()
"""The limits every reader of the package uses unless told otherwise."""

_NAME_SHOWN = 120
"""Characters of an over-long file name shown in a message."""
_INT_CHUNK = 4000
"""Digits converted at once: below CPython's default ``sys.get_int_max_str_digits()`` (4300)."""
_DECIMAL = re.compile(r"[-+]?[0-9][0-9_]*\Z")


def describe_source(name: str) -> str:
    """``name`` made fit for a one-line message: non-printable characters escaped, and cut to
    its first and last characters when it is very long."""
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in name)
    if len(shown) > _NAME_SHOWN:
        half = _NAME_SHOWN // 2
        shown = f"{shown[:half]}...{shown[-half:]} ({len(name)} characters)"
    return shown


def read_config_file(
    path: str | os.PathLike[str], *, what: str, limits: ReadLimits = DEFAULT_LIMITS
) -> Any:
    """The YAML (or JSON) value of the file at ``path``; ``what`` names it in messages
    (``"recipe"``, ``"tool_config"``, ``"verl config"``).

    Raises:
        ConfigFileError: no such file; a name too long; not a regular file (a directory, FIFO,
            socket or device, refused before it is opened); over ``limits.max_bytes``; not
            UTF-8; or a text :func:`parse_config_text` refuses.
    """
    source = file_source(path, what)
    text = read_config_text(path, what=what, limits=limits)
    return parse_config_text(text, source=source, limits=limits)


def file_source(path: str | os.PathLike[str], what: str) -> str:
    """How messages name a file: ``what`` and the path, fit for one line."""
    return f"{what} {describe_source(os.fsdecode(path))}"


def read_config_text(
    path: str | os.PathLike[str], *, what: str, limits: ReadLimits = DEFAULT_LIMITS
) -> str:
    """The text of the file at ``path``, read as :func:`read_config_file` reads it, not parsed
    (for a reader with its own YAML dialect, after :func:`parse_config_text` has bounded it).

    Raises:
        ConfigFileError: the file reasons of :func:`read_config_file`.
    """
    source = file_source(path, what)
    try:
        status = os.stat(path)
        _check_regular(status.st_mode, source)  # before opening: opening a FIFO has effects
        if status.st_size > limits.max_bytes:
            raise ConfigFileError(
                f"{source}: larger than the limit of {limits.max_bytes} bytes "
                f"({status.st_size} bytes)"
            )
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise ConfigFileError(f"{source}: {_os_reason(error)}") from None
    except ValueError as error:
        if isinstance(error, ConfigFileError):
            raise
        raise ConfigFileError(f"{source}: not a usable path: {error}") from None  # a NUL byte
    with os.fdopen(descriptor, "rb") as file:
        try:
            _check_regular(os.fstat(file.fileno()).st_mode, source)  # replaced since the stat
            data = file.read(limits.max_bytes + 1)
        except OSError as error:
            raise ConfigFileError(f"{source}: {_os_reason(error)}") from None
    if len(data) > limits.max_bytes:
        raise ConfigFileError(f"{source}: larger than the limit of {limits.max_bytes} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigFileError(
            f"{source}: line {line}: not UTF-8 (byte 0x{data[error.start]:02x} at offset "
            f"{error.start})"
        ) from None


def _check_regular(mode: int, source: str) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        kind = "a directory"
    elif stat.S_ISFIFO(mode):
        kind = "a FIFO (named pipe)"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "a device"
    elif stat.S_ISSOCK(mode):
        kind = "a socket"
    else:
        kind = "a special file"
    raise ConfigFileError(f"{source}: is {kind}, not a regular file")


def _os_reason(error: OSError) -> str:
    if error.errno == errno.ENOENT:
        return "no such file"
    if error.errno == errno.ENAMETOOLONG:
        return "the file name is too long for the file system"
    return error.strerror or type(error).__name__


def parse_config_text(text: str, *, source: str, limits: ReadLimits = DEFAULT_LIMITS) -> Any:
    """The value of one YAML document (JSON is YAML too); ``source`` names it in messages.

    Raises:
        ConfigFileError: ``text`` is not a str, is over ``limits.max_bytes`` bytes of UTF-8, is
            not YAML (the message has PyYAML's line and column), holds more than one document,
            or exceeds a limit of ``limits`` (see the module docstring).
    """
    check_config_text(text, source=source, limits=limits)
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader: no Python objects
    except yaml.MarkedYAMLError as error:
        raise ConfigFileError(f"{source}: {_yaml_reason(error)}") from None
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as error:
        # e.g. a timestamp of an impossible date, which PyYAML passes to datetime unchecked
        raise ConfigFileError(f"{source}: cannot be read: {' '.join(str(error).split())}") from None


def check_config_text(text: str, *, source: str, limits: ReadLimits = DEFAULT_LIMITS) -> None:
    """Refuse a YAML text over ``limits`` without building it: for a reader with its own YAML
    dialect (OmegaConf's), which may then build it safely.

    Raises:
        ConfigFileError: the reasons of :func:`parse_config_text` that its event stream shows
            (size, syntax, depth, nodes, string length, aliases), not those of building values.
    """
    _check_text(text, source, limits)
    _scan_events(text, source, limits)


def parse_json_text(text: str, *, source: str, limits: ReadLimits = DEFAULT_LIMITS) -> Any:
    """The value of a JSON text (strict JSON, plus ``NaN`` and ``Infinity`` as Python's
    :mod:`json` reads them); ``source`` names it in messages.

    Raises:
        NotJSONError: not JSON (a :class:`ConfigFileError`; the message has the line and
            column).
        ConfigFileError: over a limit of ``limits``: bytes, nesting depth (checked before
            parsing), nodes, string length.
    """
    _check_text(text, source, limits)
    _check_json_depth(text, source, limits.max_depth)
    try:
        value = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as error:
        raise NotJSONError(
            f"{source}: line {error.lineno}, column {error.colno}: not JSON: {error.msg}"
        ) from None
    _check_json_value(value, source, limits)
    return value


def _check_text(text: Any, source: str, limits: ReadLimits) -> None:
    if not isinstance(text, str):
        raise ConfigFileError(f"{source}: expected the text as a str, got {type(text).__name__}")
    # A UTF-8 character takes at most 4 bytes: only a text near the limit is encoded to know.
    if len(text) * 4 > limits.max_bytes and len(text.encode("utf-8", "surrogatepass")) > (
        limits.max_bytes
    ):
        raise ConfigFileError(f"{source}: larger than the limit of {limits.max_bytes} bytes")


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _yaml_reason(error: yaml.MarkedYAMLError) -> str:
    mark = error.problem_mark or error.context_mark
    problem = " ".join(f"{error.context or ''} {error.problem or ''}".split()) or "invalid"
    return f"{_where(mark)}: not valid YAML: {problem}" if mark else f"not valid YAML: {problem}"


@dataclass
class _Open:
    """A collection whose end event has not come yet."""

    anchor: str | None
    nodes: int = 1
    height: int = 1
    """Levels of collections at and below it (aliases expanded)."""


def _scan_events(text: str, source: str, limits: ReadLimits) -> None:
    """Refuse ``text`` when its expanded tree exceeds ``limits``, from the event stream alone.

    Each anchored node's expanded size and height are recorded when its end event comes; an
    alias adds them where it stands, so the cost of the scan is that of the text, however
    large the expansion. An alias to a collection still open is a recursive anchor.
    """
    scan = _TreeScan(source, limits)
    try:
        for event in yaml.parse(text, Loader=_BoundedLoader):
            scan.add(event)
    except yaml.MarkedYAMLError as error:
        if "maximum nesting depth" in str(error.problem):  # libyaml's own cap, at 1000 levels
            raise ConfigFileError(
                f"{source}: {_where(error.problem_mark)}: nested deeper than the limit of "
                f"{limits.max_depth} levels"
            ) from None
        raise ConfigFileError(f"{source}: {_yaml_reason(error)}") from None
    except yaml.YAMLError as error:  # a reader error: a character YAML does not allow
        raise ConfigFileError(f"{source}: not valid YAML: {' '.join(str(error).split())}") from None


class _TreeScan:
    """The state of :func:`_scan_events`: the collections open (the stream first), the expanded
    ``(nodes, height)`` of each anchor closed so far, and the nodes counted in all."""

    def __init__(self, source: str, limits: ReadLimits) -> None:
        self.source, self.limits = source, limits
        self.stack: list[_Open] = [_Open(None, nodes=0, height=0)]  # the stream
        self.sizes: dict[str, tuple[int, int]] = {}
        self.total = 0

    def add(self, event: yaml.Event) -> None:
        """Count one event; a node's size and height go to the collection holding it.

        Raises:
            ConfigFileError: a limit exceeded, or an alias that is recursive or refers to no
                anchor.
        """
        if isinstance(event, yaml.CollectionStartEvent):
            self._open(event)
            return
        if isinstance(event, yaml.AliasEvent):
            nodes, height = self._alias(event)
        elif isinstance(event, yaml.ScalarEvent):
            nodes, height = self._scalar(event)
        elif isinstance(event, yaml.CollectionEndEvent):
            closed = self.stack.pop()
            nodes, height = closed.nodes, closed.height
            if closed.anchor is not None:
                self.sizes[closed.anchor] = (nodes, height)
        else:  # stream and document events
            return
        parent = self.stack[-1]
        parent.nodes += nodes
        parent.height = max(parent.height, height + 1)
        if self.total > self.limits.max_nodes:
            raise _too_many_nodes(self.source, event, self.limits)
        if len(self.stack) - 1 + height > self.limits.max_depth:
            raise ConfigFileError(
                f"{self.source}: {_where(event.start_mark)}: nested deeper than the limit of "
                f"{self.limits.max_depth} levels once aliases are expanded"
            )

    def _alias(self, event: yaml.AliasEvent) -> tuple[int, int]:
        if any(open_.anchor == event.anchor for open_ in self.stack):
            raise ConfigFileError(
                f"{self.source}: {_where(event.start_mark)}: the alias *{event.anchor} "
                "refers to a collection that contains it (a recursive anchor)"
            )
        if event.anchor not in self.sizes:
            raise ConfigFileError(
                f"{self.source}: {_where(event.start_mark)}: the alias *{event.anchor} "
                "refers to no anchor before it"
            )
        nodes, height = self.sizes[event.anchor]
        self.total += nodes
        return nodes, height

    def _scalar(self, event: yaml.ScalarEvent) -> tuple[int, int]:
        if len(event.value) > self.limits.max_string:
            raise ConfigFileError(
                f"{self.source}: {_where(event.start_mark)}: a string of {len(event.value)} "
                f"characters, over the limit of {self.limits.max_string}"
            )
        self.total += 1
        if event.anchor is not None:
            self.sizes[event.anchor] = (1, 0)
        return 1, 0

    def _open(self, event: yaml.CollectionStartEvent) -> None:
        self.stack.append(_Open(event.anchor))
        self.total += 1
        if self.total > self.limits.max_nodes:
            raise _too_many_nodes(self.source, event, self.limits)
        if len(self.stack) - 1 > self.limits.max_depth:
            raise ConfigFileError(
                f"{self.source}: {_where(event.start_mark)}: nested deeper than the limit "
                f"of {self.limits.max_depth} levels"
            )


def _too_many_nodes(source: str, event: yaml.Event, limits: ReadLimits) -> ConfigFileError:
    return ConfigFileError(
        f"{source}: {_where(event.start_mark)}: more than the limit of {limits.max_nodes} "
        "nodes once aliases are expanded"
    )


def _parse_int(digits: str) -> int:
    """``int(digits)`` of a decimal integer of any length (Python refuses over 4300 digits)."""
    sign = -1 if digits.startswith("-") else 1
    digits = digits.lstrip("+-")
    if len(digits) <= _INT_CHUNK:
        return sign * int(digits)
    value = 0
    for start in range(0, len(digits), _INT_CHUNK):
        chunk = digits[start : start + _INT_CHUNK]
        value = value * 10 ** len(chunk) + int(chunk)
    return sign * value


_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser where PyYAML was built with it (the same events, about ten times faster)."""


class _BoundedLoader(_SafeLoader):
    """PyYAML's ``SafeLoader`` that reads decimal integers of any length."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        value = str(self.construct_scalar(node))
        if _DECIMAL.match(value) and len(value) > _INT_CHUNK:
            return _parse_int(value.replace("_", ""))
        return super().construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def _check_json_depth(text: str, source: str, max_depth: int) -> None:
    """Refuse JSON nested deeper than ``max_depth`` before :mod:`json` recurses into it."""
    depth = 0
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                line = text.count("\n", 0, index) + 1
                column = index - text.rfind("\n", 0, index)
                raise ConfigFileError(
                    f"{source}: line {line}, column {column}: nested deeper than the limit of "
                    f"{max_depth} levels"
                )
        elif char in "]}":
            depth -= 1


def _check_json_value(value: Any, source: str, limits: ReadLimits) -> None:
    """Refuse a parsed JSON value with too many nodes or too long a string (no recursion)."""
    pending = [value]
    nodes = 0
    while pending:
        item = pending.pop()
        nodes += 1
        if nodes > limits.max_nodes:
            raise ConfigFileError(f"{source}: more than the limit of {limits.max_nodes} nodes")
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, str) and len(item) > limits.max_string:
            raise ConfigFileError(
                f"{source}: a string of {len(item)} characters, over the limit of "
                f"{limits.max_string}"
            )
