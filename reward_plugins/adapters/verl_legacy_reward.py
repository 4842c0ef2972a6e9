"""Entry file for verl 0.4-0.7.0, whose ``custom_reward_function.path`` must name a file.

verl executes a reward file under a made-up module name, outside ``sys.modules``, so this file
imports absolutely and defines nothing itself: every name below is a router of the installed
``reward_plugins`` package. The routers therefore keep ``__module__ == "reward_plugins.router"``
and pickle by reference, both with ``pickle`` (verl's legacy ``prime`` manager runs them in a
process pool) and with Ray's cloudpickle.

``reward-plugins path verl`` prints where this file is installed. verl >= 0.7.1 does not need it:
use ``reward.custom_reward_function.path: pkg://reward_plugins`` there.
"""

from reward_plugins.router import (
    compute_score,
    compute_score_batch,
    compute_score_f1,
    compute_score_subem,
)

__all__ = ["compute_score", "compute_score_batch", "compute_score_f1", "compute_score_subem"]
