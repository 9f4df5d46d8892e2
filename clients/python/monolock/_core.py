"""The client step of docs/protocol.md ("The client step") for one
connection, without I/O or clock.

Both the threaded client and the asyncio client drive a :class:`Session`:
they pass it each event (the dial, the connection up, a write returned, the
bytes read, the end of the connection, the caller's stop, the timer, the
work's own check of the deadline) with the monotonic time they saw it at,
write what it puts in ``outbox``, sleep until ``next_wakeup()`` and close
the connection when ``close_due(now)`` says so, by a reset when
``abortive``. The connect deadline, the wait (a try-lock's and a wait's)
and the give-up live here once, so the two clients behave identically and
the step scripts of protocol/testdata/step check them with an injected
clock.

The rules are those of docs/protocol.md, "Writing a client in another
language", cited by number.
"""

from __future__ import annotations

import enum
import math
from typing import List, Optional

from . import _wire
from ._schedule import HeartbeatSchedule, client_timeout
from .errors import Busy, MonolockError, ProtocolViolation, Unavailable, error_for_code

# The longest wait for the server's end of stream after RELEASE: the release
# bound is min(lease, 2 s). Past it the client resets the connection.
MAX_RELEASE_WAIT = 2.0

# The connect timeout unless set: the TCP connect and the TLS handshake.
DEFAULT_CONNECT_TIMEOUT = 10.0


def release_bound(lease: float) -> float:
    """How long a release waits for the server to close first."""
    return min(lease, MAX_RELEASE_WAIT)


class State(enum.Enum):
    CONNECTING = "connecting"  # dialled, the connection not up yet
    SENT = "sent"  # ACQUIRE written, no answer yet
    WAITING = "waiting"  # queued behind a holder
    HELD = "held"  # granted; never goes back


