//! The blocking client: no async runtime, one std thread per lock runs its
//! session (the same rules as [`crate::Client`], from the same pure step).
//!
//! ```no_run
//! # fn example() -> Result<(), monolock::Error> {
//! use std::time::Duration;
//!
//! let client = monolock::blocking::Client::new("127.0.0.1:7070");
//! let lock = client.lock("cron", Duration::from_secs(2))?;
//! if lock.wait_lost(Duration::from_secs(1)) {
//!     // lost: stop the work
//! }
//! lock.release()?;
//! # Ok(())
//! # }
//! ```

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use crate::address::Address;
use crate::connect::{self, Settings, Wait};
use crate::retry::{rand_up_to, Backoff};
use crate::session::{Event, Session, Status};
use crate::Error;

/// The stack of a session thread: it only reads, decodes and writes a few
/// bytes (and decrypts TLS records), so a small one keeps 10,000 locks cheap.
const THREAD_STACK: usize = 256 * 1024;

/// Acquires locks from one monolock server, without an async runtime. It
/// holds no connection of its own (every lock is its own connection and its
/// own thread), so it is cheap to clone, safe to share between threads, and
/// needs no closing.
#[derive(Debug, Clone)]
pub struct Client {
    settings: Settings,
}

impl Client {
    /// A client of the server at `addr` (`host:port`). A malformed address
    /// is reported by the first `lock` as [`Error::InvalidInput`].
    pub fn new(addr: impl AsRef<str>) -> Client {
        Client {
            settings: Settings::new(addr.as_ref()),
        }
    }

    /// Speaks TLS with `config`, as [`crate::Client::with_tls`]: one
    /// configuration, and so one session store, for every connection, so
    /// reconnects resume.
    #[cfg(feature = "tls")]
    pub fn with_tls(mut self, config: rustls::ClientConfig) -> Client {
        self.settings.tls = Some(Arc::new(config));
        self
    }

