"""JSON Lines from the native tools: one object per line, each with a "type"."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from perflearn.errors import PerflearnError


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
    """The tool's own one-line message, else its exit status."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    msg = lines[-1] if lines else f"exited with status {returncode}"
    prefix = f"{tool}: "
    return PerflearnError(msg[len(prefix):] if msg.startswith(prefix) else msg, where=tool)
