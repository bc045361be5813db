"""The one root exception, and the few kinds the CLI maps to exit codes.

Every user-facing error is one line naming what is wrong and where (file, key,
line). ``perflearn.cli`` prints ``str(error)`` and exits; tracebacks only with
PERFLEARN_DEBUG=1.
"""

from __future__ import annotations

import signal


class PerflearnError(Exception):
    """Root of every error perflearn raises on purpose.

    ``where`` is the user's own location (``spec.toml:12``, ``knobs.bs.values``,
    ``data.csv column 3``); it prefixes the message.
    """

    exit_code = 1

    def __init__(self, message: str, where: str | None = None):
        self.message = message
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class SpecError(PerflearnError):
    """An experiment spec is malformed or asks for something impossible."""

    exit_code = 2


class UsageError(PerflearnError):
    """A command-line argument or input file is wrong."""

    exit_code = 2


class StoreError(PerflearnError):
    """The results store cannot be opened, is of another schema, or lacks data."""


class UnknownExperiment(StoreError):
    """The store has no experiment of the name given, or there is no store where given: the
    user's input, as a bad flag is."""

    exit_code = 2


class UnsupportedError(PerflearnError):
    """This machine lacks a feature (PMU, cpufreq, cgroup controller, ethtool)."""


class RunnerError(PerflearnError):
    """The runner could not go on (other than a workload failing, which is recorded)."""


class CommandFailed(PerflearnError):
    """The user's command (``emulate -- CMD``, ``detect watch -- CMD``) failed: perflearn
    exits with its exit status (128 + N when signal N ended it), as a shell would."""

    def __init__(self, command: list[str], returncode: int):
        self.exit_code = returncode if returncode >= 0 else 128 - returncode
        how = f"exit status {returncode}" if returncode >= 0 else f"signal {-returncode}"
        super().__init__(f"{command[0]} ended with {how}")


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP: a dropped ssh session), taken as Ctrl-C (cleanup runs) but told
    apart: the exit status is 128 + the signal (143, 129) as a shell reports it, not 130."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signum)
        self.signum = signum
        self.exit_code = 128 + signum
        self.why = "hung up" if signum == signal.SIGHUP else "terminated"
