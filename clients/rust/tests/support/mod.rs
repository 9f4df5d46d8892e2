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
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
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

/// Waits for the client's end of stream (an orderly close).
pub fn read_eof(conn: &mut TcpStream) {
    let mut rest = Vec::new();
    conn.read_to_end(&mut rest).expect("an orderly close (FIN)");
    assert!(
        rest.iter().all(|&b| b == 0x02),
        "only heartbeats before the close: {rest:x?}"
    );
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

/// Answers every heartbeat with ACQUIRED(token) until the client closes.
pub fn answer_heartbeats(conn: &mut TcpStream, token: u64) {
    let mut b = [0u8; 1];
    while let Ok(1) = conn.read(&mut b) {
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
