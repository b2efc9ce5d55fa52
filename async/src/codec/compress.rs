//! Compression wrappers: [`Gzip`] (feature `gzip`, over flate2) and [`Zstd`] (feature `zstd`,
//! over the zstd crate). Each compresses what its inner codec writes and decompresses before
//! its inner codec reads, with a cap on the decompressed size. They write no header, and
//! refuse to wrap a codec that does (it must stay outermost); [`Framed`](super::Framed)
//! records their [`Compression`] id.

use std::io::Read;

use super::{Codec, CodecError, Compression, DEFAULT_MAX_DECOMPRESSED_LEN};

/// Reads `reader` to its end into a new buffer, failing once it yields more than `limit` bytes.
fn read_limited(reader: impl Read, limit: usize, what: &str) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    // One byte past the limit tells "exactly the limit" from "over it".
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|e| CodecError::Decompress(format!("{what}: {e}")))?;
    if out.len() > limit {
        return Err(CodecError::Decompress(format!(
            "{what}: output is larger than the limit of {limit} bytes"
        )));
    }
    Ok(out)
}

/// Refuses a second compression layer: the header has room for one, and compressing
/// compressed bytes only costs time.
fn check_single_layer<C: Codec>(inner: &C, outer: Compression) -> Result<(), String> {
    if inner.writes_header() {
        // The header must stay where a reader that knows only the header can see it.
        return Err(format!(
            "cannot compress a framed codec with {outer}: the header must be the outermost layer"
        ));
    }
    match inner.compression() {
        Compression::None => Ok(()),
        already => Err(format!(
            "cannot stack {outer} over {already}: use one compression wrapper"
        )),
    }
}

/// Compresses `plain` with gzip onto the end of `out`.
#[cfg(feature = "gzip")]
fn gzip_into(plain: &[u8], level: u32, out: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Write as _;

    let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::new(level));
    encoder.write_all(plain)?;
    encoder.finish().map(drop)
}

/// Decompresses one gzip member that fills `compressed` exactly, to at most `limit` bytes.
#[cfg(feature = "gzip")]
pub(super) fn gunzip(compressed: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    let mut decoder = flate2::bufread::GzDecoder::new(compressed);
    let plain = read_limited(&mut decoder, limit, "gzip")?;
    let rest = decoder.into_inner();
    if !rest.is_empty() {
        return Err(CodecError::Decompress(format!(
            "gzip: {} trailing bytes after the compressed data",
            rest.len()
        )));
    }
    Ok(plain)
}

/// Decompresses the one zstd frame that fills `compressed` exactly, to at most `limit` bytes.
#[cfg(feature = "zstd")]
pub(super) fn unzstd(compressed: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    // A zstd data frame starts with this magic number. Anything else, a lone skippable
    // frame included (which the decoder reads as no data at all), is not a message
    // memq wrote.
    const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    if !compressed.starts_with(&ZSTD_MAGIC) {
        return Err(CodecError::Decompress(
            "zstd: not a zstd data frame (bad magic number)".into(),
        ));
    }
    let mut decoder = zstd::stream::read::Decoder::with_buffer(compressed)
        .map_err(|e| CodecError::Decompress(format!("zstd: {e}")))?
        .single_frame();
    let plain = read_limited(&mut decoder, limit, "zstd")?;
    let rest = decoder.finish();
    if !rest.is_empty() {
        return Err(CodecError::Decompress(format!(
            "zstd: {} trailing bytes after the compressed data",
            rest.len()
        )));
    }
    Ok(plain)
}

/// Compresses `plain` into one zstd frame that records its content size and a checksum.
#[cfg(feature = "zstd")]
fn zstd_compress(plain: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    let range = zstd::compression_level_range();
    let mut compressor = zstd::bulk::Compressor::new(level.clamp(*range.start(), *range.end()))?;
    compressor.include_checksum(true)?;
    compressor.compress(plain)
}

/// [`Codec`] for a compression wrapper `$wrapper` with a `compress_into` method: the inner
/// codec's format, compression `$id`, one layer only, and decompression by `$decompress`
/// (to at most `max_decompressed_len` bytes) before the inner codec decodes.
#[cfg(any(feature = "gzip", feature = "zstd"))]
macro_rules! compression_codec {
    ($wrapper:ident, $id:expr, $decompress:ident) => {
        impl<C: Codec> Codec for $wrapper<C> {
            fn format(&self) -> super::Format {
                self.inner.format()
            }

            fn compression(&self) -> Compression {
                $id
            }

            fn writes_header(&self) -> bool {
                self.inner.writes_header()
            }

            fn encode<T: serde::Serialize + ?Sized>(
                &self,
                value: &T,
            ) -> Result<Vec<u8>, CodecError> {
                let mut out = Vec::new();
                self.encode_into(value, &mut out)?;
                Ok(out)
            }

            fn encode_into<T: serde::Serialize + ?Sized>(
                &self,
                value: &T,
                out: &mut Vec<u8>,
            ) -> Result<(), CodecError> {
                check_single_layer(&self.inner, $id).map_err(CodecError::Encode)?;
                let plain = self.inner.encode(value)?;
                self.compress_into(&plain, out)
            }

            fn decode<T: serde::de::DeserializeOwned>(
                &self,
                bytes: &[u8],
            ) -> Result<T, CodecError> {
                check_single_layer(&self.inner, $id).map_err(CodecError::Decode)?;
                let plain = $decompress(bytes, self.max_decompressed_len)?;
                self.inner.decode(&plain)
            }
        }
    };
}

