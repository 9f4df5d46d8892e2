"""The session rules with an injected clock: no sockets, no sleeping."""

import unittest
from math import inf, nextafter

import ssl

from monolock import Busy, CertificateRefused, ProtocolViolation, ServerError, Unavailable, _wire
from monolock._common import MAX_SELECT_WAIT, Backoff, certificate_refusal, client_fault, retry_delay, select_timeout, shutdown_jitter
from monolock._core import Session
from monolock._schedule import HeartbeatSchedule

HB = _wire.HEARTBEAT


def acquired(token: int) -> bytes:
    return bytes([0x12]) + token.to_bytes(8, "big")


WAITING = bytes([0x11])


def session(lease: float = 2.0) -> Session:
    return Session(b"job", lease, _wire.lease_ms(lease))


def take(s: Session) -> bytes:
    out = bytes(s.outbox)
    s.outbox.clear()
    return out


class RetryTest(unittest.TestCase):
    def test_after_shutting_down_a_random_wait_of_at_most_a_quarter_lease(self) -> None:
        for lease, limit in ((2.0, 0.5), (60.0, 1.0), (0.4, 0.1)):
            for _ in range(100):
                w = shutdown_jitter(lease)
                self.assertTrue(0.0 <= w <= limit, f"lease {lease}: {w} outside [0, {limit}]")
                d = retry_delay(Unavailable("shutting down", code=0x01), Backoff(), lease)
                self.assertIsNotNone(d)
                assert d is not None
                self.assertTrue(0.0 <= d <= limit)

    def test_other_conditions_back_off_and_client_errors_are_not_retried(self) -> None:
        d = retry_delay(Unavailable("gone"), Backoff(), 2.0)
        self.assertIsNotNone(d)
        assert d is not None
        self.assertTrue(0.05 <= d <= 0.1)
        self.assertIsNone(retry_delay(ServerError(0x16, "bad name"), Backoff(), 2.0))
        self.assertIsNone(retry_delay(Busy("held"), Backoff(), 2.0))


def ssl_error(reason: str) -> ssl.SSLError:
    """An SSLError as the ssl module raises it for OpenSSL's reason."""
    e = ssl.SSLError(1, f"[SSL: {reason}] ({reason.lower()})")
    e.reason = reason  # pyright: ignore[reportAttributeAccessIssue]
    return e


class CertificateRefusalTest(unittest.TestCase):
    def test_a_refused_certificate_is_not_retried(self) -> None:
        verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
        verify.verify_message = "unable to get local issuer certificate"
        for e in (
            verify,
            ssl_error("TLSV13_ALERT_CERTIFICATE_REQUIRED"),  # no client certificate
            ssl_error("TLSV1_ALERT_UNKNOWN_CA"),  # signed by a CA the server does not trust
            ssl_error("SSLV3_ALERT_CERTIFICATE_EXPIRED"),
            ssl_error("SSLV3_ALERT_BAD_CERTIFICATE"),  # Go's alert for most verification failures
            ssl_error("SSLV3_ALERT_CERTIFICATE_REVOKED"),
            ssl_error("SSLV3_ALERT_UNSUPPORTED_CERTIFICATE"),
            ssl_error("SSLV3_ALERT_CERTIFICATE_UNKNOWN"),
        ):
            with self.subTest(e=e):
                err = certificate_refusal("127.0.0.1:7070", e)
                self.assertIsInstance(err, CertificateRefused)
                assert err is not None
                self.assertIn("127.0.0.1:7070", str(err))
                self.assertIsNone(retry_delay(err, Backoff(), 2.0))

    def test_other_tls_failures_are_retried(self) -> None:
        for e in (
            ssl_error("SSLV3_ALERT_HANDSHAKE_FAILURE"),
            ssl_error("UNEXPECTED_EOF_WHILE_READING"),
            ssl.SSLEOFError(8, "EOF occurred in violation of protocol"),
            ConnectionResetError(104, "Connection reset by peer"),
            TimeoutError("_ssl.c:990: The handshake operation timed out"),
            None,
        ):
            with self.subTest(e=e):
                self.assertIsNone(certificate_refusal("127.0.0.1:7070", e))
                if e is not None:
                    s = session()  # the connect failed with e: the step's failed connect
                    s.dial(0.0)
                    s.eof(0.001, f"127.0.0.1:7070: {e}", broken=True)
                    self.assertIsInstance(s.error, Unavailable)
                    assert s.error is not None
                    self.assertIsNotNone(retry_delay(s.error, Backoff(), 2.0))


