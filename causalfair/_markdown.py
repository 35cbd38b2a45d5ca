"""The one Markdown escaping of user text (group names, labels, file names, a simulator's
messages), which every Markdown writer uses: the report's (report.md, card.md, annex-iv.md,
ll144.md; re-exported by :mod:`causalfair.report.explain`), the gate's summary and the
sweep's table.md. Standard library only: the commands import it before numpy."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["md_code", "md_escape"]

_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*[]|<>~$&"})
# an underscore that can open or close emphasis (not one inside a word, as in abs_C)
_MD_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def md_escape(text: Any) -> str:
    """Text for Markdown, the one escaping of every Markdown file causalfair writes
    (report.md, card.md, annex-iv.md, ll144.md, the gate's summary): the characters that
    start markup, emphasis, links, code, tables, entities or inline HTML are
    backslash-escaped and line breaks become spaces, so user strings (names, labels) and
    the sentences that quote them render as the text they are."""
    flat = " ".join(str(text).splitlines()).translate(_MD_SPECIAL)
    return _MD_UNDERSCORE.sub(r"\\_", flat)


def md_code(text: Any) -> str:
    """A user string (a spec name, a path, a policy label) as a Markdown code span that
    holds it as it is: line breaks become spaces, and the fence is one backtick longer
    than the longest run of backticks inside (padded with a space where the text starts
    or ends with one), so no character of it ends the span or needs escaping."""
    flat = " ".join(str(text).splitlines()) or " "  # "``" would open a longer fence
    fence = "`" * (1 + max((len(r) for r in re.findall("`+", flat)), default=0))
    pad = " " if flat[:1] == "`" or flat[-1:] == "`" else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
