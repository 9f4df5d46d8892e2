"""The monolock:// URL: what each option sets and the errors for bad ones;
the driver found through tooz's entry point."""

from __future__ import annotations

import urllib.parse
import unittest
from typing import Any

import tooz
import tooz.coordination

from monolock.tooz_driver import DEFAULT_LEASE, MonolockDriver, Settings, parse_settings


def parse(url: str) -> Settings:
    u = urllib.parse.urlsplit(url)
    return parse_settings(u.hostname, u.port, urllib.parse.parse_qs(u.query))


class ParseTest(unittest.TestCase):
    def test_defaults(self) -> None:
        s = parse("monolock://127.0.0.1:7070")
        self.assertEqual(s, Settings(addr="127.0.0.1:7070"))
        self.assertEqual(s.lease, DEFAULT_LEASE)
        self.assertIsNone(s.admin)
        self.assertFalse(s.tls)
        self.assertFalse(s.admin_https)

    def test_every_option(self) -> None:
        s = parse("monolock://locks.internal:7070/a/path?lease=30&admin=10.0.0.5:7071&connect_timeout=3"
                  "&tls_ca=/etc/ca.pem&tls_cert=/etc/c.pem&tls_key=/etc/k.pem"
                  "&admin_tls_ca=/etc/aca.pem&admin_tls_cert=/etc/op.pem&admin_tls_key=/etc/op-key.pem&timeout=5")
        self.assertEqual(s, Settings(
            addr="locks.internal:7070", lease=30.0, connect_timeout=3.0, tls=True,
            tls_ca="/etc/ca.pem", tls_cert="/etc/c.pem", tls_key="/etc/k.pem",
            admin="10.0.0.5:7071", admin_tls_ca="/etc/aca.pem", admin_tls_cert="/etc/op.pem", admin_tls_key="/etc/op-key.pem",
        ))
        self.assertTrue(s.admin_https)

    def test_ipv6_and_fractions(self) -> None:
        s = parse("monolock://[::1]:7070?lease=0.25&admin=[::1]:7071&tls=true")
        self.assertEqual((s.addr, s.lease, s.admin, s.tls), ("[::1]:7070", 0.25, "[::1]:7071", True))

    def test_last_value_counts(self) -> None:
        self.assertEqual(parse("monolock://h:1?lease=1&lease=9").lease, 9.0)

    def test_errors_say_what_to_write(self) -> None:
        cases = {
            "monolock://127.0.0.1": "the address is missing",
            "monolock://:7070": "the address is missing",
            "monolock://h:1?lease=0": "lease='0' must be more than 0",
            "monolock://h:1?lease=-1": "lease='-1' must be more than 0",
            "monolock://h:1?lease=nan": "lease='nan' must be more than 0",
            "monolock://h:1?lease=5000000": "at most 4.29497e+06 seconds",
            "monolock://h:1?lease=2s": "lease='2s' is not a number of seconds: write for example lease=2.5",
            "monolock://h:1?admin=7071": "admin='7071' is not HOST:PORT",
            "monolock://h:1?admin=h:99999": "admin='h:99999' is not HOST:PORT",
            "monolock://h:1?tls=maybe": "tls='maybe' is not a boolean",
            "monolock://h:1?tls=false&tls_ca=/ca.pem": "tls=false with tls_ca or tls_cert",
            "monolock://h:1?tls_key=/k.pem": "tls_key is given without tls_cert",
            "monolock://h:1?admin=h:2&admin_tls_key=/k.pem": "admin_tls_key is given without admin_tls_cert",
            "monolock://h:1?admin_tls_ca=/ca.pem": "admin_tls_* files without admin=HOST:PORT",
            "monolock://h:1?leese=3": "unknown option leese: the options are lease,",
        }
        for url, want in cases.items():
            with self.subTest(url=url):
                with self.assertRaises(tooz.ToozError) as cm:
                    parse(url)
                self.assertIn(want, str(cm.exception))
                self.assertTrue(str(cm.exception).startswith("monolock tooz URL: "))

    def test_empty_file_option(self) -> None:
        with self.assertRaisesRegex(tooz.ToozError, "tls_ca= is empty"):
            parse_settings("h", 1, {"tls_ca": [""]})


class EntryPointTest(unittest.TestCase):
    def test_get_coordinator_loads_the_driver(self) -> None:
        c = tooz.coordination.get_coordinator("monolock://127.0.0.1:7070?admin=127.0.0.1:7071&lease=4", b"member")
        self.assertIsInstance(c, MonolockDriver)
        assert isinstance(c, MonolockDriver)
        self.assertEqual(c.settings, Settings(addr="127.0.0.1:7070", lease=4.0, admin="127.0.0.1:7071"))
        self.assertFalse(c.requires_beating)

    def test_keyword_options_take_precedence(self) -> None:
        c = tooz.coordination.get_coordinator("monolock://127.0.0.1:7070?lease=4", b"member", lease=7.5)
        assert isinstance(c, MonolockDriver)
        self.assertEqual(c.settings.lease, 7.5)

    def test_missing_tls_file(self) -> None:
        with self.assertRaisesRegex(tooz.ToozError, "cannot load the lock port TLS files .*/no/such/ca.pem"):
            tooz.coordination.get_coordinator("monolock://127.0.0.1:7070?tls_ca=/no/such/ca.pem", b"member")
        with self.assertRaisesRegex(tooz.ToozError, "cannot load the admin TLS files"):
            tooz.coordination.get_coordinator("monolock://127.0.0.1:7070?admin=127.0.0.1:7071&admin_tls_ca=/no/such/ca.pem", b"member")

    def test_groups_and_elections_are_not_implemented(self) -> None:
        c = tooz.coordination.get_coordinator("monolock://127.0.0.1:7070", b"member")

        def cb(event: Any) -> None:
            self.fail(f"a callback ran: {event}")

        calls = [
            lambda: c.create_group(b"g"), lambda: c.join_group(b"g"), lambda: c.get_groups(),
            lambda: c.get_members(b"g"), lambda: c.get_leader(b"g"), lambda: c.run_watchers(),
            lambda: c.watch_join_group(b"g", cb), lambda: c.unwatch_join_group(b"g", cb),
            lambda: c.watch_leave_group(b"g", cb), lambda: c.unwatch_leave_group(b"g", cb),
            lambda: c.watch_elected_as_leader(b"g", cb), lambda: c.unwatch_elected_as_leader(b"g", cb),
        ]
        for call in calls:
            with self.assertRaises(tooz.NotImplemented):
                call()

    def test_shared_locks_are_not_implemented(self) -> None:
        c = tooz.coordination.get_coordinator("monolock://127.0.0.1:7070", b"member")
        with self.assertRaisesRegex(tooz.NotImplemented, "exclusive"):
            c.get_lock(b"x").acquire(shared=True)

    def test_break_without_admin_is_not_implemented(self) -> None:
        c = tooz.coordination.get_coordinator("monolock://127.0.0.1:7070", b"member")
        with self.assertRaisesRegex(tooz.NotImplemented, "add admin=HOST:PORT"):
            c.get_lock(b"x").break_()

    def test_acquire_before_start(self) -> None:
        c = tooz.coordination.get_coordinator("monolock://127.0.0.1:7070", b"member")
        with self.assertRaisesRegex(tooz.ToozError, "call start"):
            c.get_lock(b"x").acquire()


if __name__ == "__main__":
    unittest.main()
