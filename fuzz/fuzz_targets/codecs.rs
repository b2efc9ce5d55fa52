//! Each codec's `decode` on arbitrary bytes, the first byte choosing the codec: an error or
//! a value, never a panic; a value must round-trip through the same codec.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memq::codec::{Codec, CodecExt, Gzip, Header, Json, MsgPack, Postcard, Zstd};

#[path = "shared.rs"]
mod shared;
use shared::Order;

/// Small enough that a decompression bomb costs microseconds, not a 256 MiB buffer.
const LIMIT: usize = 1 << 20;

fn check<C: Codec>(codec: &C, bytes: &[u8]) {
    if let Ok(order) = codec.decode::<Order>(bytes) {
        let again = codec.encode(&order).expect("a decoded value encodes again");
        assert_eq!(codec.decode::<Order>(&again).expect("round trip"), order);
    }
    let _ = codec.decode::<String>(bytes);
    let _ = codec.decode::<Vec<(u16, bool)>>(bytes);
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    match which % 10 {
        0 => check(&Json::new(), bytes),
        1 => check(&MsgPack::new(), bytes),
        2 => check(&MsgPack::compact(), bytes),
        3 => check(&Postcard::new(), bytes),
        4 => check(&Gzip::new(Json::new()).max_decompressed_len(LIMIT), bytes),
        5 => check(
            &Zstd::new(MsgPack::new()).max_decompressed_len(LIMIT),
            bytes,
        ),
        6 => check(&Json::new().with_header(), bytes),
        7 => check(
            &Zstd::new(Postcard::new())
                .max_decompressed_len(LIMIT)
                .with_header(),
            bytes,
        ),
        8 => check(
            &Gzip::new(MsgPack::compact())
                .max_decompressed_len(LIMIT)
                .with_header(),
            bytes,
        ),
        _ => {
            if let Ok((header, rest)) = Header::parse(bytes) {
                assert_eq!(Header::parse(&header.to_bytes()).unwrap().0, header);
                assert_eq!(bytes.len(), Header::LEN + rest.len());
            }
        }
    }
});
