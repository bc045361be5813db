"""Fixtures for the wire analyzer: built tools, free loopback ports, real servers."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perflearn.errors import UnsupportedError
from perflearn.wire import locate

WIRE_DATA = Path(__file__).parent.parent / "data" / "wire"


@pytest.fixture(scope="session")
def wire_tools():
    try:
        return locate("perflearn-sniff"), locate("perflearn-load")
    except UnsupportedError as exc:
        pytest.skip(f"wire tools not built ({exc}); run make -C native/wire build")


@pytest.fixture
def can_capture():
    if os.geteuid() != 0:
        pytest.skip("live capture needs root")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


class Server:
    def __init__(self, cmd: list[str], port: int):
        self.port = port
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port, self.proc)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _need(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        pytest.skip(f"{binary} not installed")
    return path


@pytest.fixture
def memcached():
    port = free_port()
    cmd = [_need("memcached"), "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "2", "-m", "64"]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    s = Server(cmd, port)
    yield s
    s.stop()


@pytest.fixture
def redis(tmp_path):
    port = free_port()
    s = Server([_need("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(tmp_path)], port)
    yield s
    s.stop()


@pytest.fixture
def http_server():
    port = free_port()
    s = Server([sys.executable, str(WIRE_DATA / "servers.py"), "http", str(port)], port)
    yield s
    s.stop()
