"""The URL's TLS options against the real server: mutual TLS on the lock
port, HTTPS with an operator certificate on the admin port, and an operator
without the release role (needs openssl to make a throwaway CA)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import unittest

import tooz
import tooz.coordination

from monolock.tooz_driver import MonolockDriver
from tests.support import Server, make_pki


@unittest.skipIf(shutil.which("openssl") is None, "needs openssl for a throwaway CA: apt-get install -y openssl")
class TLSTest(unittest.TestCase):
    def setUp(self) -> None:
        d = tempfile.mkdtemp(prefix="monolock-tooz-tls-")
        self.addCleanup(shutil.rmtree, d)
        make_pki(d)
        self.dir = d

    def pki(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def server(self, roles: str) -> Server:
        acl = self.pki(f"admin-acl-{roles}.json")
        with open(acl, "w") as f:
            json.dump({"rules": [{"identity": "spiffe://test/worker", "roles": roles.split(",")}]}, f)
        return Server(
            self,
            "-tls-cert", self.pki("server.pem"), "-tls-key", self.pki("server-key.pem"), "-tls-client-ca", self.pki("ca.pem"),
            "-admin-tls-cert", self.pki("server.pem"), "-admin-tls-key", self.pki("server-key.pem"),
            "-admin-tls-client-ca", self.pki("ca.pem"), "-admin-acl-file", acl,
        )

    def coordinator(self, srv: Server, member: bytes) -> MonolockDriver:
        cert = f"tls_cert={self.pki('client.pem')}&tls_key={self.pki('client-key.pem')}"
        admin_cert = f"admin_tls_cert={self.pki('client.pem')}&admin_tls_key={self.pki('client-key.pem')}"
        url = (f"monolock://{srv.addr}?lease=2&tls_ca={self.pki('ca.pem')}&{cert}"
               f"&admin={srv.admin}&admin_tls_ca={self.pki('ca.pem')}&{admin_cert}")
        c = tooz.coordination.get_coordinator(url, member)
        assert isinstance(c, MonolockDriver)
        c.start()
        self.addCleanup(c.stop)
        return c

    def test_mutual_tls_and_break_over_https(self) -> None:
        srv = self.server("read,release")
        a, b = self.coordinator(srv, b"a").get_lock(b"tls"), self.coordinator(srv, b"b").get_lock(b"tls")
        self.assertTrue(a.acquire())
        self.assertFalse(b.acquire(blocking=False))
        self.assertTrue(b.break_())
        self.assertTrue(b.acquire(blocking=False))
        self.assertFalse(a.release())
        self.assertTrue(b.release())

    def test_break_without_the_release_role(self) -> None:
        srv = self.server("read")
        lock = self.coordinator(srv, b"a").get_lock(b"tls")
        self.assertTrue(lock.acquire())
        with self.assertRaises(tooz.ToozError) as cm:
            lock.break_()
        self.assertNotIsInstance(cm.exception, tooz.coordination.ToozConnectionError)
        self.assertIn("answered 403", str(cm.exception))
        self.assertIn("needs the admin role 'release'", str(cm.exception))
        self.assertTrue(lock.is_still_owner())
        self.assertTrue(lock.release())

    def test_start_refuses_an_untrusted_server(self) -> None:
        srv = self.server("read")
        # The system's CAs do not know the throwaway CA: the handshake of start() fails.
        c = tooz.coordination.get_coordinator(f"monolock://{srv.addr}?tls=true", b"m")
        with self.assertRaisesRegex(tooz.coordination.ToozConnectionError, "CERTIFICATE_VERIFY_FAILED"):
            c.start()


if __name__ == "__main__":
    unittest.main()
