//! Codecs: typed values to bytes for byte topics, and back.
//!
//! This module owns the [`Codec`] trait, the [`CodecError`] type, the [`Format`] and
//! [`Compression`] ids that memq's magic header carries, and the [`Postcard`] codec (feature
//! `postcard`), the one codec that needs neither `std` nor an allocator beyond `alloc`.
//! It never touches a topic, a log or a subscriber: a codec is a pure function over bytes.
//! JSON, MessagePack, gzip, zstd, the header itself and the typed helpers over topics live in
//! the `memq` crate (`memq::codec`), which re-exports everything defined here.
//!
//! # Examples
//!
//! Code that is generic over the wire format takes any [`Codec`]:
//!
//! ```
//! # #[allow(unused_imports)] // for the cfg below
//! # use memq_core as memq;
//! # #[cfg(feature = "postcard")]
//! # {
//! use memq::codec::{Codec, CodecError, Postcard};
//! use serde::{de::DeserializeOwned, Serialize};
//!
//! /// Encodes `value` and decodes it again, as a receiver would see it.
//! fn through_the_wire<C, T>(codec: &C, value: &T) -> Result<T, CodecError>
//! where
//!     C: Codec,
//!     T: Serialize + DeserializeOwned,
//! {
//!     let bytes = codec.encode(value)?;
//!     codec.decode(&bytes)
//! }
//!
//! let reading = (String::from("porch"), 21.5f32);
//! assert_eq!(through_the_wire(&Postcard::new(), &reading)?, reading);
//! # }
//! # Ok::<(), memq::codec::CodecError>(())
//! ```

// The docs link to `Postcard`: here with the `postcard` feature, else to the crate's list
// of features (after a blank line, so that the definition does not continue the paragraph
// above).
#![doc = ""]
#![cfg_attr(feature = "postcard", doc = "[`Postcard`]: Postcard")]
#![cfg_attr(not(feature = "postcard"), doc = "[`Postcard`]: crate#features")]

use alloc::string::String;
#[cfg(feature = "postcard")]
use alloc::string::ToString;
use alloc::vec::Vec;
use core::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;

mod depth;
pub use depth::{deserialize_within_depth, MAX_DEPTH};

/// Turns values into bytes and bytes back into values.
///
/// A codec is a value (usually zero-sized or a few bytes of settings) rather than a set of
/// free functions, so that wrappers compose: `memq::codec` has `Gzip<C>`, `Zstd<C>` and
/// `Framed<C>` (the magic header) that wrap any codec.
///
/// Implementations never panic on bad input: every failure is a [`CodecError`].
/// `decode` rejects trailing bytes after the value wherever the format can tell, because in a
/// message queue one message holds exactly one value and anything after it means corruption or
/// the wrong codec.
///
/// The trait is not object safe (its methods are generic over the value type); code that picks
/// a codec at run time matches on a [`Format`] instead.
///
/// # Examples
///
/// A codec wrapper of your own: it refuses to produce messages over a size limit.
///
/// ```
/// # #[allow(unused_imports)] // for the cfg below
/// # use memq_core as memq;
/// # #[cfg(feature = "postcard")]
/// # {
/// use memq::codec::{Codec, CodecError, Compression, Format, Postcard};
/// use serde::{de::DeserializeOwned, Serialize};
///
/// /// Wraps a codec and refuses to produce messages over `max` bytes.
/// #[derive(Debug)]
/// struct Limited<C> {
///     inner: C,
///     max: usize,
/// }
///
/// impl<C: Codec> Codec for Limited<C> {
///     fn format(&self) -> Format {
///         self.inner.format()
///     }
///
///     fn compression(&self) -> Compression {
///         self.inner.compression()
///     }
///
///     fn writes_header(&self) -> bool {
///         self.inner.writes_header()
///     }
///
///     fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, CodecError> {
///         let bytes = self.inner.encode(value)?;
///         if bytes.len() > self.max {
///             return Err(CodecError::Encode(format!(
///                 "message of {} bytes is over the limit of {}",
///                 bytes.len(),
///                 self.max
///             )));
///         }
///         Ok(bytes)
///     }
///
///     fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError> {
///         self.inner.decode(bytes)
///     }
/// }
///
/// let codec = Limited { inner: Postcard::new(), max: 8 };
/// assert_eq!(codec.encode("short")?.len(), 6);
/// assert!(matches!(codec.encode("much too long"), Err(CodecError::Encode(_))));
/// # }
/// # Ok::<(), memq::codec::CodecError>(())
/// ```
pub trait Codec {
    /// The wire format this codec produces, as recorded in the magic header.
    ///
    /// Wrappers that only transform bytes (compression, the header) report the format of the
    /// codec they wrap.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[allow(unused_imports)] // for the cfg below
    /// # use memq_core as memq;
    /// # #[cfg(feature = "postcard")]
    /// # {
    /// use memq::codec::{Codec, Format, Postcard};
    ///
    /// assert_eq!(Postcard::new().format(), Format::Postcard);
    /// # }
    /// ```
    fn format(&self) -> Format;

