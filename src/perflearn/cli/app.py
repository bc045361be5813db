"""The one Typer app. Area modules (core, learn, wire, ...) register commands on it.

Errors: a PerflearnError becomes one line on stderr and its exit code; any
other exception is a bug and is shown as one line too, with the traceback only
under PERFLEARN_DEBUG=1.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

try:  # typer >= 0.24 carries its own copy of click
    from typer._click import exceptions as cx
except ImportError:  # pragma: no cover - older typer on click
    from click import exceptions as cx

from perflearn.errors import PerflearnError, Terminated, UsageError

from . import terminal

DEFAULT_STORE = Path("perflearn.duckdb")


def debug() -> bool:
    return os.environ.get("PERFLEARN_DEBUG", "") not in ("", "0")


class _Group(TyperGroup):
    """Maps perflearn's errors to one line and an exit code (also under CliRunner)."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        """The framework's usage errors (a missing argument, an unknown option, "abc" for
        a number) as one ``error:`` line too, instead of click's four-line usage block."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except cx.NoArgsIsHelpError as exc:  # a bare group: its help, as before
            exc.show()
            sys.exit(exc.exit_code)
        except cx.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx else "perflearn"
            terminal.error(f"{where}: {exc.format_message()} (see {where} --help)")
            sys.exit(exc.exit_code)
        except cx.ClickException as exc:
            terminal.error(exc.format_message())
            sys.exit(exc.exit_code)
        except typer.Abort:
            terminal.error("aborted")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except PerflearnError as exc:
            if debug():
                raise
            terminal.error(str(exc))
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt as exc:
            terminal.error(exc.why if isinstance(exc, Terminated) else "interrupted")
            ctx.exit(exc.exit_code if isinstance(exc, Terminated) else 130)
        except OSError as exc:
            if debug():
                raise
            # pandas and others raise OSError without a filename, their message names the path
            terminal.error(f"{exc.filename}: {exc.strerror or exc}" if exc.filename else str(exc))
            ctx.exit(1)
        except Exception as exc:  # a bug: still one line unless debugging
            if _interrupted_query(exc):  # Ctrl-C while DuckDB worked: an interruption, not a bug
                terminal.error("interrupted")
                ctx.exit(130)
            if debug() or type(exc).__module__.startswith(("typer", "click")):
                raise  # the CLI framework's own exits and usage errors
            terminal.error(f"internal error ({type(exc).__name__}: {exc}); rerun with PERFLEARN_DEBUG=1 for the traceback")
            ctx.exit(70)


def _interrupted_query(exc: Exception) -> bool:
    """DuckDB's answer to a signal that arrived while it ran a query."""
    return type(exc).__name__ == "InterruptException" or (isinstance(exc, RuntimeError)
                                                          and str(exc) == "Query interrupted")


def interrupt_on_sigterm() -> None:
    """SIGTERM and SIGHUP as Ctrl-C: the command's cleanup runs (services it started are
    stopped, the machine's settings restored) and it exits with "terminated" (status 143,
    as a shell reports SIGTERM) or "hung up" (129), where the default action would kill it
    at once and leave them behind (an ssh session that dropped left the manager's cgroup,
    and its run unrecorded). A SIGHUP ignored from the start (``nohup``) stays ignored."""
    import signal

    from perflearn.lifetime import stop_signals, terminate

    for signum in stop_signals():
        signal.signal(signum, terminate)


def check_png(path: Path | None, where: str) -> None:
    """A figure is written to exactly ``path``: refuse, before any work, what would go elsewhere or fail."""
    if path is None:
        return
    if path.suffix.lower() != ".png":  # matplotlib would add ".png" to a path without a suffix
        raise UsageError(f"the figure is a PNG: give a path ending in .png, got {str(path)!r}", where=where)
    if path.is_dir():
        raise UsageError("is a directory; give a file ending in .png", where=str(path))
    if not path.parent.is_dir():
        raise UsageError(f"no such directory {str(path.parent)!r}", where=where)
    refused = unwritable(path.parent)
    if refused:
        raise UsageError(f"cannot write in {str(path.parent)!r} ({refused})", where=where)


def unwritable(folder: Path) -> str | None:
    """Why no file can be made in ``folder``, or None: a file is made there and removed, since
    root passes ``os.access`` in /sys and /proc, and the write failed after the whole run."""
    import tempfile

    try:
        tempfile.NamedTemporaryFile(dir=folder, prefix=".perflearn-").close()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def check_output(path: Path | None, where: str, directory: bool = False) -> None:
    """Refuse, before any work, an output the command could not write at its end: a file
    whose directory does not exist or that is a directory; a directory (``directory``)
    that is a file or lies below one."""
    if path is None:
        return
    if directory:
        ancestor = next((a for a in [path, *path.parents] if a.exists()), None)
        if ancestor is not None and not ancestor.is_dir():
            raise UsageError(f"{str(ancestor)!r} is a file, not a directory", where=where)
        missing = [a for a in [path, *path.parents] if not a.exists()]
        if missing:  # one that cannot be made (/proc/x, a read-only mount) failed after all the work
            try:
                path.mkdir(parents=True)
            except OSError as exc:
                raise UsageError(f"cannot make the directory {str(path)!r}: {exc.strerror}", where=where) from None
            shutil.rmtree(missing[-1])  # made only to know it can be: bad input later must leave nothing
        return
    if path.is_dir():
        raise UsageError(f"{str(path)!r} is a directory; give a file", where=where)
    if not path.parent.is_dir():
        raise UsageError(f"no such directory {str(path.parent)!r}", where=where)


def one_file_each(paths: list[tuple[str, Path | None]]) -> None:
    """Refuse, before any work, one file named by two options: manage's --csv over --store
    wrote CSV text over the store (its experiments lost, exit 0); cluster's -o over --png
    wrote the profiles over the figure."""
    seen: dict[Path, str] = {}
    for option, path in paths:
        if path is None:
            continue
        key = path.resolve()
        if key in seen:
            raise UsageError(f"{option} and {seen[key]} name the same file, {path}: give each its own")
        seen[key] = option


app = typer.Typer(
    cls=_Group,
    name="perflearn",
    help="Learn how a system's knobs drive its performance, and act on it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

StoreOpt = Annotated[
    Path,
    typer.Option("--store", "-s", envvar="PERFLEARN_STORE", help="Results store (DuckDB file).", show_default=True),
]


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if ctx.invoked_subcommand is None and not version:
        terminal.out.print(ctx.get_help())
        raise typer.Exit(0)
    if version:
        from perflearn import __version__

        terminal.out.print(f"perflearn {__version__}")
        raise typer.Exit(0)
