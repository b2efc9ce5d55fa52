//! Codecs: every codec × compression × header combination round-trips, `decode_any` detects
//! what wrote a message, the header's documented bytes hold, and bad bytes of every kind
//! (corrupt, truncated, wrong magic, unknown ids, hostile nesting, decompression bombs) end in
//! a `CodecError`, never a panic. A property test feeds random and mutated bytes to every
//! decoder. Each test is gated on the features it needs; `--all-features` runs all of them.
#![cfg(feature = "serde")]

extern crate alloc;

use alloc::collections::BTreeMap;
use core::fmt::Debug;

use memq::codec::{decode_any, Codec, CodecError, CodecExt, Compression, Format, Framed, Header};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

#[cfg(feature = "json")]
use memq::codec::Json;
#[cfg(feature = "msgpack")]
use memq::codec::MsgPack;
#[cfg(feature = "postcard")]
use memq::codec::Postcard;

// ---------------------------------------------------------------------------------------------
// Values

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Side {
    Buy,
    Sell { limit: u64 },
    Cancel(u32),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u64,
    symbol: String,
    qty: i32,
    price: f64,
    side: Side,
    tags: Vec<String>,
    note: Option<String>,
    raw: Vec<u8>,
    by_venue: BTreeMap<String, u32>,
}

fn order() -> Order {
    Order {
        id: 42,
        symbol: "MEMQ".into(),
        qty: -7,
        price: 101.25,
        side: Side::Sell { limit: 99 },
        tags: vec!["urgent".into(), "ünïcødé ✓".into()],
        note: Some("first".into()),
        raw: vec![0, 1, 2, 255],
        by_venue: BTreeMap::from([("xlon".to_string(), 3), ("xnys".to_string(), 4)]),
    }
}

#[cfg(any(feature = "postcard", feature = "json", feature = "msgpack"))]
fn samples() -> Vec<Order> {
    let empty = Order {
        id: 0,
        symbol: String::new(),
        qty: 0,
        price: 0.0,
        side: Side::Buy,
        tags: Vec::new(),
        note: None,
        raw: Vec::new(),
        by_venue: BTreeMap::new(),
    };
    let big = Order {
        id: u64::MAX,
        symbol: "x".repeat(10_000),
        qty: i32::MIN,
        price: -1.0e300,
        side: Side::Cancel(u32::MAX),
        tags: vec!["tag".into(); 500],
        note: Some("n".repeat(3_000)),
        raw: (0..=255).cycle().take(20_000).collect(),
        by_venue: (0..100).map(|i| (format!("venue{i}"), i)).collect(),
    };
    vec![order(), empty, big]
}

#[cfg(any(feature = "json", feature = "msgpack"))]
/// A recursive type, to feed hostile nesting to self-describing decoders.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Nested(Vec<Nested>);

// ---------------------------------------------------------------------------------------------
// Helpers

#[cfg(any(feature = "postcard", feature = "json", feature = "msgpack"))]
/// Encodes and decodes every sample, and checks `encode_into` appends exactly what `encode`
/// returns.
fn assert_round_trips<C: Codec + Debug>(codec: &C) {
    for value in samples() {
        let bytes = codec
            .encode(&value)
            .unwrap_or_else(|e| panic!("{codec:?}: {e}"));
        let back: Order = codec
            .decode(&bytes)
            .unwrap_or_else(|e| panic!("{codec:?}: {e}"));
        assert_eq!(back, value, "{codec:?}");

        let mut appended = b"prefix".to_vec();
        codec.encode_into(&value, &mut appended).unwrap();
        assert_eq!(&appended[..6], b"prefix", "{codec:?}");
        assert_eq!(&appended[6..], &bytes[..], "{codec:?}");
    }
    // Values other than structs too: scalars, strings, sequences, options, tuples.
    assert_eq!(
        codec.decode::<u64>(&codec.encode(&7u64).unwrap()).unwrap(),
        7
    );
    assert_eq!(
        codec
            .decode::<String>(&codec.encode("hé").unwrap())
            .unwrap(),
        "hé"
    );
    assert_eq!(
        codec
            .decode::<Vec<i8>>(&codec.encode(&Vec::from([-1i8, 1])).unwrap())
            .unwrap(),
        [-1, 1]
    );
    assert_eq!(
        codec
            .decode::<Option<u8>>(&codec.encode(&None::<u8>).unwrap())
            .unwrap(),
        None
    );
    assert_eq!(
        codec
            .decode::<(bool, char)>(&codec.encode(&(true, 'z')).unwrap())
            .unwrap(),
        (true, 'z')
    );
}

#[cfg(any(feature = "postcard", feature = "json", feature = "msgpack"))]
/// Round-trips `codec` framed, and checks the header and `decode_any`.
fn assert_framed_round_trips<C: Codec + Debug>(codec: C) {
    let (format, compression) = (codec.format(), codec.compression());
    let framed = codec.with_header();
    assert_round_trips(&framed);
    assert_eq!(
        (framed.format(), framed.compression()),
        (format, compression)
    );

    let bytes = framed.encode(&order()).unwrap();
    assert_eq!(
        bytes[..Header::LEN],
        [b'M', b'Q', 1, format.id(), compression.id()],
        "{framed:?}"
    );
    let (header, payload) = Header::parse(&bytes).unwrap();
    assert_eq!(
        (header.format(), header.compression()),
        (format, compression)
    );
    assert_eq!(payload, &framed.inner().encode(&order()).unwrap()[..]);
    assert_eq!(decode_any::<Order>(&bytes).unwrap(), order(), "{framed:?}");
}

#[cfg(any(feature = "postcard", feature = "json", feature = "msgpack"))]
/// Every layering of `codec`: plain, framed, and each enabled compression plain and framed.
fn assert_every_layer_round_trips<C: Codec + Clone + Debug>(codec: C) {
    assert_round_trips(&codec);
    assert_framed_round_trips(codec.clone());
    #[cfg(feature = "gzip")]
    {
        assert_round_trips(&codec.clone().gzip());
        assert_framed_round_trips(codec.clone().gzip());
        assert_framed_round_trips(codec.clone().gzip().level(0));
        assert_framed_round_trips(codec.clone().gzip().level(9));
    }
    #[cfg(feature = "zstd")]
    {
        assert_round_trips(&codec.clone().zstd());
        assert_framed_round_trips(codec.clone().zstd());
        assert_framed_round_trips(codec.clone().zstd().level(1));
        assert_framed_round_trips(codec.clone().zstd().level(19));
        assert_framed_round_trips(codec.clone().zstd().level(-5));
        assert_framed_round_trips(codec.clone().zstd().level(1_000));
    }
}

