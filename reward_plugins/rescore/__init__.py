"""Re-score rollout dumps and datasets at training-run scale: the engine of ``reward-plugins``.

``files`` decides what is read and where it is written, ``formats`` reads and writes each file
format (one module each, one table), ``rows`` reads the columns of a row, ``execute`` runs a
:class:`ScoreJob`: ``plan`` checks it, ``workers`` score its chunks, ``output`` writes the
results in order; ``summary`` accumulates the summary
(named and ordered by the scorer's result schema), and ``report`` turns a run into an HTML
page. Nothing here prints.
"""

from reward_plugins.rescore.execute import (
    BadRowError,
    RescoreError,
    ScoreJob,
    run,
    usable_cpus,
)

__all__ = ["BadRowError", "RescoreError", "ScoreJob", "run", "usable_cpus"]
