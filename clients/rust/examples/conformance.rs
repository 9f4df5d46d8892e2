//! The conformance kit's driver for the Rust client (docs/conformance.md in
//! the monolock repository): reads the request line on stdin, calls the
//! public API of `monolock` (with `--blocking`: of `monolock::blocking`)
//! and prints what it reported, one JSON object a line.
//!
//! ```text
//! cargo build --example conformance --features blocking,tls
//! monolock-conformance -driver go=godriver -driver rust=target/debug/examples/conformance -judge rust
//! ```

use std::cell::Cell;
use std::io::{BufRead, Write};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use monolock::Error;
use serde_json::{json, Map, Value};

/// The request line, as the kit sends it.
struct Request {
    /// Every address the client is given: `addresses` when the request
    /// has it (the first is `address` too, for drivers that take one),
    /// else `address` alone.
    addresses: Vec<String>,
    name: Vec<u8>,
    lease: Duration,
    wait_ms: i64,
    run: bool,
    work_stop_ms: i64,
    /// The client's TLS configuration from the request's PEM files; `None`
    /// for plain TCP. The client verifies the server by the address's host
    /// (an IP address here), so `server_name` is not needed.
    tls: Option<rustls::ClientConfig>,
}

impl Request {
    fn parse(line: &str) -> Request {
        let v: Value = serde_json::from_str(line).expect("the request is a JSON line");
        let hex = v["name_hex"].as_str().expect("name_hex is a string");
        // Always the raw bytes: a Rust name may be bytes, so invalid UTF-8
        // reaches the client as it is, and the client must refuse it.
        let name = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("name_hex is hex"))
            .collect();
        let mode = v["mode"].as_str().unwrap_or("acquire");
        if mode != "acquire" && mode != "run" {
            eprintln!("conformance driver: unknown mode {mode:?}");
            std::process::exit(2);
        }
        Request {
            addresses: match v.get("addresses").and_then(Value::as_array) {
                Some(all) => all
                    .iter()
                    .map(|a| a.as_str().expect("addresses are strings").to_string())
                    .collect(),
                None => vec![v["address"]
                    .as_str()
                    .expect("address is a string")
                    .to_string()],
            },
            name,
            lease: Duration::from_micros(v["lease_us"].as_u64().unwrap_or(0)),
            wait_ms: v["wait_ms"].as_i64().unwrap_or(-1),
            run: mode == "run",
            work_stop_ms: v["work_stop_ms"].as_i64().unwrap_or(0),
            tls: v.get("tls").filter(|t| t.is_object()).map(tls_config),
        }
    }
}

/// A rustls configuration from the request's `tls` object, as a user would
/// build one from PEM files.
fn tls_config(t: &Value) -> rustls::ClientConfig {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let file = |key: &str| t[key].as_str().map(str::to_string);
    let mut roots = rustls::RootCertStore::empty();
    let ca = file("ca_file").expect("tls.ca_file is a string");
    for cert in CertificateDer::pem_file_iter(&ca).expect("tls.ca_file is readable") {
        roots
            .add(cert.expect("tls.ca_file is PEM"))
            .expect("tls.ca_file is a CA certificate");
    }
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    match (file("cert_file"), file("key_file")) {
        (Some(cert), Some(key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_file_iter(&cert)
                    .expect("tls.cert_file is readable")
                    .collect::<Result<_, _>>()
                    .expect("tls.cert_file is PEM"),
                PrivateKeyDer::from_pem_file(&key).expect("tls.key_file is a PEM key"),
            )
            .expect("the client certificate and key match"),
        _ => builder.with_no_client_auth(),
    }
}

/// A command from the kit: `release`, or the end of input (`None`). The
/// blocking driver's watcher adds `Lost`.
#[derive(Debug, PartialEq)]
enum Cmd {
    Release,
    Other,
    Lost,
    End,
}

fn emit(event: &str, fields: Map<String, Value>) {
    let mut obj = fields;
    obj.insert("event".into(), event.into());
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", Value::Object(obj))
        .and_then(|()| out.flush())
        .expect("stdout");
}

fn event(name: &str) {
    emit(name, Map::new())
}

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

/// An attempt that failed before the grant.
fn report(err: &Error) {
    match err {
        Error::InvalidInput(_) => emit("invalid-input", fields(json!({"reason": err.to_string()}))),
        Error::Server { code, reason } => emit(
            "error",
            fields(json!({"code": code, "retriable": err.is_retriable(), "reason": reason})),
        ),
        Error::Busy => event("busy"),
        _ => emit("unavailable", fields(json!({"reason": err.to_string()}))),
    }
}

fn lost(err: &Error) {
    let mut f = fields(json!({"reason": err.to_string()}));
    if let Some(code) = err.code() {
        f.insert("code".into(), code.into());
    }
    emit("lost", f);
}

fn acquired(token: u64) {
    emit("acquired", fields(json!({"token": token.to_string()})));
}

/// Reads the command lines on a thread of its own and hands them on.
fn read_commands(send: impl Fn(Cmd) + Send + 'static) {
    thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let cmd = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v["cmd"].as_str().map(|c| c == "release"));
            send(if cmd == Some(true) {
                Cmd::Release
            } else {
                Cmd::Other
            });
        }
        send(Cmd::End);
    });
}

fn main() {
    let mut first = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut first)
        .expect("stdin");
    let req = Request::parse(&first);
    if std::env::args().any(|a| a == "--blocking") {
        blocking_main(req);
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async_main(req));
}

// --- the async client -------------------------------------------------------

