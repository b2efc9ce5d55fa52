//! The MessagePack codec (feature `msgpack`), over rmp-serde.

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Codec, CodecError, Format};

/// The MessagePack codec: compact binary that any language reads.
///
/// [`MsgPack::new`] writes structs as maps keyed by field name, which other languages read as
/// dictionaries and which survive added or reordered fields; [`MsgPack::compact`] writes them
/// as arrays, smaller but tied to field order. Decoding reads both layouts, rejects trailing
/// bytes and stops at [`MsgPack::MAX_DEPTH`] levels of nesting (enums and options
/// included).
///
/// # Examples
///
/// ```
/// use memq::codec::{Codec, MsgPack};
///
/// #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Job {
///     id: u32,
///     retries: u8,
/// }
///
/// let job = Job { id: 9, retries: 2 };
/// let named = MsgPack::new().encode(&job)?;
/// let compact = MsgPack::compact().encode(&job)?;
/// assert!(compact.len() < named.len());
/// // Either codec reads either layout.
/// assert_eq!(MsgPack::new().decode::<Job>(&compact)?, job);
/// assert_eq!(MsgPack::compact().decode::<Job>(&named)?, job);
/// # Ok::<(), memq::codec::CodecError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MsgPack {
    compact: bool,
}

impl MsgPack {
    /// The deepest nesting that decoding accepts, [`MAX_DEPTH`](super::MAX_DEPTH): arrays,
    /// maps, enum variants and `Some` each count a level, a plain value none
    /// (`[[1]]` is depth 2), so that hostile input ends in an error rather than a stack
    /// overflow.
    pub const MAX_DEPTH: usize = super::MAX_DEPTH;

    /// MessagePack with structs as maps keyed by field name.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::codec::{Codec, MsgPack};
    ///
    /// #[derive(serde::Serialize)]
    /// struct Point {
    ///     x: u8,
    /// }
    ///
    /// // fixmap of 1, fixstr "x", 1
    /// assert_eq!(MsgPack::new().encode(&Point { x: 1 })?, [0x81, 0xa1, b'x', 1]);
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    pub const fn new() -> Self {
        Self { compact: false }
    }

    /// MessagePack with structs as arrays of their fields in declaration order.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::codec::{Codec, MsgPack};
    ///
    /// #[derive(serde::Serialize)]
    /// struct Point {
    ///     x: u8,
    /// }
    ///
    /// // fixarray of 1, 1
    /// assert_eq!(MsgPack::compact().encode(&Point { x: 1 })?, [0x91, 1]);
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    pub const fn compact() -> Self {
        Self { compact: true }
    }
}

impl Codec for MsgPack {
    fn format(&self) -> Format {
        Format::MsgPack
    }

    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::with_capacity(64);
        self.encode_into(value, &mut out)?;
        Ok(out)
    }

    fn encode_into<T: Serialize + ?Sized>(
        &self,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let start = out.len();
        let written = if self.compact {
            rmp_serde::encode::write(out, value)
        } else {
            rmp_serde::encode::write_named(out, value)
        };
        written.map_err(|e| {
            out.truncate(start);
            CodecError::Encode(e.to_string())
        })
    }

    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError> {
        // Reading through `&mut &[u8]` leaves in `rest` whatever the value did not use.
        let mut rest = bytes;
        let mut de = rmp_serde::Deserializer::new(&mut rest);
        // rmp-serde counts the outermost level against its limit too: one more lets exactly
        // `MAX_DEPTH` levels through.
        de.set_max_depth(Self::MAX_DEPTH + 1);
        // rmp-serde counts arrays and maps only; enums, and options that recurse without
        // reading a byte, are counted by the adapter.
        let value = super::deserialize_within_depth(&mut de, Self::MAX_DEPTH)?;
        drop(de);
        if rest.is_empty() {
            Ok(value)
        } else {
            Err(CodecError::Decode(format!(
                "{} trailing bytes after the value",
                rest.len()
            )))
        }
    }
}