    /// The compression this codec applies on top of its format, as recorded in the magic
    /// header.
    ///
    /// The default is [`Compression::None`]; only compression wrappers override it.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[allow(unused_imports)] // for the cfg below
    /// # use memq_core as memq;
    /// # #[cfg(feature = "postcard")]
    /// # {
    /// use memq::codec::{Codec, Compression, Postcard};
    ///
    /// assert_eq!(Postcard::new().compression(), Compression::None);
    /// # }
    /// ```
    fn compression(&self) -> Compression {
        Compression::None
    }

    /// Whether this codec's output starts with the magic header: `true` for `memq`'s
    /// `Framed` and for wrappers that pass a framed codec's bytes through.
    ///
    /// The header must be the outermost layer, once, for a reader that knows only the
    /// header to find it, so `Framed` and the compression wrappers refuse to wrap a codec
    /// that answers `true`. The default is `false`; a wrapper of your own that transforms
    /// another codec's bytes should answer what its inner codec answers.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[allow(unused_imports)] // for the cfg below
    /// # use memq_core as memq;
    /// # #[cfg(feature = "postcard")]
    /// # {
    /// use memq::codec::{Codec, Postcard};
    ///
    /// assert!(!Postcard::new().writes_header());
    /// # }
    /// ```
    fn writes_header(&self) -> bool {
        false
    }

    /// Encodes `value` into a new buffer.
    ///
    /// # Errors
    ///
    /// [`CodecError::Encode`] when the value cannot be represented in this format (a map
    /// with non-string keys in JSON, a sequence of unknown length in postcard, a failing
    /// `Serialize` impl), [`CodecError::Compress`] from compression wrappers.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[allow(unused_imports)] // for the cfg below
    /// # use memq_core as memq;
    /// # #[cfg(feature = "postcard")]
    /// # {
    /// use memq::codec::{Codec, Postcard};
    ///
    /// // postcard: 300 as a varint, then the string's length and bytes
    /// assert_eq!(Postcard::new().encode(&(300u16, "hi"))?, [0xac, 0x02, 2, b'h', b'i']);
    /// # }
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, CodecError>;

    /// Appends the encoding of `value` to `out`.
    ///
    /// On error `out` is left as it was: its length is restored, though its capacity may have
    /// grown. The default implementation calls [`encode`](Codec::encode) and appends;
    /// codecs that can write in place override it so that wrappers (the magic header) add no
    /// copy.
    ///
    /// # Errors
    ///
    /// The same as [`encode`](Codec::encode).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[allow(unused_imports)] // for the cfg below
    /// # use memq_core as memq;
    /// # #[cfg(feature = "postcard")]
    /// # {
    /// use memq::codec::{Codec, Postcard};
    ///
    /// // Several values back to back in one buffer, each after a one-byte tag.
    /// let mut buf = Vec::new();
    /// for (tag, value) in [(b'a', 1u32), (b'b', 2)] {
    ///     buf.push(tag);
    ///     Postcard::new().encode_into(&value, &mut buf)?;
    /// }
    /// assert_eq!(buf, [b'a', 1, b'b', 2]);
    /// # }
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    fn encode_into<T: Serialize + ?Sized>(
        &self,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let bytes = self.encode(value)?;
        out.extend_from_slice(&bytes);
        Ok(())
    }

