//! Serialization and compression over byte topics: typed values go in as JSON or
//! MessagePack, optionally gzip- or zstd-compressed, behind a magic header that lets any
//! reader tell the format and decode without knowing the writer's codec. Bad bytes are an
//! error, not a panic. Exits non-zero if anything decodes wrong.
//!
//! Run it with `cargo run --example serialization --features codecs`.

use bytes::Bytes;
use memq::codec::{
    Codec, CodecExt, Compression, Format, Header, Json, MessageCodecExt, MsgPack, TopicCodecExt,
};
use memq::{StartAt, Topic};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Reading {
    sensor: String,
    celsius: f64,
    samples: Vec<u32>,
}

/// Encodes a reading with one writer's codec.
type Encoder<'a> = dyn Fn(&Reading) -> Result<Vec<u8>, memq::codec::CodecError> + 'a;

fn reading(n: u32) -> Reading {
    Reading {
        sensor: format!("sensor-{}", n % 3),
        celsius: 20.0 + f64::from(n) / 4.0,
        samples: (0..64).map(|i| (i * n) % 17).collect(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let topic = Topic::<Bytes>::with_capacity(64)?;
    let mut reader = topic.subscribe(StartAt::Earliest)?;

    // Four writers, each with its own codec, all framed with the magic header.
    let json = Json::new().with_header();
    let msgpack = MsgPack::new().with_header();
    let json_gzip = Json::new().gzip().with_header();
    let msgpack_zstd = MsgPack::new().zstd().with_header();
    let codecs: [(&str, &Encoder<'_>); 4] = [
        ("json", &|r| json.encode(r)),
        ("msgpack", &|r| msgpack.encode(r)),
        ("json+gzip", &|r| json_gzip.encode(r)),
        ("msgpack+zstd", &|r| msgpack_zstd.encode(r)),
    ];
    for (n, (name, encode)) in codecs.iter().enumerate() {
        let bytes = encode(&reading(n as u32))?;
        println!("{name:>13}: {} bytes", bytes.len());
        topic.publish_blocking(Bytes::from(bytes))?;
    }
    // The typed helper encodes and publishes in one call.
    topic.publish_encoded_blocking(&msgpack_zstd, &reading(4))?;

    // The reader knows nothing of the writers: the header says how to decode.
    let want = [
        (Format::Json, Compression::None),
        (Format::MsgPack, Compression::None),
        (Format::Json, Compression::Gzip),
        (Format::MsgPack, Compression::Zstd),
        (Format::MsgPack, Compression::Zstd),
    ];
    for (n, (format, compression)) in want.into_iter().enumerate() {
        let msg = reader.recv_blocking()?;
        let header = Header::parse(msg.value())?.0;
        let value: Reading = msg.decode_any()?;
        println!(
            "offset {}: {:?} + {:?} -> {} at {} °C",
            msg.offset(),
            header.format(),
            header.compression(),
            value.sensor,
            value.celsius
        );
        if (header.format(), header.compression()) != (format, compression)
            || value != reading(n as u32)
        {
            return Err(format!("message {n} decoded wrong").into());
        }
        // A reader that does know the codec decodes with it directly.
        if n == 4 && msg.decode::<Reading, _>(&msgpack_zstd)? != reading(4) {
            return Err("typed decode failed".into());
        }
    }

    // Bad bytes are an error.
    topic.publish_blocking(Bytes::from_static(b"MQ\x01\x02\x02 not zstd at all"))?;
    let bad = reader.recv_blocking()?;
    match bad.decode_any::<Reading>() {
        Err(e) => println!("corrupt message rejected: {e}"),
        Ok(v) => return Err(format!("corrupt bytes decoded as {v:?}").into()),
    }
    println!("ok: every format and compression round-tripped; bad bytes were refused");
    Ok(())
}
