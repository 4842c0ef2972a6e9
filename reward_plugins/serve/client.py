"""verl's client for the reward server: :func:`compute_score_remote`.

verl has no remote reward URL (verl issue #269, "Support reward model on a remote server"); its
reward loop awaits an ``async def`` custom reward function instead (``inspect.iscoroutinefunction``
in ``verl/experimental/reward_loop/reward_manager/naive.py``), once per row, all rows of a batch
concurrently in the reward worker's event loop. :func:`compute_score_remote` is such a function:
a verl user already on ``path: pkg://reward_plugins`` moves scoring off the trainer with::

    reward.custom_reward_function.name=compute_score_remote
    +reward.custom_reward_function.reward_kwargs.url=http://HOST:PORT

What it does, per event loop:

- **Batching.** Calls made concurrently with the same servers, options and client settings are
  gathered (up to ``remote_batch_size`` rows, or for ``remote_batch_wait`` seconds) and sent as
  one native ``POST /score`` request (``{"rows": [...], "options": {...}}``).
- **One session** (``aiohttp.ClientSession``) per event loop and URL set, so connections are
  reused; it is closed when the event loop's tasks are cancelled (``asyncio.run`` does so on
  exit) or by :func:`aclose`.
- **Retries and failover.** A connection error, ``429`` or ``5xx`` answer is retried, up to
  ``remote_retries`` times, on the next URL in round-robin order; a URL that failed is skipped
  for a while (``Retry-After`` when the server sends one, at most :data:`MAX_RETRY_AFTER`
  seconds, else an exponential backoff from :data:`BACKOFF_START` to :data:`BACKOFF_CAP`
  seconds); when every URL is skipped the client waits for the first to come back. With
  several URLs, a request a server has not answered within ``remote_attempt_timeout`` seconds
  (a hung server) is sent to the next.
- **A deadline.** A row that has no answer ``remote_timeout`` seconds after the call raises
  :class:`RemoteScoringError`, as do a refused request (``4xx``), an answer over
  ``remote_max_response_mb``, and an answer that is not the native protocol's (not JSON, a
  non-finite number, a wrong row count or key set). The message names the URL.

**Failed rows.** The server reports a row it could not score (a scorer that timed out, crashed or
raised) in ``failures[i]`` and sends its fallback dict for it: the same keys as every other row,
``score`` the server's fallback reward, the other keys 0. With ``remote_on_failure="fallback"``
(the default) that dict is returned, so verl's bookkeeping (which builds one column per key of
the first row and reads it from every row) never sees a missing key, and one warning line is
logged per failure kind and request. With ``remote_on_failure="raise"`` the call raises
:class:`RemoteRowFailed` instead. A server or network failure is never turned into a reward: it
raises, and verl's step fails loudly.

**verl's managers.** ``naive`` and ``dapo`` await the function in the reward worker's event loop
(``RewardLoopWorker``, a Ray actor, gathers one task per row). ``rate_limited`` does too, but
turns a raised error into a row with other keys (``error``, ``acc``). verl's ``remote`` manager
refuses async functions (it runs them in its own Ray workers); use ``naive`` with the server.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import weakref
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reward_plugins.errors import InvalidInput, RewardPluginsError
from reward_plugins.options import is_finite_number
from reward_plugins.serve.client_settings import (  # importable from here, as before the split
    SETTING_PREFIX,  # noqa: F401
    URL_ENV,  # noqa: F401
    ClientSettings,
    parse_urls,
)

try:
    import aiohttp
except ImportError as error:  # pragma: no cover - exercised only without aiohttp
    raise ImportError("compute_score_remote needs aiohttp: pip install aiohttp") from error

logger = logging.getLogger(__name__)

VERL_CALL_KWARGS = ("reward_router_address", "reward_model_tokenizer")
"""Keywords verl's reward managers add when a reward model is enabled; they are not scorer
options and are not sent."""
BACKOFF_START = 0.2
BACKOFF_CAP = 10.0
MAX_RETRY_AFTER = 30.0
ERROR_TEXT_CHARS = 300
"""How much of a server's error message is quoted in an error."""
_CHUNK = 64 * 1024


