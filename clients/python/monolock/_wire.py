"""The bytes of protocol version 1 (docs/protocol.md, "Frames")."""

from __future__ import annotations

import math
import struct
from typing import Optional, Tuple, Union

from .errors import InvalidInput

VERSION = 1
TYPE_ACQUIRE = 0x01
TYPE_HEARTBEAT = 0x02
TYPE_RELEASE = 0x03
TYPE_WAITING = 0x11
TYPE_ACQUIRED = 0x12
TYPE_ERROR = 0x13

MAX_NAME_BYTES = 255
MAX_LEASE_MS = 0xFFFFFFFF

HEARTBEAT = bytes([TYPE_HEARTBEAT])
RELEASE = bytes([TYPE_RELEASE])

_ACQUIRE_HEADER = struct.Struct(">BBIH")
_TOKEN = struct.Struct(">Q")


def lease_ms(lease: float) -> int:
    """The lease in whole milliseconds, a fraction rounded up so the server
    never drops a session earlier than asked. The lease is first taken to the
    nanosecond, so a binary float such as 0.3 s is 300 ms, not 301."""
    if isinstance(lease, bool) or not isinstance(lease, (int, float)):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise InvalidInput(f"monolock: lease must be a number of seconds, not {type(lease).__name__}")
    if not math.isfinite(lease) or lease <= 0:
        raise InvalidInput(f"monolock: lease must be positive (got {lease!r}): give it in seconds, for example lease=2.0")
    ns = round(lease * 1_000_000_000)
    if ns < 1_000_000:
        # Not sent as 1 ms: the client would time a lease the server does not hold.
        raise InvalidInput(f"monolock: lease {lease!r} s is shorter than 1 ms, the protocol's smallest lease: give at least lease=0.001")
    ms = -(-ns // 1_000_000)
    if ms > MAX_LEASE_MS:
        raise InvalidInput(f"monolock: lease {lease!r} s is longer than the protocol's maximum of {MAX_LEASE_MS} ms (about 49.7 days)")
    return ms


def name_bytes(name: Union[str, bytes]) -> bytes:
    """The name as it goes on the wire: 1 to 255 bytes of valid UTF-8."""
    if isinstance(name, str):
        try:
            raw = name.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidInput(f"monolock: lock name {name!r} is not valid UTF-8 ({e.reason}): use text without lone surrogates") from None
    elif isinstance(name, (bytes, bytearray)):  # pyright: ignore[reportUnnecessaryIsInstance]
        raw = bytes(name)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"monolock: lock name {raw!r} is not valid UTF-8") from None
    else:
        raise InvalidInput(f"monolock: lock name must be str, not {type(name).__name__}")
    if not raw:
        raise InvalidInput("monolock: empty lock name: give a name of 1 to 255 bytes")
    if len(raw) > MAX_NAME_BYTES:
        raise InvalidInput(f"monolock: lock name is {len(raw)} bytes of UTF-8; the protocol allows at most {MAX_NAME_BYTES}")
    return raw


def encode_acquire(lease_ms_: int, name: bytes) -> bytes:
    return _ACQUIRE_HEADER.pack(TYPE_ACQUIRE, VERSION, lease_ms_, len(name)) + name


# A decoded server frame: (type, token, code, reason). token is set for
# ACQUIRED, code and reason for ERROR.
Frame = Tuple[int, int, int, str]


class FrameReader:
    """Whole frames out of a byte stream split anywhere (rule 2), one at a
    time, so that a frame is acted on before the bytes after it are looked
    at: an ERROR followed by junk in the same read is still that ERROR."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        """Adds bytes read from the server."""
        self._buf += data

    def next(self) -> Optional[Frame]:
        """The next whole frame, or None until more bytes come. Raises
        ValueError with the offending type byte on a frame type the protocol
        does not have."""
        buf = self._buf
        if not buf:
            return None
        typ = buf[0]
        if typ == TYPE_WAITING:
            del buf[:1]
            return (typ, 0, 0, "")
        if typ == TYPE_ACQUIRED:
            if len(buf) < 9:
                return None
            (token,) = _TOKEN.unpack_from(buf, 1)
            del buf[:9]
            return (typ, token, 0, "")
        if typ == TYPE_ERROR:
            if len(buf) < 3 or len(buf) < 3 + buf[2]:
                return None
            code, n = buf[1], buf[2]
            reason = bytes(buf[3 : 3 + n]).decode("utf-8", "replace")
            del buf[: 3 + n]
            return (typ, 0, code, reason)
        raise ValueError(f"unknown frame type 0x{typ:02x} from the server")
