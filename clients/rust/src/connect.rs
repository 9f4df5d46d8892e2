//! What both drivers share between the caller's arguments and a session:
//! the checks made before connecting, the client's settings, and how a
//! failed connection is reported.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::address::Address;
use crate::session::CONNECT_TIMEOUT;
use crate::{wire, Error};

/// Bytes read at a time: several server frames, so a burst costs one call.
pub(crate) const READ_SIZE: usize = 512;

/// A client's settings, shared by its clones.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The server's addresses, checked; an error for the first `lock`.
    pub(crate) addresses: Result<Vec<Address>, Error>,
    /// The resolved address of the last connection that came up, shared by
    /// the clones: each attempt tries it first, then the others in order.
    last_good: Arc<Mutex<Option<SocketAddr>>>,
    pub(crate) connect_timeout: Duration,
    /// One configuration for every connection, so that rustls's session
    /// store (in the configuration) offers the ticket of one connection to
    /// the next: a reconnect resumes (rule of docs/security.md).
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
}

impl Settings {
    pub(crate) fn new<I>(addrs: I) -> Settings
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let addresses = addrs
            .into_iter()
            .map(|a| Address::parse(a.as_ref()))
            .collect::<Result<Vec<_>, _>>()
            .and_then(|all| {
                if all.is_empty() {
                    return Err(Error::InvalidInput(
                        "no server address: give at least one host:port, such as 127.0.0.1:7070"
                            .into(),
                    ));
                }
                Ok(all)
            });
        Settings {
            addresses,
            last_good: Arc::default(),
            connect_timeout: CONNECT_TIMEOUT,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// The checked addresses and the ACQUIRE frame, before anything connects.
    pub(crate) fn prepare(
        &self,
        name: &[u8],
        lease: Duration,
    ) -> Result<(&[Address], Vec<u8>), Error> {
        let lease_ms = wire::lease_ms(lease)?;
        wire::check_name(name)?;
        let addresses = self.addresses.as_ref().map_err(Clone::clone)?;
        Ok((addresses, wire::encode_acquire(lease_ms, name)))
    }

    /// The resolved addresses in the order an attempt tries them: the one
    /// whose connection came up last first, then the others as given.
    pub(crate) fn in_order<'a>(&self, candidates: Vec<Candidate<'a>>) -> Vec<Candidate<'a>> {
        let last = *self.last_good.lock().unwrap_or_else(|e| e.into_inner());
        in_order(candidates, last)
    }

    /// A connection to `addr` came up: the next attempt tries it first.
    pub(crate) fn worked(&self, addr: SocketAddr) {
        *self.last_good.lock().unwrap_or_else(|e| e.into_inner()) = Some(addr);
    }

    /// The TLS server name for the address: its host, a DNS name or an IP
    /// address (verified against the certificate's IP SANs).
    #[cfg(feature = "tls")]
    pub(crate) fn server_name(
        address: &Address,
    ) -> Result<rustls::pki_types::ServerName<'static>, Error> {
        rustls::pki_types::ServerName::try_from(address.host.clone()).map_err(|e| {
            Error::InvalidInput(format!(
                "address {:?}: {e}: the host must be a DNS name or an IP address for TLS",
                address.full
            ))
        })
    }
}

/// One resolved address to connect to, with the configured address it
/// came from (its host is the TLS server name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate<'a> {
    pub(crate) addr: SocketAddr,
    pub(crate) address: &'a Address,
}

fn in_order(mut candidates: Vec<Candidate<'_>>, last: Option<SocketAddr>) -> Vec<Candidate<'_>> {
    if let Some(i) = last.and_then(|l| candidates.iter().position(|c| c.addr == l)) {
        let first = candidates.remove(i);
        candidates.insert(0, first);
    }
    candidates
}

/// One attempt's way through the addresses: each resolved into
/// candidates, tried in order, what failed kept for the error.
pub(crate) struct Dialing<'a> {
    settings: &'a Settings,
    candidates: Vec<Candidate<'a>>,
    failures: Vec<String>,
}

