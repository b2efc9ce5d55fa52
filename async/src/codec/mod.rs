//! Codecs for byte topics: typed values in, typed values out.
//!
//! This module owns the std codecs ([`Json`], [`MsgPack`]), the compression wrappers
//! ([`Gzip`], [`Zstd`]), the magic header ([`Framed`], [`Header`], [`decode_any`]) and the
//! typed helpers over `Topic<Bytes>` and `Message<Bytes>` ([`TopicCodecExt`],
//! [`MessageCodecExt`]). The [`Codec`] trait, [`CodecError`], the [`Format`] and
//! [`Compression`] ids and the `no_std` [`Postcard`] codec come from `memq_core::codec` and
//! are re-exported here. Nothing in this module reaches into a topic's log: the helpers call
//! the topic's public `publish` / `try_publish` / `publish_blocking` like any other user.
//!
//! # Codecs and features
//!
//! | type                    | feature    | what it is                                        |
//! |-------------------------|------------|---------------------------------------------------|
//! | [`Postcard`]            | `postcard` | compact binary, Rust to Rust, `no_std`            |
//! | [`Json`]                | `json`     | text, any language                                |
//! | [`MsgPack`]             | `msgpack`  | binary, any language                              |
//! | [`Gzip<C>`][`Gzip`]       | `gzip`     | gzip over any codec `C`                           |
//! | [`Zstd<C>`][`Zstd`]       | `zstd`     | zstd over any codec `C`                           |
//! | [`Framed<C>`](Framed)   | always     | the magic header in front of any codec `C`        |
//!
//! Wrappers compose through [`CodecExt`]: `Json::new().zstd().with_header()` is
//! `Framed<Zstd<Json>>`. Put [`Framed`] outermost, and at most one compression wrapper under it.
//!
//! # The magic header
//!
//! A reader that does not know which codec wrote a message can find out when the writer used
//! [`Framed`]. Framed bytes are a 5-byte header followed by the payload:
//!
//! | byte | value                | meaning                                                      |
//! |------|----------------------|--------------------------------------------------------------|
//! | 0    | `0x4D` (`b'M'`)      | magic, first byte                                            |
//! | 1    | `0x51` (`b'Q'`)      | magic, second byte                                           |
//! | 2    | `0x01`               | header version; a reader rejects versions it does not know   |
//! | 3    | format id            | `1` postcard, `2` json, `3` msgpack, `128..=255` custom ([`Format`]) |
//! | 4    | compression id       | `0` none, `1` gzip, `2` zstd ([`Compression`])               |
//! | 5..  | payload              | the format's bytes, compressed as byte 4 says                |
//!
//! Ids `0` and `4..=127` of byte 3 and `3..=255` of byte 4 are reserved. The header has no
//! length field and no checksum: a message is already delimited by the queue, and gzip and
//! zstd check their own data. [`decode_any`] reads the header, undoes the compression and
//! decodes with the format it names; [`Header::parse`] only reads the header, to route or
//! count messages by format without decoding them.
//!
//! # Bad input
//!
//! Every decoder here returns a [`CodecError`] for bytes it cannot read, never panics, and
//! never trusts a length it reads: decompression stops at a limit (256 MiB by default,
//! [`DEFAULT_MAX_DECOMPRESSED_LEN`]), and nesting stops at [`MAX_DEPTH`] levels in every
//! format, so that hostile bytes cannot overflow the stack (sequences, maps, enum variants
//! and `Some` each count a level: see [`MAX_DEPTH`]).
//!
//! # Examples
//!
//! ```
//! # #[cfg(all(feature = "json", feature = "zstd"))]
//! # {
//! use memq::codec::{decode_any, Codec, CodecExt, Compression, Format, Header, Json};
//!
//! #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
//! struct Order {
//!     id: u64,
//!     item: String,
//! }
//!
//! let codec = Json::new().zstd().with_header();
//! let order = Order { id: 7, item: "tea".into() };
//! let bytes = codec.encode(&order)?;
//!
//! // Any reader can tell what the bytes are...
//! let header = Header::parse(&bytes)?.0;
//! assert_eq!((header.format(), header.compression()), (Format::Json, Compression::Zstd));
//! // ...and decode them without knowing the codec.
//! assert_eq!(decode_any::<Order>(&bytes)?, order);
//! # }
//! # Ok::<(), memq::codec::CodecError>(())
//! ```

