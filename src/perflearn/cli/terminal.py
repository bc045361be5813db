"""All terminal output goes through here: results to stdout, messages to stderr."""

from __future__ import annotations

from rich.console import Console

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def error(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}", markup=True)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {message}", markup=True)


def info(message: str) -> None:
    err.print(message, markup=False)
