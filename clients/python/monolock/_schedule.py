"""The heartbeat schedule (docs/protocol.md, "Leases and heartbeats")."""

from __future__ import annotations

MAX_FLOOR = 0.1  # seconds: the shortest interval is min(100 ms, lease/4)
RTT_ALPHA = 0.2


def client_timeout(lease: float) -> float:
    """0.8 × lease: how long the client goes without an answer before it
    treats the lock as lost, before the server could hand it on."""
    # To the nanosecond, rounded down (docs/protocol.md, "The client step"),
    # so that every client gives up at the same instant.
    return round(lease * 1_000_000_000) * 4 // 5 / 1_000_000_000


class HeartbeatSchedule:
    """interval = clamp(lease/4 − 2 × smoothed RTT, min(100 ms, lease/4),
    lease/4), the RTT an EWMA with α = 0.2 seeded by the first sample. Pure: no
    clock, no I/O."""

    def __init__(self, lease: float) -> None:
        self.base = lease / 4
        self.floor = min(MAX_FLOOR, self.base)
        self.srtt = 0.0
        self._sampled = False

    def observe(self, rtt: float) -> None:
        rtt = max(rtt, 0.0)
        if not self._sampled:
            self.srtt, self._sampled = rtt, True
            return
        self.srtt += RTT_ALPHA * (rtt - self.srtt)

    def interval(self) -> float:
        return min(max(self.base - 2 * self.srtt, self.floor), self.base)
