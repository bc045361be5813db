"""Test servers and clients for the wire analyzer's golden captures and tests.

`python servers.py http PORT` runs a small HTTP/1.1 server (keep-alive, Content-Length,
chunked responses and request bodies, 100-continue, HEAD). `python servers.py drive
MC_PORT REDIS_PORT HTTP_PORT` drives memcached (binary and text), Redis and the HTTP
server over loopback and prints, as JSON, how many responses each protocol answered.
Standard library only.
"""

from __future__ import annotations

import http.server
import json
import socket
import socketserver
import struct
import sys
import time


# ---------------------------------------------------------------- HTTP server

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length", "0") or 0)
        return self.rfile.read(n) if n else b""

    def _send(self, code: int, body: bytes, head: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/chunked"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"alpha", b"beta" * 100, b"gamma"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path.startswith("/big"):
            self._send(200, b"x" * 80_000)
        elif self.path.startswith("/missing"):
            self._send(404, b"not found")
        else:
            self._send(200, b"hello world\n")

    def do_HEAD(self):
        self._send(200, b"hello world\n", head=True)

    def do_POST(self):
        body = self._body()
        self._send(200, b"got %d bytes\n" % len(body))


class ThreadedHTTP(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve_http(port: int) -> None:
    ThreadedHTTP(("127.0.0.1", port), Handler).serve_forever()


# ---------------------------------------------------------------- clients

def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


class LineReader:
    def __init__(self, s: socket.socket):
        self.s, self.buf = s, b""

    def line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def mc_bin(op: int, key: bytes = b"", value: bytes = b"", extras: bytes = b"", opaque: int = 0) -> bytes:
    body = len(extras) + len(key) + len(value)
    return struct.pack(">BBHBBHIIQ", 0x80, op, len(key), len(extras), 0, 0, body, opaque, 0) + extras + key + value


def mc_bin_read(s: socket.socket) -> tuple[int, int]:
    h = recv_exact(s, 24)
    _, op, _, _, _, status, body, opaque, _ = struct.unpack(">BBHBBHIIQ", h)
    recv_exact(s, body)
    return op, opaque


def drive_memcache_binary(port: int) -> int:
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    answered = 0
    for i in range(20):
        s.sendall(mc_bin(0x01, b"bkey%d" % i, b"v" * (10 + i), extras=struct.pack(">II", 0, 0), opaque=i))
        mc_bin_read(s)
        answered += 1
    for i in range(20):
        s.sendall(mc_bin(0x00, b"bkey%d" % i, opaque=100 + i))
        mc_bin_read(s)
        answered += 1
    s.sendall(mc_bin(0x00, b"nokey", opaque=200))  # a miss is still answered
    mc_bin_read(s)
    answered += 1
    # quiet gets: hits answer, misses do not; the noop closes the batch
    s.sendall(mc_bin(0x09, b"bkey1", opaque=301) + mc_bin(0x09, b"nokey", opaque=302)
              + mc_bin(0x09, b"bkey2", opaque=303) + mc_bin(0x0A, opaque=304))
    got = 0
    while True:
        op, opaque = mc_bin_read(s)
        got += 1
        if op == 0x0A:
            break
    answered += got
    # a value spanning several segments
    s.sendall(mc_bin(0x01, b"bbig", b"z" * 100_000, extras=struct.pack(">II", 0, 0), opaque=400))
    mc_bin_read(s)
    s.sendall(mc_bin(0x00, b"bbig", opaque=401))
    mc_bin_read(s)
    answered += 2
    # pipelined gets in one write
    s.sendall(b"".join(mc_bin(0x00, b"bkey%d" % i, opaque=500 + i) for i in range(10)))
    for _ in range(10):
        mc_bin_read(s)
    answered += 10
    s.close()
    return answered


def drive_memcache_ascii(port: int) -> int:
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    r = LineReader(s)
    answered = 0

    def until_end():
        while True:
            line = r.line()
            if line.startswith(b"VALUE"):
                r.exact(int(line.split()[3]) + 2)
            elif line == b"END":
                return

    for i in range(15):
        s.sendall(b"set akey%d 0 0 %d\r\n%s\r\n" % (i, 5 + i, b"a" * (5 + i)))
        assert r.line() == b"STORED"
        answered += 1
    for i in range(15):
        s.sendall(b"get akey%d\r\n" % i)
        until_end()
        answered += 1
    s.sendall(b"get akey1 akey2 akey3 nokey akey4\r\n")  # multi-key get
    until_end()
    answered += 1
    s.sendall(b"gets akey5\r\n")
    until_end()
    answered += 1
    s.sendall(b"set quiet 0 0 3 noreply\r\nabc\r\n")  # no reply
    s.sendall(b"delete akey0\r\n")
    r.line()
    s.sendall(b"set counter 0 0 1\r\n5\r\n")
    r.line()
    s.sendall(b"incr counter 7\r\n")
    r.line()
    s.sendall(b"touch akey3 100\r\n")
    r.line()
    answered += 4
    big = b"q" * 90_000
    s.sendall(b"set abig 0 0 %d\r\n%s\r\n" % (len(big), big))
    r.line()
    s.sendall(b"get abig\r\n")
    until_end()
    answered += 2
    s.sendall(b"".join(b"get akey%d\r\n" % i for i in range(1, 11)))  # pipelined
    for _ in range(10):
        until_end()
    answered += 10
    s.sendall(b"version\r\n")
    r.line()
    answered += 1
    s.close()
    return answered


def resp(*args: bytes) -> bytes:
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def resp_read(r: LineReader) -> object:
    line = r.line()
    t, rest = line[:1], line[1:]
    if t in (b"+", b"-", b":", b",", b"#", b"_", b"("):
        return rest
    if t in (b"$", b"!", b"="):
        n = int(rest)
        return None if n < 0 else r.exact(n + 2)[:-2]
    if t in (b"*", b"~", b">"):
        n = int(rest)
        return [resp_read(r) for _ in range(max(n, 0))]
    if t == b"%":
        n = int(rest)
        return {i: (resp_read(r), resp_read(r)) for i in range(n)}
    raise ValueError(f"bad RESP line {line!r}")


def drive_redis(port: int) -> int:
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    r = LineReader(s)
    answered = 0
    for i in range(20):
        s.sendall(resp(b"SET", b"rkey%d" % i, b"v" * (i + 1)))
        resp_read(r)
        answered += 1
    # 50 pipelined commands in one write
    s.sendall(b"".join(resp(b"GET", b"rkey%d" % (i % 20)) for i in range(50)))
    for _ in range(50):
        resp_read(r)
    answered += 50
    # CLIENT REPLY OFF: these get no reply; ON answers OK
    s.sendall(resp(b"CLIENT", b"REPLY", b"OFF") + resp(b"SET", b"off1", b"x") + resp(b"INCR", b"offc")
              + resp(b"CLIENT", b"REPLY", b"ON"))
    assert resp_read(r) == b"OK"
    answered += 1
    # CLIENT REPLY SKIP: the next command gets no reply
    s.sendall(resp(b"CLIENT", b"REPLY", b"SKIP") + resp(b"SET", b"skipped", b"y") + resp(b"GET", b"skipped"))
    assert resp_read(r) == b"y"
    answered += 1
    s.sendall(b"PING\r\n")  # inline command
    resp_read(r)
    answered += 1
    big = b"B" * 100_000
    s.sendall(resp(b"SET", b"rbig", big))
    resp_read(r)
    s.sendall(resp(b"GET", b"rbig"))
    assert resp_read(r) == big
    answered += 2
    s.sendall(resp(b"HSET", b"h", b"f1", b"1", b"f2", b"2"))
    resp_read(r)
    s.sendall(resp(b"HELLO", b"3"))  # RESP3 from here on
    resp_read(r)
    s.sendall(resp(b"HGETALL", b"h"))
    resp_read(r)
    s.sendall(resp(b"GET", b"nokey"))  # RESP3 null
    resp_read(r)
    s.sendall(resp(b"NOSUCHCOMMAND"))  # error reply
    resp_read(r)
    answered += 5
    s.close()
    return answered


def http_read(r: LineReader, head: bool = False) -> int:
    status = int(r.line().split()[1])
    headers = {}
    while True:
        line = r.line()
        if not line:
            break
        k, v = line.split(b":", 1)
        headers[k.strip().lower()] = v.strip()
    if status < 200 or head:
        return status
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        while True:
            n = int(r.line().split(b";")[0], 16)
            if n == 0:
                while r.line():
                    pass
                break
            r.exact(n + 2)
    else:
        r.exact(int(headers.get(b"content-length", b"0")))
    return status


def drive_http(port: int) -> int:
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    r = LineReader(s)
    answered = 0
    h = b"Host: 127.0.0.1\r\n"
    for path in (b"/a", b"/b", b"/chunked", b"/missing", b"/big"):
        s.sendall(b"GET %s HTTP/1.1\r\n%s\r\n" % (path, h))
        http_read(r)
        answered += 1
    s.sendall(b"HEAD /a HTTP/1.1\r\n%s\r\n" % h)
    http_read(r, head=True)
    answered += 1
    s.sendall(b"POST /echo HTTP/1.1\r\n%sContent-Length: 11\r\n\r\nhello there" % h)
    http_read(r)
    answered += 1
    # chunked request body
    s.sendall(b"POST /echo HTTP/1.1\r\n%sTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n" % h)
    http_read(r)
    answered += 1
    # three pipelined requests in one write
    s.sendall(b"".join(b"GET /p%d HTTP/1.1\r\n%s\r\n" % (i, h) for i in range(3)))
    for _ in range(3):
        http_read(r)
    answered += 3
    s.close()
    # 100-continue on its own connection: headers, wait for 100, then the body
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    r = LineReader(s)
    s.sendall(b"POST /upload HTTP/1.1\r\n%sExpect: 100-continue\r\nContent-Length: 4\r\n\r\n" % h)
    assert http_read(r) == 100
    s.sendall(b"data")
    http_read(r)
    answered += 1
    s.close()
    return answered


def main() -> None:
    if sys.argv[1] == "http":
        serve_http(int(sys.argv[2]))
        return
    if sys.argv[1] == "drive":
        mc, rd, ht = (int(p) for p in sys.argv[2:5])
        counts = {
            "memcache-binary": drive_memcache_binary(mc),
            "memcache-ascii": drive_memcache_ascii(mc),
            "redis": drive_redis(rd),
            "http": drive_http(ht),
        }
        time.sleep(0.2)
        print(json.dumps(counts, sort_keys=True))
        return
    raise SystemExit(f"usage: {sys.argv[0]} http PORT | drive MC_PORT REDIS_PORT HTTP_PORT")


if __name__ == "__main__":
    main()