    /// Decodes one value that fills `bytes` exactly.
    ///
    /// # Errors
    ///
    /// [`CodecError::Decode`] when the bytes are not a valid encoding of `T` in this format
    /// (including trailing bytes after the value, where the format can tell);
    /// [`CodecError::Decompress`] and the header errors from wrappers.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[allow(unused_imports)] // for the cfg below
    /// # use memq_core as memq;
    /// # #[cfg(feature = "postcard")]
    /// # {
    /// use memq::codec::{Codec, CodecError, Postcard};
    ///
    /// assert_eq!(Postcard::new().decode::<u64>(&[42])?, 42);
    /// // One value fills the bytes exactly.
    /// assert!(matches!(Postcard::new().decode::<u64>(&[42, 0]), Err(CodecError::Decode(_))));
    /// # }
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError>;
}

/// A shared reference to a codec is a codec, so helpers can take `&C` or `C` alike.
impl<C: Codec + ?Sized> Codec for &C {
    fn format(&self) -> Format {
        (**self).format()
    }

    fn compression(&self) -> Compression {
        (**self).compression()
    }

    fn writes_header(&self) -> bool {
        (**self).writes_header()
    }

    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, CodecError> {
        (**self).encode(value)
    }

    fn encode_into<T: Serialize + ?Sized>(
        &self,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        (**self).encode_into(value, out)
    }

    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError> {
        (**self).decode(bytes)
    }
}

/// A wire format, as identified by one byte in memq's magic header.
///
/// The ids are part of the wire format and never change:
///
/// | variant            | id           |
/// |--------------------|--------------|
/// | (reserved)         | `0`          |
/// | [`Postcard`](Format::Postcard) | `1` |
/// | [`Json`](Format::Json)         | `2` |
/// | [`MsgPack`](Format::MsgPack)   | `3` |
/// | (reserved for memq) | `4..=127`   |
/// | [`Custom(id)`](Format::Custom) | `128..=255` |
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::codec::Format;
///
/// assert_eq!(Format::Json.id(), 2);
/// assert_eq!(Format::from_id(2), Some(Format::Json));
/// assert_eq!(Format::from_id(200), Some(Format::Custom(200)));
/// assert_eq!(Format::from_id(42), None);
/// assert_eq!(Format::MsgPack.to_string(), "msgpack");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// [postcard](https://docs.rs/postcard): compact, not self-describing, `no_std`.
    Postcard,
    /// JSON: text, self-describing, readable from any language.
    Json,
    /// MessagePack: binary, self-describing, readable from any language.
    MsgPack,
    /// A format of the application's own. The id is the header byte itself and must be in
    /// `128..=255`; lower ids are memq's, and writing a header with one fails with
    /// [`CodecError::Encode`].
    Custom(u8),
}

impl Format {
    /// The first id available to [`Format::Custom`].
    pub const CUSTOM_MIN: u8 = 128;

    /// The byte that identifies this format in the magic header.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::codec::Format;
    ///
    /// assert_eq!(Format::Postcard.id(), 1);
    /// assert_eq!(Format::Custom(130).id(), 130);
    /// ```
    pub const fn id(self) -> u8 {
        match self {
            Format::Postcard => 1,
            Format::Json => 2,
            Format::MsgPack => 3,
            Format::Custom(id) => id,
        }
    }

