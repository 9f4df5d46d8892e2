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
use crate::connect::{self, Dialing, Settings};
use crate::retry::{rand_up_to, Backoff};
use crate::session::{Actions, Event, Request, Session, Status, Wait};
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
            settings: Settings::new([addr]),
        }
    }

    /// A client of a server reachable at several addresses, tried as
    /// [`crate::Client::from_addresses`] tries them.
    pub fn from_addresses<I>(addrs: I) -> Client
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        Client {
            settings: Settings::new(addrs),
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

    /// Waits at most `wait` from the start of the attempt, as
    /// [`crate::Client::lock_timeout`]: then [`Error::Busy`] when queued.
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
        let (addresses, acquire) = self.settings.prepare(name, lease)?;
        let timeout = self.settings.connect_timeout;
        let (mut session, actions) = Session::dial(acquire, lease, wait, timeout, Instant::now());
        // The session's first deadline, the connect timeout's or the
        // wait's, bounds the TCP connect and the TLS handshake together.
        let deadline = actions
            .wake_at
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600));
        let connected =
            connect_tcp(&self.settings, addresses, deadline).and_then(|(tcp, address)| {
                let (tx, resumed) = self.secure(address, &tcp, deadline)?;
                Ok((tcp, tx, resumed))
            });
        let (tcp, tx, tls_resumed) = match connected {
            Ok(c) => c,
            Err(err) => {
                // Past the deadline the step takes it first: the connect
                // timeout, not the failure it caused.
                let _ = session.step(Event::Closed(err), Instant::now());
                return Err(session.failure());
            }
        };
        let actions = session.step(Event::Up, Instant::now());
        if actions.close {
            // Up past the deadline: too late, reset.
            let _ = socket2::SockRef::from(&tcp).set_linger(Some(Duration::ZERO));
            return Err(session.failure());
        }
        let tcp = Arc::new(tcp);
        let shared = Arc::new(Shared::default());
        let engine = Arc::new(Mutex::new(Engine {
            session,
            tx,
            socket: Some(tcp.clone()),
        }));
        {
            let mut e = lock_engine(&engine);
            e.apply(actions, &shared);
        }
        let thread_engine = engine.clone();
        let thread_shared = shared.clone();
        thread::Builder::new()
            .name("monolock".into())
            .stack_size(THREAD_STACK)
            .spawn(move || drive(tcp, thread_engine, thread_shared))
            .map_err(Error::io)?;
        let lock = Lock {
            held: Held { shared },
            engine,
            tls_resumed,
        };
        lock.await_grant()
    }

    #[cfg(feature = "tls")]
    fn secure(
        &self,
        address: &Address,
        tcp: &TcpStream,
        deadline: Instant,
    ) -> Result<(Tx, Option<bool>), Error> {
        let Some(config) = &self.settings.tls else {
            return Ok((Tx::Plain, None));
        };
        let name = Settings::server_name(address)?;
        let mut tls = rustls::ClientConnection::new(config.clone(), name).map_err(|e| {
            Error::Tls(format!(
                "cannot start a handshake with {}: {e}",
                address.full
            ))
        })?;
        handshake(&mut tls, tcp, deadline).map_err(|e| connect::connect_error(address, e))?;
        let resumed = tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        Ok((Tx::Tls(Box::new(tls)), Some(resumed)))
    }

    #[cfg(not(feature = "tls"))]
    fn secure(&self, _: &Address, _: &TcpStream, _: Instant) -> Result<(Tx, Option<bool>), Error> {
        Ok((Tx::Plain, None))
    }
}

/// Runs the TLS handshake to its end or to `deadline`, whichever comes
/// first: each read and write waits only for what is left, so a server
/// that sends one byte at a time cannot stretch it.
#[cfg(feature = "tls")]
fn handshake(
    tls: &mut rustls::ClientConnection,
    tcp: &TcpStream,
    deadline: Instant,
) -> io::Result<()> {
    while tls.is_handshaking() || tls.wants_write() {
        let left = time_left(deadline)?;
        if tls.wants_write() {
            tcp.set_write_timeout(Some(left))?;
            tls.write_tls(&mut &*tcp).map_err(timed_out)?;
            continue;
        }
        tcp.set_read_timeout(Some(left))?;
        if tls.read_tls(&mut &*tcp).map_err(timed_out)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        tls.process_new_packets().map_err(io::Error::other)?;
    }
    Ok(())
}

/// A socket timeout, which Unix reports as WouldBlock, as the timeout it is.
#[cfg(feature = "tls")]
fn timed_out(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock => io::ErrorKind::TimedOut.into(),
        _ => e,
    }
}

/// What is left until `deadline`, at least a microsecond (the socket
/// timeouts refuse zero), or a timeout error once it has passed.
fn time_left(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    Ok(at_least_a_microsecond(left))
}

