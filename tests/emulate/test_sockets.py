"""The socket shim on real programs: OSU-style TCP programs, memcached, bytes unchanged.

Tolerances are loose (a shared 2-core machine); the 1% acceptance is in bench/emu_accuracy.py.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import time

import pytest



def run(cmd, lib, timeout=120, **knobs):
    env = dict(os.environ)
    env["LD_PRELOAD"] = str(lib)
    for key, value in knobs.items():
        env[f"PERFLEARN_EMU_{key.upper()}"] = value
    proc = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc


def best(table, cmd, lib, size, runs=3, **knobs):
    """Lowest median of a few runs: on a shared 2-core machine a run sometimes
    lands its threads badly, with or without emulation."""
    return min(table(run(cmd, lib, **knobs).stdout)[size][1] for _ in range(runs))


@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason="timing on a shared 2-core VM: the base ping-pong itself swings 2-30 us; "
                   "accuracy is measured in bench/emu_accuracy.py; issue 5 stays open")
def test_latency_knob_adds_one_way_latency(table, sock_lib, osu_tcp):
    args = [osu_tcp, "latency", "--min", "8", "--max", "8", "--iters", "2000", "--warmup", "200"]
    base = best(table, args, sock_lib, 8, latency="0")
    added = best(table, args, sock_lib, 8, latency="100us") - base
    # a sanity bound only (accuracy is measured in bench/emu_accuracy.py): seen 74-130 us on this machine
    assert 50 <= added <= 200, f"added {added:.1f} us for 100 us"


@pytest.mark.slow
def test_bandwidth_knob_sets_large_message_rate(table, sock_lib, osu_tcp):
    args = [osu_tcp, "bw", "--min", "262144", "--max", "262144", "--large-iters", "10", "--warmup", "1"]
    mbps = table(run(args, sock_lib, bandwidth="1Gbit").stdout)[262144][1]
    assert 75 <= mbps <= 130, f"{mbps:.1f} MB/s for 125 MB/s"  # above the target would be a bug


def _faults_of(cmd, lib, **knobs) -> int:
    """Minor page faults of a finished child (and its children): counted, not timed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    run(cmd, lib, **knobs)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before


def test_regression_delay_line_buffers_page_faulted_per_message(sock_lib, osu_tcp):
    """Each 64 KiB piece was malloc'd and freed, and glibc trimmed the heap at each free:
    15 page faults a piece, and the copy into the line ran slower than an 8 Gbit/s link."""
    args = [osu_tcp, "bw", "--min", "65536", "--max", "65536", "--iters", "20", "--warmup", "2"]
    pieces = 22 * 64  # 22 windows of 64 from the measuring end; the first fills the line once (16 pages a piece)
    native = _faults_of(args, sock_lib)
    paced = _faults_of(args, sock_lib, bandwidth="8Gbit")
    assert paced - native < 3 * pieces, f"{paced - native} more page faults for {pieces} pieces"


@pytest.mark.slow
def test_latency_overlaps_like_a_wire(table, sock_lib, osu_tcp):
    """A window of 64 messages pays L about once, not 64 times (InterSense's spin would)."""
    args = [osu_tcp, "bw", "--min", "1024", "--max", "1024", "--iters", "20", "--warmup", "2"]
    mbps = table(run(args, sock_lib, latency="200us").stdout)[1024][1]
    per_window_us = 64 * 1024 / mbps  # MB/s = bytes/us
    assert per_window_us < 64 * 200 / 4, f"window took {per_window_us:.0f} us: latency serialised the sends"


@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason="known defect: with a bandwidth limit, 8 B ping-pongs sometimes take ~30 us "
                   "longer (seen in 2 of 3 runs on a quiet machine); issue 5 stays open for it")
def test_bandwidth_knob_leaves_small_messages_alone(table, sock_lib, osu_tcp):
    args = [osu_tcp, "latency", "--min", "8", "--max", "8", "--iters", "2000"]
    base = best(table, args, sock_lib, 8)
    paced = best(table, args, sock_lib, 8, bandwidth="100Mbit")
    assert paced - base < 20, f"{base:.1f} -> {paced:.1f} us"


