//! The magic header: writing it ([`Framed`]), reading it ([`Header::parse`]) and decoding
//! whatever it describes ([`decode_any`]). The byte layout is documented in the parent
//! module; this file is its only reader and writer.

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Codec, CodecError, Compression, Format};

/// The header in front of a [`Framed`] message: which format and compression wrote it.
///
/// See the [module documentation](super#the-magic-header) for the byte layout.
///
/// # Examples
///
/// ```
/// use memq::codec::{Compression, Format, Header};
///
/// let header = Header::new(Format::MsgPack, Compression::Gzip)?;
/// assert_eq!(header.to_bytes(), *b"MQ\x01\x03\x01");
///
/// let (parsed, payload) = Header::parse(b"MQ\x01\x03\x01rest")?;
/// assert_eq!(parsed, header);
/// assert_eq!(payload, b"rest");
/// # Ok::<(), memq::codec::CodecError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    format: Format,
    compression: Compression,
}

impl Header {
    /// The two bytes every header starts with: `b"MQ"`.
    pub const MAGIC: [u8; 2] = *b"MQ";

    /// The header version this build writes, and the only one it reads.
    pub const VERSION: u8 = 1;

    /// The length of a header in bytes.
    pub const LEN: usize = 5;

    /// A header for `format` and `compression`.
    ///
    /// # Errors
    ///
    /// [`CodecError::Encode`] for a [`Format::Custom`] id below [`Format::CUSTOM_MIN`], which
    /// a reader would take for one of memq's formats.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::codec::{Compression, Format, Header};
    ///
    /// assert!(Header::new(Format::Custom(200), Compression::None).is_ok());
    /// assert!(Header::new(Format::Custom(2), Compression::None).is_err());
    /// ```
    pub fn new(format: Format, compression: Compression) -> Result<Self, CodecError> {
        if Format::from_id(format.id()) != Some(format) {
            return Err(CodecError::Encode(format!(
                "custom format id {} is reserved for memq; custom ids are {}..=255",
                format.id(),
                Format::CUSTOM_MIN
            )));
        }
        Ok(Self {
            format,
            compression,
        })
    }

    /// The format of the payload.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::codec::{Format, Header};
    ///
    /// let (header, _) = Header::parse(b"MQ\x01\x02\x00{}")?;
    /// assert_eq!(header.format(), Format::Json);
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    pub const fn format(&self) -> Format {
        self.format
    }

    /// The compression of the payload.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::codec::{Compression, Header};
    ///
    /// let (header, _) = Header::parse(b"MQ\x01\x02\x00{}")?;
    /// assert_eq!(header.compression(), Compression::None);
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    pub const fn compression(&self) -> Compression {
        self.compression
    }

    /// The header's bytes, as written in front of the payload.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::codec::{Compression, Format, Header};
    ///
    /// let header = Header::new(Format::Postcard, Compression::Zstd)?;
    /// assert_eq!(header.to_bytes(), [b'M', b'Q', 1, 1, 2]);
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    pub const fn to_bytes(&self) -> [u8; Header::LEN] {
        [
            Header::MAGIC[0],
            Header::MAGIC[1],
            Header::VERSION,
            self.format.id(),
            self.compression.id(),
        ]
    }

