"""The driver against the real server: acquire, release, the FIFO queue,
the fencing token, break_ through the admin API, stop."""

from __future__ import annotations

import json
import threading
import time
import unittest
import urllib.parse
import urllib.request
from typing import Dict, List

import tooz
import tooz.coordination

from monolock.tooz_driver import MonolockDriver, MonolockLock, lock_name
from tests.support import Server


class RealServerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.srv = Server(self)
        self.url = f"monolock://{self.srv.addr}?admin={self.srv.admin}&lease=2"

    def coordinator(self, member: bytes = b"m") -> MonolockDriver:
        c = tooz.coordination.get_coordinator(self.url, member)
        assert isinstance(c, MonolockDriver)
        c.start()
        self.addCleanup(lambda: c.stop() if c.is_started else None)
        return c

    def lock(self, name: bytes, member: bytes = b"m") -> MonolockLock:
        return self.coordinator(member).get_lock(name)

    def holder_token(self, server_name: str) -> int:
        segment = urllib.parse.quote(server_name, safe="").replace(".", "%2E")
        with urllib.request.urlopen(f"http://{self.srv.admin}/api/locks/{segment}") as r:
            return int(json.load(r)["holder"]["token"])

    def await_waiters(self, name: str, n: int) -> None:
        deadline = time.monotonic() + 10
        while self.srv.waiters(name) != n:
            self.assertLess(time.monotonic(), deadline, f"{n} waiter(s) never queued")
            time.sleep(0.02)

    def test_acquire_release_token(self) -> None:
        a, b = self.lock(b"job", b"a"), self.lock(b"job", b"b")
        self.assertIsNone(a.token)
        self.assertFalse(a.is_still_owner())
        self.assertTrue(a.acquire())
        self.assertTrue(a.is_still_owner())
        token = a.token
        assert token is not None
        self.assertEqual(token, self.holder_token("job"))
        self.assertFalse(b.acquire(blocking=False))
        self.assertFalse(b.acquire(blocking=0.1))  # a timed wait that elapses
        self.assertFalse(b.is_still_owner())
        self.assertTrue(a.release())
        self.assertIsNone(a.token)
        self.assertFalse(a.is_still_owner())
        self.assertFalse(a.release())  # not held
        self.assertTrue(b.acquire(blocking=False))
        self.assertGreater(b.token or 0, token)
        self.assertTrue(b.release())

    def test_fifo_each_on_its_own_connection(self) -> None:
        holder = self.lock(b"fifo", b"holder")
        self.assertTrue(holder.acquire())
        order: List[int] = []
        tokens: Dict[int, int] = {}

        def wait(i: int, lock: MonolockLock) -> None:
            self.assertTrue(lock.acquire(blocking=True))
            order.append(i)
            tokens[i] = lock.token or 0
            self.assertTrue(lock.release())

        threads = []
        for i in range(3):
            t = threading.Thread(target=wait, args=(i, self.lock(b"fifo", b"w%d" % i)))
            t.start()
            threads.append(t)
            self.await_waiters("fifo", i + 1)
        self.assertTrue(holder.release())
        for t in threads:
            t.join(10)
        self.assertEqual(order, [0, 1, 2])
        self.assertLess(tokens[0], tokens[1])
        self.assertLess(tokens[1], tokens[2])

    def test_break_hands_the_lock_to_the_first_waiter(self) -> None:
        a, b, c = self.lock(b"brk", b"a"), self.lock(b"brk", b"b"), self.lock(b"brk", b"c")
        self.assertTrue(a.acquire())
        granted = threading.Event()

        def wait() -> None:
            if b.acquire():
                granted.set()

        t = threading.Thread(target=wait)
        t.start()
        self.await_waiters("brk", 1)
        self.assertTrue(c.break_())
        self.assertTrue(granted.wait(10))
        t.join(10)
        # b's grant came after the server's ERROR to a, so a's release reads it.
        self.assertFalse(a.release())  # lost: broken
        self.assertTrue(b.is_still_owner())  # a's release did not touch b's hold
        self.assertTrue(b.release())
        self.assertFalse(c.break_())  # idle now

    def test_a_broken_hold_ends_and_the_object_acquires_anew(self) -> None:
        lock = self.lock(b"again", b"a")
        self.assertTrue(lock.acquire())
        first = lock.token or 0
        self.assertTrue(self.lock(b"again", b"b").break_())
        # The client reads the server's ERROR 0x02 on its own thread.
        deadline = time.monotonic() + 10
        while lock.is_still_owner():
            self.assertLess(time.monotonic(), deadline, "is_still_owner() stayed True after the break")
            time.sleep(0.01)
        # A new acquire on the same object replaces the lost hold (and closes it).
        self.assertTrue(lock.acquire(blocking=False))
        self.assertGreater(lock.token or 0, first)
        self.assertTrue(lock.is_still_owner())
        self.assertTrue(lock.release())

    def test_names_monolock_cannot_take_are_hashed(self) -> None:
        for raw in (b"\xff\xfe", b"n" * 300, b"."):
            with self.subTest(raw=raw[:8]):
                lock = self.lock(raw, b"x" + raw[:4])
                self.assertEqual(lock.name, raw)
                self.assertTrue(lock.acquire(blocking=False))
                self.assertEqual(lock.token, self.holder_token(lock_name(raw)))
                self.assertTrue(self.lock(raw, b"y" + raw[:4]).break_())
                self.assertFalse(lock.release())

    def test_stop_releases_what_the_coordinator_holds(self) -> None:
        c = self.coordinator(b"stopper")
        held = c.get_lock(b"s1")
        self.assertTrue(held.acquire())
        self.assertTrue(c.get_lock(b"s2").acquire())
        c.stop()
        self.assertFalse(held.is_still_owner())
        other = self.coordinator(b"other")
        self.assertTrue(other.get_lock(b"s1").acquire(blocking=False))
        self.assertTrue(other.get_lock(b"s2").acquire(blocking=False))

    def test_start_fails_on_a_dead_port(self) -> None:
        c = tooz.coordination.get_coordinator("monolock://127.0.0.1:1", b"m")
        with self.assertRaisesRegex(tooz.coordination.ToozConnectionError, "cannot connect to 127.0.0.1:1"):
            c.start()

    def test_acquire_on_a_stopped_server_is_a_connection_error(self) -> None:
        lock = self.lock(b"gone")
        self.srv.stop()
        with self.assertRaises(tooz.coordination.ToozConnectionError):
            lock.acquire()


if __name__ == "__main__":
    unittest.main()