/// Connects to the first of the addresses that accepts before `deadline`,
/// starting from the one that worked last.
fn connect_tcp<'a>(
    settings: &'a Settings,
    addresses: &'a [Address],
    deadline: Instant,
) -> Result<(TcpStream, &'a Address), Error> {
    let mut dialing = Dialing::new(settings);
    for address in addresses {
        dialing.resolved(address, address.full.to_socket_addrs());
    }
    for c in dialing.in_order() {
        let connected =
            time_left(deadline).and_then(|left| TcpStream::connect_timeout(&c.addr, left));
        match connected {
            Ok(tcp) => {
                dialing.connected(&c);
                tcp.set_nodelay(true).map_err(Error::io)?;
                return Ok((tcp, c.address));
            }
            Err(e) => dialing.failed(&c, &e),
        }
    }
    Err(dialing.error())
}

/// The sending half of a connection: plain, or the TLS state (which the
/// reading half also goes through, under the same lock, once it has the
/// bytes of a record).
enum Tx {
    Plain,
    #[cfg(feature = "tls")]
    Tls(Box<rustls::ClientConnection>),
}

/// A connection's session and its sending half, behind one lock: the
/// session's thread steps it with what it reads and its timers, the
/// caller's thread with the release (and writes RELEASE itself, since the
/// thread may be blocked in a read for a while).
struct Engine {
    session: Session,
    tx: Tx,
    /// The socket until it is closed. The session's thread holds a clone
    /// for its reads; the descriptor closes when both are gone.
    socket: Option<Arc<TcpStream>>,
}

fn lock_engine(engine: &Mutex<Engine>) -> MutexGuard<'_, Engine> {
    // A panic elsewhere while holding it leaves the state of a finished step.
    engine.lock().unwrap_or_else(|e| e.into_inner())
}

impl Engine {
    /// Carries out `actions` (and those of the steps they lead to), then
    /// publishes the session's status.
    fn apply(&mut self, mut actions: Actions, shared: &Shared) {
        while let Some(request) = actions.send {
            let deadline = self.session.write_deadline(request);
            let event = match time_left(deadline) {
                // Queued before the deadline, due after it: not written.
                Err(_) => Event::Tick,
                Ok(left) => match self.write(request, left) {
                    Ok(()) => Event::Written,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        Event::WriteBlocked
                    }
                    Err(e) => Event::WriteFailed(connect::connection_error("write", e)),
                },
            };
            actions = self.session.step(event, Instant::now());
        }
        if actions.close {
            self.close(actions.abort);
        }
        shared.publish(self.session.status(), self.socket.is_none());
    }

    fn write(&mut self, request: Request, limit: Duration) -> io::Result<()> {
        let Some(tcp) = &self.socket else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        tcp.set_write_timeout(Some(limit))?;
        let frame = self.session.frame(request);
        match &mut self.tx {
            Tx::Plain => (&**tcp).write_all(frame),
            #[cfg(feature = "tls")]
            Tx::Tls(tls) => {
                tls.writer().write_all(frame)?;
                flush_tls(tls, tcp)
            }
        }
    }

    /// Closes the connection: normally (the server closed first), or
    /// abortively with SO_LINGER {on, 0}, so that the last close of the
    /// descriptor sends an RST. Shutting the reading side down wakes the
    /// session's thread if it is blocked in a read (it sends nothing).
    fn close(&mut self, abort: bool) {
        let Some(tcp) = self.socket.take() else {
            return;
        };
        if abort {
            let _ = socket2::SockRef::from(&*tcp).set_linger(Some(Duration::ZERO));
            let _ = tcp.shutdown(Shutdown::Read);
        } else {
            let _ = tcp.shutdown(Shutdown::Both);
        }
    }

    /// Bytes read from the server: decrypted first under TLS. Returns
    /// false once the connection is closed.
    fn received(&mut self, data: &[u8], shared: &Shared) {
        match &mut self.tx {
            Tx::Plain => {
                let actions = self.session.step(Event::Read(data), Instant::now());
                self.apply(actions, shared);
            }
            #[cfg(feature = "tls")]
            Tx::Tls(_) => self.received_tls(data, shared),
        }
    }

    #[cfg(feature = "tls")]
    fn received_tls(&mut self, mut data: &[u8], shared: &Shared) {
        let mut plain = [0u8; connect::READ_SIZE];
        while self.socket.is_some() {
            let Tx::Tls(tls) = &mut self.tx else { return };
            if data.is_empty() && !tls.wants_read() {
                return;
            }
            if !data.is_empty() {
                let fed = tls.read_tls(&mut data).and_then(|_| {
                    tls.process_new_packets()
                        .map(|_| ())
                        .map_err(io::Error::other)
                });
                if let Err(e) = fed {
                    // An alert sent by process_new_packets goes out first.
                    if let Some(tcp) = &self.socket {
                        let _ = flush_tls(tls, tcp);
                    }
                    let actions = self.session.step(
                        Event::Closed(connect::connection_error("read", e)),
                        Instant::now(),
                    );
                    return self.apply(actions, shared);
                }
            }
            let event = match tls.reader().read(&mut plain) {
                // close_notify: the server's FIN follows, maybe in another
                // segment; the TCP end of stream is the end (closing
                // between the two would cross that FIN and leave a
                // TIME_WAIT on both sides).
                Ok(0) => return,
                Ok(n) => Event::Read(&plain[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if data.is_empty() {
                        return;
                    }
                    continue;
                }
                Err(e) => Event::Closed(connect::connection_error("read", e)),
            };
            let actions = self.session.step(event, Instant::now());
            self.apply(actions, shared);
        }
    }
}

