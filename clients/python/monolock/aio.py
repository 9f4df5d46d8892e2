"""The asyncio client: the same shapes as :mod:`monolock`, awaited.

Each lock is one connection driven by the event loop itself: an
``asyncio.Protocol`` is its permanent reader, and one timer handle schedules
the heartbeats and the give-up. No thread per lock; one parked task per held
lock, which releases it if its event loop ends first.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import warnings
from types import TracebackType
from typing import Awaitable, Callable, List, Optional, Type, TypeVar

from . import _wire
from ._common import (
    DEFAULT_ADDRESS,
    AddressBook,
    Addresses,
    Backoff,
    Candidate,
    Wait,
    candidates,
    certificate_refusal,
    reset_on_close,
    retry_delay,
    split_address,
    wait_seconds,
)
from ._core import DEFAULT_CONNECT_TIMEOUT, Session
from .errors import LockLost, MonolockError, Unavailable

__all__ = ["Client", "Lock"]

T = TypeVar("T")


class _Connection(asyncio.Protocol):
    def __init__(self, session: Session, loop: asyncio.AbstractEventLoop, addr: str = "") -> None:
        self.session = session
        self.addr = addr  # for the errors' messages
        self.loop = loop
        self.transport: Optional[asyncio.Transport] = None
        self.changed = asyncio.Event()  # set at every state change; waiters clear it
        self.closed = loop.create_future()
        self.lost = asyncio.Event()
        self.release_asked = False
        # Over TLS the server's close_notify comes before its FIN: the close
        # after it is a reset, so that the client never sends the first FIN.
        self.reset_anyway = False
        self._timer: Optional[asyncio.TimerHandle] = None

    # --- asyncio.Protocol ----------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.session.start(self.loop.time())
        self._after()

    def data_received(self, data: bytes) -> None:
        self.session.receive(data, self.loop.time())
        self._after()

    def eof_received(self) -> bool:
        # Over TLS this is the server's close_notify, which comes before its
        # FIN: reset (see Session.eof).
        self.reset_anyway = self.transport is not None and self.transport.get_extra_info("sslcontext") is not None
        self.session.eof(self.loop.time())
        self._after()
        return False

    def connection_lost(self, exc: Optional[Exception]) -> None:
        now = self.loop.time()
        if not self.session.close_due(now):
            refused = certificate_refusal(self.addr, exc)  # the server's alert refusing our certificate
            if refused is not None:
                self.session.fail(refused, now, reason="tls")
            else:
                self.session.eof(now, f"{exc}" if exc else "closed", broken=exc is not None)
        if self._timer is not None:
            self._timer.cancel()
        self.lost.set()
        self.changed.set()
        if not self.closed.done():
            self.closed.set_result(None)

    # --- driving the session -------------------------------------------

    async def release_at_loop_end(self, name: str) -> None:
        """The guard of a granted lock: a task that waits for the connection
        to close. asyncio.run() cancels the tasks still pending when its
        coroutine returns, and closes the loop after, which would leave the
        connection open with nothing to heartbeat or close it: the server
        would keep the lock a whole lease, and the socket would stay open.
        Cancelled while the connection is open, it ends the claim (lost,
        closed at once) and warns: a lock lives within its event loop."""
        try:
            await asyncio.shield(self.closed)
        except asyncio.CancelledError:
            if not self.closed.done():
                warnings.warn(
                    f"monolock: lock {name!r} was still held when its task was cancelled or its event loop ended "
                    "(asyncio.run() returned): released it; release a lock, or leave its async with, within its event loop",
                    RuntimeWarning,
                    stacklevel=1,
                )
                self.session.fail(
                    MonolockError(f"monolock: lock {name!r} released: its event loop ended (or its guard task was cancelled) while it was held"),
                    self.loop.time(),
                    abort=True,  # no loop is left to wait for the server's close
                )
                self._after()
            raise

    def release(self) -> None:
        self.release_asked = True
        self.session.release(self.loop.time())
        self._after()

    def valid(self) -> bool:
        """The work's check, on the event loop (the session's owner): past
        the deadline it gives the lock up at once."""
        ok = self.session.valid(self.loop.time())
        if not ok:
            self._after()
        return ok

    def _tick(self) -> None:
        self._timer = None
        self.session.tick(self.loop.time())
        self._after()

    def _after(self) -> None:
        s = self.session
        t = self.transport
        if t is None or t.is_closing():
            return
        if s.outbox:
            t.write(bytes(s.outbox))
            s.outbox.clear()
        if s.ended and (s.error is not None or self.release_asked):
            self.lost.set()
        self.changed.set()
        if s.close_due(self.loop.time()):
            if self._timer is not None:
                self._timer.cancel()
            # abort(), not close(): over TLS, close() sends close_notify and
            # keeps the socket open until the peer answers it, up to asyncio's
            # 30 s SSL shutdown timeout, which a silent or stopped server
            # never does. Nothing left to write matters once the claim ends,
            # and the threaded client closes the same way (no close_notify).
            # abort() is a plain close of the socket, after the server's
            # end of stream when it closed first; a reset when the client
            # gave up or the release bound passed.
            if s.abortive or self.reset_anyway:
                sock = t.get_extra_info("socket")
                if sock is not None:
                    reset_on_close(sock)
            t.abort()
            return
        wake = s.next_wakeup()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if wake is not None:
            self._timer = self.loop.call_at(wake, self._tick)

    async def wait_for(self, pred: Callable[[], bool], timeout: Optional[float]) -> bool:
        """Waits until pred() or the connection closed; False on timeout."""

        async def loop() -> None:
            while not pred() and not self.closed.done():
                self.changed.clear()
                await self.changed.wait()

        try:
            await asyncio.wait_for(loop(), timeout)
        except asyncio.TimeoutError:
            return False
        return pred()


class Lock:
    """One connection's claim on one named lock. ``lost`` is an
    :class:`asyncio.Event` set when ownership ends (a loss or ``release()``);
    ``error`` says why it was lost."""

    def __init__(self, name: str, conn: _Connection) -> None:
        self.name = name
        self._conn = conn
        self.lost = conn.lost
        self._guard: Optional["asyncio.Task[None]"] = None  # see _Connection.release_at_loop_end

    @property
    def token(self) -> int:
        return self._conn.session.token

    @property
    def error(self) -> Optional[MonolockError]:
        return self._conn.session.error

    def valid(self) -> bool:
        """True while held and confirmed within the last 0.8 × lease. Call
        it on the lock's event loop (it is the session's owner)."""
        return self._conn.valid()

    async def release(self) -> None:
        """Releases (or leaves the queue) as :meth:`monolock.Lock.release`
        does: RELEASE, then the server's close, at most min(lease, 2 s)
        before a reset; returns once the connection is closed. Idempotent;
        harmless after a loss."""
        self._conn.release()
        await asyncio.shield(self._conn.closed)

    async def __aenter__(self) -> "Lock":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.release()
        if exc is None and self.error is not None:
            raise LockLost(self.error)


class Client:
    """The asyncio twin of :class:`monolock.Client`, except that with TLS
    every connection makes a full handshake: ``loop.create_connection``
    cannot offer a saved session, so this client does not resume one."""

    def __init__(self, addr: Addresses = DEFAULT_ADDRESS, ssl_context: Optional[ssl.SSLContext] = None, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
        self._book = AddressBook(addr)
        self.addr = self._book.label()
        self._ssl = ssl_context
        self._connect_timeout = connect_timeout

    async def acquire(self, name: str, lease: float = 2.0, wait: Wait = True) -> Lock:
        """As :meth:`monolock.Client.acquire`."""
        limit = wait_seconds(wait)
        session = Session(_wire.name_bytes(name), lease, _wire.lease_ms(lease), wait=limit, connect_timeout=self._connect_timeout)
        loop = asyncio.get_running_loop()
        conn = await self._connect(session, loop)
        lock = Lock(name, conn)
        try:
            if not await conn.wait_for(lambda: session.granted or session.ended, None) or not session.granted:
                raise session.error or Unavailable(f"monolock: connection to {conn.addr} ended before the server granted lock {name!r}")
        except BaseException:
            await lock.release()
            raise
        lock._guard = loop.create_task(conn.release_at_loop_end(name))  # pyright: ignore[reportPrivateUsage]
        return lock

    async def _connect(self, s: Session, loop: asyncio.AbstractEventLoop) -> _Connection:
        """The connect phase of the step, as the threaded client's: every
        candidate from the one that worked last, each within what is left of
        the step's connect deadline (or the wait's); raises the step's error
        when none came up in time."""
        s.dial(loop.time())
        cands, tried = await loop.run_in_executor(None, candidates, self._book, socket.getaddrinfo)
        for c in self._book.order(cands):
            conn = await self._dial_one(s, c, loop, tried)
            if conn is not None:
                self._book.worked(c)
                return conn
            if s.ended:
                break
        if not s.ended:
            s.eof(loop.time(), "; ".join(tried) or f"{self.addr}: no address", broken=True)
        raise s.error or Unavailable(f"monolock: cannot connect to {self.addr}")

    async def _dial_one(self, s: Session, c: Candidate, loop: asyncio.AbstractEventLoop, tried: List[str]) -> Optional[_Connection]:
        family, (ip, port), label = c
        by = s.connect_by()
        left = 0.0 if by is None else by - loop.time()
        if left <= 0:
            s.tick(loop.time())  # the connect deadline (or the wait's) has come
            return None
        host = split_address(label)[0]
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(s, loop, label),
                    ip,
                    port,
                    family=family,
                    ssl=self._ssl,
                    server_hostname=host if self._ssl is not None else None,
                ),
                left,
            )
            return conn
        except asyncio.TimeoutError:
            s.tick(loop.time())
            tried.append(f"{label}: timed out")
        except OSError as e:
            refused = certificate_refusal(label, e)
            if refused is not None:
                s.fail(refused, loop.time(), reason="tls")
            else:
                tried.append(f"{label}: {e}")
        return None

    def lock(self, name: str, lease: float = 2.0, wait: Wait = True) -> "_LockContext":
        """``async with client.lock(name) as lock:``"""
        return _LockContext(self, name, lease, wait)

    async def run(self, name: str, fn: Callable[[Lock], Awaitable[T]], lease: float = 2.0, wait: Wait = True) -> T:
        """As :meth:`monolock.Client.run`, with ``fn`` a coroutine function."""
        limit = wait_seconds(wait)
        loop = asyncio.get_running_loop()
        end = None if limit is None else loop.time() + limit
        backoff = Backoff()
        while True:
            left = None if end is None else max(0.0, end - loop.time())
            try:
                lock = await self.acquire(name, lease, wait=True if left is None else left)
                break
            except MonolockError as e:
                delay = retry_delay(e, backoff, lease)
                if delay is None or (end is not None and loop.time() + delay >= end):
                    raise
                await asyncio.sleep(delay)
        try:
            result = await fn(lock)
        finally:
            await lock.release()
        if lock.error is not None:
            raise LockLost(lock.error)
        return result


class _LockContext:
    def __init__(self, client: Client, name: str, lease: float, wait: Wait) -> None:
        self._client, self._name, self._lease, self._wait = client, name, lease, wait
        self._lock: Optional[Lock] = None

    async def __aenter__(self) -> Lock:
        self._lock = await self._client.acquire(self._name, self._lease, self._wait)
        return self._lock

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if self._lock is not None:
            await self._lock.__aexit__(exc_type, exc, tb)