class ScheduleTest(unittest.TestCase):
    def test_fast_link(self) -> None:
        s = HeartbeatSchedule(2.0)
        s.observe(0.0)
        self.assertAlmostEqual(s.interval(), 0.5)

    def test_rtt_shortens_with_ewma(self) -> None:
        s = HeartbeatSchedule(2.0)
        s.observe(0.1)  # the first sample seeds the average
        self.assertAlmostEqual(s.interval(), 0.3)
        s.observe(0.0)  # 0.8 × 100 ms
        self.assertAlmostEqual(s.srtt, 0.08)
        self.assertAlmostEqual(s.interval(), 0.34)

    def test_floor(self) -> None:
        s = HeartbeatSchedule(2.0)
        s.observe(1.0)
        self.assertAlmostEqual(s.interval(), 0.1)
        s = HeartbeatSchedule(0.2)
        s.observe(1.0)
        self.assertAlmostEqual(s.interval(), 0.05)  # min(100 ms, lease/4)


class SessionTest(unittest.TestCase):
    def test_grant_and_heartbeats(self) -> None:
        s = session()
        s.start(0.0)
        self.assertEqual(take(s)[:1], b"\x01")
        s.receive(acquired(7), 0.01)
        self.assertTrue(s.granted)
        self.assertEqual(s.token, 7)
        self.assertAlmostEqual(s.next_wakeup() or 0, 0.5 - 0.02)  # 500 − 2 × 10 ms
        s.tick(0.48)
        self.assertEqual(take(s), HB)
        # At most one in flight: no second heartbeat before the answer.
        s.tick(1.2)
        self.assertEqual(take(s), b"")
        s.receive(acquired(7), 1.2)  # late answer: the next goes at once
        self.assertEqual(take(s), HB)

    def test_give_up_runs_from_the_newest_answered_send(self) -> None:
        s = session()
        s.start(0.0)
        s.receive(acquired(7), 0.0)
        s.tick(0.5)
        take(s)
        s.receive(acquired(7), 0.9)  # answers the send at 0.5
        self.assertAlmostEqual(s.deadline, 0.5 + 1.6)
        # That answer came after the interval (500 − 2 × 80 ms = 340 ms from
        # the send at 0.5), so the next heartbeat left with it, at 0.9.
        self.assertEqual(take(s), HB)
        s.tick(1.0)
        self.assertEqual(take(s), b"")  # never answered: nothing more
        self.assertTrue(s.valid(2.09))
        s.tick(2.1)
        self.assertTrue(s.ended)
        self.assertIsInstance(s.error, Unavailable)
        self.assertFalse(s.valid(2.1))
        # The work may still run: the connection stays open until it stops,
        # at the latest the last send (0.9) plus the lease.
        self.assertFalse(s.close_due(2.1))
        self.assertAlmostEqual(s.next_wakeup() or 0, 2.9)
        self.assertTrue(s.close_due(2.9))
        self.assertEqual(take(s), b"")

    def test_give_up_then_work_stops(self) -> None:
        s = session()
        s.start(0.0)
        s.receive(acquired(7), 0.0)
        s.tick(1.6)
        self.assertTrue(s.ended)
        s.release(1.7)
        self.assertTrue(s.close_due(1.7))

    def test_unanswered_acquire(self) -> None:
        s = session()
        s.start(0.0)
        s.tick(1.0)
        self.assertEqual(take(s)[:1], b"\x01")  # no heartbeat while ACQUIRE is in flight
        s.tick(1.6)
        self.assertTrue(s.ended)
        self.assertTrue(s.close_due(1.6))  # no work started: close at once

    def test_push_answers_nothing(self) -> None:
        s = session()
        s.start(0.0)
        s.receive(WAITING, 0.0)
        self.assertTrue(s.answered)
        self.assertFalse(s.granted)
        s.tick(0.5)
        self.assertEqual(take(s)[-1:], HB)
        s.receive(acquired(9), 0.6)  # the push, while a heartbeat is in flight
        self.assertTrue(s.granted)
        s.receive(acquired(9), 0.6)  # the heartbeat's own answer
        self.assertFalse(s.ended)

    def test_eof_and_error_close_at_once(self) -> None:
        s = session()
        s.start(0.0)
        s.receive(acquired(7), 0.0)
        s.eof(0.3)
        self.assertIsInstance(s.error, Unavailable)
        self.assertTrue(s.close_due(0.3))
        s = session()
        s.start(0.0)
        s.receive(bytes([0x13, 0x02, 0]), 0.1)
        self.assertIsInstance(s.error, Unavailable)
        self.assertEqual(getattr(s.error, "code"), 2)
        self.assertTrue(s.close_due(0.1))
        s = session()
        s.start(0.0)
        s.receive(bytes([0x13, 0x7F, 1]) + b"x", 0.1)
        self.assertIsInstance(s.error, ServerError)

    def test_error_followed_by_junk_keeps_its_code(self) -> None:
        # The ERROR ends the session: the bytes after it in the same read are
        # not looked at, so the caller gets the ERROR, not a violation.
        for code, want in ((0x02, Unavailable), (0x18, ServerError)):
            for granted in (False, True):
                with self.subTest(code=code, granted=granted):
                    s = session()
                    s.start(0.0)
                    if granted:
                        s.receive(acquired(7), 0.0)
                    s.receive(bytes([0x13, code, 2]) + b"no" + b"\x7e\xff junk", 0.1)
                    self.assertIsInstance(s.error, want)
                    self.assertEqual(getattr(s.error, "code"), code)
                    self.assertTrue(s.close_due(0.1))

    def test_frames_before_junk_are_applied(self) -> None:
        s = session()
        s.start(0.0)
        s.receive(acquired(7) + b"\x7e", 0.1)
        self.assertEqual(s.token, 7)
        self.assertTrue(s.granted)
        self.assertIsInstance(s.error, ProtocolViolation)

    def test_violation_closes_once_work_stopped(self) -> None:
        for bad in (b"\x7e", WAITING, acquired(8)):
            with self.subTest(bad=bad):
                s = session()
                s.start(0.0)
                s.receive(acquired(7), 0.0)
                s.receive(bad, 0.2)
                self.assertIsInstance(s.error, ProtocolViolation)
                self.assertFalse(s.close_due(0.2))
                self.assertEqual(s.next_wakeup(), 2.0)  # ACQUIRE's send + lease
                s.release(0.5)
                self.assertTrue(s.close_due(0.5))

    def test_answer_after_give_up_does_not_revive(self) -> None:
        s = session()
        s.start(0.0)
        s.receive(acquired(7), 0.0)
        s.tick(1.6)
        s.receive(acquired(7), 1.7)
        self.assertTrue(s.ended)
        self.assertFalse(s.valid(1.7))


