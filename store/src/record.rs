//! One record's bytes on disk, and their check.
//!
//! ```text
//! header  len: u32    bytes in the body
//!         crc: u32    CRC-32C of the body
//! body    offset: u64
//!         timestamp: u64       milliseconds since the UNIX epoch, NO_TIMESTAMP for none
//!         key_len: u32         NO_KEY for a record without a key
//!         key: [u8; key_len]
//!         payload: [u8]        the rest of the body
//! ```
//!
//! All integers are little-endian. The CRC covers the whole body, so a record whose offset,
//! timestamp, key or payload changed on disk fails its check; a length that changed makes
//! the record fail its check or run past the end of its file.

/// Bytes of a record's header: its body's length and the body's CRC.
pub const HEADER: usize = 8;
/// Bytes of a body's fixed part: offset, timestamp and key length.
pub const BODY_FIXED: usize = 20;
/// The timestamp of a record published without one.
pub const NO_TIMESTAMP: u64 = u64::MAX;
/// The key length of a record published without a key.
const NO_KEY: u32 = u32::MAX;

/// A record read back from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its offset: the same `u64` offset as the in-memory topic's.
    pub offset: u64,
    /// Milliseconds since the UNIX epoch when it was published, if it has a timestamp.
    pub timestamp: Option<u64>,
    /// The key it was published with, if any.
    pub key: Option<Vec<u8>>,
    /// The message's bytes.
    pub payload: Vec<u8>,
}

/// Bytes a record of this key and payload takes on disk, header included.
pub fn encoded_len(key: Option<&[u8]>, payload: &[u8]) -> u64 {
    (HEADER + BODY_FIXED) as u64 + key.map_or(0, |k| k.len() as u64) + payload.len() as u64
}

/// Appends the record's bytes to `out`. The caller has checked that the key is shorter
/// than `u32::MAX` and that the body fits in a `u32` length (see [`encoded_len`]).
pub fn encode(
    out: &mut Vec<u8>,
    offset: u64,
    timestamp: Option<u64>,
    key: Option<&[u8]>,
    payload: &[u8],
) {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER]);
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&timestamp.unwrap_or(NO_TIMESTAMP).to_le_bytes());
    match key {
        Some(k) => {
            out.extend_from_slice(&(k.len() as u32).to_le_bytes());
            out.extend_from_slice(k);
        }
        None => out.extend_from_slice(&NO_KEY.to_le_bytes()),
    }
    out.extend_from_slice(payload);
    let body = &out[start + HEADER..];
    let len = body.len() as u32;
    let crc = crc32c::crc32c(body);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// A header as read from disk, not yet checked against its body.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    /// Bytes in the body, as the header says.
    pub len: u32,
    /// The CRC the body should have.
    pub crc: u32,
}

impl Header {
    /// Reads a header from its 8 bytes.
    pub fn parse(b: &[u8; HEADER]) -> Header {
        Header {
            len: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            crc: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    /// Whether `len` can be a body's length: at least the fixed part, at most `max`.
    pub fn plausible(&self, max: u32) -> bool {
        self.len as usize >= BODY_FIXED && self.len <= max
    }
}

/// Why a body did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadBody {
    /// The body's CRC is not the header's.
    Crc,
    /// The CRC matches but the key length runs past the body.
    KeyLength,
}

impl BadBody {
    /// What went wrong, for error messages.
    pub fn reason(self) -> &'static str {
        match self {
            BadBody::Crc => "CRC-32C mismatch",
            BadBody::KeyLength => "key length runs past the record",
        }
    }
}

/// Checks `body` against `header`'s CRC; returns the body's offset if it is sound.
pub fn check(header: Header, body: &[u8]) -> Result<u64, BadBody> {
    if crc32c::crc32c(body) != header.crc {
        return Err(BadBody::Crc);
    }
    let (offset, _, key_len) = fixed(body);
    if key_len != NO_KEY && key_len as usize > body.len() - BODY_FIXED {
        return Err(BadBody::KeyLength);
    }
    Ok(offset)
}

/// Decodes a body that passed [`check`].
pub fn decode(body: &[u8]) -> Record {
    let (offset, ts, key_len) = fixed(body);
    let rest = &body[BODY_FIXED..];
    let (key, payload) = if key_len == NO_KEY {
        (None, rest)
    } else {
        let (k, p) = rest.split_at(key_len as usize);
        (Some(k.to_vec()), p)
    };
    Record {
        offset,
        timestamp: (ts != NO_TIMESTAMP).then_some(ts),
        key,
        payload: payload.to_vec(),
    }
}

/// A checked body's offset and timestamp, without copying its key or payload.
pub fn offset_and_timestamp(body: &[u8]) -> (u64, Option<u64>) {
    let (offset, ts, _) = fixed(body);
    (offset, (ts != NO_TIMESTAMP).then_some(ts))
}

fn fixed(body: &[u8]) -> (u64, u64, u32) {
    let u64_at = |i: usize| {
        let mut b = [0; 8];
        b.copy_from_slice(&body[i..i + 8]);
        u64::from_le_bytes(b)
    };
    let mut k = [0; 4];
    k.copy_from_slice(&body[16..20]);
    (u64_at(0), u64_at(8), u32::from_le_bytes(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(ts: Option<u64>, key: Option<&[u8]>, payload: &[u8]) {
        let mut buf = vec![0xAA];
        encode(&mut buf, 42, ts, key, payload);
        assert_eq!(buf.len() as u64 - 1, encoded_len(key, payload));
        let mut h = [0; HEADER];
        h.copy_from_slice(&buf[1..1 + HEADER]);
        let header = Header::parse(&h);
        let body = &buf[1 + HEADER..];
        assert_eq!(header.len as usize, body.len());
        assert_eq!(check(header, body), Ok(42));
        let r = decode(body);
        assert_eq!(r.offset, 42);
        assert_eq!(r.timestamp, ts);
        assert_eq!(r.key.as_deref(), key);
        assert_eq!(r.payload, payload);
    }

    #[test]
    fn records_round_trip_with_and_without_key_and_timestamp() {
        roundtrip(None, None, b"");
        roundtrip(Some(7), None, b"payload");
        roundtrip(Some(0), Some(b""), b"x");
        roundtrip(None, Some(b"key"), &[0u8; 1000]);
    }

    #[test]
    fn every_flipped_bit_of_a_body_fails_the_check() {
        let mut buf = Vec::new();
        encode(&mut buf, 3, Some(9), Some(b"k"), b"hello");
        let mut h = [0; HEADER];
        h.copy_from_slice(&buf[..HEADER]);
        let header = Header::parse(&h);
        for i in HEADER..buf.len() {
            for bit in 0..8 {
                let mut body = buf[HEADER..].to_vec();
                body[i - HEADER] ^= 1 << bit;
                assert_eq!(
                    check(header, &body),
                    Err(BadBody::Crc),
                    "byte {i} bit {bit}"
                );
            }
        }
    }
}
