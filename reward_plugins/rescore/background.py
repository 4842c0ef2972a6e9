"""Threads that overlap I/O with the scoring: a reader a few chunks ahead, a writer behind.

Reading, decompressing, hashing and writing release the GIL, so a thread doing them runs
beside the process that scores (or waits on its workers).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator
from typing import IO, Any, TypeVar

T = TypeVar("T")
_BACKGROUND_DEPTH = 4


class _Producer:
    """The thread behind :func:`in_background`: puts each item of ``items`` in a bounded queue,
    then ``("end", None)`` or ``("error", exception)``, until stopped."""

    def __init__(self, items: Generator[Any, None, None]) -> None:
        self.items = items
        self.pending: queue.Queue[tuple[str, Any]] = queue.Queue(_BACKGROUND_DEPTH)
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self._produce, name="reward-plugins-reader", daemon=True
        )
        self.thread.start()

    def _put(self, entry: tuple[str, Any]) -> bool:
        while not self.stop.is_set():
            try:
                self.pending.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for item in self.items:
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except BaseException as error:
            self._put(("error", error))
        finally:
            self.items.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def in_background(items: Generator[T, None, None]) -> Generator[T, None, None]:
    """``items``, produced in a thread a few ahead: reading, decompressing and hashing release
    the GIL, so they overlap the scoring. An error of the producer is raised here; closing
    this generator stops the thread (and closes ``items``)."""
    producer = _Producer(items)
    try:
        while True:
            kind, value = producer.pending.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        producer.close()


class BackgroundWriter:
    """A binary stream written by a thread, so that writing overlaps the scoring; an error of
    the write (a full disk) is raised by the next :meth:`write` or by :meth:`close`."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._pending: queue.Queue[bytes | None] = queue.Queue(_BACKGROUND_DEPTH)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="reward-plugins-writer")
        self._thread.start()

    def _drain(self) -> None:
        while (data := self._pending.get()) is not None:
            if self._error is None:
                try:
                    self._stream.write(data)
                except BaseException as error:
                    self._error = error

    def write(self, data: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._pending.put(data)

    def close(self) -> None:
        """Write what is queued, stop the thread, close the stream; raise a write's error."""
        if self._thread.is_alive():
            self._pending.put(None)
            self._thread.join()
        self._stream.close()
        if self._error is not None:
            raise self._error
