"""Re-score rollout dumps and datasets at training-run scale: the engine of ``reward-plugins``.

``files`` decides what is read and where it is written, ``rows`` parses and serializes rows,
``execute`` runs a :class:`ScoreJob` over chunks in workers, ``summary`` accumulates the
summary (named and ordered by the scorer's result schema), and ``report`` turns a run into an
HTML page. Nothing here prints.
"""

from reward_plugins.rescore.execute import (
    BadRowError,
    RescoreError,
    ScoreJob,
    run,
    usable_cpus,
)

__all__ = ["BadRowError", "RescoreError", "ScoreJob", "run", "usable_cpus"]