@pytest.mark.slow
def test_overhead_is_sender_time_per_message(table, sock_lib, osu_tcp):
    """o is paid per message by the sender: a window of 64 sends takes >= 64 o."""
    args = [osu_tcp, "bw", "--min", "64", "--max", "64", "--iters", "20", "--warmup", "2"]
    mbps = table(run(args, sock_lib, overhead="50us").stdout)[64][1]
    per_window_us = 64 * 64 / mbps
    assert per_window_us >= 64 * 50 * 0.95


@pytest.mark.parametrize(
    "latency,overhead,bandwidth", [("0", "0", "0"), ("30us", "0", "0"), ("0", "2us", "0"), ("0", "0", "3Gbit"),
                                   ("40us", "1us", "1Gbit")]
)  # fmt: skip
def test_bytes_never_change(sock_lib, osu_tcp, latency, overhead, bandwidth):
    out = run([osu_tcp, "check", "--bytes", "3000000"], sock_lib, latency=latency, overhead=overhead,
              bandwidth=bandwidth).stdout  # fmt: skip
    assert "tcp ok, udp ok, peer ok" in out


def test_bad_environment_disables_with_one_line(sock_lib, osu_tcp):
    proc = run([osu_tcp, "check", "--bytes", "100000"], sock_lib, latency="-3us")
    lines = [l for l in proc.stderr.splitlines() if l.startswith("perflearn-emu:")]
    assert len(lines) == 1  # once, at load (forked children share it)
    assert "PERFLEARN_EMU_LATENCY=-3us" in lines[0]


def test_peer_filter_skips_other_sockets(table, sock_lib, osu_tcp):
    proc = run([osu_tcp, "latency", "--min", "1", "--max", "1", "--iters", "50", "--warmup", "0"], sock_lib,
               latency="5ms", peers="127.0.0.1:1", verbose="1")  # fmt: skip
    assert "emulated 0 messages" in proc.stderr
    assert table(proc.stdout)[1][1] < 1000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_memcached(lib, latency):
    """A memcached preloaded with the emulator at ``latency``, and a connection to it."""
    port = _free_port()
    env = dict(os.environ, LD_PRELOAD=str(lib), PERFLEARN_EMU_LATENCY=latency,
               PERFLEARN_EMU_PEERS=f":{port}")  # fmt: skip
    srv = subprocess.Popen(["memcached", "-u", "root", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "2"],
                           env=env, stderr=subprocess.PIPE)  # fmt: skip
    for _ in range(200):
        try:
            c = socket.create_connection(("127.0.0.1", port))
            break
        except OSError:
            time.sleep(0.02)
    else:
        srv.terminate()
        raise AssertionError("memcached did not start")
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return srv, c


def _memcached_rtts(lib, latencies, size=64, n=300):
    """Median get round trip (us) of a memcached per latency, the requests alternating
    between them: paired in time, so a slow spell of the host lands on every one alike
    (one after the other, a 200-us delay once read 138 us over a base measured slower)."""
    started = [_start_memcached(lib, latency) for latency in latencies]
    try:
        value = b"v" * size
        want = b"VALUE k 0 %d\r\n%s\r\nEND\r\n" % (size, value)
        for _, c in started:
            c.sendall(b"set k 0 0 %d\r\n%s\r\n" % (size, value))
            assert c.recv(100) == b"STORED\r\n"
        times = [[] for _ in started]
        for _ in range(n):
            for k, (_, c) in enumerate(started):
                t0 = time.perf_counter()
                c.sendall(b"get k\r\n")
                got = b""
                while len(got) < len(want):
                    chunk = c.recv(65536)
                    assert chunk
                    got += chunk
                times[k].append(time.perf_counter() - t0)
                assert got == want
        return [sorted(t)[len(t) // 2] * 1e6 for t in times]
    finally:
        for srv, c in started:
            c.close()
            srv.terminate()
            srv.wait(10)


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("memcached"), reason="memcached not installed")
def test_memcached_epoll_server_under_latency(sock_lib):
    """Only the server is preloaded: its replies are late by L, the bytes intact."""
    base, slow = _memcached_rtts(sock_lib, ["0", "200us"])
    assert 150 <= slow - base <= 400, f"{base:.0f} -> {slow:.0f} us"


def test_regression_fork_child_lost_delay_line_wakeups(sock_lib, osu_tcp):
    """A forked child inherited the parent's condition variables with a sleeping
    waiter in them, which swallowed the child's wake-ups: its UDP replies stayed
    queued and the parent timed out.  The child now re-initialises them."""
    for _ in range(6):
        out = run([osu_tcp, "check", "--bytes", "500000"], sock_lib, timeout=60, latency="30us").stdout
        assert "udp ok" in out


@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason="timing on a shared 2-core VM: the base ping-pong itself swings 2-30 us; "
                   "accuracy is measured in bench/emu_accuracy.py; issue 5 stays open")
