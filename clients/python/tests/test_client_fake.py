"""The threaded client against a scripted fake server."""

import socket
import unittest

import monolock
from tests.support import RELEASE, WAITING, FakeServer, acquired, closed_how, error, ends, serve_release, time_wait_from


class FakeServerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.srv = FakeServer()
        self.addCleanup(self.srv.close)
        self.client = monolock.Client(self.srv.addr)

    def grant_next(self, token: int) -> socket.socket:
        c = self.srv.next()
        self.srv.read_acquire(c)
        c.sendall(acquired(token))
        return c

    def test_pushed_promotion_then_eof(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.acquire, "job", 10.0)
            c = self.srv.next()
            self.srv.read_acquire(c)
            c.sendall(WAITING)
            c.sendall(acquired(2**64 - 1))  # pushed, unasked
            lock = fut.result(timeout=5)
        self.assertEqual(lock.token, 2**64 - 1)
        self.assertTrue(lock.valid())
        c.close()  # end of stream while holding: lost at once
        self.assertTrue(lock.lost.wait(5))
        self.assertIsInstance(lock.error, monolock.Unavailable)
        self.assertFalse(lock.valid())
        lock.release()
        lock.release()  # idempotent
        self.assertEqual(len(self.srv.accepted), 1)

    def test_valid_reads_what_the_owner_publishes(self) -> None:
        """valid() from the caller's thread never drives the session: only
        the connection's thread may (the core is not thread-safe)."""
        import threading
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.acquire, "job", 10.0)
            c = self.grant_next(3)
            lock = fut.result(timeout=5)
        session = lock._session  # pyright: ignore[reportPrivateUsage]
        callers: list = []
        core_valid = session.valid

        def spy(now: float) -> bool:
            callers.append(threading.current_thread())
            return core_valid(now)

        session.valid = spy  # type: ignore[method-assign]
        self.assertTrue(lock.valid())
        c.close()  # end of stream while holding: lost at once
        self.assertTrue(lock.lost.wait(5))
        self.assertFalse(lock.valid())
        lock.release()
        self.assertNotIn(threading.current_thread(), callers)

    def test_busy(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.acquire, "job", 2.0, False)
            c = self.srv.next()
            self.srv.read_acquire(c)
            c.sendall(WAITING)
            self.assertEqual(serve_release(c), b"")  # it left the queue by RELEASE
            with self.assertRaises(monolock.Busy):
                fut.result(timeout=5)

    def test_wait_elapses(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.acquire, "job", 2.0, 0.3)
            c = self.srv.next()
            self.srv.read_acquire(c)
            c.sendall(WAITING)
            while True:  # answer heartbeats with WAITING until it leaves
                b = c.recv(1)
                if b == RELEASE:
                    c.close()
                    break
                self.assertEqual(b, b"\x02")
                c.sendall(WAITING)
            with self.assertRaises(monolock.Busy):
                fut.result(timeout=5)

    def test_server_error_not_retried(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.run, "job", lambda lock: None)
            c = self.srv.next()
            self.srv.read_acquire(c)
            c.sendall(error(0x16, "lock name is not valid UTF-8"))
            c.close()
            with self.assertRaises(monolock.ServerError) as cm:
                fut.result(timeout=5)
        self.assertEqual(cm.exception.code, 0x16)
        self.assertEqual(cm.exception.reason, "lock name is not valid UTF-8")
        self.assertEqual(len(self.srv.accepted), 1)  # run() has returned: no retry can follow

    def test_error_followed_by_junk_in_one_write(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.acquire, "job", 2.0)
            c = self.srv.next()
            self.srv.read_acquire(c)
            c.sendall(error(0x18, "not authorized for lock") + b"\x7e\xff")
            with self.assertRaises(monolock.ServerError) as cm:
                fut.result(timeout=5)
        self.assertEqual(cm.exception.code, 0x18)
        self.assertEqual(c.recv(1), b"")  # closed at once

    def test_run_retries_server_conditions(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.run, "job", lambda lock: lock.token, 2.0)
            for code in (0x05, 0x01):
                c = self.srv.next()
                self.srv.read_acquire(c)
                c.sendall(error(code))
                c.close()
            self.grant_next(42)
            self.assertEqual(fut.result(timeout=10), 42)
        self.assertEqual(len(self.srv.accepted), 3)

    def test_context_manager_raises_lock_lost(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        def body() -> None:
            with self.client.lock("job", lease=10.0) as lock:
                self.assertTrue(lock.lost.wait(5))

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(body)
            c = self.grant_next(7)
            c.sendall(error(0x02, "closed by administrator"))
            c.close()
            with self.assertRaises(monolock.LockLost) as cm:
                fut.result(timeout=5)
        self.assertEqual(getattr(cm.exception.cause, "code"), 2)

    def test_give_up_keeps_the_connection_until_the_work_stops(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.acquire, "job", 2.0)
            c = self.grant_next(7)  # heartbeats are never answered from here
            lock = fut.result(timeout=5)
        self.assertTrue(lock.lost.wait(5))
        self.assertIsInstance(lock.error, monolock.Unavailable)
        self.assertFalse(lock.valid())
        # Gave up: no request after the unanswered one, and the connection
        # is still open while the work runs (until when is the rules' business:
        # tests/test_core.py).
        c.setblocking(False)
        try:
            sent = c.recv(16)
        except BlockingIOError:
            sent = None  # nothing, and not closed
        self.assertNotEqual(sent, b"", "closed while the work still runs")
        self.assertLessEqual(sent or b"", b"\x02")  # at most the unanswered heartbeat
        c.setblocking(True)
        lock.release()  # the work stopped: now it closes, by a reset, without RELEASE
        rest, how = closed_how(c)
        self.assertEqual(how, "reset")
        self.assertLessEqual(rest, b"\x02")

    def test_run_raises_lock_lost_after_fn(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        seen = []

        def fn(lock: monolock.Lock) -> str:
            self.assertTrue(lock.lost.wait(5))
            seen.append(lock.valid())
            return "done"

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.run, "job", fn, 10.0)
            c = self.grant_next(7)
            c.close()
            with self.assertRaises(monolock.LockLost):
                fut.result(timeout=5)
        self.assertEqual(seen, [False])

    def test_cannot_connect(self) -> None:
        self.srv.close()
        with self.assertRaises(monolock.Unavailable):
            self.client.acquire("job")

    def test_invalid_input_before_connecting(self) -> None:
        for name, lease in (("", 2.0), ("x" * 256, 2.0), ("bad\udcff", 2.0), ("ok", 0)):
            with self.subTest(name=name[:10], lease=lease), self.assertRaises(monolock.InvalidInput):
                self.client.acquire(name, lease=lease)
        self.assertEqual(len(self.srv.accepted), 0)

    def test_release_waits_for_the_server_to_close_first(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.acquire, "job", 10.0)
            c = self.grant_next(7)
            lock = fut.result(timeout=5)
            addrs = ends(lock)
            released = ex.submit(lock.release)
            self.assertEqual(serve_release(c), b"")
            released.result(timeout=5)
        self.assertIsNone(lock.error)
        self.assertTrue(lock.lost.is_set())
        self.assertEqual(time_wait_from(*addrs), [], "the client closed first")

    def test_an_old_server_answers_release_with_error_0x13(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.run, "job", lambda lock: lock.token, 10.0)
            c = self.grant_next(7)
            c.settimeout(10)
            self.assertEqual(c.recv(1), RELEASE)
            c.sendall(error(0x13, "unknown message type: 0x03"))
            c.close()
            self.assertEqual(fut.result(timeout=5), 7)  # no error surfaced

    def test_a_server_that_never_closes_is_reset_at_the_bound(self) -> None:
        lock = None
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.acquire, "job", 0.4)  # bound min(0.4 s, 2 s)
            c = self.grant_next(7)
            lock = fut.result(timeout=5)
            addrs = ends(lock)
            released = ex.submit(lock.release)
            got, how = closed_how(c)
            released.result(timeout=5)
        self.assertEqual(got[-1:], RELEASE)
        self.assertEqual(how, "reset")
        self.assertIsNone(lock.error)
        self.assertEqual(time_wait_from(*addrs), [])

    def test_the_longest_lease(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        lease = 0xFFFFFFFF / 1000
        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.acquire, "job", lease)
            c = self.srv.next()
            head = self.srv.read_acquire(c)
            self.assertEqual(head[2:6], b"\xff\xff\xff\xff")
            c.sendall(acquired(7))
            lock = fut.result(timeout=5)
            self.assertTrue(lock.valid())
            self.assertFalse(lock.lost.is_set())
            released = ex.submit(lock.release)
            self.assertEqual(serve_release(c), b"")
            released.result(timeout=5)
        self.assertIsNone(lock.error)

    def test_a_fault_in_the_client_is_not_retried(self) -> None:
        from concurrent.futures import ThreadPoolExecutor
        from unittest import mock

        from monolock._core import Session

        class Faulty(Session):
            def tick(self, now: float) -> None:
                raise RuntimeError("injected fault")

        with mock.patch("monolock.client.Session", Faulty), ThreadPoolExecutor(1) as ex:
            fut = ex.submit(self.client.run, "job", lambda lock: None, 10.0)
            c = self.srv.next()
            self.srv.read_acquire(c)
            c.sendall(WAITING)  # the loop's timers run after each read
            with self.assertRaises(monolock.ClientFault) as cm:
                fut.result(timeout=5)
        self.assertIn("injected fault", str(cm.exception))
        self.assertEqual(len(self.srv.accepted), 1, "retried")


if __name__ == "__main__":
    unittest.main()
