//! Placeholder, written in a later commit.
fn main() {}