def test_regression_latency_kept_for_small_messages_under_a_bandwidth_limit(table, sock_lib, osu_tcp):
    """Small messages may run ahead of the paced wire, but not ahead of the
    latency: with both knobs set, an 8 B message went out with no delay at all."""
    args = [osu_tcp, "latency", "--min", "8", "--max", "8", "--iters", "1000", "--warmup", "100"]
    base = best(table, args, sock_lib, 8)
    both = best(table, args, sock_lib, 8, latency="100us", bandwidth="1Gbit")
    assert 80 <= both - base <= 150, f"{base:.1f} -> {both:.1f} us"


_FLUSH_CLIENT = r"""
import socket, sys, threading, time
port = int(sys.argv[1])
c = socket.create_connection(("127.0.0.1", port))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
def recv_exact(n):
    got = b""
    while len(got) < n:
        chunk = c.recv(n - len(got))
        assert chunk, "closed"
        got += chunk
    return got
# a ping-pong: the thread writes its own messages before it blocks in recv (and becomes lazy)
for i in range(300):
    c.sendall(b"%08d" % i)
    assert recv_exact(8) == b"%08d" % i
# then a sender that does not block: a burst, a sleep (no shim call), from two threads
t0 = time.monotonic()
def burst(base):
    for i in range(100):
        c.sendall(b"%08d" % (base + i))
threads = [threading.Thread(target=burst, args=(b,)) for b in (10000, 20000)]
for t in threads: t.start()
for t in threads: t.join()
time.sleep(0.02)
got = recv_exact(8 * 200)
seen = sorted(got[i:i + 8] for i in range(0, len(got), 8))
assert seen == sorted(b"%08d" % (b + i) for b in (10000, 20000) for i in range(100)), "bytes changed"
for b in (10000, 20000):  # each thread's own messages keep their order
    mine = [got[i:i + 8] for i in range(0, len(got), 8) if int(got[i:i + 8]) // 10000 == b // 10000]
    assert mine == [b"%08d" % (b + i) for i in range(100)], "order changed"
c.close()
print("ok")
"""


def own_writes(line: str) -> int:
    """Messages the verbose line says their own thread wrote (as it blocked or polled)."""
    return int(line.split(" written by their own thread")[0].split()[-1])


