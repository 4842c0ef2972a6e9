"""Typed errors raised by reward_plugins."""

from __future__ import annotations


class InvalidGroundTruth(ValueError):
    """A ground truth that cannot be read as a set of gold answers.

    The message names the data source, the field and the type that was received.
    """


class UnknownDataSource(LookupError):
    """No scorer is registered for a data source (or for a scorer name on it).

    The message lists the registered data sources and the closest match.
    """