class RemoteScoringError(RewardPluginsError, RuntimeError):
    """The reward server could not be reached in time, refused the request, or answered
    something that is not the native protocol. The message names the URL."""


class RemoteRowFailed(RemoteScoringError):
    """The server could not score this row (``remote_on_failure="raise"``): ``kind`` is its
    failure kind (``timeout``, ``crash``, ``scorer error``, ...), ``result`` its fallback dict."""

    def __init__(self, message: str, kind: str, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.kind = kind
        self.result = result


def _jsonable(value: Any) -> Any:
    """JSON's ``default``: mappings (``DictConfig`` too), numpy arrays and scalars, sequences."""
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray):
        return list(value)
    raise TypeError(f"a value of type {type(value).__name__} is not JSON")


def _encode(value: Any, field: str, data_source: Any) -> str:
    try:
        return json.dumps(value, default=_jsonable, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise InvalidInput(
            f"compute_score_remote: {field} of a row of data source {data_source!r} "
            f"cannot be sent as JSON ({type(value).__name__}): {error}"
        ) from None


async def compute_score_remote(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    url: str | Sequence[str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Score one row on the reward server(s) and return the server's result dict, exactly.

    Args:
        data_source, solution_str, ground_truth, extra_info: verl's call, sent as one row of the
            native ``POST /score`` protocol (numpy arrays and ``DictConfig`` values as JSON).
        url: the server base URL(s): ``http://HOST:PORT``, a comma-separated string or a list of
            them; ``None`` reads :data:`URL_ENV`.
        options: scorer options (sent in the request's ``options``, merged by the server over
            its own) and the client's ``remote_*`` settings (:class:`ClientSettings`). verl's
            reward-model keywords (:data:`VERL_CALL_KWARGS`) are dropped.

    Returns the server's dict for the row: on success the scorer's dict (equal to in-process
    scoring); for a row the server failed to score, its fallback dict (see the module docstring).

    Raises :class:`~reward_plugins.errors.InvalidOption` (a bad URL or setting),
    :class:`~reward_plugins.errors.InvalidInput` (a field that is not a string or not JSON),
    :class:`RemoteScoringError` (see the module docstring), :class:`RemoteRowFailed`.
    """
    for name in VERL_CALL_KWARGS:
        options.pop(name, None)
    urls = parse_urls(url)
    settings = ClientSettings.from_options(options)
    for field, value in (("data_source", data_source), ("solution_str", solution_str)):
        if not isinstance(value, str):
            raise InvalidInput(
                f"compute_score_remote: {field} must be a str, got {type(value).__name__} "
                f"(data source {data_source!r})"
            )
    row = (
        '{"data_source":' + _encode(data_source, "data_source", data_source)
        + ',"solution_str":' + _encode(solution_str, "solution_str", data_source)
        + ',"ground_truth":' + _encode(ground_truth, "ground_truth", data_source)
        + ',"extra_info":' + _encode(extra_info, "extra_info", data_source)
        + "}"
    )  # fmt: skip
    options_json = _encode(options, "options", data_source)
    loop = asyncio.get_running_loop()
    state = _state_of(loop)
    batcher = state.batcher(urls, options_json, settings)
    return await batcher.submit(row, loop.time() + settings.timeout)


async def aclose() -> None:
    """Close the running event loop's sessions (the next call opens new ones). Not needed under
    ``asyncio.run``, which cancels the task that closes them."""
    state = _states.get(asyncio.get_running_loop())
    if state is not None:
        state.closing.set()
        await asyncio.gather(state.keeper, return_exceptions=True)


# --- per event loop state ---------------------------------------------------------------------

_states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
    weakref.WeakKeyDictionary()
)


def _state_of(loop: asyncio.AbstractEventLoop) -> _LoopState:
    state = _states.get(loop)
    if state is None or state.keeper.done():
        state = _states[loop] = _LoopState(loop)
    return state


class _LoopState:
    """The sessions and batchers of one event loop, closed by a keeper task when the loop's
    tasks are cancelled (``asyncio.run`` cancels them before closing the loop)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.servers: dict[tuple[str, ...], _Servers] = {}
        self.batchers: dict[tuple[Any, ...], _Batcher] = {}
        self.closing = asyncio.Event()
        self.keeper = loop.create_task(self._keep())

    def batcher(
        self, urls: tuple[str, ...], options_json: str, settings: ClientSettings
    ) -> _Batcher:
        key = (urls, options_json, settings)
        batcher = self.batchers.get(key)
        if batcher is None:
            servers = self.servers.get(urls)
            if servers is None:
                servers = self.servers[urls] = _Servers(urls)
            batcher = self.batchers[key] = _Batcher(servers, options_json, settings)
        return batcher

    async def _keep(self) -> None:
        try:
            await self.closing.wait()
        finally:
            if _states.get(self.loop) is self:
                del _states[self.loop]
            for batcher in self.batchers.values():
                batcher.cancel()
            for servers in self.servers.values():
                await servers.close()


class _Servers:
    """One URL set: its session, the round-robin position and when each URL may be used again."""

    def __init__(self, urls: tuple[str, ...]) -> None:
        self.urls = urls
        self._next = itertools.cycle(range(len(urls)))
        self._down_until = [0.0] * len(urls)
        self._failures = [0] * len(urls)
        self.session = aiohttp.ClientSession(
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None),
            headers={"Accept-Encoding": "identity", "Content-Type": "application/json"},
        )

    async def close(self) -> None:
        await self.session.close()

    def pick(self, now: float) -> tuple[int, float]:
        """The next URL in round-robin order that is not skipped, else the one back first;
        with how long to wait for it."""
        for _ in self.urls:
            index = next(self._next)
            if self._down_until[index] <= now:
                return index, 0.0
        index = min(range(len(self.urls)), key=self._down_until.__getitem__)
        return index, self._down_until[index] - now

    def failed(self, index: int, now: float, retry_after: float | None) -> None:
        self._failures[index] += 1
        wait = BACKOFF_START * 2 ** (self._failures[index] - 1)
        wait = min(wait, BACKOFF_CAP) if retry_after is None else retry_after
        self._down_until[index] = now + wait

    def succeeded(self, index: int) -> None:
        self._failures[index] = 0
        self._down_until[index] = 0.0


class _Retryable(RemoteScoringError):
    """One attempt failed in a way another attempt (on the next URL) may not: retried, never
    raised to the caller."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class _Pending:
    row: str
    future: asyncio.Future[dict[str, Any]]
    deadline: float


class _Batcher:
    """Rows waiting for one URL set, option set and settings; sent as one request per batch."""

    def __init__(self, servers: _Servers, options_json: str, settings: ClientSettings) -> None:
        self.servers = servers
        self.options_json = options_json
        self.settings = settings
        self.pending: list[_Pending] = []
        self.timer: asyncio.TimerHandle | None = None
        self.sending: set[asyncio.Task[None]] = set()

    def submit(self, row: str, deadline: float) -> asyncio.Future[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.pending.append(_Pending(row, future, deadline))
        if len(self.pending) >= self.settings.batch_size:
            self.flush()
        elif self.timer is None:
            self.timer = loop.call_later(self.settings.batch_wait, self.flush)
        return future

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        batch, self.pending = self.pending, []
        if batch:
            task = asyncio.get_running_loop().create_task(self._send(batch))
            self.sending.add(task)
            task.add_done_callback(self.sending.discard)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        for task in self.sending:
            task.cancel()
        for pending in self.pending:
            pending.future.cancel()

    async def _send(self, batch: list[_Pending]) -> None:
        body = (
            '{"rows":[' + ",".join(p.row for p in batch) + '],"options":' + self.options_json + "}"
        ).encode()
        try:
            url, answers = await self._post(body, len(batch), min(p.deadline for p in batch))
        except BaseException as error:
            for pending in batch:
                if not pending.future.done():
                    if isinstance(error, asyncio.CancelledError):
                        pending.future.cancel()
                    else:
                        pending.future.set_exception(error)
            if not isinstance(error, Exception):
                raise
            return
        kinds: Counter[str] = Counter()
        first: dict[str, str] = {}
        for pending, (result, failure) in zip(batch, answers, strict=True):
            if pending.future.done():
                continue
            if failure is None:
                pending.future.set_result(result)
                continue
            kind, message = failure
            kinds[kind] += 1
            first.setdefault(kind, message)
            if self.settings.on_failure == "raise":
                pending.future.set_exception(
                    RemoteRowFailed(
                        f"{url}/score: the row failed ({kind}): {message}", kind, result
                    )
                )
            else:
                pending.future.set_result(result)
        for kind, count in kinds.items():
            logger.warning(
                "reward server %s: %d of %d rows failed (%s), fallback dicts %s; first: %s",
                url,
                count,
                len(batch),
                kind,
                "raised" if self.settings.on_failure == "raise" else "returned",
                first[kind],
            )

    async def _post(
        self, body: bytes, rows: int, deadline: float
    ) -> tuple[str, list[tuple[dict[str, Any], tuple[str, str] | None]]]:
        loop = asyncio.get_running_loop()
        servers = self.servers
        attempts = 0
        last = "no attempt made"
        while True:
            index, wait = servers.pick(loop.time())
            url = servers.urls[index]
            remaining = deadline - loop.time()
            if wait > 0:
                await asyncio.sleep(min(wait, max(remaining, 0.0)))
                remaining = deadline - loop.time()
            if remaining <= 0:
                raise RemoteScoringError(
                    f"reward server {', '.join(servers.urls)}: no answer within "
                    f"remote_timeout={self.settings.timeout} s ({attempts} attempts; last: {last})"
                )
            attempts += 1
            budget = remaining
            if len(servers.urls) > 1:
                budget = min(remaining, self.settings.attempt_timeout)
            try:
                answers = await asyncio.wait_for(self._attempt(url, body, rows), budget)
            except asyncio.TimeoutError:
                if budget >= remaining:
                    raise RemoteScoringError(
                        f"reward server {url}: no answer within remote_timeout="
                        f"{self.settings.timeout} s ({attempts} attempts)"
                    ) from None
                failure = _Retryable(
                    f"{url}/score: no answer within remote_attempt_timeout="
                    f"{self.settings.attempt_timeout} s"
                )
            except _Retryable as error:
                failure = error
            else:
                servers.succeeded(index)
                return url, answers
            servers.failed(index, loop.time(), failure.retry_after)
            last = str(failure)
            if attempts > self.settings.retries:
                raise RemoteScoringError(
                    f"reward server {', '.join(servers.urls)}: failed {attempts} times "
                    f"(remote_retries={self.settings.retries}); last: {last}"
                )
            logger.debug("reward server: retrying after %s", last)

    async def _attempt(
        self, url: str, body: bytes, rows: int
    ) -> list[tuple[dict[str, Any], tuple[str, str] | None]]:
        endpoint = f"{url}/score"
        cap = int(self.settings.max_response_mb * 1024 * 1024)
        try:
            async with self.servers.session.post(endpoint, data=body) as response:
                if response.status != 200:
                    text = await _read_capped(response, 64 * 1024, endpoint)
                    message = _error_text(text)
                    if response.status == 429 or response.status >= 500:
                        raise _Retryable(
                            f"{endpoint}: HTTP {response.status}: {message}",
                            _retry_after(response.headers.get("Retry-After")),
                        )
                    raise RemoteScoringError(
                        f"reward server {endpoint} refused the request: HTTP "
                        f"{response.status}: {message}"
                    )
                raw = await _read_capped(response, cap, endpoint)
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as error:
            raise _Retryable(f"{endpoint}: {type(error).__name__}: {error}") from None
        return _parse_answer(raw, rows, endpoint)


async def _read_capped(response: aiohttp.ClientResponse, cap: int, endpoint: str) -> bytes:
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("identity", ""):
        raise RemoteScoringError(
            f"reward server {endpoint}: unexpected Content-Encoding {encoding[:40]!r}"
        )
    too_large = RemoteScoringError(
        f"reward server {endpoint}: the answer exceeds remote_max_response_mb "
        f"({cap} bytes); lower remote_batch_size or raise the cap"
    )
    if (response.content_length or 0) > cap:
        raise too_large
    parts: list[bytes] = []
    received = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        received += len(chunk)
        if received > cap:
            raise too_large
        parts.append(chunk)
    return b"".join(parts)


def _error_text(raw: bytes) -> str:
    try:
        message = json.loads(raw)["error"]
    except (ValueError, TypeError, KeyError):
        message = raw.decode("utf-8", "replace")
    return _shorten(str(message))


def _shorten(text: str) -> str:
    """``text`` on one line, at most :data:`ERROR_TEXT_CHARS` characters."""
    text = " ".join(text.split())
    return text[:ERROR_TEXT_CHARS] + ("..." if len(text) > ERROR_TEXT_CHARS else "")


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds (the delta-seconds form), bounded by :data:`MAX_RETRY_AFTER`."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _parse_answer(
    raw: bytes, rows: int, endpoint: str
) -> list[tuple[dict[str, Any], tuple[str, str] | None]]:
    """The native answer's ``(result, failure)`` per row, checked: ``keys`` a list of strings
    holding ``score``; ``results`` one dict per row with exactly those keys and finite numbers;
    ``failures`` one ``null`` or ``{"kind": str, "message": str}`` per row."""

    def malformed(why: str) -> RemoteScoringError:
        return RemoteScoringError(f"reward server {endpoint}: malformed answer: {why}")

    try:
        answer = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        raise malformed(f"not JSON ({str(error)[:200]})") from None
    if not isinstance(answer, dict):
        raise malformed(f"a JSON {type(answer).__name__}, not an object")
    keys, results, failures = (answer.get(k) for k in ("keys", "results", "failures"))
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise malformed("'keys' is not a list of strings")
    if "score" not in keys:
        raise malformed("'keys' has no 'score'")
    for name, value in (("results", results), ("failures", failures)):
        if not isinstance(value, list) or len(value) != rows:
            got = len(value) if isinstance(value, list) else type(value).__name__
            raise malformed(f"{name!r} must be a list of {rows} rows, got {got}")
    key_set = set(keys)
    parsed: list[tuple[dict[str, Any], tuple[str, str] | None]] = []
    for i, (result, failure) in enumerate(zip(results, failures, strict=True)):  # type: ignore[arg-type]
        if not isinstance(result, dict) or set(result) != key_set:
            raise malformed(f"results[{i}] does not hold exactly the keys {keys}")
        for key, value in result.items():
            if isinstance(value, bool):
                continue
            if not is_finite_number(value):
                raise malformed(
                    f"results[{i}][{key!r}] is not a finite number ({type(value).__name__})"
                )
        if failure is None:
            parsed.append((result, None))
            continue
        if not (
            isinstance(failure, dict)
            and isinstance(failure.get("kind"), str)
            and isinstance(failure.get("message"), str)
        ):
            raise malformed(f"failures[{i}] is not null or {{'kind': str, 'message': str}}")
        parsed.append((result, (_shorten(failure["kind"]), _shorten(failure["message"]))))
    return parsed