// The docs link to every codec; a build without some codec features lacks those targets.
// Links to what a feature brings: here when it is on, else to the crate's list of
// features, which says which feature brings it. The blank line keeps the definitions
// out of the paragraph above.
#![doc = ""]
#![cfg_attr(feature = "postcard", doc = "[`Postcard`]: Postcard")]
#![cfg_attr(not(feature = "postcard"), doc = "[`Postcard`]: crate#features")]
#![cfg_attr(feature = "json", doc = "[`Json`]: Json")]
#![cfg_attr(not(feature = "json"), doc = "[`Json`]: crate#features")]
#![cfg_attr(feature = "msgpack", doc = "[`MsgPack`]: MsgPack")]
#![cfg_attr(not(feature = "msgpack"), doc = "[`MsgPack`]: crate#features")]
#![cfg_attr(feature = "gzip", doc = "[`Gzip`]: Gzip")]
#![cfg_attr(not(feature = "gzip"), doc = "[`Gzip`]: crate#features")]
#![cfg_attr(feature = "zstd", doc = "[`Zstd`]: Zstd")]
#![cfg_attr(not(feature = "zstd"), doc = "[`Zstd`]: crate#features")]

pub use memq_core::codec::{
    deserialize_within_depth, Codec, CodecError, Compression, Format, MAX_DEPTH,
};

#[cfg(feature = "postcard")]
pub use memq_core::codec::Postcard;

#[cfg(any(feature = "gzip", feature = "zstd"))]
mod compress;
mod header;
#[cfg(feature = "json")]
mod json;
#[cfg(feature = "msgpack")]
mod msgpack;
mod topic;

#[cfg(feature = "gzip")]
pub use compress::Gzip;
#[cfg(feature = "zstd")]
pub use compress::Zstd;
pub use header::{decode_any, Framed, Header};
#[cfg(feature = "json")]
pub use json::Json;
#[cfg(feature = "msgpack")]
pub use msgpack::MsgPack;
pub use topic::{EncodedPublishError, MessageCodecExt, PublishEncoded, TopicCodecExt};

/// The most bytes that [`Gzip`], [`Zstd`] and [`decode_any`] decompress one message to, unless
/// told otherwise: 256 MiB.
///
/// A few hundred bytes of gzip or zstd can claim gigabytes of output; the limit turns such a
/// message into a [`CodecError::Decompress`] instead of an out-of-memory abort. Raise it with
/// `max_decompressed_len` on the wrapper when your messages are larger.
///
/// # Examples
///
/// ```
/// assert_eq!(memq::codec::DEFAULT_MAX_DECOMPRESSED_LEN, 256 * 1024 * 1024);
/// ```
///
#[cfg_attr(feature = "gzip", doc = "[`Gzip`]: Gzip")]
#[cfg_attr(not(feature = "gzip"), doc = "[`Gzip`]: crate#features")]
#[cfg_attr(feature = "zstd", doc = "[`Zstd`]: Zstd")]
#[cfg_attr(not(feature = "zstd"), doc = "[`Zstd`]: crate#features")]
pub const DEFAULT_MAX_DECOMPRESSED_LEN: usize = 256 * 1024 * 1024;

/// Builder methods for wrapping any [`Codec`]: `codec.gzip()`, `codec.zstd()`,
/// `codec.with_header()`.
///
/// Implemented for every codec; bring it into scope with `use memq::codec::CodecExt`.
///
/// # Examples
///
/// ```
/// # #[cfg(all(feature = "msgpack", feature = "gzip"))]
/// # {
/// use memq::codec::{Codec, CodecExt, Compression, Format, MsgPack};
///
/// let codec = MsgPack::new().gzip().with_header();
/// assert_eq!(codec.format(), Format::MsgPack);
/// assert_eq!(codec.compression(), Compression::Gzip);
/// # }
/// ```
pub trait CodecExt: Codec + Sized {
    /// Writes the magic header in front of every message, so [`decode_any`] can read it.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{Codec, CodecExt, Json};
    ///
    /// let bytes = Json::new().with_header().encode(&1u8)?;
    /// assert_eq!(bytes, b"MQ\x01\x02\x001");
    /// # }
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    fn with_header(self) -> Framed<Self> {
        Framed::new(self)
    }

    /// Compresses every message with gzip at the default level.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{Codec, CodecExt, Json};
    ///
    /// let codec = Json::new().gzip();
    /// let text = "memq ".repeat(100);
    /// let bytes = codec.encode(&text)?;
    /// assert!(bytes.len() < text.len());
    /// assert_eq!(codec.decode::<String>(&bytes)?, text);
    /// # }
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    #[cfg(feature = "gzip")]
    fn gzip(self) -> Gzip<Self> {
        Gzip::new(self)
    }

    /// Compresses every message with zstd at the default level.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{Codec, CodecExt, Json};
    ///
    /// let codec = Json::new().zstd();
    /// let text = "memq ".repeat(100);
    /// let bytes = codec.encode(&text)?;
    /// assert!(bytes.len() < text.len());
    /// assert_eq!(codec.decode::<String>(&bytes)?, text);
    /// # }
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    #[cfg(feature = "zstd")]
    fn zstd(self) -> Zstd<Self> {
        Zstd::new(self)
    }
}

impl<C: Codec> CodecExt for C {}
