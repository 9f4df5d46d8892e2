"""The exceptions of the monolock client.

Every exception the client raises on purpose is a :class:`MonolockError`.
Branch on the class and on ``code``, never on the message text.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "MonolockError",
    "InvalidInput",
    "Busy",
    "Unavailable",
    "ServerError",
    "LockLost",
    "ProtocolViolation",
    "CertificateRefused",
    "ClientFault",
]


class MonolockError(Exception):
    """Base class of the client's errors."""


class InvalidInput(MonolockError, ValueError):
    """The name or lease cannot be sent: refused before connecting."""


class Busy(MonolockError):
    """Someone else holds the lock, and the call did not wait (``wait=False``)
    or its wait elapsed."""


class Unavailable(MonolockError):
    """The server could not be used for now: it cannot be reached, the
    connection was lost, no answer came within 0.8 × lease, or the server sent
    an ERROR with a code below 0x10 (a server condition, such as 0x01 "server
    shutting down"). A new attempt may succeed. ``code`` and ``reason`` are the
    ERROR's, or ``None``."""

    def __init__(self, message: str, code: Optional[int] = None, reason: Optional[str] = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class ServerError(MonolockError):
    """An ERROR frame with a code of 0x10 or above: the request itself was
    wrong (or, for 0x18, not allowed). Asking again gets the same answer."""

    def __init__(self, code: int, reason: str) -> None:
        shown = reason or _CANONICAL.get(code, "unknown error code")
        super().__init__(f"monolock: server error 0x{code:02x}: {shown}")
        self.code = code
        self.reason = reason


class ProtocolViolation(MonolockError):
    """The server sent something the protocol does not allow at that point
    (an unknown frame type, an unasked reply, WAITING after ACQUIRED, a
    changed token). The client trusts nothing after it."""


class CertificateRefused(MonolockError):
    """A TLS handshake refused by certificate verification, on either side:
    the server did not accept the client's certificate (none sent, expired,
    revoked, signed by a CA it does not trust), or the client did not accept
    the server's. Another attempt meets the same refusal, so ``run`` raises
    it at once: fix the certificates or the ``ssl_context``. ``reason`` is
    OpenSSL's name for the failure (``TLSV1_ALERT_UNKNOWN_CA``,
    ``CERTIFICATE_VERIFY_FAILED``, ...)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class ClientFault(MonolockError):
    """A fault inside the client itself (a bug), not a condition of the
    server: ``run`` raises it at once rather than retry, since a new attempt
    meets the same fault. Report it with its message."""


class LockLost(MonolockError):
    """Ownership ended while the caller relied on it. ``cause`` is why: an
    :class:`Unavailable` (no confirmation in time, connection lost, server
    condition), a :class:`ServerError` or a :class:`ProtocolViolation`."""

    def __init__(self, cause: MonolockError) -> None:
        super().__init__(f"monolock: lock lost: {cause}")
        self.cause = cause


_CANONICAL = {
    0x01: "server shutting down",
    0x02: "closed by administrator",
    0x10: "unsupported protocol version",
    0x11: "first message must be ACQUIRE",
    0x12: "duplicate ACQUIRE",
    0x13: "unknown message type",
    0x14: "empty lock name",
    0x15: "lock name too long",
    0x16: "lock name is not valid UTF-8",
    0x17: "lease must be positive",
    0x18: "not authorized for lock",
}


def error_for_code(code: int, reason: str) -> MonolockError:
    """The exception for an ERROR frame, classified by range: below 0x10 a
    server condition (Unavailable), 0x10 and above a client error."""
    if code < 0x10:
        shown = reason or _CANONICAL.get(code, "server condition")
        return Unavailable(f"monolock: server error 0x{code:02x}: {shown}", code=code, reason=reason)
    return ServerError(code, reason)
