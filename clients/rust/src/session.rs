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

use std::time::{Duration, Instant};

use crate::schedule::{client_timeout, Schedule};
use crate::wire::{self, Decoder, Frame};
use crate::Error;

/// What happened, for [`Session::step`].
#[derive(Debug, Clone)]
pub(crate) enum Event<'a> {
    /// Bytes read from the server.
    Read(&'a [u8]),
    /// The connection ended: end of stream, a failed read or write, a TLS
    /// alert; the error says which ([`Error::Unavailable`] or
    /// [`Error::Tls`]). Lost at once, closed at once.
    Closed(Error),
    /// The caller released the lock, or the work has stopped (the lock was
    /// dropped, `run`'s work returned or was cancelled).
    Stop,
    /// A timer fired (`wake_at` passed), or nothing happened at all.
    Tick,
}

/// A request to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    Acquire,
    Heartbeat,
}

/// What the driver does after a step, in this order: write `send`, close
/// when `close`, else wake up at `wake_at` (with a [`Event::Tick`]) unless
/// something happens first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) struct Actions {
    pub(crate) send: Option<Request>,
    pub(crate) close: bool,
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
        };
        s.send(now);
        let actions = s.actions(Some(Request::Acquire), now);
        (s, actions)
    }

    /// The bytes of a request.
    pub(crate) fn frame(&self, r: Request) -> &[u8] {
        match r {
            Request::Acquire => &self.acquire,
            Request::Heartbeat => &[wire::TYPE_HEARTBEAT],
        }
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
                false,
            );
        }
        match event {
            Event::Read(data) => {
                if !self.status.ended {
                    send = self.receive(data, now);
                }
            }
            Event::Closed(err) => {
                if !self.status.ended {
                    self.end(err, now, true);
                }
                self.close_by = Some(now);
            }
            Event::Stop => {
                self.work_stopped = true;
                self.status.ended = true;
                self.heartbeat_due = None;
                self.close_by = Some(now);
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
        self.actions(send, now)
    }

    fn actions(&self, send: Option<Request>, now: Instant) -> Actions {
        let mut wake_at = self.close_by;
        if !self.status.ended {
            wake_at = earliest(wake_at, Some(self.status.deadline));
            if !self.in_flight {
                wake_at = earliest(wake_at, self.heartbeat_due);
            }
        }
        Actions {
            send,
            close: self.close_by.is_some_and(|t| now >= t),
            wake_at,
        }
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
            if send.is_some() {
                // The heartbeat just queued has not been written yet: no
                // frame after this one can be its answer.
                self.violation("a frame that answers no request".into(), now);
                return send;
            }
            send = self.frame_in(frame, now);
            if self.status.ended {
                return send;
            }
        }
    }

    fn frame_in(&mut self, frame: Frame, now: Instant) -> Option<Request> {
        match (frame, self.state) {
            (Frame::Error { code, reason }, _) => {
                self.end(Error::Server { code, reason }, now, true);
                None
            }
            (Frame::Waiting, State::Sent | State::Waiting) if self.in_flight => {
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
            (Frame::Acquired(token), State::Held)
                if token == self.status.token && self.in_flight =>
            {
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
        self.end(Error::Protocol(detail), now, false);
    }

    /// Lost (rule 8): no more requests. The connection stays open while the
    /// caller's work may still run, so that the server's expiry, not this
    /// close, hands the lock on; but no longer than the lease after the last
    /// send, when the server drops the session anyway. With no work running
    /// (not granted, or already stopped), or when the server ended the
    /// connection itself, it closes at once (rule 7).
    fn end(&mut self, err: Error, now: Instant, close_now: bool) {
        self.status.ended = true;
        self.status.error = Some(err);
        self.heartbeat_due = None;
        self.close_by = Some(if close_now || !self.status.granted || self.work_stopped {
            now
        } else {
            self.last_send + self.lease
        });
    }
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
