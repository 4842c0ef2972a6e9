"""Re-score rollout dumps and datasets at training-run scale: the engine of ``reward-plugins``.

``files`` decides what is read and where it is written, ``formats`` reads and writes each file
format (one module each, one table), ``execute`` runs a :class:`ScoreJob` (``job``): ``plan``
checks it, ``workers`` score its chunks (each row read by :mod:`reward_plugins.runtime.rows`),
``output`` writes the results in order; ``summary`` accumulates the summary (named and ordered
by the scorer's result schema), ``text`` words it and a comparison for the command line, and
``report`` turns a run into an HTML page. Nothing here prints.
"""

from reward_plugins.rescore.execute import (
    BadRowError,
    RescoreError,
    ScoreJob,
    run,
    usable_cpus,
)

__all__ = ["BadRowError", "RescoreError", "ScoreJob", "run", "usable_cpus"]
