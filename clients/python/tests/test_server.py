"""Both clients against the real server binary."""

import asyncio
import threading
import time
import unittest
import warnings

import monolock
import monolock.aio
from tests.support import Server, aheld_past, ends, held_past, time_wait_from


class RealServerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.srv = Server(self)
        self.client = monolock.Client(self.srv.addr)

    def await_waiters(self, name: str, n: int) -> None:
        deadline = time.monotonic() + 10
        while self.srv.waiters(name) != n:
            self.assertLess(time.monotonic(), deadline, f"{n} waiter(s) never queued")
            time.sleep(0.02)

    def test_fifo_and_tokens(self) -> None:
        holder = self.client.acquire("fifo", lease=2.0)
        self.assertGreater(holder.token, 1 << 32)
        self.assertIsNone(holder.tls_resumed)  # plain TCP: no TLS session at all
        with self.assertRaises(monolock.Busy):
            self.client.acquire("fifo", lease=2.0, wait=False)
        order = []
        tokens = {}

        def wait(i: int) -> None:
            with self.client.lock("fifo", lease=2.0) as lock:
                order.append(i)
                tokens[i] = lock.token

        threads = []
        for i in range(3):
            t = threading.Thread(target=wait, args=(i,))
            t.start()
            threads.append(t)
            self.await_waiters("fifo", i + 1)
        # Heartbeats keep the holder while the waiters queue: answered past a lease/4 from now.
        self.assertTrue(held_past(holder, time.monotonic() + 0.5), "the holder was not kept")
        self.assertTrue(holder.valid())
        holder.release()
        for t in threads:
            t.join(10)
        self.assertEqual(order, [0, 1, 2])
        self.assertLess(holder.token, tokens[0])
        self.assertLess(tokens[0], tokens[1])
        self.assertLess(tokens[1], tokens[2])

    def test_run_and_force_release(self) -> None:
        self.assertEqual(self.client.run("job", lambda lock: lock.token > 0), True)
        lock = self.client.acquire("job", lease=2.0)
        self.srv.force_release("job")
        self.assertTrue(lock.lost.wait(5))
        self.assertIsInstance(lock.error, monolock.Unavailable)
        self.assertEqual(getattr(lock.error, "code"), 0x02)
        lock.release()
        again = self.client.acquire("job", lease=2.0)
        self.assertGreater(again.token, lock.token)
        again.release()

    def test_aio(self) -> None:
        async def main() -> None:
            client = monolock.aio.Client(self.srv.addr)
            holder = await client.acquire("aio", lease=2.0)
            self.assertTrue(holder.valid())
            got = []

            async def waiter() -> None:
                async with client.lock("aio", lease=2.0) as lock:
                    got.append(lock.token)

            task = asyncio.ensure_future(waiter())
            while self.srv.waiters("aio") != 1:
                await asyncio.sleep(0.02)
            # More than half the lease: heartbeats keep the holder.
            self.assertTrue(await aheld_past(holder, asyncio.get_running_loop().time() + 1.1), "the holder was not kept")
            self.assertFalse(holder.lost.is_set())
            await holder.release()
            self.assertTrue(holder.lost.is_set())
            await asyncio.wait_for(task, 10)
            self.assertGreater(got[0], holder.token)
            self.assertGreater(await client.run("aio", self._token), got[0])
            with self.assertRaises(monolock.InvalidInput):
                await client.acquire("", lease=1.0)

        asyncio.run(main())

    def test_aio_lock_returned_out_of_asyncio_run_is_released(self) -> None:
        client = monolock.aio.Client(self.srv.addr)
        with self.assertWarns(RuntimeWarning) as cm:
            lock = asyncio.run(client.acquire("escaped", lease=60.0))
        self.assertIn("'escaped'", str(cm.warning))
        self.assertTrue(lock.lost.is_set())
        self.assertFalse(lock.valid())
        self.assertIsInstance(lock.error, monolock.MonolockError)
        # Released by the close, not by the server's expiry a 60 s lease later.
        self.client.acquire("escaped", lease=2.0, wait=10.0).release()

    def test_aio_no_warning_for_a_lock_released_in_its_loop(self) -> None:
        client = monolock.aio.Client(self.srv.addr)

        async def main() -> None:
            lock = await client.acquire("kept", lease=2.0)
            await lock.release()
            await client.run("kept", self._token)
            async with client.lock("kept"):
                pass

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            asyncio.run(main())
        self.assertEqual([str(w.message) for w in seen], [])

    def test_release_promotes_the_next_and_leaves_no_time_wait(self) -> None:
        holder = self.client.acquire("rel", lease=10.0)
        promoted = threading.Event()
        got = []

        def wait() -> None:
            with self.client.lock("rel", lease=10.0) as lock:
                got.append(lock.token)
                promoted.set()

        t = threading.Thread(target=wait)
        t.start()
        self.await_waiters("rel", 1)
        addrs = ends(holder)
        holder.release()
        self.assertIsNone(holder.error)
        self.assertTrue(promoted.wait(10), "the waiter was not promoted")
        t.join(10)
        self.assertGreater(got[0], holder.token)
        self.assertEqual(time_wait_from(*addrs), [], "the client closed first")
        # A waiter that leaves the queue (its wait elapsed) releases the same way.
        holder = self.client.acquire("rel", lease=10.0)
        leaver = threading.Thread(target=lambda: self.assertRaises(monolock.Busy, self.client.acquire, "rel", 10.0, 0.3))
        leaver.start()
        leaver.join(10)
        self.assertEqual(self.srv.waiters("rel"), 0)
        holder.release()

    def test_aio_release_promotes_the_next_and_leaves_no_time_wait(self) -> None:
        async def main() -> None:
            client = monolock.aio.Client(self.srv.addr)
            holder = await client.acquire("arel", lease=10.0)
            waiter = asyncio.ensure_future(client.acquire("arel", lease=10.0))
            while self.srv.waiters("arel") != 1:
                await asyncio.sleep(0.02)
            addrs = ends(holder)
            await holder.release()
            self.assertIsNone(holder.error)
            lock = await asyncio.wait_for(waiter, 10)
            self.assertGreater(lock.token, holder.token)
            self.assertEqual(time_wait_from(*addrs), [], "the client closed first")
            await lock.release()

        asyncio.run(main())

    def test_the_longest_lease(self) -> None:
        lease = 0xFFFFFFFF / 1000
        with self.client.lock("long", lease=lease) as lock:
            self.assertTrue(lock.valid())

        async def main() -> None:
            async with monolock.aio.Client(self.srv.addr).lock("long", lease=lease) as lock:
                self.assertTrue(lock.valid())

        asyncio.run(main())

    @staticmethod
    async def _token(lock: monolock.aio.Lock) -> int:
        return lock.token


if __name__ == "__main__":
    unittest.main()
