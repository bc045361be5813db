"""Where a spec's processes find perflearn-load: the tools' directory first on PATH only where
PATH alone would not find the same files, PATH otherwise kept entry for entry."""

import os

import pytest

from perflearn.wire.locate import BIN_ENV, TOOLS, search_path

pytestmark = pytest.mark.parallel  # computes only


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """Both tools as executables in tmp_path/bin, named by $PERFLEARN_WIRE_BIN."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        (bin_dir / tool).write_text("#!/bin/sh\n")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv(BIN_ENV, str(bin_dir))
    return bin_dir


def test_the_tools_directory_goes_first_and_path_is_kept(tools):
    assert search_path("/usr/bin::/bin") == f"{tools}{os.pathsep}/usr/bin::/bin"  # the empty entry kept


def test_unset_path_is_the_systems_default(tools):
    """An unset PATH is the default search path, not the tools' directory alone (ls: not found)."""
    assert search_path(None) == f"{tools}{os.pathsep}{os.defpath}"


def test_path_that_finds_the_same_tools_is_not_reordered(tools):
    given = f"/usr/bin{os.pathsep}{tools}"
    assert search_path(given) == given


def test_a_relative_tools_directory_is_made_absolute(tools, monkeypatch):
    """Relative, it resolved against each process's cwd: a spec with cwd could not start it."""
    monkeypatch.chdir(tools.parent)
    monkeypatch.setenv(BIN_ENV, "bin")
    assert search_path("/usr/bin") == f"{tools.resolve()}{os.pathsep}/usr/bin"


def test_path_is_unchanged_where_the_tools_are_not_found(tmp_path, monkeypatch):
    monkeypatch.setenv(BIN_ENV, str(tmp_path / "nowhere"))
    assert search_path("/usr/bin") == "/usr/bin"
    assert search_path(None) == os.defpath
