"""The package's rewards as reward functions for TRL's ``GRPOTrainer`` (and its other trainers).

TRL calls a reward function once per batch as
``f(prompts=..., completions=..., completion_ids=..., **columns)``: ``columns`` holds every other
dataset column as a list with one entry per completion, plus TRL's own keywords
(``trainer_state``; in recent versions such as 1.16 also ``log_extra`` and ``log_metric``). It
expects one float per completion back and logs their mean under ``rewards/<__name__>/mean``.

:func:`make_reward_func` builds such a function. It is an instance of :class:`RewardFunction`,
not a closure, so that it pickles (TRL and ``accelerate`` may ship reward functions to other
processes). TRL itself is never imported here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reward_plugins.errors import (
    InvalidGroundTruth,
    RewardPluginsError,
    UnknownDataSource,
    UnknownScorer,
)
from reward_plugins.options import is_finite_number
from reward_plugins.router import check_options, route

__all__ = ["RewardFunction", "make_reward_func"]

TRL_KEYWORDS = frozenset({"trainer_state", "log_extra", "log_metric", "environments"})
"""Keywords TRL adds to the dataset columns; never reported as columns."""


class RewardFunction:
    """A TRL reward function scoring each completion with one registered scorer.

    Build it with :func:`make_reward_func`. Attributes: ``scorer`` (the registered scorer
    name), ``data_source`` (default for rows without a ``data_source`` column, or ``None``),
    ``options`` (keyword options of the scorer) and ``__name__`` (the name TRL logs the reward
    under; assign another to tell two instances apart).
    """

    def __init__(self, scorer: str, data_source: str | None, options: Mapping[str, Any]) -> None:
        self.scorer = scorer
        self.data_source = data_source
        self.options = dict(options)
        self.__name__ = f"reward_plugins_{scorer}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(scorer={self.scorer!r}, data_source={self.data_source!r}, "
            f"options={self.options!r})"
        )

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any
    ) -> list[float]:
        """Score each completion against its row's ground truth.

        Args:
            prompts: TRL's prompts (unused: only the completion is scored).
            completions: one per row, a string or a list of chat messages; a message list is
                scored by the content of its last ``assistant`` message.
            **columns: the dataset's columns as lists, one entry per completion:
                ``ground_truth`` (``{"target": ...}`` or a bare gold answer / list of golds), or
                else verl's ``reward_model`` (a dict holding ``ground_truth``); optionally
                ``data_source`` (an entry that is ``None`` falls back to the factory's). TRL's
                own keywords may come too: with ``log_metric``, the mean of every other numeric
                result key (``em``, ``subem``, ``f1``, ``answer_found``, ``spam_penalized``, ...)
                is logged as ``rewards/<__name__>/<key>``. Other columns are ignored.

        Returns:
            The reward of each completion, in order.

        Raises:
            ValueError: no ground-truth column, or a column whose length is not the number of
                completions, or a row without a data source or without an assistant message.
            TypeError: a completion that is neither a string nor a message list.
            InvalidGroundTruth, UnknownDataSource, UnknownScorer: as the router raises them,
                naming the row.
        """
        count = len(completions)
        ground_truths = _ground_truths(columns, count)
        data_sources = _column(columns, "data_source", count)
        results = []
        for row, completion in enumerate(completions):
            source = data_sources[row] if data_sources is not None else None
            if source is None:
                source = self.data_source
            if source is None:
                raise ValueError(
                    f"{self.__name__}: row {row} has no data source: give the dataset a "
                    "'data_source' column or pass data_source= to make_reward_func"
                )
            text = _completion_text(completion, row)
            try:
                results.append(
                    route(self.scorer, source, text, ground_truths[row], self.options, True)
                )
            except (InvalidGroundTruth, UnknownDataSource, UnknownScorer) as error:
                raise type(error)(f"{self.__name__}: row {row}: {error}") from error
        log_metric = columns.get("log_metric")
        if callable(log_metric) and results:
            self._log_means(log_metric, results)
        return [float(result["score"]) for result in results]

    def _log_means(self, log_metric: Callable[[str, float], None], results: list[Any]) -> None:
        for key, value in results[0].items():
            if key == "score" or not is_finite_number(value):
                continue
            values = [result.get(key) for result in results]
            if all(is_finite_number(v) for v in values):
                log_metric(f"rewards/{self.__name__}/{key}", math.fsum(values) / len(values))


def make_reward_func(
    scorer: str = "compute_score", data_source: str | None = None, **options: Any
) -> RewardFunction:
    """A TRL reward function ``(prompts, completions, **columns) -> list[float]``.

    Args:
        scorer: a registered scorer name (``compute_score``, ``compute_score_subem``,
            ``compute_score_f1``, ``compute_score_format``, ``compute_score_metric``, or a
            plugin's; ``reward-plugins list`` shows them).
        data_source: the data source of rows that have no ``data_source`` column.
        **options: the scorer's keyword options (``format_score``, ``score``,
            ``max_answer_tags``, ...).

    Returns:
        A picklable :class:`RewardFunction` named ``reward_plugins_<scorer>``.

    Raises:
        UnknownScorer: no scorer of that name is registered (for ``data_source``, if given).
        UnknownDataSource: ``data_source`` is not registered.
        InvalidOption: an option the scorer does not accept (the message lists the valid ones)
            or a value it refuses. Without ``data_source`` the options are checked against
            every registration of ``scorer``.

    Example:
        >>> reward = make_reward_func(data_source="searchR1_nq")
        >>> reward(prompts=["Q?"], completions=["<answer>Paris</answer>"], ground_truth=["Paris"])
        [1.0]
    """
    try:
        check_options(scorer, data_source, options)
    except RewardPluginsError as error:
        where = "" if data_source is None else f", data_source={data_source!r}"
        raise type(error)(f"make_reward_func: scorer {scorer!r}{where}: {error}") from error
    return RewardFunction(scorer, data_source, options)


def _column(columns: Mapping[str, Any], name: str, count: int) -> Sequence[Any] | None:
    values = columns.get(name)
    if values is None:
        return None
    if len(values) != count:
        raise ValueError(f"column {name!r} has {len(values)} entries for {count} completions")
    return values


def _ground_truths(columns: Mapping[str, Any], count: int) -> Sequence[Any]:
    """Each row's ground truth: the ``ground_truth`` column, else ``reward_model[...]``."""
    ground_truths = _column(columns, "ground_truth", count)
    if ground_truths is not None:
        return ground_truths
    reward_models = _column(columns, "reward_model", count)
    if reward_models is None:
        received = ", ".join(sorted(k for k in columns if k not in TRL_KEYWORDS)) or "(none)"
        raise ValueError(
            "no ground truth: the dataset needs a 'ground_truth' column or a verl-style "
            f"'reward_model' column holding one; columns received: {received}"
        )
    for row, reward_model in enumerate(reward_models):
        if not isinstance(reward_model, Mapping) or "ground_truth" not in reward_model:
            raise InvalidGroundTruth(
                f"row {row}: reward_model must be a mapping with a 'ground_truth' key, got "
                f"{type(reward_model).__name__}: {reward_model!r:.80}"
            )
    return [reward_model["ground_truth"] for reward_model in reward_models]


def _completion_text(completion: Any, row: int) -> str:
    """A string completion, or the content of the last assistant message of a message list."""
    if isinstance(completion, str):
        return completion
    if not isinstance(completion, Sequence):
        raise TypeError(
            f"row {row}: a completion must be a string or a list of chat messages, "
            f"got {type(completion).__name__}"
        )
    for message in reversed(completion):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            return _message_content(message.get("content"), row)
    raise ValueError(f"row {row}: the completion has no assistant message")


def _message_content(content: Any, row: int) -> str:
    """Message content: a string, ``None`` (a bare tool call), or a list of content blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            block.get("text") or ""
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "text"
        )
    raise TypeError(
        f"row {row}: assistant message content must be a string or a list of content blocks, "
        f"got {type(content).__name__}"
    )
