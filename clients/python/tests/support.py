"""Test helpers: a scripted fake server and the real server binary."""

from __future__ import annotations

import json
import os
import queue
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import unittest
from typing import List, Optional

import monolock
import monolock.aio

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def acquired(token: int) -> bytes:
    return bytes([0x12]) + token.to_bytes(8, "big")


WAITING = bytes([0x11])


def error(code: int, reason: str = "") -> bytes:
    raw = reason.encode()
    return bytes([0x13, code, len(raw)]) + raw


def held_past(lock: monolock.Lock, t: float, timeout: float = 10.0) -> bool:
    """Waits until the server has answered a request the lock sent at
    monotonic time t or later (its give-up deadline has moved to t + 0.8 ×
    lease or beyond): the server kept the lock at least until t. An event,
    not a sleep: False if it did not happen within timeout or the lock
    ended."""
    s = lock._session
    return lock._wait(lambda: s.deadline >= t + s.timeout, timeout)


async def aheld_past(lock: monolock.aio.Lock, t: float, timeout: float = 10.0) -> bool:
    """held_past for the asyncio client; t on the event loop's clock."""
    s = lock._conn.session
    return await lock._conn.wait_for(lambda: s.deadline >= t + s.timeout, timeout) and not s.ended


def _openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d: str) -> None:
    """A CA, a server certificate for 127.0.0.1, a client certificate and an
    expired one (client-expired), in d."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    _openssl("req", "-x509", "-new", *ec, "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "1",
             "-subj", "/CN=test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign", cwd=d)
    for name, ext, days in (
        ("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n", "1"),
        ("client", "subjectAltName=URI:spiffe://test/worker\nextendedKeyUsage=clientAuth\n", "1"),
        ("client-expired", "subjectAltName=URI:spiffe://test/worker\nextendedKeyUsage=clientAuth\n", "-1"),
    ):
        _openssl("req", "-new", *ec, "-keyout", f"{name}-key.pem", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
                 "-CAcreateserial", "-days", days, "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)


class FakeServer:
    """A listener on 127.0.0.1 port 0; each accepted connection goes to a
    queue for the test to script. With ssl_context (a server context) each
    connection completes the TLS handshake first; one whose handshake fails
    (the context refused the client's certificate) is closed and not
    queued."""

    def __init__(self, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.conns: "queue.Queue[socket.socket]" = queue.Queue()
        self.accepted: List[socket.socket] = []
        self.refused: "queue.Queue[ssl.SSLError]" = queue.Queue()
        self._ssl = ssl_context
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            c.settimeout(10)
            self.accepted.append(c)
            if self._ssl is not None:
                try:
                    c = self._ssl.wrap_socket(c, server_side=True)
                except ssl.SSLError as e:
                    c.close()
                    self.refused.put(e)
                    continue
                except OSError:
                    c.close()
                    continue
                self.accepted.append(c)
            self.conns.put(c)

    def next(self, timeout: float = 10) -> socket.socket:
        return self.conns.get(timeout=timeout)

    @staticmethod
    def read_acquire(c: socket.socket) -> bytes:
        head = _read_exact(c, 8)
        return head + _read_exact(c, int.from_bytes(head[6:8], "big"))

    def close(self) -> None:
        self.sock.close()
        for c in self.accepted:
            c.close()


def rss_kib() -> Optional[int]:
    """This process's resident set size in KiB, None where /proc is not there."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def tcp_closed(c: socket.socket, timeout: float = 10.0) -> bool:
    """Whether the peer of the server-side TLS socket c closed the TCP
    connection itself (not just sent close_notify) within timeout: reads the
    raw bytes under the TLS layer until the end of the stream."""
    raw = socket.socket(fileno=os.dup(c.fileno()))
    raw.settimeout(timeout)
    try:
        while raw.recv(4096):
            pass
        return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True
    finally:
        raw.close()


RELEASE = bytes([0x03])

# The states of /proc/net/tcp a connection's side passes through when it sent
# the first FIN: FIN_WAIT1, FIN_WAIT2, TIME_WAIT, CLOSING.
_ACTIVE_CLOSE_STATES = {"04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT", "0B": "CLOSING"}


def time_wait_from(sockname: "tuple[str, int]", peername: "tuple[str, int]") -> List[str]:
    """The entries of /proc/net/tcp and tcp6 whose local port is the
    client's (sockname[1]) and remote port the server's (peername[1]), in
    TIME_WAIT or a state that leads to it (the side that sent the first FIN):
    what the connection leaves on the client's host when the client closed
    first. (The remote port is compared too: the kernel may reuse a local
    port towards another address while an older connection from it waits.)
    Empty where /proc is not there."""
    found: List[str] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if state in _ACTIVE_CLOSE_STATES and _port(local) == sockname[1] and _port(remote) == peername[1]:
                found.append(f"{_ACTIVE_CLOSE_STATES[state]}: {line.strip()}")
    return found


def ends(lock: "monolock.Lock | monolock.aio.Lock") -> "tuple[tuple[str, int], tuple[str, int]]":
    """The (local, remote) addresses of a lock's connection, for
    time_wait_from once it is closed."""
    if isinstance(lock, monolock.Lock):
        sock = lock._sock  # pyright: ignore[reportPrivateUsage]
        return sock.getsockname(), sock.getpeername()
    t = lock._conn.transport  # pyright: ignore[reportPrivateUsage]
    assert t is not None
    return t.get_extra_info("sockname"), t.get_extra_info("peername")


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1], 16)


