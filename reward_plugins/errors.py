"""The one family of errors that reward_plugins raises on bad input.

Every error derives from :class:`RewardPluginsError`, so ``except RewardPluginsError`` catches
anything this package refuses, and each also derives from the builtin a caller would expect
(``ValueError``, ``TypeError``, ``LookupError``), so older ``except`` clauses keep working.
"""

from __future__ import annotations


class RewardPluginsError(Exception):
    """Base of every error reward_plugins raises on bad input, configuration or plugins."""


class InvalidGroundTruth(RewardPluginsError, ValueError):
    """A ground truth that cannot be read as a set of gold answers.

    The message names the data source, the field and the type that was received.
    """


class UnknownDataSource(RewardPluginsError, LookupError):
    """No scorer is registered for a data source, or the data source is not a string.

    The message lists the registered data sources, the closest match, and any plugin that
    failed to load (its data sources cannot be known).
    """


class UnknownScorer(RewardPluginsError, LookupError):
    """No scorer of that name is registered (for the data source, or anywhere).

    The message lists the scorers that exist and the closest match.
    """


class InvalidOption(RewardPluginsError, TypeError, ValueError):
    """An option name or value a scorer or metric does not accept.

    The message names the scorer or metric, the option, the expected type or range and the
    type of the value received.
    """


class InvalidInput(RewardPluginsError, TypeError, ValueError):
    """A prediction, target or response that is not what the function takes (e.g. not a str)."""


class PluginError(RewardPluginsError):
    """A plugin that breaks the scorer contract: a clashing registration, or a result that is not
    a number or a mapping of numbers with the same keys on every call."""


class ConfigFileError(RewardPluginsError, ValueError):
    """A YAML or JSON file or text the package cannot read: missing, not a regular file, too
    large, not UTF-8, not valid, or over a limit of
    :class:`reward_plugins.config_reader.ReadLimits`.

    The message names the file (or the text's source), the limit and, when known, the line and
    column.
    """
