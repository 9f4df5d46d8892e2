//! How `run` waits between attempts (rule 6), as the Go, Python and Node.js
//! clients do.

use std::time::Duration;

use crate::Error;

/// Backoff starts here and doubles up to `MAX_BACKOFF`.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// The cap of the random wait after ERROR 0x01.
const MAX_SHUTDOWN_JITTER: Duration = Duration::from_secs(1);

/// A uniform random integer in `[0, n]`; a parameter for the tests.
pub(crate) type RandUpTo = fn(u64) -> u64;

pub(crate) fn rand_up_to(n: u64) -> u64 {
    fastrand::u64(0..=n)
}

/// The waits of one `run`: each uniform in `[step/2, step]` (equal jitter:
/// clients that failed together do not retry together, and no wait drops
/// to zero), the step doubling from 100 ms up to 5 s.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    step: Duration,
}

impl Backoff {
    fn next(&mut self, rand: RandUpTo) -> Duration {
        if self.step.is_zero() {
            self.step = MIN_BACKOFF;
        }
        let step = self.step;
        self.step = (step * 2).min(MAX_BACKOFF);
        let half = step / 2;
        half + Duration::from_nanos(rand((step - half).as_nanos() as u64))
    }

    /// How long to wait before a new attempt after `err`, or `None` when it
    /// is not worth one: after 0x01 "server shutting down", which the whole
    /// fleet receives in the same millisecond, a uniform random wait in
    /// `[0, min(1 s, lease/4)]` so that the reconnections reach the
    /// restarted server or the standby spread out; backoff after the other
    /// server conditions and lost connections; never after client errors
    /// (0x10 and above), invalid input, protocol violations, TLS failures
    /// or `Busy`.
    pub(crate) fn delay(
        &mut self,
        err: &Error,
        lease: Duration,
        rand: RandUpTo,
    ) -> Option<Duration> {
        if !err.is_retriable() {
            return None;
        }
        if err.code() == Some(0x01) {
            let limit = MAX_SHUTDOWN_JITTER.min(lease / 4);
            return Some(Duration::from_nanos(rand(limit.as_nanos() as u64)));
        }
        Some(self.next(rand))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn low(_: u64) -> u64 {
        0
    }
    fn high(n: u64) -> u64 {
        n
    }
    fn server(code: u8) -> Error {
        Error::Server {
            code,
            reason: String::new(),
        }
    }
    const LEASE: Duration = Duration::from_secs(2);

    #[test]
    fn backoff_doubles_from_100ms_to_5s_with_equal_jitter() {
        let mut b = Backoff::default();
        let err = Error::Unavailable("x".into());
        let highs: Vec<_> = (0..8)
            .map(|_| b.delay(&err, LEASE, high).unwrap())
            .collect();
        let ms = |v: u64| Duration::from_millis(v);
        assert_eq!(
            highs,
            [
                ms(100),
                ms(200),
                ms(400),
                ms(800),
                ms(1600),
                ms(3200),
                ms(5000),
                ms(5000)
            ]
        );
        let mut b = Backoff::default();
        let lows: Vec<_> = (0..3)
            .map(|_| b.delay(&server(0x05), LEASE, low).unwrap())
            .collect();
        assert_eq!(lows, [ms(50), ms(100), ms(200)]);
    }

    #[test]
    fn after_0x01_a_random_wait_of_at_most_a_quarter_lease_capped_at_1s() {
        let mut b = Backoff::default();
        assert_eq!(
            b.delay(&server(0x01), LEASE, high),
            Some(Duration::from_millis(500))
        );
        assert_eq!(b.delay(&server(0x01), LEASE, low), Some(Duration::ZERO));
        assert_eq!(
            b.delay(&server(0x01), Duration::from_secs(60), high),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            b.delay(&server(0x01), Duration::from_nanos(7), high),
            Some(Duration::from_nanos(1))
        );
        // The jitter does not advance the backoff.
        assert_eq!(
            b.delay(&server(0x02), LEASE, high),
            Some(Duration::from_millis(100))
        );
    }

    #[test]
    fn client_errors_and_the_rest_are_not_retried() {
        let mut b = Backoff::default();
        for err in [
            server(0x10),
            server(0x18),
            server(0x7f),
            Error::Busy,
            Error::InvalidInput("x".into()),
            Error::Protocol("x".into()),
            Error::Tls("x".into()),
        ] {
            assert_eq!(b.delay(&err, LEASE, high), None, "{err:?}");
        }
    }

    #[test]
    fn the_random_source_stays_in_range() {
        for _ in 0..1000 {
            assert!(rand_up_to(3) <= 3);
        }
        assert_eq!(rand_up_to(0), 0);
    }
}