/// One codec's decoder, boxed so that codecs of different types fit in one list.
type Decoder<T> = Box<dyn Fn(&[u8]) -> Result<T, CodecError>>;

/// A value encoded by one codec, with that codec's decoder.
struct Encoded<T> {
    /// The codec's `Debug` form.
    label: String,
    framed: bool,
    compressed: bool,
    bytes: Vec<u8>,
    decode: Decoder<T>,
}

/// `value` encoded by every enabled codec in every layering.
fn every_encoding<T>(value: &T) -> Vec<Encoded<T>>
where
    T: Serialize + DeserializeOwned + 'static,
{
    fn one<C, T>(codec: C, framed: bool, value: &T, out: &mut Vec<Encoded<T>>)
    where
        C: Codec + Debug + 'static,
        T: Serialize + DeserializeOwned + 'static,
    {
        let bytes = codec.encode(value).expect("samples encode");
        out.push(Encoded {
            label: format!("{codec:?}"),
            framed,
            compressed: codec.compression() != Compression::None,
            bytes,
            decode: Box::new(move |bytes| codec.decode(bytes)),
        });
    }
    fn layers<C, T>(codec: C, value: &T, mut out: Vec<Encoded<T>>) -> Vec<Encoded<T>>
    where
        C: Codec + Clone + Debug + 'static,
        T: Serialize + DeserializeOwned + 'static,
    {
        one(codec.clone(), false, value, &mut out);
        one(codec.clone().with_header(), true, value, &mut out);
        #[cfg(feature = "gzip")]
        {
            one(codec.clone().gzip(), false, value, &mut out);
            one(codec.clone().gzip().with_header(), true, value, &mut out);
        }
        #[cfg(feature = "zstd")]
        {
            one(codec.clone().zstd(), false, value, &mut out);
            one(codec.clone().zstd().with_header(), true, value, &mut out);
        }
        out
    }
    let out = Vec::new();
    #[cfg(feature = "postcard")]
    let out = layers(Postcard::new(), value, out);
    #[cfg(feature = "json")]
    let out = layers(Json::new(), value, out);
    #[cfg(feature = "msgpack")]
    let out = layers(MsgPack::new(), value, out);
    #[cfg(feature = "msgpack")]
    let out = layers(MsgPack::compact(), value, out);
    // Without a format feature there is nothing to encode with.
    let _ = (value, layers::<Unit, T>);
    out
}

/// Asserts `result` is the error `matches` accepts, with a message that helps when it is not.
#[track_caller]
fn assert_err<T: Debug>(result: Result<T, CodecError>, matches: impl FnOnce(&CodecError) -> bool) {
    match result {
        Err(err) if matches(&err) => {}
        other => panic!("unexpected result: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Round trips: every codec × compression × header

#[cfg(feature = "postcard")]
#[test]
fn postcard_round_trips_in_every_layering() {
    assert_every_layer_round_trips(Postcard::new());
}

#[cfg(feature = "json")]
#[test]
fn json_round_trips_in_every_layering() {
    assert_every_layer_round_trips(Json::new());
    assert_every_layer_round_trips(Json::pretty());
}

#[cfg(feature = "msgpack")]
#[test]
fn msgpack_round_trips_in_every_layering() {
    assert_every_layer_round_trips(MsgPack::new());
    assert_every_layer_round_trips(MsgPack::compact());
}

#[cfg(feature = "msgpack")]
#[test]
fn msgpack_reads_both_struct_layouts() {
    let named = MsgPack::new().encode(&order()).unwrap();
    let compact = MsgPack::compact().encode(&order()).unwrap();
    assert!(compact.len() < named.len());
    for codec in [MsgPack::new(), MsgPack::compact()] {
        assert_eq!(codec.decode::<Order>(&named).unwrap(), order());
        assert_eq!(codec.decode::<Order>(&compact).unwrap(), order());
    }
}

#[cfg(feature = "json")]
#[test]
fn json_is_plain_json() {
    assert_eq!(Json::new().encode(&("a", 1)).unwrap(), br#"["a",1]"#);
    assert_eq!(Json::pretty().encode(&[1]).unwrap(), b"[\n  1\n]");
    // Whitespace around the value is fine; anything else after it is not.
    assert_eq!(Json::new().decode::<u8>(b" 5 \n").unwrap(), 5);
}

#[test]
fn a_reference_to_a_codec_is_a_codec() {
    fn takes_codec<C: Codec>(codec: C) -> Format {
        codec.format()
    }
    let framed = Framed::new(Unit);
    assert_eq!(takes_codec::<&Framed<Unit>>(&framed), Format::Custom(200));
}

#[cfg(all(
    any(feature = "gzip", feature = "zstd"),
    any(feature = "postcard", feature = "json", feature = "msgpack")
))]
#[test]
fn compression_shrinks_repetitive_messages() {
    let text = "memq keeps every message until every reader has seen it. ".repeat(200);
    let encodings = every_encoding(&text);
    assert!(encodings.iter().any(|e| e.compressed));
    for e in encodings.iter().filter(|e| e.compressed) {
        assert!(
            e.bytes.len() < text.len() / 10,
            "{}: {} bytes",
            e.label,
            e.bytes.len()
        );
        assert_eq!((e.decode)(&e.bytes).unwrap(), text, "{}", e.label);
    }
}

#[cfg(all(feature = "json", feature = "gzip", feature = "zstd"))]
#[test]
fn compressed_payloads_are_standard_gzip_and_zstd() {
    use std::io::Read as _;

    let text = "interop ".repeat(100);
    let json = serde_json::to_vec(&text).unwrap();

    let gz = Json::new().gzip().with_header().encode(&text).unwrap();
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&gz[Header::LEN..])
        .read_to_end(&mut plain)
        .unwrap();
    assert_eq!(plain, json);

    let zst = Json::new().zstd().with_header().encode(&text).unwrap();
    assert_eq!(zstd::decode_all(&zst[Header::LEN..]).unwrap(), json);
}

// ---------------------------------------------------------------------------------------------
// The header and decode_any