def error_frame(code: int, reason: bytes = b"") -> bytes:
    return bytes([0x13, code, len(reason)]) + reason


class ReleaseTest(unittest.TestCase):
    """RELEASE, then the server's close within min(lease, 2 s), else a reset
    (docs/protocol.md, RELEASE)."""

    def held(self, lease: float = 10.0) -> Session:
        s = session(lease)
        s.start(0.0)
        s.receive(acquired(7), 0.0)
        take(s)
        return s

    def test_the_server_closes_first(self) -> None:
        s = self.held()
        s.release(1.0)
        self.assertEqual(take(s), _wire.RELEASE)
        self.assertFalse(s.close_due(1.0), "closed before the server did")
        s.eof(1.001)
        self.assertTrue(s.close_due(1.001))
        self.assertFalse(s.abortive, "the server closed first: a plain close")
        self.assertIsNone(s.error)
        self.assertFalse(s.valid(1.001))

    def test_the_bound_passes_and_the_connection_is_reset(self) -> None:
        for lease, bound in ((10.0, 2.0), (2.0, 2.0), (0.5, 0.5)):
            with self.subTest(lease=lease):
                s = self.held(lease)
                s.release(0.1)  # before the give-up deadline (0.8 × lease after the ACQUIRE at 0)
                self.assertEqual(take(s), _wire.RELEASE)
                self.assertEqual(s.next_wakeup(), 0.1 + bound)
                self.assertFalse(s.close_due(before(0.1 + bound)))
                s.tick(0.1 + bound)
                self.assertEqual(take(s), b"", "no heartbeat after RELEASE")
                self.assertTrue(s.close_due(0.1 + bound))
                self.assertTrue(s.abortive)
                self.assertIsNone(s.error)

    def test_anything_read_after_release_is_discarded(self) -> None:
        # An old server answers RELEASE with ERROR 0x13 and closes; an answer
        # or a push may cross the RELEASE. None is an error.
        for late in (error_frame(0x13, b"unknown message type"), acquired(7), WAITING, acquired(8), b"\x7e"):
            with self.subTest(late=late):
                s = self.held()
                s.release(1.0)
                take(s)
                s.receive(late, 1.001)
                self.assertIsNone(s.error)
                self.assertFalse(s.close_due(1.001), "waits for the end of stream")
                self.assertEqual(take(s), b"")
                s.eof(1.002)
                self.assertTrue(s.close_due(1.002))
                self.assertFalse(s.abortive)
                self.assertIsNone(s.error)

    def test_a_failed_write_or_read_resets(self) -> None:
        s = self.held()
        s.release(1.0)
        s.written(1.0, "broken pipe")
        self.assertTrue(s.close_due(1.0))
        self.assertTrue(s.abortive)
        self.assertIsNone(s.error)

    def test_leaving_the_queue_and_before_the_answer(self) -> None:
        s = session()
        s.start(0.0)
        s.receive(WAITING, 0.01)
        s.release(0.02)
        self.assertEqual(take(s), _wire.encode_acquire(2000, b"job") + _wire.RELEASE)
        s = session()
        s.start(0.0)  # no answer yet: RELEASE is valid in any state after ACQUIRE
        s.release(0.0)
        self.assertEqual(take(s), _wire.encode_acquire(2000, b"job") + _wire.RELEASE)

    def test_after_a_heartbeat_not_written_yet(self) -> None:
        s = self.held(1.0)
        s.tick(0.25)  # due, queued, not written yet
        s.release(0.25)
        self.assertEqual(take(s), HB + _wire.RELEASE)

    def test_after_a_give_up_a_reset_and_no_release(self) -> None:
        s = self.held(1.0)
        s.tick(0.8)
        self.assertTrue(s.ended)
        self.assertFalse(s.close_due(0.9))  # the work may still run
        s.release(0.9)
        self.assertEqual(take(s), b"")
        self.assertTrue(s.close_due(0.9))
        self.assertTrue(s.abortive)
        # The same once the lease after the last send has passed, the work still running.
        s = self.held(1.0)
        s.tick(0.8)
        self.assertTrue(s.close_due(1.0))
        self.assertTrue(s.abortive)

    def test_after_a_violation_a_reset_and_no_release(self) -> None:
        s = self.held(1.0)
        s.receive(WAITING, 0.1)
        self.assertIsInstance(s.error, ProtocolViolation)
        s.release(0.2)
        self.assertEqual(take(s), b"")
        self.assertTrue(s.abortive)

    def test_after_the_server_ended_it_a_plain_close(self) -> None:
        for end in ("error", "eof"):
            with self.subTest(end=end):
                s = self.held(1.0)
                if end == "error":
                    s.receive(error_frame(0x02), 0.1)
                else:
                    s.eof(0.1)
                s.release(0.2)
                self.assertEqual(take(s), b"")
                self.assertTrue(s.close_due(0.2))
                self.assertFalse(s.abortive)

    def test_release_is_idempotent(self) -> None:
        s = self.held()
        s.release(1.0)
        take(s)
        s.release(1.5)
        self.assertEqual(take(s), b"")
        self.assertFalse(s.close_due(1.5), "a second release does not cut the wait short")
        self.assertEqual(s.next_wakeup(), 3.0)


