//! The session rules at their boundaries, on an injected clock: every time
//! is an offset in nanoseconds from one `Instant`, nothing sleeps.

use super::*;

const MS: u64 = 1_000_000;
const LEASE: Duration = Duration::from_secs(2);
const ACQUIRED_T: [u8; 9] = [0x12, 0, 0, 0, 1, 0, 0, 0, 2];
const T: u64 = 0x0000_0001_0000_0002;

/// A session on a clock that starts at `t0` and moves only when told.
struct Fixture {
    t0: Instant,
    s: Session,
}

impl Fixture {
    fn new(lease: Duration) -> (Fixture, Actions) {
        let t0 = Instant::now();
        let (s, a) = Session::start(wire::encode_acquire(2000, b"x"), lease, Wait::Forever, t0);
        (Fixture { t0, s }, a)
    }
    fn at(&self, ns: u64) -> Instant {
        self.t0 + Duration::from_nanos(ns)
    }
    fn read(&mut self, ns: u64, data: &[u8]) -> Actions {
        let now = self.at(ns);
        self.s.step(Event::Read(data), now)
    }
    fn tick(&mut self, ns: u64) -> Actions {
        let now = self.at(ns);
        self.s.step(Event::Tick, now)
    }
    fn stop(&mut self, ns: u64) -> Actions {
        let now = self.at(ns);
        self.s.step(Event::Stop, now)
    }
    fn valid(&self, ns: u64) -> bool {
        self.s.status().valid(self.at(ns))
    }
    /// Granted at 10 ms (answering the ACQUIRE sent at 0).
    fn held(lease: Duration) -> Fixture {
        let (mut f, _) = Fixture::new(lease);
        let a = f.read(10 * MS, &ACQUIRED_T);
        assert_eq!(a.send, None);
        assert!(f.s.status().granted);
        f
    }
}

#[test]
fn start_sends_acquire_and_wakes_at_the_give_up() {
    let (f, a) = Fixture::new(LEASE);
    assert_eq!(a.send, Some(Request::Acquire));
    assert!(!a.close);
    assert_eq!(a.wake_at, Some(f.at(1600 * MS)));
    assert_eq!(
        f.s.frame(Request::Acquire),
        wire::encode_acquire(2000, b"x")
    );
    assert_eq!(f.s.frame(Request::Heartbeat), [0x02]);
}

#[test]
fn give_up_while_holding_at_0_8_lease_after_the_newest_answered_send() {
    let mut f = Fixture::held(LEASE);
    // The grant answered the ACQUIRE sent at 0: due one interval later.
    // 10 ms of RTT shortens the interval to 500 − 20 = 480 ms.
    assert_eq!(f.tick(480 * MS - 1).send, None);
    let a = f.tick(480 * MS);
    assert_eq!(a.send, Some(Request::Heartbeat));
    // That heartbeat is never answered: lost at 0 + 1.6 s, not at 480 ms + 1.6 s.
    let deadline = 1600 * MS;
    assert_eq!(a.wake_at, Some(f.at(deadline)));
    assert!(f.valid(deadline - 1));
    let a = f.tick(deadline - 1);
    assert_eq!((a.send, a.close), (None, false));
    assert!(!f.s.status().ended);
    assert!(!f.valid(deadline));
    let a = f.tick(deadline);
    assert!(f.s.status().ended);
    assert!(matches!(f.s.status().error, Some(Error::Unavailable(_))));
    assert_eq!(a.send, None, "nothing is sent after the give-up");
    // Closed at the last send (480 ms) + the lease, not at the give-up.
    assert!(!a.close);
    let close = 480 * MS + 2000 * MS;
    assert_eq!(a.wake_at, Some(f.at(close)));
    assert!(!f.tick(close - 1).close);
    assert!(f.tick(close).close);
}

#[test]
fn a_stopped_work_closes_a_silent_lock_at_once() {
    let mut f = Fixture::held(LEASE);
    let _ = f.tick(1600 * MS);
    assert!(f.s.status().ended);
    let a = f.stop(1700 * MS);
    assert!(a.close);
    assert!(
        matches!(f.s.status().error, Some(Error::Unavailable(_))),
        "the loss stays the reason"
    );
}

