"""JSON Lines from the native tools: one object per line, each with a "type"."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from perflearn.errors import PerflearnError, UsageError

USAGE_EXIT = 2  # the native tools' exit status for a bad argument or value


def parse_line(line: str, where: str) -> dict:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise PerflearnError(f"not a JSON line ({exc.msg}): {line[:80]!r}", where=where) from None
    if not isinstance(obj, dict) or "type" not in obj:
        raise PerflearnError(f"JSON line without a type: {line[:80]!r}", where=where)
    return obj


def objects(lines: Iterable[str], where: str) -> Iterator[dict]:
    """Each non-blank line as its object, as the tool writes it (an error names the line)."""
    for n, line in enumerate(lines, 1):
        if line.strip():
            yield parse_line(line, f"{where} line {n}")


def tool_error(tool: str, returncode: int, stderr: str) -> PerflearnError:
    """The tool's own one-line message, else its exit status. The tools exit 2 for a bad
    argument or value (a ``UsageError``, exit 2 here too) and 1 for a failure."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    msg = lines[-1] if lines else f"exited with status {returncode}"
    prefix = f"{tool}: "
    kind = UsageError if returncode == USAGE_EXIT else PerflearnError
    return kind(msg[len(prefix):] if msg.startswith(prefix) else msg, where=tool)
