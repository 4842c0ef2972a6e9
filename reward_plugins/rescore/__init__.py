"""Re-score rollout dumps and datasets at training-run scale: the engine of ``reward-plugins``.

``files`` decides what is read and where it is written, ``rows`` parses and serializes rows,
``execute`` runs a :class:`ScoreJob` over chunks in workers, ``summary`` accumulates the
summary, and ``report`` turns a run into an HTML page. Nothing here prints.
"""

from reward_plugins.rescore.execute import (
    BadRowError,
    RescoreError,
    ScoreJob,
    run,
    usable_cpus,
)
from reward_plugins.rescore.summary import SUMMARY_METRICS

__all__ = ["SUMMARY_METRICS", "BadRowError", "RescoreError", "ScoreJob", "run", "usable_cpus"]
