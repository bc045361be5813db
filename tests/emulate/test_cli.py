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
    for args in (["--latency", "-2us"], ["--bandwidth", "fast"], ["--overhead", "5"], ["--peer", "nowhere!"]):
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