    /// Reads the header at the start of `bytes`; returns it and the payload after it.
    ///
    /// # Errors
    ///
    /// In the order they are checked:
    /// - [`CodecError::BadMagic`] if `bytes` does not start with `"MQ"` (or with `"M"`, when it
    ///   is one byte long), empty `bytes` included;
    /// - [`CodecError::TruncatedHeader`] if `bytes` starts like a header but is shorter than
    ///   [`Header::LEN`];
    /// - [`CodecError::UnsupportedVersion`], [`CodecError::UnknownFormat`],
    ///   [`CodecError::UnknownCompression`] for ids this build does not know.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::codec::{CodecError, Header};
    ///
    /// assert_eq!(Header::parse(b"{\"id\":1}"), Err(CodecError::BadMagic));
    /// assert_eq!(Header::parse(b""), Err(CodecError::BadMagic));
    /// assert_eq!(
    ///     Header::parse(b"MQ\x01"),
    ///     Err(CodecError::TruncatedHeader { needed: 5, got: 3 })
    /// );
    /// assert_eq!(Header::parse(b"MQ\x01\x63\x00"), Err(CodecError::UnknownFormat(99)));
    /// ```
    pub fn parse(bytes: &[u8]) -> Result<(Header, &[u8]), CodecError> {
        let magic_len = bytes.len().min(Header::MAGIC.len());
        // Empty bytes do not start with the magic either (nothing was written with a header).
        if bytes.is_empty() || bytes[..magic_len] != Header::MAGIC[..magic_len] {
            return Err(CodecError::BadMagic);
        }
        let Some((head, payload)) = bytes.split_first_chunk::<{ Header::LEN }>() else {
            return Err(CodecError::TruncatedHeader {
                needed: Header::LEN,
                got: bytes.len(),
            });
        };
        let [_, _, version, format, compression] = *head;
        if version != Header::VERSION {
            return Err(CodecError::UnsupportedVersion(version));
        }
        let format = Format::from_id(format).ok_or(CodecError::UnknownFormat(format))?;
        let compression =
            Compression::from_id(compression).ok_or(CodecError::UnknownCompression(compression))?;
        Ok((
            Header {
                format,
                compression,
            },
            payload,
        ))
    }
}

/// A codec that writes the magic [`Header`] in front of what `C` writes, and checks it when
/// reading.
///
/// Framed bytes can be read by [`decode_any`] without knowing `C`, and by `Framed<C>` itself,
/// which refuses bytes whose header names another format or compression than `C`'s
/// ([`CodecError::FormatMismatch`], [`CodecError::CompressionMismatch`]) rather than misread
/// them. The header costs 5 bytes per message and no extra copy.
///
/// Wrap the whole codec: `Framed<Gzip<Json>>`, not `Gzip<Framed<Json>>`, or the header would be
/// compressed where no reader can see it. A header inside another codec is refused: encoding
/// and decoding with `Gzip<Framed<_>>`, `Zstd<Framed<_>>` or `Framed<Framed<_>>` fail with
/// [`CodecError::Encode`] / [`CodecError::Decode`].
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "msgpack")]
/// # {
/// use memq::codec::{decode_any, Codec, Framed, MsgPack};
///
/// let codec = Framed::new(MsgPack::new());
/// let bytes = codec.encode(&vec![1u16, 2, 3])?;
/// assert_eq!(&bytes[..5], b"MQ\x01\x03\x00");
/// assert_eq!(codec.decode::<Vec<u16>>(&bytes)?, [1, 2, 3]);
/// assert_eq!(decode_any::<Vec<u16>>(&bytes)?, [1, 2, 3]);
/// # }
/// # Ok::<(), memq::codec::CodecError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Framed<C> {
    inner: C,
}

impl<C> Framed<C> {
    /// Wraps `inner` so its messages carry the header. `inner.with_header()` (from
    /// [`CodecExt`](super::CodecExt)) does the same.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{Framed, Json};
    ///
    /// static CODEC: Framed<Json> = Framed::new(Json::new());
    /// # let _ = &CODEC;
    /// # }
    /// ```
    pub const fn new(inner: C) -> Self {
        Self { inner }
    }

    /// The wrapped codec.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{CodecExt, Json};
    ///
    /// let framed = Json::new().with_header();
    /// assert_eq!(*framed.inner(), Json::new());
    /// # }
    /// ```
    pub const fn inner(&self) -> &C {
        &self.inner
    }

    /// Unwraps the codec.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{CodecExt, Json};
    ///
    /// assert_eq!(Json::new().with_header().into_inner(), Json::new());
    /// # }
    /// ```
    pub fn into_inner(self) -> C {
        self.inner
    }
}

/// Refuses a header inside another header: [`decode_any`] reads only the outer one.
fn check_one_header<C: Codec>(inner: &C) -> Result<(), String> {
    if inner.writes_header() {
        Err(
            "cannot put a header over a codec that already writes one: use one Framed, outermost"
                .into(),
        )
    } else {
        Ok(())
    }
}

impl<C: Codec> Codec for Framed<C> {
    fn format(&self) -> Format {
        self.inner.format()
    }

    fn compression(&self) -> Compression {
        self.inner.compression()
    }

