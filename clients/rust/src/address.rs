//! The server address, checked before anything connects.

use crate::Error;

/// `host:port` split into its parts; `[v6]:port` loses its brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    /// As given, for connecting and for messages.
    pub(crate) full: String,
    /// The host alone: the TLS server name (a DNS name or an IP address).
    pub(crate) host: String,
}

impl Address {
    pub(crate) fn parse(addr: &str) -> Result<Address, Error> {
        let bad = || {
            Error::InvalidInput(format!(
                "address {addr:?} is not host:port: give one such as 127.0.0.1:7070 or [::1]:7070"
            ))
        };
        let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
        if host.is_empty() || port.parse::<u16>().is_err() {
            return Err(bad());
        }
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        Ok(Address {
            full: addr.to_string(),
            host: host.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port() {
        assert_eq!(Address::parse("127.0.0.1:7070").unwrap().host, "127.0.0.1");
        assert_eq!(Address::parse("[::1]:7070").unwrap().host, "::1");
        assert_eq!(
            Address::parse("locks.internal:7443").unwrap().host,
            "locks.internal"
        );
        for bad in ["nonsense", ":7070", "host:", "host:70700", "host:x"] {
            assert!(
                matches!(Address::parse(bad), Err(Error::InvalidInput(_))),
                "{bad}"
            );
        }
    }
}