    /// The format a header byte stands for, or `None` for an id that memq does not know.
    ///
    /// Ids `128..=255` are always [`Format::Custom`]. `from_id(f.id()) == Some(f)` holds for
    /// every valid format; it fails exactly for a `Custom` id below
    /// [`CUSTOM_MIN`](Format::CUSTOM_MIN).
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::codec::Format;
    ///
    /// assert_eq!(Format::from_id(3), Some(Format::MsgPack));
    /// assert_eq!(Format::from_id(0), None);
    /// assert_eq!(Format::from_id(Format::Custom(5).id()), None);
    /// ```
    pub const fn from_id(id: u8) -> Option<Format> {
        match id {
            1 => Some(Format::Postcard),
            2 => Some(Format::Json),
            3 => Some(Format::MsgPack),
            Format::CUSTOM_MIN..=u8::MAX => Some(Format::Custom(id)),
            _ => None,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Format::Postcard => f.write_str("postcard"),
            Format::Json => f.write_str("json"),
            Format::MsgPack => f.write_str("msgpack"),
            Format::Custom(id) => write!(f, "custom format {id}"),
        }
    }
}

/// A compression layer, as identified by one byte in memq's magic header.
///
/// The ids are part of the wire format and never change:
///
/// | variant                          | id        |
/// |----------------------------------|-----------|
/// | [`None`](Compression::None)      | `0`       |
/// | [`Gzip`](Compression::Gzip)      | `1`       |
/// | [`Zstd`](Compression::Zstd)      | `2`       |
/// | (reserved for memq)              | `3..=255` |
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::codec::Compression;
///
/// assert_eq!(Compression::Zstd.id(), 2);
/// assert_eq!(Compression::from_id(1), Some(Compression::Gzip));
/// assert_eq!(Compression::from_id(7), None);
/// assert_eq!(Compression::Gzip.to_string(), "gzip");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Compression {
    /// The payload is the format's bytes as they are.
    #[default]
    None,
    /// The payload is one gzip member (RFC 1952).
    Gzip,
    /// The payload is exactly one zstd frame (RFC 8878), as memq writes it; a payload of
    /// several frames is refused as having trailing bytes.
    Zstd,
}

impl Compression {
    /// The byte that identifies this compression in the magic header.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::codec::Compression;
    ///
    /// assert_eq!(Compression::None.id(), 0);
    /// ```
    pub const fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Zstd => 2,
        }
    }

    /// The compression a header byte stands for, or `None` for an id memq does not know.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::codec::Compression;
    ///
    /// assert_eq!(Compression::from_id(2), Some(Compression::Zstd));
    /// assert_eq!(Compression::from_id(200), None);
    /// ```
    pub const fn from_id(id: u8) -> Option<Compression> {
        match id {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        })
    }
}

