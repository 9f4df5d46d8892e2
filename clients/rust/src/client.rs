//! The async client on tokio: one task per lock runs its [`Session`].

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};

use crate::address::Address;
use crate::connect::{self, Dialing, Settings};
use crate::retry::{rand_up_to, Backoff};
use crate::session::{Actions, Event, Session, Status, Wait};
use crate::Error;

/// Acquires locks from one monolock server. It holds no connection of its
/// own (every lock is its own connection), so it is cheap to clone, safe to
/// share between tasks, and needs no closing.
///
/// ```no_run
/// # async fn example() -> Result<(), monolock::Error> {
/// use std::time::Duration;
///
/// let client = monolock::Client::new("127.0.0.1:7070");
/// let token = client
///     .run("nightly-import", Duration::from_secs(2), |lock| async move {
///         // the work: cancelled (dropped) at once if the lock is lost
///         Ok::<_, monolock::Error>(lock.token())
///     })
///     .await?;
/// # let _ = token;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    settings: Settings,
}

impl Client {
    /// A client of the server at `addr` (`host:port`, such as
    /// `127.0.0.1:7070` or `[::1]:7070`). A malformed address is reported
    /// by the first `lock` as [`Error::InvalidInput`].
    pub fn new(addr: impl AsRef<str>) -> Client {
        Client {
            settings: Settings::new([addr]),
        }
    }

    /// A client of a server reachable at several addresses (`host:port`
    /// each; a DNS name that resolves to several addresses gives each of
    /// them). Each attempt starts from the address whose connection came
    /// up last, and tries the others in order when a connect fails, all
    /// within one connect timeout; `run` retries the attempt as its rules
    /// say. An empty list or a malformed address is reported by the first
    /// `lock` as [`Error::InvalidInput`].
    pub fn from_addresses<I>(addrs: I) -> Client
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        Client {
            settings: Settings::new(addrs),
        }
    }

    /// Speaks TLS with `config` (mutual TLS when it carries a client
    /// certificate). The server certificate must be valid for the host of
    /// the address, a DNS name or an IP address. Every connection of this
    /// client shares `config`, and with it rustls's session store, so a
    /// reconnect resumes the TLS session of an earlier connection when the
    /// server can ([`Lock::tls_resumed`]).
    #[cfg(feature = "tls")]
    pub fn with_tls(mut self, config: rustls::ClientConfig) -> Client {
        self.settings.tls = Some(std::sync::Arc::new(config));
        self
    }

    /// Bounds the TCP connect and the TLS handshake of each attempt
    /// (default 10 s).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Client {
        self.settings.connect_timeout = timeout;
        self
    }

    /// Acquires the lock `name`, waiting in its FIFO queue as long as it
    /// takes, and returns it held. Dropping the future while queued leaves
    /// the queue. One attempt: nothing is retried (see [`Client::run`]).
    ///
    /// `name` is 1 to 255 bytes of UTF-8 and `lease` at least 1 ms (a
    /// fraction of a millisecond rounds up); anything else is
    /// [`Error::InvalidInput`] before connecting.
    pub async fn lock(&self, name: impl AsRef<[u8]>, lease: Duration) -> Result<Lock, Error> {
        self.open(name.as_ref(), lease, Wait::Forever).await
    }

    /// As [`Client::lock`], but returns [`Error::Busy`] at once when someone
    /// else holds the lock (the server queued the request).
    pub async fn try_lock(&self, name: impl AsRef<[u8]>, lease: Duration) -> Result<Lock, Error> {
        self.open(name.as_ref(), lease, Wait::No).await
    }

    /// As [`Client::lock`], but waits at most `wait` from the start of the
    /// attempt (the connect included): queued then, it leaves the queue
    /// and returns [`Error::Busy`]; not answered yet, it returns
    /// [`Error::Unavailable`] (the server is too slow to tell).
    pub async fn lock_timeout(
        &self,
        name: impl AsRef<[u8]>,
        lease: Duration,
        wait: Duration,
    ) -> Result<Lock, Error> {
        self.open(name.as_ref(), lease, Wait::AtMost(wait)).await
    }

    /// Runs `work` while holding `name` and releases the lock afterwards,
    /// returning the work's own result.
    ///
    /// Failures before the work starts are retried as the rules say (rule
    /// 6): after a random wait of at most min(1 s, lease/4) after "server
    /// shutting down" (0x01), with backoff (100 ms doubling up to 5 s, with
    /// jitter) after other server conditions and lost connections. Client
    /// errors (0x10 and above), invalid input, protocol violations and TLS
    /// failures are returned at once. Every attempt is a new connection at
    /// the back of the queue.
    ///
    /// The work runs at most once. If the lock is lost while it runs, its
    /// future is cancelled (dropped) at once and `run` returns
    /// [`Error::Lost`]; the connection then closes, the work having stopped.
    pub async fn run<F, Fut, T, E>(
        &self,
        name: impl AsRef<[u8]>,
        lease: Duration,
        work: F,
    ) -> Result<T, E>
    where
        F: FnOnce(Held) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        let name = name.as_ref();
        let mut backoff = Backoff::default();
        let lock = loop {
            match self.open(name, lease, Wait::Forever).await {
                Ok(lock) => break lock,
                Err(e) => match backoff.delay(&e, lease, rand_up_to) {
                    Some(d) => tokio::time::sleep(d).await,
                    None => return Err(e.into()),
                },
            }
        };
        let held = lock.held.clone();
        let outcome = tokio::select! {
            biased;
            lost = held.lost() => Err(lost),
            result = work(held.clone()) => Ok(result),
        };
        match outcome {
            Err(lost) => {
                drop(lock); // the work is dropped: close now
                Err(lost.into())
            }
            Ok(result) => match (lock.release().await, result) {
                (Err(lost), Ok(_)) => Err(lost.into()),
                (_, result) => result,
            },
        }
    }

    async fn open(&self, name: &[u8], lease: Duration, wait: Wait) -> Result<Lock, Error> {
        let (addresses, acquire) = self.settings.prepare(name, lease)?;
        let timeout = self.settings.connect_timeout;
        let (mut session, mut actions) =
            Session::dial(acquire, lease, wait, timeout, Instant::now());
        #[cfg(feature = "tls")]
        if let Some(config) = &self.settings.tls {
            let connector = tokio_rustls::TlsConnector::from(config.clone());
            let handshake = async {
                let (tcp, address) = connect_tcp(&self.settings, addresses).await?;
                let name = Settings::server_name(address)?;
                connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| connect::connect_error(address, e))
            };
            let tls = dial(&mut session, &mut actions, handshake).await?;
            let resumed = tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
            let mut lock = start(tls, session, actions);
            lock.tls_resumed = Some(resumed);
            return lock.await_grant().await;
        }
        let tcp = dial(&mut session, &mut actions, async {
            Ok::<_, Error>(connect_tcp(&self.settings, addresses).await?.0)
        })
        .await?;
        start(tcp, session, actions).await_grant().await
    }
}

