//! The rules of one connection as a pure step: events and the current
//! monotonic time in, actions out. No I/O, no clock, no threads.
//!
//! Both drivers, the tokio task ([`crate::Client`]) and the std thread
//! ([`crate::blocking::Client`]), run a [`Session`]: they call
//! [`Session::step`] with what happened (bytes read, the connection ended,
//! the work stopped, a timer fired) and `Instant::now()`, then do what the
//! [`Actions`] say: write the request, close the connection, sleep until
//! `wake_at`. The rules live here once, so the two drivers behave the same
//! and the tests check the rules to the nanosecond with an injected clock.
//!
//! The rules are those of docs/protocol.md, "Writing a client in another
//! language", cited by number.
//!
//! How a connection ends decides which side keeps the TIME_WAIT of its
//! 4-tuple: whoever sends the first FIN. The release therefore asks the
//! server to close first (RELEASE, then the server's end of stream); the
//! client closes normally only once the server has closed, and abortively
//! (an RST, which leaves no TIME_WAIT) when it gives up on the server.

use std::time::{Duration, Instant};

use crate::schedule::{client_timeout, Schedule};
use crate::wire::{self, Decoder, Frame};
use crate::Error;

/// What happened, for [`Session::step`].
#[derive(Debug, Clone)]
pub(crate) enum Event<'a> {
    /// Bytes read from the server.
    Read(&'a [u8]),
    /// The server closed the connection (end of stream, a TLS
    /// close_notify): it closed first, so the client's close is a normal one.
    Eof,
    /// A read or write failed, or a TLS alert came; the error says which
    /// ([`Error::Unavailable`] or [`Error::Tls`]). Lost at once, closed at
    /// once, abortively.
    Closed(Error),
    /// The caller released the lock, or the work has stopped (the lock was
    /// dropped, `run`'s work returned or was cancelled). A live session
    /// sends RELEASE and waits for the server's close.
    Stop,
    /// A timer fired (`wake_at` passed), or nothing happened at all.
    Tick,
}

/// A request to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    Acquire,
    Heartbeat,
    Release,
}

/// The longest wait for the server's close after RELEASE (when the lease is
/// shorter, the lease): past it the client closes abortively.
pub(crate) const MAX_RELEASE_WAIT: Duration = Duration::from_secs(2);

/// What the driver does after a step, in this order: write `send`, close
/// when `close` (abortively, with SO_LINGER {on, 0}, when `abort`), else
/// wake up at `wake_at` (with a [`Event::Tick`]) unless something happens
/// first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) struct Actions {
    pub(crate) send: Option<Request>,
    pub(crate) close: bool,
    pub(crate) abort: bool,
    pub(crate) wake_at: Option<Instant>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Sent,    // ACQUIRE written, no answer yet
    Waiting, // queued behind a holder
    Held,    // granted; never goes back
}

/// What the API shows of a session; the driver publishes it after each step.
#[derive(Debug, Clone)]
pub(crate) struct Status {
    /// The server answered ACQUIRE (held or queued).
    pub(crate) answered: bool,
    pub(crate) granted: bool,
    /// The grant's fencing token (0 before it).
    pub(crate) token: u64,
    /// The send of the newest answered request + 0.8 × lease (rule 8).
    pub(crate) deadline: Instant,
    /// Lost, released or failed: no more requests.
    pub(crate) ended: bool,
    /// Why it ended, when not by the caller.
    pub(crate) error: Option<Error>,
}

impl Status {
    /// Held, not lost, and confirmed within 0.8 × lease of `now`.
    pub(crate) fn valid(&self, now: Instant) -> bool {
        self.granted && !self.ended && now < self.deadline
    }
}

/// One connection's claim.
#[derive(Debug)]
pub(crate) struct Session {
    lease: Duration,
    timeout: Duration,
    schedule: Schedule,
    acquire: Vec<u8>,
    decoder: Decoder,
    state: State,
    status: Status,
    work_stopped: bool,
    in_flight: bool,
    last_send: Instant,
    heartbeat_due: Option<Instant>,
    close_by: Option<Instant>,
    /// The close at `close_by` is abortive: the client gave up on the
    /// server, or the server never closed after RELEASE.
    abort: bool,
    /// RELEASE is written: every frame from now on is discarded, the
    /// server's end of stream is the end.
    releasing: bool,
}

