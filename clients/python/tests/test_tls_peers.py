"""Both clients against fake TLS peers: one that completes the handshake and
then never answers, one that refuses the client's certificate. Every client
rule holds over TLS as over TCP."""

import asyncio
import os
import shutil
import ssl
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

import monolock
import monolock.aio
from tests.support import FakeServer, acquired, make_pki, tcp_closed

T = TypeVar("T")


@unittest.skipIf(shutil.which("openssl") is None, "needs openssl for a throwaway CA: apt-get install -y openssl")
class TLSPeerTest(unittest.TestCase):
    d = ""

    @classmethod
    def setUpClass(cls) -> None:
        cls.d = tempfile.mkdtemp(prefix="monolock-tls-peers-")
        make_pki(cls.d)
        os.mkdir(os.path.join(cls.d, "other"))
        make_pki(os.path.join(cls.d, "other"))  # a CA that signed nothing of ours

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.d)

    def pki(self, name: str) -> str:
        return os.path.join(self.d, name)

    def peer(self, client_ca: str = "ca.pem") -> FakeServer:
        """A fake server over mutual TLS trusting client certificates of client_ca."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.pki("server.pem"), self.pki("server-key.pem"))
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(self.pki(client_ca))
        srv = FakeServer(ctx)
        self.addCleanup(srv.close)
        return srv

    def client_context(self, cert: str = "client") -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.pki("ca.pem"))
        if cert:
            ctx.load_cert_chain(self.pki(f"{cert}.pem"), self.pki(f"{cert}-key.pem"))
        return ctx

    def run_async(self, coro):  # type: ignore[no-untyped-def]
        # The bound is a guard against a hang, well below asyncio's 30 s SSL
        # shutdown timeout that the client used to wait out.
        return asyncio.run(asyncio.wait_for(coro, 20))

    async def in_thread(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, fn)

    # --- silent after the handshake -------------------------------------

    def test_aio_acquire_gives_up_on_a_silent_peer(self) -> None:
        srv = self.peer()

        async def main() -> None:
            client = monolock.aio.Client(srv.addr, ssl_context=self.client_context())
            task = asyncio.ensure_future(client.acquire("job", lease=2.0))
            c = await self.in_thread(srv.next)
            await self.in_thread(lambda: srv.read_acquire(c))
            with self.assertRaises(monolock.Unavailable) as cm:  # no answer within 0.8 × lease
                await task
            self.assertIsNone(cm.exception.code)
            self.assertTrue(await self.in_thread(lambda: tcp_closed(c)), "the socket stayed open")

        self.run_async(main())

    def test_aio_release_after_give_up_on_a_silent_peer(self) -> None:
        srv = self.peer()

        async def acquire_then_release(client: monolock.aio.Client) -> None:
            lock = await client.acquire("job", lease=2.0)
            await lock.lost.wait()
            await lock.release()

        async def context(client: monolock.aio.Client) -> None:
            with self.assertRaises(monolock.LockLost):
                async with client.lock("job", lease=2.0) as lock:
                    await lock.lost.wait()

        async def run(client: monolock.aio.Client) -> None:
            async def fn(lock: monolock.aio.Lock) -> None:
                await lock.lost.wait()

            with self.assertRaises(monolock.LockLost):
                await client.run("job", fn, lease=2.0)

        async def main() -> None:
            client = monolock.aio.Client(srv.addr, ssl_context=self.client_context())
            for shape in (acquire_then_release, context, run):
                with self.subTest(shape=shape.__name__):
                    task = asyncio.ensure_future(shape(client))
                    c = await self.in_thread(srv.next)
                    await self.in_thread(lambda: srv.read_acquire(c))
                    c.sendall(acquired(7))  # heartbeats are never answered from here
                    await task
                    self.assertTrue(await self.in_thread(lambda: tcp_closed(c)), "the socket stayed open")

        self.run_async(main())

    def test_threaded_gives_up_on_a_silent_peer(self) -> None:
        srv = self.peer()
        client = monolock.Client(srv.addr, ssl_context=self.client_context())
        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(client.acquire, "job", 2.0)
            c = srv.next()
            srv.read_acquire(c)
            with self.assertRaises(monolock.Unavailable):
                fut.result(timeout=20)
        self.assertTrue(tcp_closed(c), "the socket stayed open")

        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(client.acquire, "job", 2.0)
            c = srv.next()
            srv.read_acquire(c)
            c.sendall(acquired(7))
            lock = fut.result(timeout=20)
        self.assertTrue(lock.lost.wait(20))
        self.assertIsInstance(lock.error, monolock.Unavailable)
        lock.release()
        self.assertTrue(tcp_closed(c), "the socket stayed open")

    def test_handshake_stalled_ends_at_the_connect_timeout(self) -> None:
        srv = FakeServer()  # accepts, then never answers the ClientHello
        self.addCleanup(srv.close)
        ctx = self.client_context()
        with self.assertRaises(monolock.Unavailable):  # retried by run(): the server may be starting
            monolock.Client(srv.addr, ssl_context=ctx, connect_timeout=0.5).acquire("job")
        with self.assertRaises(monolock.Unavailable):
            self.run_async(monolock.aio.Client(srv.addr, ssl_context=ctx, connect_timeout=0.5).acquire("job"))
        for c in srv.accepted:
            self.assertTrue(tcp_closed(c), "the socket stayed open")

    # --- refusing the client's certificate -------------------------------

    def test_run_stops_at_a_refused_certificate(self) -> None:
        for cert, client_ca, alert in (
            ("client", "other/ca.pem", "TLSV1_ALERT_UNKNOWN_CA"),
            ("client-expired", "ca.pem", "SSLV3_ALERT_CERTIFICATE_EXPIRED"),
            ("", "ca.pem", "TLSV13_ALERT_CERTIFICATE_REQUIRED"),
        ):
            for api in ("threaded", "asyncio"):
                with self.subTest(cert=cert or "none", api=api):
                    srv = self.peer(client_ca)
                    ctx = self.client_context(cert)
                    with self.assertRaises(monolock.CertificateRefused) as cm:
                        if api == "threaded":
                            monolock.Client(srv.addr, ssl_context=ctx).run("job", lambda lock: None, wait=10.0)
                        else:
                            self.run_async(monolock.aio.Client(srv.addr, ssl_context=ctx).run("job", self._noop, wait=10.0))
                    self.assertEqual(cm.exception.reason, alert)
                    self.assertIn(srv.addr, str(cm.exception))
                    srv.refused.get(timeout=10)  # the peer refused it ...
                    self.assertEqual(len(srv.accepted), 1)  # ... once: run() has returned, no retry can follow

    @staticmethod
    async def _noop(lock: monolock.aio.Lock) -> None:
        return None


if __name__ == "__main__":
    unittest.main()
