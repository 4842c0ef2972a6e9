"""Text for people: counted nouns, and strings that can always be printed."""

from __future__ import annotations


def plural(count: int, noun: str) -> str:
    """``"1 row"``, ``"2 rows"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def printable(text: str) -> str:
    """``text`` with each lone surrogate (read from a JSON ``\\udcxx`` escape, or from an
    undecodable file name) written as its escape, so that it can be printed as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
