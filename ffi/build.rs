//! Gives libmemq.so its SONAME on Linux (`libmemq.so.MAJOR`), so that a program linked
//! with `-lmemq` records `libmemq.so.0` and keeps working when the library is upgraded
//! within the same major version (scripts/install-c.sh installs the versioned file and
//! the `libmemq.so.0` and `libmemq.so` links to it).

use std::env;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let major = env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    if os == "linux" || os == "android" || os.ends_with("bsd") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmemq.so.{major}");
    }
}