#[cfg(feature = "tls")]
fn flush_tls(tls: &mut rustls::ClientConnection, tcp: &TcpStream) -> io::Result<()> {
    while tls.wants_write() {
        tls.write_tls(&mut &*tcp)?;
    }
    Ok(())
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
    /// The connection is closed.
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
        let wake = closed != inner.closed
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
/// its timers. It reads without the engine's lock, then steps the session
/// with what it read under it, until the connection is closed.
fn drive(tcp: Arc<TcpStream>, engine: Arc<Mutex<Engine>>, shared: Arc<Shared>) {
    let mut buf = [0u8; connect::READ_SIZE];
    loop {
        let timeout = {
            let e = lock_engine(&engine);
            if e.socket.is_none() {
                return;
            }
            let wake_at = e.session.wake_at();
            wake_at.map(|at| at_least_a_microsecond(at.saturating_duration_since(Instant::now())))
        };
        let read = tcp
            .set_read_timeout(timeout)
            .and_then(|()| (&*tcp).read(&mut buf));
        let mut e = lock_engine(&engine);
        if e.socket.is_none() {
            return; // closed by the caller's thread, which woke this read
        }
        match read {
            Ok(0) => {
                let actions = e.session.step(Event::Eof, Instant::now());
                e.apply(actions, &shared);
            }
            Ok(n) => e.received(&buf[..n], &shared),
            Err(err)
                if matches!(
                    err.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                let actions = e.session.step(Event::Tick, Instant::now());
                e.apply(actions, &shared);
            }
            Err(err) => {
                let actions = e.session.step(
                    Event::Closed(connect::connection_error("read", err)),
                    Instant::now(),
                );
                e.apply(actions, &shared);
            }
        }
    }
}

/// `set_read_timeout` refuses zero, and rounds down to the microsecond:
/// waking before a deadline only costs one more turn, never a late one.
fn at_least_a_microsecond(d: Duration) -> Duration {
    d.max(Duration::from_micros(1))
}

/// One connection's claim on one named lock, held until [`Lock::release`]
/// or until it is lost; a thread (one per lock) is its permanent reader and
/// heartbeat sender. Dropping the lock releases it without blocking: it
/// sends RELEASE, and the thread closes the connection once the server has
/// (abortively if the server has not by the thread's next timer, at most
/// 0.8 × lease later; [`Lock::release`] waits min(lease, 2 s) at most).
pub struct Lock {
    held: Held,
    /// The session: the release steps it on the caller's thread, which
    /// writes RELEASE itself (the session's thread may be blocked in a read).
    engine: Arc<Mutex<Engine>>,
    tls_resumed: Option<bool>,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("held", &self.held)
            .field("tls_resumed", &self.tls_resumed)
            .finish_non_exhaustive()
    }
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

    /// Releases the lock: sends RELEASE and returns once the server has
    /// closed the connection (its TIME_WAIT is then the server's), or,
    /// when it has not within min(lease, 2 s), once the client has reset
    /// it. After a loss it returns that loss as [`Error::Lost`].
    pub fn release(self) -> Result<(), Error> {
        self.stop();
        let shared = &self.held.shared;
        loop {
            let close_at = lock_engine(&self.engine).session.close_at();
            let limit = close_at.map(|at| at.saturating_duration_since(Instant::now()));
            shared.wait(limit, |i| i.closed);
            let mut e = lock_engine(&self.engine);
            if e.socket.is_none() {
                break;
            }
            // The bound passed while the thread waits in a read armed
            // before it: the close is this thread's to make.
            let actions = e.session.step(Event::Tick, Instant::now());
            e.apply(actions, shared);
        }
        match self.lost_error() {
            Some(lost) => Err(lost),
            None => Ok(()),
        }
    }

    /// The work has stopped: the session sends RELEASE (or, given up on,
    /// closes), on this thread.
    fn stop(&self) {
        let mut e = lock_engine(&self.engine);
        if e.socket.is_none() {
            return;
        }
        let actions = e.session.step(Event::Stop, Instant::now());
        e.apply(actions, &self.held.shared);
    }

    /// Waits for the grant or the end of the attempt; the session decides
    /// when a try-lock or a wait is busy (its thread wakes for the wait's
    /// deadline).
    fn await_grant(self) -> Result<Lock, Error> {
        let s = self.held.shared.wait(None, |i| {
            let s = status_of(i);
            s.granted || s.ended || i.closed
        });
        if s.granted {
            return Ok(self);
        }
        Err(s
            .error
            .unwrap_or_else(|| Error::Unavailable("the connection ended before the grant".into())))
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
