"""All terminal output goes through here: results to stdout, messages to stderr."""

from __future__ import annotations

from collections import deque

from rich.console import Console
from rich.markup import escape

import sys

# Off a terminal (pipes, files, CI logs) tables are not squeezed to 80 columns.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 400)
err = Console(stderr=True, highlight=False, soft_wrap=True, width=None if sys.stderr.isatty() else 400)


def error(message: str) -> None:
    # the message is text, not markup: "[sampling]" in it must print as written
    err.print(f"[bold red]error:[/] {escape(message)}", markup=True)


# the latest warnings, for a report that says what the terminal said (evaluate.html); a command
# that writes one clears it when it starts
warned: deque[str] = deque(maxlen=100)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}", markup=True)
    warned.append(message)


def info(message: str) -> None:
    err.print(message, markup=False)
