"""Pieces shared by the threaded and the asyncio client."""

from __future__ import annotations

import random
import socket
import ssl
import struct
import threading
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from .errors import Busy, CertificateRefused, ClientFault, InvalidInput, MonolockError, Unavailable

DEFAULT_ADDRESS = "127.0.0.1:7070"

# Retries of run(): exponential from 100 ms, doubling up to 5 s, each wait
# uniform in [step/2, step] so that clients that failed together do not retry
# together (the Go client's DoRetry uses the same).
MIN_BACKOFF = 0.1
MAX_BACKOFF = 5.0

Wait = Union[bool, float]

# One server address or several: "host:port", or a list of them.
Addresses = Union[str, Sequence[str]]


def split_address(addr: str) -> Tuple[str, int]:
    """"host:port" or "[v6]:port" into its parts."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise InvalidInput(f"monolock: address {addr!r} is not host:port (for example 127.0.0.1:7070)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


# A resolved candidate: (family, sockaddr, "host:port" as configured).
Candidate = Tuple[int, Tuple[str, int], str]


class AddressBook:
    """The server addresses a Client was given, and the one that worked last.
    Each attempt tries every candidate (each address a name resolves to is
    one) in the configured order, starting from the last that worked: a
    server that refuses (a standby, a stopped one) costs one refused connect,
    not the attempt. Shared by a Client's threads, hence the lock."""

    def __init__(self, addrs: Addresses) -> None:
        given = [addrs] if isinstance(addrs, str) else list(addrs)
        if not given:
            raise InvalidInput("monolock: no server address given: pass one \"host:port\" or a list of them")
        self.addrs: List[str] = given
        self.parts = [split_address(a) for a in given]
        self._mu = threading.Lock()
        self._worked: Optional[Tuple[int, Tuple[str, int]]] = None

    def label(self) -> str:
        """The addresses, for the errors' messages."""
        return ", ".join(self.addrs)

    def order(self, resolved: Sequence[Candidate]) -> List[Candidate]:
        """The candidates in the order to try: from the last that worked
        on, then the ones before it, each once."""
        with self._mu:
            worked = self._worked
        for i, (family, sockaddr, _) in enumerate(resolved):
            if (family, sockaddr) == worked:
                return list(resolved[i:]) + list(resolved[:i])
        return list(resolved)

    def worked(self, c: Candidate) -> None:
        with self._mu:
            self._worked = (c[0], c[1])


def resolved(family: int, sockaddr: Tuple[object, ...], label: str) -> Candidate:
    """One getaddrinfo result as a candidate (IPv6's flow and scope dropped:
    host and port are what a connect needs, and what identifies it)."""
    return (family, (str(sockaddr[0]), int(str(sockaddr[1]))), label)


def candidates(book: AddressBook, getaddrinfo: Callable[..., Sequence[Tuple[Any, ...]]]) -> Tuple[List[Candidate], List[str]]:
    """Every address the book's addresses resolve to, each once, in the
    configured order; and why the ones that did not resolve failed."""
    out: List[Candidate] = []
    failed: List[str] = []
    for label, (host, port) in zip(book.addrs, book.parts):
        try:
            infos = getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as e:
            failed.append(f"{label}: {e}")
            continue
        for info in infos:
            c = resolved(int(info[0]), info[4], label)
            if c not in out:
                out.append(c)
    return out, failed


def wait_seconds(wait: Wait) -> Optional[float]:
    """wait=True: None (forever); False: 0; a number: that many seconds."""
    if wait is True:
        return None
    if wait is False:
        return 0.0
    if isinstance(wait, (int, float)) and wait >= 0:  # pyright: ignore[reportUnnecessaryIsInstance]
        return float(wait)
    raise InvalidInput(f"monolock: wait must be True, False or a number of seconds >= 0, not {wait!r}")


class Backoff:
    def __init__(self) -> None:
        self._step = 0.0

    def next(self) -> float:
        step = self._step or MIN_BACKOFF
        self._step = min(2 * step, MAX_BACKOFF)
        return random.uniform(step / 2, step)


