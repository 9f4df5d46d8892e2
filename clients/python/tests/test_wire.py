"""Bytes and input checks, against the golden encodings of the protocol."""

import unittest

from monolock import InvalidInput, _wire


class EncodeTest(unittest.TestCase):
    def test_golden_acquire(self) -> None:
        # docs/protocol.md's example: lease 2000 ms, name nightly-import.
        got = _wire.encode_acquire(_wire.lease_ms(2.0), _wire.name_bytes("nightly-import"))
        self.assertEqual(got.hex(), "0101000007d0000e6e696768746c792d696d706f7274")

    def test_name_is_raw_utf8(self) -> None:
        got = _wire.encode_acquire(2000, _wire.name_bytes("zürich-锁-1"))
        self.assertEqual(got[6:8], (13).to_bytes(2, "big"))
        self.assertEqual(got[8:], "zürich-锁-1".encode())

    def test_lease_rounds_up_to_whole_ms(self) -> None:
        self.assertEqual(_wire.lease_ms(1.50025), 1501)
        self.assertEqual(_wire.lease_ms(0.001000001), 2)
        # 0.3 is 0.29999999999999998889... as a float: still 300 ms, not 301.
        self.assertEqual(_wire.lease_ms(0.3), 300)
        self.assertEqual(_wire.lease_ms(4294967.295), 0xFFFFFFFF)

    def test_bad_lease(self) -> None:
        # Below 1 ms (1 to 999,999 ns included) is refused, never sent as 1 ms.
        for lease in (0, -1.0, float("nan"), float("inf"), 4294967.296, True, 0.0001, 0.000999999, 1e-9):
            with self.subTest(lease=lease), self.assertRaises(InvalidInput):
                _wire.lease_ms(lease)  # type: ignore[arg-type]

    def test_bad_names(self) -> None:
        for name in ("", "a" * 256, "é" * 128, "bad\udcff", b"\xff"):
            with self.subTest(name=name), self.assertRaises(InvalidInput):
                _wire.name_bytes(name)
        self.assertEqual(_wire.name_bytes("a" * 255), b"a" * 255)


class FrameReaderTest(unittest.TestCase):
    STREAM = bytes.fromhex("11" + "12" + "8000000000000001" + "13" + "02" + "00" + "13" + "7f" + "03") + "é!".encode()

    @staticmethod
    def drain(r: _wire.FrameReader) -> "list[_wire.Frame]":
        out = []
        while True:
            frame = r.next()
            if frame is None:
                return out
            out.append(frame)

    def test_split_at_every_byte(self) -> None:
        r = _wire.FrameReader()
        frames = []
        for i in range(len(self.STREAM)):
            r.feed(self.STREAM[i : i + 1])
            frames += self.drain(r)
        self.assertEqual(frames, self.expected())

    def test_coalesced(self) -> None:
        r = _wire.FrameReader()
        r.feed(self.STREAM)
        self.assertEqual(self.drain(r), self.expected())

    def test_unknown_type_after_whole_frames(self) -> None:
        r = _wire.FrameReader()
        r.feed(bytes([0x13, 0x02, 0]) + b"\x7e")
        self.assertEqual(r.next(), (0x13, 0, 0x02, ""))  # the ERROR first, then the junk
        with self.assertRaisesRegex(ValueError, "0x7e"):
            r.next()

    @staticmethod
    def expected():  # type: ignore[no-untyped-def]
        return [
            (0x11, 0, 0, ""),
            (0x12, 2**63 + 1, 0, ""),
            (0x13, 0, 0x02, ""),
            (0x13, 0, 0x7F, "é!"),
        ]


if __name__ == "__main__":
    unittest.main()
