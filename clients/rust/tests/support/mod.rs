//! What the integration tests share: a scripted fake server in the test
//! process, and the real server binary (`MONOLOCK_BIN`).
#![allow(dead_code)] // each test file uses its own part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// How long a fake server waits for the client before it fails the test:
/// a bound on a stuck client, never a timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A server that runs `script` on each connection it accepts, on a thread
/// of its own, and reports each accepted connection's number.
pub struct Fake {
    pub addr: String,
    accepted: mpsc::Receiver<usize>,
}

impl Fake {
    pub fn start(script: impl Fn(usize, TcpStream) + Send + Sync + 'static) -> Fake {
        Fake::start_at("127.0.0.1:0", script)
    }

    /// As [`Fake::start`], listening at `addr` (a port that was closed).
    pub fn start_at(addr: &str, script: impl Fn(usize, TcpStream) + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind(addr).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (tx, accepted) = mpsc::channel();
        let script = std::sync::Arc::new(script);
        thread::spawn(move || {
            for (n, conn) in listener.incoming().enumerate() {
                let Ok(conn) = conn else { return };
                conn.set_read_timeout(Some(PATIENCE)).unwrap();
                let _ = tx.send(n);
                let script = script.clone();
                thread::spawn(move || script(n, conn));
            }
        });
        Fake { addr, accepted }
    }

    /// The number of the next accepted connection, waiting at most `wait`.
    pub fn accepted(&self, wait: Duration) -> Option<usize> {
        self.accepted.recv_timeout(wait).ok()
    }
}

/// Reads one ACQUIRE; returns its lease in ms and its name.
pub fn read_acquire(conn: &mut TcpStream) -> (u32, Vec<u8>) {
    let mut head = [0u8; 8];
    conn.read_exact(&mut head).expect("ACQUIRE header");
    assert_eq!(&head[..2], &[0x01, 0x01], "ACQUIRE, version 1");
    let lease = u32::from_be_bytes(head[2..6].try_into().unwrap());
    let mut name = vec![0u8; u16::from_be_bytes([head[6], head[7]]) as usize];
    conn.read_exact(&mut name).expect("ACQUIRE name");
    (lease, name)
}

/// Reads one HEARTBEAT.
pub fn read_heartbeat(conn: &mut TcpStream) {
    let mut b = [0u8; 1];
    conn.read_exact(&mut b).expect("a heartbeat");
    assert_eq!(b[0], 0x02, "a heartbeat");
}

/// Waits for the client's RELEASE (heartbeats may come before it), then
/// closes first, as the server does, and checks that the client's close
/// comes after it and is an orderly one (a FIN, no reset).
pub fn release_and_close(conn: &mut TcpStream) {
    let mut b = [0u8; 1];
    loop {
        conn.read_exact(&mut b)
            .expect("RELEASE before the client's close");
        match b[0] {
            0x03 => break,
            0x02 => continue,
            other => panic!("only heartbeats before RELEASE, got 0x{other:02x}"),
        }
    }
    conn.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    conn.read_to_end(&mut rest)
        .expect("an orderly close (FIN) after the server's");
    assert!(rest.is_empty(), "nothing after RELEASE: {rest:x?}");
}

/// As a server from before RELEASE: answers it with ERROR 0x13 (unknown
/// message type) and closes; the client's close must follow, orderly.
pub fn release_before_error(conn: &mut TcpStream) {
    let mut b = [0u8; 1];
    conn.read_exact(&mut b).expect("RELEASE");
    assert_eq!(b[0], 0x03, "RELEASE");
    send(conn, &error(0x13, "unknown message type 0x03"));
    conn.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    conn.read_to_end(&mut rest)
        .expect("an orderly close (FIN) after the server's");
    assert!(rest.is_empty(), "nothing after RELEASE: {rest:x?}");
}

/// A TLS configuration that trusts no certificate at all (for a server
/// that never gets as far as sending one).
#[cfg(feature = "tls")]
pub fn tls_config_trusting_nothing() -> monolock::rustls::ClientConfig {
    monolock::rustls::ClientConfig::builder()
        .with_root_certificates(monolock::rustls::RootCertStore::empty())
        .with_no_client_auth()
}

/// Waits for the client to reset the connection (an abortive close: SO_LINGER
/// {on, 0}), having sent nothing but heartbeats; no RELEASE.
pub fn read_reset(conn: &mut TcpStream) {
    let mut b = [0u8; 64];
    loop {
        match conn.read(&mut b) {
            Ok(0) => panic!("an orderly close (FIN), want a reset"),
            Ok(n) => assert!(
                b[..n].iter().all(|&x| x == 0x02),
                "only heartbeats before the reset: {:x?}",
                &b[..n]
            ),
            Err(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
                return;
            }
        }
    }
}

/// Reads what the client sends until it stops; the server never closes.
pub fn ignore_until_reset(conn: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut b = [0u8; 64];
    loop {
        match conn.read(&mut b) {
            Ok(0) => panic!("an orderly close (FIN) after {got:x?}, want a reset"),
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
                return got;
            }
        }
    }
}

/// The client's local port of its one connection to `server_port`, from
/// /proc/net/tcp and tcp6 (ESTABLISHED), or None.
pub fn client_port_towards(server_port: u16) -> Option<u16> {
    tcp_table()
        .into_iter()
        .find(|e| e.remote_port == server_port && e.local_port != server_port && e.state == 0x01)
        .map(|e| e.local_port)
}

