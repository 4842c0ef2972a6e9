"""The settings of verl's reward-server client
(:func:`reward_plugins.serve.client.compute_score_remote`): its ``remote_*`` keywords
(:class:`ClientSettings`) and its server URLs (:func:`parse_urls`).

Pure checks, no I/O and no aiohttp: each bad value raises
:class:`~reward_plugins.errors.InvalidOption` naming the keyword and what it must be.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit

from reward_plugins.errors import InvalidOption

URL_ENV = "REWARD_PLUGINS_SERVER_URL"
"""The environment variable read for the server URL(s) when ``url`` is not given."""
SETTING_PREFIX = "remote_"
"""Keywords with this prefix are the client's settings (:class:`ClientSettings`), not options."""


@dataclass(frozen=True)
class ClientSettings:
    """The client's settings, given to :func:`~reward_plugins.serve.client.compute_score_remote`
    as ``remote_<field>`` keywords (in verl: ``reward_kwargs.remote_<field>``)."""

    timeout: float = 180.0
    """Seconds from the call until the row's answer, retries and waits included."""
    attempt_timeout: float = 60.0
    """With several URLs: seconds a request may wait on one server before it is sent to the
    next (a hung server); with one URL the request waits out ``timeout``."""
    retries: int = 5
    """How many times a failed request is sent again (on the next URL)."""
    batch_size: int = 128
    """Most rows in one ``POST /score``."""
    batch_wait: float = 0.005
    """Seconds a first row waits for others to join its request."""
    on_failure: str = "fallback"
    """A row the server failed to score: ``fallback`` (return the server's fallback dict) or
    ``raise`` (:class:`~reward_plugins.serve.client.RemoteRowFailed`)."""
    max_response_mb: float = 64.0
    """The largest answer read, in MiB."""

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> ClientSettings:
        """Pop the ``remote_*`` keywords out of ``options`` and check them."""
        names = {f.name for f in fields(cls)}
        given: dict[str, Any] = {}
        for key in [k for k in options if k.startswith(SETTING_PREFIX)]:
            name = key[len(SETTING_PREFIX) :]
            if name not in names:
                known = ", ".join(SETTING_PREFIX + n for n in sorted(names))
                raise InvalidOption(
                    f"compute_score_remote: unknown setting {key!r}; known: {known}"
                )
            given[name] = options.pop(key)
        settings = cls(**given)
        settings._check()
        return settings

    def _check(self) -> None:
        def bad(name: str, expected: str) -> InvalidOption:
            value = getattr(self, name)
            return InvalidOption(
                f"compute_score_remote: remote_{name} must be {expected}, "
                f"got {value!r} ({type(value).__name__})"
            )

        for name in ("timeout", "attempt_timeout", "max_response_mb"):
            if not _positive_number(getattr(self, name)):
                raise bad(name, "a positive finite number")
        if not _positive_number(self.batch_wait, allow_zero=True) or self.batch_wait > 1:
            raise bad("batch_wait", "a number of seconds in [0, 1]")
        for name, low in (("retries", 0), ("batch_size", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise bad(name, f"an int >= {low}")
        if self.on_failure not in ("fallback", "raise"):
            raise bad("on_failure", "'fallback' or 'raise'")


def _positive_number(value: Any, *, allow_zero: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and (value > 0 or (allow_zero and value == 0))


def parse_urls(url: Any) -> tuple[str, ...]:
    """The server base URLs from ``url`` (a string, comma-separated or not, or a list of
    strings) or, when it is ``None``, from :data:`URL_ENV`: each ``http(s)://host[:port][/path]``,
    without a trailing slash, duplicates dropped."""
    if url is None:
        url = os.environ.get(URL_ENV)
        if not url:
            raise InvalidOption(
                "compute_score_remote: no server URL: set reward_kwargs.url (url=...) "
                f"or the environment variable {URL_ENV}"
            )
    if isinstance(url, str):
        parts: list[Any] = url.split(",")
    elif isinstance(url, Sequence) and not isinstance(url, bytes):
        parts = list(url)
    else:
        raise InvalidOption(
            "compute_score_remote: url must be a string or a list of strings, "
            f"got {type(url).__name__}"
        )
    urls: list[str] = []
    for part in parts:
        if not isinstance(part, str):
            raise InvalidOption(
                f"compute_score_remote: url entries must be strings, got {type(part).__name__}"
            )
        base = _check_url(part.strip())
        if base not in urls:
            urls.append(base)
    if not urls:
        raise InvalidOption("compute_score_remote: url holds no URL")
    return tuple(urls)


def _check_url(text: str) -> str:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as error:
        raise InvalidOption(f"compute_score_remote: invalid url {text[:200]!r}: {error}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidOption(
            f"compute_score_remote: invalid url {text[:200]!r}: expected http://HOST:PORT"
        )
    if parts.query or parts.fragment or parts.username or parts.password:
        raise InvalidOption(
            f"compute_score_remote: invalid url {text[:200]!r}: "
            "no query, fragment or credentials allowed"
        )
    return text.rstrip("/")