def test_thread_about_to_block_writes_its_own_and_the_rest_still_leaves(sock_lib, tmp_path):
    """A ping-pong thread writes its delayed messages itself before it blocks in recv
    (verbose: 'written by their own thread as it blocked or polled'); after it, messages of threads that
    do not block soon (a burst, then a sleep the shim does not see) still leave through
    the delay-line thread, in order per thread, bytes intact."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def echo():
        conn, _ = srv.accept()
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    import threading

    t = threading.Thread(target=echo, daemon=True)
    t.start()
    script = tmp_path / "client.py"
    script.write_text(_FLUSH_CLIENT)
    import sys

    proc = run([sys.executable, script, port], sock_lib, timeout=60, latency="30us", verbose="1",
               peers=f"127.0.0.1:{port}")  # fmt: skip
    srv.close()
    assert proc.stdout.strip() == "ok"
    line = [l for l in proc.stderr.splitlines() if "emulated" in l][-1]
    flushed = own_writes(line)
    assert flushed >= 250, line  # the ping-pong's 300 went (nearly) all that way


def test_regression_polling_thread_writes_its_own_delayed_messages(table, sock_lib, osu_tcp):
    """A thread that polls (recv with MSG_DONTWAIT) never blocks, so it never wrote its
    delayed messages before blocking, and the delay-line thread that did shared a CPU
    with a thread that does not yield: each message left a scheduler slice late (2 ms
    half round trip for 10 us here).  A polling call now writes its own thread's due
    messages (counted by the verbose line, not timed)."""
    args = [osu_tcp, "latency", "--min", "8", "--max", "8", "--iters", "500", "--warmup", "50", "--busy", "1"]
    if (os.cpu_count() or 1) >= 2:
        args += ["--cpus", "0,1"]
    proc = run(args, sock_lib, latency="10us", verbose="1")
    for line in [l for l in proc.stderr.splitlines() if "emulated" in l]:
        sent = int(line.split(" emulated ")[1].split()[0])
        own = own_writes(line)
        assert own >= 0.9 * sent, line
    half_rtt = table(proc.stdout)[8][1]
    assert half_rtt < 500, f"{half_rtt:.0f} us half round trip for 10 us of latency (was 2000 with the bug)"


_CLOSE_CLIENT = r'''
import os, socket, sys, time
a = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
fd = a.fileno()
a.sendall(b"x" * 1_000_000)  # queued: paced, so the delay-line thread writes most of it
time.sleep(0.02)  # mid-burst (a sleep the shim does not see): the helper is writing
def link(path):
    try:
        return os.readlink(path)
    except OSError:  # the listing's own descriptor, gone
        return ""
tables = 0
for task in os.listdir("/proc/self/task"):
    fds = f"/proc/self/task/{task}/fd"
    tables += any("pidfd" in link(f"{fds}/{f}") for f in os.listdir(fds))
a.close()  # the queue drains first (no byte lost), and the helper lets go of its duplicate
b = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
b.sendall(b"second")
b.close()
print(tables)
'''


@pytest.mark.parametrize("table_kind", ["own", "shared"])
def test_helper_writes_through_its_own_descriptors_and_lets_go_on_close(sock_lib, tmp_path, table_kind):
    """The delay-line thread has a descriptor table of its own (a second thread would make
    the program's every socket call slower: BENCHMARKS.md, session 20) and writes through
    duplicates it takes with pidfd_getfd. Closing a socket must still close it at once (the
    peer sees EOF, having got every byte), and the number the next socket reuses must
    reach the new socket, not the old one."""
    import sys
    import threading

    got: dict[int, bytearray] = {}
    listeners = []
    for i in range(2):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        listeners.append(srv)
        got[i] = bytearray()

    def drain(i):
        conn, _ = listeners[i].accept()
        with conn:
            while data := conn.recv(65536):
                got[i].extend(data)

    threads = [threading.Thread(target=drain, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    script = tmp_path / "client.py"
    script.write_text(_CLOSE_CLIENT)
    ports = [s.getsockname()[1] for s in listeners]
    proc = run([sys.executable, script, *ports], sock_lib, timeout=60, latency="200us", bandwidth="100Mbit",
               helper_table=table_kind)
    for t in threads:
        t.join(timeout=10)  # EOF: a duplicate left open would keep the first socket open for ever
        assert not t.is_alive(), "no EOF after close"
    for s in listeners:
        s.close()
    assert bytes(got[0]) == b"x" * 1_000_000 and bytes(got[1]) == b"second"
    release = tuple(int(v) for v in os.uname().release.split(".")[:2])
    own = table_kind == "own" and release >= (5, 9)  # pidfd_getfd, close_range; "shared": the table of old
    assert int(proc.stdout.split()[0]) == (1 if own else 0), proc.stdout
