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
        let (s, a) = Session::start(wire::encode_acquire(2000, b"x"), lease, t0);
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
    assert!(a.close);
    match &f.s.status().error {
        Some(Error::Server { code: 2, reason }) => assert_eq!(reason, "x"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_end_of_stream_closes_at_once() {
    let mut f = Fixture::held(LEASE);
    let a = f.s.step(
        Event::Closed(Error::Unavailable("end of stream".into())),
        f.at(20 * MS),
    );
    assert!(a.close);
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
fn a_frame_after_the_answer_that_sent_a_heartbeat_is_a_violation() {
    let mut f = Fixture::held(LEASE);
    let _ = f.tick(480 * MS);
    let mut two = ACQUIRED_T.to_vec();
    two.extend_from_slice(&ACQUIRED_T);
    // The first answer comes past the interval, so a heartbeat is queued;
    // the second cannot answer it.
    let a = f.read(1000 * MS, &two);
    assert_eq!(a.send, Some(Request::Heartbeat));
    assert!(matches!(f.s.status().error, Some(Error::Protocol(_))));
}

#[test]
fn stop_while_queued_closes_at_once_without_an_error() {
    let (mut f, _) = Fixture::new(LEASE);
    let _ = f.read(MS, &[wire::TYPE_WAITING]);
    let a = f.stop(2 * MS);
    assert!(a.close);
    assert!(f.s.status().ended && f.s.status().error.is_none());
    // Nothing revives it.
    let a = f.read(3 * MS, &ACQUIRED_T);
    assert!(!f.s.status().granted && a.send.is_none());
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
