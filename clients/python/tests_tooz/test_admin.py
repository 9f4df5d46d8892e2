"""The admin API call of break_() against a scripted HTTP peer: the request
it sends, how it reads each answer, and a dead or stuck admin port."""

from __future__ import annotations

import queue
import socket
import threading
import unittest
from typing import List, Optional

import tooz
import tooz.coordination

from monolock.tooz_driver import AdminAPI


class FakeAdmin:
    """Listens on 127.0.0.1 port 0; answers each connection with the next
    scripted response (None: read the request and never answer) and keeps
    the request bytes."""

    def __init__(self, responses: List[Optional[bytes]]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requests: "queue.Queue[bytes]" = queue.Queue()
        self._responses = responses
        self._open: List[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        for response in self._responses:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self._open.append(c)
            c.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = c.recv(4096)
                if not chunk:
                    break
                data += chunk
            self.requests.put(data)
            if response is not None:
                c.sendall(response)
                c.close()

    def close(self) -> None:
        self.sock.close()
        for c in self._open:
            c.close()
        self._thread.join(10)


def answer(status: str, body: bytes) -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


class AdminAPITest(unittest.TestCase):
    def fake(self, *responses: Optional[bytes]) -> FakeAdmin:
        f = FakeAdmin(list(responses))
        self.addCleanup(f.close)
        return f

    def test_request_line_and_host(self) -> None:
        f = self.fake(answer("200 OK", b'{"lock":"a/b","released_token":7}'))
        # localhost is connected to by address; Host carries that IP, not the name.
        self.assertTrue(AdminAPI(f"localhost:{f.port}", None).force_release("a/b c"))
        req = f.requests.get(timeout=10).decode()
        lines = req.split("\r\n")
        self.assertEqual(lines[0], "POST /api/locks/a%2Fb%20c/release HTTP/1.1")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        self.assertEqual(headers["host"], f"127.0.0.1:{f.port}")
        self.assertEqual(headers["content-length"], "0")
        # Nothing that the admin port's cross-site check refuses.
        self.assertNotIn("origin", headers)
        self.assertNotIn("sec-fetch-site", headers)

    def test_dot_names_are_encoded(self) -> None:
        f = self.fake(answer("200 OK", b"{}"), answer("200 OK", b"{}"))
        api = AdminAPI(f"127.0.0.1:{f.port}", None)
        api.force_release(".")
        api.force_release("..")
        self.assertTrue(f.requests.get(timeout=10).startswith(b"POST /api/locks/%2E/release "))
        self.assertTrue(f.requests.get(timeout=10).startswith(b"POST /api/locks/%2E%2E/release "))

    def test_idle_lock(self) -> None:
        f = self.fake(answer("404 Not Found", b'{"error":"lock \\"x\\" is idle: nobody holds it"}'))
        self.assertFalse(AdminAPI(f"127.0.0.1:{f.port}", None).force_release("x"))

    def test_other_404_is_an_error(self) -> None:
        f = self.fake(answer("404 Not Found", b'{"error":"no such endpoint"}'))
        with self.assertRaisesRegex(tooz.ToozError, "answered 404 .*no such endpoint"):
            AdminAPI(f"127.0.0.1:{f.port}", None).force_release("x")

    def test_forbidden_names_the_role(self) -> None:
        f = self.fake(answer("403 Forbidden", b'{"error":"POST /api/locks/x/release needs the role release"}'))
        with self.assertRaises(tooz.ToozError) as cm:
            AdminAPI(f"127.0.0.1:{f.port}", None).force_release("x")
        self.assertNotIsInstance(cm.exception, tooz.coordination.ToozConnectionError)
        self.assertIn("answered 403", str(cm.exception))
        self.assertIn("needs the admin role 'release'", str(cm.exception))

    def test_dead_admin_port(self) -> None:
        s = socket.create_server(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        with self.assertRaisesRegex(tooz.coordination.ToozConnectionError, "check admin=HOST:PORT"):
            AdminAPI(f"127.0.0.1:{port}", None).force_release("x")

    def test_stuck_admin_port(self) -> None:
        f = self.fake(None)  # reads the request, never answers
        with self.assertRaises(tooz.coordination.ToozConnectionError) as cm:
            AdminAPI(f"127.0.0.1:{f.port}", None, timeout=0.2).force_release("x")
        self.assertIn("timed out", str(cm.exception))

    def test_peer_closes_without_answer(self) -> None:
        f = self.fake(b"")
        with self.assertRaises(tooz.coordination.ToozConnectionError):
            AdminAPI(f"127.0.0.1:{f.port}", None).force_release("x")


class StartProbeTest(unittest.TestCase):
    def test_a_stuck_tls_handshake_times_out(self) -> None:
        f = FakeAdmin([None])  # accepts, never answers the ClientHello
        self.addCleanup(f.close)
        c = tooz.coordination.get_coordinator(f"monolock://127.0.0.1:{f.port}?tls=true&connect_timeout=0.2", b"m")
        with self.assertRaisesRegex(tooz.coordination.ToozConnectionError, "cannot connect to 127.0.0.1:.*timed out"):
            c.start()
        self.assertFalse(c.is_started)


if __name__ == "__main__":
    unittest.main()
