//! `memq::codec::decode_any` on arbitrary bytes: it must return an error or a value, never
//! panic, hang or allocate without bound; and a value it returns must survive a round trip
//! through the codec its header named.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memq::codec::{
    decode_any, Codec, CodecExt, Compression, Format, Gzip, Header, Json, MsgPack, Postcard, Zstd,
};

#[path = "shared.rs"]
mod shared;
use shared::Order;

/// Encodes `value` with the codec a header names, framed so that `decode_any` reads it.
fn encode_as(header: Header, value: &Order) -> Vec<u8> {
    fn framed<C: Codec>(codec: C, compression: Compression, value: &Order) -> Vec<u8> {
        match compression {
            Compression::None => codec.with_header().encode(value),
            Compression::Gzip => Gzip::new(codec).with_header().encode(value),
            Compression::Zstd => Zstd::new(codec).with_header().encode(value),
            other => panic!("decode_any accepted compression {other:?}"),
        }
        .expect("a decoded value encodes again")
    }
    match header.format() {
        Format::Json => framed(Json::new(), header.compression(), value),
        Format::MsgPack => framed(MsgPack::new(), header.compression(), value),
        Format::Postcard => framed(Postcard::new(), header.compression(), value),
        other => panic!("decode_any accepted format {other:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(order) = decode_any::<Order>(data) {
        let header = Header::parse(data)
            .expect("decode_any parsed this header")
            .0;
        let again = encode_as(header, &order);
        assert_eq!(decode_any::<Order>(&again).expect("round trip"), order);
    }
    let _ = decode_any::<String>(data);
    let _ = decode_any::<Vec<u32>>(data);
    let _ = decode_any::<(bool, Option<u8>, char)>(data);
});