/// Gzip compression over any codec `C` (feature `gzip`).
///
/// Encoding compresses `C`'s output into one gzip member; decoding decompresses (to at most
/// [`max_decompressed_len`](Gzip::max_decompressed_len) bytes, and refusing trailing bytes)
/// and hands the result to `C`. Gzip is everywhere (`zlib`, Python's `gzip` module, the
/// command line) and pure Rust here; [`Zstd`] compresses better and faster.
///
/// One compression layer per codec: `Gzip<Zstd<_>>` fails to encode and decode with
/// [`CodecError::Encode`] / [`CodecError::Decode`].
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "json")]
/// # {
/// use memq::codec::{Codec, Gzip, Json};
///
/// let codec = Gzip::new(Json::new()).level(9);
/// let log_lines = vec!["GET /index.html 200"; 50];
/// let bytes = codec.encode(&log_lines)?;
/// assert!(bytes.len() < 100);
/// assert_eq!(codec.decode::<Vec<String>>(&bytes)?.len(), 50);
/// # }
/// # Ok::<(), memq::codec::CodecError>(())
/// ```
///
#[cfg_attr(feature = "zstd", doc = "[`Zstd`]: Zstd")]
#[cfg_attr(not(feature = "zstd"), doc = "[`Zstd`]: crate#features")]
#[cfg(feature = "gzip")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gzip<C> {
    inner: C,
    level: u32,
    max_decompressed_len: usize,
}

#[cfg(feature = "gzip")]
impl<C> Gzip<C> {
    /// The compression level [`Gzip::new`] uses: 6, zlib's default.
    pub const DEFAULT_LEVEL: u32 = 6;

    /// Gzip over `inner` at [`DEFAULT_LEVEL`](Gzip::DEFAULT_LEVEL), decompressing to at most
    /// [`DEFAULT_MAX_DECOMPRESSED_LEN`] bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{Gzip, Json};
    ///
    /// static CODEC: Gzip<Json> = Gzip::new(Json::new());
    /// # let _ = &CODEC;
    /// # }
    /// ```
    pub const fn new(inner: C) -> Self {
        Self {
            inner,
            level: Self::DEFAULT_LEVEL,
            max_decompressed_len: DEFAULT_MAX_DECOMPRESSED_LEN,
        }
    }

    /// Sets the compression level, from 0 (store only) to 9 (smallest); higher values mean 9.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{Gzip, Json};
    ///
    /// let fast = Gzip::new(Json::new()).level(1);
    /// # let _ = fast;
    /// # }
    /// ```
    #[must_use]
    pub const fn level(mut self, level: u32) -> Self {
        self.level = if level > 9 { 9 } else { level };
        self
    }

    /// Sets the most bytes one message may decompress to; larger messages fail with
    /// [`CodecError::Decompress`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{Codec, CodecError, Gzip, Json};
    ///
    /// let big = Gzip::new(Json::new()).encode(&"x".repeat(10_000))?;
    /// let strict = Gzip::new(Json::new()).max_decompressed_len(1_000);
    /// assert!(matches!(strict.decode::<String>(&big), Err(CodecError::Decompress(_))));
    /// # }
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    #[must_use]
    pub const fn max_decompressed_len(mut self, len: usize) -> Self {
        self.max_decompressed_len = len;
        self
    }

    /// The wrapped codec.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{Gzip, Json};
    ///
    /// assert_eq!(*Gzip::new(Json::new()).inner(), Json::new());
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
    /// use memq::codec::{Gzip, Json};
    ///
    /// assert_eq!(Gzip::new(Json::new()).into_inner(), Json::new());
    /// # }
    /// ```
    pub fn into_inner(self) -> C {
        self.inner
    }
}

#[cfg(feature = "gzip")]
impl<C> Gzip<C> {
    /// Compresses `plain` onto the end of `out`, leaving `out` as it was on failure.
    fn compress_into(&self, plain: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        let start = out.len();
        gzip_into(plain, self.level, out).map_err(|e| {
            out.truncate(start);
            CodecError::Compress(format!("gzip: {e}"))
        })
    }
}

