"""The asyncio client against a scripted fake server."""

import asyncio
import socket
import unittest

import monolock
import monolock.aio
from tests.support import WAITING, FakeServer, acquired, closed_how, error, ends, serve_release, time_wait_from


class AioFakeServerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.srv = FakeServer()
        self.addCleanup(self.srv.close)

    def run_async(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run(asyncio.wait_for(coro, 20))

    async def next_acquire(self) -> socket.socket:
        c = await asyncio.get_running_loop().run_in_executor(None, self.srv.next)
        await asyncio.get_running_loop().run_in_executor(None, self.srv.read_acquire, c)
        return c

    async def granted(self, lease: float) -> "tuple[monolock.aio.Lock, socket.socket]":
        """A lock of a new client, granted by the fake server, and the
        server's side of its connection."""
        task = asyncio.ensure_future(monolock.aio.Client(self.srv.addr).acquire("job", lease=lease))
        c = await self.next_acquire()
        c.sendall(acquired(7))
        return await task, c

    def test_push_then_eof(self) -> None:
        async def main() -> None:
            client = monolock.aio.Client(self.srv.addr)
            task = asyncio.ensure_future(client.acquire("job", lease=10.0))
            c = await self.next_acquire()
            c.sendall(WAITING)
            c.sendall(acquired(2**63 + 1))
            lock = await task
            self.assertEqual(lock.token, 2**63 + 1)
            self.assertTrue(lock.valid())
            c.close()
            await asyncio.wait_for(lock.lost.wait(), 5)
            self.assertIsInstance(lock.error, monolock.Unavailable)
            await lock.release()
            await lock.release()

        self.run_async(main())

    def test_busy_and_server_error(self) -> None:
        async def main() -> None:
            client = monolock.aio.Client(self.srv.addr)
            task = asyncio.ensure_future(client.acquire("job", wait=False))
            c = await self.next_acquire()
            c.sendall(WAITING)
            loop = asyncio.get_running_loop()
            self.assertEqual(await loop.run_in_executor(None, serve_release, c), b"")  # it left the queue by RELEASE
            with self.assertRaises(monolock.Busy):
                await task
            task = asyncio.ensure_future(client.run("job", self._noop))
            c = await self.next_acquire()
            c.sendall(error(0x18, "not authorized for lock"))
            c.close()
            with self.assertRaises(monolock.ServerError) as cm:
                await task
            self.assertEqual(cm.exception.code, 0x18)

        self.run_async(main())

    def test_error_followed_by_junk_in_one_write(self) -> None:
        async def main() -> None:
            client = monolock.aio.Client(self.srv.addr)
            task = asyncio.ensure_future(client.acquire("job", lease=2.0))
            c = await self.next_acquire()
            c.sendall(error(0x18, "not authorized for lock") + b"\x7e\xff")
            with self.assertRaises(monolock.ServerError) as cm:
                await task
            self.assertEqual(cm.exception.code, 0x18)
            self.assertEqual(c.recv(1), b"")  # closed at once

        self.run_async(main())

    def test_valid_past_the_deadline_gives_up_at_once(self) -> None:
        """The work's check on a stalled loop (its clock past the deadline,
        the give-up timer not run yet) is the step's expired event: lost
        then, and no answer revives it."""
        from unittest import mock

        async def main() -> None:
            lock, c = await self.granted(2.0)
            loop = asyncio.get_running_loop()
            deadline = lock._conn.session.deadline  # pyright: ignore[reportPrivateUsage]
            with mock.patch.object(loop, "time", return_value=deadline):
                self.assertFalse(lock.valid())
                self.assertTrue(lock.lost.is_set(), "not given up at the check")
            self.assertIsInstance(lock.error, monolock.Unavailable)
            self.assertIn("no answer", str(lock.error))
            c.sendall(acquired(7))  # an answer read afterwards
            await asyncio.sleep(0)
            self.assertFalse(lock.valid())
            await lock.release()

        self.run_async(main())

    def test_give_up_keeps_connection_until_release(self) -> None:
        async def main() -> None:
            client = monolock.aio.Client(self.srv.addr)
            task = asyncio.ensure_future(client.acquire("job", lease=2.0))
            c = await self.next_acquire()
            c.sendall(acquired(7))  # later heartbeats are never answered
            lock = await task
            await asyncio.wait_for(lock.lost.wait(), 5)
            self.assertFalse(lock.valid())
            c.setblocking(False)
            try:
                data = c.recv(16)
            except BlockingIOError:
                data = None  # nothing, and not closed: the work may still run
            self.assertNotEqual(data, b"", "closed while the work still runs")
            c.setblocking(True)
            await lock.release()  # the work stopped: now it closes, by a reset, without RELEASE
            rest, how = closed_how(c)
            self.assertEqual(how, "reset")
            self.assertLessEqual(rest, b"\x02")

        self.run_async(main())

    def test_close_does_not_wait_for_the_peer(self) -> None:
        # Over TLS, transport.close() waits for the peer's close_notify (up to
        # asyncio's 30 s SSL shutdown timeout): every close is an abort(),
        # after the server's end of stream once the client sent RELEASE.
        from monolock import _wire
        from monolock._core import Session
        from monolock.aio import _Connection  # pyright: ignore[reportPrivateUsage]

        loop = asyncio.new_event_loop()
        self.addCleanup(loop.close)
        for end in ("release", "error", "eof"):
            with self.subTest(end=end):
                t = _RecordingTransport()
                conn = _Connection(Session(b"job", 2.0, _wire.lease_ms(2.0)), loop)
                conn.connection_made(t)
                conn.data_received(acquired(7))
                if end == "release":
                    conn.release()
                    self.assertEqual(t.ends, [], "closed before the server did")
                    conn.eof_received()
                elif end == "error":
                    conn.data_received(error(0x02))
                else:
                    conn.eof_received()
                self.assertEqual(t.ends, ["abort"])

    def test_release_waits_for_the_server_to_close_first(self) -> None:
        async def main() -> None:
            loop = asyncio.get_running_loop()
            lock, c = await self.granted(10.0)
            addrs = ends(lock)
            served = loop.run_in_executor(None, serve_release, c)
            await lock.release()
            self.assertEqual(await served, b"")
            self.assertIsNone(lock.error)
            self.assertEqual(time_wait_from(*addrs), [], "the client closed first")

        self.run_async(main())

    def test_an_old_server_answers_release_with_error_0x13(self) -> None:
        async def main() -> None:
            client = monolock.aio.Client(self.srv.addr)
            task = asyncio.ensure_future(client.run("job", self._token, lease=10.0))
            c = await self.next_acquire()
            c.sendall(acquired(7))
            c.settimeout(10)
            self.assertEqual(await asyncio.get_running_loop().run_in_executor(None, c.recv, 1), b"\x03")
            c.sendall(error(0x13, "unknown message type: 0x03"))
            c.close()
            self.assertEqual(await task, 7)  # no error surfaced

        self.run_async(main())

    def test_a_server_that_never_closes_is_reset_at_the_bound(self) -> None:
        async def main() -> None:
            loop = asyncio.get_running_loop()
            lock, c = await self.granted(0.4)  # bound min(0.4 s, 2 s)
            addrs = ends(lock)
            closed = loop.run_in_executor(None, closed_how, c)
            await lock.release()
            got, how = await closed
            self.assertEqual(got[-1:], b"\x03")
            self.assertEqual(how, "reset")
            self.assertIsNone(lock.error)
            self.assertEqual(time_wait_from(*addrs), [])

        self.run_async(main())

    def test_the_longest_lease(self) -> None:
        async def main() -> None:
            client = monolock.aio.Client(self.srv.addr)
            loop = asyncio.get_running_loop()
            task = asyncio.ensure_future(client.acquire("job", lease=0xFFFFFFFF / 1000))
            c = await loop.run_in_executor(None, self.srv.next)
            head = await loop.run_in_executor(None, self.srv.read_acquire, c)
            self.assertEqual(head[2:6], b"\xff\xff\xff\xff")
            c.sendall(acquired(7))
            lock = await task
            self.assertTrue(lock.valid())
            served = loop.run_in_executor(None, serve_release, c)
            await lock.release()
            self.assertEqual(await served, b"")
            self.assertIsNone(lock.error)

        self.run_async(main())

    @staticmethod
    async def _token(lock: monolock.aio.Lock) -> int:
        return lock.token

    @staticmethod
    async def _noop(lock: monolock.aio.Lock) -> None:
        return None


class _RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.ends: "list[str]" = []

    def write(self, data: "bytes | bytearray | memoryview") -> None:
        pass

    def is_closing(self) -> bool:
        return bool(self.ends)

    def close(self) -> None:
        self.ends.append("close")

    def abort(self) -> None:
        self.ends.append("abort")


if __name__ == "__main__":
    unittest.main()