class SameReadTest(unittest.TestCase):
    """Frames that arrive together after an answer later than the heartbeat
    interval: a push and an ERROR are ordinary frames, a second answer to one
    request is a violation, and nothing is sent once the session ended."""

    def waiting_with_late_answer(self) -> Session:
        """Queued; the heartbeat sent at 0.5 is answered after the next one
        was due (lease 2 s, interval 0.5 s)."""
        s = session(2.0)
        s.start(0.0)
        s.receive(WAITING, 0.0)
        s.tick(0.5)
        self.assertEqual(take(s)[-1:], HB)
        return s

    def test_late_answer_push_and_error(self) -> None:
        s = self.waiting_with_late_answer()
        s.receive(WAITING + acquired(9) + error_frame(0x02, b"closed by administrator"), 1.2)
        self.assertIsInstance(s.error, Unavailable)
        self.assertEqual(getattr(s.error, "code"), 2)
        self.assertTrue(s.granted)
        self.assertEqual(take(s), b"", "a heartbeat sent after the ERROR")
        self.assertTrue(s.close_due(1.2))
        self.assertFalse(s.abortive)

    def test_late_answer_and_push(self) -> None:
        s = self.waiting_with_late_answer()
        s.receive(WAITING + acquired(9), 1.2)
        self.assertIsNone(s.error)
        self.assertTrue(s.granted)
        self.assertEqual(take(s), HB, "the late answer's heartbeat, once")
        s.receive(acquired(9), 1.3)  # that heartbeat's answer
        self.assertIsNone(s.error)

    def held_with_heartbeat_in_flight(self) -> Session:
        """Held; the heartbeat sent at 0.5 not answered yet (lease 2 s)."""
        s = session(2.0)
        s.start(0.0)
        s.receive(acquired(7), 0.0)
        s.tick(0.5)
        self.assertEqual(take(s)[-1:], HB)
        return s

    def test_late_answer_and_error_while_held(self) -> None:
        s = self.held_with_heartbeat_in_flight()
        s.receive(acquired(7) + error_frame(0x18), 1.2)
        self.assertIsInstance(s.error, ServerError)
        self.assertEqual(take(s), b"")

    def test_a_second_answer_to_one_request(self) -> None:
        s = self.waiting_with_late_answer()
        s.receive(WAITING + WAITING, 1.2)
        self.assertIsInstance(s.error, ProtocolViolation)
        self.assertEqual(take(s), b"", "a heartbeat sent after the violation")
        s = self.held_with_heartbeat_in_flight()
        s.receive(acquired(7) + acquired(7), 1.2)
        self.assertIsInstance(s.error, ProtocolViolation)
        self.assertEqual(take(s), b"")

    def test_nothing_is_sent_after_the_end(self) -> None:
        s = self.waiting_with_late_answer()
        s.receive(WAITING + error_frame(0x01), 1.2)
        s.tick(1.5)
        s.tick(5.0)
        self.assertEqual(take(s), b"")