#[test]
fn give_up_while_waiting_for_the_answer_to_acquire_closes_at_once() {
    let (mut f, _) = Fixture::new(LEASE);
    assert!(!f.tick(1600 * MS - 1).close);
    let a = f.tick(1600 * MS);
    assert!(a.close, "no work ran: nothing to wait for");
    assert!(!f.s.status().answered);
    assert!(matches!(f.s.status().error, Some(Error::Unavailable(_))));
}

#[test]
fn a_late_answer_does_not_revive_the_lock() {
    let mut f = Fixture::held(LEASE);
    let _ = f.tick(480 * MS);
    // The answer to the heartbeat arrives exactly at the deadline: too late.
    let a = f.read(1600 * MS, &ACQUIRED_T);
    assert!(f.s.status().ended);
    assert_eq!(a.send, None);
    assert!(!f.valid(1600 * MS));
    // One nanosecond earlier it would have counted.
    let mut f = Fixture::held(LEASE);
    let _ = f.tick(480 * MS);
    let _ = f.read(1600 * MS - 1, &ACQUIRED_T);
    assert!(!f.s.status().ended);
    assert!(f.valid(480 * MS + 1600 * MS - 1));
    assert!(!f.valid(480 * MS + 1600 * MS));
}

#[test]
fn one_request_in_flight_and_the_next_goes_when_a_late_answer_arrives() {
    let mut f = Fixture::held(LEASE);
    let _ = f.tick(480 * MS);
    // Unanswered: no second heartbeat however long it takes.
    for ns in [960 * MS, 1000 * MS, 1599 * MS] {
        let a = f.tick(ns);
        assert_eq!(a.send, None, "at {ns} ns");
        assert_eq!(
            a.wake_at,
            Some(f.at(1600 * MS)),
            "only the give-up is armed"
        );
    }
    // The answer comes 1 s after the send, past the interval: the next
    // heartbeat goes at once.
    let a = f.read(1480 * MS, &ACQUIRED_T);
    assert_eq!(a.send, Some(Request::Heartbeat));
    // The deadline now runs from the answered send (480 ms), not this one.
    assert_eq!(a.wake_at, Some(f.at(480 * MS + 1600 * MS)));
}

#[test]
fn the_interval_runs_from_the_send_and_is_clamped_at_the_floor() {
    let mut f = Fixture::held(LEASE);
    let _ = f.tick(480 * MS);
    // An RTT of 300 ms: srtt = 10 + (300 − 10)/5 = 68 ms → 500 − 136 = 364 ms.
    let a = f.read(780 * MS, &ACQUIRED_T);
    assert_eq!(a.send, None);
    assert_eq!(a.wake_at, Some(f.at(480 * MS + 364 * MS)));
    // A very slow answer: the interval never drops below 100 ms.
    let mut f = Fixture::held(LEASE);
    let _ = f.tick(480 * MS);
    for _ in 0..20 {
        let sent = f.s.last_send;
        let ns = (sent - f.t0).as_nanos() as u64;
        let a = f.read(ns + 700 * MS, &ACQUIRED_T);
        assert_eq!(a.send, Some(Request::Heartbeat));
    }
    assert_eq!(f.s.schedule.interval(), Duration::from_millis(100));
}

#[test]
fn a_400ms_lease_beats_every_100ms() {
    let (mut f, _) = Fixture::new(Duration::from_millis(400));
    let _ = f.read(0, &ACQUIRED_T);
    let mut t = 0;
    for _ in 0..5 {
        let a = f.tick(t + 100 * MS - 1);
        assert_eq!(a.send, None);
        t += 100 * MS;
        assert_eq!(f.tick(t).send, Some(Request::Heartbeat));
        assert_eq!(f.read(t, &ACQUIRED_T).send, None);
    }
}

