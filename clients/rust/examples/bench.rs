//! The client's own cost, in one process against a real server: CPU and
//! memory per waiting lock (N locks queued behind one holder, heartbeating),
//! and CPU per acquire/release cycle.
//!
//! ```text
//! make build
//! cd clients/rust
//! ulimit -n 20000     # N sockets here, N more in the server
//! cargo run --release --example bench --features blocking -- ../../bin/monolock [N] [--blocking]
//! # or, from the repository root: make rust-bench
//! ```
//!
//! It starts the server itself on 127.0.0.1 (port 0) with the admin API,
//! and reads its own CPU time and resident memory from /proc/self.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Long enough that a machine shared by many busy processes does not starve
/// a waiter past its give-up (0.8 × lease); a heartbeat every 2.5 s.
const LEASE: Duration = Duration::from_secs(10);
/// How long the N waiters are measured once queued.
const WINDOW: Duration = Duration::from_secs(10);
const CYCLES: u32 = 2000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let blocking = args.iter().any(|a| a == "--blocking");
    let mut plain = args.iter().filter(|a| !a.starts_with("--"));
    let bin = plain
        .next()
        .expect("usage: bench PATH-TO-MONOLOCK [N] [--blocking]")
        .clone();
    let n: usize = plain
        .next()
        .map(|s| s.parse().expect("N is a number"))
        .unwrap_or(10_000);
    let server = Server::start(&bin);
    let kind = if blocking {
        "blocking"
    } else {
        "tokio (current-thread runtime)"
    };
    println!("monolock Rust client, {kind}: {n} waiting locks, lease {LEASE:?}, then {CYCLES} acquire/release cycles");
    if blocking {
        blocking_bench(&server, n);
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async_bench(&server, n));
    }
}

async fn async_bench(server: &Server, n: usize) {
    let client = monolock::Client::new(&server.addr);
    let holder = client.lock("bench", LEASE).await.unwrap();
    let before = Usage::now();
    let mut waiters = Vec::with_capacity(n);
    for i in 0..n {
        let client = client.clone();
        waiters.push(tokio::spawn(
            async move { client.lock("bench", LEASE).await },
        ));
        if i % 250 == 249 {
            // Let the queued ones connect before more arrive: the listen backlog is finite.
            while server.waiters() < i + 1 {
                if let Some(k) = waiters.iter().position(|w| w.is_finished()) {
                    let err = waiters.swap_remove(k).await.unwrap().err();
                    panic!(
                        "a waiter ended before its grant, {} queued: {err:?}",
                        server.waiters()
                    );
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    while server.waiters() < n {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let queued = Usage::now();
    tokio::time::sleep(WINDOW).await;
    let after = Usage::now();
    report_waiting(n, &before, &queued, &after);
    for w in &waiters {
        w.abort(); // leaves the queue: the future, and with it its lock, is dropped
    }
    for w in waiters {
        let _ = w.await;
    }
    drop(holder);
    let start = Usage::now();
    for _ in 0..CYCLES {
        client
            .lock("cycle", LEASE)
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    report_cycles(&start, &Usage::now());
}

fn blocking_bench(server: &Server, n: usize) {
    let client = monolock::blocking::Client::new(&server.addr);
    let holder = client.lock("bench", LEASE).unwrap();
    let before = Usage::now();
    let mut waiters = Vec::with_capacity(n);
    for i in 0..n {
        let client = client.clone();
        // A lock call blocks until the grant: a thread each, as a caller would.
        waiters.push(
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || client.lock("bench", LEASE).map(drop))
                .unwrap(),
        );
        if i % 250 == 249 {
            while server.waiters() < i + 1 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    while server.waiters() < n {
        std::thread::sleep(Duration::from_millis(20));
    }
    let queued = Usage::now();
    std::thread::sleep(WINDOW);
    let after = Usage::now();
    report_waiting(n, &before, &queued, &after);
    println!(
        "  (each waiter here is two threads: the caller's, blocked in lock, and the lock's own)"
    );
    drop(holder); // the waiters are granted one by one, each releasing at once
    for w in waiters {
        let _ = w.join();
    }
    let start = Usage::now();
    for _ in 0..CYCLES {
        client.lock("cycle", LEASE).unwrap().release().unwrap();
    }
    report_cycles(&start, &Usage::now());
}

fn report_waiting(n: usize, before: &Usage, queued: &Usage, after: &Usage) {
    let rss = (queued.rss_kib as f64 - before.rss_kib as f64) * 1024.0 / n as f64;
    let cpu = after.cpu_s - queued.cpu_s;
    let wall = after.at.duration_since(queued.at).as_secs_f64();
    println!(
        "  memory: {:.0} B of resident memory per waiting lock ({} KiB for {n})",
        rss,
        queued.rss_kib - before.rss_kib
    );
    println!(
        "  CPU while waiting: {:.2} µs per lock per second ({:.1} % of a core for {n}; {:.3} s over {:.1} s)",
        cpu / wall / n as f64 * 1e6,
        cpu / wall * 100.0,
        cpu,
        wall
    );
    let heartbeats = n as f64 * wall / (LEASE / 4).as_secs_f64();
    println!(
        "  CPU per heartbeat (send, answer, timer): {:.1} µs ({heartbeats:.0} heartbeats)",
        cpu / heartbeats * 1e6
    );
    println!(
        "  CPU to queue them: {:.1} µs per lock (connect, ACQUIRE, WAITING)",
        (queued.cpu_s - before.cpu_s) / n as f64 * 1e6
    );
}

fn report_cycles(start: &Usage, end: &Usage) {
    let cpu = end.cpu_s - start.cpu_s;
    let wall = end.at.duration_since(start.at).as_secs_f64();
    println!(
        "  acquire/release: {:.1} µs of client CPU per cycle, {:.1} µs of wall time per cycle ({CYCLES} cycles)",
        cpu / CYCLES as f64 * 1e6,
        wall / CYCLES as f64 * 1e6
    );
}

/// This process's CPU time (user + system) and resident memory.
struct Usage {
    at: Instant,
    cpu_s: f64,
    rss_kib: u64,
}

impl Usage {
    fn now() -> Usage {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        // The fields after the command name, which is in parentheses.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = rest.split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .unwrap()
            .parse()
            .unwrap();
        Usage {
            at: Instant::now(),
            cpu_s: ticks as f64 / 100.0, // USER_HZ
            rss_kib,
        }
    }
}

/// The server, with the admin API to count the queued waiters.
struct Server {
    addr: String,
    admin: String,
    child: Child,
}

impl Server {
    fn start(bin: &str) -> Server {
        let mut child = Command::new(bin)
            .args([
                "-listen",
                "127.0.0.1:0",
                "-admin-listen",
                "127.0.0.1:0",
                "-log-format",
                "json",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let v = loop {
            let line = lines
                .next()
                .expect("the server exited before it started")
                .unwrap();
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if v["message"] == "monolock started" {
                break v;
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Server {
            addr: v["listen"].as_str().unwrap().into(),
            admin: v["admin_listen"].as_str().unwrap().into(),
            child,
        }
    }

    /// The server's count of queued waiters (GET /api/info).
    fn waiters(&self) -> usize {
        let mut c = TcpStream::connect(&self.admin).unwrap();
        write!(c, "GET /api/info HTTP/1.0\r\nHost: {}\r\n\r\n", self.admin).unwrap();
        let mut resp = String::new();
        c.read_to_string(&mut resp).unwrap();
        let body = &resp[resp.find("\r\n\r\n").unwrap() + 4..];
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        v["waiters"].as_u64().unwrap() as usize
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