class LongLeaseTest(unittest.TestCase):
    def test_the_longest_lease_waits_in_steps_the_os_accepts(self) -> None:
        lease = _wire.MAX_LEASE_MS / 1000
        self.assertEqual(_wire.lease_ms(lease), 0xFFFFFFFF)
        s = Session(b"job", lease, _wire.lease_ms(lease))
        s.start(0.0)
        take(s)
        wake = s.next_wakeup()
        assert wake is not None
        self.assertGreater(wake, 2**31 / 1000, "the deadline is past what epoll takes in one wait")
        step = select_timeout(wake, 0.0)
        assert step is not None
        self.assertLessEqual(step, MAX_SELECT_WAIT)
        s.receive(acquired(7), 0.0)
        self.assertTrue(s.valid(lease * 0.8 - 1))
        self.assertEqual(select_timeout(s.next_wakeup(), 0.0), MAX_SELECT_WAIT)
        self.assertEqual(select_timeout(1.0, 0.5), 0.5)
        self.assertEqual(select_timeout(1.0, 2.0, minimum=0.001), 0.001)
        self.assertIsNone(select_timeout(None, 0.0))
        s.release(10.0)
        self.assertEqual(s.next_wakeup(), 12.0)  # the release bound: 2 s, not the lease

    def test_a_client_fault_is_not_retried(self) -> None:
        self.assertIsNone(retry_delay(client_fault(OverflowError("timeout is too large")), Backoff(), 2.0))
        self.assertNotIsInstance(client_fault(RuntimeError("x")), Unavailable)


def before(t: float) -> float:
    """The instant just before t: the float clock's one-nanosecond step."""
    return nextafter(t, -inf)