def shutdown_jitter(lease: float) -> float:
    """The wait before reconnecting after 0x01 "server shutting down": uniform
    in [0, min(1 s, lease/4)], so that a fleet told at once does not reach the
    restarted server or the standby in the same millisecond."""
    return random.uniform(0.0, min(1.0, lease / 4))


def retry_delay(err: MonolockError, backoff: Backoff, lease: float) -> Optional[float]:
    """How long run() waits before a new attempt after err, or None when err
    is not worth retrying (rule 6): a short random wait after 0x01 "server
    shutting down" (see shutdown_jitter), backoff after other server
    conditions and lost connections, never after client errors (0x10 and
    above), invalid input or Busy."""
    if isinstance(err, Unavailable) and not isinstance(err, Busy):
        if err.code == 0x01:
            return shutdown_jitter(lease)
        return backoff.next()
    return None


# The TLS alerts by which a server refuses the client's certificate, by
# OpenSSL's name for them, and what to do about each. Under TLS 1.3 the
# client's handshake is over before the server has checked its certificate,
# so the alert arrives on the first read, not from the handshake.
_CLIENT_CERTIFICATE_ALERTS = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "the server requires a client certificate and none was sent: load one into the ssl_context (ctx.load_cert_chain(certfile, keyfile))",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED": "the server refused the client certificate as expired (or not yet valid): renew it",
    "SSLV3_ALERT_CERTIFICATE_REVOKED": "the server refused the client certificate as revoked: get a new one",
    "TLSV1_ALERT_UNKNOWN_CA": "the server does not trust the CA that signed the client certificate: use one signed by a CA of the server's -tls-client-ca",
    "SSLV3_ALERT_BAD_CERTIFICATE": "the server refused the client certificate: check that a CA of the server's -tls-client-ca signed it, that it is valid now and allows clientAuth",
    "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE": "the server refused the client certificate as unsupported: check its key type and that its extended key usage allows clientAuth",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "the server refused the client certificate: check that a CA of the server's -tls-client-ca signed it, that it is valid now and allows clientAuth",
}


def certificate_refusal(addr: str, e: Optional[BaseException]) -> Optional[CertificateRefused]:
    """The CertificateRefused for e when e is a TLS failure of certificate
    verification on either side (the client refused the server's
    certificate, or the server's alert refused the client's), else None.
    Every other TLS failure (a handshake cut short, timed out or reset,
    another alert) is left to be retried."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return CertificateRefused(
            f"monolock: TLS to {addr}: the server's certificate failed verification ({e.verify_message}): "
            "check that the ssl_context trusts the CA that signed it (cafile=...), that it names the host in the address, and that it is valid now",
            "CERTIFICATE_VERIFY_FAILED",
        )
    if isinstance(e, ssl.SSLError):
        reason = getattr(e, "reason", None) or ""
        hint = _CLIENT_CERTIFICATE_ALERTS.get(reason)
        if hint is not None:
            return CertificateRefused(f"monolock: TLS to {addr}: {hint} (TLS alert {reason})", reason)
    return None


# The longest single wait handed to select() or a socket timeout: epoll and
# poll take a signed 32-bit count of milliseconds (about 24.8 days), less than
# the protocol's longest lease. A longer wait is made of several.
MAX_SELECT_WAIT = 86400.0

# SO_LINGER {on, 0 s}: close() sends an RST instead of a FIN.
_LINGER_RESET = struct.pack("ii", 1, 0)


def select_timeout(wake: Optional[float], now: float, minimum: float = 0.0) -> Optional[float]:
    """The wait from now until wake (None: none due) for select() or a
    socket timeout, at least minimum and at most a day: the caller's loop
    looks at its timers again when it returns."""
    if wake is None:
        return None
    return min(max(minimum, wake - now), MAX_SELECT_WAIT)


def reset_on_close(sock: socket.socket) -> None:
    """Makes the next close of sock send an RST rather than a FIN: the
    abortive close, which leaves no TIME_WAIT. Best effort: a socket that is
    already gone has nothing to reset."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    except OSError:
        pass


def client_fault(e: BaseException) -> ClientFault:
    """The error for an exception inside the client itself: a bug, neither
    the server's condition nor worth retrying."""
    return ClientFault(f"monolock: internal error in the client (a bug; please report it with this message): {e!r}")