/// The port in `addr` (`host:port`).
pub fn port_of(addr: &str) -> u16 {
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

/// Whether /proc/net/tcp or tcp6 has a TIME_WAIT entry whose local port is
/// `port` and remote port `server_port` (the same local port may be in use
/// towards another server).
pub fn time_wait_on(port: u16, server_port: u16) -> bool {
    tcp_table()
        .into_iter()
        .any(|e| e.local_port == port && e.remote_port == server_port && e.state == 0x06)
}

struct TcpEntry {
    local_port: u16,
    remote_port: u16,
    state: u8,
}

fn tcp_table() -> Vec<TcpEntry> {
    let mut out = Vec::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let port = |a: &str| u16::from_str_radix(a.rsplit(':').next().unwrap(), 16).unwrap();
            out.push(TcpEntry {
                local_port: port(f[1]),
                remote_port: port(f[2]),
                state: u8::from_str_radix(f[3], 16).unwrap(),
            });
        }
    }
    out
}

pub fn acquired(token: u64) -> Vec<u8> {
    let mut f = vec![0x12];
    f.extend_from_slice(&token.to_be_bytes());
    f
}

pub const WAITING: [u8; 1] = [0x11];

pub fn error(code: u8, reason: &str) -> Vec<u8> {
    let mut f = vec![0x13, code, reason.len() as u8];
    f.extend_from_slice(reason.as_bytes());
    f
}

/// Answers every heartbeat with ACQUIRED(token) until the client releases
/// (then closes first) or closes.
pub fn answer_heartbeats(conn: &mut TcpStream, token: u64) {
    let mut b = [0u8; 1];
    while let Ok(1) = conn.read(&mut b) {
        if b[0] == 0x03 {
            return;
        }
        assert_eq!(b[0], 0x02);
        if conn.write_all(&acquired(token)).is_err() {
            return;
        }
    }
}

/// The real server on a free port, killed when dropped.
pub struct Server {
    pub addr: String,
    child: Child,
}

/// `MONOLOCK_BIN`, the server binary (`make build` → bin/monolock), or None
/// when it is not set.
pub fn server_binary() -> Option<String> {
    match std::env::var("MONOLOCK_BIN") {
        Ok(path) if !path.is_empty() => Some(path),
        _ => {
            eprintln!("SKIP: set MONOLOCK_BIN to the server binary (make build; bin/monolock) to run the tests against the real server");
            None
        }
    }
}

impl Server {
    pub fn start(bin: &str, args: &[&str]) -> Server {
        let mut child = Command::new(bin)
            .args(["-listen", "127.0.0.1:0", "-log-format", "json"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let mut lines = stderr.lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("the server exited before it started")
                .unwrap();
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if v["message"] == "monolock started" {
                break v["listen"].as_str().unwrap().to_string();
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        thread::spawn(move || for _ in lines {});
        Server { addr, child }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port with nothing listening (bound, then closed).
pub fn dead_address() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    addr
}

/// Writes `frames` to `conn`, ignoring a client that has gone.
pub fn send(conn: &mut TcpStream, frames: &[u8]) {
    let _ = conn.write_all(frames);
}

/// A directory of its own under the system's temporary directory, removed
/// when dropped (also when the test fails).
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("monolock-rust-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn write(&self, name: &str, contents: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path.to_str().unwrap().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A script: WAITING at once, then the first heartbeat's answer held back
/// `late` (past the interval) and sent in one write with `then`; after
/// that, every heartbeat is answered with ACQUIRED(token) until the release.
pub fn queued_then_late(c: &mut TcpStream, late: Duration, then: &[u8], token: u64) {
    read_acquire(c);
    send(c, &WAITING);
    read_heartbeat(c);
    thread::sleep(late); // the answer is late on purpose
    let mut read = WAITING.to_vec();
    read.extend_from_slice(then);
    send(c, &read);
    answer_heartbeats(c, token);
}

/// A TLS server that never finishes a handshake: it drips a record header
/// claiming 16 KiB, then one byte every 20 ms, for `PATIENCE`, then closes.
pub fn drip(c: &mut TcpStream) {
    let mut hello = [0u8; 512];
    let _ = c.read(&mut hello); // the ClientHello
    let header = [0x16, 0x03, 0x03, 0x40, 0x00];
    let start = std::time::Instant::now();
    for b in header.iter().chain(std::iter::repeat(&0u8)) {
        if start.elapsed() > PATIENCE || c.write_all(&[*b]).is_err() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Grants the lock, then never closes: the client must send RELEASE and
/// then reset the connection at its bound.
pub fn grant_and_never_close(c: &mut TcpStream, token: u64) {
    read_acquire(c);
    send(c, &acquired(token));
    let got = ignore_until_reset(c);
    assert_eq!(
        got.last(),
        Some(&0x03),
        "RELEASE before the reset: {got:x?}"
    );
}

/// Grants the lock, then answers RELEASE as a server from before it does.
pub fn grant_as_an_old_server(c: &mut TcpStream, token: u64) {
    read_acquire(c);
    send(c, &acquired(token));
    release_before_error(c);
}

/// The first connection queues, then gets a late WAITING with ERROR 0x01
/// (shutting down) in one read; the next is granted token 7.
pub fn late_shutdown_then_grant(n: usize, c: &mut TcpStream) {
    if n == 0 {
        return queued_then_late(c, Duration::from_millis(700), &error(0x01, ""), 0);
    }
    read_acquire(c);
    send(c, &acquired(7));
    answer_heartbeats(c, 7);
}