impl Session {
    /// A session whose ACQUIRE (`acquire`, already encoded) goes out at
    /// `now`: the give-up clock runs from there (rule 8).
    pub(crate) fn start(acquire: Vec<u8>, lease: Duration, now: Instant) -> (Session, Actions) {
        let timeout = client_timeout(lease);
        let mut s = Session {
            lease,
            timeout,
            schedule: Schedule::new(lease),
            acquire,
            decoder: Decoder::default(),
            state: State::Sent,
            status: Status {
                answered: false,
                granted: false,
                token: 0,
                deadline: now + timeout,
                ended: false,
                error: None,
            },
            work_stopped: false,
            in_flight: false,
            last_send: now,
            heartbeat_due: None,
            close_by: None,
            abort: false,
            releasing: false,
        };
        s.send(now);
        let actions = s.actions(Some(Request::Acquire), now);
        (s, actions)
    }

    /// The lease asked for.
    #[cfg(feature = "tokio")]
    pub(crate) fn lease(&self) -> Duration {
        self.lease
    }

    /// The bytes of a request.
    pub(crate) fn frame(&self, r: Request) -> &[u8] {
        match r {
            Request::Acquire => &self.acquire,
            Request::Heartbeat => &[wire::TYPE_HEARTBEAT],
            Request::Release => &[wire::TYPE_RELEASE],
        }
    }

    /// When a write of `r` blocking longer means the connection is of no
    /// use: the give-up deadline for a request, the release bound for
    /// RELEASE.
    pub(crate) fn write_deadline(&self, r: Request) -> Instant {
        match (r, self.close_by) {
            (Request::Release, Some(bound)) => bound,
            _ => self.status.deadline,
        }
    }

    /// When the connection is due to close, if it is.
    #[cfg(feature = "blocking")]
    pub(crate) fn close_at(&self) -> Option<Instant> {
        self.close_by
    }

    pub(crate) fn status(&self) -> &Status {
        &self.status
    }

    /// Applies one event at `now`. The give-up deadline is checked first,
    /// so an answer that arrives after it does not revive the lock, and
    /// [`Status::valid`] turning false is final.
    pub(crate) fn step(&mut self, event: Event<'_>, now: Instant) -> Actions {
        let mut send = None;
        if !self.status.ended && now >= self.status.deadline {
            self.end(
                Error::Unavailable(format!(
                    "no answer from the server within 0.8 × lease ({:?}) of the newest answered request",
                    self.timeout
                )),
                now,
                Ending::GaveUp,
            );
        }
        match event {
            // After RELEASE whatever the server says is the end, not news:
            // an old server's ERROR 0x13 (unknown type) included.
            Event::Read(_) if self.releasing => {}
            Event::Read(data) => {
                if !self.status.ended {
                    send = self.receive(data, now);
                }
            }
            Event::Eof => {
                if !self.status.ended {
                    self.end(
                        Error::Unavailable("connection lost: closed by the server".into()),
                        now,
                        Ending::ByServer,
                    );
                }
                // The server closed first: a normal close leaves no TIME_WAIT here.
                self.close(now, false);
            }
            Event::Closed(err) => {
                if !self.status.ended {
                    self.end(err, now, Ending::Failed);
                }
                if self.close_by.is_none_or(|t| t > now) {
                    self.close(now, true);
                }
            }
            Event::Stop => {
                self.work_stopped = true;
                if !self.status.ended {
                    // A live session: the server closes first (RELEASE).
                    self.status.ended = true;
                    self.heartbeat_due = None;
                    self.releasing = true;
                    self.close(now + MAX_RELEASE_WAIT.min(self.lease), true);
                    send = Some(Request::Release);
                } else if !self.releasing && self.close_by.is_some_and(|t| t > now) {
                    // Given up on, kept open for the work: the work is done.
                    self.close(now, self.abort);
                }
            }
            Event::Tick => {}
        }
        if send.is_none() && !self.status.ended && !self.in_flight {
            if let Some(due) = self.heartbeat_due {
                if now >= due {
                    self.send(now);
                    send = Some(Request::Heartbeat);
                }
            }
        }
        if self.status.ended && send != Some(Request::Release) {
            // Nothing is sent once the session ended, not even a heartbeat
            // an answer queued before a later frame ended it.
            send = None;
        }
        self.actions(send, now)
    }

    fn close(&mut self, at: Instant, abort: bool) {
        self.close_by = Some(at);
        self.abort = abort;
    }

    fn actions(&self, send: Option<Request>, now: Instant) -> Actions {
        let close = self.close_by.is_some_and(|t| now >= t);
        Actions {
            send,
            close,
            abort: close && self.abort,
            wake_at: self.wake_at(),
        }
    }

