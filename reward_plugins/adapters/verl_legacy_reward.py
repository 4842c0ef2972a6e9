"""Entry file for verl 0.4-0.7.0, whose ``custom_reward_function.path`` must name a file.

verl executes a reward file under a made-up module name, outside ``sys.modules``, so this file
imports absolutely and defines nothing itself: ``custom_reward_function.name`` is looked up here
at run time, through this module's ``__getattr__`` (PEP 562), as the attribute of the installed
``reward_plugins`` package of the same name: any registered scorer, or ``compute_score_batch``.
Those objects keep ``__module__ == "reward_plugins"`` and pickle by reference, both with
``pickle`` (verl's legacy ``prime`` manager runs them in a process pool) and with Ray's
cloudpickle.

``reward-plugins path verl`` prints where this file is installed. verl >= 0.7.1 does not need it:
use ``reward.custom_reward_function.path: pkg://reward_plugins`` there.
"""

from typing import Any

import reward_plugins


def __getattr__(name: str) -> Any:
    """``reward_plugins.<name>``: a registered scorer's router, or ``compute_score_batch``.

    Special names (``__path__``, ``__all__``, ...) are not forwarded: this file is not the package.
    """
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(reward_plugins, name)
