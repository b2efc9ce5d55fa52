//! A serde adapter that bounds how deeply a decoder may recurse.
//!
//! Deserializers recurse once per level of nesting in the data, so bytes that nest deeply
//! enough (a recursive enum, a tree, an `Option<Box<Self>>` chain) overflow the stack, and a
//! stack overflow aborts the process. Some formats bound arrays and maps themselves but not
//! enums, and some formats let an `Option` recurse without reading a byte. The adapter
//! counts every level a decoder can enter (sequence, map, enum, `Some`) and turns the first
//! one past the limit into an error, whatever the format.

use alloc::format;
use alloc::string::ToString;
use core::cell::Cell;
use core::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, Visitor};
use serde::Deserialize;

use super::CodecError;

/// How deeply memq's codecs let data nest: sequences (and structs and tuples, which formats
/// read as sequences or maps), maps, enum variants and `Some` each count one level, a plain
/// value none (`[[1]]` is 2 levels, and `Some(vec![1])` too; a newtype struct adds nothing). Past it, decoding fails with [`CodecError::Decode`] instead of
/// overflowing the stack; 128 levels fit well within a 2 MiB thread stack.
pub const MAX_DEPTH: usize = 128;

/// Deserializes a `T` from `deserializer`, refusing data that nests more than `max_depth`
/// levels (counted as for [`MAX_DEPTH`]), so that hostile bytes get an error rather than a
/// stack overflow. For [`Codec`](super::Codec) implementations over a serde format: every
/// codec memq ships decodes through it with [`MAX_DEPTH`]; a codec of your own may use
/// a larger limit for deeper data, on a thread whose stack holds it.
///
/// # Errors
///
/// [`CodecError::Decode`] saying how deep the data went if it went past `max_depth`;
/// otherwise [`CodecError::Decode`] with the deserializer's own message.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::codec::{deserialize_within_depth, CodecError};
/// use serde::de::value::{Error, SeqDeserializer};
///
/// // [[1]]: two levels.
/// let inner = SeqDeserializer::<_, Error>::new(core::iter::once(1u8));
/// let outer = SeqDeserializer::<_, Error>::new(core::iter::once(inner));
/// let nested: Vec<Vec<u8>> = deserialize_within_depth(outer, 2)?;
/// assert_eq!(nested, [[1]]);
///
/// let inner = SeqDeserializer::<_, Error>::new(core::iter::once(1u8));
/// let outer = SeqDeserializer::<_, Error>::new(core::iter::once(inner));
/// let refused = deserialize_within_depth::<Vec<Vec<u8>>, _>(outer, 1);
/// assert!(matches!(refused, Err(CodecError::Decode(msg)) if msg.contains("deeper than 1")));
/// # Ok::<(), CodecError>(())
/// ```
pub fn deserialize_within_depth<'de, T, D>(
    deserializer: D,
    max_depth: usize,
) -> Result<T, CodecError>
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    let too_deep = Cell::new(false);
    let limited = Limited {
        inner: deserializer,
        depth: Depth {
            left: max_depth,
            max: max_depth,
            too_deep: &too_deep,
        },
    };
    T::deserialize(limited).map_err(|e| {
        // Formats without a message of their own for custom errors (postcard) still say
        // what happened.
        if too_deep.get() {
            CodecError::Decode(format!("data nested deeper than {max_depth} levels"))
        } else {
            CodecError::Decode(e.to_string())
        }
    })
}

/// What is left of the limit at one level, and where to record that it ran out.
#[derive(Clone, Copy)]
struct Depth<'a> {
    left: usize,
    max: usize,
    too_deep: &'a Cell<bool>,
}

impl<'a> Depth<'a> {
    /// The depth one level further in, or the error that ends decoding.
    fn enter<E: de::Error>(self) -> Result<Depth<'a>, E> {
        match self.left.checked_sub(1) {
            Some(left) => Ok(Depth { left, ..self }),
            None => {
                self.too_deep.set(true);
                Err(E::custom(format_args!(
                    "data nested deeper than {} levels",
                    self.max
                )))
            }
        }
    }
}

/// A serde deserializer, visitor, seed or access (whichever `X` is) that counts levels:
/// deserializers hand out counting visitors, visitors count the levels they enter, and
/// seeds and accesses pass the count on to what they deserialize.
struct Limited<'a, X> {
    inner: X,
    depth: Depth<'a>,
}

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
                self.inner.$method($($arg,)* Limited { inner: visitor, depth: self.depth })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Limited<'_, D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_option();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
        deserialize_ignored_any();
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty);)*) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
                self.inner.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Limited<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit! {
        visit_bool(bool);
        visit_i8(i8);
        visit_i16(i16);
        visit_i32(i32);
        visit_i64(i64);
        visit_i128(i128);
        visit_u8(u8);
        visit_u16(u16);
        visit_u32(u32);
        visit_u64(u64);
        visit_u128(u128);
        visit_f32(f32);
        visit_f64(f64);
        visit_char(char);
        visit_str(&str);
        visit_borrowed_str(&'de str);
        visit_string(alloc::string::String);
        visit_bytes(&[u8]);
        visit_borrowed_bytes(&'de [u8]);
        visit_byte_buf(alloc::vec::Vec<u8>);
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        let depth = self.depth.enter()?;
        self.inner.visit_some(Limited { inner: d, depth })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        // Not a level: a newtype is only a name around its content, and content that recurses
        // passes through a counted level (a finite value of a recursive type needs one).
        let depth = self.depth;
        self.inner.visit_newtype_struct(Limited { inner: d, depth })
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        let depth = self.depth.enter()?;
        self.inner.visit_seq(Limited { inner: seq, depth })
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        let depth = self.depth.enter()?;
        self.inner.visit_map(Limited { inner: map, depth })
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        let depth = self.depth.enter()?;
        self.inner.visit_enum(Limited { inner: data, depth })
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Limited<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Limited {
            inner: d,
            depth: self.depth,
        })
    }
}

impl<'de, A: de::SeqAccess<'de>> de::SeqAccess<'de> for Limited<'_, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        let depth = self.depth;
        self.inner.next_element_seed(Limited { inner: seed, depth })
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

impl<'de, A: de::MapAccess<'de>> de::MapAccess<'de> for Limited<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let depth = self.depth;
        self.inner.next_key_seed(Limited { inner: seed, depth })
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        let depth = self.depth;
        self.inner.next_value_seed(Limited { inner: seed, depth })
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

impl<'a, 'de, A: de::EnumAccess<'de>> de::EnumAccess<'de> for Limited<'a, A> {
    type Error = A::Error;
    type Variant = Limited<'a, A::Variant>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), A::Error> {
        let depth = self.depth;
        let (value, variant) = self.inner.variant_seed(Limited { inner: seed, depth })?;
        Ok((
            value,
            Limited {
                inner: variant,
                depth,
            },
        ))
    }
}

impl<'de, A: de::VariantAccess<'de>> de::VariantAccess<'de> for Limited<'_, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.inner.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        let depth = self.depth;
        self.inner
            .newtype_variant_seed(Limited { inner: seed, depth })
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        let depth = self.depth;
        self.inner.tuple_variant(
            len,
            Limited {
                inner: visitor,
                depth,
            },
        )
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        let depth = self.depth;
        self.inner.struct_variant(
            fields,
            Limited {
                inner: visitor,
                depth,
            },
        )
    }
}