class BoundaryTest(unittest.TestCase):
    """Each rule at its boundary, to the last representable instant, with an
    injected clock. Lease 1 s: the deadline is 0.8 s after the newest answered
    send, the interval lies in [0.1 s, 0.25 s]."""

    def held(self, rtt: float = 0.0) -> Session:
        s = session(1.0)
        s.start(0.0)
        s.receive(acquired(7), rtt)
        take(s)
        return s

    def test_give_up_at_the_deadline_and_not_an_instant_before(self) -> None:
        s = self.held()
        s.tick(0.25)
        self.assertEqual(take(s), HB)  # never answered
        s.tick(before(0.8))
        self.assertFalse(s.ended)
        self.assertTrue(s.valid(before(0.8)))
        s.tick(0.8)  # the ACQUIRE's send (0) + 0.8 × 1 s
        self.assertTrue(s.ended)
        self.assertIsInstance(s.error, Unavailable)

    def test_the_deadline_counts_from_the_answered_send(self) -> None:
        s = self.held()
        s.tick(0.25)
        take(s)
        s.receive(acquired(7), 0.5)  # answers the send at 0.25
        self.assertEqual(s.deadline, 0.25 + 0.8)

    def test_an_answer_at_the_deadline_is_too_late(self) -> None:
        s = session(1.0)
        s.start(0.0)
        s.receive(acquired(7), before(0.8))
        self.assertTrue(s.granted)
        self.assertFalse(s.ended)  # in time: confirmed, and a heartbeat goes at once
        self.assertEqual(take(s)[-1:], HB)
        s = session(1.0)
        s.start(0.0)
        s.receive(acquired(7), 0.8)
        self.assertTrue(s.ended)
        self.assertFalse(s.valid(0.8))

    def test_valid_false_at_the_deadline_is_final(self) -> None:
        s = self.held()
        s.tick(0.25)
        take(s)
        self.assertFalse(s.valid(0.8))  # the caller saw the deadline pass first
        s.receive(acquired(7), before(0.8))  # an answer read in time, handled late
        self.assertTrue(s.ended)
        self.assertFalse(s.valid(before(0.8)))

    def test_interval_upper_bound_is_lease_over_4(self) -> None:
        s = self.held(rtt=0.0)
        self.assertEqual(s.schedule.interval(), 0.25)
        self.assertEqual(s.next_wakeup(), 0.25)  # from the ACQUIRE's send
        s.tick(before(0.25))
        self.assertEqual(take(s), b"")
        s.tick(0.25)
        self.assertEqual(take(s), HB)

    def test_interval_shortened_by_twice_the_smoothed_rtt(self) -> None:
        s = self.held(rtt=0.05)
        self.assertEqual(s.schedule.interval(), 0.25 - 2 * 0.05)

    def test_interval_lower_bound_is_100ms(self) -> None:
        s = self.held(rtt=0.08)  # 0.25 − 0.16 would be 0.09
        self.assertEqual(s.schedule.interval(), 0.1)
        self.assertEqual(s.next_wakeup(), 0.1)

    def test_interval_lower_bound_is_lease_over_4_for_short_leases(self) -> None:
        s = HeartbeatSchedule(0.2)
        s.observe(0.04)  # 0.05 − 0.08 would be negative
        self.assertEqual(s.interval(), 0.05)

    def test_one_heartbeat_in_flight(self) -> None:
        s = self.held()
        s.tick(0.25)
        self.assertEqual(take(s), HB)
        for t in (0.25, 0.5, 0.75, before(0.8)):
            s.tick(t)
            self.assertEqual(take(s), b"", f"a second heartbeat at {t} before the answer")
        self.assertEqual(s.next_wakeup(), 0.8)  # only the deadline

    def test_close_at_the_lease_after_the_last_send(self) -> None:
        s = self.held()
        s.tick(0.25)
        take(s)
        s.tick(0.8)
        self.assertTrue(s.ended)
        self.assertEqual(s.next_wakeup(), 1.25)
        self.assertFalse(s.close_due(before(1.25)))
        self.assertTrue(s.close_due(1.25))
        self.assertEqual(take(s), b"")


if __name__ == "__main__":
    unittest.main()