#[cfg(feature = "gzip")]
compression_codec!(Gzip, Compression::Gzip, gunzip);

/// Zstandard compression over any codec `C` (feature `zstd`).
///
/// Encoding compresses `C`'s output into one zstd frame that records its content size and a
/// checksum; decoding decompresses that one frame (to at most
/// [`max_decompressed_len`](Zstd::max_decompressed_len) bytes, checking the checksum when
/// there is one, and refusing trailing bytes) and hands the result to `C`. Better ratios and much faster than [`Gzip`]; builds
/// the reference C library.
///
/// One compression layer per codec: `Zstd<Gzip<_>>` fails to encode and decode with
/// [`CodecError::Encode`] / [`CodecError::Decode`].
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "msgpack")]
/// # {
/// use memq::codec::{Codec, MsgPack, Zstd};
///
/// let codec = Zstd::new(MsgPack::new()).level(19);
/// let samples = vec![0.5f32; 1_000];
/// let bytes = codec.encode(&samples)?;
/// assert!(bytes.len() < 100);
/// assert_eq!(codec.decode::<Vec<f32>>(&bytes)?, samples);
/// # }
/// # Ok::<(), memq::codec::CodecError>(())
/// ```
///
#[cfg_attr(feature = "gzip", doc = "[`Gzip`]: Gzip")]
#[cfg_attr(not(feature = "gzip"), doc = "[`Gzip`]: crate#features")]
#[cfg(feature = "zstd")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zstd<C> {
    inner: C,
    level: i32,
    max_decompressed_len: usize,
}

#[cfg(feature = "zstd")]
impl<C> Zstd<C> {
    /// The compression level [`Zstd::new`] uses: 3, zstd's default.
    pub const DEFAULT_LEVEL: i32 = 3;

    /// Zstd over `inner` at [`DEFAULT_LEVEL`](Zstd::DEFAULT_LEVEL), decompressing to at most
    /// [`DEFAULT_MAX_DECOMPRESSED_LEN`] bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{Json, Zstd};
    ///
    /// static CODEC: Zstd<Json> = Zstd::new(Json::new());
    /// # let _ = &CODEC;
    /// # }
    /// ```
    pub const fn new(inner: C) -> Self {
        Self {
            inner,
            level: Self::DEFAULT_LEVEL,
            max_decompressed_len: DEFAULT_MAX_DECOMPRESSED_LEN,
        }
    }

    /// Sets the compression level: 1 (fastest) to 22 (smallest, slow, memory hungry), or
    /// negative for even faster, larger output. Levels outside what the linked zstd supports are
    /// clamped to its range.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{Json, Zstd};
    ///
    /// let small = Zstd::new(Json::new()).level(19);
    /// # let _ = small;
    /// # }
    /// ```
    #[must_use]
    pub const fn level(mut self, level: i32) -> Self {
        self.level = level;
        self
    }

    /// Sets the most bytes one message may decompress to; larger messages fail with
    /// [`CodecError::Decompress`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{Codec, CodecError, Json, Zstd};
    ///
    /// let big = Zstd::new(Json::new()).encode(&"x".repeat(10_000))?;
    /// let strict = Zstd::new(Json::new()).max_decompressed_len(1_000);
    /// assert!(matches!(strict.decode::<String>(&big), Err(CodecError::Decompress(_))));
    /// # }
    /// # Ok::<(), memq::codec::CodecError>(())
    /// ```
    #[must_use]
    pub const fn max_decompressed_len(mut self, len: usize) -> Self {
        self.max_decompressed_len = len;
        self
    }

    /// The wrapped codec.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "json")]
    /// # {
    /// use memq::codec::{Json, Zstd};
    ///
    /// assert_eq!(*Zstd::new(Json::new()).inner(), Json::new());
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
    /// use memq::codec::{Json, Zstd};
    ///
    /// assert_eq!(Zstd::new(Json::new()).into_inner(), Json::new());
    /// # }
    /// ```
    pub fn into_inner(self) -> C {
        self.inner
    }
}

#[cfg(feature = "zstd")]
impl<C> Zstd<C> {
    /// Compresses `plain` onto the end of `out`, leaving `out` as it was on failure.
    fn compress_into(&self, plain: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        let compressed = zstd_compress(plain, self.level)
            .map_err(|e| CodecError::Compress(format!("zstd: {e}")))?;
        out.extend_from_slice(&compressed);
        Ok(())
    }
}

#[cfg(feature = "zstd")]
compression_codec!(Zstd, Compression::Zstd, unzstd);
