"""Adapters that hand the same rewards to other trainers (TRL, OpenRLHF) and to old verl versions.

Each adapter imports its trainer lazily, so ``import reward_plugins`` stays cheap.
"""
