//! The step scripts of protocol/testdata/step (docs/protocol.md, "The
//! client step") run against [`Session::step`] on an injected clock: each
//! command is one event, the actions it returns printed in the spec's words
//! and compared with the script's, byte for byte.
//!
//! A unit test, not one of tests/: the step is the crate's own, and stays
//! private. The format is the README's (datadriven: a command, `----`, the
//! expected actions up to a blank line), parsed here with the standard
//! library. A session the Rust step does not pass yet is listed with its
//! reason in tests/step-known-failures.txt (`FILE:LINE reason`, LINE the
//! session's `start` or `dial`): it must still differ, and the test fails
//! once it passes, until the entry is removed. The expected output is
//! written by the Go runner (`go test ./client -run TestStep -rewrite`, see
//! protocol/testdata/step/README.md); this runner only reads it. To see
//! the count: `cargo test --lib step_scripts -- --nocapture`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;
use crate::retry::Backoff;

const SCRIPTS: &str = "../../protocol/testdata/step";
const KNOWN: &str = "tests/step-known-failures.txt";

/// One command and its expected output.
struct Case {
    line: usize,
    cmd: String,
    args: BTreeMap<String, Vec<String>>,
    expected: String,
}

fn parse_script(path: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let lines: Vec<&str> = text.split('\n').collect();
    let mut cases = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let command = lines[i].trim();
        if command.is_empty() || command.starts_with('#') {
            i += 1;
            continue;
        }
        let line = i + 1;
        assert_eq!(
            lines.get(i + 1).copied(),
            Some("----"),
            "{path:?}:{line}: {command:?} is not followed by ----"
        );
        i += 2;
        let mut expected = String::new();
        while i < lines.len() && !lines[i].is_empty() {
            expected.push_str(lines[i]);
            expected.push('\n');
            i += 1;
        }
        let (cmd, rest) = command.split_once(' ').unwrap_or((command, ""));
        cases.push(Case {
            line,
            cmd: cmd.to_string(),
            args: parse_args(rest),
            expected,
        });
    }
    cases
}

/// `key=value key=(a, b)`: each key's values.
fn parse_args(mut rest: &str) -> BTreeMap<String, Vec<String>> {
    let mut args = BTreeMap::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return args;
        }
        let (key, after) = rest.split_once('=').unwrap_or((rest, ""));
        let (values, after) = match after.strip_prefix('(') {
            Some(list) => {
                let (inside, after) = list.split_once(')').expect("a list ends with )");
                let values = inside.split(',').map(|v| v.trim().to_string()).collect();
                (values, after)
            }
            None => {
                let end = after.find(' ').unwrap_or(after.len());
                (vec![after[..end].to_string()], &after[end..])
            }
        };
        args.insert(key.to_string(), values);
        rest = after;
    }
}

/// A Go `time.Duration` string (`1.5s`, `800.004µs`, `1m0s`) in
/// nanoseconds, exactly; negative ones included.
fn parse_duration(text: &str) -> i128 {
    let (sign, mut rest) = match text.strip_prefix('-') {
        Some(r) => (-1, r),
        None => (1, text),
    };
    if rest == "0" {
        return 0;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or_else(|| panic!("{text:?}: a number without a unit"));
        let (number, after) = rest.split_at(digits);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => panic!("{text:?}: unknown unit {unit:?}"),
        };
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        total += whole.parse::<i128>().unwrap_or(0) * scale;
        if !frac.is_empty() {
            let f: i128 = frac.parse().expect("digits");
            total += f * scale / 10i128.pow(frac.len() as u32);
        }
        rest = after;
    }
    sign * total
}