/// Connects to the first of the addresses that accepts, starting from the
/// one that worked last.
async fn connect_tcp<'a>(
    settings: &'a Settings,
    addresses: &'a [Address],
) -> Result<(TcpStream, &'a Address), Error> {
    let mut dialing = Dialing::new(settings);
    for address in addresses {
        dialing.resolved(
            address,
            tokio::net::lookup_host(address.full.as_str()).await,
        );
    }
    for c in dialing.in_order() {
        match TcpStream::connect(c.addr).await {
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

/// Runs `connect` (the TCP connect and the TLS handshake) under the
/// session's deadlines, the connect timeout's and the wait's, and steps the
/// session with how it ended: the connection up, its failure, or the
/// deadline.
async fn dial<S, F>(session: &mut Session, actions: &mut Actions, connect: F) -> Result<S, Error>
where
    S: Abortable,
    F: Future<Output = Result<S, Error>>,
{
    tokio::pin!(connect);
    loop {
        let done = match actions.wake_at {
            Some(at) => {
                let at = tokio::time::Instant::from_std(at);
                tokio::time::timeout_at(at, &mut connect).await.ok()
            }
            None => Some((&mut connect).await),
        };
        let finished = done.is_some();
        let event = match done {
            Some(Ok(io)) => {
                *actions = session.step(Event::Up, Instant::now());
                if !actions.close {
                    return Ok(io);
                }
                // Up past the deadline: too late.
                close(io, actions.abort, Instant::now()).await;
                return Err(session.failure());
            }
            Some(Err(e)) => Event::Closed(e),
            None => Event::Tick,
        };
        *actions = session.step(event, Instant::now());
        if actions.close || finished {
            return Err(session.failure());
        }
    }
}

/// A connection as the session's task closes it: its TCP stream under TLS.
trait Abortable {
    fn tcp(&mut self) -> &mut TcpStream;
}

impl Abortable for TcpStream {
    fn tcp(&mut self) -> &mut TcpStream {
        self
    }
}

#[cfg(feature = "tls")]
impl Abortable for tokio_rustls::client::TlsStream<TcpStream> {
    fn tcp(&mut self) -> &mut TcpStream {
        let (tcp, _) = self.get_mut();
        tcp
    }
}

/// Closes the connection: abortively, SO_LINGER {on, 0} (an RST, which
/// leaves no TIME_WAIT), or normally once the server's FIN has come. A
/// TLS close_notify comes before that FIN, maybe in another segment: a
/// close between the two would cross the server's FIN and leave a
/// TIME_WAIT on both sides, so the TCP stream is read to its end first,
/// until `bound` at the latest.
async fn close<S: Abortable>(mut io: S, abort: bool, bound: Instant) {
    let tcp = io.tcp();
    if !abort {
        let mut rest = [0u8; 64];
        let until_fin = async {
            while let Ok(n) = tcp.read(&mut rest).await {
                if n == 0 {
                    return;
                }
            }
        };
        let fin = tokio::time::timeout_at(tokio::time::Instant::from_std(bound), until_fin).await;
        if fin.is_ok() {
            return;
        }
    }
    // Dropping `io` then resets the connection; should the option fail,
    // the close is an ordinary one.
    let _ = tcp.set_zero_linger();
}

/// Starts the session's task on a connected stream; `actions` are those
/// of the connection's coming up (ACQUIRE goes out).
fn start<S>(io: S, session: Session, actions: Actions) -> Lock
where
    S: AsyncRead + AsyncWrite + Abortable + Unpin + Send + 'static,
{
    let (status_tx, status_rx) = watch::channel(session.status().clone());
    let (stop_tx, stop_rx) = oneshot::channel();
    tokio::spawn(drive(io, session, actions, status_tx, stop_rx));
    Lock {
        held: Held { status: status_rx },
        stop: Some(stop_tx),
        tls_resumed: None,
    }
}

/// The session's task: the connection's permanent reader (rule 1) and its
/// heartbeat sender. It ends, closing the connection, when the session says
/// so; the [`Lock`] tells it the work has stopped by sending on, or
/// dropping, `stop`, and the session then sends RELEASE and waits for the
/// server's close.
async fn drive<S>(
    mut io: S,
    mut session: Session,
    mut actions: Actions,
    status: watch::Sender<Status>,
    mut stop: oneshot::Receiver<()>,
) where
    S: AsyncRead + AsyncWrite + Abortable + Unpin,
{
    let mut buf = [0u8; connect::READ_SIZE];
    let mut stopped = false;
    loop {
        while let Some(request) = actions.send {
            // A write that blocks past the give-up (past the release bound
            // for RELEASE) means the connection is of no use any more.
            let deadline = session.write_deadline(request);
            let event = if Instant::now() >= deadline {
                // Queued before the deadline, due after it: not written.
                Event::Tick
            } else {
                let frame = session.frame(request);
                let written =
                    tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), async {
                        io.write_all(frame).await?;
                        io.flush().await
                    })
                    .await;
                match written {
                    Ok(Ok(())) => Event::Written,
                    Ok(Err(e)) => Event::WriteFailed(connect::connection_error("write", e)),
                    Err(_) => Event::WriteBlocked,
                }
            };
            actions = session.step(event, Instant::now());
        }
        status.send_replace(session.status().clone());
        if actions.close {
            let bound = Instant::now() + crate::session::MAX_RELEASE_WAIT.min(session.lease());
            return close(io, actions.abort, bound).await;
        }
        let wake = actions.wake_at.map(tokio::time::Instant::from_std);
        let event = tokio::select! {
            read = io.read(&mut buf) => match read {
                Ok(0) => Event::Eof,
                Ok(n) => Event::Read(&buf[..n]),
                Err(e) => Event::Closed(connect::connection_error("read", e)),
            },
            _ = &mut stop, if !stopped => {
                stopped = true;
                Event::Stop
            }
            _ = sleep_until(wake) => Event::Tick,
        };
        actions = session.step(event, Instant::now());
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One connection's claim on one named lock, held until [`Lock::release`]
/// or until it is lost. A task (one per lock) is the connection's permanent
/// reader and heartbeat sender.
///
/// Dropping the lock releases it as [`Lock::release`] does, without
/// blocking (no runtime is needed in `Drop`): the task sends RELEASE, and
/// the task, its timer and its socket are gone once the server has closed
/// (at most min(lease, 2 s) later).
#[derive(Debug)]
pub struct Lock {
    held: Held,
    stop: Option<oneshot::Sender<()>>,
    tls_resumed: Option<bool>,
}

impl Lock {
    /// The fencing token of the grant: pass it to every resource the work
    /// changes, which rejects tokens smaller than the largest it accepted.
    pub fn token(&self) -> u64 {
        self.held.token()
    }

    /// True while the lock is held and the server confirmed it within the
    /// last 0.8 × lease. It reads the monotonic clock itself (no I/O): call
    /// it right before a side effect. Once false, it stays false.
    pub fn is_valid(&self) -> bool {
        self.held.is_valid()
    }

    /// Resolves when the lock is lost, with [`Error::Lost`] saying why.
    pub async fn lost(&self) -> Error {
        self.held.lost().await
    }

    /// Why the lock was lost, if it was.
    pub fn lost_error(&self) -> Option<Error> {
        self.held.lost_error()
    }

    /// A view of this lock to hand to the work (token, validity, loss).
    pub fn held(&self) -> Held {
        self.held.clone()
    }

    /// Whether this lock's TLS connection resumed the session of an
    /// earlier connection of its client (an abbreviated handshake); `None`
    /// without TLS. False on a client's first connection, and after a
    /// server restart or a failover unless the servers share
    /// `-tls-ticket-keys`.
    pub fn tls_resumed(&self) -> Option<bool> {
        self.tls_resumed
    }

    /// Releases the lock (or leaves the queue): sends RELEASE and returns
    /// once the server has closed the connection, so that the TIME_WAIT of
    /// the connection is the server's; when the server does not close
    /// within min(lease, 2 s), the client resets the connection instead.
    /// It also tells the client that the work has stopped, which is what
    /// lets it close a lost lock's connection (with a reset: it gave up on
    /// the server). After a loss it returns that loss as [`Error::Lost`].
    pub async fn release(mut self) -> Result<(), Error> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let mut status = self.held.status.clone();
        while status.changed().await.is_ok() {}
        match self.lost_error() {
            Some(lost) => Err(lost),
            None => Ok(()),
        }
    }

    /// Waits for the grant or the end of the attempt; the session decides
    /// when a try-lock or a wait is busy.
    async fn await_grant(self) -> Result<Lock, Error> {
        let mut status = self.held.status.clone();
        let s = status
            .wait_for(|s| s.granted || s.ended)
            .await
            .map(|s| s.clone())
            .unwrap_or_else(|_| status.borrow().clone());
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
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A view of a held lock for the work: its token, its validity, its loss.
/// Cheap to clone; it does not keep the lock (the [`Lock`], or `run`, does).
#[derive(Debug, Clone)]
pub struct Held {
    status: watch::Receiver<Status>,
}

impl Held {
    /// The fencing token of the grant.
    pub fn token(&self) -> u64 {
        self.status.borrow().token
    }

    /// As [`Lock::is_valid`].
    pub fn is_valid(&self) -> bool {
        self.status.borrow().valid(Instant::now())
    }

    /// Why the lock was lost, if it was.
    pub fn lost_error(&self) -> Option<Error> {
        self.status.borrow().error.clone().map(Error::lost)
    }

    /// Resolves when the lock is no longer held: with [`Error::Lost`] when
    /// it was lost, and also when it was released meanwhile.
    pub async fn lost(&self) -> Error {
        let mut status = self.status.clone();
        let ended = status.wait_for(|s| s.ended).await.map(|s| s.clone());
        let s = ended.unwrap_or_else(|_| status.borrow().clone());
        match s.error {
            Some(cause) => Error::lost(cause),
            None => Error::lost(Error::Unavailable("the lock was released".into())),
        }
    }
}