async fn async_main(req: Request) {
    let (tx, mut cmds) = tokio::sync::mpsc::unbounded_channel();
    read_commands(move |c| {
        let _ = tx.send(c);
    });
    let mut client = monolock::Client::from_addresses(&req.addresses);
    if let Some(tls) = req.tls.clone() {
        client = client.with_tls(tls);
    }
    if !req.run {
        let attempt = match req.wait_ms {
            ms if ms < 0 => client.lock(&req.name, req.lease).await,
            0 => client.try_lock(&req.name, req.lease).await,
            ms => {
                client
                    .lock_timeout(&req.name, req.lease, Duration::from_millis(ms as u64))
                    .await
            }
        };
        let lock = match attempt {
            Ok(lock) => lock,
            Err(e) => {
                report(&e);
                return drain(&mut cmds).await;
            }
        };
        acquired(lock.token());
        let asked = hold(&lock.held(), &mut cmds, req.work_stop_ms).await;
        let _ = lock.release().await; // after a loss it says so: already reported
        if asked {
            event("released");
        }
        return drain(&mut cmds).await;
    }
    let called = Rc::new(Cell::new(false));
    let released = Rc::new(Cell::new(false));
    let result = {
        let (called, released, cmds) = (called.clone(), released.clone(), &mut cmds);
        client
            .run(&req.name, req.lease, |held| async move {
                called.set(true);
                acquired(held.token());
                // The work: until the kit asks for the release. On a loss run
                // drops this future (the work stops at once) and says why.
                released.set(wait_release(cmds).await);
                Ok::<(), Error>(())
            })
            .await
    };
    match result {
        Ok(()) => {}
        Err(e) if called.get() => {
            lost(&e);
            event("work-stopped");
        }
        Err(e) => report(&e),
    }
    if released.get() {
        event("released");
    }
    drain(&mut cmds).await
}

type Commands = tokio::sync::mpsc::UnboundedReceiver<Cmd>;

/// True for `release`, false at the end of input.
async fn wait_release(cmds: &mut Commands) -> bool {
    loop {
        match cmds.recv().await {
            Some(Cmd::Release) => return true,
            Some(Cmd::End) | None => return false,
            Some(_) => {}
        }
    }
}

/// The work of acquire mode: runs until the kit asks for the release (true)
/// or the lock is lost; then takes work_stop_ms to stop (false).
async fn hold(held: &monolock::Held, cmds: &mut Commands, work_stop_ms: i64) -> bool {
    let err = tokio::select! {
        asked = wait_release(cmds) => return asked,
        err = held.lost() => err,
    };
    lost(&err);
    if work_stop_ms < 0 {
        let asked = wait_release(cmds).await;
        event("work-stopped");
        return asked;
    }
    tokio::time::sleep(Duration::from_millis(work_stop_ms as u64)).await;
    event("work-stopped");
    false
}

async fn drain(cmds: &mut Commands) {
    while wait_release(cmds).await {
        event("released");
    }
}

// --- the blocking client ----------------------------------------------------

fn blocking_main(req: Request) {
    let (tx, cmds) = mpsc::channel();
    let watch_tx = tx.clone();
    read_commands(move |c| {
        let _ = tx.send(c);
    });
    let mut client = monolock::blocking::Client::from_addresses(&req.addresses);
    if let Some(tls) = req.tls.clone() {
        client = client.with_tls(tls);
    }
    let hold = |held: &monolock::blocking::Held| -> bool {
        // A watcher turns the loss into a command, so one queue says which came first.
        let done = Arc::new(AtomicBool::new(false));
        let (watcher, done2, tx) = (held.clone(), done.clone(), watch_tx.clone());
        thread::spawn(move || loop {
            if watcher.wait_lost(Duration::from_secs(3600)) {
                let _ = tx.send(Cmd::Lost);
                return;
            }
            if done2.load(Ordering::SeqCst) {
                return;
            }
        });
        let asked = loop {
            match cmds.recv().unwrap_or(Cmd::End) {
                Cmd::Release => break Some(true),
                Cmd::End => break Some(false),
                Cmd::Lost => break None,
                Cmd::Other => {}
            }
        };
        done.store(true, Ordering::SeqCst);
        if let Some(asked) = asked {
            return asked;
        }
        lost(&held.lost_error().expect("lost"));
        if req.work_stop_ms < 0 {
            let asked = loop {
                match cmds.recv().unwrap_or(Cmd::End) {
                    Cmd::Release => break true,
                    Cmd::End => break false,
                    _ => {}
                }
            };
            event("work-stopped");
            return asked;
        }
        thread::sleep(Duration::from_millis(req.work_stop_ms as u64));
        event("work-stopped");
        false
    };
    let drain = || loop {
        match cmds.recv().unwrap_or(Cmd::End) {
            Cmd::Release => event("released"),
            Cmd::End => return,
            _ => {}
        }
    };
    if !req.run {
        let attempt = match req.wait_ms {
            ms if ms < 0 => client.lock(&req.name, req.lease),
            0 => client.try_lock(&req.name, req.lease),
            ms => client.lock_timeout(&req.name, req.lease, Duration::from_millis(ms as u64)),
        };
        match attempt {
            Ok(lock) => {
                acquired(lock.token());
                let asked = hold(lock.held());
                let _ = lock.release();
                if asked {
                    event("released");
                }
            }
            Err(e) => report(&e),
        }
        return drain();
    }
    let called = Cell::new(false);
    let released = Cell::new(false);
    let result = client.run(&req.name, req.lease, |held| {
        called.set(true);
        acquired(held.token());
        released.set(hold(held));
        Ok::<(), Error>(())
    });
    match result {
        Err(Error::Lost { .. }) => {} // reported by the work
        Err(e) if !called.get() => report(&e),
        _ => {}
    }
    if released.get() {
        event("released");
    }
    drain()
}
