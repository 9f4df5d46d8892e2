//! The bytes of protocol version 1 (docs/protocol.md, "Frames") and the
//! checks a client makes before it connects.

use std::time::Duration;

use crate::Error;

pub(crate) const VERSION: u8 = 1;
pub(crate) const TYPE_ACQUIRE: u8 = 0x01;
pub(crate) const TYPE_HEARTBEAT: u8 = 0x02;
/// The end of a session: the server closes the connection first.
pub(crate) const TYPE_RELEASE: u8 = 0x03;
pub(crate) const TYPE_WAITING: u8 = 0x11;
pub(crate) const TYPE_ACQUIRED: u8 = 0x12;
pub(crate) const TYPE_ERROR: u8 = 0x13;

/// The longest lock name, in bytes. Part of the protocol, not a setting.
pub const MAX_NAME_BYTES: usize = 255;
/// The longest lease the wire carries: `u32::MAX` milliseconds (about 49.7 days).
pub const MAX_LEASE: Duration = Duration::from_millis(u32::MAX as u64);

/// The longest server frame: ERROR with a 255-byte reason.
const MAX_SERVER_FRAME: usize = 3 + 255;

/// The lease in whole milliseconds, a fraction rounded up so that the server
/// never drops a session earlier than asked.
pub(crate) fn lease_ms(lease: Duration) -> Result<u32, Error> {
    if lease < Duration::from_millis(1) {
        return Err(Error::InvalidInput(format!(
            "lease {lease:?} is shorter than 1 ms, the protocol's smallest lease: give at least Duration::from_millis(1)"
        )));
    }
    if lease > MAX_LEASE {
        return Err(Error::InvalidInput(format!(
            "lease {lease:?} is longer than the protocol's maximum of {} ms (about 49.7 days): give a shorter one",
            u32::MAX
        )));
    }
    let ms = lease.as_nanos().div_ceil(1_000_000);
    Ok(ms as u32)
}

/// The name as it goes on the wire: 1 to 255 bytes of valid UTF-8.
pub(crate) fn check_name(name: &[u8]) -> Result<(), Error> {
    if name.is_empty() {
        return Err(Error::InvalidInput(
            "empty lock name: give a name of 1 to 255 bytes of UTF-8".into(),
        ));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::InvalidInput(format!(
            "lock name of {} bytes is too long: the protocol allows at most {MAX_NAME_BYTES} bytes",
            name.len()
        )));
    }
    if let Err(e) = std::str::from_utf8(name) {
        return Err(Error::InvalidInput(format!(
            "lock name {name:?} is not valid UTF-8 ({e}): lock names are UTF-8 text"
        )));
    }
    Ok(())
}

/// ACQUIRE for a checked name and lease.
pub(crate) fn encode_acquire(lease_ms: u32, name: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + name.len());
    b.push(TYPE_ACQUIRE);
    b.push(VERSION);
    b.extend_from_slice(&lease_ms.to_be_bytes());
    b.extend_from_slice(&(name.len() as u16).to_be_bytes());
    b.extend_from_slice(name);
    b
}

/// One frame from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    Waiting,
    Acquired(u64),
    Error { code: u8, reason: String },
}

/// Reassembles server frames from a byte stream: one read may hold part of a
/// frame, or several (rule 2). It keeps at most one partial frame.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    pending: Vec<u8>,
}

impl Decoder {
    /// Appends bytes read from the connection.
    pub(crate) fn push(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
    }

    /// The next whole frame, `Ok(None)` when more bytes are needed, or an
    /// error naming a first byte that no server sends.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Frame>, String> {
        let Some(&typ) = self.pending.first() else {
            return Ok(None);
        };
        let (frame, size) = match typ {
            TYPE_WAITING => (Frame::Waiting, 1),
            TYPE_ACQUIRED => {
                if self.pending.len() < 9 {
                    return Ok(None);
                }
                let mut token = [0u8; 8];
                token.copy_from_slice(&self.pending[1..9]);
                (Frame::Acquired(u64::from_be_bytes(token)), 9)
            }
            TYPE_ERROR => {
                if self.pending.len() < 3 {
                    return Ok(None);
                }
                let size = 3 + self.pending[2] as usize;
                debug_assert!(size <= MAX_SERVER_FRAME);
                if self.pending.len() < size {
                    return Ok(None);
                }
                let reason = String::from_utf8_lossy(&self.pending[3..size]).into_owned();
                (
                    Frame::Error {
                        code: self.pending[1],
                        reason,
                    },
                    size,
                )
            }
            other => {
                return Err(format!(
                    "unknown frame type 0x{other:02x} (a server sends only 0x11, 0x12 and 0x13)"
                ))
            }
        };
        self.pending.drain(..size);
        Ok(Some(frame))
    }
}

/// The canonical text of the codes docs/protocol.md lists.
pub(crate) fn canonical(code: u8) -> Option<&'static str> {
    Some(match code {
        0x01 => "server shutting down",
        0x02 => "closed by administrator",
        0x10 => "unsupported protocol version",
        0x11 => "first message must be ACQUIRE",
        0x12 => "duplicate ACQUIRE",
        0x13 => "unknown message type",
        0x14 => "empty lock name",
        0x15 => "lock name too long",
        0x16 => "lock name is not valid UTF-8",
        0x17 => "lease must be positive",
        0x18 => "not authorized for lock",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn acquire_matches_the_golden_bytes() {
        // `acquire` in protocol/testdata/golden.txt.
        assert_eq!(
            encode_acquire(2000, b"nightly-import"),
            hex("01 01 000007d0 000e 6e696768746c792d696d706f7274")
        );
    }

    #[test]
    fn lease_rounds_a_fraction_of_a_millisecond_up() {
        assert_eq!(lease_ms(Duration::from_micros(1_500_250)).unwrap(), 1501);
        assert_eq!(lease_ms(Duration::from_millis(300)).unwrap(), 300);
        assert_eq!(lease_ms(Duration::from_nanos(1_000_001)).unwrap(), 2);
        assert_eq!(lease_ms(MAX_LEASE).unwrap(), u32::MAX);
        assert!(matches!(
            lease_ms(Duration::from_nanos(999_999)),
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            lease_ms(Duration::ZERO),
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            lease_ms(MAX_LEASE + Duration::from_nanos(1)),
            Err(Error::InvalidInput(_))
        ));
    }

    #[test]
    fn names_are_1_to_255_bytes_of_utf8() {
        assert!(check_name(&[b'a'; 255]).is_ok());
        assert!(check_name("é".as_bytes()).is_ok());
        for bad in [
            &b""[..],
            &[b'a'; 256][..],
            &b"\xff"[..],
            &b"ok\xed\xa0\x80"[..],
        ] {
            assert!(
                matches!(check_name(bad), Err(Error::InvalidInput(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn frames_split_anywhere_and_coalesced_decode_the_same() {
        let stream = hex("11 12 ffffffffffffffff 13 7f 03 616263 13 14 00");
        let want = vec![
            Frame::Waiting,
            Frame::Acquired(u64::MAX),
            Frame::Error {
                code: 0x7f,
                reason: "abc".into(),
            },
            Frame::Error {
                code: 0x14,
                reason: String::new(),
            },
        ];
        for chunk in 1..=stream.len() {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            for piece in stream.chunks(chunk) {
                d.push(piece);
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got, want, "read {chunk} bytes at a time");
        }
    }

    #[test]
    fn an_unknown_first_byte_is_an_error() {
        let mut d = Decoder::default();
        d.push(&[0x7e]);
        let err = d.next_frame().unwrap_err();
        assert!(err.contains("0x7e"), "{err}");
    }
}