    /// Bounds the TCP connect and the TLS handshake (default 10 s).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Client {
        self.settings.connect_timeout = timeout;
        self
    }

    /// Acquires the lock `name`, waiting in its FIFO queue as long as it
    /// takes. One attempt; the checks of [`crate::Client::lock`].
    pub fn lock(&self, name: impl AsRef<[u8]>, lease: Duration) -> Result<Lock, Error> {
        self.open(name.as_ref(), lease, Wait::Forever)
    }

    /// Returns [`Error::Busy`] at once when someone else holds the lock.
    pub fn try_lock(&self, name: impl AsRef<[u8]>, lease: Duration) -> Result<Lock, Error> {
        self.open(name.as_ref(), lease, Wait::No)
    }

    /// Waits in the queue at most `wait`, then leaves it and returns
    /// [`Error::Busy`].
    pub fn lock_timeout(
        &self,
        name: impl AsRef<[u8]>,
        lease: Duration,
        wait: Duration,
    ) -> Result<Lock, Error> {
        self.open(name.as_ref(), lease, Wait::AtMost(wait))
    }

    /// Runs `work` while holding `name`, releases the lock, and returns the
    /// work's own result. Failures before the work starts are retried as
    /// [`crate::Client::run`] retries them. A closure cannot be cancelled:
    /// the work must watch the lock ([`Held::is_valid`] before each side
    /// effect, [`Held::wait_lost`]) and return when it is lost; `run` then
    /// returns [`Error::Lost`] unless the work returned an error of its own.
    pub fn run<F, T, E>(&self, name: impl AsRef<[u8]>, lease: Duration, work: F) -> Result<T, E>
    where
        F: FnOnce(&Held) -> Result<T, E>,
        E: From<Error>,
    {
        let name = name.as_ref();
        let mut backoff = Backoff::default();
        let lock = loop {
            match self.open(name, lease, Wait::Forever) {
                Ok(lock) => break lock,
                Err(e) => match backoff.delay(&e, lease, rand_up_to) {
                    Some(d) => thread::sleep(d),
                    None => return Err(e.into()),
                },
            }
        };
        let result = work(&lock.held);
        match (lock.release(), result) {
            (Err(lost), Ok(_)) => Err(lost.into()),
            (_, result) => result,
        }
    }

    fn open(&self, name: &[u8], lease: Duration, wait: Wait) -> Result<Lock, Error> {
        let (address, acquire) = self.settings.prepare(name, lease)?;
        let tcp = Arc::new(connect_tcp(address, self.settings.connect_timeout)?);
        let waker = tcp.clone();
        let (conn, tls_resumed) = self.secure(address, Socket(tcp))?;
        let shared = Arc::new(Shared::default());
        let (session, actions) = Session::start(acquire, lease, Instant::now());
        shared.publish(session.status(), false);
        let thread_shared = shared.clone();
        thread::Builder::new()
            .name("monolock".into())
            .stack_size(THREAD_STACK)
            .spawn(move || drive(conn, session, actions.send, thread_shared))
            .map_err(Error::io)?;
        let lock = Lock {
            held: Held { shared },
            waker,
            tls_resumed,
        };
        lock.await_grant(wait)
    }

    #[cfg(feature = "tls")]
    fn secure(&self, address: &Address, mut tcp: Socket) -> Result<(Conn, Option<bool>), Error> {
        let Some(config) = &self.settings.tls else {
            return Ok((Conn::Plain(tcp), None));
        };
        let name = Settings::server_name(address)?;
        let mut tls = rustls::ClientConnection::new(config.clone(), name).map_err(|e| {
            Error::Tls(format!(
                "cannot start a handshake with {}: {e}",
                address.full
            ))
        })?;
        let limit = Some(self.settings.connect_timeout);
        tcp.0
            .set_read_timeout(limit)
            .and_then(|()| tcp.0.set_write_timeout(limit))
            .map_err(Error::io)?;
        while tls.is_handshaking() {
            if let Err(e) = tls.complete_io(&mut tcp) {
                return Err(connect::connect_error(address, e));
            }
        }
        let resumed = tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        Ok((
            Conn::Tls(Box::new(rustls::StreamOwned::new(tls, tcp))),
            Some(resumed),
        ))
    }

    #[cfg(not(feature = "tls"))]
    fn secure(&self, _: &Address, tcp: Socket) -> Result<(Conn, Option<bool>), Error> {
        Ok((Conn::Plain(tcp), None))
    }
}

fn connect_tcp(address: &Address, timeout: Duration) -> Result<TcpStream, Error> {
    let addrs = address
        .full
        .to_socket_addrs()
        .map_err(|e| connect::connect_error(address, e))?;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name resolves to no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(tcp) => {
                tcp.set_nodelay(true).map_err(Error::io)?;
                return Ok(tcp);
            }
            Err(e) => last = e,
        }
    }
    Err(connect::connect_error(address, last))
}

/// The socket, shared by the session's thread and its [`Lock`]: reads,
/// writes and `shutdown` all take `&TcpStream`, so one descriptor serves
/// both, and the lock's shutdown wakes the thread's read.
struct Socket(Arc<TcpStream>);

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.0).read(buf)
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.0).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        (&*self.0).flush()
    }
}

/// A connection, plain or TLS.
enum Conn {
    Plain(Socket),
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Socket>>),
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(tcp) => &tcp.0,
            #[cfg(feature = "tls")]
            Conn::Tls(tls) => &tls.sock.0,
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(tcp) => tcp.read(buf),
            #[cfg(feature = "tls")]
            Conn::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(tcp) => tcp.write(buf),
            #[cfg(feature = "tls")]
            Conn::Tls(tls) => tls.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(tcp) => tcp.flush(),
            #[cfg(feature = "tls")]
            Conn::Tls(tls) => tls.flush(),
        }
    }
}

