"""Line numbers for keys of a TOML file, so errors can name the user's line.

tomllib gives positions only for syntax errors; this maps dotted key paths to the
line where they are written, by a light scan of table headers and ``key =`` lines.
Keys inside inline tables resolve to the line of their enclosing key.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\.\"' ]+?)\s*=")


def _split(dotted: str) -> tuple[str, ...]:
    parts = re.findall(r'"([^"]*)"|\'([^\']*)\'|([^.\s]+)', dotted)
    return tuple(next(p for p in group if p) for group in parts)


class Positions:
    def __init__(self, text: str):
        self._lines: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        for number, line in enumerate(text.splitlines(), start=1):
            header = _HEADER.match(line)
            if header:
                table = _split(header.group(1))
                self._lines.setdefault(table, number)
                continue
            key = _KEY.match(line)
            if key:
                self._lines.setdefault(table + _split(key.group(1)), number)

    def line(self, path: tuple[str, ...]) -> int | None:
        """The line of ``path``, or of its nearest written ancestor."""
        path = tuple(str(p) for p in path)
        while path:
            if path in self._lines:
                return self._lines[path]
            path = path[:-1]
        return None
