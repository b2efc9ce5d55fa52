//! The JSON codec (feature `json`), over serde_json.

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Codec, CodecError, Format};

/// The JSON codec: UTF-8 text that any language reads.
///
/// Compact by default; [`Json::pretty`] indents. Decoding accepts either, rejects anything but
/// whitespace after the value, and stops nesting at whichever limit comes first: serde_json's
/// own (127 arrays and objects, enums' included, one inside another) or memq's
/// [`MAX_DEPTH`](super::MAX_DEPTH) levels, which also counts `Some` (JSON reads it without a
/// byte of its own, so a recursive `Option` could otherwise recurse for ever).
///
/// JSON has no NaN or infinities: serde_json writes a non-finite `f32` or `f64` as `null`,
/// which decodes as `None` in an `Option` and fails to decode as a plain float. Likewise
/// `Some(None)` comes back as `None` (as it does with MessagePack). Non-finite floats
/// round-trip with postcard and MessagePack, `Some(None)` with postcard.
///
/// # Examples
///
/// ```
/// use memq::codec::{Codec, Json};
///
/// #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Reading {
///     sensor: String,
///     celsius: f32,
/// }
///
/// let codec = Json::new();
/// let reading = Reading { sensor: "porch".into(), celsius: 21.5 };
/// let bytes = codec.encode(&reading)?;
/// assert_eq!(bytes, br#"{"sensor":"porch","celsius":21.5}"#);
/// assert_eq!(codec.decode::<Reading>(&bytes)?, reading);
/// # Ok::<(), memq::codec::CodecError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Json {
    pretty: bool,
}

impl Json {
    /// Compact JSON, no whitespace.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::codec::{Codec, Json};
    ///
    /// static CODEC: Json = Json::new();
    /// assert_eq!(CODEC.encode(&[1, 2])?, b"[1,2]");
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    pub const fn new() -> Self {
        Self { pretty: false }
    }

    /// Indented JSON, for messages that people read.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::codec::{Codec, Json};
    ///
    /// assert_eq!(Json::pretty().encode(&[1, 2])?, b"[\n  1,\n  2\n]");
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    pub const fn pretty() -> Self {
        Self { pretty: true }
    }
}

impl Codec for Json {
    fn format(&self) -> Format {
        Format::Json
    }

    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::with_capacity(128);
        self.encode_into(value, &mut out)?;
        Ok(out)
    }

    fn encode_into<T: Serialize + ?Sized>(
        &self,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let start = out.len();
        let written = if self.pretty {
            serde_json::to_writer_pretty(&mut *out, value)
        } else {
            serde_json::to_writer(&mut *out, value)
        };
        written.map_err(|e| {
            out.truncate(start);
            CodecError::Encode(e.to_string())
        })
    }

    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let value = super::deserialize_within_depth(&mut de, super::MAX_DEPTH)?;
        de.end().map_err(|e| CodecError::Decode(e.to_string()))?;
        Ok(value)
    }
}
