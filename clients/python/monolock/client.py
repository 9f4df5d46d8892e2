"""The threaded client: one background thread per held or waiting lock."""

from __future__ import annotations

import selectors
import socket
import ssl
import threading
import time
from types import TracebackType
from typing import Callable, List, Optional, Tuple, Type, TypeVar

from . import _wire
from ._common import (
    DEFAULT_ADDRESS,
    AddressBook,
    Addresses,
    Backoff,
    Candidate,
    Wait,
    certificate_refusal,
    client_fault,
    reset_on_close,
    retry_delay,
    candidates,
    select_timeout,
    split_address,
    wait_seconds,
)
from ._core import DEFAULT_CONNECT_TIMEOUT, Session
from ._resume import SessionCache
from .errors import CertificateRefused, LockLost, MonolockError, Unavailable

T = TypeVar("T")

# Bytes read at a time: several server frames, so a burst costs one call.
_READ_SIZE = 512


class Lock:
    """One connection's claim on one named lock, held until :meth:`release`
    or until it is lost.

    A background thread (one per lock, a daemon) is the connection's
    permanent reader and heartbeat sender. ``lost`` is set when ownership
    ends, by a loss or by ``release()``; ``error`` then says why it was lost
    (``None`` after a plain release).
    """

    def __init__(self, name: str, sock: socket.socket, session: Session, tls_sessions: Optional[SessionCache] = None, addr: str = "") -> None:
        self.name = name
        self._addr = addr  # for the errors' messages
        self._sock = sock
        self._session = session
        self._tls_sessions = tls_sessions if isinstance(sock, ssl.SSLSocket) else None
        self._tls_resumed = sock.session_reused if isinstance(sock, ssl.SSLSocket) else None
        # Looked for after the first read and, if none was there, at the end.
        self._ticket_looked = False
        self._ticket_kept = False
        self.lost = threading.Event()
        self._cond = threading.Condition()
        self._done = threading.Event()
        self._release_asked = False
        # What valid() reads, under _cond: the give-up deadline the owner
        # thread publishes after each step (None: not held), and when a
        # valid() past it said False (then it never says True again, and the
        # owner gives the lock up).
        self._valid_until: Optional[float] = None
        self._expired_at: Optional[float] = None
        # The attempt's outcome as the owner publishes it, under _cond: the
        # caller waits for it without reading the session.
        self._granted = False
        self._failure: Optional[MonolockError] = None
        # Over TLS the server's close_notify comes before its FIN: the close
        # that follows it is a reset, so that the client never sends the
        # first FIN and keeps no TIME_WAIT.
        self._reset_anyway = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(target=self._run, name=f"monolock {name}", daemon=True)
        self._thread.start()
        self._await_grant()

    def _await_grant(self) -> None:
        """Returns once the lock is granted; raises (and closes) when the
        attempt ended before: the step decides (the wait, a try-lock's
        busy, a loss), this thread only waits for its outcome."""
        try:
            self._wait(lambda: self._granted or self._failure is not None, None)
            with self._cond:
                granted, failure = self._granted, self._failure
            if not granted:
                raise failure or Unavailable(f"monolock: connection to {self._addr} ended before the server granted lock {self.name!r}")
        except BaseException:
            # Also on KeyboardInterrupt: leave the queue, do not leak the connection.
            self.release()
            raise

    @property
    def token(self) -> int:
        """The fencing token of the grant (0 before it): pass it to every
        resource the work changes."""
        return self._session.token

    @property
    def error(self) -> Optional[MonolockError]:
        """Why the lock was lost, or None (held, or released by the caller)."""
        return self._session.error

    @property
    def tls_resumed(self) -> Optional[bool]:
        """Whether this lock's TLS connection resumed the session of an
        earlier one (an abbreviated handshake) instead of a full handshake;
        None without TLS. False on a client's first connection, and after a
        server restart or failover unless the servers share
        ``-tls-ticket-keys``."""
        return self._tls_resumed

    def valid(self) -> bool:
        """True while the lock is held and the server confirmed it within the
        last 0.8 × lease: cheap (no I/O), for a check right before a write.
        Any thread may call it: it reads the deadline the connection's
        thread publishes, never the session that thread alone drives. Once
        it has said False at the deadline it never says True again, and the
        connection's thread gives the lock up."""
        now = time.monotonic()
        with self._cond:
            until = self._valid_until
            if until is None:
                return False
            if now < until:
                return True
            self._valid_until, self._expired_at = None, now
        self._wake()
        return False

    def _wake(self) -> None:
        """Wakes the connection's thread to look at what was asked."""
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass  # the thread has ended and closed its end

    def release(self) -> None:
        """Releases the lock (or leaves the queue): sends RELEASE, waits for
        the server to close the connection first (at most min(lease, 2 s),
        then resets it), and returns once it is closed. Idempotent; harmless
        after a loss. It also tells the client that the work has stopped,
        which is what lets it close a lost lock's connection."""
        with self._cond:
            self._release_asked = True
        self._wake()
        self._done.wait()

    def __enter__(self) -> "Lock":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.release()
        if exc is None and self.error is not None:
            raise LockLost(self.error)

    # --- the background thread ----------------------------------------

    def _wait(self, pred: Callable[[], bool], timeout: Optional[float]) -> bool:
        """Waits until pred() holds or the connection's thread has ended, at
        most timeout seconds; pred() is looked at each time the thread
        publishes."""
        if timeout is not None and timeout > threading.TIMEOUT_MAX:
            timeout = None  # longer than the platform can wait: as good as forever
        with self._cond:
            return self._cond.wait_for(lambda: pred() or self._done.is_set(), timeout) and pred()

    def _run(self) -> None:
        s = self._session
        sel = selectors.DefaultSelector()
        try:
            sel.register(self._sock, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            s.start(time.monotonic())
            while True:
                self._flush()
                self._publish()
                now = time.monotonic()
                if s.close_due(now):
                    return
                for key, _ in sel.select(select_timeout(s.next_wakeup(), now)):
                    if key.fileobj is self._wake_r:
                        self._wake_r.recv(64)
                    else:
                        self._read()
                with self._cond:
                    release, expired_at = self._release_asked, self._expired_at
                if expired_at is not None:
                    s.valid(expired_at)  # the caller's check, taken by the owner: past the deadline, given up below
                if release:
                    s.release(time.monotonic())
                s.tick(time.monotonic())
        except Exception as e:  # a bug must not leave the caller waiting forever
            s.fail(client_fault(e), time.monotonic(), abort=True)
        finally:
            sel.close()
            self._keep_ticket()
            try:
                if s.abortive or self._reset_anyway:
                    reset_on_close(self._sock)
                self._sock.close()
            finally:
                self._wake_r.close()
                self._wake_w.close()
                with self._cond:
                    if not s.granted and self._failure is None:
                        self._failure = s.error  # a fault of the client ended it outside the loop
                    self._done.set()
                    self.lost.set()
                    self._cond.notify_all()

    def _read(self) -> None:
        s = self._session
        try:
            data = self._sock.recv(_READ_SIZE)
            if isinstance(self._sock, ssl.SSLSocket):
                while self._sock.pending():
                    data += self._sock.recv(self._sock.pending())
        except (ssl.SSLWantReadError, BlockingIOError, socket.timeout):
            return
        except OSError as e:
            self._failed("read", e)
            return
        if not data:
            self._reset_anyway = isinstance(self._sock, ssl.SSLSocket)
            s.eof(time.monotonic())
            return
        if not self._ticket_looked:
            # Before the frames are applied, so that an acquire() that
            # returns has left the ticket for the client's next connection.
            self._keep_ticket()
        s.receive(data, time.monotonic())

    def _keep_ticket(self) -> None:
        self._ticket_looked = True
        if self._tls_sessions is None or self._ticket_kept or not isinstance(self._sock, ssl.SSLSocket):
            return
        self._ticket_kept = self._tls_sessions.remember(self._sock)

    def _flush(self) -> None:
        s = self._session
        if not s.outbox:
            return
        data = bytes(s.outbox)
        s.outbox.clear()
        try:
            # A write that blocks past the deadline means the lock is lost
            # anyway; RELEASE's write is bounded by the release bound.
            self._sock.settimeout(select_timeout(s.write_by(), time.monotonic(), minimum=0.001))
            self._sock.sendall(data)
        except socket.timeout:
            s.written(time.monotonic(), "deadline")
        except OSError as e:
            self._failed("write", e)
        else:
            s.written(time.monotonic())
        finally:
            self._sock.settimeout(0)

    def _failed(self, op: str, e: OSError) -> None:
        """A read or write failed: the connection is lost, or, when it was
        the server's TLS alert refusing the client's certificate, the lock
        can never be had with this certificate."""
        refused = certificate_refusal(self._addr, e)
        if refused is None and op == "write":
            refused = self._pending_refusal()
        if refused is not None:
            self._session.fail(refused, time.monotonic(), reason="tls")
        elif op == "write":
            self._session.written(time.monotonic(), f"{e}")
        else:
            self._session.eof(time.monotonic(), f"{op}: {e}", broken=True)

    def _pending_refusal(self) -> Optional[CertificateRefused]:
        """The server's TLS alert refusing the client's certificate, when a
        write failed because the server had already closed: under TLS 1.3
        the alert comes after the client's handshake is over, so the write of
        ACQUIRE may meet the closed connection before a read meets the alert,
        which is still to be read."""
        if not isinstance(self._sock, ssl.SSLSocket):
            return None
        try:
            self._sock.settimeout(0)
            self._sock.recv(_READ_SIZE)
        except OSError as e:
            return certificate_refusal(self._addr, e)
        return None

    def _publish(self) -> None:
        s = self._session
        with self._cond:
            if self._expired_at is None:
                self._valid_until = s.deadline if s.granted and not s.ended else None
            if s.ended and (s.error is not None or self._release_asked):
                self.lost.set()
            self._granted = s.granted
            if s.ended and not s.granted:
                self._failure = s.error or Unavailable(f"monolock: connection to {self._addr} ended before the server granted lock {self.name!r}")
            self._cond.notify_all()


class Client:
    """Acquires locks from one monolock server. It holds no connection of its
    own (every lock is its own connection), so it is safe to share between
    threads and needs no closing.

    ``ssl_context`` turns on TLS (and mutual TLS when it carries a client
    certificate); ``connect_timeout`` bounds the TCP connect and the TLS
    handshake. With TLS the client keeps the session ticket of its latest
    full handshake and offers it on the next connections, so reconnecting costs the
    server an abbreviated handshake when it can resume (see
    :attr:`Lock.tls_resumed`).
    """

    def __init__(self, addr: Addresses = DEFAULT_ADDRESS, ssl_context: Optional[ssl.SSLContext] = None, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
        self._book = AddressBook(addr)
        self.addr = self._book.label()
        self._ssl = ssl_context
        self._connect_timeout = connect_timeout
        self._tls_sessions = SessionCache()

    def acquire(self, name: str, lease: float = 2.0, wait: Wait = True) -> Lock:
        """Acquires the lock ``name`` and returns it held. ``wait``: True
        waits in the lock's FIFO queue as long as it takes, False raises
        :class:`Busy` at once when someone holds it, a number waits at most
        that many seconds from the start of the attempt and then raises
        Busy (or :class:`Unavailable` when the server never answered). The
        caller must ``release()`` the lock (or use :meth:`lock`)."""
        limit = wait_seconds(wait)
        raw = _wire.name_bytes(name)
        ms = _wire.lease_ms(lease)
        session = Session(raw, lease, ms, wait=limit, connect_timeout=self._connect_timeout)
        sock, addr = self._connect(session)
        return Lock(name, sock, session, self._tls_sessions, addr)

    def lock(self, name: str, lease: float = 2.0, wait: Wait = True) -> "_LockContext":
        """``with client.lock(name) as lock:`` acquires on entry and releases
        on exit. If the lock was lost while the block ran and the block raised
        nothing, the exit raises :class:`LockLost`."""
        return _LockContext(self, name, lease, wait)

    def run(self, name: str, fn: Callable[[Lock], T], lease: float = 2.0, wait: Wait = True) -> T:
        """Runs ``fn(lock)`` while holding ``name`` and releases afterwards.
        Failures before ``fn`` starts are retried as the rules say: after a
        random wait of at most min(1 s, lease/4) after "server shutting down"
        (0x01), with backoff after other server conditions and lost
        connections; client errors (0x10 and above), a certificate refused
        on either side (:class:`CertificateRefused`), invalid input and Busy
        are raised. ``fn`` runs at most once: watch
        ``lock.lost`` (or call ``lock.valid()``) and stop when it is set. If
        the lock was lost while ``fn`` ran, run raises :class:`LockLost` once
        ``fn`` has returned."""
        limit = wait_seconds(wait)
        end = None if limit is None else time.monotonic() + limit
        backoff = Backoff()
        while True:
            left = None if end is None else max(0.0, end - time.monotonic())
            try:
                lock = self.acquire(name, lease, wait=True if left is None else left)
                break
            except MonolockError as e:
                delay = retry_delay(e, backoff, lease)
                if delay is None or (end is not None and time.monotonic() + delay >= end):
                    raise
                time.sleep(delay)
        try:
            result = fn(lock)
        finally:
            lock.release()
        if lock.error is not None:
            raise LockLost(lock.error)
        return result

    def _connect(self, s: Session) -> Tuple[socket.socket, str]:
        """The connect phase of the step: dials the candidates (every
        address each configured one resolves to), from the one that worked
        last, each in what is left of the step's connect deadline (or the
        wait's, if sooner); a refused or failed one passes to the next.
        Returns the connection and the address it reached; raises the
        step's error when none came up in time."""
        s.dial(time.monotonic())
        cands, tried = candidates(self._book, socket.getaddrinfo)
        for c in self._book.order(cands):
            sock = self._dial_one(s, c, tried)
            if sock is not None:
                self._book.worked(c)
                return sock, c[2]
            if s.ended:
                break
        if not s.ended:
            s.eof(time.monotonic(), "; ".join(tried) or f"{self.addr}: no address", broken=True)
        raise s.error or Unavailable(f"monolock: cannot connect to {self.addr}")

    def _dial_one(self, s: Session, c: Candidate, tried: List[str]) -> Optional[socket.socket]:
        """One candidate within the step's connect deadline: the TCP connect,
        then the TLS handshake. None when it failed (noted in tried), or the
        deadline passed (the step ended the attempt)."""
        family, sockaddr, label = c
        left = select_timeout(s.connect_by(), time.monotonic())
        if left is None or left <= 0:
            s.tick(time.monotonic())  # the connect deadline (or the wait's) has come
            return None
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(left)
            sock.connect(sockaddr)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._ssl is not None:
                sock.settimeout(max(0.001, select_timeout(s.connect_by(), time.monotonic()) or 0.0))
                sock = self._tls_sessions.wrap(self._ssl, sock, split_address(label)[0])
            sock.settimeout(0)
            return sock
        except socket.timeout:
            sock.close()
            s.tick(time.monotonic())
            tried.append(f"{label}: timed out")
        except OSError as e:
            sock.close()
            refused = certificate_refusal(label, e)
            if refused is not None:
                s.fail(refused, time.monotonic(), reason="tls")
            else:
                tried.append(f"{label}: {e}")
        return None


class _LockContext:
    def __init__(self, client: Client, name: str, lease: float, wait: Wait) -> None:
        self._client, self._name, self._lease, self._wait = client, name, lease, wait
        self._lock: Optional[Lock] = None

    def __enter__(self) -> Lock:
        self._lock = self._client.acquire(self._name, self._lease, self._wait)
        return self._lock

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if self._lock is not None:
            self._lock.__exit__(exc_type, exc, tb)


