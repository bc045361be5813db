"""`perflearn emulate`: run a program below an emulated interconnect.

    perflearn emulate --latency 2us --overhead 0 --bandwidth 10Gbit -- COMMAND...
    perflearn emulate --mpi --latency 5us -- mpirun -n 2 ./app
    perflearn emulate build --mpicc /usr/bin/mpicc
"""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer
from typer.core import TyperGroup

from perflearn import emulate as emu
from perflearn.cli import terminal
from perflearn.cli.app import app, interrupt_on_sigterm
from perflearn.errors import UnsupportedError, UsageError
from perflearn.lifetime import end_group, release, start_group


_MPI_LAUNCHERS = ("mpirun", "mpiexec", "orterun", "prterun", "srun", "mpiexec.hydra")


class _CommandOrSub(TyperGroup):
    """`emulate build` is a subcommand; anything else after the options is the program to run."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        # after "--" everything is the program, even one named like a subcommand ("build");
        # read before parsing, which consumes ``args``
        after_dashes = args[args.index("--") + 1:] if "--" in args else None
        rest = super().parse_args(ctx, args)
        protected = list(getattr(ctx, "_protected_args", []) or [])
        if protected and (protected[0] not in self.commands or after_dashes == protected + list(ctx.args)):
            ctx.args = protected + list(ctx.args)
            ctx._protected_args = []  # type: ignore[attr-defined]
            return ctx.args
        return rest


emulate_app = typer.Typer(
    cls=_CommandOrSub,
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": False, "allow_interspersed_args": False},
    help="Run COMMAND with interconnect latency, overhead and bandwidth knobs (LogGP L, o, 1/G).",
)
app.add_typer(emulate_app, name="emulate")


@emulate_app.callback()
def emulate(
    ctx: typer.Context,
    latency: Annotated[Optional[str], typer.Option(help="One-way latency added per message, e.g. 2us.")] = None,
    overhead: Annotated[Optional[str], typer.Option(help="Sender CPU time per message, e.g. 500ns.")] = None,
    bandwidth: Annotated[Optional[str], typer.Option(help="Link rate, e.g. 10Gbit, 1.25GB/s; 0 = unlimited.")] = None,
    peer: Annotated[
        Optional[list[str]],
        typer.Option(metavar="ADDR[:PORT]", help="Only sockets to/from ADDR[:PORT] (repeatable), e.g. :11211."),
    ] = None,
    threshold: Annotated[Optional[str], typer.Option(help="Messages below this size are not paced (64KiB).")] = None,
    mpi: Annotated[bool, typer.Option("--mpi", help="Preload the PMPI shim instead of the socket shim.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the environment instead of running.")] = False,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    command = list(ctx.args)
    layer = "mpi" if mpi else "sockets"
    # validate everything before launching anything
    env = emu.variables(latency=latency, overhead=overhead, bandwidth=bandwidth, peers=peer or None,
                        threshold=threshold, layer=layer)
    # inherited PERFLEARN_EMU_* are read by the library too: checked here like the options
    # (a bad one would disable emulation, exit 0), and shown by --dry-run; perflearn's own win
    kept, unknown = emu.inherited(os.environ, env)
    for name in unknown:
        terminal.warn(f"{name} (inherited from the environment) is not a variable of the emulator (a typo?); "
                      "not passed on")
    env.update(kept)
    try:
        library = str(emu.locate_library(layer))
    except UnsupportedError as exc:
        if not dry_run:
            raise
        library = str(emu.library_path(layer))  # --dry-run prints what a run would preload
        terminal.warn(f"{exc.message}; a run would stop here")
    preload = os.environ.get("LD_PRELOAD")
    env["LD_PRELOAD"] = f"{library}:{preload}" if preload else library  # the user's own preloads stay
    if dry_run:
        for key, value in env.items():
            terminal.out.print(f"{key}={value}")
        return
    if not command:
        raise UsageError("no command to run (perflearn emulate [OPTIONS] -- COMMAND...)")
    if not mpi and os.path.basename(command[0]) in _MPI_LAUNCHERS:
        # its ranks on one node talk through shared memory, which no socket call carries
        terminal.warn("the socket shim does not slow MPI between ranks of one node (shared memory); "
                      "for an MPI program use --mpi")
    own = (emu.ENV_LIB, emu.ENV_MPI_LIB)
    full = {k: v for k, v in os.environ.items() if not k.startswith("PERFLEARN_EMU_") or k in own}  # as shown
    full.update(env)
    interrupt_on_sigterm()
    try:
        # its own process group: Ctrl-C, SIGTERM or SIGKILL of perflearn ends what the command
        # started too (an mpirun's ranks, a shell's background jobs)
        proc = start_group(command, env=full)
    except FileNotFoundError:
        raise UsageError(f"command not found: {command[0]}") from None
    try:
        proc.wait()
    except BaseException:  # interrupted: not its background jobs either (a finished command's are its own)
        end_group(proc)
        raise
    finally:
        release(proc)
    raise SystemExit(proc.returncode if proc.returncode >= 0 else 128 - proc.returncode)


@emulate_app.command("build")
def build(
    mpicc: Annotated[Optional[str], typer.Option(help="The MPI compiler wrapper of the MPI in use.")] = None,
) -> None:
    """Build the PMPI shim (and the MPI validation program) against MPICC."""
    path = emu.build_mpi(mpicc)
    terminal.out.print(str(path))
