"""The step scripts of protocol/testdata/step (docs/protocol.md, "The client
step") run against the Python core, monolock._core.Session, on an injected
clock: each command is one event, its actions printed in the spec's words
and compared byte for byte with the script's.

The core's shape differs from the spec's step (bytes in an outbox, a close
due at a time), so the adapter here turns its state after each event into
the actions, as the threaded driver (client.py) would carry them out: after
every event the driver ticks the timers, writes the outbox, and closes once
close_due says so. A session the Python step does not pass is listed with
its reason in step-known-failures.txt beside this file (FILE:LINE of the
session's start or dial): it must still differ, and the test fails when it
passes, until the entry is removed.
"""

from __future__ import annotations

import os
import re
import struct
import unittest
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from monolock import _wire
from monolock._core import DEFAULT_CONNECT_TIMEOUT, Session
from monolock.errors import Busy, CertificateRefused, InvalidInput, MonolockError, Unavailable

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.normpath(os.path.join(HERE, "..", "..", "..", "protocol", "testdata", "step"))
KNOWN = os.path.join(HERE, "step-known-failures.txt")

# --- the datadriven format ---------------------------------------------------


@dataclass
class Case:
    line: int  # of the command
    cmd: str
    args: Dict[str, List[str]]
    expected: str


def parse_script(path: str) -> List[Case]:
    """Commands and their expected output: `cmd key=value key=(a, b)`, a
    `----` line, the output up to a blank line; # comments between."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    cases: List[Case] = []
    i = 0
    while i < len(lines):
        text = lines[i].strip()
        if not text or text.startswith("#"):
            i += 1
            continue
        start = i + 1
        if i + 1 >= len(lines) or lines[i + 1] != "----":
            raise ValueError(f"{path}:{start}: {text!r} is not followed by ----")
        i += 2
        out: List[str] = []
        while i < len(lines) and lines[i] != "":
            out.append(lines[i] + "\n")
            i += 1
        cmd, _, rest = text.partition(" ")
        cases.append(Case(start, cmd, parse_args(rest), "".join(out)))
    return cases


def parse_args(text: str) -> Dict[str, List[str]]:
    args: Dict[str, List[str]] = {}
    for m in re.finditer(r"(\w[\w-]*)(?:=(\([^)]*\)|\S+))?", text):
        value = m.group(2) or ""
        if value.startswith("("):
            args[m.group(1)] = [v.strip() for v in value[1:-1].split(",") if v.strip()]
        else:
            args[m.group(1)] = [value] if value else []
    return args


_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000}


def parse_duration(text: str) -> int:
    """A Go time.Duration string to whole nanoseconds, exactly."""
    if text == "0":
        return 0
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    total, pos = 0, 0
    for m in re.finditer(r"(\d+)(?:\.(\d+))?(ns|us|µs|μs|ms|s|m|h)", text):
        if m.start() != pos:
            break
        unit = _UNITS[m.group(3)]
        frac = m.group(2) or ""
        total += int(m.group(1)) * unit + int(frac or "0") * unit // 10 ** len(frac)
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(f"{text!r} is not a duration such as 1.5s, 248ms or 1m0s")
    return sign * total


def _fraction(v: int, digits: int) -> str:
    whole, frac = divmod(v, 10**digits)
    tail = str(frac).rjust(digits, "0").rstrip("0")
    return f"{whole}.{tail}" if tail else str(whole)


def format_duration(ns: int) -> str:
    """Whole nanoseconds as Go's time.Duration prints them."""
    sign, u = ("-", -ns) if ns < 0 else ("", ns)
    if u == 0:
        return "0s"
    if u < 1_000:
        return f"{sign}{u}ns"
    if u < 1_000_000:
        return f"{sign}{_fraction(u, 3)}µs"
    if u < 1_000_000_000:
        return f"{sign}{_fraction(u, 6)}ms"
    hours, rest = divmod(u, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    out = f"{hours}h" if hours else ""
    if hours or minutes:
        out += f"{minutes}m"
    return sign + out + _fraction(rest, 9) + "s"


# --- the adapter -------------------------------------------------------------


def seconds(ns: int) -> float:
    return ns / 1e9


def nanos(t: float) -> int:
    return round(t * 1e9)


@dataclass
class Runner:
    """One script's current session, from event to event."""

    s: Optional[Session] = None
    lease_ns: int = 0
    lease_ms: int = 0
    closed: bool = True
    reported: bool = False

    def run(self, c: Case) -> str:
        if c.cmd == "dial" or (c.cmd == "start" and "lease" in c.args):
            return self.begin(c)
        if self.closed or self.s is None:
            return f"error: {c.cmd} after the close: the session takes no more events\n"
        s = self.s
        now = seconds(parse_duration(c.args["at"][0]))
        before = self.snapshot()
        if c.cmd == "frame":
            return self.read(self.frame_bytes(c.args), now)
        elif c.cmd == "start":
            s.start(now)
        elif c.cmd == "written":
            err = (c.args.get("err") or [""])[0]
            s.written(now, {"": "", "broken": "broken pipe", "deadline": "deadline"}[err])
        elif c.cmd == "closed":
            err = c.args["err"][0]
            if err == "eof":
                s.eof(now)
            elif err == "broken":
                s.eof(now, "read: connection reset by peer", broken=True)
            else:
                s.fail(CertificateRefused("monolock: the server refused the client's certificate", "tls alert"), now, reason="tls")
        elif c.cmd == "stop":
            s.release(now)
        elif c.cmd == "expired":
            s.valid(now)
        elif c.cmd != "timer":
            raise ValueError(f"line {c.line}: unknown event {c.cmd!r}: docs/protocol.md, The client step, lists the events")
        s.tick(now)  # the driver's loop ticks after every event
        return self.actions(before, now).replace("send ACQUIRE", f"send ACQUIRE lease-ms={self.lease_ms}", 1)

    def read(self, data: bytes, now: float) -> str:
        """One read through Session.receive, the actions printed frame by
        frame (the spec's order): the core's per-frame rule is wrapped to
        print what each frame did; the sends, the close and the wake are
        those of the whole read."""
        s = self.s
        assert s is not None
        out: List[str] = []
        apply = s._frame  # pyright: ignore[reportPrivateUsage]

        def each(typ: int, token: int, code: int, reason: str, now: float) -> None:
            before = self.snapshot()
            apply(typ, token, code, reason, now)
            out.append(self.reports(before, now))

        s._frame = each  # pyright: ignore[reportPrivateUsage]
        try:
            s.receive(data, now)
        finally:
            del s._frame  # pyright: ignore[reportPrivateUsage]
        # A broken frame (an unknown type) ends the read before _frame.
        before = self.snapshot()
        s.tick(now)
        return "".join(out) + self.reports(before, now) + self.driver(now)

    def begin(self, c: Case) -> str:
        """A new session: dial (the connect phase) or start (the connection
        up, ACQUIRE out)."""
        self.closed, self.reported = True, False
        self.lease_ns = parse_duration(c.args["lease"][0])
        lease = seconds(self.lease_ns)
        wait = seconds(parse_duration(c.args["wait"][0])) if "wait" in c.args else None
        connect = seconds(parse_duration(c.args["connect-timeout"][0])) if "connect-timeout" in c.args else DEFAULT_CONNECT_TIMEOUT
        try:
            ms = self.lease_ms = _wire.lease_ms(lease)
        except InvalidInput:
            return "failed invalid-input retry=no\n"
        self.s = Session(b"x", lease, ms, wait=wait, connect_timeout=connect)
        self.closed = False
        at = seconds(parse_duration(c.args["at"][0])) if "at" in c.args else 0.0
        before = self.snapshot()
        if c.cmd == "dial":
            self.s.dial(at)
        else:
            self.s.start(at)
        return self.actions(before, at).replace("send ACQUIRE", f"send ACQUIRE lease-ms={ms}", 1)

    def frame_bytes(self, args: Dict[str, List[str]]) -> bytes:
        tokens = list(args.get("token", []))
        codes = list(args.get("code", []))
        out = b""
        for typ in args["type"]:
            if typ == "WAITING":
                out += bytes([_wire.TYPE_WAITING])
            elif typ == "ACQUIRED":
                out += bytes([_wire.TYPE_ACQUIRED]) + struct.pack(">Q", int(tokens.pop(0)))
            elif typ == "ERROR":
                out += bytes([_wire.TYPE_ERROR, int(codes.pop(0), 16), 0])
            else:
                out += bytes([int(typ, 16)])
        return out

    def snapshot(self) -> Tuple[bool, bool, int, float]:
        s = self.s
        assert s is not None
        return (s.answered, s.granted, s.answers, s._last_send)  # pyright: ignore[reportPrivateUsage]

    def actions(self, before: Tuple[bool, bool, int, float], now: float) -> str:
        """The actions of one event: its reports, then the driver's part."""
        return self.reports(before, now) + self.driver(now)

    def reports(self, before: Tuple[bool, bool, int, float], now: float) -> str:
        """What the event changed in the core, in the spec's words."""
        s = self.s
        assert s is not None
        answered, granted, answers, last_send = before
        out: List[str] = []
        if s.answered and not answered and not s.granted:
            out.append("waiting")
        if s.granted and not granted:
            out.append(f"granted token={s.token}")
        acked = s.answers > answers
        if s.granted and (acked or not granted) and s.error is None:
            out.append(f"valid-until {format_duration(nanos(s.deadline))}")
        if acked:
            sch = s.schedule
            out.append(
                f"ack rtt={format_duration(nanos(now) - nanos(last_send))} srtt={format_duration(nanos(sch.srtt))} interval={format_duration(nanos(sch.interval()))}"
            )
        if s.error is not None and not self.reported:
            self.reported = True
            out.append(("lost " if s.granted else "failed ") + reason(s) + ("" if s.granted else " retry=" + self.retry(s.error)))
        return "".join(line + "\n" for line in out)

    def driver(self, now: float) -> str:
        """The driver's part: the write, the close or the wake."""
        s = self.s
        assert s is not None
        out: List[str] = []
        if s.outbox:
            data = bytes(s.outbox)
            s.outbox.clear()
            what = {_wire.TYPE_ACQUIRE: "ACQUIRE", _wire.TYPE_HEARTBEAT: "HEARTBEAT", _wire.TYPE_RELEASE: "RELEASE"}
            out.append(f"send {what.get(data[0], hex(data[0]))}")
        if s.close_due(now):
            out.append("abort" if s.abortive else "close")
            self.closed = True
        else:
            wake = s.next_wakeup()
            out.append("wake off" if wake is None else f"wake {format_duration(nanos(wake))}")
        return "".join(line + "\n" for line in out)

    def retry(self, err: MonolockError) -> str:
        if isinstance(err, Unavailable) and not isinstance(err, Busy):
            if err.code == 0x01:
                return f"random-wait max={format_duration(min(1_000_000_000, self.lease_ns // 4))}"
            return "backoff"
        return "no"


def reason(s: Session) -> str:
    """The session's reason in the spec's words, with an ERROR's code."""
    code = getattr(s.error, "code", None)
    if s.reason == "server" and code is not None:
        return f"server code=0x{code:02x}"
    return s.reason or f"unclassified: {s.error}"


# --- the test ----------------------------------------------------------------


def load_known() -> Dict[Tuple[str, int], str]:
    known: Dict[Tuple[str, int], str] = {}
    with open(KNOWN, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            text = raw.strip()
            if not text or text.startswith("#"):
                continue
            where, _, why = text.partition(" ")
            file, _, line = where.partition(":")
            if not line.isdigit() or not why.strip():
                raise ValueError(f"{KNOWN}:{n}: want FILE:LINE and a reason, got {text!r}")
            known[(file, int(line))] = why.strip()
    return known


def run_file(path: str) -> Dict[int, List[str]]:
    """Each session's start line and how its cases differ (empty: passes)."""
    sessions: Dict[int, List[str]] = {}
    r = Runner()
    current = 0
    for c in parse_script(path):
        if c.cmd == "dial" or (c.cmd == "start" and "lease" in c.args):
            current = c.line
            sessions[current] = []
        got = r.run(c)
        if got != c.expected:
            sessions[current].append(f"line {c.line} {c.cmd}: want\n{c.expected}got\n{got}")
    return sessions


class StepScriptsTest(unittest.TestCase):
    def test_format(self) -> None:
        for text, ns in [("0s", 0), ("1ns", 1), ("800.004µs", 800_004), ("249.999998ms", 249_999_998), ("1.099999999s", 1_099_999_999), ("1m0s", 60_000_000_000), ("954h26m13.836s", 3_435_973_836_000_000)]:
            self.assertEqual(parse_duration(text), ns, text)
            self.assertEqual(format_duration(ns), text)

    def test_scripts(self) -> None:
        known = load_known()
        files = sorted(f for f in os.listdir(SCRIPTS) if f.endswith(".txt"))
        self.assertTrue(files, f"no step scripts in {SCRIPTS}")
        total = passed = listed = 0
        problems: List[str] = []
        seen = set()
        for file in files:
            for line, diffs in run_file(os.path.join(SCRIPTS, file)).items():
                total += 1
                key = (file, line)
                seen.add(key)
                if key in known:
                    listed += 1
                    if not diffs:
                        problems.append(f"{file}:{line} is listed in {KNOWN}, but the Python step now passes the session: remove the entry")
                elif diffs:
                    problems.append(f"{file}:{line}: the Python step differs from the script:\n" + "\n".join(diffs))
                else:
                    passed += 1
        for key in known:
            if key not in seen:
                problems.append(f"{key[0]}:{key[1]} is listed in {KNOWN}, but no session starts there (a dial, or a start with lease=)")
        print(f"\nstep scripts (Python): {total} sessions, {len(files)} files, {passed} pass, {listed} known")
        if problems:
            self.fail("\n".join(problems))


if __name__ == "__main__":
    unittest.main()
