"""The tooz name → monolock name mapping: exact, stable values."""

from __future__ import annotations

import hashlib
import unittest

from monolock.tooz_driver import HASHED_PREFIX, lock_name


def hashed(raw: bytes) -> str:
    return HASHED_PREFIX + hashlib.sha256(raw).hexdigest()


class LockNameTest(unittest.TestCase):
    def test_utf8_names_are_kept(self) -> None:
        self.assertEqual(lock_name(b"nightly/import"), "nightly/import")
        self.assertEqual(lock_name("café".encode()), "café")
        self.assertEqual(lock_name("café"), "café")  # a str is its UTF-8 bytes

    def test_255_bytes_kept_256_hashed(self) -> None:
        self.assertEqual(lock_name(b"a" * 255), "a" * 255)
        self.assertEqual(lock_name(b"a" * 256), hashed(b"a" * 256))
        # 128 two-byte characters: 256 bytes.
        name = ("é" * 128).encode()
        self.assertEqual(len(name), 256)
        self.assertEqual(lock_name(name), hashed(name))

    def test_not_utf8_is_hashed(self) -> None:
        for raw in (b"\xff", b"ok\xc3", b"\xed\xa0\x80"):  # invalid byte, truncated sequence, a surrogate
            self.assertEqual(lock_name(raw), hashed(raw))
        self.assertEqual(lock_name("\udc80"), hashed(b"\xed\xb2\x80"))  # a lone surrogate in a str

    def test_the_prefix_is_reserved(self) -> None:
        # A tooz name that looks like a hashed name is hashed itself, so it
        # cannot land on the lock of the name it looks like.
        looks_hashed = hashed(b"\xff").encode()
        self.assertEqual(lock_name(looks_hashed), hashed(looks_hashed))
        self.assertNotEqual(lock_name(looks_hashed), lock_name(b"\xff"))

    def test_empty_is_hashed(self) -> None:
        self.assertEqual(lock_name(b""), hashed(b""))

    def test_stable_values(self) -> None:
        # Fixed here so that a change of the mapping, which would split
        # running fleets across two locks, fails this test.
        self.assertEqual(lock_name(b"\xff"), "tooz-sha256/a8100ae6aa1940d0b663bb31cd466142ebbdbd5187131b92d93818987832eb89")
        self.assertEqual(len(lock_name(b"x" * 300)), 76)


if __name__ == "__main__":
    unittest.main()
