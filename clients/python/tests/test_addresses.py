"""Several server addresses: a list, and a name resolving to several. Each
attempt starts from the address that worked last and passes to the next on a
refusal, within the one connect deadline of the step."""

import asyncio
import socket
import unittest
from typing import Any, List, Sequence, Tuple
from unittest import mock

import monolock
import monolock.aio
from monolock._common import AddressBook, Candidate, candidates
from tests.support import FakeServer, Server, acquired, error


def closed_port() -> str:
    """An address on loopback where nothing listens: a connect is refused."""
    s = socket.create_server(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


def fake_getaddrinfo(table: "dict[str, List[str]]") -> Any:
    """getaddrinfo answering the names in table with their IPv4 addresses."""

    def lookup(host: str, port: int, *args: Any, **kwargs: Any) -> List[Tuple[Any, ...]]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in table[host]]

    return lookup


class AddressBookTest(unittest.TestCase):
    """The order of the candidates, without a socket."""

    def test_a_name_resolving_to_several_gives_one_candidate_each(self) -> None:
        book = AddressBook(["locks.test:7070", "10.0.0.9:7070", "nowhere.test:7070"])
        got, failed = candidates(book, fake_getaddrinfo({"locks.test": ["10.0.0.1", "10.0.0.2"], "10.0.0.9": ["10.0.0.9"]}))
        self.assertEqual([c[1] for c in got], [("10.0.0.1", 7070), ("10.0.0.2", 7070), ("10.0.0.9", 7070)])
        self.assertEqual([c[2] for c in got], ["locks.test:7070", "locks.test:7070", "10.0.0.9:7070"])
        self.assertEqual(len(failed), 1)
        self.assertIn("nowhere.test:7070", failed[0])

    def test_from_the_last_that_worked(self) -> None:
        book = AddressBook(["a:1", "b:2", "c:3"])
        cands: Sequence[Candidate] = [(socket.AF_INET, (f"10.0.0.{i}", i), f"{n}:{i}") for i, n in ((1, "a"), (2, "b"), (3, "c"))]
        self.assertEqual(book.order(cands), list(cands), "nothing worked yet: the configured order")
        book.worked(cands[1])
        self.assertEqual(book.order(cands), [cands[1], cands[2], cands[0]])
        book.worked(cands[0])
        self.assertEqual(book.order(cands), list(cands))
        book.worked((socket.AF_INET, ("10.9.9.9", 9), "gone:9"))  # no longer among them
        self.assertEqual(book.order(cands), list(cands))

    def test_addresses_are_checked(self) -> None:
        for bad in ([], ["127.0.0.1"], ["127.0.0.1:7070", "nope"]):
            with self.subTest(bad=bad), self.assertRaises(monolock.InvalidInput):
                monolock.Client(bad)


class SeveralAddressesFakeTest(unittest.TestCase):
    """Both clients against a closed port and a fake server on loopback."""

    def setUp(self) -> None:
        self.srv = FakeServer()
        self.addCleanup(self.srv.close)
        self.closed = closed_port()
        self.orders: List[List[str]] = []
        original = AddressBook.order

        def spy(book: AddressBook, cands: Sequence[Candidate]) -> List[Candidate]:
            out = original(book, cands)
            self.orders.append([f"{c[1][0]}:{c[1][1]}" for c in out])
            return out

        patcher = mock.patch.object(AddressBook, "order", spy)
        patcher.start()
        self.addCleanup(patcher.stop)

    def serve(self, token: int) -> socket.socket:
        c = self.srv.next()
        self.srv.read_acquire(c)
        c.sendall(acquired(token))
        return c

    def test_threaded_refused_then_granted_then_starts_from_it(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        client = monolock.Client([self.closed, self.srv.addr], connect_timeout=5)
        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(client.acquire, "job", 10.0)
            c = self.serve(5)
            lock = fut.result(timeout=10)
        self.assertEqual(lock.token, 5)
        c.sendall(error(0x01, "server shutting down"))
        c.close()
        self.assertTrue(lock.lost.wait(5))
        lock.release()
        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(client.acquire, "job", 10.0)
            c = self.serve(6)
            lock = fut.result(timeout=10)
        lock.release()
        self.assertEqual(self.orders, [[self.closed, self.srv.addr], [self.srv.addr, self.closed]])

    def test_threaded_a_name_with_several_addresses(self) -> None:
        port = int(self.srv.addr.rsplit(":", 1)[1])
        # 127.0.0.2 is loopback too, and nothing listens there on that port.
        with mock.patch("socket.getaddrinfo", fake_getaddrinfo({"locks.test": ["127.0.0.2", "127.0.0.1"]})):
            from concurrent.futures import ThreadPoolExecutor

            client = monolock.Client(f"locks.test:{port}", connect_timeout=5)
            with ThreadPoolExecutor(1) as ex:
                fut = ex.submit(client.acquire, "job", 10.0)
                self.serve(8)
                lock = fut.result(timeout=10)
        self.assertEqual(lock.token, 8)
        lock.release()
        self.assertEqual(self.orders, [[f"127.0.0.2:{port}", f"127.0.0.1:{port}"]])

    def test_every_address_refused_is_one_failed_connect(self) -> None:
        other = closed_port()
        with self.assertRaises(monolock.Unavailable) as ctx:
            monolock.Client([self.closed, other], connect_timeout=5).acquire("job")
        self.assertIn(self.closed, str(ctx.exception))
        self.assertIn(other, str(ctx.exception))

        async def main() -> None:
            with self.assertRaises(monolock.Unavailable) as ctx:
                await monolock.aio.Client([self.closed, other], connect_timeout=5).acquire("job")
            self.assertIn(other, str(ctx.exception))

        asyncio.run(asyncio.wait_for(main(), 20))

    def test_aio_refused_then_granted_then_starts_from_it(self) -> None:
        async def main() -> None:
            loop = asyncio.get_running_loop()
            client = monolock.aio.Client([self.closed, self.srv.addr], connect_timeout=5)
            task = asyncio.ensure_future(client.acquire("job", lease=10.0))
            c = await loop.run_in_executor(None, self.serve, 5)
            lock = await task
            c.sendall(error(0x01, "server shutting down"))
            c.close()
            await asyncio.wait_for(lock.lost.wait(), 5)
            await lock.release()
            task = asyncio.ensure_future(client.acquire("job", lease=10.0))
            await loop.run_in_executor(None, self.serve, 6)
            lock = await task
            self.assertEqual(lock.token, 6)
            await lock.release()

        asyncio.run(asyncio.wait_for(main(), 20))
        self.assertEqual(self.orders, [[self.closed, self.srv.addr], [self.srv.addr, self.closed]])


class SeveralAddressesRealTest(unittest.TestCase):
    """A closed port, then the real server: both clients are granted by it."""

    def test_closed_port_then_the_server(self) -> None:
        srv = Server(self)
        closed = closed_port()
        with monolock.Client([closed, srv.addr], connect_timeout=5).lock("several", lease=2.0) as lock:
            self.assertGreater(lock.token, 0)
            self.assertTrue(lock.valid())

        async def main() -> int:
            async with monolock.aio.Client([closed, srv.addr], connect_timeout=5).lock("several", lease=2.0) as lock:
                return lock.token

        self.assertGreater(asyncio.run(asyncio.wait_for(main(), 20)), 0)


if __name__ == "__main__":
    unittest.main()