/// Nanoseconds as Go's `time.Duration` prints them.
fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    let fraction = |v: u128, digits: u32| {
        let unit = 10u128.pow(digits);
        let frac = format!("{:0width$}", v % unit, width = digits as usize);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            format!("{}", v / unit)
        } else {
            format!("{}.{frac}", v / unit)
        }
    };
    match ns {
        0 => "0s".into(),
        1..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{}µs", fraction(ns, 3)),
        1_000_000..=999_999_999 => format!("{}ms", fraction(ns, 6)),
        _ => {
            let (h, rest) = (ns / 3_600_000_000_000, ns % 3_600_000_000_000);
            let (m, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
            let mut out = String::new();
            if h > 0 {
                let _ = write!(out, "{h}h");
            }
            if h > 0 || m > 0 {
                let _ = write!(out, "{m}m");
            }
            out + &fraction(rest, 9) + "s"
        }
    }
}

/// One script's current session, from command to command.
struct Runner {
    t0: Instant,
    session: Option<Session>,
    lease: Duration,
    closed: bool,
}

impl Runner {
    fn at(&self, case: &Case, key: &str) -> Instant {
        match case.args.get(key) {
            Some(v) => self.t0 + duration(&v[0]),
            None => self.t0,
        }
    }

    fn run(&mut self, case: &Case) -> String {
        let lease = case.args.get("lease").map(|v| parse_duration(&v[0]));
        if let Some(lease) = lease {
            return self.begin(case, lease);
        }
        if self.closed {
            return format!(
                "error: {} after the close: the session takes no more events\n",
                case.cmd
            );
        }
        let now = self.at(case, "at");
        let err = case.args.get("err").map(|v| v[0].as_str());
        let frames = match case.cmd.as_str() {
            "frame" => frame_bytes(case),
            _ => Vec::new(),
        };
        let event = match (case.cmd.as_str(), err) {
            ("start", _) => Event::Up,
            ("written", None) => Event::Written,
            ("written", Some("broken")) => {
                Event::WriteFailed(Error::Unavailable("connection lost: write: broken pipe".into()))
            }
            ("written", Some("deadline")) => Event::WriteBlocked,
            ("closed", Some("eof")) => Event::Eof,
            ("closed", Some("broken")) => Event::Closed(Error::Unavailable(
                "connection lost: read: connection reset by peer".into(),
            )),
            ("closed", Some("tls")) => Event::Closed(Error::Tls("read: bad certificate".into())),
            ("frame", _) => Event::Read(&frames),
            ("stop", _) => Event::Stop,
            ("timer" | "expired", _) => Event::Tick,
            (cmd, err) => panic!(
                "line {}: unknown event {cmd:?} (err={err:?}): docs/protocol.md, The client step, lists the events",
                case.line
            ),
        };
        let s = self.session.as_mut().expect("a session");
        let actions = s.step(event, now);
        self.print(actions)
    }

    /// `start lease=…` or `dial lease=…`: a new session.
    fn begin(&mut self, case: &Case, lease: i128) -> String {
        self.closed = true;
        self.session = None;
        let invalid = "failed invalid-input retry=no\n".to_string();
        let Ok(nanos) = u64::try_from(lease) else {
            return invalid;
        };
        self.lease = Duration::from_nanos(nanos);
        let Ok(lease_ms) = wire::lease_ms(self.lease) else {
            return invalid;
        };
        let wait = match case.args.get("wait").map(|v| duration(&v[0])) {
            None => Wait::Forever,
            Some(Duration::ZERO) => Wait::No,
            Some(d) => Wait::AtMost(d),
        };
        let acquire = wire::encode_acquire(lease_ms, b"x");
        let now = self.at(case, "at");
        let (session, actions) = if case.cmd == "dial" {
            let timeout = case
                .args
                .get("connect-timeout")
                .map_or(CONNECT_TIMEOUT, |v| duration(&v[0]));
            Session::dial(acquire, self.lease, wait, timeout, now)
        } else {
            Session::start(acquire, self.lease, wait, now)
        };
        self.session = Some(session);
        self.closed = false;
        self.print(actions)
    }

