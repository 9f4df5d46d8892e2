//! The rules of one attempt as a pure step: events and the current
//! monotonic time in, actions out. No I/O, no clock, no threads.
//!
//! Both drivers, the tokio task ([`crate::Client`]) and the std thread
//! ([`crate::blocking::Client`]), run a [`Session`] from the dial on: they
//! call [`Session::step`] with what happened (the connection came up or
//! failed, bytes read, a write returned, the connection ended, the work
//! stopped, a timer fired) and `Instant::now()`, then do what the
//! [`Actions`] say: write the request, close the connection, sleep until
//! `wake_at`. The rules, the connect, wait and try-lock deadlines among
//! them, live here once, so the two drivers behave the same and the tests
//! check the rules to the nanosecond with an injected clock.
//!
//! The rules are those of docs/protocol.md, "The client step" (its scripts,
//! protocol/testdata/step, run against this step in `step_scripts.rs`), and
//! "Writing a client in another language", cited by number.
//!
//! How a connection ends decides which side keeps the TIME_WAIT of its
//! 4-tuple: whoever sends the first FIN. The release therefore asks the
//! server to close first (RELEASE, then the server's end of stream); the
//! client closes normally only once the server has closed or the connection
//! is gone, and abortively (an RST, which leaves no TIME_WAIT) when it
//! gives up on the server.

use std::time::{Duration, Instant};

use crate::schedule::{client_timeout, Schedule};
use crate::wire::{self, Decoder, Frame};
use crate::Error;

/// How long an attempt waits for the grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// As long as it takes.
    Forever,
    /// A try-lock: the ACQUIRE's WAITING is the answer, busy.
    No,
    /// At most this long from the attempt's first event (the dial).
    AtMost(Duration),
}

/// What happened, for [`Session::step`].
#[derive(Debug, Clone)]
pub(crate) enum Event<'a> {
    /// The connection is up (the TCP connect and the TLS handshake are
    /// done): ACQUIRE goes out.
    Up,
    /// Bytes read from the server.
    Read(&'a [u8]),
    /// The server closed the connection (end of stream, a TLS
    /// close_notify): it closed first, so the client's close is a normal one.
    Eof,
    /// A read failed, a TLS alert came, or the connect failed; the error
    /// says which ([`Error::Unavailable`] or [`Error::Tls`]).
    Closed(Error),
    /// The write the step asked for returned.
    Written,
    /// The write the step asked for failed: the connection is gone.
    WriteFailed(Error),
    /// The write the step asked for was still blocked at its deadline.
    WriteBlocked,
    /// The caller released the lock, or the work has stopped (the lock was
    /// dropped, `run`'s work returned or was cancelled). A live session
    /// sends RELEASE and waits for the server's close.
    Stop,
    /// A timer fired (`wake_at` passed, maybe a little early), or the
    /// work's own check found the deadline passed: the step checks the time.
    Tick,
}

/// A request to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    Acquire,
    Heartbeat,
    Release,
}

/// The default bound on the TCP connect and the TLS handshake.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest wait for the server's close after RELEASE (when the lease is
/// shorter, the lease): past it the client closes abortively.
pub(crate) const MAX_RELEASE_WAIT: Duration = Duration::from_secs(2);

/// What the driver does after a step, in this order: write `send` (then
/// step [`Event::Written`] or its failure), close when `close`
/// (abortively, with SO_LINGER {on, 0}, when `abort`), else wake up at
/// `wake_at` (with a [`Event::Tick`]) unless something happens first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) struct Actions {
    pub(crate) send: Option<Request>,
    pub(crate) close: bool,
    pub(crate) abort: bool,
    pub(crate) wake_at: Option<Instant>,
}

/// Why a session ended (docs/protocol.md, "Why a session ends").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    Busy,
    Timeout,
    Closed,
    Connect,
    Server,
    Protocol,
    Tls,
}

