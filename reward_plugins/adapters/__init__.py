"""Adapters that hand the same rewards to other trainers (TRL, OpenRLHF) and to old verl versions.

Each adapter imports its trainer lazily, so ``import reward_plugins`` stays cheap.

- :mod:`reward_plugins.adapters.trl`: ``make_reward_func(...)``, a picklable reward function for
  TRL's ``GRPOTrainer``.
- ``reward_plugins/adapters/openrlhf_reward.py``: a reward file that OpenRLHF loads by path
  (``--reward.remote_url``), configured by ``REWARD_PLUGINS_*`` environment variables, which it
  checks on import; import it only where it is meant to run.
"""