#[test]
fn header_bytes_are_as_documented() {
    assert_eq!(Header::MAGIC, *b"MQ");
    assert_eq!(Header::VERSION, 1);
    assert_eq!(Header::LEN, 5);
    let cases = [
        (Format::Postcard, Compression::None, [0x4D, 0x51, 1, 1, 0]),
        (Format::Json, Compression::Gzip, [0x4D, 0x51, 1, 2, 1]),
        (Format::MsgPack, Compression::Zstd, [0x4D, 0x51, 1, 3, 2]),
        (
            Format::Custom(128),
            Compression::None,
            [0x4D, 0x51, 1, 128, 0],
        ),
        (
            Format::Custom(255),
            Compression::Zstd,
            [0x4D, 0x51, 1, 255, 2],
        ),
    ];
    for (format, compression, bytes) in cases {
        let header = Header::new(format, compression).unwrap();
        assert_eq!(header.to_bytes(), bytes);
        let mut framed = bytes.to_vec();
        framed.extend_from_slice(b"payload");
        assert_eq!(Header::parse(&framed).unwrap(), (header, &b"payload"[..]));
        assert_eq!(Header::parse(&bytes).unwrap(), (header, &b""[..]));
    }
}

#[test]
fn format_and_compression_ids_round_trip() {
    for id in 0..=u8::MAX {
        match Format::from_id(id) {
            Some(format) => assert_eq!(format.id(), id),
            None => assert!(id == 0 || (4..128).contains(&id), "{id}"),
        }
        match Compression::from_id(id) {
            Some(compression) => assert_eq!(compression.id(), id),
            None => assert!(id >= 3, "{id}"),
        }
    }
    assert_eq!(
        Format::from_id(Format::Custom(3).id()),
        Some(Format::MsgPack)
    );
    assert_eq!(Compression::default(), Compression::None);
}

#[test]
fn decode_any_detects_every_combination() {
    let encodings = every_encoding(&order());
    for e in &encodings {
        if e.framed {
            assert_eq!(
                decode_any::<Order>(&e.bytes).unwrap(),
                order(),
                "{}",
                e.label
            );
        } else {
            // Unframed bytes may start with "MQ" by chance, never with a whole valid header
            // here: none of these encodings does.
            assert_eq!(
                decode_any::<Order>(&e.bytes).unwrap_err(),
                CodecError::BadMagic
            );
        }
    }
    // Every layering is there framed and unframed.
    assert_eq!(
        encodings.iter().filter(|e| e.framed).count() * 2,
        encodings.len()
    );
}