def closed_how(c: socket.socket, timeout: float = 10.0) -> "tuple[bytes, str]":
    """Reads the server side c until the client's close: the bytes read
    and "eof" (a FIN), or "reset" (an RST)."""
    c.settimeout(timeout)
    got = b""
    try:
        while True:
            b = c.recv(64)
            if not b:
                return got, "eof"
            got += b
    except ConnectionResetError:
        return got, "reset"


def serve_release(c: socket.socket, timeout: float = 10.0) -> bytes:
    """What a server does on RELEASE: reads up to and including the RELEASE
    byte (returning the bytes before it), then closes first."""
    c.settimeout(timeout)
    got = b""
    while not got.endswith(RELEASE):
        b = c.recv(1)
        if not b:
            raise EOFError(f"the client closed without RELEASE after {got!r}")
        got += b
    c.close()
    return got[:-1]


def _read_exact(c: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        b = c.recv(n - len(out))
        if not b:
            raise EOFError("the client closed")
        out += b
    return out


_built: Optional[str] = None


def server_binary(test: unittest.TestCase) -> str:
    """MONOLOCK_BIN, or bin/monolock built from this repository with go."""
    global _built
    path = os.environ.get("MONOLOCK_BIN")
    if path:
        return path
    if _built is None:
        if shutil.which("go") is None:
            test.skipTest("needs the monolock server: set MONOLOCK_BIN, or install Go (https://go.dev/dl) to build it")
        out = os.path.join(tempfile.mkdtemp(prefix="monolock-pytest-"), "monolock")
        subprocess.run(["go", "build", "-o", out, "./cmd/monolock"], cwd=REPO, check=True)
        _built = out
    return _built


class Server:
    """The real server on a free port, with the admin API."""

    def __init__(self, test: unittest.TestCase, *args: str) -> None:
        binary = server_binary(test)
        self.proc = subprocess.Popen(
            [binary, "-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-log-format", "json", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("message") == "monolock started":
                self.addr: str = entry["listen"]
                self.admin: str = entry["admin_listen"]
                break
        else:
            raise RuntimeError("monolock exited before it started")
        # Keep draining stderr so the server never blocks on a full pipe.
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        test.addCleanup(self.stop)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for _ in self.proc.stderr:
            pass

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self._drainer.join(5)
        assert self.proc.stderr is not None
        self.proc.stderr.close()

    def waiters(self, name: str) -> int:
        import urllib.error
        import urllib.parse
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://{self.admin}/api/locks/{urllib.parse.quote(name, safe='')}") as r:
                return len(json.load(r)["waiters"])
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return 0
            raise

    def force_release(self, name: str) -> None:
        import urllib.request

        req = urllib.request.Request(f"http://{self.admin}/api/locks/{name}/release", method="POST")
        urllib.request.urlopen(req).close()