    /// When a [`Event::Tick`] next has something to do.
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        let mut wake_at = self.close_by;
        if !self.status.ended {
            wake_at = earliest(wake_at, Some(self.status.deadline));
            if !self.in_flight {
                wake_at = earliest(wake_at, self.heartbeat_due);
            }
        }
        wake_at
    }

    fn send(&mut self, now: Instant) {
        self.last_send = now;
        self.in_flight = true;
        self.heartbeat_due = None;
    }

    fn receive(&mut self, data: &[u8], now: Instant) -> Option<Request> {
        self.decoder.push(data);
        let mut send = None;
        loop {
            let frame = match self.decoder.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return send,
                Err(detail) => {
                    self.violation(detail, now);
                    return send;
                }
            };
            // A heartbeat queued by an earlier frame of this read is not
            // written yet: no frame can answer it. A push and an ERROR are
            // still ordinary frames; only a second answer is a violation.
            let answerable = self.in_flight && send.is_none();
            if let Some(queued) = self.frame_in(frame, answerable, now) {
                send = Some(queued);
            }
            if self.status.ended {
                return send;
            }
        }
    }

    fn frame_in(&mut self, frame: Frame, answerable: bool, now: Instant) -> Option<Request> {
        match (frame, self.state) {
            (Frame::Error { code, reason }, _) => {
                self.end(Error::Server { code, reason }, now, Ending::ByServer);
                None
            }
            (Frame::Waiting, State::Sent | State::Waiting) if answerable => {
                self.state = State::Waiting;
                self.status.answered = true;
                self.acknowledged(now)
            }
            (Frame::Acquired(token), State::Sent) => {
                self.grant(token);
                self.acknowledged(now)
            }
            (Frame::Acquired(token), State::Waiting) => {
                // The promotion push: it answers no request (rule 4).
                self.grant(token);
                None
            }
            (Frame::Acquired(token), State::Held) if token == self.status.token && answerable => {
                self.acknowledged(now)
            }
            (Frame::Acquired(token), State::Held) if token != self.status.token => {
                let old = self.status.token;
                self.violation(format!("token changed from {old} to {token}"), now);
                None
            }
            (Frame::Waiting, State::Held) => {
                self.violation("WAITING after ACQUIRED".into(), now);
                None
            }
            (frame, _) if self.in_flight => {
                self.violation(
                    format!("{frame:?} after the answer to the request in flight, before the next request"),
                    now,
                );
                None
            }
            (frame, _) => {
                self.violation(format!("{frame:?} with no request in flight"), now);
                None
            }
        }
    }

    fn grant(&mut self, token: u64) {
        self.state = State::Held;
        self.status.token = token;
        self.status.granted = true;
        self.status.answered = true;
    }

    /// The answer to the request in flight (rule 4): the deadline moves to
    /// its send + 0.8 × lease, the next heartbeat is due one interval after
    /// that send, at once if that has passed (rule 3).
    fn acknowledged(&mut self, now: Instant) -> Option<Request> {
        self.schedule
            .observe(now.saturating_duration_since(self.last_send));
        self.in_flight = false;
        self.status.deadline = self.last_send + self.timeout;
        let due = self.last_send + self.schedule.interval();
        self.heartbeat_due = Some(due);
        if now >= due {
            self.send(now);
            return Some(Request::Heartbeat);
        }
        None
    }

    fn violation(&mut self, detail: String, now: Instant) {
        self.end(Error::Protocol(detail), now, Ending::GaveUp);
    }

    /// Lost (rule 8): no more requests. When the client gave up on the
    /// server (silence, a violation), the connection stays open while the
    /// caller's work may still run, so that the server's expiry, not this
    /// close, hands the lock on; but no longer than the lease after the last
    /// send, when the server drops the session anyway; that close is
    /// abortive. With no work running (not granted, or already stopped), or
    /// when the connection ended, it closes at once (rule 7): normally when
    /// the server ended it (it closes first), abortively after a failure.
    fn end(&mut self, err: Error, now: Instant, how: Ending) {
        self.status.ended = true;
        self.status.error = Some(err);
        self.heartbeat_due = None;
        let at = match how {
            Ending::GaveUp if self.status.granted && !self.work_stopped => {
                self.last_send + self.lease
            }
            _ => now,
        };
        self.close(at, how != Ending::ByServer);
    }
}

/// Why a session ends, which decides how its connection closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The server ended it (ERROR, end of stream): it closes first.
    ByServer,
    /// A read or write failed: nothing to wait for.
    Failed,
    /// The client gave up on the server (silence, a protocol violation).
    GaveUp,
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