    /// One step's actions in the spec's words, one a line, in its order.
    fn print(&mut self, actions: Actions) -> String {
        let s = self.session.as_ref().expect("a session");
        let t = |i: Instant| format_duration(i - self.t0);
        let mut out = String::new();
        for report in &s.reports {
            let line = match report {
                Report::Waiting => "waiting".to_string(),
                Report::Granted(token) => format!("granted token={token}"),
                Report::ValidUntil(at) => format!("valid-until {}", t(*at)),
                Report::Ack {
                    rtt,
                    srtt,
                    interval,
                } => format!(
                    "ack rtt={} srtt={} interval={}",
                    format_duration(*rtt),
                    format_duration(*srtt),
                    format_duration(*interval)
                ),
                Report::Failed(reason) => {
                    let err = s.status().error.as_ref().expect("a failure has its error");
                    format!("failed {} retry={}", why(*reason, err), self.retry(err))
                }
                Report::Lost(reason) => {
                    let err = s.status().error.as_ref().expect("a loss has its error");
                    format!("lost {}", why(*reason, err))
                }
            };
            out.push_str(&line);
            out.push('\n');
        }
        match actions.send {
            Some(Request::Acquire) => {
                let frame = s.frame(Request::Acquire);
                let ms = u32::from_be_bytes(frame[2..6].try_into().expect("ACQUIRE's lease"));
                let _ = writeln!(out, "send ACQUIRE lease-ms={ms}");
            }
            Some(Request::Heartbeat) => out.push_str("send HEARTBEAT\n"),
            Some(Request::Release) => out.push_str("send RELEASE\n"),
            None => {}
        }
        if actions.close {
            self.closed = true;
            out.push_str(if actions.abort { "abort\n" } else { "close\n" });
        } else {
            match actions.wake_at {
                Some(at) => {
                    let _ = writeln!(out, "wake {}", t(at));
                }
                None => out.push_str("wake off\n"),
            }
        }
        out
    }

    /// What `run` does after the failure: nothing, its backoff, or after
    /// 0x01 a uniform wait whose upper bound this prints.
    fn retry(&self, err: &Error) -> String {
        match Backoff::default().delay(err, self.lease, |n| n) {
            None => "no".into(),
            Some(max) if err.code() == Some(0x01) => {
                format!("random-wait max={}", format_duration(max))
            }
            Some(_) => "backoff".into(),
        }
    }
}

fn duration(text: &str) -> Duration {
    let ns = parse_duration(text);
    Duration::from_nanos(u64::try_from(ns).unwrap_or_else(|_| panic!("{text}: negative")))
}

fn why(reason: Reason, err: &Error) -> String {
    match (reason, err.code()) {
        (Reason::Server, Some(code)) => format!("server code=0x{code:02x}"),
        (Reason::Busy, _) => "busy".into(),
        (Reason::Timeout, _) => "timeout".into(),
        (Reason::Closed, _) => "closed".into(),
        (Reason::Connect, _) => "connect".into(),
        (Reason::Protocol, _) => "protocol".into(),
        (Reason::Tls, _) => "tls".into(),
        (Reason::Server, None) => format!("server without a code: {err}"),
    }
}

/// The bytes of one read: `type=(WAITING, ACQUIRED) token=(9)`, the tokens
/// and codes taken in order by the frames that carry one.
fn frame_bytes(case: &Case) -> Vec<u8> {
    let mut tokens = case.args.get("token").into_iter().flatten();
    let mut codes = case.args.get("code").into_iter().flatten();
    let mut out = Vec::new();
    for typ in &case.args["type"] {
        match typ.as_str() {
            "WAITING" => out.push(wire::TYPE_WAITING),
            "ACQUIRED" => {
                let token: u64 = tokens
                    .next()
                    .expect("each ACQUIRED has its token")
                    .parse()
                    .expect("a token");
                out.push(wire::TYPE_ACQUIRED);
                out.extend_from_slice(&token.to_be_bytes());
            }
            "ERROR" => {
                let code = codes.next().expect("each ERROR has its code");
                let code =
                    u8::from_str_radix(code.trim_start_matches("0x"), 16).expect("code=0xNN");
                out.extend_from_slice(&[wire::TYPE_ERROR, code, 0]);
            }
            other => out.push(
                u8::from_str_radix(other.trim_start_matches("0x"), 16)
                    .unwrap_or_else(|_| panic!("type={other}: WAITING, ACQUIRED, ERROR or 0xNN")),
            ),
        }
    }
    out
}

