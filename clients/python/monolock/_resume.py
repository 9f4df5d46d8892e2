"""TLS session resumption for the threaded client: the session of a Client's
latest full TLS handshake is offered to its next connections, so that a fleet
reconnecting after a restart or a failover costs the server an abbreviated
handshake instead of a full (mutual-)TLS one."""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Optional


class SessionCache:
    """One TLS session per Client, shared by the threads that acquire through
    it (hence the lock). The server decides what it accepts: a session it
    cannot or will not resume (restarted without ``-tls-ticket-keys``, key
    rotated out, another server) simply costs a full handshake."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._session: Optional[ssl.SSLSession] = None

    def wrap(self, ctx: ssl.SSLContext, sock: socket.socket, host: str) -> ssl.SSLSocket:
        """Wraps the connected sock and completes the handshake (within
        sock's timeout), offering the saved session if there is one."""
        tls = ctx.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
        with self._mu:
            saved = self._session
        if saved is not None:
            try:
                tls.session = saved
            except ValueError:
                # The session belongs to another SSLContext: it can never be
                # resumed here, so drop it rather than fail every connect.
                self._forget(saved)
        try:
            tls.do_handshake()
        except BaseException:
            tls.close()  # it owns the descriptor now, not sock
            raise
        return tls

    def remember(self, tls: ssl.SSLSocket) -> bool:
        """Keeps tls's session for the next connection if the server issued a
        ticket for it. Call it once the connection has read data: under TLS
        1.3 the ticket comes after the handshake, and OpenSSL takes it in
        while reading. True once a ticket was kept.

        A connection that resumed the saved session keeps offering that one:
        its fresh ticket is not read. Reading ``SSLSocket.session`` leaks a
        copy of the session in CPython's ssl module (about 7 KiB a read in
        3.11 with OpenSSL 3.0), so it is read once per full handshake, not
        once per lock. The server takes a ticket more than once until it
        expires or its key rotates out; then the connection makes a full
        handshake and its session is read and kept instead."""
        if tls.session_reused:
            with self._mu:
                if self._session is not None:
                    return True
        try:
            session = tls.session
        except (OSError, ValueError):
            return False
        if session is None or not session.has_ticket:
            return False
        with self._mu:
            self._session = session
        return True

    def _forget(self, session: ssl.SSLSession) -> None:
        with self._mu:
            if self._session is session:
                self._session = None
