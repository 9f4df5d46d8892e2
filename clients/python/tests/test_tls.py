"""Both clients over mutual TLS against the real server (needs openssl to
make a throwaway CA)."""

import asyncio
import base64
import os
import shutil
import signal
import ssl
import tempfile
import time
import unittest
from typing import Callable

import monolock
import monolock.aio
from tests.support import Server, aheld_past, ends, held_past, make_pki, rss_kib, time_wait_from


@unittest.skipIf(shutil.which("openssl") is None, "needs openssl for a throwaway CA: apt-get install -y openssl")
class TLSTest(unittest.TestCase):
    def setUp(self) -> None:
        d = tempfile.mkdtemp(prefix="monolock-tls-")
        self.addCleanup(shutil.rmtree, d)
        make_pki(d)
        self.pki = p = lambda name: os.path.join(d, name)  # noqa: E731
        self.tls_args = ["-tls-cert", p("server.pem"), "-tls-key", p("server-key.pem"), "-tls-client-ca", p("ca.pem")]
        self.srv = Server(self, *self.tls_args)
        self.ctx = ssl.create_default_context(cafile=p("ca.pem"))
        self.ctx.load_cert_chain(p("client.pem"), p("client-key.pem"))

    def test_threaded(self) -> None:
        client = monolock.Client(self.srv.addr, ssl_context=self.ctx)
        # Longer than the lease: heartbeats over TLS keep it, until the server
        # has answered a heartbeat sent a lease after the grant. A 2 s lease
        # gives up only after 1.6 s without an answer, so a loaded machine's
        # scheduling delays cannot lose it.
        with client.lock("tls", lease=2.0) as lock:
            self.assertTrue(held_past(lock, time.monotonic() + 2.0), "heartbeats over TLS did not keep the lock")
            self.assertTrue(lock.valid())
            self.assertFalse(lock.lost.is_set())
        # A client that does not trust the server's CA: a configuration
        # error, not a condition to retry.
        with self.assertRaises(monolock.CertificateRefused) as cm:
            monolock.Client(self.srv.addr, ssl_context=ssl.create_default_context()).acquire("tls")
        self.assertEqual(cm.exception.reason, "CERTIFICATE_VERIFY_FAILED")

    def test_run_stops_when_the_server_refuses_the_certificate(self) -> None:
        other = os.path.join(os.path.dirname(self.pki("ca.pem")), "other")
        os.mkdir(other)
        make_pki(other)  # a CA the server does not trust
        for label, chain in (
            ("none", None),
            ("another CA", (os.path.join(other, "client.pem"), os.path.join(other, "client-key.pem"))),
            ("expired", (self.pki("client-expired.pem"), self.pki("client-expired-key.pem"))),
        ):
            ctx = ssl.create_default_context(cafile=self.pki("ca.pem"))
            if chain is not None:
                ctx.load_cert_chain(*chain)
            with self.subTest(cert=label, api="threaded"), self.assertRaises(monolock.CertificateRefused):
                monolock.Client(self.srv.addr, ssl_context=ctx).run("refused", lambda lock: None, wait=10.0)

            async def run() -> None:
                await monolock.aio.Client(self.srv.addr, ssl_context=ctx).run("refused", self._noop, wait=10.0)

            with self.subTest(cert=label, api="asyncio"), self.assertRaises(monolock.CertificateRefused):
                asyncio.run(asyncio.wait_for(run(), 20))

    @staticmethod
    async def _noop(lock: monolock.aio.Lock) -> None:
        return None

    def test_threaded_resumes_the_session(self) -> None:
        client = monolock.Client(self.srv.addr, ssl_context=self.ctx)
        with client.lock("first") as lock:
            self.assertIs(lock.tls_resumed, False)
        for name in ("second", "third"):  # the first one's ticket, offered again
            with client.lock(name) as lock:
                self.assertIs(lock.tls_resumed, True, name)
        # The session belongs to that Client: another one starts with a full handshake.
        with monolock.Client(self.srv.addr, ssl_context=self.ctx).lock("other") as lock:
            self.assertIs(lock.tls_resumed, False)

    # The memory of 2,000 TLS locks, after 200 to warm up (thread stacks,
    # allocator pools). Reading SSLSocket.session leaked about 7 KiB a lock
    # here (+13.5 MiB over 2,000); resuming without re-reading it costs
    # +0.1 MiB. The bound, 1 KiB a lock, is far from both. A 10 s lease:
    # of 2,200 locks on a loaded machine, one full handshake may well take
    # longer than a short lease's 0.8 × lease.
    RSS_CYCLES = 2000
    RSS_BOUND_KIB = RSS_CYCLES * 1

    def rss_growth(self, cycle: "Callable[[], None]") -> int:
        if rss_kib() is None:
            self.skipTest("needs /proc/self/status to read the RSS")
        for _ in range(200):
            cycle()
        before = rss_kib()
        for _ in range(self.RSS_CYCLES):
            cycle()
        after = rss_kib()
        assert before is not None and after is not None
        return after - before

    def test_threaded_rss_stays_flat(self) -> None:
        client = monolock.Client(self.srv.addr, ssl_context=self.ctx)

        def cycle() -> None:
            with client.lock("rss", lease=10.0) as lock:
                self.assertTrue(lock.tls_resumed is not None)

        growth = self.rss_growth(cycle)
        self.assertLessEqual(growth, self.RSS_BOUND_KIB, f"RSS grew {growth} KiB over {self.RSS_CYCLES} TLS locks")
        with client.lock("rss") as lock:
            self.assertIs(lock.tls_resumed, True)  # and it still resumes

    def test_asyncio_rss_stays_flat(self) -> None:
        client = monolock.aio.Client(self.srv.addr, ssl_context=self.ctx)
        loop = asyncio.new_event_loop()
        self.addCleanup(loop.close)

        async def lock_once() -> None:
            async with client.lock("rss", lease=10.0):
                pass

        growth = self.rss_growth(lambda: loop.run_until_complete(lock_once()))
        self.assertLessEqual(growth, self.RSS_BOUND_KIB, f"RSS grew {growth} KiB over {self.RSS_CYCLES} TLS locks")

    def _session_from(self, srv: Server, ctx: ssl.SSLContext) -> ssl.SSLSession:
        """The session a Client keeps after one lock on srv."""
        client = monolock.Client(srv.addr, ssl_context=ctx)
        client.lock("seed").__enter__().release()
        session = client._tls_sessions._session  # pyright: ignore[reportPrivateUsage]
        assert session is not None and session.has_ticket
        return session

    def _client_offering(self, srv: Server, session: ssl.SSLSession) -> monolock.Client:
        client = monolock.Client(srv.addr, ssl_context=self.ctx)
        client._tls_sessions._session = session  # pyright: ignore[reportPrivateUsage]
        return client

    def test_refused_session_means_a_full_handshake(self) -> None:
        # Another server process has its own ticket keys: it cannot open the
        # ticket, as after a restart without -tls-ticket-keys.
        other = Server(self, *self.tls_args)
        client = self._client_offering(other, self._session_from(self.srv, self.ctx))
        with client.lock("refused") as lock:
            self.assertIs(lock.tls_resumed, False)
            self.assertTrue(lock.valid())
        with client.lock("then-resumed") as lock:
            self.assertIs(lock.tls_resumed, True)

    def test_session_of_another_context_is_dropped(self) -> None:
        ctx = ssl.create_default_context(cafile=self.pki("ca.pem"))
        ctx.load_cert_chain(self.pki("client.pem"), self.pki("client-key.pem"))
        client = self._client_offering(self.srv, self._session_from(self.srv, ctx))
        with client.lock("foreign") as lock:
            self.assertIs(lock.tls_resumed, False)
        with client.lock("own") as lock:
            self.assertIs(lock.tls_resumed, True)

    def test_shared_ticket_keys_resume_across_servers(self) -> None:
        keys = self.pki("tickets")
        fd = os.open(keys, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(base64.b64encode(os.urandom(32)).decode() + "\n")
        first = Server(self, *self.tls_args, "-tls-ticket-keys", keys)
        session = self._session_from(first, self.ctx)
        first.stop()
        # The standby of a pair, or the restarted server, with the same file.
        second = Server(self, *self.tls_args, "-tls-ticket-keys", keys)
        with self._client_offering(second, session).lock("failover") as lock:
            self.assertIs(lock.tls_resumed, True)

    def test_asyncio(self) -> None:
        async def main() -> None:
            client = monolock.aio.Client(self.srv.addr, ssl_context=self.ctx)
            async with client.lock("tls", lease=2.0) as lock:
                # Longer than the lease, as in test_threaded.
                self.assertTrue(await aheld_past(lock, asyncio.get_running_loop().time() + 2.0), "heartbeats over TLS did not keep the lock")
                self.assertTrue(lock.valid())

        asyncio.run(main())

    def test_release_over_tls_leaves_no_time_wait(self) -> None:
        client = monolock.Client(self.srv.addr, ssl_context=self.ctx)
        lock = client.acquire("tls-release", lease=10.0)
        addrs = ends(lock)
        lock.release()
        self.assertIsNone(lock.error)
        self.assertEqual(time_wait_from(*addrs), [], "the client closed first")
        client.acquire("tls-release", lease=10.0, wait=5.0).release()

        async def main() -> None:
            aclient = monolock.aio.Client(self.srv.addr, ssl_context=self.ctx)
            lock = await aclient.acquire("tls-release", lease=10.0)
            addrs = ends(lock)
            await lock.release()
            self.assertIsNone(lock.error)
            self.assertEqual(time_wait_from(*addrs), [], "the client closed first")
            await (await aclient.acquire("tls-release", lease=10.0, wait=5.0)).release()

        asyncio.run(asyncio.wait_for(main(), 20))

    def test_asyncio_server_stopped_while_held(self) -> None:
        async def main() -> None:
            client = monolock.aio.Client(self.srv.addr, ssl_context=self.ctx)
            lock = await client.acquire("stopped", lease=2.0)
            sock = lock._conn.transport.get_extra_info("socket")  # pyright: ignore[reportPrivateUsage, reportOptionalMemberAccess]
            self.srv.proc.send_signal(signal.SIGSTOP)
            self.addCleanup(self.srv.proc.send_signal, signal.SIGCONT)
            await lock.lost.wait()  # no answer within 0.8 × lease
            self.assertIsInstance(lock.error, monolock.Unavailable)
            await lock.release()  # without waiting for the stopped server's close_notify
            self.assertEqual(sock.fileno(), -1, "the socket stayed open")

        # The bound guards against a hang: it is below asyncio's 30 s SSL
        # shutdown timeout that release() used to wait out.
        asyncio.run(asyncio.wait_for(main(), 20))


if __name__ == "__main__":
    unittest.main()
