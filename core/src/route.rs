//! Choosing a partition for a message: round-robin, key hash, explicit, or a user router.
//!
//! The key hash is fixed forever so that a key lands on the same partition in every
//! process, on every platform and in every language binding: 64-bit FNV-1a over the key's
//! bytes, reduced modulo the partition count.
//!
//! ```text
//! h = 0xcbf29ce484222325
//! for each byte b of the key: h = (h XOR b) * 0x100000001b3   (wrapping, 64-bit)
//! partition = h mod partitions
//! ```

use alloc::sync::Arc;
use core::fmt;

/// The FNV-1a 64-bit hash memq routes keys with. Stable across versions and platforms.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// assert_eq!(memq::key_hash(b""), 0xcbf2_9ce4_8422_2325);
/// assert_eq!(memq::key_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
/// ```
pub const fn key_hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < key.len() {
        h ^= key[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}

/// The partition `key` is routed to on a topic with `partitions` partitions (at least 1).
///
/// Takes the key as [`Topic::publish_keyed`](crate::Topic::publish_keyed) does, so that
/// whatever routes a message also tells where it went: `&str`, `String`, `&[u8]`,
/// `Vec<u8>`, byte arrays, `bytes::Bytes`. A `const` context can use
/// `key_hash(key) % partitions` (what this computes).
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::{key_partition, Topic, TopicConfig};
///
/// let topic = Topic::new(TopicConfig::new(16).partitions(4))?;
/// let receipt = topic.try_publish_keyed("user-42", "signed in")?;
/// assert_eq!(receipt.partition, key_partition("user-42", 4));
/// assert_eq!(key_partition(b"user-42", 4), key_partition(String::from("user-42"), 4));
/// assert_eq!(key_partition(b"anything", 1), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn key_partition(key: impl AsRef<[u8]>, partitions: u32) -> u32 {
    if partitions == 0 {
        return 0;
    }
    (key_hash(key.as_ref()) % partitions as u64) as u32
}

/// A user-supplied router: given a key and the partition count, the partition to use.
/// A result out of range makes the publish fail with `InvalidPartition`, not panic.
#[derive(Clone)]
pub struct Router(pub(crate) Arc<RouteFn>);

/// The function behind a [`Router`].
type RouteFn = dyn Fn(&[u8], u32) -> u32 + Send + Sync;

impl Router {
    /// Wraps a routing function.
    pub fn new(f: impl Fn(&[u8], u32) -> u32 + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Router(..)")
    }
}