#[test]
fn the_push_answers_no_request() {
    let (mut f, _) = Fixture::new(LEASE);
    let _ = f.read(MS, &[wire::TYPE_WAITING]);
    assert!(f.s.status().answered && !f.s.status().granted);
    assert_eq!(f.tick(500 * MS - 2 * MS).send, Some(Request::Heartbeat));
    // Promotion while the heartbeat is in flight: granted, still in flight.
    let a = f.read(500 * MS, &ACQUIRED_T);
    assert!(f.s.status().granted);
    assert_eq!(f.s.status().token, T);
    assert_eq!(a.send, None);
    assert!(f.s.in_flight);
    assert_eq!(
        f.s.status().deadline,
        f.at(1600 * MS),
        "the push moves no deadline"
    );
    // The heartbeat's own answer (ACQUIRED after the promotion).
    let _ = f.read(501 * MS, &ACQUIRED_T);
    assert!(!f.s.in_flight);
    assert_eq!(f.s.status().deadline, f.at(498 * MS + 1600 * MS));
}

#[test]
fn waiting_and_the_push_in_one_read() {
    let (mut f, _) = Fixture::new(LEASE);
    let mut both = vec![wire::TYPE_WAITING];
    both.extend_from_slice(&ACQUIRED_T);
    let _ = f.read(MS, &both);
    assert!(f.s.status().granted && !f.s.status().ended);
}

