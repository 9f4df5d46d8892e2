//! A client for [monolock](https://github.com/monolock/monolock), a lock
//! server where one TCP connection is one claim on one named lock: waiters
//! queue in FIFO order, a closed or silent holder is replaced at once by a
//! pushed grant, and every grant carries a fencing token that only grows.
//!
//! Two APIs with the same rules: [`Client`] is async on tokio (feature
//! `tokio`, on by default), [`blocking::Client`] runs on std threads with
//! no runtime (feature `blocking`). Feature `tls` adds TLS and mutual TLS
//! through rustls (no OpenSSL).
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # async fn example() -> Result<(), monolock::Error> {
//! use std::time::Duration;
//! use monolock::{Client, Error};
//!
//! let client = Client::new("127.0.0.1:7070");
//! let lock = client.lock("nightly-import", Duration::from_secs(2)).await?; // waits in the FIFO queue
//! let token: u64 = lock.token();   // pass it with every write
//! assert!(lock.is_valid());        // false once 0.8 × lease passed unconfirmed
//! lock.release().await?;           // dropping the lock closes its connection too
//!
//! match client.try_lock("report", Duration::from_secs(2)).await {
//!     Err(Error::Busy) => println!("someone else holds it"),
//!     other => drop(other?),
//! }
//! # let _ = token;
//! # Ok(())
//! # }
//! ```
//!
//! # What the client guarantees, and what it does not
//!
//! Each lock is one connection with a permanent reader and one heartbeat in
//! flight, every `clamp(lease/4 − 2·smoothedRTT, min(100 ms, lease/4), lease/4)`.
//! The lock is lost when 0.8 × lease has passed since the send of the newest
//! request the server answered, at least 0.2 × lease before the server
//! could hand it on; [`Lock::is_valid`] reads the monotonic clock itself, so
//! it turns false at that moment even if no task has run since. After a loss
//! by silence the connection stays open until the work has stopped (the
//! lock is released or dropped, `run`'s work has returned or was cancelled)
//! or the lease has passed since the last send: closing is a release, and
//! the server's expiry, not the client's close, must hand the lock on while
//! the old work may still run. An ERROR, the server's close and a failed
//! read or write end the connection at once.
//!
//! Nothing in a client can stop a process that pauses between a check and
//! the write it guards. **Fencing tokens are what protects the resource**:
//! pass the token with every write and have the resource reject a token
//! smaller than the largest it has accepted.
//!
//! The wire contract is docs/protocol.md in the monolock repository; the
//! rules are cited there by number.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]
#![warn(missing_docs)]
// Without a driver (neither `tokio` nor `blocking`) only the error type and
// the limits are public; the session rules still build and are tested.
#![cfg_attr(not(any(feature = "tokio", feature = "blocking")), allow(dead_code))]

#[cfg(any(feature = "tokio", feature = "blocking"))]
mod address;
mod error;
mod retry;
mod schedule;
mod session;
mod wire;

#[cfg(feature = "blocking")]
pub mod blocking;
#[cfg(feature = "tokio")]
mod client;
#[cfg(any(feature = "tokio", feature = "blocking"))]
mod connect;
#[cfg(feature = "fence-postgres")]
pub mod fence;

#[cfg(feature = "tokio")]
pub use client::{Client, Held, Lock};
pub use error::Error;
pub use wire::{MAX_LEASE, MAX_NAME_BYTES};

#[cfg(feature = "tls")]
pub use rustls;

/// The server address [`Client::new`] is usually given: the server's default.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:7070";

/// The README's examples, compiled by `cargo test --doc`.
#[cfg(all(
    doctest,
    feature = "tokio",
    feature = "blocking",
    feature = "tls",
    feature = "fence-postgres"
))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