fn manifest_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// FILE:LINE → reason.
fn known_failures() -> BTreeMap<(String, usize), String> {
    let path = manifest_path(KNOWN);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut known = BTreeMap::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = line.split_once(' ').and_then(|(at, why)| {
            let (file, l) = at.split_once(':')?;
            Some(((file.to_string(), l.parse().ok()?), why.trim().to_string()))
        });
        match parsed {
            Some((key, why)) if !why.is_empty() => {
                known.insert(key, why);
            }
            _ => panic!(
                "{KNOWN}:{}: want FILE:LINE and a reason, got {line:?}",
                n + 1
            ),
        }
    }
    known
}

/// Each session's start line and how its cases differ (empty: it passes).
fn run_file(path: &Path) -> BTreeMap<usize, Vec<String>> {
    let mut sessions: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut runner = Runner {
        t0: Instant::now(),
        session: None,
        lease: Duration::ZERO,
        closed: true,
    };
    let mut current = 0;
    for case in parse_script(path) {
        if case.args.contains_key("lease") {
            current = case.line;
            sessions.insert(current, Vec::new());
        }
        let got = runner.run(&case);
        if got != case.expected {
            sessions.entry(current).or_default().push(format!(
                "line {} {}: want\n{}got\n{}",
                case.line, case.cmd, case.expected, got
            ));
        }
    }
    sessions
}

#[test]
fn durations_read_and_print_as_go_does() {
    for (text, ns) in [
        ("0s", 0u64),
        ("1ns", 1),
        ("800.004µs", 800_004),
        ("249.999998ms", 249_999_998),
        ("1.099999999s", 1_099_999_999),
        ("1m0s", 60_000_000_000),
        ("954h26m13.836s", 3_435_973_836_000_000),
    ] {
        assert_eq!(parse_duration(text), i128::from(ns), "{text}");
        assert_eq!(format_duration(Duration::from_nanos(ns)), text);
    }
    assert_eq!(parse_duration("-1s"), -1_000_000_000);
}

#[test]
fn every_session_of_every_script() {
    let known = known_failures();
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifest_path(SCRIPTS))
        .expect("protocol/testdata/step beside the crate")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no step scripts in {SCRIPTS}");
    let (mut total, mut passed, mut listed) = (0, 0, 0);
    let mut problems = Vec::new();
    let mut seen = Vec::new();
    for path in &files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for (line, diffs) in run_file(path) {
            total += 1;
            let key = (file.clone(), line);
            if known.contains_key(&key) {
                listed += 1;
                if diffs.is_empty() {
                    problems.push(format!("{file}:{line} is listed in {KNOWN}, but the Rust step now passes the session: remove the entry"));
                }
            } else if diffs.is_empty() {
                passed += 1;
            } else {
                problems.push(format!(
                    "{file}:{line}: the Rust step differs from the script:\n{}",
                    diffs.join("\n")
                ));
            }
            seen.push(key);
        }
    }
    for (file, line) in known.keys() {
        if !seen.contains(&(file.clone(), *line)) {
            problems.push(format!("{file}:{line} is listed in {KNOWN}, but no session starts there (a dial, or a start with lease=)"));
        }
    }
    println!(
        "step scripts (Rust): {total} sessions, {} files, {passed} pass, {listed} known",
        files.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
