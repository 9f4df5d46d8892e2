"""The protocol state of one connection, without I/O or clock.

Both the threaded client and the asyncio client drive a :class:`Session`:
they pass it the bytes they read and the current monotonic time, write what
it puts in ``outbox``, sleep until ``next_wakeup()`` and close the connection
when ``close_due(now)`` says so. Keeping the rules here lets the tests check
them with an injected clock, and makes the two clients behave identically.

The rules are those of docs/protocol.md, "Writing a client in another
language", cited by number.
"""

from __future__ import annotations

import enum
from typing import List, Optional

from . import _wire
from ._schedule import HeartbeatSchedule, client_timeout
from .errors import MonolockError, ProtocolViolation, Unavailable, error_for_code

# The longest wait for the server's end of stream after RELEASE: the release
# bound is min(lease, 2 s). Past it the client resets the connection.
MAX_RELEASE_WAIT = 2.0


def release_bound(lease: float) -> float:
    """How long a release waits for the server to close first."""
    return min(lease, MAX_RELEASE_WAIT)


class State(enum.Enum):
    SENT = "sent"  # ACQUIRE written, no answer yet
    WAITING = "waiting"  # queued behind a holder
    HELD = "held"  # granted; never goes back


class Session:
    """One connection's claim. Not thread-safe: its owner (one thread, or the
    event loop) calls every method."""

    def __init__(self, name: bytes, lease: float, lease_ms: int) -> None:
        self.lease = lease
        self.timeout = client_timeout(lease)
        self.schedule = HeartbeatSchedule(lease)
        self._acquire = _wire.encode_acquire(lease_ms, name)
        self._frames = _wire.FrameReader()

        self.outbox = bytearray()  # bytes to write now
        self.state = State.SENT
        self.token = 0
        self.answered = False  # the server answered ACQUIRE (held or queued)
        self.granted = False
        # Why the session ended, when not by release; set once.
        self.error: Optional[MonolockError] = None
        self.ended = False  # lost, released or failed: no more requests
        self.work_stopped = False  # the caller's work is over (release, or none began)

        self._in_flight = False  # a request awaits its answer; at most one (rule 3)
        self._expired = False  # valid() saw the deadline pass: no answer revives the lock
        self.answers = 0  # requests answered so far (ACQUIRE and heartbeats)
        self._last_send = 0.0
        self.deadline = 0.0  # newest answered send + 0.8 × lease (rule 8)
        self._hb_due: Optional[float] = None
        self._close_by: Optional[float] = None  # close at the latest then
        # RELEASE is queued: bytes read now are discarded, end of stream is the
        # close, and the release bound the reset.
        self.releasing = False
        # Whether the connection is to be closed by a reset (SO_LINGER
        # {1, 0}) rather than a plain close: when the client gave up, or the
        # server did not close first within the release bound. A reset leaves
        # no TIME_WAIT behind; the plain close is for a connection the server
        # closed first, where none arises either.
        self.abortive = False

    # --- inputs --------------------------------------------------------

    def start(self, now: float) -> None:
        """Queues ACQUIRE. The give-up clock runs from here (rule 8)."""
        self.deadline = now + self.timeout
        self._send(self._acquire, now)

    def receive(self, data: bytes, now: float) -> None:
        """Bytes read from the server. The frames of one read were all sent
        before the server could see a heartbeat this read makes due, so that
        heartbeat is queued only once the whole read is applied: a second
        answer to one request in the same read is a violation, not the
        answer to a heartbeat not yet sent."""
        if self.releasing:
            return  # released: what the server says meanwhile is discarded
        self._deadline_first(now)
        self._frames.feed(data)
        if self.ended:
            self._lingering(now)
            return
        while not self.ended:  # an ERROR ends it: what follows is not read
            try:
                frame = self._frames.next()
            except ValueError as e:
                self._violation(str(e), now)
                return
            if frame is None:
                break
            self._frame(*frame, now)
        self._heartbeat_if_due(now)

    def eof(self, now: float, detail: str = "closed by the server", reset: bool = False) -> None:
        """The connection ended: end of stream, or a read or write that
        failed. Lost at once, closed at once; after RELEASE it is the end the
        release waited for, and no error. reset: close by a reset, not a
        plain close: after a failed read or write, and after TLS's
        close_notify, which comes before the server's FIN (a plain close
        then could send the client's FIN first and leave it the TIME_WAIT)."""
        if self.releasing:
            self._close_by = now
            self.abortive = reset
            self.releasing = False
            return
        self._deadline_first(now)
        self.fail(Unavailable(f"monolock: connection lost: {detail}"), now, abort=reset)

    def fail(self, err: MonolockError, now: float, abort: bool = False) -> None:
        """The connection ended with err (a lost connection, a certificate
        the server refused), or the client must drop it at once (abort: by
        a reset): lost at once, closed at once."""
        if not self.ended:
            self._end(err, now, close_now=True)
        self.releasing = False
        self.abortive = abort
        self._close_by = now

    def release(self, now: float) -> None:
        """The caller released the lock (or left the queue), or its work
        stopped after a loss. A live session sends RELEASE and waits for the
        server to close first, at most the release bound, so the TIME_WAIT
        of the connection stays on the server (docs/protocol.md, RELEASE);
        one the client gave up on closes now by a reset; one the server
        ended closes now. Idempotent."""
        self.work_stopped = True
        if not self.ended:
            self.ended = True
            self._hb_due = None
            self.outbox += _wire.RELEASE  # after anything not written yet: the server answers in order
            self.releasing = True
            self.abortive = True  # unless the server closes within the bound
            self._close_by = now + release_bound(self.lease)
        elif not self.releasing:
            self._close_by = now

    def tick(self, now: float) -> None:
        """Timers: the loss deadline, then a heartbeat due."""
        if self.ended:
            return
        if now >= self.deadline:
            self._give_up(now)
            return
        self._heartbeat_if_due(now)

    # --- outputs -------------------------------------------------------

    def next_wakeup(self) -> Optional[float]:
        """When tick() or close_due() next has something to do."""
        times: List[float] = []
        if not self.ended:
            times.append(self.deadline)
            if self._hb_due is not None and not self._in_flight:
                times.append(self._hb_due)
        if self._close_by is not None:
            times.append(self._close_by)
        return min(times) if times else None

    def write_by(self) -> float:
        """How long a write may block: until the give-up deadline, or, for
        RELEASE, until the release bound."""
        return self._close_by if self.releasing and self._close_by is not None else self.deadline

    def close_due(self, now: float) -> bool:
        return self._close_by is not None and now >= self._close_by

    def valid(self, now: float) -> bool:
        """Held, not lost, and confirmed within 0.8 × lease. Once it has
        said False at the deadline, no answer read afterwards revives the
        lock. The owner calls it, as every method (the threaded Lock's
        valid() reads the deadline the owner publishes, and hands a check
        that found it passed to the owner)."""
        if not self.granted or self.ended:
            return False
        if now < self.deadline:
            return True
        self._expired = True
        return False

    # --- rules ---------------------------------------------------------

    def _send(self, frame: bytes, now: float) -> None:
        self.outbox += frame
        self._last_send = now
        self._in_flight = True

    def _frame(self, typ: int, token: int, code: int, reason: str, now: float) -> None:
        if typ == _wire.TYPE_ERROR:
            self._end(error_for_code(code, reason), now, close_now=True)
            return
        if typ == _wire.TYPE_WAITING and self.state is not State.HELD and self._in_flight:
            self.state = State.WAITING
            self.answered = True
            self._acknowledged(now)
        elif typ == _wire.TYPE_ACQUIRED and self.state is State.SENT:
            self._grant(token)
            self.answered = True
            self._acknowledged(now)
        elif typ == _wire.TYPE_ACQUIRED and self.state is State.WAITING:
            # The promotion push: it answers no request (rule 4).
            self._grant(token)
        elif typ == _wire.TYPE_ACQUIRED and self.state is State.HELD and token == self.token and self._in_flight:
            self._acknowledged(now)
        elif typ == _wire.TYPE_WAITING and self.state is State.HELD:
            self._violation("WAITING after ACQUIRED", now)
        elif typ == _wire.TYPE_ACQUIRED and self.state is State.HELD and token != self.token:
            self._violation(f"token changed from {self.token} to {token}", now)
        else:
            self._violation(f"frame 0x{typ:02x} with no request in flight", now)

    def _grant(self, token: int) -> None:
        self.state, self.token, self.granted = State.HELD, token, True

    def _acknowledged(self, now: float) -> None:
        """The answer to the request in flight (rule 4): the deadline moves to
        its send + 0.8 × lease, the next heartbeat is due one interval after
        that send, at once if that has passed (rule 3). An answer read at
        the deadline or later, or after valid() said False, comes too late:
        the lock was given up at the deadline (rule 8)."""
        if now >= self.deadline or self._expired:
            self._give_up(now)
            return
        self.answers += 1
        self.schedule.observe(now - self._last_send)
        self._in_flight = False
        self.deadline = self._last_send + self.timeout
        self._hb_due = self._last_send + self.schedule.interval()

    def _heartbeat_if_due(self, now: float) -> None:
        if not self.ended and self._hb_due is not None and not self._in_flight and now >= self._hb_due:
            self._send(_wire.HEARTBEAT, now)

    def _deadline_first(self, now: float) -> None:
        """At each event the deadline that has passed is taken first, as if
        the timer had fired just before: a frame or the end of the stream
        read at the give-up deadline or later comes too late, the lock (or
        the attempt) is lost by silence, and what was read only decides how
        the connection ends (docs/protocol.md, "The order of simultaneous
        things")."""
        if not self.ended and now >= self.deadline:
            self._give_up(now)

    def _lingering(self, now: float) -> None:
        """Frames read after a give-up or a violation: nothing revives the
        lock; an ERROR means the server has let go, so the connection closes
        now, normally; anything else is ignored."""
        while True:
            try:
                frame = self._frames.next()
            except ValueError:
                self._frames = _wire.FrameReader()  # an unknown type: the rest cannot be framed
                return
            if frame is None:
                return
            if frame[0] == _wire.TYPE_ERROR:
                self._close_by = now
                self.abortive = False
                return

    def _give_up(self, now: float) -> None:
        self._end(Unavailable(f"monolock: no answer from the server within 0.8 × lease ({self.timeout:.3f}s)"), now)

    def _violation(self, detail: str, now: float) -> None:
        self._end(ProtocolViolation(f"monolock: protocol violation by the server: {detail}"), now)

    def _end(self, err: MonolockError, now: float, close_now: bool = False) -> None:
        """Lost (rule 8): no more requests. The connection stays open while
        the caller's work may still run, so the server does not hand the lock
        on before the work has stopped, but no longer than the lease after
        the last send, when the server drops the session anyway. With no work
        running (not granted, or already stopped), or when the server ended
        the connection itself, it closes at once. Nothing is sent once the
        session ended. A connection the client gave up on is reset when it
        closes: the server may be unreachable, and no TIME_WAIT is left."""
        self.ended = True
        self.error = err
        self._hb_due = None
        self.outbox.clear()
        self.abortive = not close_now
        if close_now or not self.granted or self.work_stopped:
            self._close_by = now
        else:
            self._close_by = self._last_send + self.lease
