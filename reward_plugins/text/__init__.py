"""Named text normalizers: the contract behind every comparison a score makes.

A score is only comparable with another made under the same normalizer, so each one has a
name, and scorers report the name they used.
"""

from __future__ import annotations

from reward_plugins.text.normalize import NORMALIZERS, get_normalizer, normalize_squad

__all__ = ["NORMALIZERS", "get_normalizer", "normalize_squad"]
