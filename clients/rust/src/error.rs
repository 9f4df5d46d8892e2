//! The one error type of the client.

use std::fmt;
use std::io;
use std::sync::Arc;

use crate::wire;

/// Everything the client reports. Branch on the variant and on
/// [`Error::code`], never on the message text.
///
/// The variants follow the retry rules of docs/protocol.md (rule 6):
/// [`Unavailable`](Error::Unavailable) and a [`Server`](Error::Server) error
/// with a code below `0x10` may pass on a new attempt
/// ([`Error::is_retriable`]); the others will not.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub enum Error {
    /// Someone else holds the lock, and the call did not wait
    /// (`try_lock`) or its wait elapsed (`lock_timeout`).
    Busy,
    /// The server could not be used for now: no connection, the connection
    /// was lost, or no answer came within 0.8 × lease. A new attempt may
    /// succeed.
    Unavailable(String),
    /// The server ended the session with an ERROR frame. Below `0x10` a
    /// server condition (retriable: `0x01` "server shutting down", `0x02`
    /// "closed by administrator"), `0x10` and above a client error that
    /// asking again will not change. `reason` is the server's text for
    /// people, unchanged.
    Server {
        /// The error code: the contract.
        code: u8,
        /// The server's reason text (may be empty).
        reason: String,
    },
    /// The lock was held and ownership ended other than by the caller's
    /// release; `cause` says why (an [`Unavailable`](Error::Unavailable), a
    /// [`Server`](Error::Server) or a [`Protocol`](Error::Protocol) error).
    Lost {
        /// Why the lock was lost.
        cause: Box<Error>,
    },
    /// The name or the lease cannot be sent: refused before connecting.
    InvalidInput(String),
    /// The server sent something the protocol does not allow at that point
    /// (an unknown frame type, an unasked answer, WAITING after ACQUIRED, a
    /// changed token). Nothing after it is trusted.
    Protocol(String),
    /// The TLS handshake failed: a certificate that does not verify, a
    /// server that does not speak TLS, or a client certificate the server
    /// refused. Not retried: fix the configuration.
    Tls(String),
    /// A local I/O failure that is not the server's (a thread that cannot
    /// be started, a socket option that cannot be set).
    Io(Arc<io::Error>),
}

impl Error {
    /// The code of the server's ERROR frame behind this error: of a
    /// [`Server`](Error::Server) error, or of the cause of a
    /// [`Lost`](Error::Lost) one.
    pub fn code(&self) -> Option<u8> {
        match self {
            Error::Server { code, .. } => Some(*code),
            Error::Lost { cause } => cause.code(),
            _ => None,
        }
    }

    /// Whether a new attempt (a new connection at the back of the queue)
    /// may succeed where this one failed: [`Unavailable`](Error::Unavailable)
    /// and server conditions (codes below `0x10`).
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Unavailable(_) => true,
            Error::Server { code, .. } => *code < 0x10,
            _ => false,
        }
    }

    pub(crate) fn lost(cause: Error) -> Error {
        Error::Lost {
            cause: Box::new(cause),
        }
    }

    pub(crate) fn io(e: io::Error) -> Error {
        Error::Io(Arc::new(e))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Busy => f.write_str(
                "monolock: the lock is held by someone else: wait for it (lock) or try again later",
            ),
            Error::Unavailable(detail) => write!(
                f,
                "monolock: server unavailable: {detail}; a new attempt may succeed"
            ),
            Error::Server { code, reason } => {
                let shown = if reason.is_empty() {
                    wire::canonical(*code).unwrap_or(if *code < 0x10 {
                        "server condition"
                    } else {
                        "client error"
                    })
                } else {
                    reason
                };
                let advice = if *code < 0x10 {
                    "reconnect to try again"
                } else {
                    "the request itself was refused: fix it, asking again gets the same answer"
                };
                write!(f, "monolock: server error 0x{code:02x}: {shown}; {advice}")
            }
            Error::Lost { cause } => write!(
                f,
                "monolock: lock lost: {cause}; stop the work, a new attempt queues again"
            ),
            Error::InvalidInput(detail) => write!(f, "monolock: {detail}"),
            Error::Protocol(detail) => write!(
                f,
                "monolock: protocol violation by the server: {detail}; check that the address is a monolock server"
            ),
            Error::Tls(detail) => write!(
                f,
                "monolock: TLS: {detail}; check the server certificate, the CA in the rustls::ClientConfig and the client certificate"
            ),
            Error::Io(e) => write!(f, "monolock: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Lost { cause } => Some(cause.as_ref()),
            Error::Io(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_classified_by_range_never_by_list() {
        for (code, retriable) in [
            (0x01, true),
            (0x05, true),
            (0x0f, true),
            (0x10, false),
            (0x18, false),
            (0x7f, false),
        ] {
            let e = Error::Server {
                code,
                reason: String::new(),
            };
            assert_eq!(e.is_retriable(), retriable, "0x{code:02x}");
            assert_eq!(e.code(), Some(code));
            assert_eq!(Error::lost(e).code(), Some(code));
        }
        assert!(Error::Unavailable("x".into()).is_retriable());
        assert!(!Error::Busy.is_retriable());
        assert!(!Error::Protocol("x".into()).is_retriable());
        assert_eq!(Error::Busy.code(), None);
    }

    #[test]
    fn an_empty_reason_shows_the_canonical_text() {
        let e = Error::Server {
            code: 0x14,
            reason: String::new(),
        };
        assert!(e.to_string().contains("empty lock name"), "{e}");
        let e = Error::Server {
            code: 0x05,
            reason: String::new(),
        };
        assert!(e.to_string().contains("server condition"), "{e}");
    }
}
