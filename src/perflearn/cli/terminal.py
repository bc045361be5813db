"""All terminal output goes through here: results to stdout, messages to stderr."""

from __future__ import annotations

import errno
import sys
from collections import deque

from rich.console import Console
from rich.markup import escape


class _HungUpSafe:
    """``sys.stdout`` or ``sys.stderr`` as it is at each write (a test's capture too), whose
    writes to a terminal that hung up (EIO) are dropped: the write came before the SIGHUP's
    handler ran, raised, and the run ended with status 1 and no cleanup said, not 129."""

    def __init__(self, name: str):
        self.name = name

    def write(self, text: str) -> int:
        try:
            return getattr(sys, self.name).write(text)
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise
            return len(text)

    def flush(self) -> None:
        try:
            getattr(sys, self.name).flush()
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise

    def __getattr__(self, attr: str):
        return getattr(getattr(sys, self.name), attr)


# Off a terminal (pipes, files, CI logs) tables are not squeezed to 80 columns.
out = Console(file=_HungUpSafe("stdout"), highlight=False, soft_wrap=True,
              width=None if sys.stdout.isatty() else 400)
err = Console(file=_HungUpSafe("stderr"), highlight=False, soft_wrap=True,
              width=None if sys.stderr.isatty() else 400)


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