#[test]
fn an_error_frame_ends_and_closes_at_once() {
    let mut f = Fixture::held(LEASE);
    let a = f.read(20 * MS, &[0x13, 0x02, 0x01, b'x']);
    assert!(a.close && !a.abort);
    match &f.s.status().error {
        Some(Error::Server { code: 2, reason }) => assert_eq!(reason, "x"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_end_of_stream_closes_at_once() {
    let mut f = Fixture::held(LEASE);
    let a = f.s.step(Event::Eof, f.at(20 * MS));
    assert!(a.close && !a.abort);
    assert!(matches!(f.s.status().error, Some(Error::Unavailable(_))));
}

#[test]
fn a_broken_frame_is_silence_the_connection_stays_until_the_work_stops() {
    for bad in [
        &[0x7e][..],                         // unknown type
        &[0x11][..],                         // WAITING after ACQUIRED
        &[0x12, 0, 0, 0, 0, 0, 0, 0, 9][..], // another token
        &[0x12, 0, 0, 0, 1, 0, 0, 0, 2][..], // an answer with nothing in flight
    ] {
        let mut f = Fixture::held(LEASE);
        let a = f.read(20 * MS, bad);
        assert!(
            matches!(f.s.status().error, Some(Error::Protocol(_))),
            "{bad:x?}"
        );
        assert!(!a.close, "{bad:x?}");
        assert_eq!(a.wake_at, Some(f.at(2000 * MS)), "last send (0) + lease");
        assert!(f.stop(30 * MS).close);
    }
}

#[test]
fn a_second_answer_after_the_answer_that_queued_a_heartbeat_is_a_violation() {
    let mut f = Fixture::held(LEASE);
    let _ = f.tick(480 * MS);
    let mut two = ACQUIRED_T.to_vec();
    two.extend_from_slice(&ACQUIRED_T);
    // The first answer comes past the interval, so a heartbeat is queued;
    // the second cannot answer it.
    let a = f.read(1000 * MS, &two);
    assert!(matches!(f.s.status().error, Some(Error::Protocol(_))));
    assert_eq!(a.send, None, "nothing is sent once the session ended");
}

/// A session waiting in the queue whose heartbeat is answered late, past
/// the interval, so that the answer queues the next heartbeat at once.
fn queued_with_a_late_answer_then(frames: &[u8]) -> (Fixture, Actions) {
    let (mut f, _) = Fixture::new(LEASE);
    let _ = f.read(MS, &[wire::TYPE_WAITING]);
    assert_eq!(f.tick(498 * MS).send, Some(Request::Heartbeat));
    // WAITING 600 ms after the send: past the interval.
    let mut read = vec![wire::TYPE_WAITING];
    read.extend_from_slice(frames);
    let a = f.read(1098 * MS, &read);
    (f, a)
}

#[test]
fn the_promotion_push_in_the_read_of_a_late_answer_is_a_grant() {
    let (f, a) = queued_with_a_late_answer_then(&ACQUIRED_T);
    assert!(f.s.status().error.is_none(), "{:?}", f.s.status().error);
    assert!(f.s.status().granted && !f.s.status().ended);
    assert_eq!(f.s.status().token, T);
    assert_eq!(
        a.send,
        Some(Request::Heartbeat),
        "the late answer's heartbeat"
    );
}

#[test]
fn an_error_in_the_read_of_a_late_answer_keeps_its_code_and_sends_nothing() {
    for code in [0x01u8, 0x02] {
        let (f, a) = queued_with_a_late_answer_then(&[0x13, code, 0]);
        match &f.s.status().error {
            Some(Error::Server { code: c, .. }) => assert_eq!(*c, code),
            other => panic!("0x{code:02x}: {other:?}"),
        }
        assert!(f.s.status().error.as_ref().unwrap().is_retriable());
        assert_eq!(a.send, None, "nothing is sent once the session ended");
        assert!(a.close && !a.abort, "the server closes first");
    }
    // While held: the loss carries the code.
    let mut f = Fixture::held(LEASE);
    let _ = f.tick(480 * MS);
    let mut read = ACQUIRED_T.to_vec();
    read.extend_from_slice(&[0x13, 0x02, 0]);
    let a = f.read(1000 * MS, &read);
    assert_eq!(a.send, None);
    assert_eq!(
        Error::lost(f.s.status().error.clone().unwrap()).code(),
        Some(0x02)
    );
}

#[test]
fn stop_while_queued_sends_release_and_closes_at_the_servers_close() {
    let (mut f, _) = Fixture::new(LEASE);
    let _ = f.read(MS, &[wire::TYPE_WAITING]);
    let a = f.stop(2 * MS);
    assert_eq!(a.send, Some(Request::Release));
    assert_eq!(f.s.frame(Request::Release), [0x03]);
    assert!(!a.close);
    assert!(f.s.status().ended && f.s.status().error.is_none());
    // Nothing revives it.
    let a = f.read(3 * MS, &ACQUIRED_T);
    assert!(!f.s.status().granted && a.send.is_none() && !a.close);
    let a = f.s.step(Event::Eof, f.at(4 * MS));
    assert!(
        a.close && !a.abort,
        "the server closed first: a normal close"
    );
    assert!(f.s.status().error.is_none());
}

#[test]
fn release_waits_for_the_servers_close_at_most_two_seconds() {
    let mut f = Fixture::held(Duration::from_secs(60));
    let a = f.stop(20 * MS);
    assert_eq!(a.send, Some(Request::Release));
    let bound = 20 * MS + 2000 * MS;
    assert_eq!(a.wake_at, Some(f.at(bound)));
    assert_eq!(f.s.write_deadline(Request::Release), f.at(bound));
    assert!(!f.tick(bound - 1).close);
    let a = f.tick(bound);
    assert!(a.close && a.abort, "no close from the server: reset");
    assert!(f.s.status().error.is_none(), "a release, not a loss");
}

#[test]
fn release_waits_at_most_the_lease_when_it_is_shorter() {
    let mut f = Fixture::held(Duration::from_millis(400));
    let _ = f.stop(20 * MS);
    assert!(!f.tick(420 * MS - 1).close);
    let a = f.tick(420 * MS);
    assert!(a.close && a.abort);
}

#[test]
fn an_old_servers_error_after_release_is_not_an_error() {
    let mut f = Fixture::held(LEASE);
    let _ = f.stop(20 * MS);
    let a = f.read(21 * MS, &[0x13, 0x13, 0x01, b'x']);
    assert!(!a.close && a.send.is_none());
    let a = f.s.step(Event::Eof, f.at(22 * MS));
    assert!(a.close && !a.abort);
    assert!(f.s.status().error.is_none());
}

#[test]
fn a_failure_after_release_resets_at_once() {
    let mut f = Fixture::held(LEASE);
    let _ = f.stop(20 * MS);
    let a = f.s.step(
        Event::Closed(Error::Unavailable("reset".into())),
        f.at(21 * MS),
    );
    assert!(a.close && a.abort);
    assert!(f.s.status().error.is_none(), "a release, not a loss");
}

#[test]
fn a_given_up_session_resets_and_sends_no_release() {
    // The work stops after the give-up: no RELEASE, a reset.
    let mut f = Fixture::held(LEASE);
    let _ = f.tick(1600 * MS);
    let a = f.stop(1700 * MS);
    assert_eq!(a.send, None);
    assert!(a.close && a.abort);
    // The work hangs: the close at the last send + lease is a reset too.
    let mut f = Fixture::held(LEASE);
    let a = f.tick(1600 * MS);
    assert!(!a.close);
    let a = f.tick(2000 * MS);
    assert!(a.close && a.abort);
    // Given up before the grant: a reset at once.
    let (mut f, _) = Fixture::new(LEASE);
    let a = f.tick(1600 * MS);
    assert!(a.close && a.abort);
}

#[test]
fn a_session_the_server_ended_closes_normally() {
    let mut f = Fixture::held(LEASE);
    let a = f.s.step(Event::Eof, f.at(20 * MS));
    assert!(a.close && !a.abort);
    let mut f = Fixture::held(LEASE);
    let a = f.read(20 * MS, &[0x13, 0x02, 0]);
    assert!(a.close && !a.abort);
    let mut f = Fixture::held(LEASE);
    let a = f.s.step(
        Event::Closed(Error::Unavailable("reset".into())),
        f.at(20 * MS),
    );
    assert!(
        a.close && !a.abort,
        "a failed read: the connection is gone, nothing to reset"
    );
}

#[test]
fn the_longest_lease_does_not_overflow() {
    let lease = crate::MAX_LEASE;
    let (mut f, a) = Fixture::new(lease);
    assert_eq!(a.wake_at, Some(f.at(lease.as_nanos() as u64 * 4 / 5)));
    let _ = f.read(10 * MS, &ACQUIRED_T);
    assert!(f.valid(10 * MS));
    let quarter = lease / 4;
    let due = f.t0 + quarter - Duration::from_millis(20);
    assert_eq!(f.s.wake_at(), Some(due));
    let a = f.stop(20 * MS);
    assert_eq!(a.send, Some(Request::Release));
    assert_eq!(a.wake_at, Some(f.at(20 * MS + 2000 * MS)));
}

#[test]
fn a_paused_process_that_wakes_past_the_lease_closes_at_once() {
    let mut f = Fixture::held(LEASE);
    // No step at all for 5 s (a SIGSTOP): the first one gives up and, the
    // lease since the last send having passed, closes.
    let a = f.tick(5000 * MS);
    assert!(f.s.status().ended);
    assert!(a.close);
}

#[test]
fn a_wait_that_runs_out_while_connecting_fails_by_silence_and_resets() {
    let t0 = Instant::now();
    let wait = Wait::AtMost(Duration::from_millis(300));
    let acquire = wire::encode_acquire(2000, b"x");
    let (mut s, a) = Session::dial(acquire, LEASE, wait, Duration::from_secs(3), t0);
    assert_eq!(a.wake_at, Some(t0 + Duration::from_millis(300)));
    assert!(
        !s.step(Event::Tick, t0 + Duration::from_nanos(300 * MS - 1))
            .close
    );
    let a = s.step(Event::Tick, t0 + Duration::from_millis(300));
    assert!(a.close && a.abort && a.send.is_none(), "{a:?}");
    assert!(matches!(s.status().error, Some(Error::Unavailable(_))));
    assert!(s.failure().is_retriable());
}

#[test]
fn a_write_that_returns_late_moves_the_lingering_close() {
    let mut f = Fixture::held(LEASE);
    assert_eq!(f.tick(480 * MS).send, Some(Request::Heartbeat));
    // Given up while that write has not returned: a lease after its send.
    let a = f.tick(1600 * MS);
    assert_eq!(a.wake_at, Some(f.at(2480 * MS)));
    // It returns: a lease after that.
    let a = f.s.step(Event::Written, f.at(1700 * MS));
    assert_eq!(a.wake_at, Some(f.at(3700 * MS)));
    assert!(!f.tick(3700 * MS - 1).close);
    let a = f.tick(3700 * MS);
    assert!(a.close && a.abort);
}