class Session:
    """One connection's claim. Not thread-safe: its owner (one thread, or the
    event loop) calls every method.

    wait: None waits for the grant as long as it takes; 0 is a try-lock (the
    ACQUIRE's WAITING fails the attempt as busy); a number of seconds ends an
    attempt not granted that long after its first event (dial, or start
    without one). connect_timeout bounds a dial until start."""

    def __init__(
        self, name: bytes, lease: float, lease_ms: int, wait: Optional[float] = None, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    ) -> None:
        self.lease = lease
        self.timeout = client_timeout(lease)
        self.schedule = HeartbeatSchedule(lease)
        self.wait = wait
        self.connect_timeout = connect_timeout
        self._acquire = _wire.encode_acquire(lease_ms, name)
        self._frames = _wire.FrameReader()

        self.outbox = bytearray()  # bytes to write now
        self.state = State.SENT
        self.token = 0
        self.answered = False  # the server answered ACQUIRE (held or queued)
        self.granted = False
        # Why the session ended, when not by the caller's stop; set once, with
        # its reason in the spec's words (docs/protocol.md, "Why a session
        # ends"): busy, timeout, closed, connect, server, protocol, tls.
        self.error: Optional[MonolockError] = None
        self.reason = ""
        self.ended = False  # lost, released or failed: no more requests
        self.work_stopped = False  # the caller's work is over (release, or none began)

        self._began = False  # the attempt's first event came
        self._connect_by: Optional[float] = None  # while connecting
        self._wait_by: Optional[float] = None  # until granted, when the wait is a duration
        self._in_flight = False  # a request awaits its answer; at most one (rule 3)
        self.answers = 0  # requests answered so far (ACQUIRE and heartbeats)
        self._last_send = 0.0
        self._last_written = 0.0  # when the newest completed write returned
        self.deadline = math.inf  # newest answered send + 0.8 × lease (rule 8); none before ACQUIRE
        self._hb_due: Optional[float] = None
        self._close_by: Optional[float] = None  # close at the latest then
        # RELEASE is queued: bytes read now are discarded, end of stream is the
        # close, and the release bound the reset.
        self.releasing = False
        # Whether the connection is to be closed by a reset (SO_LINGER
        # {1, 0}) rather than a plain close: when the client gave up, or the
        # server did not close first within the release bound. A reset leaves
        # no TIME_WAIT behind; the plain close is for a connection the server
        # closed first, or one that is gone, where none arises either.
        self.abortive = False
        # The release bound, or the end of lingering, passed: the reset is
        # decided, and nothing read or written afterwards changes it.
        self._final = False

    # --- inputs --------------------------------------------------------

    def dial(self, now: float) -> None:
        """The attempt begins: the TCP connect (and TLS handshake) starts,
        and must be up (start) before now + connect_timeout."""
        self._begin(now)
        self.state = State.CONNECTING
        self._connect_by = now + self.connect_timeout

    def start(self, now: float) -> None:
        """The connection is up: queues ACQUIRE. The give-up clock runs from
        here (rule 8). Up at the connect deadline or later is too late."""
        self._begin(now)
        if self.state is State.CONNECTING:
            self._deadline_first(now)
            if self.ended:
                return
            self._connect_by = None
        self.state = State.SENT
        self.deadline = now + self.timeout
        self._send(self._acquire, now)

    def written(self, now: float, failure: str = "") -> None:
        """The write the session asked for returned: done (failure ""),
        failed ("broken: ..."), or still blocked at the give-up deadline
        ("deadline")."""
        self._deadline_first(now)
        if self._final:
            return
        if not failure:
            self._last_written = now
            return
        if self.releasing:
            self._close_now(now, abort=True)  # RELEASE did not go out: reset
        elif not self.ended:
            self._end(Unavailable(f"monolock: connection lost: write: {failure}"), "closed", now, close_now=True)
        # Lingering, nothing more is written: the close waits for the work
        # or the lease, as it does for a read.

    def receive(self, data: bytes, now: float) -> None:
        """Bytes read from the server. The frames of one read were all sent
        before the server could see a heartbeat this read makes due, so that
        heartbeat is queued only once the whole read is applied: a second
        answer to one request in the same read is a violation, not the
        answer to a heartbeat not yet sent."""
        self._deadline_first(now)
        if self.releasing or self._final:
            return  # released: what the server says meanwhile is discarded
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

    def eof(self, now: float, detail: str = "closed by the server", broken: bool = False) -> None:
        """The connection ended: the end of the stream, or (broken) a read
        that failed, or a connect refused while connecting. Lost at once and
        closed at once: the server closed first, or the connection is gone.
        After RELEASE the end of the stream is the end the release waited
        for, and no error; a failed read then resets."""
        self._deadline_first(now)
        if self._final:
            return
        if self.releasing:
            self._close_now(now, abort=broken)
        elif self.state is State.CONNECTING and not self.ended:
            self._end(Unavailable(f"monolock: cannot connect to {detail}: is the server running there and reachable?"), "connect", now, close_now=True)
        elif not self.ended:
            self._end(Unavailable(f"monolock: connection lost: {detail}"), "closed", now, close_now=True)
        elif self._close_by is not None:
            self._close_now(now, abort=False)  # lingering: the server let go, or the connection is gone

    def fail(self, err: MonolockError, now: float, abort: bool = False, reason: str = "closed") -> None:
        """The connection ended with err (a certificate the server refused:
        reason tls), or the client must drop it at once (abort: by a reset,
        as for a fault of the client itself): lost at once, closed at
        once."""
        if self._final:
            return
        if not self.ended:
            self._end(err, reason, now, close_now=True)
        self._close_now(now, abort=abort or self.releasing)  # after RELEASE only the end of the stream closes normally

    def release(self, now: float) -> None:
        """The caller released the lock (or left the queue), or its work
        stopped after a loss. A live session sends RELEASE and waits for the
        server to close first, at most the release bound, so the TIME_WAIT
        of the connection stays on the server (docs/protocol.md, RELEASE);
        one still connecting is aborted; one the client gave up on closes
        now by a reset; one the server ended closes now. Idempotent."""
        self.work_stopped = True
        self._deadline_first(now)
        if self.state is State.CONNECTING and not self.ended:
            self.ended = True
            self._close_now(now, abort=True)
        elif not self.ended:
            self._release(now)
        elif not self.releasing:
            self._close_by = now

    def tick(self, now: float) -> None:
        """The timer: the deadlines (connect, give-up, wait), then a
        heartbeat due."""
        self._deadline_first(now)
        self._heartbeat_if_due(now)

    # --- outputs -------------------------------------------------------

    def next_wakeup(self) -> Optional[float]:
        """When tick() or close_due() next has something to do."""
        times: List[float] = []
        if not self.ended:
            if self._connect_by is not None:
                times.append(self._connect_by)
            if self.deadline != math.inf:
                times.append(self.deadline)
            if self._wait_by is not None and not self.granted:
                times.append(self._wait_by)
            if self._hb_due is not None and not self._in_flight:
                times.append(self._hb_due)
        if self._close_by is not None:
            times.append(self._close_by)
        return min(times) if times else None

    def connect_by(self) -> Optional[float]:
        """Until when a connect (and TLS handshake) may block: the connect
        deadline, or the wait's if that comes first."""
        if self._connect_by is None:
            return None
        return min(self._connect_by, self._wait_by) if self._wait_by is not None else self._connect_by

    def write_by(self) -> float:
        """How long a write may block: until the give-up deadline, or, for
        RELEASE, until the release bound."""
        return self._close_by if self.releasing and self._close_by is not None else self.deadline

    def close_due(self, now: float) -> bool:
        return self._close_by is not None and now >= self._close_by

    def valid(self, now: float) -> bool:
        """Held, not lost, and confirmed within 0.8 × lease. Once the
        deadline has come it gives the lock up (the work's own check found
        it passed: the `expired` event), so no answer read afterwards
        revives it. The owner calls it, as every method (the threaded Lock's
        valid() reads the deadline the owner publishes, and hands a check
        that found it passed to the owner)."""
        if not self.granted or self.ended:
            return False
        if now < self.deadline:
            return True
        self._give_up(now)
        return False

    # --- rules ---------------------------------------------------------

    def _begin(self, now: float) -> None:
        """The attempt's first event starts the wait's clock. A try-lock
        (wait 0) ends at the ACQUIRE's WAITING, not at a time."""
        if not self._began:
            self._began = True
            if self.wait:
                self._wait_by = now + self.wait

    def _send(self, frame: bytes, now: float) -> None:
        self.outbox += frame
        self._last_send = now
        self._in_flight = True

    def _frame(self, typ: int, token: int, code: int, reason: str, now: float) -> None:
        if typ == _wire.TYPE_ERROR:
            self._end(error_for_code(code, reason), "server", now, close_now=True)
            return
        if typ == _wire.TYPE_WAITING and self.state is not State.HELD and self._in_flight:
            first = self.state is State.SENT
            self.state = State.WAITING
            self.answered = True
            self._acknowledged(now)
            if first and self.wait == 0 and not self.ended:
                self._busy(now)
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
        the deadline or later comes too late: the lock was given up at the
        deadline (rule 8)."""
        if now >= self.deadline:
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
        """At each event the deadlines that have passed are taken first, as
        if the timer had fired just before, in time order, and at the same
        time the connect deadline, then the give-up, then the wait: a frame
        or the end of the stream read at the give-up deadline or later comes
        too late, the lock (or the attempt) is lost by silence, and what was
        read only decides how the connection ends (docs/protocol.md, "The
        order of simultaneous things")."""
        if self.ended:
            if self.abortive and self.close_due(now):
                # The release bound, or the lingering's end, passed first:
                # the reset is decided.
                self._close_now(now, abort=True)
                self._final = True
            return
        due = [(t, rank) for t, rank in ((self._connect_by, 0), (self.deadline, 1), (None if self.granted else self._wait_by, 2)) if t is not None and now >= t]
        if not due:
            return
        _, first = min(due)
        if first == 0:
            self._end(Unavailable(f"monolock: cannot connect within the connect timeout ({self.connect_timeout:g}s): is the server running and reachable?"), "connect", now)
        elif first == 1:
            self._give_up(now)
        else:
            self._wait_over(now)

    def _wait_over(self, now: float) -> None:
        """The wait ended before the grant: busy once queued, by silence when
        nothing answered yet (retried); the place in the queue is released."""
        if self.state is State.WAITING:
            self._busy(now, f"still held by someone else after waiting {self.wait:g}s")
            return
        err = Unavailable(f"monolock: no answer from the server within the wait of {self.wait:g}s")
        if self.state is State.CONNECTING:
            self._end(err, "timeout", now)
        else:
            self.error, self.reason = err, "timeout"
            self._release(now)

    def _busy(self, now: float, detail: str = "held by someone else") -> None:
        self.error, self.reason = Busy(f"monolock: lock {detail}"), "busy"
        self._release(now)

    def _release(self, now: float) -> None:
        self.ended = True
        self._hb_due = None
        self.outbox += _wire.RELEASE  # after anything not written yet: the server answers in order
        self.releasing = True
        self.abortive = True  # unless the server closes within the bound
        self._close_by = now + release_bound(self.lease)

    def _close_now(self, now: float, abort: bool) -> None:
        self.releasing = False
        self.abortive = abort
        self._close_by = now

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
                self._close_now(now, abort=False)
                return

    def _give_up(self, now: float) -> None:
        self._end(Unavailable(f"monolock: no answer from the server within 0.8 × lease ({self.timeout:.3f}s)"), "timeout", now)

    def _violation(self, detail: str, now: float) -> None:
        self._end(ProtocolViolation(f"monolock: protocol violation by the server: {detail}"), "protocol", now)

    def _end(self, err: MonolockError, reason: str, now: float, close_now: bool = False) -> None:
        """Lost (rule 8): no more requests. The connection stays open while
        the caller's work may still run, so the server does not hand the lock
        on before the work has stopped, but no longer than the lease after
        the last request's write (its send, when that write has not
        returned), when the server drops the session anyway. With no work
        running (not granted, or already stopped), or when the server ended
        the connection itself, it closes at once. Nothing is sent once the
        session ended. A connection the client gave up on is reset when it
        closes: the server may be unreachable, and no TIME_WAIT is left."""
        self.ended = True
        self.error, self.reason = err, reason
        self._hb_due = None
        self.outbox.clear()
        self.abortive = not close_now
        if close_now or not self.granted or self.work_stopped:
            self._close_by = now
        else:
            self._close_by = max(self._last_written, self._last_send) + self.lease
