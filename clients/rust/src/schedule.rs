//! The heartbeat schedule (docs/protocol.md, "Leases and heartbeats"),
//! pure: no clock, no I/O.

use std::time::Duration;

/// The shortest interval is `min(MAX_FLOOR, lease/4)`, so a slow link does
/// not turn heartbeats into a flood.
const MAX_FLOOR: Duration = Duration::from_millis(100);
/// 1/α of the round-trip average (α = 0.2).
const RTT_WEIGHT: i128 = 5;

/// 0.8 × lease: how long the client goes without an answer before it treats
/// the lock as lost, at least 0.2 × lease before the server could hand it on.
pub(crate) fn client_timeout(lease: Duration) -> Duration {
    lease * 4 / 5
}

/// `interval = clamp(lease/4 − 2 × smoothedRTT, min(100 ms, lease/4), lease/4)`,
/// the smoothed RTT an EWMA with α = 0.2 that its first sample seeds.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    base: Duration,
    floor: Duration,
    srtt: Duration,
    sampled: bool,
}

impl Schedule {
    pub(crate) fn new(lease: Duration) -> Self {
        let base = lease / 4;
        Schedule {
            base,
            floor: MAX_FLOOR.min(base),
            srtt: Duration::ZERO,
            sampled: false,
        }
    }

    /// Feeds one measured round trip. The first seeds the average, as TCP's
    /// SRTT does, so a slow link shortens the interval at once.
    pub(crate) fn observe(&mut self, rtt: Duration) {
        if !self.sampled {
            self.srtt = rtt;
            self.sampled = true;
            return;
        }
        let (srtt, rtt) = (self.srtt.as_nanos() as i128, rtt.as_nanos() as i128);
        // Integer nanoseconds, truncated toward zero, as the Go client does.
        let next = srtt + (rtt - srtt) / RTT_WEIGHT;
        self.srtt = Duration::from_nanos(next.max(0) as u64);
    }

    /// The time from one heartbeat send to the next. The RTT only ever
    /// shortens it.
    pub(crate) fn interval(&self) -> Duration {
        self.base
            .saturating_sub(self.srtt * 2)
            .max(self.floor)
            .min(self.base)
    }

    #[cfg(test)]
    pub(crate) fn smoothed_rtt(&self) -> Duration {
        self.srtt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_interval_is_a_quarter_of_the_lease_without_rtt() {
        assert_eq!(Schedule::new(2000 * MS).interval(), 500 * MS);
        assert_eq!(
            Schedule::new(Duration::from_nanos(7)).interval(),
            Duration::from_nanos(1)
        );
    }

    #[test]
    fn the_rtt_shortens_the_interval_down_to_the_floor() {
        let mut s = Schedule::new(2000 * MS);
        s.observe(100 * MS);
        assert_eq!(s.interval(), 300 * MS);
        // Exactly at the floor: 500 − 2 × 200 = 100 ms.
        let mut s = Schedule::new(2000 * MS);
        s.observe(200 * MS);
        assert_eq!(s.interval(), 100 * MS);
        // One nanosecond more RTT would go under the floor: clamped.
        let mut s = Schedule::new(2000 * MS);
        s.observe(200 * MS + Duration::from_nanos(1));
        assert_eq!(s.interval(), 100 * MS);
        let mut s = Schedule::new(2000 * MS);
        s.observe(200 * MS - Duration::from_nanos(1));
        assert_eq!(s.interval(), 100 * MS + Duration::from_nanos(2));
        // An RTT longer than the lease never lengthens it past the floor.
        let mut s = Schedule::new(2000 * MS);
        s.observe(10_000 * MS);
        assert_eq!(s.interval(), 100 * MS);
    }

    #[test]
    fn the_floor_is_a_quarter_of_a_short_lease() {
        // lease/4 = 50 ms < 100 ms: floor and base are both 50 ms.
        let mut s = Schedule::new(200 * MS);
        assert_eq!(s.interval(), 50 * MS);
        s.observe(40 * MS);
        assert_eq!(s.interval(), 50 * MS);
    }

    #[test]
    fn the_rtt_is_an_ewma_with_alpha_one_fifth_seeded_by_the_first_sample() {
        let mut s = Schedule::new(2000 * MS);
        s.observe(100 * MS);
        assert_eq!(s.smoothed_rtt(), 100 * MS);
        s.observe(Duration::ZERO);
        assert_eq!(s.smoothed_rtt(), 80 * MS);
        s.observe(Duration::ZERO);
        assert_eq!(s.smoothed_rtt(), 64 * MS);
        assert_eq!(s.interval(), 372 * MS);
        s.observe(Duration::from_nanos(3));
        // 64 ms + (3 ns − 64 ms) / 5, truncated toward zero.
        assert_eq!(
            s.smoothed_rtt(),
            Duration::from_nanos(64_000_000 - 63_999_997 / 5)
        );
    }

    #[test]
    fn the_timeout_is_four_fifths_of_the_lease_to_the_nanosecond() {
        assert_eq!(client_timeout(2000 * MS), 1600 * MS);
        assert_eq!(
            client_timeout(Duration::from_nanos(1_000_000_007)),
            Duration::from_nanos(800_000_005)
        );
    }
}
