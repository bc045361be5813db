"""`perflearn emulate` through typer's CliRunner."""

from __future__ import annotations

import os

from typer.testing import CliRunner

from perflearn.cli import app

runner = CliRunner()


def test_dry_run_prints_environment(sock_lib):
    r = runner.invoke(app, ["emulate", "--latency", "2us", "--overhead", "0", "--bandwidth", "10Gbit", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "PERFLEARN_EMU_LATENCY=2000ns" in r.stdout
    assert "PERFLEARN_EMU_BANDWIDTH=10000000000bit" in r.stdout
    assert "LD_PRELOAD=" in r.stdout


def test_runs_the_command_and_passes_its_exit_code(sock_lib, tmp_path):
    marker = tmp_path / "ran"
    r = runner.invoke(app, ["emulate", "--latency", "1us", "--", "sh", "-c", f"touch {marker}; exit 3"])
    assert r.exit_code == 3
    assert marker.exists()


def test_command_sees_the_emulation_environment(sock_lib, tmp_path):
    out = tmp_path / "env"
    r = runner.invoke(app, ["emulate", "--bandwidth", "1Gbit", "--peer", ":11211", "--", "sh", "-c", f"env > {out}"])
    assert r.exit_code == 0
    text = out.read_text()
    assert "PERFLEARN_EMU_BANDWIDTH=1000000000bit" in text
    assert "PERFLEARN_EMU_PEERS=:11211" in text
    assert "libperflearn_emu.so" in text


def test_bad_values_are_rejected_before_launch(sock_lib, tmp_path):
    marker = tmp_path / "ran"
    for args in (["--latency", "-2us"], ["--bandwidth", "fast"], ["--overhead", "5"], ["--peer", "nowhere!"],
                 ["--latency", "0.4ns"], ["--bandwidth", "1Gbs"]):
        r = runner.invoke(app, ["emulate", *args, "--", "touch", str(marker)])
        assert r.exit_code == 2, (args, r.output)
        assert not marker.exists()


def test_no_command_is_a_usage_error(sock_lib):
    r = runner.invoke(app, ["emulate", "--latency", "1us"])
    assert r.exit_code == 2
    assert "no command" in r.output


def test_missing_command_reports_one_line(sock_lib):
    r = runner.invoke(app, ["emulate", "--", "/nonexistent/program"])
    assert r.exit_code == 2
    assert "command not found" in r.output


def test_build_rejects_a_missing_compiler():
    r = runner.invoke(app, ["emulate", "build", "--mpicc", "/nonexistent/mpicc"])
    assert r.exit_code == 2
    assert "no such MPI compiler" in r.output


def test_mpi_layer_preloads_the_pmpi_shim(mpi_bits):
    r = runner.invoke(app, ["emulate", "--mpi", "--latency", "5us", "--dry-run"])
    assert r.exit_code == 0
    assert "libperflearn_emu_mpi.so" in r.stdout


def test_after_dashes_a_program_named_like_the_subcommand_is_run(sock_lib, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    program = tmp_path / "build"
    program.write_text(f"#!/bin/sh\ntouch {marker}\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    r = runner.invoke(app, ["emulate", "--latency", "1us", "--", "build"])
    assert r.exit_code == 0, r.output
    assert marker.exists()  # the user's program, not `emulate build` (the shim's rebuild)


def test_peers_the_library_cannot_read_are_rejected_before_launch(sock_lib, tmp_path):
    """Review, session 21: these passed the CLI; the library disabled itself, the program ran
    natively and emulate exited 0."""
    marker = tmp_path / "ran"
    for peer in ("abc:11211", "[abc]:80", "beef:"):
        r = runner.invoke(app, ["emulate", "--latency", "2us", "--peer", peer, "--", "touch", str(marker)])
        assert r.exit_code == 2, (peer, r.output)
        assert "is not an IP address" in r.output and not marker.exists()


def test_inherited_emulator_variables_are_checked_shown_and_overridden(sock_lib, tmp_path, monkeypatch):
    """Review, session 21: PERFLEARN_EMU_PEERS=abc:1 in the environment disabled emulation
    (exit 0) while --dry-run showed a clean environment."""
    from perflearn import emulate as emu

    monkeypatch.delenv(emu.ENV_LIB, raising=False)  # perflearn's own: passed on, not the library's
    marker = tmp_path / "ran"
    monkeypatch.setenv("PERFLEARN_EMU_PEERS", "abc:1")
    r = runner.invoke(app, ["emulate", "--latency", "2us", "--", "touch", str(marker)])
    assert r.exit_code == 2 and not marker.exists()
    assert "PERFLEARN_EMU_PEERS (inherited from the environment): 'abc' in 'abc:1' is not an IP address" in r.output
    monkeypatch.setenv("PERFLEARN_EMU_PEERS", ":6379")
    monkeypatch.setenv("PERFLEARN_EMU_LATENCY", "9us")  # perflearn's own wins
    monkeypatch.setenv("PERFLEARN_EMU_TYPO", "1")
    r = runner.invoke(app, ["emulate", "--latency", "2us", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "PERFLEARN_EMU_PEERS=:6379" in r.stdout and "PERFLEARN_EMU_LATENCY=2000ns" in r.stdout
    assert "PERFLEARN_EMU_TYPO" not in r.stdout and "PERFLEARN_EMU_TYPO (inherited" in r.stderr
    out = tmp_path / "env"
    r = runner.invoke(app, ["emulate", "--latency", "2us", "--", "sh", "-c", f"env > {out}"])
    assert r.exit_code == 0, r.output
    seen = dict(line.split("=", 1) for line in out.read_text().splitlines() if line.startswith("PERFLEARN_EMU_"))
    assert seen == {"PERFLEARN_EMU_PEERS": ":6379", "PERFLEARN_EMU_LATENCY": "2000ns",
                    "PERFLEARN_EMU_OVERHEAD": "0ns", "PERFLEARN_EMU_BANDWIDTH": "0"}  # what --dry-run showed


def test_dry_run_needs_no_built_library(tmp_path, monkeypatch):
    """Review, session 21: --dry-run refused without the build, and its hint was relative."""
    from perflearn import emulate as emu

    monkeypatch.delenv(emu.ENV_LIB, raising=False)
    monkeypatch.setattr(emu, "_native_dir", lambda: tmp_path / "emu")
    r = runner.invoke(app, ["emulate", "--latency", "2us", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert f"LD_PRELOAD={tmp_path / 'emu' / 'build' / 'libperflearn_emu.so'}" in r.stdout
    assert "PERFLEARN_EMU_LATENCY=2000ns" in r.stdout
    assert f"is not built (run `make -C {tmp_path / 'emu'} build`)" in r.stderr
    r = runner.invoke(app, ["emulate", "--latency", "2us", "--", "true"])  # a run does stop
    assert r.exit_code == 1 and "is not built" in r.output


def test_help_names_the_peer_value(sock_lib):
    r = runner.invoke(app, ["emulate", "--help"])
    assert "--peer ADDR[:PORT]" in r.stdout and "list[str]" not in r.stdout


def test_mpi_launcher_without_mpi_layer_warns(sock_lib, tmp_path, monkeypatch):
    launcher = tmp_path / "mpirun"
    launcher.write_text("#!/bin/sh\nexit 0\n")
    launcher.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    r = runner.invoke(app, ["emulate", "--latency", "1us", "--", "mpirun", "-n", "2", "./app"])
    assert r.exit_code == 0, r.output
    assert "does not slow MPI between ranks of one node" in r.stderr and "use --mpi" in r.stderr
    r = runner.invoke(app, ["emulate", "--latency", "1us", "--", "sh", "-c", "exit 0"])
    assert "warning" not in r.stderr
