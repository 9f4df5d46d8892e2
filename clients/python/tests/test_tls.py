"""Both clients over mutual TLS against the real server (needs openssl to
make a throwaway CA)."""

import asyncio
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import unittest

import monolock
import monolock.aio
from tests.support import Server


def _openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d: str) -> None:
    """A CA, a server certificate for 127.0.0.1, a client certificate."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    _openssl("req", "-x509", "-new", *ec, "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "1",
             "-subj", "/CN=test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign", cwd=d)
    for name, ext in (
        ("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("client", "subjectAltName=URI:spiffe://test/worker\nextendedKeyUsage=clientAuth\n"),
    ):
        _openssl("req", "-new", *ec, "-keyout", f"{name}-key.pem", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
                 "-CAcreateserial", "-days", "1", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)


@unittest.skipIf(shutil.which("openssl") is None, "needs openssl for a throwaway CA: apt-get install -y openssl")
class TLSTest(unittest.TestCase):
    def setUp(self) -> None:
        d = tempfile.mkdtemp(prefix="monolock-tls-")
        self.addCleanup(shutil.rmtree, d)
        make_pki(d)
        p = lambda name: os.path.join(d, name)  # noqa: E731
        self.srv = Server(self, "-tls-cert", p("server.pem"), "-tls-key", p("server-key.pem"), "-tls-client-ca", p("ca.pem"))
        self.ctx = ssl.create_default_context(cafile=p("ca.pem"))
        self.ctx.load_cert_chain(p("client.pem"), p("client-key.pem"))

    def test_threaded(self) -> None:
        client = monolock.Client(self.srv.addr, ssl_context=self.ctx)
        with client.lock("tls", lease=0.4) as lock:
            time.sleep(0.6)  # longer than the lease: heartbeats over TLS keep it
            self.assertTrue(lock.valid())
            self.assertFalse(lock.lost.is_set())
        # A client that does not trust the server's CA: a configuration
        # error, not a condition to retry.
        with self.assertRaises(monolock.MonolockError) as cm:
            monolock.Client(self.srv.addr, ssl_context=ssl.create_default_context()).acquire("tls")
        self.assertNotIsInstance(cm.exception, monolock.Unavailable)

    def test_asyncio(self) -> None:
        async def main() -> None:
            client = monolock.aio.Client(self.srv.addr, ssl_context=self.ctx)
            async with client.lock("tls", lease=0.4) as lock:
                await asyncio.sleep(0.6)
                self.assertTrue(lock.valid())

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
