//! What both drivers share between the caller's arguments and a session:
//! the checks made before connecting, the client's settings, and how a
//! failed connection is reported.

use std::io;
#[cfg(feature = "tls")]
use std::sync::Arc;
use std::time::Duration;

use crate::address::Address;
use crate::{wire, Error};

/// The default bound on the TCP connect and the TLS handshake.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes read at a time: several server frames, so a burst costs one call.
pub(crate) const READ_SIZE: usize = 512;

/// A client's settings, shared by its clones.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) address: Result<Address, Error>,
    pub(crate) connect_timeout: Duration,
    /// One configuration for every connection, so that rustls's session
    /// store (in the configuration) offers the ticket of one connection to
    /// the next: a reconnect resumes (rule of docs/security.md).
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
}

impl Settings {
    pub(crate) fn new(addr: &str) -> Settings {
        Settings {
            address: Address::parse(addr),
            connect_timeout: CONNECT_TIMEOUT,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// The checked address and the ACQUIRE frame, before anything connects.
    pub(crate) fn prepare(
        &self,
        name: &[u8],
        lease: Duration,
    ) -> Result<(&Address, Vec<u8>), Error> {
        let lease_ms = wire::lease_ms(lease)?;
        wire::check_name(name)?;
        let address = self.address.as_ref().map_err(Clone::clone)?;
        Ok((address, wire::encode_acquire(lease_ms, name)))
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

/// How long to wait for the grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    Forever,
    No,
    AtMost(Duration),
}

/// A failed connect or handshake.
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
