//! The value type every target decodes into: one of each shape serde formats disagree on
//! (strings, bytes, options, sequences, maps, enum variants of every kind, nesting).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Kind {
    Unit,
    Newtype(u32),
    Tuple(i8, bool),
    Struct { depth: u16, next: Option<Box<Kind>> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    pub id: u64,
    pub item: String,
    pub tags: Vec<String>,
    pub qty: Option<i32>,
    pub kind: Kind,
    pub attrs: BTreeMap<String, u8>,
    pub blob: Vec<u8>,
}