impl<'a> Dialing<'a> {
    pub(crate) fn new(settings: &'a Settings) -> Dialing<'a> {
        Dialing {
            settings,
            candidates: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// The addresses `address` resolved to, or why it did not.
    pub(crate) fn resolved(
        &mut self,
        address: &'a Address,
        addrs: io::Result<impl Iterator<Item = SocketAddr>>,
    ) {
        match addrs {
            Ok(addrs) => self
                .candidates
                .extend(addrs.map(|addr| Candidate { addr, address })),
            Err(e) => self.failures.push(format!("{}: {e}", address.full)),
        }
    }

    /// The candidates in the order to try them.
    pub(crate) fn in_order(&mut self) -> Vec<Candidate<'a>> {
        self.settings.in_order(std::mem::take(&mut self.candidates))
    }

    /// A candidate's connection came up: the next attempt starts there.
    pub(crate) fn connected(&self, c: &Candidate<'_>) {
        self.settings.worked(c.addr);
    }

    pub(crate) fn failed(&mut self, c: &Candidate<'_>, e: &io::Error) {
        let addr = c.addr;
        self.failures.push(if addr.to_string() == c.address.full {
            format!("{addr}: {e}")
        } else {
            format!("{} ({addr}): {e}", c.address.full)
        });
    }

    /// No candidate could be connected to.
    pub(crate) fn error(&self) -> Error {
        if self.failures.is_empty() {
            return Error::Unavailable(
                "cannot connect: the addresses resolve to no address; check the names".into(),
            );
        }
        Error::Unavailable(format!(
            "cannot connect to {}; check the addresses and that the server is up",
            self.failures.join("; ")
        ))
    }
}

/// A failed TLS handshake.
#[cfg(feature = "tls")]
pub(crate) fn connect_error(address: &Address, e: io::Error) -> Error {
    if let Some(tls) = tls_cause(&e) {
        return Error::Tls(format!("handshake with {}: {tls}", address.full));
    }
    if e.kind() == io::ErrorKind::TimedOut {
        return Error::Unavailable(format!("cannot connect to {}: timed out", address.full));
    }
    Error::Unavailable(format!("cannot connect to {}: {e}", address.full))
}

/// A failed read or write on an open connection: the connection is gone.
pub(crate) fn connection_error(op: &str, e: io::Error) -> Error {
    if let Some(tls) = tls_cause(&e) {
        return Error::Tls(format!("{op}: {tls}"));
    }
    Error::Unavailable(format!("connection lost: {op}: {e}"))
}

#[cfg(feature = "tls")]
fn tls_cause(e: &io::Error) -> Option<String> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .map(|t| t.to_string())
}

#[cfg(not(feature = "tls"))]
fn tls_cause(_: &io::Error) -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates(addresses: &[Address]) -> Vec<Candidate<'_>> {
        addresses
            .iter()
            .map(|address| Candidate {
                addr: address.full.parse().unwrap(),
                address,
            })
            .collect()
    }

    #[test]
    fn an_attempt_starts_from_the_address_that_worked_last() {
        let settings = Settings::new(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]);
        let addresses = settings.addresses.as_ref().unwrap();
        let ports = |c: Vec<Candidate<'_>>| c.iter().map(|c| c.addr.port()).collect::<Vec<_>>();
        assert_eq!(ports(settings.in_order(candidates(addresses))), [1, 2, 3]);
        settings.worked("127.0.0.1:3".parse().unwrap());
        assert_eq!(ports(settings.in_order(candidates(addresses))), [3, 1, 2]);
        // Shared by the clones; an address no longer resolved changes nothing.
        let clone = settings.clone();
        clone.worked("127.0.0.1:2".parse().unwrap());
        assert_eq!(ports(settings.in_order(candidates(addresses))), [2, 1, 3]);
        clone.worked("127.0.0.1:9".parse().unwrap());
        assert_eq!(ports(settings.in_order(candidates(addresses))), [1, 2, 3]);
    }

    #[test]
    fn no_address_or_a_bad_one_is_invalid_input() {
        let none: [&str; 0] = [];
        assert!(matches!(
            Settings::new(none).addresses,
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            Settings::new(["127.0.0.1:1", "nonsense"]).addresses,
            Err(Error::InvalidInput(_))
        ));
    }
}