#[test]
fn header_errors_come_in_the_documented_order() {
    let truncated = |got| CodecError::TruncatedHeader { needed: 5, got };
    let cases: &[(&[u8], CodecError)] = &[
        (b"M", truncated(1)),
        (b"MQ", truncated(2)),
        (b"MQ\x01", truncated(3)),
        (b"MQ\x01\x02", truncated(4)),
        (b"", CodecError::BadMagic),
        (b"X", CodecError::BadMagic),
        (b"MX", CodecError::BadMagic),
        (b"QM\x01\x02\x00", CodecError::BadMagic),
        (b"mq\x01\x02\x00", CodecError::BadMagic),
        (br#"{"id":1}"#, CodecError::BadMagic),
        (b"MQ\x00\x02\x00", CodecError::UnsupportedVersion(0)),
        (b"MQ\x02\x02\x00", CodecError::UnsupportedVersion(2)),
        (b"MQ\xff\xff\xff", CodecError::UnsupportedVersion(255)),
        (b"MQ\x01\x00\x00", CodecError::UnknownFormat(0)),
        (b"MQ\x01\x04\x00", CodecError::UnknownFormat(4)),
        (b"MQ\x01\x7f\x00", CodecError::UnknownFormat(127)),
        (b"MQ\x01\x02\x03", CodecError::UnknownCompression(3)),
        (b"MQ\x01\x02\xff", CodecError::UnknownCompression(255)),
    ];
    for (bytes, expected) in cases {
        assert_eq!(Header::parse(bytes).unwrap_err(), *expected, "{bytes:?}");
        assert_eq!(
            decode_any::<Order>(bytes).unwrap_err(),
            *expected,
            "{bytes:?}"
        );
        assert_eq!(
            Framed::new(Unit).decode::<Order>(bytes).unwrap_err(),
            *expected
        );
    }
}

#[test]
fn custom_formats_are_framed_but_not_decoded_by_decode_any() {
    let bytes = Framed::new(Unit).encode(&order()).unwrap();
    assert_eq!(bytes, b"MQ\x01\xc8\x00unit");
    assert_eq!(
        Header::parse(&bytes).unwrap().0.format(),
        Format::Custom(200)
    );
    assert_eq!(
        decode_any::<Order>(&bytes).unwrap_err(),
        CodecError::FormatUnavailable(Format::Custom(200))
    );
    assert_eq!(Framed::new(Unit).decode::<()>(&bytes), Ok(()));
}

#[test]
fn a_custom_format_id_below_128_is_refused() {
    assert_err(
        Header::new(Format::Custom(5), Compression::None),
        |e| matches!(e, CodecError::Encode(msg) if msg.contains("128")),
    );
    let codec = Framed::new(Unit.with_id(5));
    assert_err(codec.encode(&1u8), |e| matches!(e, CodecError::Encode(_)));
    let mut out = b"kept".to_vec();
    assert!(codec.encode_into(&1u8, &mut out).is_err());
    assert_eq!(out, b"kept");
}

#[test]
fn decode_any_names_formats_and_compressions_missing_from_the_build() {
    // A header for every known format, uncompressed, with a payload no decoder accepts.
    let formats = [
        (Format::Postcard, cfg!(feature = "postcard")),
        (Format::Json, cfg!(feature = "json")),
        (Format::MsgPack, cfg!(feature = "msgpack")),
    ];
    for (format, enabled) in formats {
        let mut bytes = Header::new(format, Compression::None)
            .unwrap()
            .to_bytes()
            .to_vec();
        bytes.push(0xc1); // never valid: a MessagePack reserved byte, bad JSON, bad postcard
        let err = decode_any::<Order>(&bytes).unwrap_err();
        if enabled {
            assert!(matches!(err, CodecError::Decode(_)), "{format}: {err}");
        } else {
            assert_eq!(err, CodecError::FormatUnavailable(format));
        }
    }
    // A compressed payload in an enabled format: missing compressions say so.
    let Some(&(format, _)) = formats.iter().find(|(_, enabled)| *enabled) else {
        return;
    };
    let compressions = [
        (Compression::Gzip, cfg!(feature = "gzip")),
        (Compression::Zstd, cfg!(feature = "zstd")),
    ];
    for (compression, enabled) in compressions {
        let mut bytes = Header::new(format, compression)
            .unwrap()
            .to_bytes()
            .to_vec();
        bytes.extend_from_slice(b"not compressed");
        let err = decode_any::<Order>(&bytes).unwrap_err();
        if enabled {
            assert!(
                matches!(err, CodecError::Decompress(_)),
                "{compression}: {err}"
            );
        } else {
            assert_eq!(err, CodecError::CompressionUnavailable(compression));
        }
    }
}

#[cfg(all(feature = "json", feature = "msgpack"))]
#[test]
fn framed_refuses_a_header_for_another_codec() {
    let msgpack = MsgPack::new().with_header().encode(&order()).unwrap();
    assert_eq!(
        Json::new()
            .with_header()
            .decode::<Order>(&msgpack)
            .unwrap_err(),
        CodecError::FormatMismatch {
            expected: Format::Json,
            found: Format::MsgPack
        }
    );
    #[cfg(feature = "gzip")]
    {
        let plain = Json::new().with_header().encode(&order()).unwrap();
        assert_eq!(
            Json::new()
                .gzip()
                .with_header()
                .decode::<Order>(&plain)
                .unwrap_err(),
            CodecError::CompressionMismatch {
                expected: Compression::Gzip,
                found: Compression::None
            }
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Bad payloads

#[test]
fn truncated_messages_are_errors() {
    for e in every_encoding(&order()) {
        for cut in 0..e.bytes.len() {
            let short = &e.bytes[..cut];
            assert!(
                (e.decode)(short).is_err(),
                "{} cut at {cut} of {}",
                e.label,
                e.bytes.len()
            );
            if e.framed {
                assert!(
                    decode_any::<Order>(short).is_err(),
                    "{} cut at {cut}",
                    e.label
                );
            }
        }
    }
}

#[test]
fn trailing_bytes_are_errors() {
    for e in every_encoding(&order()) {
        let mut bytes = e.bytes.clone();
        bytes.extend_from_slice(b"\x00junk");
        let err = (e.decode)(&bytes).unwrap_err();
        let expected_kind = if e.compressed {
            matches!(err, CodecError::Decompress(_))
        } else {
            matches!(err, CodecError::Decode(_))
        };
        assert!(
            expected_kind && err.to_string().contains("trailing"),
            "{}: {err}",
            e.label
        );
        if e.framed {
            assert_eq!(decode_any::<Order>(&bytes).unwrap_err(), err, "{}", e.label);
        }
    }
}

#[test]
fn corrupt_compressed_messages_never_decode_to_another_value() {
    // gzip carries a CRC-32 and zstd (as written here) a content checksum, so a corrupt byte
    // is either caught or falls in a field that does not matter (a gzip timestamp, say).
    for e in every_encoding(&order())
        .into_iter()
        .filter(|e| e.compressed)
    {
        let body = if e.framed { Header::LEN } else { 0 };
        for i in body..e.bytes.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut corrupt = e.bytes.clone();
                corrupt[i] ^= flip;
                if let Ok(value) = (e.decode)(&corrupt) {
                    assert_eq!(value, order(), "{} byte {i} ^ {flip:#x}", e.label);
                }
            }
        }
    }
}

#[cfg(feature = "gzip")]
#[test]
fn gzip_stops_at_the_decompression_limit() {
    #[cfg(feature = "json")]
    {
        let text = "z".repeat(10_000);
        let bytes = Json::new().gzip().encode(&text).unwrap();
        let exact = text.len() + 2; // the JSON quotes
        assert_eq!(
            Json::new()
                .gzip()
                .max_decompressed_len(exact)
                .decode::<String>(&bytes)
                .unwrap(),
            text
        );
        assert_err(
            Json::new()
                .gzip()
                .max_decompressed_len(exact - 1)
                .decode::<String>(&bytes),
            |e| matches!(e, CodecError::Decompress(msg) if msg.contains("limit")),
        );
    }
    // A bomb: 16 MiB of zeros in a few KiB, read with a 1 MiB limit.
    let bomb = raw_gzip(&vec![0u8; 16 << 20]);
    assert!(bomb.len() < 64 << 10, "{}", bomb.len());
    let codec = Unit.gzip().max_decompressed_len(1 << 20);
    assert_err(codec.decode::<()>(&bomb), |e| {
        matches!(e, CodecError::Decompress(_))
    });
}

#[cfg(feature = "zstd")]
#[test]
fn zstd_stops_at_the_decompression_limit() {
    #[cfg(feature = "json")]
    {
        let text = "z".repeat(10_000);
        let bytes = Json::new().zstd().encode(&text).unwrap();
        let exact = text.len() + 2;
        assert_eq!(
            Json::new()
                .zstd()
                .max_decompressed_len(exact)
                .decode::<String>(&bytes)
                .unwrap(),
            text
        );
        assert_err(
            Json::new()
                .zstd()
                .max_decompressed_len(exact - 1)
                .decode::<String>(&bytes),
            |e| matches!(e, CodecError::Decompress(msg) if msg.contains("limit")),
        );
    }
    let bomb = zstd::encode_all(&vec![0u8; 16 << 20][..], 3).unwrap();
    assert!(bomb.len() < 64 << 10, "{}", bomb.len());
    let codec = Unit.zstd().max_decompressed_len(1 << 20);
    assert_err(codec.decode::<()>(&bomb), |e| {
        matches!(e, CodecError::Decompress(_))
    });
}

#[cfg(all(feature = "zstd", feature = "postcard"))]
#[test]
fn zstd_refuses_bytes_without_a_data_frame() {
    // A lone skippable frame decompresses to nothing at all; postcard reads `()` from
    // nothing, so only the frame check stands between it and a value.
    let skippable = [0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0];
    for bytes in [&skippable[..], &[][..], &b"unit"[..]] {
        assert_err(
            Postcard::new().zstd().decode::<()>(bytes),
            |e| matches!(e, CodecError::Decompress(msg) if msg.contains("not a zstd data frame")),
        );
    }
    // The same behind a valid header.
    let mut framed = Postcard::new().zstd().with_header().encode(&()).unwrap();
    framed.truncate(Header::LEN);
    framed.extend_from_slice(&skippable);
    assert_err(decode_any::<()>(&framed), |e| {
        matches!(e, CodecError::Decompress(_))
    });
    assert_eq!(
        Postcard::new()
            .zstd()
            .decode::<()>(&Postcard::new().zstd().encode(&()).unwrap()),
        Ok(())
    );
}

#[test]
fn a_header_inside_another_codec_is_refused() {
    fn refused<C: Codec>(codec: C, label: &str) {
        assert!(codec.writes_header(), "{label}");
        assert_err(
            codec.encode(&1u8),
            |e| matches!(e, CodecError::Encode(msg) if msg.contains("outermost")),
        );
        let mut out = b"kept".to_vec();
        assert!(codec.encode_into(&1u8, &mut out).is_err(), "{label}");
        assert_eq!(out, b"kept", "{label}: nothing written on failure");
        assert_err(codec.decode::<u8>(b"MQ\x01\xc8\x00unit"), |e| {
            matches!(e, CodecError::Decode(_))
        });
    }
    assert!(!Unit.writes_header());
    assert!(Unit.with_header().writes_header());
    assert!(
        Codec::writes_header(&&Unit.with_header()),
        "a reference forwards it"
    );
    refused(Unit.with_header().with_header(), "framed<framed<_>>");
    #[cfg(feature = "gzip")]
    {
        refused(Unit.with_header().gzip(), "gzip<framed<_>>");
        refused(
            Unit.with_header().gzip().with_header(),
            "framed<gzip<framed<_>>>",
        );
        // The right way round still works.
        let codec = Unit.gzip().with_header();
        assert!(codec.writes_header());
        assert_eq!(codec.decode::<()>(&codec.encode(&()).unwrap()), Ok(()));
    }
    #[cfg(feature = "zstd")]
    refused(Unit.with_header().zstd(), "zstd<framed<_>>");
}

#[cfg(all(feature = "gzip", feature = "zstd"))]
#[test]
fn stacked_compression_is_refused() {
    let codec = Unit.zstd().gzip();
    assert_err(
        codec.encode(&1u8),
        |e| matches!(e, CodecError::Encode(msg) if msg.contains("gzip over zstd")),
    );
    assert_err(codec.decode::<u8>(b"anything"), |e| {
        matches!(e, CodecError::Decode(_))
    });
    assert_err(Unit.gzip().zstd().encode(&1u8), |e| {
        matches!(e, CodecError::Encode(_))
    });
}

#[cfg(feature = "msgpack")]
#[test]
fn msgpack_refuses_hostile_nesting() {
    let deep = vec![0x91u8; 100_000]; // fixarray of one, nested 100 000 times
    assert_err(MsgPack::new().decode::<Nested>(&deep), |e| {
        matches!(e, CodecError::Decode(_))
    });
    // Exactly the limit decodes; one more level does not.
    let nested = |depth: usize| {
        let mut bytes = vec![0x91u8; depth - 1];
        bytes.push(0x90);
        bytes
    };
    assert!(MsgPack::new()
        .decode::<Nested>(&nested(MsgPack::MAX_DEPTH))
        .is_ok());
    assert_err(
        MsgPack::new().decode::<Nested>(&nested(MsgPack::MAX_DEPTH + 1)),
        |e| matches!(e, CodecError::Decode(_)),
    );
}

#[cfg(feature = "json")]
#[test]
fn json_refuses_hostile_nesting() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert_err(Json::new().decode::<Nested>(deep.as_bytes()), |e| {
        matches!(e, CodecError::Decode(_))
    });
}

/// A recursive enum (an expression tree): formats that bound arrays and maps may still
/// recurse through enums.
#[cfg(any(feature = "postcard", feature = "json", feature = "msgpack"))]
#[derive(Debug, PartialEq, Serialize, Deserialize)]
enum Expr {
    Lit(u32),
    Neg(Box<Expr>),
}

/// A type whose `Option` recurses: JSON and MessagePack read `Some` without reading a byte,
/// so any value that is not null would recurse for ever without a count of levels.
#[cfg(any(feature = "postcard", feature = "json", feature = "msgpack"))]
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Chain(Option<Box<Chain>>);

/// `Neg` `levels - 1` times around a `Lit`: `levels` levels of nesting.
#[cfg(any(feature = "postcard", feature = "json", feature = "msgpack"))]
fn negated(levels: usize) -> Expr {
    let mut e = Expr::Lit(7);
    for _ in 1..levels {
        e = Expr::Neg(Box::new(e));
    }
    e
}

/// Runs `f` on a thread with a 2 MiB stack, Rust's default for spawned threads (the test
/// harness may give its threads more), so that a decoder that overflows it fails the test
/// with a stack overflow instead of passing by luck.
#[cfg(any(feature = "postcard", feature = "json", feature = "msgpack"))]
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[cfg(feature = "msgpack")]
#[test]
fn msgpack_refuses_hostile_enum_and_option_nesting() {
    on_small_stack(|| {
        // {"Neg": {"Neg": ... {"Lit": 0}}}: maps that rmp-serde reads as enums, which it does
        // not count against its own limit.
        let mut deep = Vec::new();
        for _ in 0..200_000 {
            deep.extend_from_slice(&[0x81, 0xa3, b'N', b'e', b'g']);
        }
        deep.extend_from_slice(&[0x81, 0xa3, b'L', b'i', b't', 0x00]);
        assert_err(
            MsgPack::new().decode::<Expr>(&deep),
            |e| matches!(e, CodecError::Decode(m) if m.contains("deeper than 128")),
        );
        // One byte that is not nil: `Some`, again and again, without reading anything.
        assert_err(MsgPack::new().decode::<Chain>(&[0x01]), |e| {
            matches!(e, CodecError::Decode(_))
        });
        for codec in [MsgPack::new(), MsgPack::compact()] {
            let limit = codec.encode(&negated(MsgPack::MAX_DEPTH)).unwrap();
            assert_eq!(
                codec.decode::<Expr>(&limit).unwrap(),
                negated(MsgPack::MAX_DEPTH)
            );
            let past = codec.encode(&negated(MsgPack::MAX_DEPTH + 1)).unwrap();
            assert_err(codec.decode::<Expr>(&past), |e| {
                matches!(e, CodecError::Decode(_))
            });
        }
    });
}

#[cfg(feature = "json")]
#[test]
fn json_refuses_hostile_enum_and_option_nesting() {
    on_small_stack(|| {
        let deep = format!(
            "{}{{\"Lit\":0}}{}",
            r#"{"Neg":"#.repeat(200_000),
            "}".repeat(200_000)
        );
        assert_err(Json::new().decode::<Expr>(deep.as_bytes()), |e| {
            matches!(e, CodecError::Decode(_))
        });
        assert_err(
            Json::new().decode::<Chain>(b"1"),
            |e| matches!(e, CodecError::Decode(m) if m.contains("deeper than 128")),
        );
        // serde_json's own limit lets 127 objects through, one fewer than memq's count.
        let limit = Json::new().encode(&negated(127)).unwrap();
        assert_eq!(Json::new().decode::<Expr>(&limit).unwrap(), negated(127));
        let past = Json::new().encode(&negated(128)).unwrap();
        assert_err(Json::new().decode::<Expr>(&past), |e| {
            matches!(e, CodecError::Decode(_))
        });
    });
}

#[cfg(feature = "postcard")]
#[test]
fn postcard_refuses_hostile_nesting_directly_and_through_decode_any() {
    on_small_stack(|| {
        // Variant 1 (`Neg`) a million times: postcard has no limit of its own.
        let mut deep = vec![1u8; 1_000_000];
        deep.extend_from_slice(&[0, 0]);
        assert_err(
            Postcard::new().decode::<Expr>(&deep),
            |e| matches!(e, CodecError::Decode(m) if m.contains("deeper than 128")),
        );
        // Any message on a byte topic may name postcard in its header.
        let mut framed = b"MQ\x01\x01\x00".to_vec();
        framed.extend_from_slice(&deep);
        assert_err(decode_any::<Expr>(&framed), |e| {
            matches!(e, CodecError::Decode(_))
        });
        // `Some` (tag 1) a million times.
        assert_err(
            Postcard::new().decode::<Chain>(&vec![1u8; 1_000_000]),
            |e| matches!(e, CodecError::Decode(_)),
        );
        let limit = Postcard::new()
            .encode(&negated(memq::codec::MAX_DEPTH))
            .unwrap();
        assert_eq!(
            Postcard::new().decode::<Expr>(&limit).unwrap(),
            negated(memq::codec::MAX_DEPTH)
        );
        let past = Postcard::new()
            .encode(&negated(memq::codec::MAX_DEPTH + 1))
            .unwrap();
        assert_err(Postcard::new().decode::<Expr>(&past), |e| {
            matches!(e, CodecError::Decode(_))
        });
    });
}

#[test]
fn empty_input_is_an_error_for_every_decoder() {
    for e in every_encoding(&order()) {
        assert!((e.decode)(b"").is_err(), "{}", e.label);
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding errors

#[cfg(feature = "json")]
#[test]
fn json_encoding_errors_leave_the_buffer_as_it_was() {
    // JSON object keys must be strings; the encoder fails after writing `{`.
    let bad = BTreeMap::from([((1u8, 2u8), "v")]);
    assert_err(Json::new().encode(&bad), |e| {
        matches!(e, CodecError::Encode(_))
    });
    for codec in [Json::new(), Json::pretty()] {
        let mut out = b"kept".to_vec();
        assert!(codec.encode_into(&bad, &mut out).is_err());
        assert_eq!(out, b"kept");
        let mut out = b"kept".to_vec();
        assert!(codec.with_header().encode_into(&bad, &mut out).is_err());
        assert_eq!(out, b"kept");
    }
    #[cfg(feature = "gzip")]
    assert_err(Json::new().gzip().encode(&bad), |e| {
        matches!(e, CodecError::Encode(_))
    });
    #[cfg(feature = "zstd")]
    assert_err(Json::new().zstd().encode(&bad), |e| {
        matches!(e, CodecError::Encode(_))
    });
}

#[cfg(feature = "postcard")]
#[test]
fn postcard_refuses_sequences_of_unknown_length() {
    struct UnknownLength;
    impl Serialize for UnknownLength {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_seq((0..3u8).filter(|_| true))
        }
    }
    assert_err(Postcard::new().encode(&UnknownLength), |e| {
        matches!(e, CodecError::Encode(_))
    });
}

// ---------------------------------------------------------------------------------------------
// Errors read well and travel well

#[test]
fn error_messages_are_lowercase_without_a_trailing_period() {
    let errors = [
        CodecError::Encode("x".into()),
        CodecError::Decode("x".into()),
        CodecError::Compress("x".into()),
        CodecError::Decompress("x".into()),
        CodecError::BadMagic,
        CodecError::TruncatedHeader { needed: 5, got: 1 },
        CodecError::UnsupportedVersion(9),
        CodecError::UnknownFormat(9),
        CodecError::UnknownCompression(9),
        CodecError::FormatUnavailable(Format::Json),
        CodecError::CompressionUnavailable(Compression::Zstd),
        CodecError::FormatMismatch {
            expected: Format::Json,
            found: Format::Postcard,
        },
        CodecError::CompressionMismatch {
            expected: Compression::None,
            found: Compression::Gzip,
        },
    ];
    for err in errors {
        let text = err.to_string();
        assert!(text.starts_with(|c: char| c.is_ascii_lowercase()), "{text}");
        assert!(!text.ends_with('.'), "{text}");
    }
    assert_eq!(
        CodecError::TruncatedHeader { needed: 5, got: 1 }.to_string(),
        "truncated header: need 5 bytes, got 1"
    );
    assert_eq!(
        CodecError::FormatMismatch {
            expected: Format::Json,
            found: Format::MsgPack
        }
        .to_string(),
        "header says format msgpack, the codec reads json"
    );
}

#[test]
fn codecs_and_errors_are_send_sync_and_errors() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<CodecError>();
    send_sync::<memq::codec::EncodedPublishError>();
    send_sync::<Header>();
    send_sync::<Framed<Unit>>();
    #[cfg(feature = "std")]
    {
        fn error<E: std::error::Error + Send + Sync + 'static>() {}
        error::<CodecError>();
        error::<memq::codec::EncodedPublishError>();
    }
    #[cfg(feature = "postcard")]
    send_sync::<Postcard>();
    #[cfg(feature = "json")]
    send_sync::<Json>();
    #[cfg(feature = "msgpack")]
    send_sync::<MsgPack>();
    #[cfg(feature = "gzip")]
    send_sync::<memq::codec::Gzip<Unit>>();
    #[cfg(feature = "zstd")]
    send_sync::<memq::codec::Zstd<Unit>>();
}

// ---------------------------------------------------------------------------------------------
// No decoder panics, whatever the bytes

/// Decodes `bytes` as several types with every enabled codec and layering; results are
/// ignored, only panics (and aborts) fail.
fn decode_with_everything(bytes: &[u8]) {
    fn as_everything<C: Codec>(codec: &C, bytes: &[u8]) {
        let _ = codec.decode::<Order>(bytes);
        let _ = codec.decode::<String>(bytes);
        let _ = codec.decode::<Vec<u8>>(bytes);
        let _ = codec.decode::<u64>(bytes);
        let _ = codec.decode::<()>(bytes);
        let _ = codec.decode::<Option<i64>>(bytes);
        let _ = codec.decode::<BTreeMap<String, Vec<f32>>>(bytes);
        let _ = codec.decode::<(char, bool, Side)>(bytes);
    }
    fn layers<C: Codec + Clone>(codec: C, bytes: &[u8]) {
        as_everything(&codec, bytes);
        as_everything(&codec.clone().with_header(), bytes);
        #[cfg(feature = "gzip")]
        {
            as_everything(&codec.clone().gzip(), bytes);
            as_everything(&codec.clone().gzip().with_header(), bytes);
        }
        #[cfg(feature = "zstd")]
        {
            as_everything(&codec.clone().zstd(), bytes);
            as_everything(&codec.clone().zstd().with_header(), bytes);
        }
    }
    #[cfg(feature = "postcard")]
    layers(Postcard::new(), bytes);
    #[cfg(feature = "json")]
    layers(Json::new(), bytes);
    #[cfg(feature = "msgpack")]
    {
        layers(MsgPack::new(), bytes);
        // Self-describing formats can also meet hostile nesting.
        let _ = MsgPack::new().decode::<Nested>(bytes);
    }
    #[cfg(feature = "json")]
    let _ = Json::new().decode::<Nested>(bytes);
    layers(Unit, bytes);

    let _ = Header::parse(bytes);
    let _ = decode_any::<Order>(bytes);
    let _ = decode_any::<String>(bytes);
    let _ = decode_any::<Vec<u8>>(bytes);
    let _ = decode_any::<u64>(bytes);
    let _ = decode_any::<(char, bool, Side)>(bytes);
}

mod never_panics {
    use proptest::prelude::*;
    use proptest::sample::Index;

    use super::*;

    proptest! {
        #[test]
        fn on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            decode_with_everything(&bytes);
        }

        #[test]
        fn on_random_payloads_behind_a_valid_header(
            format in prop_oneof![Just(1u8), Just(2), Just(3), 128u8..=255, any::<u8>()],
            compression in prop_oneof![0u8..3, any::<u8>()],
            payload in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let mut bytes = vec![b'M', b'Q', 1, format, compression];
            bytes.extend_from_slice(&payload);
            decode_with_everything(&bytes);
        }

        #[test]
        fn on_mutated_valid_messages(
            which in any::<Index>(),
            edits in proptest::collection::vec((any::<Index>(), any::<u8>()), 1..6),
            cut in any::<Index>(),
        ) {
            let encodings = valid_messages();
            if encodings.is_empty() {
                return Ok(()); // no format feature: nothing to mutate
            }
            let valid = &encodings[which.index(encodings.len())];
            let mut bytes = valid.clone();
            for (at, byte) in &edits {
                let i = at.index(bytes.len());
                bytes[i] = *byte;
            }
            decode_with_everything(&bytes);
            decode_with_everything(&valid[..cut.index(valid.len() + 1)]);
        }
    }

    /// [`order`] encoded by every enabled codec and layering, computed once.
    fn valid_messages() -> &'static [Vec<u8>] {
        static MESSAGES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
        MESSAGES.get_or_init(|| {
            every_encoding(&order())
                .into_iter()
                .map(|e| e.bytes)
                .collect()
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Typed helpers over byte topics

mod topic_helpers {
    use alloc::sync::Arc;
    use alloc::task::Wake;
    use core::future::Future;
    use core::pin::pin;
    use core::task::{Context, Poll, Waker};
    use std::thread::{self, Thread};

    use bytes::Bytes;
    use memq::codec::{EncodedPublishError, MessageCodecExt, TopicCodecExt};
    use memq::{StartAt, Subscriber, Topic, TopicConfig};

    use super::*;

    /// Runs a future to completion on this thread, parking between polls.
    fn block_on<F: Future>(future: F) -> F::Output {
        struct Unparker(Thread);
        impl Wake for Unparker {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(Unparker(thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        loop {
            if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                return output;
            }
            thread::park();
        }
    }

    fn byte_topic() -> Topic<Bytes> {
        Topic::new(TopicConfig::new(8)).expect("capacity is not zero")
    }

    /// The codec these tests publish with: the first format enabled, framed.
    fn test_codec() -> impl Codec + Debug {
        #[cfg(feature = "postcard")]
        let codec = Postcard::new();
        #[cfg(all(not(feature = "postcard"), feature = "json"))]
        let codec = Json::new();
        #[cfg(all(not(feature = "postcard"), not(feature = "json"), feature = "msgpack"))]
        let codec = MsgPack::new();
        #[cfg(not(any(feature = "postcard", feature = "json", feature = "msgpack")))]
        let codec = Unit;
        codec.with_header()
    }

    const HAS_FORMAT: bool = cfg!(any(
        feature = "postcard",
        feature = "json",
        feature = "msgpack"
    ));

    /// Checks that `sub` next reads `count` messages that decode to `order()`.
    fn assert_delivered(sub: &mut Subscriber<Bytes>, codec: &impl Codec, count: u64) {
        for offset in 0..count {
            let msg = sub.try_recv().unwrap();
            assert_eq!(msg.offset(), offset);
            assert_eq!(msg.value()[..], codec.encode(&order()).unwrap()[..]);
            if HAS_FORMAT {
                assert_eq!(msg.decode::<Order, _>(codec).unwrap(), order());
                assert_eq!(msg.decode_any::<Order>().unwrap(), order());
            }
        }
        assert!(sub.try_recv().is_err(), "more was published");
    }

    #[test]
    fn publish_encoded_and_try_publish_encoded_deliver_what_decode_reads() {
        let topic = byte_topic();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        let codec = test_codec();

        let first = block_on(topic.publish_encoded(&codec, &order())).unwrap();
        let second = topic.try_publish_encoded(&codec, &order()).unwrap();
        assert_eq!([first.offset, second.offset], [0, 1]);
        assert_delivered(&mut sub, &codec, 2);
    }

    #[cfg(feature = "std")]
    #[test]
    fn publish_encoded_blocking_delivers_what_decode_reads() {
        let topic = byte_topic();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        let codec = test_codec();

        let publisher = {
            let topic = topic.clone();
            std::thread::spawn(move || topic.publish_encoded_blocking(&test_codec(), &order()))
        };
        assert_eq!(publisher.join().unwrap().unwrap().offset, 0);
        assert_delivered(&mut sub, &codec, 1);
    }

    #[test]
    fn an_encoding_error_publishes_nothing() {
        let topic = byte_topic();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        let failing = Failing.with_header();

        let err = block_on(topic.publish_encoded(&failing, &1u8)).unwrap_err();
        assert!(
            matches!(err, EncodedPublishError::Codec(CodecError::Encode(_))),
            "{err}"
        );
        assert!(err.into_inner().is_none());
        let err = topic.try_publish_encoded(&failing, &1u8).unwrap_err();
        assert!(matches!(err, EncodedPublishError::Codec(_)), "{err}");
        #[cfg(feature = "std")]
        {
            let err = topic.publish_encoded_blocking(&failing, &1u8).unwrap_err();
            assert!(matches!(err, EncodedPublishError::Codec(_)), "{err}");
        }

        assert!(sub.try_recv().is_err(), "something was published");
        // The topic still works.
        topic.try_publish_encoded(&test_codec(), &order()).unwrap();
        assert!(sub.try_recv().is_ok());
    }

    #[test]
    fn a_closed_topic_hands_the_encoded_bytes_back() {
        let topic = byte_topic();
        topic.close();
        let codec = test_codec();
        let expected = Bytes::from(codec.encode(&order()).unwrap());

        let err = topic.try_publish_encoded(&codec, &order()).unwrap_err();
        assert!(matches!(err, EncodedPublishError::Publish(_)), "{err}");
        assert!(
            err.to_string()
                .starts_with("encoded message not published: "),
            "{err}"
        );
        #[cfg(feature = "std")]
        assert!(std::error::Error::source(&err).is_some());
        assert_eq!(err.into_inner(), Some(expected.clone()));

        let err = block_on(topic.publish_encoded(&codec, &order())).unwrap_err();
        assert_eq!(err.into_inner(), Some(expected));
    }

    #[test]
    fn decoding_a_message_reports_codec_errors() {
        let topic = byte_topic();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        topic
            .try_publish(Bytes::from_static(b"MQ\x01\x02"))
            .unwrap();
        let msg = sub.try_recv().unwrap();
        assert_eq!(
            msg.decode_any::<Order>().unwrap_err(),
            CodecError::TruncatedHeader { needed: 5, got: 4 }
        );
        assert_eq!(
            msg.decode::<Order, _>(&Unit.with_header()).unwrap_err(),
            CodecError::TruncatedHeader { needed: 5, got: 4 }
        );
    }

    #[test]
    fn the_publish_future_is_send_and_borrows_only_the_topic() {
        fn send<T: Send>(value: T) -> T {
            value
        }
        let topic = byte_topic();
        let future = {
            let value = order();
            let codec = test_codec();
            // `value` and `codec` are dropped before the future is polled.
            send(topic.publish_encoded(&codec, &value))
        };
        assert!(format!("{future:?}").contains("publishing"));
        assert_eq!(block_on(future).unwrap().offset, 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Test codecs that need no feature

/// A codec with a custom format id that writes `unit` and reads only `()`.
#[derive(Debug, Clone, Copy)]
struct Unit;

/// [`Unit`] with another format id.
#[derive(Debug, Clone, Copy)]
struct UnitWithId(u8);

impl Unit {
    fn with_id(self, id: u8) -> UnitWithId {
        UnitWithId(id)
    }
}

fn unit_decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    use serde::de::IntoDeserializer as _;

    if bytes != b"unit" {
        return Err(CodecError::Decode("expected `unit`".into()));
    }
    let unit: serde::de::value::UnitDeserializer<serde::de::value::Error> = ().into_deserializer();
    T::deserialize(unit).map_err(|e| CodecError::Decode(e.to_string()))
}

impl Codec for Unit {
    fn format(&self) -> Format {
        Format::Custom(200)
    }
    fn encode<T: Serialize + ?Sized>(&self, _: &T) -> Result<Vec<u8>, CodecError> {
        Ok(b"unit".to_vec())
    }
    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError> {
        unit_decode(bytes)
    }
}

impl Codec for UnitWithId {
    fn format(&self) -> Format {
        Format::Custom(self.0)
    }
    fn encode<T: Serialize + ?Sized>(&self, _: &T) -> Result<Vec<u8>, CodecError> {
        Ok(b"unit".to_vec())
    }
    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError> {
        unit_decode(bytes)
    }
}

/// A codec whose every encode fails.
#[derive(Debug, Clone, Copy)]
struct Failing;

impl Codec for Failing {
    fn format(&self) -> Format {
        Format::Custom(201)
    }
    fn encode<T: Serialize + ?Sized>(&self, _: &T) -> Result<Vec<u8>, CodecError> {
        Err(CodecError::Encode("failing codec".into()))
    }
    fn decode<T: DeserializeOwned>(&self, _: &[u8]) -> Result<T, CodecError> {
        Err(CodecError::Decode("failing codec".into()))
    }
}

/// Gzip-compresses `plain` with flate2 directly, as a foreign writer would.
#[cfg(feature = "gzip")]
fn raw_gzip(plain: &[u8]) -> Vec<u8> {
    use std::io::Write as _;

    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(plain).unwrap();
    encoder.finish().unwrap()
}