/// The session's state as the thread publishes it, and the caller's stop.
#[derive(Debug, Default)]
struct Shared {
    inner: Mutex<Inner>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Inner {
    status: Option<Status>,
    /// The work has stopped (release or drop): the thread may close.
    stop: bool,
    /// The thread closed the connection and ended.
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding it leaves plain data behind.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores the session's status. Waiters wait for a change of state
    /// (answered, granted, ended, closed), never for a new deadline, so
    /// only such a change wakes them: a heartbeat's answer costs no wakeup.
    fn publish(&self, status: &Status, closed: bool) {
        let mut inner = self.lock();
        let wake = closed
            || inner.status.as_ref().is_none_or(|old| {
                (old.answered, old.granted, old.ended)
                    != (status.answered, status.granted, status.ended)
            });
        inner.status = Some(status.clone());
        inner.closed |= closed;
        drop(inner);
        if wake {
            self.changed.notify_all();
        }
    }

    fn stop_asked(&self) -> bool {
        self.lock().stop
    }

    /// Waits until `done` holds for the status, or `limit` passes; returns
    /// the status then.
    fn wait(&self, limit: Option<Duration>, done: impl Fn(&Inner) -> bool) -> Status {
        let guard = self.lock();
        let guard = match limit {
            None => self
                .changed
                .wait_while(guard, |i| !done(i))
                .unwrap_or_else(|e| e.into_inner()),
            Some(limit) => {
                self.changed
                    .wait_timeout_while(guard, limit, |i| !done(i))
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
        guard
            .status
            .clone()
            .expect("published before the thread starts")
    }

    /// Reads the status in place, without copying it.
    fn read<T>(&self, f: impl FnOnce(&Status) -> T) -> T {
        f(status_of(&self.lock()))
    }
}

fn status_of(i: &Inner) -> &Status {
    i.status
        .as_ref()
        .expect("published before the thread starts")
}

/// The session's thread: the connection's permanent reader (rule 1) and
/// its heartbeat sender; it closes the connection when the session says so.
fn drive(
    mut conn: Conn,
    mut session: Session,
    first: Option<crate::session::Request>,
    shared: Arc<Shared>,
) {
    let mut buf = [0u8; connect::READ_SIZE];
    let mut send = first;
    let mut stopped = false;
    loop {
        let mut actions = None;
        if let Some(request) = send.take() {
            let left = session
                .status()
                .deadline
                .saturating_duration_since(Instant::now());
            // A write that blocks past the give-up means the lock is lost anyway.
            let written = conn
                .tcp()
                .set_write_timeout(Some(at_least_a_microsecond(left)))
                .and_then(|()| conn.write_all(session.frame(request)))
                .and_then(|()| conn.flush());
            if let Err(e) = written {
                actions = Some(session.step(
                    Event::Closed(connect::connection_error("write", e)),
                    Instant::now(),
                ));
            }
        }
        if !stopped && shared.stop_asked() {
            stopped = true;
            actions = Some(session.step(Event::Stop, Instant::now()));
        }
        let actions = actions.unwrap_or_else(|| session.step(Event::Tick, Instant::now()));
        shared.publish(session.status(), false);
        if actions.close {
            break;
        }
        if actions.send.is_some() {
            send = actions.send;
            continue;
        }
        let timeout = actions
            .wake_at
            .map(|at| at_least_a_microsecond(at.saturating_duration_since(Instant::now())));
        let event = match conn
            .tcp()
            .set_read_timeout(timeout)
            .and_then(|()| conn.read(&mut buf))
        {
            Ok(0) if shared.stop_asked() => continue,
            Ok(0) => Event::Closed(connect::end_of_stream()),
            Ok(n) => Event::Read(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(_) if shared.stop_asked() => continue,
            Err(e) => Event::Closed(connect::connection_error("read", e)),
        };
        let actions = session.step(event, Instant::now());
        shared.publish(session.status(), false);
        if actions.close {
            break;
        }
        send = actions.send;
    }
    // Closing is the release. Shut the socket down: the lock keeps the
    // descriptor until it is dropped.
    let _ = conn.tcp().shutdown(Shutdown::Both);
    drop(conn);
    shared.publish(session.status(), true);
}

/// `set_read_timeout` refuses zero, and rounds down to the microsecond:
/// waking before a deadline only costs one more turn, never a late one.
fn at_least_a_microsecond(d: Duration) -> Duration {
    d.max(Duration::from_micros(1))
}

/// One connection's claim on one named lock, held until [`Lock::release`]
/// or until it is lost; a thread (one per lock) is its permanent reader and
/// heartbeat sender. Dropping the lock releases it without blocking.
#[derive(Debug)]
pub struct Lock {
    held: Held,
    /// The socket the thread reads: shutting it down wakes that read, so a
    /// release never waits for the next timer.
    waker: Arc<TcpStream>,
    tls_resumed: Option<bool>,
}

impl Lock {
    /// The fencing token of the grant: pass it with every write.
    pub fn token(&self) -> u64 {
        self.held.token()
    }

    /// True while held and confirmed within the last 0.8 × lease; reads the
    /// monotonic clock itself. Once false, it stays false.
    pub fn is_valid(&self) -> bool {
        self.held.is_valid()
    }

    /// Waits at most `timeout` for the loss; true if the lock was lost.
    pub fn wait_lost(&self, timeout: Duration) -> bool {
        self.held.wait_lost(timeout)
    }

    /// Why the lock was lost, if it was, as [`Error::Lost`].
    pub fn lost_error(&self) -> Option<Error> {
        self.held.lost_error()
    }

    /// A view of this lock to hand to the work.
    pub fn held(&self) -> &Held {
        &self.held
    }

    /// As [`crate::Lock::tls_resumed`].
    pub fn tls_resumed(&self) -> Option<bool> {
        self.tls_resumed
    }

    /// Releases the lock by closing the connection and returns once it is
    /// closed; after a loss it returns that loss as [`Error::Lost`].
    pub fn release(self) -> Result<(), Error> {
        self.stop();
        self.held.shared.wait(None, |i| i.closed);
        match self.lost_error() {
            Some(lost) => Err(lost),
            None => Ok(()),
        }
    }

    fn stop(&self) {
        self.held.shared.lock().stop = true;
        // Wakes the thread's read at once; the thread then closes.
        let _ = self.waker.shutdown(Shutdown::Both);
    }

    fn await_grant(self, wait: Wait) -> Result<Lock, Error> {
        let shared = &self.held.shared;
        let answered = shared.wait(None, |i| {
            let s = status_of(i);
            s.answered || s.ended || i.closed
        });
        if answered.granted {
            return Ok(self);
        }
        let queued = |s: Status| {
            s.error.unwrap_or_else(|| {
                Error::Unavailable("the connection ended before the grant".into())
            })
        };
        if answered.ended {
            return Err(queued(answered));
        }
        let limit = match wait {
            Wait::No => return Err(Error::Busy),
            Wait::Forever => None,
            Wait::AtMost(limit) => Some(limit),
        };
        let s = shared.wait(limit, |i| {
            let s = status_of(i);
            s.granted || s.ended || i.closed
        });
        if s.granted {
            Ok(self)
        } else if s.ended {
            Err(queued(s))
        } else {
            Err(Error::Busy)
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A view of a held lock for the work: token, validity, loss.
#[derive(Debug, Clone)]
pub struct Held {
    shared: Arc<Shared>,
}

impl Held {
    /// The fencing token of the grant.
    pub fn token(&self) -> u64 {
        self.shared.read(|s| s.token)
    }

    /// As [`Lock::is_valid`].
    pub fn is_valid(&self) -> bool {
        let now = Instant::now();
        self.shared.read(|s| s.valid(now))
    }

    /// Waits at most `timeout` for the loss; true if the lock was lost.
    pub fn wait_lost(&self, timeout: Duration) -> bool {
        self.shared
            .wait(Some(timeout), |i| status_of(i).ended || i.closed)
            .error
            .is_some()
    }

    /// Why the lock was lost, if it was, as [`Error::Lost`].
    pub fn lost_error(&self) -> Option<Error> {
        self.shared.read(|s| s.error.clone().map(Error::lost))
    }
}