/// What a step reported, in the order of the spec's actions; recorded for
/// the step scripts only (the drivers read the same facts off [`Status`]).
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Report {
    Waiting,
    Granted(u64),
    ValidUntil(Instant),
    Ack {
        rtt: Duration,
        srtt: Duration,
        interval: Duration,
    },
    Failed(Reason),
    Lost(Reason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Dialled: the TCP connect (and the TLS handshake) under way.
    Connecting,
    /// Up: requests and answers flow.
    Live,
    /// RELEASE sent: waiting for the server's close.
    Releasing,
    /// Ended: closing at `close_by` (lingering until then after a give-up
    /// while the work may run).
    Ended,
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
    /// Lost, released, failed or busy: no more requests.
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

/// One attempt's claim, from the dial to the close.
#[derive(Debug)]
pub(crate) struct Session {
    lease: Duration,
    timeout: Duration,
    schedule: Schedule,
    acquire: Vec<u8>,
    decoder: Decoder,
    phase: Phase,
    state: State,
    status: Status,
    wait: Wait,
    /// The dial + the connect timeout, while connecting.
    connect_by: Option<Instant>,
    /// The attempt's first event + the wait, until the grant.
    wait_until: Option<Instant>,
    work_stopped: bool,
    in_flight: bool,
    last_send: Instant,
    /// When the last request's write returned, or its send while it has
    /// not: a lingering close comes a lease after it.
    last_write: Instant,
    heartbeat_due: Option<Instant>,
    /// What this step asks to write; committed (sent) when it returns.
    queued: Option<Request>,
    close_by: Option<Instant>,
    /// The close at `close_by` is abortive: the client gave up on the
    /// server, or the server never closed after RELEASE.
    abort: bool,
    /// Given up on while the work may still run: the close waits for the
    /// work's stop or the last write + lease.
    lingering: bool,
    #[cfg(test)]
    pub(crate) reports: Vec<Report>,
}

impl Session {
    /// An attempt that begins with the TCP connect at `now`: the connect
    /// deadline is `now + connect_timeout`, the wait counts from `now`.
    pub(crate) fn dial(
        acquire: Vec<u8>,
        lease: Duration,
        wait: Wait,
        connect_timeout: Duration,
        now: Instant,
    ) -> (Session, Actions) {
        let mut s = Session::new(acquire, lease, wait, now);
        s.connect_by = now.checked_add(connect_timeout);
        let actions = s.actions(now);
        (s, actions)
    }

    /// An attempt whose connection is up at `now` (its connect bounded
    /// elsewhere): ACQUIRE goes out, the give-up clock runs from there
    /// (rule 8).
    #[cfg(test)]
    pub(crate) fn start(
        acquire: Vec<u8>,
        lease: Duration,
        wait: Wait,
        now: Instant,
    ) -> (Session, Actions) {
        let mut s = Session::new(acquire, lease, wait, now);
        s.up(now);
        let actions = s.actions(now);
        (s, actions)
    }

    fn new(acquire: Vec<u8>, lease: Duration, wait: Wait, now: Instant) -> Session {
        let timeout = client_timeout(lease);
        Session {
            lease,
            timeout,
            schedule: Schedule::new(lease),
            acquire,
            decoder: Decoder::default(),
            phase: Phase::Connecting,
            state: State::Sent,
            status: Status {
                answered: false,
                granted: false,
                token: 0,
                deadline: now + timeout,
                ended: false,
                error: None,
            },
            wait,
            connect_by: None,
            wait_until: match wait {
                Wait::AtMost(d) => now.checked_add(d),
                _ => None,
            },
            work_stopped: false,
            in_flight: false,
            last_send: now,
            last_write: now,
            heartbeat_due: None,
            queued: None,
            close_by: None,
            abort: false,
            lingering: false,
            #[cfg(test)]
            reports: Vec::new(),
        }
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

    /// Why the attempt ended before the grant, for the caller.
    pub(crate) fn failure(&self) -> Error {
        self.status
            .error
            .clone()
            .unwrap_or_else(|| Error::Unavailable("the attempt ended before the grant".into()))
    }

    /// Applies one event at `now`. Every deadline that has passed at `now`
    /// is taken first, as if the timer had fired just before (the connect
    /// deadline, then the give-up, then the wait): an answer read at the
    /// give-up deadline or later does not revive the lock, and
    /// [`Status::valid`] turning false is final.
    pub(crate) fn step(&mut self, event: Event<'_>, now: Instant) -> Actions {
        #[cfg(test)]
        self.reports.clear();
        self.take_deadlines(now);
        match self.phase {
            Phase::Connecting => self.connecting(event, now),
            Phase::Live => self.live(event, now),
            Phase::Releasing => self.releasing(event, now),
            Phase::Ended => self.ended(event, now),
        }
        if self.phase == Phase::Live && self.queued.is_none() && !self.in_flight {
            if let Some(due) = self.heartbeat_due {
                if now >= due {
                    self.queued = Some(Request::Heartbeat);
                }
            }
        }
        self.actions(now)
    }

    fn take_deadlines(&mut self, now: Instant) {
        let passed = |t: Option<Instant>| t.filter(|&t| now >= t);
        let wait = if self.status.granted {
            None
        } else {
            passed(self.wait_until)
        };
        let first = match self.phase {
            Phase::Connecting => passed(self.connect_by),
            Phase::Live => passed(Some(self.status.deadline)),
            Phase::Releasing | Phase::Ended => return,
        };
        match (first, wait) {
            (Some(first), Some(wait)) if wait < first => self.wait_ran_out(now),
            (Some(_), _) if self.phase == Phase::Connecting => {
                // While connecting, `last_send` is still the dial's time.
                let timeout = self.connect_by.map_or(Duration::ZERO, |t| t - self.last_send);
                self.gave_up(
                    Error::Unavailable(format!(
                        "cannot connect: timed out after the connect timeout ({timeout:?}); check the address and that the server is up"
                    )),
                    Reason::Connect,
                    now,
                );
            }
            (Some(_), _) => self.gave_up(
                Error::Unavailable(format!(
                    "no answer from the server within 0.8 × lease ({:?}) of the newest answered request",
                    self.timeout
                )),
                Reason::Timeout,
                now,
            ),
            (None, Some(_)) => self.wait_ran_out(now),
            (None, None) => {}
        }
    }

    fn connecting(&mut self, event: Event<'_>, now: Instant) {
        match event {
            Event::Up => self.up(now),
            Event::Closed(err) | Event::WriteFailed(err) => {
                let reason = match &err {
                    Error::Tls(_) => Reason::Tls,
                    _ => Reason::Connect,
                };
                self.end(err, reason, now);
            }
            Event::Eof => self.end(
                Error::Unavailable("the server closed the connection while connecting".into()),
                Reason::Connect,
                now,
            ),
            Event::Stop => {
                // The caller gave the attempt up: no report, the half-made
                // connection is reset.
                self.work_stopped = true;
                self.status.ended = true;
                self.phase = Phase::Ended;
                self.close(now, true);
            }
            Event::Read(_) | Event::Written | Event::WriteBlocked | Event::Tick => {}
        }
    }

    fn up(&mut self, now: Instant) {
        self.phase = Phase::Live;
        self.status.deadline = now + self.timeout;
        self.last_send = now;
        self.queued = Some(Request::Acquire);
    }

    fn live(&mut self, event: Event<'_>, now: Instant) {
        match event {
            Event::Read(data) => self.receive(data, now),
            Event::Eof => self.end(
                Error::Unavailable("connection lost: closed by the server".into()),
                Reason::Closed,
                now,
            ),
            Event::Closed(err) | Event::WriteFailed(err) => {
                let reason = match &err {
                    Error::Tls(_) => Reason::Tls,
                    _ => Reason::Closed,
                };
                self.end(err, reason, now);
            }
            Event::Written => self.last_write = now,
            // The deadline has passed (it was the write's): taken above.
            // Should the driver's clock say otherwise, give up all the same.
            Event::WriteBlocked => self.gave_up(
                Error::Unavailable("a write blocked past the give-up deadline".into()),
                Reason::Timeout,
                now,
            ),
            Event::Stop => {
                // A live session: the server closes first (RELEASE).
                self.work_stopped = true;
                self.status.ended = true;
                self.release(now);
            }
            Event::Up | Event::Tick => {}
        }
    }

    fn releasing(&mut self, event: Event<'_>, now: Instant) {
        match event {
            // The server's close after RELEASE: the end, nothing to report.
            Event::Eof => self.close(now, false),
            Event::Closed(_) | Event::WriteFailed(_) | Event::WriteBlocked => self.close(now, true),
            Event::Stop => self.work_stopped = true,
            // Whatever the server says now is the end, not news: an old
            // server's ERROR 0x13 (unknown type) included.
            Event::Read(_) | Event::Written | Event::Up | Event::Tick => {}
        }
    }

    fn ended(&mut self, event: Event<'_>, now: Instant) {
        match event {
            Event::Read(data) => {
                // Nothing read revives the lock; an ERROR says the server
                // has let go: close now, normally.
                self.decoder.push(data);
                loop {
                    match self.decoder.next_frame() {
                        Ok(Some(Frame::Error { .. })) => {
                            self.close(now, false);
                            break;
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(_) => {
                            self.decoder = Decoder::default();
                            break;
                        }
                    }
                }
            }
            // The server closed, or the connection is gone.
            Event::Eof | Event::Closed(_) | Event::WriteFailed(_) => self.close(now, false),
            Event::Written if self.lingering => {
                self.last_write = now;
                self.close_by = Some(now + self.lease);
            }
            Event::Stop => {
                // Given up on, kept open for the work: the work is done.
                self.work_stopped = true;
                if self.close_by.is_some_and(|t| t > now) {
                    self.close(now, self.abort);
                }
            }
            Event::Written | Event::WriteBlocked | Event::Up | Event::Tick => {}
        }
    }

    fn close(&mut self, at: Instant, abort: bool) {
        self.close_by = Some(at);
        self.abort = abort;
        self.lingering = false;
    }

    fn actions(&mut self, now: Instant) -> Actions {
        let mut send = self.queued.take();
        match send {
            Some(Request::Release) => {}
            Some(_) if self.phase == Phase::Live => {
                self.last_send = now;
                self.last_write = now;
                self.in_flight = true;
                self.heartbeat_due = None;
            }
            // Nothing is sent once the session ended, not even a heartbeat
            // an answer queued before a later frame ended it.
            _ => send = None,
        }
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
        match self.phase {
            Phase::Connecting => earliest(self.connect_by, self.wait_until),
            Phase::Live => {
                let mut wake_at = Some(self.status.deadline);
                if !self.status.granted {
                    wake_at = earliest(wake_at, self.wait_until);
                }
                if !self.in_flight {
                    wake_at = earliest(wake_at, self.heartbeat_due);
                }
                wake_at
            }
            Phase::Releasing | Phase::Ended => self.close_by,
        }
    }

    fn receive(&mut self, data: &[u8], now: Instant) {
        self.decoder.push(data);
        while self.phase == Phase::Live {
            match self.decoder.next_frame() {
                Ok(Some(frame)) => self.frame_in(frame, now),
                Ok(None) => return,
                Err(detail) => self.violation(detail, now),
            }
        }
    }

    fn frame_in(&mut self, frame: Frame, now: Instant) {
        // A heartbeat queued by an earlier frame of this read is not
        // written yet: no frame can answer it. A push and an ERROR are
        // still ordinary frames.
        let answerable = self.in_flight && self.queued.is_none();
        match (frame, self.state) {
            (Frame::Error { code, reason }, _) => {
                self.end(Error::Server { code, reason }, Reason::Server, now);
            }
            (Frame::Waiting, State::Sent | State::Waiting) if answerable => {
                let first = self.state == State::Sent;
                self.state = State::Waiting;
                self.status.answered = true;
                #[cfg(test)]
                if first {
                    self.reports.push(Report::Waiting);
                }
                self.acknowledged(now);
                if first && self.wait == Wait::No {
                    // A try-lock: queued is busy.
                    self.wait_ran_out(now);
                }
            }
            (Frame::Acquired(token), State::Sent) => {
                self.grant(token);
                self.acknowledged(now);
            }
            (Frame::Acquired(token), State::Waiting) => {
                // The promotion push: it answers no request (rule 4), and
                // the deadline stays that of the newest answered send.
                self.grant(token);
                #[cfg(test)]
                self.reports.push(Report::ValidUntil(self.status.deadline));
            }
            (Frame::Acquired(token), State::Held) if token == self.status.token && answerable => {
                self.acknowledged(now);
            }
            (Frame::Acquired(token), State::Held) if token != self.status.token => {
                let old = self.status.token;
                self.violation(format!("token changed from {old} to {token}"), now);
            }
            (Frame::Waiting, State::Held) => {
                self.violation("WAITING after ACQUIRED".into(), now);
            }
            (frame, _) if self.queued.is_some() => self.violation(
                format!("{frame:?} in the read of the answer that made the client send a heartbeat: it cannot answer that heartbeat, not written yet"),
                now,
            ),
            (frame, _) => {
                self.violation(format!("{frame:?} with no request in flight"), now);
            }
        }
    }

    fn grant(&mut self, token: u64) {
        self.state = State::Held;
        self.status.token = token;
        self.status.granted = true;
        self.status.answered = true;
        #[cfg(test)]
        self.reports.push(Report::Granted(token));
    }

    /// The answer to the request in flight (rule 4): the deadline moves to
    /// its send + 0.8 × lease, the next heartbeat is due one interval after
    /// that send, at once if that has passed (rule 3).
    fn acknowledged(&mut self, now: Instant) {
        let rtt = now.saturating_duration_since(self.last_send);
        self.schedule.observe(rtt);
        self.in_flight = false;
        self.status.deadline = self.last_send + self.timeout;
        let due = self.last_send + self.schedule.interval();
        self.heartbeat_due = Some(due);
        #[cfg(test)]
        {
            if self.status.granted {
                self.reports.push(Report::ValidUntil(self.status.deadline));
            }
            self.reports.push(Report::Ack {
                rtt,
                srtt: self.schedule.smoothed_rtt(),
                interval: self.schedule.interval(),
            });
        }
        if now >= due {
            self.queued = Some(Request::Heartbeat);
        }
    }

    fn violation(&mut self, detail: String, now: Instant) {
        self.gave_up(Error::Protocol(detail), Reason::Protocol, now);
    }

    /// The wait ended before the grant: busy when queued (a try-lock's
    /// WAITING included), else failed by silence. Connected, the queue
    /// place is left with RELEASE; still connecting, the connection is
    /// reset.
    fn wait_ran_out(&mut self, now: Instant) {
        let (err, reason) = if self.status.answered {
            (Error::Busy, Reason::Busy)
        } else {
            let wait = match self.wait {
                Wait::AtMost(d) => d,
                _ => Duration::ZERO,
            };
            (
                Error::Unavailable(format!(
                    "no answer from the server within the wait ({wait:?})"
                )),
                Reason::Timeout,
            )
        };
        if self.phase == Phase::Connecting {
            self.gave_up(err, reason, now);
            return;
        }
        self.report_end(reason);
        self.status.ended = true;
        self.status.error = Some(err);
        self.release(now);
    }

    fn release(&mut self, now: Instant) {
        self.phase = Phase::Releasing;
        self.heartbeat_due = None;
        self.queued = Some(Request::Release);
        self.close(now + MAX_RELEASE_WAIT.min(self.lease), true);
    }

    /// The client gave up on the server (silence, a violation, the connect
    /// deadline): lost or failed, no more requests. Held with the work
    /// running, the connection stays open while the work may still run, so
    /// that the server's expiry, not this close, hands the lock on; but no
    /// longer than the lease after the last write, when the server drops
    /// the session anyway. That close, and the one at once when no work
    /// runs, is abortive.
    fn gave_up(&mut self, err: Error, reason: Reason, now: Instant) {
        self.end(err, reason, now);
        self.abort = true;
        if self.status.granted && !self.work_stopped {
            self.lingering = true;
            self.close_by = Some(self.last_write + self.lease);
        }
    }

    /// Lost or failed (rule 8): no more requests, closed at once, normally
    /// (the server ended it, or the connection is gone: rule 7).
    fn end(&mut self, err: Error, reason: Reason, now: Instant) {
        self.report_end(reason);
        self.phase = Phase::Ended;
        self.status.ended = true;
        self.status.error = Some(err);
        self.heartbeat_due = None;
        self.queued = None;
        self.close(now, false);
    }

    fn report_end(&mut self, reason: Reason) {
        #[cfg(test)]
        self.reports.push(if self.status.granted {
            Report::Lost(reason)
        } else {
            Report::Failed(reason)
        });
        let _ = reason;
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

#[cfg(test)]
#[path = "step_scripts.rs"]
mod step_scripts;
