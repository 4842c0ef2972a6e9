"""The engine's errors: a job that cannot run, a row that cannot be scored or written, a report
that cannot be made."""

from __future__ import annotations

from reward_plugins.errors import RewardPluginsError


class RescoreError(RewardPluginsError):
    """A job that cannot run as asked: bad arguments or paths, a missing dependency."""


class BadRowError(RescoreError):
    """Input rows that cannot be scored or written (``on_error="fail"``); names the first."""


class DataError(RewardPluginsError, ValueError):
    """Rows that cannot be written in the output's format (raised in a worker)."""


class ReportError(RewardPluginsError):
    """The report cannot be made: a missing optional dependency or a bad option."""