/// Why a value could not be encoded or decoded.
///
/// Variants carry the underlying library's message where there is one, and the offending
/// id where the header was at fault. The `Display` text is lowercase with no trailing period,
/// ready to be wrapped in a larger message.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::codec::CodecError;
///
/// let err = CodecError::UnknownFormat(42);
/// assert_eq!(err.to_string(), "unknown format id 42 in header");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CodecError {
    /// The value could not be serialized in this format.
    Encode(String),
    /// The bytes are not a valid encoding of the requested type in this format.
    Decode(String),
    /// The compressor failed.
    Compress(String),
    /// The payload is not valid compressed data, or it decompresses to more than the
    /// configured limit.
    Decompress(String),
    /// The bytes do not start with the magic `"MQ"`: they were not written with a header.
    BadMagic,
    /// The bytes end before the header does.
    TruncatedHeader {
        /// The length of the header.
        needed: usize,
        /// How many bytes there were.
        got: usize,
    },
    /// The header has a version this build does not read.
    UnsupportedVersion(u8),
    /// The header names a format id that memq does not know.
    UnknownFormat(u8),
    /// The header names a compression id that memq does not know.
    UnknownCompression(u8),
    /// The header names a format that this build cannot decode (its feature is off, or it is
    /// a [`Format::Custom`] format).
    FormatUnavailable(Format),
    /// The header names a compression that this build cannot undo (its feature is off).
    CompressionUnavailable(Compression),
    /// The header names another format than the codec that was asked to decode.
    FormatMismatch {
        /// The codec's format.
        expected: Format,
        /// The header's format.
        found: Format,
    },
    /// The header names another compression than the codec that was asked to decode.
    CompressionMismatch {
        /// The codec's compression.
        expected: Compression,
        /// The header's compression.
        found: Compression,
    },
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::Encode(msg) => write!(f, "encoding failed: {msg}"),
            CodecError::Decode(msg) => write!(f, "decoding failed: {msg}"),
            CodecError::Compress(msg) => write!(f, "compression failed: {msg}"),
            CodecError::Decompress(msg) => write!(f, "decompression failed: {msg}"),
            CodecError::BadMagic => f.write_str("no memq header: bytes do not start with \"MQ\""),
            CodecError::TruncatedHeader { needed, got } => {
                write!(f, "truncated header: need {needed} bytes, got {got}")
            }
            CodecError::UnsupportedVersion(version) => {
                write!(f, "unsupported header version {version}")
            }
            CodecError::UnknownFormat(id) => write!(f, "unknown format id {id} in header"),
            CodecError::UnknownCompression(id) => {
                write!(f, "unknown compression id {id} in header")
            }
            CodecError::FormatUnavailable(format) => {
                write!(f, "no decoder for format {format} in this build")
            }
            CodecError::CompressionUnavailable(compression) => {
                write!(f, "no decompressor for {compression} in this build")
            }
            CodecError::FormatMismatch { expected, found } => {
                write!(f, "header says format {found}, the codec reads {expected}")
            }
            CodecError::CompressionMismatch { expected, found } => {
                write!(
                    f,
                    "header says compression {found}, the codec reads {expected}"
                )
            }
        }
    }
}

impl core::error::Error for CodecError {}

/// The [postcard](https://docs.rs/postcard) codec: compact, fast, `no_std`.
///
/// Postcard is not self-describing: the reader must decode into the same type (or a
/// wire-compatible one) that the writer encoded. Use it between Rust programs that share their
/// message types; use JSON or MessagePack (in `memq::codec`) to talk to other languages.
///
/// Decoding rejects trailing bytes after the value, and data nested more than [`MAX_DEPTH`]
/// levels: postcard has no nesting limit of its own, and decoding a recursive type (a tree of
/// `Vec<Self>`, an enum that contains itself) from hostile bytes would otherwise exhaust the
/// stack.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::codec::{Codec, Postcard};
///
/// let codec = Postcard::new();
/// let bytes = codec.encode(&(7u32, "seven"))?;
/// let (n, name): (u32, String) = codec.decode(&bytes)?;
/// assert_eq!((n, name.as_str()), (7, "seven"));
/// # Ok::<(), memq::codec::CodecError>(())
/// ```
#[cfg(feature = "postcard")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Postcard;

#[cfg(feature = "postcard")]
impl Postcard {
    /// The postcard codec.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::codec::{Codec, Format, Postcard};
    ///
    /// static CODEC: Postcard = Postcard::new();
    /// assert_eq!(CODEC.format(), Format::Postcard);
    /// ```
    pub const fn new() -> Self {
        Postcard
    }
}

#[cfg(feature = "postcard")]
impl Codec for Postcard {
    fn format(&self) -> Format {
        Format::Postcard
    }

    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, CodecError> {
        postcard::to_allocvec(value).map_err(|e| CodecError::Encode(e.to_string()))
    }

    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError> {
        let mut de = postcard::Deserializer::from_bytes(bytes);
        let value = deserialize_within_depth(&mut de, MAX_DEPTH)?;
        let rest = de
            .finalize()
            .map_err(|e| CodecError::Decode(e.to_string()))?;
        if rest.is_empty() {
            Ok(value)
        } else {
            Err(CodecError::Decode(alloc::format!(
                "{} trailing bytes after the value",
                rest.len()
            )))
        }
    }
}
