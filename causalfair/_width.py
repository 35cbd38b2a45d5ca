"""How many terminal columns text takes (the standard library only: the command line's
tables import it before numpy): a wide East Asian character or an emoji takes two, a
combining mark or a format character none, any other character one. The plain-text tables
pad their columns to it (``str.ljust`` counts characters: a group named "男" or "A 😀"
pushed every column after it one column right per wide character)."""

from __future__ import annotations

import unicodedata

__all__ = ["text_width", "ljust"]


def _columns(c: str) -> int:
    if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def text_width(text: str) -> int:
    """The columns ``text`` takes on a terminal."""
    return len(text) if text.isascii() else sum(_columns(c) for c in text)


def ljust(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` terminal columns (as ``str.ljust`` pads
    characters)."""
    return text + " " * max(0, width - text_width(text))