    fn writes_header(&self) -> bool {
        true
    }

    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::new();
        self.encode_into(value, &mut out)?;
        Ok(out)
    }

    fn encode_into<T: Serialize + ?Sized>(
        &self,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        check_one_header(&self.inner).map_err(CodecError::Encode)?;
        let header = Header::new(self.inner.format(), self.inner.compression())?;
        let start = out.len();
        out.extend_from_slice(&header.to_bytes());
        self.inner.encode_into(value, out).inspect_err(|_| {
            out.truncate(start);
        })
    }

    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError> {
        check_one_header(&self.inner).map_err(CodecError::Decode)?;
        let (header, payload) = Header::parse(bytes)?;
        let expected = (self.inner.format(), self.inner.compression());
        if header.format() != expected.0 {
            return Err(CodecError::FormatMismatch {
                expected: expected.0,
                found: header.format(),
            });
        }
        if header.compression() != expected.1 {
            return Err(CodecError::CompressionMismatch {
                expected: expected.1,
                found: header.compression(),
            });
        }
        self.inner.decode(payload)
    }
}

/// Decodes bytes written by any [`Framed`] codec: reads the header, undoes the compression it
/// names and decodes with the format it names.
///
/// Decompression stops at [`DEFAULT_MAX_DECOMPRESSED_LEN`](super::DEFAULT_MAX_DECOMPRESSED_LEN);
/// to read larger messages, decode with the matching `Framed<Gzip<_>>` or `Framed<Zstd<_>>`
/// configured with a higher `max_decompressed_len`. MessagePack written in either struct layout
/// (maps or arrays) decodes.
///
/// # Errors
///
/// - every error of [`Header::parse`];
/// - [`CodecError::FormatUnavailable`] / [`CodecError::CompressionUnavailable`] when the format
///   or compression is known but this build lacks its feature (or the format is
///   [`Format::Custom`]), checked before any decompression;
/// - [`CodecError::Decompress`] and [`CodecError::Decode`] for a payload that does not decode.
///
/// # Examples
///
/// ```
/// # #[cfg(all(feature = "json", feature = "msgpack"))]
/// # {
/// use memq::codec::{decode_any, Codec, CodecExt, Json, MsgPack};
///
/// let from_json = Json::new().with_header().encode(&("a", 1))?;
/// let from_msgpack = MsgPack::new().with_header().encode(&("a", 1))?;
/// for bytes in [from_json, from_msgpack] {
///     assert_eq!(decode_any::<(String, u8)>(&bytes)?, ("a".to_string(), 1));
/// }
/// # }
/// # Ok::<(), memq::codec::CodecError>(())
/// ```
pub fn decode_any<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let (header, payload) = Header::parse(bytes)?;
    let format = header.format();
    if !can_decode(format) {
        return Err(CodecError::FormatUnavailable(format));
    }
    match header.compression() {
        Compression::None => decode_format(format, payload),
        #[cfg(feature = "gzip")]
        Compression::Gzip => {
            let plain = super::compress::gunzip(payload, super::DEFAULT_MAX_DECOMPRESSED_LEN)?;
            decode_format(format, &plain)
        }
        #[cfg(feature = "zstd")]
        Compression::Zstd => {
            let plain = super::compress::unzstd(payload, super::DEFAULT_MAX_DECOMPRESSED_LEN)?;
            decode_format(format, &plain)
        }
        other => Err(CodecError::CompressionUnavailable(other)),
    }
}

/// Whether [`decode_format`] has a decoder for `format` in this build.
fn can_decode(format: Format) -> bool {
    match format {
        #[cfg(feature = "postcard")]
        Format::Postcard => true,
        #[cfg(feature = "json")]
        Format::Json => true,
        #[cfg(feature = "msgpack")]
        Format::MsgPack => true,
        _ => false,
    }
}

/// Decodes an uncompressed payload in `format`.
fn decode_format<T: DeserializeOwned>(format: Format, plain: &[u8]) -> Result<T, CodecError> {
    match format {
        #[cfg(feature = "postcard")]
        Format::Postcard => super::Postcard::new().decode(plain),
        #[cfg(feature = "json")]
        Format::Json => super::Json::new().decode(plain),
        #[cfg(feature = "msgpack")]
        Format::MsgPack => super::MsgPack::new().decode(plain),
        other => {
            // With no format feature on, this arm is the only one and would leave `plain` unused.
            let _ = plain;
            Err(CodecError::FormatUnavailable(other))
        }
    }
}
